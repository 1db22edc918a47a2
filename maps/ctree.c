/*
 * ctree.c - crit-bit tree: a binary trie on the key's bits that keeps only the bits where
 * keys differ, so a tree of n keys has n leaves and n-1 internal nodes whatever the keys.
 *
 * Design
 *
 *   leaf      { key, value }                    16 bytes  MAP_TYPE(CTREE, 2)
 *   internal  { child[2], diff, reserved }      24 bytes  MAP_TYPE(CTREE, 1)
 *   desc      { map_desc_hdr, root }            24 bytes  MAP_TYPE(CTREE, 0)
 *
 *   An internal node splits its keys on bit `diff` (0 = least significant): child[0] holds
 *   the keys with that bit clear, child[1] those with it set, and every key below it agrees
 *   on all the bits above diff. Diffs strictly decrease downwards, so a path holds at most
 *   64 internal nodes and an in-order walk (child 0 first) visits keys in ascending order.
 *
 *   A slot (child[] or the descriptor's root) is an oid whose low bit says what it points
 *   to: set for a leaf, clear for an internal node, 0 for none (only the empty tree's root).
 *   Object oids are 16-byte aligned, so the bit is free. Tagging the slot rather than the
 *   node means a descent never reads a node only to learn its kind, and every change of
 *   the tree's shape is a single 8-byte slot write in an existing object:
 *     insert   allocates one leaf and one internal node (new objects, written whole: no
 *              old bytes to keep) and rewrites the one slot the new node goes in;
 *     replace  rewrites the leaf's value;
 *     remove   rewrites the grandparent's slot with the leaf's sibling and frees the leaf
 *              and its parent.
 *   A key costs a leaf and an internal node, 40 bytes in all, against the 56 of PMDK's
 *   node, whose two entries repeat the keys of its children.
 *
 *   Descents keep no DRAM state across calls and read through MAP_RD so that, inside a
 *   transaction, they see its own changes. A diff that does not decrease is corruption,
 *   which also bounds every loop here on a damaged tree.
 */
#include "map_internal.h"

#define CT_NODE_TYPE MAP_TYPE(KR_MAP_CTREE, 1)
#define CT_LEAF_TYPE MAP_TYPE(KR_MAP_CTREE, 2)
#define CT_MAXDEPTH 64 /* internal nodes on a path: one per bit at most */

struct ct_leaf {
	uint64_t key;
	uint64_t value;
};

struct ct_node {
	uint64_t child[2]; /* slots: tagged oids */
	uint32_t diff;
	uint32_t reserved;
};

struct ct_desc {
	struct map_desc_hdr hdr;
	uint64_t root; /* slot */
};

_Static_assert(sizeof(struct ct_leaf) == 16, "ctree leaf is 16 bytes");
_Static_assert(sizeof(struct ct_node) == 24, "ctree internal node is 24 bytes");
_Static_assert(sizeof(struct ct_desc) == 24, "ctree descriptor is 24 bytes");

#define LEAF_TAG 1ull
static inline int is_leaf(uint64_t slot) { return (slot & LEAF_TAG) != 0; }
static inline kr_oid slot_oid(uint64_t slot) { return slot & ~LEAF_TAG; }
static inline int bit(uint64_t key, unsigned b) { return (int)((key >> b) & 1); }

/* Offset of child[dir] in a node: slots are written one at a time. */
static inline size_t child_off(int dir)
{
	return offsetof(struct ct_node, child) + (size_t)dir * sizeof(uint64_t);
}

/* Writes one slot: the 8 bytes at off in object owner (a node or the descriptor). */
static int set_slot(struct mctx *c, kr_oid owner, size_t off, uint64_t slot)
{
	uint64_t *p = kr_tx_add(c->tx, owner, off, sizeof(*p));
	if (!p)
		return map_error();
	*p = slot;
	return KR_OK;
}

static int bad_diff(kr_oid node, unsigned diff, unsigned above)
{
	return map_corrupt("ctree: node %#llx splits on bit %u below a split on bit %u",
			   (unsigned long long)node, diff, above);
}

static int ct_init(struct mctx *c)
{
	return KR_OK; /* the zeroed descriptor is the empty tree */
}

