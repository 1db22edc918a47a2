/*
 * stale.h - the stale map: page columns whose parity and object checksums trail bytes that
 * the application stored itself and made durable (kr_stored_persist), and the cleaner that
 * brings them up to date. stale.c has the design and the invariants; FORMAT.md the bits.
 */
#ifndef KR_STALE_H
#define KR_STALE_H

#include <stddef.h>
#include <stdint.h>

#include "keratin.h"

/* At open, before any repair: the map of a pool with the STALE_MAP feature, read from both
 * control pages (a bit set in either counts). KR_E_NOMEM. */
int kr_stale_new(kr_pool *pool);
void kr_stale_free(kr_pool *pool);

/* At open, once the log is settled and the heap loaded: every marked column's parity and
 * every checksum of an object in it recomputed over the bytes there, durably, and the map
 * cleared. What a crash left marked is trusted as it is (the window, DESIGN.md). */
int kr_stale_recover(kr_pool *pool);

/* 1 if a page column of [off, off + len) is marked: its parity and the checksums of its
 * objects may disagree with its bytes, and must not be judged or used to rebuild. */
int kr_stale_covers(const kr_pool *pool, uint64_t off, size_t len);

/* An object of a marked column that failed its checksum: the checksum recomputed over its
 * bytes as they are (they may be the application's, persisted and not followed yet),
 * durably. Takes the commit gate, as kr_stale_clean. */
struct kr_block;
int kr_stale_trust_object(kr_pool *pool, const struct kr_block *b);

/* Recomputes the redundancy of every marked column that no in-place transaction is writing,
 * and clears their marks (the cleaner's pass; also kr_pool_check's and close's first step).
 * Takes the commit gate: not from inside a commit. */
int kr_stale_clean(kr_pool *pool);

/* Stops the cleaner thread (close). */
void kr_stale_stop(kr_pool *pool);


#endif
