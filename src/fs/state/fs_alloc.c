/*
 * fs_alloc.c - the DRAM allocators of keratin-fs: one bitmap each for inode slots, log
 * pages and data pages, each split into shards that threads allocate from at once.
 *
 * Nothing here is persistent. The mount scan rebuilds every bitmap from what the committed
 * logs reference (a page is in use exactly when a committed log or a file's page index
 * names it), so the allocators can never disagree with the media after a crash. Frees are
 * done by the operation code only after its commit is durable, so a page is never reused
 * while a committed state still needs it. Allocation is next-fit from a rotating hint,
 * which spreads wear and keeps runs for copy-on-write writes contiguous.
 *
 * Shards (NOVA-Fortis keeps a free list per CPU; here it is per shard, and threads, not
 * CPUs, pick one): the index space is cut into contiguous shards, each a whole number of
 * the bitmap's 64-bit words, with its own lock, free count and hint. A thread's home shard
 * is its number (given round-robin at its first allocation) modulo the shard count; it
 * allocates there, so the pages of a file one thread writes stay close and threads writing
 * at once take different locks and words. A shard with no free index sends the thread on to
 * the next ones in order; only when every shard is empty is there no space. A free goes to
 * the shard owning the index.
 *
 * Invariants
 *   1. A shard's words of bits, its nfree and its hint change only under its lock, or under
 *      the file system's exclusive lock (no shared holder runs, fs_enter.c rule 4), as the
 *      mount scan and the exclusive operations do with krfs_bm_set and krfs_bm_clear.
 *   2. A shard's nfree is the number of clear bits in its range, so the allocator's free
 *      count, their sum (krfs_bm_nfree), is exact whenever no shared holder runs.
 *   3. The shard boundaries depend on n and the shard count only: two bitmaps made with the
 *      same two (data pages and the pages snapshots hold) have the same shards, and a shard's
 *      lock in one guards the same words in the other.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"

int krfs_bm_init(struct krfs_bitmap *bm, uint64_t n, unsigned nshards)
{
	uint64_t words = (n + 63) / 64;
	if (nshards > words)
		nshards = (unsigned)words;
	if (nshards > KR_FS_ALLOC_SHARDS_MAX)
		nshards = KR_FS_ALLOC_SHARDS_MAX;
	if (nshards == 0)
		nshards = 1;
	uint64_t per = words ? (words + nshards - 1) / nshards * 64 : 64;
	if (words)
		nshards = (unsigned)((words * 64 + per - 1) / per); /* none left empty by the rounding */
	memset(bm, 0, sizeof(*bm));
	bm->bits = kr_calloc(words + 1, sizeof(uint64_t));
	bm->shards = aligned_alloc(sizeof(struct krfs_shard), nshards * sizeof(struct krfs_shard));
	if (!bm->bits || !bm->shards) {
		free(bm->bits);
		free(bm->shards);
		memset(bm, 0, sizeof(*bm));
		return -ENOMEM;
	}
	bm->n = n;
	bm->nshards = nshards;
	bm->per = per;
	for (unsigned k = 0; k < nshards; k++) {
		struct krfs_shard *s = &bm->shards[k];
		memset(s, 0, sizeof(*s));
		pthread_mutex_init(&s->lock, NULL);
		s->lo = k * bm->per < n ? k * bm->per : n;
		s->hi = (k + 1) * bm->per < n && k + 1 < nshards ? (k + 1) * bm->per : n;
		s->nfree = s->hi - s->lo;
		s->hint = s->lo;
	}
	return 0;
}

void krfs_bm_fini(struct krfs_bitmap *bm)
{
	for (unsigned k = 0; k < bm->nshards; k++)
		pthread_mutex_destroy(&bm->shards[k].lock);
	free(bm->bits);
	free(bm->shards);
	memset(bm, 0, sizeof(*bm));
}

bool krfs_bm_same_shards(const struct krfs_bitmap *a, const struct krfs_bitmap *b)
{
	if (a->n != b->n || a->nshards != b->nshards || a->per != b->per)
		return false;
	for (unsigned k = 0; k < a->nshards; k++)
		if (a->shards[k].lo != b->shards[k].lo || a->shards[k].hi != b->shards[k].hi)
			return false;
	return true;
}

