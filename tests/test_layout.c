/*
 * test_layout.c - pins the on-media format of src/obj/layout.h and checks real pools against it.
 *
 * 1. Every struct of layout.h: its size and the offset of every field, and the on-media
 *    constants (magic, kinds, record types, chunk types, the size-class table, which may
 *    only ever be appended to). A change to layout.h fails here with the field's name, so
 *    it cannot slip past docs/FORMAT.md unnoticed.
 * 2. A freshly created pool (with a root object) after a clean close, read as raw bytes:
 *    both header copies identical, valid CRC-32C, fields equal to what kr_pool_stat()
 *    reports and to the requested geometry, regions page aligned and in the documented
 *    order; both control pages (root line with its CRC, log line clean with a valid
 *    durable_seq check); the zone metadata holding exactly the root's block.
 * 3. The redo log of an open pool after kr_update(): a complete transaction in a lane with
 *    well-formed line headers, a valid payload CRC, records that parse, a DATA record with
 *    exactly the bytes written, and an identical copy in the replica lane.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layout.h"
#include "testutil.h"

static unsigned failures;

#define CHECK(cond, ...)                                                                    \
	do {                                                                                \
		if (!(cond)) {                                                              \
			failures++;                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
			fprintf(stderr, __VA_ARGS__);                                       \
			fputc('\n', stderr);                                                \
		}                                                                           \
	} while (0)

#define PIN_SIZE(T, n) CHECK(sizeof(T) == (n), "sizeof(" #T ") = %zu, format says %d", sizeof(T), (int)(n))
#define PIN_OFF(T, f, off, size)                                                            \
	do {                                                                                \
		CHECK(offsetof(T, f) == (off), #T "." #f " at %zu, format says %d",           \
		      offsetof(T, f), (int)(off));                                          \
		CHECK(sizeof(((T *)0)->f) == (size), #T "." #f " is %zu bytes, format says %d", \
		      sizeof(((T *)0)->f), (int)(size));                                    \
	} while (0)

static void pin_structs(void)
{
	PIN_SIZE(struct kr_pool_hdr, 256);
	PIN_OFF(struct kr_pool_hdr, magic, 0, 8);
	PIN_OFF(struct kr_pool_hdr, version, 8, 4);
	PIN_OFF(struct kr_pool_hdr, hdr_size, 12, 4);
	PIN_OFF(struct kr_pool_hdr, compat, 16, 4);
	PIN_OFF(struct kr_pool_hdr, incompat, 20, 4);
	PIN_OFF(struct kr_pool_hdr, ro_compat, 24, 4);
	PIN_OFF(struct kr_pool_hdr, page_size, 28, 4);
	PIN_OFF(struct kr_pool_hdr, uuid, 32, 16);
	PIN_OFF(struct kr_pool_hdr, pool_size, 48, 8);
	PIN_OFF(struct kr_pool_hdr, create_time, 56, 8);
	PIN_OFF(struct kr_pool_hdr, nlanes, 64, 4);
	PIN_OFF(struct kr_pool_hdr, lane_pages, 68, 4);
	PIN_OFF(struct kr_pool_hdr, lanes_off, 72, 8);
	PIN_OFF(struct kr_pool_hdr, lanes_replica_off, 80, 8);
	PIN_OFF(struct kr_pool_hdr, ctl_off, 88, 8);
	PIN_OFF(struct kr_pool_hdr, ctl_replica_off, 96, 8);
	PIN_OFF(struct kr_pool_hdr, heap_off, 104, 8);
	PIN_OFF(struct kr_pool_hdr, nzones, 112, 4);
	PIN_OFF(struct kr_pool_hdr, rows, 116, 4);
	PIN_OFF(struct kr_pool_hdr, row_pages, 120, 4);
	PIN_OFF(struct kr_pool_hdr, zone_meta_pages, 124, 4);
	PIN_OFF(struct kr_pool_hdr, chunk_pages, 128, 4);
	PIN_OFF(struct kr_pool_hdr, chunks_per_zone, 132, 4);
	PIN_OFF(struct kr_pool_hdr, zone_size, 136, 8);
	PIN_OFF(struct kr_pool_hdr, reserved, 144, 108);
	PIN_OFF(struct kr_pool_hdr, crc, 252, 4);

	PIN_SIZE(struct kr_root_line, 64);
	PIN_OFF(struct kr_root_line, root_oid, 0, 8);
	PIN_OFF(struct kr_root_line, root_size, 8, 8);
	PIN_OFF(struct kr_root_line, reserved, 16, 44);
	PIN_OFF(struct kr_root_line, crc, 60, 4);

	PIN_SIZE(struct kr_log_line, 64);
	PIN_OFF(struct kr_log_line, durable_word, 0, 8);
	PIN_OFF(struct kr_log_line, clean, 8, 8);
	PIN_OFF(struct kr_log_line, fresh_word, 16, 8);
	PIN_OFF(struct kr_log_line, reserved, 24, 40);

	PIN_SIZE(struct kr_log_cacheline, 64);
	PIN_OFF(struct kr_log_cacheline, header, 0, 8);
	PIN_OFF(struct kr_log_cacheline, payload, 8, 56);

	PIN_SIZE(struct kr_tx_first, 24);
	PIN_OFF(struct kr_tx_first, nlines, 0, 4);
	PIN_OFF(struct kr_tx_first, nrecords, 4, 4);
	PIN_OFF(struct kr_tx_first, crc, 8, 4);
	PIN_OFF(struct kr_tx_first, flags, 12, 4);
	PIN_OFF(struct kr_tx_first, seq, 16, 8);

	PIN_SIZE(struct kr_rec_hdr, 16);
	PIN_OFF(struct kr_rec_hdr, kind, 0, 2);
	PIN_OFF(struct kr_rec_hdr, reserved, 2, 2);
	PIN_OFF(struct kr_rec_hdr, len, 4, 4);
	PIN_OFF(struct kr_rec_hdr, off, 8, 8);

	PIN_SIZE(struct kr_rec_spill, 16);
	PIN_OFF(struct kr_rec_spill, nlines, 0, 8);
	PIN_OFF(struct kr_rec_spill, replica_off, 8, 8);
	PIN_SIZE(struct kr_rec_fresh, 24);
	PIN_OFF(struct kr_rec_fresh, hdr, 0, 16);
	PIN_OFF(struct kr_rec_fresh, payload_crc64, 16, 8);

	PIN_SIZE(struct kr_chunk_meta, 144);
	PIN_OFF(struct kr_chunk_meta, word, 0, 8);
	PIN_OFF(struct kr_chunk_meta, bitmap, 8, 128);
	PIN_OFF(struct kr_chunk_meta, crc, 136, 4);
	PIN_OFF(struct kr_chunk_meta, reserved, 140, 4);

	PIN_SIZE(struct kr_obj_hdr, 16);
	PIN_OFF(struct kr_obj_hdr, size, 0, 8);
	PIN_OFF(struct kr_obj_hdr, type, 8, 4);
	PIN_OFF(struct kr_obj_hdr, crc, 12, 4);
}

static void pin_constants(void)
{
	CHECK(KR_PAGE_SIZE == 4096 && KR_LINE_SIZE == 64, "page/line size");
	CHECK(sizeof(KR_MAGIC) == 8 && memcmp(KR_MAGIC, "KERATIN\0", 8) == 0, "magic");
	CHECK(KR_FORMAT_VERSION == 1, "format version %u", KR_FORMAT_VERSION);
	CHECK(KR_CLEAN_MAGIC == 0x4e41454c43524bull, "clean magic %#llx",
	      (unsigned long long)KR_CLEAN_MAGIC);
	CHECK(KR_DURABLE_SEQ_MASK == 0xffffffffffffull && KR_DURABLE_CHECK_SHIFT == 48,
	      "durable word split");
	CHECK(KR_CTL_ROOT_LINE == 0 && KR_CTL_LOG_LINE == 1, "control page lines");
	CHECK(KR_LINE_PAYLOAD == 56, "line payload");
	CHECK(KR_LINE_KIND_MASK == 3 && KR_LINE_FIRST == 1 && KR_LINE_CONT == 2, "line kinds");
	CHECK(KR_LINE_INDEX_SHIFT == 2 && KR_LINE_INDEX_MASK == 0x3fff, "line index field");
	CHECK(KR_LINE_SEQ_SHIFT == 16 && KR_LINE_SEQ_MASK == 0xffffffffffffull, "line seq field");
	CHECK(KR_TX_MAX_LINES == 16384, "max lines per transaction");
	CHECK(KR_REC_DATA == 1 && KR_REC_SETBITS == 2 && KR_REC_CLRBITS == 3 && KR_REC_FRESH == 4 &&
		      KR_REC_INTENT == 5 && KR_REC_SPILL == 6 && KR_REC_CANCEL == 7 && KR_TXF_INTENT == 1 &&
		      KR_SEG_MAX_LINES == 1ull << 20,
	      "record kinds");
	CHECK(KR_CHUNK_FREE == 0 && KR_CHUNK_RUN == 1 && KR_CHUNK_LARGE == 2, "chunk types");
	CHECK(KR_FEAT_RO_META_CSUM == 1 && KR_FEAT_RO_OBJ_CSUM == 2 && KR_FEAT_RO_PARITY == 4 &&
		      KR_FEAT_RO_LOG_REPLICA == 8 && KR_FEAT_RO_FRESH == 0x10,
	      "ro_compat feature bits");
	CHECK(KR_CHUNK_WORD_RUN(5) == 0x501 && KR_CHUNK_TYPE(0x501ull) == KR_CHUNK_RUN &&
		      KR_CHUNK_CLASS(0x501ull) == 5,
	      "run chunk word");
	CHECK(KR_CHUNK_WORD_LARGE(3) == 0x300000002ull && KR_CHUNK_NCHUNKS(0x300000002ull) == 3,
	      "large chunk word");
	CHECK(KR_CHUNK_PAGES == 8 && KR_CHUNK_SIZE == 32768 && KR_MIN_BLOCK == 32 &&
		      KR_RUN_BITMAP_BYTES == 128,
	      "chunk geometry");
	static const uint32_t v1_classes[] = {
		32,   48,   64,   80,   96,   128,  160,  192,  256,   320,   384,   512,   640,  768,
		1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 16384,
	};
	size_t nv1 = sizeof(v1_classes) / sizeof(v1_classes[0]);
	CHECK(KR_NCLASSES >= nv1, "size classes removed (%d < %zu)", KR_NCLASSES, nv1);
	for (size_t i = 0; i < nv1 && i < KR_NCLASSES; i++)
		CHECK(kr_size_classes[i] == v1_classes[i], "size class %zu changed: %u (v1: %u)", i,
		      kr_size_classes[i], v1_classes[i]);
	static const uint32_t fine_classes[] = {
		32,   48,   64,   80,   96,   112,  128,  160,  192,  224,  256,   288,  320,  384,
		448,  512,  576,  640,  768,  896,  1024, 1168, 1248, 1360, 1488,  1632, 1808, 2048,
		2336, 2512, 2720, 2976, 3264, 3632, 4096, 4672, 5456, 6544, 8192, 10912, 16384,
	};
	size_t nfine = sizeof(fine_classes) / sizeof(fine_classes[0]);
	CHECK(KR_NCLASSES_FINE >= nfine && KR_MAX_NCLASSES >= KR_NCLASSES_FINE &&
		      KR_MAX_NCLASSES >= KR_NCLASSES,
	      "fine size classes removed (%d < %zu)", KR_NCLASSES_FINE, nfine);
	for (size_t i = 0; i < nfine && i < KR_NCLASSES_FINE; i++)
		CHECK(kr_size_classes_fine[i] == fine_classes[i], "fine size class %zu changed: %u (was %u)",
		      i, kr_size_classes_fine[i], fine_classes[i]);
	CHECK(KR_FEAT_INCOMPAT_FINE_CLASSES == 1 && KR_FEAT_INCOMPAT_LOG_SPILL == 2, "incompat feature bits");
	for (int fine = 0; fine < 2; fine++) {
		unsigned n;
		const uint32_t *t = kr_class_table(fine ? KR_FEAT_INCOMPAT_FINE_CLASSES : 0, &n);
		CHECK(t == (fine ? kr_size_classes_fine : kr_size_classes), "class table of incompat");
		for (size_t i = 0; i < n; i++) {
			CHECK(t[i] % 16 == 0, "class %zu not 16-byte aligned", i);
			CHECK(i == 0 || t[i] > t[i - 1], "classes not increasing");
			CHECK(KR_CHUNK_SIZE / t[i] <= KR_RUN_BITMAP_BYTES * 8,
			      "class %zu has more blocks than bitmap bits", i);
			/* Above 1 KiB the fine table has the largest block for its count a chunk. */
			CHECK(!fine || t[i] <= 1024 ||
				      (KR_CHUNK_SIZE / t[i] > KR_CHUNK_SIZE / (t[i] + 16)),
			      "fine class %u could be 16 bytes larger for the same blocks a chunk", t[i]);
		}
	}
	CHECK(KR_MIN_POOL_SIZE == 8ull << 20 && KR_MAX_POOL_SIZE == 1ull << 46, "pool size range");
	CHECK(KR_MIN_LANE_PAGES == 4 && KR_MAX_LANE_PAGES == 256, "lane size range");
	CHECK(tu_crc32c("123456789", 9) == 0xe3069283u, "CRC-32C check value");
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static uint16_t durable_check(uint64_t seq)
{
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(seq >> (8 * i));
	return (uint16_t)tu_crc32c(le, 8);
}

