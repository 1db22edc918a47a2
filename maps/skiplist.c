/*
 * skiplist.c - KR_MAP_SKIPLIST: a skip list of 8 levels.
 *
 * Layout
 *
 *   descriptor (80 B)  map_desc_hdr (16) | head[8] (64): the first node of each level
 *   node       (88 B)  next[8] (64) | key (8) | value (8) | height (8)
 *
 *   Like PMDK's skiplist_map node (next pointers, then the entry), with 8 levels and 8-byte
 *   oids; the height is stored so that check() can tell which levels must link the node.
 *   Every node has all 8 slots, like PMDK's, so levels never need a reallocation and nodes
 *   come from one size class. The head pointers live in the descriptor rather than in a
 *   dummy head node, which saves a read per operation; a link is therefore named by the
 *   object holding a next[] array and the offset of that array (struct sl_link).
 *
 * Design
 *
 *   Level i links, in ascending key order, exactly the nodes whose height exceeds i; level
 *   0 links them all. A node's height comes from a hash of its key (a node reaches level
 *   i + 1 with probability 1/4): deterministic, so nothing about the structure depends on
 *   DRAM state, and re-inserting a key rebuilds the same shape. With p = 1/4, 8 levels
 *   keep searches short up to about 4^8 = 64k keys and degrade gently beyond (the top
 *   level holds n / 4^7 nodes).
 *
 *   An insert or remove changes one next[] slot per level of the node, in the predecessor
 *   at that level; only those 8-byte slots are logged (runs of slots of one predecessor as
 *   one range). A new node is a fresh object, written whole without logging.
 */
#include <string.h>

#include "map_internal.h"

#define SL_LEVELS 8

#define SL_NODE_TYPE MAP_TYPE(KR_MAP_SKIPLIST, 1)

struct sl_node {
	kr_oid next[SL_LEVELS]; /* null beyond height */
	uint64_t key;
	uint64_t value;
	uint64_t height; /* 1..SL_LEVELS: the levels that link this node */
};

struct sl_desc {
	struct map_desc_hdr hdr;
	kr_oid head[SL_LEVELS];
};

_Static_assert(sizeof(struct sl_node) == 88, "skiplist node is 88 bytes");
_Static_assert(sizeof(struct sl_desc) == 80, "skiplist descriptor is 80 bytes");
_Static_assert(offsetof(struct sl_node, next) == 0, "next[] opens the node");

/* A next[] array: of the descriptor (the heads) or of a node. */
struct sl_link {
	kr_oid obj;
	size_t off;
};

static struct sl_link head_link(const struct mctx *c)
{
	return (struct sl_link){c->desc, offsetof(struct sl_desc, head)};
}

static struct sl_link node_link(kr_oid node)
{
	return (struct sl_link){node, offsetof(struct sl_node, next)};
}

static const kr_oid *sl_next(struct mctx *c, struct sl_link l)
{
	const char *p = map_rd(c, l.obj);
	return p ? (const kr_oid *)(p + l.off) : NULL;
}

/* splitmix64's finaliser: every key bit moves every height bit. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static int sl_height(uint64_t key)
{
	uint64_t h = mix64(key);
	int height = 1;
	while (height < SL_LEVELS && (h & 3) == 0) {
		height++;
		h >>= 2;
	}
	return height;
}

/* Walks down to key: path[i] (if path) is the last link at level i before the first node
 * whose key is >= key; *found is that node on level 0 (or null), and *fx its content. */
