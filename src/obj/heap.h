/*
 * heap.h - the persistent allocator: size-class runs for small objects, chunk extents for
 * large ones, with all persistent changes expressed as redo records.
 *
 * Allocation is two-phase. kr_heap_reserve() picks a block in DRAM only; the transaction
 * adds kr_heap_rec_alloc() records to its redo image, and after the commit fence
 * kr_heap_commit_alloc() marks the block live. An abort calls kr_heap_unreserve(). Frees
 * likewise: kr_heap_rec_free() + kr_heap_commit_free(); a freed block becomes reusable
 * only once its free is below the log's durable sequence number (kr_heap_release), so a
 * new owner never writes a block that an older, still replayable transaction also writes.
 */
#ifndef KR_HEAP_H
#define KR_HEAP_H

#include <pthread.h>
#include <stdint.h>

#include "geom.h"
#include "layout.h"
#include "log.h"
#include "pmem.h"

/* A block (small object) or extent (large object), as the heap knows it. */
struct kr_block {
	uint64_t off;    /* pool offset of the object header */
	uint64_t bytes;  /* block or extent size, header included */
	uint32_t zone;
	uint32_t chunk;  /* chunk index within the zone (head chunk for extents) */
	uint32_t index;  /* block index in the run; UINT32_MAX for an extent */
	uint32_t nchunks; /* extent length; 0 for a block */
	uint32_t fresh;   /* set by kr_heap_reserve: the block has held no object since the
			   * pool was made, so its bytes are still zeros */
	uint32_t fresh_prev; /* extent: the heap's frontier before this reservation moved it */
	uint64_t take;    /* extent: the heap's takes count right after it */
};

struct kr_run;
struct kr_chunk_dram;

struct kr_heap {
	struct kr_pm *pm;
	struct kr_log *log;
	struct kr_geom g;
	uint32_t chunks_per_zone, meta_pages;
	uint64_t max_alloc;
	const uint32_t *classes; /* the pool's size-class table (layout.h kr_class_table) */
	unsigned nclasses;

	pthread_mutex_t lock;
	struct kr_chunk_dram *chunks; /* nzones * chunks_per_zone */
	struct {
		uint32_t *ids; /* global chunk ids of runs that may have free blocks */
		uint32_t n, cap;
	} avail[KR_MAX_NCLASSES];
	struct kr_pending *pending; /* deferred frees, in commit order */
	size_t npending, pending_first, pending_cap;
	/* The durable_seq from which heap_release has a free to release (the oldest pending
	 * one's beyond the quarantine), UINT64_MAX if none: set under the lock, read without
	 * it, so that a commit with nothing to release takes no global lock. */
	_Atomic uint64_t release_at;
	uint32_t cursor; /* next-fit position for extents and new runs */
	uint32_t *lane_runs; /* per lane: 1 + the chunk id of its first new run (kr_run.owner) */
	/* The fresh frontier F (layout.h's fresh_word): no chunk at or past it has held an
	 * object since the pool was made. Moves up as chunks are taken, before anything is
	 * written to them; nchunks total when unknown. */
	uint32_t fresh;
	uint32_t used_end; /* after kr_heap_load: 1 + the last chunk in use, 0 if none */
	uint64_t takes;    /* chunk ranges taken so far (find_free_chunks) */

	uint64_t used_bytes, free_bytes, nobjects;
	/* Debug mode (debug.c): the last `quarantine` deferred frees stay unreleased, so a
	 * stale oid keeps naming a freed object; as each is released, released(view, off,
	 * bytes) makes its view pages readable again. 0 and NULL otherwise (set by whoever
	 * turns the mode on, so the allocator knows nothing of it). */
	uint32_t quarantine;
	void (*released)(char *view, uint64_t off, uint64_t bytes);
};
#define KR_HEAP_QUARANTINE 64

int kr_heap_init(struct kr_heap *h, struct kr_pm *pm, struct kr_log *log,
		 const struct kr_pool_hdr *hdr);
void kr_heap_fini(struct kr_heap *h);
/* Rebuilds the DRAM state from the chunk tables and run bitmaps (time proportional to
 * metadata). Fails with KR_E_CORRUPT_META on inconsistent metadata. */
int kr_heap_load(struct kr_heap *h);
/* Whether n bytes are all zero (a fresh object's block, the deep check's fresh space). */
int kr_all_zero(const void *p, uint64_t n);
/* After kr_heap_load: the frontier a clean close left (fresh_word - 1), or none for 0. A
 * frontier below a chunk in use is raised past it: it can only claim too little. */
