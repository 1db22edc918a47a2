/*
 * layout.h - every on-media structure of a keratin pool, format v1.
 *
 * This is the only file that says how bytes sit in a pool file. docs/FORMAT.md is the
 * human description of the same thing; the two must change together (tests/test_layout.c
 * pins the sizes and offsets below, so a change here that forgets the doc still fails a test
 * that names the field).
 *
 * Rules kept throughout:
 *   - fixed-width little-endian fields (keratin only runs on x86-64 today; a big-endian port
 *     would byte-swap in the accessors, never change these structs);
 *   - every reserved byte must be zero when written and is checked to be zero when read;
 *   - on-media constants (KR_CHUNK_*, KR_LINE_*, KR_REC_*) are never reused as in-memory
 *     enums, so an internal renumbering cannot silently change the format;
 *   - sizes and offsets are pinned with _Static_assert.
 *
 * File layout (all regions page aligned, P = 4096):
 *
 *   offset                       size                     content
 *   0                            P                        pool header, copy A
 *   P                            P                        control page, copy A (root line, log line)
 *   2P                           nlanes * lane_size       redo-log lanes, primary
 *   heap_off                     nzones * zone_size       heap: zones of R data rows + 1 parity row
 *   lanes_replica_off            nlanes * lane_size       redo-log lanes, replica
 *   pool_size - 2P               P                        control page, copy B
 *   pool_size - P                P                        pool header, copy B
 *
 * A zone (zone_size = (rows + 1) * row_pages * P):
 *
 *   [ data row 0 | data row 1 | ... | data row R-1 | parity row ]
 *   ^ the first zone_meta_pages pages of the data rows hold the zone's chunk table and run
 *     bitmaps; chunks (chunk_pages pages each) follow. Objects ignore row boundaries.
 *
 * Parity row byte x = XOR of byte x of every data row (maintained from format v1 on by the
 * fault-tolerance layer; a pool created by v1 starts all-zero, so all-zero parity is valid).
 */
#ifndef KR_LAYOUT_H
#define KR_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define KR_PAGE_SIZE 4096u
#define KR_LINE_SIZE 64u

/* ---------------------------------------------------------------------------------------
 * Pool header (256 bytes at offset 0 and at pool_size - 4096; both copies identical).
 *
 *   off size field
 *     0    8 magic            "KERATIN\0"
 *     8    4 version          KR_FORMAT_VERSION
 *    12    4 hdr_size         sizeof(struct kr_pool_hdr)
 *    16    4 compat           features an old reader may ignore
 *    20    4 incompat         features an old reader must refuse
 *    24    4 ro_compat        features an old reader may only read
 *    28    4 page_size        4096
 *    32   16 uuid
 *    48    8 pool_size        bytes; the file is at least this long
 *    56    8 create_time      seconds since the epoch
 *    64    4 nlanes
 *    68    4 lane_pages
 *    72    8 lanes_off
 *    80    8 lanes_replica_off
 *    88    8 ctl_off
 *    96    8 ctl_replica_off
 *   104    8 heap_off
 *   112    4 nzones
 *   116    4 rows             data rows per zone (R)
 *   120    4 row_pages        width of a row in pages
 *   124    4 zone_meta_pages  pages at the start of each zone's data rows for metadata
 *   128    4 chunk_pages      pages per chunk
 *   132    4 chunks_per_zone
 *   136    8 zone_size        bytes per zone including the parity row
 *   144  108 reserved         must be zero
 *   252    4 crc              CRC-32C of bytes 0..251
 * ------------------------------------------------------------------------------------- */
#define KR_MAGIC "KERATIN"          /* 7 chars + NUL = 8 bytes */
#define KR_FORMAT_VERSION 1u

/* Feature masks. A set bit that this build does not know is handled by its class
 * (incompat: refuse to open; ro_compat: refuse to open for writing). */
#define KR_FEAT_COMPAT_KNOWN 0u
/* Run chunk words index kr_size_classes_fine[] instead of kr_size_classes[]: a build that
 * read them with the first table would take every block for another size. */
#define KR_FEAT_INCOMPAT_FINE_CLASSES 0x1u
/* The log may hold SPILL and CANCEL records (an in-place transaction's undo continued in
 * heap blocks): a build that did not know them would refuse a crashed pool's log as damaged,
 * or replay undo that a home commit cancelled. */
