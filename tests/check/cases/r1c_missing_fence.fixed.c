/*
 * r1c_missing_fence.fixed.c - the twin of r1c_missing_fence.bug.c: a fence (pmem_drain)
 * after the flush, before the file is unmapped.
 */
#include "case.h"

struct journal {
	uint64_t count;
	uint64_t record[8];
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct journal *j = case_map(argv[1], 4096);

	j->record[0] = 0xfeed;
	j->count = 1;
	pmem_flush(j, sizeof(*j));
	pmem_drain();
	pmem_unmap(j, 4096);
	return 0;
}
