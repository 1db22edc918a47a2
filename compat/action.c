/*
 * action.c - keratin-pmemobj's action API: reservations (pmemobj_reserve), deferred frees
 * and deferred 8-byte stores, published together in one transaction or cancelled.
 *
 * keratin's allocator has no volatile reservations, so a reservation is made live at once,
 * in one transaction together with a small record object (type KP_TYPE_RESERVED) that names
 * it. Until it is published the object is hidden from the application (kp_is_reserved:
 * iteration skips it) and the record says it is not the application's yet: an open after a
 * crash, or after an exit that never published, frees both, so a reservation never leaks,
 * as libpmemobj promises. The application writes a reserved object directly and persists it
 * (persist.c declares those stores). Publishing frees the records and applies the deferred
 * actions in one transaction; cancelling frees reservations and records.
 *
 * A struct pobj_action (128 bytes, the caller's) holds, for a reservation, the object's
 * offset and size in heap and the record's offset in data2[2]; data[0] says which action.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"

enum { ACT_RESERVE = 1, ACT_FREE = 2, ACT_SET = 3 };
#define REC_OID data2[2]
#define SET_ADDR data2[0]
#define SET_VALUE data2[1]

int kp_reservations_recover(struct kp_pool *p)
{
	kr_tx *tx = NULL;
	int rc = KR_OK;
	for (kr_oid o = kr_first(p->kr); o && rc == KR_OK; o = kr_next(p->kr, o)) {
		if (kr_type(p->kr, o) != KP_TYPE_RESERVED)
			continue;
		if (!tx && (rc = kp_tx_begin(p, &tx)))
			break;
		const kr_oid *target = kr_get(p->kr, o);
		rc = kr_tx_free(tx, o);
		if (rc == KR_OK && target && *target)
			rc = kr_tx_free(tx, *target);
	}
	if (tx)
		rc = rc ? (kr_tx_abort(tx), rc) : kr_tx_commit(tx);
	return rc ? kp_err_kr(rc, "freeing unpublished reservations") : 0;
}

PMEMOBJ_API PMEMoid pmemobj_xreserve(PMEMobjpool *pop, struct pobj_action *act, size_t size,
				     uint64_t type_num, uint64_t flags)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p || !act)
		return kp_err(EINVAL, "pmemobj_reserve: bad pool or action"), OID_NULL;
	if (flags & ~POBJ_ACTION_XRESERVE_VALID_FLAGS)
		return kp_err(EINVAL, "pmemobj_xreserve: unknown flags"), OID_NULL;
	kr_tx *tx;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc)
		return kp_err_kr(rc, "pmemobj_reserve"), OID_NULL;
	kr_oid n = 0, rec = 0;
	rc = kp_new_object(p, tx, own, size, type_num, NULL, NULL, &n);
	if (rc == KR_OK && (rc = kr_tx_alloc(tx, sizeof(kr_oid), KP_TYPE_RESERVED, &rec)) == KR_OK) {
		kr_oid *r = own ? kr_tx_open(tx, rec) : kr_tx_add_in_place(tx, rec, 0, sizeof(kr_oid));
		if (!r)
			rc = kr_errcode();
		else if (own)
			*r = n;
		else
			rc = kr_tx_write_in_place(tx, rec, 0, &n, sizeof(n));
	}
	rc = kp_atomic_end(tx, own, rc);
	if (rc == KR_OK && kp_reservation_hold(p, n))
		rc = kr_error_set(KR_E_NOMEM, "reservation table");
	if (rc)
		return kp_err_kr(rc, "pmemobj_reserve"), OID_NULL;
	memset(act, 0, sizeof(*act));
	act->type = POBJ_ACTION_TYPE_HEAP;
	act->data[0] = ACT_RESERVE;
	act->heap.offset = n;
	act->heap.usable_size = size;
	act->REC_OID = rec;
	return kp_oid(p, n);
}

PMEMOBJ_API PMEMoid pmemobj_reserve(PMEMobjpool *pop, struct pobj_action *act, size_t size,
				    uint64_t type_num)
{
	return pmemobj_xreserve(pop, act, size, type_num, 0);
}

PMEMOBJ_API void pmemobj_defer_free(PMEMobjpool *pop, PMEMoid oid, struct pobj_action *act)
{
	(void)pop;
	memset(act, 0, sizeof(*act));
	act->type = POBJ_ACTION_TYPE_HEAP;
	act->data[0] = ACT_FREE;
	act->heap.offset = oid.off;
}

PMEMOBJ_API void pmemobj_set_value(PMEMobjpool *pop, struct pobj_action *act, uint64_t *ptr,
				   uint64_t value)
{
	(void)pop;
	memset(act, 0, sizeof(*act));
	act->type = POBJ_ACTION_TYPE_MEM;
	act->data[0] = ACT_SET;
	act->SET_ADDR = (uint64_t)(uintptr_t)ptr;
	act->SET_VALUE = value;
}

/* Every action of actv in tx. */
static int publish_in(struct kp_pool *p, kr_tx *tx, int own, struct pobj_action *actv, size_t n)
{
	int rc = KR_OK;
	for (size_t i = 0; i < n && rc == KR_OK; i++) {
		struct pobj_action *a = &actv[i];
		if (a->data[0] == ACT_RESERVE)
			rc = kr_tx_free(tx, a->REC_OID);
		else if (a->data[0] == ACT_FREE)
			rc = a->heap.offset ? kr_tx_free(tx, a->heap.offset) : KR_OK;
		else if (a->data[0] == ACT_SET)
			rc = kp_write(p, tx, own, (void *)(uintptr_t)a->SET_ADDR, &a->SET_VALUE,
				      sizeof(uint64_t));
		else
			rc = kr_error_set(KR_E_MISUSE_ARG, "action %zu was never filled in", i);
	}
	return rc;
}

