/*
 * csum.c - CRC-32C through ISA-L's crc32_iscsi (hardware crc32 instruction when present).
 *
 * ISA-L's crc32_iscsi is the raw register form (no final inversion), so the standard value
 * is ~crc32_iscsi(buf, n, ~0). Lengths above INT_MAX are fed in pieces because ISA-L takes
 * an int length.
 *
 * kr_crc32c_copy checksums while it copies: with AVX-512 and VPCLMULQDQ, and pieces of
 * whole 64-byte blocks, each block goes from a load through the store and into a fold, so a
 * page read from memory costs one pass, not a copy followed by a checksum of the copy (and
 * eight short CRCs pay no per-call set-up of ISA-L's kernel). Otherwise a piece is copied
 * and ISA-L checksums the copy while it is still in L1.
 *
 * The delta functions implement the standard CRC "combine" algebra (multiplication by
 * x^(8k) modulo the polynomial, by squaring) so that a checksum can be patched for a
 * changed range without reading the rest of the object.
 */
#include <immintrin.h>
#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <string.h>

#include "csum.h"
#include "simd.h"

uint32_t kr_crc32c_extend(uint32_t crc, const void *buf, size_t n)
{
	unsigned int reg = ~crc;
	const unsigned char *p = buf;
	while (n > 0) {
		int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
		reg = crc32_iscsi((unsigned char *)p, chunk, reg);
		kr_simd_done();
		p += chunk;
		n -= (size_t)chunk;
	}
	return ~reg;
}

uint32_t kr_crc32c(const void *buf, size_t n) { return kr_crc32c_extend(0, buf, n); }

/* Folding (the reflected form of the method of Gopal et al., "Fast CRC computation for generic
 * polynomials using PCLMULQDQ"). A 16-byte lane whose first eight bytes are H and last eight L
 * stands for H x^64 + L; moved D bytes on it is H x^(8D+64) + L x^(8D), congruent modulo the
 * polynomial to clmul(H, x^(8D+63) mod P) ^ clmul(L, x^(8D-1) mod P) (one power less: a
 * reflected carry-less product comes out one bit position short). The constants are those
 * remainders, bit-reflected into the high half of a 64-bit word: {for H, for L}. */
#define FOLD_64 0x1c19243b00000000ull, 0x75bba45b00000000ull
#define FOLD_48 0xa46ef4aa00000000ull, 0x6051243f00000000ull
#define FOLD_32 0x33ccbbbc00000000ull, 0xa2158b3400000000ull
#define FOLD_16 0x3743f7bd00000000ull, 0x3171d43000000000ull

#define VPCLMUL __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

VPCLMUL static __m128i fold_key(uint64_t for_h, uint64_t for_l)
{
	return _mm_set_epi64x((long long)for_l, (long long)for_h);
}

VPCLMUL static __m128i fold16(__m128i x, uint64_t for_h, uint64_t for_l)
{
	__m128i k = fold_key(for_h, for_l);
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* piece a multiple of 64. A piece's four lanes fold 64 bytes on per block; at its end lanes
 * 0-2 fold onto lane 3, and those 16 bytes, which the whole piece is congruent to, go
 * through the crc32 instruction. The standard initial value ~0 is the first four bytes
 * XORed with ones. */
VPCLMUL static void copy_crc_vpclmul(unsigned char *d, const unsigned char *p, size_t piece, unsigned n,
				     uint32_t *crc)
{
	const __m512i k64 = _mm512_broadcast_i32x4(fold_key(FOLD_64));
	const __m512i init = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1);
	for (unsigned i = 0; i < n; i++, p += piece, d += piece) {
		__m512i v = _mm512_loadu_si512(p);
		_mm512_storeu_si512(d, v);
		__m512i acc = _mm512_xor_si512(v, init);
		for (size_t o = 64; o < piece; o += 64) {
			v = _mm512_loadu_si512(p + o);
			_mm512_storeu_si512(d + o, v);
			acc = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k64, 0x00),
							_mm512_clmulepi64_epi128(acc, k64, 0x11), v, 0x96);
		}
		__m128i r = _mm512_extracti32x4_epi32(acc, 3);
		r = _mm_xor_si128(r, fold16(_mm512_extracti32x4_epi32(acc, 0), FOLD_48));
		r = _mm_xor_si128(r, fold16(_mm512_extracti32x4_epi32(acc, 1), FOLD_32));
		r = _mm_xor_si128(r, fold16(_mm512_extracti32x4_epi32(acc, 2), FOLD_16));
		uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
		crc[i] = ~(uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
	}
}

void kr_crc32c_copy(void *dst, const void *src, size_t piece, unsigned n, uint32_t *crc)
{
	unsigned char *d = dst;
	const unsigned char *p = src;
	if (piece % 64 == 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq")) {
		copy_crc_vpclmul(d, p, piece, n, crc);
	} else {
		for (unsigned i = 0; i < n; i++, p += piece, d += piece) {
			memcpy(d, p, piece);
			crc[i] = ~crc32_iscsi(d, (int)piece, ~0u);
		}
	}
	kr_simd_done();
}

