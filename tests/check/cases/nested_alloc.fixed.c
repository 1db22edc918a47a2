/*
 * nested_alloc.fixed.c - the twin of nested_alloc.bug.c: the node the nested transaction
 * allocates without zeroing is written before the outermost commit, and the later change
 * is added to its transaction first.
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
			n = pmemobj_tx_alloc(sizeof(struct node), 1);
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
		struct node *pa = pmemobj_direct(a);
		pa->key = 0;
		pa->next = OID_NULL;
		b = new_node(pop, 1);
		struct node *pb = pmemobj_direct(b);
		pb->key = 7;
		pb->next = a;
		pmemobj_tx_add_range_direct(&r->head, sizeof(r->head));
		r->head = b;
	} TX_END
	TX_BEGIN(pop) {
		struct node *pb = pmemobj_direct(b);
		pmemobj_tx_add_range_direct(&pb->key, sizeof(pb->key));
		pb->key = 8;
	} TX_END
	pmemobj_close(pop);
	return 0;
}
