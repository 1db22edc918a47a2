/*
 * redund.c - parity and chunk-record checksums kept current by every committed write, and
 * recomputed after recovery.
 *
 * Design
 *
 *   Online, each record of a committed image is written home by redund_apply (the log's
 *   apply hook) in this order: patch parity with old ^ new (reading the old bytes at home),
 *   patch the CRC of every chunk record the write falls in, then write the new bytes (a
 *   record outside the chunk records patches parity and stores its bytes in one pass:
 *   kr_parity_write). All three are flushed and none is fenced: the next fence of the committing thread covers
 *   them, exactly like the write itself (log.c, invariant 5). Bit records use the old value
 *   returned by the atomic OR/AND, so concurrent allocations in one run each patch parity
 *   and the record CRC with their exact delta, and the patches commute. Every parity patch,
 *   a single word's included, goes through parity.c under its column's range lock: an
 *   atomic XOR that slipped into another commit's SIMD patch of the same column would be
 *   lost (seen as stale parity after two threads allocated and freed at once).
 *
 *   The CRC of a chunk record is patched, never recomputed online: CRC-32C is affine, so the
 *   change of the CRC depends only on the changed bytes (csum.c), and XOR-ing that change
 *   into the record's CRC word is another commuting atomic update (with its own parity
 *   patch).
 *
 *   A spill segment's log lines (log.c) are written outside any record: the patch hook
 *   patches their parity from the bytes they replace, as kr_redund_patch does for the
 *   ranges a home commit leaves in place (tx.c).
 *
 *   Recovery replays records with plain writes (XOR deltas are not idempotent), and the log
 *   reports every range it replayed or found in an intent whose writes may be unfenced
 *   (redund_touched). Before durable_seq moves past those transactions (redund_settle,
 *   called by the log), the CRCs of the chunk records in those ranges and then the parity of
 *   exactly those bytes are recomputed from the data, so a crash during this step simply
 *   leads to it again. Not whole columns: a store the program made elsewhere in a column
 *   after a commit, and never persisted, may have reached home before the crash; parity
 *   recomputed over it would agree with it while the object's checksum does not, damage
 *   beyond repair, where parity left alone takes the object back to its committed bytes.
 *
 *   Invariants (checked by kr_pool_verify and, in tests, on every crash image)
 *   1. Every parity row byte equals the XOR of the data row bytes of its column.
 *   2. Every chunk record's crc equals the CRC-32C of its first 136 bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "redund.h"

uint32_t kr_obj_crc_start(const struct kr_obj_hdr *hdr)
{
	return kr_crc32c(hdr, offsetof(struct kr_obj_hdr, crc));
}

uint32_t kr_obj_crc(const struct kr_obj_hdr *hdr, const void *payload)
{
	return kr_crc32c_extend(kr_obj_crc_start(hdr), payload, hdr->size);
}

uint32_t kr_obj_crc_combine(const struct kr_obj_hdr *hdr, uint32_t payload_crc)
{
	return kr_crc32c_combine(kr_obj_crc_start(hdr), payload_crc, hdr->size);
}

/* Zero bytes leave the inverted register multiplied by x^(8n): the shift. */
uint32_t kr_obj_crc_zeros(const struct kr_obj_hdr *hdr)
{
	return ~kr_crc32c_shift(~kr_obj_crc_start(hdr), hdr->size);
}

#define REC_SZ sizeof(struct kr_chunk_meta)
#define REC_CRC_OFF offsetof(struct kr_chunk_meta, crc)

void kr_redund_init(struct kr_redund *r, struct kr_pm *pm, const struct kr_pool_hdr *h)
{
	memset(r, 0, sizeof(*r));
	r->pm = pm;
	r->feats = h->ro_compat;
	r->meta_bytes = (uint64_t)h->chunks_per_zone * REC_SZ;
	kr_parity_init(&r->parity, pm, h);
}

void kr_redund_fini(struct kr_redund *r)
{
	kr_parity_fini(&r->parity);
	free(r->touched);
	r->touched = NULL;
}