/* ---------------------------------------------------------------------------------------
 * Lookup and insert
 * ------------------------------------------------------------------------------------- */

/* One internal node on the way down to a key: the node, its bit, and the child the key
 * did not take. */
struct ct_step {
	kr_oid oid;
	unsigned diff;
	uint64_t sibling;
};

/* Descends from the root towards key, recording the internal nodes in path (at most
 * CT_MAXDEPTH) and their number in *depth; *slot receives the leaf slot reached, 0 in an
 * empty tree. 0 or a negative error (a bit order that does not decrease is damage). */
static int ct_descend(struct mctx *c, uint64_t key, struct ct_step *path, int *depth,
		      uint64_t *slot)
{
	const struct ct_desc *d = MAP_RD(c, c->desc, struct ct_desc);
	if (!d)
		return map_error();
	uint64_t s = d->root;
	unsigned above = CT_MAXDEPTH;
	*depth = 0;
	while (s && !is_leaf(s)) {
		const struct ct_node *n = MAP_RD(c, s, struct ct_node);
		if (!n)
			return map_error();
		if (n->diff >= above)
			return bad_diff(s, n->diff, above);
		above = n->diff;
		int dir = bit(key, above);
		path[(*depth)++] = (struct ct_step){s, above, n->child[!dir]};
		s = n->child[dir];
	}
	*slot = s;
	return 0;
}

/* The leaf at slot if it holds key: 1, 0 if it holds another key (or slot is 0), or an
 * error. */
static int ct_leaf_of(struct mctx *c, uint64_t slot, uint64_t key, const struct ct_leaf **leaf)
{
	if (!slot)
		return 0;
	*leaf = MAP_RD(c, slot_oid(slot), struct ct_leaf);
	if (!*leaf)
		return map_error();
	return (*leaf)->key == key;
}

static int ct_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct ct_step path[CT_MAXDEPTH];
	const struct ct_leaf *l;
	uint64_t slot;
	int depth, rc = ct_descend(c, key, path, &depth, &slot);
	if (rc == 0 && (rc = ct_leaf_of(c, slot, key, &l)) == 1 && value)
		*value = l->value;
	return rc;
}

/* Links a new leaf into the slot at off in owner. With displaced != 0 the slot held that
 * subtree, and a new internal node splitting on bit crit takes its place, with the leaf and
 * the subtree as children. Both objects are new, so they are written whole. */
static int new_leaf(struct mctx *c, kr_oid owner, size_t off, uint64_t key, uint64_t value,
		    unsigned crit, uint64_t displaced)
{
	kr_oid leaf, node = 0;
	int rc = MAP_NEW(c, struct ct_leaf, KR_MAP_CTREE, 2, &leaf);
	if (!rc && displaced)
		rc = MAP_NEW(c, struct ct_node, KR_MAP_CTREE, 1, &node);
	if (rc)
		return rc;
	struct ct_leaf *l = MAP_WR(c, leaf, struct ct_leaf);
	if (!l)
		return map_error();
	*l = (struct ct_leaf){.key = key, .value = value};
	if (!displaced)
		return set_slot(c, owner, off, leaf | LEAF_TAG);

	struct ct_node *n = MAP_WR(c, node, struct ct_node);
	if (!n)
		return map_error();
	n->diff = crit;
	n->child[bit(key, crit)] = leaf | LEAF_TAG;
	n->child[!bit(key, crit)] = displaced;
	return set_slot(c, owner, off, node);
}

