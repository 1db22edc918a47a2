/*
 * heap.c - the persistent allocator.
 *
 * Design
 *
 *   Each zone's data rows start with its metadata: one 144-byte record per chunk holding
 *   the chunk word and the run bitmap (layout.h). A chunk is FREE, a RUN of equal blocks of one size
 *   class, or the head of a LARGE extent of whole chunks. The persistent metadata changes
 *   only through redo records committed by the log, so every allocation and free is atomic
 *   with the transaction that makes it:
 *     alloc in a run   SETBITS on the run's bitmap word        (commutes with other threads')
 *     free in a run    CLRBITS on it
 *     alloc an extent  DATA: head chunk word = LARGE(n)
 *     free an extent   DATA: head chunk word = FREE
 *     new run          DATA: chunk word = RUN(class) + zeroed bitmap, in the commit of
 *                      the transaction that needed it (kr_heap_rec_runs), before its
 *                      allocations there: no commit, and no fence or sync, of its own
 *     reclaim runs     DATA: chunk word = FREE for runs with no live block (an internal
 *                      transaction)
 *
 *   A new run belongs to the lane whose transaction made it until that transaction ends
 *   (kr_heap_end_runs): only it allocates there, so no other commit can depend on a run
 *   that may never be committed. Committed, the run joins the others; otherwise, empty
 *   again, its chunk is free again.
 *
 *   The DRAM state mirrors it with more detail: a block can also be reserved (taken by an
 *   uncommitted transaction) or freeing (freed by a committed transaction whose free is not
 *   yet below the log's durable sequence number).
 *
 *   Invariants
 *   1. alloc bits (DRAM) == the persistent bitmap, after every commit and after load.
 *   2. busy bits >= alloc bits: reserved and freeing blocks are busy but not allocated.
 *   3. A block or extent freed by transaction s is not handed out again until
 *      s <= durable_seq (kr_heap_release); otherwise a crash could replay an older
 *      transaction's write over the new owner's directly written content.
 *   4. used_bytes + free_bytes + (reserved, freeing and run-tail bytes) == bytes of chunks.
 *   5. No chunk at or past the fresh frontier (h->fresh) is in use or holds a nonzero byte,
 *      nor does any block of a run at or past its r->fresh: the frontier moves past a chunk
 *      when it is taken, before anything is written there (kr_heap_audit checks both).
 *   6. A new run (kr_run.owner set) gives blocks only to its lane's transaction, and its
 *      chunk record reaches the media only in that transaction's commit, ahead of the
 *      allocations in it (kr_heap_rec_runs): a committed transaction with a block of it
 *      recorded it.
 *   7. No thread holding h->lock waits at the commit gate: internal transactions commit
 *      without it (runs_reclaim), since a thread inside the gate may take it (a spill
 *      segment's kr_heap_reserve) while a repair waits for that thread to leave.
 *
 *   kr_heap_lookup() runs without the lock: chunk types and alloc words are atomics, and a
 *   run's DRAM struct, once created for a chunk, lives until the heap is torn down.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fault.h"
#include "grow.h"
#include "heap.h"
#include "invariant.h"

enum {
	D_FREE = 0,
	D_RUN,
	D_LARGE,          /* live extent head */
	D_LARGE_RESERVED, /* extent head taken by an uncommitted transaction */
	D_LARGE_FREEING,  /* extent head freed, awaiting durable_seq */
	D_BODY,           /* non-head chunk of an extent in any of the three states above */
};

#define RUN_WORDS (KR_RUN_BITMAP_BYTES / 8)

struct kr_run {
	_Atomic uint64_t alloc[RUN_WORDS];
	uint64_t busy[RUN_WORDS];
	uint32_t nblocks, nbusy;
	/* Blocks at or past this index have held nothing since the run was made over a fresh
	 * chunk (blocks are taken lowest first); nblocks when not known. */
	uint32_t fresh;
	uint8_t in_avail; /* the run's size class is its chunk's (kr_chunk_dram.cls) */
	uint8_t recorded; /* new: its records are in its transaction's commit image */
	/* New, not committed yet: 1 + the index of the lane whose transaction made it (and
	 * alone allocates there), and 1 + the chunk id of that lane's next new run. */
	uint32_t owner, next_new;
};

struct kr_chunk_dram {
	_Atomic uint8_t type;
	/* A run's size class, also in its kr_run: here, beside type, a lookup learns the block
	 * size without reaching the run, and so can fetch the allocation bit and the object's
	 * header at once instead of one after the other (kr_heap_owner). */
	uint8_t cls;
	/* At an extent's head, its length in chunks; at a body chunk, how far back its head is
	 * (kr_heap_owner finds the head of any byte of an extent in one step). */
	uint32_t n;
	struct kr_run *run;
};

struct kr_pending {
	uint64_t seq;
	uint32_t gid;   /* global chunk id */
	uint32_t index; /* block index, or UINT32_MAX for an extent */
};

/* ---------------------------------------------------------------------------------------
 * Geometry helpers
 * ------------------------------------------------------------------------------------- */
static char *zone_base(struct kr_heap *h, uint32_t z)
{
	return h->pm->base + kr_geom_zone_start(&h->g, z);
}

static struct kr_chunk_meta *chunk_meta(struct kr_heap *h, uint32_t gid)
{
	return (struct kr_chunk_meta *)zone_base(h, gid / h->chunks_per_zone) + gid % h->chunks_per_zone;
}

static uint64_t *chunk_word(struct kr_heap *h, uint32_t gid) { return &chunk_meta(h, gid)->word; }

static uint64_t *run_bitmap(struct kr_heap *h, uint32_t gid) { return chunk_meta(h, gid)->bitmap; }

static uint64_t chunk_off(struct kr_heap *h, uint32_t gid)
{
	return kr_geom_zone_start(&h->g, gid / h->chunks_per_zone) +
	       (uint64_t)h->meta_pages * KR_PAGE_SIZE +
	       (uint64_t)(gid % h->chunks_per_zone) * KR_CHUNK_SIZE;
}

static uint64_t pool_off(struct kr_heap *h, const void *p) { return (uint64_t)((const char *)p - h->pm->base); }

/* Compared with a page of zeros by libc's vectorised memcmp, a page at a time. */
int kr_all_zero(const void *p, uint64_t n)
{
	static const uint8_t zeros[KR_PAGE_SIZE];
	for (uint64_t i = 0; i < n; i += sizeof(zeros)) {
		uint64_t k = n - i < sizeof(zeros) ? n - i : sizeof(zeros);
		if (memcmp((const uint8_t *)p + i, zeros, k))
			return 0;
	}
	return 1;
}

static const uint8_t *chunk_base(struct kr_heap *h, uint32_t gid)
{
	return (const uint8_t *)h->pm->base + chunk_off(h, gid);
}

/* The smallest class whose blocks hold total bytes, or -1 (binary search: the table
 * increases). */
static int size_class(const struct kr_heap *h, uint64_t total)
{
	if (total > h->classes[h->nclasses - 1])
		return -1;
	unsigned lo = 0, hi = h->nclasses - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (h->classes[mid] >= total)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (int)lo;
}

