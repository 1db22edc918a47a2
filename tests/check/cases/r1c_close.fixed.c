/*
 * r1c_close.fixed.c - the twin of r1c_close.bug.c: pmemobj_drain after the flush, before
 * the pool is closed.
 */
#include "case.h"

struct root {
	uint64_t opens;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
	if (r == NULL)
		case_die("pmemobj_root");

	r->opens += 1;
	pmemobj_flush(pop, &r->opens, sizeof(r->opens));
	pmemobj_drain(pop);
	pmemobj_close(pop);
	return 0;
}
