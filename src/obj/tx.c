/*
 * tx.c - transactions: DRAM micro-buffers, redo images and the commit path.
 *
 * Design
 *
 *   The application never writes pool memory. kr_tx_add() gives it a DRAM micro-buffer
 *   that mirrors the whole object but holds only the ranges asked for (copied from the pool
 *   on first touch), so a transaction that changes 40 bytes of a 4 KiB object copies and
 *   logs 40 bytes, not 4 KiB (the cost that made Pangolin lose to libpmemobj on skiplist and
 *   rtree). kr_tx_get() completes the buffer on demand so that the whole object reads
 *   correctly with the transaction's own changes.
 *
 *   What a transaction reads from home is verified first. The first opening of an object
 *   checks its whole CRC; a large one that passed keeps block checksums in DRAM (vcache.c),
 *   so later openings check only the blocks of the ranges handed out, and the commit makes
 *   those checksums follow the bytes it wrote.
 *
 *   Objects allocated by the transaction are logged whole up to 1 KiB. Larger ones are not:
 *   their blocks are free until the commit, so their content is written home directly
 *   (non-temporal, or in place by the application) and fenced before the commit, and only
 *   the header and the allocation are redo records. Heap invariant 3 (heap.c) guarantees
 *   that no replayable older transaction writes those blocks. One left zero over a block
 *   that already holds zeros is not written at all: its header is the only record
 *   (fresh_mark_zeros).
 *
 *   A transaction's DRAM (its header, redo image and micro-buffers) outlives it: tx_end
 *   leaves it in a slot of the lane, where the lane's next transaction takes it up, so a
 *   steady stream of small transactions does not call malloc (test_costs pins the count).
 *
 *   Commit, top to bottom (kr_tx_commit):
 *     1. sticky error or damaged canary -> abort, nothing touched;
 *     2. fresh objects above 1 KiB written home, flushed and fenced, unless left zero over
 *        zeros;
 *     3. redo image: DATA records for every changed range of existing objects, allocator
 *        records for allocations and frees, the root lines if the root changed;
 *     4. kr_log_commit: log lines + replica + ONE fence = the commit point;
 *     5. kr_log_apply: records written home and flushed, no fence;
 *     6. DRAM allocator state and block checksums updated; deferred frees released; lane
 *        released.
 *   A transaction with large in-place ranges, or whose undo spilled out of its lane,
 *   commits at home instead of copying those ranges into the redo image (the section on
 *   large in-place transactions, below).
 *
 *   Invariants
 *   1. Nothing reaches the pool before step 2, so an abort at step 1 leaves it byte-for-byte
 *      unchanged (fresh blocks written in step 2 are free space if step 4 never happens).
 *   2. A micro-buffer's valid bytes are exactly its range set, unless it is full.
 *   3. Each thread has at most one open transaction per pool (tx_open_list).
 *   4. An error inside a transaction is sticky: later calls fail with it and commit aborts.
 */
#include <stdio.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csum.h"
#include "debug.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "invariant.h"
#include "lock.h"
#include "query.h"
#include "quiesce.h"
#include "redund.h"
#include "shadow.h"
#include "tx.h"
#include "vcache.h"

#define CANARY 0x6b6572617469ee5aull /* "keratin" + tag: a byte pattern no zero-fill hits */

struct range {
	uint64_t start, end;
};
/* shadow.h takes a buffer's ranges as (start, end) pairs of words. */
_Static_assert(sizeof(struct range) == 2 * sizeof(uint64_t), "struct range is two words");

struct mbuf {
	kr_oid oid;
	uint64_t size;
	uint8_t *buf;      /* size bytes + 8-byte canary; NULL for a freed object never opened
			    * and for a fresh one never handed out (zeros) */
	struct range *ranges;
	uint32_t nranges, cap;
	uint8_t full;      /* every byte of buf is valid */
	uint8_t fresh;     /* allocated by this transaction */
	uint8_t handed;    /* buf was handed to the application (a fresh one may hold more than zeros) */
	uint8_t freed;     /* freed by this transaction */
	uint8_t over_zeros; /* fresh, never handed out, and its payload's home already zeros */
	uint8_t log_whole;  /* fresh, and logged whole rather than written home (fresh_choose) */
	uint8_t by_block;  /* not verified whole: kr_tx_add verifies each range's blocks (vcache.h) */
	uint8_t in_place;  /* written in place (kr_tx_add_in_place): home holds the new bytes of
			    * the ranges, buf their old ones (a fresh object: its whole block's) */
	uint8_t swapped;   /* in place, and tx_swap_in_place has traded them: home old, buf new */
	uint8_t stored;    /* in place by kr_tx_add_stored: the stores came first, no undo */
	uint8_t home;      /* in place, committed at home (tx_home_write; a new object:
			    * tx_add_fresh): never swapped, no redo copy */
	uint8_t home_patched; /* fresh, home: parity reflects home's new bytes (tx_add_fresh) */
	uint32_t stored_crc; /* stored: the header CRC when the object was first declared */
	uint32_t crc_delta;  /* stored, crc_own: the checksum's patch for the declared ranges */
	uint8_t crc_whole;   /* stored, crc_own: no DRAM copy; the commit recomputes the checksum */
	uint8_t crc_own;     /* stored: the checksum is not patched from buf (kr_tx_add_stored) */
	uint32_t crc_base;   /* stored, crc_own: the header CRC the commit patched */
	uint32_t crc_at;     /* home: where its new checksum goes in the image (tx_home_crcs),
			      * 0 if it is stored in place (tx_home_undo) */
	uint8_t inflight;    /* in_place and on the pool's in-flight list (inext/iprev) */
	uint8_t lost;        /* a media error took stores of its ranges (kr_tx_inflight_rebuilt) */
	/* In flight: how many bytes of its ranges, in order (a new object: of its payload),
	 * home and parity agree on already, traded back (tx_swap_in_place) or patched into
	 * parity at home (mbuf_patch_home). A repair corrects only the bytes beyond. Moved by
	 * the buffer's thread alone, with atomic stores: read by its own fault handler, or by
	 * a repair on another thread while this one waits for a parity lock. */
	uint64_t settled;
	struct mbuf *inext, *iprev;
	uint32_t type;
	struct kr_block block;
	struct mbuf *next; /* all buffers of the transaction */
	struct mbuf *hnext; /* hash chain */
	struct mbuf *fnext; /* fresh: the transaction's next new object (kr_tx.fresh) */
	/* Kept from an earlier transaction on a recycled header (tx_recycle): a buffer of
	 * spare_cap bytes that mbuf_alloc_buf takes instead of asking malloc. */
	uint8_t *spare;
	size_t spare_cap;
};

/* What an ended transaction keeps for the next one on its lane: a few buffer headers, each
 * with a buffer of up to SPARE_BUF_MAX bytes, and a redo image of up to SPARE_IMG_MAX. Past
 * these, malloc's cost is small beside the transaction's own work, and a lane should not
 * hoard the memory of its largest transaction.
 *
 * Except for two large buffers, of up to SPARE_BIG_MAX bytes. A transaction that changes a
 * few words of a large object (a hash table's bucket array, through pmemobj_list_move) has
 * a buffer of the object's size of which it fills only those words' ranges; malloc gave
 * it from the top of the heap and free gave it back, a brk, page faults and a TLB
 * flush each time: 9 % of a run of hashmap_atomic inserts, whose table rebuilds move
 * entries between two such arrays. Kept, they cost address space, and memory only in the
 * pages that transactions wrote. */
#define SPARE_MBUFS 8
#define SPARE_BUF_MAX (4096 + 8)
#define SPARE_BIGS 2
#define SPARE_BIG_MAX (64u << 20)
#define SPARE_IMG_MAX (64 * 1024)

#define HASH_BITS 6 /* a transaction's first buckets (kr_tx.hash_small); more as it grows */

struct kr_tx {
	kr_pool *pool;
	struct kr_lane *lane;
	int err;
	char errmsg[256]; /* the first failure's message, repeated by later calls */
	struct mbuf *mbufs;
	/* Buffers by oid: 2^hash_bits chains, hash_small's until the transaction holds more
	 * than two buffers a chain, then a table eight times larger (mbuf_new). */
	struct mbuf **hash;
	struct mbuf *hash_small[1u << HASH_BITS];
	uint32_t hash_bits, nmbufs;
	struct mbuf *fresh; /* the buffers of objects allocated here, through fnext */
	struct kr_img img;
	uint8_t direct; /* fresh payloads were written home outside the log */
	uint64_t root_oid, root_size; /* root to publish at commit, or 0 */
	uint64_t undo_first; /* seq of the first undo entry (in-place writes), 0 if none */
	struct kr_block *segs; /* blocks of the spill segments (tx_spill_grow), reserved */
	uint32_t nsegs, segs_cap;
	uint8_t trusting;    /* kr_tx_trust: objects opened are not verified first */
	struct kr_tx *next_open;
	struct mbuf *spares; /* headers of ended buffers, for the next transaction (tx_recycle) */
	uint32_t nspares;
	struct {             /* ended buffers larger than SPARE_BUF_MAX (tx_recycle) */
		uint8_t *buf;
		size_t cap;
	} big[SPARE_BIGS];
};

/* The checksum stripes (crc_stripes): CRC_LINES lines of CRC_PER_LINE four-byte locks.
 * An object's line is chosen by its page, its lock in the line by its own offset. Objects
 * of one page thus share a line (a thread that works in its own pages keeps its lines in
 * its cache) but rarely a lock: two commits of different objects wait for each other
 * (for as long as a commit takes) 1 in CRC_PER_LINE times when the objects share a page,
 * 1 in CRC_LOCKS times otherwise. */
#define CRC_LINES 256
#define CRC_PER_LINE (64 / (int)sizeof(kr_lock))
#define CRC_LOCKS (CRC_LINES * CRC_PER_LINE)
_Static_assert(CRC_LINES == 256 && CRC_PER_LINE == 16, "crc_stripe takes 8 and 4 hash bits");

/* A set of stripes, as bits: `any` has bit w set when words[w] may be nonzero (words
 * without it are garbage), so an empty set costs nothing to make. */
struct crc_set {
	uint64_t any;
	uint64_t words[CRC_LOCKS / 64];
};
_Static_assert(CRC_LOCKS / 64 == 64, "one summary bit per word");
struct spare_slot {
	_Alignas(64) struct kr_tx *tx;
};

/* What the transactions of one pool share (pool->tx), made at open by kr_tx_shared_new. */
struct kr_tx_shared {
	/* Per lane, the last ended transaction with the DRAM it kept, or NULL; a slot belongs
	 * to whoever holds its lane. */
	struct spare_slot *spare;
	uint32_t nlanes;
	pthread_mutex_t root_lock; /* a commit that publishes a root */
	/* In-place writes: every transaction's in-place buffers not yet committed, with the
	 * bytes parity still reflects for them; and the stripes that serialise the checksum
	 * updates of one object by several transactions. */
	pthread_mutex_t inflight_lock;
	struct mbuf *inflight;
	_Alignas(64) kr_lock crc_locks[CRC_LOCKS];
	struct kr_vcache vcache; /* block checksums of large objects opened for writing */
	struct kr_shadow shadow; /* consistent copies of objects declared by kr_tx_add_stored */
	/* Pools with the stale map: per group of columns, the newest transaction that wrote
	 * there (kr_tx_group_writer); NULL otherwise. Noted only once something has asked
	 * (writers_on): a pool whose program never persists its own stores pays no shared
	 * store per commit. Every transaction before the first question counts as writing
	 * everywhere, as writers_floor: the newest sequence number handed out by then
	 * (UINT64_MAX while the first question is being answered). */
	_Atomic uint64_t *group_writer;
	uint64_t group_cols;
	_Alignas(64) _Atomic int writers_on; /* read by every commit, written once */
	_Atomic uint64_t writers_floor;
};

static _Thread_local struct kr_tx *tx_open_list;

/* ---------------------------------------------------------------------------------------
 * Sticky errors and lookup
 * ------------------------------------------------------------------------------------- */
static int tx_fail(struct kr_tx *tx, int err)
{
	if (!tx->err) {
		tx->err = err;
		snprintf(tx->errmsg, sizeof(tx->errmsg), "%s", kr_errmsg());
	}
	return err;
}

/* The transaction must be open on the calling thread. */
static int tx_owned(struct kr_tx *tx)
{
	if (!tx)
		return kr_err_set(KR_E_MISUSE_ARG, "transaction is NULL");
	for (struct kr_tx *t = tx_open_list; t; t = t->next_open)
		if (t == tx)
			return KR_OK;
	return kr_err_set(KR_E_MISUSE_THREAD,
			  "transaction is not open on this thread (ended, or another thread's)");
}

/* Every entry point: open on this thread, not failed, pool not failed (invariant 4). */
static int tx_usable(struct kr_tx *tx)
{
	int rc = tx_owned(tx);
	if (rc)
		return rc;
	if (tx->err)
		return kr_err_set(tx->err, "transaction already failed: %s", tx->errmsg);
	return kr_pool_usable(tx->pool);
}

static unsigned hash_oid(const struct kr_tx *tx, kr_oid oid)
{
	return (unsigned)(((oid >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - tx->hash_bits));
}

static struct mbuf *mbuf_find(struct kr_tx *tx, kr_oid oid)
{
	for (struct mbuf *m = tx->hash[hash_oid(tx, oid)]; m; m = m->hnext)
		if (m->oid == oid)
			return m;
	return NULL;
}

/* A transaction of many objects (PMDK's hashmap_tx adds every entry of its table in one)
 * gets eight times the chains; without memory it keeps the ones it has. */
static void hash_grow(struct kr_tx *tx)
{
	uint32_t bits = tx->hash_bits + 3;
	struct mbuf **t = kr_calloc((size_t)1 << bits, sizeof(*t));
	if (!t)
		return;
	if (tx->hash != tx->hash_small)
		free(tx->hash);
	tx->hash = t;
	tx->hash_bits = bits;
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		unsigned b = hash_oid(tx, m->oid);
		m->hnext = t[b];
		t[b] = m;
	}
}

