/*
 * test_maps.c - the six map structures of libkeratin-map against a reference model.
 *
 * For each kind named on the command line (default: all six):
 *   - model: random inserts (new keys and replacements), removes (present and absent keys)
 *     and lookups over a fixed set of keys chosen to stress every structure (0, UINT64_MAX,
 *     small integers, keys sharing long prefixes, keys differing in one bit, random words);
 *     every return value is checked against a sorted-array model; every 500 operations the
 *     structure's own invariants (kr_map_check) and a full iteration are compared with the
 *     model (in key order for the trees and the skip list), and every 4000 the pool is
 *     closed and reopened;
 *   - caller transactions: several changes in one kr_tx, seen by lookups inside it and not
 *     outside it, then aborted (the map is unchanged) or committed (all of them are there);
 *   - crash: after a prefix of keys, operations run under the crash simulator; every crash
 *     image, recovered, must hold a valid map equal to the model after the operations that
 *     had returned, or after one more while an operation was in flight.
 * Seeds follow KR_TEST_SEED; counts follow KR_TEST_SCALE.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crashsim.h"
#include "keratin_map.h"
#include "testutil.h"

#define NKEYS 1500

/* A sorted array of pairs: the reference every map is compared with. */
struct pair {
	uint64_t key, value;
};
struct model {
	struct pair *p;
	size_t n;
};

static size_t model_find(const struct model *m, uint64_t key, int *found)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->p[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < m->n && m->p[lo].key == key;
	return lo;
}

/* Applies an operation to the model; returns what the map must return. */
static int model_insert(struct model *m, uint64_t key, uint64_t value)
{
	int found;
	size_t i = model_find(m, key, &found);
	if (found) {
		m->p[i].value = value;
		return 1;
	}
	memmove(m->p + i + 1, m->p + i, (m->n - i) * sizeof(*m->p));
	m->p[i] = (struct pair){key, value};
	m->n++;
	return 0;
}

static int model_remove(struct model *m, uint64_t key, uint64_t *value)
{
	int found;
	size_t i = model_find(m, key, &found);
	if (!found)
		return 0;
	*value = m->p[i].value;
	memmove(m->p + i, m->p + i + 1, (m->n - i - 1) * sizeof(*m->p));
	m->n--;
	return 1;
}

static void model_copy(struct model *dst, const struct model *src)
{
	memcpy(dst->p, src->p, src->n * sizeof(*src->p));
	dst->n = src->n;
}

/* Keys that exercise every structure's corner cases. */
static uint64_t g_keys[NKEYS];

static void make_keys(uint64_t seed)
{
	struct tu_rng r;
	tu_rng_seed(&r, seed);
	size_t n = 0;
	g_keys[n++] = 0;
	g_keys[n++] = UINT64_MAX;
	g_keys[n++] = UINT64_MAX - 1;
	g_keys[n++] = 1ull << 63;
	for (uint64_t i = 1; i <= 300; i++) /* small integers: one byte differs */
		g_keys[n++] = i;
	for (int b = 0; b < 64; b++) /* one bit set: crit-bit positions, radix depths */
		g_keys[n++] = 1ull << b;
	while (n < 900) /* long shared prefixes */
		g_keys[n++] = 0xabcdef0123450000ull | tu_rng_below(&r, 1 << 16);
	while (n < NKEYS)
		g_keys[n++] = tu_rng_next(&r);
	/* Duplicates are harmless: the model treats them as the same key. */
}

struct walk {
	struct pair *p;
	size_t n, cap;
};

static int walk_cb(uint64_t key, uint64_t value, void *ctx)
{
	struct walk *w = ctx;
	if (w->n == w->cap)
		return 1; /* more pairs than the model has: reported by the caller */
	w->p[w->n++] = (struct pair){key, value};
	return 0;
}

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* The map equals the model: invariants, iteration (order for ordered kinds), every lookup.
 * 0, or 1 with why filled in. */
