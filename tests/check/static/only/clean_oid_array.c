/*
 * clean_oid_array.c - no report wanted: a skip-list insert, libpmemobj-dev's skiplist_map
 * false positive. A search fills a local array of typed oids at a loop index; the insert
 * adds each predecessor's link to the transaction and then stores it, both through the
 * same array element. The analyzer loses the array's values (written at a symbolic
 * index), so it cannot tell that the add and the store name one object: such an object
 * must draw no report rather than one per use.
 */
#include "../../cases/case.h"

#define LEVELS 4

TOID_DECLARE(struct snode, 1);

struct snode {
	uint64_t key;
	TOID(struct snode) next[LEVELS];
};

static void find(TOID(struct snode) head, uint64_t key, TOID(struct snode) *path)
{
	TOID(struct snode) at = head;
	for (int l = LEVELS - 1; l >= 0; l--) {
		while (!TOID_IS_NULL(D_RO(at)->next[l]) && D_RO(D_RO(at)->next[l])->key < key)
			at = D_RO(at)->next[l];
		path[l] = at;
	}
}

static void link_node(TOID(struct snode) n, TOID(struct snode) path[LEVELS], unsigned levels)
{
	for (unsigned l = 0; l < levels; l++) {
		TX_ADD_FIELD(path[l], next[l]);
		D_RW(n)->next[l] = D_RO(path[l])->next[l];
		D_RW(path[l])->next[l] = n;
	}
}

int insert(PMEMobjpool *pop, TOID(struct snode) head, uint64_t key, unsigned levels)
{
	int ret = 0;
	TX_BEGIN(pop) {
		TOID(struct snode) path[LEVELS];
		find(head, key, path);
		TOID(struct snode) n = TX_ZNEW(struct snode);
		D_RW(n)->key = key;
		link_node(n, path, levels);
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
