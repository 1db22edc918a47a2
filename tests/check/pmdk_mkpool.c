/*
 * pmdk_mkpool.c - mkpool PATH LAYOUT: creates an empty libpmemobj pool of the minimum size.
 * PMDK's queue example opens a pool with the layout "queue" but does not create one (its
 * README uses pmempool, which libpmemobj-dev does not install): check/pmdk_workloads.sh
 * builds this beside it.
 */
#include <libpmemobj.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	PMEMobjpool *p = pmemobj_create(argv[1], argv[2], PMEMOBJ_MIN_POOL, 0600);
	if (p)
		pmemobj_close(p);
	return p == NULL;
}
