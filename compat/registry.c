/*
 * registry.c - what every file of keratin-pmemobj consults, at the bottom of the library:
 * errors in libpmemobj's manner (errno and pmemobj_errormsg), the registry of open pools
 * that turns a PMEMobjpool *, an address or an oid into its pool (compat.h, invariant 1),
 * where an address lies among a pool's objects, the set of unpublished reservations, the
 * thread's transaction record, and the one way this library begins a keratin transaction.
 *
 * It calls nothing of the library's other files, and they all call here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat.h"

/* The thread's libpmemobj transaction as the other files see it (tx.c keeps it). */
_Thread_local struct kp_thread_tx kp_thread;

/* ---------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------- */
/* The thread's message, on the heap from its first one until it exits: the library's
 * thread-locals stay a few hundred bytes, as the initial-exec model wants (src/base/err.c
 * says why). Without memory the message is lost; errno still says what failed. */
#define ERRMSG_MAX 512
static _Thread_local char *errmsg;
static pthread_key_t errmsg_key;
static pthread_once_t errmsg_once = PTHREAD_ONCE_INIT;
static int errmsg_key_ok;

/* At the thread's exit; a message after it (another key's destructor) makes one again. */
static void errmsg_free(void *m)
{
	errmsg = NULL;
	free(m);
}

static void errmsg_key_init(void) { errmsg_key_ok = pthread_key_create(&errmsg_key, errmsg_free) == 0; }

/* At unload (dlclose): a thread exiting later must not call into unmapped code. */
__attribute__((destructor)) static void errmsg_key_fini(void)
{
	if (errmsg_key_ok)
		pthread_key_delete(errmsg_key);
	errmsg_key_ok = 0;
}

PMEMOBJ_API const char *pmemobj_errormsg(void) { return errmsg ? errmsg : ""; }

int kp_err(int err, const char *fmt, ...)
{
	if (!errmsg) {
		pthread_once(&errmsg_once, errmsg_key_init);
		char *m = errmsg_key_ok ? malloc(ERRMSG_MAX) : NULL;
		if (m && pthread_setspecific(errmsg_key, m) == 0)
			errmsg = m;
		else
			free(m);
	}
	if (errmsg) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(errmsg, ERRMSG_MAX, fmt, ap);
		va_end(ap);
	}
	errno = err;
	return -1;
}

/* libpmemobj's errno for each class of keratin error. */
int kp_errno_of(int krc)
{
	switch (KR_ERR_CLASS(krc)) {
	case KR_E_MISUSE:
		return krc == KR_E_MISUSE_OID || krc == KR_E_MISUSE_FREED ? EINVAL : EINVAL;
	case KR_E_NOSPACE:
		return ENOMEM;
	case KR_E_IO:
		if (krc == KR_E_IO_EXISTS)
			return EEXIST;
		if (krc == KR_E_IO_BUSY)
			return EWOULDBLOCK;
		return errno ? errno : EIO;
	case KR_E_FORMAT:
		return EINVAL;
	case KR_E_CORRUPT:
	case KR_E_MEDIA:
		return EIO;
	case KR_E_NOMEM:
		return ENOMEM;
	default:
		return EIO;
	}
}

int kp_err_kr(int krc, const char *what)
{
	int e = kp_errno_of(krc);
	return kp_err(e, "%s: %s", what, kr_errmsg());
}

/* ---------------------------------------------------------------------------------------
 * The registry (invariant 1)
 * ------------------------------------------------------------------------------------- */
#define MAX_POOLS 64
static struct kp_pool *pools[MAX_POOLS];
static pthread_rwlock_t pools_lock = PTHREAD_RWLOCK_INITIALIZER;

PMEMOBJ_API __thread struct _pobj_pcache _pobj_cached_pool;
PMEMOBJ_API int _pobj_cache_invalidate;

/* Every call of the library looks its pool up. Under the read lock that was a line every
 * call on every thread wrote (4 % of a run of pmemobj_persist calls on one thread), so each
 * thread keeps its last answer with the registry's generation, which every add and remove
 * changes: while the generation holds, the answer does, and no other pool is read (one
 * that another thread closes meanwhile may be freed). */
static _Atomic unsigned pools_gen;
static _Thread_local struct {
	unsigned gen;
	const char *lo, *hi; /* the pool's mapping */
	uint64_t uuid_lo;
	struct kp_pool *p;
} last;

static struct kp_pool *find(int (*match)(const struct kp_pool *, const void *), const void *key)
{
	unsigned gen = atomic_load_explicit(&pools_gen, memory_order_acquire);
	struct kp_pool *found = NULL;
	pthread_rwlock_rdlock(&pools_lock);
	for (int i = 0; i < MAX_POOLS && !found; i++)
		if (pools[i] && match(pools[i], key))
			found = pools[i];
	if (found)
		last.gen = gen, last.lo = found->base, last.hi = found->base + found->size,
		last.uuid_lo = found->uuid_lo, last.p = found;
	pthread_rwlock_unlock(&pools_lock);
	return found;
}

static int cached(void) { return last.p && last.gen == atomic_load_explicit(&pools_gen, memory_order_acquire); }

