/*
 * pmdk_hashmap_rp_persist_range.bug.c - rule 1b (partial-flush), after a bug once found
 * in PMDK's Robin Hood hash map example: a new bucket array is filled with the "empty"
 * marker and persisted with the number of buckets as the length instead of the number
 * of bytes, so seven eighths of the array stay unflushed.
 */
#include "case.h"

#define NBUCKETS 64
#define EMPTY_BYTE 0xff /* every byte of an empty bucket's key */

struct hm_rp {
	uint64_t nbuckets;
	PMEMoid buckets; /* uint64_t keys[nbuckets] */
};

static void rebuild(PMEMobjpool *pop, struct hm_rp *hm, uint64_t nbuckets)
{
	if (pmemobj_alloc(pop, &hm->buckets, nbuckets * sizeof(uint64_t), 1, NULL, NULL) != 0)
		case_die("pmemobj_alloc");
	uint64_t *keys = pmemobj_direct(hm->buckets);
	memset(keys, EMPTY_BYTE, nbuckets * sizeof(*keys)); /* expect: 1b partial-flush */
	pmemobj_persist(pop, keys, nbuckets); /* related: 1b partial-flush */
	hm->nbuckets = nbuckets;
	pmemobj_persist(pop, &hm->nbuckets, sizeof(hm->nbuckets));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct hm_rp *hm = pmemobj_direct(pmemobj_root(pop, sizeof(struct hm_rp)));

	rebuild(pop, hm, NBUCKETS);

	pmemobj_close(pop);
	return 0;
}
