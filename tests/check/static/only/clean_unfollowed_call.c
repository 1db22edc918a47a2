/*
 * clean_unfollowed_call.c - no report wanted: libpmemobj-dev's pminvaders2 and hashmap_rp
 * false positives. A transaction empties a list through a function of this file that the
 * analyzer does not follow (it is too big to inline: here, a long run of branches standing
 * in for a budget that ran out), then pushes new nodes, each linked before the old head.
 * Evaluated without looking inside, the call forgets what the root held, so the head it
 * reads next is an unknown oid; taken for a node that existed before, its link store was
 * an unlogged write. An oid read from memory such a call may have written names an object
 * the checker cannot know: no report for it.
 */
#include "../../cases/case.h"

TOID_DECLARE(struct node, 1);
TOID_DECLARE_ROOT(struct root);

struct node {
	TOID(struct node) prev, next;
};

struct root {
	TOID(struct node) head;
};

#define STEP(k) if (verbose == (k)) printf("emptied (%d)\n", (k));
#define STEP10(k)                                                                          \
	STEP(k + 0) STEP(k + 1) STEP(k + 2) STEP(k + 3) STEP(k + 4) STEP(k + 5) STEP(k + 6)     \
	STEP(k + 7) STEP(k + 8) STEP(k + 9)

static void empty_list(TOID(struct node) *head, int verbose)
{
	while (!TOID_IS_NULL(*head)) {
		TOID(struct node) next = D_RO(*head)->next;
		TX_FREE(*head);
		*head = next;
	}
	STEP10(0) STEP10(10) STEP10(20) STEP10(30) STEP10(40) STEP10(50) STEP10(60)
}

int refill(PMEMobjpool *pop, int verbose)
{
	int ret = 0;
	TOID(struct root) r = POBJ_ROOT(pop, struct root);
	TX_BEGIN(pop) {
		TX_ADD(r);
		empty_list(&D_RW(r)->head, verbose);
		for (int i = 0; i < 3; i++) {
			TOID(struct node) n = TX_ZNEW(struct node);
			TOID(struct node) old = D_RO(r)->head;
			D_RW(n)->next = old;
			if (!TOID_IS_NULL(old))
				D_RW(old)->prev = n;
			D_RW(r)->head = n;
		}
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
