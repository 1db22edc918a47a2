/*
 * region_layout.h - the on-media structures of a protected region's sidecar file,
 * sidecar format v1 (docs/FORMAT.md, "Sidecar of a protected region").
 *
 * The only file that says how bytes sit in a sidecar; the _Static_asserts pin its sizes and
 * offsets. The region's own data file has no format of keratin's: only the sidecar does.
 */
#ifndef KR_REGION_LAYOUT_H
#define KR_REGION_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* The unit of the region's checksums, parity and sealing: one 4 KiB page of the data file. */
#define KR_SIDE_PAGE 4096u

/* ---------------------------------------------------------------------------------------
 * Sidecar of a protected region (lazy redundancy, Vilamb), sidecar format v1.
 *
 * A protected region is any file the application maps MAP_SHARED and writes with plain
 * stores; its own format is never touched. Its redundancy lives in a separate file, the
 * sidecar (default name: the data file's path + ".krs"). N data pages of P = 4096 bytes
 * are grouped into stripes of W consecutive pages (the last one may be short; missing pages
 * count as zeros) and into segments of G pages, the unit that is sealed (write-protected)
 * while cold. Sidecar layout, every area page aligned:
 *
 *   offset        size                        content
 *   0             P                           superblock, copy A
 *   P             P                           superblock, copy B
 *   2P            P                           status page: shadow record, last-pass record
 *   intent_off    2 * ceil(ceil(N/G)/32768) P  hot-segment bitmap, two copies (1 bit/segment)
 *   crc_off       ceil(N/1024) P              CRC-32C of every data page (u32 each)
 *   meta_off      ceil(ceil(N/1024)/1024) P   CRC-32C of every full page of the CRC array
 *   parity_off    ceil(N/W) P                 one XOR parity page per stripe
 *
 * Invariant kept at every instant while a session is ACTIVE: the CRC of page p, the meta
 * CRC of its CRC page and the parity of its stripe may differ from the data only if p's
 * segment is hot (its bit set in either bitmap copy). A segment becomes hot, durably,
 * before the first store into it can land (it is sealed until then), and goes cold only
 * after it has been sealed again and its redundancy recomputed and made durable.
 * ------------------------------------------------------------------------------------- */
#define KR_SIDE_MAGIC 0x003145444953524bull /* "KRSIDE1\0" little-endian */
#define KR_SIDE_VERSION 1u
#define KR_SIDE_CSUM_CRC32C 1u
#define KR_SIDE_CLEAN 1u  /* redundancy matches the data; global meta CRC valid */
#define KR_SIDE_ACTIVE 2u /* attached, or the process died attached: trust cold segments only */
#define KR_SIDE_F_SEAL 0x1u /* this session seals cold segments (crash level 2); without it
			     * every segment is hot for the whole session (level 1) */

/* Superblock (256 bytes, two copies; the valid copy with the higher seq wins; an update
 * writes the other copy, persists it, and only then is it the current one).
 *
 *   off size field
 *     0    8 magic          KR_SIDE_MAGIC
 *     8    4 version        KR_SIDE_VERSION
 *    12    4 sb_size        256
 *    16    8 seq            update counter
 *    24    8 data_size      bytes of the protected file (a multiple of P)
 *    32    8 data_dev       st_dev of the protected file when the sidecar was made
 *    40    8 data_ino       st_ino of the protected file
 *    48    4 page_size      4096
 *    52    4 stripe_pages   W
 *    56    4 batch_pages    pages per background batch (B)
 *    60    4 segment_pages  G (a multiple of W)
 *    64    4 csum_kind      KR_SIDE_CSUM_CRC32C
 *    68    4 state          KR_SIDE_CLEAN / KR_SIDE_ACTIVE
 *    72    8 epoch          sessions so far (incremented at every attach)
 *    80    8 npages         N
 *    88    8 nstripes       ceil(N / W)
 *    96    8 nsegments      ceil(N / G)
 *   104    8 intent_off     \
 *   112    8 crc_off         |  byte offsets of the areas in the sidecar
 *   120    8 meta_off        |
 *   128    8 parity_off      |
 *   136    8 side_size      /   the sidecar's length
 *   144    4 meta_crc       CRC-32C of the meta array (valid when CLEAN)
 *   148    4 flags          KR_SIDE_F_* of the current (or last) session
 *   152  100 reserved       zero
 *   252    4 crc            CRC-32C of bytes 0..251
 */