#define KR_FEAT_INCOMPAT_LOG_SPILL 0x2u
/* The control pages hold a stale map (below): page columns whose parity and object checksums
 * may trail their bytes, which the application stored itself and made durable with
 * kr_stored_persist. A build that did not know it would trust those columns' parity and
 * rebuild pages from it, or report their objects as damaged. */
#define KR_FEAT_INCOMPAT_STALE_MAP 0x4u
#define KR_FEAT_INCOMPAT_KNOWN                                                                   \
	(KR_FEAT_INCOMPAT_FINE_CLASSES | KR_FEAT_INCOMPAT_LOG_SPILL | KR_FEAT_INCOMPAT_STALE_MAP)
#define KR_FEAT_RO_META_CSUM 0x1u /* chunk record CRCs are maintained */
#define KR_FEAT_RO_OBJ_CSUM 0x2u  /* object header CRCs are maintained */
#define KR_FEAT_RO_PARITY 0x4u    /* parity rows are maintained */
#define KR_FEAT_RO_LOG_REPLICA 0x8u /* the redo log is written to the replica lanes too */
/* The log line's fresh_word is kept (control page, below): a writer that did not know it
 * would leave a stale frontier behind, so an old build may only read such a pool. */
#define KR_FEAT_RO_FRESH 0x10u
/* Bits this build understands (it may also write pools that carry them only if it
 * maintains what they promise; see pool.c). */
#define KR_FEAT_RO_COMPAT_KNOWN                                                                  \
	(KR_FEAT_RO_META_CSUM | KR_FEAT_RO_OBJ_CSUM | KR_FEAT_RO_PARITY | KR_FEAT_RO_LOG_REPLICA |  \
	 KR_FEAT_RO_FRESH)

struct kr_pool_hdr {
	char magic[8];
	uint32_t version;
	uint32_t hdr_size;
	uint32_t compat;
	uint32_t incompat;
	uint32_t ro_compat;
	uint32_t page_size;
	uint8_t uuid[16];
	uint64_t pool_size;
	uint64_t create_time;
	uint32_t nlanes;
	uint32_t lane_pages;
	uint64_t lanes_off;
	uint64_t lanes_replica_off;
	uint64_t ctl_off;
	uint64_t ctl_replica_off;
	uint64_t heap_off;
	uint32_t nzones;
	uint32_t rows;
	uint32_t row_pages;
	uint32_t zone_meta_pages;
	uint32_t chunk_pages;
	uint32_t chunks_per_zone;
	uint64_t zone_size;
	uint8_t reserved[108];
	uint32_t crc;
};
_Static_assert(sizeof(struct kr_pool_hdr) == 256, "pool header is 256 bytes");
_Static_assert(offsetof(struct kr_pool_hdr, uuid) == 32, "uuid at 32");
_Static_assert(offsetof(struct kr_pool_hdr, pool_size) == 48, "pool_size at 48");
_Static_assert(offsetof(struct kr_pool_hdr, nlanes) == 64, "nlanes at 64");
_Static_assert(offsetof(struct kr_pool_hdr, heap_off) == 104, "heap_off at 104");
_Static_assert(offsetof(struct kr_pool_hdr, zone_size) == 136, "zone_size at 136");
_Static_assert(offsetof(struct kr_pool_hdr, reserved) == 144, "reserved at 144");
_Static_assert(offsetof(struct kr_pool_hdr, crc) == 252, "crc is the last word");

