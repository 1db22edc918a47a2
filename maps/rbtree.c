/*
 * rbtree.c - red-black tree: a binary search tree kept within twice the optimal height by
 * colouring its nodes (CLRS chapter 13), one node per key.
 *
 * Design
 *
 *   node      { key, value, left, parent | colour, right }   40 bytes  MAP_TYPE(RBTREE, 1)
 *   sentinel  the same, black                                 40 bytes  MAP_TYPE(RBTREE, 2)
 *   desc      { map_desc_hdr, root, nil }                     32 bytes  MAP_TYPE(RBTREE, 0)
 *
 *   Every missing child, and the root's parent, is the map's sentinel node `nil` (created
 *   with the map), as in PMDK's rbtree, so a zero oid never means "no node": a link lost to
 *   zeroed or torn memory reads as damage, not as an empty subtree. The sentinel is never
 *   written after creation, and operations do not even read it: they know its oid from the
 *   descriptor and treat it as a black leaf (check() verifies it is unchanged). CLRS's
 *   delete stores the removed node's child's parent in nil->parent; here the fix-up carries
 *   that parent in a local instead, so deletes do not all log a write to the one sentinel.
 *
 *   Parent links make the fix-ups iterative with no DRAM path (the map keeps no state
 *   between calls). Every change writes only the 8-byte links it changes, with kr_tx_add;
 *   a commit pays for each changed range (a log record, a checksum patch, a parity patch),
 *   so the layout lets one node's changes fall in as few ranges as possible: the colour
 *   lives in bit 0 of the parent link (oids are 16-byte aligned), as in Linux's rbtree,
 *   and the parent link sits between the two children, so that a rotation's and a
 *   recolouring's writes to a node (parent, colour and one child) are one range. The
 *   fix-ups paint only nodes whose colour changes. A node is half the size of PMDK's (80
 *   bytes). A delete of a node with two children moves its successor's key and value into
 *   it (one 16-byte write) and unlinks the successor instead: values are opaque, so no one
 *   else holds an oid of a node. An insert allocates one node, a delete frees one.

 *   A red-black tree of n < 2^64 nodes is at most 128 nodes deep, so a deeper descent is
 *   corruption: that bounds every loop and stack here on a damaged tree.
 *
 *   Node reads go through MAP_RD, which gives the transaction's copy of an object once it
 *   has one: a pointer read before a write to the same node may be stale, so fields are
 *   copied out right away. Writes after the first failure are skipped and the operation
 *   returns that failure (the transaction's error is sticky anyway); failed reads return
 *   a stand-in for the sentinel, so that every loop ends.
 */
#include "map_internal.h"

#define RB_NODE_TYPE MAP_TYPE(KR_MAP_RBTREE, 1)
#define RB_NIL_TYPE MAP_TYPE(KR_MAP_RBTREE, 2)
#define RB_MAXDEPTH 128 /* 2 * log2(n + 1) for any n < 2^64 */

enum { BLACK = 0, RED = 1 }; /* zeroed memory reads black */

struct rb_node {
	uint64_t key;
	uint64_t value;
	kr_oid left;           /* child 0: smaller keys */
	uint64_t parent_color; /* parent oid | colour */
	kr_oid right;          /* child 1: larger keys */
};

struct rb_desc {
	struct map_desc_hdr hdr;
	kr_oid root;
	kr_oid nil;
};

_Static_assert(sizeof(struct rb_node) == 40, "rbtree node is 40 bytes");
_Static_assert(sizeof(struct rb_desc) == 32, "rbtree descriptor is 32 bytes");

static inline kr_oid child(const struct rb_node *n, int dir) { return dir ? n->right : n->left; }
static inline kr_oid parent(const struct rb_node *n) { return n->parent_color & ~(uint64_t)RED; }
static inline int color_of(const struct rb_node *n) { return (int)(n->parent_color & RED); }

static inline size_t child_off(int dir)
{
	return dir ? offsetof(struct rb_node, right) : offsetof(struct rb_node, left);
}

/* One operation's view of the tree. */
struct rb {
	struct mctx *c;
	kr_oid root, nil; /* root follows the operation's own changes */
	int err;          /* first failure; later writes are skipped */
	struct rb_node none; /* what nil, or a node that cannot be read, reads as */
};

