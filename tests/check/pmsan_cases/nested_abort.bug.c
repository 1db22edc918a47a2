/*
 * nested_abort.bug.c - a checker must keep following transactions after a nested one
 * aborts. The inner pmemobj_tx_abort() passes the abort on to the outer transaction: the
 * inner TX_END's pmemobj_tx_end() does not return but jumps to the outer transaction's
 * abort handling, and the outer TX_END ends both. The program's later bugs - an unlogged
 * store in the next transaction (rule 2), a store outside transactions that is never
 * flushed (rule 1) - are as real as if no abort had happened.
 */
#include "../cases/case.h"

#include <errno.h>

struct account {
	uint64_t balance;
	uint64_t deposits;
	uint64_t audit; /* last audited balance, kept outside transactions */
};

/* A nested transaction that gives up: rolls back its caller's transaction too. */
static void reject(PMEMobjpool *pop)
{
	TX_BEGIN(pop) {
		pmemobj_tx_abort(EINVAL);
	} TX_END
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct account *acc = pmemobj_direct(pmemobj_root(pop, sizeof(struct account)));

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&acc->balance, sizeof(acc->balance));
		acc->balance += 100;
		reject(pop);
	} TX_END

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&acc->balance, sizeof(acc->balance));
		acc->balance += 50;
		acc->deposits += 1; /* expect: 2 unlogged-write */
	} TX_END

	acc->audit = acc->balance; /* expect: 1 missing-flush */
	pmemobj_drain(pop);

	pmemobj_close(pop);
	return 0;
}