static uint32_t run_nblocks(const struct kr_heap *h, unsigned cls)
{
	return KR_CHUNK_SIZE / h->classes[cls];
}

static void block_of_run(struct kr_heap *h, uint32_t gid, uint32_t index, struct kr_block *b)
{
	b->bytes = h->classes[h->chunks[gid].cls];
	b->off = chunk_off(h, gid) + (uint64_t)index * b->bytes;
	b->zone = gid / h->chunks_per_zone;
	b->chunk = gid % h->chunks_per_zone;
	b->index = index;
	b->nchunks = 0;
	b->fresh = 0;
}

/* The index of the run block holding chunk offset coff, if a block holds it (a run's tail
 * past its last block holds none). From the chunk's DRAM entry alone: see kr_chunk_dram.cls. */
static int run_block_at(const struct kr_heap *h, uint32_t gid, uint64_t coff, uint32_t *idx)
{
	uint32_t bs = h->classes[h->chunks[gid].cls];
	*idx = (uint32_t)(coff / bs);
	return (uint64_t)(*idx + 1) * bs <= KR_CHUNK_SIZE;
}

/* Whether block idx of run gid (at b) is allocated. Callers read the object's header next:
 * it is fetched now, so that its cache miss and the run's bitmap's overlap. */
static int run_allocated(const struct kr_heap *h, uint32_t gid, uint32_t idx, const struct kr_block *b)
{
	__builtin_prefetch(h->pm->base + b->off);
	const struct kr_run *r = h->chunks[gid].run;
	return atomic_load_explicit(&r->alloc[idx / 64], memory_order_acquire) >> (idx % 64) & 1;
}

/* Chunks gid+1 .. gid+n-1 become the body of the extent at gid, each naming its distance
 * back to the head before its type says body (kr_heap_owner reads them without the lock). */
static void mark_body(struct kr_heap *h, uint32_t gid, uint32_t n)
{
	for (uint32_t k = 1; k < n; k++) {
		__atomic_store_n(&h->chunks[gid + k].n, k, __ATOMIC_RELAXED);
		atomic_store_explicit(&h->chunks[gid + k].type, D_BODY, memory_order_release);
	}
}

static void block_of_extent(struct kr_heap *h, uint32_t gid, uint32_t n, struct kr_block *b)
{
	b->off = chunk_off(h, gid);
	b->bytes = (uint64_t)n * KR_CHUNK_SIZE;
	b->zone = gid / h->chunks_per_zone;
	b->chunk = gid % h->chunks_per_zone;
	b->index = UINT32_MAX;
	b->nchunks = n;
	b->fresh = 0;
}

static uint32_t block_gid(struct kr_heap *h, const struct kr_block *b)
{
	return b->zone * h->chunks_per_zone + b->chunk;
}

/* ---------------------------------------------------------------------------------------
 * Setup and load
 * ------------------------------------------------------------------------------------- */
int kr_heap_init(struct kr_heap *h, struct kr_pm *pm, struct kr_log *log,
		 const struct kr_pool_hdr *hdr)
{
	memset(h, 0, sizeof(*h));
	h->pm = pm;
	h->log = log;
	h->g = kr_geom_of(hdr);
	h->chunks_per_zone = hdr->chunks_per_zone;
	h->meta_pages = hdr->zone_meta_pages;
	h->classes = kr_class_table(hdr->incompat, &h->nclasses);
	atomic_store(&h->release_at, UINT64_MAX);
	h->max_alloc = (uint64_t)hdr->chunks_per_zone * KR_CHUNK_SIZE - sizeof(struct kr_obj_hdr);
	pthread_mutex_init(&h->lock, NULL);
	h->chunks = kr_calloc((size_t)h->g.nzones * h->chunks_per_zone, sizeof(*h->chunks));
	if (!h->chunks)
		return kr_err_set(KR_E_NOMEM, "heap chunk table");
	h->fresh = h->g.nzones * h->chunks_per_zone; /* unknown until kr_heap_set_fresh */
	return KR_OK;
}

void kr_heap_fini(struct kr_heap *h)
{
	if (h->chunks)
		for (size_t i = 0; i < (size_t)h->g.nzones * h->chunks_per_zone; i++)
			free(h->chunks[i].run);
	free(h->chunks);
	for (unsigned c = 0; c < h->nclasses; c++)
		free(h->avail[c].ids);
	free(h->pending);
	free(h->lane_runs);
	pthread_mutex_destroy(&h->lock);
	memset(h, 0, sizeof(*h));
}

#ifdef KR_DEBUG_INVARIANTS
static _Thread_local int holds_lock; /* this thread holds h->lock (invariant 7) */
#define NOTE_LOCK(v) (holds_lock = (v))
#else
#define NOTE_LOCK(v) ((void)0)
#endif

static void heap_lock(struct kr_heap *h)
{
	pthread_mutex_lock(&h->lock);
	NOTE_LOCK(1);
}

static void heap_unlock(struct kr_heap *h)
{
	NOTE_LOCK(0);
	pthread_mutex_unlock(&h->lock);
}

static int avail_push(struct kr_heap *h, uint32_t gid)
{
	struct kr_run *r = h->chunks[gid].run;
	if (r->in_avail || r->owner) /* a new run is its transaction's alone */
		return KR_OK;
	typeof(h->avail[0]) *a = &h->avail[h->chunks[gid].cls];
	if (KR_GROW(a->ids, a->cap, a->n + 1u, 16))
		return kr_err_set(KR_E_NOMEM, "run list");
	a->ids[a->n++] = gid;
	r->in_avail = 1;
	return KR_OK;
}

/* Gives chunk gid a DRAM run of class cls with the given allocation bitmap; owner: see
 * kr_run (0 for a run on media). */
static int run_attach(struct kr_heap *h, uint32_t gid, unsigned cls, const uint64_t *bits,
		      uint32_t owner)
{
	struct kr_chunk_dram *c = &h->chunks[gid];
	if (!c->run && !(c->run = kr_calloc(1, sizeof(struct kr_run))))
		return kr_err_set(KR_E_NOMEM, "run");
	struct kr_run *r = c->run;
	c->cls = (uint8_t)cls;
	r->nblocks = run_nblocks(h, cls);
	r->nbusy = 0;
	r->in_avail = 0;
	r->owner = owner; /* before avail_push, which keeps a new run out of the lists */
	r->recorded = 0;
	r->fresh = r->nblocks; /* run_create knows better for a run over a fresh chunk */
	for (unsigned w = 0; w < RUN_WORDS; w++) {
		atomic_store_explicit(&r->alloc[w], bits[w], memory_order_relaxed);
		r->busy[w] = bits[w];
		r->nbusy += (uint32_t)__builtin_popcountll(bits[w]);
	}
	atomic_store_explicit(&c->type, D_RUN, memory_order_release);
	uint64_t bs = h->classes[cls];
	h->used_bytes += r->nbusy * bs;
	h->nobjects += r->nbusy;
	h->free_bytes += (r->nblocks - r->nbusy) * bs;
	return r->nbusy < r->nblocks ? avail_push(h, gid) : KR_OK;
}

