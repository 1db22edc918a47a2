/*
 * r1_missing_flush.bug.c - rule 1 (missing-flush): a record's value is stored into
 * persistent memory but never flushed. The persist covers only the key, so after a crash
 * the key may say the record is there while its value is lost.
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
	r->val = 7; /* expect: 1 missing-flush */
	pmem_persist(&r->key, sizeof(r->key));

	pmem_unmap(r, 4096);
	return 0;
}