static struct mbuf *mbuf_new(struct kr_tx *tx, kr_oid oid)
{
	struct mbuf *m = tx->spares;
	if (m) { /* a recycled header: its range array and spare buffer stay */
		tx->spares = m->next;
		tx->nspares--;
		*m = (struct mbuf){.ranges = m->ranges, .cap = m->cap, .spare = m->spare,
				   .spare_cap = m->spare_cap};
	} else if (!(m = kr_calloc(1, sizeof(*m)))) {
		kr_err_set(KR_E_NOMEM, "micro-buffer header");
		return NULL;
	}
	m->oid = oid;
	m->next = tx->mbufs;
	tx->mbufs = m;
	unsigned b = hash_oid(tx, oid);
	m->hnext = tx->hash[b];
	tx->hash[b] = m;
	if (++tx->nmbufs > 2u << tx->hash_bits)
		hash_grow(tx);
	return m;
}

/* The smallest kept large buffer of at least need bytes, or -1. */
static int big_spare(const struct kr_tx *tx, size_t need)
{
	int best = -1;
	for (int i = 0; i < SPARE_BIGS; i++)
		if (tx->big[i].buf && tx->big[i].cap >= need && (best < 0 || tx->big[i].cap < tx->big[best].cap))
			best = i;
	return best;
}

/* Allocates the DRAM mirror of the object with its trailing canary (in debug mode on pages
 * of its own, which outlive the transaction as a trap: debug.c). */
static int mbuf_alloc_buf(struct kr_tx *tx, struct mbuf *m, int zero)
{
	int b;
	if (__builtin_expect(tx->pool->debug != NULL, 0)) {
		m->buf = kr_debug_mbuf_alloc(m->size + 8, zero);
	} else if (m->spare && m->spare_cap >= m->size + 8) {
		m->buf = m->spare; /* spare_cap now says how large buf is */
		m->spare = NULL;
		if (zero)
			memset(m->buf, 0, m->size);
	} else if (!zero && m->size + 8 > SPARE_BUF_MAX && (b = big_spare(tx, m->size + 8)) >= 0) {
		/* (A new object's zeros come cheaper from calloc's fresh pages.) */
		free(m->spare);
		m->spare = NULL;
		m->buf = tx->big[b].buf;
		m->spare_cap = tx->big[b].cap;
		tx->big[b].buf = NULL;
		tx->big[b].cap = 0;
	} else {
		free(m->spare);
		m->spare = NULL;
		m->spare_cap = m->size + 8;
		m->buf = zero ? kr_calloc(1, m->size + 8) : kr_malloc(m->size + 8);
	}
	if (!m->buf)
		return kr_err_set(KR_E_NOMEM, "micro-buffer of %llu bytes", (unsigned long long)m->size);
	uint64_t c = CANARY;
	memcpy(m->buf + m->size, &c, 8);
	return KR_OK;
}

static int canary_ok(const struct mbuf *m)
{
	uint64_t c;
	memcpy(&c, m->buf + m->size, 8);
	return c == CANARY;
}

/* Whether a header's size fits its block: a damaged size must not stretch an object past it. */
static int header_fits(const struct kr_obj_hdr *hdr, const struct kr_block *b)
{
	return hdr->size != 0 && hdr->size <= b->bytes - sizeof(*hdr);
}

/* Reads a live object's header; a size that does not fit its block is corruption. */
static int object_header(kr_pool *pool, kr_oid oid, struct kr_block *b, const struct kr_obj_hdr **hp)
{
	int rc = kr_heap_lookup(&pool->heap, oid, b);
	if (__builtin_expect(pool->debug != NULL, 0) && rc == KR_E_MISUSE_FREED)
		kr_debug_freed_access(pool, oid);
	if (rc)
		return rc;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + b->off);
	if (!header_fits(hdr, b))
		return KR_CORRUPT(KR_E_CORRUPT_OBJECT, b->off, "object header size %llu in a %llu-byte block",
				  (unsigned long long)hdr->size, (unsigned long long)b->bytes);
	*hp = hdr;
	return KR_OK;
}

static int feat(const kr_pool *pool, unsigned f);

/* The payload of a live object against its header checksum, copied to copy on the way
 * unless copy is NULL. */
static int object_verify(kr_pool *pool, kr_oid oid, const struct kr_obj_hdr *hdr, uint8_t *copy)
{
	uint32_t got = kr_vcache_object_crc(&pool->tx->vcache, oid, hdr, (const uint8_t *)pool->pm.base + oid, copy);
	if (got == hdr->crc)
		return KR_OK;
	return KR_CORRUPT(KR_E_CORRUPT_OBJECT, oid, "object of %llu bytes: checksum 0x%08x, header says 0x%08x",
			  (unsigned long long)hdr->size, got, hdr->crc);
}

/* Verifies; on a mismatch tries an online repair from parity before giving up. With copy
 * (else both NULL), *copied says whether copy holds the verified payload (not after a
 * repair). */
static int object_verify_repair(kr_pool *pool, kr_oid oid, const struct kr_block *b, uint8_t *copy,
				int *copied)
{
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + b->off);
	int rc = object_verify(pool, oid, hdr, copy);
	if (copy)
		*copied = rc == KR_OK;
	if (rc == KR_OK || pool->repair_object(pool, b) != KR_OK)
		return rc; /* the message names the mismatch */
	return KR_OK;
}

/* The transaction's buffer for oid, created (without data) for a live object. verify: check
 * the object's checksum on creation (every caller but kr_tx_add_stored's, whose object has
 * the application's unlogged stores in it by definition: its patch is linear, so it keeps
 * the checksum right for the bytes it covers and damage elsewhere stays detectable). */
static struct mbuf *mbuf_get_ex(struct kr_tx *tx, kr_oid oid, int verify)
{
	struct mbuf *m = mbuf_find(tx, oid);
	if (m) {
		if (m->freed) {
			tx_fail(tx, kr_err_set(KR_E_MISUSE_FREED,
					       "object 0x%llx was freed in this transaction",
					       (unsigned long long)oid));
			return NULL;
		}
		if (!m->buf && mbuf_alloc_buf(tx, m, m->fresh) != KR_OK) {
			tx_fail(tx, KR_E_NOMEM);
			return NULL;
		}
		return m;
	}
	struct kr_block b;
	const struct kr_obj_hdr *hdr = NULL;
	int rc = object_header(tx->pool, oid, &b, &hdr);
	/* A damaged header is object damage: repair it from parity before giving up. */
	if (rc == KR_E_CORRUPT_OBJECT && tx->pool->repair_object(tx->pool, &b) == KR_OK)
		rc = object_header(tx->pool, oid, &b, &hdr);
	/* Debug mode: no other live transaction may have it open for write. */
	if (rc == KR_OK && __builtin_expect(tx->pool->debug != NULL, 0))
		rc = kr_debug_claim(tx->pool, oid, tx);
	if (rc) {
		tx_fail(tx, rc);
		return NULL;
	}
	if (!(m = mbuf_new(tx, oid))) {
		tx_fail(tx, KR_E_NOMEM);
		return NULL;
	}
	m->size = hdr->size;
	m->type = hdr->type;
	m->block = b;
	if (mbuf_alloc_buf(tx, m, 0) != KR_OK) {
		tx_fail(tx, KR_E_NOMEM);
		return NULL;
	}
	/* Opening for write verifies: a change must not be built on damaged bytes. A large
	 * object verified whole before has its blocks checked instead, as kr_tx_add hands
	 * them out (range_verify). A whole verification reads every byte anyway: it fills the
	 * buffer in the same pass. */
	if (verify && !tx->trusting && feat(tx->pool, KR_FEAT_RO_OBJ_CSUM)) {
		int copied = 0;
		if (kr_vcache_has(&tx->pool->tx->vcache, oid, m->size))
			m->by_block = 1;
		else if ((rc = object_verify_repair(tx->pool, oid, &b, m->buf, &copied))) {
			tx_fail(tx, rc);
			return NULL;
		}
		m->full = (uint8_t)copied;
	}
	return m;
}

static struct mbuf *mbuf_get(struct kr_tx *tx, kr_oid oid) { return mbuf_get_ex(tx, oid, 1); }

/* The buffer of an object the transaction opens for [off, off+len), which must lie inside
 * it (KR_E_MISUSE_RANGE, sticky, otherwise). */
static struct mbuf *mbuf_get_range(struct kr_tx *tx, kr_oid oid, size_t off, size_t len, int verify)
{
	struct mbuf *m = mbuf_get_ex(tx, oid, verify);
	if (m && (len == 0 || off > m->size || len > m->size - off)) {
		tx_fail(tx, kr_err_set(KR_E_MISUSE_RANGE,
				       "range [%zu, +%zu) beyond object 0x%llx of %llu bytes", off,
				       len, (unsigned long long)oid, (unsigned long long)m->size));
		return NULL;
	}
	return m;
}

/* ---------------------------------------------------------------------------------------
 * Range sets: sorted, disjoint, non-adjacent [start, end) intervals
 * ------------------------------------------------------------------------------------- */

/* Copies from the pool every byte of [s, e) not already in the buffer. */
static void mbuf_fill_gaps(kr_pool *pool, struct mbuf *m, uint64_t s, uint64_t e)
{
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	uint64_t pos = s;
	for (uint32_t i = 0; i < m->nranges && pos < e; i++) {
		const struct range *r = &m->ranges[i];
		if (r->end <= pos)
			continue;
		if (r->start >= e)
			break;
		if (r->start > pos)
			memcpy(m->buf + pos, home + pos, r->start - pos);
		pos = r->end;
	}
	if (pos < e)
		memcpy(m->buf + pos, home + pos, e - pos);
}

#ifdef KR_DEBUG_INVARIANTS
/* The range set names each valid byte once: ranges non-empty, inside the object, in order,
 * neither overlapping nor touching (range_add merges both). */
static int ranges_sound(const struct mbuf *m)
{
	for (uint32_t i = 0; i < m->nranges; i++)
		if (m->ranges[i].start >= m->ranges[i].end || m->ranges[i].end > m->size ||
		    (i && m->ranges[i - 1].end >= m->ranges[i].start))
			return 0;
	return 1;
}
#endif

static int range_add(struct mbuf *m, uint64_t s, uint64_t e)
{
	uint32_t i = 0, hi = m->nranges; /* the first range ending at or after s */
	while (i < hi) {
		uint32_t mid = (i + hi) / 2;
		if (m->ranges[mid].end < s)
			i = mid + 1;
		else
			hi = mid;
	}
	uint32_t j = i;
	while (j < m->nranges && m->ranges[j].start <= e) {
		if (m->ranges[j].start < s)
			s = m->ranges[j].start;
		if (m->ranges[j].end > e)
			e = m->ranges[j].end;
		j++;
	}
	if (i == j) { /* insert at i */
		if (KR_GROW(m->ranges, m->cap, m->nranges + 1u, 4))
			return kr_err_set(KR_E_NOMEM, "range set");
		memmove(&m->ranges[i + 1], &m->ranges[i], (m->nranges - i) * sizeof(*m->ranges));
		m->nranges++;
	} else { /* ranges i..j-1 collapse into one */
		memmove(&m->ranges[i + 1], &m->ranges[j], (m->nranges - j) * sizeof(*m->ranges));
		m->nranges -= j - i - 1;
	}
	m->ranges[i] = (struct range){s, e};
	KR_INVARIANT("tx.c", 2, ranges_sound(m));
	return KR_OK;
}

/* The bytes [s, e) a transaction is about to read from home, of an object opened by block:
 * its blocks against their DRAM checksums. The object's CRC decides a mismatch (the DRAM
 * state may be what is wrong): it is verified whole, and repaired if it can be. */
