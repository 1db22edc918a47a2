/*
 * rtree.c - radix tree on the key's eight bytes, most significant first, with 256-way nodes
 * and path compression: the layout of PMDK's rtree_map example, so that the two stores are
 * compared on the same objects.
 *
 * Layout
 *
 *   descriptor (24 B)  map_desc_hdr, then the root node's oid (0 for an empty map).
 *   node (2072 B)      key      8   the key bytes on the path to this node: the first `end`
 *                                   bytes, most significant first, the rest zero
 *                      value    8   the value (value nodes only)
 *                      end      1   key bytes consumed below this node: children are
 *                                   chosen by key byte `end`; 8 = a value node
 *                      has_value 1  1 for a value node (end == 8), else 0
 *                      reserved 6
 *                      slot  2048   256 child oids, by key byte
 *
 *   A node stores the whole prefix of its path rather than only the bytes it skips (as
 *   PMDK's does), which keeps nodes immutable apart from their slots and values: a split
 *   puts a new node above an old one without touching the old one, and when a removal
 *   leaves a node with one child, that child takes its parent's place unchanged. Every
 *   insert or remove therefore writes exactly one 8-byte slot (or the value), plus the
 *   nodes it allocates: transactions log 8 bytes of an existing node, never 2 KiB. The
 *   new nodes are written whole: in a pool with parity keratin logs fresh objects of up
 *   to 4 KiB, so one insert takes about 2.5 KiB of log (39 lines), and a caller's
 *   transaction holds about 100 inserts in a 256 KiB lane.
 *
 *   As in PMDK, a key ends in a full node that holds its value (keys are fixed-length, so a
 *   value node has no children). The 2072-byte node fills a 2560-byte block of keratin's
 *   allocator; 256 slots of 8 bytes cannot fit the 2048-byte class next to a 16-byte header.
 *
 * Invariants (rtree_check): a node's prefix extends its parent's, and the byte after the
 * parent's prefix is the slot that holds it; `end` grows strictly along every path; value
 * nodes are exactly the nodes with end == 8, have has_value set and no children; every
 * other node has has_value clear and at least two children (an emptied node is freed, a
 * node left with one child is replaced by it), the root included.
 */
#include <stddef.h>
#include <stdint.h>

#include "map_internal.h"

#define RT_FANOUT 256
#define RT_KEY_BYTES 8

struct rt_desc {
	struct map_desc_hdr hdr;
	kr_oid root;
};

struct rt_node {
	uint64_t key;
	uint64_t value;
	uint8_t end;
	uint8_t has_value;
	uint8_t reserved[6];
	kr_oid slot[RT_FANOUT];
};

_Static_assert(sizeof(struct rt_desc) == 24, "rtree descriptor is 24 bytes");
_Static_assert(sizeof(struct rt_node) == 2072, "rtree node is 2072 bytes");
_Static_assert(offsetof(struct rt_node, slot) == 24, "rtree slots follow a 24-byte header");

#define RT_NODE_TYPE MAP_TYPE(KR_MAP_RTREE, 1)

/* Byte d of key, most significant first. */
static inline unsigned key_byte(uint64_t key, unsigned d)
{
	return (unsigned)(key >> (56 - 8 * d)) & 0xff;
}

/* The first n bytes of a key kept, the rest cleared. */
static inline uint64_t key_prefix(uint64_t key, unsigned n)
{
	return n == 0 ? 0 : key & (~0ull << (64 - 8 * n));
}

/* How many leading bytes two keys share (8 if equal). */
static inline unsigned common_bytes(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ b;
	return x ? (unsigned)__builtin_clzll(x) / 8 : RT_KEY_BYTES;
}

/* Points the 8-byte slot at byte offset off of object owner (a node or the descriptor's
 * root field) at child: the only change an insert or remove makes to existing nodes. */
static int set_slot(struct mctx *c, kr_oid owner, size_t off, kr_oid child)
{
	kr_oid *p = kr_tx_add(c->tx, owner, off, sizeof(*p));
	if (!p)
		return map_error();
	*p = child;
	return KR_OK;
}

/* A new node for the first end bytes of key; a value node if end == 8. A fresh object is
 * written whole at commit whatever is changed in it, so it is filled through one buffer. */
static int new_node(struct mctx *c, uint64_t key, unsigned end, uint64_t value, kr_oid *oid)
{
	int rc = MAP_NEW(c, struct rt_node, KR_MAP_RTREE, 1, oid);
	if (rc)
		return rc;
	struct rt_node *n = MAP_WR(c, *oid, struct rt_node);
	if (!n)
		return map_error();
	n->key = key_prefix(key, end);
	n->end = (uint8_t)end;
	if (end == RT_KEY_BYTES) {
		n->value = value;
		n->has_value = 1;
	}
	return KR_OK;
}