static int rb_begin(struct rb *t, struct mctx *c)
{
	const struct rb_desc *d = MAP_RD(c, c->desc, struct rb_desc);
	if (!d)
		return map_error();
	*t = (struct rb){.c = c, .root = d->root, .nil = d->nil};
	t->none = (struct rb_node){.left = t->nil, .parent_color = t->nil | BLACK, .right = t->nil};
	return KR_OK;
}

static void fail(struct rb *t, int err)
{
	if (!t->err)
		t->err = err;
}

static const struct rb_node *rd(struct rb *t, kr_oid oid)
{
	if (oid == t->nil)
		return &t->none;
	const struct rb_node *n = MAP_RD(t->c, oid, struct rb_node);
	if (!n) {
		fail(t, map_error());
		return &t->none;
	}
	return n;
}

static int color(struct rb *t, kr_oid oid) { return color_of(rd(t, oid)); }

/* Which child of parent p node x is. */
static int side(struct rb *t, kr_oid p, kr_oid x) { return rd(t, p)->right == x; }

static void set_word(struct rb *t, kr_oid oid, size_t off, uint64_t v)
{
	if (t->err)
		return;
	if (oid == t->nil) { /* a bug or a damaged link: the sentinel is read-only */
		fail(t, map_corrupt("rbtree: write to the sentinel"));
		return;
	}
	uint64_t *p = kr_tx_add(t->c->tx, oid, off, sizeof(*p));
	if (!p)
		fail(t, map_error());
	else
		*p = v;
}

static void set_child(struct rb *t, kr_oid x, int dir, kr_oid v)
{
	set_word(t, x, child_off(dir), v);
}

static void set_parent_color(struct rb *t, kr_oid x, kr_oid p, int col)
{
	set_word(t, x, offsetof(struct rb_node, parent_color), p | (uint64_t)col);
}

static void set_parent(struct rb *t, kr_oid x, kr_oid p)
{
	set_parent_color(t, x, p, color(t, x));
}

/* Callers paint only nodes whose colour they know to change. */
static void paint(struct rb *t, kr_oid x, int col)
{
	set_parent_color(t, x, parent(rd(t, x)), col);
}

static void set_root(struct rb *t, kr_oid x)
{
	if (t->err)
		return;
	kr_oid *p = MAP_WR_FIELD(t->c, t->c->desc, struct rb_desc, root);
	if (!p) {
		fail(t, map_error());
		return;
	}
	*p = t->root = x;
}

/* Makes child `to` of p point to x, or the root if p is nil. */
static void replace_child(struct rb *t, kr_oid p, int to, kr_oid x)
{
	if (p == t->nil)
		set_root(t, x);
	else
		set_child(t, p, to, x);
}

/* Rotates x down towards dir: its child on the other side, y, takes its place, and y's
 * inner subtree moves across to x. Colours stay with their nodes. */
static void rotate(struct rb *t, kr_oid x, int dir)
{
	struct rb_node xn = *rd(t, x);
	kr_oid y = child(&xn, !dir), p = parent(&xn);
	if (y == t->nil) {
		fail(t, map_corrupt("rbtree: rotation of %#llx without a child to lift",
				    (unsigned long long)x));
		return;
	}
	struct rb_node yn = *rd(t, y);
	kr_oid inner = child(&yn, dir);
	int at = p == t->nil ? 0 : side(t, p, x);

	set_child(t, x, !dir, inner);
	if (inner != t->nil)
		set_parent(t, inner, x);
	set_parent_color(t, y, p, color_of(&yn));
	replace_child(t, p, at, y);
	set_child(t, y, dir, x);
	set_parent_color(t, x, y, color_of(&xn));
}

