/*
 * test_hmap.c - the single-trip hash map (src/hmap/hmap.c) against a model.
 *
 *   model   random puts, deletes, lookups and transactions (keys up to 100 bytes, values up
 *           to 1 KiB, 20-line entries) against a model, verified every 500 operations and
 *           across 20 close/reopen cycles; every update costs exactly one fence.
 *   txreuse the reference's transactions-versus-reuse scenario: a transaction writes k1 and
 *           k2, k1 is updated, the map is churned until every dead entry was reused, then
 *           reopened: k2 must still hold the transaction's value (the paper's count rule
 *           alone drops it). Also a deleted key must stay deleted across churn and reopens.
 *   full    a full map refuses new keys with KR_E_NOSPACE, still takes updates and deletes,
 *           and takes new keys again after deletes.
 *   lanes   slots stashed by one thread serve the others (no false "full").
 *   rules   hmap_slot_take on lanes set up by hand: each reuse rule across lanes.
 *   crash   the crash simulator over a small map under heavy reuse: at every fence, with
 *           nothing, everything and random subsets of the pending lines persisted (torn
 *           multi-line entries included), the recovered map is the state after every
 *           acknowledged operation, or after that and the one in flight; transactions all
 *           or nothing.
 *   threads two writers and a reader (values prove themselves whole), index growth, both
 *           threads changing the same keys (the index and a reopen must agree).
 *   crashthreads  the crash simulator over two writers (per-thread flushes and fences):
 *           the recovered map is the acknowledged state plus any subset of the operations
 *           in flight, each whole; keys change hands between rounds (and lanes).
 *   protect KR_HMAP_PROTECT: a scribble, emulated poison, damage while closed (in a page
 *           of entries or in a parity page of the sidecar) repaired;
 *           two bad pages of a stripe refused; protection must match the map.
 *   protectkill  SIGKILL of a child working on a protected map, then recovery of the map
 *           and of its redundancy (every page and stripe verifies after).
 *   bad     bad arguments, a foreign file, damaged headers, changes from inside foreach.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crashsim.h"
#include "hmap_layout.h"
#include "layout.h"
#include "region_layout.h"
#include "stps.h"
#include "testutil.h"

#define MAXV 1800

struct mkey {
	bool present;
	uint16_t len;
	uint64_t seed;
};

struct model {
	unsigned nkeys;
	struct mkey *k;
};

static size_t key_of(unsigned id, char *buf)
{
	/* Lengths 9 to 100: some keys span two lines of an entry. */
	size_t n = 9 + (id * 37) % 92;
	char head[16];
	snprintf(head, sizeof(head), "k%07u#", id % 10000000u);
	memset(buf, 'a' + id % 26, n);
	memcpy(buf, head, 9);
	return n;
}

static void model_init(struct model *m, unsigned nkeys)
{
	m->nkeys = nkeys;
	m->k = calloc(nkeys, sizeof(*m->k));
	TU_ASSERT(m->k, "calloc");
}

static void model_copy(struct model *dst, const struct model *src)
{
	memcpy(dst->k, src->k, src->nkeys * sizeof(*src->k));
}

/* A value that proves itself: its first 8 bytes are the seed of the rest (shorter values
 * are all filler), so a reader can tell a torn or foreign value without the model. */
static void value_make(uint8_t *v, size_t len, uint64_t seed)
{
	if (len < 8) {
		tu_fill(v, len, seed);
		return;
	}
	memcpy(v, &seed, 8);
	tu_fill(v + 8, len - 8, seed);
}

static bool value_ok(const uint8_t *v, size_t len)
{
	uint8_t want[MAXV];
	uint64_t seed;
	if (len < 8)
		return true;
	memcpy(&seed, v, 8);
	value_make(want, len, seed);
	return !memcmp(want, v, len);
}

/* The keys first, first + stride, ... of the map must hold exactly the model's (and the
 * map's count its count, if all keys are checked). Returns 0, or 1 with why in buf. */
static int model_check_of(kr_hmap *h, const struct model *m, unsigned first, unsigned stride,
			  char *why, size_t n)
{
	uint8_t want[MAXV], got[MAXV];
	char key[128];
	uint64_t present = 0;
	for (unsigned id = first; id < m->nkeys; id += stride) {
		size_t kl = key_of(id, key), vl = 0;
		int rc = kr_hmap_get(h, key, kl, got, sizeof(got), &vl);
		if (rc < 0) {
			snprintf(why, n, "get key %u: %s", id, kr_errmsg());
			return 1;
		}
		if (rc != m->k[id].present) {
			snprintf(why, n, "key %u: %s, model says %s", id, rc ? "present" : "absent",
				 m->k[id].present ? "present" : "absent");
			return 1;
		}
		if (!rc)
			continue;
		present++;
		value_make(want, m->k[id].len, m->k[id].seed);
		if (vl != m->k[id].len || memcmp(want, got, vl)) {
			snprintf(why, n, "key %u: value of %zu bytes differs (model %u bytes)", id, vl,
				 m->k[id].len);
			return 1;
		}
	}
	if (stride == 1 && kr_hmap_count(h) != present) {
		snprintf(why, n, "count %llu, model %llu", (unsigned long long)kr_hmap_count(h),
			 (unsigned long long)present);
		return 1;
	}
	return 0;
}

static int model_check(kr_hmap *h, const struct model *m, char *why, size_t n)
{
	return model_check_of(h, m, 0, 1, why, n);
}

/* One operation: a list of changes (len < 0: delete). */
struct op {
	unsigned n;
	unsigned id[8];
	int len[8];
	uint64_t seed[8];
};

static void op_apply_model(struct model *m, const struct op *o)
{
	for (unsigned i = 0; i < o->n; i++) {
		struct mkey *k = &m->k[o->id[i]];
		k->present = o->len[i] >= 0;
		k->len = o->len[i] >= 0 ? (uint16_t)o->len[i] : 0;
		k->seed = o->seed[i];
	}
}

static int op_run(kr_hmap *h, const struct op *o)
{
	char key[128];
	uint8_t val[MAXV];
	if (o->n == 1) {
		size_t kl = key_of(o->id[0], key);
		if (o->len[0] < 0)
			return kr_hmap_del(h, key, kl) < 0 ? -1 : 0;
		value_make(val, (size_t)o->len[0], o->seed[0]);
		return kr_hmap_put(h, key, kl, val, (size_t)o->len[0]);
	}
	kr_hmap_tx *tx;
	TU_OK(kr_hmap_tx_begin(h, &tx));
	for (unsigned i = 0; i < o->n; i++) {
		size_t kl = key_of(o->id[i], key);
		if (o->len[i] < 0) {
			TU_OK(kr_hmap_tx_del(tx, key, kl));
		} else {
			value_make(val, (size_t)o->len[i], o->seed[i]);
			TU_OK(kr_hmap_tx_put(tx, key, kl, val, (size_t)o->len[i]));
		}
	}
	return kr_hmap_tx_commit(tx);
}

/* A random operation on keys first, first + stride, ... below m->nkeys. */
static void op_random_of(struct tu_rng *r, const struct model *m, unsigned first, unsigned stride,
			 unsigned maxlen, struct op *o)
{
	unsigned kind = (unsigned)tu_rng_below(r, 10);
	o->n = kind < 8 ? 1 : (unsigned)tu_rng_range(r, 2, 6);
	for (unsigned i = 0; i < o->n; i++) {
		unsigned id;
		bool dup;
		do { /* distinct keys within a transaction */
			id = first + stride * (unsigned)tu_rng_below(r, (m->nkeys - first + stride - 1) / stride);
			dup = false;
			for (unsigned j = 0; j < i; j++)
				dup |= o->id[j] == id;
		} while (dup);
		char key[128];
		size_t room = maxlen - key_of(id, key);
		o->id[i] = id;
		o->len[i] = (kind == 6 || tu_rng_chance(r, 1, 5)) ? -1 : (int)tu_rng_below(r, room + 1);
		o->seed[i] = tu_rng_next(r);
	}
}

