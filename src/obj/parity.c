/*
 * parity.c - zone parity (Pangolin's RAID-4-style rows, one parity row per zone).
 *
 * Design
 *
 *   Geometry (obj/geom.h computes all of it): a zone is rows data rows and one parity row;
 *   a data byte's parity is the parity row's byte at the same offset in its row. Objects
 *   ignore row boundaries, so one patch may touch two rows' parity; kr_parity_patch
 *   splits it.
 *
 *   Concurrency: XOR commutes, so any number of commits may patch the same parity bytes in
 *   any order as long as each patch is itself atomic. A small patch is a few atomic 64-bit
 *   XORs (lock xor) and holds its range lock SHARED; a large patch reads and writes parity
 *   with SIMD XOR, which is not atomic, so it holds the range lock EXCLUSIVE. Ranges are
 *   page columns hashed onto KR_PARITY_LOCKS rwlocks; a patch takes its pages' locks in
 *   ascending order. The crossover between the two paths is a measured default. Single-word
 *   deltas (kr_parity_xor_word) take the shared lock too: an unlocked atomic XOR is lost if
 *   it lands inside an exclusive SIMD patch of the same column (invariant 3).
 *
 *   Invariants
 *   1. Outside a commit's apply step, parity row byte c == XOR of byte c of every data row
 *      (the fault-tolerance checker and the crash simulator test this on every image).
 *   2. Recovery never re-applies XOR deltas (they are not idempotent); it recomputes the
 *      parity of every column touched by the transactions it replays.
 *   3. Every write of parity bytes outside recovery and quiesced repair holds the range lock
 *      of its page column: shared for atomic XORs, exclusive for plain stores.
 */
#include <isa-l/raid.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "simd.h"

#define P KR_PAGE_SIZE

void kr_parity_init(struct kr_parity *p, struct kr_pm *pm, const struct kr_pool_hdr *h)
{
	p->pm = pm;
	p->g = kr_geom_of(h);
	p->crossover = KR_PARITY_CROSSOVER_DEFAULT;
	const char *env = getenv("KERATIN_PARITY_CROSSOVER");
	if (env && *env)
		p->crossover = (size_t)strtoull(env, NULL, 10);
	for (int i = 0; i < KR_PARITY_LOCKS; i++)
		pthread_rwlock_init(&p->locks[i].rw, NULL);
}

void kr_parity_fini(struct kr_parity *p)
{
	for (int i = 0; i < KR_PARITY_LOCKS; i++)
		pthread_rwlock_destroy(&p->locks[i].rw);
}

int kr_parity_covers(const struct kr_parity *p, uint64_t off, size_t len)
{
	return kr_geom_covers(&p->g, off, len);
}

uint64_t kr_parity_offset(const struct kr_parity *p, uint64_t off)
{
	return kr_geom_parity_of(&p->g, off);
}

void kr_parity_prefetch(const struct kr_parity *p, uint64_t off, size_t len)
{
	/* The first row's share, at most PREFETCH_LINES lines (past them the hardware's own
	 * stream prefetch keeps up with a patch, at least for lines no other CPU holds). */
	enum { PREFETCH_LINES = 128 };
	size_t row_left = p->g.row_size - kr_geom_in_row(&p->g, off);
	if (len > row_left)
		len = row_left;
	if (len > PREFETCH_LINES * KR_LINE_SIZE)
		len = PREFETCH_LINES * KR_LINE_SIZE;
	uint64_t poff = kr_parity_offset(p, off);
	const char *first = p->pm->base + poff;
	for (uint64_t a = (uint64_t)first & ~(uint64_t)(KR_LINE_SIZE - 1); a < (uint64_t)first + len; a += KR_LINE_SIZE)
		__builtin_prefetch((const void *)a, 1);
	for (uint64_t pg = poff / P; pg <= (poff + len - 1) / P; pg++)
		__builtin_prefetch(&p->locks[pg % KR_PARITY_LOCKS].rw, 1);
}

/* The distinct lock indices of the page columns of parity bytes [poff, poff+len), in
 * ascending order (so patches never deadlock on each other or on themselves). */
