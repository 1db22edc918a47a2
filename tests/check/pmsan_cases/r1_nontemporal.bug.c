/*
 * r1_nontemporal.bug.c - rule 1 (missing-flush) next to non-temporal stores: the entries
 * of a table are written with non-temporal stores, which bypass the cache and need only
 * the fence, but the table's count is an ordinary store that stays in the cache.
 */
#include "../cases/case.h"
#include <emmintrin.h>

#define N 8

struct table {
	long long entry[N];
	long long count;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct table *t = case_map(argv[1], 4096);

	for (int i = 0; i < N; i++)
		_mm_stream_si64(&t->entry[i], 1000 + i);
	t->count = N; /* expect: 1 missing-flush */
	_mm_sfence();

	pmem_unmap(t, 4096);
	return 0;
}