static void op_random(struct tu_rng *r, const struct model *m, unsigned maxlen, struct op *o)
{
	op_random_of(r, m, 0, 1, maxlen, o);
}

static void case_model(void)
{
	char path[128], why[256];
	tu_pool_path(path, sizeof(path), "hmap-model");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 32ull << 20, .entry_lines = 20,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct model m;
	model_init(&m, 2000);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("hmap-model", 3));
	unsigned ops = tu_scaled(20000, 4000), reopens = 0;
	uint64_t fences = 0, updates = 0;
	for (unsigned i = 1; i <= ops; i++) {
		struct op op;
		op_random(&r, &m, 48 + 19 * 56, &op);
		bool noop = true; /* only deletes of absent keys: nothing to write */
		for (unsigned k = 0; k < op.n; k++)
			noop &= op.len[k] < 0 && !m.k[op.id[k]].present;
		struct kr_hmap_stats s0, s1;
		TU_OK(kr_hmap_stats(h, &s0));
		kr_counters_reset();
		TU_ASSERT(op_run(h, &op) == KR_OK, "op %u: %s", i, kr_errmsg());
		struct kr_counters c;
		kr_counters_get(&c);
		TU_OK(kr_hmap_stats(h, &s1));
		op_apply_model(&m, &op);
		if (!noop) {
			uint64_t extra = s1.extra_fences - s0.extra_fences;
			TU_ASSERT(c.fences == 1 + extra && extra <= 1, "op %u (%u changes): %llu fences",
				  i, op.n, (unsigned long long)c.fences);
			fences += c.fences;
			updates++;
		}
		if (i % 500 == 0 || getenv("HMAP_CHECK_ALL"))
			TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after op %u: %s", i, why);
		if (i % (ops / 20) == 0) {
			TU_OK(kr_hmap_close(h));
			TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
			TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after reopen %u: %s", reopens, why);
			reopens++;
		}
	}
	struct kr_hmap_stats st;
	TU_OK(kr_hmap_stats(h, &st));
	printf("hmap model: %u operations, %llu updates at %.4f fences each (%llu with two), %u "
	       "reopens; %llu live, %llu dead, %llu free of %llu slots; last recovery %.2f ms\n",
	       ops, (unsigned long long)updates, (double)fences / (double)updates,
	       (unsigned long long)(fences - updates), reopens,
	       (unsigned long long)st.live, (unsigned long long)st.dead_slots,
	       (unsigned long long)st.free_slots, (unsigned long long)st.nslots, st.recovery_ns / 1e6);
	TU_OK(kr_hmap_close(h));
	free(m.k);
}

static void case_txreuse(void)
{
	char path[128], why[256];
	tu_pool_path(path, sizeof(path), "hmap-txreuse");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 2,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct kr_hmap_stats st;
	TU_OK(kr_hmap_stats(h, &st));
	struct model m;
	model_init(&m, 40);
	/* A transaction writes keys 0 and 1; key 0 is then updated, and key 2 deleted after
	 * two versions. */
	struct op t = {2, {0, 1}, {10, 20}, {1, 2}};
	TU_OK(op_run(h, &t));
	op_apply_model(&m, &t);
	struct op u = {1, {0}, {30}, {3}};
	TU_OK(op_run(h, &u));
	op_apply_model(&m, &u);
	struct op v[3] = {{1, {2}, {5}, {4}}, {1, {2}, {6}, {5}}, {1, {2}, {-1}, {0}}};
	for (int i = 0; i < 3; i++) {
		TU_OK(op_run(h, &v[i]));
		op_apply_model(&m, &v[i]);
	}
	/* Churn through every slot several times (keys 3..39), reopening now and then. */
	for (uint64_t i = 0; i < 4 * st.nslots; i++) {
		struct op c = {1, {3 + (unsigned)(i % 37)}, {(int)(i % 7)}, {100 + i}};
		TU_OK(op_run(h, &c));
		op_apply_model(&m, &c);
		if (i % st.nslots == st.nslots - 1) {
			TU_OK(kr_hmap_close(h));
			TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
			TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "churn %llu: %s",
				  (unsigned long long)i, why);
		}
	}
	TU_OK(kr_hmap_stats(h, &st));
	TU_ASSERT(st.next_version > 4 * st.nslots, "churned");
	TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after churn: %s", why);
	TU_OK(kr_hmap_close(h));
	free(m.k);
	printf("hmap txreuse: ok (%llu slots churned 4 times)\n", (unsigned long long)st.nslots);
}

static void case_full(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "hmap-full");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 1,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct kr_hmap_stats st;
	TU_OK(kr_hmap_stats(h, &st));
	char key[16];
	uint64_t i = 0;
	int rc;
	for (;; i++) {
		snprintf(key, sizeof(key), "f%llu", (unsigned long long)i);
		rc = kr_hmap_put(h, key, strlen(key), "v", 1);
		if (rc != KR_OK)
			break;
	}
	uint64_t reserve = st.nslots / 8 < 256 ? st.nslots / 8 : 256;
	TU_ASSERT(rc == KR_E_NOSPACE && i == st.nslots - reserve, "full after %llu of %llu: %d",
		  (unsigned long long)i, (unsigned long long)st.nslots, rc);
	/* Updates and deletes still work in a full map, and deletes make room again. */
	for (unsigned k = 0; k < 3 * reserve; k++)
		TU_OK(kr_hmap_put(h, "f0", 2, &k, sizeof(k) > 4 ? 4 : sizeof(k)));
	for (unsigned k = 1; k <= 10; k++) {
		snprintf(key, sizeof(key), "f%u", k);
		TU_ASSERT(kr_hmap_del(h, key, strlen(key)) == 1, "delete in a full map");
	}
	for (unsigned k = 0; k < 10; k++) {
		snprintf(key, sizeof(key), "g%u", k);
		TU_OK(kr_hmap_put(h, key, strlen(key), "v", 1));
	}
	TU_ASSERT(kr_hmap_put(h, "x", 1, "012345678901234567890123456789012345678901234567", 48) ==
		  KR_E_TOO_BIG, "49 bytes: too big for one line");
	uint64_t live = kr_hmap_count(h);
	TU_OK(kr_hmap_close(h));
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
	TU_ASSERT(kr_hmap_count(h) == live, "all there after reopen");
	TU_OK(kr_hmap_close(h));
	printf("hmap full: %llu entries, then KR_E_NOSPACE; updates and deletes still work\n",
	       (unsigned long long)i);
}

/* Slots stashed by one thread's lane must serve the others: a thread that took every
 * never-used slot of a small map and left, then another thread filling the map to its
 * limit, then a third updating and deleting in the full map. */
struct putjob {
	kr_hmap *h;
	const char *prefix;
	unsigned count; /* keys to put (until refused if 0) */
	bool del;       /* delete them instead */
	unsigned done;
	int rc;
};

static void *put_job(void *arg)
{
	struct putjob *j = arg;
	char key[32];
	for (unsigned i = 0; !j->count || i < j->count; i++) {
		snprintf(key, sizeof(key), "%s%u", j->prefix, i);
		j->rc = j->del ? kr_hmap_del(j->h, key, strlen(key)) : kr_hmap_put(j->h, key, strlen(key), "v", 1);
		if (j->rc < 0)
			break;
		j->done++;
	}
	return NULL;
}

static void run_job(struct putjob *j)
{
	pthread_t th; /* a new thread: a lane of its own */
	TU_ASSERT(!pthread_create(&th, NULL, put_job, j), "pthread_create");
	pthread_join(th, NULL);
}

