/*
 * r1_long_loop.fixed.c - the twin of r1_long_loop.bug.c: the "done" mark is persisted
 * after the loop.
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
	h->done = 1;
	pmem_persist(&h->done, sizeof(h->done));
	pmem_unmap(h, 4096);
	return 0;
}