static int rb_init(struct mctx *c)
{
	kr_oid nil;
	int rc = MAP_NEW(c, struct rb_node, KR_MAP_RBTREE, 2, &nil);
	if (rc)
		return rc;
	struct rb_node *n = MAP_WR(c, nil, struct rb_node);
	kr_oid *links =
		kr_tx_add(c->tx, c->desc, offsetof(struct rb_desc, root), 2 * sizeof(kr_oid));
	if (!n || !links)
		return map_error();
	*n = (struct rb_node){.left = nil, .parent_color = nil | BLACK, .right = nil};
	links[0] = links[1] = nil; /* root, nil: the empty tree */
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Lookup and insert
 * ------------------------------------------------------------------------------------- */

/* The node holding key, or nil; *at gets the last node visited (where key would hang)
 * and *dir the side. Corruption if the descent goes deeper than any red-black tree can. */
static kr_oid find(struct rb *t, uint64_t key, kr_oid *at, int *dir)
{
	kr_oid x = t->root, p = t->nil;
	int d = 0;
	for (int depth = 0; x != t->nil && !t->err; depth++) {
		if (depth == RB_MAXDEPTH) {
			fail(t, map_corrupt("rbtree: a path deeper than %d nodes", RB_MAXDEPTH));
			break;
		}
		const struct rb_node *n = rd(t, x);
		if (n->key == key)
			break;
		p = x;
		d = key > n->key;
		x = child(n, d);
	}
	if (at)
		*at = p;
	if (dir)
		*dir = d;
	return t->err ? t->nil : x;
}

static int rb_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct rb t;
	int rc = rb_begin(&t, c);
	if (rc)
		return rc;
	kr_oid x = find(&t, key, NULL, NULL);
	if (t.err)
		return t.err;
	if (x == t.nil)
		return 0;
	if (value)
		*value = rd(&t, x)->value;
	return 1;
}

/* Restores the colours after z, red, was linked in below p: while z's parent is red too,
 * either push the parent's and uncle's red up to the grandparent (uncle red), or rotate the
 * red pair under the grandparent (uncle black), which ends it. The root never turns red:
 * where CLRS paints a red root black at the end, the loop stops one step earlier. */
static void insert_fixup(struct rb *t, kr_oid z, kr_oid p)
{
	while (!t->err) {
		struct rb_node pn = *rd(t, p);
		if (color_of(&pn) != RED)
			return;
		kr_oid g = parent(&pn); /* p is red, so not the root */
		if (g == t->nil) {
			fail(t, map_corrupt("rbtree: red root %#llx", (unsigned long long)p));
			return;
		}
		struct rb_node gn = *rd(t, g);
		int dir = gn.right == p;
		kr_oid uncle = child(&gn, !dir);
		if (color(t, uncle) == RED) {
			paint(t, p, BLACK);
			paint(t, uncle, BLACK);
			if (parent(&gn) == t->nil) /* g is the root: it stays black */
				return;
			paint(t, g, RED);
			z = g;
			p = parent(&gn);
			continue;
		}
		if (child(&pn, !dir) == z) { /* inner grandchild: lift it to p's place first */
			rotate(t, p, dir);
			p = z;
		}
		paint(t, p, BLACK);
		paint(t, g, RED);
		rotate(t, g, !dir);
		return;
	}
}

static int rb_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	struct rb t;
	int rc = rb_begin(&t, c);
	if (rc)
		return rc;
	kr_oid p;
	int dir;
	kr_oid x = find(&t, key, &p, &dir);
	if (t.err)
		return t.err;
	if (x != t.nil) {
		if (rd(&t, x)->value != value) {
			uint64_t *v = MAP_WR_FIELD(c, x, struct rb_node, value);
			if (!v)
				return map_error();
			*v = value;
		}
		return 1;
	}

	kr_oid z;
	if ((rc = MAP_NEW(c, struct rb_node, KR_MAP_RBTREE, 1, &z)))
		return rc;
	struct rb_node *n = MAP_WR(c, z, struct rb_node);
	if (!n)
		return map_error();
	*n = (struct rb_node){.key = key, .value = value, .left = t.nil, .right = t.nil,
			      .parent_color = p | (uint64_t)(p == t.nil ? BLACK : RED)};
	replace_child(&t, p, dir, z);
	if (p != t.nil)
		insert_fixup(&t, z, p);
	return t.err ? t.err : 0;
}

/* ---------------------------------------------------------------------------------------
 * Remove
 * ------------------------------------------------------------------------------------- */

/* Restores the black heights after a black node was unlinked from parent xp, where x (its
 * child, maybe nil) took its place: x's side is one black short. Either x can absorb the
 * missing black (x red, or the root), or the sibling's side gives one up: paint the
 * sibling red and move the deficit up (sibling and nephews black), or rotate a red nephew
 * across and paint it black, which ends it. */
