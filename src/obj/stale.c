/*
 * stale.c - the stale map: page columns whose parity and object checksums trail bytes that
 * the application stored itself and made durable (kr_stored_persist), and the cleaner that
 * brings them up to date.
 *
 * Design
 *
 *   A libpmemobj program stores into its objects directly and makes the bytes durable with
 *   pmemobj_persist. Declaring each such range in a transaction that patches checksum and
 *   parity (kr_tx_add_stored) costs microseconds, most of it reading the zone's other rows
 *   for the bytes parity reflects, where libpmemobj flushes and fences in tens of
 *   nanoseconds. So here redundancy follows such stores lazily, as Vilamb's does:
 *     - a persist marks each page column its range touches. Only a column not marked yet
 *       costs anything: its bit in both control pages, flushed and fenced, before the
 *       application's bytes are flushed and fenced. One fence otherwise, as libpmemobj's;
 *     - the cleaner (a thread of the pool, started by the first mark, waking every
 *       KERATIN_STALE_MS milliseconds, default 100, or nine times its last pass's CPU
 *       time if that is longer, up to ten periods; 0: no thread) recomputes the parity
 *       of the marked columns and the checksums of the objects on the pages persisted to
 *       since the last pass, makes them durable, and clears the marks;
 *     - recovery after a crash does the same for every marked column and every object in
 *       it (which pages were persisted to is DRAM knowledge, lost);
 *     - a check, a scrub and a media repair leave marked columns alone: their parity says
 *       nothing until the cleaner has run. kr_pool_check and close clean first.
 *   One bit stands for k consecutive columns, k chosen so that the map fits the control
 *   page's 62 free lines (layout.h): k = 1 up to 31744 columns (about 12 GiB of heap with
 *   100 rows).
 *
 *   What stays unprotected (docs/DESIGN.md): bytes stored and not persisted yet, as before;
 *   and media errors in a marked column until the next pass, since its parity is stale.
 *
 * Invariants
 *   1. A column holding bytes made durable by kr_stored_persist (or kr_stored_flush and
 *      kr_stored_drain) since its redundancy was last computed has its persistent bit set,
 *      durably, from before that call returned, until a pass has made its redundancy and
 *      those bytes durable (a pass may run between a persist's marks and its own fence: it
 *      writes back the pages persisted to, so the bytes it computed over are durable before
 *      it unmarks). The marker makes the bit durable (flush, fence) before it sets the DRAM
 *      bit that lets later persists skip marking.
 *   2. A persistent bit is cleared only after the parity and checksums recomputed over its
 *      columns are durable, no transaction that wrote there can be replayed any more
 *      (durable_seq has passed it), and its DRAM bit stayed clear since the cleaner
 *      claimed it (a persist meanwhile set it again: the column stays marked). A checksum
 *      the cleaner writes into another column's page marks that column first.
 *   3. A DRAM group bit is set only while its persistent bit is set (both under lock).
 *   4. The cleaner recomputes with commits held still and none half applied (the commit
 *      gate closed with no commit out of it waiting for a parity lock: kr_quiesce_hold_settled)
 *      and skips columns where an in-place transaction's range lies (home holds its
 *      uncommitted bytes): they stay marked.
 *   5. No replay overwrites a persisted store: before a range is written back (after its
 *      marks), every transaction that wrote its columns (kr_tx_group_writer, noted at each
 *      transaction's end once it was first asked; every transaction before that counts as
 *      a writer of every column) is at or below durable_seq, or the range's bytes are logged
 *      after them (stored_log). Recovery replays only transactions above durable_seq, in
 *      order. (test_stale's first case: a transaction, then the first persist.)
 */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "barrier.h"
#include "csum.h"
#include "err.h"
#include "fault.h"
#include "invariant.h"
#include "pool_state.h"
#include "query.h"
#include "quiesce.h"
#include "stale.h"
#include "tx.h"

#define P KR_PAGE_SIZE
#define MAP_WORDS (KR_STALE_MAP_BYTES / 8)