/* Whether [a, b) meets one of the buffer's ranges (sorted and disjoint: ranges_sound). */
static int ranges_meet(const struct mbuf *m, uint64_t a, uint64_t b)
{
	uint32_t lo = 0, hi = m->nranges;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (m->ranges[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->nranges && m->ranges[lo].start < b;
}

/* Whether the object's header checksum holds over what it was computed on while the
 * transaction writes it in place: home, with each named range's old bytes (the buffer)
 * in place of the new ones stored there. */
static int in_place_whole_holds(const kr_pool *pool, const struct mbuf *m)
{
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(home - sizeof(*hdr));
	uint32_t crc = kr_obj_crc_start(hdr);
	uint64_t at = 0;
	for (uint32_t i = 0; i < m->nranges; i++) {
		crc = kr_crc32c_extend(crc, home + at, m->ranges[i].start - at);
		crc = kr_crc32c_extend(crc, m->buf + m->ranges[i].start, m->ranges[i].end - m->ranges[i].start);
		at = m->ranges[i].end;
	}
	return kr_crc32c_extend(crc, home + at, m->size - at) == hdr->crc;
}

static int range_verify(kr_pool *pool, struct mbuf *m, uint64_t s, uint64_t e)
{
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	/* A block that meets the buffer's ranges was verified when they were named, before
	 * the application stored into them in place: checked again, those stores would look
	 * like damage, and the repair would put the old bytes back. */
	int ok = 1;
	for (uint64_t a = s / KR_VCACHE_BLOCK * KR_VCACHE_BLOCK; ok && a < e; a += KR_VCACHE_BLOCK) {
		uint64_t b = a + KR_VCACHE_BLOCK;
		if (!m->in_place || !ranges_meet(m, a, b))
			ok = kr_vcache_verify(&pool->tx->vcache, m->oid, m->size, home, a > s ? a : s,
					      b < e ? b : e);
	}
	if (ok)
		return KR_OK;
	/* The block checksums failed, or are gone: another thread's object took their slot
	 * of the cache, which a busy pool does at any moment. The object's own checksum
	 * decides, over the whole object, as below; once it holds, the object counts as
	 * verified for the rest of the transaction. */
	m->by_block = 0;
	if (m->in_place) {
		/* Stored ranges kept no old bytes to check the checksum against. */
		if (!m->stored && in_place_whole_holds(pool, m))
			return KR_OK;
		/* A repair of the whole object now would undo the stores made. Its block
		 * checksums go, so that the next opening verifies it whole, and repairs. */
		kr_vcache_drop(&pool->tx->vcache, m->oid, m->size);
		return kr_err_set(KR_E_CORRUPT, "object 0x%llx is damaged where it was not yet "
				  "written in place: the transaction aborts, and the next one to open "
				  "it repairs it", (unsigned long long)m->oid);
	}
	return object_verify_repair(pool, m->oid, &m->block, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Public API
 * ------------------------------------------------------------------------------------- */
int kr_tx_begin(kr_pool *pool, kr_tx **out)
{
	if (!pool || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_tx_begin: NULL argument");
	int rc = kr_pool_usable(pool);
	if (rc == KR_OK)
		rc = kr_pool_writable(pool, "kr_tx_begin");
	if (rc)
		return rc;
	for (struct kr_tx *t = tx_open_list; t; t = t->next_open)
		if (t->pool == pool)
			return kr_err_set(KR_E_MISUSE_STATE,
					  "this thread already has a transaction open on this pool");
	struct kr_lane *lane;
	if ((rc = kr_log_lane_acquire(&pool->log, &lane)))
		return rc;
	/* The lane's last transaction, if it left itself behind (tx_end): only the lane's
	 * holder touches its slot. */
	struct kr_tx *tx = pool->tx->spare[lane->idx].tx;
	if (tx) {
		pool->tx->spare[lane->idx].tx = NULL;
	} else if ((tx = kr_calloc(1, sizeof(*tx)))) {
		kr_img_init(&tx->img);
		tx->hash = tx->hash_small;
		tx->hash_bits = HASH_BITS;
	} else {
		kr_log_lane_release(&pool->log, lane);
		return kr_err_set(KR_E_NOMEM, "transaction");
	}
	tx->pool = pool;
	tx->lane = lane;
	tx->next_open = tx_open_list;
	tx_open_list = tx;
	*out = tx;
	return KR_OK;
}

/* Frees a buffer header that holds no buffer, with what it kept. */
static void mbuf_free(struct mbuf *m)
{
	free(m->spare);
	free(m->ranges);
	free(m);
}

/* Frees a transaction and everything it kept (tx_recycle). */
static void tx_free_all(struct kr_tx *tx)
{
	while (tx->spares) {
		struct mbuf *m = tx->spares;
		tx->spares = m->next;
		mbuf_free(m);
	}
	kr_img_free(&tx->img);
	free(tx->segs);
	for (int i = 0; i < SPARE_BIGS; i++)
		free(tx->big[i].buf);
	if (tx->hash != tx->hash_small)
		free(tx->hash);
	free(tx);
}

/* A large buffer at a transaction's end: kept in a free slot, or in place of a smaller
 * kept one (the larger serve more objects), or freed. */
static void keep_big(struct kr_tx *tx, uint8_t *buf, size_t cap)
{
	int slot = 0; /* the smallest kept one; an empty slot's cap is 0 */
	for (int i = 1; i < SPARE_BIGS; i++)
		if (tx->big[i].cap < tx->big[slot].cap)
			slot = i;
	if (cap > SPARE_BIG_MAX || tx->big[slot].cap >= cap) {
		free(buf);
		return;
	}
	free(tx->big[slot].buf);
	tx->big[slot].buf = buf;
	tx->big[slot].cap = cap;
}

/* An ended transaction, emptied to look like a new one, with the DRAM it allocated kept for
 * the next transaction on its lane: its header, its redo image's buffer and a few buffer
 * headers with their buffers. A small transaction then calls malloc not at all, where it
 * called it four to six times (measured on a 64-byte allocation: malloc and free were 12 %
 * of the time). Debug mode's buffers are never kept: they stay behind as traps (debug.c). */
static void tx_recycle(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	struct mbuf *m = tx->mbufs;
	int big = tx->hash != tx->hash_small;
	while (m) {
		struct mbuf *next = m->next;
		if (!big)
			tx->hash[hash_oid(tx, m->oid)] = NULL;
		if (__builtin_expect(pool->debug != NULL, 0) && m->buf)
			kr_debug_mbuf_retire(m->buf, m->size + 8, m->oid, m->size);
		else if (m->buf && m->spare_cap <= SPARE_BUF_MAX)
			m->spare = m->buf; /* mbuf_alloc_buf left spare NULL when it set buf */
		else if (m->buf)
			keep_big(tx, m->buf, m->spare_cap);
		m->buf = NULL;
		if (tx->nspares < SPARE_MBUFS) {
			m->next = tx->spares;
			tx->spares = m;
			tx->nspares++;
		} else {
			mbuf_free(m);
		}
		m = next;
	}
	tx->mbufs = NULL;
	tx->fresh = NULL;
	tx->nmbufs = 0;
	if (big) { /* a large transaction's table goes; the next one starts small */
		free(tx->hash);
		tx->hash = tx->hash_small;
		tx->hash_bits = HASH_BITS;
		memset(tx->hash_small, 0, sizeof(tx->hash_small)); /* stale since the growth */
	}
	if (tx->img.cap > SPARE_IMG_MAX)
		kr_img_free(&tx->img);
	else
		kr_img_reset(&tx->img);
	tx->err = 0;
	tx->direct = 0;
	tx->root_oid = tx->root_size = 0;
	tx->undo_first = 0;
	tx->trusting = 0;
}

/* ---------------------------------------------------------------------------------------
 * In-place writes (kr_tx_add_in_place, kr_tx_add_stored)
 *
 *   A program written for libpmemobj stores straight into the pool after naming the range
 *   (TX_ADD), and reads its own stores back from there. keratin keeps the commit path it
 *   has for micro-buffers and meets such a program at both ends:
 *     - when a range is named, its old bytes go to the micro-buffer and, in an undo entry,
 *       to the log (one fence, as libpmemobj's snapshot costs); the application gets the
 *       home address;
 *     - at commit the two trade places (tx_swap_in_place): the old bytes go back home
 *       (cached stores, not flushed) and the new ones into the buffer, and the ordinary
 *       commit follows: checksum and parity patched from old to new, one commit fence,
 *       the new bytes applied home (a large transaction commits at home: below);
 *     - at abort the old bytes are written back home, flushed and fenced.
 *   A crash before the commit fence finds the undo entries above durable_seq (log.c
 *   invariant 7) and replays them: the old bytes come back, and recovery recomputes parity
 *   over them. A new object written in place sits in a block that is free until the
 *   commit: its intent makes recovery recompute that block's parity, and its buffer keeps
 *   what the block held, for the parity patch.
 * ------------------------------------------------------------------------------------- */

static void settle(struct mbuf *m, uint64_t n)
{
	__atomic_store_n(&m->settled, m->settled + n, __ATOMIC_RELEASE);
}

/* Trades n bytes between home (new -> old) and m's buf (old -> new). Home through pm/. A
 * chunk's home bytes are read before anything of it is written, so a fault there (a lost
 * page) finds the chunks before it settled and the rest not. */
static void swap_bytes(struct kr_pm *pm, struct mbuf *m, uint64_t off, size_t n)
{
	uint8_t tmp[512];
	uint8_t *home = (uint8_t *)pm->base + m->oid + off, *buf = m->buf + off;
	while (n) {
		size_t k = n < sizeof(tmp) ? n : sizeof(tmp);
		memcpy(tmp, home, k);
		kr_pm_copy(pm, home, buf, k);
		memcpy(buf, tmp, k);
		settle(m, k);
		home += k;
		buf += k;
		n -= k;
	}
}

/* This thread holds inflight_lock. The media fault handler (kr_tx_inflight_rebuilt) may run
 * on a thread that faulted while holding it (reading home under the lock): it then walks
 * the list, consistent at any instruction that reads the pool, without locking again. */
static _Thread_local volatile sig_atomic_t inflight_mine;

static void inflight_lock(kr_pool *pool)
{
	pthread_mutex_lock(&pool->tx->inflight_lock);
	inflight_mine = 1;
}

static void inflight_unlock(kr_pool *pool)
{
	inflight_mine = 0;
	pthread_mutex_unlock(&pool->tx->inflight_lock);
}

/* Reads one byte of every page of home's [p, p+len) before the caller takes the in-flight
 * list to read them: a lost page faults here, with the list free for the repair, and not
 * under it, where a repair another thread started on the same page would wait for the list
 * while this thread's handler waits for that repair (inflight_try_hold). A page the kernel
 * knows is bad, or emulated poison, faults on any byte; a latent bad line of real media
 * only where it is read (docs/DESIGN.md says what that leaves). */
static void home_touch(const uint8_t *p, size_t len)
{
	if (!len)
		return;
	/* A byte of the range in each page: the page's first byte may be another object's,
	 * which another thread's commit may be writing (a data race, TSan says). */
	for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + len; a = (a & ~(uintptr_t)(KR_PAGE_SIZE - 1)) + KR_PAGE_SIZE)
		(void)*(const volatile uint8_t *)a;
}

/* swapped is read by other transactions under inflight_lock (tx_add_stored_crc): set there. */
static void set_swapped(kr_pool *pool, struct mbuf *m, uint8_t v)
{
	inflight_lock(pool);
	m->swapped = v;
	inflight_unlock(pool);
}

static void tx_swap_in_place(struct kr_tx *tx)
{
	struct kr_pm *pm = &tx->pool->pm;
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		if (!m->in_place || m->swapped || m->freed || m->home)
			continue;
		if (m->fresh)
			swap_bytes(pm, m, 0, m->size);
		for (uint32_t i = 0; !m->fresh && i < m->nranges; i++)
			swap_bytes(pm, m, m->ranges[i].start, m->ranges[i].end - m->ranges[i].start);
		set_swapped(tx->pool, m, 1);
	}
}

static void restore_range(struct kr_pm *pm, uint8_t *home, const uint8_t *old, size_t n, int copy)
{
	if (copy)
		kr_pm_copy(pm, home, old, n);
	kr_pm_flush(pm, home, n);
}

/* The old bytes of an in-place buffer back home (swapped: they are there already), flushed,
 * not fenced. Inside the commit gate: home bytes do not move under a repair. */
static void mbuf_restore_home(struct kr_tx *tx, struct mbuf *m)
{
	struct kr_pm *pm = &tx->pool->pm;
	uint8_t *home = (uint8_t *)pm->base + m->oid;
	kr_log_enter(&tx->pool->log, tx->lane);
	if (m->fresh)
		restore_range(pm, home, m->buf, m->size, !m->swapped);
	for (uint32_t i = 0; !m->fresh && i < m->nranges; i++) {
		const struct range *r = &m->ranges[i];
		restore_range(pm, home + r->start, m->buf + r->start, r->end - r->start, !m->swapped);
	}
	kr_log_exit(&tx->pool->log, tx->lane);
	set_swapped(tx->pool, m, 1);
}

/* Abort: every in-place range gets its old bytes back, durably, before the lane lets its
 * undo entries go (invariant 7 of log.c). A declared range keeps the application's bytes
 * (they were never the transaction's to take back): traded already, they go home again. */
static void tx_undo_in_place(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		if (!m->in_place || m->freed)
			continue;
		if (m->home_patched) {
			/* Home and parity agree on the new bytes (tx_add_fresh), the block is free
			 * again: the old bytes would only disagree with its parity. */
			continue;
		} else if (!m->stored) {
			mbuf_restore_home(tx, m);
		} else if (m->swapped) {
			set_swapped(pool, m, 0);
			mbuf_restore_home(tx, m);
		}
	}
	if (tx->undo_first) {
		kr_log_flush_applies(&pool->log, tx->lane); /* an abort's CANCEL may follow */
		int rc = kr_pm_fence(&pool->pm);
		if (rc)
			kr_pool_fail(pool, rc);
	}
}

/* The pool's in-flight in-place buffers (kr_pool.inflight, under inflight_lock). A
 * reconstruction from parity must not take another transaction's in-place stores, not yet
 * in parity, for bytes parity reflects: it reads their buffers' old bytes instead. A buffer
 * joins when it first becomes in place and leaves inside the commit gate, as its object's
 * checksum becomes the new one: a traded buffer at the end of its transaction, a home
 * commit's when its checksum is written (tx_home_write, or the apply of its last entry:
 * tx_home_leave). Until then a reconstruction, which holds commits still, corrects only
 * the bytes not settled yet (mbuf.settled). Changes to a listed buffer's ranges and bytes
 * are made under the lock. */
static void inflight_join(kr_pool *pool, struct mbuf *m)
{
	if (m->inflight)
		return;
	m->iprev = NULL;
	m->inext = pool->tx->inflight;
	if (pool->tx->inflight)
		pool->tx->inflight->iprev = m;
	pool->tx->inflight = m;
	m->inflight = 1;
}

/* Caller holds inflight_lock. */
static void inflight_leave(kr_pool *pool, struct mbuf *m)
{
	if (!m->inflight)
		return;
	if (m->iprev)
		m->iprev->inext = m->inext;
	else
		pool->tx->inflight = m->inext;
	if (m->inext)
		m->inext->iprev = m->iprev;
	m->inflight = 0;
}

void kr_tx_inflight_hold(kr_pool *pool) { inflight_lock(pool); }

void kr_tx_inflight_release(kr_pool *pool) { inflight_unlock(pool); }

/* Calls fn for the page column of every data page of an in-flight buffer's block, until it
 * returns nonzero (returned). Caller holds inflight_lock. The whole block counts: a new
 * object in place writes all of it, and every commit writes its header's checksum. */
static int inflight_walk_columns(kr_pool *pool, int (*fn)(void *ctx, uint64_t col), void *ctx)
{
	const struct kr_geom *g = &pool->g;
	for (const struct mbuf *m = pool->tx->inflight; m; m = m->inext) {
		uint64_t end = m->block.off + m->block.bytes;
		for (uint64_t pg = m->block.off & ~(uint64_t)(KR_PAGE_SIZE - 1); pg < end; pg += KR_PAGE_SIZE) {
			int r = kr_geom_in_data(g, pg) ? fn(ctx, kr_geom_column(g, pg)) : 0;
			if (r)
				return r;
		}
	}
	return 0;
}

static int col_in_range(void *ctx, uint64_t col)
{
	const uint64_t *lohi = ctx;
	return col >= lohi[0] && col < lohi[1];
}

static int col_mark(void *ctx, uint64_t col)
{
	((uint8_t *)ctx)[col] = 1;
	return 0;
}

int kr_tx_inflight_in_columns(kr_pool *pool, uint64_t col_lo, uint64_t col_hi)
{
	uint64_t lohi[2] = {col_lo, col_hi};
	return inflight_walk_columns(pool, col_in_range, lohi);
}

void kr_tx_inflight_columns(kr_pool *pool, uint8_t *busy)
{
	inflight_walk_columns(pool, col_mark, busy);
}

int kr_tx_blocks_cached(kr_pool *pool, kr_oid oid, uint64_t size)
{
	return kr_vcache_has(&pool->tx->vcache, oid, size);
}

void kr_tx_forget(kr_pool *pool, kr_oid oid, uint64_t size)
{
	kr_vcache_drop(&pool->tx->vcache, oid, size);
	kr_shadow_drop(&pool->tx->shadow, oid);
}

static void inflight_leave_all(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	struct mbuf *in = tx->mbufs;
	while (in && !in->inflight) /* only this thread sets it: most transactions have none */
		in = in->next;
	if (!in)
		return;
	inflight_lock(pool);
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		inflight_leave(pool, m);
	inflight_unlock(pool);
}

/* Calls fn for each in-flight byte range of m (pool offsets [a, b)): its ranges, or the
 * whole object for a new one; with unsettled, less the bytes settled already. */
static void inflight_ranges(const struct mbuf *m, int unsettled,
			    void (*fn)(void *ctx, const struct mbuf *m, uint64_t a, uint64_t b), void *ctx)
{
	uint64_t skip = unsettled ? __atomic_load_n(&m->settled, __ATOMIC_ACQUIRE) : 0;
	if (m->fresh) {
		if (skip < m->size)
			fn(ctx, m, m->oid + skip, m->oid + m->size);
		return;
	}
	for (uint32_t i = 0; i < m->nranges; i++) {
		uint64_t a = m->ranges[i].start, b = m->ranges[i].end;
		if (skip >= b - a) {
			skip -= b - a;
			continue;
		}
		fn(ctx, m, m->oid + a + skip, m->oid + b);
		skip = 0;
	}
}

/* Copies a range's old bytes (its buffer's) into the object's image (ctx). */
static void image_put_old(void *ctx, const struct mbuf *m, uint64_t a, uint64_t b)
{
	memcpy((uint8_t *)ctx + (a - m->oid), m->buf + (a - m->oid), b - a);
}

int kr_tx_inflight_object_holds(kr_pool *pool, const struct kr_block *b)
{
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + b->off);
	kr_oid oid = b->off + sizeof(*hdr);
	int found = 0;
	for (const struct mbuf *m = pool->tx->inflight; m && !found; m = m->inext)
		found = m->oid == oid && !m->fresh;
	if (!found)
		return -1;
	if (hdr->size == 0 || hdr->size > b->bytes - sizeof(*hdr))
		return 0;
	uint8_t *image = kr_malloc(hdr->size);
	if (!image)
		return 0;
	memcpy(image, pool->pm.base + oid, hdr->size);
	/* Traded ones hold the old bytes at home already; declared ones kept none. The
	 * checksum is the old one until a buffer leaves the list, even one whose home patch
	 * has settled some ranges (and a trade, which settles too, never waits for us). */
	for (const struct mbuf *m = pool->tx->inflight; m; m = m->inext)
		if (m->oid == oid && !m->fresh && !m->swapped && !m->stored)
			inflight_ranges(m, 0, image_put_old, image);
	int holds = kr_obj_crc(hdr, image) == hdr->crc;
	free(image);
	return holds;
}

/* A reconstruction of [off, off+len) of one row, being corrected. */
struct recon {
	kr_pool *pool;
	uint64_t off;
	size_t len;
	uint8_t *out;
};

/* For the part of [a, b) in the same zone and page column as the reconstructed bytes but
 * another row, the reconstruction took home's bytes: trade them for the buffer's. */
static void recon_correct(void *ctx, const struct mbuf *m, uint64_t a, uint64_t b)
{
	struct recon *r = ctx;
	const struct kr_geom *g = &r->pool->g;
	const uint8_t *base = (const uint8_t *)r->pool->pm.base;
	uint32_t zone = kr_geom_zone(g, r->off), row = kr_geom_row(g, r->off);
	uint64_t x0 = kr_geom_in_row(g, r->off), x1 = x0 + r->len;
	while (a < b) {
		uint64_t in_row = kr_geom_in_row(g, a);
		uint64_t end = a + (g->row_size - in_row) < b ? a + (g->row_size - in_row) : b;
		if (kr_geom_in_data(g, a) && kr_geom_zone(g, a) == zone && kr_geom_row(g, a) != row) {
			uint64_t lo = in_row > x0 ? in_row : x0;
			uint64_t hi = in_row + (end - a) < x1 ? in_row + (end - a) : x1;
			for (uint64_t y = lo; y < hi; y++) {
				uint64_t at = a + (y - in_row);
				r->out[y - x0] ^= base[at] ^ m->buf[at - m->oid];
			}
		}
		a = end;
	}
}

/* Does [a, b) meet the rebuilt page (ctx: its [lo, hi) and the verdict)? */
static void range_meets(void *ctx, const struct mbuf *m, uint64_t a, uint64_t b)
{
	uint64_t *lo_hi_hit = ctx;
	lo_hi_hit[2] |= a < lo_hi_hit[1] && b > lo_hi_hit[0];
}

/* The in-flight list for a repair, which holds commits still. No thread holds the list
 * while it waits for a parity lock (mbuf_patch_home), and none reads home under it without
 * touching those pages first (home_touch), so a page lost before it took the list faults
 * outside it. One lost in the microseconds between the touch and the read would still fault
 * under the list, the thread then waiting in its own handler for this repair to end: a
 * repair that waited for the list would wait forever. So it tries for a while (the list is
 * otherwise held for microseconds) and then gives up. */
static int inflight_try_hold(kr_pool *pool)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (pthread_mutex_trylock(&pool->tx->inflight_lock) != 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) > 100000000ll)
			return 0;
		sched_yield();
	}
	return 1;
}

