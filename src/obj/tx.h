/*
 * tx.h - what pool.c asks of tx.c: the state the pool's transactions share (struct
 * kr_tx_shared, pool->tx), made at open and freed at close. The transaction API itself is
 * public (keratin.h).
 */
#ifndef KR_TX_H
#define KR_TX_H

#include "pool_state.h"

/* Makes pool->tx for a pool whose log is up (one spare slot per lane). */
int kr_tx_shared_new(kr_pool *pool);
/* Frees pool->tx with what ended transactions left for their lanes; at close, when every
 * lane is free. NULL-safe. */
void kr_tx_shared_free(kr_pool *pool);

/* What the stale map's cleaner (stale.c) and a scrub pass (scrub.c) ask: the in-flight
 * in-place buffers held still (no range joins or leaves while held), and whether one of
 * them lies in page columns [col_lo, col_hi), or which columns they lie in (busy[c] set to
 * 1): their home bytes are not what parity and checksums may be computed over. */
void kr_tx_inflight_hold(kr_pool *pool);
void kr_tx_inflight_release(kr_pool *pool);
int kr_tx_inflight_in_columns(kr_pool *pool, uint64_t col_lo, uint64_t col_hi);
void kr_tx_inflight_columns(kr_pool *pool, uint8_t *busy);
/* Caller holds the in-flight list (kr_tx_inflight_hold). Whether the object at b has
 * in-flight in-place ranges (-1 if not) and, if so, whether its checksum holds over what
 * it was computed on: home, with each such range's old bytes in place of the stores made
 * there (1), or not (0). KR_E_NOMEM as 0. */
int kr_tx_inflight_object_holds(kr_pool *pool, const struct kr_block *b);
/* A media repair (repair.c) rebuilt the page at off, data or parity, into out (len bytes)
 * from parity and the other rows, with commits held still. Where another row held an
 * in-flight buffer's uncommitted stores, the rebuild took them for the bytes parity reflects:
 * out gets the buffer's old bytes back there. A buffer with stores in the page itself lost
 * them: its commit fails with KR_E_MEDIA (it aborts). Safe in the fault handler, also on a
 * thread that faulted holding the in-flight list. KR_E_MEDIA (out untouched) if the list
 * stays held by another thread for 100 ms: it may be waiting for this repair. */
int kr_tx_inflight_rebuilt(kr_pool *pool, uint64_t off, size_t len, uint8_t *out);
/* An object's checksum was recomputed behind the transactions' back: its DRAM block
 * checksums (vcache.h) and copy (shadow.h) are dropped. */
void kr_tx_forget(kr_pool *pool, kr_oid oid, uint64_t size);
/* Whether the object's DRAM block checksums are cached (tests watch them evicted). */
int kr_tx_blocks_cached(kr_pool *pool, kr_oid oid, uint64_t size);
/* Pools with the stale map: the newest sequence number of a transaction that wrote into the
 * stale-map group g (KR_STALE_COLUMNS_PER_BIT columns, layout.h), noted at each
 * transaction's end: what a replay after a crash would write again (stale.c invariant 5).
 * Noting starts at the first call; transactions before it count as writers everywhere, so
 * the answer is never below the newest sequence number handed out before that call. */
uint64_t kr_tx_group_writer(kr_pool *pool, uint64_t g);

#endif
