/*
 * r2_unlogged_write.fixed.c - the twin of r2_unlogged_write.bug.c: the whole account is
 * added to the undo log before either field changes.
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
			pmemobj_tx_add_range_direct(acc, sizeof(*acc));
			acc->count += 1;
			acc->total += v;
		} TX_END
	}

	pmemobj_close(pop);
	return 0;
}
