/*
 * test_csum.c - the CRC-32C kernels against ISA-L's byte-at-a-time answer (tu_crc32c).
 *
 * kr_crc32c_copy (checksumming while copying: the read of a data page): for piece sizes its
 * folding path takes (whole 64-byte blocks: one block, a data page's strip, a page) and
 * the plain path (other sizes), from aligned and unaligned sources, on random bytes and on
 * the all-zeros and all-ones pieces that expose a wrong initial value or final inversion:
 * every piece's CRC and every copied byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csum.h"
#include "testutil.h"

static void check_copy(const uint8_t *src, size_t piece, unsigned n)
{
	uint8_t *dst = malloc(piece * n);
	uint32_t *crc = malloc(n * sizeof(*crc));
	assert_non_null(dst);
	assert_non_null(crc);
	memset(dst, 0x5a, piece * n);
	kr_crc32c_copy(dst, src, piece, n, crc);
	assert_memory_equal(dst, src, piece * n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(crc[i], tu_crc32c(src + i * piece, piece));
	free(dst);
	free(crc);
}

static void test_copy(void **state)
{
	(void)state;
	static const size_t pieces[] = {64, 512, 4096, 1, 100, 520};
	enum { BYTES = 4 * 4096 + 64 };
	uint8_t *buf = aligned_alloc(64, BYTES);
	assert_non_null(buf);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy),
	};
	return cmocka_run_group_tests_name("csum", tests, NULL, NULL);
}
