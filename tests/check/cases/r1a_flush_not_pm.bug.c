/*
 * r1a_flush_not_pm.bug.c - rule 1a (flush-not-pm): the program keeps a volatile index of
 * its persistent records in malloc'ed memory and flushes that index as if it were
 * persistent. The flush is pointless, and it hints that the author believes the index
 * survives a crash.
 */
#include "case.h"

#define NRECS 4

struct rec {
	uint64_t key;
	uint64_t val;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct rec *recs = case_map(argv[1], 4096);
	uint64_t *index = calloc(NRECS, sizeof(*index));
	if (index == NULL)
		return 2;

	for (int i = 0; i < NRECS; i++) {
		recs[i].key = 100 + (uint64_t)i;
		recs[i].val = (uint64_t)i * 3;
		pmem_persist(&recs[i], sizeof(recs[i]));
		index[i] = recs[i].key;
		pmem_persist(&index[i], sizeof(index[i])); /* expect: 1a flush-not-pm */
	}

	free(index);
	pmem_unmap(recs, 4096);
	return 0;
}