struct kr_stale {
	uint64_t *map[2];          /* the map in the two control pages (pool memory) */
	_Atomic uint64_t dram[MAP_WORDS]; /* the same groups in DRAM (invariant 3) */
	_Atomic uint64_t *pages;   /* heap pages persisted to since the last pass (DRAM only) */
	uint64_t *hits;            /* the pages a pass claimed from `pages` (under clean_lock) */
	uint64_t *mapped;          /* groups whose pages are mapped in (populate_groups) */
	uint64_t ncols, k, ngroups, npages;
	pthread_mutex_t lock;      /* persistent bit transitions (invariants 1-3) */
	_Atomic uint64_t unmarks;  /* passes that cleared persistent bits (invariant 1's check) */
	pthread_mutex_t clean_lock; /* one pass at a time */
	/* The cleaner thread. */
	pthread_mutex_t tlock;
	pthread_cond_t cond;
	pthread_t thread;
	int started, stop;
	long period_ms;
};

static int enabled(const kr_pool *pool)
{
	return pool->stale != NULL;
}

/* Columns in group g (the last one may be short). */
static uint64_t group_cols(const struct kr_stale *s, uint64_t g)
{
	return g * s->k + s->k <= s->ncols ? s->k : s->ncols - g * s->k;
}

int kr_stale_new(kr_pool *pool)
{
	if (!(pool->hdr.incompat & KR_FEAT_INCOMPAT_STALE_MAP))
		return KR_OK;
	struct kr_stale *s = kr_calloc_aligned(_Alignof(struct kr_stale), 1, sizeof(*s));
	if (!s)
		return kr_err_set(KR_E_NOMEM, "stale map");
	s->ncols = kr_geom_columns(&pool->g);
	s->k = KR_STALE_COLUMNS_PER_BIT(s->ncols);
	s->ngroups = (s->ncols + s->k - 1) / s->k;
	s->npages = kr_geom_heap_bytes(&pool->g) / P;
	s->pages = kr_calloc((s->npages + 63) / 64, sizeof(uint64_t));
	s->hits = kr_calloc((s->npages + 63) / 64, sizeof(uint64_t));
	s->mapped = kr_calloc(MAP_WORDS, sizeof(uint64_t));
	if (!s->pages || !s->hits || !s->mapped) {
		free((void *)s->pages);
		free(s->hits);
		free(s->mapped);
		free(s);
		return kr_err_set(KR_E_NOMEM, "stale map");
	}
	const uint64_t ctl[2] = {pool->hdr.ctl_off, pool->hdr.ctl_replica_off};
	for (int i = 0; i < 2; i++)
		s->map[i] = (uint64_t *)(pool->pm.base + ctl[i] + KR_CTL_STALE_LINE * KR_LINE_SIZE);
	/* Either copy's bit counts: a torn or lost twin can only add work, never hide a mark.
	 * Bits past the last group are ignored (a damaged page's garbage). */
	for (uint64_t w = 0; w < MAP_WORDS && w * 64 < s->ngroups; w++) {
		uint64_t bits = s->map[0][w] | s->map[1][w];
		if (s->ngroups - w * 64 < 64)
			bits &= (1ull << (s->ngroups - w * 64)) - 1;
		atomic_init(&s->dram[w], bits);
		for (uint64_t b = bits & s->map[0][w]; b; b &= b - 1)
			pool->stale_columns += group_cols(s, w * 64 + (uint64_t)__builtin_ctzll(b));
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->clean_lock, NULL);
	pthread_mutex_init(&s->tlock, NULL);
	pthread_cond_init(&s->cond, NULL);
	const char *env = getenv("KERATIN_STALE_MS");
	/* 0: no cleaner thread (deterministic tests; programs that clean with kr_pool_check). */
	s->period_ms = env && *env ? atol(env) : 100;
	if (s->period_ms < 0)
		s->period_ms = 100;
	kr_barrier_init(); /* the persist path's light side (kr_stored_flush_ranges) */
	pool->stale = s;
	return KR_OK;
}

void kr_stale_free(kr_pool *pool)
{
	struct kr_stale *s = pool->stale;
	if (!s)
		return;
	kr_stale_stop(pool);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->clean_lock);
	pthread_mutex_destroy(&s->tlock);
	pthread_cond_destroy(&s->cond);
	free((void *)s->pages);
	free(s->hits);
	free(s->mapped);
	free(s);
	pool->stale = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Marking
 * ------------------------------------------------------------------------------------- */
static uint64_t group_of(const kr_pool *pool, uint64_t off)
{
	return kr_geom_column(&pool->g, off) / pool->stale->k;
}

static int group_marked(const struct kr_stale *s, uint64_t g)
{
	return (atomic_load_explicit(&s->dram[g / 64], memory_order_acquire) >> (g % 64)) & 1;
}

