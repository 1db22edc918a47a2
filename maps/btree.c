/*
 * btree.c - KR_MAP_BTREE: a B-tree of order 8 (up to 7 keys and 8 children per node).
 *
 * Layout
 *
 *   descriptor (24 B)  map_desc_hdr (16) | root oid (8), 0 while the map is empty
 *   node      (184 B)  n (8) | items[7] of {key, value} (112) | child[8] (64)
 *
 *   The layout is PMDK's btree_map node (n, 7 items, 8 slots) with 8-byte oids instead of
 *   16-byte PMEMoids, so a node is 184 bytes against PMDK's 304. Leaves and internal nodes
 *   share the layout: a leaf is a node whose child[0] is null, and every child slot of a
 *   leaf stays null, so the code that shifts items and children works unchanged on both.
 *   Slots at and beyond n (items) and n + 1 (children) are garbage, never read: shrinking
 *   a node writes n and nothing else.
 *
 * Design
 *
 *   Every key lives in exactly one node. Non-root nodes hold BT_MIN (3) to BT_MAX (7) keys,
 *   the root 1 to 7; all leaves are at the same depth.
 *
 *   Insert and remove work bottom-up: the descent records the path, the change is made in
 *   the leaf, and only nodes that overflow split (8 keys -> 4 | median | 3) and only nodes
 *   that underflow borrow from a sibling or merge with it, walking back up the path. PMDK
 *   splits and fills proactively on the way down, which rewrites nodes that did not need
 *   it; under a redo log every rewritten byte is logged twice, so we do the least work.
 *   A key removed from an internal node is replaced by its predecessor, the last key of
 *   a leaf, whose removal then changes only that leaf's n.
 *
 *   Writes are exact: a change loads the node into a DRAM copy, edits the copy, and
 *   bt_store() logs only the words that differ (kr_tx_add on those ranges), so inserting
 *   at position i logs items i..n and n, not the node. New nodes are written whole: they
 *   are fresh objects, which the transaction writes home without logging them.
 */
#include <string.h>

#include "map_internal.h"

#define BT_ORDER 8
#define BT_MAX (BT_ORDER - 1)     /* keys per node */
#define BT_MIN (BT_ORDER / 2 - 1) /* keys per non-root node */
/* Deeper than any tree a pool can hold (4^32 nodes): a longer path means a cycle. */
#define BT_MAX_DEPTH 32

#define BT_NODE_TYPE MAP_TYPE(KR_MAP_BTREE, 1)

struct bt_item {
	uint64_t key;
	uint64_t value;
};

struct bt_node {
	uint64_t n; /* keys in use */
	struct bt_item items[BT_MAX];
	kr_oid child[BT_ORDER]; /* all null in a leaf */
};

struct bt_desc {
	struct map_desc_hdr hdr;
	kr_oid root;
};

_Static_assert(sizeof(struct bt_item) == 16, "btree item is 16 bytes");
_Static_assert(sizeof(struct bt_node) == 184, "btree node is 184 bytes");
_Static_assert(sizeof(struct bt_node) % 8 == 0, "bt_store diffs nodes word by word");
_Static_assert(sizeof(struct bt_desc) == 24, "btree descriptor is 24 bytes");

/* One step of a descent: the node, and the child taken (or, in the last node, the item). */
struct bt_step {
	kr_oid oid;
	int idx;
};

static int is_leaf(const struct bt_node *x) { return x->child[0] == KR_OID_NULL; }

/* The first position whose key is >= key. */
static int bt_search(const struct bt_node *x, uint64_t key)
{
	int i = 0;
	while (i < (int)x->n && x->items[i].key < key)
		i++;
	return i;
}

/* The node for reading in place; NULL after setting the error (bad oid, or an n that would
 * send us beyond the arrays). */
static const struct bt_node *bt_read(struct mctx *c, kr_oid oid)
{
	const struct bt_node *x = MAP_RD(c, oid, struct bt_node);
	if (x && x->n > BT_MAX) {
		map_corrupt("btree: node %#llx holds %llu keys", (unsigned long long)oid,
			    (unsigned long long)x->n);
		return NULL;
	}
	return x;
}

