/*
 * pmdk_rtree_unlogged.bug.c - rule 2 (unlogged-write) three times, after bugs once found
 * in PMDK's radix tree example: the insert changes three fields of an existing node
 * inside a transaction without adding them to the undo log first. A crash or abort
 * before commit leaves the node half updated.
 *
 * The tree here has one level: keys equal to the root's key live in the root, other keys
 * in a leaf chosen by their low four bits.
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
			root->has_value = 1; /* expect: 2 unlogged-write */
			root->value = value; /* expect: 2 unlogged-write */
		} else {
			unsigned slot = key % RT_FANOUT;
			pmemobj_tx_add_range_direct(&root->child[slot], sizeof(root->child[slot]));
			root->child[slot] = new_leaf(key, value);
			root->nchild += 1; /* expect: 2 unlogged-write */
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