static int map_equals(kr_map *m, const struct model *model, char *why, size_t whylen)
{
	int rc = kr_map_check(m);
	if (rc != KR_OK) {
		snprintf(why, whylen, "kr_map_check: %d %s", rc, kr_errmsg());
		return 1;
	}
	struct walk w = {.p = malloc((model->n + 1) * sizeof(struct pair)), .cap = model->n + 1};
	TU_ASSERT(w.p, "out of memory");
	kr_map_foreach(m, walk_cb, &w);
	int bad = 0;
	if (w.n != model->n) {
		snprintf(why, whylen, "iteration gives %zu pairs, model has %zu", w.n, model->n);
		bad = 1;
	}
	if (!bad && kr_map_kind_of(m) == KR_MAP_HASHMAP)
		qsort(w.p, w.n, sizeof(*w.p), pair_cmp);
	for (size_t i = 0; !bad && i < w.n; i++)
		if (w.p[i].key != model->p[i].key || w.p[i].value != model->p[i].value) {
			snprintf(why, whylen, "pair %zu: map %#llx=%#llx, model %#llx=%#llx%s", i,
				 (unsigned long long)w.p[i].key, (unsigned long long)w.p[i].value,
				 (unsigned long long)model->p[i].key,
				 (unsigned long long)model->p[i].value,
				 kr_map_kind_of(m) == KR_MAP_HASHMAP ? "" : " (key order)");
			bad = 1;
		}
	free(w.p);
	for (size_t i = 0; !bad && i < model->n; i++) {
		uint64_t v = 0;
		if (kr_map_lookup(m, NULL, model->p[i].key, &v) != 1 || v != model->p[i].value) {
			snprintf(why, whylen, "lookup of %#llx: not found or wrong value",
				 (unsigned long long)model->p[i].key);
			bad = 1;
		}
	}
	return bad;
}

/* ---- the pool: the map's descriptor oid lives in the root object ---------------------- */
static kr_map *open_map(kr_pool *pool)
{
	kr_oid root;
	kr_map *m;
	TU_OK(kr_root(pool, sizeof(kr_oid), &root));
	const kr_oid *desc = kr_get(pool, root);
	TU_ASSERT(desc && *desc, "root object holds no map");
	TU_OK(kr_map_open(pool, *desc, &m));
	return m;
}

static kr_pool *new_pool(const char *path, enum kr_map_kind kind, unsigned mib)
{
	kr_pool *pool;
	kr_oid root, desc;
	TU_OK(tu_create(path, (uint64_t)mib << 20, 0, 0, 0, &pool));
	TU_OK(kr_root(pool, sizeof(kr_oid), &root));
	TU_OK(kr_map_create(pool, NULL, kind, &desc));
	TU_OK(kr_update(pool, root, 0, &desc, sizeof(desc)));
	return pool;
}

/* ---- random operations against the model ----------------------------------------------- */
enum op_kind { OP_INSERT, OP_REMOVE, OP_LOOKUP };
struct op {
	enum op_kind kind;
	uint64_t key, value;
};

static struct op next_op(struct tu_rng *r, unsigned remove_pct)
{
	unsigned x = (unsigned)tu_rng_below(r, 100);
	struct op o = {.key = g_keys[tu_rng_below(r, NKEYS)], .value = tu_rng_next(r)};
	o.kind = x < remove_pct ? OP_REMOVE : x < 80 ? OP_INSERT : OP_LOOKUP;
	return o;
}

/* Runs o on the map and the model; fails the test on any disagreement. */
static void run_op(kr_map *m, struct model *model, const struct op *o, unsigned i)
{
	const char *kn = kr_map_kind_name(kr_map_kind_of(m));
	uint64_t got = 0, want = 0;
	int rc, expect;
	switch (o->kind) {
	case OP_INSERT:
		rc = kr_map_insert(m, NULL, o->key, o->value);
		expect = model_insert(model, o->key, o->value);
		TU_ASSERT(rc == expect, "%s op %u: insert %#llx = %d (%s), model says %d", kn, i,
			  (unsigned long long)o->key, rc, rc < 0 ? kr_errmsg() : "", expect);
		break;
	case OP_REMOVE:
		rc = kr_map_remove(m, NULL, o->key, &got);
		expect = model_remove(model, o->key, &want);
		TU_ASSERT(rc == expect && (!expect || got == want),
			  "%s op %u: remove %#llx = %d (%s) value %#llx, model says %d value %#llx", kn,
			  i, (unsigned long long)o->key, rc, rc < 0 ? kr_errmsg() : "",
			  (unsigned long long)got, expect, (unsigned long long)want);
		break;
	case OP_LOOKUP: {
		int found;
		size_t at = model_find(model, o->key, &found);
		rc = kr_map_lookup(m, NULL, o->key, &got);
		TU_ASSERT(rc == found && (!found || got == model->p[at].value),
			  "%s op %u: lookup %#llx = %d value %#llx, model says %d", kn, i,
			  (unsigned long long)o->key, rc, (unsigned long long)got, found);
		break;
	}
	}
}

