/*
 * kvmap.h - a small persistent hash map from uint64_t keys to variable-length byte values,
 * kept in a keratin pool and changed only through keratin transactions, so a crash at any
 * point leaves it holding exactly the operations that returned success.
 *
 * It is an example of how to build a structure on keratin, not a production map: the bucket
 * count is fixed when the map is created, and a kvmap is not thread-safe (callers serialise
 * its calls). The map owns the pool's root object.
 *
 * Functions that can fail return KR_OK or a negative kr_err code, and the library's thread
 * error (kr_errmsg()) tells the details.
 */
#ifndef KVMAP_H
#define KVMAP_H

#include <stddef.h>
#include <stdint.h>

#include "keratin.h"

struct kvmap;

/* Opens the map kept in pool, creating an empty one with nbuckets buckets (0: a default)
 * the first time; nbuckets is ignored for an existing map. The handle lives in DRAM and
 * must be closed before the pool is. Errors: the library's, or KR_E_FORMAT if the pool's
 * root object is not a kvmap. */
int kvmap_open(kr_pool *pool, uint64_t nbuckets, struct kvmap **map);
void kvmap_close(struct kvmap *map);

/* Inserts key or replaces its value, in one transaction. */
int kvmap_put(struct kvmap *map, uint64_t key, const void *val, size_t len);

/* The value of key and its length, or NULL if the key is absent. The pointer is into the
 * pool: read-only, and valid until the key is deleted or replaced. */
const void *kvmap_get(struct kvmap *map, uint64_t key, size_t *len);

/* Deletes key in one transaction: 1 if it was there, 0 if not, or a negative error. */
int kvmap_del(struct kvmap *map, uint64_t key);

/* Number of keys. */
uint64_t kvmap_count(struct kvmap *map);

/* Calls fn for every key in an unspecified order until fn returns nonzero, which is then
 * returned (0 after a full walk). fn must not change the map. */
typedef int (*kvmap_fn)(uint64_t key, const void *val, size_t len, void *ctx);
int kvmap_foreach(struct kvmap *map, kvmap_fn fn, void *ctx);

#endif
