/*
 * csum.c - CRC-32C through ISA-L's crc32_iscsi (hardware crc32 instruction when present).
 *
 * ISA-L's crc32_iscsi is the raw register form (no final inversion), so the standard value
 * is ~crc32_iscsi(buf, n, ~0). Lengths above INT_MAX are fed in pieces because ISA-L takes
 * an int length.
 */
#include <isa-l/crc.h>
#include <limits.h>

#include "csum.h"

uint32_t kr_crc32c_extend(uint32_t crc, const void *buf, size_t n)
{
	unsigned int reg = ~crc;
	const unsigned char *p = buf;
	while (n > 0) {
		int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
		reg = crc32_iscsi((unsigned char *)p, chunk, reg);
		p += chunk;
		n -= (size_t)chunk;
	}
	return ~reg;
}

uint32_t kr_crc32c(const void *buf, size_t n) { return kr_crc32c_extend(0, buf, n); }
