/*
 * pmem.h - the persistence layer: the only code that writes to persistent memory.
 *
 * Everything above this layer stores to a pool through these calls, never with plain
 * assignments, so that three things see every byte: the per-thread counters (fences,
 * flushed lines, bytes), the recorder used by the crash simulator, and a port to other
 * hardware (eADR, CXL, msync-only files) which only has to change pmem.c.
 *
 * Ordering contract (x86-64 TSO, whole-line persistence):
 *   - kr_pm_copy/set/store64/or64/andn64 are ordinary cached stores; they become durable
 *     only after a kr_pm_flush of their lines followed by a kr_pm_fence on the SAME thread.
 *   - kr_pm_copy_nt and kr_pm_lines_nt are durable after the next kr_pm_fence of the same
 *     thread.
 *   - kr_pm_store64 is one aligned 8-byte store: it is never split or merged, which is what
 *     makes it usable as a validity marker.
 */
#ifndef KR_PMEM_H
#define KR_PMEM_H

#include <stddef.h>
#include <stdint.h>

#include "keratin.h"

struct kr_pm {
	char *base;
	/* What kr_get hands the application: base, or with KERATIN_DEBUG_PROTECT=1 (and
	 * keratin-fs's KR_FS_MOUNT_WPROTECT, which reads everything through it) a read-only
	 * alias of the same file, so that a stray store faults (media.c reports it) while the
	 * library keeps writing through base. Every kr_pm_* write and flush aimed at the view is
	 * carried out at the same offset of base. */
	char *view;
	size_t size;
	int fd;
	enum kr_mode mode;
	int readonly; /* a private copy-on-write view (KR_OPEN_READONLY): nothing reaches the file */
	int sync_one_trip; /* page-cache mode: a fence's ranges take one device round trip */
};

/* Maps size bytes of fd and chooses the durability mode (see keratin.h). */
int kr_pm_map(struct kr_pm *pm, int fd, size_t size, unsigned open_flags, const char *path);
void kr_pm_unmap(struct kr_pm *pm);
/* Maps [off, off + len) of the pool in one call (advice: no error), as the pool's prefault
 * would, for code about to read pages nothing has touched yet: one page fault each costs far
 * more (35 us each in one KVM guest, 2026-11-30). */
void kr_pm_populate(const struct kr_pm *pm, uint64_t off, size_t len);
/* Makes view a read-only alias of the mapping (nothing for a private copy, or if it already
 * is one), prefaulted with KR_OPEN_PREFAULT in open_flags. KR_OK or KR_E_IO_MAP. */
int kr_pm_protect(struct kr_pm *pm, const char *path, unsigned open_flags);

void kr_pm_copy(struct kr_pm *pm, void *dst, const void *src, size_t n);
void kr_pm_copy_nt(struct kr_pm *pm, void *dst, const void *src, size_t n);
/* n consecutive 64-byte lines at lines (64-byte aligned), written with non-temporal stores
 * and durable after the next kr_pm_fence: line k gets the 56 bytes body + 56k at its offset
 * 8, then words[k] at its offset 0, stored LAST, so that under whole-line persistence a
 * line holding its word holds its body too (a marker that validates the line). Counted as
 * n written-back lines. For large writes nobody reads back soon: no read-for-ownership of
 * the lines, no flush instruction, nothing evicted from the cache. */
void kr_pm_lines_nt(struct kr_pm *pm, void *lines, const uint64_t *words, const void *body,
		    size_t n);
void kr_pm_set(struct kr_pm *pm, void *dst, int c, size_t n);
void kr_pm_store64(struct kr_pm *pm, uint64_t *dst, uint64_t v);
/* Atomic bit updates; they return the word's previous value. */
uint64_t kr_pm_or64(struct kr_pm *pm, uint64_t *dst, uint64_t mask);
uint64_t kr_pm_andn64(struct kr_pm *pm, uint64_t *dst, uint64_t mask);
void kr_pm_xor64(struct kr_pm *pm, uint64_t *dst, uint64_t mask); /* atomic (lock xor) */
/* dst ^= a ^ b, SIMD, any alignment; not atomic. */
void kr_pm_xor2(struct kr_pm *pm, void *dst, const void *a, const void *b, size_t n);
/* kr_pm_xor2's way on machines without AVX-512 (tests run it everywhere): no counting. */
void kr_pm_xor2_portable(void *dst, const void *a, const void *b, size_t n);
/* par ^= dst ^ src, then dst = src, over n bytes in one pass (no alignment needed): a write
 * that patches the parity of what it overwrites. Not atomic: the caller excludes every
 * other writer of par. */
