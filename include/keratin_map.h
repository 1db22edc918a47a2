/*
 * keratin_map.h - ordered and hashed maps from 64-bit keys to 64-bit values, kept in a
 * keratin pool: the six structures of PMDK's examples and of the Pangolin paper, written
 * on keratin's public transaction API (libkeratin-map; it uses nothing but keratin.h).
 *
 *   KR_MAP_CTREE     crit-bit tree: one leaf per key, internal nodes split on a bit
 *   KR_MAP_RBTREE    red-black tree with a sentinel node
 *   KR_MAP_BTREE     B-tree of order 8 (up to 7 keys per node)
 *   KR_MAP_SKIPLIST  skip list of 8 levels
 *   KR_MAP_RTREE     radix tree on the key's bytes (256-way nodes, path compression)
 *   KR_MAP_HASHMAP   chained hash map whose bucket table doubles as it fills
 *
 * Every change runs in a keratin transaction, so after a crash a map holds exactly the
 * operations whose call returned success. A change made with tx == NULL is a transaction of
 * its own (one fence); with a transaction of the caller's, it joins it, and becomes durable
 * (or not) with the caller's other changes at kr_tx_commit.
 *
 * Values are opaque 64-bit words: store a kr_oid to keep bigger values in objects of their
 * own. Threads: a map is not thread-safe; callers serialise the calls on one map (different
 * maps may be used from different threads). Errors are keratin's codes (keratin.h), with
 * details in kr_errmsg().
 */
#ifndef KERATIN_MAP_H
#define KERATIN_MAP_H

#include <stdint.h>

#include "keratin.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kr_map_kind {
	KR_MAP_CTREE,
	KR_MAP_RBTREE,
	KR_MAP_BTREE,
	KR_MAP_SKIPLIST,
	KR_MAP_RTREE,
	KR_MAP_HASHMAP,
	KR_MAP_NKINDS
};

/* Object type numbers the maps use for their objects: 0x6b6d0000 ("km") and up. */
#define KR_MAP_TYPE_BASE 0x6b6d0000u

typedef struct kr_map kr_map;

/* "ctree", "rbtree", ... ; NULL for an unknown kind. */
KR_API const char *kr_map_kind_name(enum kr_map_kind kind);
/* The kind named s, or -1. */
KR_API int kr_map_kind_parse(const char *s);

/* Creates an empty map of the given kind in its own transaction (tx NULL) or in the
 * caller's, and returns the oid of its descriptor object: keep it (in the pool's root
 * object, say) to find the map again. Errors: KR_E_MISUSE_ARG, allocation errors. */
KR_API int kr_map_create(kr_pool *pool, kr_tx *tx, enum kr_map_kind kind, kr_oid *map);

/* A DRAM handle on the map whose descriptor is oid. Errors: KR_E_MISUSE_OID/FREED, or
 * KR_E_FORMAT if the object is not a map descriptor. */
KR_API int kr_map_open(kr_pool *pool, kr_oid map, kr_map **m);
/* Frees the handle (the map stays in the pool). */
KR_API void kr_map_close(kr_map *m);
KR_API enum kr_map_kind kr_map_kind_of(const kr_map *m);

/* Inserts key with value, or replaces the value of a present key.
 * Returns 0 (inserted), 1 (replaced) or a negative error; on error with tx == NULL nothing
 * changed, with a caller's tx the caller must abort it. */
KR_API int kr_map_insert(kr_map *m, kr_tx *tx, uint64_t key, uint64_t value);

/* Removes key: 1 (removed; *value, if not NULL, receives its value), 0 (absent) or a
 * negative error (as for insert). */
KR_API int kr_map_remove(kr_map *m, kr_tx *tx, uint64_t key, uint64_t *value);

/* Looks key up: 1 (present, *value set if not NULL), 0 (absent), or a negative error if
 * the structure is damaged (KR_E_CORRUPT: it never loops or crashes on a bad link). With tx,
 * sees the transaction's own changes; with NULL, reads the pool directly (no transaction). */
KR_API int kr_map_lookup(kr_map *m, kr_tx *tx, uint64_t key, uint64_t *value);

/* Calls cb for every pair (in key order for the trees and the skip list, in bucket order for
 * the hash map) until cb returns nonzero; returns that value, 0, or a negative error if the
 * structure is damaged (so callbacks should return positive values to stop early). The map
 * must not be changed from cb. */
KR_API int kr_map_foreach(kr_map *m, int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx);

/* Number of keys (counts them: O(n) for every kind). */
KR_API uint64_t kr_map_count(kr_map *m);

/* Verifies the structure's invariants (order, balance, links, counts): KR_OK, or
 * KR_E_CORRUPT with a message naming the first violation. For tests and `keratin check`. */
KR_API int kr_map_check(kr_map *m);

#ifdef __cplusplus
}
#endif
#endif