static void check_ctl_page(const uint8_t *page, const char *which, kr_oid root, uint64_t root_size)
{
	const struct kr_root_line *rl = (const void *)(page + KR_CTL_ROOT_LINE * KR_LINE_SIZE);
	const struct kr_log_line *ll = (const void *)(page + KR_CTL_LOG_LINE * KR_LINE_SIZE);
	CHECK(rl->root_oid == root && rl->root_size == root_size,
	      "%s root line {%#llx, %llu}, expected {%#llx, %llu}", which,
	      (unsigned long long)rl->root_oid, (unsigned long long)rl->root_size,
	      (unsigned long long)root, (unsigned long long)root_size);
	CHECK(all_zero(rl->reserved, sizeof(rl->reserved)), "%s root line reserved bytes", which);
	CHECK(rl->crc == tu_crc32c(rl, offsetof(struct kr_root_line, crc)),
	      "%s root line crc %#x", which, rl->crc);
	CHECK(ll->clean == KR_CLEAN_MAGIC, "%s log line clean = %#llx after close", which,
	      (unsigned long long)ll->clean);
	uint64_t seq = ll->durable_word & KR_DURABLE_SEQ_MASK;
	CHECK((ll->durable_word >> KR_DURABLE_CHECK_SHIFT) == durable_check(seq),
	      "%s durable_word %#llx: check bits do not match durable_seq %llu", which,
	      (unsigned long long)ll->durable_word, (unsigned long long)seq);
	CHECK(seq >= 1, "%s durable_seq is 0 after committed transactions", which);
	/* The root's run took chunk 0 alone: the frontier F is 1, stored as F + 1. */
	CHECK(ll->fresh_word == 2, "%s fresh_word %llu after close, expected 2", which,
	      (unsigned long long)ll->fresh_word);
	CHECK(all_zero(ll->reserved, sizeof(ll->reserved)), "%s log line reserved bytes", which);
	CHECK(all_zero(page + 2 * KR_LINE_SIZE, KR_PAGE_SIZE - 2 * KR_LINE_SIZE),
	      "%s: rest of the control page not zero", which);
}

