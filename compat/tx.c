/*
 * tx.c - keratin-pmemobj's transactions: the stage machine that TX_BEGIN ... TX_END drives
 * (setjmp, pmemobj_tx_stage, pmemobj_tx_process, pmemobj_tx_end), nesting, locks and the
 * stage callback, and the calls of a transaction's work stage: snapshots (TX_ADD), which
 * become keratin's in-place ranges, and allocations and frees.
 *
 * One keratin transaction carries the outermost libpmemobj transaction and everything
 * nested in it (nested transactions are flattened, as libpmemobj's are): it begins with
 * the outermost pmemobj_tx_begin and commits when the outermost work stage is processed.
 * An abort at any level aborts it, restoring every in-place range, and the levels above
 * learn of it when the inner level ends: their work stage is abandoned with a longjmp to
 * their own jmp_buf (compat.h, invariant 3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "compat.h"

struct lock_ref {
	int rwlock;
	void *lock;
};

/* The thread's transaction. Its pool, keratin transaction and stage are in kp_thread
 * (registry.c), where the other files look for them; the rest is tx.c's alone. */
struct kp_tx {
	int depth;                /* levels begun and not ended */
	int aborted;              /* the transaction (all levels) aborted */
	int committed;            /* its outermost level committed */
	int errnum;               /* pmemobj_tx_errno */
	struct __jmp_buf_tag **envs; /* per level, NULL where the caller gave none */
	int cap;
	struct lock_ref *locks;
	int nlocks, lcap;
	/* Where envs and locks start: a thread's transactions need no malloc (and a thread
	 * that exits leaves nothing behind) unless they nest or lock deeper than these. */
	struct __jmp_buf_tag *envs_inline[16];
	struct lock_ref locks_inline[8];
	pmemobj_tx_callback cb;
	void *cb_arg;
	void *user_data;
	enum pobj_tx_failure_behavior behavior;
};

static _Thread_local struct kp_tx T;

/* Invariant 3 of compat.h, at every entry point. */
#define CHECK_TX() KP_INVARIANT(3, (kp_thread.ktx != NULL) == (T.depth > 0 && !T.aborted && !T.committed))

PMEMOBJ_API enum pobj_tx_stage pmemobj_tx_stage(void) { return kp_thread.stage; }
PMEMOBJ_API int pmemobj_tx_errno(void) { return T.errnum; }

static void run_cb(enum pobj_tx_stage stage)
{
	if (T.cb && T.depth == 1)
		T.cb((PMEMobjpool *)kp_thread.pool->base, stage, T.cb_arg);
}

static void release_locks(void)
{
	for (int i = T.nlocks - 1; i >= 0; i--) {
		if (T.locks[i].rwlock)
			kp_unlock_rwlock(kp_thread.pool, T.locks[i].lock);
		else
			kp_unlock_mutex(kp_thread.pool, T.locks[i].lock);
	}
	T.nlocks = 0;
}

static int add_lock(int rwlock, void *lock)
{
	int rc = rwlock ? kp_lock_rwlock_write(kp_thread.pool, lock) : kp_lock_mutex(kp_thread.pool, lock);
	if (rc)
		return rc;
	if (!T.locks) {
		T.locks = T.locks_inline;
		T.lcap = (int)(sizeof(T.locks_inline) / sizeof(T.locks_inline[0]));
	}
	if (T.nlocks == T.lcap) {
		int cap = 2 * T.lcap;
		struct lock_ref *l = T.locks == T.locks_inline ? malloc((size_t)cap * sizeof(*l))
							       : realloc(T.locks, (size_t)cap * sizeof(*l));
		if (!l) {
			rwlock ? kp_unlock_rwlock(kp_thread.pool, lock) : kp_unlock_mutex(kp_thread.pool, lock);
			return ENOMEM;
		}
		if (T.locks == T.locks_inline)
			memcpy(l, T.locks_inline, sizeof(T.locks_inline));
		T.locks = l;
		T.lcap = cap;
	}
	T.locks[T.nlocks++] = (struct lock_ref){rwlock, lock};
	return 0;
}

/* The keratin transaction goes away, restoring every in-place range. */
static void abort_keratin(void)
{
	if (kp_thread.ktx) {
		kr_tx_abort(kp_thread.ktx);
		kp_thread.ktx = NULL;
	}
}

