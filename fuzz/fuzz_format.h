/*
 * fuzz_format.h - the input format of fuzz_open, shared by the harness and the seed maker.
 *
 * A pool is at least 8 MiB and almost all zero, so a fuzz input describes a pool file
 * sparsely instead of byte for byte:
 *
 *   byte 0      flags: FF_FIX_HDR_CRC   recompute both pool-header CRCs after decoding
 *                      FF_FIX_LOG_CRC   recompute the payload CRC of every log transaction
 *                                       whose lines are complete, in both lane copies
 *                      FF_FIX_DURABLE   recompute the check bits of both durable_seq words
 *               (odd first byte = header checksums off, so mutations reach the geometry,
 *               log and heap checks instead of dying at the header CRC)
 *   bytes 1..4  file size in KiB, little-endian (clamped to FF_MAX_KIB)
 *   then segments to the end of the input, each:
 *               u32 LE offset, u16 LE length, then `length` data bytes (cut short by the
 *               end of the input); written at `offset` of the file, clipped to its size.
 *
 * Everything not covered by a segment is zero.
 */
#ifndef KR_FUZZ_FORMAT_H
#define KR_FUZZ_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FF_FIX_HDR_CRC 0x1u
#define FF_FIX_LOG_CRC 0x2u
#define FF_FIX_DURABLE 0x4u
#define FF_HEAD 5u
#define FF_SEG_HEAD 6u
#define FF_MAX_KIB (32u * 1024u) /* 32 MiB */

struct ff_seg {
	uint32_t off;
	uint16_t len;
	const uint8_t *data;
};

static inline uint32_t ff_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void ff_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Iterates the segments of an input: call with *pos = FF_HEAD; returns 0 at the end. */
static inline int ff_next_seg(const uint8_t *in, size_t n, size_t *pos, struct ff_seg *s)
{
	if (*pos + FF_SEG_HEAD > n)
		return 0;
	s->off = ff_u32(in + *pos);
	s->len = (uint16_t)(in[*pos + 4] | in[*pos + 5] << 8);
	*pos += FF_SEG_HEAD;
	if (s->len > n - *pos)
		s->len = (uint16_t)(n - *pos);
	s->data = in + *pos;
	*pos += s->len;
	return 1;
}

#endif