/* The persistent bit (the control page's copy): set from before the DRAM one, and kept
 * while a pass that claimed the group works (invariants 1 and 2). */
static int group_in_map(const struct kr_stale *s, uint64_t g)
{
	return (__atomic_load_n(&s->map[0][g / 64], __ATOMIC_ACQUIRE) >> (g % 64)) & 1;
}

static void *cleaner(void *arg);

/* Invariant 1: persistent bit durable first, then the DRAM bit. */
static int mark_group(kr_pool *pool, uint64_t g)
{
	struct kr_stale *s = pool->stale;
	int rc = KR_OK;
	pthread_mutex_lock(&s->lock);
	if (!group_marked(s, g)) {
		uint64_t bit = 1ull << (g % 64);
		if (!(kr_pm_or64(&pool->pm, &s->map[0][g / 64], bit) & bit))
			atomic_fetch_add(&pool->stale_columns, group_cols(s, g)); /* kr_pool_stat */
		kr_pm_or64(&pool->pm, &s->map[1][g / 64], bit);
		for (int i = 0; i < 2; i++)
			kr_pm_flush(&pool->pm, &s->map[i][g / 64], sizeof(uint64_t));
		rc = kr_pm_fence(&pool->pm);
		if (rc == KR_OK)
			atomic_fetch_or_explicit(&s->dram[g / 64], bit, memory_order_release);
	}
	KR_INVARIANT("stale.c", 3, rc != KR_OK || (s->map[0][g / 64] & s->map[1][g / 64] & (1ull << (g % 64))));
	pthread_mutex_unlock(&s->lock);
	if (rc == KR_OK) {
		pthread_mutex_lock(&s->tlock);
		if (!s->started && !s->stop && s->period_ms > 0)
			s->started = pthread_create(&s->thread, NULL, cleaner, pool) == 0;
		pthread_mutex_unlock(&s->tlock);
	}
	return rc;
}

/* The newest transaction that wrote a column of [off, off + len). */
static uint64_t newest_write(kr_pool *pool, uint64_t off, size_t len)
{
	uint64_t newest = 0;
	for (uint64_t pg = off & ~(uint64_t)(P - 1); pg < off + len; pg += P) {
		if (!kr_geom_in_data(&pool->g, pg))
			continue;
		uint64_t v = kr_tx_group_writer(pool, group_of(pool, pg));
		newest = v > newest ? v : newest;
	}
	return newest;
}

/* Invariant 5's second way: the bytes of each object piece of the range logged by a
 * transaction of their own, after the ones a replay would repeat (durable_seq is held back
 * by another thread's open in-place transaction). Bytes outside live objects: no
 * transaction writes there. A quarter of a lane at a time. */
static int stored_log(kr_pool *pool, uint64_t off, size_t len)
{
	size_t max = (size_t)pool->log.lane_lines * KR_LINE_SIZE / 4;
	int rc = KR_OK;
	while (len && rc == KR_OK) {
		kr_tx *tx;
		if ((rc = kr_tx_begin(pool, &tx)))
			break;
		kr_tx_trust(tx); /* a marked column's checksums trail its bytes */
		size_t done = 0;
		while (done < len && done < max && rc == KR_OK) {
			size_t osize = 0;
			kr_oid oid = kr_tx_owner(tx, off + done, &osize, NULL);
			size_t piece = 1;
			if (oid) {
				size_t in = (size_t)(off + done - oid);
				piece = osize - in < len - done ? osize - in : len - done;
				if (piece > max - done)
					piece = max - done;
				if (!kr_tx_add(tx, oid, in, piece))
					rc = kr_errcode();
			}
			done += piece;
		}
		rc = rc ? (kr_tx_abort(tx), rc) : kr_tx_commit(tx);
		off += done;
		len -= done;
	}
	return rc;
}

/* Invariant 5, after the range's marks and before its write-back. */
static int replay_safe(kr_pool *pool, uint64_t off, size_t len, int *logged)
{
	uint64_t newest = newest_write(pool, off, len);
	if (newest <= kr_log_durable_seq(&pool->log))
		return KR_OK;
	int rc = kr_log_sync(&pool->log, NULL);
	if (rc == KR_OK && newest > kr_log_durable_seq(&pool->log)) {
		*logged = 1;
		rc = stored_log(pool, off, len);
	}
	/* Every transaction that wrote these columns before now is replayed before the range's
	 * bytes are (logged), or not at all. Later ones only write other bytes here. */
	KR_INVARIANT("stale.c", 5, rc != KR_OK || *logged || newest <= kr_log_durable_seq(&pool->log));
	return rc;
}