static int bt_root(struct mctx *c, kr_oid *root)
{
	const struct bt_desc *d = MAP_RD(c, c->desc, struct bt_desc);
	if (!d)
		return map_error();
	*root = d->root;
	return KR_OK;
}

static int bt_set_root(struct mctx *c, kr_oid root)
{
	kr_oid *r = MAP_WR_FIELD(c, c->desc, struct bt_desc, root);
	if (!r)
		return map_error();
	*r = root;
	return KR_OK;
}

/* A DRAM copy of a node, to edit and hand to bt_store with the original. */
static int bt_load(struct mctx *c, kr_oid oid, struct bt_node *x)
{
	const struct bt_node *p = bt_read(c, oid);
	if (!p)
		return map_error();
	*x = *p;
	return KR_OK;
}

/* Logs the words of after that differ from before (the node's current content). Runs of
 * changes at most two words apart are logged as one range: a log record costs a 16-byte
 * header, as much as the gap, and one record is less work than two. */
static int bt_store(struct mctx *c, kr_oid oid, const struct bt_node *before,
		    const struct bt_node *after)
{
	const uint64_t *o = (const uint64_t *)before, *w = (const uint64_t *)after;
	const size_t nwords = sizeof(struct bt_node) / 8;
	size_t i = 0;
	while (i < nwords) {
		if (o[i] == w[i]) {
			i++;
			continue;
		}
		size_t end = i + 1; /* one past the run's last changed word */
		for (size_t j = end; j < nwords && j - end <= 2; j++)
			if (o[j] != w[j])
				end = j + 1;
		uint64_t *d = kr_tx_add(c->tx, oid, i * 8, (end - i) * 8);
		if (!d)
			return map_error();
		memcpy(d, w + i, (end - i) * 8);
		i = end;
	}
	return KR_OK;
}

/* A new node holding *x (a fresh object: written whole, not logged). */
static int bt_create(struct mctx *c, const struct bt_node *x, kr_oid *oid)
{
	int rc = MAP_NEW(c, struct bt_node, KR_MAP_BTREE, 1, oid);
	if (rc)
		return rc;
	struct bt_node *w = MAP_WR(c, *oid, struct bt_node);
	if (!w)
		return map_error();
	*w = *x;
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Edits of DRAM copies
 * ------------------------------------------------------------------------------------- */

/* Puts it at position i with right as the child after it (x not full). */
static void node_insert(struct bt_node *x, int i, struct bt_item it, kr_oid right)
{
	int n = (int)x->n;
	memmove(&x->items[i + 1], &x->items[i], (size_t)(n - i) * sizeof(x->items[0]));
	memmove(&x->child[i + 2], &x->child[i + 1], (size_t)(n - i) * sizeof(x->child[0]));
	x->items[i] = it;
	x->child[i + 1] = right;
	x->n++;
}

/* Removes item i and the child after it. */
static void node_delete(struct bt_node *x, int i)
{
	int n = (int)x->n;
	memmove(&x->items[i], &x->items[i + 1], (size_t)(n - 1 - i) * sizeof(x->items[0]));
	memmove(&x->child[i + 1], &x->child[i + 2], (size_t)(n - 1 - i) * sizeof(x->child[0]));
	x->n--;
}

/* x is full: x keeps the lower 4 of the 8 keys (it included), *right gets the upper 3, and
 * the one between goes up in *median. Keeping the larger half on the left leaves nodes
 * more than half full under ascending inserts, which always split the rightmost node. */
static void node_split(struct bt_node *x, int i, struct bt_item it, kr_oid rchild,
		       struct bt_node *right, struct bt_item *median)
{
	struct bt_item items[BT_MAX + 1];
	kr_oid child[BT_ORDER + 1];
	memcpy(items, x->items, (size_t)i * sizeof(items[0]));
	items[i] = it;
	memcpy(&items[i + 1], &x->items[i], (size_t)(BT_MAX - i) * sizeof(items[0]));
	memcpy(child, x->child, (size_t)(i + 1) * sizeof(child[0]));
	child[i + 1] = rchild;
	memcpy(&child[i + 2], &x->child[i + 1], (size_t)(BT_MAX - i) * sizeof(child[0]));

	const int left_n = BT_ORDER / 2, right_n = BT_MAX - left_n;
	memcpy(x->items, items, (size_t)left_n * sizeof(items[0]));
	memcpy(x->child, child, (size_t)(left_n + 1) * sizeof(child[0]));
	x->n = (uint64_t)left_n;
	*median = items[left_n];
	memset(right, 0, sizeof(*right));
	memcpy(right->items, &items[left_n + 1], (size_t)right_n * sizeof(items[0]));
	memcpy(right->child, &child[left_n + 1], (size_t)(right_n + 1) * sizeof(child[0]));
	right->n = (uint64_t)right_n;
}

/* ---------------------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------------------- */
static int bt_init(struct mctx *c)
{
	(void)c; /* the zeroed descriptor is the empty tree */
	return KR_OK;
}

static int bt_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	kr_oid oid;
	int rc = bt_root(c, &oid);
	if (rc)
		return rc;
	for (int depth = 0; oid; depth++) {
		const struct bt_node *x = bt_read(c, oid);
		if (!x)
			return map_error();
		if (depth == BT_MAX_DEPTH)
			return map_corrupt("btree: path deeper than %d nodes", BT_MAX_DEPTH);
		int i = bt_search(x, key);
		if (i < (int)x->n && x->items[i].key == key) {
			if (value)
				*value = x->items[i].value;
			return 1;
		}
		oid = x->child[i];
	}
	return 0;
}

