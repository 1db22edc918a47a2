/*
 * tx_thread_exit.fixed.c - the twin of tx_thread_exit.bug.c: the worker commits its
 * transaction before it ends, so the node exists when the main thread reads it.
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
	pmemobj_tx_commit();
	pmemobj_tx_end();
	pthread_exit(NULL);
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
	printf("node %lu\n", (unsigned long)n->val);
	return 0;
}