static int sl_find(struct mctx *c, uint64_t key, struct sl_link path[SL_LEVELS], kr_oid *found,
		   const struct sl_node **fx)
{
	struct sl_link cur = head_link(c);
	const kr_oid *next = sl_next(c, cur);
	if (!next)
		return map_error();
	uint64_t cur_key = 0; /* meaningful once cur is a node */
	/* The node that ended the last level's walk (its key is >= key): where the next level
	 * reaches it, no need to read it again. Level 0 ends at it or at null. */
	kr_oid stop = KR_OID_NULL;
	const struct sl_node *stop_x = NULL;
	for (int i = SL_LEVELS - 1; i >= 0; i--) {
		for (;;) {
			kr_oid n = next[i];
			if (!n || n == stop)
				break;
			const struct sl_node *x = MAP_RD(c, n, struct sl_node);
			if (!x)
				return map_error();
			if (x->key >= key) {
				stop = n;
				stop_x = x;
				break;
			}
			/* A link back to a smaller key would loop forever. */
			if (cur.obj != c->desc && x->key <= cur_key)
				return map_corrupt("skiplist: level %d links key %llu after %llu", i,
						   (unsigned long long)x->key,
						   (unsigned long long)cur_key);
			cur = node_link(n);
			cur_key = x->key;
			next = x->next;
		}
		if (path)
			path[i] = cur;
	}
	*found = next[0];
	*fx = next[0] ? stop_x : NULL;
	return KR_OK;
}

/* Sets slot i of path[i] to to[i] for levels 0..height-1, one kr_tx_add per run of levels
 * whose predecessor is the same object (its slots are adjacent). */
static int sl_relink(struct mctx *c, const struct sl_link path[SL_LEVELS], int height,
		     const kr_oid to[SL_LEVELS])
{
	for (int i = 0; i < height;) {
		int j = i + 1;
		while (j < height && path[j].obj == path[i].obj)
			j++;
		kr_oid *w = kr_tx_add(c->tx, path[i].obj, path[i].off + (size_t)i * sizeof(kr_oid),
				      (size_t)(j - i) * sizeof(kr_oid));
		if (!w)
			return map_error();
		memcpy(w, &to[i], (size_t)(j - i) * sizeof(kr_oid));
		i = j;
	}
	return KR_OK;
}

static int sl_init(struct mctx *c)
{
	(void)c; /* the zeroed descriptor is the empty list */
	return KR_OK;
}

static int sl_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	kr_oid n;
	const struct sl_node *x;
	int rc = sl_find(c, key, NULL, &n, &x);
	if (rc || !n || x->key != key)
		return rc;
	if (value)
		*value = x->value;
	return 1;
}

static int sl_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	struct sl_link path[SL_LEVELS];
	kr_oid n;
	const struct sl_node *x;
	int rc = sl_find(c, key, path, &n, &x);
	if (rc)
		return rc;
	if (n && x->key == key) {
		uint64_t *v = MAP_WR_FIELD(c, n, struct sl_node, value);
		if (!v)
			return map_error();
		*v = value;
		return 1;
	}

	int height = sl_height(key);
	kr_oid to[SL_LEVELS];
	if ((rc = MAP_NEW(c, struct sl_node, KR_MAP_SKIPLIST, 1, &n)))
		return rc;
	struct sl_node *w = MAP_WR(c, n, struct sl_node);
	if (!w)
		return map_error();
	w->key = key;
	w->value = value;
	w->height = (uint64_t)height;
	for (int i = 0; i < height; i++) {
		const kr_oid *next = sl_next(c, path[i]);
		if (!next)
			return map_error();
		w->next[i] = next[i];
		to[i] = n;
	}
	rc = sl_relink(c, path, height, to);
	return rc ? rc : 0;
}

static int sl_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct sl_link path[SL_LEVELS];
	kr_oid n;
	const struct sl_node *x;
	int rc = sl_find(c, key, path, &n, &x);
	if (rc || !n || x->key != key)
		return rc;
	if (x->height < 1 || x->height > SL_LEVELS)
		return map_corrupt("skiplist: node %#llx has height %llu", (unsigned long long)n,
				   (unsigned long long)x->height);
	int height = (int)x->height;
	for (int i = 0; i < height; i++) {
		const kr_oid *next = sl_next(c, path[i]);
		if (!next)
			return map_error();
		if (next[i] != n)
			return map_corrupt("skiplist: level %d skips node %#llx of height %d", i,
					   (unsigned long long)n, height);
	}
	if (value)
		*value = x->value;
	/* x stays readable: relinking writes the predecessors, never the node itself. */
	if ((rc = sl_relink(c, path, height, x->next)) || (rc = kr_tx_free(c->tx, n)))
		return rc;
	return 1;
}

