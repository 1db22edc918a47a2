/*
 * objects.c - test helper for faults.sh: lists a pool's live objects ("OFFSET SIZE TYPE",
 * one per line, offsets in hex), opened read-only, so that faults can be aimed at bytes a
 * program will read rather than at free space.
 */
#include <stdio.h>

#include "keratin.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s POOL\n", argv[0]);
		return 2;
	}
	kr_pool *pool;
	if (kr_pool_open(argv[1], KR_OPEN_READONLY | KR_OPEN_FORCE_PMEM, &pool)) {
		fprintf(stderr, "%s: %s\n", argv[1], kr_errmsg());
		return 1;
	}
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o))
		printf("0x%llx %zu %u\n", (unsigned long long)o, kr_size(pool, o), kr_type(pool, o));
	kr_pool_close(pool);
	return 0;
}
