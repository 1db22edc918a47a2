/*
 * r1_printf.fixed.c - the twin of r1_printf.bug.c: the counter is persisted before the
 * name is printed.
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
	u->visits += 1;
	pmem_persist(&u->visits, sizeof(u->visits));
	printf("%s: visit %lu\n", u->name, (unsigned long)u->visits);
	pmem_unmap(u, 4096);
	return 0;
}