int kr_tx_inflight_rebuilt(kr_pool *pool, uint64_t off, size_t len, uint8_t *out)
{
	if (!pool->tx)
		return KR_OK; /* at open, before any transaction */
	int mine = inflight_mine;
	if (!mine && !inflight_try_hold(pool))
		return kr_err_set(KR_E_MEDIA, "page 0x%llx lost while the in-flight list is held by a "
				  "thread that waits for the repair", (unsigned long long)off);
	struct recon r = {pool, off, len, out};
	for (struct mbuf *m = pool->tx->inflight; m; m = m->inext) {
		if (m->swapped) /* traded: home holds the old bytes, as parity does */
			continue;
		inflight_ranges(m, 1, recon_correct, &r);
		uint64_t lo_hi_hit[3] = {off, off + len, 0};
		inflight_ranges(m, 1, range_meets, lo_hi_hit);
		if (lo_hi_hit[2])
			m->lost = 1;
	}
	if (!mine)
		pthread_mutex_unlock(&pool->tx->inflight_lock);
	return KR_OK;
}

/* A media error rebuilt a page under some of this transaction's in-place stores
 * (kr_tx_inflight_rebuilt): they are gone, and the commit would make the old bytes new.
 * Asked inside the commit gate after the trade (a traded buffer no longer needs home's
 * bytes), and again before the commit point for the buffers never traded. */
static int tx_lost(const struct kr_tx *tx)
{
	for (const struct mbuf *m = tx->mbufs; m; m = m->next)
		if (m->lost)
			return kr_err_set(KR_E_MEDIA, "a media error took the uncommitted in-place stores "
					  "to object 0x%llx: the transaction is aborted",
					  (unsigned long long)m->oid);
	return KR_OK;
}

/* The stripe of an object: its page's line, and in it a lock by a hash of its offset
 * (a plain offset would give every object of a size class that divides 256 one lock). */
static unsigned crc_stripe(kr_oid oid)
{
	unsigned line = (unsigned)((oid / KR_PAGE_SIZE) * 0x9e3779b97f4a7c15ull >> 56);
	unsigned slot = (unsigned)((oid >> 4) * 0xbf58476d1ce4e5b9ull >> 60);
	return line * CRC_PER_LINE + slot;
}

/* The stripes of the checksum locks of a transaction's changed objects. Two transactions
 * that change one object (disjoint ranges, which libpmemobj allows) each patch its checksum
 * from the value they read: the second must read the first's (build to apply, under the
 * object's stripe). */
static void crc_stripes(struct kr_tx *tx, struct crc_set *set)
{
	set->any = 0;
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (!m->fresh && !m->freed && m->nranges) {
			unsigned s = crc_stripe(m->oid), w = s / 64;
			if (!(set->any & 1ull << w)) {
				set->any |= 1ull << w;
				set->words[w] = 0;
			}
			set->words[w] |= 1ull << (s % 64);
		}
}

/* Applies op to each lock of the set, in ascending order: taken so by every committer,
 * they cannot deadlock. */
static inline void crc_each(kr_pool *pool, const struct crc_set *set, void (*op)(kr_lock *))
{
	for (uint64_t any = set->any; any; any &= any - 1) {
		unsigned w = (unsigned)__builtin_ctzll(any);
		for (uint64_t bits = set->words[w]; bits; bits &= bits - 1)
			op(&pool->tx->crc_locks[w * 64 + __builtin_ctzll(bits)]);
	}
}

static void crc_lock(kr_pool *pool, const struct crc_set *set) { crc_each(pool, set, kr_lock_take); }

static void crc_unlock(kr_pool *pool, const struct crc_set *set) { crc_each(pool, set, kr_lock_drop); }

