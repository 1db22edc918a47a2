/*
 * hmap_layout.h - the on-media structures of a single-trip hash map file, map format v1
 * (docs/FORMAT.md, "Single-trip persistent hash map").
 *
 * The only file that says how bytes sit in a map file; the _Static_asserts pin its sizes
 * and offsets.
 */
#ifndef KR_HMAP_LAYOUT_H
#define KR_HMAP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------
 * Single-trip persistent hash map (STPS, Cohen, Friedman and Larus), map format v1.
 *
 * A file of its own. Its only durable state is a log of fixed-size entries reused in place;
 * the index lives in DRAM and is rebuilt by scanning the log at open. An update writes one
 * entry and costs one fence. Every entry of a map has the same size, L cache lines (chosen
 * at creation, 1 to 32): a single reuse queue in death order is what keeps a deleted key
 * from coming back after a crash (a tombstone is reused only after the entries it cancels
 * were overwritten), and size classes with a queue each would lose that order.
 *
 *   offset   size                 content
 *   0        256                  header, copy A
 *   256      8                    watermark word, copy A: W in bits 0-52, bits 53-63 the
 *                                 low 11 bits of CRC-32C of W (as a little-endian u64)
 *   P        256                  header, copy B
 *   P + 256  8                    watermark word, copy B
 *   2P       nslots * L * 64      entries
 *
 * The watermark W (Cohen et al.'s fix B for transactions and reuse): every version <= W
 * belongs to a complete operation, so recovery checks the entry count of a transaction
 * only above W. It is stored (both copies, flushed) right after a transaction's fence and
 * becomes durable with the next fence, before any entry of that transaction can be
 * reused. One 8-byte store replaces a copy whole; a copy whose check bits fail is ignored;
 * recovery uses the larger valid W (an older W is always safe: nothing it does not cover
 * can have been reused yet).
 *
 * Entry of L lines. Every line starts with a header word (8 bytes, one aligned store). A
 * writer sets every line's busy bit, writes the payload, then stores every line's final
 * word (busy clear, the new version), then flushes the lines and fences. The entry is
 * whole iff no line is busy and every line carries line 0's version: whatever subset of
 * lines persists, the entry is either complete or visibly torn. Line 0's word:
 *   bit  0     busy: the line is being rewritten
 *   bit  1     reserved, zero
 *   bits 2-9   txncount: entries in the transaction (1 for a plain update); 0 = never used
 *   bit  10    tombstone: the key was deleted (no value)
 *   bits 11-63 version: unique per operation (all entries of a transaction share one)
 * Later lines' words: busy (bit 0) and the version (bits 11-63), other bits zero. Line 0
 * then holds the lengths word (bits 0-15 key length, 16-31 value length, rest zero) and 48
 * payload bytes; every later line 56 payload bytes. Payload = key || value. A zeroed slot
 * is whole, version 0, txncount 0: never used.
 * ------------------------------------------------------------------------------------- */
#define KR_HMAP_MAGIC 0x0031504d4148524bull /* the bytes "KRHAMP1\0" (little-endian) */
#define KR_HMAP_VERSION 1u
#define KR_HMAP_MAX_LINES 32u
#define KR_HMAP_MAX_KEY 128u
#define KR_HMAP_MAX_TX 255u
#define KR_HMAP_LINE0_PAYLOAD 48u
#define KR_HMAP_LINE_PAYLOAD 56u
#define KR_HMAP_WM_OFF 256u

#define KR_HMAP_BUSY 0x1ull
#define KR_HMAP_TXN_SHIFT 2
#define KR_HMAP_TXN_MASK (0xffull << KR_HMAP_TXN_SHIFT)
#define KR_HMAP_TOMB 0x400ull
#define KR_HMAP_VER_SHIFT 11
#define KR_HMAP_VER_MAX ((1ull << 53) - 1)

/* Map header (256 bytes, two identical copies, written once at creation).
 *
 *   off size field
 *     0    8 magic       KR_HMAP_MAGIC
 *     8    4 version     KR_HMAP_VERSION
 *    12    4 hdr_size    256
 *    16    8 file_size   bytes
 *    24    8 nslots      entries
 *    32    4 entry_lines L
 *    36  216 reserved    zero
 *   252    4 crc         CRC-32C of bytes 0..251
 */
struct kr_hmap_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;
	uint64_t file_size;
	uint64_t nslots;
	uint32_t entry_lines;
	uint32_t flags; /* KR_HMAP_HDR_* */
	uint8_t reserved[212];
	uint32_t crc;
};
#define KR_HMAP_HDR_PROTECTED 0x1u /* created with KR_HMAP_PROTECT: a sidecar covers it */
_Static_assert(sizeof(struct kr_hmap_hdr) == 256, "map header is 256 bytes");
_Static_assert(offsetof(struct kr_hmap_hdr, entry_lines) == 32, "entry_lines at 32");
_Static_assert(offsetof(struct kr_hmap_hdr, flags) == 36, "flags at 36");
_Static_assert(offsetof(struct kr_hmap_hdr, crc) == 252, "crc is the last word");

#endif