static int lock_set(uint64_t poff, size_t len, uint16_t *idx)
{
	uint64_t first = poff / P, last = (poff + len - 1) / P;
	if (last - first + 1 >= KR_PARITY_LOCKS) {
		for (int i = 0; i < KR_PARITY_LOCKS; i++)
			idx[i] = (uint16_t)i;
		return KR_PARITY_LOCKS;
	}
	int n = 0;
	for (uint64_t pg = first; pg <= last; pg++) {
		uint16_t v = (uint16_t)(pg % KR_PARITY_LOCKS);
		int k = n;
		while (k > 0 && idx[k - 1] > v) /* insertion: the set is tiny */
			k--;
		if (k > 0 && idx[k - 1] == v)
			continue;
		memmove(&idx[k + 1], &idx[k], (size_t)(n - k) * sizeof(*idx));
		idx[k] = v;
		n++;
	}
	return n;
}

_Thread_local int kr_parity_unlocked;

/* The locks this thread holds through kr_parity_hold: its own calls inside skip them. */
static _Thread_local uint64_t held[KR_PARITY_LOCKS / 64];

static int is_held(uint16_t i) { return (held[i / 64] >> (i % 64)) & 1; }

/* A thread that must wait for a lock leaves the commit gate while it waits: otherwise an
 * online repair, which waits for every commit to leave, could wait for it while the
 * faulting thread holds the lock it wants. */
static void lock_range(struct kr_parity *p, const uint16_t *idx, int n, int exclusive)
{
	if (kr_parity_unlocked)
		return;
	for (int i = 0; i < n; i++) {
		if (is_held(idx[i]))
			continue;
		pthread_rwlock_t *l = &p->locks[idx[i]].rw;
		if ((exclusive ? pthread_rwlock_trywrlock(l) : pthread_rwlock_tryrdlock(l)) == 0)
			continue;
		int token = p->wait_begin ? p->wait_begin() : 0;
		exclusive ? pthread_rwlock_wrlock(l) : pthread_rwlock_rdlock(l);
		if (p->wait_end)
			p->wait_end(token);
	}
}

static void unlock_range(struct kr_parity *p, const uint16_t *idx, int n)
{
	if (kr_parity_unlocked)
		return;
	for (int i = n - 1; i >= 0; i--)
		if (!is_held(idx[i]))
			pthread_rwlock_unlock(&p->locks[idx[i]].rw);
}

/* The lock indices of the parity of data bytes [off, off+len), row by row (parity offsets
 * are contiguous within a row only), ascending and distinct. */
static int lock_set_data(const struct kr_parity *p, uint64_t off, size_t len, uint16_t *idx)
{
	uint64_t bits[KR_PARITY_LOCKS / 64] = {0};
	while (len > 0) {
		size_t piece = p->g.row_size - kr_geom_in_row(&p->g, off);
		if (piece > len)
			piece = len;
		uint16_t part[KR_PARITY_LOCKS];
		int n = lock_set(kr_geom_parity_of(&p->g, off), piece, part);
		for (int i = 0; i < n; i++)
			bits[part[i] / 64] |= 1ull << (part[i] % 64);
		off += piece;
		len -= piece;
	}
	int n = 0;
	for (int w = 0; w < KR_PARITY_LOCKS / 64; w++)
		for (uint64_t b = bits[w]; b; b &= b - 1)
			idx[n++] = (uint16_t)(w * 64 + __builtin_ctzll(b));
	return n;
}

void kr_parity_hold(struct kr_parity *p, uint64_t off, size_t len, int exclusive,
		    struct kr_parity_hold *h)
{
	if (kr_parity_unlocked || len == 0)
		h->n = 0;
	else if (off / P == (off + len - 1) / P) { /* one page (a chunk record's word and CRC) */
		h->idx[0] = (uint16_t)(kr_geom_parity_of(&p->g, off) / P % KR_PARITY_LOCKS);
		h->n = 1;
	} else
		h->n = lock_set_data(p, off, len, h->idx);
	lock_range(p, h->idx, h->n, exclusive); /* all waits before the caller's first store */
	for (int i = 0; i < h->n; i++)
		held[h->idx[i] / 64] |= 1ull << (h->idx[i] % 64);
}

