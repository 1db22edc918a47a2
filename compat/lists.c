/*
 * lists.c - keratin-pmemobj's atomic lists (pmemobj_list_insert, insert_new, remove, move;
 * the POBJ_LIST_* macros call these): circular doubly linked lists of PMEMoids, each
 * change one keratin transaction, under the list head's lock.
 *
 * An element's entry is (pe_next, pe_prev) at pe_offset in it; a head is pe_first followed
 * by a PMEMmutex. The links are read through the transaction (kr_tx_get: a link changed
 * earlier in the same call reads back changed) and written with kp_write.
 */
#include <errno.h>
#include <string.h>

#include "compat.h"

/* The objects an operation has located, the last few: a list change reads and writes
 * each link of the three or four objects it touches, and locating one (heap map, header)
 * is a cache miss each time (a third of a pmemobj_list_move in hashmap_atomic's rebuild).
 * Objects stay put for the operation: it holds the list's lock, and its one free
 * (pmemobj_list_remove's) comes after its last link. */
enum { SEEN = 4 };

struct op {
	struct kp_pool *p;
	kr_tx *tx;
	int own;
	int rc;
	struct {
		kr_oid oid;
		size_t size;
	} seen[SEEN];
	unsigned nseen;
};

/* The object and offset of the PMEMoid at pool address addr. */
static int locate(struct op *o, const void *addr, kr_oid *oid, size_t *off)
{
	uint64_t at = (uint64_t)((const char *)addr - o->p->base);
	for (unsigned i = 0; i < o->nseen && i < SEEN; i++)
		if (at >= o->seen[i].oid && at + sizeof(PMEMoid) <= o->seen[i].oid + o->seen[i].size) {
			*oid = o->seen[i].oid;
			*off = at - *oid;
			return KR_OK;
		}
	size_t size;
	int rc = kp_locate(o->p, o->tx, addr, sizeof(PMEMoid), oid, off, &size);
	if (rc == KR_OK) {
		o->seen[o->nseen % SEEN].oid = *oid;
		o->seen[o->nseen % SEEN].size = size;
		o->nseen++;
	}
	return rc;
}

/* The PMEMoid at pool address addr, as the transaction sees it. */
static PMEMoid rd(struct op *o, const void *addr)
{
	PMEMoid v = OID_NULL;
	kr_oid oid;
	size_t off;
	if (o->rc)
		return v;
	if ((o->rc = locate(o, addr, &oid, &off)) == KR_OK) {
		const char *b = kr_tx_get(o->tx, oid);
		if (b)
			memcpy(&v, b + off, sizeof(v));
		else
			o->rc = kr_errcode();
	}
	return v;
}

static void wr(struct op *o, void *addr, PMEMoid v)
{
	kr_oid oid;
	size_t off;
	if (!o->rc && (o->rc = locate(o, addr, &oid, &off)) == KR_OK)
		o->rc = kp_write_at(o->tx, o->own, oid, off, &v, sizeof(v));
}

static char *next_of(struct op *o, PMEMoid e, size_t pe) { return o->p->base + e.off + pe; }
static char *prev_of(struct op *o, PMEMoid e, size_t pe) { return next_of(o, e, pe) + sizeof(PMEMoid); }

static void insert(struct op *o, size_t pe, void *head, PMEMoid dest, int before, PMEMoid e)
{
	PMEMoid first = rd(o, head);
	if (OID_IS_NULL(first)) {
		wr(o, next_of(o, e, pe), e);
		wr(o, prev_of(o, e, pe), e);
		wr(o, head, e);
		return;
	}
	/* Everything is an insertion before some element x. */
	PMEMoid x;
	int becomes_first;
	if (OID_IS_NULL(dest)) {
		x = first;
		becomes_first = before == POBJ_LIST_DEST_HEAD;
	} else if (before) {
		x = dest;
		becomes_first = dest.off == first.off;
	} else {
		x = rd(o, next_of(o, dest, pe));
		becomes_first = 0;
	}
	PMEMoid prev = rd(o, prev_of(o, x, pe));
	wr(o, next_of(o, e, pe), x);
	wr(o, prev_of(o, e, pe), prev);
	wr(o, next_of(o, prev, pe), e);
	wr(o, prev_of(o, x, pe), e);
	if (becomes_first)
		wr(o, head, e);
}

