/*
 * csum.c - CRC-32C through ISA-L's crc32_iscsi (hardware crc32 instruction when present).
 *
 * ISA-L's crc32_iscsi is the raw register form (no final inversion), so the standard value
 * is ~crc32_iscsi(buf, n, ~0). Lengths above INT_MAX are fed in pieces because ISA-L takes
 * an int length.
 *
 * The delta functions implement the standard CRC "combine" algebra (multiplication by
 * x^(8k) modulo the polynomial, by squaring) so that a checksum can be patched for a
 * changed range without reading the rest of the object.
 */
#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>

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

/* x^(2^k) mod P for k = 0..63, i.e. the effect of 2^k zero bits. */
static uint32_t x2k[64];
static pthread_once_t x2k_once = PTHREAD_ONCE_INIT;

static void x2k_init(void)
{
	uint32_t p = 1u << 30; /* x^1 */
	for (int k = 0; k < 64; k++) {
		x2k[k] = p;
		p = gf_mul(p, p);
	}
}

uint32_t kr_crc32c_shift(uint32_t raw, uint64_t zero_bytes)
{
	pthread_once(&x2k_once, x2k_init);
	uint64_t bits = zero_bytes * 8;
	for (int k = 0; bits; k++, bits >>= 1)
		if (bits & 1)
			raw = gf_mul(x2k[k], raw);
	return raw;
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
