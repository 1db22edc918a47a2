/*
 * alloc_class.fixed.c - the twin of alloc_class.bug.c: the object allocated from the class
 * is written before the commit.
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
		PMEMoid item = pmemobj_tx_xalloc(s->class.unit_size, 1, POBJ_CLASS_ID(s->class.class_id));
		memset(pmemobj_direct(item), 0, s->class.unit_size);
		pmemobj_tx_add_range_direct(&r->item, sizeof(r->item));
		r->item = item;
	} TX_ONABORT {
		rc = -1;
	} TX_END
	return rc;
}
