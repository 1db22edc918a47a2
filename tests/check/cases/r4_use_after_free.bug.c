/*
 * r4_use_after_free.bug.c - rule 4 (use-after-free): a node is popped from a list and
 * freed in a transaction; after the commit the program still reads the node's value
 * through its old pointer. The allocator may already have handed the memory out again.
 */
#include "case.h"

struct node {
	uint64_t val;
	PMEMoid next;
};

struct list {
	PMEMoid head;
};

static void push(PMEMobjpool *pop, struct list *lst, uint64_t val)
{
	TX_BEGIN(pop) {
		PMEMoid n = pmemobj_tx_zalloc(sizeof(struct node), 1);
		struct node *np = pmemobj_direct(n);
		np->val = val;
		np->next = lst->head;
		pmemobj_tx_add_range_direct(&lst->head, sizeof(lst->head));
		lst->head = n;
	} TX_END
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct list *lst = pmemobj_direct(pmemobj_root(pop, sizeof(struct list)));
	push(pop, lst, 7);

	struct node *np = pmemobj_direct(lst->head);
	TX_BEGIN(pop) {
		PMEMoid victim = lst->head;
		pmemobj_tx_add_range_direct(&lst->head, sizeof(lst->head));
		lst->head = np->next;
		pmemobj_tx_free(victim);
	} TX_END
	printf("popped %lu\n", (unsigned long)np->val); /* expect: 4 use-after-free */

	pmemobj_close(pop);
	return 0;
}
