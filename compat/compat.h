/*
 * compat.h - keratin-pmemobj's insides: the open pools, the superblock of a pool made by
 * pmemobj_create, errors in libpmemobj's manner, the thread's transaction.
 *
 * keratin-pmemobj (libpmemobj.so.1 of keratin) is libpmemobj's API over keratin's object
 * store, built only on the public keratin.h, as libkeratin-map is. How the two models meet:
 *
 *   - A PMEMobjpool * is the base address of the pool's mapping, and a PMEMoid's off is the
 *     kr_oid (the pool offset of the payload), so base + off is the object, which is what
 *     the inline pmemobj_direct of libpmemobj's headers computes. pool_uuid_lo is the low
 *     half of the pool's UUID.
 *   - keratin's root object is this library's superblock (struct kp_super): the layout name
 *     and the oid of the application's root object, which is an ordinary object of type
 *     POBJ_ROOT_TYPE_NUM. Objects of the types at KP_TYPE_FIRST and above are the library's
 *     own, never shown to the application.
 *   - Transactions write in place (kr_tx_add_in_place): TX_ADD logs the old bytes and the
 *     program stores through D_RW; the commit makes checksums and parity follow.
 *   - The atomic API (alloc with a constructor, lists, realloc, free, memcpy_persist) runs
 *     one keratin transaction per call, through micro-buffers: a constructor fills the new
 *     object's DRAM buffer, and the commit writes it home with its checksum.
 *   - Direct stores made durable by pmemobj_persist (or flush + drain) mark their page
 *     columns in the pool's stale map, whose cleaner brings checksum and parity up to date
 *     (kr_stored_persist); on pools made before the stale map they are declared with
 *     kr_tx_add_stored, one keratin transaction per persist (persist.c).
 *   - Persistent locks live in DRAM, keyed by their address (locks.c): the bytes of a
 *     PMEMmutex in the pool never change, so they never disturb a checksum, and every lock
 *     is unlocked after every open.
 *
 * Invariants
 *   1. Every open pool is in the registry (pools[]) from the end of its open until the
 *      start of its close, and _pobj_cache_invalidate changes at every close, so no thread
 *      resolves an oid through a closed pool's address. A thread that asks for the pool it asked
 *      for last takes no lock (registry.c: the answer holds while the registry's generation does).
 *   2. The library writes pool memory only through keratin's calls (transactions, in-place
 *      ranges): the persistence layer sees every library write.
 *   3. A thread's transaction (struct kp_tx) holds a keratin transaction exactly while it
 *      has begun and has neither aborted nor committed its outermost level (nested levels
 *      share that one transaction).
 * A debug build (KR_DEBUG_INVARIANTS) checks 1 at every close and 3 at every entry point of
 * tx.c; test_pmemobj_crash checks 2 (the crash simulator sees every line the library
 * changes: no line changes without a store it was told of).
 */
#ifndef KP_COMPAT_H
#define KP_COMPAT_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"
#include "libpmemobj.h"

