/*
 * hashmap.c - chained hash map whose bucket table doubles as it fills (and halves as it
 * empties), moving its entries a few buckets at a time, like Redis's dict.
 *
 * PMDK's hashmap_tx, whose entries this one mirrors, rehashes its whole table in one
 * transaction. Here a transaction's changes to existing objects must fit in one log lane
 * (at most 256 KiB), and rewriting the `next` link of a million entries does not. So a
 * resize only allocates the new table; every later insert or remove then moves up to
 * HM_STEP buckets of the old table into it, lookups consult both tables while the move is
 * in progress, and the old table is freed once empty.
 *
 * Layout
 *
 *   descriptor (80 B)  map_desc_hdr; seed (16 B, random at creation: the SipHash-1-3 key,
 *                      so that keys chosen to collide under one map's hash do not collide
 *                      under another's); the current table {dir, nbuckets}; the old table
 *                      {dir, nbuckets}, dir 0 when no move is in progress; rehash_idx, the
 *                      old table's first bucket not yet moved; count, the number of keys.
 *   directory          one oid per segment of the table: nbuckets / 128 of them (one for
 *                      smaller tables), at most 1 MiB. 0 = a segment never used, all its
 *                      buckets empty.
 *   segment (1 KiB)    128 bucket heads (fewer for tables under 128 buckets), allocated
 *                      when a bucket in it first gets an entry; a 1280-byte block.
 *   entry (24 B)       key, value, next: PMDK's entry with 8-byte oids (a 48-byte block).
 *
 *   Why segments: keratin verifies an object's checksum when a transaction first opens it
 *   for writing (and buffers it whole in DRAM). A flat table of 2^20 buckets would make
 *   every insert verify 8 MiB; a segment costs 1 KiB. Smaller segments verify faster but
 *   make the directory, verified whenever a segment is allocated, bigger: 1 KiB took the
 *   least CPU for a million inserts (8% less than 2 or 4 KiB, 9% less than 512 B). Allocating segments lazily also spreads a new table's allocation over the
 *   operations that fill it, and a segment of the old table is freed as soon as the move
 *   has passed it.
 *
 * Bucket b of a table of n buckets (a power of two) holds the keys whose hash is b modulo n;
 * it lives in segment b / 128, slot b % 128. A move takes the old table's buckets in order;
 * buckets below rehash_idx are empty (their segments freed once wholly passed). A key whose
 * old bucket is not moved yet is inserted there, not in the current table: the current
 * table's segments are then allocated in order by the move, each with one directory write,
 * instead of by random inserts that would each allocate a segment and rewrite the
 * directory at the start of a move.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "map_internal.h"

#define HM_SEG_SHIFT 7
#define HM_SEG_BUCKETS (1ull << HM_SEG_SHIFT) /* 1 KiB of bucket heads */
#define HM_SEG_MASK (HM_SEG_BUCKETS - 1)
#define HM_MIN_BUCKETS 16ull
#define HM_MAX_BUCKETS (1ull << 24) /* a 1 MiB directory; beyond, chains just lengthen */
#define HM_STEP 4                   /* old buckets moved per insert or remove */
/* Grow when keys outnumber buckets (load 1, as Redis); shrink below load 1/8, to a table
 * at load under 1/4, so that a size never flips back and forth. */
#define HM_SHRINK_DIV 8

struct hm_table {
	kr_oid dir;
	uint64_t nbuckets;
};

struct hm_desc {
	struct map_desc_hdr hdr;
	uint64_t seed[2];
	struct hm_table cur;
	struct hm_table old;
	uint64_t rehash_idx; /* next to count: one range when a move step also counts a key */
	uint64_t count;
};

struct hm_entry {
	uint64_t key;
	uint64_t value;
	kr_oid next;
};

