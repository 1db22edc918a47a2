/*
 * map_internal.h - what the six map structures share: the operations table each one fills,
 * the context an operation runs in, and the descriptor header every map's root object starts
 * with. Structures use only keratin's public API (keratin.h), through the helpers below, so
 * that reads inside a transaction see the transaction's own changes.
 */
#ifndef KR_MAP_INTERNAL_H
#define KR_MAP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "keratin.h"
#include "keratin_map.h"

/* An operation's context. tx is NULL only for read-only operations run outside any
 * transaction (lookup, foreach, check without a caller's transaction). */
struct mctx {
	kr_pool *pool;
	kr_tx *tx;
	kr_oid desc; /* the map's descriptor object */
};

/* The first 16 bytes of every map's descriptor object (type KR_MAP_TYPE_BASE + kind). */
#define KR_MAP_MAGIC 0x70616d6e69746172ull /* "ratinmap" */
struct map_desc_hdr {
	uint64_t magic;
	uint32_t kind;
	uint32_t reserved;
};

struct map_ops {
	size_t desc_size; /* the kind's descriptor, map_desc_hdr included */
	/* Fills a freshly allocated (zeroed) descriptor; hdr is already set. */
	int (*init)(struct mctx *c);
	/* 0 inserted, 1 replaced, < 0 error. */
	int (*insert)(struct mctx *c, uint64_t key, uint64_t value);
	/* 1 removed (*value set if value != NULL), 0 absent, < 0 error. */
	int (*remove)(struct mctx *c, uint64_t key, uint64_t *value);
	/* 1 present (*value set if value != NULL), 0 absent. */
	int (*lookup)(struct mctx *c, uint64_t key, uint64_t *value);
	/* Stops at and returns cb's first nonzero result. */
	int (*foreach)(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx);
	/* Invariants; the number of keys into *count. KR_OK or KR_E_CORRUPT. */
	int (*check)(struct mctx *c, uint64_t *count);
};

extern const struct map_ops kr_map_ctree_ops, kr_map_rbtree_ops, kr_map_btree_ops,
	kr_map_skiplist_ops, kr_map_rtree_ops, kr_map_hashmap_ops;

/* Object type number of a kind's objects: the descriptor is sub 0, nodes 1, ... */
#define MAP_TYPE(kind, sub) (KR_MAP_TYPE_BASE + ((uint32_t)(kind) << 4) + (sub))

/* Read access to an object: through the transaction if there is one. */
static inline const void *map_rd(const struct mctx *c, kr_oid oid)
{
	return c->tx ? kr_tx_get(c->tx, oid) : kr_get(c->pool, oid);
}
#define MAP_RD(c, oid, T) ((const T *)map_rd((c), (oid)))
/* Writable pointers (NULL on error: return map_error()). Whole object, or one field. */
#define MAP_WR(c, oid, T) ((T *)kr_tx_open((c)->tx, (oid)))
#define MAP_WR_FIELD(c, oid, T, field) KR_TX_FIELD((c)->tx, (oid), T, field)
/* The error a NULL from MAP_WR / MAP_WR_FIELD / kr_tx_get stands for. */
static inline int map_error(void)
{
	int e = kr_errcode();
	return e < 0 ? e : KR_E_NOMEM;
}
/* A new zeroed object of T (type number MAP_TYPE(kind, sub)). */
#define MAP_NEW(c, T, kind, sub, oidp) kr_tx_alloc((c)->tx, sizeof(T), MAP_TYPE(kind, sub), (oidp))

/* KR_E_CORRUPT with a message naming the violation: for check(). */
#define map_corrupt(...) kr_error_set(KR_E_CORRUPT, __VA_ARGS__)

#endif
