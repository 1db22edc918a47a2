/*
 * pmdk_rtree_unlogged.fixed.c - the twin of pmdk_rtree_unlogged.bug.c: every field of
 * the existing node that the insert changes is added to the undo log first.
 */
#include "case.h"

#define RT_FANOUT 16

struct rnode {
	uint64_t key;
	uint32_t has_value;
	uint32_t nchild;
	uint64_t value;
	PMEMoid child[RT_FANOUT];
};

static PMEMoid new_leaf(uint64_t key, uint64_t value)
{
	PMEMoid oid = pmemobj_tx_zalloc(sizeof(struct rnode), 1);
	struct rnode *leaf = pmemobj_direct(oid);
	leaf->key = key;
	leaf->has_value = 1;
	leaf->value = value;
	return oid;
}

static void insert(PMEMobjpool *pop, struct rnode *root, uint64_t key, uint64_t value)
{
	TX_BEGIN(pop) {
		if (key == root->key) {
			pmemobj_tx_add_range_direct(&root->has_value, sizeof(root->has_value));
			pmemobj_tx_add_range_direct(&root->value, sizeof(root->value));
			root->has_value = 1;
			root->value = value;
		} else {
			unsigned slot = key % RT_FANOUT;
			pmemobj_tx_add_range_direct(&root->child[slot], sizeof(root->child[slot]));
			pmemobj_tx_add_range_direct(&root->nchild, sizeof(root->nchild));
			root->child[slot] = new_leaf(key, value);
			root->nchild += 1;
		}
	} TX_END
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct rnode *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct rnode)));

	insert(pop, root, 0, 100);
	insert(pop, root, 5, 105);
	insert(pop, root, 9, 109);

	pmemobj_close(pop);
	return 0;
}
