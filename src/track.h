/*
 * track.h - which pages of a MAP_SHARED file mapping were written since the last look.
 *
 * The first building block of lazy redundancy (Vilamb): instead of updating parity and
 * checksums on every store, a background pass periodically asks "which pages changed?"
 * and recomputes redundancy for those only. The kernel records the first store to each
 * page (userfaultfd asynchronous write-protect) and one PAGEMAP_SCAN ioctl reports the
 * written pages and re-arms them in the same step. See track.c for the design and for
 * what is NOT tracked.
 *
 * One tracker watches one range; it is not thread-safe itself (one harvester at a time),
 * but any number of threads may store into the range while it is attached.
 */
#ifndef KR_TRACK_H
#define KR_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kr_track {
	uint8_t *base;    /* start of the tracked range (page aligned) */
	size_t len;       /* bytes, a multiple of the page size */
	size_t page_size; /* the system page size, which is the tracking granularity */
	int uffd;         /* userfaultfd the range is registered with (-1: detached) */
	int pagemap_fd;   /* /proc/self/pagemap, for PAGEMAP_SCAN */
	uint64_t next;    /* harvest cursor: where an unfinished harvest continues */
	void *vec;        /* struct page_region[vec_len], the ioctl's output buffer */
	size_t vec_len;
};

/* True if this kernel can track writes the way kr_track_attach does (userfaultfd with
 * WP_ASYNC, and PAGEMAP_SCAN). Runs the whole attach self-test on a small scratch
 * mapping in /dev/shm, so "true" means it was seen to work, not only that the ioctls
 * exist. On false, kr_errmsg() says what is missing. */
bool kr_track_probe(void);

/* Starts tracking [base, base + len): base and len page aligned, len > 0, the range one
 * MAP_SHARED read/write mapping of a file (tmpfs or a disk file system). Every page starts
 * clean, so the first harvest reports what was written after attach returned. Also
 * switches the range to MADV_NOHUGEPAGE (one huge page would be reported as 512 written
 * pages). Runs a self-test that writes a few pages' first bytes back with their own
 * values (the data is not changed) and drops their page-table entries.
 * flags: reserved, must be 0.
 * Errors: KR_E_MISUSE_ARG (NULL, misaligned, zero length, flags), KR_E_IO (a kernel
 * feature is missing or an ioctl failed; the message says which), KR_E_NOMEM. On error
 * the tracker is left detached and nothing stays registered. */
int kr_track_attach(struct kr_track *t, void *base, size_t len, unsigned flags);

/* Reports pages written since the previous harvest (or since attach) and write-protects
 * them again, atomically per page: a store racing with the harvest is either in this
 * report or in the next one, never lost.
 *
 * Fills pages[0 .. *n) with page indexes relative to base, in increasing order, and
 * returns KR_OK when the scan reached the end of the range. If more than max written
 * pages remain, it stops after max of them, returns 1 (more to come), and the next call
 * continues where this one stopped (pages beyond that point were neither reported nor
 * re-armed, so nothing is lost). Call until it returns KR_OK to complete one pass;
 * a pass then reports each written page at most once.
 * Errors: KR_E_MISUSE_ARG (detached tracker, NULL, max == 0), KR_E_IO. */
int kr_track_harvest(struct kr_track *t, uint64_t *pages, size_t max, size_t *n);

/* Stops tracking: unregisters the range and closes the descriptors. Harvest first; what
 * was written since the last harvest is forgotten. Safe on a detached tracker. The
 * mapping itself stays as it is. */
void kr_track_detach(struct kr_track *t);

#endif
