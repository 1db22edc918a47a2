/*
 * csum.h - CRC-32C (Castagnoli), the one checksum of the format: headers, log entries and,
 * with the fault-tolerance layer, objects. ISA-L provides the kernel.
 */
#ifndef KR_CSUM_H
#define KR_CSUM_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes (standard: init ~0, final xor ~0; "123456789" -> 0xe3069283). */
uint32_t kr_crc32c(const void *buf, size_t n);
/* Continue a CRC-32C: kr_crc32c_extend(kr_crc32c(a), b) == kr_crc32c(a || b). */
uint32_t kr_crc32c_extend(uint32_t crc, const void *buf, size_t n);

#endif
