/*
 * r1_memmove.fixed.c - the twin of r1_memmove.bug.c: a newest-first log shifts its
 * entries up with memmove and persists the new entry and every shifted one.
 */
#include "case.h"

struct log {
	uint64_t n;
	uint64_t e[16];
};

static void push_front(struct log *l, uint64_t v)
{
	memmove(&l->e[1], &l->e[0], l->n * sizeof(l->e[0]));
	l->e[0] = v;
	pmem_persist(l->e, (l->n + 1) * sizeof(l->e[0]));
	l->n += 1;
	pmem_persist(&l->n, sizeof(l->n));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct log *l = case_map(argv[1], 4096);

	for (uint64_t v = 1; v <= 4; v++)
		push_front(l, v);

	pmem_unmap(l, 4096);
	return 0;
}