static void case_lanes(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "hmap-lanes");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 16,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct kr_hmap_stats st;
	TU_OK(kr_hmap_stats(h, &st));
	uint64_t limit = st.nslots - (st.nslots / 8 < 256 ? st.nslots / 8 : 256);
	struct putjob a = {h, "a", 1, false, 0, 0}, b = {h, "b", 0, false, 0, 0};
	run_job(&a);
	run_job(&b);
	TU_ASSERT(b.rc == KR_E_NOSPACE && 1 + b.done == limit, "second thread: %u keys then %d "
		  "(limit %llu of %llu slots)", b.done, b.rc, (unsigned long long)limit,
		  (unsigned long long)st.nslots);
	struct putjob c = {h, "b", b.done, false, 0, 0}, d = {h, "b", b.done, true, 0, 0};
	run_job(&c);
	TU_ASSERT(c.rc == KR_OK && c.done == b.done, "updates in a full map: %d", c.rc);
	run_job(&d);
	TU_ASSERT(d.rc == 1 && kr_hmap_count(h) == 1, "deletes in a full map: %d", d.rc);
	TU_OK(kr_hmap_close(h));
	printf("hmap lanes: %llu slots; one thread stashed them, another filled the map (%u keys), "
	       "a third updated and deleted them\n", (unsigned long long)st.nslots, b.done);
}

/* ---- the reuse rules, one by one ----------------------------------------------------------- */
static void queue(struct ring *r, uint64_t slot, uint64_t dver, uint64_t txver)
{
	TU_OK(hmap_ring_reserve(r, 1));
	r->v[(r->head + r->len++) % r->cap] = (struct dead){slot, dver, txver};
}

/* Takes the slot of one change from lane a; returns TAKEN, RETRY or NONE. */
static int take(kr_hmap *m, struct lane *a, struct change *c, uint64_t *min_dead, unsigned *split)
{
	*c = (struct change){0};
	return hmap_slot_take(m, a, c, 0, min_dead, split);
}

/* hmap_slot_take on lanes set up by hand (a map whose pool is emptied): the tombstone rule
 * across lanes, taking over an idle lane's slots, the watermark rule for a transaction's
 * members, and the split of an operation that takes an entry and then a tombstone. */
static void case_rules(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "hmap-rules");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 4,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *m;
	TU_OK(kr_hmap_create(path, &o, &m));
	m->npool = 0;
	atomic_store(&m->npool_seen, 0);
	struct lane *a = &m->lanes[0], *b = &m->lanes[1];
	struct change c;
	uint64_t min_dead = UINT64_MAX;
	unsigned split = 1;

	/* Nothing anywhere: "full", not "wait". */
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == NONE, "nothing to take");

	/* A tombstone that died at 10 waits while lane b (in use) holds an entry that died at 5:
	 * it may be an older version of the tombstone's key, not yet overwritten. */
	queue(&a->tombs, 7, 10, 0);
	pthread_mutex_lock(&b->lock);
	atomic_store(&b->oldest_dead, 5);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == RETRY && a->tombs.len == 1,
		  "a tombstone must wait for an older entry another lane holds");
	/* ... and while a steal is moving entries between lanes (they are in neither). */
	atomic_store(&b->oldest_dead, UINT64_MAX);
	atomic_store(&m->stealing, 1);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == RETRY, "no tombstone during a steal");
	atomic_store(&m->stealing, 0);
	/* Once b's entry is overwritten (its oldest is newer), the tombstone is taken. */
	atomic_store(&b->oldest_dead, 11);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == TAKEN && c.from == FROM_TOMBS && c.d.slot == 7,
		  "the tombstone, once ready");
	pthread_mutex_unlock(&b->lock);
	atomic_store(&b->oldest_dead, UINT64_MAX);

	/* An idle lane's dead entries are taken over before a tombstone (oldest first), and
	 * count for the taker meanwhile. */
	queue(&a->tombs, 8, 20, 0);
	queue(&b->dead, 3, 12, 0);
	queue(&b->dead, 4, 14, 0);
	atomic_store(&b->oldest_dead, 12);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == TAKEN && c.from == FROM_DEAD && c.d.slot == 3,
		  "an idle lane's oldest dead entry");
	TU_ASSERT(atomic_load(&a->oldest_dead) <= 12 && atomic_load(&b->oldest_dead) == 14,
		  "moved entries count for the taker (a %llu, b %llu)",
		  (unsigned long long)atomic_load(&a->oldest_dead),
		  (unsigned long long)atomic_load(&b->oldest_dead));
	/* The same operation (it took an entry that died at 12) now takes a tombstone that
	 * died at 13: its entries from this change on wait for a fence of their own. */
	a->tombs.len = 0;
	b->dead.len = 0;
	atomic_store(&b->oldest_dead, UINT64_MAX);
	queue(&a->tombs, 9, 13, 0);
	split = 1;
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == TAKEN && c.d.slot == 9 && split == 0,
		  "a tombstone after the operation's own older entry splits it (split %u)", split);

	/* An idle lane's never-used slots serve before anything else. */
	b->stash[b->nstash++] = 40;
	queue(&a->tombs, 10, 30, 0);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == TAKEN && c.from == FROM_STASH && c.d.slot == 40,
		  "an idle lane's never-used slot");

	/* A member of the transaction with version 50 waits until the watermark covers it. */
	a->tombs.len = 0;
	queue(&a->dead, 11, 31, 50);
	atomic_store(&m->wm_stored, 40);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == RETRY && a->dead.len == 1,
		  "a transaction's member above the watermark waits");
	atomic_store(&m->wm_stored, 50);
	TU_ASSERT(take(m, a, &c, &min_dead, &split) == TAKEN && c.d.slot == 11, "covered: taken");

	TU_OK(kr_hmap_close(m));

	/* A member of a transaction whose watermark is stored but not known durable (another
	 * thread stored it, no fence of this one covered it): the operation that rewrites it
	 * fences the watermark first, one extra fence. */
	char path2[128];
	tu_pool_path(path2, sizeof(path2), "hmap-rules-wm");
	TU_OK(kr_hmap_create(path2, &o, &m));
	struct op t = {2, {0, 1}, {10, 20}, {1, 2}}, u = {1, {0}, {30}, {3}}, v = {1, {2}, {8}, {4}};
	TU_OK(op_run(m, &t));
	TU_OK(op_run(m, &u)); /* key 0's member dies; this fence made W durable */
	struct lane *mine = &m->lanes[0];
	TU_ASSERT(mine->dead.len == 1 && mine->dead.v[mine->dead.head].txver != 0,
		  "the member is next in this thread's lane");
	atomic_store(&m->wm_durable, 0);
	mine->nstash = 0;
	m->npool = 0;
	atomic_store(&m->npool_seen, 0);
	struct kr_hmap_stats st;
	kr_counters_reset();
	TU_OK(op_run(m, &v));
	struct kr_counters cnt;
	kr_counters_get(&cnt);
	TU_OK(kr_hmap_stats(m, &st));
	TU_ASSERT(cnt.fences == 2 && st.extra_fences == 1, "rewriting a member whose W is not durable: "
		  "%llu fences, %llu extra", (unsigned long long)cnt.fences,
		  (unsigned long long)st.extra_fences);
	TU_OK(kr_hmap_close(m));
	printf("hmap rules: tombstones wait for other lanes and steals, idle lanes' slots are "
	       "taken over, members wait for the watermark (and fence it when not durable), "
	       "split\n");
}

/* ---- crash ------------------------------------------------------------------------------ */
static struct model g_acked, g_next;
static struct op g_inflight;
static bool g_have_inflight;

