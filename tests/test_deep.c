/*
 * test_deep.c - the deep check (kr_pool_check_deep) catches what the ordinary check cannot.
 *
 * Each case writes damage into an open pool's mapping behind the library's back, and keeps
 * every piece of redundancy the ordinary pass judges consistent with it: the chunk record's
 * CRC is recomputed and the parity row patched with the XOR of the change. So kr_pool_check
 * must still say KR_OK (asserted: otherwise the case would prove nothing), while the deep
 * check must report KR_E_CORRUPT with at least one invariant violation. Undoing the damage
 * (the same patch again) must make the deep check sound again, which shows the finding was
 * the damage and not the pool. The cases:
 *   phantom_bit    a run bitmap bit set where no object was allocated
 *   leaked_extent  a free chunk record turned into a one-chunk extent nobody owns
 *   stray_stamp    a log line stamped above durable_seq (a line no commit wrote)
 *   replica_diff   one byte of a live log line's replica changed
 * The deep check must also leave every byte of the pool as it was (compared whole).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "redund.h"
#include "testutil.h"

#define P KR_PAGE_SIZE

struct fixture {
	char path[128];
	kr_pool *pool;
	char *base;
	struct kr_pool_hdr h;
};

/* Writes len bytes at pool offset off and XORs the change into the zone's parity row, as a
 * consistent (but wrong) writer would. Offsets outside the heap have no parity. */
static void poke(struct fixture *f, uint64_t off, const void *src, size_t len)
{
	const struct kr_pool_hdr *h = &f->h;
	uint64_t row = (uint64_t)h->row_pages * P;
	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;
		uint8_t delta = (uint8_t)(f->base[o] ^ ((const uint8_t *)src)[i]);
		f->base[o] = ((const char *)src)[i];
		if (o < h->heap_off || o >= h->heap_off + (uint64_t)h->nzones * h->zone_size)
			continue;
		uint64_t z = (o - h->heap_off) / h->zone_size;
		uint64_t zone = h->heap_off + z * h->zone_size;
		f->base[zone + h->rows * row + (o - zone) % row] ^= (char)delta;
	}
}

/* Sets a chunk record's word and bitmap word wi, and its CRC, all through poke(). */
static void poke_record(struct fixture *f, uint32_t chunk, uint64_t word, unsigned wi, uint64_t bits)
{
	uint64_t off = f->h.heap_off + (uint64_t)chunk * sizeof(struct kr_chunk_meta);
	struct kr_chunk_meta m;
	memcpy(&m, f->base + off, sizeof(m));
	m.word = word;
	m.bitmap[wi] = bits;
	m.crc = kr_redund_chunk_crc(&m);
	poke(f, off, &m, sizeof(m));
}

static const struct kr_chunk_meta *record(struct fixture *f, uint32_t chunk)
{
	return (const void *)(f->base + f->h.heap_off + (uint64_t)chunk * sizeof(struct kr_chunk_meta));
}

static void setup(struct fixture *f, const char *tag)
{
	tu_pool_path(f->path, sizeof(f->path), tag);
	TU_OK(tu_create(f->path, 16u << 20, 0, 0, 0, &f->pool));
	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(f->pool, &tx));
	for (int i = 0; i < 5; i++)
		TU_OK(kr_tx_alloc(tx, 100, 1, &oid));
	TU_OK(kr_tx_alloc(tx, 40000, 2, &oid));
	TU_OK(kr_tx_commit(tx));
	f->base = kr_pool_base(f->pool);
	memcpy(&f->h, f->base, sizeof(f->h));
	TU_DEEP_CHECK(f->pool, "before the damage");
}

/* The ordinary check passes, the deep one fails, and neither wrote a byte. */
static void expect_caught(struct fixture *f, const char *tag)
{
	size_t size = kr_pool_mapped_size(f->pool);
	char *before = malloc(size);
	TU_ASSERT(before, "no memory");
	memcpy(before, f->base, size);
	struct kr_check_report rep = {0};
	int rc = kr_pool_check(f->pool, 0, &rep);
	TU_ASSERT(rc == KR_OK, "%s: the ordinary check already fails (%d: %s), the case proves "
		  "nothing", tag, rc, kr_errmsg());
	struct kr_deep_report deep = KR_DEEP_REPORT_INIT;
	rc = kr_pool_check_deep(f->pool, &deep);
	TU_ASSERT(rc == KR_E_CORRUPT && deep.problems > 0, "%s: deep check returned %d with %llu "
		  "problems", tag, rc, (unsigned long long)deep.problems);
	TU_ASSERT(memcmp(before, f->base, size) == 0, "%s: the deep check changed the pool", tag);
	free(before);
	printf("%-14s ordinary check KR_OK, deep check caught %llu: %s\n", tag,
	       (unsigned long long)deep.problems, deep.first_problem);
}