static void test_model(enum kr_map_kind kind, uint64_t seed)
{
	char path[128], why[256];
	unsigned nops = tu_scaled(30000, 6000);
	struct tu_rng r;
	struct model model = {.p = calloc(NKEYS, sizeof(struct pair))};
	TU_ASSERT(model.p, "out of memory");
	tu_rng_seed(&r, seed);
	tu_pool_path(path, sizeof(path), "maps");
	kr_pool *pool = new_pool(path, kind, 96);
	kr_map *m = open_map(pool);
	for (unsigned i = 1; i <= nops; i++) {
		/* Phases that grow the map and phases that shrink it, so that structures both
		 * split and merge (and the hash table grows while emptying). */
		unsigned remove_pct = (i / 3000) % 2 ? 55 : 20;
		struct op o = next_op(&r, remove_pct);
		run_op(m, &model, &o, i);
		if (i % 500 == 0 && map_equals(m, &model, why, sizeof(why)))
			TU_FAIL("%s after %u ops: %s", kr_map_kind_name(kind), i, why);
		if (i % 4000 == 0) {
			kr_map_close(m);
			TU_OK(kr_pool_close(pool));
			TU_OK(tu_open(path, &pool));
			m = open_map(pool);
			if (map_equals(m, &model, why, sizeof(why)))
				TU_FAIL("%s after reopen at %u ops: %s", kr_map_kind_name(kind), i, why);
		}
	}
	/* Empty it completely: every structure must come back to a valid empty map. */
	while (model.n) {
		struct op o = {.kind = OP_REMOVE, .key = model.p[tu_rng_below(&r, model.n)].key};
		run_op(m, &model, &o, 0);
	}
	if (map_equals(m, &model, why, sizeof(why)))
		TU_FAIL("%s emptied: %s", kr_map_kind_name(kind), why);
	kr_map_close(m);
	TU_OK(kr_pool_close(pool));
	free(model.p);
	printf("  %-8s model: %u random operations, checked every 500, reopened every 4000\n",
	       kr_map_kind_name(kind), nops);
}

/* n random inserts into the map and the model. */
static void fill(kr_map *m, struct model *model, struct tu_rng *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct op o = next_op(r, 0);
		o.kind = OP_INSERT;
		run_op(m, model, &o, i);
	}
}

/* Several changes in one caller transaction: visible inside, not outside, all or nothing. */
static void test_caller_tx(enum kr_map_kind kind, uint64_t seed)
{
	char path[128], why[256];
	struct model model = {.p = calloc(NKEYS, sizeof(struct pair))};
	struct model after = {.p = calloc(NKEYS, sizeof(struct pair))};
	TU_ASSERT(model.p && after.p, "out of memory");
	struct tu_rng r;
	tu_rng_seed(&r, seed);
	tu_pool_path(path, sizeof(path), "mapstx");
	kr_pool *pool = new_pool(path, kind, 96);
	kr_map *m = open_map(pool);
	fill(m, &model, &r, 200);
	for (int commit = 0; commit < 2; commit++) {
		kr_tx *tx;
		model_copy(&after, &model);
		TU_OK(kr_tx_begin(pool, &tx));
		for (unsigned i = 0; i < 12; i++) {
			uint64_t key = g_keys[tu_rng_below(&r, NKEYS)], v = tu_rng_next(&r), got = 0, want;
			if (i % 3 == 2) {
				int rc = kr_map_remove(m, tx, key, &got);
				TU_ASSERT(rc == model_remove(&after, key, &want), "%s: remove in a caller tx = %d",
					  kr_map_kind_name(kind), rc);
			} else {
				int rc = kr_map_insert(m, tx, key, v);
				TU_ASSERT(rc == model_insert(&after, key, v), "%s: insert in a caller tx = %d (%s)",
					  kr_map_kind_name(kind), rc, kr_errmsg());
				TU_ASSERT(kr_map_lookup(m, tx, key, &got) == 1 && got == v,
					  "%s: a lookup inside the transaction misses its own insert",
					  kr_map_kind_name(kind));
			}
		}
		if (commit) {
			TU_OK(kr_tx_commit(tx));
			model_copy(&model, &after);
		} else {
			kr_tx_abort(tx);
		}
		if (map_equals(m, &model, why, sizeof(why)))
			TU_FAIL("%s after a caller transaction %s: %s", kr_map_kind_name(kind),
				commit ? "committed" : "aborted", why);
	}
	kr_map_close(m);
	TU_OK(kr_pool_close(pool));
	free(model.p);
	free(after.p);
	printf("  %-8s caller transactions: 12 changes aborted, then committed\n",
	       kr_map_kind_name(kind));
}

