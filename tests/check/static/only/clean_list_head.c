/*
 * clean_list_head.c - no report wanted: libpmemobj-dev's pminvaders2 false positive. A
 * doubly linked list is walked in a transaction and the nodes that have fallen off the
 * screen are unlinked and freed: through the predecessor when there is one, else through
 * the root. Then a new node is pushed at the head, and the next transaction walks the list
 * again. The analyzer does not know that the head has no predecessor, so it also follows
 * the path that unlinks the head through one and frees it while the root still names it;
 * on that path the push and the next walk use the freed head. A commit that leaves a freed
 * object named where it was found is a path no run takes: it must draw no report.
 */
#include "../../cases/case.h"

TOID_DECLARE(struct star, 1);
TOID_DECLARE_ROOT(struct sky);

struct star {
	int y;
	TOID(struct star) prev, next;
};

struct sky {
	TOID(struct star) stars;
};

static void push(TOID(struct star) *head)
{
	TOID(struct star) s = TX_ZNEW(struct star);
	D_RW(s)->next = *head;
	if (!TOID_IS_NULL(*head)) {
		TX_ADD_FIELD(*head, prev);
		D_RW(*head)->prev = s;
	}
	*head = s;
}

static void fall(PMEMobjpool *pop, TOID(struct sky) sky)
{
	TX_BEGIN(pop) {
		TOID(struct star) s = D_RO(sky)->stars;
		while (!TOID_IS_NULL(s)) {
			TX_ADD(s);
			TOID(struct star) sp = D_RO(s)->prev;
			TOID(struct star) sn = D_RO(s)->next;
			if (++D_RW(s)->y >= 24) {
				if (!TOID_IS_NULL(sp)) {
					TX_ADD(sp);
					D_RW(sp)->next = sn;
				} else {
					TX_ADD(sky);
					D_RW(sky)->stars = sn;
				}
				if (!TOID_IS_NULL(sn)) {
					TX_ADD(sn);
					D_RW(sn)->prev = sp;
				}
				TX_FREE(s);
			}
			s = sn;
		}
		TX_ADD(sky);
		push(&D_RW(sky)->stars);
	} TX_END
}

int run(PMEMobjpool *pop)
{
	TOID(struct sky) sky = POBJ_ROOT(pop, struct sky);
	fall(pop, sky);
	fall(pop, sky);
	return 0;
}
