/*
 * pmdk_hashmap_atomic_uaf.bug.c - rule 4 (use-after-free), after the bug in PMDK's atomic
 * hash map example (hashmap_atomic.c, hm_atomic_remove): the entry is unlinked and freed
 * at once with POBJ_LIST_REMOVE_FREE (pmemobj_list_remove with its free flag), and then
 * its value is read to be returned. An atomic free takes effect before the call returns.
 */
#include "case.h"

#define NBUCKETS 4

TOID_DECLARE(struct entry, 1);

struct entry {
	uint64_t key;
	uint64_t value;
	POBJ_LIST_ENTRY(struct entry) list;
};

POBJ_LIST_HEAD(entries, struct entry);

struct hmap {
	uint64_t count;
	struct entries bucket[NBUCKETS];
};

static int entry_init(PMEMobjpool *pop, void *ptr, void *arg)
{
	struct entry *e = ptr;
	e->key = *(uint64_t *)arg;
	e->value = e->key * 10;
	pmemobj_persist(pop, e, sizeof(e->key) + sizeof(e->value));
	return 0;
}

static void hm_insert(PMEMobjpool *pop, struct hmap *h, uint64_t key)
{
	if (OID_IS_NULL(POBJ_LIST_INSERT_NEW_HEAD(pop, &h->bucket[key % NBUCKETS], list,
						  sizeof(struct entry), entry_init, &key)))
		case_die("POBJ_LIST_INSERT_NEW_HEAD");
}

/* Removes key from h; returns its value, or 0 if absent. */
static uint64_t hm_remove(PMEMobjpool *pop, struct hmap *h, uint64_t key)
{
	struct entries *head = &h->bucket[key % NBUCKETS];
	TOID(struct entry) var;
	POBJ_LIST_FOREACH(var, head, list) {
		if (D_RO(var)->key == key)
			break;
	}
	if (TOID_IS_NULL(var))
		return 0;
	if (POBJ_LIST_REMOVE_FREE(pop, head, var, list) != 0)
		case_die("POBJ_LIST_REMOVE_FREE");
	return D_RO(var)->value; /* expect: 4 use-after-free */
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct hmap *h = pmemobj_direct(pmemobj_root(pop, sizeof(struct hmap)));
	for (uint64_t k = 1; k <= 12; k++)
		hm_insert(pop, h, k);
	if (hm_remove(pop, h, 7) != 70)
		return 1;
	pmemobj_close(pop);
	return 0;
}