static int crash_check(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_hmap *h;
	int rc = kr_hmap_open(img->path, KR_OPEN_FORCE_PMEM, &h);
	if (rc != KR_OK) {
		fprintf(stderr, "fence %llu: open failed: %s\n", (unsigned long long)img->fence, kr_errmsg());
		return 1;
	}
	char why[256], why2[256] = "no operation in flight";
	if (!model_check(h, &g_acked, why, sizeof(why)))
		return 0;
	if (g_have_inflight) {
		model_copy(&g_next, &g_acked);
		op_apply_model(&g_next, &g_inflight);
		if (!model_check(h, &g_next, why2, sizeof(why2)))
			return 0;
	}
	fprintf(stderr, "fence %llu (%s image): neither the acknowledged state (%s) nor it plus the "
		"operation in flight (%s)\n", (unsigned long long)img->fence,
		img->kind == CRASHSIM_NONE ? "none" : img->kind == CRASHSIM_ALL ? "all" : "random", why, why2);
	return 1;
}

static void case_crash(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "hmap-crash");
	model_init(&g_acked, 30);
	model_init(&g_next, 30);
	struct crashsim_opts co;
	crashsim_opts_init(&co);
	co.check_path = crash_check;
	co.random_images = 3;
	TU_ASSERT(crashsim_start(&co, NULL, NULL) == 0, "crashsim_start");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 4,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	crashsim_enable_checks(false); /* a map whose creation did not return need not open */
	TU_OK(kr_hmap_create(path, &o, &h));
	crashsim_enable_checks(true);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("hmap-crash", 7));
	unsigned ops = tu_scaled(700, 200);
	for (unsigned i = 0; i < ops; i++) {
		op_random(&r, &g_acked, 48 + 3 * 56, &g_inflight);
		g_have_inflight = true;
		TU_ASSERT(op_run(h, &g_inflight) == KR_OK, "op %u: %s", i, kr_errmsg());
		op_apply_model(&g_acked, &g_inflight);
		g_have_inflight = false;
		if (i % 150 == 149) { /* recovery's own writes are checked too */
			TU_OK(kr_hmap_close(h));
			crashsim_drain(); /* checking children share the file's lock */
			TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
		}
	}
	TU_OK(kr_hmap_close(h));
	struct crashsim_stats st;
	crashsim_stop(&st);
	printf("hmap crash: %u operations, %llu fences, %llu crash images checked, %llu failed\n", ops,
	       (unsigned long long)st.fences, (unsigned long long)st.images,
	       (unsigned long long)st.failures);
	TU_ASSERT(st.failures == 0, "%llu crash images recovered wrongly", (unsigned long long)st.failures);
	TU_ASSERT(st.unrecorded_lines == 0 && st.dirty_at_unmap == 0, "writes the simulator missed");
	TU_ASSERT(st.images >= ops, "too few images");
}

/* ---- threads ---------------------------------------------------------------------------- */
/* Writer t of n changes only keys t, t + n, ... (so that its model is exact) but shares
 * everything else with the others: slots, reuse queues, versions, the watermark, the index.
 * Its model is double-buffered so that a crash image's child, forked by another thread at
 * any instant, finds a consistent one: acked[cur] is the state after every operation that
 * returned, and op (while have_op) the one in flight. */
struct writer {
	pthread_t th;
	kr_hmap *h;
	unsigned t, n, ops, maxlen;
	uint64_t seed;
	struct model acked[2];
	_Atomic unsigned cur, have_op;
	struct op op;
	uint64_t updates, fences;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	char why[256];
	for (unsigned i = 1; i <= w->ops; i++) {
		unsigned cur = atomic_load(&w->cur);
		struct model *m = &w->acked[cur], *next = &w->acked[1 - cur];
		struct op op;
		op_random_of(&r, m, w->t, w->n, w->maxlen, &op);
		bool noop = true;
		for (unsigned k = 0; k < op.n; k++)
			noop &= op.len[k] < 0 && !m->k[op.id[k]].present;
		w->op = op;
		atomic_store(&w->have_op, 1);
		kr_counters_reset();
		TU_ASSERT(op_run(w->h, &op) == KR_OK, "thread %u op %u: %s", w->t, i, kr_errmsg());
		struct kr_counters c;
		kr_counters_get(&c);
		if (!noop) {
			w->fences += c.fences;
			w->updates++;
		}
		model_copy(next, m);
		op_apply_model(next, &op);
		atomic_store(&w->cur, 1 - cur);
		atomic_store(&w->have_op, 0);
		if (i % 64 == 0)
			TU_ASSERT(!model_check_of(w->h, next, w->t, w->n, why, sizeof(why)),
				  "thread %u after op %u: %s", w->t, i, why);
	}
	return NULL;
}

struct reader {
	pthread_t th;
	kr_hmap *h;
	unsigned nkeys;
	_Atomic bool stop;
	uint64_t gets, found, walks;
};

static int walk_one(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	(void)key, (void)klen;
	TU_ASSERT(value_ok(val, vlen), "foreach: a torn value of %zu bytes", vlen);
	++*(uint64_t *)ctx;
	return 0;
}

/* Looks up random keys while the writers run: every value found must be whole. */
static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	struct tu_rng r;
	tu_rng_seed(&r, 99);
	uint8_t val[MAXV];
	char key[128];
	while (!atomic_load(&rd->stop)) {
		unsigned id = (unsigned)tu_rng_below(&r, rd->nkeys);
		size_t kl = key_of(id, key), vl = 0;
		int rc = kr_hmap_get(rd->h, key, kl, val, sizeof(val), &vl);
		TU_ASSERT(rc >= 0, "get: %s", kr_errmsg());
		TU_ASSERT(!rc || value_ok(val, vl), "key %u: a torn value of %zu bytes", id, vl);
		rd->found += (unsigned)rc;
		if (++rd->gets % 4096 == 0) {
			uint64_t seen = 0;
			TU_OK(kr_hmap_foreach(rd->h, walk_one, &seen));
			rd->walks++;
		}
	}
	return NULL;
}

/* The union of the writers' models (each owns its keys) after op in flight of those in
 * mask: the state a crash may leave if exactly those operations reached the media. */
static void writers_state(struct writer *w, unsigned n, unsigned mask, struct model *out)
{
	for (unsigned t = 0; t < n; t++) {
		const struct model *m = &w[t].acked[atomic_load(&w[t].cur)];
		for (unsigned id = w[t].t; id < out->nkeys; id += n)
			out->k[id] = m->k[id];
	}
	for (unsigned t = 0; t < n; t++)
		if (mask >> t & 1)
			op_apply_model(out, &w[t].op);
}

/* Writer t takes keys (t + shift) mod n, starting from the state in from (NULL: empty). */
static void writers_start(struct writer *w, unsigned n, kr_hmap *h, const struct model *from,
			  unsigned shift, unsigned ops, unsigned maxlen, uint64_t seed)
{
	for (unsigned t = 0; t < n; t++) { /* all models first: a crash check reads them all */
		w[t].h = h;
		w[t].t = (t + shift) % n;
		w[t].n = n;
		w[t].ops = ops;
		w[t].maxlen = maxlen;
		w[t].seed = seed + t;
		if (!w[t].acked[0].k) {
			model_init(&w[t].acked[0], from->nkeys);
			model_init(&w[t].acked[1], from->nkeys);
		}
		model_copy(&w[t].acked[atomic_load(&w[t].cur)], from);
	}
	for (unsigned t = 0; t < n; t++)
		TU_ASSERT(!pthread_create(&w[t].th, NULL, writer_main, &w[t]), "pthread_create");
}

/* Two writers and a reader on one map: the small map makes every slot churn through the
 * reuse queues (tombstones and transaction members included, so the cross-thread rules are
 * exercised), the large one grows the index while the reader probes it. */
