/*
 * r1_loop_bound.bug.c - rule 1 (missing-flush) after a while loop whose bound is a
 * variable: 40 records are written and persisted together, then the log is sealed and the
 * seal never flushed. A static checker must follow the loop past its first few steps
 * (widened, without forgetting the log's pointer or the records' bounds) to reach the seal.
 */
#include "case.h"

struct log {
	uint64_t rec[64];
	uint64_t sealed;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct log *log = case_map(argv[1], 4096);
	int n = argc > 2 ? atoi(argv[2]) : 40;
	if (n < 0 || n > 64)
		n = 64;

	int i = 0; /* signed: only the loop shows it is never negative */
	while (i < n) {
		log->rec[i] = (uint64_t)i * 3;
		i++;
	}
	pmem_persist(log->rec, n * sizeof(log->rec[0]));
	log->sealed = 1; /* expect: 1 missing-flush */
	pmem_unmap(log, 4096);
	return 0;
}
