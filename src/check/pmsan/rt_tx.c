/*
 * rt_tx.c - the pmsan runtime's model of libpmemobj transactions and allocations, and the
 * rules checked on it: 2 (unlogged-write), 3 (uninitialized-alloc), 4 (use-after-free),
 * 5 (logging-race); with the library-call hooks (hooks.def) of transactions, allocations
 * and frees that feed it. It stands on the per-thread records (rt_track.c); the store and
 * load hooks above it (rt_hooks.c) ask it whether a store belongs to a transaction and
 * whether an access touches a freed object.
 *
 * Model
 *
 *   A thread's transaction (struct pm_tx) exists from its outermost pmemobj_tx_begin to
 *   the pmemobj_tx_end after which libpmemobj's stage is TX_STAGE_NONE (a nested abort
 *   skips the inner ends); nested begins only count depth. Only its work stage is
 *   transactional: stores in the stage callbacks' blocks (TX_ONCOMMIT, TX_ONABORT,
 *   TX_FINALLY) and after pmemobj_tx_commit are plain stores. It holds:
 *     added   - ranges given to pmemobj_tx_add_range* (the undo log);
 *     allocs  - objects pmemobj_tx_*alloc returned, sorted by address, each with its call
 *               site, whether the allocator initialised it (zalloc, strdup, realloc's
 *               copy) and whether the transaction has written it since;
 *     pending - objects pmemobj_tx_free'd in it (dead now, freed at commit).
 *   A store in the work stage must fall in added or allocs (rule 2) and must not touch
 *   what a concurrent transaction of another thread added (rule 5: a store there races
 *   with that transaction's undo log; the other transaction's own stores lie in its added
 *   ranges or its new objects, or were reported under rule 2). At the end: committed -
 *   every allocation neither initialised nor written is a rule 3 violation, and pending
 *   becomes freed; aborted - the allocations become freed. Freed objects (until an
 *   allocation returns their memory) live in the mappings' freed bitmaps (rt_track.c),
 *   checked by every store and, once anything was freed, every load (rule 4).
 *
 *   A store by a thread outside any transaction into a range that a live transaction of
 *   another thread added or allocated belongs to that transaction (a grouped transaction:
 *   workers filling in what their parent logged); it is neither a rule 1 store nor a
 *   rule 2 violation.
 *
 *   Invariants
 *   1. A transaction's added, allocs and pending change only with its mutex held, by its
 *      own thread; other threads read them only with that mutex held.
 *   2. t->tx is set and cleared with the registry lock held, so a thread walking the
 *      registry sees live transactions only.
 *   3. A live transaction's added ranges and new objects are counted in the line filter,
 *      once each, in the shared table and in its thread's; a thread without a transaction
 *      counts nothing there. (So a bucket whose shared count is the thread's own holds no
 *      line of another live transaction, and the walk may be skipped.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wchar.h>

#include "pmsan.h"

/* libpmemobj's PMEMoid, by value: two 64-bit halves. */
struct oid {
	uint64_t pool_uuid_lo;
	uint64_t off;
};

/* Weak: a program that uses libpmem alone does not link libpmemobj. */
extern void *pmemobj_direct(struct oid oid) __attribute__((weak));
extern size_t pmemobj_alloc_usable_size(struct oid oid) __attribute__((weak));
extern int pmemobj_tx_stage(void) __attribute__((weak));

#define TX_STAGE_NONE 0   /* enum pobj_tx_stage */
#define TX_STAGE_WORK 1
#define POBJ_FLAG_ZERO 1u /* POBJ_XALLOC_ZERO */
#define POBJ_ACTION_SIZE 128u /* sizeof(struct pobj_action), libpmemobj 1.x's ABI */

struct pm_alloc {
	uintptr_t lo, hi;
	const struct pmsan_loc *loc;
	int initialized; /* by the allocator, or freed again in the transaction */
	int written;
};