static int range_covered(const struct mbuf *m, uint64_t s, uint64_t e)
{
	for (uint32_t i = 0; i < m->nranges; i++)
		if (m->ranges[i].start <= s && e <= m->ranges[i].end)
			return 1;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Large in-place transactions: spilled undo and the home commit
 *
 *   An in-place transaction's undo entries share its lane with its commit. When they would
 *   leave less than a quarter of the lane free (kr_log_undo_fits), the next ones go to a
 *   spill segment: a block of the heap, reserved in DRAM only (its allocator records say
 *   free), whose lines are written like a lane's, parity kept as they are written, behind
 *   an intent for the block (log.h, layout.h). Segments grow fourfold the lane, then
 *   twofold each. libpmemobj grows its undo log into the heap the same way; before this,
 *   PMDK's hashmap_tx could not rebuild its table past 10250 keys in one transaction.
 *
 *   Such a transaction, or one whose in-place ranges would need HOME_MIN_REDO bytes of
 *   redo, or more than the lane can take, commits at home. Its new bytes are home already,
 *   so instead of logging them again (undo, redo and home: three writes) it
 *     1. builds the rest of the commit (allocations, frees, micro-buffered objects, a
 *        CANCEL record naming its first undo entry, and a record for the checksum of each
 *        object it changed in place, filled in at step 2: tx_home_crcs) and makes room for
 *        it, in the lane or in a segment (tx_last_room), so that from step 2 on nothing can
 *        fail but the media;
 *     2. patches parity with old ^ new per range, flushes the ranges and fences
 *        (tx_home_write): home and parity are new and durable, the checksums still old;
 *     3. commits the rest: recovery skips the cancelled undo from then on, and the
 *        checksums become new with the apply.
 *   A crash before step 3 replays the undo (old bytes) and recomputes the parity of every
 *   range it touched, under checksums that never changed; after it, the new state is
 *   durable. One fence more than a small commit; the bytes go home once. The buffers stay
 *   in flight until the apply has written the checksums, and leave right then, before the
 *   checksum stripes go (tx_home_leave): until then the old checksum holds with their old
 *   bytes (kr_tx_inflight_object_holds), and after it no one may count them as old.
 *   The last entry must fit a lane or a segment, and a transaction may change thousands
 *   of objects in place (PMDK's hashmap_tx rebuilds its table in one). Beyond
 *   HOME_CRCS_IN_COMMIT objects the checksums take the way that scales instead: as undo
 *   entries of their own before step 1, as many as they need (tx_home_undo), and stored in
 *   place at step 2 with the home bytes; one more fence. The segments go back to the heap once
 *   durable_seq passes the CANCEL (an abort commits one of its own, after its old bytes are
 *   home), so that every segment a replayable SPILL record names still holds its lines.
 * ------------------------------------------------------------------------------------- */

/* A new spill segment for at least need lines (kr_log_spill_attach); inside the gate. */
static int tx_spill_grow(struct kr_tx *tx, uint32_t need)
{
	kr_pool *pool = tx->pool;
	uint64_t nlines = ((uint64_t)pool->log.lane_lines * 4) << (tx->nsegs < 8 ? tx->nsegs : 8);
	if (nlines < 2ull * need)
		nlines = 2ull * need;
	if (nlines > KR_SEG_MAX_LINES)
		nlines = KR_SEG_MAX_LINES;
	int copies = tx->lane->replica ? 2 : 1;
	/* The lines start at the block's second cache line (the first holds the header's
	 * place): blocks this large are whole chunks, so the lines are line-aligned. */
	uint64_t span = KR_LINE_SIZE + nlines * KR_LINE_SIZE * copies;
	if (KR_GROW(tx->segs, tx->segs_cap, tx->nsegs + 1, 4))
		return kr_err_set(KR_E_NOMEM, "spill segments");
	struct kr_block b;
	int rc = kr_heap_reserve(&pool->heap, tx->lane, span - sizeof(struct kr_obj_hdr), &b);
	if (rc == KR_E_IO_SYNC)
		kr_pool_fail(pool, rc);
	if (rc)
		return kr_err_set(rc, "undo of an in-place transaction: no room in the heap for %llu "
				  "more lines of it", (unsigned long long)nlines);
	uint64_t off = b.off + KR_LINE_SIZE;
	rc = kr_log_spill_attach(&pool->log, tx->lane, off, copies == 2 ? off + nlines * KR_LINE_SIZE : 0,
				 (uint32_t)nlines, b.off, span, &tx->undo_first);
	if (rc) {
		kr_heap_unreserve(&pool->heap, &b, 1);
		return rc;
	}
	tx->segs[tx->nsegs++] = b;
	return KR_OK;
}

/* One undo entry of the transaction: DATA records of old bytes, or an intent; in the lane
 * or a spill segment. Inside the gate. */
static int tx_commit_undo_in(struct kr_tx *tx, int intent)
{
	kr_pool *pool = tx->pool;
	uint32_t need = kr_img_lines(&tx->img);
	int rc = kr_log_undo_fits(&pool->log, tx->lane, need) ? KR_OK : tx_spill_grow(tx, need);
	if (rc == KR_OK)
		rc = kr_log_commit_undo(&pool->log, tx->lane, &tx->img, intent, &tx->undo_first);
	kr_img_reset(&tx->img);
	return rc;
}

static int tx_commit_undo(struct kr_tx *tx, int intent)
{
	kr_pool *pool = tx->pool;
	kr_log_enter(&pool->log, tx->lane);
	int rc = tx_commit_undo_in(tx, intent);
	kr_log_exit(&pool->log, tx->lane);
	return rc;
}

/* A generous bound of the lines of the commit's log entry (tx_build_image, tx_add_fresh),
 * known before its checksum stripes are taken. */
static uint32_t tx_lines_bound(const struct kr_tx *tx)
{
	uint64_t b = 512; /* the first line's prefix, the root lines */
	b += (uint64_t)kr_heap_new_runs(&tx->pool->heap, tx->lane) *
	     (2 * sizeof(struct kr_rec_hdr) + 8 + KR_RUN_BITMAP_BYTES + 16);
	for (const struct mbuf *m = tx->mbufs; m; m = m->next) {
		b += 4 * sizeof(struct kr_rec_hdr) + 64; /* FRESH, allocation, free, checksum */
		if (m->fresh && m->log_whole)
			b += sizeof(struct kr_rec_hdr) + sizeof(struct kr_obj_hdr) + m->size + 8;
		for (uint32_t i = 0; !m->fresh && i < m->nranges; i++)
			b += sizeof(struct kr_rec_hdr) + m->ranges[i].end - m->ranges[i].start + 8;
	}
	b = b / KR_LINE_PAYLOAD + 1;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

static int home_candidate(const struct mbuf *m)
{
	return m->in_place && !m->fresh && !m->stored && !m->freed && m->nranges;
}

/* In-place redo from which a home commit is the cheaper one: its one more fence against a
 * redo copy and an apply of the bytes. PMDK's overwrite in place (pmdk-bench, tmpfs, AMD
 * EPYC Zen 4, pinned, medians of 3 to 5 runs): 512 B 1342 ns at home against 1212 logged,
 * 1 KiB 1502 against 1513, 2 KiB 1943 against 2184, 3 KiB 2344 against 2684. */
#define HOME_MIN_REDO 2048

/* Whether the transaction commits at home (its undo spilled, or its in-place ranges would
 * need HOME_MIN_REDO bytes or a quarter of the lane, or more than the lane has free now,
 * as redo); marks the buffers that do. */
static int tx_home_mark(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	if (!pool->log.spill)
		return 0;
	uint64_t redo = 0;
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (home_candidate(m)) {
			redo += 2 * sizeof(struct kr_rec_hdr) + 8; /* the checksum's record */
			for (uint32_t i = 0; i < m->nranges; i++)
				redo += sizeof(struct kr_rec_hdr) + ((m->ranges[i].end - m->ranges[i].start + 7) & ~7ull);
		}
	if (!tx->undo_first || (!tx->nsegs && redo == 0)) /* nothing in place to commit at home */
		return 0;
	if (!tx->nsegs && redo < HOME_MIN_REDO && redo / KR_LINE_PAYLOAD < pool->log.lane_lines / 4 &&
	    kr_log_fits(&pool->log, tx->lane, tx_lines_bound(tx), 0))
		return 0;
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		m->home |= (uint8_t)home_candidate(m);
	return 1;
}

/* Objects changed in place whose new checksums a home commit's last entry carries, at most:
 * 64 records of 4 bytes take about 28 lines. */
#define HOME_CRCS_IN_COMMIT 64

/* Whether the home commit's checksums go in its last entry (tx_home_crcs), or, for many
 * objects, in undo entries of their own first (tx_home_undo). */
static int home_crcs_in_commit(const struct kr_tx *tx)
{
	unsigned n = 0;
	for (const struct mbuf *m = tx->mbufs; m && n <= HOME_CRCS_IN_COMMIT; m = m->next)
		n += m->home && !m->fresh;
	return n <= HOME_CRCS_IN_COMMIT;
}

/* Many objects: their checksum words as they are now (the commit holds their stripes), as
 * undo, before anything of them changes at home. */
static int tx_home_undo(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	enum { PER_ENTRY = 1024 };
	kr_img_reset(&tx->img);
	int rc = KR_OK;
	uint32_t n = 0, crc;
	for (struct mbuf *m = tx->mbufs; m && rc == KR_OK; m = m->next) {
		if (!m->home || m->fresh) /* a new object's block is free until the commit */
			continue;
		uint64_t at = m->block.off + offsetof(struct kr_obj_hdr, crc);
		rc = kr_img_data_copy(&tx->img, at, pool->pm.base + at, 4, &crc);
		if (rc == KR_OK && ++n == PER_ENTRY) {
			rc = tx_commit_undo_in(tx, 0);
			n = 0;
		}
	}
	if (rc == KR_OK && n)
		rc = tx_commit_undo_in(tx, 0);
	kr_img_reset(&tx->img);
	return rc;
}

/* Step 1: a record for each in-place object's new checksum, in the commit's last entry;
 * tx_home_write fills them in (m->crc_at: where, in the image). */
static int tx_home_crcs(struct kr_tx *tx)
{
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		if (!m->home || m->fresh)
			continue;
		uint8_t *d = kr_img_data(&tx->img, m->block.off + offsetof(struct kr_obj_hdr, crc), 4);
		if (!d)
			return kr_errcode();
		m->crc_at = (uint32_t)(d - tx->img.buf);
	}
	return KR_OK;
}

/* Parity made to follow the new bytes an in-flight buffer's thread wrote at home, over
 * [off, off+len) of the object, flushed; with crc_too returns the object checksum's delta
 * for them. One page at a time, each read into DRAM before its parity changes: a fault on
 * a lost page then comes before any parity byte of that page moves, with the pages before
 * it settled (a repair takes them as home has them) and the rest not (it corrects them
 * with the buffer's old bytes). Without the in-flight lock: waiting here for a parity lock lets a
 * repair run, and a repair needs the list. (A machine check inside a parity page, halfway
 * through its patch, is the exception: the repair recomputes that page as not patched,
 * and the patch goes on from the faulting line, so parity disagrees with the lines before
 * it until a scrub recomputes it. Emulated poison faults at a page's first touch.) */
static uint32_t mbuf_patch_home(kr_pool *pool, struct mbuf *m, uint64_t off, uint64_t len, int crc_too)
{
	uint8_t now[KR_PAGE_SIZE];
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	uint32_t crc = 0;
	while (len) {
		uint64_t n = KR_PAGE_SIZE - (m->oid + off) % KR_PAGE_SIZE;
		if (n > len)
			n = len;
		memcpy(now, home + off, n);
		kr_redund_patch(&pool->redund, m->oid + off, m->buf + off, now, n);
		kr_pm_flush(&pool->pm, home + off, n);
		if (crc_too)
			crc ^= kr_crc32c_delta2(m->buf + off, now, n, m->size - off - n);
		settle(m, n);
		off += n;
		len -= n;
	}
	return crc;
}

/* Step 2: parity patched for the new bytes at home, all flushed, one fence; the new
 * checksums into the records tx_home_crcs made. */
static int tx_home_write(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	uint8_t *base = (uint8_t *)pool->pm.base;
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		if (!m->home || m->fresh) /* patched and flushed already (tx_add_fresh) */
			continue;
		const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(base + m->block.off);
		uint32_t crc = hdr->crc;
		for (uint32_t i = 0; i < m->nranges; i++)
			crc ^= mbuf_patch_home(pool, m, m->ranges[i].start, m->ranges[i].end - m->ranges[i].start, 1);
		if (m->crc_at) { /* the last entry carries it: in flight until its apply */
			memcpy(tx->img.buf + m->crc_at, &crc, sizeof(crc));
			continue;
		}
		if (feat(pool, KR_FEAT_RO_OBJ_CSUM)) /* its undo is logged (tx_home_undo) */
			kr_redund_write_direct(&pool->redund, m->block.off + offsetof(struct kr_obj_hdr, crc),
					       &crc, sizeof(crc));
		inflight_lock(pool);
		inflight_leave(pool, m);
		inflight_unlock(pool);
	}
	kr_log_flush_applies(&pool->log, tx->lane); /* the CANCEL follows */
	return kr_pm_fence(&pool->pm);
}

/* After the apply of a home commit's last entry, inside the gate and before the checksum
 * stripes go: its objects' checksums are the new ones now, so their buffers leave the
 * in-flight list (another transaction would otherwise count their bytes as old). */
static void tx_home_leave(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	inflight_lock(pool);
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (m->home && !m->fresh)
			inflight_leave(pool, m);
	inflight_unlock(pool);
}

/* Room for a home commit's last entry, which must not fail once tx_home_write has run: in
 * the lane, or in a segment (a new one if need be). */
static int tx_last_room(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	uint32_t n = kr_img_lines(&tx->img);
	if (kr_log_last_fits(&pool->log, tx->lane, n))
		return KR_OK;
	int rc = tx_spill_grow(tx, n);
	if (rc == KR_OK && !kr_log_last_fits(&pool->log, tx->lane, n))
		rc = kr_err_set(KR_E_NOSPACE_LOG, "the commit of lane %u needs %u log lines", tx->lane->idx, n);
	return rc;
}

/* The transaction is over: its spill segments go back to the heap once durable_seq has
 * passed the entry that cancels its undo (the commit at seq, or here an abort's CANCEL,
 * after tx_undo_in_place made the old bytes durable): until then a recovery reads them
 * (log.c, masks). Should that entry fail, the blocks stay reserved until the pool closes. */
static void tx_spill_end(struct kr_tx *tx, int committed, uint64_t seq)
{
	kr_pool *pool = tx->pool;
	int rc = KR_OK;
	if (!committed) {
		seq = 0;
		/* A pool that failed mid-commit (tx_home_write) is for recovery to settle: its
		 * undo must stay replayable. */
		if ((rc = kr_pool_usable(pool)) != KR_OK)
			goto out;
		kr_img_reset(&tx->img);
		kr_log_enter(&pool->log, tx->lane);
		rc = kr_img_cancel(&tx->img, tx->undo_first);
		if (rc == KR_OK)
			rc = kr_log_commit_last(&pool->log, tx->lane, &tx->img, &seq);
		if (seq)
			kr_log_applied(&pool->log, tx->lane, seq);
		kr_log_exit(&pool->log, tx->lane);
		kr_img_reset(&tx->img);
	}
out:
	kr_log_spill_detach(tx->lane);
	for (uint32_t i = 0; rc == KR_OK && seq && i < tx->nsegs; i++)
		kr_heap_unreserve_at(&pool->heap, &tx->segs[i], seq);
	tx->nsegs = 0;
}

void *kr_tx_add_in_place(kr_tx *tx, kr_oid oid, size_t off, size_t len)
{
	if (tx_usable(tx))
		return NULL;
	kr_pool *pool = tx->pool;
	/* The commit patches this range's parity: a cold line, fetched while the range's
	 * bytes are copied below. */
	kr_redund_prefetch(&pool->redund, oid + off, len);
	struct mbuf *m = mbuf_get_range(tx, oid, off, len, 1);
	if (!m)
		return NULL;
	if ((m->handed && !m->in_place) || m->stored) {
		tx_fail(tx, kr_err_set(KR_E_MISUSE_STATE,
				       "object 0x%llx has %s changes in this transaction",
				       (unsigned long long)oid, m->stored ? "declared" : "micro-buffered"));
		return NULL;
	}
	uint8_t *home = (uint8_t *)pool->pm.base + oid;
	int rc = KR_OK;
	kr_img_reset(&tx->img);
	if (m->fresh && !m->in_place) {
		/* What the free block holds now is what its parity was computed over; the
		 * application finds zeros, as kr_tx_alloc promises, once the intent is durable. */
		home_touch(home, m->size);
		inflight_lock(pool);
		memcpy(m->buf, home, m->size);
		m->in_place = 1;
		inflight_join(pool, m);
		inflight_unlock(pool);
		if (feat(pool, KR_FEAT_RO_PARITY) && (rc = kr_img_intent(&tx->img, oid, m->size)) == KR_OK)
			rc = tx_commit_undo(tx, 1);
		if (rc == KR_OK && !kr_all_zero(home, m->size)) {
			kr_log_enter(&pool->log, tx->lane);
			kr_pm_set(&pool->pm, home, 0, m->size);
			kr_log_exit(&pool->log, tx->lane);
		}
	} else if (!m->fresh && !range_covered(m, off, off + len)) {
		if (!m->full) {
			if (m->by_block && (rc = range_verify(pool, m, off, off + len))) {
				tx_fail(tx, rc);
				return NULL;
			}
			home_touch(home + off, len);
			inflight_lock(pool);
			mbuf_fill_gaps(pool, m, off, off + len);
			inflight_unlock(pool);
		}
		uint32_t crc = 0;
		inflight_lock(pool);
		rc = range_add(m, off, off + len);
		m->in_place = 1;
		inflight_join(pool, m);
		inflight_unlock(pool);
		/* A large range in pieces: one log entry holds at most KR_TX_MAX_LINES lines. */
		enum { UNDO_PIECE = 512 << 10 };
		for (size_t at = 0; rc == KR_OK && at < len; at += UNDO_PIECE) {
			uint32_t n = (uint32_t)(len - at < UNDO_PIECE ? len - at : UNDO_PIECE);
			if ((rc = kr_img_data_copy(&tx->img, oid + off + at, m->buf + off + at, n, &crc)) == KR_OK)
				rc = tx_commit_undo(tx, 0);
		}
	}
	if (rc) {
		tx_fail(tx, rc);
		return NULL;
	}
	m->in_place = 1;
	m->handed = 1;
	return home + off;
}

kr_oid kr_tx_owner(kr_tx *tx, uint64_t off, size_t *size, uint32_t *type)
{
	if (tx_owned(tx))
		return KR_OID_NULL;
	for (struct mbuf *m = tx->fresh; m; m = m->fnext)
		if (!m->freed && off >= m->oid && off < m->oid + m->size) {
			*size = m->size;
			if (type)
				*type = m->type;
			return m->oid;
		}
	/* The heap's DRAM map and the header, once each: libpmemobj programs ask this of every
	 * node they pass (OID_INSTANCEOF), and kr_pool_locate then kr_type walked the heap's
	 * map twice and reread the header (a quarter of ctree's insert time). */
	struct kr_block b;
	if (!kr_heap_owner(&tx->pool->heap, off, &b))
		return KR_OID_NULL;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(tx->pool->pm.base + b.off);
	kr_oid oid = b.off + sizeof(*hdr);
	if (!header_fits(hdr, &b) || off < oid || off >= oid + hdr->size)
		return KR_OID_NULL;
	*size = hdr->size;
	if (type)
		*type = hdr->type;
	return oid;
}

void kr_tx_trust(kr_tx *tx)
{
	if (tx_owned(tx) == KR_OK)
		tx->trusting = 1;
}

int kr_tx_write_in_place(kr_tx *tx, kr_oid oid, size_t off, const void *src, size_t len)
{
	uint8_t *p = kr_tx_add_in_place(tx, oid, off, len);
	if (!p)
		return tx->err ? tx->err : kr_errcode();
	kr_pool *pool = tx->pool;
	kr_log_enter(&pool->log, tx->lane);
	if (src)
		kr_pm_copy(&pool->pm, p, src, len);
	else
		kr_pm_set(&pool->pm, p, 0, len);
	kr_log_exit(&pool->log, tx->lane);
	return KR_OK;
}

/* The bytes [off, off+len) as the zone's parity says they were, page column by column:
 * what redundancy was computed over. Commits stand still meanwhile (a commit writes a data
 * row and patches parity in two steps). */
static void old_from_parity(kr_pool *pool, uint64_t off, size_t len, uint8_t *out)
{
	struct kr_quiesce q;
	kr_quiesce_hold(&q, &pool->log);
	while (len) {
		size_t piece = KR_PAGE_SIZE - off % KR_PAGE_SIZE;
		if (piece > len)
			piece = len;
		if (piece < 1024) /* rows x piece bytes, not rows x a page */
			kr_parity_rebuild_bytes(&pool->redund.parity, off, piece, out);
		else
			kr_parity_rebuild(&pool->redund.parity, off, piece, out);
		struct recon r = {pool, off, piece, out};
		inflight_lock(pool);
		for (const struct mbuf *m = pool->tx->inflight; m; m = m->inext)
			inflight_ranges(m, 1, recon_correct, &r);
		inflight_unlock(pool);
		off += piece;
		out += piece;
		len -= piece;
	}
	kr_quiesce_release(&q);
}

/* A declared range is an in-place range whose stores came before it was named: the
 * buffer gets old bytes where it has none yet, home keeps the application's, and the
 * commit trades them as for any in-place range. No undo entry: nothing promised the
 * application atomicity for stores it had not declared.
 *
 * Which old bytes. Parity and the checksum need different ones, because undeclared stores
 * of other objects (or of this object, in other rows) may sit in the same page columns:
 *   - parity: the bytes parity says the range holds, reconstructed from parity and the
 *     other rows as they are now, with commits held still. Patching with them makes the
 *     range's parity the XOR of the rows as they are, the same result a recomputation
 *     gives; as a delta it commutes with other commits' patches. (Bytes of other rows not
 *     declared yet are then in parity already; their own declaration, reconstructing
 *     again, keeps it so. A commit's patch uses the bytes at home, which agrees.)
 *   - the checksum: the bytes it was computed over. The object's DRAM copy (shadow.h),
 *     taken when the checksum had its present value, has them: the checksum is patched
 *     for the declared range alone. Without a copy, the commit recomputes the checksum
 *     over the object's bytes as they are (every store of the object's is then declared).
 * A reconstruction is not the checksum's old bytes when another row of the column holds an
 * undeclared store: using it for the checksum lost the keys of hashmap_rp's rebuilt table
 * (a 1 MiB object spanning rows). old, when the caller gives it, serves both. */
int kr_tx_add_stored(kr_tx *tx, kr_oid oid, size_t off, size_t len, const void *old)
{
	int rc = tx_usable(tx);
	if (rc)
		return rc;
	kr_pool *pool = tx->pool;
	struct mbuf *m = mbuf_find(tx, oid);
	if (m && m->in_place && !m->stored && (m->fresh || range_covered(m, off, off + len)))
		return KR_OK; /* named in this transaction already: its commit takes them */
	if (m && (!m->in_place || !m->stored) && !m->freed)
		return tx_fail(tx, kr_err_set(KR_E_MISUSE_STATE,
					      "object 0x%llx is open in this transaction: name the range "
					      "with kr_tx_add_in_place before storing",
					      (unsigned long long)oid));
	if (!(m = mbuf_get_range(tx, oid, off, len, 0)))
		return tx->err;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + m->block.off);
	if (!m->stored) {
		m->stored_crc = hdr->crc;
		m->crc_delta = 0;
		m->crc_whole = 0;
	}
	uint8_t *par = NULL, *sum = NULL;
	if (!old && feat(pool, KR_FEAT_RO_PARITY)) {
		if (!(par = kr_malloc(2 * len)))
			return tx_fail(tx, kr_err_set(KR_E_NOMEM, "%zu bytes stored in place", len));
		old_from_parity(pool, oid + off, len, par);
		sum = par + len;
		if (!feat(pool, KR_FEAT_RO_OBJ_CSUM) || m->crc_whole ||
		    !kr_shadow_old(&pool->tx->shadow, oid, m->size, m->stored_crc, off, len, sum))
			m->crc_whole = 1;
	}
	const uint8_t *home = (const uint8_t *)pool->pm.base + oid;
	uint64_t pos = off, e = off + len;
	home_touch(home + off, len);
	inflight_lock(pool);
	for (uint32_t i = 0; i <= m->nranges && pos < e; i++) {
		uint64_t gap_end = i < m->nranges ? m->ranges[i].start : e;
		if (gap_end > e)
			gap_end = e;
		if (gap_end > pos) { /* without redundancy, what is home now will do */
			const uint8_t *was = old ? (const uint8_t *)old : par;
			memcpy(m->buf + pos, was ? was + (pos - off) : home + pos, gap_end - pos);
			if (sum && !m->crc_whole) /* the checksum's old bytes differ: patch now */
				m->crc_delta ^= kr_crc32c_delta2(sum + (pos - off), home + pos,
								 gap_end - pos, m->size - gap_end);
		}
		if (i < m->nranges && m->ranges[i].end > pos)
			pos = m->ranges[i].end;
	}
	rc = range_add(m, off, off + len);
	m->in_place = m->stored = m->handed = 1;
	inflight_join(pool, m);
	inflight_unlock(pool);
	free(par);
	if (rc)
		return tx_fail(tx, rc);
	m->crc_own = sum != NULL; /* the commit writes stored_crc ^ crc_delta, or recomputes */
	return KR_OK;
}