#ifdef KR_DEBUG_INVARIANTS
/* Invariant 1's debug check: every group of the range is marked, in DRAM or (claimed by a
 * pass) persistently, unless a pass unmarked groups since `unmarks` was read. */
static int range_marked(kr_pool *pool, uint64_t off, size_t len, uint64_t unmarks)
{
	const struct kr_stale *s = pool->stale;
	for (uint64_t pg = off & ~(uint64_t)(P - 1); pg < off + len; pg += P) {
		if (!kr_geom_in_data(&pool->g, pg))
			continue;
		uint64_t g = group_of(pool, pg);
		if (!group_marked(s, g) && !group_in_map(s, g) && atomic_load(&s->unmarks) == unmarks)
			return 0;
	}
	return 1;
}
#endif

/* Makes [off, off + len) stale: each page column it touches is marked, durably, before this
 * returns (invariant 1). Bytes outside the heap's data rows have nothing to mark. The caller
 * has passed kr_barrier_light() since the application's stores (kr_stored_flush_ranges). */
static int mark_range(kr_pool *pool, uint64_t off, size_t len)
{
	struct kr_stale *s = pool->stale;
	const struct kr_geom *geo = &pool->g;
	int rc = KR_OK;
	for (uint64_t pg = off & ~(uint64_t)(P - 1); pg < off + len && rc == KR_OK; pg += P) {
		if (!kr_geom_in_data(geo, pg))
			continue;
		uint64_t i = (pg - geo->heap_off) / P, g = group_of(pool, pg);
		uint64_t bit = 1ull << (i % 64);
		/* Page first, then its group: a cleaner that claimed the group before this
		 * looks sees the group clear here and the page is marked again with it. */
		if (!(atomic_load_explicit(&s->pages[i / 64], memory_order_relaxed) & bit))
			atomic_fetch_or(&s->pages[i / 64], bit);
		if (!group_marked(s, g))
			rc = mark_group(pool, g);
	}
	return rc;
}

/* The DRAM bit, or the persistent one: a group the cleaner has claimed stays marked in the
 * control page until its redundancy is durable (invariant 2). */
