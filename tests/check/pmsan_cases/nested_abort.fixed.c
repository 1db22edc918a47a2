/*
 * nested_abort.fixed.c - the twin of nested_abort.bug.c: after a nested transaction aborts
 * (its abort passed on to the outer transaction, whose TX_END ends both), the next
 * transaction adds what it changes to its undo log, and the store outside transactions is
 * persisted.
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
		pmemobj_tx_add_range_direct(acc, sizeof(*acc));
		acc->balance += 50;
		acc->deposits += 1;
	} TX_END

	acc->audit = acc->balance;
	pmemobj_persist(pop, &acc->audit, sizeof(acc->audit));

	pmemobj_close(pop);
	return 0;
}
