/*
 * pmdk_array_realloc.fixed.c - the twin of pmdk_array_realloc.bug.c: the persist covers
 * every element the loop wrote.
 */
#include "case.h"

struct array_root {
	PMEMoid data;
	uint64_t n;
};

static void grow(PMEMobjpool *pop, struct array_root *root, uint64_t n)
{
	if (pmemobj_realloc(pop, &root->data, n * sizeof(int), 1) != 0)
		case_die("pmemobj_realloc");
	int *a = pmemobj_direct(root->data);
	for (uint64_t i = root->n; i < n; i++)
		a[i] = (int)(i * i);
	pmemobj_persist(pop, &a[root->n], (n - root->n) * sizeof(*a));
	root->n = n;
	pmemobj_persist(pop, &root->n, sizeof(root->n));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct array_root *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct array_root)));

	grow(pop, root, 4);
	grow(pop, root, 16);

	pmemobj_close(pop);
	return 0;
}