static void undo_and_close(struct fixture *f, const char *tag)
{
	TU_DEEP_CHECK(f->pool, tag);
	TU_OK(kr_pool_close(f->pool));
	TU_DEEP_CHECK_FILE(f->path, tag);
}

static void phantom_bit(void)
{
	struct fixture f;
	setup(&f, "deep2-phantom");
	uint32_t chunk = 0;
	while (KR_CHUNK_TYPE(record(&f, chunk)->word) != KR_CHUNK_RUN)
		chunk++;
	uint64_t word = record(&f, chunk)->word, bits = record(&f, chunk)->bitmap[1];
	poke_record(&f, chunk, word, 1, bits | 1);
	expect_caught(&f, "phantom_bit");
	poke_record(&f, chunk, word, 1, bits);
	undo_and_close(&f, "phantom_bit undone");
}

static void leaked_extent(void)
{
	struct fixture f;
	setup(&f, "deep2-leak");
	uint32_t chunk = f.h.chunks_per_zone - 1; /* the last chunk of zone 0, free in a new pool */
	TU_ASSERT(record(&f, chunk)->word == 0, "chunk %u is not free", chunk);
	poke_record(&f, chunk, KR_CHUNK_WORD_LARGE(1), 0, 0);
	expect_caught(&f, "leaked_extent");
	poke_record(&f, chunk, 0, 0, 0);
	undo_and_close(&f, "leaked_extent undone");
}

static struct kr_log_cacheline *lane_line(struct fixture *f, int replica, uint32_t lane, uint32_t i)
{
	uint64_t off = (replica ? f->h.lanes_replica_off : f->h.lanes_off) +
		       (uint64_t)lane * f->h.lane_pages * P + (uint64_t)i * KR_LINE_SIZE;
	return (struct kr_log_cacheline *)(f->base + off);
}

static void stray_stamp(void)
{
	struct fixture f;
	setup(&f, "deep2-stamp");
	/* The last line of the last lane: no commit of this small test reaches it. */
	struct kr_log_cacheline *ln = lane_line(&f, 0, f.h.nlanes - 1, f.h.lane_pages * P / KR_LINE_SIZE - 1);
	TU_ASSERT(ln->header == 0, "the last log line was written");
	ln->header = KR_LINE_FIRST | (1000000ull << KR_LINE_SEQ_SHIFT);
	expect_caught(&f, "stray_stamp");
	ln->header = 0;
	undo_and_close(&f, "stray_stamp undone");
}

static void replica_diff(void)
{
	struct fixture f;
	setup(&f, "deep2-replica");
	if (!(f.h.ro_compat & KR_FEAT_RO_LOG_REPLICA)) {
		printf("replica_diff   SKIP: this protection level keeps no log replica\n");
		TU_OK(kr_pool_close(f.pool));
		return;
	}
	/* setup's commit, the newest transaction (highest stamp), is live in its lane: find
	 * its first line in the replica. */
	struct kr_log_cacheline *ln = NULL;
	for (uint32_t lane = 0; lane < f.h.nlanes; lane++)
		for (uint32_t i = 0; i < f.h.lane_pages * P / KR_LINE_SIZE; i++) {
			struct kr_log_cacheline *c = lane_line(&f, 1, lane, i);
			if ((c->header & KR_LINE_KIND_MASK) == KR_LINE_FIRST &&
			    (!ln || c->header >> KR_LINE_SEQ_SHIFT > ln->header >> KR_LINE_SEQ_SHIFT))
				ln = c;
		}
	TU_ASSERT(ln, "no committed line in the replica lanes");
	ln->payload[40] ^= 0x10;
	expect_caught(&f, "replica_diff");
	ln->payload[40] ^= 0x10;
	undo_and_close(&f, "replica_diff undone");
}

int main(void)
{
	phantom_bit();
	leaked_extent();
	stray_stamp();
	replica_diff();
	printf("deep checks run: %u\n", tu_deep_checks());
	return 0;
}
