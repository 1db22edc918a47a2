/*
 * repair.h - a pool's media errors (repair.c): rebuilding lost pages, the platform's
 * bad-block list at open, emulated poison (struct kr_poison, pool->poison) and the fault
 * resolvers registered with pm/'s media front end.
 */
#ifndef KR_REPAIR_H
#define KR_REPAIR_H

#include "pool_state.h"

/* Makes pool->poison, with no page poisoned. */
int kr_poison_new(kr_pool *pool);
/* Frees pool->poison. NULL-safe. */
void kr_poison_free(kr_pool *pool);

/* Rebuilds the lost page at pool offset off (any kind of page), flushes, fences. */
int kr_pool_repair_page(kr_pool *pool, uint64_t off);
/* Repairs every page of the platform's bad-block list for this pool, then clears it. */
int kr_pool_repair_listed(kr_pool *pool);
/* Registers the pool's fault resolvers with the media front end (pm/media.h), or removes
 * them. */
int kr_pool_media_attach(kr_pool *pool);
void kr_pool_media_detach(kr_pool *pool);

#endif
