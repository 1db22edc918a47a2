/*
 * fixed_srand.c - an LD_PRELOAD library for differential.sh and dropin.sh: srand(seed) seeds
 * rand() with KP_FIXED_SEED (default 1) instead of seed. PMDK's examples that seed rand()
 * with time(NULL) and take no seed of their own (data_store's keys and values,
 * buffons_needle_problem's needles, pminvaders' aliens) then draw the same numbers under
 * libpmemobj and keratin-pmemobj, so their outputs compare exactly. Neither library calls
 * rand() (libpmemobj has rand_r on its own state, keratin getrandom), so the program's
 * numbers are the only ones drawn from it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

void srand(unsigned int seed)
{
	static void (*real_srand)(unsigned int);
	const char *s = getenv("KP_FIXED_SEED");

	(void)seed;
	if (!real_srand)
		real_srand = (void (*)(unsigned int))dlsym(RTLD_NEXT, "srand");
	real_srand(s ? (unsigned int)strtoul(s, NULL, 10) : 1u);
}
