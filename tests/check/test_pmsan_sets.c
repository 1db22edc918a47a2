/*
 * test_pmsan_sets.c - the pmsan runtime's range sets (src/check/pmsan/ivset.c) against a
 * byte-array model: ivset (sorted, coalesced ranges: add, subtract, covers, overlaps,
 * first overlap) and byteset (hashed line masks plus big ranges: add, covers, overlaps,
 * count of missing bytes),
 * under seeded random operations over a 64 KiB universe, with small and big ranges; and the
 * freed-object bitmap (rt_track.c) on frees that do not start or end on a granule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmsan.h"

#define U 65536u
#define BASE 0x100000u /* keeps addresses away from 0, where edge cases hide */
#define OPS 20000

static unsigned char model[U];
static uint64_t rng = 0x1234567;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* A random range: mostly small, sometimes big (over byteset's 4 KiB threshold). */
static void pick(unsigned *lo, unsigned *hi)
{
	unsigned len = rnd(8) == 0 ? 1 + rnd(9000) : 1 + rnd(100);
	*lo = rnd(U - len);
	*hi = *lo + len;
}

static int model_covers(unsigned lo, unsigned hi)
{
	for (unsigned i = lo; i < hi; i++)
		if (!model[i])
			return 0;
	return 1;
}

static int model_overlaps(unsigned lo, unsigned hi)
{
	for (unsigned i = lo; i < hi; i++)
		if (model[i])
			return 1;
	return 0;
}

static int fail(const char *what, int op, unsigned lo, unsigned hi)
{
	printf("FAIL %s at op %d, range [%u, %u)\n", what, op, lo, hi);
	return 1;
}

static int test_ivset(void)
{
	struct ivset s = {0};
	memset(model, 0, sizeof(model));
	for (int op = 0; op < OPS; op++) {
		unsigned lo, hi;
		pick(&lo, &hi);
		switch (rnd(5)) {
		case 0:
		case 1:
			ivset_add(&s, BASE + lo, BASE + hi);
			memset(model + lo, 1, hi - lo);
			break;
		case 2:
			ivset_sub(&s, BASE + lo, BASE + hi);
			memset(model + lo, 0, hi - lo);
			break;
		default: {
			if (ivset_covers(&s, BASE + lo, BASE + hi) != model_covers(lo, hi))
				return fail("ivset_covers", op, lo, hi);
			if (ivset_overlaps(&s, BASE + lo, BASE + hi) != model_overlaps(lo, hi))
				return fail("ivset_overlaps", op, lo, hi);
			uintptr_t olo, ohi;
			int got = ivset_first_overlap(&s, BASE + lo, BASE + hi, &olo, &ohi);
			unsigned first = lo;
			while (first < hi && !model[first])
				first++;
			if (got != (first < hi))
				return fail("ivset_first_overlap (found)", op, lo, hi);
			if (got) {
				unsigned end = first;
				while (end < hi && model[end])
					end++;
				if (olo != BASE + first || ohi != BASE + end)
					return fail("ivset_first_overlap (range)", op, lo, hi);
			}
		}
		}
		/* The representation stays sorted, disjoint and coalesced. */
		for (size_t i = 0; i < s.n; i++)
			if (s.lo[i] >= s.hi[i] || (i > 0 && s.lo[i] <= s.hi[i - 1]))
				return fail("ivset invariant", op, lo, hi);
	}
	printf("ok   ivset: %d random operations agree with the model (%zu ranges at the end)\n",
	       OPS, s.n);
	ivset_free(&s);
	return 0;
}

static int test_byteset(void)
{
	struct byteset s = {0};
	memset(model, 0, sizeof(model));
	for (int op = 0; op < OPS; op++) {
		unsigned lo, hi;
		pick(&lo, &hi);
		if (rnd(4) == 0) {
			byteset_add(&s, BASE + lo, BASE + hi);
			memset(model + lo, 1, hi - lo);
			continue;
		}
		if (byteset_covers(&s, BASE + lo, BASE + hi) != model_covers(lo, hi))
			return fail("byteset_covers", op, lo, hi);
		if (byteset_overlaps(&s, BASE + lo, BASE + hi) != model_overlaps(lo, hi))
			return fail("byteset_overlaps", op, lo, hi);
		uint64_t miss = 0;
		for (unsigned i = lo; i < hi; i++)
			miss += !model[i];
		if (byteset_count_missing(&s, BASE + lo, BASE + hi) != miss)
			return fail("byteset_count_missing", op, lo, hi);
	}
	printf("ok   byteset: %d random operations agree with the model (%zu lines hashed)\n",
	       OPS, s.n);
	byteset_free(&s);
	return 0;
}

/* A granule's bit is set only when the granule lies wholly inside a freed object: a free
 * of [3, 45) of a mapping marks granules 1 to 4 (bytes 8 to 40), and a load of byte 2 or
 * byte 44, which belong to live neighbours, is no use after free. So this
 * checks invariant rt_track.c 4
 * (seen failing with the start of the range rounded down to its granule). */
static int test_freed(void)
{
	static _Alignas(64) char pool[4096];
	uintptr_t lo = (uintptr_t)pool;
	pmsan_active = 1;
	pmsan_range_add(lo, lo + sizeof(pool), RANGE_PMEMOBJ, NULL);
	const struct pm_range *r = pmsan_range_find(lo, lo + 1);
	int bad = r == NULL;
	if (r) {
		pmsan_freed_mark(lo + 3, lo + 45, 1);
		bad |= pmsan_freed_test(r, lo + 2, lo + 3) || pmsan_freed_test(r, lo + 44, lo + 45) ||
		       !pmsan_freed_test(r, lo + 8, lo + 9) || !pmsan_freed_test(r, lo + 39, lo + 40);
		pmsan_freed_mark(lo + 3, lo + 45, 0);
		bad |= pmsan_freed_test(r, lo, lo + 64);
	}
	pmsan_range_remove(lo, NULL);
	pmsan_active = 0;
	printf("freed bitmap: %s\n", bad ? "FAIL: a bit outside the freed object, or none inside" : "ok");
	return bad;
}

int main(void)
{
	return test_ivset() | test_byteset() | test_freed();
}