static void threads_run(const char *name, uint64_t size, unsigned nkeys, unsigned ops)
{
	char path[128], why[256];
	tu_pool_path(path, sizeof(path), name);
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = size, .entry_lines = 4,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct writer w[2] = {0};
	struct reader rd = {.h = h, .nkeys = nkeys};
	TU_ASSERT(!pthread_create(&rd.th, NULL, reader_main, &rd), "pthread_create");
	struct model all;
	model_init(&all, nkeys);
	writers_start(w, 2, h, &all, 0, ops, 48 + 3 * 56, tu_seed(name, 11));
	for (unsigned t = 0; t < 2; t++)
		pthread_join(w[t].th, NULL);
	atomic_store(&rd.stop, true);
	pthread_join(rd.th, NULL);

	writers_state(w, 2, 0, &all);
	TU_ASSERT(!model_check(h, &all, why, sizeof(why)), "%s after the threads: %s", name, why);
	struct kr_hmap_stats st;
	TU_OK(kr_hmap_stats(h, &st));
	uint64_t updates = w[0].updates + w[1].updates, fences = w[0].fences + w[1].fences;
	TU_ASSERT(fences == updates + st.extra_fences, "%llu fences for %llu updates, %llu extra",
		  (unsigned long long)fences, (unsigned long long)updates,
		  (unsigned long long)st.extra_fences);
	TU_OK(kr_hmap_close(h));
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
	TU_ASSERT(!model_check(h, &all, why, sizeof(why)), "%s after reopen: %s", name, why);
	TU_OK(kr_hmap_close(h));
	printf("hmap %s: 2 writers x %u operations (%llu updates, %.4f fences each, %llu extra; "
	       "%llu waited for another thread), a reader: %llu gets, %llu walks; %llu slots, "
	       "versions to %llu\n", name, ops, (unsigned long long)updates,
	       (double)fences / (double)updates, (unsigned long long)st.extra_fences,
	       (unsigned long long)st.waits, (unsigned long long)rd.gets,
	       (unsigned long long)rd.walks, (unsigned long long)st.nslots,
	       (unsigned long long)st.next_version);
	for (unsigned t = 0; t < 2; t++)
		free(w[t].acked[0].k), free(w[t].acked[1].k);
	free(all.k);
}

struct sharer {
	pthread_t th;
	kr_hmap *h;
	struct model keys; /* only its size is used */
	unsigned ops;
	uint64_t seed;
};

static void *sharer_main(void *arg)
{
	struct sharer *sh = arg;
	struct tu_rng r;
	tu_rng_seed(&r, sh->seed);
	for (unsigned i = 0; i < sh->ops; i++) {
		struct op op;
		op_random(&r, &sh->keys, 48 + 3 * 56, &op);
		TU_ASSERT(op_run(sh->h, &op) == KR_OK, "op %u: %s", i, kr_errmsg());
	}
	return NULL;
}

/* What the index says of keys [0, n), as a model; values too short to carry their seed
 * are deleted (the comparison could not tell them apart). */
static void index_state(kr_hmap *h, struct model *seen)
{
	for (unsigned id = 0; id < seen->nkeys; id++) {
		char key[128];
		uint8_t val[MAXV];
		size_t kl = key_of(id, key), vl = 0;
		int rc = kr_hmap_get(h, key, kl, val, sizeof(val), &vl);
		TU_ASSERT(rc >= 0 && (!rc || value_ok(val, vl)), "key %u", id);
		seen->k[id] = (struct mkey){.present = rc == 1, .len = (uint16_t)vl};
		if (rc && vl >= 8)
			memcpy(&seen->k[id].seed, val, 8);
		else if (rc) {
			seen->k[id].present = false;
			TU_ASSERT(kr_hmap_del(h, key, kl) == 1, "del");
		}
	}
}

/* Both threads change the same 12 keys, in short rounds: each key's changes must be
 * published in the order of their versions, so that the index and a reopen (newest
 * version wins) agree at the end of every round. */
static void threads_shared(unsigned rounds, unsigned ops)
{
	char path[128], why[256];
	tu_pool_path(path, sizeof(path), "hmap-threads-shared");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 1 << 20, .entry_lines = 4,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	struct sharer sh[2];
	struct model seen;
	model_init(&seen, 12);
	uint64_t seed = tu_seed("hmap-threads-shared", 13);
	for (unsigned round = 0; round < rounds; round++) {
		for (unsigned t = 0; t < 2; t++) {
			sh[t] = (struct sharer){.h = h, .ops = ops, .seed = seed + 2 * round + t};
			model_init(&sh[t].keys, 12);
			TU_ASSERT(!pthread_create(&sh[t].th, NULL, sharer_main, &sh[t]), "pthread_create");
		}
		for (unsigned t = 0; t < 2; t++) {
			pthread_join(sh[t].th, NULL);
			free(sh[t].keys.k);
		}
		index_state(h, &seen);
		TU_OK(kr_hmap_close(h));
		TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
		TU_ASSERT(!model_check(h, &seen, why, sizeof(why)), "round %u, after reopen: %s", round, why);
	}
	TU_OK(kr_hmap_close(h));
	printf("hmap threads-shared: %u rounds of 2 threads x %u operations on 12 keys; every "
	       "reopen agrees with the index\n", rounds, ops);
	free(seen.k);
}

static void case_threads(void)
{
	threads_shared(tu_scaled(400, 60), 60);
	threads_run("hmap-threads-small", 64 << 10, 60, tu_scaled(20000, 3000));
	threads_run("hmap-threads-large", 8 << 20, 3000, tu_scaled(20000, 3000));
}

/* ---- crash with two threads ------------------------------------------------------------- */
static struct writer g_w[2];

/* The recovered map must be the writers' acknowledged state plus any subset of their
 * operations in flight, each whole or absent. */
static int crash_check_threads(const struct crashsim_image *img)
{
	kr_hmap *h;
	if (kr_hmap_open(img->path, KR_OPEN_FORCE_PMEM, &h) != KR_OK) {
		fprintf(stderr, "fence %llu: open failed: %s\n", (unsigned long long)img->fence, kr_errmsg());
		return 1;
	}
	char why[4][256];
	for (unsigned mask = 0; mask < 4; mask++) {
		snprintf(why[mask], sizeof(why[mask]), "not in flight");
		if ((mask & 1 && !atomic_load(&g_w[0].have_op)) || (mask & 2 && !atomic_load(&g_w[1].have_op)))
			continue;
		writers_state(g_w, 2, mask, &g_next);
		if (!model_check(h, &g_next, why[mask], sizeof(why[mask])))
			return 0;
	}
	fprintf(stderr, "fence %llu (%s image): no prefix of the two threads' operations: acked (%s), "
		"+ thread 0's (%s), + thread 1's (%s), + both (%s)\n", (unsigned long long)img->fence,
		img->kind == CRASHSIM_NONE ? "none" : img->kind == CRASHSIM_ALL ? "all" : "random",
		why[0], why[1], why[2], why[3]);
	return 1;
}

/* The images are checked by a fresh process (crashsim's exec_path): the child forked from
 * the writers only writes their models to img->ctx_path, with write(2). Per writer: its
 * key residue, whether an operation is in flight, that operation, its acknowledged keys. */
static int write_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w;
	}
	return 0;
}

static int writers_save(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	int fd = open(img->ctx_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), bad = fd < 0;
	for (unsigned t = 0; !bad && t < 2; t++) {
		const struct writer *w = &g_w[t];
		unsigned head[3] = {w->t, atomic_load(&w->have_op), w->acked[0].nkeys};
		const struct model *m = &w->acked[atomic_load(&w->cur)];
		bad = write_all(fd, head, sizeof(head)) || write_all(fd, &w->op, sizeof(w->op)) ||
		      write_all(fd, m->k, m->nkeys * sizeof(*m->k));
	}
	return close(fd) || bad;
}

