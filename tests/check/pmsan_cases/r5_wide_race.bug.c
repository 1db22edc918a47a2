/*
 * r5_wide_race.bug.c - rule 5 (logging-race) over a range too long for pmsan's per-line
 * counts: one thread's transaction adds 5 MiB of a table to its undo log, and while it is
 * open another thread's transaction adds one slot inside that range and changes it.
 * Whichever transaction aborts (or is rolled back after a crash) restores its snapshot of
 * the slot over the other's update. The barriers hold both transactions open at once.
 */
#include "../cases/case.h"
#include <pthread.h>

#define TABLE_BYTES (6u << 20)
#define LOGGED_BYTES (5u << 20)

static PMEMobjpool *pop;
static uint64_t *table;
static pthread_barrier_t meet;

static void *bulk(void *arg)
{
	(void)arg;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(table, LOGGED_BYTES);
		pthread_barrier_wait(&meet); /* the 5 MiB are logged */
		pthread_barrier_wait(&meet); /* the other thread has written */
	} TX_END
	return NULL;
}

static void *one(void *arg)
{
	(void)arg;
	uint64_t *slot = &table[(LOGGED_BYTES / 2) / sizeof(uint64_t)];
	pthread_barrier_wait(&meet);
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(slot, sizeof(*slot));
		*slot += 1; /* expect: 5 logging-race */
	} TX_END
	pthread_barrier_wait(&meet);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	unlink(argv[1]);
	pop = pmemobj_create(argv[1], "keratin-check-case", 4 * TABLE_BYTES, 0600);
	if (pop == NULL)
		case_die("pmemobj_create");
	table = pmemobj_direct(pmemobj_root(pop, TABLE_BYTES));
	pthread_barrier_init(&meet, NULL, 2);
	pthread_t a, b;
	pthread_create(&a, NULL, bulk, NULL);
	pthread_create(&b, NULL, one, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&meet);
	pmemobj_close(pop);
	return 0;
}
