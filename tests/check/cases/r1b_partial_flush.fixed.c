/*
 * r1b_partial_flush.fixed.c - the twin of r1b_partial_flush.bug.c: the persist covers
 * the entry, sizeof(*ent) bytes.
 */
#include "case.h"

struct entry {
	uint64_t key;
	uint64_t len;
	char data[48];
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct entry *ent = case_map(argv[1], 4096);
	struct entry e = {.key = 1, .len = 5};
	memcpy(e.data, "hello", 6);

	memcpy(ent, &e, sizeof(e));
	pmem_persist(ent, sizeof(*ent));

	pmem_unmap(ent, 4096);
	return 0;
}