/* test_hmap crashcheck IMAGE CTX FENCE KIND: the exec'd checker. */
static _Noreturn void crash_check_exec(char **argv)
{
	size_t len;
	uint8_t *b = tu_read_file(argv[3], &len), *p = b;
	for (unsigned t = 0; t < 2; t++) {
		struct writer *w = &g_w[t];
		unsigned head[3];
		memcpy(head, p, sizeof(head));
		p += sizeof(head);
		w->t = head[0];
		w->n = 2;
		atomic_store(&w->have_op, head[1]);
		atomic_store(&w->cur, 0);
		memcpy(&w->op, p, sizeof(w->op));
		p += sizeof(w->op);
		model_init(&w->acked[0], head[2]);
		memcpy(w->acked[0].k, p, head[2] * sizeof(struct mkey));
		p += head[2] * sizeof(struct mkey);
	}
	model_init(&g_next, g_w[0].acked[0].nkeys);
	TU_ASSERT((size_t)(p - b) == len, "crashcheck: %s is not a model file", argv[3]);
	struct crashsim_image img = {.fence = strtoull(argv[4], NULL, 10), .path = argv[2],
				     .kind = !strcmp(argv[5], "none") ? CRASHSIM_NONE
					     : !strcmp(argv[5], "all") ? CRASHSIM_ALL : CRASHSIM_RANDOM};
	_exit(crash_check_threads(&img)); /* as crashsim's children: nothing to tear down */
}

static void case_crash_threads(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "hmap-crash-threads");
	unsigned nkeys = 30;
	struct model state;
	model_init(&state, nkeys);
	model_init(&g_next, nkeys);
	struct crashsim_opts co;
	crashsim_opts_init(&co);
	co.exec_path = "/proc/self/exe";
	co.exec_arg = "crashcheck";
	co.exec_prepare = writers_save;
	/* Each image is checked by a fresh process (exec): three random images per fence, or
	 * KR_CRASHSIM_R (make check: one), and one under a sanitizer, whose runtime makes every
	 * exec cost tens of milliseconds. */
	const char *r = getenv("KR_CRASHSIM_R");
	co.random_images = tu_sanitized() ? 1 : r && *r ? (unsigned)strtoul(r, NULL, 0) : 3;
	TU_ASSERT(crashsim_start(&co, NULL, NULL) == 0, "crashsim_start");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 64 << 10, .entry_lines = 4,
				 .flags = KR_OPEN_FORCE_PMEM};
	kr_hmap *h;
	crashsim_enable_checks(false);
	TU_OK(kr_hmap_create(path, &o, &h));
	crashsim_enable_checks(true);
	/* Rounds of two new threads (new lanes), the keys changing hands each round: the
	 * entries a tombstone cancels are then in other lanes, taken over by either thread. The
	 * map is reopened once, after the second round. Seven rounds; three under a sanitizer,
	 * which looks for memory and thread errors along paths the first three all take. */
	unsigned ops = tu_scaled(250, 40), rounds = tu_sanitized() ? 3 : 7;
	uint64_t extra = 0, waits = 0;
	for (unsigned round = 0; round < rounds; round++) {
		writers_start(g_w, 2, h, &state, round, ops, 48 + 3 * 56,
			      tu_seed("hmap-crash-threads", 5) + 10 * round);
		for (unsigned t = 0; t < 2; t++)
			pthread_join(g_w[t].th, NULL);
		writers_state(g_w, 2, 0, &state);
		struct kr_hmap_stats hs;
		TU_OK(kr_hmap_stats(h, &hs));
		if (round == 1) {
			extra += hs.extra_fences, waits += hs.waits;
			TU_OK(kr_hmap_close(h)); /* and recovery's own writes are checked too */
			crashsim_drain();
			TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
		} else if (round == rounds - 1) {
			extra += hs.extra_fences, waits += hs.waits;
		}
	}
	TU_OK(kr_hmap_close(h));
	struct crashsim_stats st;
	crashsim_stop(&st);
	printf("hmap crash, 2 threads: %u rounds of 2 x %u operations, %llu fences (%llu extra), "
	       "%llu waits for another thread, %llu crash images checked, %llu failed\n", rounds, ops,
	       (unsigned long long)st.fences, (unsigned long long)extra, (unsigned long long)waits,
	       (unsigned long long)st.images, (unsigned long long)st.failures);
	TU_ASSERT(st.failures == 0, "%llu crash images recovered wrongly", (unsigned long long)st.failures);
	TU_ASSERT(st.unrecorded_lines == 0 && st.dirty_at_unmap == 0, "writes the simulator missed");
	TU_ASSERT(st.images >= 2 * ops, "too few images");
	for (unsigned t = 0; t < 2; t++)
		free(g_w[t].acked[0].k), free(g_w[t].acked[1].k);
	free(state.k);
}

/* ---- protection ------------------------------------------------------------------------- */
#define PROT_FLAGS (KR_OPEN_FORCE_PMEM | KR_HMAP_PROTECT)

/* A map under KR_HMAP_PROTECT: a page changed behind its back (a scribble through the
 * file), emulated poison, damage while closed are all repaired, byte for byte; two damaged
 * pages of one stripe are refused with a clear error; protection must match the map. */
