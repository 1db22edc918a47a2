/*
 * rare_branch.fixed.c - rare_branch.bug.c fixed: the wrap branch persists the whole head,
 * the epoch it bumps included.
 */
#include "../../cases/case.h"

struct log_head {
	uint32_t seq;
	uint32_t epoch;
};

static void append(struct log_head *h)
{
	if (h->seq == UINT32_MAX) {
		h->epoch++;
		h->seq = 0;
		pmem_persist(h, sizeof(*h));
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