static void unlink_one(struct op *o, size_t pe, void *head, PMEMoid e)
{
	PMEMoid first = rd(o, head);
	PMEMoid next = rd(o, next_of(o, e, pe));
	PMEMoid prev = rd(o, prev_of(o, e, pe));
	if (o->rc)
		return;
	if (next.off == e.off) { /* the only element */
		wr(o, head, OID_NULL);
	} else {
		wr(o, next_of(o, prev, pe), next);
		wr(o, prev_of(o, next, pe), prev);
		if (first.off == e.off)
			wr(o, head, next);
	}
}

static PMEMmutex *head_lock(void *head) { return (PMEMmutex *)((char *)head + sizeof(PMEMoid)); }

static int op_begin(struct op *o, PMEMobjpool *pop, void *head, const char *what)
{
	o->p = kp_pool_of(pop);
	o->rc = 0;
	o->nseen = 0;
	if (!o->p || kp_pool_by_addr(head) != o->p)
		return kp_err(EINVAL, "%s: bad pool, or the list head is not in it", what);
	int rc = kp_atomic_begin(o->p, &o->tx, &o->own);
	if (rc)
		return kp_err_kr(rc, what);
	kp_lock_mutex(o->p, head_lock(head));
	return 0;
}

static int op_end(struct op *o, void *head, const char *what)
{
	int rc = kp_atomic_end(o->tx, o->own, o->rc);
	kp_unlock_mutex(o->p, head_lock(head));
	if (rc == KR_E_MISUSE)
		return kp_err(ECANCELED, "%s: %s", what, kr_errmsg());
	return rc ? kp_err_kr(rc, what) : 0;
}

static int mine(struct op *o, PMEMoid e)
{
	if (OID_IS_NULL(e) || e.pool_uuid_lo != o->p->uuid_lo || !kr_size(o->p->kr, e.off))
		o->rc = o->rc ? o->rc : kr_error_set(KR_E_MISUSE_OID, "not an object of the pool");
	return o->rc == 0;
}

PMEMOBJ_API int pmemobj_list_insert(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid dest,
				    int before, PMEMoid oid)
{
	struct op o;
	if (op_begin(&o, pop, head, "pmemobj_list_insert"))
		return -1;
	if (mine(&o, oid) && (OID_IS_NULL(dest) || mine(&o, dest)))
		insert(&o, pe_offset, head, dest, before, oid);
	return op_end(&o, head, "pmemobj_list_insert");
}

PMEMOBJ_API PMEMoid pmemobj_list_insert_new(PMEMobjpool *pop, size_t pe_offset, void *head,
					    PMEMoid dest, int before, size_t size,
					    uint64_t type_num, pmemobj_constr constructor, void *arg)
{
	struct op o;
	if (op_begin(&o, pop, head, "pmemobj_list_insert_new"))
		return OID_NULL;
	kr_oid n = 0;
	if (OID_IS_NULL(dest) || mine(&o, dest))
		o.rc = kp_new_object(o.p, o.tx, o.own, size, type_num, constructor, arg, &n);
	if (!o.rc)
		insert(&o, pe_offset, head, dest, before, kp_oid(o.p, n));
	return op_end(&o, head, "pmemobj_list_insert_new") ? OID_NULL : kp_oid(o.p, n);
}

PMEMOBJ_API int pmemobj_list_remove(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid oid,
				    int free_it)
{
	struct op o;
	if (op_begin(&o, pop, head, "pmemobj_list_remove"))
		return -1;
	if (mine(&o, oid)) {
		unlink_one(&o, pe_offset, head, oid);
		if (!o.rc && free_it)
			o.rc = kr_tx_free(o.tx, oid.off);
	}
	return op_end(&o, head, "pmemobj_list_remove");
}

PMEMOBJ_API int pmemobj_list_move(PMEMobjpool *pop, size_t pe_old_offset, void *head_old,
				  size_t pe_new_offset, void *head_new, PMEMoid dest, int before,
				  PMEMoid oid)
{
	struct op o;
	if (op_begin(&o, pop, head_old, "pmemobj_list_move"))
		return -1;
	int two = head_new != head_old;
	if (two && kp_pool_by_addr(head_new) != o.p)
		o.rc = kr_error_set(KR_E_MISUSE_ARG, "the new list head is not in the pool");
	if (!o.rc && two)
		kp_lock_mutex(o.p, head_lock(head_new));
	if (!o.rc && mine(&o, oid) && (OID_IS_NULL(dest) || mine(&o, dest))) {
		unlink_one(&o, pe_old_offset, head_old, oid);
		insert(&o, pe_new_offset, head_new, dest, before, oid);
	}
	if (two && kp_pool_by_addr(head_new) == o.p)
		kp_unlock_mutex(o.p, head_lock(head_new));
	return op_end(&o, head_old, "pmemobj_list_move");
}