/* ---------------------------------------------------------------------------------------
 * Control page (4096 bytes at ctl_off and ctl_replica_off). Two lines are used:
 *
 *   line 0, root line (written only through the redo log, both copies in one transaction)
 *     0  8 root_oid      kr_oid of the root object, 0 if none
 *     8  8 root_size     its size in bytes
 *    16 44 reserved      must be zero
 *    60  4 crc           CRC-32C of bytes 0..59 (an all-zero line, "no root", is also valid)
 *
 *   line 1, log line (written in place by the log layer, never through the redo log)
 *     0  8 durable_word  bits 0..47: durable_seq: every transaction with seq <= durable_seq
 *                        is applied and durable; recovery replays only those above it.
 *                        bits 48..63: low 16 bits of CRC-32C of the 8-byte little-endian
 *                        durable_seq. One 8-byte store, so never torn (see log.c).
 *     8  8 clean         KR_CLEAN_MAGIC after a clean close, 0 while open
 *    16  8 fresh_word    with KR_FEAT_RO_FRESH, written with clean: F + 1, where F is the
 *                        fresh frontier, a global chunk index (zone * chunks_per_zone +
 *                        chunk) such that no chunk at or past F has held an object since
 *                        the pool was made, so its bytes are still the zeros of creation;
 *                        0 = unknown (while open, after a crash, without the feature).
 *                        Trusted only when both copies say clean and agree.
 *    24 40 reserved      must be zero
 *
 *   lines 2..63, stale map (pools with the incompat feature STALE_MAP; zero otherwise)
 *     bit i of little-endian word w (w = 0..495, from byte 128) stands for page columns
 *     (64w + i) * k .. (64w + i + 1) * k - 1, where k = KR_STALE_COLUMNS_PER_BIT(columns),
 *     columns = nzones * row_pages. A set bit: the application stored into those columns
 *     and made the bytes durable, and their parity and the checksums of the objects in them
 *     may not follow yet. Set (and made durable) before such bytes are; cleared only after
 *     the parity and checksums recomputed over them are durable. A bit set in either copy
 *     counts. Written in place by stale.c, never through the redo log.
 *
 * The rest of the page is reserved and zero.
 * ------------------------------------------------------------------------------------- */
struct kr_root_line {
	uint64_t root_oid;
	uint64_t root_size;
	uint8_t reserved[44];
	uint32_t crc;
};
_Static_assert(sizeof(struct kr_root_line) == KR_LINE_SIZE, "root line is one cache line");
_Static_assert(offsetof(struct kr_root_line, crc) == 60, "root line crc is its last word");

#define KR_CLEAN_MAGIC 0x4e41454c43524bull /* "KRCLEAN" */
#define KR_DURABLE_SEQ_MASK 0xffffffffffffull
#define KR_DURABLE_CHECK_SHIFT 48

struct kr_log_line {
	uint64_t durable_word;
	uint64_t clean;
	uint64_t fresh_word;
	uint8_t reserved[40];
};
_Static_assert(sizeof(struct kr_log_line) == KR_LINE_SIZE, "log line is one cache line");
_Static_assert(offsetof(struct kr_log_line, fresh_word) == 16, "fresh_word at 16");

#define KR_CTL_ROOT_LINE 0u
#define KR_CTL_LOG_LINE 1u
#define KR_CTL_STALE_LINE 2u
#define KR_STALE_MAP_BYTES (KR_PAGE_SIZE - KR_CTL_STALE_LINE * KR_LINE_SIZE)
#define KR_STALE_MAP_BITS ((uint64_t)KR_STALE_MAP_BYTES * 8)
#define KR_STALE_COLUMNS_PER_BIT(columns) (((columns) + KR_STALE_MAP_BITS - 1) / KR_STALE_MAP_BITS)
_Static_assert(KR_STALE_MAP_BYTES == 3968, "the stale map is the control page's lines 2..63");