int kr_heap_load(struct kr_heap *h)
{
	for (uint32_t z = 0; z < h->g.nzones; z++) {
		for (uint32_t i = 0; i < h->chunks_per_zone;) {
			uint32_t gid = z * h->chunks_per_zone + i;
			uint64_t *wp = chunk_word(h, gid);
			uint64_t w = *wp;
			switch (KR_CHUNK_TYPE(w)) {
			case KR_CHUNK_FREE:
				if (w != 0)
					return KR_CORRUPT(KR_E_CORRUPT_META, pool_off(h, wp),
							  "free chunk word has stray bits");
				h->free_bytes += KR_CHUNK_SIZE;
				i++;
				break;
			case KR_CHUNK_RUN: {
				unsigned cls = KR_CHUNK_CLASS(w);
				if (cls >= h->nclasses || (w & ~0xffffull) != 0)
					return KR_CORRUPT(KR_E_CORRUPT_META, pool_off(h, wp),
							  "run chunk word 0x%llx is invalid",
							  (unsigned long long)w);
				uint64_t bits[RUN_WORDS];
				memcpy(bits, run_bitmap(h, gid), sizeof(bits));
				uint32_t nb = run_nblocks(h, cls);
				for (uint32_t b = nb; b < RUN_WORDS * 64; b++)
					if (bits[b / 64] >> (b % 64) & 1)
						return KR_CORRUPT(KR_E_CORRUPT_META,
								  pool_off(h, run_bitmap(h, gid)),
								  "run bitmap marks block %u of %u", b, nb);
				int rc = run_attach(h, gid, cls, bits, 0);
				if (rc)
					return rc;
				h->used_end = gid + 1;
				i++;
				break;
			}
			case KR_CHUNK_LARGE: {
				uint32_t n = KR_CHUNK_NCHUNKS(w);
				if (n == 0 || n > h->chunks_per_zone - i || (w & 0xffffff00ull) != 0)
					return KR_CORRUPT(KR_E_CORRUPT_META, pool_off(h, wp),
							  "extent of %u chunks at chunk %u", n, i);
				for (uint32_t k = 1; k < n; k++)
					if (*chunk_word(h, gid + k) != 0)
						return KR_CORRUPT(KR_E_CORRUPT_META,
								  pool_off(h, chunk_word(h, gid + k)),
								  "chunk inside an extent is not free");
				__atomic_store_n(&h->chunks[gid].n, n, __ATOMIC_RELAXED);
				atomic_store(&h->chunks[gid].type, D_LARGE);
				mark_body(h, gid, n);
				h->used_bytes += (uint64_t)n * KR_CHUNK_SIZE;
				h->nobjects++;
				h->used_end = gid + n;
				i += n;
				break;
			}
			default:
				return KR_CORRUPT(KR_E_CORRUPT_META, pool_off(h, wp),
						  "unknown chunk type %u", KR_CHUNK_TYPE(w));
			}
		}
	}
	return KR_OK;
}

void kr_heap_set_fresh(struct kr_heap *h, uint64_t fresh_word)
{
	uint64_t total = (uint64_t)h->g.nzones * h->chunks_per_zone;
	uint64_t f = fresh_word ? fresh_word - 1 : total;
	if (f < h->used_end)
		f = h->used_end;
	h->fresh = (uint32_t)(f < total ? f : total);
}

