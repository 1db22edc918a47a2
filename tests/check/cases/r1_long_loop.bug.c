/*
 * r1_long_loop.bug.c - rule 1 (missing-flush) after a loop of 64 steps: a histogram's
 * buckets are filled and persisted one by one, then its "done" mark is stored and never
 * flushed. A static checker that follows a loop a few times and then gives up never
 * reaches the store after it.
 */
#include "case.h"

#define BUCKETS 64

struct histogram {
	uint64_t bucket[BUCKETS];
	uint64_t done;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct histogram *h = case_map(argv[1], 4096);

	for (int i = 0; i < BUCKETS; i++) {
		h->bucket[i] = (uint64_t)i * i;
		pmem_persist(&h->bucket[i], sizeof(h->bucket[i]));
	}
	h->done = 1; /* expect: 1 missing-flush */
	pmem_unmap(h, 4096);
	return 0;
}