static void note_write(kr_pool *pool, uint64_t off, uint64_t len, uint64_t seq)
{
	struct kr_tx_shared *t = pool->tx;
	uint64_t prev = UINT64_MAX;
	for (uint64_t pg = off & ~(uint64_t)(KR_PAGE_SIZE - 1); pg < off + len; pg += KR_PAGE_SIZE) {
		if (!kr_geom_in_data(&pool->g, pg))
			continue;
		uint64_t g = kr_geom_column(&pool->g, pg) / t->group_cols;
		if (g == prev)
			continue;
		prev = g;
		uint64_t cur = atomic_load_explicit(&t->group_writer[g], memory_order_relaxed);
		while (cur < seq && !atomic_compare_exchange_weak(&t->group_writer[g], &cur, seq))
			;
	}
}

/* A transaction that found writers_on clear had taken its sequence number before the
 * first question set it (all sequentially consistent), so the floor read after is at or
 * above that number. */
uint64_t kr_tx_group_writer(kr_pool *pool, uint64_t g)
{
	struct kr_tx_shared *t = pool->tx;
	int off = 0;
	if (!atomic_load(&t->writers_on) && atomic_compare_exchange_strong(&t->writers_on, &off, 1))
		atomic_store(&t->writers_floor, atomic_load(&pool->log.next_seq) - 1);
	uint64_t newest = atomic_load(&t->group_writer[g]), floor = atomic_load(&t->writers_floor);
	return newest > floor ? newest : floor;
}

/* What a replay could write again (stale.c, invariant 5): a new object's whole block, an
 * existing one's header (its checksum) and changed ranges. An abort's undo entries are older
 * than the sequence numbers handed out by now. */
static void tx_note_writes(struct kr_tx *tx, int committed, uint64_t seq)
{
	kr_pool *pool = tx->pool;
	uint64_t bound = committed ? seq : (tx->undo_first ? atomic_load(&pool->log.next_seq) : 0);
	for (struct mbuf *m = tx->mbufs; m && bound; m = m->next) {
		if (m->freed || (!committed && !m->in_place))
			continue;
		if (m->fresh) {
			note_write(pool, m->block.off, m->block.bytes, bound);
			continue;
		}
		note_write(pool, m->block.off, sizeof(struct kr_obj_hdr), bound);
		for (uint32_t i = 0; i < m->nranges; i++)
			note_write(pool, m->oid + m->ranges[i].start, m->ranges[i].end - m->ranges[i].start,
				   bound);
	}
}

/* Ends the transaction: unreserves what was not committed, unbinds, and leaves the
 * transaction's DRAM to the lane's next one. */
static void tx_end(struct kr_tx *tx, int committed, uint64_t seq)
{
	kr_pool *pool = tx->pool;
	struct kr_lane *lane = tx->lane;
	if (!committed)
		tx_undo_in_place(tx);
	if (tx->nsegs)
		tx_spill_end(tx, committed, seq);
	if (pool->tx->group_writer && atomic_load(&pool->tx->writers_on))
		tx_note_writes(tx, committed, seq);
	inflight_leave_all(tx);
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (m->fresh && !committed && !m->freed)
			kr_heap_unreserve(&pool->heap, &m->block, !tx->direct && !m->in_place);
	kr_heap_end_runs(&pool->heap, lane, committed);
	if (__builtin_expect(pool->debug != NULL, 0))
		kr_debug_release_all(pool, tx);
	struct kr_tx **pp = &tx_open_list;
	while (*pp != tx)
		pp = &(*pp)->next_open;
	*pp = tx->next_open;
	/* Before the release: the slot is the lane holder's. */
	tx_recycle(tx);
	pool->tx->spare[lane->idx].tx = tx;
	kr_log_lane_release(&pool->log, lane);
}

int kr_tx_shared_new(kr_pool *pool)
{
	struct kr_tx_shared *t = kr_calloc_aligned(_Alignof(struct kr_tx_shared), 1, sizeof(*t));
	if (!t || !(t->spare = kr_calloc_aligned(_Alignof(struct spare_slot), pool->log.nlanes,
						  sizeof(*t->spare)))) {
		free(t);
		return kr_err_set(KR_E_NOMEM, "%u transaction slots", pool->log.nlanes);
	}
	t->nlanes = pool->log.nlanes;
	if (pool->hdr.incompat & KR_FEAT_INCOMPAT_STALE_MAP) {
		uint64_t cols = kr_geom_columns(&pool->g);
		t->group_cols = KR_STALE_COLUMNS_PER_BIT(cols);
		t->writers_floor = UINT64_MAX;
		t->group_writer = kr_calloc((cols + t->group_cols - 1) / t->group_cols, sizeof(uint64_t));
		if (!t->group_writer) {
			free(t->spare);
			free(t);
			return kr_err_set(KR_E_NOMEM, "stale map groups");
		}
	}
	pthread_mutex_init(&t->root_lock, NULL);
	pthread_mutex_init(&t->inflight_lock, NULL);
	kr_vcache_init(&t->vcache);
	kr_shadow_init(&t->shadow);
	pool->tx = t;
	return KR_OK;
}

/* Pool close: every lane is free, so every slot is still. */
void kr_tx_shared_free(kr_pool *pool)
{
	struct kr_tx_shared *t = pool->tx;
	if (!t)
		return;
	for (uint32_t i = 0; i < t->nlanes; i++)
		if (t->spare[i].tx)
			tx_free_all(t->spare[i].tx);
	free(t->spare);
	free((void *)t->group_writer);
	kr_vcache_fini(&t->vcache);
	kr_shadow_fini(&t->shadow);
	pthread_mutex_destroy(&t->root_lock);
	pthread_mutex_destroy(&t->inflight_lock);
	free(t);
	pool->tx = NULL;
}

int kr_tx_alloc(kr_tx *tx, size_t size, uint32_t type, kr_oid *oid)
{
	int rc = tx_usable(tx);
	if (rc)
		return rc;
	if (!oid)
		return tx_fail(tx, kr_err_set(KR_E_MISUSE_ARG, "kr_tx_alloc: oid is NULL"));
	struct kr_block b;
	rc = kr_heap_reserve(&tx->pool->heap, tx->lane, size, &b);
	if (rc == KR_E_IO_SYNC) /* the allocator's own commit: its durability is unknown */
		kr_pool_fail(tx->pool, rc);
	if (rc)
		return tx_fail(tx, rc);
	struct mbuf *m = mbuf_new(tx, b.off + sizeof(struct kr_obj_hdr));
	if (!m) {
		kr_heap_unreserve(&tx->pool->heap, &b, 1);
		return tx_fail(tx, KR_E_NOMEM);
	}
	m->size = size;
	m->type = type;
	m->block = b;
	m->fresh = 1;
	m->fnext = tx->fresh;
	tx->fresh = m;
	m->full = 1; /* zeros, in a buffer made when it is first handed out (mbuf_get) */
	*oid = m->oid;
	return KR_OK;
}

int kr_tx_free(kr_tx *tx, kr_oid oid)
{
	int rc = tx_usable(tx);
	if (rc)
		return rc;
	if (oid != KR_OID_NULL && oid == tx->pool->root[0]->root_oid)
		return tx_fail(tx, kr_err_set(KR_E_MISUSE_ARG, "the root object cannot be freed"));
	struct mbuf *m = mbuf_find(tx, oid);
	if (m && m->freed)
		return tx_fail(tx, kr_err_set(KR_E_MISUSE_FREED, "object 0x%llx freed twice",
					      (unsigned long long)oid));
	if (!m) {
		struct kr_block b;
		const struct kr_obj_hdr *hdr = NULL;
		if ((rc = object_header(tx->pool, oid, &b, &hdr)))
			return tx_fail(tx, rc);
		if (__builtin_expect(tx->pool->debug != NULL, 0) &&
		    (rc = kr_debug_claim(tx->pool, oid, tx)))
			return tx_fail(tx, rc);
		if (!(m = mbuf_new(tx, oid)))
			return tx_fail(tx, KR_E_NOMEM);
		m->block = b;
		m->size = hdr->size;
	}
	/* Stores made in place go back to what the block's parity was computed over: the
	 * block is free space after the commit. Then home is what parity reflects again, and
	 * the buffer leaves the in-flight list: a block allocated here may be taken by another
	 * transaction at once, whose buffer would otherwise be corrected for twice. */
	if (m->in_place) {
		mbuf_restore_home(tx, m);
		inflight_lock(tx->pool);
		inflight_leave(tx->pool, m);
		m->lost = 0; /* its stores go away anyway */
		inflight_unlock(tx->pool);
		/* A block allocated here is free again at once, and another thread's allocation
		 * may take it and commit it (which makes recovery trust its intent here as
		 * settled): the old bytes must be durable first, which only this thread's fence
		 * makes them. */
		if (m->fresh && (rc = kr_pm_fence(&tx->pool->pm)) != KR_OK) {
			kr_pool_fail(tx->pool, rc);
			return tx_fail(tx, rc);
		}
	}
	if (m->fresh) /* allocated and freed here: it never exists (nor was it written) */
		kr_heap_unreserve(&tx->pool->heap, &m->block, !m->in_place);
	m->freed = 1;
	m->nranges = 0; /* nothing to log for an object that goes away */
	return KR_OK;
}

