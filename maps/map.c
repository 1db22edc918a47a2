/*
 * map.c - the map library's public face: kinds, descriptors, and running each operation in
 * the caller's transaction or in one of its own. The structures themselves are in
 * ctree.c, rbtree.c, btree.c, skiplist.c, rtree.c and hashmap.c.
 */
#include <stdlib.h>
#include <string.h>

#include "map_internal.h"

static const char *const kind_names[KR_MAP_NKINDS] = {
	[KR_MAP_CTREE] = "ctree",       [KR_MAP_RBTREE] = "rbtree", [KR_MAP_BTREE] = "btree",
	[KR_MAP_SKIPLIST] = "skiplist", [KR_MAP_RTREE] = "rtree",   [KR_MAP_HASHMAP] = "hashmap",
};

static const struct map_ops *const kind_ops[KR_MAP_NKINDS] = {
	[KR_MAP_CTREE] = &kr_map_ctree_ops,       [KR_MAP_RBTREE] = &kr_map_rbtree_ops,
	[KR_MAP_BTREE] = &kr_map_btree_ops,       [KR_MAP_SKIPLIST] = &kr_map_skiplist_ops,
	[KR_MAP_RTREE] = &kr_map_rtree_ops,       [KR_MAP_HASHMAP] = &kr_map_hashmap_ops,
};

struct kr_map {
	kr_pool *pool;
	kr_oid desc;
	enum kr_map_kind kind;
	const struct map_ops *ops;
};

const char *kr_map_kind_name(enum kr_map_kind kind)
{
	return (unsigned)kind < KR_MAP_NKINDS ? kind_names[kind] : NULL;
}

int kr_map_kind_parse(const char *s)
{
	for (int k = 0; s && k < KR_MAP_NKINDS; k++)
		if (strcmp(s, kind_names[k]) == 0)
			return k;
	return -1;
}

enum kr_map_kind kr_map_kind_of(const kr_map *m) { return m->kind; }

/* The operation's context: the caller's transaction, or a new one (*own set). */
static int op_begin(kr_pool *pool, kr_oid desc, kr_tx *tx, struct mctx *c, int *own)
{
	*c = (struct mctx){.pool = pool, .tx = tx, .desc = desc};
	*own = tx == NULL;
	return *own ? kr_tx_begin(pool, &c->tx) : KR_OK;
}

/* Ends an own transaction: committed if the operation changed something (rc > 0 for
 * remove, rc >= 0 otherwise: changed says which), else aborted. */
static int op_end(struct mctx *c, int own, int rc, int changed)
{
	if (!own)
		return rc;
	if (rc < 0 || !changed) {
		kr_tx_abort(c->tx);
		return rc;
	}
	int crc = kr_tx_commit(c->tx);
	return crc < 0 ? crc : rc;
}

int kr_map_create(kr_pool *pool, kr_tx *tx, enum kr_map_kind kind, kr_oid *map)
{
	if (!pool || !map || (unsigned)kind >= KR_MAP_NKINDS)
		return kr_error_set(KR_E_MISUSE_ARG, "kr_map_create: bad argument");
	const struct map_ops *ops = kind_ops[kind];
	struct mctx c;
	int own, rc = op_begin(pool, 0, tx, &c, &own);
	if (rc)
		return rc;
	rc = kr_tx_alloc(c.tx, ops->desc_size, MAP_TYPE(kind, 0), &c.desc);
	struct map_desc_hdr *h = rc ? NULL : MAP_WR(&c, c.desc, struct map_desc_hdr);
	if (!rc && !h)
		rc = map_error();
	if (!rc) {
		*h = (struct map_desc_hdr){.magic = KR_MAP_MAGIC, .kind = (uint32_t)kind};
		rc = ops->init(&c);
	}
	rc = op_end(&c, own, rc, 1);
	if (rc == KR_OK)
		*map = c.desc;
	return rc;
}

int kr_map_open(kr_pool *pool, kr_oid desc, kr_map **m)
{
	if (!pool || !m)
		return kr_error_set(KR_E_MISUSE_ARG, "kr_map_open: bad argument");
	const struct map_desc_hdr *h = kr_get(pool, desc);
	if (!h)
		return kr_errcode();
	uint32_t type = kr_type(pool, desc);
	if (kr_size(pool, desc) < sizeof(*h) || h->magic != KR_MAP_MAGIC ||
	    h->kind >= KR_MAP_NKINDS || type != MAP_TYPE(h->kind, 0) ||
	    kr_size(pool, desc) != kind_ops[h->kind]->desc_size)
		return kr_error_set(KR_E_FORMAT, "object %#llx is not a map descriptor",
				    (unsigned long long)desc);
	kr_map *n = malloc(sizeof(*n));
	if (!n)
		return kr_error_set(KR_E_NOMEM, "map handle");
	*n = (kr_map){.pool = pool, .desc = desc, .kind = h->kind, .ops = kind_ops[h->kind]};
	*m = n;
	return KR_OK;
}

void kr_map_close(kr_map *m) { free(m); }

int kr_map_insert(kr_map *m, kr_tx *tx, uint64_t key, uint64_t value)
{
	struct mctx c;
	int own, rc = op_begin(m->pool, m->desc, tx, &c, &own);
	if (rc)
		return rc;
	rc = m->ops->insert(&c, key, value);
	return op_end(&c, own, rc, 1);
}

int kr_map_remove(kr_map *m, kr_tx *tx, uint64_t key, uint64_t *value)
{
	struct mctx c;
	int own, rc = op_begin(m->pool, m->desc, tx, &c, &own);
	if (rc)
		return rc;
	rc = m->ops->remove(&c, key, value);
	return op_end(&c, own, rc, rc > 0);
}

int kr_map_lookup(kr_map *m, kr_tx *tx, uint64_t key, uint64_t *value)
{
	struct mctx c = {.pool = m->pool, .tx = tx, .desc = m->desc};
	return m->ops->lookup(&c, key, value);
}

int kr_map_foreach(kr_map *m, int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx)
{
	struct mctx c = {.pool = m->pool, .desc = m->desc};
	return m->ops->foreach(&c, cb, ctx);
}

static int count_one(uint64_t key, uint64_t value, void *ctx)
{
	++*(uint64_t *)ctx;
	return 0;
}

uint64_t kr_map_count(kr_map *m)
{
	uint64_t n = 0;
	kr_map_foreach(m, count_one, &n);
	return n;
}

int kr_map_check(kr_map *m)
{
	struct mctx c = {.pool = m->pool, .desc = m->desc};
	uint64_t n = 0, walked = 0;
	int rc = m->ops->check(&c, &n);
	if (rc)
		return rc;
	kr_map_foreach(m, count_one, &walked);
	if (walked != n)
		return map_corrupt("%s: check counts %llu keys, iteration %llu", kind_names[m->kind],
				   (unsigned long long)n, (unsigned long long)walked);
	return KR_OK;
}
