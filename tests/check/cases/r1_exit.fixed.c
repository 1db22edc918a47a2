/*
 * r1_exit.fixed.c - the twin of r1_exit.bug.c: the clean-shutdown mark is persisted
 * before the program returns (the mapping is still left to the process's end).
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
	h->clean = 1;
	pmem_persist(&h->clean, sizeof(h->clean));
	return 0;
}
