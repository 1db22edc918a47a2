/*
 * r1a_flush_not_pm.fixed.c - the twin of r1a_flush_not_pm.bug.c: only the persistent
 * records are flushed; the volatile index is rebuilt after a restart, never flushed.
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
	}

	free(index);
	pmem_unmap(recs, 4096);
	return 0;
}
