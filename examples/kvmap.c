/*
 * kvmap.c - a persistent chained hash map on keratin transactions (see kvmap.h).
 *
 * In the pool the map is three kinds of object:
 *
 *   root      struct kvmap_root: the bucket array's oid, the bucket count, the key count
 *   buckets   nbuckets kr_oids, each the head of a chain (KR_OID_NULL when empty)
 *   entries   struct kvmap_entry: key, next oid in the chain, value length, value bytes
 *
 * Every change is one transaction, and each touches only the bytes it changes through
 * kr_tx_add() (or the KR_TX_FIELD helper): an insert logs the new entry, one 8-byte link and
 * the 8-byte count, however large the map is. The helpers stop at the first failure, and
 * finish() then aborts the transaction, so a failed call leaves the map as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "kvmap.h"

/* Type numbers of the map's objects ("kv" and a kind), so a damaged or foreign root is
 * recognised instead of followed. */
#define KVMAP_TYPE_BUCKETS 0x6b760001u
#define KVMAP_TYPE_ENTRY 0x6b760002u

#define KVMAP_DEFAULT_BUCKETS 4096u

struct kvmap_root {
	kr_oid buckets;
	uint64_t nbuckets;
	uint64_t count;
};

struct kvmap_entry {
	uint64_t key;
	kr_oid next;
	uint64_t len;
	unsigned char value[];
};

struct kvmap {
	kr_pool *pool;
	kr_oid root;
	kr_oid buckets; /* fixed once the map exists, so kept here rather than re-read */
	uint64_t nbuckets;
};

/* A place that holds an oid: a bucket slot, or an entry's next field. Finding a key yields
 * the link that points at its entry, which is exactly what an insert or delete rewrites. */
struct link {
	kr_oid holder;
	size_t off;
	kr_oid target; /* the oid stored there: the entry found, or NULL at the chain's end */
};

/* The splitmix64 finaliser: sequential keys spread evenly over the buckets. */
static uint64_t hash(uint64_t k)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	return k ^ (k >> 31);
}

/* Committed bytes of an object, or the transaction's view of them if tx is given. */
static const void *view(const struct kvmap *m, kr_tx *tx, kr_oid oid)
{
	return tx ? kr_tx_get(tx, oid) : kr_get(m->pool, oid);
}

/* Walks key's chain. Returns 0 with l->target the key's entry (or NULL if absent), or
 * KR_E_CORRUPT if the chain leads somewhere that is not an entry. */
static int find(const struct kvmap *m, kr_tx *tx, uint64_t key, struct link *l)
{
	l->holder = m->buckets;
	l->off = (hash(key) % m->nbuckets) * sizeof(kr_oid);
	for (;;) {
		const char *holder = view(m, tx, l->holder);
		if (!holder)
			return KR_E_CORRUPT;
		memcpy(&l->target, holder + l->off, sizeof(kr_oid));
		if (l->target == KR_OID_NULL)
			return 0;
		const struct kvmap_entry *e = view(m, tx, l->target);
		if (!e || kr_type(m->pool, l->target) != KVMAP_TYPE_ENTRY)
			return KR_E_CORRUPT;
		if (e->key == key)
			return 0;
		l->holder = l->target;
		l->off = offsetof(struct kvmap_entry, next);
	}
}

/* Points link l at oid, logging only those 8 bytes. */
static int set_link(kr_tx *tx, const struct link *l, kr_oid oid)
{
	kr_oid *p = kr_tx_add(tx, l->holder, l->off, sizeof(kr_oid));
	if (!p)
		return kr_errcode();
	*p = oid;
	return 0;
}

static int add_count(kr_tx *tx, kr_oid root, int64_t delta)
{
	uint64_t *count = KR_TX_FIELD(tx, root, struct kvmap_root, count);
	if (!count)
		return kr_errcode();
	*count += (uint64_t)delta;
	return 0;
}

/* Ends a transaction whose body returned rc: commits it, or aborts it after a failure. */
static int finish(kr_tx *tx, int rc)
{
	if (rc) {
		kr_tx_abort(tx);
		return rc;
	}
	return kr_tx_commit(tx);
}

/* ---------------------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------------------- */

/* First open: allocate the bucket array and record it in the root, in one transaction, so
 * a crash leaves either no map (the next open starts over) or a complete empty one. */
static int create_map(kr_pool *pool, kr_oid root, uint64_t nbuckets)
{
	kr_tx *tx;
	kr_oid buckets;
	int rc = kr_tx_begin(pool, &tx);

	if (rc)
		return rc;
	rc = kr_tx_alloc(tx, nbuckets * sizeof(kr_oid), KVMAP_TYPE_BUCKETS, &buckets);
	if (rc == KR_OK) {
		struct kvmap_root *r = KR_TX_OPEN(tx, root, struct kvmap_root);
		if (r)
			*r = (struct kvmap_root){.buckets = buckets, .nbuckets = nbuckets, .count = 0};
		else
			rc = kr_errcode();
	}
	return finish(tx, rc);
}

