/*
 * r1_atomic.bug.c - rule 1 (missing-flush) through atomic instructions: a slot table
 * claims a slot with compare-and-swap and counts the claims with an atomic fetch-and-add,
 * both in persistent memory. Atomicity orders the stores between threads, not between the
 * cache and the medium: each still needs a flush before the fence, and neither gets one.
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
		if (atomic_compare_exchange_strong(&s->owner[i], &free_slot, 42)) /* expect: 1 missing-flush */
			atomic_fetch_add(&s->claims, 1); /* expect: 1 missing-flush */
		pmem_drain();
	}

	pmem_unmap(s, 4096);
	return 0;
}
