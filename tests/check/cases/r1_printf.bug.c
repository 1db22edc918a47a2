/*
 * r1_printf.bug.c - rule 1 (missing-flush) across a call that only reads the object: a
 * visit counter is bumped and the user's name printed (a pointer into the object goes to
 * printf), and the counter is never flushed. Handing a pointer to a function does not
 * persist what was stored before the call.
 */
#include "case.h"

struct user {
	uint64_t visits;
	char name[48];
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct user *u = case_map(argv[1], 4096);

	strcpy(u->name, "guest");
	pmem_persist(u->name, sizeof(u->name));
	u->visits += 1; /* expect: 1 missing-flush */
	printf("%s: visit %lu\n", u->name, (unsigned long)u->visits);
	pmem_unmap(u, 4096);
	return 0;
}