#ifdef KR_DEBUG_INVARIANTS
#include <stdio.h>
#include <stdlib.h>
#define KP_INVARIANT(n, cond)                                                               \
	((cond) ? (void)0                                                                   \
		: (fprintf(stderr, "keratin-pmemobj: invariant %d broken: %s (at %s:%d)\n", (n), \
			   #cond, __FILE__, __LINE__),                                         \
		   abort()))
#else
#define KP_INVARIANT(n, cond) ((void)0)
#endif

#define KP_MAGIC "keratin-pmemobj"
/* Log lanes of a pool made by pmemobj_create: transactions of this many threads at once
 * (others wait for a lane). */
#define KP_LANES 4
/* Type numbers at or above this are the library's (the superblock is keratin's root object,
 * of keratin's root type): the records of reservations. */
#define KP_TYPE_FIRST 0xfffffff0u
#define KP_TYPE_RESERVED 0xfffffff1u

/* The keratin root object of a pool made by pmemobj_create. */
struct kp_super {
	char magic[16];                     /* KP_MAGIC */
	char layout[PMEMOBJ_MAX_LAYOUT];    /* NUL-terminated, "" for none */
	uint64_t root_oid;                  /* the application's root object, 0 if none */
	uint64_t root_size;                 /* the size it was asked for */
};
/* root_get (pool.c) writes the two root fields with one store. */
_Static_assert(offsetof(struct kp_super, root_size) == offsetof(struct kp_super, root_oid) + 8,
	       "root_size follows root_oid");

/* An open pool. */
struct kp_pool {
	kr_pool *kr;
	char *base;      /* the mapping: also the PMEMobjpool * */
	size_t size;
	uint64_t uuid_lo;
	kr_oid super;    /* keratin's root: struct kp_super */
	void *user_data; /* pmemobj_set_user_data */
	size_t declare_max; /* bytes of declared stores per transaction (persist.c) */
	int stale_map;      /* the pool has keratin's stale map: persists mark, not declare */
	pthread_mutex_t root_lock;
	char *path;
};

/* The registry (registry.c, as everything below up to "The thread's transaction"). A pool is
 * added at the end of its open and removed at the start of its close (invariant 1). */
int kp_registry_add(struct kp_pool *p); /* -1 if MAX_POOLS are open */
void kp_registry_remove(struct kp_pool *p);
struct kp_pool *kp_pool_of(PMEMobjpool *pop);         /* NULL unless open */
struct kp_pool *kp_pool_by_addr(const void *addr);    /* the pool holding addr, or NULL */
struct kp_pool *kp_pool_by_uuid(uint64_t uuid_lo);
static inline PMEMoid kp_oid(const struct kp_pool *p, kr_oid off)
{
	PMEMoid o = {off ? p->uuid_lo : 0, off};
	return o;
}
/* The object holding [addr, addr+len) in p: its oid and the offset of addr in it; KR_OK,
 * or KR_E_MISUSE_RANGE if addr is in no object or the range crosses its end. Objects new
 * in tx count (tx NULL: the thread's open transaction on p, if any). *osize (if not NULL):
 * the object's size. */
int kp_locate(struct kp_pool *p, kr_tx *tx, const void *addr, size_t len, kr_oid *oid, size_t *off,
	      size_t *osize);
/* 1 if oid is one of the application's objects: not the library's, not the root, not an
 * unpublished reservation. */
int kp_is_users(struct kp_pool *p, kr_oid oid);

/* Errors: the thread's message for pmemobj_errormsg, errno set, returns -1. The
 * keratin form takes its code's errno and its message. */
int kp_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kp_err_kr(int krc, const char *what);
int kp_errno_of(int krc);

/* kr_tx_begin and kr_tx_trust: every keratin transaction of this library opens objects
 * without verifying them, since another thread may be storing into them in place, its
 * stores not declared yet. */
int kp_tx_begin(struct kp_pool *p, kr_tx **tx);

/* The unpublished reservations of every open pool (action.c makes and publishes them):
 * hold records one (-1 if out of memory), drop forgets it, forget drops a pool's. */
int kp_reservation_hold(struct kp_pool *p, kr_oid oid);
void kp_reservation_drop(struct kp_pool *p, kr_oid oid);
int kp_is_reserved(struct kp_pool *p, kr_oid oid);
void kp_reservations_forget(struct kp_pool *p);

/* The thread's libpmemobj transaction as the other files see it: written by tx.c only,
 * read everywhere through the two functions below. */
struct kp_thread_tx {
	struct kp_pool *pool;     /* the pool of its outermost level */
	kr_tx *ktx;               /* the keratin transaction it holds (invariant 3), or NULL */
	enum pobj_tx_stage stage; /* of its innermost level */
};
extern _Thread_local struct kp_thread_tx kp_thread;
/* The keratin transaction the thread has open on p for its libpmemobj transaction, if
 * any: the atomic calls then join it, since a thread has one keratin transaction per pool.
 * (ktx is NULL whenever no level is open: invariant 3.) */
static inline kr_tx *kp_tx_current(struct kp_pool *p)
{
	return kp_thread.pool == p ? kp_thread.ktx : NULL;
}
/* The pool of the thread's transaction while it works, else NULL. */
static inline struct kp_pool *kp_tx_pool(void)
{
	return kp_thread.stage == TX_STAGE_WORK && kp_thread.ktx ? kp_thread.pool : NULL;
}

/* The thread's transaction (tx.c). */
/* A failure inside the thread's transaction: aborts it (or, with POBJ_FLAG_TX_NO_ABORT
 * or failure behaviour RETURN, only records errnum); returns errnum. */
int kp_tx_fail(int errnum, uint64_t flags);

/* Atomic calls run as one keratin transaction, or inside the thread's open one. */
int kp_atomic_begin(struct kp_pool *p, kr_tx **tx, int *own);
int kp_atomic_end(kr_tx *tx, int own, int rc);
/* len bytes of src (zeros if NULL) written at addr, inside one live object of p, by tx:
 * through a micro-buffer if the call owns tx, in place if it joined the application's. */
int kp_write(struct kp_pool *p, kr_tx *tx, int own, void *addr, const void *src, size_t len);
/* kp_write at a place already located: offset off of object oid. */
int kp_write_at(kr_tx *tx, int own, kr_oid oid, size_t off, const void *src, size_t len);
/* A new object of size bytes in tx, zero-filled, then constructed where its bytes are until
 * the commit (its micro-buffer, or home when joining a transaction). A failed constructor
 * is KR_E_MISUSE. */
int kp_new_object(struct kp_pool *p, kr_tx *tx, int own, size_t size, uint64_t type_num,
		  pmemobj_constr constr, void *arg, kr_oid *oid);
/* Sets the PMEMoid at dst (in the pool, then through tx; else a plain store) to val. */
int kp_store_oid(struct kp_pool *p, kr_tx *tx, PMEMoid *dst, PMEMoid val);

/* Persistence of direct stores (persist.c): the range joins tx if given, else one
 * transaction of its own. */
int kp_declare_stored(struct kp_pool *p, const void *addr, size_t len);
/* Pending flushes of the thread, declared at the next drain or transaction end. */
void kp_drain_pending(struct kp_pool *p);

/* Locks (locks.c), DRAM stand-ins for the persistent ones. */
int kp_lock_mutex(struct kp_pool *p, PMEMmutex *m);
int kp_unlock_mutex(struct kp_pool *p, PMEMmutex *m);
int kp_lock_rwlock_write(struct kp_pool *p, PMEMrwlock *l);
int kp_unlock_rwlock(struct kp_pool *p, PMEMrwlock *l);
void kp_locks_forget(const char *base, size_t size);

/* ctl.c's prefault.at_create and prefault.at_open (process-wide, as in libpmemobj). */
extern int kp_prefault_at_create, kp_prefault_at_open;

/* Reservations (action.c): made live at once, hidden from the application until published,
 * freed at the next open if never published (a crash, or an exit without publish). */
int kp_reservations_recover(struct kp_pool *p);

#endif