int kr_stale_covers(const kr_pool *pool, uint64_t off, size_t len)
{
	if (!enabled(pool))
		return 0;
	const struct kr_stale *s = pool->stale;
	for (uint64_t pg = off & ~(uint64_t)(P - 1); pg < off + len; pg += P) {
		if (!kr_geom_in_heap(&pool->g, pg) || kr_geom_row(&pool->g, pg) > pool->g.rows)
			continue;
		uint64_t g = group_of(pool, pg);
		if (group_marked(s, g) || group_in_map(s, g))
			return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * The public calls
 * ------------------------------------------------------------------------------------- */
static int stored_args(kr_pool *pool, const void *addr, size_t len, const char *what)
{
	int rc = kr_pool_usable(pool);
	if (rc == KR_OK)
		rc = kr_pool_writable(pool, what);
	if (rc)
		return rc;
	if (!enabled(pool))
		return kr_err_set(KR_E_MISUSE_STATE, "%s: %s was made before the stale map: declare "
				  "stores with kr_tx_add_stored", what, pool->path);
	const char *a = addr;
	if (a < pool->pm.base || len > pool->hdr.pool_size || a - pool->pm.base > (ptrdiff_t)(pool->hdr.pool_size - len))
		return kr_err_set(KR_E_MISUSE_ARG, "%s: %zu bytes at %p are not in the pool", what, len, addr);
	return KR_OK;
}

int kr_stored_flush_ranges(kr_pool *pool, const struct kr_stored_range *r, size_t n)
{
	if (!pool || (n && !r))
		return kr_err_set(KR_E_MISUSE_ARG, "kr_stored_flush: NULL argument");
	int rc = KR_OK;
#ifdef KR_DEBUG_INVARIANTS
	uint64_t unmarks = pool->stale ? atomic_load(&pool->stale->unmarks) : 0;
#endif
	for (size_t i = 0; i < n && rc == KR_OK; i++)
		rc = stored_args(pool, r[i].addr, r[i].len, "kr_stored_flush");
	/* The application's stores before this call are visible to every other thread before
	 * the marks are looked at: a pass that claims a group after that look must compute
	 * over them (invariant 1). Once for all the ranges; the pass's kr_barrier_heavy() is
	 * the other half. */
	kr_barrier_light();
	for (size_t i = 0; i < n && rc == KR_OK; i++)
		rc = mark_range(pool, (uint64_t)((const char *)r[i].addr - pool->pm.base), r[i].len);
	/* After every mark: a sync may write back lines a range shares with a transaction's
	 * apply, and so the application's bytes in them, before the flushes below. */
	int logged = 0; /* invariant 5's second way was taken */
	for (size_t i = 0; i < n && rc == KR_OK; i++)
		rc = replay_safe(pool, (uint64_t)((const char *)r[i].addr - pool->pm.base), r[i].len, &logged);
	for (size_t i = 0; i < n && rc == KR_OK; i++) {
		uint64_t off = (uint64_t)((const char *)r[i].addr - pool->pm.base);
		KR_INVARIANT("stale.c", 1, range_marked(pool, off, r[i].len, unmarks));
		(void)off; /* only the debug build checks */
		kr_pm_flush(&pool->pm, r[i].addr, r[i].len);
	}
	return rc;
}

int kr_stored_flush(kr_pool *pool, const void *addr, size_t len)
{
	struct kr_stored_range r = {addr, len};
	return kr_stored_flush_ranges(pool, &r, 1);
}

int kr_stored_drain(kr_pool *pool)
{
	if (!pool)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_stored_drain: pool is NULL");
	int rc = kr_pool_usable(pool);
	if (rc == KR_OK)
		rc = kr_pool_writable(pool, "kr_stored_drain");
	if (rc == KR_OK && (rc = kr_pm_fence(&pool->pm)))
		kr_pool_fail(pool, rc);
	return rc;
}

int kr_stored_persist(kr_pool *pool, const void *addr, size_t len)
{
	int rc = kr_stored_flush(pool, addr, len);
	return rc ? rc : kr_stored_drain(pool);
}

/* ---------------------------------------------------------------------------------------
 * Cleaning
 * ------------------------------------------------------------------------------------- */

/* The object's checksum over its bytes as they are, through the redundancy layer (which
 * patches the parity of the header's column for it). That column may be another one than
 * the page's: it is marked first (durably), unless it is already, so that a crash between
 * the checksum's write and its parity's leaves a column recovery recomputes. Only the
 * cleaning thread clears persistent bits (under clean_lock), so the test holds. */
static void recompute_object(kr_pool *pool, const struct kr_block *b)
{
	struct kr_stale *s = pool->stale;
	struct kr_obj_hdr *hdr = (struct kr_obj_hdr *)(pool->pm.base + b->off);
	if (hdr->size == 0 || hdr->size > b->bytes - sizeof(*hdr))
		return; /* not an object's header: the check reports it, nothing to follow */
	uint32_t crc = kr_obj_crc(hdr, hdr + 1);
	if (crc == hdr->crc)
		return;
	uint64_t g = group_of(pool, b->off);
	if (!group_in_map(s, g) && mark_group(pool, g) != KR_OK)
		return; /* the pool fails (the fence did): leave the checksum as it is */
	kr_redund_write_direct(&pool->redund, b->off + offsetof(struct kr_obj_hdr, crc), &crc, sizeof(crc));
	kr_tx_forget(pool, b->off + sizeof(*hdr), hdr->size);
}

int kr_stale_trust_object(kr_pool *pool, const struct kr_block *b)
{
	struct kr_stale *s = pool->stale;
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_OBJ_CSUM))
		return KR_OK;
	/* As a pass: one at a time (a checksum written twice would patch its parity twice),
	 * with commits held still. */
	pthread_mutex_lock(&s->clean_lock);
	struct kr_quiesce q;
	int rc = KR_OK;
	if (kr_quiesce_hold_settled(&q, &pool->log, 0)) { /* invariant 4 */
		recompute_object(pool, b);
		rc = kr_pm_fence(&pool->pm);
		kr_quiesce_release(&q);
	}
	pthread_mutex_unlock(&s->clean_lock);
	return rc;
}

/* Every live object with bytes in the page at pg. *last: the last one done (an object
 * spanning pages of one column is done once). */
static void recompute_page_objects(kr_pool *pool, uint64_t pg, uint64_t *last)
{
	struct kr_block b;
	for (uint64_t pos = pg; pos < pg + P && kr_heap_next_owner(&pool->heap, pos, pg + P, &b);
	     pos = b.off + b.bytes) {
		if (b.off != *last)
			recompute_object(pool, &b);
		*last = b.off;
	}
}

