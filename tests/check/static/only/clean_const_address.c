/*
 * clean_const_address.c - no report wanted: libpmemobj-dev's hashmap_tx false positive. A
 * rehash moves every entry into a table the transaction allocated, in loops long enough to
 * be widened; the new table's oid is a local whose address goes to a hash function taking a
 * pointer to const. Such a function can read the oid, not change it, so the widening must
 * not forget it: forgotten, the new table was taken for an old one, and every store into it
 * for an unlogged write.
 */
#include "../../cases/case.h"

TOID_DECLARE(struct entry, 1);
TOID_DECLARE(struct table, 2);

struct entry {
	uint64_t key;
	TOID(struct entry) next;
};

struct table {
	uint64_t n;
	TOID(struct entry) slot[];
};

static uint64_t slot_of(const TOID(struct table) *t, uint64_t key)
{
	return key % D_RO(*t)->n;
}

int rehash(PMEMobjpool *pop, TOID(struct table) *tp, uint64_t n)
{
	int ret = 0;
	TOID(struct table) old = *tp;
	TX_BEGIN(pop) {
		TOID(struct table) fresh =
			TX_ZALLOC(struct table, sizeof(struct table) + n * sizeof(TOID(struct entry)));
		D_RW(fresh)->n = n;
		pmemobj_tx_add_range(old.oid, 0,
				     sizeof(struct table) + D_RO(old)->n * sizeof(TOID(struct entry)));
		for (uint64_t i = 0; i < D_RO(old)->n; i++) {
			while (!TOID_IS_NULL(D_RO(old)->slot[i])) {
				TOID(struct entry) e = D_RO(old)->slot[i];
				uint64_t h = slot_of(&fresh, D_RO(e)->key);
				D_RW(old)->slot[i] = D_RO(e)->next;
				TX_ADD_FIELD(e, next);
				D_RW(e)->next = D_RO(fresh)->slot[h];
				D_RW(fresh)->slot[h] = e;
			}
		}
		pmemobj_tx_add_range_direct(tp, sizeof(*tp));
		*tp = fresh;
		TX_FREE(old);
	} TX_ONABORT {
		ret = 1;
	} TX_END
	return ret;
}
