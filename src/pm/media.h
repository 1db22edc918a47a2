/*
 * media.h - the media-error front end (media.c): bad-block lists, emulated poison, salvage,
 * and the dispatcher of SIGBUS/SIGSEGV to the resolvers the layers above register. Nothing
 * here knows a format: what a lost page held, and how to rebuild it, is the owner's.
 */
#ifndef KR_MEDIA_H
#define KR_MEDIA_H

#include <stdint.h>

/* The unit of loss and of repair: one page of the mapping. */
#define KR_MEDIA_PAGE 4096u

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

/* Registration of a resolver for a mapped range whose faults a layer above resolves (an
 * object pool and its read-only view, a protected region, a keratin-fs mapping); the
 * states of a registration are described at the top of media.c. The resolver runs in the
 * signal handler for a SIGSEGV or SIGBUS inside [base, base + len) with the owner's ctx; it
 * returns true if the access may run again, false to pass the fault on (previous handler or
 * default). kr_media_watch installs the handlers on first use; KR_E_MISUSE_STATE when every
 * slot is taken. kr_media_unwatch(base) before the range is unmapped. ucontext is the
 * handler's third argument (whether the access was a read or a write). */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
typedef bool (*kr_fault_fn)(void *ctx, int sig, const siginfo_t *si, const void *ucontext);
int kr_media_watch(const void *base, size_t len, kr_fault_fn fn, void *ctx);
void kr_media_unwatch(const void *base);
/* The resolver for a SIGSEGV at an address in no watched range (one per process; the debug
 * mode's retired micro-buffers, which are many small mappings of their own): it may report,
 * and returns true only if the access may run again. Set once; installs the handlers. */
int kr_media_watch_elsewhere(kr_fault_fn fn, void *ctx);

#endif
