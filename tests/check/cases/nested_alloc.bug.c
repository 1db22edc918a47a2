/*
 * nested_alloc.bug.c - objects allocated inside a nested transaction (a helper with its
 * own TX_BEGIN, called in the caller's transaction) belong to the outermost one: new until
 * it commits, old after. One is never written before that commit (rule 3); the other is
 * written in it freely, then changed in a later transaction without being added (rule 2).
 */
#include "case.h"

struct node {
	uint64_t key;
	PMEMoid next;
};

struct root {
	PMEMoid head;
};

static PMEMoid new_node(PMEMobjpool *pop, int zeroed)
{
	PMEMoid n = OID_NULL;
	TX_BEGIN(pop) {
		if (zeroed)
			n = pmemobj_tx_zalloc(sizeof(struct node), 1);
		else
			n = pmemobj_tx_alloc(sizeof(struct node), 1); /* expect: 3 uninitialized-alloc */
	} TX_END
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
	if (r == NULL)
		case_die("pmemobj_root");

	PMEMoid a = OID_NULL, b = OID_NULL;
	TX_BEGIN(pop) {
		a = new_node(pop, 0);
		b = new_node(pop, 1);
		struct node *pb = pmemobj_direct(b);
		pb->key = 7;
		pb->next = a;
		pmemobj_tx_add_range_direct(&r->head, sizeof(r->head));
		r->head = b;
	} TX_END
	TX_BEGIN(pop) {
		struct node *pb = pmemobj_direct(b);
		pb->key = 8; /* expect: 2 unlogged-write */
	} TX_END
	pmemobj_close(pop);
	return 0;
}
