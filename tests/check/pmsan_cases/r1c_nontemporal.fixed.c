/*
 * r1c_nontemporal.fixed.c - the twin of r1c_nontemporal.bug.c: an sfence after the
 * non-temporal stores, before the program returns.
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
		_mm_stream_si64(&table[i], 1000 + i);
	_mm_sfence();
	return 0;
}