static void unhold_all(struct kp_pool *p, struct pobj_action *actv, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (actv[i].data[0] == ACT_RESERVE)
			kp_reservation_drop(p, actv[i].heap.offset);
}

PMEMOBJ_API int pmemobj_publish(PMEMobjpool *pop, struct pobj_action *actv, size_t actvcnt)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p || (!actv && actvcnt))
		return kp_err(EINVAL, "pmemobj_publish: bad pool or actions");
	kr_tx *tx;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc == KR_OK)
		rc = kp_atomic_end(tx, own, publish_in(p, tx, own, actv, actvcnt));
	if (rc)
		return kp_err_kr(rc, "pmemobj_publish");
	unhold_all(p, actv, actvcnt);
	return 0;
}

/* Inside the transaction: the actions commit or abort with it. */
PMEMOBJ_API int pmemobj_tx_xpublish(struct pobj_action *actv, size_t actvcnt, uint64_t flags)
{
	struct kp_pool *p = kp_tx_pool();
	if (!p)
		return kp_err(EINVAL, "pmemobj_tx_publish outside a transaction's work stage"), EINVAL;
	if (flags & ~POBJ_XPUBLISH_VALID_FLAGS)
		return kp_err(EINVAL, "pmemobj_tx_xpublish: unknown flags"), kp_tx_fail(EINVAL, flags);
	int rc = publish_in(p, kp_tx_current(p), 0, actv, actvcnt);
	if (rc) {
		kp_err_kr(rc, "pmemobj_tx_publish");
		return kp_tx_fail(kp_errno_of(rc), flags);
	}
	unhold_all(p, actv, actvcnt);
	return 0;
}

PMEMOBJ_API int pmemobj_tx_publish(struct pobj_action *actv, size_t actvcnt)
{
	return pmemobj_tx_xpublish(actv, actvcnt, 0);
}

PMEMOBJ_API void pmemobj_cancel(PMEMobjpool *pop, struct pobj_action *actv, size_t actvcnt)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p)
		return;
	kr_tx *tx;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc == KR_OK) {
		for (size_t i = 0; i < actvcnt && rc == KR_OK; i++)
			if (actv[i].data[0] == ACT_RESERVE &&
			    (rc = kr_tx_free(tx, actv[i].REC_OID)) == KR_OK)
				rc = kr_tx_free(tx, actv[i].heap.offset);
		rc = kp_atomic_end(tx, own, rc);
	}
	if (rc)
		kp_err_kr(rc, "pmemobj_cancel");
	else
		unhold_all(p, actv, actvcnt);
}
