/*
 * pmdk_persist_stack_slot.fixed.c - the twin of pmdk_persist_stack_slot.bug.c: the
 * persist is handed the point itself and its size.
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
	p->x = 3;
	p->y = 4;
	pmemobj_persist(pop, p, sizeof(*p));

	pmemobj_close(pop);
	return 0;
}