int kr_redund_in_meta(const struct kr_redund *r, uint64_t off, uint64_t *rec_off)
{
	const struct kr_geom *g = &r->parity.g;
	if (!kr_geom_in_heap(g, off) || kr_geom_in_zone(g, off) >= r->meta_bytes)
		return 0;
	*rec_off = off - kr_geom_in_zone(g, off) % REC_SZ;
	return 1;
}

uint32_t kr_redund_chunk_crc(const struct kr_chunk_meta *m)
{
	/* Offset so that an all-zero record (a new pool's free chunk) has crc 0 (layout.h). */
	static const uint8_t zero[REC_CRC_OFF];
	return kr_crc32c(m, REC_CRC_OFF) ^ kr_crc32c(zero, REC_CRC_OFF);
}

static int parity_on(const struct kr_redund *r) { return (r->feats & KR_FEAT_RO_PARITY) != 0; }
static int meta_csum_on(const struct kr_redund *r) { return (r->feats & KR_FEAT_RO_META_CSUM) != 0; }

/* XOR delta into the 8-byte word at off, and the same delta into its parity. */
static void xor_word(struct kr_redund *r, uint64_t off, uint64_t delta)
{
	char *base = r->pm->base;
	kr_pm_xor64(r->pm, (uint64_t *)(base + off), delta);
	kr_pm_flush(r->pm, base + off, 8);
	if (parity_on(r) && kr_parity_covers(&r->parity, off, 8))
		kr_parity_xor_word(&r->parity, off, delta);
}

/* Patches the CRC of every chunk record that [off, off+len) changes from old to new. */
static void patch_chunk_crcs(struct kr_redund *r, uint64_t off, const uint8_t *old,
			     const uint8_t *new, uint64_t len)
{
	uint64_t rec;
	if (!meta_csum_on(r) || !kr_redund_in_meta(r, off, &rec))
		return;
	for (; rec < off + len && kr_redund_in_meta(r, rec, &rec); rec += REC_SZ) {
		uint64_t s = off > rec ? off : rec;
		uint64_t e = off + len < rec + REC_CRC_OFF ? off + len : rec + REC_CRC_OFF;
		if (s >= e)
			continue;
		uint8_t d[REC_CRC_OFF];
		int any = 0;
		for (uint64_t b = s; b < e; b++) {
			d[b - s] = old[b - off] ^ new[b - off];
			any |= d[b - s];
		}
		if (!any)
			continue;
		uint32_t cd = kr_crc32c_delta(d, e - s, rec + REC_CRC_OFF - e);
		xor_word(r, rec + REC_CRC_OFF, cd); /* crc is the low half of its word */
	}
}

/* The column locks of everything one record of the chunk records changes: its bytes and
 * the CRC words of the records they lie in, taken before the first of them changes. Each of
 * the patches below may otherwise wait for a lock between two stores, and the wait lets a
 * repair run (parity.h, wait_begin) that would find home and parity disagreeing there: a
 * page rebuilt from that column, or a chunk record "repaired" back to its old bitmap. */
static void hold_record(struct kr_redund *r, uint64_t off, uint64_t len, struct kr_parity_hold *held)
{
	uint64_t first, last;
	held->n = 0;
	if (!parity_on(r) || !kr_redund_in_meta(r, off, &first))
		return;
	uint64_t end = off + len;
	if (meta_csum_on(r) && kr_redund_in_meta(r, end - 1, &last) && last + REC_SZ > end)
		end = last + REC_SZ;
	if (meta_csum_on(r) && first < off)
		off = first;
	if (kr_parity_covers(&r->parity, off, end - off))
		kr_parity_hold(&r->parity, off, end - off, len >= r->parity.crossover, held);
}