/* Raw checks of a cleanly closed pool holding only a root object. */
static void check_fresh_pool(const char *path, const struct kr_pool_stat *st, kr_oid root,
			     uint64_t root_size, time_t t_before, time_t t_after)
{
	size_t len;
	uint8_t *f = tu_read_file(path, &len);
	const struct kr_pool_hdr *h = (const void *)f;
	CHECK(len == st->pool_size, "file is %zu bytes, pool_size %llu", len,
	      (unsigned long long)st->pool_size);
	if (len < st->pool_size || len < 4 * KR_PAGE_SIZE) {
		free(f);
		return;
	}
	const struct kr_pool_hdr *hb = (const void *)(f + h->pool_size - KR_PAGE_SIZE);
	CHECK(memcmp(h, hb, sizeof(*h)) == 0, "header copies A and B differ");
	CHECK(all_zero(f + sizeof(*h), KR_PAGE_SIZE - sizeof(*h)), "header page tail not zero");
	CHECK(memcmp(h->magic, KR_MAGIC, 8) == 0, "magic");
	CHECK(h->version == KR_FORMAT_VERSION, "version %u", h->version);
	CHECK(h->hdr_size == 256, "hdr_size %u", h->hdr_size);
	CHECK(h->compat == 0 && h->incompat == (KR_FEAT_INCOMPAT_FINE_CLASSES | KR_FEAT_INCOMPAT_LOG_SPILL |
						 KR_FEAT_INCOMPAT_STALE_MAP),
	      "compat/incompat bits %#x/%#x (want 0/FINE_CLASSES|LOG_SPILL|STALE_MAP)", h->compat,
	      h->incompat);
	/* A new pool keeps every kind of redundancy this build knows. */
	CHECK(h->ro_compat == 0x1f, /* every bit: META_CSUM | OBJ_CSUM | PARITY | LOG_REPLICA | FRESH */
	      "ro_compat 0x%x", h->ro_compat);
	CHECK(h->page_size == KR_PAGE_SIZE, "page_size %u", h->page_size);
	CHECK(memcmp(h->uuid, st->uuid, 16) == 0, "uuid differs from kr_pool_stat");
	CHECK(!all_zero(h->uuid, 16), "uuid is zero");
	CHECK(h->pool_size == st->pool_size, "pool_size");
	CHECK(h->create_time >= (uint64_t)t_before - 1 && h->create_time <= (uint64_t)t_after + 1,
	      "create_time %llu outside [%lld, %lld]", (unsigned long long)h->create_time,
	      (long long)t_before, (long long)t_after);
	CHECK(h->nlanes == st->nlanes, "nlanes %u vs stat %u", h->nlanes, st->nlanes);
	CHECK((uint64_t)h->lane_pages * KR_PAGE_SIZE == st->lane_size, "lane size");
	CHECK(h->ctl_off == KR_PAGE_SIZE, "ctl_off %#llx", (unsigned long long)h->ctl_off);
	CHECK(h->lanes_off == 2 * KR_PAGE_SIZE, "lanes_off %#llx", (unsigned long long)h->lanes_off);
	CHECK(h->heap_off == h->lanes_off + (uint64_t)h->nlanes * h->lane_pages * KR_PAGE_SIZE,
	      "heap_off %#llx does not follow the lanes", (unsigned long long)h->heap_off);
	CHECK(h->lanes_replica_off >= h->heap_off + h->nzones * h->zone_size,
	      "replica lanes overlap the heap");
	CHECK(h->lanes_replica_off + (uint64_t)h->nlanes * h->lane_pages * KR_PAGE_SIZE <=
		      h->ctl_replica_off,
	      "replica lanes overlap control page B");
	CHECK(h->lanes_replica_off - h->lanes_off >= KR_MIN_REPLICA_DISTANCE,
	      "replica too close to the primary lanes");
	CHECK(h->ctl_replica_off == h->pool_size - 2 * KR_PAGE_SIZE, "ctl_replica_off");
	CHECK(h->heap_off % KR_PAGE_SIZE == 0 && h->lanes_replica_off % KR_PAGE_SIZE == 0,
	      "regions not page aligned");
	CHECK(h->nzones == st->nzones && h->rows == st->rows, "nzones/rows vs stat");
	CHECK((uint64_t)h->row_pages * KR_PAGE_SIZE == st->row_size, "row size vs stat");
	CHECK(h->zone_size == (uint64_t)(h->rows + 1) * h->row_pages * KR_PAGE_SIZE &&
		      h->zone_size == st->zone_size,
	      "zone_size %llu", (unsigned long long)h->zone_size);
	CHECK(h->chunk_pages == KR_CHUNK_PAGES, "chunk_pages %u", h->chunk_pages);
	CHECK((uint64_t)h->zone_meta_pages + (uint64_t)h->chunks_per_zone * h->chunk_pages <=
		      (uint64_t)h->rows * h->row_pages,
	      "zone metadata + chunks exceed the data rows");
	CHECK((uint64_t)h->zone_meta_pages * KR_PAGE_SIZE >=
		      (uint64_t)h->chunks_per_zone * sizeof(struct kr_chunk_meta),
	      "zone metadata too small for its chunk records");
	CHECK(all_zero(h->reserved, sizeof(h->reserved)), "reserved header bytes");
	CHECK(h->crc == tu_crc32c(h, 252), "header crc %#x, computed %#x", h->crc,
	      tu_crc32c(h, 252));
	CHECK(st->heap_size == (uint64_t)h->nzones * h->rows * h->row_pages * KR_PAGE_SIZE,
	      "stat heap_size");
	CHECK(st->parity_bytes == (uint64_t)h->nzones * h->row_pages * KR_PAGE_SIZE,
	      "stat parity_bytes");
	CHECK(st->heap_size + st->parity_bytes < st->pool_size &&
		      st->meta_bytes >= 4 * KR_PAGE_SIZE + 2ull * h->nlanes * h->lane_pages *
								   KR_PAGE_SIZE,
	      "stat meta_bytes %llu", (unsigned long long)st->meta_bytes);

	check_ctl_page(f + h->ctl_off, "control page A", root, root_size);
	check_ctl_page(f + h->ctl_replica_off, "control page B", root, root_size);
	CHECK(memcmp(f + h->ctl_off, f + h->ctl_replica_off, KR_PAGE_SIZE) == 0,
	      "control pages A and B differ");

	/* Zone 0 must hold the root and nothing else: one chunk record, a run of the root's
	 * class with one bit set, whose block is the root's, with the object header in front.
	 * Without the META_CSUM feature the record CRCs are zero; reserved bytes always are. */
	const struct kr_chunk_meta *recs = (const void *)(f + h->heap_off);
	uint64_t block = root_size + sizeof(struct kr_obj_hdr);
	unsigned cls = 0, ncls;
	const uint32_t *classes = kr_class_table(h->incompat, &ncls);
	while (cls < ncls && classes[cls] < block)
		cls++;
	unsigned runs = 0;
	CHECK(all_zero(f + h->heap_off + (uint64_t)h->chunks_per_zone * sizeof(*recs),
		       (uint64_t)h->zone_meta_pages * KR_PAGE_SIZE -
			       (uint64_t)h->chunks_per_zone * sizeof(*recs)),
	      "zone metadata after the chunk records is not zero");
	for (uint32_t c = 0; c < h->chunks_per_zone; c++) {
		const struct kr_chunk_meta *r = &recs[c];
		CHECK(r->reserved == 0, "chunk record %u reserved %#x", c, r->reserved);
		if (!(h->ro_compat & KR_FEAT_RO_META_CSUM))
			CHECK(r->crc == 0, "chunk record %u crc %#x without META_CSUM", c, r->crc);
		if (r->word == 0) {
			CHECK(all_zero(r->bitmap, sizeof(r->bitmap)), "free chunk %u has bitmap bits", c);
			continue;
		}
		runs++;
		CHECK(r->word == KR_CHUNK_WORD_RUN(cls), "chunk %u word %#llx, expected a run of class %u",
		      c, (unsigned long long)r->word, cls);
		const uint8_t *bm = (const uint8_t *)r->bitmap;
		unsigned bits = 0, first = 0;
		for (unsigned b = 0; b < KR_RUN_BITMAP_BYTES * 8; b++)
			if (bm[b / 8] >> (b % 8) & 1)
				first = bits++ ? first : b;
		CHECK(bits == 1, "run chunk %u has %u blocks allocated, expected 1", c, bits);
		uint64_t hdr_off = h->heap_off + (uint64_t)h->zone_meta_pages * KR_PAGE_SIZE +
				   (uint64_t)c * KR_CHUNK_SIZE + (uint64_t)first * classes[cls];
		CHECK(hdr_off + sizeof(struct kr_obj_hdr) == root,
		      "bitmap says block at %#llx, root oid is %#llx", (unsigned long long)hdr_off,
		      (unsigned long long)root);
		const struct kr_obj_hdr *oh = (const void *)(f + hdr_off);
		CHECK(oh->size == root_size, "root object header size %llu",
		      (unsigned long long)oh->size);
	}
	CHECK(runs == 1, "%u chunks in use, expected 1", runs);
	free(f);
}

