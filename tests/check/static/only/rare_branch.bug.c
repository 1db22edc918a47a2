/*
 * rare_branch.bug.c - a persistence bug behind a branch that is almost never true: a
 * 32-bit sequence number wraps only after four billion appends, and on that append the
 * persist covers the sequence number only, not the epoch it bumps. Every test run persists
 * correctly; the static checker follows the wrap branch as readily as the other.
 */
#include "../../cases/case.h"

struct log_head {
	uint32_t seq;
	uint32_t epoch;
};

static void append(struct log_head *h)
{
	if (h->seq == UINT32_MAX) {
		h->epoch++; /* expect: 1b partial-flush */ /* expect: 1 missing-flush */
		h->seq = 0;
		pmem_persist(h, sizeof(h->seq)); /* related: 1b partial-flush */
		return;
	}
	h->seq++;
	pmem_persist(&h->seq, sizeof(h->seq));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct log_head *h = case_map(argv[1], 4096);
	for (int i = 0; i < 3; i++)
		append(h);
	pmem_unmap(h, 4096);
	return 0;
}
