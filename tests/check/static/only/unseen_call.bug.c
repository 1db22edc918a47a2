/*
 * unseen_call.bug.c - stores the analyzer must still see around calls it does not follow
 * (declared here, defined elsewhere):
 *   - into a node whose TOID such a call returns: its return value names an object like
 *     any other, so the unflushed store is rule 1;
 *   - into a node read out of the root after a void call given the root: the call may
 *     have changed the root, but what the path reads from it afterwards is still an
 *     object, and the unflushed store is rule 1.
 * The fixed twin persists both.
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
	D_RW(n)->x = 1; /* expect: 1 missing-flush */
}

void set_head(PMEMobjpool *pop, struct root *r)
{
	rearrange(r);
	D_RW(r->head)->x = 2; /* expect: 1 missing-flush */
}