/* A FRESH record announces an object written home before the commit: its data is the
 * object's header, which applying the record writes at off, and the CRC-64 of its payload
 * (not checked: later transactions may legitimately have changed the payload). The pool
 * of this test never reuses a block, so the header at off must still be the record's. */
static void check_fresh_rec(const uint8_t *base, const struct kr_pool_hdr *h, const uint8_t *data,
			    uint64_t off)
{
	struct kr_rec_fresh fr;
	memcpy(&fr, data, sizeof(fr));
	CHECK(off >= h->heap_off && off < h->lanes_replica_off && off % 16 == 0,
	      "fresh record for a header at %#llx, outside the heap", (unsigned long long)off);
	CHECK(fr.hdr.size > 0 && fr.hdr.size < h->pool_size, "fresh record: object size %llu",
	      (unsigned long long)fr.hdr.size);
	if (off + sizeof(fr.hdr) <= h->pool_size)
		CHECK(memcmp(base + off, &fr.hdr, sizeof(fr.hdr)) == 0,
		      "fresh record header differs from the object header at %#llx",
		      (unsigned long long)off);
}

/* Finds, in the lanes of an open pool, a complete transaction with a DATA record writing
 * `want` at pool offset `off`; checks its structure and its replica. */
static void check_log(kr_pool *pool, uint64_t off, const uint8_t *want, uint32_t want_len)
{
	const uint8_t *base = kr_pool_base(pool);
	const struct kr_pool_hdr *h = (const void *)base;
	uint64_t lane_bytes = (uint64_t)h->lane_pages * KR_PAGE_SIZE, nl = lane_bytes / KR_LINE_SIZE;
	unsigned complete = 0, found = 0;
	uint8_t *stream = malloc(KR_TX_MAX_LINES * KR_LINE_PAYLOAD);
	TU_ASSERT(stream, "out of memory");

	for (uint32_t lane = 0; lane < h->nlanes; lane++) {
		const struct kr_log_cacheline *lines =
			(const void *)(base + h->lanes_off + lane * lane_bytes);
		const struct kr_log_cacheline *rep =
			(const void *)(base + h->lanes_replica_off + lane * lane_bytes);
		for (uint64_t i = 0; i < nl; i++) {
			uint64_t hw = lines[i].header;
			if ((hw & KR_LINE_KIND_MASK) != KR_LINE_FIRST)
				continue;
			uint64_t stamp = hw >> KR_LINE_SEQ_SHIFT;
			struct kr_tx_first first;
			memcpy(&first, lines[i].payload, sizeof(first));
			if (first.nlines == 0 || first.nlines > nl ||
			    ((hw >> KR_LINE_INDEX_SHIFT) & KR_LINE_INDEX_MASK) != 0)
				continue;
			bool whole = true;
			for (uint32_t k = 0; k < first.nlines && whole; k++) {
				uint64_t w = lines[(i + k) % nl].header;
				uint64_t kind = k == 0 ? KR_LINE_FIRST : KR_LINE_CONT;
				whole = (w & KR_LINE_KIND_MASK) == kind &&
					((w >> KR_LINE_INDEX_SHIFT) & KR_LINE_INDEX_MASK) == k &&
					(w >> KR_LINE_SEQ_SHIFT) == stamp;
				memcpy(stream + k * KR_LINE_PAYLOAD, lines[(i + k) % nl].payload,
				       KR_LINE_PAYLOAD);
			}
			if (!whole)
				continue; /* partly overwritten by later transactions */
			complete++;
			CHECK((first.seq & KR_LINE_SEQ_MASK) == stamp,
			      "lane %u line %llu: seq %llu, stamp %llu", lane, (unsigned long long)i,
			      (unsigned long long)first.seq, (unsigned long long)stamp);
			CHECK(first.flags == 0, "lane %u line %llu: flags %#x", lane,
			      (unsigned long long)i, first.flags);
			size_t slen = (size_t)first.nlines * KR_LINE_PAYLOAD;
			uint32_t crc = first.crc;
			memset(stream + offsetof(struct kr_tx_first, crc), 0, 4);
			CHECK(tu_crc32c(stream, slen) == crc, "lane %u tx seq %llu: payload crc %#x, computed %#x",
			      lane, (unsigned long long)first.seq, crc, tu_crc32c(stream, slen));
			/* records */
			size_t pos = sizeof(struct kr_tx_first);
			bool has_want = false;
			for (uint32_t r = 0; r < first.nrecords; r++) {
				struct kr_rec_hdr rh;
				if (pos + sizeof(rh) > slen) {
					CHECK(0, "tx seq %llu: record %u beyond its lines",
					      (unsigned long long)first.seq, r);
					break;
				}
				memcpy(&rh, stream + pos, sizeof(rh));
				CHECK(rh.kind >= KR_REC_DATA && rh.kind <= KR_REC_INTENT && rh.reserved == 0,
				      "tx seq %llu record %u: kind %u reserved %u",
				      (unsigned long long)first.seq, r, rh.kind, rh.reserved);
				CHECK(rh.kind != KR_REC_SETBITS || (rh.len == 8 && rh.off % 8 == 0),
				      "tx seq %llu record %u: setbits len %u off %#llx",
				      (unsigned long long)first.seq, r, rh.len, (unsigned long long)rh.off);
				CHECK(rh.kind != KR_REC_CLRBITS || (rh.len == 8 && rh.off % 8 == 0),
				      "tx seq %llu record %u: clrbits len %u off %#llx",
				      (unsigned long long)first.seq, r, rh.len, (unsigned long long)rh.off);
				CHECK(rh.kind != KR_REC_FRESH || rh.len == sizeof(struct kr_rec_fresh),
				      "tx seq %llu record %u: fresh record of %u bytes",
				      (unsigned long long)first.seq, r, rh.len);
				if (rh.kind == KR_REC_FRESH &&
				    pos + sizeof(rh) + sizeof(struct kr_rec_fresh) <= slen)
					check_fresh_rec(base, h, stream + pos + sizeof(rh), rh.off);
				CHECK(rh.off + rh.len <= h->pool_size, "record beyond the pool");
				pos += sizeof(rh);
				if (rh.kind == KR_REC_DATA && rh.off == off && rh.len == want_len &&
				    pos + rh.len <= slen && memcmp(stream + pos, want, want_len) == 0)
					has_want = true;
				pos += (rh.len + 7) & ~7u;
				CHECK(pos <= slen, "tx seq %llu record %u overruns the stream",
				      (unsigned long long)first.seq, r);
			}
			if (has_want) {
				found++;
				for (uint32_t k = 0; k < first.nlines; k++)
					CHECK(memcmp(&lines[(i + k) % nl], &rep[(i + k) % nl],
						     KR_LINE_SIZE) == 0,
					      "lane %u line %llu differs from its replica", lane,
					      (unsigned long long)((i + k) % nl));
			}
		}
	}
	CHECK(complete >= 1, "no complete transaction in any lane");
	CHECK(found == 1, "%u transactions carry the DATA record of the kr_update (expected 1)", found);
	free(stream);
}