struct pm_tx {
	pthread_mutex_t lock;
	struct byteset added;
	struct ivset pending;
	struct vec allocs; /* struct pm_alloc, sorted by lo, disjoint */
	struct vec noted;  /* struct span: what it counted in the line filter, to take back */
	int aborted;
};

static _Atomic int live_txs;

/* ---- the line filter
 *
 * Rule 5 and grouped stores ask, at every store in a transaction while another runs,
 * whether another thread's transaction added or allocated those bytes. Walking the
 * registry and the other transactions under their locks at every store made two threads'
 * transactions wait on each other in the kernel (2-6x their plain time on PMDK's trees).
 * So every live transaction counts the cache lines it added or allocated in one shared
 * table of counters (lines hashed to buckets), and its own counts in a table of its thread.
 * A line whose bucket holds no count but the thread's own is in no other transaction:
 * nothing to walk. Collisions only send a store to the walk, which decides exactly; a
 * range too long to count (WIDE_LINES) counts in `wide` instead, which sends every store
 * to the walk while it lives. */
#define FILTER_BUCKETS 8192u
#define WIDE_LINES 65536u
struct span {
	uintptr_t lo, hi;
};
static _Atomic uint32_t filter_refs[FILTER_BUCKETS];
static _Atomic uint32_t filter_wide;
/* The thread's own counts: allocated at its first transaction (32 KiB of static TLS in
 * every thread of the checked program would fail a small-stack pthread_create), freed when
 * the thread ends; NULL counts nothing. */
static __thread uint32_t *filter_mine;
static __thread uint32_t filter_mine_wide;

static uint32_t filter_bucket(uintptr_t line)
{
	return (uint32_t)((line * 0x9e3779b97f4a7c15ull) >> 51) & (FILTER_BUCKETS - 1);
}

/* Counts [lo, hi) in (delta +1) or out of (-1) the filter, for the calling thread. */
static void filter_count(uintptr_t lo, uintptr_t hi, int delta)
{
	if (hi <= lo)
		return;
	uintptr_t first = lo >> 6, last = (hi - 1) >> 6;
	if (last - first >= WIDE_LINES) {
		atomic_fetch_add_explicit(&filter_wide, (uint32_t)delta, memory_order_relaxed);
		filter_mine_wide += (uint32_t)delta;
		return;
	}
	for (uintptr_t l = first; l <= last; l++) {
		uint32_t b = filter_bucket(l);
		atomic_fetch_add_explicit(&filter_refs[b], (uint32_t)delta, memory_order_relaxed);
		filter_mine[b] += (uint32_t)delta;
	}
}

/* Counts [lo, hi) for x and remembers it. Caller holds x->lock. */
static void filter_note(struct pm_tx *x, uintptr_t lo, uintptr_t hi)
{
	if (!filter_mine)
		filter_mine = pmsan_xalloc(FILTER_BUCKETS * sizeof(*filter_mine));
	filter_count(lo, hi, 1);
	struct span *sp = vec_push(&x->noted);
	sp->lo = lo;
	sp->hi = hi;
}

#ifdef KR_DEBUG_INVARIANTS
static int filter_empty(void)
{
	for (uint32_t b = 0; filter_mine && b < FILTER_BUCKETS; b++)
		if (filter_mine[b])
			return 0;
	return filter_mine_wide == 0;
}
#endif

/* Whether another thread's live transaction may have added or allocated a byte of [a, e). */
static int filter_others(uintptr_t a, uintptr_t e)
{
	if (atomic_load_explicit(&filter_wide, memory_order_relaxed) != filter_mine_wide ||
	    ((e - 1) >> 6) - (a >> 6) >= FILTER_BUCKETS) /* a store over every bucket: walk */
		return 1;
	for (uintptr_t l = a >> 6; l <= (e - 1) >> 6; l++) {
		uint32_t b = filter_bucket(l);
		if (atomic_load_explicit(&filter_refs[b], memory_order_relaxed) !=
		    (filter_mine ? filter_mine[b] : 0))
			return 1;
	}
	return 0;
}

typedef const struct pmsan_loc loc_t;

