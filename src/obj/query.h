/*
 * query.h - an open pool's error state and access mode (query.c), which every file that
 * changes a pool consults before it does.
 */
#ifndef KR_QUERY_H
#define KR_QUERY_H

#include "pool_state.h"

/* KR_E_POOL_FAILED (with a message) if the pool is in the error state, else KR_OK. */
int kr_pool_usable(kr_pool *pool);
/* KR_E_MISUSE_STATE (message naming what) if the pool was opened with KR_OPEN_READONLY. */
int kr_pool_writable(kr_pool *pool, const char *what);
/* Puts the pool in the error state after a failure that leaves durability unknown. */
void kr_pool_fail(kr_pool *pool, int err);

#endif
