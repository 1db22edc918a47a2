/*
 * r1_atomic.fixed.c - the twin of r1_atomic.bug.c: the slot claimed by compare-and-swap
 * and the claim count bumped by fetch-and-add are each flushed before the fence.
 */
#include "../cases/case.h"
#include <stdatomic.h>

struct slots {
	_Atomic uint64_t claims;
	_Atomic uint64_t owner[8];
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct slots *s = case_map(argv[1], 4096);

	for (int i = 0; i < 3; i++) {
		uint64_t free_slot = 0;
		if (atomic_compare_exchange_strong(&s->owner[i], &free_slot, 42))
			atomic_fetch_add(&s->claims, 1);
		pmem_flush(&s->owner[i], sizeof(s->owner[i]));
		pmem_flush(&s->claims, sizeof(s->claims));
		pmem_drain();
	}

	pmem_unmap(s, 4096);
	return 0;
}