_Static_assert(sizeof(struct hm_table) == 16, "table reference is 16 bytes");
_Static_assert(sizeof(struct hm_desc) == 80, "hashmap descriptor is 80 bytes");
_Static_assert(offsetof(struct hm_desc, count) == offsetof(struct hm_desc, rehash_idx) + 8,
	       "rehash_idx and count adjacent");
_Static_assert(sizeof(struct hm_entry) == 24, "hashmap entry is 24 bytes");
_Static_assert(HM_SEG_BUCKETS * sizeof(kr_oid) == 1024, "segment is 1 KiB");

#define HM_DIR_TYPE MAP_TYPE(KR_MAP_HASHMAP, 1)
#define HM_SEG_TYPE MAP_TYPE(KR_MAP_HASHMAP, 2)
#define HM_ENTRY_TYPE MAP_TYPE(KR_MAP_HASHMAP, 3)

/* ---------------------------------------------------------------------------------------
 * Hashing: SipHash-1-3 of the key, keyed by the map's seed.
 * ------------------------------------------------------------------------------------- */
static inline uint64_t rotl(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

#define SIPROUND(v0, v1, v2, v3)                                                              \
	do {                                                                                  \
		v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);                     \
		v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                                        \
		v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                                        \
		v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);                     \
	} while (0)