void kr_heap_set_fresh(struct kr_heap *h, uint64_t fresh_word);
/* The fresh_word to store at a clean close: F + 1, or 0 when no chunk is known fresh. */
uint64_t kr_heap_fresh_word(struct kr_heap *h);

/* Reserves a block for an object of size bytes, for the transaction that holds lane. May
 * make a new run (the transaction's commit records it: kr_heap_rec_runs), run an internal
 * transaction on lane (to reclaim empty runs) and force the log durable (to release
 * deferred frees). */
int kr_heap_reserve(struct kr_heap *h, struct kr_lane *lane, size_t size, struct kr_block *b);
/* The records that make the lane's new runs with a reserved block runs on media, into the
 * commit image ahead of the allocations in them; kr_heap_new_runs counts those runs (for
 * a bound on the image's size). */
int kr_heap_rec_runs(struct kr_heap *h, const struct kr_lane *lane, struct kr_img *img);
uint32_t kr_heap_new_runs(struct kr_heap *h, const struct kr_lane *lane);
/* At the end of the lane's transaction, after its commit (committed) or its unreserves:
 * its new runs join the others, or go back to free chunks where nothing of them is busy. */
void kr_heap_end_runs(struct kr_heap *h, struct kr_lane *lane, int committed);
/* Gives a reserved block back; untouched: nothing was written to it since kr_heap_reserve. */
void kr_heap_unreserve(struct kr_heap *h, const struct kr_block *b, int untouched);
/* A reserved extent that was written but never allocated (a spill segment, tx.c) goes back
 * to the heap once durable_seq reaches seq (as a freed block does: kr_heap_release). */
void kr_heap_unreserve_at(struct kr_heap *h, const struct kr_block *b, uint64_t seq);
int kr_heap_rec_alloc(struct kr_heap *h, const struct kr_block *b, struct kr_img *img);
void kr_heap_commit_alloc(struct kr_heap *h, const struct kr_block *b);

/* Finds the live block of oid. KR_E_MISUSE_OID if oid is not a block start of this heap,
 * KR_E_MISUSE_FREED if it is one but not live. Lock-free; safe from any thread. */
int kr_heap_lookup(struct kr_heap *h, uint64_t oid, struct kr_block *b);
int kr_heap_rec_free(struct kr_heap *h, const struct kr_block *b, struct kr_img *img);
void kr_heap_commit_free(struct kr_heap *h, const struct kr_block *b, uint64_t seq);
/* Makes deferred frees with seq <= the log's durable sequence number reusable, except the
 * quarantined last ones (debug mode); kr_heap_release_all releases those too. */
void kr_heap_release(struct kr_heap *h);
void kr_heap_release_all(struct kr_heap *h);

/* The live block or extent holding pool offset off (its header, payload or padding): 1 and
 * *b, or 0 (not in a chunk, or free there). Lock-free, like kr_heap_lookup. */
int kr_heap_owner(struct kr_heap *h, uint64_t off, struct kr_block *b);

/* The first live block or extent with bytes at or after pool offset off and starting before
 * end: 1 and *b, or 0. Lock-free, like kr_heap_owner. */
int kr_heap_next_owner(struct kr_heap *h, uint64_t off, uint64_t end, struct kr_block *b);

/* The allocator's byte and object counters, read together under its lock (commits change
 * them, also while a scrub pass or a stat call reads them). */
void kr_heap_counters(struct kr_heap *h, uint64_t *used, uint64_t *free, uint64_t *nobjects);

/* Live objects in pool order: the first oid after `after` (0 = from the start), or 0. */
uint64_t kr_heap_next(struct kr_heap *h, uint64_t after);

/* The chunk bytes as the on-media records account for them (kr_heap_audit). */
struct kr_heap_space {
	uint64_t used;  /* allocated blocks and extents, headers included */
	uint64_t free;  /* free chunks and the free blocks of runs */
	uint64_t slack; /* run tails too small for one more block */
	uint64_t nobjects, free_chunks, run_chunks, extent_chunks;
};
/* The deep check's audit of a quiet heap (nothing reserved; call kr_heap_release first):
 * every chunk record is well formed and agrees with the DRAM chunk table and run bitmaps
 * (invariant 1, and busy == allocated), every allocated block or extent holds an object
 * header of a size that would have been put there, and the DRAM counters equal what the
 * records add up to (invariant 4). Only reads the pool. */
void kr_heap_audit(struct kr_heap *h, struct kr_heap_space *sp, struct kr_audit *a);

#endif