#define PARITY_PREFETCH_MIN 512

void *kr_tx_add(kr_tx *tx, kr_oid oid, size_t off, size_t len)
{
	if (tx_usable(tx))
		return NULL;
	/* The commit patches this range's parity: lines another thread may hold, fetched
	 * while this transaction builds its buffer, its image and its log entry (two threads
	 * overwriting their own objects: 512 B 1.46-1.51M -> 1.82-1.86M/s, 1 KiB 1.22M ->
	 * 1.51-1.59M/s, one thread unchanged). Not for a few lines: at 256 B it cost a few
	 * percent with one thread and two (finding the lines takes two divisions). */
	if (len >= PARITY_PREFETCH_MIN)
		kr_redund_prefetch(&tx->pool->redund, oid + off, len);
	struct mbuf *m = mbuf_get_range(tx, oid, off, len, 1);
	if (!m)
		return NULL;
	if (m->in_place) {
		tx_fail(tx, kr_err_set(KR_E_MISUSE_STATE,
				       "object 0x%llx is written in place in this transaction",
				       (unsigned long long)oid));
		return NULL;
	}
	if (!m->full) {
		int rc = m->by_block ? range_verify(tx->pool, m, off, off + len) : KR_OK;
		if (rc) {
			tx_fail(tx, rc);
			return NULL;
		}
		mbuf_fill_gaps(tx->pool, m, off, off + len);
	}
	m->handed = 1;
	if (!m->fresh && range_add(m, off, off + len) != KR_OK) {
		tx_fail(tx, KR_E_NOMEM);
		return NULL;
	}
	return m->buf + off;
}

void *kr_tx_open(kr_tx *tx, kr_oid oid)
{
	if (tx_usable(tx))
		return NULL;
	struct mbuf *m = mbuf_get(tx, oid);
	return m ? kr_tx_add(tx, oid, 0, m->size) : NULL;
}

const void *kr_tx_get(kr_tx *tx, kr_oid oid)
{
	if (tx_usable(tx))
		return NULL;
	struct mbuf *m = mbuf_find(tx, oid);
	if (m && m->in_place && !m->freed) /* its bytes are at home */
		return (const uint8_t *)tx->pool->pm.base + oid;
	if (!m || (!m->buf && !m->fresh)) {
		if (m && m->freed) {
			kr_err_set(KR_E_MISUSE_FREED, "object 0x%llx was freed in this transaction",
				   (unsigned long long)oid);
			return NULL;
		}
		return kr_get(tx->pool, oid);
	}
	if (m->freed) {
		kr_err_set(KR_E_MISUSE_FREED, "object 0x%llx was freed in this transaction",
			   (unsigned long long)oid);
		return NULL;
	}
	if (!m->buf && mbuf_alloc_buf(tx, m, 1) != KR_OK) { /* fresh: its zeros */
		tx_fail(tx, KR_E_NOMEM);
		return NULL;
	}
	if (!m->full) {
		/* The whole object is read now: verify it whole. */
		int rc = m->by_block ? range_verify(tx->pool, m, 0, m->size) : KR_OK;
		if (rc) {
			tx_fail(tx, rc);
			return NULL;
		}
		mbuf_fill_gaps(tx->pool, m, 0, m->size);
		m->full = 1;
	}
	m->handed = 1;
	return m->buf;
}

static int feat(const kr_pool *pool, unsigned f) { return (pool->hdr.ro_compat & f) != 0; }

/* Objects up to this size are logged whole; larger ones are written home directly, behind
 * an intent when the pool keeps parity (one more log commit and fence), and fenced before
 * the commit (one more fence; see tx_add_fresh), amortised over the size. Measured on AMD
 * Zen 4 (full protection, alloc workload, with the intent only): direct is 17 % slower at
 * 256 B and 6 % at 1 KiB, 3 % faster at 2 KiB, 8 % at 3 KiB and 12 % at 4 KiB. */
#define FRESH_LOG_MAX 1024
/* In page-cache mode a fence is a round trip to the storage device, which the intent adds,
 * while a logged object costs only its bytes within the commit's own trip: objects up to
 * this size are logged there, as long as the commit's logged objects fit a quarter of the
 * lane. A 4 KiB insert on ext4 took 2.15 syncs and 452 us with the intent (kv-files). */
#define FRESH_LOG_MAX_LAZY (64u << 10)

/* Which new objects the commit logs whole (m->log_whole): decided once, before the commit
 * bounds its log entry (tx_lines_bound) and commits its intents. */
static void fresh_choose(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	uint64_t budget = kr_pm_lazy(&pool->pm) ? (uint64_t)pool->log.lane_lines * KR_LINE_PAYLOAD / 4 : 0;
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		m->log_whole = m->home = 0;
		if (!m->fresh || m->freed)
			continue;
		if (m->size <= FRESH_LOG_MAX) {
			m->log_whole = 1;
		} else if (m->size <= FRESH_LOG_MAX_LAZY && m->size <= budget) {
			m->log_whole = 1;
			budget -= m->size;
		} else if (m->in_place) {
			/* Written in place: its bytes are home already, behind the intent that
			 * kr_tx_add_in_place made durable. Streamed, they would be written twice
			 * more (swapped back out, then in again). */
			m->home = 1;
		}
	}
}

/* A new object's header for payload (its buffer, or home for one committed at home). */
static struct kr_obj_hdr fresh_header(const kr_pool *pool, const struct mbuf *m, const uint8_t *payload)
{
	struct kr_obj_hdr h = {.size = m->size, .type = m->type, .crc = 0};
	/* A buffer never handed out is still all zeros (kr_tx_alloc's calloc): its checksum
	 * needs no pass over it. */
	if (feat(pool, KR_FEAT_RO_OBJ_CSUM))
		h.crc = m->handed ? kr_obj_crc(&h, payload) : kr_obj_crc_zeros(&h);
	return h;
}

/* A fresh object never handed out is zeros. Where its block already holds zeros at home
 * (space not used since the pool was made, or freed as zeros), its payload need not be
 * written: neither logged nor streamed home, and no intent. A block past the heap's fresh
 * frontier is known to (kr_block.fresh); any other is read. What is read at home is
 * durable: an older transaction's writes there are fenced before the block is handed out
 * again (heap invariant 3 for committed ones; kr_tx_commit fences the direct writes of a
 * commit that fails). Inside the commit gate: home bytes do not move under a repair. */
static void fresh_mark_zeros(struct kr_tx *tx)
{
	const uint8_t *base = (const uint8_t *)tx->pool->pm.base;
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		m->over_zeros = m->fresh && !m->freed && !m->handed &&
				(m->block.fresh || kr_all_zero(base + m->oid, m->size));
}

/* A new object. Over zeros: its header alone, in a DATA record. Logged: header + payload in
 * one DATA record, applied (with its parity) after the fence like any change. Direct: the
 * payload streams home now (behind an intent if the pool keeps parity; written in place, it
 * is home already and only flushed), kr_tx_commit fences it before the commit, and the
 * header alone is logged. Older builds logged a FRESH record instead, whose payload
 * recovery checks against a CRC-64 to tell a commit whose fence never completed; but a
 * store into the object after the commit returned (not yet persisted) fails that check too,
 * and the committed object was lost (test_after_commit). One fence buys certainty. */
static int tx_add_fresh(struct kr_tx *tx, struct mbuf *m)
{
	kr_pool *pool = tx->pool;
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	int rc = !m->over_zeros && !m->buf ? mbuf_alloc_buf(tx, m, 1) : KR_OK; /* zeros to write */
	if (rc)
		return rc;
	struct kr_obj_hdr hdr = fresh_header(pool, m, m->home ? home : m->buf);
	if (m->home) {
		/* Written in place: parity goes from what the block held (buf) to home's bytes,
		 * which are flushed where they are. The buffer leaves the in-flight list with
		 * the patch: parity reflects home from here. */
		mbuf_patch_home(pool, m, 0, m->size, 0); /* its header is new, made from home */
		inflight_lock(pool);
		inflight_leave(pool, m);
		m->home_patched = 1;
		inflight_unlock(pool);
		tx->direct = 1;
	} else if (!m->over_zeros && !m->log_whole) {
		kr_redund_write_direct(&pool->redund, m->oid, m->buf, m->size);
		tx->direct = 1;
	}
	uint64_t n = m->log_whole && !m->over_zeros ? m->size : 0;
	uint8_t *d = kr_img_data(&tx->img, m->block.off, (uint32_t)(sizeof(hdr) + n));
	if (!d)
		return kr_errcode();
	memcpy(d, &hdr, sizeof(hdr));
	if (n)
		memcpy(d + sizeof(hdr), m->buf, n);
	return KR_OK;
}

/* With parity, direct writes need their ranges durable first (an intent), or a crash could
 * leave them in the data rows with no record of where parity must be recomputed. */
static int tx_commit_intents(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	if (!feat(pool, KR_FEAT_RO_PARITY))
		return KR_OK;
	kr_img_reset(&tx->img);
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (m->fresh && !m->freed && !m->over_zeros && !m->log_whole && !m->home &&
		    kr_img_intent(&tx->img, m->oid, m->size))
			return kr_errcode();
	if (tx->img.nrecords == 0)
		return KR_OK;
	return kr_log_commit_intent(&pool->log, tx->lane, &tx->img);
}

/* The new checksum of a changed object, patched for its changed ranges only: for each
 * range, CRC of (old ^ new) shifted past the bytes after it (csum.c). new_crc: kr_crc32c of
 * the range's new bytes when there is one range, the whole object. */
static uint32_t object_new_crc(struct kr_tx *tx, const struct mbuf *m, uint32_t new_crc)
{
	kr_pool *pool = tx->pool;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + m->block.off);
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	if (m->nranges == 1 && m->ranges[0].start == 0 && m->ranges[0].end == m->size)
		return kr_obj_crc_combine(hdr, new_crc); /* the old bytes need not be read */
	uint32_t crc = hdr->crc;
	for (uint32_t i = 0; i < m->nranges; i++) {
		const struct range *r = &m->ranges[i];
		crc ^= kr_crc32c_delta2(home + r->start, m->buf + r->start, r->end - r->start,
					m->size - r->end);
	}
	return crc;
}

/* The checksum's own DATA record, for the header's crc field. */
static int tx_add_object_crc(struct kr_tx *tx, struct mbuf *m, uint32_t new_crc)
{
	uint32_t *d = kr_img_data(&tx->img, m->block.off + offsetof(struct kr_obj_hdr, crc), 4);
	if (!d)
		return kr_errcode();
	*d = object_new_crc(tx, m, new_crc);
	return KR_OK;
}

/* The checksum of an object with declared stores (kr_tx_add_stored): patched for them from
 * the DRAM copy's old bytes, or recomputed over the object as it will be (home, which holds
 * the old bytes of the declared ranges since the swap, and the buffer their new ones). */
static int tx_add_stored_crc(struct kr_tx *tx, struct mbuf *m)
{
	kr_pool *pool = tx->pool;
	const struct kr_obj_hdr *hdr = (const struct kr_obj_hdr *)(pool->pm.base + m->block.off);
	const uint8_t *home = (const uint8_t *)pool->pm.base + m->oid;
	/* The header's CRC now, not at the declaration: other transactions may have patched it
	 * for their ranges since (under the object's stripe, which this commit holds now). */
	m->crc_base = hdr->crc;
	uint32_t crc = m->crc_base ^ m->crc_delta;
	if (m->crc_whole) {
		/* The object as it will be: home, this buffer's new bytes, and for ranges other
		 * transactions have in flight on it, their old bytes (their commits patch the
		 * checksum for their own changes, after this one: crc_stripes). */
		uint8_t *img = kr_malloc(m->size);
		if (!img)
			return kr_err_set(KR_E_NOMEM, "checksum of a %llu-byte object",
					  (unsigned long long)m->size);
		memcpy(img, home, m->size);
		for (uint32_t i = 0; i < m->nranges; i++)
			memcpy(img + m->ranges[i].start, m->buf + m->ranges[i].start,
			       m->ranges[i].end - m->ranges[i].start);
		inflight_lock(pool);
		for (const struct mbuf *o = pool->tx->inflight; o; o = o->inext)
			for (uint32_t i = 0; o != m && o->oid == m->oid && !o->swapped && i < o->nranges; i++)
				memcpy(img + o->ranges[i].start, o->buf + o->ranges[i].start,
				       o->ranges[i].end - o->ranges[i].start);
		inflight_unlock(pool);
		crc = kr_obj_crc(hdr, img);
		free(img);
	}
	uint32_t *d = kr_img_data(&tx->img, m->block.off + offsetof(struct kr_obj_hdr, crc), 4);
	if (!d)
		return kr_errcode();
	*d = crc;
	return KR_OK;
}

/* The crc field is the header's last word, just before the payload: a first range at offset
 * 0 takes it into its own record, which saves the checksum a record of its own (24 bytes:
 * a 64-byte overwrite's entry fits 2 log lines instead of 3, in each copy). Up to this range
 * size, where a line matters and the checksum's extra pass over a whole rewrite is short. */
#define CRC_MERGE_MAX 1024
_Static_assert(offsetof(struct kr_obj_hdr, crc) + sizeof(uint32_t) == sizeof(struct kr_obj_hdr),
	       "the crc field ends where the payload begins");

