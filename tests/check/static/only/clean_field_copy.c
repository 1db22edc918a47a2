/*
 * clean_field_copy.c - no report wanted: libpmemobj-dev's libart false positive. Adding a
 * key to a node shifts the keys after it with memmove, then counts the new one. The
 * memmove writes into the keys array only; taken as writing anywhere in the node, it made
 * the path forget the count it had just set, so that a later add could find the node
 * "full" and free it, and the next one use it: a path no run takes. A library write into a
 * field of an object changes that field, not the others.
 */
#include "../../cases/case.h"
#include <string.h>

TOID_DECLARE(struct node4, 1);

struct node4 {
	uint8_t count;
	uint8_t keys[4];
};

static void add_key(TOID(struct node4) n, uint8_t key)
{
	if (D_RO(n)->count < 4) {
		TX_ADD(n);
		int at = 0;
		while (at < D_RO(n)->count && D_RO(n)->keys[at] < key)
			at++;
		memmove(D_RW(n)->keys + at + 1, D_RO(n)->keys + at, D_RO(n)->count - at);
		D_RW(n)->keys[at] = key;
		D_RW(n)->count++;
	} else {
		TX_FREE(n);
	}
}

int fill(PMEMobjpool *pop, TOID(struct node4) n)
{
	int ret = 0;
	TX_BEGIN(pop) {
		TX_ADD(n);
		D_RW(n)->count = 0;
		add_key(n, 'c');
		add_key(n, 'a');
		add_key(n, 'b');
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
