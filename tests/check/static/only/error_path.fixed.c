/*
 * error_path.fixed.c - error_path.bug.c fixed: the error path adds the failure counter to
 * the undo log before changing it, so the abort leaves the counter as it was.
 */
#include "../../cases/case.h"

struct stats {
	uint64_t done;
	uint64_t failures;
};

static int record(PMEMobjpool *pop, struct stats *st, size_t scratch)
{
	int rc = 0;
	TX_BEGIN(pop) {
		char *buf = malloc(scratch);
		if (buf == NULL) {
			pmemobj_tx_add_range_direct(&st->failures, sizeof(st->failures));
			st->failures++;
			pmemobj_tx_abort(ENOMEM);
		}
		pmemobj_tx_add_range_direct(&st->done, sizeof(st->done));
		st->done++;
		free(buf);
	} TX_ONABORT {
		rc = -1;
	} TX_END
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct stats *st = pmemobj_direct(pmemobj_root(pop, sizeof(struct stats)));
	int rc = record(pop, st, 4096);
	pmemobj_close(pop);
	return rc == 0 ? 0 : 1;
}