/* Aborts every level; jumps to the innermost level's jmp_buf if it has one. */
static void tx_abort(int errnum, int jump)
{
	abort_keratin();
	T.aborted = 1;
	T.errnum = errnum ? errnum : ECANCELED;
	kp_thread.stage = TX_STAGE_ONABORT;
	run_cb(TX_STAGE_ONABORT);
	errno = T.errnum;
	if (jump && T.envs[T.depth - 1])
		longjmp(T.envs[T.depth - 1], T.errnum);
}

int kp_tx_fail(int errnum, uint64_t flags)
{
	if (kp_thread.stage != TX_STAGE_WORK)
		return errnum;
	if ((flags & POBJ_FLAG_TX_NO_ABORT) || T.behavior == POBJ_TX_FAILURE_RETURN) {
		errno = errnum;
		return errnum;
	}
	tx_abort(errnum, 1);
	return errnum;
}

/* A level that could not begin: it runs its ONABORT and FINALLY blocks. */
static int begin_failed(int errnum)
{
	abort_keratin();
	T.aborted = 1;
	T.errnum = errnum;
	kp_thread.stage = TX_STAGE_ONABORT;
	errno = errnum;
	return errnum;
}

PMEMOBJ_API int pmemobj_tx_begin(PMEMobjpool *pop, jmp_buf env, ...)
{
	enum pobj_tx_stage was = kp_thread.stage;
	if (!T.envs) {
		T.envs = T.envs_inline;
		T.cap = (int)(sizeof(T.envs_inline) / sizeof(T.envs_inline[0]));
	}
	if (T.depth == T.cap) {
		int cap = 2 * T.cap;
		struct __jmp_buf_tag **e = T.envs == T.envs_inline ? malloc((size_t)cap * sizeof(*e))
								   : realloc(T.envs, (size_t)cap * sizeof(*e));
		if (!e)
			return kp_err(ENOMEM, "transaction nesting"), ENOMEM;
		if (T.envs == T.envs_inline)
			memcpy(e, T.envs_inline, sizeof(T.envs_inline));
		T.envs = e;
		T.cap = cap;
	}
	CHECK_TX();
	T.envs[T.depth++] = env;
	struct kp_pool *p = kp_pool_of(pop);
	if (was != TX_STAGE_NONE && was != TX_STAGE_WORK) {
		kp_err(EINVAL, "pmemobj_tx_begin in stage %d: only in none or work", (int)was);
		return begin_failed(EINVAL);
	}
	if (!p) {
		kp_err(EINVAL, "pmemobj_tx_begin: %p is not an open pool", (void *)pop);
		return begin_failed(EINVAL);
	}
	if (was == TX_STAGE_NONE) {
		kp_thread.pool = p;
		T.aborted = 0;
		T.committed = 0;
		T.errnum = 0;
		T.cb = NULL;
		T.behavior = POBJ_TX_FAILURE_ABORT;
		int rc = kp_tx_begin(p, &kp_thread.ktx);
		if (rc) {
			kp_thread.ktx = NULL;
			kp_err_kr(rc, "pmemobj_tx_begin");
			return begin_failed(kp_errno_of(rc));
		}
	} else if (kp_thread.pool != p) {
		kp_err(EINVAL, "nested transaction on another pool");
		tx_abort(EINVAL, 0);
		return EINVAL;
	}
	kp_thread.stage = TX_STAGE_WORK;

	va_list ap;
	va_start(ap, env);
	int rc = 0;
	for (int type; rc == 0 && (type = va_arg(ap, int)) != TX_PARAM_NONE;) {
		if (type == TX_PARAM_MUTEX || type == TX_PARAM_RWLOCK) {
			rc = add_lock(type == TX_PARAM_RWLOCK, va_arg(ap, void *));
		} else if (type == TX_PARAM_CB) {
			pmemobj_tx_callback cb = va_arg(ap, pmemobj_tx_callback);
			void *arg = va_arg(ap, void *);
			if (T.cb && (T.cb != cb || T.cb_arg != arg))
				rc = EINVAL; /* one callback per transaction */
			T.cb = cb;
			T.cb_arg = arg;
		} else {
			rc = EINVAL;
		}
	}
	va_end(ap);
	if (rc) {
		kp_err(rc, "pmemobj_tx_begin: a parameter could not be taken (%s)", strerror(rc));
		tx_abort(rc, 0);
		return rc;
	}
	return 0;
}