static int match_base(const struct kp_pool *p, const void *key) { return p->base == key; }
static int match_addr(const struct kp_pool *p, const void *key)
{
	return (const char *)key >= p->base && (const char *)key < p->base + p->size;
}
static int match_uuid(const struct kp_pool *p, const void *key)
{
	return p->uuid_lo == *(const uint64_t *)key;
}

struct kp_pool *kp_pool_of(PMEMobjpool *pop)
{
	if (!pop)
		return NULL;
	return cached() && last.lo == (const char *)pop ? last.p : find(match_base, pop);
}

struct kp_pool *kp_pool_by_addr(const void *addr)
{
	const char *a = addr;
	return cached() && a >= last.lo && a < last.hi ? last.p : find(match_addr, addr);
}

struct kp_pool *kp_pool_by_uuid(uint64_t uuid_lo)
{
	return cached() && last.uuid_lo == uuid_lo ? last.p : find(match_uuid, &uuid_lo);
}

int kp_registry_add(struct kp_pool *p)
{
	int rc = -1;
	pthread_rwlock_wrlock(&pools_lock);
	for (int i = 0; i < MAX_POOLS && rc; i++)
		if (!pools[i]) {
			pools[i] = p;
			rc = 0;
		}
	atomic_fetch_add_explicit(&pools_gen, 1, memory_order_release);
	pthread_rwlock_unlock(&pools_lock);
	return rc;
}

void kp_registry_remove(struct kp_pool *p)
{
	pthread_rwlock_wrlock(&pools_lock);
	for (int i = 0; i < MAX_POOLS; i++)
		if (pools[i] == p)
			pools[i] = NULL;
	atomic_fetch_add_explicit(&pools_gen, 1, memory_order_release);
	__atomic_add_fetch(&_pobj_cache_invalidate, 1, __ATOMIC_SEQ_CST);
	pthread_rwlock_unlock(&pools_lock);
}

/* ---------------------------------------------------------------------------------------
 * Objects
 * ------------------------------------------------------------------------------------- */
int kp_is_users(struct kp_pool *p, kr_oid oid)
{
	if (oid == p->super || kr_type(p->kr, oid) >= KP_TYPE_FIRST)
		return 0;
	const struct kp_super *s = kr_get(p->kr, p->super);
	return oid != s->root_oid && !kp_is_reserved(p, oid);
}

int kp_locate(struct kp_pool *p, kr_tx *tx, const void *addr, size_t len, kr_oid *oid, size_t *off,
	      size_t *osize)
{
	uint64_t at = (uint64_t)((const char *)addr - p->base);
	if (!tx)
		tx = kp_tx_current(p);
	size_t size = 0;
	kr_oid o = KR_OID_NULL;
	if (tx) {
		o = kr_tx_owner(tx, at, &size, NULL);
	} else {
		struct kr_location loc = KR_LOCATION_INIT;
		if (kr_pool_locate(p->kr, at, &loc) == KR_OK && loc.object && at >= loc.object) {
			o = loc.object;
			size = loc.object_size;
		}
	}
	if (!o || at + len > o + size)
		return kr_error_set(KR_E_MISUSE_RANGE,
				    "[%p, +%zu) is not inside one live object of the pool", addr, len);
	*oid = o;
	*off = at - o;
	if (osize)
		*osize = size;
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Keratin transactions
 * ------------------------------------------------------------------------------------- */
int kp_tx_begin(struct kp_pool *p, kr_tx **tx)
{
	int rc = kr_tx_begin(p->kr, tx);
	if (rc == KR_OK)
		kr_tx_trust(*tx);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Reservations (action.c makes and publishes them)
 * ------------------------------------------------------------------------------------- */
/* The unpublished reservations of every open pool (few at a time: a linear set). */
static struct {
	struct kp_pool *pool;
	kr_oid oid;
} *held;
static size_t nheld, cheld;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

int kp_reservation_hold(struct kp_pool *p, kr_oid oid)
{
	int rc = 0;
	pthread_mutex_lock(&held_lock);
	if (nheld == cheld) {
		size_t c = cheld ? 2 * cheld : 64;
		void *n = realloc(held, c * sizeof(*held));
		if (n) {
			held = n;
			cheld = c;
		} else {
			rc = -1;
		}
	}
	if (!rc) {
		held[nheld].pool = p;
		held[nheld++].oid = oid;
	}
	pthread_mutex_unlock(&held_lock);
	return rc;
}

void kp_reservation_drop(struct kp_pool *p, kr_oid oid)
{
	pthread_mutex_lock(&held_lock);
	for (size_t i = 0; i < nheld; i++)
		if (held[i].pool == p && held[i].oid == oid) {
			held[i] = held[--nheld];
			break;
		}
	pthread_mutex_unlock(&held_lock);
}

int kp_is_reserved(struct kp_pool *p, kr_oid oid)
{
	int found = 0;
	pthread_mutex_lock(&held_lock);
	for (size_t i = 0; i < nheld && !found; i++)
		found = held[i].pool == p && held[i].oid == oid;
	pthread_mutex_unlock(&held_lock);
	return found;
}

void kp_reservations_forget(struct kp_pool *p)
{
	pthread_mutex_lock(&held_lock);
	for (size_t i = 0; i < nheld;)
		if (held[i].pool == p)
			held[i] = held[--nheld];
		else
			i++;
	pthread_mutex_unlock(&held_lock);
}