static int ct_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	/* Descend to the leaf the key would be in, remembering the path: the new node goes
	 * somewhere on it, and a second descent would read the same nodes again. */
	struct ct_step path[CT_MAXDEPTH];
	const struct ct_leaf *best = NULL;
	uint64_t slot;
	int depth, rc = ct_descend(c, key, path, &depth, &slot);
	if (rc == 0)
		rc = ct_leaf_of(c, slot, key, &best);
	if (rc < 0)
		return rc;
	if (!slot) /* empty tree: the new leaf is the root */
		return new_leaf(c, c->desc, offsetof(struct ct_desc, root), key, value, 0, 0);
	if (best->key == key) {
		if (best->value != value) {
			uint64_t *v = MAP_WR_FIELD(c, slot_oid(slot), struct ct_leaf, value);
			if (!v)
				return map_error();
			*v = value;
		}
		return 1;
	}

	/* The new node splits on the highest bit where the key differs from its best match.
	 * The keys under each path node that splits on a higher bit agree with the key above
	 * crit, so the new node goes just below the last of those: it takes over the slot
	 * the descent followed there, and the subtree found in it becomes its other child. */
	unsigned crit = 63 - (unsigned)__builtin_clzll(best->key ^ key);
	int at = 0;
	while (at < depth && path[at].diff > crit)
		at++;
	if (at < depth && path[at].diff == crit) /* the descent would have matched bit crit */
		return map_corrupt("ctree: keys below node %#llx disagree on its bit %u",
				   (unsigned long long)path[at].oid, crit);
	uint64_t displaced = at < depth ? path[at].oid : slot;
	if (at == 0)
		return new_leaf(c, c->desc, offsetof(struct ct_desc, root), key, value, crit,
				displaced);
	return new_leaf(c, path[at - 1].oid, child_off(bit(key, path[at - 1].diff)), key, value,
			crit, displaced);
}

/* ---------------------------------------------------------------------------------------
 * Remove
 * ------------------------------------------------------------------------------------- */

static int ct_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct ct_step path[CT_MAXDEPTH];
	const struct ct_leaf *l;
	uint64_t slot;
	int depth, rc = ct_descend(c, key, path, &depth, &slot);
	if (rc == 0)
		rc = ct_leaf_of(c, slot, key, &l);
	if (rc <= 0)
		return rc;
	if (value)
		*value = l->value;

	/* The leaf's parent goes away with it: the slot that pointed to the parent (in the
	 * grandparent, or the root) takes the leaf's sibling; a leaf at the root leaves the
	 * tree empty. */
	kr_oid owner = c->desc, parent = depth ? path[depth - 1].oid : 0;
	size_t off = offsetof(struct ct_desc, root);
	if (depth >= 2) {
		owner = path[depth - 2].oid;
		off = child_off(bit(key, path[depth - 2].diff));
	}
	rc = set_slot(c, owner, off, parent ? path[depth - 1].sibling : 0);
	if (!rc && parent)
		rc = kr_tx_free(c->tx, parent);
	if (!rc)
		rc = kr_tx_free(c->tx, slot_oid(slot));
	return rc ? rc : 1;
}

/* ---------------------------------------------------------------------------------------
 * Iteration and checking
 * ------------------------------------------------------------------------------------- */

static int ct_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx),
		      void *ctx)
{
	const struct ct_desc *d = MAP_RD(c, c->desc, struct ct_desc);
	if (!d)
		return map_error();
	if (!d->root)
		return 0;

	/* Depth-first, child 0 first. Each pending slot carries the diff of the node it
	 * hangs from, so a damaged tree cannot overflow the stack: a path pushes at most one
	 * pending sibling per bit, plus the slot being visited. */
	struct {
		uint64_t slot;
		unsigned above;
	} stack[CT_MAXDEPTH + 1];
	int sp = 0;
	stack[sp].slot = d->root;
	stack[sp].above = CT_MAXDEPTH;
	sp++;
	while (sp > 0) {
		sp--;
		uint64_t slot = stack[sp].slot;
		unsigned above = stack[sp].above;
		if (is_leaf(slot)) {
			const struct ct_leaf *l = MAP_RD(c, slot_oid(slot), struct ct_leaf);
			if (!l)
				return map_error();
			int rc = cb(l->key, l->value, ctx);
			if (rc)
				return rc;
			continue;
		}
		const struct ct_node *n = MAP_RD(c, slot, struct ct_node);
		if (!n)
			return map_error();
		if (n->diff >= above)
			return bad_diff(slot, n->diff, above);
		stack[sp].slot = n->child[1];
		stack[sp].above = n->diff;
		stack[sp + 1].slot = n->child[0];
		stack[sp + 1].above = n->diff;
		sp += 2;
	}
	return 0;
}

/* What check() learns about a subtree: its smallest and largest keys and its leaves. */
struct ct_span {
	uint64_t min, max, count;
};

/* Reads the object behind a slot for check(), which must report, not fail, on a bad oid:
 * it must be a live object of the expected type and size. */
