/*
 * free_then_unlink.fixed.c - the twin of free_then_unlink.bug.c: the value is read before
 * the node is freed.
 */
#include "../../cases/case.h"

TOID_DECLARE(struct node, 1);
TOID_DECLARE_ROOT(struct list);

struct node {
	uint64_t val;
	TOID(struct node) next;
};

struct list {
	TOID(struct node) head;
	uint64_t total;
};

int pop_front(PMEMobjpool *pop)
{
	int ret = 0;
	TOID(struct list) l = POBJ_ROOT(pop, struct list);
	TX_BEGIN(pop) {
		TX_ADD(l);
		TOID(struct node) h = D_RO(l)->head;
		if (!TOID_IS_NULL(h)) {
			TOID(struct node) next = D_RO(h)->next;
			D_RW(l)->total -= D_RO(h)->val;
			TX_FREE(h);
			D_RW(l)->head = next;
		}
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
