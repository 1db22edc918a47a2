/*
 * csum.h - CRC-32C (Castagnoli), the one checksum of every keratin format: headers, log
 * entries, objects, pages. ISA-L provides the kernel. What is checksummed, and how, is each
 * format's own (an object's checksum: obj/redund.h).
 */
#ifndef KR_CSUM_H
#define KR_CSUM_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes (standard: init ~0, final xor ~0; "123456789" -> 0xe3069283). */
uint32_t kr_crc32c(const void *buf, size_t n);
/* Continue a CRC-32C: kr_crc32c_extend(kr_crc32c(a), b) == kr_crc32c(a || b). */
uint32_t kr_crc32c_extend(uint32_t crc, const void *buf, size_t n);
/* Checksumming while copying: copies n pieces of piece bytes each (at most INT_MAX) from
 * src to dst, and crc[i] = kr_crc32c of the i-th piece as copied - the bytes in dst are the
 * bytes that were checksummed, each read from src once. */
void kr_crc32c_copy(void *dst, const void *src, size_t piece, unsigned n, uint32_t *crc);
/* kr_crc32c_extend(crc, src, n) of bytes copied from src to dst in the same pass (any n). */
uint32_t kr_crc32c_copy_extend(uint32_t crc, void *dst, const void *src, size_t n);

/* CRC-64 (ECMA-182, reflected, seed 0): the check on directly written fresh objects. */
uint64_t kr_crc64(const void *buf, size_t n);

/* Checksum update in time proportional to the bytes changed, not the object size.
 * CRC-32C is affine over GF(2): for equal-length messages, crc(A) ^ crc(B) depends only on
 * A ^ B. If bytes [off, off+len) of an n-byte buffer change from old to new, then
 *   crc(new buffer) = crc(old buffer) ^ kr_crc32c_delta(old ^ new, len, n - off - len).
 * kr_crc32c_delta takes the delta bytes themselves (d = old ^ new) and the number of
 * unchanged bytes that follow them. */
uint32_t kr_crc32c_delta(const void *d, size_t len, uint64_t trailing);
/* The same for bytes that changed from old to new, without forming old ^ new. */
uint32_t kr_crc32c_delta2(const void *old, const void *new, size_t len, uint64_t trailing);
/* The raw CRC register after feeding zero bytes: the "shift" used above. */
uint32_t kr_crc32c_shift(uint32_t raw, uint64_t zero_bytes);
/* kr_crc32c(A || B) from kr_crc32c(A), kr_crc32c(B) and B's length, without reading B. */
uint32_t kr_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