uint64_t kr_heap_fresh_word(struct kr_heap *h)
{
	uint32_t total = h->g.nzones * h->chunks_per_zone;
	heap_lock(h);
	uint32_t f = h->fresh;
	heap_unlock(h);
	return f < total ? (uint64_t)f + 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * Internal transactions (run creation and reclaim), on the caller's lane
 * ------------------------------------------------------------------------------------- */
static int heap_internal_commit(struct kr_heap *h, struct kr_lane *lane, struct kr_img *img, int *applied)
{
	uint64_t seq = 0;
	KR_INVARIANT("heap.c", 7, !holds_lock);
	kr_log_enter(h->log, lane);
	int rc = kr_log_commit(h->log, lane, img, &seq);
	if (seq) {
		kr_log_apply(h->log, lane, img);
		/* Inside the caller's transaction, which may hold durable_seq below its undo: a
		 * plain kr_log_applied let it pass that undo, and a crash then kept in-place
		 * stores of a transaction that never committed. */
		kr_log_applied_inner(h->log, lane, seq);
	}
	kr_log_exit(h->log, lane);
	*applied = seq != 0;
	return rc;
}

/* Finds n contiguous free chunks inside one zone, next-fit from the cursor, and moves the
 * fresh frontier past them (before the caller can write anything there). *fresh: whether
 * all n were past the frontier, i.e. hold zeros. */
static int find_free_chunks(struct kr_heap *h, uint32_t n, uint32_t *out, uint32_t *fresh)
{
	uint32_t total = h->g.nzones * h->chunks_per_zone;
	for (uint32_t pass = 0; pass < 2; pass++) {
		uint32_t start = pass == 0 ? h->cursor : 0;
		uint32_t end = pass == 0 ? total : h->cursor;
		uint32_t run_start = start, run_len = 0;
		for (uint32_t g = start; g < end; g++) {
			if (g % h->chunks_per_zone == 0)
				run_len = 0; /* extents never cross zones */
			if (atomic_load_explicit(&h->chunks[g].type, memory_order_relaxed) != D_FREE) {
				run_len = 0;
				continue;
			}
			if (run_len == 0)
				run_start = g;
			if (++run_len == n) {
				*out = run_start;
				h->cursor = run_start + n < total ? run_start + n : 0;
				*fresh = run_start >= h->fresh;
				if (run_start + n > h->fresh)
					h->fresh = run_start + n;
				h->takes++;
				return KR_OK;
			}
		}
	}
	return KR_E_NOSPACE_HEAP;
}

/* A new run's records (chunk word and an empty bitmap) into img. */
static int rec_run(struct kr_heap *h, uint32_t gid, struct kr_img *img)
{
	/* Each filled before the next kr_img_data, which may move the image. */
	uint64_t *w = kr_img_data(img, pool_off(h, chunk_word(h, gid)), 8);
	if (!w)
		return kr_errcode();
	*w = KR_CHUNK_WORD_RUN(h->chunks[gid].cls);
	void *bm = kr_img_data(img, pool_off(h, run_bitmap(h, gid)), KR_RUN_BITMAP_BYTES);
	if (!bm)
		return kr_errcode();
	memset(bm, 0, KR_RUN_BITMAP_BYTES);
	return KR_OK;
}

/* The lane's list of new runs (kr_run.owner), made on first use. Caller holds h->lock. */
static uint32_t *lane_runs(struct kr_heap *h, const struct kr_lane *lane)
{
	if (!h->lane_runs) {
		uint32_t *l = kr_calloc(h->log->nlanes, sizeof(uint32_t));
		if (!l)
			return NULL;
		__atomic_store_n(&h->lane_runs, l, __ATOMIC_RELEASE);
	}
	return &h->lane_runs[lane->idx];
}

/* A run with no busy block goes back to the free chunks in DRAM (a new one was written
 * nowhere; a reclaimed one's chunk word was cleared by its commit). Caller holds h->lock. */
static void run_drop(struct kr_heap *h, uint32_t gid)
{
	struct kr_chunk_dram *c = &h->chunks[gid];
	c->run->owner = c->run->next_new = 0;
	h->free_bytes -= (uint64_t)c->run->nblocks * h->classes[c->cls];
	h->free_bytes += KR_CHUNK_SIZE;
	atomic_store(&c->type, D_FREE);
}

/* A new run of the lane's with no busy block goes back to the free chunks: its own
 * transaction freed what it took there (runs_reclaim leaves new runs alone). Returns how
 * many went. Caller holds h->lock. */
static unsigned lane_drop_empty(struct kr_heap *h, uint32_t *list)
{
	unsigned n = 0;
	for (uint32_t *at = list; *at;) {
		uint32_t gid = *at - 1;
		struct kr_run *r = h->chunks[gid].run;
		if (r->nbusy) {
			at = &r->next_new;
			continue;
		}
		*at = r->next_new;
		run_drop(h, gid);
		n++;
	}
	return n;
}

/* A new run in DRAM only, the lane's until its transaction ends (kr_heap_end_runs). */
static int run_create(struct kr_heap *h, struct kr_lane *lane, unsigned cls)
{
	uint32_t gid, fresh, *list = lane_runs(h, lane);
	if (!list)
		return kr_err_set(KR_E_NOMEM, "new-run lists");
	if (find_free_chunks(h, 1, &gid, &fresh) != KR_OK &&
	    (!lane_drop_empty(h, list) || find_free_chunks(h, 1, &gid, &fresh) != KR_OK))
		return KR_E_NOSPACE_HEAP;
	h->free_bytes -= KR_CHUNK_SIZE;
	static const uint64_t zero[RUN_WORDS];
	int rc = run_attach(h, gid, cls, zero, lane->idx + 1);
	if (rc)
		return rc;
	struct kr_run *r = h->chunks[gid].run;
	if (fresh)
		r->fresh = 0;
	r->next_new = *list;
	*list = gid + 1;
	return KR_OK;
}

/* 1 + the chunk id of the lane's first new run, 0 if none. Without the lock: only the
 * lane's holder changes its list. */
static uint32_t lane_first_run(const struct kr_heap *h, const struct kr_lane *lane)
{
	const uint32_t *l = __atomic_load_n(&h->lane_runs, __ATOMIC_ACQUIRE);
	return l ? l[lane->idx] : 0;
}

/* A new run of the lane's with a free block of class cls, or UINT32_MAX. */
static uint32_t lane_run_of(struct kr_heap *h, const struct kr_lane *lane, unsigned cls)
{
	for (uint32_t g = lane_first_run(h, lane); g; g = h->chunks[g - 1].run->next_new) {
		const struct kr_run *r = h->chunks[g - 1].run;
		if (h->chunks[g - 1].cls == cls && r->nbusy < r->nblocks)
			return g - 1;
	}
	return UINT32_MAX;
}

/* The two below read only the lane's new runs, which no other thread touches until the
 * transaction ends (invariant 6): no lock. A commit calls them inside the commit gate, where
 * waiting for h->lock could close a cycle with a holder of it that waits at the gate (an
 * internal transaction of runs_reclaim while a repair closes it). */
int kr_heap_rec_runs(struct kr_heap *h, const struct kr_lane *lane, struct kr_img *img)
{
	int rc = KR_OK;
	for (uint32_t g = lane_first_run(h, lane); g && rc == KR_OK; g = h->chunks[g - 1].run->next_new) {
		struct kr_run *r = h->chunks[g - 1].run;
		if (r->nbusy && (rc = rec_run(h, g - 1, img)) == KR_OK)
			r->recorded = 1;
	}
	return rc;
}

uint32_t kr_heap_new_runs(struct kr_heap *h, const struct kr_lane *lane)
{
	uint32_t n = 0;
	for (uint32_t g = lane_first_run(h, lane); g; g = h->chunks[g - 1].run->next_new)
		n++;
	return n;
}

void kr_heap_end_runs(struct kr_heap *h, struct kr_lane *lane, int committed)
{
	if (!lane_first_run(h, lane))
		return;
	heap_lock(h);
	uint32_t g = h->lane_runs[lane->idx];
	h->lane_runs[lane->idx] = 0;
	while (g) {
		uint32_t gid = g - 1;
		struct kr_run *r = h->chunks[gid].run;
		g = r->next_new;
		if (r->nbusy == 0) { /* nothing of it committed: the chunk is free again */
			run_drop(h, gid);
			continue;
		}
		/* A block of it outlives the transaction only through the commit that recorded
		 * the run: an abort has unreserved its blocks by now. */
		KR_INVARIANT("heap.c", 6, committed && r->recorded);
		r->owner = r->next_new = 0;
		r->recorded = 0;
		avail_push(h, gid);
	}
	heap_unlock(h);
}

/* Turns runs with no busy block back into free chunks, by an internal transaction of at
 * most RECLAIM_BATCH chunk words (it may run inside an in-place transaction, whose undo
 * leaves its lane a quarter free; 256 words did not fit a 16 KiB lane). The runs leave the
 * lists and take the RECLAIMING owner under h->lock, which is dropped for the commit: a
 * holder of it must never wait at the commit gate, where a thread inside (a spill segment's
 * kr_heap_reserve) may wait for the lock while a repair waits for that thread. Nothing can
 * reach them meanwhile: no block of theirs is allocated or freeing, and no list holds them.
 * Called without h->lock; KR_OK if it freed a chunk. */
enum { RECLAIM_BATCH = 32 };
#define RECLAIMING UINT32_MAX /* kr_run.owner of a run being reclaimed */

static int runs_reclaim(struct kr_heap *h, struct kr_lane *lane)
{
	struct kr_img img;
	kr_img_init(&img);
	kr_img_reset(&img);
	uint32_t total = h->g.nzones * h->chunks_per_zone, count = 0, gids[RECLAIM_BATCH];
	int rc = KR_OK;
	heap_lock(h);
	for (uint32_t g = 0; g < total && rc == KR_OK && count < RECLAIM_BATCH; g++) {
		struct kr_chunk_dram *c = &h->chunks[g];
		if (atomic_load(&c->type) != D_RUN || c->run->nbusy != 0 || c->run->owner)
			continue;
		uint64_t *w = kr_img_data(&img, pool_off(h, chunk_word(h, g)), 8);
		if (!w) {
			rc = kr_errcode();
			break;
		}
		*w = 0;
		c->run->owner = RECLAIMING;
		c->run->in_avail = 0;
		gids[count++] = g;
	}
	for (unsigned cl = 0; cl < h->nclasses && count; cl++) {
		uint32_t k = 0;
		for (uint32_t j = 0; j < h->avail[cl].n; j++)
			if (h->chunks[h->avail[cl].ids[j]].run->owner != RECLAIMING)
				h->avail[cl].ids[k++] = h->avail[cl].ids[j];
		h->avail[cl].n = k;
	}
	heap_unlock(h);
	/* A commit that fails at its fence has still applied its records: the chunks are free
	 * at home, durable or not, and DRAM follows home (the error goes up). */
	int applied = 0;
	if (rc == KR_OK && count)
		rc = heap_internal_commit(h, lane, &img, &applied);
	kr_img_free(&img);
	heap_lock(h);
	for (uint32_t i = 0; i < count; i++) {
		h->chunks[gids[i]].run->owner = 0;
		if (applied)
			run_drop(h, gids[i]);
		else /* nothing changed at home: the run is as it was */
			avail_push(h, gids[i]);
	}
	heap_unlock(h);
	return rc ? rc : (count ? KR_OK : KR_E_NOSPACE_HEAP);
}

/* ---------------------------------------------------------------------------------------
 * Reserve / commit / abort
 * ------------------------------------------------------------------------------------- */
/* Takes the lowest free block of run gid, if it has one. Caller holds h->lock. */
static int run_take(struct kr_heap *h, uint32_t gid, struct kr_block *b)
{
	struct kr_run *r = h->chunks[gid].run;
	if (r->nbusy >= r->nblocks)
		return 0;
	for (uint32_t w = 0; w < RUN_WORDS; w++) {
		uint64_t freebits = ~r->busy[w];
		if (w * 64 + 64 > r->nblocks)
			freebits &= (1ull << (r->nblocks - w * 64)) - 1;
		if (!freebits)
			continue;
		uint32_t idx = w * 64 + (uint32_t)__builtin_ctzll(freebits);
		r->busy[w] |= 1ull << (idx % 64);
		r->nbusy++;
		block_of_run(h, gid, idx, b);
		b->fresh = idx >= r->fresh;
		if (b->fresh)
			r->fresh = idx + 1;
		h->free_bytes -= b->bytes;
		return 1;
	}
	return 0;
}

/* A block of class cls: from a run with room, else from one of the lane's new runs, else
 * from a new run (the transaction's commit will record it: kr_heap_rec_runs). */
static int reserve_small(struct kr_heap *h, struct kr_lane *lane, unsigned cls, struct kr_block *b)
{
	typeof(h->avail[0]) *a = &h->avail[cls];
	for (;;) {
		while (a->n) {
			uint32_t gid = a->ids[a->n - 1];
			KR_INVARIANT("heap.c", 6, h->chunks[gid].run->owner == 0);
			if (run_take(h, gid, b))
				return KR_OK;
			h->chunks[gid].run->in_avail = 0;
			a->n--;
		}
		uint32_t own = lane_run_of(h, lane, cls);
		if (own != UINT32_MAX && run_take(h, own, b))
			return KR_OK;
		int rc = run_create(h, lane, cls);
		if (rc)
			return rc;
	}
}

static int reserve_large(struct kr_heap *h, uint64_t total, struct kr_block *b)
{
	uint32_t n = (uint32_t)((total + KR_CHUNK_SIZE - 1) / KR_CHUNK_SIZE);
	uint32_t gid, fresh, prev = h->fresh;
	if (find_free_chunks(h, n, &gid, &fresh) != KR_OK)
		return KR_E_NOSPACE_HEAP;
	__atomic_store_n(&h->chunks[gid].n, n, __ATOMIC_RELAXED);
	atomic_store(&h->chunks[gid].type, D_LARGE_RESERVED);
	mark_body(h, gid, n);
	h->free_bytes -= (uint64_t)n * KR_CHUNK_SIZE;
	block_of_extent(h, gid, n, b);
	b->fresh = fresh;
	b->fresh_prev = prev;
	b->take = h->takes;
	return KR_OK;
}

int kr_heap_reserve(struct kr_heap *h, struct kr_lane *lane, size_t size, struct kr_block *b)
{
	if (size == 0)
		return kr_err_set(KR_E_MISUSE_ARG, "allocation of 0 bytes");
	if (size > h->max_alloc)
		return kr_err_set(KR_E_TOO_BIG, "allocation of %zu bytes; this pool's limit is %llu",
				  size, (unsigned long long)h->max_alloc);
	uint64_t total = size + sizeof(struct kr_obj_hdr);
	int cls = size_class(h, total);
	for (int attempt = 0;; attempt++) {
		heap_lock(h);
		int rc = cls >= 0 ? reserve_small(h, lane, (unsigned)cls, b) : reserve_large(h, total, b);
		int have_pending = h->npending > 0;
		heap_unlock(h);
		if (rc != KR_E_NOSPACE_HEAP)
			return rc;
		if (attempt > 0 && (rc = runs_reclaim(h, lane)) != KR_E_NOSPACE_HEAP) {
			if (rc == KR_OK)
				continue; /* reclaimed a batch of empty runs: try again */
			return rc; /* its commit failed (the pool fails with the caller's transaction) */
		}
		if (attempt == 0 && have_pending) {
			/* Frees waiting for durable_seq: force it forward and take them back. */
			rc = kr_log_sync(h->log, lane);
			if (rc)
				return rc;
			kr_heap_release_all(h); /* the quarantine gives way to the allocation */
			continue;
		}
		if (attempt == 0)
			continue;
		return kr_err_set(KR_E_NOSPACE_HEAP, "no room for %zu bytes (%llu bytes free)", size,
				  (unsigned long long)h->free_bytes);
	}
}

void kr_heap_unreserve(struct kr_heap *h, const struct kr_block *b, int untouched)
{
	uint32_t gid = block_gid(h, b);
	heap_lock(h);
	/* An untouched block still holds what it held: where nothing was taken after it, the
	 * frontier goes back to where it was, so a transaction that fails leaves the file as
	 * it was. */
	if (b->index == UINT32_MAX) {
		for (uint32_t k = 0; k < b->nchunks; k++)
			atomic_store(&h->chunks[gid + k].type, D_FREE);
		if (untouched && h->takes == b->take) { /* as if never taken: earlier ones may follow */
			h->fresh = b->fresh_prev;
			h->takes--;
		}
	} else {
		struct kr_run *r = h->chunks[gid].run;
		r->busy[b->index / 64] &= ~(1ull << (b->index % 64));
		r->nbusy--;
		avail_push(h, gid);
		if (untouched && b->fresh && r->fresh == b->index + 1)
			r->fresh = b->index;
	}
	h->free_bytes += b->bytes;
	heap_unlock(h);
}

/* The one record that flips a block's or extent's persistent allocation state. */
static int heap_rec(struct kr_heap *h, const struct kr_block *b, struct kr_img *img, int alloc)
{
	uint32_t gid = block_gid(h, b);
	if (b->index == UINT32_MAX) {
		uint64_t *w = kr_img_data(img, pool_off(h, chunk_word(h, gid)), 8);
		if (!w)
			return kr_errcode();
		*w = alloc ? KR_CHUNK_WORD_LARGE(b->nchunks) : 0;
		return KR_OK;
	}
	return kr_img_bits(img, alloc ? KR_REC_SETBITS : KR_REC_CLRBITS,
			   pool_off(h, run_bitmap(h, gid) + b->index / 64), 1ull << (b->index % 64));
}

int kr_heap_rec_alloc(struct kr_heap *h, const struct kr_block *b, struct kr_img *img)
{
	return heap_rec(h, b, img, 1);
}

int kr_heap_rec_free(struct kr_heap *h, const struct kr_block *b, struct kr_img *img)
{
	return heap_rec(h, b, img, 0);
}

void kr_heap_commit_alloc(struct kr_heap *h, const struct kr_block *b)
{
	uint32_t gid = block_gid(h, b);
	heap_lock(h);
	if (b->index == UINT32_MAX) {
		atomic_store(&h->chunks[gid].type, D_LARGE);
	} else {
		struct kr_run *r = h->chunks[gid].run;
		atomic_fetch_or(&r->alloc[b->index / 64], 1ull << (b->index % 64));
	}
	h->used_bytes += b->bytes;
	h->nobjects++;
	heap_unlock(h);
}

/* release_at from the queue as it is now. Caller holds h->lock. */
static void release_at_set(struct kr_heap *h)
{
	atomic_store_explicit(&h->release_at,
			      h->npending > h->quarantine ? h->pending[h->pending_first].seq : UINT64_MAX,
			      memory_order_relaxed);
}

/* Queues a release at durable_seq >= seq (heap_release). Caller holds h->lock. */
static void pending_push(struct kr_heap *h, uint64_t seq, uint32_t gid, uint32_t index)
{
	if (h->npending == h->pending_cap) {
		/* Grow the ring, unrolling it. On failure the block simply stays busy (a leak
		 * until the next open rebuilds the heap), never a correctness problem. */
		size_t cap = h->pending_cap ? h->pending_cap * 2 : 64;
		struct kr_pending *np = kr_malloc(cap * sizeof(*np));
		if (!np)
			return;
		for (size_t i = 0; i < h->npending; i++)
			np[i] = h->pending[(h->pending_first + i) % h->pending_cap];
		free(h->pending);
		h->pending = np;
		h->pending_cap = cap;
		h->pending_first = 0;
	}
	h->pending[(h->pending_first + h->npending) % h->pending_cap] = (struct kr_pending){seq, gid, index};
	h->npending++;
	release_at_set(h);
}

void kr_heap_unreserve_at(struct kr_heap *h, const struct kr_block *b, uint64_t seq)
{
	uint32_t gid = block_gid(h, b);
	heap_lock(h);
	__atomic_store_n(&h->chunks[gid].n, b->nchunks, __ATOMIC_RELAXED);
	atomic_store(&h->chunks[gid].type, D_LARGE_FREEING);
	pending_push(h, seq, gid, UINT32_MAX);
	heap_unlock(h);
}

void kr_heap_commit_free(struct kr_heap *h, const struct kr_block *b, uint64_t seq)
{
	uint32_t gid = block_gid(h, b);
	heap_lock(h);
	if (b->index == UINT32_MAX) {
		atomic_store(&h->chunks[gid].type, D_LARGE_FREEING);
	} else {
		struct kr_run *r = h->chunks[gid].run;
		atomic_fetch_and(&r->alloc[b->index / 64], ~(1ull << (b->index % 64)));
	}
	h->used_bytes -= b->bytes;
	h->nobjects--;
	pending_push(h, seq, gid, b->index);
	heap_unlock(h);
}

static void heap_release(struct kr_heap *h, uint32_t keep)
{
	uint64_t d = kr_log_durable_seq(h->log);
	heap_lock(h);
	while (h->npending > keep && h->pending[h->pending_first].seq <= d) {
		struct kr_pending p = h->pending[h->pending_first];
		h->pending_first = (h->pending_first + 1) % h->pending_cap;
		h->npending--;
		struct kr_chunk_dram *c = &h->chunks[p.gid];
		KR_INVARIANT("heap.c", 3, p.seq <= d);
		if (h->quarantine) {
			struct kr_block b;
			if (p.index == UINT32_MAX)
				block_of_extent(h, p.gid, c->n, &b);
			else
				block_of_run(h, p.gid, p.index, &b);
			h->released(h->pm->view, b.off, b.bytes);
		}
		if (p.index == UINT32_MAX) {
			for (uint32_t k = 0; k < c->n; k++)
				atomic_store(&h->chunks[p.gid + k].type, D_FREE);
			h->free_bytes += (uint64_t)c->n * KR_CHUNK_SIZE;
		} else {
			/* The free's apply cleared the alloc bit before durable_seq passed it. */
			KR_INVARIANT("heap.c", 2, !(atomic_load(&c->run->alloc[p.index / 64]) & (1ull << (p.index % 64))));
			c->run->busy[p.index / 64] &= ~(1ull << (p.index % 64));
			c->run->nbusy--;
			h->free_bytes += h->classes[c->cls];
			avail_push(h, p.gid);
		}
	}
	KR_INVARIANT("heap.c", 4, h->used_bytes + h->free_bytes <=
				      (uint64_t)h->g.nzones * h->chunks_per_zone * KR_CHUNK_SIZE);
	release_at_set(h);
	heap_unlock(h);
}

void kr_heap_release(struct kr_heap *h)
{
	/* Most commits have nothing to release yet: no lock for them. A free queued meanwhile
	 * by another thread goes at a later commit. */
	if (atomic_load_explicit(&h->release_at, memory_order_relaxed) > kr_log_durable_seq(h->log))
		return;
	heap_release(h, h->quarantine);
}
void kr_heap_release_all(struct kr_heap *h) { heap_release(h, 0); }

void kr_heap_counters(struct kr_heap *h, uint64_t *used, uint64_t *free, uint64_t *nobjects)
{
	heap_lock(h);
	*used = h->used_bytes;
	*free = h->free_bytes;
	*nobjects = h->nobjects;
	heap_unlock(h);
}

/* ---------------------------------------------------------------------------------------
 * Lookup and iteration
 * ------------------------------------------------------------------------------------- */
int kr_heap_lookup(struct kr_heap *h, uint64_t oid, struct kr_block *b)
{
	uint64_t data = (uint64_t)h->meta_pages * KR_PAGE_SIZE;
	uint64_t zone_data = data + (uint64_t)h->chunks_per_zone * KR_CHUNK_SIZE;
	if (oid < h->g.heap_off + sizeof(struct kr_obj_hdr) || (oid & 15) != 0)
		return kr_err_set(KR_E_MISUSE_OID, "oid 0x%llx is not an object",
				  (unsigned long long)oid);
	uint64_t at = oid - sizeof(struct kr_obj_hdr);
	uint64_t z = kr_geom_zone(&h->g, at), zoff = kr_geom_in_zone(&h->g, at);
	if (!kr_geom_in_heap(&h->g, at) || zoff < data || zoff >= zone_data)
		return kr_err_set(KR_E_MISUSE_OID, "oid 0x%llx is outside the heap",
				  (unsigned long long)oid);
	uint32_t gid = (uint32_t)(z * h->chunks_per_zone + (zoff - data) / KR_CHUNK_SIZE);
	uint64_t coff = (zoff - data) % KR_CHUNK_SIZE;
	struct kr_chunk_dram *c = &h->chunks[gid];
	unsigned type = atomic_load_explicit(&c->type, memory_order_acquire);
	if (type == D_RUN) {
		uint32_t idx;
		if (run_block_at(h, gid, coff, &idx) && coff % h->classes[c->cls] == 0) {
			block_of_run(h, gid, idx, b);
			if (run_allocated(h, gid, idx, b))
				return KR_OK;
			return kr_err_set(KR_E_MISUSE_FREED,
					  "object 0x%llx is not allocated (freed, or never allocated)",
					  (unsigned long long)oid);
		}
	} else if (coff == 0 && type == D_LARGE) {
		block_of_extent(h, gid, c->n, b);
		return KR_OK;
	} else if (coff == 0 && (type == D_LARGE_FREEING || type == D_FREE)) {
		return kr_err_set(KR_E_MISUSE_FREED,
				  "object 0x%llx is not allocated (freed, or never allocated)",
				  (unsigned long long)oid);
	}
	return kr_err_set(KR_E_MISUSE_OID, "oid 0x%llx is not the start of an object",
			  (unsigned long long)oid);
}

int kr_heap_owner(struct kr_heap *h, uint64_t off, struct kr_block *b)
{
	uint64_t data = (uint64_t)h->meta_pages * KR_PAGE_SIZE;
	if (!kr_geom_in_heap(&h->g, off))
		return 0;
	uint64_t zoff = kr_geom_in_zone(&h->g, off);
	if (zoff < data || zoff >= data + (uint64_t)h->chunks_per_zone * KR_CHUNK_SIZE)
		return 0;
	uint32_t gid = kr_geom_zone(&h->g, off) * h->chunks_per_zone +
		       (uint32_t)((zoff - data) / KR_CHUNK_SIZE);
	uint64_t coff = (zoff - data) % KR_CHUNK_SIZE;
	/* A body chunk names its extent's head (mark_body); without the lock it may be read
	 * as the extent changes, so the head found is checked below like any other. */
	uint32_t head = gid;
	if (atomic_load_explicit(&h->chunks[gid].type, memory_order_acquire) == D_BODY) {
		uint32_t back = __atomic_load_n(&h->chunks[gid].n, __ATOMIC_RELAXED);
		if (back == 0 || back > gid % h->chunks_per_zone) /* extents stay inside a zone */
			return 0;
		head = gid - back;
	}
	struct kr_chunk_dram *c = &h->chunks[head];
	unsigned type = atomic_load_explicit(&c->type, memory_order_acquire);
	if (type == D_LARGE) {
		block_of_extent(h, head, c->n, b);
		return head + c->n > gid;
	}
	uint32_t idx;
	if (type != D_RUN || head != gid || !run_block_at(h, gid, coff, &idx))
		return 0;
	block_of_run(h, gid, idx, b);
	return run_allocated(h, gid, idx, b);
}

int kr_heap_next_owner(struct kr_heap *h, uint64_t off, uint64_t end, struct kr_block *b)
{
	uint64_t data = (uint64_t)h->meta_pages * KR_PAGE_SIZE;
	while (off < end && kr_geom_in_heap(&h->g, off)) {
		if (kr_heap_owner(h, off, b))
			return 1;
		uint64_t zoff = kr_geom_in_zone(&h->g, off);
		if (zoff < data) { /* the zone's records: on to its first chunk */
			off += data - zoff;
			continue;
		}
		if (zoff >= data + (uint64_t)h->chunks_per_zone * KR_CHUNK_SIZE)
			return 0; /* past the zone's chunks: the parity row */
		uint32_t gid = kr_geom_zone(&h->g, off) * h->chunks_per_zone +
			       (uint32_t)((zoff - data) / KR_CHUNK_SIZE);
		struct kr_chunk_dram *c = &h->chunks[gid];
		uint64_t coff = (zoff - data) % KR_CHUNK_SIZE;
		if (atomic_load_explicit(&c->type, memory_order_acquire) != D_RUN) {
			off += KR_CHUNK_SIZE - coff; /* free, or an extent's body not live: next chunk */
			continue;
		}
		/* A free block of a run: the next block boundary. */
		uint64_t cls = h->classes[c->cls];
		off += cls - coff % cls;
	}
	return 0;
}

uint64_t kr_heap_next(struct kr_heap *h, uint64_t after)
{
	uint32_t total = h->g.nzones * h->chunks_per_zone, gid = 0, idx = 0;
	struct kr_block b;
	if (after) {
		if (kr_heap_lookup(h, after, &b) != KR_OK)
			return 0;
		gid = block_gid(h, &b);
		if (b.index == UINT32_MAX)
			gid += b.nchunks;
		else
			idx = b.index + 1;
	}
	for (; gid < total; gid++, idx = 0) {
		struct kr_chunk_dram *c = &h->chunks[gid];
		unsigned type = atomic_load_explicit(&c->type, memory_order_acquire);
		if (type == D_LARGE && idx == 0)
			return chunk_off(h, gid) + sizeof(struct kr_obj_hdr);
		if (type != D_RUN)
			continue;
		for (uint32_t i = idx; i < c->run->nblocks; i++)
			if (atomic_load_explicit(&c->run->alloc[i / 64], memory_order_acquire) >> (i % 64) & 1) {
				block_of_run(h, gid, i, &b);
				return b.off + sizeof(struct kr_obj_hdr);
			}
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Audit (the deep check, deep.c): chunk records against the DRAM indexes, read-only
 * ------------------------------------------------------------------------------------- */

/* Does the object header at off describe an object that this block or extent would have
 * been chosen for? (cls: the run's class, or -1 for an extent of n chunks.) A set bit or an
 * extent word with no object behind it fails here. */
static int audit_object_fits(struct kr_heap *h, uint64_t off, int cls, uint32_t n)
{
	const struct kr_obj_hdr *o = (const void *)(h->pm->base + off);
	if (o->size == 0 || o->size > h->max_alloc)
		return 0;
	uint64_t total = o->size + sizeof(*o);
	if (size_class(h, total) != cls)
		return 0;
	return cls >= 0 || (total + KR_CHUNK_SIZE - 1) / KR_CHUNK_SIZE == n;
}

static void audit_run(struct kr_heap *h, uint32_t gid, struct kr_heap_space *sp, struct kr_audit *a)
{
	uint64_t w = *chunk_word(h, gid);
	const uint64_t *bm = run_bitmap(h, gid);
	unsigned cls = KR_CHUNK_CLASS(w);
	struct kr_chunk_dram *c = &h->chunks[gid];
	if (cls >= h->nclasses || (w & ~0xffffull) != 0) {
		kr_audit_note(a, chunk_off(h, gid), "chunk %u: run word 0x%llx is invalid", gid,
			      (unsigned long long)w);
		return;
	}
	uint32_t nb = run_nblocks(h, cls), bs = h->classes[cls], nset = 0;
	if (atomic_load(&c->type) != D_RUN || c->cls != cls)
		kr_audit_note(a, pool_off(h, chunk_word(h, gid)),
			      "chunk %u: a run of class %u on media, not in DRAM", gid, cls);
	for (uint32_t i = 0; i < RUN_WORDS * 64; i++) {
		if (!(bm[i / 64] >> (i % 64) & 1))
			continue;
		uint64_t off = chunk_off(h, gid) + (uint64_t)i * bs;
		if (i >= nb)
			kr_audit_note(a, pool_off(h, bm), "chunk %u: bitmap marks block %u of %u", gid, i, nb);
		else if (!audit_object_fits(h, off, (int)cls, 0))
			kr_audit_note(a, off, "chunk %u block %u: allocated, but no object of class %u "
					      "there", gid, i, cls);
		else if (atomic_load(&c->type) == D_RUN && i >= c->run->fresh)
			kr_audit_note(a, off, "chunk %u block %u: allocated, but past the run's fresh "
				      "blocks (%u)", gid, i, c->run->fresh);
		nset += i < nb;
	}
	if (atomic_load(&c->type) == D_RUN && c->run->fresh < nb &&
	    !kr_all_zero(chunk_base(h, gid) + (uint64_t)c->run->fresh * bs, (uint64_t)(nb - c->run->fresh) * bs))
		kr_audit_note(a, chunk_off(h, gid) + (uint64_t)c->run->fresh * bs,
			      "chunk %u: blocks from %u on are fresh, but not zeros", gid, c->run->fresh);
	if (atomic_load(&c->type) == D_RUN && c->cls == cls)
		for (uint32_t wi = 0; wi < RUN_WORDS; wi++)
			if (atomic_load(&c->run->alloc[wi]) != bm[wi] || c->run->busy[wi] != bm[wi]) {
				kr_audit_note(a, pool_off(h, &bm[wi]),
					      "chunk %u: bitmap word %u is 0x%llx on media, DRAM allocated "
					      "0x%llx, busy 0x%llx", gid, wi, (unsigned long long)bm[wi],
					      (unsigned long long)atomic_load(&c->run->alloc[wi]),
					      (unsigned long long)c->run->busy[wi]);
				break;
			}
	sp->run_chunks++;
	sp->nobjects += nset;
	sp->used += (uint64_t)nset * bs;
	sp->free += (uint64_t)(nb - nset) * bs;
	sp->slack += KR_CHUNK_SIZE - (uint64_t)nb * bs;
}

/* The extent whose head is gid; returns its length in chunks (1 if the word is invalid). */
static uint32_t audit_extent(struct kr_heap *h, uint32_t gid, struct kr_heap_space *sp,
			     struct kr_audit *a)
{
	uint64_t w = *chunk_word(h, gid);
	uint32_t n = KR_CHUNK_NCHUNKS(w), i = gid % h->chunks_per_zone;
	if (n == 0 || n > h->chunks_per_zone - i || (w & 0xffffff00ull) != 0) {
		kr_audit_note(a, pool_off(h, chunk_word(h, gid)), "chunk %u: extent word 0x%llx is "
			      "invalid", gid, (unsigned long long)w);
		return 1;
	}
	if (atomic_load(&h->chunks[gid].type) != D_LARGE || h->chunks[gid].n != n)
		kr_audit_note(a, chunk_off(h, gid), "chunk %u: an extent of %u chunks on media, not "
			      "a live one in DRAM", gid, n);
	if (!audit_object_fits(h, chunk_off(h, gid), -1, n))
		kr_audit_note(a, chunk_off(h, gid), "chunk %u: an extent of %u chunks with no object "
			      "of that size", gid, n);
	for (uint32_t k = 1; k < n; k++)
		if (*chunk_word(h, gid + k) != 0 || atomic_load(&h->chunks[gid + k].type) != D_BODY)
			kr_audit_note(a, chunk_off(h, gid + k), "chunk %u: inside the extent at chunk "
				      "%u, but not a free record and body in DRAM", gid + k, gid);
	sp->extent_chunks += n;
	sp->nobjects++;
	sp->used += (uint64_t)n * KR_CHUNK_SIZE;
	return n;
}

void kr_heap_audit(struct kr_heap *h, struct kr_heap_space *sp, struct kr_audit *a)
{
	static const uint64_t zero[RUN_WORDS];
	memset(sp, 0, sizeof(*sp));
	heap_lock(h);
	uint32_t total = h->g.nzones * h->chunks_per_zone;
	for (uint32_t gid = 0; gid < total;) {
		const struct kr_chunk_meta *m = chunk_meta(h, gid);
		if (m->reserved != 0)
			kr_audit_note(a, pool_off(h, &m->reserved), "chunk %u: reserved word set", gid);
		uint32_t step = 1;
		switch (KR_CHUNK_TYPE(m->word)) {
		case KR_CHUNK_FREE:
			if (m->word != 0 || memcmp(m->bitmap, zero, sizeof(zero)) != 0)
				kr_audit_note(a, pool_off(h, m), "chunk %u: free record with stray bits",
					      gid);
			if (atomic_load(&h->chunks[gid].type) != D_FREE)
				kr_audit_note(a, chunk_off(h, gid), "chunk %u: free on media, in use in "
					      "DRAM", gid);
			if (gid >= h->fresh && !kr_all_zero(chunk_base(h, gid), KR_CHUNK_SIZE))
				kr_audit_note(a, chunk_off(h, gid), "chunk %u: past the fresh frontier "
					      "(%u), but not zeros", gid, h->fresh);
			sp->free_chunks++;
			sp->free += KR_CHUNK_SIZE;
			break;
		case KR_CHUNK_RUN:
			audit_run(h, gid, sp, a);
			break;
		case KR_CHUNK_LARGE:
			if (memcmp(m->bitmap, zero, sizeof(zero)) != 0)
				kr_audit_note(a, pool_off(h, m), "chunk %u: extent record with a bitmap",
					      gid);
			step = audit_extent(h, gid, sp, a);
			break;
		default:
			kr_audit_note(a, pool_off(h, m), "chunk %u: unknown type %u", gid,
				      KR_CHUNK_TYPE(m->word));
		}
		if (KR_CHUNK_TYPE(m->word) != KR_CHUNK_FREE && gid + step > h->fresh)
			kr_audit_note(a, chunk_off(h, gid), "chunk %u: in use past the fresh frontier "
				      "(%u)", gid, h->fresh);
		gid += step;
	}
	/* Invariant 4 with nothing reserved or freeing: the DRAM counters are the media's. */
	if (sp->used != h->used_bytes || sp->free != h->free_bytes || sp->nobjects != h->nobjects ||
	    h->npending != 0)
		kr_audit_note(a, 0, "allocator counters: media %llu used, %llu free, %llu objects; "
			      "DRAM %llu used, %llu free, %llu objects, %zu frees pending",
			      (unsigned long long)sp->used, (unsigned long long)sp->free,
			      (unsigned long long)sp->nobjects, (unsigned long long)h->used_bytes,
			      (unsigned long long)h->free_bytes, (unsigned long long)h->nobjects,
			      h->npending);
	heap_unlock(h);
}