/* A node read on the way down from a parent ending at byte pend (-1 for the root), or NULL
 * with the thread's error set. A damaged tree must not hang or crash an operation: an end
 * that does not grow along the path would let a cycle loop forever, and one past the key
 * would make key_byte() shift out of range. */
static const struct rt_node *read_node(struct mctx *c, kr_oid oid, int pend)
{
	const struct rt_node *n = MAP_RD(c, oid, struct rt_node);
	if (n && (n->end > RT_KEY_BYTES || (int)n->end <= pend)) {
		map_corrupt("rtree: node %#llx ends at byte %u below a parent ending at %d",
			    (unsigned long long)oid, n->end, pend);
		return NULL;
	}
	return n;
}

static const struct rt_desc *read_desc(struct mctx *c)
{
	return MAP_RD(c, c->desc, struct rt_desc);
}

static int rtree_init(struct mctx *c)
{
	return KR_OK; /* a zeroed descriptor is an empty tree */
}

static int rtree_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	const struct rt_desc *d = read_desc(c);
	if (!d)
		return map_error();
	/* owner/off name the slot that points at cur, so that it can be redirected. */
	kr_oid owner = c->desc, cur = d->root;
	size_t off = offsetof(struct rt_desc, root);
	for (int pend = -1;;) {
		kr_oid leaf;
		int rc;
		if (!cur) {
			if ((rc = new_node(c, key, RT_KEY_BYTES, value, &leaf)))
				return rc;
			return set_slot(c, owner, off, leaf);
		}
		const struct rt_node *n = read_node(c, cur, pend);
		if (!n)
			return map_error();
		unsigned same = common_bytes(key, n->key);
		if (same < n->end) {
			/* The key leaves cur's compressed path at byte `same`: a new node branching
			 * there goes between cur and its parent, with cur and the new key's node
			 * below it. */
			kr_oid branch;
			unsigned old_byte = key_byte(n->key, same);
			if ((rc = new_node(c, key, same, 0, &branch)) ||
			    (rc = new_node(c, key, RT_KEY_BYTES, value, &leaf)))
				return rc;
			struct rt_node *b = MAP_WR(c, branch, struct rt_node);
			if (!b)
				return map_error();
			b->slot[old_byte] = cur;
			b->slot[key_byte(key, same)] = leaf;
			return set_slot(c, owner, off, branch);
		}
		if (n->end == RT_KEY_BYTES) {
			uint64_t *v = MAP_WR_FIELD(c, cur, struct rt_node, value);
			if (!v)
				return map_error();
			*v = value;
			return 1;
		}
		unsigned byte = key_byte(key, n->end);
		owner = cur;
		off = offsetof(struct rt_node, slot) + byte * sizeof(kr_oid);
		cur = n->slot[byte];
		pend = n->end;
	}
}

static int rtree_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	const struct rt_desc *d = read_desc(c);
	if (!d)
		return map_error();
	/* The value node, its parent, and the slots that point at each. */
	kr_oid owner = c->desc, cur = d->root;
	size_t off = offsetof(struct rt_desc, root);
	kr_oid parent = 0, parent_owner = 0;
	size_t parent_off = 0;
	unsigned byte = 0;
	const struct rt_node *n;
	for (int pend = -1;; pend = n->end) {
		if (!cur)
			return 0;
		n = read_node(c, cur, pend);
		if (!n)
			return map_error();
		if (common_bytes(key, n->key) < n->end)
			return 0;
		if (n->end == RT_KEY_BYTES)
			break;
		parent_owner = owner;
		parent_off = off;
		parent = cur;
		byte = key_byte(key, n->end);
		owner = cur;
		off = offsetof(struct rt_node, slot) + byte * sizeof(kr_oid);
		cur = n->slot[byte];
	}
	if (value)
		*value = n->value;

	int rc;
	if (!parent) {
		rc = set_slot(c, owner, off, 0);
	} else {
		/* Up to two of the parent's other children: with two or more it keeps its place;
		 * with exactly one, that child (whose prefix already spells the parent's path)
		 * takes the parent's slot and the parent goes, so no node is ever left with a
		 * single child. No other child only happens in a damaged tree: drop the parent. */
		const struct rt_node *p = MAP_RD(c, parent, struct rt_node);
		if (!p)
			return map_error();
		kr_oid other = 0;
		unsigned others = 0;
		for (unsigned i = 0; i < RT_FANOUT && others < 2; i++) {
			if (i != byte && p->slot[i]) {
				other = p->slot[i];
				others++;
			}
		}
		if (others >= 2) {
			rc = set_slot(c, owner, off, 0);
		} else {
			rc = set_slot(c, parent_owner, parent_off, other);
			if (rc == KR_OK)
				rc = kr_tx_free(c->tx, parent);
		}
	}
	if (rc == KR_OK)
		rc = kr_tx_free(c->tx, cur);
	return rc < 0 ? rc : 1;
}

