/*
 * r1c_close.bug.c - rule 1c (missing-fence) at pmemobj_close: a counter in the root object
 * is bumped and flushed with pmemobj_flush, whose fence the program means to issue later
 * (pmemobj_drain), and then the pool is closed without it.
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
	pmemobj_flush(pop, &r->opens, sizeof(r->opens)); /* expect: 1c missing-fence */
	pmemobj_close(pop);
	return 0;
}