/* ---------------------------------------------------------------------------------------
 * Redo-log lines. A lane is lane_pages * 4096 bytes = a circular array of 64-byte lines.
 * Every line starts with an 8-byte header word that is written LAST, with one aligned
 * 8-byte store, after the 56 payload bytes (the Cohen et al. CSO-VB scheme, with the
 * 48-bit sequence stamp playing the role of the validity bit: a line belongs to
 * transaction s iff its stamp equals the low 48 bits of s, so stale lines of older
 * transactions can never be mistaken for current ones and no lap-sense flip is needed).
 *
 *   header word: bits 0..1   kind (KR_LINE_FIRST, KR_LINE_CONT; 0 = never written)
 *                bits 2..15  index of the line within its transaction (FIRST = 0)
 *                bits 16..63 low 48 bits of the transaction's sequence number
 *
 *   FIRST line payload (56 bytes): struct kr_tx_first (24 bytes) then 32 bytes of records.
 *   CONT line payload: 56 bytes of records, continuing the stream.
 *
 * Records, packed back to back in the payload stream, each 8-byte aligned:
 *     0 2 kind   (KR_REC_DATA, KR_REC_SETBITS, KR_REC_CLRBITS, KR_REC_FRESH)
 *     2 2 reserved, zero
 *     4 4 len    bytes of data that follow (DATA: the new bytes; SET/CLRBITS: 8, the mask;
 *                FRESH: 24, see below)
 *     8 8 off    pool offset the record applies to (SET/CLRBITS: an 8-byte aligned word)
 *    16 len bytes, padded with zeros to a multiple of 8
 *
 * FRESH (written by older builds only; still recovered) announces an object allocated by
 * the transaction, whose payload was written home directly (not logged) before the commit
 * fence: off = the object header's pool offset, data = the 16-byte object header, then the
 * CRC-64 (ECMA-182, reflected, ISA-L crc64_ecma_refl with seed 0) of the size payload bytes
 * that follow the header. Applying it writes the header. Recovery treats a lane's newest
 * transaction whose FRESH payload does not match as not committed. That proves a torn
 * fence only if nothing stored into the payload after the commit returned, which a program
 * may do before persisting: this build fences a direct payload before the commit instead
 * and logs the header as DATA (tx.c, tx_add_fresh).
 *
 * INTENT records (kind 5) appear in intent entries (flags KR_TXF_INTENT), which hold
 * nothing else, and beside a SPILL record: off = the start of a range about to be written
 * outside the log, data = its length (8 bytes). An intent is committed (fenced) before
 * those writes; recovery never applies it but recomputes the redundancy (parity) of its
 * ranges, since the writes may have landed without the parity updates that go with them.
 *
 * Spilled undo (pools with the incompat feature LOG_SPILL). An in-place transaction whose
 * undo entries outgrow its lane continues them in a spill segment: a block of the heap,
 * free in the allocator's records, holding nlines log lines (and as many again for the
 * replica when the pool keeps one), written like a lane's but never wrapping.
 *   SPILL (kind 6), in an entry (flags 0) beside the INTENT record of the segment's
 *     block, in the lane for a transaction's first segment and in the current segment for
 *     the next ones: off = the segment's first line, data = { nlines, replica_off (0:
 *     none) } (16 bytes). Recovery reads each segment a replayable SPILL record names, once,
 *     and takes its complete transactions above durable_seq as the lane's own.
 *   CANCEL (kind 7), in the entry that commits such a transaction (its "home commit": the
 *     new bytes, checksums and parity made durable in place, then this entry; in the lane,
 *     or in the segment when the lane has no room): off = the sequence number of the
 *     transaction's first undo entry, data = 8 zero bytes. The lane's entries (its
 *     segments' included) with sequence numbers from off up to this entry's are not
 *     replayed, and no older record is replayed over their ranges; the ranges are still
 *     recomputed. An aborted transaction that spilled commits an entry holding only a
 *     CANCEL record once its old bytes are back home. Segments return to the heap once
 *     durable_seq passes the CANCEL, so a replayable SPILL record names intact lines.
 *
 * crc = CRC-32C of the whole payload stream (56 * nlines bytes, with the crc field itself
 * taken as zero). Header words are not covered: validity decides atomicity, the CRC
 * decides integrity.
 * ------------------------------------------------------------------------------------- */
#define KR_LINE_PAYLOAD 56u
#define KR_LINE_KIND_MASK 0x3ull
#define KR_LINE_FIRST 1ull
#define KR_LINE_CONT 2ull
#define KR_LINE_INDEX_SHIFT 2
#define KR_LINE_INDEX_MASK 0x3fffull /* 14 bits: at most 16384 lines per transaction */
#define KR_LINE_SEQ_SHIFT 16
#define KR_LINE_SEQ_MASK 0xffffffffffffull
#define KR_TX_MAX_LINES (KR_LINE_INDEX_MASK + 1)
#define KR_SEG_MAX_LINES (1ull << 20) /* a spill segment: at most 64 MiB of lines */

struct kr_log_cacheline {
	uint64_t header;
	uint8_t payload[KR_LINE_PAYLOAD];
};
_Static_assert(sizeof(struct kr_log_cacheline) == KR_LINE_SIZE, "a log line is a cache line");