static void tx_commit(void)
{
	if (T.depth > 1) { /* flattened: the outermost level commits */
		kp_thread.stage = TX_STAGE_ONCOMMIT;
		return;
	}
	run_cb(TX_STAGE_WORK);
	int rc = kp_thread.ktx ? kr_tx_commit(kp_thread.ktx) : KR_OK;
	kp_thread.ktx = NULL;
	T.committed = rc == KR_OK;
	if (rc) {
		kp_err_kr(rc, "commit");
		T.aborted = 1;
		T.errnum = kp_errno_of(rc);
		kp_thread.stage = TX_STAGE_ONABORT;
		run_cb(TX_STAGE_ONABORT);
		return;
	}
	kp_thread.stage = TX_STAGE_ONCOMMIT;
	run_cb(TX_STAGE_ONCOMMIT);
}

PMEMOBJ_API void pmemobj_tx_commit(void)
{
	CHECK_TX();
	if (kp_thread.stage != TX_STAGE_WORK) {
		kp_err(EINVAL, "pmemobj_tx_commit outside the work stage");
		return;
	}
	tx_commit();
}

PMEMOBJ_API void pmemobj_tx_abort(int errnum)
{
	CHECK_TX();
	if (kp_thread.stage != TX_STAGE_WORK) {
		kp_err(EINVAL, "pmemobj_tx_abort outside the work stage");
		return;
	}
	tx_abort(errnum, 1);
}

PMEMOBJ_API void pmemobj_tx_process(void)
{
	CHECK_TX();
	switch (kp_thread.stage) {
	case TX_STAGE_WORK:
		tx_commit();
		break;
	case TX_STAGE_ONCOMMIT:
	case TX_STAGE_ONABORT:
		kp_thread.stage = TX_STAGE_FINALLY;
		run_cb(TX_STAGE_FINALLY);
		break;
	case TX_STAGE_FINALLY:
		kp_thread.stage = TX_STAGE_NONE;
		break;
	default:
		break;
	}
}

PMEMOBJ_API int pmemobj_tx_end(void)
{
	CHECK_TX();
	if (T.depth == 0) {
		kp_err(EINVAL, "pmemobj_tx_end without a transaction");
		return EINVAL;
	}
	if (kp_thread.stage == TX_STAGE_WORK) { /* misuse: end without commit means abort */
		kp_err(EINVAL, "pmemobj_tx_end in the work stage: the transaction is aborted");
		tx_abort(ECANCELED, 0);
	}
	int errnum = T.errnum;
	if (--T.depth > 0) {
		/* Back to the outer level, still working unless the transaction aborted: then the
		 * outer level's work stage is abandoned too, at its own setjmp. */
		if (T.aborted) {
			kp_thread.stage = TX_STAGE_ONABORT;
			if (T.envs[T.depth - 1])
				longjmp(T.envs[T.depth - 1], errnum);
		} else {
			kp_thread.stage = TX_STAGE_WORK;
		}
		return errnum;
	}
	struct kp_pool *p = kp_thread.pool;
	release_locks();
	if (T.envs != T.envs_inline) { /* grown by deep nesting: back to the inline ones */
		free(T.envs);
		T.envs = NULL;
	}
	if (T.locks != T.locks_inline) {
		free(T.locks);
		T.locks = NULL;
	}
	if (T.cb) {
		T.depth = 1; /* run_cb's outermost test */
		run_cb(TX_STAGE_NONE);
		T.depth = 0;
	}
	kp_thread.stage = TX_STAGE_NONE;
	T.user_data = NULL;
	T.cb = NULL;
	/* Persists asked for during the transaction, now that the thread has no keratin
	 * transaction open on the pool. */
	if (p)
		kp_drain_pending(p);
	if (errnum)
		errno = errnum;
	return errnum;
}

