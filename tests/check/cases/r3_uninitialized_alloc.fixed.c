/*
 * r3_uninitialized_alloc.fixed.c - the twin of r3_uninitialized_alloc.bug.c: the new
 * node's fields are written inside the transaction before it commits.
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
		PMEMoid n = pmemobj_tx_alloc(sizeof(struct node), 1);
		struct node *np = pmemobj_direct(n);
		np->val = 7;
		np->next = lst->head;
		pmemobj_tx_add_range_direct(lst, sizeof(*lst));
		lst->head = n;
		lst->len += 1;
	} TX_END

	pmemobj_close(pop);
	return 0;
}
