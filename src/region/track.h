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

#include <stdatomic.h>

enum kr_track_mode { KR_TRACK_OFF = 0, KR_TRACK_UFFD = 1, KR_TRACK_MPROTECT = 2 };

struct kr_track {
	uint8_t *base;    /* start of the tracked range (page aligned) */
	size_t len;       /* bytes, a multiple of the page size */
	size_t page_size; /* the system page size, which is the tracking granularity */
	enum kr_track_mode mode;
	int uffd;         /* userfaultfd the range is registered with (-1: none) */
	int pagemap_fd;   /* /proc/self/pagemap, for PAGEMAP_SCAN */
	uint64_t next;    /* harvest cursor: where an unfinished harvest continues */
	void *vec;        /* struct page_region[vec_len], the ioctl's output buffer */
	size_t vec_len;
	/* mprotect mode: bit p set = page p written since it was last harvested; the lock
	 * makes "write-protect, then collect the bits" atomic against kr_track_fault. */
	_Atomic uint64_t *written;
	atomic_flag lock;
};

/* kr_track_attach flags. */
#define KR_TRACK_FLAG_MPROTECT 0x1u /* use the mprotect fallback even if userfaultfd works */

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
 * flags: 0, or KR_TRACK_FLAG_MPROTECT for the fallback (see track.c): the range is made
 * read-only and the caller's SIGSEGV handler must pass write faults in it to
 * kr_track_fault. Kernel-mode writes into the range then fail with EFAULT.
 * Errors: KR_E_MISUSE_ARG (NULL, misaligned, zero length, flags), KR_E_IO (a kernel
 * feature is missing or an ioctl failed; the message says which), KR_E_NOMEM. On error
 * the tracker is left detached and nothing stays registered. */
int kr_track_attach(struct kr_track *t, void *base, size_t len, unsigned flags);

/* mprotect mode, from a SIGSEGV handler: records the page holding addr as written and
 * makes it writable, so the faulting store can run again. Returns false if addr is not in
 * the range or the page could not be made writable. Async-signal-safe. */
bool kr_track_fault(struct kr_track *t, const void *addr);

/* Harvests pages [first, first + count) only (a sub-range, without moving the cursor of
 * kr_track_harvest): pages[] must hold count entries. Same atomicity as kr_track_harvest. */
int kr_track_harvest_span(struct kr_track *t, uint64_t first, uint64_t count, uint64_t *pages,
			  size_t *n);

/* Looks without re-arming: sets bit i of bits[] (count bits, zeroed first) if page
 * first + i was written since it was last harvested. Async-signal-safe. */
int kr_track_query(struct kr_track *t, uint64_t first, uint64_t count, uint64_t *bits);

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