PMEMOBJ_API int pmemobj_tx_xlock(enum pobj_tx_param type, void *lockp, uint64_t flags)
{
	if (kp_thread.stage != TX_STAGE_WORK)
		return kp_err(EINVAL, "pmemobj_tx_lock outside the work stage"), EINVAL;
	if (flags & ~POBJ_XLOCK_VALID_FLAGS)
		return kp_tx_fail(EINVAL, flags);
	if (type != TX_PARAM_MUTEX && type != TX_PARAM_RWLOCK)
		return kp_tx_fail(EINVAL, flags);
	int rc = add_lock(type == TX_PARAM_RWLOCK, lockp);
	return rc ? kp_tx_fail(rc, flags) : 0;
}

PMEMOBJ_API int pmemobj_tx_lock(enum pobj_tx_param type, void *lockp)
{
	return pmemobj_tx_xlock(type, lockp, POBJ_XLOCK_NO_ABORT);
}

/* ---------------------------------------------------------------------------------------
 * The work stage: snapshots, allocations, frees
 * ------------------------------------------------------------------------------------- */

/* In the work stage, on this transaction's pool: 0, else the failure's errnum. */
static int in_work(const char *what, uint64_t oid_uuid, int check_pool)
{
	CHECK_TX();
	if (kp_thread.stage != TX_STAGE_WORK || !kp_thread.ktx)
		return kp_err(EINVAL, "%s outside a transaction's work stage", what), EINVAL;
	if (check_pool && oid_uuid != kp_thread.pool->uuid_lo)
		return kp_err(EINVAL, "%s: the object is not in the transaction's pool", what), EINVAL;
	return 0;
}

/* A keratin failure inside the work stage. */
static int kr_failed(int krc, const char *what, uint64_t flags)
{
	kp_err_kr(krc, what);
	return kp_tx_fail(kp_errno_of(krc), flags);
}

PMEMOBJ_API int pmemobj_tx_xadd_range(PMEMoid oid, uint64_t off, size_t size, uint64_t flags)
{
	int rc = in_work("pmemobj_tx_add_range", oid.pool_uuid_lo, 1);
	if (rc)
		return rc;
	if (flags & ~POBJ_XADD_VALID_FLAGS)
		return kp_err(EINVAL, "unknown flags 0x%llx", (unsigned long long)flags),
		       kp_tx_fail(EINVAL, flags);
	if (size == 0)
		return 0;
	if (!kr_tx_add_in_place(kp_thread.ktx, oid.off, off, size))
		return kr_failed(kr_errcode(), "pmemobj_tx_add_range", flags);
	return 0;
}

PMEMOBJ_API int pmemobj_tx_add_range(PMEMoid oid, uint64_t off, size_t size)
{
	return pmemobj_tx_xadd_range(oid, off, size, 0);
}

/* Starts fetching the first lines of [p, p+n); past them the hardware's stream prefetch
 * keeps up with a copy. */
static void prefetch_lines(const void *p, size_t n)
{
	enum { PREFETCH_LINES = 8, LINE = 64 };
	if (n > PREFETCH_LINES * LINE)
		n = PREFETCH_LINES * LINE;
	for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)(LINE - 1); a < (uintptr_t)p + n; a += LINE)
		__builtin_prefetch((const void *)a);
}

PMEMOBJ_API int pmemobj_tx_xadd_range_direct(const void *ptr, size_t size, uint64_t flags)
{
	int rc = in_work("pmemobj_tx_add_range_direct", 0, 0);
	if (rc)
		return rc;
	if (flags & ~POBJ_XADD_VALID_FLAGS)
		return kp_err(EINVAL, "unknown flags 0x%llx", (unsigned long long)flags),
		       kp_tx_fail(EINVAL, flags);
	/* The snapshot reads these bytes: their cache misses run beside the lookup's. */
	prefetch_lines(ptr, size);
	/* A range may cross objects: each object's piece is named on its own. */
	const char *a = ptr;
	while (size) {
		kr_oid oid;
		size_t off, osize;
		if (kp_locate(kp_thread.pool, kp_thread.ktx, a, 1, &oid, &off, &osize) != KR_OK)
			return kr_failed(KR_E_MISUSE_RANGE, "pmemobj_tx_add_range_direct", flags);
		size_t piece = osize - off;
		if (piece > size)
			piece = size;
		if (!kr_tx_add_in_place(kp_thread.ktx, oid, off, piece))
			return kr_failed(kr_errcode(), "pmemobj_tx_add_range_direct", flags);
		a += piece;
		size -= piece;
	}
	return 0;
}

