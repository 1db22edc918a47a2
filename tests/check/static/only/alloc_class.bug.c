/*
 * alloc_class.bug.c - rule 3 (uninitialized-alloc) through an allocation class: as in
 * libpmemobj-dev's slab_allocator, a transaction allocates from a class registered at run
 * time (pmemobj_tx_xalloc with POBJ_CLASS_ID(id), id read from memory) and never writes
 * the object. The flags are id << 48: whatever id is, POBJ_XALLOC_ZERO (bit 0) is clear,
 * so the object is not zeroed either.
 */
#include "../../cases/case.h"

struct slab {
	struct pobj_alloc_class_desc class;
};

struct root {
	PMEMoid item;
};

int add_item(PMEMobjpool *pop, struct root *r, const struct slab *s)
{
	int rc = 0;
	TX_BEGIN(pop) {
		PMEMoid item = pmemobj_tx_xalloc(s->class.unit_size, 1, POBJ_CLASS_ID(s->class.class_id)); /* expect: 3 uninitialized-alloc */
		pmemobj_tx_add_range_direct(&r->item, sizeof(r->item));
		r->item = item;
	} TX_ONABORT {
		rc = -1;
	} TX_END
	return rc;
}
