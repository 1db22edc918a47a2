/*
 * debug.h - keratin's debug mode (KERATIN_DEBUG_PROTECT=1 or KR_OPEN_DEBUG): the checks the
 * object store makes on the application's use of its API, beyond what the API refuses
 * anyway. Every entry point is called only when pool->debug is set, so a pool without the
 * mode pays one predictable branch per call site and nothing else.
 */
#ifndef KR_DEBUG_H
#define KR_DEBUG_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"

struct kr_block;
struct kr_debug;

/* The debug state of one pool: NULL (the mode is off) or from kr_debug_new, which also
 * sets the resolver that names faults in retired micro-buffers. */
int kr_debug_new(struct kr_debug **out);
void kr_debug_free(struct kr_debug *d);

/* Micro-buffers: bytes of DRAM on pages of their own, zeroed or not. A retired buffer
 * (its transaction ended) becomes inaccessible and stays so for a quarantine of the last
 * KR_DEBUG_MBUF_QUARANTINE retired buffers, so that a late access faults and is reported
 * with the object it mirrored. */
#define KR_DEBUG_MBUF_QUARANTINE 256
void *kr_debug_mbuf_alloc(size_t bytes, int zero);
void kr_debug_mbuf_retire(void *buf, size_t bytes, kr_oid oid, uint64_t size);

/* Objects open for write: a transaction claims each existing object it opens for write
 * (or frees); a claim of an object another live transaction holds is KR_E_MISUSE_SHARED,
 * reported on stderr. Released when the transaction ends. */
int kr_debug_claim(kr_pool *pool, kr_oid oid, const void *tx);
void kr_debug_release_all(kr_pool *pool, const void *tx);

/* Freed objects: recorded at the free's commit; the view pages wholly inside the block stop
 * being readable until the heap hands the block out again (kr_debug_unfreed). A lookup that
 * found oid freed reports it (kr_debug_freed_access) when it is one of them. */
void kr_debug_freed(kr_pool *pool, const struct kr_block *b, kr_oid oid, uint64_t size);
void kr_debug_unfreed(char *view, uint64_t off, uint64_t bytes);
void kr_debug_freed_access(kr_pool *pool, kr_oid oid);

/* For the view's fault resolver (signal-safe): reports a fault at addr, in view_pool's
 * read-only view, if it hit a freed object. Returns 1 if it reported, 0 if not (a stray
 * store). Retired micro-buffers are reported by debug.c's own resolver (media.c's
 * kr_media_watch_elsewhere), set when the first debug pool opens. */
int kr_debug_fault(kr_pool *view_pool, const void *addr, const void *ucontext);

#endif