/* Inserts it (with right child rchild) at path[depth - 1], whose content is *last,
 * splitting nodes up the path as long as they overflow. */
static int bt_insert_up(struct mctx *c, const struct bt_step *path, int depth,
			const struct bt_node *last, struct bt_item it, kr_oid rchild)
{
	struct bt_node x = *last;
	int rc;
	for (int d = depth - 1;; d--) {
		struct bt_node old = x;
		if (x.n < BT_MAX) {
			node_insert(&x, path[d].idx, it, rchild);
			return bt_store(c, path[d].oid, &old, &x);
		}
		struct bt_node right;
		node_split(&x, path[d].idx, it, rchild, &right, &it);
		if ((rc = bt_store(c, path[d].oid, &old, &x)) || (rc = bt_create(c, &right, &rchild)))
			return rc;
		if (d == 0)
			break;
		if ((rc = bt_load(c, path[d - 1].oid, &x)))
			return rc;
	}
	/* The root split: a new root above it. */
	struct bt_node root = {.n = 1, .items = {it}, .child = {path[0].oid, rchild}};
	kr_oid oid;
	if ((rc = bt_create(c, &root, &oid)))
		return rc;
	return bt_set_root(c, oid);
}

static int bt_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	kr_oid oid;
	int rc = bt_root(c, &oid);
	if (rc)
		return rc;
	if (!oid) {
		struct bt_node first = {.n = 1, .items = {{key, value}}};
		if ((rc = bt_create(c, &first, &oid)))
			return rc;
		return bt_set_root(c, oid);
	}
	struct bt_step path[BT_MAX_DEPTH];
	struct bt_node leaf;
	int depth = 0;
	for (;;) {
		const struct bt_node *x = bt_read(c, oid);
		if (!x)
			return map_error();
		int i = bt_search(x, key);
		if (i < (int)x->n && x->items[i].key == key) {
			uint64_t *v = kr_tx_add(c->tx, oid, offsetof(struct bt_node, items) +
						i * sizeof(struct bt_item) + offsetof(struct bt_item, value),
						sizeof(*v));
			if (!v)
				return map_error();
			*v = value;
			return 1;
		}
		if (depth == BT_MAX_DEPTH)
			return map_corrupt("btree: path deeper than %d nodes", BT_MAX_DEPTH);
		path[depth++] = (struct bt_step){oid, i};
		if (is_leaf(x)) {
			leaf = *x;
			break;
		}
		oid = x->child[i];
	}
	rc = bt_insert_up(c, path, depth, &leaf, (struct bt_item){key, value}, KR_OID_NULL);
	return rc ? rc : 0;
}

