/*
 * pmdk_hashmap_tx_uaf.fixed.c - the twin of pmdk_hashmap_tx_uaf.bug.c: remove reads the
 * entry's value before it frees the entry.
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
		*value = e->value;
		*link = e->next;
		h->count -= 1;
		pmemobj_tx_free(victim);
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
