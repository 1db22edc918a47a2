/*
 * r1b_partial_flush.bug.c - rule 1b (partial-flush): a whole entry is copied into
 * persistent memory, then persisted with the size of the pointer instead of the size of
 * the entry. Only the first 8 of its 64 bytes are flushed.
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

	memcpy(ent, &e, sizeof(e)); /* expect: 1b partial-flush */
	pmem_persist(ent, sizeof(ent)); /* related: 1b partial-flush */

	pmem_unmap(ent, 4096);
	return 0;
}
