/*
 * clean_widened_oid.c - no report wanted: libpmemobj-dev's obj_pmemlog false positive. An
 * append of any number of records in one transaction links each new record after the
 * tail, which is the record the step before allocated. Widened after a few steps, the loop
 * forgets what the log object held, so the tail's oid is a new unknown value; taken for
 * an object that existed before, its link store was an unlogged write. An oid read from
 * memory a widening forgot names an object the checker cannot know: no report for it.
 */
#include "../../cases/case.h"

struct rec {
	uint64_t val;
	PMEMoid next;
};

struct log {
	PMEMoid head, tail;
	uint64_t count;
};

int append(PMEMobjpool *pop, PMEMoid logoid, const uint64_t *vals, int count)
{
	int ret = 0;
	struct log *l = pmemobj_direct(logoid);
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(logoid, 0, sizeof(struct log));
		if (!OID_IS_NULL(l->tail))
			pmemobj_tx_add_range(l->tail, 0, sizeof(struct rec));
		for (int i = 0; i < count; i++) {
			PMEMoid n = pmemobj_tx_alloc(sizeof(struct rec), 1);
			struct rec *r = pmemobj_direct(n);
			r->val = vals[i];
			r->next = OID_NULL;
			if (OID_IS_NULL(l->tail))
				l->head = n;
			else
				((struct rec *)pmemobj_direct(l->tail))->next = n;
			l->tail = n;
			l->count++;
		}
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
