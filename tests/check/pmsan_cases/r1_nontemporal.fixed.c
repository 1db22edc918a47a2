/*
 * r1_nontemporal.fixed.c - the twin of r1_nontemporal.bug.c: the count is written with a
 * non-temporal store too, so the one fence makes everything durable.
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
	_mm_stream_si64(&t->count, N);
	_mm_sfence();

	pmem_unmap(t, 4096);
	return 0;
}
