/*
 * unseen_call.fixed.c - the twin of unseen_call.bug.c: both stores are persisted; no report.
 */
#include "../../cases/case.h"

struct node {
	uint64_t x;
};
TOID_DECLARE(struct node, 1);

struct root {
	TOID(struct node) head;
};

TOID(struct node) next_node(PMEMobjpool *pop);
void rearrange(struct root *r);

void set_next(PMEMobjpool *pop)
{
	TOID(struct node) n = next_node(pop);
	D_RW(n)->x = 1;
	pmemobj_persist(pop, &D_RW(n)->x, sizeof(D_RW(n)->x));
}

void set_head(PMEMobjpool *pop, struct root *r)
{
	rearrange(r);
	D_RW(r->head)->x = 2;
	pmemobj_persist(pop, &D_RW(r->head)->x, sizeof(D_RW(r->head)->x));
}