static int sl_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx),
		      void *ctx)
{
	const kr_oid *next = sl_next(c, head_link(c));
	if (!next)
		return map_error();
	const struct sl_node *prev = NULL;
	for (kr_oid n = next[0]; n;) {
		const struct sl_node *x = MAP_RD(c, n, struct sl_node);
		if (!x)
			return map_error();
		if (prev && x->key <= prev->key) /* a cycle would never end */
			return map_corrupt("skiplist: level 0 links key %llu after %llu",
					   (unsigned long long)x->key, (unsigned long long)prev->key);
		int rc = cb(x->key, x->value, ctx);
		if (rc)
			return rc;
		prev = x;
		n = x->next[0];
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Check
 * ------------------------------------------------------------------------------------- */

/* The node n for check(): NULL (and the error set) unless it is a live skiplist node. */
static const struct sl_node *sl_check_node(struct mctx *c, kr_oid n, int level)
{
	const struct sl_node *x = NULL;
	if (kr_type(c->pool, n) == SL_NODE_TYPE && kr_size(c->pool, n) == sizeof(struct sl_node))
		x = MAP_RD(c, n, struct sl_node);
	if (!x)
		map_corrupt("skiplist: level %d links %#llx, not a skiplist node", level,
			    (unsigned long long)n);
	return x;
}

static int sl_check(struct mctx *c, uint64_t *count)
{
	*count = 0;
	const struct sl_desc *d = MAP_RD(c, c->desc, struct sl_desc);
	if (!d)
		return map_corrupt("skiplist: descriptor %#llx unreadable",
				   (unsigned long long)c->desc);

	/* Level 0: strictly ascending (which also rules out cycles), heights in range, slots
	 * above the height null. */
	uint64_t keys = 0;
	const struct sl_node *prev = NULL;
	for (kr_oid n = d->head[0]; n;) {
		const struct sl_node *x = sl_check_node(c, n, 0);
		if (!x)
			return KR_E_CORRUPT;
		unsigned long long o = (unsigned long long)n;
		if (prev && x->key <= prev->key)
			return map_corrupt("skiplist: level 0: key %llu after %llu (node %#llx)",
					   (unsigned long long)x->key,
					   (unsigned long long)prev->key, o);
		if (x->height < 1 || x->height > SL_LEVELS)
			return map_corrupt("skiplist: node %#llx has height %llu", o,
					   (unsigned long long)x->height);
		for (int i = (int)x->height; i < SL_LEVELS; i++)
			if (x->next[i])
				return map_corrupt("skiplist: node %#llx of height %llu links level %d",
						   o, (unsigned long long)x->height, i);
		keys++;
		prev = x;
		n = x->next[0];
	}

	/* Level i links exactly the level-0 nodes of height > i, in the same order: so each
	 * level is sorted and a sublist of the one below. Level 0 ended, so these walks do. */
	for (int i = 1; i < SL_LEVELS; i++) {
		kr_oid expect = d->head[i];
		for (kr_oid n = d->head[0]; n;) {
			const struct sl_node *x = MAP_RD(c, n, struct sl_node);
			if (!x)
				return map_corrupt("skiplist: node %#llx unreadable",
						   (unsigned long long)n);
			if ((int)x->height > i) {
				if (n != expect)
					return map_corrupt("skiplist: level %d links %#llx where node "
							   "%#llx (key %llu) belongs",
							   i, (unsigned long long)expect,
							   (unsigned long long)n,
							   (unsigned long long)x->key);
				expect = x->next[i];
			}
			n = x->next[0];
		}
		if (expect)
			return map_corrupt("skiplist: level %d links %#llx, not on level 0 in order",
					   i, (unsigned long long)expect);
	}
	*count = keys;
	return KR_OK;
}

const struct map_ops kr_map_skiplist_ops = {
	.desc_size = sizeof(struct sl_desc),
	.init = sl_init,
	.insert = sl_insert,
	.remove = sl_remove,
	.lookup = sl_lookup,
	.foreach = sl_foreach,
	.check = sl_check,
};