static uint64_t hash_key(const uint64_t seed[2], uint64_t key)
{
	uint64_t v0 = seed[0] ^ 0x736f6d6570736575ull, v1 = seed[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = seed[0] ^ 0x6c7967656e657261ull, v3 = seed[1] ^ 0x7465646279746573ull;
	const uint64_t last = 8ull << 56; /* message length 8, no tail bytes */
	v3 ^= key;
	SIPROUND(v0, v1, v2, v3);
	v0 ^= key;
	v3 ^= last;
	SIPROUND(v0, v1, v2, v3);
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

static inline uint64_t bucket_of(const struct hm_desc *d, const struct hm_table *t, uint64_t key)
{
	return hash_key(d->seed, key) & (t->nbuckets - 1);
}

/* A seed nobody can predict; the clock and an address only if the kernel has no entropy
 * to give (the map still works, with less protection). */
static void make_seed(uint64_t seed[2])
{
	if (getrandom(seed, 2 * sizeof(uint64_t), 0) == 2 * sizeof(uint64_t))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)(uintptr_t)seed;
	for (int i = 0; i < 2; i++) { /* splitmix64 */
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		seed[i] = z ^ (z >> 31);
	}
}

/* ---------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------- */
static inline uint64_t seg_buckets(uint64_t nbuckets)
{
	return nbuckets < HM_SEG_BUCKETS ? nbuckets : HM_SEG_BUCKETS;
}

static inline uint64_t nsegs(uint64_t nbuckets) { return nbuckets / seg_buckets(nbuckets); }

/* Operations work on a copy of the descriptor and write back only the words that changed
 * (write_desc): a pointer into the transaction's view of it would go stale at the first
 * write anyway. */
static int read_desc(struct mctx *c, struct hm_desc *d)
{
	const struct hm_desc *p = MAP_RD(c, c->desc, struct hm_desc);
	if (!p)
		return map_error();
	*d = *p;
	return KR_OK;
}

static int write_desc(struct mctx *c, const struct hm_desc *was, const struct hm_desc *now)
{
	const uint64_t *a = (const uint64_t *)was, *b = (const uint64_t *)now;
	size_t first = sizeof(struct map_desc_hdr) / 8, n = sizeof(*now) / 8, lo = n, hi = 0;
	for (size_t i = first; i < n; i++) {
		if (a[i] != b[i]) {
			if (lo == n)
				lo = i;
			hi = i;
		}
	}
	if (lo == n)
		return KR_OK;
	uint64_t *p = kr_tx_add(c->tx, c->desc, lo * 8, (hi - lo + 1) * 8);
	if (!p)
		return map_error();
	memcpy(p, b + lo, (hi - lo + 1) * 8);
	return KR_OK;
}

/* The head of bucket b of table t (0 when its segment was never allocated). */
static int bucket_head(struct mctx *c, const struct hm_table *t, uint64_t b, kr_oid *head)
{
	const kr_oid *dir = MAP_RD(c, t->dir, kr_oid);
	if (!dir)
		return map_error();
	kr_oid seg = dir[b >> HM_SEG_SHIFT];
	*head = 0;
	if (seg) {
		const kr_oid *s = MAP_RD(c, seg, kr_oid);
		if (!s)
			return map_error();
		*head = s[b & HM_SEG_MASK];
	}
	return KR_OK;
}

/* A writable pointer to the head of bucket b of table t, its segment allocated on first
 * use: only those 8 bytes of the segment (and of the directory) are logged. */
static int bucket_wr(struct mctx *c, const struct hm_table *t, uint64_t b, kr_oid **head)
{
	const kr_oid *dir = MAP_RD(c, t->dir, kr_oid);
	if (!dir)
		return map_error();
	uint64_t si = b >> HM_SEG_SHIFT;
	kr_oid seg = dir[si];
	if (!seg) {
		int rc = kr_tx_alloc(c->tx, seg_buckets(t->nbuckets) * sizeof(kr_oid), HM_SEG_TYPE,
				     &seg);
		if (rc)
			return rc;
		kr_oid *slot = kr_tx_add(c->tx, t->dir, si * sizeof(kr_oid), sizeof(kr_oid));
		if (!slot)
			return map_error();
		*slot = seg;
	}
	*head = kr_tx_add(c->tx, seg, (b & HM_SEG_MASK) * sizeof(kr_oid), sizeof(kr_oid));
	return *head ? KR_OK : map_error();
}

/* A new table of n buckets, empty: segments come with their first entries. */
static int new_table(struct mctx *c, uint64_t n, struct hm_table *t)
{
	t->nbuckets = n;
	return kr_tx_alloc(c->tx, nsegs(n) * sizeof(kr_oid), HM_DIR_TYPE, &t->dir);
}

/* Where a key is: its entry (with the value and link read there, to spare reading it
 * again), the entry before it in its chain (0 if it is the head), and the table and bucket
 * that hold it. */
struct hm_pos {
	kr_oid entry, prev;
	uint64_t value;
	kr_oid next;
	struct hm_table table;
	uint64_t bucket;
};

/* Walks one chain for key: 1 found, 0 not, < 0 error. A sound chain is no longer than the
 * map's count, so a longer one is a cycle in a damaged map: refused, never looped on. */
static int chain_find(struct mctx *c, const struct hm_desc *d, const struct hm_table *t,
		      uint64_t b, uint64_t key, struct hm_pos *pos)
{
	kr_oid e;
	int rc = bucket_head(c, t, b, &e);
	if (rc)
		return rc;
	kr_oid prev = 0;
	for (uint64_t steps = 0; e; steps++) {
		if (steps > d->count)
			return map_corrupt("hashmap: chain of bucket %llu longer than the %llu keys",
					   (unsigned long long)b, (unsigned long long)d->count);
		const struct hm_entry *en = MAP_RD(c, e, struct hm_entry);
		if (!en)
			return map_error();
		if (en->key == key) {
			*pos = (struct hm_pos){.entry = e, .prev = prev, .value = en->value,
					       .next = en->next, .table = *t, .bucket = b};
			return 1;
		}
		prev = e;
		e = en->next;
	}
	return 0;
}

/* Finds key in the old table (if its bucket there is not moved yet), then the current. */
static int find(struct mctx *c, const struct hm_desc *d, uint64_t key, struct hm_pos *pos)
{
	uint64_t h = hash_key(d->seed, key);
	if (d->old.dir) {
		uint64_t b = h & (d->old.nbuckets - 1);
		if (b >= d->rehash_idx) {
			int rc = chain_find(c, d, &d->old, b, key, pos);
			if (rc)
				return rc;
		}
	}
	return chain_find(c, d, &d->cur, h & (d->cur.nbuckets - 1), key, pos);
}

/* Moves every entry of the chain at e into its bucket of the current table. */
static int move_chain(struct mctx *c, const struct hm_desc *d, kr_oid e)
{
	for (uint64_t steps = 0; e; steps++) {
		if (steps > d->count)
			return map_corrupt("hashmap: old bucket %llu holds a chain longer than the "
					   "%llu keys", (unsigned long long)d->rehash_idx,
					   (unsigned long long)d->count);
		const struct hm_entry *en = MAP_RD(c, e, struct hm_entry);
		if (!en)
			return map_error();
		kr_oid next = en->next, *head, *link;
		int rc = bucket_wr(c, &d->cur, bucket_of(d, &d->cur, en->key), &head);
		if (rc)
			return rc;
		if (!(link = MAP_WR_FIELD(c, e, struct hm_entry, next)))
			return map_error();
		*link = *head;
		*head = e;
		e = next;
	}
	return KR_OK;
}

/* Moves up to HM_STEP buckets of the old table (a never-used segment counts as one),
 * freeing each old segment once passed and the old directory at the end. */
static int rehash_step(struct mctx *c, struct hm_desc *d)
{
	for (int visits = 0; visits < HM_STEP && d->old.dir; visits++) {
		const struct hm_table *o = &d->old;
		uint64_t i = d->rehash_idx, si = i >> HM_SEG_SHIFT;
		uint64_t seg_end = (si + 1) * HM_SEG_BUCKETS;
		if (seg_end > o->nbuckets)
			seg_end = o->nbuckets;
		const kr_oid *dir = MAP_RD(c, o->dir, kr_oid);
		if (!dir)
			return map_error();
		kr_oid seg = dir[si];
		int rc;
		if (!seg) {
			i = seg_end;
		} else {
			const kr_oid *s = MAP_RD(c, seg, kr_oid);
			if (!s)
				return map_error();
			kr_oid e = s[i & HM_SEG_MASK];
			i++;
			if (e) {
				if ((rc = move_chain(c, d, e)))
					return rc;
				/* A segment about to be freed needs no emptying. */
				if (i < seg_end) {
					kr_oid *head = kr_tx_add(c->tx, seg, ((i - 1) & HM_SEG_MASK) *
								 sizeof(kr_oid), sizeof(kr_oid));
					if (!head)
						return map_error();
					*head = 0;
				}
			}
			if (i == seg_end) {
				if ((rc = kr_tx_free(c->tx, seg)))
					return rc;
				if (i < o->nbuckets) { /* else the directory goes too */
					kr_oid *slot = kr_tx_add(c->tx, o->dir, si * sizeof(kr_oid),
								 sizeof(kr_oid));
					if (!slot)
						return map_error();
					*slot = 0;
				}
			}
		}
		if (i == o->nbuckets) {
			if ((rc = kr_tx_free(c->tx, o->dir)))
				return rc;
			d->old = (struct hm_table){0, 0};
			i = 0;
		}
		d->rehash_idx = i;
	}
	return KR_OK;
}

/* Starts a move into a new table of n buckets (none may be in progress). */
static int start_resize(struct mctx *c, struct hm_desc *d, uint64_t n)
{
	struct hm_table t;
	int rc = new_table(c, n, &t);
	if (rc)
		return rc;
	d->old = d->cur;
	d->cur = t;
	d->rehash_idx = 0;
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------------------- */
static int hm_init(struct mctx *c)
{
	struct hm_desc d;
	int rc = read_desc(c, &d);
	if (rc)
		return rc;
	struct hm_desc was = d;
	make_seed(d.seed);
	if ((rc = new_table(c, HM_MIN_BUCKETS, &d.cur)))
		return rc;
	return write_desc(c, &was, &d);
}

static int hm_insert(struct mctx *c, uint64_t key, uint64_t value)
{
	struct hm_desc d;
	int rc = read_desc(c, &d);
	if (rc)
		return rc;
	const struct hm_desc was = d;
	if (d.old.dir && (rc = rehash_step(c, &d)))
		return rc;

	struct hm_pos pos;
	int found = find(c, &d, key, &pos);
	if (found < 0)
		return found;
	if (found) {
		uint64_t *v = MAP_WR_FIELD(c, pos.entry, struct hm_entry, value);
		if (!v)
			return map_error();
		*v = value;
	} else {
		kr_oid e, *head;
		struct hm_entry *en;
		uint64_t h = hash_key(d.seed, key);
		const struct hm_table *t = &d.cur;
		if (d.old.dir && (h & (d.old.nbuckets - 1)) >= d.rehash_idx)
			t = &d.old;
		if ((rc = MAP_NEW(c, struct hm_entry, KR_MAP_HASHMAP, 3, &e)) ||
		    (rc = bucket_wr(c, t, h & (t->nbuckets - 1), &head)))
			return rc;
		if (!(en = MAP_WR(c, e, struct hm_entry)))
			return map_error();
		*en = (struct hm_entry){.key = key, .value = value, .next = *head};
		*head = e;
		d.count++;
		if (!d.old.dir && d.count > d.cur.nbuckets && d.cur.nbuckets < HM_MAX_BUCKETS &&
		    (rc = start_resize(c, &d, d.cur.nbuckets * 2)))
			return rc;
	}
	rc = write_desc(c, &was, &d);
	return rc ? rc : found;
}

static int hm_remove(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct hm_desc d;
	int rc = read_desc(c, &d);
	if (rc)
		return rc;
	const struct hm_desc was = d;
	struct hm_pos pos;
	/* Look before moving buckets: removing an absent key must change nothing. */
	int found = find(c, &d, key, &pos);
	if (found <= 0)
		return found;
	if (d.old.dir) {
		/* The step may move the key's chain to the current table: find it again. */
		if ((rc = rehash_step(c, &d)))
			return rc;
		if ((found = find(c, &d, key, &pos)) <= 0)
			return found < 0 ? found : map_corrupt("hashmap: key lost while rehashing");
	}

	kr_oid *link;
	if (value)
		*value = pos.value;
	if (pos.prev) {
		link = MAP_WR_FIELD(c, pos.prev, struct hm_entry, next);
		if (!link)
			return map_error();
	} else if ((rc = bucket_wr(c, &pos.table, pos.bucket, &link))) {
		return rc;
	}
	*link = pos.next;
	if ((rc = kr_tx_free(c->tx, pos.entry)))
		return rc;
	d.count--;
	if (!d.old.dir && d.cur.nbuckets > HM_MIN_BUCKETS &&
	    d.count < d.cur.nbuckets / HM_SHRINK_DIV &&
	    (rc = start_resize(c, &d, d.cur.nbuckets / 2)))
		return rc;
	rc = write_desc(c, &was, &d);
	return rc ? rc : 1;
}

static int hm_lookup(struct mctx *c, uint64_t key, uint64_t *value)
{
	struct hm_desc d;
	int rc = read_desc(c, &d);
	if (rc)
		return rc;
	struct hm_pos pos;
	int found = find(c, &d, key, &pos);
	if (found == 1 && value)
		*value = pos.value;
	return found;
}

/* Calls cb for the entries of table t in bucket order, from bucket `from` on. */
static int foreach_table(struct mctx *c, const struct hm_desc *d, const struct hm_table *t,
			 uint64_t from, uint64_t *seen,
			 int (*cb)(uint64_t, uint64_t, void *), void *ctx)
{
	const kr_oid *dir = MAP_RD(c, t->dir, kr_oid);
	if (!dir)
		return map_error();
	uint64_t per = seg_buckets(t->nbuckets);
	for (uint64_t si = 0; si < nsegs(t->nbuckets); si++) {
		if (!dir[si] || (si + 1) * per <= from)
			continue;
		const kr_oid *s = MAP_RD(c, dir[si], kr_oid);
		if (!s)
			return map_error();
		for (uint64_t j = 0; j < per; j++) {
			if (si * per + j < from)
				continue;
			for (kr_oid e = s[j]; e;) {
				if (++*seen > d->count)
					return map_corrupt("hashmap: more entries than the %llu keys "
							   "counted", (unsigned long long)d->count);
				const struct hm_entry *en = MAP_RD(c, e, struct hm_entry);
				if (!en)
					return map_error();
				int rc = cb(en->key, en->value, ctx);
				if (rc)
					return rc;
				e = en->next;
			}
		}
	}
	return 0;
}

static int hm_foreach(struct mctx *c, int (*cb)(uint64_t key, uint64_t value, void *ctx), void *ctx)
{
	struct hm_desc d;
	int rc = read_desc(c, &d);
	if (rc)
		return rc;
	uint64_t seen = 0;
	if (d.old.dir && (rc = foreach_table(c, &d, &d.old, d.rehash_idx, &seen, cb, ctx)))
		return rc;
	return foreach_table(c, &d, &d.cur, 0, &seen, cb, ctx);
}

/* ---------------------------------------------------------------------------------------
 * Invariants
 * ------------------------------------------------------------------------------------- */
static bool is_object(struct mctx *c, kr_oid oid, uint32_t type, size_t size)
{
	/* Inside a transaction, objects it allocated have no committed header to compare. */
	if (c->tx)
		return map_rd(c, oid) != NULL;
	return kr_type(c->pool, oid) == type && kr_size(c->pool, oid) == size;
}

static int check_table_ref(struct mctx *c, const struct hm_table *t, const char *which)
{
	uint64_t n = t->nbuckets;
	if (n < HM_MIN_BUCKETS || n > HM_MAX_BUCKETS || (n & (n - 1)))
		return map_corrupt("hashmap: %s table has %llu buckets", which,
				   (unsigned long long)n);
	if (!t->dir || !is_object(c, t->dir, HM_DIR_TYPE, nsegs(n) * sizeof(kr_oid)))
		return map_corrupt("hashmap: %s table directory %#llx is not a live %llu-byte "
				   "directory", which, (unsigned long long)t->dir,
				   (unsigned long long)(nsegs(n) * sizeof(kr_oid)));
	return KR_OK;
}

/* Every entry of table t (old: buckets below `from` moved, so empty) is in the bucket its
 * hash names, once; entries of the old table are absent from the current one. */
static int check_table(struct mctx *c, const struct hm_desc *d, const struct hm_table *t,
		       bool old, uint64_t from, uint64_t *seen)
{
	const char *which = old ? "old" : "current";
	const kr_oid *dir = MAP_RD(c, t->dir, kr_oid);
	if (!dir)
		return map_corrupt("hashmap: %s directory unreadable", which);
	uint64_t per = seg_buckets(t->nbuckets);
	for (uint64_t si = 0; si < nsegs(t->nbuckets); si++) {
		kr_oid seg = dir[si];
		if (!seg)
			continue;
		if ((si + 1) * per <= from)
			return map_corrupt("hashmap: old segment %llu kept after the move passed it "
					   "(rehash index %llu)", (unsigned long long)si,
					   (unsigned long long)from);
		const kr_oid *s;
		if (!is_object(c, seg, HM_SEG_TYPE, per * sizeof(kr_oid)) ||
		    !(s = MAP_RD(c, seg, kr_oid)))
			return map_corrupt("hashmap: %s segment %llu (%#llx) is not a live "
					   "%llu-byte segment", which, (unsigned long long)si,
					   (unsigned long long)seg,
					   (unsigned long long)(per * sizeof(kr_oid)));
		for (uint64_t j = 0; j < per; j++) {
			uint64_t b = si * per + j;
			if (b < from && s[j])
				return map_corrupt("hashmap: old bucket %llu below the rehash index "
						   "%llu is not empty", (unsigned long long)b,
						   (unsigned long long)from);
			for (kr_oid e = s[j]; e;) {
				if (++*seen > d->count)
					return map_corrupt("hashmap: more entries than the %llu keys "
							   "counted (a cycle or a shared entry?)",
							   (unsigned long long)d->count);
				const struct hm_entry *en;
				if (!is_object(c, e, HM_ENTRY_TYPE, sizeof(*en)) ||
				    !(en = MAP_RD(c, e, struct hm_entry)))
					return map_corrupt("hashmap: %s bucket %llu links %#llx, not "
							   "a live entry", which, (unsigned long long)b,
							   (unsigned long long)e);
				unsigned long long k = (unsigned long long)en->key;
				if (bucket_of(d, t, en->key) != b)
					return map_corrupt("hashmap: key %#llx in %s bucket %llu "
							   "hashes to bucket %llu", k, which,
							   (unsigned long long)b,
							   (unsigned long long)bucket_of(d, t, en->key));
				/* Sound chains are short: the quadratic walk costs nothing. */
				const struct hm_entry *x;
				for (kr_oid f = s[j]; f != e; f = x->next) {
					x = MAP_RD(c, f, struct hm_entry);
					if (x->key == en->key)
						return map_corrupt("hashmap: key %#llx twice in %s "
								   "bucket %llu", k, which,
								   (unsigned long long)b);
				}
				if (old) {
					struct hm_pos pos;
					int rc = chain_find(c, d, &d->cur, bucket_of(d, &d->cur, en->key),
							    en->key, &pos);
					if (rc)
						return rc < 0 ? rc
							      : map_corrupt("hashmap: key %#llx in both "
									    "tables", k);
				}
				e = en->next;
			}
		}
	}
	return KR_OK;
}

static int hm_check(struct mctx *c, uint64_t *count)
{
	*count = 0;
	struct hm_desc d;
	if (read_desc(c, &d))
		return map_corrupt("hashmap: descriptor %#llx unreadable",
				   (unsigned long long)c->desc);
	int rc = check_table_ref(c, &d.cur, "current");
	if (rc)
		return rc;
	if (!d.old.dir) {
		if (d.old.nbuckets || d.rehash_idx)
			return map_corrupt("hashmap: no old table, yet %llu old buckets and rehash "
					   "index %llu", (unsigned long long)d.old.nbuckets,
					   (unsigned long long)d.rehash_idx);
	} else {
		if ((rc = check_table_ref(c, &d.old, "old")))
			return rc;
		if (d.old.dir == d.cur.dir)
			return map_corrupt("hashmap: old and current table are one");
		if (d.rehash_idx >= d.old.nbuckets)
			return map_corrupt("hashmap: rehash index %llu past the old table's %llu "
					   "buckets", (unsigned long long)d.rehash_idx,
					   (unsigned long long)d.old.nbuckets);
	}
	uint64_t seen = 0;
	if (d.old.dir && (rc = check_table(c, &d, &d.old, true, d.rehash_idx, &seen)))
		return rc;
	if ((rc = check_table(c, &d, &d.cur, false, 0, &seen)))
		return rc;
	if (seen != d.count)
		return map_corrupt("hashmap: count says %llu keys, the tables hold %llu",
				   (unsigned long long)d.count, (unsigned long long)seen);
	*count = seen;
	return KR_OK;
}

const struct map_ops kr_map_hashmap_ops = {
	.desc_size = sizeof(struct hm_desc),
	.init = hm_init,
	.insert = hm_insert,
	.remove = hm_remove,
	.lookup = hm_lookup,
	.foreach = hm_foreach,
	.check = hm_check,
};
