/*
 * test_csum.c - the CRC-32C kernels against ISA-L's byte-at-a-time answer (tu_crc32c).
 *
 * kr_crc32c_copy (checksumming while copying: the read of a data page): for piece sizes its
 * folding path takes (whole 64-byte blocks: one block, a data page's strip, a page) and
 * the plain path (other sizes), from aligned and unaligned sources, on random bytes and on
 * the all-zeros and all-ones pieces that expose a wrong initial value or final inversion:
 * every piece's CRC and every copied byte. kr_crc32c_combine and kr_crc32c_copy_extend
 * against the CRC of the joined bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "testutil.h"

static void check_copy(const uint8_t *src, size_t piece, unsigned n)
{
	uint8_t *dst = malloc(piece * n);
	uint32_t *crc = malloc(n * sizeof(*crc));
	TU_NOT_NULL(dst);
	TU_NOT_NULL(crc);
	memset(dst, 0x5a, piece * n);
	kr_crc32c_copy(dst, src, piece, n, crc);
	TU_MEM_EQ(dst, src, piece * n);
	for (unsigned i = 0; i < n; i++)
		TU_EQ(crc[i], tu_crc32c(src + i * piece, piece));
	free(dst);
	free(crc);
}

static void test_copy(void **state)
{
	(void)state;
	static const size_t pieces[] = {64, 512, 4096, 1, 100, 520};
	enum { BYTES = 4 * 4096 + 64 };
	uint8_t *buf = aligned_alloc(64, BYTES);
	TU_NOT_NULL(buf);
	srandom(7);
	for (int fill = 0; fill < 12; fill++) {
		for (size_t i = 0; i < BYTES; i++)
			buf[i] = fill == 0 ? 0 : fill == 1 ? 0xff : (uint8_t)random();
		for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++)
			for (size_t shift = 0; shift < 64; shift += 13) /* 0: aligned */
				check_copy(buf + shift, pieces[p], (unsigned)((BYTES - 64) / pieces[p] < 8 ? (BYTES - 64) / pieces[p] : 8));
	}
	free(buf);
}

/* kr_crc32c_combine (and with it kr_crc32c_shift's carry-less path, byte counts with every
 * low bit pattern and powers of two up to 64 KiB) and kr_crc32c_copy_extend against the CRC
 * of the concatenation. */
static void test_combine(void **state)
{
	(void)state;
	static const size_t lens[] = {0, 1, 2, 3, 4, 5, 7, 8, 12, 56, 64, 100, 1000, 1024, 4093, 4096, 65536, 65539};
	enum { BYTES = 2 * 65539 };
	uint8_t *buf = malloc(BYTES), *dst = malloc(BYTES);
	TU_NOT_NULL(buf);
	TU_NOT_NULL(dst);
	srandom(11);
	for (size_t i = 0; i < BYTES; i++)
		buf[i] = (uint8_t)random();
	for (size_t a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
		for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
			const uint8_t *pb = buf + lens[a];
			uint32_t want = tu_crc32c(buf, lens[a] + lens[b]);
			TU_EQ(kr_crc32c_combine(tu_crc32c(buf, lens[a]), tu_crc32c(pb, lens[b]), lens[b]), want);
			memset(dst, 0x5a, lens[b]);
			TU_EQ(kr_crc32c_copy_extend(tu_crc32c(buf, lens[a]), dst, pb, lens[b]), want);
			TU_MEM_EQ(dst, pb, lens[b]);
		}
	free(buf);
	free(dst);
}

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_copy, NULL, NULL),
		TU_CASE(test_combine, NULL, NULL),
	};
	return TU_RUN_CASES("csum", tests);
}