struct kr_side_sb {
	uint64_t magic;
	uint32_t version;
	uint32_t sb_size;
	uint64_t seq;
	uint64_t data_size;
	uint64_t data_dev;
	uint64_t data_ino;
	uint32_t page_size;
	uint32_t stripe_pages;
	uint32_t batch_pages;
	uint32_t segment_pages;
	uint32_t csum_kind;
	uint32_t state;
	uint64_t epoch;
	uint64_t npages;
	uint64_t nstripes;
	uint64_t nsegments;
	uint64_t intent_off;
	uint64_t crc_off;
	uint64_t meta_off;
	uint64_t parity_off;
	uint64_t side_size;
	uint32_t meta_crc;
	uint32_t flags;
	uint8_t reserved[100];
	uint32_t crc;
};
_Static_assert(sizeof(struct kr_side_sb) == 256, "sidecar superblock is 256 bytes");
_Static_assert(offsetof(struct kr_side_sb, page_size) == 48, "page_size at 48");
_Static_assert(offsetof(struct kr_side_sb, intent_off) == 104, "intent_off at 104");
_Static_assert(offsetof(struct kr_side_sb, meta_crc) == 144, "meta_crc at 144");
_Static_assert(offsetof(struct kr_side_sb, crc) == 252, "crc is the last word");

/* Status page (at 2P). The shadow record is Vilamb's: the span of pages whose CRCs and
 * stripes the background thread is rewriting now; seq is odd while it does. Recovery
 * treats the span as stale. The pass record is for `keratin region status`. Each record
 * carries a CRC; a record that fails it is ignored (the shadow span is always inside hot
 * segments, so ignoring it loses nothing).
 *
 *   off size field
 *     0    8 seq            batch sequence number (odd: batch in flight)
 *     8    8 lo             first page of the batch
 *    16    8 hi             one past its last page
 *    24    4 reserved       zero
 *    28    4 crc            CRC-32C of bytes 0..27
 *    64    8 passes         completed passes this session
 *    72    8 pass_end_ns    CLOCK_REALTIME at the end of the last pass
 *    80    8 pass_ns        duration of the last pass
 *    88    8 dirty_pages    pages the last pass recomputed
 *    96    8 hot_segments   hot segments after the last pass
 *   104    4 pid            the attached process
 *   108    4 period_ms      its update period
 *   112   12 reserved       zero
 *   124    4 crc            CRC-32C of bytes 64..123
 */
struct kr_side_shadow {
	uint64_t seq;
	uint64_t lo;
	uint64_t hi;
	uint32_t reserved;
	uint32_t crc;
	uint8_t pad[32];
};
_Static_assert(sizeof(struct kr_side_shadow) == 64, "shadow record is one cache line");

struct kr_side_passrec {
	uint64_t passes;
	uint64_t pass_end_ns;
	uint64_t pass_ns;
	uint64_t dirty_pages;
	uint64_t hot_segments;
	uint32_t pid;
	uint32_t period_ms;
	uint8_t reserved[12];
	uint32_t crc;
};
_Static_assert(sizeof(struct kr_side_passrec) == 64, "pass record is one cache line");

#define KR_SIDE_CRCS_PER_PAGE (KR_SIDE_PAGE / 4u)
#define KR_SIDE_MAX_STRIPE 64u
#define KR_SIDE_DEFAULT_STRIPE 4u
#define KR_SIDE_DEFAULT_BATCH 512u
#define KR_SIDE_DEFAULT_SEGMENT 512u /* 2 MiB */
#define KR_SIDE_MAX_SEGMENTS 16384u  /* segments are sealed one VMA each: stay far below
				      * vm.max_map_count (65530) */

#endif