/* The bytes of the object an oid names, or 0. */
static int obj_range(uint64_t uuid, uint64_t off, uintptr_t *lo, uintptr_t *hi)
{
	if (!pmemobj_direct || off == 0 || uuid == 0)
		return 0;
	struct oid o = {uuid, off};
	void *p = pmemobj_direct(o);
	if (p == NULL)
		return 0;
	*lo = (uintptr_t)p;
	*hi = *lo + (pmemobj_alloc_usable_size ? pmemobj_alloc_usable_size(o) : 1);
	return 1;
}

/* ---- use after free */

int pmsan_tx_pending(const struct pm_thread *t, uintptr_t lo, uintptr_t hi)
{
	return t->tx->pending.n > 0 && ivset_overlaps(&t->tx->pending, lo, hi);
}

void pmsan_check_freed(struct pm_thread *t, const struct pm_range *r, uintptr_t a,
		       uint64_t size, loc_t *loc, const char *access)
{
	uintptr_t e = a + size;
	if (pmsan_freed_test(r, a, e))
		pmsan_report(PMSAN_R4, loc, 1,
			     "%s %llu bytes of an object freed earlier (by a committed transaction or an "
			     "atomic free)",
			     access, (unsigned long long)size);
	else if (t->tx && ivset_overlaps(&t->tx->pending, a, e))
		pmsan_report(PMSAN_R4, loc, 1,
			     "%s %llu bytes of an object freed earlier in the running transaction",
			     access, (unsigned long long)size);
}

/* ---- stores inside transactions */

/* The first allocation of x that ends after address a (it contains a if its lo <= a), or
 * NULL. Caller holds x->lock. */
static struct pm_alloc *alloc_from(struct pm_tx *x, uintptr_t a)
{
	struct pm_alloc *v = x->allocs.p;
	size_t lo = 0, hi = x->allocs.n;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (v[m].hi <= a)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < x->allocs.n ? &v[lo] : NULL;
}

/* Whether every byte of [a, e) lies in x's added ranges or new objects; marks the new
 * objects it touches written. Caller holds x->lock. */
static int tx_covers(struct pm_tx *x, uintptr_t a, uintptr_t e)
{
	int ok = 1;
	while (a < e) {
		struct pm_alloc *al = alloc_from(x, a);
		if (al && al->lo <= a) {
			al->written = 1;
			a = al->hi;
			continue;
		}
		/* Up to the next new object (or the end), the bytes must have been added. */
		uintptr_t next = al && al->lo < e ? al->lo : e;
		if (!byteset_covers(&x->added, a, next))
			ok = 0;
		a = next;
	}
	return ok;
}

static void logging_race_check(struct pm_thread *t, uintptr_t a, uintptr_t e, loc_t *loc)
{
	if (!filter_others(a, e))
		return;
	pthread_mutex_lock(&pmsan_registry_lock);
	for (struct pm_thread *u = pmsan_threads; u; u = u->next) {
		struct pm_tx *x = u->tx;
		if (u == t || x == NULL)
			continue;
		pthread_mutex_lock(&x->lock);
		int logged = byteset_overlaps(&x->added, a, e);
		pthread_mutex_unlock(&x->lock);
		if (logged) {
			pmsan_report(PMSAN_R5, loc, 1,
				     "%llu bytes changed here are also in the undo log of a concurrent "
				     "transaction of thread T%d; an abort of either undoes the other's update",
				     (unsigned long long)(e - a), u->tid);
			break;
		}
	}
	pthread_mutex_unlock(&pmsan_registry_lock);
}

/* A store outside a transaction into what another thread's live transaction logged or
 * allocated: a grouped transaction's worker. Returns 1 if so. */
static int grouped_store(struct pm_thread *t, uintptr_t a, uintptr_t e)
{
	int found = 0;
	if (!filter_others(a, e))
		return 0;
	pthread_mutex_lock(&pmsan_registry_lock);
	for (struct pm_thread *u = pmsan_threads; u && !found; u = u->next) {
		struct pm_tx *x = u->tx;
		if (u == t || x == NULL || x->aborted)
			continue;
		pthread_mutex_lock(&x->lock);
		found = tx_covers(x, a, e);
		pthread_mutex_unlock(&x->lock);
	}
	pthread_mutex_unlock(&pmsan_registry_lock);
	return found;
}

