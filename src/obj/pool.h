/*
 * pool.h - the in-DRAM state of an open pool (struct kr_pool), and the functions of obj/'s
 * files that work on a whole pool: pool.c (open, close, recovery, geometry), tx.c
 * (transactions), scrub.c, repair.c, query.c, deep.c and debug.c include it. Nothing
 * below the object layer sees it.
 */
#ifndef KR_POOL_H
#define KR_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "geom.h"
#include "heap.h"
#include "layout.h"
#include "log.h"
#include "pmem.h"
#include "redund.h"
#include "shadow.h"
#include "vcache.h"

#define KR_CRC_LOCKS 64
struct mbuf;

struct kr_pool {
	struct kr_pm pm;
	struct kr_pool_hdr hdr; /* the validated header */
	struct kr_geom g;       /* where things are (geom.h), from hdr */
	struct kr_log log;
	struct kr_heap heap;
	struct kr_redund redund;
	struct kr_vcache vcache; /* block checksums of large objects opened for writing (tx.c) */
	struct kr_shadow shadow; /* consistent copies of objects declared by kr_tx_add_stored */
	struct kr_root_line *root[2]; /* root lines of the two control pages */
	/* Per lane, the last ended transaction with the DRAM it kept, or NULL (tx.c); a slot
	 * belongs to whoever holds its lane. */
	struct kr_tx **tx_spare;
	pthread_mutex_t root_lock;
	/* In-place writes (tx.c): every transaction's in-place buffers not yet committed, with
	 * the bytes parity still reflects for them; and the stripes that serialise the
	 * checksum updates of one object by several transactions. */
	pthread_mutex_t inflight_lock;
	struct mbuf *inflight;
	pthread_mutex_t crc_locks[KR_CRC_LOCKS];
	_Atomic int failed;   /* sticky error state (see keratin.h) */
	struct kr_log_recovery recovery;
	int recovered;
	uint64_t csum_repairs, media_repairs, scrub_passes, last_repair_ns;
	_Atomic uint64_t poison[64]; /* emulated poisoned pages: offset + 1, or 0 (repair.c) */

	/* Read policy and the scrubber (scrub.c). */
	_Atomic int read_policy;
	pthread_mutex_t scrub_lock;
	pthread_cond_t scrub_cond;
	pthread_t scrub_thread;
	int scrub_run;
	uint64_t scrub_txs;
	double scrub_seconds;
	struct timespec scrub_last;
	char *path;
	/* Debug mode (KR_OPEN_DEBUG, KERATIN_DEBUG_PROTECT=1): its state, or NULL when off
	 * (debug.c). Every debug check sits behind a test of this pointer. */
	struct kr_debug *debug;
};

/* The error state and access mode (query.c). KR_E_POOL_FAILED (with a message) if the pool
 * is in the error state, else KR_OK. */
int kr_pool_usable(kr_pool *pool);
/* KR_E_MISUSE_STATE (message naming what) if the pool was opened with KR_OPEN_READONLY. */
int kr_pool_writable(kr_pool *pool, const char *what);
/* Puts the pool in the error state after a failure that leaves durability unknown. */
void kr_pool_fail(kr_pool *pool, int err);

/* Frees what ended transactions left for their lanes (tx.c); at close. */
void kr_tx_spares_free(kr_pool *pool);

/* Open-time repair (scrub.c): chunk records failing their CRC are rebuilt from parity
 * before the heap is loaded; KR_E_CORRUPT_META if one cannot be. */
int kr_scrub_chunk_records(kr_pool *pool);
/* The header copies and the root lines of both control pages against each other (scrub.c):
 * counted in rep->copies / bad_copies, rewritten from the sound twin if repair
 * (repaired_copies). Open runs the two halves at its own moments, with its own tally. */
int kr_pool_check_copies(kr_pool *pool, int repair, struct kr_check_report *rep);
struct kr_copies_tally {
	uint64_t bad, repaired, first_bad_off;
};
/* Open chose a valid header copy; a copy that differs from it is rewritten (page and all)
 * if repair. */
int kr_scrub_header_copies(kr_pool *pool, int repair, struct kr_copies_tally *t);
/* Both root lines are written by the same transactions, so after recovery they agree; a
 * copy that fails its check is rewritten from the other (if repair). */
int kr_scrub_root_lines(kr_pool *pool, int repair, struct kr_copies_tally *t);
/* Online repair of one object that failed its checksum (commits held back meanwhile). */
int kr_scrub_object(kr_pool *pool, const struct kr_block *b);
/* Stops the background scrubber if it runs. */
void kr_scrub_stop(kr_pool *pool);

/* Media errors (repair.c). Rebuilds the lost page at pool offset off (any kind of page),
 * flushes, fences. */
int kr_pool_repair_page(kr_pool *pool, uint64_t off);
/* Repairs every page of the platform's bad-block list for this pool, then clears it. */
int kr_pool_repair_listed(kr_pool *pool);
/* Registers the pool's fault resolvers with the media front end (pm/media.h), or removes
 * them. */
int kr_pool_media_attach(kr_pool *pool);
void kr_pool_media_detach(kr_pool *pool);

/* Geometry: fills every derived field of hdr from pool_size, rows, nlanes, lane_pages. */
int kr_layout_compute(struct kr_pool_hdr *hdr);

#endif