uint64_t krfs_bm_nfree(const struct krfs_bitmap *bm)
{
	uint64_t n = 0;
	for (unsigned k = 0; k < bm->nshards; k++)
		n += bm->shards[k].nfree;
	return n;
}

struct krfs_shard *krfs_bm_shard(const struct krfs_bitmap *bm, uint64_t i)
{
	uint64_t k = i / bm->per;
	return &bm->shards[k < bm->nshards ? k : bm->nshards - 1];
}

struct krfs_shard *krfs_bm_lock(const struct krfs_bitmap *bm, uint64_t i)
{
	struct krfs_shard *s = krfs_bm_shard(bm, i);
	pthread_mutex_lock(&s->lock);
	return s;
}

void krfs_bm_unlock(struct krfs_shard *s) { pthread_mutex_unlock(&s->lock); }

bool krfs_bm_test(const struct krfs_bitmap *bm, uint64_t i)
{
	return (bm->bits[i / 64] >> (i % 64)) & 1;
}

void krfs_bm_set(struct krfs_bitmap *bm, uint64_t i)
{
	if (!krfs_bm_test(bm, i)) {
		bm->bits[i / 64] |= 1ull << (i % 64);
		krfs_bm_shard(bm, i)->nfree--;
	}
}

void krfs_bm_clear(struct krfs_bitmap *bm, uint64_t i)
{
	if (krfs_bm_test(bm, i)) {
		bm->bits[i / 64] &= ~(1ull << (i % 64));
		krfs_bm_shard(bm, i)->nfree++;
	}
}

void krfs_bm_put(struct krfs_bitmap *bm, uint64_t start, uint64_t n)
{
	for (uint64_t i = start; i < start + n;) {
		struct krfs_shard *s = krfs_bm_lock(bm, i);
		for (; i < start + n && i < s->hi; i++)
			krfs_bm_clear(bm, i);
		krfs_bm_unlock(s);
	}
}

/* The first free index of shard s at or after `from` (wrapping once inside the shard), or
 * s->hi if none. */
static uint64_t find_free(const struct krfs_bitmap *bm, const struct krfs_shard *s, uint64_t from)
{
	uint64_t w0 = s->lo / 64, words = (s->hi + 63) / 64 - w0;
	for (uint64_t k = 0; k <= words; k++) {
		uint64_t w = w0 + (from / 64 - w0 + k) % words;
		uint64_t free_bits = ~bm->bits[w];
		if (k == 0)
			free_bits &= ~0ull << (from % 64);
		if (free_bits) {
			uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(free_bits);
			if (i < s->hi)
				return i;
		}
	}
	return s->hi;
}

/* A run of 1..max free indexes of shard s (its lock held), marked used: its length. */
static uint64_t shard_run(struct krfs_bitmap *bm, struct krfs_shard *s, uint64_t max, uint64_t *start)
{
	if (s->nfree == 0)
		return 0;
	uint64_t i = find_free(bm, s, s->hint < s->hi ? s->hint : s->lo);
	if (i >= s->hi)
		return 0;
	uint64_t n = 0;
	while (n < max && i + n < s->hi && !krfs_bm_test(bm, i + n)) {
		krfs_bm_set(bm, i + n);
		n++;
	}
	*start = i;
	s->hint = i + n;
	return n;
}

/* 1 + this thread's number, 0 until its first allocation. */
static _Thread_local unsigned thread_number;
static _Atomic unsigned threads_seen;

static unsigned home_shard(const struct krfs_bitmap *bm)
{
	if (thread_number == 0)
		thread_number = atomic_fetch_add_explicit(&threads_seen, 1, memory_order_relaxed) + 1;
	return (thread_number - 1) % bm->nshards;
}

int64_t krfs_bm_alloc(struct krfs_bitmap *bm)
{
	uint64_t start;
	return krfs_bm_alloc_run(bm, 1, &start) ? (int64_t)start : -1;
}

uint64_t krfs_bm_alloc_run(struct krfs_bitmap *bm, uint64_t max, uint64_t *start)
{
	if (max == 0)
		return 0;
	unsigned home = home_shard(bm);
	for (unsigned k = 0; k < bm->nshards; k++) {
		struct krfs_shard *s = &bm->shards[(home + k) % bm->nshards];
		pthread_mutex_lock(&s->lock);
		uint64_t n = shard_run(bm, s, max, start);
		pthread_mutex_unlock(&s->lock);
		if (n)
			return n;
	}
	return 0;
}
