/*
 * atomic.c - keratin-pmemobj's atomic API: allocation with a constructor, realloc, strdup,
 * free, and iteration over the application's objects.
 *
 * Each call is one keratin transaction (one commit fence): the new object is built in its
 * DRAM micro-buffer (the constructor runs there, and a pmemobj_persist it makes on that
 * buffer has nothing to do), and the commit writes it home with its checksum, frees what
 * goes, and sets the PMEMoid the call was given if that lies in the pool. Inside an open
 * libpmemobj transaction of the same thread the call joins it instead (a thread has one
 * keratin transaction per pool): its effects then commit or abort with that transaction,
 * and everything it writes is written in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "compat.h"

int kp_atomic_begin(struct kp_pool *p, kr_tx **tx, int *own)
{
	*tx = kp_tx_current(p);
	*own = *tx == NULL;
	if (*tx)
		return KR_OK;
	return kp_tx_begin(p, tx);
}

int kp_atomic_end(kr_tx *tx, int own, int rc)
{
	if (!own)
		return rc;
	if (rc) {
		kr_tx_abort(tx);
		return rc;
	}
	return kr_tx_commit(tx);
}

int kp_write(struct kp_pool *p, kr_tx *tx, int own, void *addr, const void *src, size_t len)
{
	kr_oid oid;
	size_t off;
	int rc = kp_locate(p, tx, addr, len, &oid, &off, NULL);
	return rc ? rc : kp_write_at(tx, own, oid, off, src, len);
}

int kp_write_at(kr_tx *tx, int own, kr_oid oid, size_t off, const void *src, size_t len)
{
	if (!own)
		return kr_tx_write_in_place(tx, oid, off, src, len);
	void *d = kr_tx_add(tx, oid, off, len);
	if (!d)
		return kr_errcode();
	if (src)
		memmove(d, src, len);
	else
		memset(d, 0, len);
	return KR_OK;
}

int kp_store_oid(struct kp_pool *p, kr_tx *tx, PMEMoid *dst, PMEMoid val)
{
	if (!dst)
		return KR_OK;
	if (kp_pool_by_addr(dst) != p) { /* in DRAM (or another pool's: not atomic with us) */
		*dst = val;
		return KR_OK;
	}
	return kp_write(p, tx, kp_tx_current(p) == NULL, dst, &val, sizeof(val));
}

int kp_new_object(struct kp_pool *p, kr_tx *tx, int own, size_t size, uint64_t type_num,
		      pmemobj_constr constr, void *arg, kr_oid *oid)
{
	if (size == 0 || size > PMEMOBJ_MAX_ALLOC_SIZE)
		return kr_error_set(KR_E_MISUSE_ARG, "allocation of %zu bytes", size);
	if (type_num >= KP_TYPE_FIRST)
		return kr_error_set(KR_E_MISUSE_ARG,
				    "type number %llu is beyond keratin's 32-bit types",
				    (unsigned long long)type_num);
	int rc = kr_tx_alloc(tx, size, (uint32_t)type_num, oid);
	if (rc)
		return rc;
	void *buf = own ? kr_tx_open(tx, *oid) : kr_tx_add_in_place(tx, *oid, 0, size);
	if (!buf)
		return kr_errcode();
	if (constr && constr((PMEMobjpool *)p->base, buf, arg) != 0)
		return kr_error_set(KR_E_MISUSE, "the constructor failed");
	return KR_OK;
}

/* The atomic calls' start: a transaction and a new object in it. *tx is NULL if no
 * transaction could begin (the error is that one: nothing to end). */
static int begin_new(struct kp_pool *p, kr_tx **tx, int *own, size_t size, uint64_t type_num,
		     pmemobj_constr constr, void *arg, kr_oid *n)
{
	int rc = kp_atomic_begin(p, tx, own);
	if (rc) {
		*tx = NULL;
		return rc;
	}
	return kp_new_object(p, *tx, *own, size, type_num, constr, arg, n);
}

/* The atomic calls' errors: a failed constructor is ECANCELED, as documented. */
static int atomic_error(int rc, const char *what)
{
	if (rc == KR_E_MISUSE)
		return kp_err(ECANCELED, "%s: %s", what, kr_errmsg());
	return kp_err_kr(rc, what);
}

static int alloc_common(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num,
			pmemobj_constr constr, void *arg, const char *what)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p)
		return kp_err(EINVAL, "%s: %p is not an open pool", what, (void *)pop);
	if (size == 0)
		return kp_err(EINVAL, "%s: size 0", what);
	kr_tx *tx;
	int own;
	kr_oid n = 0;
	int rc = begin_new(p, &tx, &own, size, type_num, constr, arg, &n);
	if (!tx)
		return kp_err_kr(rc, what);
	if (rc == KR_OK && oidp && kp_pool_by_addr(oidp) == p)
		rc = kp_store_oid(p, tx, oidp, kp_oid(p, n));
	rc = kp_atomic_end(tx, own, rc);
	if (rc)
		return atomic_error(rc, what);
	if (oidp && kp_pool_by_addr(oidp) != p)
		*oidp = kp_oid(p, n);
	return 0;
}

PMEMOBJ_API int pmemobj_alloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num,
			      pmemobj_constr constructor, void *arg)
{
	return alloc_common(pop, oidp, size, type_num, constructor, arg, "pmemobj_alloc");
}