void kr_pm_copy_xor(struct kr_pm *pm, void *dst, const void *src, void *par, size_t n);
/* v[vects-1] = XOR of v[0..vects-2] (ISA-L xor_gen); the destination is in the pool. */
void kr_pm_xor_gen(struct kr_pm *pm, int vects, size_t len, void **v);

/* Writes back every cache line overlapping [addr, addr+n). No ordering by itself. */
void kr_pm_flush(struct kr_pm *pm, const void *addr, size_t n);
/* Store fence: everything this thread flushed (or NT-copied) before it is durable after it.
 * In page-cache mode also syncs the pages flushed since the last fence (sync_file_range
 * and one msync; the whole file after kr_pm_sync_all_next); returns KR_E_IO_SYNC if that
 * fails (durability then unknown). */
int kr_pm_fence(struct kr_pm *pm);
/* kr_pm_flush + kr_pm_fence. */
int kr_pm_persist(struct kr_pm *pm, const void *addr, size_t n);
/* Writes a new file's header, whose first 8 bytes are the magic number that makes the file
 * what it is, to the n copies (8-byte aligned) so that a crash leaves each copy without its
 * magic or whole: every copy with the magic zeroed, a fence (which also makes durable what
 * the caller flushed before), then each copy's magic in the given order, an 8-byte store
 * and a fence each. A header torn across lines with its magic would be taken for damage. */
int kr_pm_write_header(struct kr_pm *pm, void *const *copies, int n, const void *hdr, size_t len);

/* kr_pm_persist for a signal handler, which may interrupt the thread in the middle of any
 * of these calls: ignores the thread's deferred-flush list and page-cache bookkeeping, and
 * in page-cache mode msyncs the pages itself. Async-signal-safe. */
int kr_pm_persist_now(struct kr_pm *pm, const void *addr, size_t n);

/* For a signal handler that writes through the ordinary calls (the media repair): between
 * enter and leave the thread's deferred-flush list is set aside, so flushes go out at once
 * (the interrupted code may be growing that list, with malloc), and page-cache bookkeeping
 * allocates nothing (a thread without its ranges yet syncs the whole file at its fence). */
struct kr_pm_signal_state {
	struct kr_flush_list *deferred;
};
void kr_pm_signal_enter(struct kr_pm_signal_state *st);
void kr_pm_signal_leave(const struct kr_pm_signal_state *st);

/* Writes n bytes at offset off of a file that is not a kr_pm mapping (the data file of a
 * protected region, repaired through the file so the write is not mistaken for an
 * application store). Counted in bytes_written; KR_E_IO with errno set on failure.
 * Async-signal-safe. */
int kr_pm_write_file(int fd, const void *buf, size_t n, uint64_t off);

/* Deferred write-back. On x86 a locked instruction waits for every earlier clwb of its
 * thread to complete, so flushes issued in the middle of a commit's bookkeeping (locks,
 * atomic parity XORs) turn each later lock into a hidden persist round trip. While a
 * thread has a flush list installed, kr_pm_flush only records the range; kr_pm_flush_list
 * writes the recorded ranges back later (just before the next fence, where they overlap
 * with that fence's own flushes) and empties the list. If recording fails (no memory) the
 * range is written back at once, which is always correct. */
struct kr_flush_list {
	struct kr_flush_range {
		const void *addr;
		size_t len;
	} *v;
	size_t n, cap;
};
/* Installs fl for the calling thread (NULL: flush at once again). */
void kr_pm_defer_flushes(struct kr_flush_list *fl);
void kr_pm_flush_list(struct kr_pm *pm, struct kr_flush_list *fl);
void kr_pm_flush_list_free(struct kr_flush_list *fl);

/* Lazy write-back. In page-cache mode the recorded ranges are already in the page cache:
 * kr_pm_flush_list_lazy forgets them, and they are durable after the next kr_pm_sync_all
 * (of any thread: the page cache is the file's), or earlier whenever the kernel writes them
 * back; the fences in between sync only what was flushed otherwise. Elsewhere (persistent
 * memory) it is kr_pm_flush_list and kr_pm_sync_all is kr_pm_fence. kr_pm_lazy tells which. */
int kr_pm_lazy(const struct kr_pm *pm);
void kr_pm_flush_list_lazy(struct kr_pm *pm, struct kr_flush_list *fl);
int kr_pm_sync_all(struct kr_pm *pm);
/* kr_pm_sync_all without its fence: the calling thread's next fence is the sync. */
void kr_pm_sync_all_next(struct kr_pm *pm);

/* Accounting only: n of the bytes just written were redo-log bytes; one commit done. */
void kr_pm_count_logged(size_t n);
void kr_pm_count_commit(void);

/* Name of the flush instruction in use ("clwb", "clflushopt", "clflush"). */
const char *kr_pm_flush_name(void);

#endif