/* ---- crash images mid-operation --------------------------------------------------------- */
static struct model g_acked, g_pending; /* read by check_image in the forked child */
static int g_in_op;
static unsigned g_nacked;

static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	char why[256], why1[256] = "no operation was in flight";
	kr_map *m = open_map(pool);
	int bad = map_equals(m, &g_acked, why, sizeof(why));
	if (bad && g_in_op)
		bad = map_equals(m, &g_pending, why1, sizeof(why1));
	kr_map_close(m);
	if (bad)
		fprintf(stderr,
			"crash image fence %llu kind %d#%u (%u operations returned, one in flight: %d): "
			"matches neither (%s) nor the next (%s)\n",
			(unsigned long long)img->fence, (int)img->kind, img->index, g_nacked, g_in_op,
			why, why1);
	return bad;
}

static void test_crash(enum kr_map_kind kind, uint64_t seed)
{
	char path[128];
	unsigned nops = tu_scaled(80, 40);
	g_acked = (struct model){.p = calloc(NKEYS, sizeof(struct pair))};
	g_pending = (struct model){.p = calloc(NKEYS, sizeof(struct pair))};
	TU_ASSERT(g_acked.p && g_pending.p, "out of memory");
	g_nacked = 0;
	g_in_op = 0;
	struct tu_rng r;
	tu_rng_seed(&r, seed);
	tu_pool_path(path, sizeof(path), "mapscrash");
	/* Each crash image is a copy of the pool: a small one (400 keys and 80 operations). */
	kr_pool *pool = new_pool(path, kind, 16);
	kr_map *m = open_map(pool);
	fill(m, &g_acked, &r, 400);
	kr_map_close(m);
	TU_OK(kr_pool_close(pool));

	struct crashsim_opts co;
	crashsim_opts_init(&co);
	co.seed = seed;
	TU_ASSERT(crashsim_start(&co, check_image, NULL) == 0, "crashsim already running");
	TU_OK(tu_open(path, &pool));
	m = open_map(pool);
	for (unsigned i = 0; i < nops; i++) {
		struct op o = next_op(&r, 45);
		if (o.kind == OP_LOOKUP)
			o.kind = OP_INSERT;
		/* The model after this operation, for images taken while it runs. */
		uint64_t v;
		model_copy(&g_pending, &g_acked);
		if (o.kind == OP_INSERT)
			model_insert(&g_pending, o.key, o.value);
		else
			model_remove(&g_pending, o.key, &v);
		g_in_op = 1;
		run_op(m, &g_acked, &o, i);
		g_in_op = 0;
		g_nacked++;
	}
	kr_map_close(m);
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);
	printf("  %-8s crash: %u operations, %llu fences, %llu crash images, %llu failed\n",
	       kr_map_kind_name(kind), nops, (unsigned long long)st.fences,
	       (unsigned long long)st.images, (unsigned long long)st.failures);
	TU_ASSERT(st.images > 0, "no crash image was checked");
	TU_ASSERT(st.failures == 0, "%s: %llu crash images recovered wrongly (see above)",
		  kr_map_kind_name(kind), (unsigned long long)st.failures);
	free(g_acked.p);
	free(g_pending.p);
}

int main(int argc, char **argv)
{
	uint64_t seed = tu_seed("test_maps", 20261123);
	double t0 = tu_now();
	int kinds[KR_MAP_NKINDS], nkinds = 0;
	for (int i = 1; i < argc; i++) {
		int k = kr_map_kind_parse(argv[i]);
		if (k < 0) {
			fprintf(stderr, "test_maps: unknown map kind '%s'\n", argv[i]);
			return 2;
		}
		kinds[nkinds++] = k;
	}
	if (!nkinds)
		for (int k = 0; k < KR_MAP_NKINDS; k++)
			kinds[nkinds++] = k;
	make_keys(seed);
	for (int i = 0; i < nkinds; i++) {
		test_model(kinds[i], seed + (uint64_t)i);
		test_caller_tx(kinds[i], seed + 100 + (uint64_t)i);
		test_crash(kinds[i], seed + 200 + (uint64_t)i);
	}
	printf("test_maps: %d kinds passed in %.1fs\n", nkinds, tu_now() - t0);
	TU_END_CHECK_ALL("test_maps");
	return 0;
}
