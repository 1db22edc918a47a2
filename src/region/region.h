/*
 * region.h - internals of protected regions (region.c) that tests reach: the crash points.
 * The API itself is public (keratin_region.h).
 */
#ifndef KR_REGION_H
#define KR_REGION_H

#include <stdint.h>

/* Places in the update and seal protocols where a crash is most interesting. The crash
 * test installs kr_region_hook and kills its process at one of them. */
enum kr_region_point {
	KR_RPOINT_HARVESTED = 1, /* pages harvested (re-armed), redundancy not yet written */
	KR_RPOINT_CRCS,          /* a batch's CRCs written, its parity not yet */
	KR_RPOINT_PARITY,        /* after each stripe's parity: some written, some not */
	KR_RPOINT_SEALING,       /* a segment about to be sealed (the test stores into it here) */
	KR_RPOINT_SEALED,        /* a segment sealed and recomputed, its hot bit not yet cleared */
	KR_RPOINT_UNSEAL,        /* in the fault handler, before the hot bit is persisted */
	KR_RPOINT_UNSEALED,      /* in the fault handler, hot bit persisted, segment still sealed */
	KR_RPOINT_COUNT
};

/* Called at each point when set (NULL in production), with a page the point concerns (the
 * batch's first page, the stripe's or segment's first page, the faulting page). Runs in a
 * signal handler for the unseal points, so it must be async-signal-safe. */
extern void (*kr_region_hook)(enum kr_region_point point, uint64_t page);

#endif