/* x, child ci of p, takes the separator before it as its first key (with the left
 * sibling's last child), and the left sibling s's last key becomes that separator. */
static void borrow_left(struct bt_node *x, struct bt_node *p, int ci, struct bt_node *s)
{
	int n = (int)x->n;
	memmove(&x->items[1], &x->items[0], (size_t)n * sizeof(x->items[0]));
	memmove(&x->child[1], &x->child[0], (size_t)(n + 1) * sizeof(x->child[0]));
	x->items[0] = p->items[ci - 1];
	x->child[0] = s->child[s->n];
	x->n++;
	p->items[ci - 1] = s->items[s->n - 1];
	s->n--;
}

/* The mirror image: x takes the separator after it as its last key, and the right
 * sibling s's first key (which s gives up with its first child) replaces it. */
static void borrow_right(struct bt_node *x, struct bt_node *p, int ci, struct bt_node *s)
{
	int n = (int)s->n;
	x->items[x->n] = p->items[ci];
	x->child[x->n + 1] = s->child[0];
	x->n++;
	p->items[ci] = s->items[0];
	memmove(&s->items[0], &s->items[1], (size_t)(n - 1) * sizeof(s->items[0]));
	memmove(&s->child[0], &s->child[1], (size_t)n * sizeof(s->child[0]));
	s->n--;
}

/* Siblings l and r around separator sep of p become l; r must then be freed. */
static void merge(struct bt_node *l, struct bt_node *p, int sep, const struct bt_node *r)
{
	int ln = (int)l->n, rn = (int)r->n;
	l->items[ln] = p->items[sep];
	memcpy(&l->items[ln + 1], r->items, (size_t)rn * sizeof(r->items[0]));
	memcpy(&l->child[ln + 1], r->child, (size_t)(rn + 1) * sizeof(r->child[0]));
	l->n = (uint64_t)(ln + 1 + rn);
	node_delete(p, sep);
}

/* path[d] (not the root) has fallen to BT_MIN - 1 keys: it borrows a key through its
 * parent from a sibling that can spare one, or merges with a sibling, which takes a key
 * from the parent. *parent_n receives the parent's key count, to fix it in turn. */
static int bt_fix(struct mctx *c, const struct bt_step *path, int d, uint64_t *parent_n)
{
	kr_oid xo = path[d].oid, po = path[d - 1].oid;
	int ci = path[d - 1].idx; /* x is the parent's child ci */
	struct bt_node x, p, l, r, xold, pold, lold, rold;
	int rc;
	if ((rc = bt_load(c, xo, &x)) || (rc = bt_load(c, po, &p)))
		return rc;
	if (ci > (int)p.n || p.child[ci] != xo)
		return map_corrupt("btree: node %#llx is not child %d of its parent",
				   (unsigned long long)xo, ci);
	kr_oid lo = ci > 0 ? p.child[ci - 1] : KR_OID_NULL;
	kr_oid ro = ci < (int)p.n ? p.child[ci + 1] : KR_OID_NULL;
	if (!lo && !ro)
		return map_corrupt("btree: node %#llx has no sibling", (unsigned long long)xo);
	xold = x;
	pold = p;

	/* Borrowing from the left shifts x, which is nearly empty, and changes only the
	 * sibling's n; from the right it shifts the fuller sibling. So left first. */
	if (lo) {
		if ((rc = bt_load(c, lo, &l)))
			return rc;
		lold = l;
		if (l.n > BT_MIN) {
			borrow_left(&x, &p, ci, &l);
			if ((rc = bt_store(c, lo, &lold, &l)))
				return rc;
			goto store_xp;
		}
	}
	if (ro) {
		if ((rc = bt_load(c, ro, &r)))
			return rc;
		rold = r;
		if (r.n > BT_MIN) {
			borrow_right(&x, &p, ci, &r);
			if ((rc = bt_store(c, ro, &rold, &r)))
				return rc;
			goto store_xp;
		}
	}

	/* Merge, into the left node of the pair (appending is cheaper than shifting): at most
	 * BT_MIN + 1 + BT_MIN - 1 keys. */
	if (lo) {
		if (l.n + 1 + x.n > BT_MAX)
			return map_corrupt("btree: node %#llx too full to merge", (unsigned long long)lo);
		merge(&l, &p, ci - 1, &x);
		if ((rc = bt_store(c, lo, &lold, &l)) || (rc = kr_tx_free(c->tx, xo)))
			return rc;
	} else {
		if (x.n + 1 + r.n > BT_MAX)
			return map_corrupt("btree: node %#llx too full to merge", (unsigned long long)ro);
		merge(&x, &p, ci, &r);
		if ((rc = bt_store(c, xo, &xold, &x)) || (rc = kr_tx_free(c->tx, ro)))
			return rc;
	}
	*parent_n = p.n;
	return bt_store(c, po, &pold, &p);

store_xp:
	if ((rc = bt_store(c, xo, &xold, &x)))
		return rc;
	*parent_n = p.n;
	return bt_store(c, po, &pold, &p);
}

