/*
 * r1_exit.bug.c - rule 1 (missing-flush) at exit: a program marks its pool cleanly shut
 * down and returns without flushing the mark or unmapping the file. The end of the process
 * writes no cache line back, so after a power failure the pool may still look as if the
 * program had crashed.
 */
#include "case.h"

struct header {
	uint64_t generation;
	uint64_t clean;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct header *h = case_map(argv[1], 4096);

	h->generation += 1;
	pmem_persist(&h->generation, sizeof(h->generation));
	h->clean = 1; /* expect: 1 missing-flush */
	return 0;
}