/* The log's apply hook: one record home, with its redundancy. */
static void redund_apply(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct kr_redund *r = ctx;
	char *home = r->pm->base + h->off;
	switch (h->kind) {
	case KR_REC_DATA:
	case KR_REC_FRESH: {
		uint32_t n = h->kind == KR_REC_FRESH ? (uint32_t)sizeof(struct kr_obj_hdr) : h->len;
		uint64_t rec;
		int in_meta = meta_csum_on(r) && kr_redund_in_meta(r, h->off, &rec);
		/* Outside the chunk records, parity is patched as the new bytes are stored: one
		 * pass over old, new and parity for a large record. */
		if (!in_meta && parity_on(r) && kr_parity_covers(&r->parity, h->off, n)) {
			kr_parity_write(&r->parity, h->off, data, n);
			break;
		}
		/* Parity and CRC patches read the old bytes, so they come before the write. */
		struct kr_parity_hold held;
		hold_record(r, h->off, n, &held);
		if (parity_on(r) && kr_parity_covers(&r->parity, h->off, n))
			kr_parity_patch(&r->parity, h->off, home, data, n);
		patch_chunk_crcs(r, h->off, (const uint8_t *)home, data, n);
		kr_pm_copy(r->pm, home, data, n);
		kr_pm_flush(r->pm, home, n);
		kr_parity_release(&r->parity, &held);
		break;
	}
	case KR_REC_SETBITS:
	case KR_REC_CLRBITS: {
		struct kr_parity_hold held;
		hold_record(r, h->off, 8, &held);
		uint64_t mask = *(const uint64_t *)data;
		uint64_t old = h->kind == KR_REC_SETBITS ? kr_pm_or64(r->pm, (uint64_t *)home, mask)
							 : kr_pm_andn64(r->pm, (uint64_t *)home, mask);
		uint64_t now = h->kind == KR_REC_SETBITS ? old | mask : old & ~mask;
		kr_pm_flush(r->pm, home, 8);
		uint64_t delta = old ^ now;
		if (delta && parity_on(r) && kr_parity_covers(&r->parity, h->off, 8))
			kr_parity_xor_word(&r->parity, h->off, delta);
		if (delta)
			patch_chunk_crcs(r, h->off, (const uint8_t *)&old, (const uint8_t *)&now, 8);
		kr_parity_release(&r->parity, &held);
		break;
	}
	}
}

/* The log's flush hook (adoption): the parity and record CRCs an apply also wrote. */
static void redund_flush(void *ctx, uint64_t off, uint64_t len)
{
	struct kr_redund *r = ctx;
	char *base = r->pm->base;
	if (parity_on(r))
		for (uint64_t o = off; o < off + len;) {
			uint64_t next = (o / KR_PAGE_SIZE + 1) * KR_PAGE_SIZE;
			uint64_t n = (next < off + len ? next : off + len) - o;
			if (kr_parity_covers(&r->parity, o, n))
				kr_pm_flush(r->pm, base + kr_parity_offset(&r->parity, o), n);
			o += n;
		}
	uint64_t rec;
	if (meta_csum_on(r) && kr_redund_in_meta(r, off, &rec))
		for (; rec < off + len && kr_redund_in_meta(r, rec, &rec); rec += REC_SZ) {
			kr_pm_flush(r->pm, base + rec + REC_CRC_OFF, 8);
			if (parity_on(r))
				kr_pm_flush(r->pm, base + kr_parity_offset(&r->parity, rec + REC_CRC_OFF), 8);
		}
}

/* The log's touched hook (recovery): remember the range. */
static void redund_touched(void *ctx, uint64_t off, uint64_t len)
{
	struct kr_redund *r = ctx;
	if (KR_GROW(r->touched, r->cap, r->ntouched + 1, 64)) {
		r->touched_oom = 1;
		return;
	}
	r->touched[r->ntouched++] = (struct kr_range){off, len};
}

void kr_redund_fix_chunk_crc(struct kr_redund *r, uint64_t rec_off)
{
	struct kr_chunk_meta *m = (struct kr_chunk_meta *)(r->pm->base + rec_off);
	uint32_t want = kr_redund_chunk_crc(m);
	if (want != m->crc)
		xor_word(r, rec_off + REC_CRC_OFF, (uint64_t)(want ^ m->crc));
}

/* A piece of one parity page to recompute: in-page bytes [lo, hi) of the page at poff. */
struct par_piece {
	uint64_t poff;
	uint32_t lo, hi;
};

