/*
 * tx_stages.fixed.c - stores made while a transaction is open but past its work stage are
 * plain stores: in TX_ONCOMMIT, in TX_ONABORT (after an explicit abort, and after an
 * allocation the library refused, which aborts the transaction by itself), and between an
 * explicit pmemobj_tx_commit() and pmemobj_tx_end(). libpmemobj logs nothing any more by
 * then, so they need no undo-log add (rule 2) but must be flushed (rule 1): each is
 * persisted here.
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
		s->commits += 1;
		pmemobj_persist(pop, &s->commits, sizeof(s->commits));
	} TX_END

	TX_BEGIN(pop) {
		pmemobj_tx_zalloc((size_t)1 << 40, 1); /* more than any pool holds: aborts */
	} TX_ONABORT {
		s->refused += 1;
		pmemobj_persist(pop, &s->refused, sizeof(s->refused));
	} TX_END

	TX_BEGIN(pop) {
		pmemobj_tx_abort(ECANCELED);
	} TX_ONABORT {
		s->cancelled += 1;
		pmemobj_persist(pop, &s->cancelled, sizeof(s->cancelled));
	} TX_END

	if (pmemobj_tx_begin(pop, NULL, TX_PARAM_NONE) != 0)
		case_die("pmemobj_tx_begin");
	pmemobj_tx_add_range_direct(&s->value, sizeof(s->value));
	s->value = 2;
	pmemobj_tx_commit();
	s->commits += 1;
	pmemobj_persist(pop, &s->commits, sizeof(s->commits));
	if (pmemobj_tx_end() != 0)
		case_die("pmemobj_tx_end");

	pmemobj_close(pop);
	return 0;
}
