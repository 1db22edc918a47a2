/*
 * tx_thread_exit.bug.c - a worker thread allocates a node in a transaction and ends
 * without closing it: the transaction dies with its thread, so the node was never
 * allocated, and the main thread reads memory that belongs to no object (rule 4).
 */
#include "../cases/case.h"
#include <pthread.h>

struct node {
	uint64_t val;
};

static PMEMobjpool *pop;
static PMEMoid made;

static void *make(void *arg)
{
	(void)arg;
	pmemobj_tx_begin(pop, NULL, TX_PARAM_NONE);
	made = pmemobj_tx_zalloc(sizeof(struct node), 1);
	pthread_exit(NULL); /* the transaction is still open */
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	pop = case_create(argv[1]);
	pthread_t th;
	pthread_create(&th, NULL, make, NULL);
	pthread_join(th, NULL);
	const struct node *n = pmemobj_direct(made);
	printf("node %lu\n", (unsigned long)n->val); /* expect: 4 use-after-free */
	return 0;
}