static void remove_fixup(struct rb *t, kr_oid x, kr_oid xp)
{
	int xred = color(t, x) == RED;
	while (!t->err && !xred && x != t->root) {
		struct rb_node pn = *rd(t, xp);
		int pred = color_of(&pn) == RED;
		/* x may be nil, but then its sibling is not (it carries a black), so the test
		 * still tells x's side. */
		int dir = pn.right == x;
		kr_oid w = child(&pn, !dir);
		if (w == t->nil) {
			fail(t, map_corrupt("rbtree: %#llx lost black height with no sibling",
					    (unsigned long long)xp));
			return;
		}
		struct rb_node wn = *rd(t, w);
		if (color_of(&wn) == RED) { /* make the sibling black: the cases below need it */
			paint(t, w, BLACK);
			paint(t, xp, RED);
			rotate(t, xp, dir);
			pn.parent_color = w | RED;
			pred = 1;
			w = child(&wn, dir); /* w's inner child, black, is x's sibling now */
			wn = *rd(t, w);
		}
		kr_oid near = child(&wn, dir), far = child(&wn, !dir);
		int far_red = color(t, far) == RED;
		if (!far_red && color(t, near) != RED) {
			paint(t, w, RED);
			x = xp;
			xred = pred;
			xp = parent(&pn);
			continue;
		}
		/* The red nephew ends up in w's place with xp's colour, w and xp black. When it
		 * is the near one, CLRS first rotates it over w (near black, w red) and then
		 * paints w black again: those two writes cancel and are left out. */
		if (far_red) {
			if (pred)
				paint(t, w, RED);
			paint(t, far, BLACK);
		} else {
			rotate(t, w, !dir);
			if (!pred)
				paint(t, near, BLACK);
		}
		if (pred)
			paint(t, xp, BLACK);
		rotate(t, xp, dir);
		return;
	}
	if (xred)
		paint(t, x, BLACK);
}

static int rb_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct rb t;
	int rc = rb_begin(&t, c);
	if (rc)
		return rc;
	kr_oid z = find(&t, key, NULL, NULL);
	if (t.err)
		return t.err;
	if (z == t.nil)
		return 0;
	struct rb_node zn = *rd(&t, z);
	if (value)
		*value = zn.value;

	/* y, the node unlinked, has at most one child: z itself, or z's successor (leftmost
	 * of its right subtree), whose key and value then move into z. */
	kr_oid y = z;
	if (zn.left != t.nil && zn.right != t.nil) {
		y = zn.right;
		for (int depth = 0; rd(&t, y)->left != t.nil && !t.err; depth++) {
			if (depth == RB_MAXDEPTH) {
				fail(&t, map_corrupt("rbtree: a path deeper than %d nodes",
						     RB_MAXDEPTH));
				break;
			}
			y = rd(&t, y)->left;
		}
	}
	struct rb_node yn = *rd(&t, y);
	if (t.err)
		return t.err;
	kr_oid x = yn.left != t.nil ? yn.left : yn.right;
	kr_oid xp = parent(&yn);

	if (x != t.nil)
		set_parent(&t, x, xp);
	replace_child(&t, xp, xp == t.nil ? 0 : side(&t, xp, y), x);
	if (y != z && !t.err) {
		/* key and value are adjacent: one range */
		uint64_t *kv = kr_tx_add(c->tx, z, offsetof(struct rb_node, key),
					 2 * sizeof(uint64_t));
		if (!kv)
			return map_error();
		kv[0] = yn.key;
		kv[1] = yn.value;
	}
	if (color_of(&yn) == BLACK)
		remove_fixup(&t, x, xp);
	if (t.err)
		return t.err;
	rc = kr_tx_free(c->tx, y);
	return rc ? rc : 1;
}

/* ---------------------------------------------------------------------------------------
 * Iteration and checking
 * ------------------------------------------------------------------------------------- */

static int rb_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx),
		      void *ctx)
{
	struct rb t;
	int rc = rb_begin(&t, c);
	if (rc)
		return rc;
	/* In order with a stack of the nodes whose left side is being visited; it follows
	 * child links only, so a damaged parent link does not derail it. */
	kr_oid stack[RB_MAXDEPTH];
	int sp = 0;
	kr_oid x = t.root;
	for (;;) {
		while (x != t.nil) {
			if (sp == RB_MAXDEPTH)
				return map_corrupt("rbtree: a path deeper than %d nodes",
						   RB_MAXDEPTH);
			stack[sp++] = x;
			x = rd(&t, x)->left;
			if (t.err)
				return t.err;
		}
		if (sp == 0)
			return 0;
		const struct rb_node *n = rd(&t, stack[--sp]);
		if (t.err)
			return t.err;
		if ((rc = cb(n->key, n->value, ctx)))
			return rc;
		x = n->right;
	}
}

