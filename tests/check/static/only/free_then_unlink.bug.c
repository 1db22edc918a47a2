/*
 * free_then_unlink.bug.c - rule 4 (use-after-free) in the running transaction, on an
 * object still linked where it was found: the head of a list is freed, then its value is
 * read, and only then is the list's head moved past it. The use is held until the commit
 * (the path could have been one that never unlinks it) and reported there, at its line,
 * because the transaction did unlink the node by then.
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
			TX_FREE(h);
			D_RW(l)->total -= D_RO(h)->val; /* expect: 4 use-after-free */
			D_RW(l)->head = next;
		}
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