PMEMOBJ_API int pmemobj_tx_add_range_direct(const void *ptr, size_t size)
{
	return pmemobj_tx_xadd_range_direct(ptr, size, 0);
}

/* A new object written in place by this transaction (zeros: keratin's promise). */
static PMEMoid tx_new(size_t size, uint64_t type_num, uint64_t flags, const char *what)
{
	if (in_work(what, 0, 0))
		return OID_NULL;
	if (flags & ~POBJ_TX_XALLOC_VALID_FLAGS)
		return kp_err(EINVAL, "unknown flags 0x%llx", (unsigned long long)flags),
		       kp_tx_fail(EINVAL, flags), OID_NULL;
	if (size == 0 || size > PMEMOBJ_MAX_ALLOC_SIZE)
		return kp_err(EINVAL, "%s: size %zu", what, size), kp_tx_fail(EINVAL, flags), OID_NULL;
	if (type_num >= KP_TYPE_FIRST)
		return kp_err(EINVAL, "%s: type number %llu is beyond keratin's 32-bit types", what,
			      (unsigned long long)type_num),
		       kp_tx_fail(EINVAL, flags), OID_NULL;
	kr_oid n;
	int rc = kr_tx_alloc(kp_thread.ktx, size, (uint32_t)type_num, &n);
	if (rc == KR_OK && !kr_tx_add_in_place(kp_thread.ktx, n, 0, size))
		rc = kr_errcode();
	if (rc)
		return kr_failed(rc, what, flags), OID_NULL;
	return kp_oid(kp_thread.pool, n);
}

PMEMOBJ_API PMEMoid pmemobj_tx_xalloc(size_t size, uint64_t type_num, uint64_t flags)
{
	return tx_new(size, type_num, flags, "pmemobj_tx_xalloc");
}

PMEMOBJ_API PMEMoid pmemobj_tx_alloc(size_t size, uint64_t type_num)
{
	return tx_new(size, type_num, 0, "pmemobj_tx_alloc");
}

PMEMOBJ_API PMEMoid pmemobj_tx_zalloc(size_t size, uint64_t type_num)
{
	return tx_new(size, type_num, POBJ_FLAG_ZERO, "pmemobj_tx_zalloc");
}

PMEMOBJ_API int pmemobj_tx_xfree(PMEMoid oid, uint64_t flags)
{
	int rc = in_work("pmemobj_tx_free", 0, 0);
	if (rc)
		return rc;
	if (flags & ~POBJ_XFREE_VALID_FLAGS)
		return kp_err(EINVAL, "unknown flags"), kp_tx_fail(EINVAL, flags);
	if (OID_IS_NULL(oid))
		return 0;
	if (oid.pool_uuid_lo != kp_thread.pool->uuid_lo)
		return kp_err(EINVAL, "pmemobj_tx_free: the object is not in the transaction's pool"),
		       kp_tx_fail(EINVAL, flags);
	if ((rc = kr_tx_free(kp_thread.ktx, oid.off)))
		return kr_failed(rc, "pmemobj_tx_free", flags);
	return 0;
}

PMEMOBJ_API int pmemobj_tx_free(PMEMoid oid) { return pmemobj_tx_xfree(oid, 0); }

static PMEMoid tx_realloc(PMEMoid oid, size_t size, uint64_t type_num, const char *what)
{
	if (in_work(what, 0, 0))
		return OID_NULL;
	if (OID_IS_NULL(oid))
		return tx_new(size, type_num, 0, what);
	if (size == 0) {
		pmemobj_tx_free(oid);
		return OID_NULL;
	}
	size_t old = 0; /* the object may be new in this transaction */
	if (kr_tx_owner(kp_thread.ktx, oid.off, &old, NULL) != oid.off)
		return kr_failed(kr_error_set(KR_E_MISUSE_OID, "0x%llx is not a live object",
					      (unsigned long long)oid.off), what, 0), OID_NULL;
	PMEMoid n = tx_new(size, type_num, 0, what);
	if (OID_IS_NULL(n))
		return OID_NULL;
	const void *src = kr_tx_get(kp_thread.ktx, oid.off);
	int rc = src ? kr_tx_write_in_place(kp_thread.ktx, n.off, 0, src, old < size ? old : size) : kr_errcode();
	if (rc == KR_OK)
		rc = kr_tx_free(kp_thread.ktx, oid.off);
	if (rc)
		return kr_failed(rc, what, 0), OID_NULL;
	return n;
}

