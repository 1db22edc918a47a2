/*
 * rt_kr.c - the pmsan runtime's model of keratin: its pools' mappings (with the read-only
 * view that kr_get hands out in keratin's debug mode) and the frees and allocations of its
 * transactions, for rule 4 (use-after-free); with the library-call hooks (hooks.def) of
 * keratin that feed it. It stands on the mappings and freed-object bitmaps of rt_track.c;
 * the store and load hooks (rt_hooks.c) then check keratin objects as they check
 * libpmemobj's, and report any store into a keratin mapping (rule 2).
 *
 * Model
 *
 *   keratin frees and allocates at commit: an object kr_tx_free names stays readable until
 *   kr_tx_commit, and one kr_tx_alloc returns exists only after it. Each thread keeps, for
 *   each keratin transaction it has open (a kr_tx belongs to the thread that began it), the
 *   pool, the bytes of the objects freed in it (found with the public kr_get and kr_size
 *   before the free) and the oids allocated in it. A commit that succeeds marks the freed
 *   bytes freed and the new objects' bytes live again (rt_track.c's bitmaps, which every
 *   store and, once anything was freed, every load consults); a commit that fails and
 *   kr_tx_abort drop the transaction's record. A kr_get that returns an object also marks
 *   it live: whatever allocated it (kr_root's transaction of its own, a library the checker
 *   did not instrument), it is no freed object.
 *
 *   The pool is asked through keratin.h alone, as the checked program may ask: the checker
 *   stands above the library, which knows nothing of it. kr_get and kr_size set the
 *   thread's last error, which the program may read, for an oid of no live object: they are
 *   asked about one only just before a kr_tx_free that fails on it and sets its own.
 *
 *   Debug mode (KR_OPEN_DEBUG or KERATIN_DEBUG_PROTECT=1): kr_get(pool, oid) is view + oid,
 *   view a second, read-only mapping of the pool file, where kr_pool_base names the
 *   writable one. The first kr_get (the program's or this file's) that returns a pointer
 *   outside every mapping adds [view, view + size) as a keratin mapping of its own, removed
 *   with the pool: loads through kr_get pointers are then checked for use after free, and a
 *   store through one is reported before it faults.
 *
 *   A thread's records are its own (thread-local), so they take no lock; the table of views
 *   has a mutex.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "pmsan.h"

/* keratin.h's calls, weak: a program that does not use keratin does not link it. */
typedef uint64_t kr_oid;
extern void *kr_pool_base(void *pool) __attribute__((weak));
extern size_t kr_pool_mapped_size(void *pool) __attribute__((weak));
extern const void *kr_get(void *pool, kr_oid oid) __attribute__((weak));
extern size_t kr_size(void *pool, kr_oid oid) __attribute__((weak));

typedef const struct pmsan_loc loc_t;

/* ---- pools and their debug views */

#define MAX_VIEWS 64 /* as many as the mappings rt_track.c keeps */

static struct {
	void *pool;
	uintptr_t lo; /* 0: a free slot */
} views[MAX_VIEWS];
static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;

/* A kr_get pointer p to oid that lies in no mapping: p - oid is the pool's debug view. */
static void view_seen(void *pool, kr_oid oid, uintptr_t p)
{
	uintptr_t lo = p - oid;
	pthread_mutex_lock(&views_lock);
	int slot = -1, known = 0; /* known: another thread added it meanwhile */
	for (int i = 0; i < MAX_VIEWS; i++) {
		known |= views[i].lo == lo;
		if (views[i].lo == 0 && slot < 0)
			slot = i;
	}
	if (!known && slot >= 0) {
		views[slot].pool = pool;
		views[slot].lo = lo;
		pmsan_range_add(lo, lo + kr_pool_mapped_size(pool), RANGE_KERATIN, NULL);
	}
	pthread_mutex_unlock(&views_lock);
}

/* The mapping holding kr_get's pointer p to oid, its view added first if it is one. */
static const struct pm_range *object_range(void *pool, kr_oid oid, uintptr_t p)
{
	const struct pm_range *r = pmsan_range_find(p, p + 1);
	if (r == NULL && kr_pool_base && (uintptr_t)kr_pool_base(pool) != p - oid) {
		view_seen(pool, oid, p);
		r = pmsan_range_find(p, p + 1);
	}
	return r;
}

void __pmsan_post_kr_pool_create(int ret, const char *path, const void *opts, void **poolp,
				 loc_t *loc)
{
	if (ret != 0 || !poolp || !*poolp || !kr_pool_base || !kr_pool_mapped_size)
		return;
	uintptr_t base = (uintptr_t)kr_pool_base(*poolp);
	pmsan_range_add(base, base + kr_pool_mapped_size(*poolp), RANGE_KERATIN, path);
}

void __pmsan_post_kr_pool_open(int ret, const char *path, unsigned flags, void **poolp, loc_t *loc)
{
	__pmsan_post_kr_pool_create(ret, path, NULL, poolp, loc);
}