void kr_parity_release(struct kr_parity *p, struct kr_parity_hold *h)
{
	for (int i = 0; i < h->n; i++)
		held[h->idx[i] / 64] &= ~(1ull << (h->idx[i] % 64));
	unlock_range(p, h->idx, h->n);
}

/* Atomic word XORs: the delta of each 8-byte parity word, built from old and new. */
static void patch_words(struct kr_parity *p, uint64_t poff, const uint8_t *old,
			const uint8_t *new, size_t len)
{
	char *base = p->pm->base;
	uint64_t w = poff & ~7ull, end = poff + len;
	for (; w < end; w += 8) {
		uint64_t delta = 0;
		if (w >= poff && w + 8 <= end) {
			uint64_t o, n;
			memcpy(&o, old + (w - poff), 8);
			memcpy(&n, new + (w - poff), 8);
			delta = o ^ n;
		} else {
			uint64_t s = w < poff ? poff : w, e = w + 8 < end ? w + 8 : end;
			for (uint64_t b = s; b < e; b++)
				delta |= (uint64_t)(old[b - poff] ^ new[b - poff]) << (8 * (b - w));
		}
		if (delta)
			kr_pm_xor64(p->pm, (uint64_t *)(base + w), delta);
	}
}

/* One SIMD pass over the whole piece, any alignment: the exclusive lock keeps every other
 * writer of these parity bytes out (small patches and word XORs take it shared). */
static void patch_simd(struct kr_parity *p, uint64_t poff, const uint8_t *old,
		       const uint8_t *new, size_t len)
{
	kr_pm_xor2(p->pm, p->pm->base + poff, old, new, len);
}

/* One 8-byte word's delta (allocator bit records, chunk-record CRC patches). The atomic
 * XOR alone is not enough: a large patch of the same page column reads and writes parity
 * with plain SIMD loads and stores under the EXCLUSIVE lock, and an XOR landing between its
 * load and its store would be lost (stale parity, then wrong data "repaired" from it). So
 * the word holds its column's lock SHARED, like any small patch. */
void kr_parity_xor_word(struct kr_parity *p, uint64_t off, uint64_t delta)
{
	uint64_t poff = kr_parity_offset(p, off);
	uint16_t idx = (uint16_t)(poff / P % KR_PARITY_LOCKS);
	lock_range(p, &idx, 1, 0);
	kr_pm_xor64(p->pm, (uint64_t *)(p->pm->base + poff), delta);
	unlock_range(p, &idx, 1);
	kr_pm_flush(p->pm, p->pm->base + poff, 8);
}

/* kr_parity_patch, and with home set also the write of new over old at home (old == home):
 * a large piece then makes one pass that patches parity and stores the new bytes. */
static void patch(struct kr_parity *p, uint64_t off, const uint8_t *o, const uint8_t *n,
		  size_t len, char *home)
{
	while (len > 0) {
		/* One row's share at a time: parity columns are per row offset. */
		size_t piece = p->g.row_size - kr_geom_in_row(&p->g, off);
		if (piece > len)
			piece = len;
		uint64_t poff = kr_parity_offset(p, off);
		int big = piece >= p->crossover;
		uint16_t idx[KR_PARITY_LOCKS];
		int nl = lock_set(poff, piece, idx);
		lock_range(p, idx, nl, big);
		if (big && home)
			kr_pm_copy_xor(p->pm, home, n, p->pm->base + poff, piece);
		else if (big)
			patch_simd(p, poff, o, n, piece);
		else
			patch_words(p, poff, o, n, piece);
		unlock_range(p, idx, nl);
		kr_pm_flush(p->pm, p->pm->base + poff, piece);
		if (home) {
			if (!big)
				kr_pm_copy(p->pm, home, n, piece);
			kr_pm_flush(p->pm, home, piece);
			home += piece;
		}
		off += piece;
		o += piece;
		n += piece;
		len -= piece;
	}
}

void kr_parity_patch(struct kr_parity *p, uint64_t off, const void *old, const void *new,
		     size_t len)
{
	patch(p, off, old, new, len, NULL);
}

void kr_parity_write(struct kr_parity *p, uint64_t off, const void *new, size_t len)
{
	char *home = p->pm->base + off;
	patch(p, off, (const uint8_t *)home, new, len, home);
}