static const void *check_read(struct mctx *c, uint64_t slot, uint32_t type, size_t size,
			      const char *what)
{
	kr_oid oid = slot_oid(slot);
	const void *p = map_rd(c, oid);
	/* Objects of a caller's transaction are not live yet: only the committed pool has
	 * headers to compare against. */
	if (p && !c->tx && (kr_type(c->pool, oid) != type || kr_size(c->pool, oid) != size))
		p = NULL;
	if (!p)
		map_corrupt("ctree: slot %#llx does not name %s", (unsigned long long)slot, what);
	return p;
}

/* Checks the subtree in slot, hanging from a node splitting on bit above (64 at the root). */
static int check_slot(struct mctx *c, uint64_t slot, unsigned above, struct ct_span *span)
{
	if (!slot)
		return map_corrupt("ctree: a node below bit %u has an empty child", above);
	if (is_leaf(slot)) {
		const struct ct_leaf *l =
			check_read(c, slot, CT_LEAF_TYPE, sizeof(struct ct_leaf), "a leaf");
		if (!l)
			return KR_E_CORRUPT;
		*span = (struct ct_span){l->key, l->key, 1};
		return KR_OK;
	}
	const struct ct_node *n =
		check_read(c, slot, CT_NODE_TYPE, sizeof(struct ct_node), "an internal node");
	if (!n)
		return KR_E_CORRUPT;
	unsigned diff = n->diff;
	uint64_t child[2] = {n->child[0], n->child[1]};
	if (diff >= above) /* also bounds the recursion at 64 levels */
		return bad_diff(slot, diff, above);
	if (n->reserved)
		return map_corrupt("ctree: node %#llx has reserved bits set",
				   (unsigned long long)slot);

	struct ct_span lo, hi;
	int rc = check_slot(c, child[0], diff, &lo);
	if (!rc)
		rc = check_slot(c, child[1], diff, &hi);
	if (rc)
		return rc;
	/* Each side is sorted (by induction), so extremes decide for all of it: child 0's
	 * keys below child 1's, bit diff clear on the left and set on the right, and diff the
	 * highest bit where the smallest and largest key differ, hence where any two keys
	 * below differ (every key between two that share a prefix shares it too). */
	if (lo.max >= hi.min)
		return map_corrupt("ctree: node %#llx: keys out of order (child 0 up to %#llx, "
				   "child 1 from %#llx)",
				   (unsigned long long)slot, (unsigned long long)lo.max,
				   (unsigned long long)hi.min);
	if (bit(lo.max, diff) || !bit(hi.min, diff))
		return map_corrupt("ctree: node %#llx: keys on the wrong side of bit %u "
				   "(child 0 up to %#llx, child 1 from %#llx)",
				   (unsigned long long)slot, diff, (unsigned long long)lo.max,
				   (unsigned long long)hi.min);
	if (63 - (unsigned)__builtin_clzll(lo.min ^ hi.max) != diff)
		return map_corrupt("ctree: node %#llx splits on bit %u but its keys %#llx and "
				   "%#llx first differ on bit %u",
				   (unsigned long long)slot, diff, (unsigned long long)lo.min,
				   (unsigned long long)hi.max,
				   63 - (unsigned)__builtin_clzll(lo.min ^ hi.max));
	*span = (struct ct_span){lo.min, hi.max, lo.count + hi.count};
	return KR_OK;
}

static int ct_check(struct mctx *c, uint64_t *count)
{
	const struct ct_desc *d = MAP_RD(c, c->desc, struct ct_desc);
	if (!d)
		return map_corrupt("ctree: descriptor %#llx unreadable",
				   (unsigned long long)c->desc);
	*count = 0;
	if (!d->root)
		return KR_OK;
	struct ct_span all;
	int rc = check_slot(c, d->root, CT_MAXDEPTH, &all);
	if (!rc)
		*count = all.count;
	return rc;
}

const struct map_ops kr_map_ctree_ops = {
	.desc_size = sizeof(struct ct_desc),
	.init = ct_init,
	.insert = ct_insert,
	.remove = ct_remove,
	.lookup = ct_lookup,
	.foreach = ct_foreach,
	.check = ct_check,
};
