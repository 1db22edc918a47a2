/*
 * pmdk_pi_persist_range.fixed.c - the twin of pmdk_pi_persist_range.bug.c: each result
 * record is persisted with sizeof(*t).
 */
#include "case.h"

#define NTASKS 4
#define TERMS_PER_TASK 1000

struct pi_task {
	uint64_t start;
	uint64_t stop;
	double sum;
	uint64_t done;
};

struct pi_root {
	PMEMoid tasks;
};

/* Leibniz series terms [start, stop): 4 * sum((-1)^k / (2k + 1)). */
static double partial_pi(uint64_t start, uint64_t stop)
{
	double s = 0;
	for (uint64_t k = start; k < stop; k++)
		s += (k % 2 ? -4.0 : 4.0) / (double)(2 * k + 1);
	return s;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct pi_root *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct pi_root)));
	if (pmemobj_zalloc(pop, &root->tasks, NTASKS * sizeof(struct pi_task), 1) != 0)
		case_die("pmemobj_zalloc");
	struct pi_task *tasks = pmemobj_direct(root->tasks);

	double pi = 0;
	for (uint64_t i = 0; i < NTASKS; i++) {
		struct pi_task *t = &tasks[i];
		struct pi_task res = {i * TERMS_PER_TASK, (i + 1) * TERMS_PER_TASK, 0, 1};
		res.sum = partial_pi(res.start, res.stop);
		memcpy(t, &res, sizeof(res));
		pmemobj_persist(pop, t, sizeof(*t));
		pi += t->sum;
	}
	printf("pi ~ %.4f\n", pi);

	pmemobj_close(pop);
	return 0;
}