/* Group g's pages persisted to since the last pass, moved from `pages` to `hits`. A pass
 * claims them with the group's bit, before its heavy barrier: a persist that looks at
 * either bit after the barrier finds it clear and marks again. */
static void claim_pages(kr_pool *pool, uint64_t g)
{
	struct kr_stale *s = pool->stale;
	const struct kr_geom *geo = &pool->g;
	for (uint64_t c = g * s->k; c < g * s->k + group_cols(s, g); c++)
		for (uint32_t r = 0; r < geo->rows; r++) {
			uint64_t i = (kr_geom_column_page(geo, c, r) - geo->heap_off) / P;
			uint64_t bit = 1ull << (i % 64);
			if (atomic_load_explicit(&s->pages[i / 64], memory_order_relaxed) & bit)
				s->hits[i / 64] |= atomic_fetch_and(&s->pages[i / 64], ~bit) & bit;
		}
}

/* Group g's columns: parity recomputed, and the checksums of the objects on its pages
 * (every page, or those claimed by claim_pages). Flushed, not fenced. */
static void clean_group(kr_pool *pool, uint64_t g, int every_page)
{
	struct kr_stale *s = pool->stale;
	const struct kr_geom *geo = &pool->g;
	uint64_t lo = g * s->k, hi = lo + group_cols(s, g);
	int csums = (pool->hdr.ro_compat & KR_FEAT_RO_OBJ_CSUM) != 0;
	for (uint64_t c = lo; c < hi; c++) {
		uint64_t last = 0;
		for (uint32_t r = 0; r < geo->rows; r++) {
			uint64_t pg = kr_geom_column_page(geo, c, r), i = (pg - geo->heap_off) / P;
			uint64_t bit = 1ull << (i % 64);
			int hit = (s->hits[i / 64] & bit) != 0;
			s->hits[i / 64] &= ~bit;
			if (csums && (hit || every_page))
				recompute_page_objects(pool, pg, &last);
			/* Persisted to: a persist may still be between its look at the marks
			 * and its fence. Its bytes, computed over here, are written back with
			 * the pass's own fence, before the unmark (invariant 1). */
			if (hit)
				kr_pm_flush(&pool->pm, pool->pm.base + pg, P);
		}
		if (pool->hdr.ro_compat & KR_FEAT_RO_PARITY)
			kr_parity_recompute(&pool->redund.parity, kr_geom_column_page(geo, c, 0), P);
	}
	atomic_fetch_add(&pool->stale_cleaned, hi - lo);
}

/* Columns [lo, hi) mapped in, one call per row of each zone they cross. */
static void populate_columns(kr_pool *pool, uint64_t lo, uint64_t hi)
{
	const struct kr_geom *geo = &pool->g;
	while (lo < hi) {
		uint64_t zone_end = (lo / geo->row_pages + 1) * geo->row_pages;
		uint64_t end = hi < zone_end ? hi : zone_end;
		for (uint32_t r = 0; r <= geo->rows; r++) /* the parity row too */
			kr_pm_populate(&pool->pm, kr_geom_column_page(geo, lo, r), (end - lo) * P);
		lo = end;
	}
}

/* The pages of the groups in `bits` that no pass has mapped yet, mapped in runs of
 * consecutive groups before the pass reads every row of them. Faulted in one by one, the
 * first pass over a fresh working set took 510 ms of CPU for 392 columns (a KVM guest),
 * the next ones 17 ms. Caller holds clean_lock, or is recovery. */
static void populate_groups(kr_pool *pool, const uint64_t *bits)
{
	struct kr_stale *s = pool->stale;
	uint64_t run_lo = 0, run_hi = 0; /* groups */
	for (uint64_t w = 0; w < MAP_WORDS; w++) {
		uint64_t todo = bits[w] & ~s->mapped[w];
		s->mapped[w] |= todo;
		for (; todo; todo &= todo - 1) {
			uint64_t g = w * 64 + (uint64_t)__builtin_ctzll(todo);
			if (g != run_hi) {
				populate_columns(pool, run_lo * s->k, run_hi * s->k);
				run_lo = g;
			}
			run_hi = g + 1;
		}
	}
	populate_columns(pool, run_lo * s->k, run_hi * s->k < s->ncols ? run_hi * s->k : s->ncols);
}

