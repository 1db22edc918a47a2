/*
 * grouped_tx.fixed.c - the twin of grouped_tx.bug.c: the transaction adds the whole
 * table, total included, before the workers start; their stores belong to it.
 */
#include "../cases/case.h"
#include <pthread.h>

#define NWORKERS 2
#define ROWS 8

struct table {
	uint64_t row[NWORKERS][ROWS];
	uint64_t total;
};

static struct table *tab;

static void *fill(void *arg)
{
	intptr_t w = (intptr_t)arg;
	for (int i = 0; i < ROWS; i++)
		tab->row[w][i] = (uint64_t)(w * 100 + i);
	if (w == 0)
		tab->total = NWORKERS * ROWS;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	tab = pmemobj_direct(pmemobj_root(pop, sizeof(struct table)));

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(tab, sizeof(*tab));
		pthread_t th[NWORKERS];
		for (intptr_t w = 0; w < NWORKERS; w++)
			pthread_create(&th[w], NULL, fill, (void *)w);
		for (int w = 0; w < NWORKERS; w++)
			pthread_join(th[w], NULL);
	} TX_END

	pmemobj_close(pop);
	return 0;
}
