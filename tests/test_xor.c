/*
 * test_xor.c - the parity kernels of the persistence layer against a byte loop.
 *
 * kr_pm_xor2 (dst ^= a ^ b: every parity patch of the object store and keratin-fs), its
 * way on machines without AVX-512 (kr_pm_xor2_portable: ISA-L when all is aligned, words
 * otherwise) and kr_pm_copy_xor (par ^= dst ^ src, then dst = src), with each of dst, a
 * and b at every offset of a line, lengths from 0 to a few lines and a few pages, on random
 * bytes: every byte inside the range right, and not one byte outside it touched (a patch's
 * neighbours are other rows' parity, which a stray store would silently corrupt).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pmem.h"
#include "testutil.h"

enum { PAD = 128, MAXLEN = 3 * 4096 + 77 };

static uint8_t *random_bytes(size_t n, uint64_t *seed)
{
	uint8_t *p = malloc(n);
	TU_NOT_NULL(p);
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(*seed >> 56);
	}
	return p;
}

enum kernel { XOR2, COPY_XOR, XOR2_PORTABLE };

/* One call at the given offsets and length, checked byte by byte against the loop. */
static void check_one(struct kr_pm *pm, const uint8_t *a0, const uint8_t *b0, const uint8_t *d0,
		      unsigned oa, unsigned ob, unsigned od, size_t n, enum kernel k)
{
	size_t span = PAD + MAXLEN + PAD;
	uint8_t *d = malloc(span), *want = malloc(span), *b = malloc(span);
	TU_NOT_NULL(d);
	TU_NOT_NULL(want);
	TU_NOT_NULL(b);
	memcpy(d, d0, span);
	memcpy(want, d0, span);
	memcpy(b, b0, span); /* copy_xor writes its dst: a private copy */
	const uint8_t *a = a0 + PAD + oa;
	if (k != COPY_XOR) {
		for (size_t i = 0; i < n; i++)
			want[PAD + od + i] ^= a[i] ^ b[PAD + ob + i];
		if (k == XOR2)
			kr_pm_xor2(pm, d + PAD + od, a, b + PAD + ob, n);
		else
			kr_pm_xor2_portable(d + PAD + od, a, b + PAD + ob, n);
		TU_MEM_EQ(d, want, span);
	} else {
		/* par = d at od, dst = b at ob, src = a. */
		uint8_t *bw = malloc(span);
		TU_NOT_NULL(bw);
		memcpy(bw, b0, span);
		for (size_t i = 0; i < n; i++) {
			want[PAD + od + i] ^= bw[PAD + ob + i] ^ a[i];
			bw[PAD + ob + i] = a[i];
		}
		kr_pm_copy_xor(pm, b + PAD + ob, a, d + PAD + od, n);
		TU_MEM_EQ(d, want, span);
		TU_MEM_EQ(b, bw, span);
		free(bw);
	}
	free(d);
	free(want);
	free(b);
}

static void sweep(enum kernel k, unsigned *calls_out)
{
	uint64_t seed = 42 + (uint64_t)k;
	size_t span = PAD + MAXLEN + PAD;
	uint8_t *a = random_bytes(span, &seed), *b = random_bytes(span, &seed),
		*d = random_bytes(span, &seed);
	struct kr_pm pm = {.base = NULL, .view = NULL, .size = 0, .fd = -1};
	static const size_t lens[] = {0, 1, 7, 8, 31, 32, 63, 64, 65, 127, 128, 200, 4096, MAXLEN};
	unsigned calls = 0;
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (unsigned od = 0; od < 64; od += (lens[li] > 256 ? 13 : 1))
			for (unsigned oa = 0; oa < 64; oa += 7)
				for (unsigned ob = 0; ob < 64; ob += 11) {
					check_one(&pm, a, b, d, oa, ob, od, lens[li], k);
					calls++;
				}
	*calls_out = calls;
	free(a);
	free(b);
	free(d);
}

static void test_xor2(void **state)
{
	(void)state;
	unsigned calls;
	sweep(XOR2, &calls);
	TU_CHECK(calls > 1000);
}

static void test_xor2_portable(void **state)
{
	(void)state;
	unsigned calls;
	sweep(XOR2_PORTABLE, &calls);
	TU_CHECK(calls > 1000);
}

static void test_copy_xor(void **state)
{
	(void)state;
	unsigned calls;
	sweep(COPY_XOR, &calls);
	TU_CHECK(calls > 1000);
}

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_xor2, NULL, NULL),
		TU_CASE(test_xor2_portable, NULL, NULL),
		TU_CASE(test_copy_xor, NULL, NULL),
	};
	return TU_RUN_CASES("xor", tests);
}
