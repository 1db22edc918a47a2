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

#endif