struct kr_tx_first {
	uint32_t nlines;
	uint32_t nrecords;
	uint32_t crc;
	uint32_t flags; /* KR_TXF_*; other bits must be zero */
	uint64_t seq;
};
_Static_assert(sizeof(struct kr_tx_first) == 24, "first-line prefix is 24 bytes");

#define KR_REC_DATA 1u
#define KR_REC_SETBITS 2u
#define KR_REC_CLRBITS 3u
#define KR_REC_FRESH 4u
#define KR_REC_INTENT 5u /* len = 8, data = byte count of the range */
#define KR_REC_SPILL 6u  /* len = 16, data = struct kr_rec_spill */
#define KR_REC_CANCEL 7u /* off = first sequence number cancelled, len = 8, data zero */

#define KR_TXF_INTENT 0x1u /* kr_tx_first.flags: this entry is an intent, never applied */


struct kr_rec_hdr {
	uint16_t kind;
	uint16_t reserved;
	uint32_t len;
	uint64_t off;
};
_Static_assert(sizeof(struct kr_rec_hdr) == 16, "record header is 16 bytes");

/* ---------------------------------------------------------------------------------------
 * Heap. Each zone's data rows begin with zone_meta_pages pages of metadata: an array of
 * chunks_per_zone chunk records (struct kr_chunk_meta, 144 bytes, packed), then zeros to
 * the page boundary; then chunks_per_zone chunks of chunk_pages pages each.
 *
 * Chunk record:
 *     0   8 word     bits 0..7   type (KR_CHUNK_FREE, KR_CHUNK_RUN, KR_CHUNK_LARGE)
 *                    bits 8..15  RUN: size class index into the pool's table
 *                                (kr_class_table: kr_size_classes_fine[] with the
 *                                incompat feature FINE_CLASSES, else kr_size_classes[])
 *                    bits 32..63 LARGE: number of chunks in the extent (head chunk only;
 *                                the records of the rest of the extent stay zero)
 *                    other bits  must be zero
 *     8 128 bitmap   RUN: bit i set = block i allocated (bits past the run's block count
 *                    zero); otherwise zero
 *   136   4 crc      CRC-32C of bytes 0..135 XOR CRC-32C of 136 zero bytes (so an all-zero
 *                    record, a new pool's free chunk, has crc 0); kept current only when
 *                    the pool has the ro_compat feature KR_FEAT_RO_META_CSUM
 *   140   4 reserved must be zero
 *
 * Object header (16 bytes) at the start of every block or extent; a kr_oid is the pool
 * offset of the first payload byte, i.e. header offset + 16.
 * ------------------------------------------------------------------------------------- */
#define KR_CHUNK_FREE 0u
#define KR_CHUNK_RUN 1u
#define KR_CHUNK_LARGE 2u

#define KR_CHUNK_TYPE(w) ((unsigned)((w) & 0xff))
#define KR_CHUNK_CLASS(w) ((unsigned)(((w) >> 8) & 0xff))
#define KR_CHUNK_NCHUNKS(w) ((uint32_t)((w) >> 32))
#define KR_CHUNK_WORD_RUN(cls) ((uint64_t)KR_CHUNK_RUN | ((uint64_t)(cls) << 8))
#define KR_CHUNK_WORD_LARGE(n) ((uint64_t)KR_CHUNK_LARGE | ((uint64_t)(n) << 32))

#define KR_CHUNK_PAGES 8u                              /* 32 KiB chunks */
#define KR_CHUNK_SIZE (KR_CHUNK_PAGES * KR_PAGE_SIZE)
#define KR_MIN_BLOCK 32u
#define KR_RUN_BITMAP_BYTES (KR_CHUNK_SIZE / KR_MIN_BLOCK / 8) /* 128 */

struct kr_chunk_meta {
	uint64_t word;
	uint64_t bitmap[KR_RUN_BITMAP_BYTES / 8];
	uint32_t crc;
	uint32_t reserved;
};
_Static_assert(sizeof(struct kr_chunk_meta) == 144, "chunk record is 144 bytes");
_Static_assert(offsetof(struct kr_chunk_meta, bitmap) == 8, "bitmap after the word");
_Static_assert(offsetof(struct kr_chunk_meta, crc) == 136, "crc after the bitmap");

