/*
 * r1c_nontemporal.bug.c - rule 1c (missing-fence) at exit: a table is filled with
 * non-temporal stores, which bypass the cache and need no flush, but do need a fence;
 * the program returns without one.
 */
#include "../cases/case.h"
#include <emmintrin.h>

#define N 8

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	long long *table = case_map(argv[1], 4096);

	for (int i = 0; i < N; i++)
		_mm_stream_si64(&table[i], 1000 + i); /* expect: 1c missing-fence */
	return 0;
}