struct rb_check {
	struct mctx *c;
	kr_oid nil;
	uint64_t count;
};

/* Reads a node for check(), which must report, not fail, on a bad oid: it must be a live
 * object of the expected type and size. Objects of a caller's transaction have no live
 * header yet, so types are checked against the committed pool only. */
static const struct rb_node *check_read(struct mctx *c, kr_oid oid, uint32_t type)
{
	const struct rb_node *n = map_rd(c, oid);
	if (n && !c->tx &&
	    (kr_type(c->pool, oid) != type || kr_size(c->pool, oid) != sizeof(struct rb_node)))
		return NULL;
	return n;
}

/* Checks the subtree at x, child of up, whose keys must lie strictly between *lo and *hi
 * (NULL: unbounded). Returns its black height (nil counts 1), or KR_E_CORRUPT. */
static int check_node(struct rb_check *k, kr_oid x, kr_oid up, int up_red, const uint64_t *lo,
		      const uint64_t *hi, int depth)
{
	if (x == k->nil)
		return 1;
	if (depth == RB_MAXDEPTH)
		return map_corrupt("rbtree: a path deeper than %d nodes", RB_MAXDEPTH);
	const struct rb_node *n = check_read(k->c, x, RB_NODE_TYPE);
	if (!n)
		return map_corrupt("rbtree: %#llx (child of %#llx) is not a node",
				   (unsigned long long)x, (unsigned long long)up);
	struct rb_node nn = *n;
	int red = color_of(&nn) == RED;
	if (parent(&nn) != up)
		return map_corrupt("rbtree: node %#llx has parent %#llx, but hangs from %#llx",
				   (unsigned long long)x, (unsigned long long)parent(&nn),
				   (unsigned long long)up);
	if (red && up_red)
		return map_corrupt("rbtree: red node %#llx has a red child %#llx",
				   (unsigned long long)up, (unsigned long long)x);
	if ((lo && nn.key <= *lo) || (hi && nn.key >= *hi))
		return map_corrupt("rbtree: node %#llx key %#llx out of order (%s %#llx)",
				   (unsigned long long)x, (unsigned long long)nn.key,
				   lo && nn.key <= *lo ? "not above" : "not below",
				   (unsigned long long)(lo && nn.key <= *lo ? *lo : *hi));

	int lh = check_node(k, nn.left, x, red, lo, &nn.key, depth + 1);
	if (lh < 0)
		return lh;
	int rh = check_node(k, nn.right, x, red, &nn.key, hi, depth + 1);
	if (rh < 0)
		return rh;
	if (lh != rh)
		return map_corrupt("rbtree: node %#llx has black heights %d and %d",
				   (unsigned long long)x, lh, rh);
	k->count++;
	return lh + !red;
}

static int rb_check(struct mctx *c, uint64_t *count)
{
	*count = 0;
	const struct rb_desc *d = MAP_RD(c, c->desc, struct rb_desc);
	if (!d)
		return map_corrupt("rbtree: descriptor %#llx unreadable",
				   (unsigned long long)c->desc);
	struct rb_check k = {.c = c, .nil = d->nil};
	kr_oid root = d->root;
	const struct rb_node *nil = check_read(c, k.nil, RB_NIL_TYPE);
	if (!nil)
		return map_corrupt("rbtree: sentinel %#llx is not a sentinel node",
				   (unsigned long long)k.nil);
	/* Never written after creation: anything but its first state is a scribble. */
	if (nil->key || nil->value || nil->left != k.nil || nil->right != k.nil ||
	    nil->parent_color != (k.nil | BLACK))
		return map_corrupt("rbtree: sentinel %#llx changed since its creation",
				   (unsigned long long)k.nil);
	if (root != k.nil) {
		const struct rb_node *r = map_rd(c, root);
		if (r && color_of(r) != BLACK)
			return map_corrupt("rbtree: root %#llx is red", (unsigned long long)root);
	}
	int h = check_node(&k, root, k.nil, 0, NULL, NULL, 0);
	if (h < 0)
		return h;
	*count = k.count;
	return KR_OK;
}

const struct map_ops kr_map_rbtree_ops = {
	.desc_size = sizeof(struct rb_desc),
	.init = rb_init,
	.insert = rb_insert,
	.remove = rb_remove,
	.lookup = rb_lookup,
	.foreach = rb_foreach,
	.check = rb_check,
};