struct kr_obj_hdr {
	uint64_t size; /* payload bytes as requested at allocation */
	uint32_t type; /* application type number */
	uint32_t crc;  /* CRC-32C of size, type, then the payload (kr_obj_crc), with OBJ_CSUM */
};
_Static_assert(sizeof(struct kr_obj_hdr) == 16, "object header is 16 bytes");

/* Data of a KR_REC_SPILL log record (see the redo-log section above). */
struct kr_rec_spill {
	uint64_t nlines;
	uint64_t replica_off;
};
_Static_assert(sizeof(struct kr_rec_spill) == 16, "spill record data is 16 bytes");

/* Data of a KR_REC_FRESH log record (see the redo-log section above). */
struct kr_rec_fresh {
	struct kr_obj_hdr hdr;
	uint64_t payload_crc64;
};
_Static_assert(sizeof(struct kr_rec_fresh) == 24, "fresh record data is 24 bytes");

/* Block sizes (header included) of the small-object size classes; objects whose block
 * would exceed the last class take whole chunks. On-media: a run's chunk word stores an
 * index into its pool's table, so a table's entries may be appended in a later format but
 * never changed.
 *
 * kr_size_classes: the first table, of pools without FINE_CLASSES. Its steps above 1 KiB
 * are 1.2-1.33x, so a block wastes up to a quarter of itself (a 4150-byte object takes
 * 5120 bytes) and a run's tail up to 2 KiB.
 * kr_size_classes_fine: every pool created since. At most 1.25x apart up to 1 KiB, in
 * 16-byte steps at the small end; above 1 KiB, one class per number of blocks a 32 KiB
 * chunk holds (32768 / n rounded down to 16 bytes, n = 28 ... 2), so a run's tail is
 * under 16 bytes a block and no larger block size would fit the same count. */
#define KR_NCLASSES 27
static const uint32_t kr_size_classes[KR_NCLASSES] = {
	32,   48,   64,   80,   96,   128,  160,  192,  256,   320,   384,   512,   640,  768,
	1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 16384,
};
#define KR_NCLASSES_FINE 41
static const uint32_t kr_size_classes_fine[KR_NCLASSES_FINE] = {
	32,   48,   64,   80,   96,   112,  128,  160,  192,  224,  256,   288,  320,  384,
	448,  512,  576,  640,  768,  896,  1024, 1168, 1248, 1360, 1488,  1632, 1808, 2048,
	2336, 2512, 2720, 2976, 3264, 3632, 4096, 4672, 5456, 6544, 8192, 10912, 16384,
};
#define KR_MAX_NCLASSES KR_NCLASSES_FINE

/* The size-class table of a pool whose header has these incompat bits, and its length. */
static inline const uint32_t *kr_class_table(uint32_t incompat, unsigned *n)
{
	if (incompat & KR_FEAT_INCOMPAT_FINE_CLASSES) {
		*n = KR_NCLASSES_FINE;
		return kr_size_classes_fine;
	}
	*n = KR_NCLASSES;
	return kr_size_classes;
}

/* ---------------------------------------------------------------------------------------
 * Geometry limits (enforced by pool.c's layout_compute()).
 * ------------------------------------------------------------------------------------- */
#define KR_MIN_POOL_SIZE (8ull << 20)
#define KR_MAX_POOL_SIZE (1ull << 46) /* 64 TiB */
#define KR_MIN_ROWS 2u
#define KR_MAX_ROWS 1024u
#define KR_DEFAULT_ROWS 100u
#define KR_DEFAULT_NLANES 16u
#define KR_MAX_NLANES 1024u
#define KR_DEFAULT_LANE_PAGES 64u   /* 256 KiB lanes: 4096 lines */
#define KR_MIN_LANE_PAGES 4u
#define KR_MAX_LANE_PAGES (KR_TX_MAX_LINES * KR_LINE_SIZE / KR_PAGE_SIZE)
#define KR_MAX_ZONE_DATA_PAGES (1u << 18) /* 1 GiB of data rows per zone */
#define KR_MIN_REPLICA_DISTANCE (1ull << 20)

#endif
