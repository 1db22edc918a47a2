/*
 * tx_stages.bug.c - rule 1 (missing-flush) past a transaction's work stage: in TX_ONCOMMIT,
 * in TX_ONABORT (after an explicit abort, and after an allocation the library refused) and
 * between an explicit pmemobj_tx_commit() and pmemobj_tx_end(), libpmemobj logs and flushes
 * nothing for the program any more. The counters stored there are never flushed; the undo
 * log does not cover them either, so they may be lost in a crash.
 */
#include "../cases/case.h"

#include <errno.h>

struct stats {
	uint64_t value;
	uint64_t commits;   /* updates that committed */
	uint64_t refused;   /* allocations the pool could not satisfy */
	uint64_t cancelled; /* updates given up */
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct stats *s = pmemobj_direct(pmemobj_root(pop, sizeof(struct stats)));

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&s->value, sizeof(s->value));
		s->value = 1;
	} TX_ONCOMMIT {
		s->commits += 1; /* expect: 1 missing-flush */
	} TX_END

	TX_BEGIN(pop) {
		pmemobj_tx_zalloc((size_t)1 << 40, 1); /* more than any pool holds: aborts */
	} TX_ONABORT {
		s->refused += 1; /* expect: 1 missing-flush */
	} TX_END

	TX_BEGIN(pop) {
		pmemobj_tx_abort(ECANCELED);
	} TX_ONABORT {
		s->cancelled += 1; /* expect: 1 missing-flush */
	} TX_END

	if (pmemobj_tx_begin(pop, NULL, TX_PARAM_NONE) != 0)
		case_die("pmemobj_tx_begin");
	pmemobj_tx_add_range_direct(&s->value, sizeof(s->value));
	s->value = 2;
	pmemobj_tx_commit();
	s->value += 1; /* expect: 1 missing-flush */
	if (pmemobj_tx_end() != 0)
		case_die("pmemobj_tx_end");

	pmemobj_close(pop);
	return 0;
}
