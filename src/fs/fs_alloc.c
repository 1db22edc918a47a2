/*
 * fs_alloc.c - the DRAM allocators of keratin-fs: one bitmap each for inode slots, log
 * pages and data pages.
 *
 * Nothing here is persistent. The mount scan rebuilds every bitmap from what the committed
 * logs reference (a page is in use exactly when a committed log or a file's page index
 * names it), so the allocators can never disagree with the media after a crash. Frees are
 * done by the operation code only after its commit is durable, so a page is never reused
 * while a committed state still needs it. Allocation is next-fit from a rotating hint,
 * which spreads wear and keeps runs for copy-on-write writes contiguous.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"

int krfs_bm_init(struct krfs_bitmap *bm, uint64_t n)
{
	bm->bits = kr_calloc((n + 63) / 64 + 1, sizeof(uint64_t));
	if (!bm->bits)
		return -ENOMEM;
	bm->n = n;
	bm->nfree = n;
	bm->hint = 0;
	return 0;
}

void krfs_bm_fini(struct krfs_bitmap *bm)
{
	free(bm->bits);
	memset(bm, 0, sizeof(*bm));
}

bool krfs_bm_test(const struct krfs_bitmap *bm, uint64_t i)
{
	return (bm->bits[i / 64] >> (i % 64)) & 1;
}

void krfs_bm_set(struct krfs_bitmap *bm, uint64_t i)
{
	if (!krfs_bm_test(bm, i)) {
		bm->bits[i / 64] |= 1ull << (i % 64);
		bm->nfree--;
	}
}

void krfs_bm_clear(struct krfs_bitmap *bm, uint64_t i)
{
	if (krfs_bm_test(bm, i)) {
		bm->bits[i / 64] &= ~(1ull << (i % 64));
		bm->nfree++;
	}
}

/* The first free index at or after `from` (wrapping once), or n if none. */
static uint64_t find_free(const struct krfs_bitmap *bm, uint64_t from)
{
	uint64_t words = (bm->n + 63) / 64;
	for (uint64_t k = 0; k <= words; k++) {
		uint64_t w = (from / 64 + k) % words;
		uint64_t free_bits = ~bm->bits[w];
		if (k == 0)
			free_bits &= ~0ull << (from % 64);
		if (free_bits) {
			uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(free_bits);
			if (i < bm->n)
				return i;
		}
	}
	return bm->n;
}

int64_t krfs_bm_alloc(struct krfs_bitmap *bm)
{
	uint64_t start;
	return krfs_bm_alloc_run(bm, 1, &start) ? (int64_t)start : -1;
}

uint64_t krfs_bm_alloc_run(struct krfs_bitmap *bm, uint64_t max, uint64_t *start)
{
	if (bm->nfree == 0 || max == 0)
		return 0;
	uint64_t i = find_free(bm, bm->hint < bm->n ? bm->hint : 0);
	if (i >= bm->n)
		return 0;
	uint64_t n = 0;
	while (n < max && i + n < bm->n && !krfs_bm_test(bm, i + n)) {
		krfs_bm_set(bm, i + n);
		n++;
	}
	*start = i;
	bm->hint = i + n;
	return n;
}