PMEMOBJ_API int pmemobj_xalloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num,
			       uint64_t flags, pmemobj_constr constructor, void *arg)
{
	if (flags & ~POBJ_XALLOC_VALID_FLAGS)
		return kp_err(EINVAL, "pmemobj_xalloc: unknown flags 0x%llx", (unsigned long long)flags);
	return alloc_common(pop, oidp, size, type_num, constructor, arg, "pmemobj_xalloc");
}

PMEMOBJ_API int pmemobj_zalloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{
	return alloc_common(pop, oidp, size, type_num, NULL, NULL, "pmemobj_zalloc");
}

struct dup_arg {
	const void *src;
	size_t len;
};

static int dup_constr(PMEMobjpool *pop, void *ptr, void *arg)
{
	(void)pop;
	const struct dup_arg *d = arg;
	memcpy(ptr, d->src, d->len);
	return 0;
}

PMEMOBJ_API int pmemobj_strdup(PMEMobjpool *pop, PMEMoid *oidp, const char *s, uint64_t type_num)
{
	if (!s)
		return kp_err(EINVAL, "pmemobj_strdup: NULL string");
	struct dup_arg d = {s, strlen(s) + 1};
	return alloc_common(pop, oidp, d.len, type_num, dup_constr, &d, "pmemobj_strdup");
}

PMEMOBJ_API int pmemobj_wcsdup(PMEMobjpool *pop, PMEMoid *oidp, const wchar_t *s, uint64_t type_num)
{
	if (!s)
		return kp_err(EINVAL, "pmemobj_wcsdup: NULL string");
	struct dup_arg d = {s, (wcslen(s) + 1) * sizeof(wchar_t)};
	return alloc_common(pop, oidp, d.len, type_num, dup_constr, &d, "pmemobj_wcsdup");
}

/* Moves the object to a new one of size bytes (the old bytes kept, the rest zero), frees
 * the old one and sets *oidp, in one transaction. */
static int realloc_common(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num,
			  const char *what)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p || !oidp)
		return kp_err(EINVAL, "%s: bad pool or oidp", what);
	if (OID_IS_NULL(*oidp))
		return alloc_common(pop, oidp, size, type_num, NULL, NULL, what);
	if (size == 0) {
		pmemobj_free(oidp);
		return 0;
	}
	if (oidp->pool_uuid_lo != p->uuid_lo)
		return kp_err(EINVAL, "%s: the object is not in this pool", what);
	kr_oid old = oidp->off;
	size_t old_size = kr_size(p->kr, old);
	if (!old_size)
		return kp_err_kr(kr_errcode(), what);
	const void *src = kr_get(p->kr, old);
	struct dup_arg d = {src, old_size < size ? old_size : size};
	kr_tx *tx;
	int own;
	kr_oid n = 0;
	int rc = begin_new(p, &tx, &own, size, type_num, dup_constr, &d, &n);
	if (!tx)
		return kp_err_kr(rc, what);
	if (rc == KR_OK)
		rc = kr_tx_free(tx, old);
	if (rc == KR_OK && kp_pool_by_addr(oidp) == p)
		rc = kp_store_oid(p, tx, oidp, kp_oid(p, n));
	rc = kp_atomic_end(tx, own, rc);
	if (rc)
		return atomic_error(rc, what);
	if (kp_pool_by_addr(oidp) != p)
		*oidp = kp_oid(p, n);
	return 0;
}

PMEMOBJ_API int pmemobj_realloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{
	return realloc_common(pop, oidp, size, type_num, "pmemobj_realloc");
}

PMEMOBJ_API int pmemobj_zrealloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{
	return realloc_common(pop, oidp, size, type_num, "pmemobj_zrealloc");
}

PMEMOBJ_API void pmemobj_free(PMEMoid *oidp)
{
	if (!oidp || OID_IS_NULL(*oidp))
		return;
	struct kp_pool *p = kp_pool_by_uuid(oidp->pool_uuid_lo);
	if (!p) {
		kp_err(EINVAL, "pmemobj_free: the object's pool is not open");
		return;
	}
	if (!kp_is_users(p, oidp->off)) {
		kp_err(EINVAL, "pmemobj_free: 0x%llx is not an object the application may free",
		       (unsigned long long)oidp->off);
		return;
	}
	kr_tx *tx;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc == KR_OK) {
		rc = kr_tx_free(tx, oidp->off);
		if (rc == KR_OK && kp_pool_by_addr(oidp) == p)
			rc = kp_store_oid(p, tx, oidp, OID_NULL);
		rc = kp_atomic_end(tx, own, rc);
	}
	if (rc) {
		kp_err_kr(rc, "pmemobj_free");
		return;
	}
	if (kp_pool_by_addr(oidp) != p)
		*oidp = OID_NULL;
}

/* ---------------------------------------------------------------------------------------
 * Iteration: the application's objects, in pool order (not the root, as in libpmemobj)
 * ------------------------------------------------------------------------------------- */
static PMEMoid next_users(struct kp_pool *p, kr_oid from)
{
	for (kr_oid o = from; o; o = kr_next(p->kr, o))
		if (kp_is_users(p, o))
			return kp_oid(p, o);
	return OID_NULL;
}

PMEMOBJ_API PMEMoid pmemobj_first(PMEMobjpool *pop)
{
	struct kp_pool *p = kp_pool_of(pop);
	return p ? next_users(p, kr_first(p->kr)) : OID_NULL;
}

PMEMOBJ_API PMEMoid pmemobj_next(PMEMoid oid)
{
	struct kp_pool *p = OID_IS_NULL(oid) ? NULL : kp_pool_by_uuid(oid.pool_uuid_lo);
	return p ? next_users(p, kr_next(p->kr, oid.off)) : OID_NULL;
}