int main(void)
{
	pin_structs();
	pin_constants();

	char path[128];
	kr_pool *pool;
	struct kr_pool_stat st;
	kr_oid root;
	const uint64_t root_size = 100;
	time_t t_before = time(NULL);
	tu_pool_path(path, sizeof(path), "layout");
	TU_OK(tu_create(path, 24ull << 20, 8, 3, 64, &pool));
	time_t t_after = time(NULL);
	TU_OK(kr_pool_stat(pool, &st));
	CHECK(st.pool_size == 24ull << 20, "pool_size %llu", (unsigned long long)st.pool_size);
	CHECK(st.mode == KR_MODE_EMULATED, "mode %d with KR_OPEN_FORCE_PMEM", (int)st.mode);
	CHECK(st.rows == 8 && st.nlanes == 3 && st.lane_size == 64 * 1024,
	      "geometry not as requested: rows %u nlanes %u lane_size %llu", st.rows, st.nlanes,
	      (unsigned long long)st.lane_size);
	TU_OK(kr_root(pool, root_size, &root));

	/* The redo log, while the pool is open. */
	uint8_t bytes[24];
	tu_fill(bytes, sizeof(bytes), 7);
	TU_OK(kr_update(pool, root, 8, bytes, sizeof(bytes)));
	check_log(pool, root + 8, bytes, sizeof(bytes));
	TU_OK(kr_pool_stat(pool, &st));
	TU_OK(kr_pool_close(pool));

	check_fresh_pool(path, &st, root, root_size, t_before, t_after);

	/* Default geometry is what layout.h says it is. */
	char path2[128];
	tu_pool_path(path2, sizeof(path2), "layout-default");
	TU_OK(tu_create(path2, 64ull << 20, 0, 0, 0, &pool));
	TU_OK(kr_pool_stat(pool, &st));
	CHECK(st.rows == KR_DEFAULT_ROWS && st.nlanes == KR_DEFAULT_NLANES &&
		      st.lane_size == KR_DEFAULT_LANE_PAGES * KR_PAGE_SIZE,
	      "defaults: rows %u nlanes %u lane_size %llu", st.rows, st.nlanes,
	      (unsigned long long)st.lane_size);
	TU_OK(kr_pool_close(pool));

	if (failures) {
		fprintf(stderr, "test_layout: %u checks failed\n", failures);
		return 1;
	}
	printf("test_layout: on-media format matches layout.h\n");
	TU_END_CHECK_ALL("test_layout");
	return 0;
}