PMEMOBJ_API PMEMoid pmemobj_tx_realloc(PMEMoid oid, size_t size, uint64_t type_num)
{
	return tx_realloc(oid, size, type_num, "pmemobj_tx_realloc");
}

PMEMOBJ_API PMEMoid pmemobj_tx_zrealloc(PMEMoid oid, size_t size, uint64_t type_num)
{
	return tx_realloc(oid, size, type_num, "pmemobj_tx_zrealloc");
}

static PMEMoid tx_dup(const void *s, size_t bytes, uint64_t type_num, uint64_t flags,
		      const char *what)
{
	if (!s)
		return kp_err(EINVAL, "%s: NULL string", what), kp_tx_fail(EINVAL, flags), OID_NULL;
	PMEMoid n = tx_new(bytes, type_num, flags, what);
	if (OID_IS_NULL(n))
		return OID_NULL;
	int rc = kr_tx_write_in_place(kp_thread.ktx, n.off, 0, s, bytes);
	return rc ? (kr_failed(rc, what, flags), OID_NULL) : n;
}

PMEMOBJ_API PMEMoid pmemobj_tx_xstrdup(const char *s, uint64_t type_num, uint64_t flags)
{
	return tx_dup(s, s ? strlen(s) + 1 : 0, type_num, flags, "pmemobj_tx_strdup");
}

PMEMOBJ_API PMEMoid pmemobj_tx_strdup(const char *s, uint64_t type_num)
{
	return pmemobj_tx_xstrdup(s, type_num, 0);
}

PMEMOBJ_API PMEMoid pmemobj_tx_xwcsdup(const wchar_t *s, uint64_t type_num, uint64_t flags)
{
	return tx_dup(s, s ? (wcslen(s) + 1) * sizeof(wchar_t) : 0, type_num, flags,
		      "pmemobj_tx_wcsdup");
}

PMEMOBJ_API PMEMoid pmemobj_tx_wcsdup(const wchar_t *s, uint64_t type_num)
{
	return pmemobj_tx_xwcsdup(s, type_num, 0);
}

/* ---------------------------------------------------------------------------------------
 * Log buffers: keratin's log is its lanes, sized at pool creation; what an application
 * offers is accepted and not needed.
 * ------------------------------------------------------------------------------------- */
PMEMOBJ_API int pmemobj_tx_xlog_append_buffer(enum pobj_log_type type, void *addr, size_t size,
					      uint64_t flags)
{
	(void)type, (void)addr, (void)size, (void)flags;
	return in_work("pmemobj_tx_log_append_buffer", 0, 0);
}

PMEMOBJ_API int pmemobj_tx_log_append_buffer(enum pobj_log_type type, void *addr, size_t size)
{
	return pmemobj_tx_xlog_append_buffer(type, addr, size, 0);
}

PMEMOBJ_API int pmemobj_tx_log_auto_alloc(enum pobj_log_type type, int on_off)
{
	(void)type, (void)on_off;
	return in_work("pmemobj_tx_log_auto_alloc", 0, 0);
}

/* An undo entry holds the bytes and one 64-byte line per record (log.c). */
PMEMOBJ_API size_t pmemobj_tx_log_snapshots_max_size(size_t *sizes, size_t nsizes)
{
	size_t n = 0;
	for (size_t i = 0; i < nsizes; i++)
		n += sizes[i] + 64;
	return n;
}

PMEMOBJ_API size_t pmemobj_tx_log_intents_max_size(size_t nintents) { return nintents * 64; }

PMEMOBJ_API void pmemobj_tx_set_user_data(void *data) { T.user_data = data; }
PMEMOBJ_API void *pmemobj_tx_get_user_data(void) { return T.user_data; }

PMEMOBJ_API void pmemobj_tx_set_failure_behavior(enum pobj_tx_failure_behavior behavior)
{
	T.behavior = behavior;
}

PMEMOBJ_API enum pobj_tx_failure_behavior pmemobj_tx_get_failure_behavior(void)
{
	return T.behavior;
}
