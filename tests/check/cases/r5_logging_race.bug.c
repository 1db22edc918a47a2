/*
 * r5_logging_race.bug.c - rule 5 (logging-race): two threads run independent
 * transactions that both add the same counter to their undo logs and both change it.
 * Whichever transaction aborts (or is rolled back after a crash) restores its snapshot
 * over the other's committed update. The two barriers hold both transactions open at once,
 * so the overlap happens on every run, not only on an unlucky schedule.
 */
#include "case.h"
#include <pthread.h>

#define NTHREADS 2

struct counters {
	uint64_t hits[NTHREADS];
};

static PMEMobjpool *pop;
static struct counters *ctr;
static pthread_barrier_t meet;

static void *worker(void *arg)
{
	(void)arg;
	uint64_t *slot = &ctr->hits[0];

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(slot, sizeof(*slot));
		pthread_barrier_wait(&meet); /* both transactions are open */
		*slot += 1; /* expect: 5 logging-race */
		pthread_barrier_wait(&meet); /* both have written */
	} TX_END
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	pop = case_create(argv[1]);
	ctr = pmemobj_direct(pmemobj_root(pop, sizeof(struct counters)));
	pthread_barrier_init(&meet, NULL, NTHREADS);

	pthread_t th[NTHREADS];
	for (intptr_t i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);

	pthread_barrier_destroy(&meet);
	pmemobj_close(pop);
	return 0;
}