static int bt_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	kr_oid oid;
	int rc = bt_root(c, &oid);
	if (rc)
		return rc;
	if (!oid)
		return 0;
	struct bt_step path[BT_MAX_DEPTH];
	struct bt_node leaf;
	int depth = 0, found = -1; /* depth of the node holding key */
	for (;;) {
		const struct bt_node *x = bt_read(c, oid);
		if (!x)
			return map_error();
		if (depth == BT_MAX_DEPTH)
			return map_corrupt("btree: path deeper than %d nodes", BT_MAX_DEPTH);
		int i;
		if (found < 0) {
			i = bt_search(x, key);
			if (i < (int)x->n && x->items[i].key == key) {
				found = depth;
				if (value)
					*value = x->items[i].value;
			}
		} else {
			i = (int)x->n; /* down the rightmost path, to the predecessor */
		}
		if (is_leaf(x)) {
			if (found >= 0 && found < depth) {
				if (x->n == 0)
					return map_corrupt("btree: empty leaf %#llx",
							   (unsigned long long)oid);
				i = (int)x->n - 1;
			}
			path[depth++] = (struct bt_step){oid, i};
			leaf = *x;
			break;
		}
		path[depth++] = (struct bt_step){oid, i};
		oid = x->child[i];
	}
	if (found < 0)
		return 0;

	/* Take the item out of the leaf; a key in an internal node is overwritten by its
	 * predecessor, the leaf's last item. */
	const struct bt_step *at = &path[depth - 1];
	struct bt_node old = leaf;
	struct bt_item pred = leaf.items[at->idx];
	node_delete(&leaf, at->idx);
	if ((rc = bt_store(c, at->oid, &old, &leaf)))
		return rc;
	if (found < depth - 1) {
		struct bt_node in, inold;
		if ((rc = bt_load(c, path[found].oid, &in)))
			return rc;
		inold = in;
		in.items[path[found].idx] = pred;
		if ((rc = bt_store(c, path[found].oid, &inold, &in)))
			return rc;
	}

	/* Fix underflows up the path; n is the key count of path[d]. */
	int d = depth - 1;
	uint64_t n = leaf.n;
	for (; d > 0 && n < BT_MIN; d--)
		if ((rc = bt_fix(c, path, d, &n)))
			return rc;
	/* An emptied root gives way to its only child (or to nothing, if it was a leaf). */
	if (d == 0 && n == 0) {
		const struct bt_node *r = bt_read(c, path[0].oid);
		if (!r)
			return map_error();
		kr_oid next = r->child[0];
		if ((rc = kr_tx_free(c->tx, path[0].oid)) || (rc = bt_set_root(c, next)))
			return rc;
	}
	return 1;
}

static int bt_foreach_node(struct mctx *c, kr_oid oid, int depth,
			   int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx)
{
	if (depth == BT_MAX_DEPTH)
		return map_corrupt("btree: path deeper than %d nodes", BT_MAX_DEPTH);
	const struct bt_node *x = bt_read(c, oid);
	if (!x)
		return map_error();
	int leaf = is_leaf(x);
	for (int i = 0; i <= (int)x->n; i++) {
		/* x stays valid: nothing writes the map during foreach. */
		int rc = leaf ? 0 : bt_foreach_node(c, x->child[i], depth + 1, cb, ctx);
		if (rc == 0 && i < (int)x->n)
			rc = cb(x->items[i].key, x->items[i].value, ctx);
		if (rc)
			return rc;
	}
	return 0;
}