static int crc_merged(const kr_pool *pool, const struct mbuf *m)
{
	return feat(pool, KR_FEAT_RO_OBJ_CSUM) && !m->crc_own && m->nranges && m->ranges[0].start == 0 &&
	       m->ranges[0].end <= CRC_MERGE_MAX;
}

/* The redo records of an existing object's changed ranges, and of its checksum. Each range
 * is checksummed as it is copied: the log's CRC of the image and, for a whole rewrite, the
 * object's new checksum come from that pass. */
static int tx_add_ranges(struct kr_tx *tx, struct mbuf *m)
{
	kr_pool *pool = tx->pool;
	uint32_t crc = 0, i = 0;
	int rc = KR_OK;
	if (crc_merged(pool, m)) {
		uint32_t len = (uint32_t)m->ranges[0].end;
		uint32_t obj = object_new_crc(tx, m, m->nranges == 1 && len == m->size ? kr_crc32c(m->buf, len) : 0);
		rc = kr_img_data_copy_after(&tx->img, m->oid - sizeof(obj), &obj, sizeof(obj), m->buf, len, &crc);
		i = 1;
	}
	for (; i < m->nranges && rc == KR_OK; i++) {
		const struct range *r = &m->ranges[i];
		rc = kr_img_data_copy(&tx->img, m->oid + r->start, m->buf + r->start, (uint32_t)(r->end - r->start),
				      &crc);
	}
	if (rc == KR_OK && m->nranges && feat(pool, KR_FEAT_RO_OBJ_CSUM) && !crc_merged(pool, m))
		rc = m->crc_own ? tx_add_stored_crc(tx, m) : tx_add_object_crc(tx, m, crc);
	return rc;
}

static int tx_build_image(struct kr_tx *tx)
{
	kr_pool *pool = tx->pool;
	kr_img_reset(&tx->img);
	int rc = kr_heap_rec_runs(&pool->heap, tx->lane, &tx->img); /* before the allocations */
	for (struct mbuf *m = tx->mbufs; m && rc == KR_OK; m = m->next) {
		if (m->freed) {
			if (!m->fresh)
				rc = kr_heap_rec_free(&pool->heap, &m->block, &tx->img);
			continue;
		}
		if (m->fresh) {
			rc = tx_add_fresh(tx, m);
			if (rc == KR_OK)
				rc = kr_heap_rec_alloc(&pool->heap, &m->block, &tx->img);
			continue;
		}
		if (m->home) /* committed at home (tx_home_write) */
			continue;
		rc = tx_add_ranges(tx, m);
	}
	if (rc == KR_OK && tx->root_oid) {
		struct kr_root_line rl = {.root_oid = tx->root_oid, .root_size = tx->root_size};
		rl.crc = kr_crc32c(&rl, offsetof(struct kr_root_line, crc));
		for (int i = 0; i < 2 && rc == KR_OK; i++) {
			void *d = kr_img_data(&tx->img, (uint64_t)((char *)pool->root[i] - pool->pm.base),
					      sizeof(rl));
			if (d)
				memcpy(d, &rl, sizeof(rl));
			else
				rc = kr_errcode();
		}
	}
	return rc;
}

/* After the apply: the DRAM block checksums of a changed object follow its new bytes. One
 * rewritten mostly is forgotten instead; its next opening verifies it whole, which costs
 * what recomputing its blocks would. */
static void vcache_follow(kr_pool *pool, const struct mbuf *m)
{
	uint64_t written = 0;
	for (uint32_t i = 0; i < m->nranges; i++)
		written += m->ranges[i].end - m->ranges[i].start;
	if (written > m->size / 2) {
		kr_vcache_drop(&pool->tx->vcache, m->oid, m->size);
		return;
	}
	for (uint32_t i = 0; i < m->nranges; i++)
		kr_vcache_update(&pool->tx->vcache, m->oid, m->size, (const uint8_t *)pool->pm.base + m->oid,
				 m->ranges[i].start, m->ranges[i].end);
}

static uint32_t object_crc_of(void *hdr, const uint8_t *payload)
{
	return kr_obj_crc(hdr, payload);
}

/* After the apply: the object's DRAM copy follows a declaration (shadow.h). A recomputed
 * checksum covers every byte at home, so only a copy of them all may go with it. */
static void shadow_follow(kr_pool *pool, const struct mbuf *m)
{
	struct kr_obj_hdr *hdr = (struct kr_obj_hdr *)(pool->pm.base + m->block.off);
	if (m->crc_whole || m->crc_base != m->stored_crc) /* the copy misses others' changes */
		kr_shadow_drop(&pool->tx->shadow, m->oid);
	kr_shadow_follow(&pool->tx->shadow, m->oid, m->size, m->stored_crc, hdr->crc, m->buf,
			 (const uint64_t *)m->ranges, m->nranges, (const uint8_t *)pool->pm.base + m->oid,
			 object_crc_of, hdr);
}

int kr_tx_commit(kr_tx *tx)
{
	int rc = tx_owned(tx);
	if (rc)
		return rc;
	kr_pool *pool = tx->pool;
	if ((rc = tx_usable(tx))) { /* sticky error: the transaction aborts */
		tx_end(tx, 0, 0);
		return rc;
	}

	/* 1. A micro-buffer overrun means the application scribbled: nothing may reach NVMM. */
	for (struct mbuf *m = tx->mbufs; m; m = m->next)
		if (m->buf && !canary_ok(m)) {
			rc = kr_err_set(KR_E_CANARY, "micro-buffer of object 0x%llx (%llu bytes) overrun",
					(unsigned long long)m->oid, (unsigned long long)m->size);
			tx_end(tx, 0, 0);
			return rc;
		}

	fresh_choose(tx);

	/* Room in the lane before any checksum stripe is held. A lane short of room waits for
	 * durable_seq, which another thread's open in-place transaction holds back (log.c
	 * invariant 7); that transaction's commit must be able to take our stripes meanwhile,
	 * or neither moves. (A transaction with undo of its own keeps its room: the lane's
	 * last quarter, kr_log_undo_fits.) */
	if (!tx->undo_first) {
		uint32_t bound = tx_lines_bound(tx);
		if (bound <= pool->log.lane_lines && (rc = kr_log_wait_room(&pool->log, tx->lane, bound))) {
			tx_end(tx, 0, 0);
			return rc;
		}
	}

	/* 2-3. Intents for large new objects (parity only), new objects home, redo image. From
	 * here to the end of the apply, home bytes and parity change: inside the commit gate. */
	struct crc_set stripes;
	crc_stripes(tx, &stripes);
	crc_lock(pool, &stripes);
	kr_log_enter(&pool->log, tx->lane);
	int home = tx_home_mark(tx);
	int crcs_in_commit = home && feat(pool, KR_FEAT_RO_OBJ_CSUM) && home_crcs_in_commit(tx);
	if (home && !crcs_in_commit && feat(pool, KR_FEAT_RO_OBJ_CSUM))
		rc = tx_home_undo(tx);
	tx_swap_in_place(tx);
	if (rc == KR_OK)
		rc = tx_lost(tx);
	fresh_mark_zeros(tx);
	if (rc == KR_OK)
		rc = tx_commit_intents(tx);
	if (rc == KR_OK)
		rc = tx_build_image(tx);
	/* Direct payloads durable before the entry that makes their objects live (tx_add_fresh);
	 * a home commit fences them with its home bytes (tx_home_write). */
	if (rc == KR_OK && tx->direct && !home)
		rc = kr_pm_fence(&pool->pm);
	if (home && rc == KR_OK && (rc = kr_img_cancel(&tx->img, tx->undo_first)) == KR_OK &&
	    (!crcs_in_commit || (rc = tx_home_crcs(tx)) == KR_OK) && (rc = tx_last_room(tx)) == KR_OK &&
	    (rc = tx_home_write(tx)) != KR_OK)
		kr_pool_fail(pool, rc); /* fenced or not, the undo still rules: a reopen recovers */
	/* A media repair since tx_lost may have taken stores of a buffer never traded (a new
	 * object written in place, a home commit's ranges): this thread's own fault in the
	 * steps above, or another thread's while this one waited for a parity lock outside
	 * the gate. A home commit has made home and parity new already: only its undo can
	 * settle it now, at the next open. */
	if (rc == KR_OK && (rc = tx_lost(tx)) != KR_OK && home)
		kr_pool_fail(pool, rc);

	if (rc == KR_OK && tx->img.nrecords == 0) {
		kr_log_exit(&pool->log, tx->lane);
		crc_unlock(pool, &stripes);
		tx_end(tx, 1, 0); /* read-only: nothing to make durable */
		return KR_OK;
	}

	/* 4. The commit point: one fence. */
	uint64_t seq = 0;
	if (rc == KR_OK && home && (rc = kr_log_commit_last(&pool->log, tx->lane, &tx->img, &seq)))
		kr_pool_fail(pool, rc); /* after tx_home_write: only the undo can settle it now */
	else if (rc == KR_OK && !home)
		rc = kr_log_commit(&pool->log, tx->lane, &tx->img, &seq);
	if (rc && seq == 0) {
		/* Direct writes stay in their blocks, which are free again at once: fenced
		 * first, so that whatever a later allocation finds there is durable
		 * (fresh_mark_zeros). Only on this failure path. */
		if (tx->direct) {
			int frc = kr_pm_fence(&pool->pm);
			if (frc)
				kr_pool_fail(pool, frc);
		}
		kr_log_exit(&pool->log, tx->lane);
		crc_unlock(pool, &stripes);
		tx_end(tx, 0, 0);
		return rc;
	}
	if (rc) /* fenced but msync failed: durability unknown */
		kr_pool_fail(pool, rc);

	/* 5. Apply home, flushed, not fenced. */
	kr_log_apply(&pool->log, tx->lane, &tx->img);
	kr_log_applied(&pool->log, tx->lane, seq);
	if (home)
		tx_home_leave(tx);
	kr_log_exit(&pool->log, tx->lane);

	/* 6. DRAM allocator state and block checksums. */
	for (struct mbuf *m = tx->mbufs; m; m = m->next) {
		if (m->fresh && !m->freed)
			kr_heap_commit_alloc(&pool->heap, &m->block);
		else if (m->freed && !m->fresh) {
			/* Debug mode: the trap is set before the block can be released. */
			if (__builtin_expect(pool->debug != NULL, 0))
				kr_debug_freed(pool, &m->block, m->oid, m->size);
			kr_vcache_drop(&pool->tx->vcache, m->oid, m->size);
			kr_shadow_drop(&pool->tx->shadow, m->oid);
			kr_heap_commit_free(&pool->heap, &m->block, seq);
		} else if (m->nranges) {
			vcache_follow(pool, m);
			if (m->stored && feat(pool, KR_FEAT_RO_OBJ_CSUM))
				shadow_follow(pool, m);
		}
	}
	crc_unlock(pool, &stripes);
	kr_heap_release(&pool->heap);
	tx_end(tx, 1, seq);
	return rc;
}

void kr_tx_abort(kr_tx *tx)
{
	if (tx_owned(tx) == KR_OK)
		tx_end(tx, 0, 0);
}

int kr_update(kr_pool *pool, kr_oid oid, size_t off, const void *src, size_t len)
{
	kr_tx *tx;
	if (!src)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_update: src is NULL");
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	void *dst = kr_tx_add(tx, oid, off, len);
	if (dst)
		memcpy(dst, src, len);
	return kr_tx_commit(tx);
}

int kr_root(kr_pool *pool, size_t size, kr_oid *oid)
{
	if (!pool || !oid)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_root: NULL argument");
	int rc = kr_pool_usable(pool);
	if (rc)
		return rc;
	pthread_mutex_lock(&pool->tx->root_lock);
	uint64_t cur = pool->root[0]->root_oid;
	if (cur) {
		uint64_t cur_size = pool->root[0]->root_size;
		pthread_mutex_unlock(&pool->tx->root_lock);
		if (size > cur_size)
			return kr_err_set(KR_E_MISUSE_ARG, "root object is %llu bytes; %zu requested",
					  (unsigned long long)cur_size, size);
		*oid = cur;
		return KR_OK;
	}
	kr_tx *tx;
	rc = kr_tx_begin(pool, &tx);
	if (rc == KR_OK) {
		kr_oid r = 0;
		if (kr_tx_alloc(tx, size, 0, &r) == KR_OK) {
			tx->root_oid = r;
			tx->root_size = size;
		}
		rc = kr_tx_commit(tx);
		if (rc == KR_OK)
			*oid = r;
	}
	pthread_mutex_unlock(&pool->tx->root_lock);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Reads outside transactions
 * ------------------------------------------------------------------------------------- */
/* The committed header of a live object, or NULL (thread error set). */
static const struct kr_obj_hdr *live_header(kr_pool *pool, kr_oid oid)
{
	struct kr_block b;
	const struct kr_obj_hdr *hdr = NULL;
	if (!pool) {
		kr_err_set(KR_E_MISUSE_ARG, "pool is NULL");
		return NULL;
	}
	if (object_header(pool, oid, &b, &hdr) != KR_OK)
		return NULL;
	/* Conservative policy: every read verifies (and repairs) first. */
	if (atomic_load_explicit(&pool->read_policy, memory_order_relaxed) == KR_READ_CONSERVATIVE &&
	    feat(pool, KR_FEAT_RO_OBJ_CSUM) && object_verify_repair(pool, oid, &b, NULL, NULL) != KR_OK)
		return NULL;
	return hdr;
}

const void *kr_get(kr_pool *pool, kr_oid oid)
{
	return live_header(pool, oid) ? pool->pm.view + oid : NULL;
}

size_t kr_size(kr_pool *pool, kr_oid oid)
{
	const struct kr_obj_hdr *hdr = live_header(pool, oid);
	return hdr ? hdr->size : 0;
}

uint32_t kr_type(kr_pool *pool, kr_oid oid)
{
	const struct kr_obj_hdr *hdr = live_header(pool, oid);
	return hdr ? hdr->type : 0;
}

kr_oid kr_first(kr_pool *pool) { return pool ? kr_heap_next(&pool->heap, 0) : KR_OID_NULL; }

kr_oid kr_next(kr_pool *pool, kr_oid oid)
{
	return pool && oid ? kr_heap_next(&pool->heap, oid) : KR_OID_NULL;
}
