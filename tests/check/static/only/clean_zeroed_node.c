/*
 * clean_zeroed_node.c - no report wanted: libpmemobj-dev's libart false positive. A node
 * that TX_ZNEW has just allocated holds no child (its count is zero); filling it up to
 * four children takes the "room left" branch each time. Read as unknown memory, the count
 * could be four already, so the first add would take the "full" branch, which replaces
 * the node and frees it, and the second add would then use the freed node: a path no run
 * takes. A zeroed allocation must read as zero until it is written.
 */
#include "../../cases/case.h"

TOID_DECLARE(struct node4, 1);

struct node4 {
	uint8_t count;
	uint8_t keys[4];
};

static void add_child(TOID(struct node4) n, uint8_t key)
{
	if (D_RO(n)->count < 4) {
		TX_ADD(n);
		D_RW(n)->keys[D_RO(n)->count] = key;
		D_RW(n)->count++;
	} else {
		/* full: a bigger node would take its place */
		TX_FREE(n);
	}
}

int make_node(PMEMobjpool *pop, TOID(struct node4) *out)
{
	int ret = 0;
	TX_BEGIN(pop) {
		TOID(struct node4) n = TX_ZNEW(struct node4);
		add_child(n, 'a');
		add_child(n, 'b');
		*out = n;
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