static void case_protect(void)
{
	char path[128], side[160], why[256];
	int rc;
	tu_pool_path(path, sizeof(path), "hmap-protect");
	snprintf(side, sizeof(side), "%s.krs", path);
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 1 << 20, .entry_lines = 4,
				 .flags = PROT_FLAGS};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	kr_region *r = kr_hmap_region(h);
	TU_ASSERT(r && access(side, F_OK) == 0, "a protected map has a region and a sidecar");
	struct model m;
	model_init(&m, 500);
	struct tu_rng rng;
	tu_rng_seed(&rng, tu_seed("hmap-protect", 17));
	for (unsigned id = 0; id < m.nkeys; id++) {
		char key[128];
		size_t room = 48 + 3 * 56 - key_of(id, key);
		struct op op = {1, {id}, {(int)(8 + tu_rng_below(&rng, room - 7))}, {tu_rng_next(&rng)}};
		TU_OK(op_run(h, &op));
		op_apply_model(&m, &op);
	}
	TU_OK(kr_region_sync(r));

	/* Online: a byte changed through the file (not the mapping) in a page of entries. */
	const uint64_t pg = KR_PAGE_SIZE;
	tu_flip_byte(path, 10 * pg + 100);
	struct kr_region_report rep;
	TU_ASSERT(kr_region_check(r, 0, 0, KR_REGION_CHECK_REPAIR, &rep) == KR_OK &&
		  rep.pages_bad == 1 && rep.pages_repaired == 1, "scribble: %llu bad, %llu repaired",
		  (unsigned long long)rep.pages_bad, (unsigned long long)rep.pages_repaired);
	TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after the scribble: %s", why);
	/* Emulated poison: the page's content is lost; the lookups that touch it repair it. */
	TU_OK(kr_region_inject_poison(r, 12 * pg));
	TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after poison: %s", why);
	struct kr_region_stats rs;
	TU_OK(kr_region_stats(r, &rs));
	TU_ASSERT(rs.repaired_pages == 2, "two repairs (%llu)", (unsigned long long)rs.repaired_pages);
	/* Changes go on, covered by the next pass. */
	for (unsigned id = 0; id < m.nkeys; id += 3) {
		struct op op = {1, {id}, {id % 7 ? 40 : -1}, {tu_rng_next(&rng)}};
		TU_OK(op_run(h, &op));
		op_apply_model(&m, &op);
	}
	TU_OK(kr_hmap_close(h));

	/* Offline: a byte of a closed map, repaired when it is opened. */
	tu_flip_byte(path, 14 * pg + 300);
	TU_OK(kr_hmap_open(path, PROT_FLAGS, &h));
	TU_ASSERT(!model_check(h, &m, why, sizeof(why)), "after damage while closed: %s", why);
	TU_OK(kr_region_check(kr_hmap_region(h), 0, 0, 0, &rep));
	TU_ASSERT(rep.pages_bad == 0, "all sound after open");
	TU_OK(kr_hmap_close(h));

	/* Offline: a parity page of the sidecar (no clean session ever needs it, so only a
	 * verification finds it): repaired when the map is opened. */
	struct kr_side_sb sb;
	tu_pread(side, &sb, sizeof(sb), 0);
	tu_flip_byte(side, sb.parity_off + 2 * pg + 50);
	TU_OK(kr_hmap_open(path, PROT_FLAGS, &h));
	rc = kr_region_check(kr_hmap_region(h), 0, 0, KR_REGION_CHECK_PARITY, &rep);
	TU_ASSERT(rc == KR_OK && rep.parity_bad == 0 && rep.stripes_checked == sb.nstripes,
		  "parity damage while closed repaired at open: rc %d, %llu bad parity pages", rc,
		  (unsigned long long)rep.parity_bad);
	TU_OK(kr_hmap_close(h));

	/* Protection is the map's: both mismatches are refused, and change nothing. */
	TU_ASSERT(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h) == KR_E_MISUSE_ARG &&
		  strstr(kr_errmsg(), "KR_HMAP_PROTECT"), "a protected map opened without it");
	char plain[128];
	tu_pool_path(plain, sizeof(plain), "hmap-plain");
	o.flags = KR_OPEN_FORCE_PMEM;
	TU_OK(kr_hmap_create(plain, &o, &h));
	TU_ASSERT(!kr_hmap_region(h), "no region without protection");
	TU_OK(kr_hmap_close(h));
	TU_ASSERT(kr_hmap_open(plain, PROT_FLAGS, &h) == KR_E_MISUSE_ARG, "unprotected map with it");
	char plain_side[160];
	snprintf(plain_side, sizeof(plain_side), "%s.krs", plain);
	TU_ASSERT(access(plain_side, F_OK) != 0, "no sidecar left behind");

	/* Two damaged pages of one stripe (4 data pages): not repairable, a clear error. */
	tu_flip_byte(path, 16 * pg + 8);
	tu_flip_byte(path, 17 * pg + 8);
	rc = kr_hmap_open(path, PROT_FLAGS, &h);
	TU_ASSERT(rc == KR_E_CORRUPT_REGION, "two pages of a stripe: %d %s", rc, kr_errmsg());
	printf("hmap protect: scribble and poison repaired online, damage repaired at open, two bad "
	       "pages of a stripe refused (%s)\n", kr_errmsg());
	unlink(path); /* damaged beyond repair by design: not left for the end check */
	unlink(side);
	free(m.k);
}

/* Kills a child working on a protected map at random times: every reopen recovers both the
 * redundancy (segments hot at the crash rebuilt, never trusted) and the map (the state
 * after every acknowledged operation, maybe plus the one in flight); after it, every page
 * verifies against its redundancy. */
static void case_protect_kill(void)
{
	char path[128], why[256];
	tu_pool_path(path, sizeof(path), "hmap-protect-kill");
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 1 << 20, .entry_lines = 4,
				 .flags = PROT_FLAGS};
	kr_hmap *h;
	TU_OK(kr_hmap_create(path, &o, &h));
	TU_OK(kr_hmap_close(h));
	/* The child's model lives in shared memory, double-buffered as the writers' are. */
	struct writer *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TU_ASSERT(w != MAP_FAILED, "mmap");
	memset(w, 0, sizeof(*w));
	for (int b = 0; b < 2; b++) {
		w->acked[b].nkeys = 200;
		w->acked[b].k = mmap(NULL, 200 * sizeof(struct mkey), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		TU_ASSERT(w->acked[b].k != MAP_FAILED, "mmap");
		memset(w->acked[b].k, 0, 200 * sizeof(struct mkey));
	}
	struct tu_rng rng;
	tu_rng_seed(&rng, tu_seed("hmap-protect-kill", 19));
	unsigned kills = tu_scaled(12, 4);
	for (unsigned k = 0; k < kills; k++) {
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork");
		if (pid == 0) {
			if (kr_hmap_open(path, PROT_FLAGS, &w->h) != KR_OK)
				_exit(20);
			w->t = 0, w->n = 1, w->ops = 1u << 30, w->maxlen = 48 + 3 * 56;
			w->seed = 1000 + k;
			writer_main(w); /* until killed */
			_exit(21);
		}
		usleep((useconds_t)(2000 + tu_rng_below(&rng, 60000)));
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		TU_ASSERT(WIFSIGNALED(status), "child %u ended by itself (%#x)", k, status);
		TU_OK(kr_hmap_open(path, PROT_FLAGS, &h));
		struct model *acked = &w->acked[atomic_load(&w->cur)], next;
		model_init(&next, 200);
		model_copy(&next, acked);
		if (atomic_load(&w->have_op))
			op_apply_model(&next, &w->op);
		char why2[256] = "no operation in flight";
		TU_ASSERT(!model_check(h, acked, why, sizeof(why)) ||
			  (atomic_load(&w->have_op) && !model_check(h, &next, why2, sizeof(why2))),
			  "kill %u: neither acknowledged (%s) nor with the one in flight (%s)", k, why, why2);
		/* Whatever the map holds now is the starting point of the next child. */
		if (model_check(h, acked, why, sizeof(why)))
			model_copy(acked, &next);
		atomic_store(&w->have_op, 0);
		struct kr_region_report rep;
		TU_OK(kr_region_check(kr_hmap_region(h), 0, 0, KR_REGION_CHECK_PARITY, &rep));
		TU_ASSERT(rep.pages_bad == 0 && rep.parity_bad == 0 && rep.crc_pages_bad == 0,
			  "kill %u: stale redundancy", k);
		TU_OK(kr_hmap_close(h));
		free(next.k);
	}
	printf("hmap protect kill: %u kills, every reopen recovered the map and left every page and "
	       "stripe verifying\n", kills);
}

static int change_inside(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	(void)val, (void)vlen;
	kr_hmap *h = ctx;
	char v[8];
	TU_ASSERT(kr_hmap_get(h, key, klen, v, sizeof(v), NULL) == 1, "get inside foreach");
	TU_ASSERT(kr_hmap_put(h, "b", 1, "2", 1) == KR_E_MISUSE_STATE, "put inside foreach");
	TU_ASSERT(kr_hmap_del(h, key, klen) == KR_E_MISUSE_STATE, "del inside foreach");
	TU_ASSERT(kr_hmap_foreach(h, change_inside, h) == KR_E_MISUSE_STATE, "nested foreach");
	return 7;
}