/* The rows of the page column holding offset off, as ISA-L source vectors. */
static void column_vectors(struct kr_parity *p, uint64_t off, void **v)
{
	uint64_t page = off & ~(uint64_t)(P - 1);
	for (uint32_t r = 0; r <= p->g.rows; r++) /* the last one is the parity row */
		v[r] = p->pm->base + kr_geom_in_stripe(&p->g, page, r);
}

/* Column work keeps its vectors on the stack (rows are at most KR_MAX_ROWS): it runs in the
 * fault handler, where nothing may allocate. */
void kr_parity_recompute(struct kr_parity *p, uint64_t off, size_t len)
{
	void *v[KR_MAX_ROWS + 1];
	uint64_t page = off & ~(uint64_t)(P - 1), end = off + len;
	for (; page < end; page += P) {
		column_vectors(p, page, v);
		uint64_t poff = (uint64_t)((char *)v[p->g.rows] - p->pm->base);
		uint16_t idx[1];
		int nl = lock_set(poff, P, idx);
		lock_range(p, idx, nl, 1);
		kr_pm_xor_gen(p->pm, (int)p->g.rows + 1, P, v);
		unlock_range(p, idx, nl);
		kr_pm_flush(p->pm, v[p->g.rows], P);
	}
}

void kr_parity_recompute_bytes(struct kr_parity *p, uint64_t off, size_t len)
{
	uint8_t acc[P];
	memset(acc, 0, len);
	for (uint32_t r = 0; r < p->g.rows; r++) {
		const uint8_t *src = (const uint8_t *)p->pm->base + kr_geom_in_stripe(&p->g, off, r);
		for (size_t i = 0; i < len; i++)
			acc[i] ^= src[i];
	}
	uint8_t *par = (uint8_t *)p->pm->base + kr_geom_parity_of(&p->g, off);
	kr_pm_copy(p->pm, par, acc, len);
	kr_pm_flush(p->pm, par, len);
}

void kr_parity_recompute_column(struct kr_parity *p, uint64_t poff)
{
	kr_parity_recompute(p, kr_geom_in_stripe(&p->g, poff, 0), KR_PAGE_SIZE);
}

void kr_parity_rebuild(struct kr_parity *p, uint64_t off, size_t len, void *out)
{
	uint32_t row = kr_geom_row(&p->g, off);
	void *v[KR_MAX_ROWS + 1];
	_Alignas(32) uint8_t acc[P];
	column_vectors(p, off, v);
	/* The lost row's bytes = XOR of parity and every other row: one ISA-L pass, the lost
	 * row's slot taken by the parity row and the destination put last. */
	uint64_t poff = (uint64_t)((char *)v[p->g.rows] - p->pm->base);
	v[row] = v[p->g.rows];
	v[p->g.rows] = acc;
	uint16_t idx[1];
	int nl = lock_set(poff, P, idx);
	lock_range(p, idx, nl, 0);
	xor_gen((int)p->g.rows + 1, P, v);
	kr_simd_done();
	unlock_range(p, idx, nl);
	memcpy(out, acc + off % P, len);
}

void kr_parity_rebuild_bytes(struct kr_parity *p, uint64_t off, size_t len, void *out)
{
	uint32_t row = kr_geom_row(&p->g, off);
	uint8_t *o = out;
	memcpy(o, p->pm->base + kr_geom_parity_of(&p->g, off), len);
	for (uint32_t r = 0; r < p->g.rows; r++) {
		if (r == row)
			continue;
		const uint8_t *src = (const uint8_t *)p->pm->base + kr_geom_in_stripe(&p->g, off, r);
		size_t i = 0;
		for (; i + 8 <= len; i += 8) {
			uint64_t a, b;
			memcpy(&a, o + i, 8);
			memcpy(&b, src + i, 8);
			a ^= b;
			memcpy(o + i, &a, 8);
		}
		for (; i < len; i++)
			o[i] ^= src[i];
	}
}

int kr_parity_column_ok(struct kr_parity *p, uint64_t off)
{
	void *v[KR_MAX_ROWS + 1];
	column_vectors(p, off, v);
	/* xor_check: the XOR of all vectors, parity included, must be zero. */
	return xor_check((int)p->g.rows + 1, P, v) == 0;
}
