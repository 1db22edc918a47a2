/*
 * vcache.c - the DRAM block checksums of large objects (vcache.h): built by a whole-object
 * verification, checked and followed by transactions, dropped by frees and bulk rewrites.
 *
 * One mutex guards the table; the block checks run under it, which is short (the blocks of
 * one kr_tx_add) except for a range as large as the object, the cost of which the whole
 * check had before. Entries are direct-mapped: a newcomer evicts the object in its slot,
 * and an entry that would take the table over KR_VCACHE_BUDGET is not made (that object is
 * verified whole, as without the table).
 */
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "fault.h"
#include "redund.h"
#include "vcache.h"

static uint64_t nblocks(uint64_t size) { return (size + KR_VCACHE_BLOCK - 1) / KR_VCACHE_BLOCK; }

static struct kr_vcache_ent *slot(struct kr_vcache *c, uint64_t oid)
{
	return &c->ent[(oid >> 4) * 0x9e3779b97f4a7c15ull >> 56 & (KR_VCACHE_SLOTS - 1)];
}

/* The slot's entry if it is this object's (the lock held). */
static struct kr_vcache_ent *find(struct kr_vcache *c, uint64_t oid, uint64_t size)
{
	struct kr_vcache_ent *e = slot(c, oid);
	return e->oid == oid && e->size == size ? e : NULL;
}

static void ent_clear(struct kr_vcache *c, struct kr_vcache_ent *e)
{
	if (e->oid)
		c->bytes -= nblocks(e->size) * sizeof(*e->blk);
	free(e->blk);
	*e = (struct kr_vcache_ent){0};
}

void kr_vcache_init(struct kr_vcache *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
}

void kr_vcache_fini(struct kr_vcache *c)
{
	for (unsigned i = 0; i < KR_VCACHE_SLOTS; i++)
		ent_clear(c, &c->ent[i]);
	pthread_mutex_destroy(&c->lock);
}

static uint64_t block_len(uint64_t size, uint64_t k)
{
	uint64_t s = k * KR_VCACHE_BLOCK;
	return size - s < KR_VCACHE_BLOCK ? size - s : KR_VCACHE_BLOCK;
}

/* kr_crc32c_extend of crc over n bytes at src, which go to copy on the way (if not NULL). */
static uint32_t extend_copy(uint32_t crc, uint8_t *copy, const uint8_t *src, uint64_t n)
{
	return copy ? kr_crc32c_copy_extend(crc, copy, src, n) : kr_crc32c_extend(crc, src, n);
}

uint32_t kr_vcache_object_crc(struct kr_vcache *c, uint64_t oid, const struct kr_obj_hdr *hdr,
			      const uint8_t *payload, uint8_t *copy)
{
	uint64_t size = hdr->size, n = nblocks(size);
	uint32_t crc = kr_obj_crc_start(hdr);
	if (size < KR_VCACHE_MIN || n * sizeof(struct kr_vcache_blk) > KR_VCACHE_BUDGET)
		return extend_copy(crc, copy, payload, size);
	/* One pass either way: the running CRC is recorded at each block boundary. Without
	 * memory for the pairs the object is simply not cached. */
	struct kr_vcache_blk *blk = kr_malloc(n * sizeof(*blk));
	if (!blk)
		return extend_copy(crc, copy, payload, size);
	for (uint64_t k = 0; k < n; k++) {
		uint64_t at = k * KR_VCACHE_BLOCK;
		blk[k].in = crc;
		crc = extend_copy(crc, copy ? copy + at : NULL, payload + at, block_len(size, k));
		blk[k].out = crc;
	}
	pthread_mutex_lock(&c->lock);
	struct kr_vcache_ent *e = slot(c, oid);
	size_t need = n * sizeof(*blk), held = e->oid ? nblocks(e->size) * sizeof(*blk) : 0;
	int fits = c->bytes - held + need <= KR_VCACHE_BUDGET;
	/* A mismatch drops this object's entry (stale, or the object is damaged); a match
	 * replaces whatever the slot held, if the budget allows. */
	if (e->oid == oid || (crc == hdr->crc && fits))
		ent_clear(c, e);
	if (crc == hdr->crc && fits) {
		*e = (struct kr_vcache_ent){.oid = oid, .size = size, .blk = blk};
		c->bytes += need;
		blk = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	free(blk);
	return crc;
}

int kr_vcache_has(struct kr_vcache *c, uint64_t oid, uint64_t size)
{
	if (size < KR_VCACHE_MIN)
		return 0;
	pthread_mutex_lock(&c->lock);
	int has = find(c, oid, size) != NULL;
	pthread_mutex_unlock(&c->lock);
	return has;
}

/* Checks (update == 0) or recomputes the blocks overlapping [s, e). */
static int blocks(struct kr_vcache *c, uint64_t oid, uint64_t size, const uint8_t *payload,
		  uint64_t s, uint64_t e, int update)
{
	if (size < KR_VCACHE_MIN || s >= e)
		return 0;
	pthread_mutex_lock(&c->lock);
	struct kr_vcache_ent *en = find(c, oid, size);
	int ok = en != NULL;
	for (uint64_t k = s / KR_VCACHE_BLOCK; en && ok && k <= (e - 1) / KR_VCACHE_BLOCK; k++) {
		uint32_t got = kr_crc32c_extend(en->blk[k].in, payload + k * KR_VCACHE_BLOCK,
						block_len(size, k));
		if (update)
			en->blk[k].out = got;
		else
			ok = got == en->blk[k].out;
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

int kr_vcache_verify(struct kr_vcache *c, uint64_t oid, uint64_t size, const uint8_t *payload,
		     uint64_t s, uint64_t e)
{
	return blocks(c, oid, size, payload, s, e, 0);
}

void kr_vcache_update(struct kr_vcache *c, uint64_t oid, uint64_t size, const uint8_t *payload,
		      uint64_t s, uint64_t e)
{
	blocks(c, oid, size, payload, s, e, 1);
}

void kr_vcache_drop(struct kr_vcache *c, uint64_t oid, uint64_t size)
{
	if (size < KR_VCACHE_MIN)
		return;
	pthread_mutex_lock(&c->lock);
	struct kr_vcache_ent *e = find(c, oid, size);
	if (e)
		ent_clear(c, e);
	pthread_mutex_unlock(&c->lock);
}