static void case_bad(void)
{
	char path[128];
	int rc;
	tu_pool_path(path, sizeof(path), "hmap-bad");
	kr_hmap *h;
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 1 << 20, .entry_lines = 2,
				 .flags = KR_OPEN_FORCE_PMEM};
	TU_ASSERT(kr_hmap_create(path, NULL, &h) == KR_E_MISUSE_ARG, "NULL opts");
	struct kr_hmap_opts bad = o;
	bad.entry_lines = 33;
	TU_ASSERT(kr_hmap_create(path, &bad, &h) == KR_E_MISUSE_ARG, "33 lines");
	bad = o;
	bad.size = 4096;
	TU_ASSERT(kr_hmap_create(path, &bad, &h) == KR_E_MISUSE_ARG, "too small");
	TU_OK(kr_hmap_create(path, &o, &h));
	kr_hmap *h2;
	TU_ASSERT(kr_hmap_create(path, &o, &h2) == KR_E_IO_EXISTS && !h2, "exists");
	TU_ASSERT(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h2) == KR_E_IO_BUSY, "open twice");
	char big[200] = {0};
	TU_ASSERT(kr_hmap_put(h, big, 0, "v", 1) == KR_E_MISUSE_ARG, "empty key");
	TU_ASSERT(kr_hmap_put(h, big, 129, "v", 1) == KR_E_MISUSE_ARG, "key over 128");
	TU_ASSERT(kr_hmap_put(h, "k", 1, NULL, 5) == KR_E_MISUSE_ARG, "NULL value with a length");
	rc = kr_hmap_del(h, "nope", 4);
	TU_ASSERT(rc == 0, "delete of an absent key: %d %s", rc, kr_errmsg());
	kr_hmap_tx *tx;
	TU_OK(kr_hmap_tx_begin(h, &tx));
	TU_OK(kr_hmap_tx_put(tx, "a", 1, "1", 1));
	TU_ASSERT(kr_hmap_tx_put(tx, "a", 1, "2", 1) == KR_E_MISUSE_ARG, "a key twice");
	TU_ASSERT(kr_hmap_tx_commit(tx) == KR_E_MISUSE_ARG, "a failed transaction stays failed");
	TU_ASSERT(kr_hmap_count(h) == 0, "nothing written");
	/* From inside foreach: lookups work, changes and a nested walk are refused. */
	TU_OK(kr_hmap_put(h, "a", 1, "1", 1));
	TU_ASSERT(kr_hmap_foreach(h, change_inside, h) == 7, "foreach callback ran");
	TU_ASSERT(kr_hmap_count(h) == 1, "nothing changed from inside foreach");
	TU_OK(kr_hmap_close(h));
	/* One header damaged: the other serves; both: refused; not a map at all: refused. */
	uint8_t b = 0x55;
	tu_pwrite(path, &b, 1, 20);
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h));
	TU_OK(kr_hmap_close(h));
	tu_pwrite(path, &b, 1, 4096 + 20);
	TU_ASSERT(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &h) == KR_E_CORRUPT_HEADER, "both headers");
	unlink(path); /* damaged beyond repair by design: not left for the end check */
	char junk[128];
	tu_pool_path(junk, sizeof(junk), "hmap-junk");
	tu_write_file(junk, path, 100);
	TU_ASSERT(kr_hmap_open(junk, KR_OPEN_FORCE_PMEM, &h) == KR_E_FORMAT_NOT_POOL, "short file");
	printf("hmap bad: ok\n");
}

/* Whether the file at path still holds exactly the bytes in before. */
static bool file_unchanged(const char *path, const void *before, size_t len)
{
	size_t now_len;
	void *now = tu_read_file(path, &now_len);
	bool same = now_len == len && memcmp(now, before, len) == 0;
	free(now);
	return same;
}

/* KR_OPEN_READONLY: a map left by a writer that died is inspected (recovered in a private
 * view) without a byte of it changing; changes are refused; readers and writers exclude
 * each other; a protected map with damage is reported, and neither it nor its sidecar is
 * touched. */
static void case_readonly(void)
{
	char path[128], side[160];
	tu_pool_path(path, sizeof(path), "hmap-ro");
	snprintf(side, sizeof(side), "%s.krs", path);
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 1 << 20, .flags = KR_OPEN_FORCE_PMEM};
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		kr_hmap *w;
		TU_OK(kr_hmap_create(path, &o, &w));
		for (unsigned i = 0; i < 100; i++)
			TU_OK(kr_hmap_put(w, &i, sizeof(i), &i, sizeof(i)));
		_exit(0); /* no close */
	}
	int st;
	waitpid(pid, &st, 0);
	TU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer");
	size_t len;
	void *before = tu_read_file(path, &len);
	kr_hmap *h, *w;
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &h));
	TU_ASSERT(kr_hmap_count(h) == 100, "100 keys seen read-only, got %llu", (unsigned long long)kr_hmap_count(h));
	unsigned v, k = 42;
	size_t vlen;
	TU_ASSERT(kr_hmap_get(h, &k, sizeof(k), &v, sizeof(v), &vlen) == 1, "key 42 found");
	TU_ASSERT(v == 42, "value of key 42");
	TU_ASSERT(kr_hmap_put(h, &k, sizeof(k), &k, sizeof(k)) == KR_E_MISUSE_STATE, "put refused");
	TU_ASSERT(kr_hmap_del(h, &k, sizeof(k)) == KR_E_MISUSE_STATE, "del refused");
	kr_hmap_tx *tx;
	TU_ASSERT(kr_hmap_tx_begin(h, &tx) == KR_E_MISUSE_STATE, "transaction refused");
	TU_ASSERT(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &w) == KR_E_IO_BUSY, "a writer while a reader has it");
	kr_hmap *h2;
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &h2));
	TU_OK(kr_hmap_close(h2));
	TU_OK(kr_hmap_close(h));
	TU_ASSERT(file_unchanged(path, before, len), "a read-only open of a crashed map changed it");
	free(before);
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM, &w));
	TU_ASSERT(kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &h) == KR_E_IO_BUSY,
		  "a reader while a writer has it");
	TU_OK(kr_hmap_close(w));
	unlink(path);

	/* Protected, damaged in a data page: reported, nothing written anywhere. */
	o.flags |= KR_HMAP_PROTECT;
	TU_OK(kr_hmap_create(path, &o, &w));
	for (unsigned i = 0; i < 100; i++)
		TU_OK(kr_hmap_put(w, &i, sizeof(i), &i, sizeof(i)));
	TU_OK(kr_hmap_close(w));
	tu_flip_byte(path, 3 * 4096 + 100);
	before = tu_read_file(path, &len);
	size_t slen;
	void *sbefore = tu_read_file(side, &slen);
	int rc = kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_HMAP_PROTECT | KR_OPEN_READONLY, &h);
	TU_ASSERT(rc == KR_E_CORRUPT_REGION, "damage reported read-only: %d %s", rc, kr_errmsg());
	TU_ASSERT(file_unchanged(path, before, len) && file_unchanged(side, sbefore, slen),
		  "a read-only open changed the map or its sidecar");
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_HMAP_PROTECT, &w)); /* repairs */
	TU_OK(kr_hmap_close(w));
	TU_OK(kr_hmap_open(path, KR_OPEN_FORCE_PMEM | KR_HMAP_PROTECT | KR_OPEN_READONLY, &h));
	TU_ASSERT(kr_hmap_count(h) == 100, "100 keys after the repair");
	TU_OK(kr_hmap_close(h));
	free(before);
	free(sbefore);
	unlink(path);
	unlink(side);
	printf("readonly: a crashed map and a damaged protected map inspected, unchanged\n");
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "crashcheck"))
		crash_check_exec(argv);
	static const struct {
		const char *name;
		void (*run)(void);
	} cases[] = {{"model", case_model}, {"txreuse", case_txreuse}, {"full", case_full},
		     {"lanes", case_lanes}, {"rules", case_rules}, {"crash", case_crash},
		     {"threads", case_threads}, {"crashthreads", case_crash_threads},
		     {"protect", case_protect}, {"protectkill", case_protect_kill}, {"bad", case_bad},
		     {"readonly", case_readonly}};
	const char *what = argc > 1 ? argv[1] : "all";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(what, "all") || !strcmp(what, cases[i].name))
			cases[i].run();
	printf("test_hmap: ok\n");
	TU_END_CHECK_ALL("test_hmap");
	return 0;
}