static void populate_marked(kr_pool *pool)
{
	uint64_t bits[MAP_WORDS];
	for (uint64_t w = 0; w < MAP_WORDS; w++)
		bits[w] = atomic_load_explicit(&pool->stale->dram[w], memory_order_relaxed);
	populate_groups(pool, bits);
}

/* Invariant 2: the persistent bits of `done` whose DRAM bits stayed clear. */
static int unmark(kr_pool *pool, const uint64_t *done)
{
	struct kr_stale *s = pool->stale;
	pthread_mutex_lock(&s->lock);
	int any = 0;
	for (uint64_t w = 0; w < MAP_WORDS; w++) {
		uint64_t clear = done[w] & ~atomic_load(&s->dram[w]);
		if (!clear)
			continue;
		for (uint64_t b = clear & s->map[0][w]; b; b &= b - 1)
			atomic_fetch_sub(&pool->stale_columns, group_cols(s, w * 64 + (uint64_t)__builtin_ctzll(b)));
		any = 1;
		for (int i = 0; i < 2; i++) {
			kr_pm_andn64(&pool->pm, &s->map[i][w], clear);
			kr_pm_flush(&pool->pm, &s->map[i][w], sizeof(uint64_t));
		}
	}
	if (any)
		atomic_fetch_add(&s->unmarks, 1);
	pthread_mutex_unlock(&s->lock);
	return any ? kr_pm_fence(&pool->pm) : KR_OK;
}

/* Invariants 2 and 5 together: a group recomputed over is unmarked only once no replay can
 * bring back older bytes or checksums into it (a transaction's record of an object whose
 * checksum trailed, say). durable_seq is pushed past its writers; a group whose writer it
 * cannot pass yet (an open in-place transaction holds it back) stays marked, for the next
 * pass. The group's writers are read after the sync, so a commit since only keeps a mark. */
static int unmark_replay_safe(kr_pool *pool, uint64_t *done)
{
	struct kr_stale *s = pool->stale;
	uint64_t durable = kr_log_durable_seq(&pool->log);
	int synced = 0, rc = KR_OK;
	for (uint64_t w = 0; w < MAP_WORDS && rc == KR_OK; w++)
		for (uint64_t bits = done[w]; bits && rc == KR_OK; bits &= bits - 1) {
			uint64_t g = w * 64 + (uint64_t)__builtin_ctzll(bits);
			if (kr_tx_group_writer(pool, g) <= durable)
				continue;
			if (!synced++) {
				rc = kr_log_sync(&pool->log, NULL);
				durable = kr_log_durable_seq(&pool->log);
			}
			if (rc == KR_OK && kr_tx_group_writer(pool, g) > durable) {
				done[w] &= ~(bits & -bits);
				atomic_fetch_or(&s->dram[w], bits & -bits);
			}
		}
	return rc ? rc : unmark(pool, done);
}

int kr_stale_clean(kr_pool *pool)
{
	struct kr_stale *s = pool->stale;
	if (!s || pool->pm.readonly || atomic_load(&pool->failed))
		return KR_OK; /* a failed pool is recovered by its next open */
	uint64_t any = 0;
	for (uint64_t w = 0; w < MAP_WORDS && !any; w++)
		any = atomic_load(&s->dram[w]);
	if (!any)
		return KR_OK;
	uint64_t done[MAP_WORDS] = {0};
	pthread_mutex_lock(&s->clean_lock);
	populate_marked(pool); /* before commits are held still: it is slow, and reads nothing */
	struct kr_quiesce q;
	if (!kr_quiesce_hold_settled(&q, &pool->log, 0)) { /* invariant 4: the next pass */
		pthread_mutex_unlock(&s->clean_lock);
		return KR_OK;
	}
	kr_tx_inflight_hold(pool);
	/* Every bit is claimed (group, then its pages) before the heavy barrier and every byte
	 * read after it: a persist whose stores the pass could miss sees a claimed bit clear
	 * and marks again (invariant 1; barrier.h). */
	for (uint64_t w = 0; w < MAP_WORDS; w++) {
		uint64_t bits = atomic_exchange(&s->dram[w], 0);
		for (uint64_t b = bits; b; b &= b - 1) {
			uint64_t bit = b & -b, g = w * 64 + (uint64_t)__builtin_ctzll(b);
			if (kr_tx_inflight_in_columns(pool, g * s->k, g * s->k + group_cols(s, g))) { /* invariant 4: next pass */
				atomic_fetch_or(&s->dram[w], bit);
				continue;
			}
			claim_pages(pool, g);
			done[w] |= bit;
		}
	}
	int rc = KR_OK;
	if (kr_barrier_heavy() != 0) { /* the claims are given back: a failed pool's next open recovers */
		rc = kr_err_set(KR_E_IO_SYNC, "%s: membarrier failed: the stale map cannot be cleaned", pool->path);
		for (uint64_t w = 0; w < MAP_WORDS; w++)
			atomic_fetch_or(&s->dram[w], done[w]);
		for (uint64_t w = 0; w < (s->npages + 63) / 64; w++) {
			atomic_fetch_or(&s->pages[w], s->hits[w]);
			s->hits[w] = 0;
		}
	}
	for (uint64_t w = 0; w < MAP_WORDS && rc == KR_OK; w++)
		for (uint64_t b = done[w]; b; b &= b - 1)
			clean_group(pool, w * 64 + (uint64_t)__builtin_ctzll(b), 0);
	kr_tx_inflight_release(pool);
	if (rc == KR_OK)
		rc = kr_pm_fence(&pool->pm);
	kr_quiesce_release(&q);
	if (rc == KR_OK)
		rc = unmark_replay_safe(pool, done);
	pthread_mutex_unlock(&s->clean_lock);
	return rc;
}

