/*
 * pmdk_persist_stack_slot.bug.c - rule 1a (flush-not-pm), after a bug once found in a
 * PMDK example: the persist is handed the address of the local variable that holds the
 * pointer (&p) instead of the pointer (p). It flushes a stack slot, and the point's two
 * coordinates stay unflushed (rule 1 on each store).
 */
#include "case.h"

struct point {
	int64_t x;
	int64_t y;
};

struct root {
	PMEMoid pt;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct root *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
	if (pmemobj_zalloc(pop, &root->pt, sizeof(struct point), 1) != 0)
		case_die("pmemobj_zalloc");

	struct point *p = pmemobj_direct(root->pt);
	p->x = 3; /* expect: 1 missing-flush */
	p->y = 4; /* expect: 1 missing-flush */
	pmemobj_persist(pop, &p, sizeof(p)); /* expect: 1a flush-not-pm */

	pmemobj_close(pop);
	return 0;
}
