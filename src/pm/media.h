/*
 * media.h - media errors: bad-block list, emulated poison, fault handlers, page repair.
 */
#ifndef KR_MEDIA_H
#define KR_MEDIA_H

#include <stdint.h>

#include "keratin.h"

/* Rebuilds the lost page at pool offset off (any kind of page), flushes, fences. */
int kr_media_repair_page(kr_pool *pool, uint64_t off);
/* Repairs every page of the platform's bad-block list for this pool, then clears it. */
int kr_media_repair_listed(kr_pool *pool);

/* The platform's bad-block list for any mapped file (a pool, a keratin-fs pool): the pages
 * named by PATH.badblocks and by the kernel's list of the device under fd (size: the bytes
 * that count), deduplicated, into pages[0..max); *n of them, the kernel named those from
 * index *from_kernel on. KR_OK, or an error for an unreadable list or an entry beyond size
 * (the pages read so far are still returned). */
#include <stddef.h>
int kr_media_list(const char *path, int fd, uint64_t size, uint64_t *pages, size_t max,
		  size_t *n, size_t *from_kernel);
/* A block the kernel reports stays poisoned: gives the file a new one at page off (punch,
 * allocate; the content becomes zeros). path names the file in the message. */
int kr_media_replace_block(int fd, uint64_t off, const char *path);
/* Appends page off to PATH.badblocks with system calls only (signal-safe): 0, or -1. */
int kr_media_list_add(const char *path, uint64_t off);
/* Clears PATH.badblocks (every listed page holds correct data again). */
int kr_media_clear_list(const char *path);
/* Makes the fault handlers cover this pool (installing them on first use), or stop. */
int kr_media_register(kr_pool *pool);
void kr_media_unregister(kr_pool *pool);

/* Emulated poison, for pools and regions alike: claims one of slots[0..n) for key (0 =
 * free) and returns its index, or -1 if all are taken; then makes the page at `page`
 * inaccessible (*hidden: that much was done) and overwrites its content through the file
 * (fd, offset off). */
#include <stdatomic.h>
#include <stdbool.h>
int kr_media_claim_slot(_Atomic uint64_t *slots, int n, uint64_t key);
int kr_media_lose_page(int fd, void *page, uint64_t off, bool *hidden);
/* The same for bytes [from, from + len) of the page only (the rest keeps its content, as
 * poison of a few cache lines leaves the others readable through the file). */
int kr_media_lose_range(int fd, void *page, uint64_t off, size_t from, size_t len, bool *hidden);
/* Reads len bytes of the file at off, grain bytes at a time where need be: a piece the
 * kernel cannot read (a machine check) reads as zeros. Returns the number of such pieces.
 * Signal-safe. */
size_t kr_media_read_salvage(int fd, void *buf, size_t len, uint64_t off, size_t grain);
/* For a fault resolver, signal-safe: the page at file offset off, whose block reported a
 * machine check, moves to a new block holding what could still be read from the old one
 * through the file, grain bytes at a time (a piece that fails reads as zeros). Then the
 * mapping reads it again without faulting. false if the file system refused. */
bool kr_media_salvage_page(int fd, uint64_t off, size_t grain);

/* Mapped ranges that are not pools but whose faults someone above resolves (protected
 * regions: sealed segments, the mprotect tracker, emulated poison). The resolver runs in
 * the signal handler for a SIGSEGV or SIGBUS inside [base, base + len); it returns true if
 * the access may run again, false to pass the fault on (previous handler or default). */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
typedef bool (*kr_fault_fn)(void *ctx, int sig, const siginfo_t *si);
int kr_media_watch(const void *base, size_t len, kr_fault_fn fn, void *ctx);
void kr_media_unwatch(const void *base);

#endif
