/*
 * pool_state.h - the in-DRAM state of an open pool (struct kr_pool): what the files that
 * work on a whole pool share. Functions live with their files (pool.c opens and closes,
 * query.h the error state, tx.h, scrub.h, repair.h); this header declares none.
 *
 * One owner per piece of state. A member is either shared (the mapping, header, geometry,
 * log, heap, redundancy, recovery result, error state, counters), or it belongs to one
 * file and is an opaque pointer that only that file's code dereferences: its type is
 * defined in that file, made at open by its _new function and freed at close by its _free.
 * So no file reaches into another's state, and this header includes nothing above the
 * pieces it embeds.
 */
#ifndef KR_POOL_STATE_H
#define KR_POOL_STATE_H

#include <stdatomic.h>
#include <stdint.h>

#include "geom.h"
#include "heap.h"
#include "layout.h"
#include "log.h"
#include "pmem.h"
#include "redund.h"

struct kr_tx_shared;  /* tx.c: what the pool's transactions share */
struct kr_scrubber;   /* scrub.c: the background scrubber */
struct kr_poison;     /* repair.c: emulated poisoned pages */
struct kr_debug;      /* debug.c: debug mode's state */
struct kr_stale;      /* stale.c: the stale map and its cleaner */

struct kr_pool {
	struct kr_pm pm;
	struct kr_pool_hdr hdr; /* the validated header */
	struct kr_geom g;       /* where things are (geom.h), from hdr */
	struct kr_log log;
	struct kr_heap heap;
	struct kr_redund redund;
	struct kr_root_line *root[2]; /* root lines of the two control pages */
	char *path;
	_Atomic int failed; /* sticky error state (see keratin.h; query.c) */
	struct kr_log_recovery recovery; /* what open's recovery did (pool.c) */
	int recovered;
	/* What kr_pool_stat reports, each counted by one file. */
	_Atomic uint64_t csum_repairs;   /* scrub.c: items rebuilt after a checksum failure */
	_Atomic uint64_t media_repairs;  /* repair.c: pages rebuilt after a media error */
	_Atomic uint64_t last_repair_ns; /* repair.c: how long the last one took */
	_Atomic uint64_t scrub_passes;   /* scrub.c: background passes run */
	_Atomic uint64_t stale_columns;  /* stale.c: page columns marked in the stale map */
	_Atomic uint64_t stale_cleaned;  /* stale.c: columns brought up to date since open */
	_Atomic int read_policy;         /* scrub.c (kr_pool_set_read_policy); tx.c reads it */
	/* Set by pool.c: the online repair of an object that failed its checksum (scrub.c's
	 * kr_scrub_object), for tx.c, which the checks sit above. */
	int (*repair_object)(kr_pool *pool, const struct kr_block *b);

	/* Owned by one file each (see the top). */
	struct kr_tx_shared *tx;
	struct kr_scrubber *scrubber;
	struct kr_poison *poison;
	struct kr_stale *stale; /* NULL: the pool has no stale map (made before it) */
	/* Debug mode (KR_OPEN_DEBUG, KERATIN_DEBUG_PROTECT=1): its state, or NULL when off.
	 * Every debug check sits behind a test of this pointer. */
	struct kr_debug *debug;
};

#endif