/* Whether the calling thread's transaction is in its work stage, the only one whose stores
 * libpmemobj's undo log can cover: in TX_ONCOMMIT, TX_ONABORT and TX_FINALLY, and between
 * pmemobj_tx_commit and pmemobj_tx_end, a store is a plain one again (rule 1, not 2). An
 * abort - explicit, or by a failed call such as pmemobj_tx_alloc - also ends the stage. */
static int tx_working(void)
{
	return pmemobj_tx_stage && pmemobj_tx_stage() == TX_STAGE_WORK;
}

int pmsan_tx_store(struct pm_thread *t, uintptr_t a, uint64_t size, loc_t *loc)
{
	uintptr_t e = a + size;
	struct pm_tx *x = t->tx;
	if (t->depth > 0 && x && tx_working()) {
		pthread_mutex_lock(&x->lock);
		int ok = tx_covers(x, a, e);
		pthread_mutex_unlock(&x->lock);
		if (!ok)
			pmsan_report(PMSAN_R2, loc, 1,
				     "store of %llu bytes in a transaction to an object that existed "
				     "before it, outside every range added to its undo log",
				     (unsigned long long)size);
		if (atomic_load_explicit(&live_txs, memory_order_relaxed) > 1)
			logging_race_check(t, a, e, loc);
		return 1;
	}
	if (atomic_load_explicit(&live_txs, memory_order_relaxed) > 0)
		return grouped_store(t, a, e);
	return 0;
}

/* ---- transaction life cycle */