static int piece_cmp(const void *a, const void *b)
{
	const struct par_piece *x = a, *y = b;
	if (x->poff != y->poff)
		return x->poff < y->poff ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The log's settle hook (recovery, after replay, before durable_seq moves): chunk CRCs,
 * then parity of exactly the bytes touched (whole pages where a range covers one). Only
 * those: elsewhere in a column parity still holds what it was computed over, so a store the
 * program made there and never persisted, which the crash may have left at home, stays a
 * repairable checksum failure instead of becoming part of parity. The caller fences. */
static int redund_settle(void *ctx)
{
	struct kr_redund *r = ctx;
	if (r->touched_oom)
		return kr_err_set(KR_E_NOMEM, "recovery range table");
	size_t n = 0, cap = 0;
	struct par_piece *v = NULL;
	for (size_t i = 0; i < r->ntouched; i++) {
		uint64_t off = r->touched[i].off, len = r->touched[i].len, rec;
		if (meta_csum_on(r) && kr_redund_in_meta(r, off, &rec)) {
			/* A record's CRC word lies outside the bytes the record wrote: widen. */
			uint64_t end = off + len;
			for (; rec < end && kr_redund_in_meta(r, rec, &rec); rec += REC_SZ)
				kr_redund_fix_chunk_crc(r, rec);
			len = rec - off > len ? rec - off : len;
		}
		if (!parity_on(r))
			continue;
		for (uint64_t p = off & ~(uint64_t)(KR_PAGE_SIZE - 1); p < off + len; p += KR_PAGE_SIZE) {
			if (!kr_parity_covers(&r->parity, p, KR_PAGE_SIZE))
				continue;
			if (KR_GROW(v, cap, n + 1, 256)) {
				free(v);
				return kr_err_set(KR_E_NOMEM, "recovery page table");
			}
			uint64_t lo = off > p ? off - p : 0, hi = off + len - p;
			v[n++] = (struct par_piece){kr_parity_offset(&r->parity, p), (uint32_t)lo,
						    (uint32_t)(hi < KR_PAGE_SIZE ? hi : KR_PAGE_SIZE)};
		}
	}
	/* Pieces of one parity page merged: pages of different rows share a column. */
	if (n)
		qsort(v, n, sizeof(*v), piece_cmp);
	for (size_t i = 0; i < n;) {
		struct par_piece m = v[i++];
		for (; i < n && v[i].poff == m.poff && v[i].lo <= m.hi; i++)
			m.hi = v[i].hi > m.hi ? v[i].hi : m.hi;
		if (m.lo == 0 && m.hi == KR_PAGE_SIZE)
			kr_parity_recompute_column(&r->parity, m.poff);
		else
			kr_parity_recompute_bytes(&r->parity, kr_geom_in_stripe(&r->parity.g, m.poff, 0) + m.lo,
						  m.hi - m.lo);
	}
	free(v);
	r->ntouched = 0;
	return KR_OK;
}

void kr_redund_patch(struct kr_redund *r, uint64_t off, const void *old, const void *new, size_t len)
{
	if (parity_on(r) && kr_parity_covers(&r->parity, off, len))
		kr_parity_patch(&r->parity, off, old, new, len);
}

void kr_redund_prefetch(const struct kr_redund *r, uint64_t off, size_t len)
{
	if (parity_on(r) && kr_parity_covers(&r->parity, off, len))
		kr_parity_prefetch(&r->parity, off, len);
}

/* The log's patch hook: a spill segment's lines, written outside any record, keep their
 * columns' parity. */
static void redund_patch(void *ctx, uint64_t off, const void *old, const void *new, size_t len)
{
	kr_redund_patch(ctx, off, old, new, len);
}

void kr_redund_hooks(struct kr_redund *r, struct kr_log_hooks *hooks)
{
	hooks->apply = redund_apply;
	hooks->patch = redund_patch;
	hooks->flush = redund_flush;
	hooks->touched = redund_touched;
	hooks->settle = redund_settle;
	hooks->ctx = r;
}

void kr_redund_write_direct(struct kr_redund *r, uint64_t off, const void *src, size_t len)
{
	char *home = r->pm->base + off;
	if (parity_on(r) && kr_parity_covers(&r->parity, off, len))
		kr_parity_patch(&r->parity, off, home, src, len);
	kr_pm_copy_nt(r->pm, home, src, len);
}