static int rtree_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	const struct rt_desc *d = read_desc(c);
	if (!d)
		return map_error();
	kr_oid cur = d->root;
	for (int pend = -1; cur;) {
		const struct rt_node *n = read_node(c, cur, pend);
		if (!n)
			return map_error();
		if (common_bytes(key, n->key) < n->end)
			return 0;
		if (n->end == RT_KEY_BYTES) {
			if (value)
				*value = n->value;
			return 1;
		}
		cur = n->slot[key_byte(key, n->end)];
		pend = n->end;
	}
	return 0;
}

/* Depth-first, children by ascending byte: keys come out in ascending order. read_node's
 * growing-end rule bounds the recursion (9 deep) even in a damaged tree. */
static int foreach_node(struct mctx *c, kr_oid oid, int pend,
			int (*cb)(uint64_t, uint64_t, void *), void *ctx)
{
	const struct rt_node *n = read_node(c, oid, pend);
	if (!n)
		return map_error();
	if (n->end == RT_KEY_BYTES)
		return cb(n->key, n->value, ctx);
	for (unsigned i = 0; i < RT_FANOUT; i++) {
		/* n stays valid: the map must not change during foreach. */
		if (n->slot[i]) {
			int rc = foreach_node(c, n->slot[i], n->end, cb, ctx);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int rtree_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx)
{
	const struct rt_desc *d = read_desc(c);
	if (!d)
		return map_error();
	return d->root ? foreach_node(c, d->root, -1, cb, ctx) : 0;
}

/* Verifies the subtree at oid, which hangs from a node whose prefix is the first pend
 * bytes of pkey (pend < 0 for the root: no parent) through slot byte. */
static int check_node(struct mctx *c, kr_oid oid, int pend, uint64_t pkey, unsigned byte,
		      uint64_t *count)
{
	unsigned long long o = (unsigned long long)oid;
	if (!c->tx && (kr_type(c->pool, oid) != RT_NODE_TYPE ||
		       kr_size(c->pool, oid) != sizeof(struct rt_node)))
		return map_corrupt("rtree: %#llx is not a live rtree node (type %#x, %zu bytes)", o,
				   kr_type(c->pool, oid), kr_size(c->pool, oid));
	const struct rt_node *n = MAP_RD(c, oid, struct rt_node);
	if (!n)
		return map_corrupt("rtree: node %#llx unreadable", o);
	unsigned end = n->end;
	if (end > RT_KEY_BYTES || (int)end <= pend)
		return map_corrupt("rtree: node %#llx ends at byte %u below a parent ending at %d",
				   o, end, pend);
	if (pend >= 0) {
		if (key_prefix(n->key, (unsigned)pend) != key_prefix(pkey, (unsigned)pend))
			return map_corrupt("rtree: node %#llx prefix %#llx does not extend its "
					   "parent's %#llx (%d bytes)", o, (unsigned long long)n->key,
					   (unsigned long long)pkey, pend);
		if (key_byte(n->key, (unsigned)pend) != byte)
			return map_corrupt("rtree: node %#llx with key byte %#x sits in slot %#x", o,
					   key_byte(n->key, (unsigned)pend), byte);
	}
	if (n->key != key_prefix(n->key, end))
		return map_corrupt("rtree: node %#llx prefix %#llx has bytes past its end %u", o,
				   (unsigned long long)n->key, end);
	if (n->has_value != (end == RT_KEY_BYTES))
		return map_corrupt("rtree: node %#llx ending at byte %u has has_value %u", o, end,
				   n->has_value);

	unsigned children = 0;
	for (unsigned i = 0; i < RT_FANOUT; i++)
		children += n->slot[i] != 0;
	if (end == RT_KEY_BYTES) {
		if (children)
			return map_corrupt("rtree: value node %#llx has %u children", o, children);
		++*count;
		return KR_OK;
	}
	if (children < 2)
		return map_corrupt("rtree: inner node %#llx has %u child%s (an empty node should "
				   "be freed, a single child merged)", o, children,
				   children == 1 ? "" : "ren");
	for (unsigned i = 0; i < RT_FANOUT; i++) {
		if (n->slot[i]) {
			int rc = check_node(c, n->slot[i], (int)end, n->key, i, count);
			if (rc)
				return rc;
		}
	}
	return KR_OK;
}

static int rtree_check(struct mctx *c, uint64_t *count)
{
	*count = 0;
	const struct rt_desc *d = read_desc(c);
	if (!d)
		return map_corrupt("rtree: descriptor %#llx unreadable", (unsigned long long)c->desc);
	return d->root ? check_node(c, d->root, -1, 0, 0, count) : KR_OK;
}

const struct map_ops kr_map_rtree_ops = {
	.desc_size = sizeof(struct rt_desc),
	.init = rtree_init,
	.insert = rtree_insert,
	.remove = rtree_remove,
	.lookup = rtree_lookup,
	.foreach = rtree_foreach,
	.check = rtree_check,
};