static void tx_finish(struct pm_thread *t, int committed, loc_t *loc)
{
	struct pm_tx *x = t->tx;
	pthread_mutex_lock(&pmsan_registry_lock);
	KR_INVARIANT("rt_tx.c", 2, pmsan_held(&pmsan_registry_lock));
	t->tx = NULL;
	atomic_fetch_sub(&live_txs, 1);
	pthread_mutex_unlock(&pmsan_registry_lock);
	for (size_t i = 0; i < x->allocs.n; i++) {
		struct pm_alloc *al = &VEC_AT(&x->allocs, struct pm_alloc, i);
		if (!committed) {
			pmsan_freed_mark(al->lo, al->hi, 1);
		} else if (!al->initialized && !al->written) {
			pmsan_report(PMSAN_R3, al->loc, 0,
				     "object of %lu bytes allocated here (not zeroed) is never written "
				     "before its transaction commits",
				     (unsigned long)(al->hi - al->lo));
			pmsan_note("committed at %s:%u (%s)", loc->file, loc->line, loc->func);
			pmsan_note_stack();
		}
	}
	if (committed)
		for (size_t i = 0; i < x->pending.n; i++)
			pmsan_freed_mark(x->pending.lo[i], x->pending.hi[i], 1);
	for (size_t i = 0; i < x->noted.n; i++) {
		const struct span *sp = &VEC_AT(&x->noted, struct span, i);
		filter_count(sp->lo, sp->hi, -1);
	}
	KR_INVARIANT("rt_tx.c", 3, filter_empty());
	byteset_free(&x->added);
	ivset_free(&x->pending);
	vec_free(&x->allocs);
	vec_free(&x->noted);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* A thread that ends inside a transaction aborts it. The transaction layer keeps a thread
 * key of its own for that, set at the thread's first transaction, rather than have the
 * thread records below (rt_track.c), whose key ends them, call up into it: the two ends are
 * independent (an aborted transaction reports nothing, and its stores were never records). */
static pthread_key_t tx_key;
static pthread_once_t tx_key_once = PTHREAD_ONCE_INIT;

static void tx_thread_exit(void *p)
{
	struct pm_thread *t = p;
	if (t->tx) {
		t->depth = 0;
		tx_finish(t, 0, &pmsan_loc_exit);
	}
	free(filter_mine);
	filter_mine = NULL;
}

static void make_tx_key(void)
{
	pthread_key_create(&tx_key, tx_thread_exit);
}

void __pmsan_post_pmemobj_tx_begin(int ret, void *pop, void *env, loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	if (t->depth++ == 0) {
		pthread_once(&tx_key_once, make_tx_key);
		if (pthread_getspecific(tx_key) == NULL)
			pthread_setspecific(tx_key, t);
		struct pm_tx *x = pmsan_xalloc(sizeof(*x));
		pthread_mutex_init(&x->lock, NULL);
		x->allocs.elem = sizeof(struct pm_alloc);
		x->noted.elem = sizeof(struct span);
		pthread_mutex_lock(&pmsan_registry_lock);
		KR_INVARIANT("rt_tx.c", 2, pmsan_held(&pmsan_registry_lock));
		t->tx = x;
		atomic_fetch_add(&live_txs, 1);
		pthread_mutex_unlock(&pmsan_registry_lock);
	}
	if (ret != 0)
		t->tx->aborted = 1;
}

void __pmsan_pre_pmemobj_tx_abort(int err, loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	if (t->tx)
		t->tx->aborted = 1;
}

void __pmsan_post_pmemobj_tx_end(int ret, loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	if (t->depth > 0)
		t->depth--;
	/* The transaction is over when libpmemobj's stage is back to none, whatever the
	 * depth says: an abort in a nested transaction passes on to the outer one by a
	 * longjmp out of the inner pmemobj_tx_end, whose post-hook then never runs. */
	if (t->tx == NULL || (pmemobj_tx_stage && pmemobj_tx_stage() != TX_STAGE_NONE))
		return;
	t->depth = 0;
	tx_finish(t, ret == 0 && !t->tx->aborted, loc);
}

/* The calling thread's transaction, locked, or NULL outside one: the only way to a
 * transaction whose sets change (invariant 1). */
static struct pm_tx *locked_tx(void)
{
	if (!pmsan_active)
		return NULL;
	struct pm_tx *x = pmsan_self()->tx;
	if (x)
		pthread_mutex_lock(&x->lock);
	KR_INVARIANT("rt_tx.c", 1, !x || (pmsan_held(&x->lock) && pmsan_self()->tx == x));
	return x;
}

static void tx_add(uintptr_t lo, uint64_t size)
{
	struct pm_tx *x = locked_tx();
	if (x == NULL)
		return;
	byteset_add(&x->added, lo, lo + size);
	filter_note(x, lo, lo + size);
	pthread_mutex_unlock(&x->lock);
}

void __pmsan_post_pmemobj_tx_add_range(int ret, uint64_t uuid, uint64_t oid_off, uint64_t off,
				       uint64_t size, loc_t *loc)
{
	uintptr_t lo, hi;
	if (ret == 0 && obj_range(uuid, oid_off, &lo, &hi))
		tx_add(lo + off, size);
}

void __pmsan_post_pmemobj_tx_xadd_range(int ret, uint64_t uuid, uint64_t oid_off, uint64_t off,
					uint64_t size, uint64_t flags, loc_t *loc)
{
	__pmsan_post_pmemobj_tx_add_range(ret, uuid, oid_off, off, size, loc);
}

void __pmsan_post_pmemobj_tx_add_range_direct(int ret, const void *ptr, uint64_t size, loc_t *loc)
{
	if (ret == 0)
		tx_add((uintptr_t)ptr, size);
}

void __pmsan_post_pmemobj_tx_xadd_range_direct(int ret, const void *ptr, uint64_t size,
					       uint64_t flags, loc_t *loc)
{
	if (ret == 0)
		tx_add((uintptr_t)ptr, size);
}

/* An object the transaction allocated: `size` bytes asked for (0: unknown, the usable
 * size counts). */
static void tx_alloc(uint64_t uuid, uint64_t off, size_t size, int initialized, loc_t *loc)
{
	uintptr_t lo, hi;
	if (!pmsan_active || !obj_range(uuid, off, &lo, &hi))
		return;
	pmsan_freed_mark(lo, hi, 0);
	if (size && lo + size < hi)
		hi = lo + size;
	struct pm_tx *x = locked_tx();
	if (x == NULL)
		return;
	/* Insert in address order. */
	vec_push(&x->allocs);
	struct pm_alloc *v = x->allocs.p;
	size_t i = x->allocs.n - 1;
	while (i > 0 && v[i - 1].lo > lo) {
		v[i] = v[i - 1];
		i--;
	}
	v[i] = (struct pm_alloc){lo, hi, loc, initialized, 0};
	filter_note(x, lo, hi);
	pthread_mutex_unlock(&x->lock);
}

void __pmsan_post_pmemobj_tx_alloc(uint64_t uuid, uint64_t off, size_t size, uint64_t type,
				   loc_t *loc)
{
	tx_alloc(uuid, off, size, 0, loc);
}

void __pmsan_post_pmemobj_tx_zalloc(uint64_t uuid, uint64_t off, size_t size, uint64_t type,
				    loc_t *loc)
{
	tx_alloc(uuid, off, size, 1, loc);
}

void __pmsan_post_pmemobj_tx_xalloc(uint64_t uuid, uint64_t off, size_t size, uint64_t type,
				    uint64_t flags, loc_t *loc)
{
	tx_alloc(uuid, off, size, (flags & POBJ_FLAG_ZERO) != 0, loc);
}

void __pmsan_post_pmemobj_tx_strdup(uint64_t uuid, uint64_t off, const char *s, uint64_t type,
				    loc_t *loc)
{
	tx_alloc(uuid, off, 0, 1, loc);
}

void __pmsan_post_pmemobj_tx_xstrdup(uint64_t uuid, uint64_t off, const char *s, uint64_t type,
				     uint64_t flags, loc_t *loc)
{
	tx_alloc(uuid, off, 0, 1, loc);
}

void __pmsan_post_pmemobj_tx_wcsdup(uint64_t uuid, uint64_t off, const wchar_t *s, uint64_t type,
				    loc_t *loc)
{
	tx_alloc(uuid, off, 0, 1, loc);
}

void __pmsan_post_pmemobj_tx_xwcsdup(uint64_t uuid, uint64_t off, const wchar_t *s,
				     uint64_t type, uint64_t flags, loc_t *loc)
{
	tx_alloc(uuid, off, 0, 1, loc);
}

/* A transactional free: the object is dead from here on, and freed at commit. */
static void tx_free(uint64_t uuid, uint64_t off)
{
	uintptr_t lo, hi;
	if (!pmsan_active || !obj_range(uuid, off, &lo, &hi))
		return;
	struct pm_tx *x = locked_tx();
	if (x == NULL)
		return;
	ivset_add(&x->pending, lo, hi);
	/* Freeing what this transaction allocated is no failure to initialise it. */
	struct pm_alloc *al = alloc_from(x, lo);
	if (al && al->lo <= lo)
		al->initialized = 1;
	pthread_mutex_unlock(&x->lock);
	atomic_store(&__pmsan_watch_loads, 1);
}

void __pmsan_pre_pmemobj_tx_free(uint64_t uuid, uint64_t off, loc_t *loc)
{
	tx_free(uuid, off);
}

void __pmsan_pre_pmemobj_tx_xfree(uint64_t uuid, uint64_t off, uint64_t flags, loc_t *loc)
{
	tx_free(uuid, off);
}

/* Reallocation: the old object dies if the new one lies elsewhere. */
static __thread uintptr_t realloc_old_lo, realloc_old_hi;

void __pmsan_pre_pmemobj_tx_realloc(uint64_t uuid, uint64_t off, size_t size, uint64_t type,
				    loc_t *loc)
{
	realloc_old_lo = realloc_old_hi = 0;
	if (pmsan_active)
		obj_range(uuid, off, &realloc_old_lo, &realloc_old_hi);
}

void __pmsan_pre_pmemobj_tx_zrealloc(uint64_t uuid, uint64_t off, size_t size, uint64_t type,
				     loc_t *loc)
{
	__pmsan_pre_pmemobj_tx_realloc(uuid, off, size, type, loc);
}

static void tx_realloc_done(uint64_t nuuid, uint64_t noff, uint64_t ouuid, uint64_t ooff,
			    loc_t *loc)
{
	uintptr_t lo, hi;
	if (!pmsan_active || !obj_range(nuuid, noff, &lo, &hi))
		return;
	if (lo == realloc_old_lo)
		return;
	if (realloc_old_lo)
		tx_free(ouuid, ooff);
	tx_alloc(nuuid, noff, 0, 1, loc);
}

void __pmsan_post_pmemobj_tx_realloc(uint64_t nuuid, uint64_t noff, uint64_t ouuid, uint64_t ooff,
				     size_t size, uint64_t type, loc_t *loc)
{
	tx_realloc_done(nuuid, noff, ouuid, ooff, loc);
}

void __pmsan_post_pmemobj_tx_zrealloc(uint64_t nuuid, uint64_t noff, uint64_t ouuid,
				      uint64_t ooff, size_t size, uint64_t type, loc_t *loc)
{
	tx_realloc_done(nuuid, noff, ouuid, ooff, loc);
}

/* ---- atomic allocations: the library persists the object; constructors run inside the
 * call, on memory that may still be marked freed. */

static __thread struct oid atomic_old;

static void atomic_alloc_begin(struct oid *oidp)
{
	if (!pmsan_active)
		return;
	pmsan_self()->in_alloc++;
	atomic_old = oidp ? *oidp : (struct oid){0, 0};
}

static void atomic_alloc_end(int ret, struct oid *oidp, loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	if (t->in_alloc && --t->in_alloc == 0)
		pmsan_alloc_published(t, loc);
	uintptr_t lo, hi, olo, ohi;
	if (ret != 0 || oidp == NULL || !obj_range(oidp->pool_uuid_lo, oidp->off, &lo, &hi))
		return;
	/* A reallocation that moved frees the old object. */
	if (obj_range(atomic_old.pool_uuid_lo, atomic_old.off, &olo, &ohi) && olo != lo)
		pmsan_freed_mark(olo, ohi, 1);
	pmsan_freed_mark(lo, hi, 0);
}

/* The pre and post hooks of an atomic allocator called as NAME(pop, oidp, ...): MOVES
 * says whether it reallocates *oidp (whose old object then dies if it moves). */
#define ATOMIC_ALLOC_HOOKS(name, moves, ...)                                                       \
	void __pmsan_pre_##name(void *pop, struct oid *oidp, __VA_ARGS__, loc_t *loc)               \
	{                                                                                           \
		atomic_alloc_begin(moves ? oidp : NULL);                                            \
	}                                                                                           \
	void __pmsan_post_##name(int ret, void *pop, struct oid *oidp, __VA_ARGS__, loc_t *loc)     \
	{                                                                                           \
		atomic_alloc_end(ret, oidp, loc);                                                   \
	}
ATOMIC_ALLOC_HOOKS(pmemobj_alloc, 0, size_t size, uint64_t type, void *ctor, void *arg)
ATOMIC_ALLOC_HOOKS(pmemobj_xalloc, 0, size_t size, uint64_t type, uint64_t flags, void *ctor,
		   void *arg)
ATOMIC_ALLOC_HOOKS(pmemobj_zalloc, 0, size_t size, uint64_t type)
ATOMIC_ALLOC_HOOKS(pmemobj_realloc, 1, size_t size, uint64_t type)
ATOMIC_ALLOC_HOOKS(pmemobj_zrealloc, 1, size_t size, uint64_t type)
ATOMIC_ALLOC_HOOKS(pmemobj_strdup, 0, const char *s, uint64_t type)
ATOMIC_ALLOC_HOOKS(pmemobj_wcsdup, 0, const wchar_t *s, uint64_t type)

void __pmsan_pre_pmemobj_list_insert_new(void *pop, size_t pe_offset, void *head, uint64_t duuid,
					 uint64_t doff, int before, size_t size, uint64_t type,
					 void *ctor, void *arg, loc_t *loc)
{
	atomic_alloc_begin(NULL);
}

void __pmsan_post_pmemobj_list_insert_new(uint64_t uuid, uint64_t off, void *pop,
					  size_t pe_offset, void *head, uint64_t duuid,
					  uint64_t doff, int before, size_t size, uint64_t type,
					  void *ctor, void *arg, loc_t *loc)
{
	struct oid o = {uuid, off};
	atomic_alloc_end(off == 0, &o, loc);
}

void __pmsan_pre_pmemobj_free(struct oid *oidp, loc_t *loc)
{
	uintptr_t lo, hi;
	if (pmsan_active && oidp && obj_range(oidp->pool_uuid_lo, oidp->off, &lo, &hi))
		pmsan_freed_mark(lo, hi, 1);
}

/* ---- the action API: reservations, by the action that holds each (pmemobj_reserve's act),
 * until their cancel or publish. A cancelled one is freed at once: the stores into it are
 * nobody's, so no thread's unflushed bytes there are reported; a later use is rule 4. */
struct reservation {
	const void *act;
	uintptr_t lo, hi;
};
static pthread_mutex_t reservations_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vec reservations = {.elem = sizeof(struct reservation)};

static void reserved(uint64_t uuid, uint64_t off, const void *act)
{
	uintptr_t lo, hi;
	if (!pmsan_active || !act || !obj_range(uuid, off, &lo, &hi))
		return;
	pmsan_freed_mark(lo, hi, 0);
	pthread_mutex_lock(&reservations_lock);
	struct reservation *r = vec_push(&reservations);
	*r = (struct reservation){act, lo, hi};
	pthread_mutex_unlock(&reservations_lock);
}

void __pmsan_post_pmemobj_reserve(uint64_t uuid, uint64_t off, void *pop, void *act, size_t size,
				  uint64_t type, loc_t *loc)
{
	reserved(uuid, off, act);
}

void __pmsan_post_pmemobj_xreserve(uint64_t uuid, uint64_t off, void *pop, void *act, size_t size,
				   uint64_t type, uint64_t flags, loc_t *loc)
{
	reserved(uuid, off, act);
}

/* The reservations held in actv[0..n) (of struct pobj_action, POBJ_ACTION_SIZE bytes each)
 * end: forgotten, and with cancel freed. */
static void reservations_end(const void *actv, size_t n, int cancel)
{
	if (!pmsan_active || !actv)
		return;
	const char *first = actv, *end = first + n * POBJ_ACTION_SIZE;
	pthread_mutex_lock(&reservations_lock);
	for (size_t i = 0; i < reservations.n;) {
		struct reservation *r = &VEC_AT(&reservations, struct reservation, i);
		if ((const char *)r->act < first || (const char *)r->act >= end) {
			i++;
			continue;
		}
		if (cancel) {
			pmsan_forget_unflushed(r->lo, r->hi);
			pmsan_freed_mark(r->lo, r->hi, 1);
		}
		*r = VEC_AT(&reservations, struct reservation, reservations.n - 1);
		reservations.n--;
	}
	pthread_mutex_unlock(&reservations_lock);
}

void __pmsan_pre_pmemobj_cancel(void *pop, void *actv, size_t n, loc_t *loc)
{
	reservations_end(actv, n, 1);
}

void __pmsan_pre_pmemobj_publish(void *pop, void *actv, size_t n, loc_t *loc)
{
	reservations_end(actv, n, 0);
}

void __pmsan_pre_pmemobj_list_remove(void *pop, size_t pe_offset, void *head, uint64_t uuid,
				     uint64_t off, int free_it, loc_t *loc)
{
	uintptr_t lo, hi;
	if (pmsan_active && free_it && obj_range(uuid, off, &lo, &hi))
		pmsan_freed_mark(lo, hi, 1);
}