void __pmsan_pre_kr_pool_close(void *pool, loc_t *loc)
{
	if (!pool || !kr_pool_base)
		return;
	pmsan_range_remove((uintptr_t)kr_pool_base(pool), loc);
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < MAX_VIEWS; i++) {
		if (views[i].lo && views[i].pool == pool) {
			pmsan_range_remove(views[i].lo, loc);
			views[i].lo = 0;
		}
	}
	pthread_mutex_unlock(&views_lock);
}

/* A live object: its bytes are no freed object's. */
void __pmsan_post_kr_get(const void *ret, void *pool, kr_oid oid, loc_t *loc)
{
	if (!pmsan_active || ret == NULL || !kr_size)
		return;
	uintptr_t p = (uintptr_t)ret;
	const struct pm_range *r = object_range(pool, oid, p);
	if (r == NULL || !atomic_load_explicit(&__pmsan_watch_loads, memory_order_relaxed))
		return;
	size_t n = kr_size(pool, oid);
	if (pmsan_freed_test(r, p, p + n))
		pmsan_freed_mark(p, p + n, 0);
}

/* ---- transactions */

struct kr_txrec {
	struct kr_txrec *next;
	void *tx, *pool;
	struct ivset freed; /* bytes of the objects freed in it */
	struct vec allocs;  /* kr_oid: the objects allocated in it */
};

/* The calling thread's open keratin transactions. A thread that ends inside one leaks its
 * record, as keratin's transaction itself is left open. */
static __thread struct kr_txrec *open_txs;

/* tx's record, taken off the thread's list if unlink; NULL if the checker did not see tx
 * begin (a program built partly without the checker). */
static struct kr_txrec *txrec(void *tx, int unlink)
{
	for (struct kr_txrec **pp = &open_txs; *pp; pp = &(*pp)->next) {
		struct kr_txrec *x = *pp;
		if (x->tx != tx)
			continue;
		if (unlink)
			*pp = x->next;
		return x;
	}
	return NULL;
}

static void txrec_free(struct kr_txrec *x)
{
	if (x == NULL)
		return;
	ivset_free(&x->freed);
	vec_free(&x->allocs);
	free(x);
}

void __pmsan_post_kr_tx_begin(int ret, void *pool, void **txp, loc_t *loc)
{
	if (!pmsan_active || ret != 0 || !kr_get || !kr_size)
		return;
	/* A record left by a transaction whose end the checker missed, at the same address. */
	txrec_free(txrec(*txp, 1));
	struct kr_txrec *x = pmsan_xalloc(sizeof(*x));
	x->tx = *txp;
	x->pool = pool;
	x->allocs.elem = sizeof(kr_oid);
	x->next = open_txs;
	open_txs = x;
}

void __pmsan_post_kr_tx_alloc(int ret, void *tx, size_t size, uint32_t type, kr_oid *oidp,
			      loc_t *loc)
{
	struct kr_txrec *x = pmsan_active && ret == 0 ? txrec(tx, 0) : NULL;
	if (x)
		*(kr_oid *)vec_push(&x->allocs) = *oidp;
}

/* Taken before the call: at commit the object is gone, and kr_get with it. */
void __pmsan_pre_kr_tx_free(void *tx, kr_oid oid, loc_t *loc)
{
	struct kr_txrec *x = pmsan_active ? txrec(tx, 0) : NULL;
	if (x == NULL)
		return;
	/* An object allocated in the same transaction is simply never created. */
	for (size_t i = 0; i < x->allocs.n; i++) {
		if (VEC_AT(&x->allocs, kr_oid, i) == oid) {
			VEC_AT(&x->allocs, kr_oid, i) = VEC_AT(&x->allocs, kr_oid, x->allocs.n - 1);
			x->allocs.n--;
			return;
		}
	}
	size_t n = kr_size(x->pool, oid);
	if (n == 0)
		return; /* no live object: the free fails, and so will the commit */
	uintptr_t p = (uintptr_t)kr_get(x->pool, oid);
	if (object_range(x->pool, oid, p))
		ivset_add(&x->freed, p, p + n);
}

void __pmsan_post_kr_tx_commit(int ret, void *tx, loc_t *loc)
{
	struct kr_txrec *x = pmsan_active ? txrec(tx, 1) : NULL;
	if (x == NULL)
		return;
	if (ret == 0) {
		for (size_t i = 0; i < x->freed.n; i++)
			pmsan_freed_mark(x->freed.lo[i], x->freed.hi[i], 1);
		for (size_t i = 0; i < x->allocs.n; i++) {
			kr_oid oid = VEC_AT(&x->allocs, kr_oid, i);
			uintptr_t p = (uintptr_t)kr_get(x->pool, oid);
			pmsan_freed_mark(p, p + kr_size(x->pool, oid), 0);
		}
	}
	txrec_free(x);
}

void __pmsan_pre_kr_tx_abort(void *tx, loc_t *loc)
{
	if (pmsan_active)
		txrec_free(txrec(tx, 1));
}