int kr_stale_recover(kr_pool *pool)
{
	struct kr_stale *s = pool->stale;
	if (!s)
		return KR_OK;
	uint64_t done[MAP_WORDS] = {0}, any = 0, more = 1;
	populate_marked(pool);
	while (more) { /* a checksum's column marked on the way is done too */
		more = 0;
		for (uint64_t w = 0; w < MAP_WORDS; w++) {
			uint64_t bits = atomic_exchange(&s->dram[w], 0);
			done[w] |= bits;
			more |= bits;
			for (; bits; bits &= bits - 1)
				clean_group(pool, w * 64 + (uint64_t)__builtin_ctzll(bits), 1);
		}
		any |= more;
	}
	if (!any)
		return KR_OK;
	int rc = kr_pm_fence(&pool->pm);
	return rc ? rc : unmark(pool, done);
}

/* ---------------------------------------------------------------------------------------
 * The cleaner thread
 * ------------------------------------------------------------------------------------- */
/* The cleaner sleeps at least IDLE_PER_BUSY times the CPU time of its last pass, so that
 * it takes at most a tenth of a CPU, and at most MAX_PERIODS periods, which bounds the
 * window. A pass recomputes every row of each marked column: persists spread over a large
 * working set make it tens of milliseconds of a CPU the program may share, and its reads
 * evict the program's working set from the caches. CPU time, not the pass's length: on a
 * shared CPU a pass lasts twice its work. */
#define IDLE_PER_BUSY 9
#define MAX_PERIODS 10

static uint64_t now_ns(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *cleaner(void *arg)
{
	kr_pool *pool = arg;
	struct kr_stale *s = pool->stale;
	uint64_t busy_ns = 0; /* the last pass's CPU time */
	pthread_mutex_lock(&s->tlock);
	while (!s->stop) {
		uint64_t wait_ns = (uint64_t)s->period_ms * 1000000u;
		if (wait_ns < IDLE_PER_BUSY * busy_ns)
			wait_ns = IDLE_PER_BUSY * busy_ns < MAX_PERIODS * wait_ns ? IDLE_PER_BUSY * busy_ns
										  : MAX_PERIODS * wait_ns;
		uint64_t until_ns = now_ns(CLOCK_REALTIME) + wait_ns; /* the condition's clock */
		struct timespec until = {.tv_sec = (time_t)(until_ns / 1000000000u),
					 .tv_nsec = (long)(until_ns % 1000000000u)};
		pthread_cond_timedwait(&s->cond, &s->tlock, &until);
		if (s->stop)
			break;
		pthread_mutex_unlock(&s->tlock);
		uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		if (kr_stale_clean(pool) != KR_OK)
			kr_pool_fail(pool, kr_errcode());
		busy_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
		pthread_mutex_lock(&s->tlock);
	}
	pthread_mutex_unlock(&s->tlock);
	return NULL;
}

void kr_stale_stop(kr_pool *pool)
{
	struct kr_stale *s = pool->stale;
	if (!s)
		return;
	pthread_mutex_lock(&s->tlock);
	s->stop = 1;
	int started = s->started;
	s->started = 0;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->tlock);
	if (started)
		pthread_join(s->thread, NULL);
}
