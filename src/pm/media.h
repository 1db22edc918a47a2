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
