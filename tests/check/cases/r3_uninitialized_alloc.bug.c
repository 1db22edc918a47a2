/*
 * r3_uninitialized_alloc.bug.c - rule 3 (uninitialized-alloc): a transaction allocates a
 * list node with pmemobj_tx_alloc (which does not zero it), links it in, and commits
 * without ever writing it. The list now holds a node with garbage in its value and next
 * fields.
 */
#include "case.h"

struct node {
	uint64_t val;
	PMEMoid next;
};

struct list {
	PMEMoid head;
	uint64_t len;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct list *lst = pmemobj_direct(pmemobj_root(pop, sizeof(struct list)));

	TX_BEGIN(pop) {
		PMEMoid n = pmemobj_tx_alloc(sizeof(struct node), 1); /* expect: 3 uninitialized-alloc */
		pmemobj_tx_add_range_direct(lst, sizeof(*lst));
		lst->head = n;
		lst->len += 1;
	} TX_END /* related: 3 uninitialized-alloc */

	pmemobj_close(pop);
	return 0;
}
