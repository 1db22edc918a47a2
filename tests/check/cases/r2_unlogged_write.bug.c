/*
 * r2_unlogged_write.bug.c - rule 2 (unlogged-write): a transaction updates two fields of
 * an object that existed before it, but adds only one of them to the undo log. If the
 * transaction aborts or the machine crashes before commit, the count is rolled back and
 * the total is not.
 */
#include "case.h"

struct account {
	uint64_t count;
	uint64_t total;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct account *acc = pmemobj_direct(pmemobj_root(pop, sizeof(struct account)));

	for (uint64_t v = 1; v <= 3; v++) {
		TX_BEGIN(pop) {
			pmemobj_tx_add_range_direct(&acc->count, sizeof(acc->count));
			acc->count += 1;
			acc->total += v; /* expect: 2 unlogged-write */
		} TX_END
	}

	pmemobj_close(pop);
	return 0;
}
