/*
 * r1_missing_flush.fixed.c - the twin of r1_missing_flush.bug.c: one persist covers the
 * whole record, key and value.
 */
#include "case.h"

struct rec {
	uint64_t key;
	uint64_t val;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct rec *r = case_map(argv[1], 4096);

	r->key = 42;
	r->val = 7;
	pmem_persist(r, sizeof(*r));

	pmem_unmap(r, 4096);
	return 0;
}