uint32_t kr_crc32c_copy_extend(uint32_t crc, void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *p = src;
	while (n > 0) {
		size_t piece = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n; /* kr_crc32c_copy's limit */
		uint32_t c;
		kr_crc32c_copy(d, p, piece, 1, &c);
		crc = crc ? kr_crc32c_combine(crc, c, piece) : c; /* a zero register shifts to zero */
		d += piece;
		p += piece;
		n -= piece;
	}
	return crc;
}

uint64_t kr_crc64(const void *buf, size_t n)
{
	return crc64_ecma_refl(0, buf, n);
}

/* GF(2) arithmetic modulo the reflected Castagnoli polynomial. In the reflected domain bit
 * 31 is x^0, so "multiply by x" is a right shift with conditional reduction. */
#define POLY 0x82f63b78u

static uint32_t gf_mul(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;
	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
	}
	return p;
}

/* x^(2^k) mod P for k = 0..63, i.e. the effect of 2^k zero bits; and x^(2^k - 32) mod P
 * for k >= 5, the factors of the carry-less multiply below. */
static uint32_t x2k[64], x2k_m32[64];
static int have_clmul;
static pthread_once_t x2k_once = PTHREAD_ONCE_INIT;

static void x2k_init(void)
{
	have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
	uint32_t p = 1u << 30; /* x^1 */
	for (int k = 0; k < 64; k++) {
		x2k[k] = p;
		p = gf_mul(p, p);
	}
	x2k_m32[5] = 1u << 31; /* x^0 */
	for (int k = 6; k < 64; k++)
		x2k_m32[k] = gf_mul(x2k[k - 1], x2k_m32[k - 1]);
}

#define CLMUL_CRC __attribute__((target("pclmul,sse4.2")))

/* a * b * x^32 mod P: the 63-bit carry-less product, one bit short in the reflected domain,
 * shifted into place, and reduced by the crc32 instruction (which multiplies by x^32). */
CLMUL_CRC static uint32_t mul_x32(uint32_t a, uint32_t b)
{
	__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
	return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(p) << 1);
}

/* A shift in a few instructions per set bit of the byte count: the low two bits by feeding
 * the crc32 instruction zeros, every higher one by a carry-less multiply (the bitwise
 * gf_mul costs about a hundred cycles a bit, which made patching a checksum by combining
 * cost more than the pass over the bytes it saved). */
CLMUL_CRC static uint32_t shift_clmul(uint32_t raw, uint64_t zero_bytes)
{
	if (zero_bytes & 1)
		raw = _mm_crc32_u8(raw, 0);
	if (zero_bytes & 2)
		raw = _mm_crc32_u16(raw, 0);
	uint64_t bits = (zero_bytes >> 2) << 5;
	for (int k = 5; bits >> k; k++)
		if ((bits >> k) & 1)
			raw = mul_x32(raw, x2k_m32[k]);
	return raw;
}

uint32_t kr_crc32c_shift(uint32_t raw, uint64_t zero_bytes)
{
	pthread_once(&x2k_once, x2k_init);
	if (have_clmul)
		return shift_clmul(raw, zero_bytes);
	uint64_t bits = zero_bytes * 8;
	for (int k = 0; bits; k++, bits >>= 1)
		if (bits & 1)
			raw = gf_mul(x2k[k], raw);
	return raw;
}

uint32_t kr_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	/* Both inversions cancel: crc(A || B) = crc(A) x^(8 len_b) ^ crc(B). */
	return kr_crc32c_shift(crc_a, len_b) ^ crc_b;
}

/* Raw register (init 0, no final inversion): the linear part of the CRC. */
static uint32_t crc_raw(const void *buf, size_t len)
{
	unsigned int reg = 0;
	const unsigned char *p = buf;
	for (size_t left = len; left > 0;) {
		int chunk = left > (size_t)INT_MAX ? INT_MAX : (int)left;
		reg = crc32_iscsi((unsigned char *)p, chunk, reg);
		kr_simd_done();
		p += chunk;
		left -= (size_t)chunk;
	}
	return reg;
}

uint32_t kr_crc32c_delta(const void *d, size_t len, uint64_t trailing)
{
	return kr_crc32c_shift(crc_raw(d, len), trailing);
}

uint32_t kr_crc32c_delta2(const void *old, const void *new, size_t len, uint64_t trailing)
{
	/* raw(old ^ new) = raw(old) ^ raw(new): two passes of the SIMD CRC beat forming the
	 * delta byte by byte. */
	return kr_crc32c_shift(crc_raw(old, len) ^ crc_raw(new, len), trailing);
}