int kvmap_open(kr_pool *pool, uint64_t nbuckets, struct kvmap **map)
{
	kr_oid root;
	int rc = kr_root(pool, sizeof(struct kvmap_root), &root);

	if (rc)
		return rc;
	/* A larger root belongs to some other application: do not build a map over it. */
	const struct kvmap_root *r = KR_GET(pool, root, struct kvmap_root);
	if (!r)
		return kr_errcode();
	if (kr_size(pool, root) != sizeof(struct kvmap_root))
		return KR_E_FORMAT;
	if (r->buckets == KR_OID_NULL) {
		if ((rc = create_map(pool, root, nbuckets ? nbuckets : KVMAP_DEFAULT_BUCKETS)))
			return rc;
		r = KR_GET(pool, root, struct kvmap_root);
	}
	if (r->nbuckets == 0 || kr_type(pool, r->buckets) != KVMAP_TYPE_BUCKETS ||
	    kr_size(pool, r->buckets) != r->nbuckets * sizeof(kr_oid))
		return KR_E_FORMAT;

	struct kvmap *m = malloc(sizeof(*m));
	if (!m)
		return KR_E_NOMEM;
	*m = (struct kvmap){.pool = pool, .root = root, .buckets = r->buckets, .nbuckets = r->nbuckets};
	*map = m;
	return KR_OK;
}

void kvmap_close(struct kvmap *map) { free(map); }

/* ---------------------------------------------------------------------------------------
 * Changes
 * ------------------------------------------------------------------------------------- */

/* The body of kvmap_put: 0, or the first failure. */
static int put_tx(struct kvmap *m, kr_tx *tx, uint64_t key, const void *val, size_t len)
{
	struct link l;
	int rc = find(m, tx, key, &l);

	if (rc)
		return rc;
	const struct kvmap_entry *old = l.target ? KR_TX_GET(tx, l.target, struct kvmap_entry) : NULL;

	/* Same length: overwrite the value in place, logging just the value bytes. */
	if (old && old->len == len) {
		if (len == 0)
			return 0;
		void *v = kr_tx_add(tx, l.target, offsetof(struct kvmap_entry, value), len);
		if (!v)
			return kr_errcode();
		memcpy(v, val, len);
		return 0;
	}

	/* Otherwise a new entry takes the old one's place in the chain (or joins its end). */
	kr_oid oid;
	if ((rc = kr_tx_alloc(tx, sizeof(struct kvmap_entry) + len, KVMAP_TYPE_ENTRY, &oid)))
		return rc;
	struct kvmap_entry *e = KR_TX_OPEN(tx, oid, struct kvmap_entry);
	if (!e)
		return kr_errcode();
	e->key = key;
	e->next = old ? old->next : KR_OID_NULL;
	e->len = len;
	memcpy(e->value, val, len);
	if ((rc = set_link(tx, &l, oid)))
		return rc;
	return old ? kr_tx_free(tx, l.target) : add_count(tx, m->root, +1);
}

int kvmap_put(struct kvmap *m, uint64_t key, const void *val, size_t len)
{
	kr_tx *tx;
	int rc = kr_tx_begin(m->pool, &tx);

	if (rc)
		return rc;
	return finish(tx, put_tx(m, tx, key, val, len));
}

/* The body of kvmap_del: 1 when the key was unlinked and freed, 0 if absent, or an error. */
static int del_tx(struct kvmap *m, kr_tx *tx, uint64_t key)
{
	struct link l;
	int rc = find(m, tx, key, &l);

	if (rc || l.target == KR_OID_NULL)
		return rc;
	const struct kvmap_entry *e = KR_TX_GET(tx, l.target, struct kvmap_entry);
	if ((rc = set_link(tx, &l, e->next)) || (rc = kr_tx_free(tx, l.target)) ||
	    (rc = add_count(tx, m->root, -1)))
		return rc;
	return 1;
}

int kvmap_del(struct kvmap *m, uint64_t key)
{
	kr_tx *tx;
	int rc = kr_tx_begin(m->pool, &tx);

	if (rc)
		return rc;
	rc = del_tx(m, tx, key);
	if (rc <= 0) {
		/* Absent (nothing to commit) or failed. */
		kr_tx_abort(tx);
		return rc;
	}
	rc = kr_tx_commit(tx);
	return rc ? rc : 1;
}

/* ---------------------------------------------------------------------------------------
 * Reads
 * ------------------------------------------------------------------------------------- */

const void *kvmap_get(struct kvmap *m, uint64_t key, size_t *len)
{
	struct link l;

	if (find(m, NULL, key, &l) || l.target == KR_OID_NULL)
		return NULL;
	const struct kvmap_entry *e = KR_GET(m->pool, l.target, struct kvmap_entry);
	*len = e->len;
	return e->value;
}

uint64_t kvmap_count(struct kvmap *m)
{
	return KR_GET(m->pool, m->root, struct kvmap_root)->count;
}

int kvmap_foreach(struct kvmap *m, kvmap_fn fn, void *ctx)
{
	const kr_oid *heads = kr_get(m->pool, m->buckets);

	for (uint64_t b = 0; b < m->nbuckets; b++) {
		for (kr_oid oid = heads[b]; oid != KR_OID_NULL;) {
			const struct kvmap_entry *e = KR_GET(m->pool, oid, struct kvmap_entry);
			if (!e || kr_type(m->pool, oid) != KVMAP_TYPE_ENTRY)
				return KR_E_CORRUPT;
			int stop = fn(e->key, e->value, e->len, ctx);
			if (stop)
				return stop;
			oid = e->next;
		}
	}
	return 0;
}
