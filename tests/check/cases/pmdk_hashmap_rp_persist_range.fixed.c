/*
 * pmdk_hashmap_rp_persist_range.fixed.c - the twin of
 * pmdk_hashmap_rp_persist_range.bug.c: the persist length is the array's size in bytes.
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
	memset(keys, EMPTY_BYTE, nbuckets * sizeof(*keys));
	pmemobj_persist(pop, keys, nbuckets * sizeof(*keys));
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