static int bt_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx),
		      void *ctx)
{
	kr_oid root;
	int rc = bt_root(c, &root);
	if (rc)
		return rc;
	return root ? bt_foreach_node(c, root, 0, cb, ctx) : 0;
}

/* ---------------------------------------------------------------------------------------
 * Check
 * ------------------------------------------------------------------------------------- */

/* Keys of a subtree lie strictly between its bounds (a missing bound is open, so 0 and
 * UINT64_MAX need no sentinel). */
struct bt_bounds {
	uint64_t lo, hi;
	int has_lo, has_hi;
};

struct bt_walk {
	uint64_t keys;
	int leaf_depth; /* -1 until the first leaf */
};

static int bt_check_node(struct mctx *c, kr_oid oid, int depth, struct bt_bounds b,
			 struct bt_walk *w)
{
	unsigned long long o = (unsigned long long)oid;
	if (depth == BT_MAX_DEPTH)
		return map_corrupt("btree: path deeper than %d nodes (a cycle?)", BT_MAX_DEPTH);
	if (kr_type(c->pool, oid) != BT_NODE_TYPE || kr_size(c->pool, oid) != sizeof(struct bt_node))
		return map_corrupt("btree: %#llx is not a btree node", o);
	const struct bt_node *x = MAP_RD(c, oid, struct bt_node);
	if (!x)
		return map_corrupt("btree: node %#llx unreadable", o);
	if (x->n > BT_MAX || x->n < (depth ? BT_MIN : 1))
		return map_corrupt("btree: node %#llx at depth %d holds %llu keys (%d..%d allowed)",
				   o, depth, (unsigned long long)x->n, depth ? BT_MIN : 1, BT_MAX);
	int n = (int)x->n;
	for (int i = 0; i < n; i++) {
		uint64_t k = x->items[i].key;
		if ((i > 0 && k <= x->items[i - 1].key) || (b.has_lo && k <= b.lo) ||
		    (b.has_hi && k >= b.hi))
			return map_corrupt("btree: key %llu at %d of node %#llx out of order",
					   (unsigned long long)k, i, o);
	}
	w->keys += (uint64_t)n;
	int leaf = is_leaf(x);
	for (int i = 0; i <= n; i++)
		if ((x->child[i] == KR_OID_NULL) != leaf)
			return map_corrupt(leaf ? "btree: leaf %#llx has child %d"
						: "btree: internal node %#llx has null child %d",
					   o, i);
	if (leaf) {
		if (w->leaf_depth < 0)
			w->leaf_depth = depth;
		if (depth != w->leaf_depth)
			return map_corrupt("btree: leaf %#llx at depth %d, others at %d", o, depth,
					   w->leaf_depth);
		return KR_OK;
	}
	for (int i = 0; i <= n; i++) {
		struct bt_bounds cb = b;
		if (i > 0)
			cb.lo = x->items[i - 1].key, cb.has_lo = 1;
		if (i < n)
			cb.hi = x->items[i].key, cb.has_hi = 1;
		int rc = bt_check_node(c, x->child[i], depth + 1, cb, w);
		if (rc)
			return rc;
	}
	return KR_OK;
}

static int bt_check(struct mctx *c, uint64_t *count)
{
	const struct bt_desc *d = MAP_RD(c, c->desc, struct bt_desc);
	if (!d)
		return map_corrupt("btree: descriptor %#llx unreadable", (unsigned long long)c->desc);
	struct bt_walk w = {.keys = 0, .leaf_depth = -1};
	int rc = d->root ? bt_check_node(c, d->root, 0, (struct bt_bounds){0}, &w) : KR_OK;
	*count = w.keys;
	return rc;
}

const struct map_ops kr_map_btree_ops = {
	.desc_size = sizeof(struct bt_desc),
	.init = bt_init,
	.insert = bt_insert,
	.remove = bt_remove,
	.lookup = bt_lookup,
	.foreach = bt_foreach,
	.check = bt_check,
};
