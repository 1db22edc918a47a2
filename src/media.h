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

#endif
