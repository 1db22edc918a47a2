/*
 * clean_fnptr_ctor.c - no report wanted: PmemConjurer's btree_map_insert_new false
 * positive. A transaction allocates a node and initialises it through a constructor the
 * caller passes as a function pointer. The analyzer cannot see which function that is,
 * so it must take the call as possibly writing the node, not report rule 3 at the commit.
 */
#include "../../cases/case.h"

struct node {
	uint64_t key;
	uint64_t val;
};

typedef void (*node_ctor)(struct node *n, uint64_t key);

PMEMoid insert_new(PMEMobjpool *pop, node_ctor ctor, uint64_t key)
{
	PMEMoid oid = OID_NULL;
	TX_BEGIN(pop) {
		oid = pmemobj_tx_alloc(sizeof(struct node), 1);
		ctor(pmemobj_direct(oid), key);
	} TX_END
	return oid;
}
