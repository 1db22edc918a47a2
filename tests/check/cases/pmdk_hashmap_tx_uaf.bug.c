/*
 * pmdk_hashmap_tx_uaf.bug.c - rule 4 (use-after-free), after a bug once found in PMDK's
 * transactional hash map example: remove unlinks an entry and frees it with
 * pmemobj_tx_free, then reads the entry's value to return it. The free is pending in the
 * running transaction and takes effect at commit; the entry is dead from the moment it
 * is freed.
 */
#include "case.h"

#define NBUCKETS 8

struct entry {
	uint64_t key;
	uint64_t value;
	PMEMoid next;
};

struct hmap {
	uint64_t count;
	PMEMoid bucket[NBUCKETS];
};

static void hm_insert(PMEMobjpool *pop, struct hmap *h, uint64_t key, uint64_t value)
{
	PMEMoid *link = &h->bucket[key % NBUCKETS];
	TX_BEGIN(pop) {
		PMEMoid oid = pmemobj_tx_alloc(sizeof(struct entry), 1);
		struct entry *e = pmemobj_direct(oid);
		e->key = key;
		e->value = value;
		e->next = *link;
		pmemobj_tx_add_range_direct(link, sizeof(*link));
		pmemobj_tx_add_range_direct(&h->count, sizeof(h->count));
		*link = oid;
		h->count += 1;
	} TX_END
}

/* Removes key from h and stores its value in *value; returns 0, or -1 if absent. */
static int hm_remove(PMEMobjpool *pop, struct hmap *h, uint64_t key, uint64_t *value)
{
	PMEMoid *link = &h->bucket[key % NBUCKETS];
	struct entry *e;
	while ((e = pmemobj_direct(*link)) != NULL && e->key != key)
		link = &e->next;
	if (e == NULL)
		return -1;

	TX_BEGIN(pop) {
		PMEMoid victim = *link;
		pmemobj_tx_add_range_direct(link, sizeof(*link));
		pmemobj_tx_add_range_direct(&h->count, sizeof(h->count));
		*link = e->next;
		h->count -= 1;
		pmemobj_tx_free(victim);
		*value = e->value; /* expect: 4 use-after-free */
	} TX_END
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct hmap *h = pmemobj_direct(pmemobj_root(pop, sizeof(struct hmap)));

	for (uint64_t k = 1; k <= 20; k++)
		hm_insert(pop, h, k, k * 10);
	uint64_t v = 0;
	if (hm_remove(pop, h, 11, &v) != 0 || v != 110)
		return 1;

	pmemobj_close(pop);
	return 0;
}
