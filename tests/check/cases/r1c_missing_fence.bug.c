/*
 * r1c_missing_fence.bug.c - rule 1c (missing-fence): a program appends a record, flushes
 * it and unmaps the file without a fence. The flush only starts the write-back; nothing
 * waits for it, so after a power failure the record may be lost or torn.
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
	pmem_flush(j, sizeof(*j)); /* expect: 1c missing-fence */
	pmem_unmap(j, 4096);
	return 0;
}
