/*
 * test_xor.c - the parity kernels of the persistence layer against a byte loop.
 *
 * kr_pm_xor2 (dst ^= a ^ b: every parity patch of the object store and keratin-fs), its
 * way on machines without AVX-512 (kr_pm_xor2_portable: ISA-L when all is aligned, words
 * otherwise) and kr_pm_copy_xor (par ^= dst ^ src, then dst = src), with each of dst, a
 * and b at every offset of a line, lengths from 0 to a few lines and a few pages, on random
 * bytes: every byte inside the range right, and not one byte outside it touched (a patch's
 * neighbours are other rows' parity, which a stray store would silently corrupt); and
 * sources that end at an inaccessible page, which a read past the range would hit.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pmem.h"
#include "testutil.h"

enum { PAD = 128, MAXLEN = 3 * 4096 + 77, SPAN = (PAD + MAXLEN + PAD + 63) / 64 * 64 };

/* Line-aligned, so that offsets 0 and 32 reach kr_pm_xor2_portable's ISA-L branch. */
static uint8_t *buffer(void)
{
	uint8_t *p = aligned_alloc(64, SPAN);
	TU_NOT_NULL(p);
	return p;
}

static uint8_t *random_bytes(uint64_t *seed)
{
	uint8_t *p = buffer();
	size_t n = SPAN;
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
	size_t span = SPAN;
	uint8_t *d = buffer(), *want = buffer(), *b = buffer();
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
		uint8_t *bw = buffer();
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
	uint8_t *a = random_bytes(&seed), *b = random_bytes(&seed), *d = random_bytes(&seed);
	struct kr_pm pm = {.base = NULL, .view = NULL, .size = 0, .fd = -1};
	static const size_t lens[] = {0, 1, 7, 8, 31, 32, 63, 64, 65, 96, 127, 128, 200, 4096, MAXLEN};
	/* Every offset of dst for short lengths; for all three, offsets that include 0 and 32
	 * (all aligned: the ISA-L branch) among unaligned ones. */
	static const unsigned offs_a[] = {0, 7, 14, 21, 28, 32, 35, 42, 49, 56, 63};
	static const unsigned offs_b[] = {0, 11, 22, 32, 33, 44, 55};
	static const unsigned offs_d_long[] = {0, 13, 26, 32, 39, 52};
	unsigned calls = 0;
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		int lng = lens[li] > 256;
		unsigned nd = lng ? sizeof(offs_d_long) / sizeof(offs_d_long[0]) : 64;
		for (unsigned di = 0; di < nd; di++)
			for (size_t ai = 0; ai < sizeof(offs_a) / sizeof(offs_a[0]); ai++)
				for (size_t bi = 0; bi < sizeof(offs_b) / sizeof(offs_b[0]); bi++) {
					check_one(&pm, a, b, d, offs_a[ai], offs_b[bi],
						  lng ? offs_d_long[di] : di, lens[li], k);
					calls++;
				}
	}
	*calls_out = calls;
	free(a);
	free(b);
	free(d);
}

/* Sources that end right before an inaccessible page, at every length up to a few lines
 * and at the long ones: a kernel that reads past its range faults here (the pads above
 * catch stray writes only). */
static void sources_at_a_wall(enum kernel k)
{
	enum { REGION = 4 * 4096 };
	uint8_t *m = mmap(NULL, REGION + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TU_ASSERT(m != MAP_FAILED, "mmap");
	TU_OK(mprotect(m + REGION, 4096, PROT_NONE));
	memset(m, 0x5a, REGION);
	uint8_t *d = buffer(), *d2 = buffer();
	struct kr_pm pm = {.base = NULL, .view = NULL, .size = 0, .fd = -1};
	for (size_t n = 0; n <= REGION / 2; n = n < 300 ? n + 1 : n * 2 + 1) {
		const uint8_t *src = m + REGION - n; /* both sources end at the wall */
		memset(d, 0, SPAN);
		if (k == XOR2)
			kr_pm_xor2(&pm, d, src, src, n);
		else if (k == XOR2_PORTABLE)
			kr_pm_xor2_portable(d, src, src, n);
		else {
			memcpy(d2, src, n); /* dst = src already: par unchanged, dst unchanged */
			kr_pm_copy_xor(&pm, d2, src, d, n);
		}
		for (size_t i = 0; i < SPAN; i++)
			TU_ASSERT(d[i] == 0, "byte %zu changed by XORing equal sources (n %zu)", i, n);
	}
	free(d);
	free(d2);
	munmap(m, REGION + 4096);
}

/* One kernel: the sweep (more than a thousand calls, each checked), then the wall. */
static void check_kernel(enum kernel k)
{
	unsigned calls;
	sweep(k, &calls);
	TU_CHECK(calls > 1000);
	sources_at_a_wall(k);
}

static void test_xor2(void **state) { (void)state; check_kernel(XOR2); }
static void test_xor2_portable(void **state) { (void)state; check_kernel(XOR2_PORTABLE); }
static void test_copy_xor(void **state) { (void)state; check_kernel(COPY_XOR); }

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_xor2, NULL, NULL),
		TU_CASE(test_xor2_portable, NULL, NULL),
		TU_CASE(test_copy_xor, NULL, NULL),
	};
	return TU_RUN_CASES("xor", tests);
}
