/*
 * keratin-bench.c - one measurement of keratin per invocation, as CSV rows: the keratin
 * side of `make bench` (bench/run.py runs it interleaved with bench/pmdk-bench.c, the
 * libpmemobj side, and turns the rows into docs/BENCHMARKS.md).
 *
 * Both drivers print the same columns and run the same workloads the same way:
 *   alloc / overwrite / free SIZE   single-object transactions, each timed on its own:
 *       alloc     allocate an object of SIZE and store its oid in a slot of an array object
 *       overwrite rewrite all SIZE bytes of one of 1000 objects, chosen at random
 *       replace   the same new bytes out of place: allocate an object, fill it, free the
 *                 old one and store the new oid in the old one's slot of an array object
 *       free      free one of the objects allocated (untimed) beforehand, clear its slot
 *   tx_alloc / tx_free SIZE    pmembench's obj_tx_alloc and obj_tx_free, libpmemobj's own
 *                              pattern: the same without the slot (the oid in DRAM only);
 *                              keratin's allocation still zeroes, pmembench's does not
 *   mt_overwrite SIZE, --threads T  T threads, each overwriting its own 1000 objects
 *   map STRUCT                 insert N keys into an empty map (each insert a transaction),
 *                              then look each up, then remove each: three rows; with
 *                              --threads T, T maps in the pool, one per thread, N / T keys each
 *   create MIB                 pool creation, reported per GiB
 *   repair                     online repair of one poisoned data page (keratin only)
 *   scrub                      a full verification pass, in bytes per second (keratin only)
 * Keys of the maps: the splitmix64 sequence from state 42 (util_rand64), the same in both
 * drivers. Pools live on tmpfs, opened as emulated persistent memory and prefaulted, so
 * that first-touch page faults do not decide the result. Per-operation persistence costs
 * (fences, flushed lines, logged and written bytes) come from kr_counters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keratin.h"
#include "keratin_map.h"
#include "util.h"

#define PROG "keratin-bench"
#define NOBJ 1000        /* objects an overwrite picks from, per thread */
#define KEY_SEED 42      /* the map keys' splitmix64 state (both drivers) */
#define MAX_THREADS 64

static const char *const levels[] = {[KR_PROTECT_FULL] = "full", [KR_PROTECT_NONE] = "none",
				     [KR_PROTECT_ML] = "ml", [KR_PROTECT_MLP] = "mlp"};

struct opts {
	unsigned protection;
	const char *workload, *param;
	uint64_t ops, threads, pool_mib;
	const char *dir;
	char path[4096];
};

/* What one measurement found: latencies of the timed operations, their wall time, and the
 * persistence counters over them. */
struct result {
	const char *workload;
	uint64_t *lat;
	uint64_t n;
	uint64_t nrate; /* operations for ops_per_s, if not n (several threads) */
	double seconds;
	struct kr_counters c;
	int has_counters;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static void print_row(const struct opts *o, const struct result *r)
{
	qsort(r->lat, r->n, sizeof(*r->lat), cmp_u64);
	printf("keratin,%s,%s,%s,%llu,%llu,%.6f,%llu,%llu,%.1f", levels[o->protection], r->workload,
	       o->param, (unsigned long long)o->threads, (unsigned long long)r->n, r->seconds,
	       (unsigned long long)quantile(r->lat, r->n, 0.5),
	       (unsigned long long)quantile(r->lat, r->n, 0.99),
	       r->seconds > 0 ? (double)(r->nrate ? r->nrate : r->n) / r->seconds : 0.0);
	if (r->has_counters) {
		double n = (double)r->n;
		printf(",%.3f,%.2f,%.1f,%.1f\n", r->c.fences / n, r->c.flushed_lines / n,
		       r->c.bytes_logged / n, r->c.bytes_written / n);
	} else {
		printf(",,,,\n");
	}
	fflush(stdout);
}

static int lib_fail(const struct opts *o, const char *what, int rc)
{
	return util_lib_error(PROG, what ? what : o->path, rc);
}

static int create_pool(const struct opts *o, uint64_t mib, kr_pool **pool)
{
	struct kr_create_opts co = {.struct_size = sizeof(co), .size = mib << 20,
				    .flags = KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT,
				    .protection = o->protection};
	unlink(o->path);
	int rc = kr_pool_create(o->path, &co, pool);
	return rc ? lib_fail(o, NULL, rc) : 0;
}

static void close_pool(const struct opts *o, kr_pool *pool)
{
	char bb[sizeof(o->path) + 16];
	int rc = kr_pool_close(pool);
	if (rc)
		lib_fail(o, NULL, rc);
	snprintf(bb, sizeof(bb), "%s.badblocks", o->path); /* left by emulated poison (repair) */
	unlink(o->path);
	unlink(bb);
}

/* n objects of size bytes, allocated a batch per transaction (untimed setup). */
static int alloc_objects(kr_pool *pool, size_t size, kr_oid *oids, uint64_t n)
{
	for (uint64_t i = 0; i < n;) {
		kr_tx *tx;
		int rc = kr_tx_begin(pool, &tx);
		for (uint64_t end = i + 32 < n ? i + 32 : n; rc == KR_OK && i < end; i++)
			rc = kr_tx_alloc(tx, size, 1, &oids[i]);
		if (rc) {
			kr_tx_abort(tx);
			return rc;
		}
		if ((rc = kr_tx_commit(tx)))
			return rc;
	}
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Single-object transactions
 * ------------------------------------------------------------------------------------- */
static int overwrite_one(kr_pool *pool, kr_oid oid, size_t size, uint64_t i)
{
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	unsigned char *p = kr_tx_open(tx, oid);
	if (p)
		memset(p, (int)(i & 0xff), size);
	return kr_tx_commit(tx); /* reports kr_tx_open's failure too: errors are sticky */
}

/* Object `which` of the array's NOBJ rewritten out of place; oids is the DRAM copy. */
static int replace_one(kr_pool *pool, kr_oid array, kr_oid *oids, size_t which, size_t size,
		       uint64_t i)
{
	kr_tx *tx;
	kr_oid n = 0;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	if (kr_tx_alloc(tx, size, 1, &n) == KR_OK) {
		unsigned char *p = kr_tx_open(tx, n);
		if (p)
			memset(p, (int)(i & 0xff), size);
		kr_tx_free(tx, oids[which]);
		kr_oid *slot = kr_tx_add(tx, array, which * sizeof(kr_oid), sizeof(kr_oid));
		if (slot)
			*slot = n;
	}
	if ((rc = kr_tx_commit(tx)) == KR_OK)
		oids[which] = n;
	return rc;
}

/* malloc, with the pages touched here: a fresh malloc of megabytes (a latency array) is
 * mapped lazily, and its first-touch faults (one per 512 operations, 7-35 us each in a KVM
 * guest) would land in the timed loop. pmdk-bench's xmalloc does the same for libpmemobj. */
static void *touched_malloc(size_t n)
{
	void *p = malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

struct worker {
	_Alignas(64) kr_pool *pool; /* each worker on lines of its own */
	size_t size;
	uint64_t ops, seed;
	kr_oid oids[NOBJ];
	kr_oid array; /* replace: the objects' slots (0 for the in-place overwrite) */
	uint64_t *lat;
	struct kr_counters c; /* this thread's (counters are per thread) */
	int rc;
	pthread_barrier_t *start;
};

static int rewrite_one(struct worker *w, uint64_t *rng, uint64_t i)
{
	size_t which = util_rand_below(rng, NOBJ);
	if (w->array)
		return replace_one(w->pool, w->array, w->oids, which, w->size, i);
	return overwrite_one(w->pool, w->oids[which], w->size, i);
}

static void *overwrite_worker(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = w->seed;
	int rc = 0;
	for (uint64_t i = 0; i < w->ops / 10 && !rc; i++) /* warm-up */
		rc = rewrite_one(w, &rng, i);
	pthread_barrier_wait(w->start);
	kr_counters_reset();
	/* rc stays local: a store into *w every operation would share a line with the next
	 * thread's worker, which reads its own fields every operation (false sharing). */
	for (uint64_t i = 0; i < w->ops && !rc; i++) {
		uint64_t t0 = util_now_ns();
		rc = rewrite_one(w, &rng, i);
		w->lat[i] = util_now_ns() - t0;
	}
	kr_counters_get(&w->c);
	w->rc = rc;
	return NULL;
}

/* An array object holding the n oids (untimed setup of replace). */
static int slots_object(kr_pool *pool, const kr_oid *oids, size_t n, kr_oid *array)
{
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	if (kr_tx_alloc(tx, n * sizeof(kr_oid), 2, array) == KR_OK) {
		kr_oid *p = kr_tx_open(tx, *array);
		if (p)
			memcpy(p, oids, n * sizeof(kr_oid));
	}
	return kr_tx_commit(tx);
}

static int bench_overwrite(struct opts *o, size_t size)
{
	unsigned nt = (unsigned)o->threads;
	uint64_t need = (uint64_t)nt * NOBJ * (size + 64) * 2;
	kr_pool *pool;
	struct worker *w = aligned_alloc(_Alignof(struct worker), nt * sizeof(*w));
	pthread_t th[MAX_THREADS];
	pthread_barrier_t start;
	int rc = 0;
	if (!w)
		return lib_fail(o, "workers", KR_E_NOMEM);
	if (create_pool(o, o->pool_mib ? o->pool_mib : 64 + (need >> 20), &pool)) {
		free(w);
		return 1;
	}
	pthread_barrier_init(&start, NULL, nt + 1);
	for (unsigned t = 0; t < nt && !rc; t++) {
		w[t] = (struct worker){.pool = pool, .size = size, .ops = o->ops, .seed = t + 1,
				       .start = &start, .lat = touched_malloc(o->ops * sizeof(uint64_t))};
		rc = w[t].lat ? alloc_objects(pool, size, w[t].oids, NOBJ) : KR_E_NOMEM;
		if (rc == KR_OK && !strcmp(o->workload, "replace"))
			rc = slots_object(pool, w[t].oids, NOBJ, &w[t].array);
	}
	if (rc) {
		close_pool(o, pool);
		return lib_fail(o, "setup", rc);
	}
	for (unsigned t = 0; t < nt; t++)
		pthread_create(&th[t], NULL, overwrite_worker, &w[t]);
	pthread_barrier_wait(&start);
	uint64_t t0 = util_now_ns();
	for (unsigned t = 0; t < nt; t++) {
		pthread_join(th[t], NULL);
		rc = rc ? rc : w[t].rc;
	}
	double secs = (double)(util_now_ns() - t0) / 1e9;
	close_pool(o, pool);
	if (!rc) {
		/* Latencies and counters: thread 0's; throughput: every thread's operations over
		 * the wall time. */
		struct result r = {.workload = o->workload, .lat = w[0].lat, .n = o->ops,
				   .nrate = o->ops * nt, .seconds = secs, .c = w[0].c,
				   .has_counters = 1};
		print_row(o, &r);
	}
	for (unsigned t = 0; t < nt; t++)
		free(w[t].lat);
	free(w);
	return rc ? lib_fail(o, "overwrite", rc) : 0;
}

/* Timed single-object transactions with counters, for alloc and overwrite-free. */
static int timed_loop(struct opts *o, struct result *r, int (*op)(kr_pool *, void *, uint64_t),
		      kr_pool *pool, void *ctx)
{
	int rc = 0;
	kr_counters_reset();
	uint64_t t0 = util_now_ns();
	for (uint64_t i = 0; i < r->n && !rc; i++) {
		uint64_t s = util_now_ns();
		rc = op(pool, ctx, i);
		r->lat[i] = util_now_ns() - s;
	}
	r->seconds = (double)(util_now_ns() - t0) / 1e9;
	kr_counters_get(&r->c);
	r->has_counters = 1;
	return rc;
}

struct slots {
	kr_oid array; /* the array object: one oid per slot */
	kr_oid *oids; /* DRAM copy, for free */
	size_t size;
	int bare; /* tx_alloc, tx_free: no slot */
};

static int alloc_op(kr_pool *pool, void *ctx, uint64_t i)
{
	struct slots *s = ctx;
	kr_tx *tx;
	kr_oid oid;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	if ((rc = kr_tx_alloc(tx, s->size, 1, &oid))) {
		kr_tx_abort(tx);
		return rc;
	}
	if (s->bare) {
		s->oids[i] = oid;
		return kr_tx_commit(tx);
	}
	kr_oid *slot = kr_tx_add(tx, s->array, i * sizeof(kr_oid), sizeof(kr_oid));
	if (slot)
		*slot = oid;
	return kr_tx_commit(tx);
}

static int free_op(kr_pool *pool, void *ctx, uint64_t i)
{
	struct slots *s = ctx;
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	if ((rc = kr_tx_free(tx, s->oids[i]))) {
		kr_tx_abort(tx);
		return rc;
	}
	if (s->bare)
		return kr_tx_commit(tx);
	kr_oid *slot = kr_tx_add(tx, s->array, i * sizeof(kr_oid), sizeof(kr_oid));
	if (slot)
		*slot = 0;
	return kr_tx_commit(tx);
}

static int bench_alloc_free(struct opts *o, size_t size, int is_free, int bare)
{
	uint64_t need = o->ops * (size + 64) * 2 + o->ops * 8;
	kr_pool *pool;
	struct slots s = {.size = size, .oids = touched_malloc(o->ops * sizeof(kr_oid)), .bare = bare};
	struct result r = {.workload = o->workload, .n = o->ops,
			   .lat = touched_malloc(o->ops * sizeof(uint64_t))};
	if (!s.oids || !r.lat)
		return lib_fail(o, "buffers", KR_E_NOMEM);
	if (create_pool(o, o->pool_mib ? o->pool_mib : 64 + (need >> 20), &pool))
		return 1;
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (!rc && (rc = kr_tx_alloc(tx, o->ops * sizeof(kr_oid), 2, &s.array)))
		kr_tx_abort(tx);
	else if (!rc)
		rc = kr_tx_commit(tx);
	if (!rc && is_free)
		rc = alloc_objects(pool, size, s.oids, o->ops);
	if (!rc)
		rc = timed_loop(o, &r, is_free ? free_op : alloc_op, pool, &s);
	close_pool(o, pool);
	if (!rc)
		print_row(o, &r);
	free(s.oids);
	free(r.lat);
	return rc ? lib_fail(o, r.workload, rc) : 0;
}

/* ---------------------------------------------------------------------------------------
 * The map structures
 * ------------------------------------------------------------------------------------- */
/* One thread of the map workload: its own map in the shared pool, its slice of the keys,
 * one phase (0 insert, 1 lookup, 2 remove) per run. */
struct map_worker {
	kr_map *m;
	const uint64_t *keys;
	uint64_t n, *lat;
	int phase, rc;
	struct kr_counters c;
};

static void *map_phase(void *arg)
{
	struct map_worker *w = arg;
	int rc = 0;
	kr_counters_reset();
	for (uint64_t i = 0; i < w->n && rc >= 0; i++) {
		uint64_t s = util_now_ns(), v;
		rc = w->phase == 0 ? kr_map_insert(w->m, NULL, w->keys[i], w->keys[i])
		     : w->phase == 1 ? (kr_map_lookup(w->m, NULL, w->keys[i], &v) == 1 && v == w->keys[i] ? 0 : -1)
				     : kr_map_remove(w->m, NULL, w->keys[i], NULL);
		w->lat[i] = util_now_ns() - s;
	}
	kr_counters_get(&w->c);
	w->rc = rc;
	return NULL;
}

/* map STRUCT with T threads: each thread inserts, looks up and removes its own N / T keys
 * in a map of its own (the structures take no locks: one map is one thread's), all in one
 * pool. A phase's time runs from the first thread's start to the last one's end; latencies
 * and counters are thread 0's, throughput counts every thread's keys. */
static int bench_map(struct opts *o)
{
	int kind = kr_map_kind_parse(o->param);
	if (kind < 0)
		return util_usage_error(PROG, "unknown structure '%s'", o->param);
	unsigned nt = (unsigned)o->threads;
	if (o->ops < nt)
		return util_usage_error(PROG, "map: --ops below --threads");
	uint64_t *keys = malloc(o->ops * sizeof(uint64_t)), state = KEY_SEED;
	uint64_t *lat = touched_malloc(o->ops * sizeof(uint64_t));
	if (!keys || !lat)
		return lib_fail(o, "buffers", KR_E_NOMEM);
	for (uint64_t i = 0; i < o->ops; i++)
		keys[i] = util_rand64(&state);
	/* Room per key: the radix tree ends every key in a 2 KiB node (2.7 KiB per random key
	 * measured); the others need a few hundred bytes. */
	uint64_t per_key = kind == KR_MAP_RTREE ? 3500 : 600;
	kr_pool *pool;
	struct map_worker w[MAX_THREADS] = {{0}};
	pthread_t th[MAX_THREADS];
	if (create_pool(o, o->pool_mib ? o->pool_mib : 64 + ((o->ops * per_key) >> 20), &pool))
		return 1;
	int rc = 0;
	for (unsigned t = 0; t < nt && !rc; t++) {
		uint64_t lo = o->ops * t / nt, hi = o->ops * (t + 1) / nt;
		kr_oid desc;
		w[t] = (struct map_worker){.keys = keys + lo, .n = hi - lo, .lat = lat + lo};
		rc = kr_map_create(pool, NULL, kind, &desc);
		if (!rc)
			rc = kr_map_open(pool, desc, &w[t].m);
	}
	const char *phase[] = {"insert", "lookup", "remove"};
	for (int p = 0; p < 3 && !rc; p++) {
		uint64_t t0 = util_now_ns();
		for (unsigned t = 0; t < nt; t++) {
			w[t].phase = p;
			if (t > 0)
				pthread_create(&th[t], NULL, map_phase, &w[t]);
		}
		map_phase(&w[0]);
		for (unsigned t = 1; t < nt; t++)
			pthread_join(th[t], NULL);
		struct result r = {.workload = phase[p], .lat = w[0].lat, .n = w[0].n, .nrate = o->ops,
				   .seconds = (double)(util_now_ns() - t0) / 1e9, .c = w[0].c,
				   .has_counters = 1};
		for (unsigned t = 0; t < nt && rc >= 0; t++)
			rc = w[t].rc;
		if (rc == -1)
			rc = kr_error_set(KR_E_CORRUPT, "%s: a lookup missed an inserted key", o->param);
		if (rc >= 0) {
			rc = 0;
			print_row(o, &r);
		}
	}
	for (unsigned t = 0; t < nt; t++) {
		if (!rc && kr_map_count(w[t].m) != 0)
			rc = kr_error_set(KR_E_CORRUPT, "%s: keys left after removing them all", o->param);
		if (w[t].m)
			kr_map_close(w[t].m);
	}
	close_pool(o, pool);
	free(keys);
	free(lat);
	return rc ? lib_fail(o, o->param, rc) : 0;
}

/* ---------------------------------------------------------------------------------------
 * Creation, repair, scrub
 * ------------------------------------------------------------------------------------- */
static int bench_create(struct opts *o)
{
	uint64_t mib = strtoull(o->param, NULL, 10);
	if (mib < 8)
		return util_usage_error(PROG, "create: --param MIB, at least 8");
	struct kr_create_opts co = {.struct_size = sizeof(co), .size = mib << 20,
				    .flags = KR_OPEN_FORCE_PMEM,
				    .protection = o->protection};
	kr_pool *pool;
	uint64_t lat[1];
	unlink(o->path);
	uint64_t t0 = util_now_ns();
	int rc = kr_pool_create(o->path, &co, &pool);
	if (!rc)
		rc = kr_pool_close(pool);
	lat[0] = util_now_ns() - t0;
	unlink(o->path);
	if (rc)
		return lib_fail(o, NULL, rc);
	/* One "operation" = one GiB: ns per GiB in the latency columns. */
	lat[0] = (uint64_t)((double)lat[0] * 1024.0 / (double)mib);
	struct result r = {.workload = "create", .lat = lat, .n = 1, .seconds = lat[0] / 1e9};
	print_row(o, &r);
	return 0;
}

/* A pool of --param MiB half filled with 4 KiB objects: what repair and scrub work on. */
static int filled_pool(struct opts *o, kr_pool **pool, kr_oid **oids, uint64_t *n)
{
	uint64_t mib = strtoull(o->param, NULL, 10);
	if (mib < 16)
		return util_usage_error(PROG, "%s: --param MIB, at least 16", o->workload);
	if (create_pool(o, mib, pool))
		return 1;
	*n = (mib << 20) / 2 / 4096;
	*oids = malloc(*n * sizeof(kr_oid));
	int rc = *oids ? alloc_objects(*pool, 4096 - 16, *oids, *n) : KR_E_NOMEM;
	if (rc) {
		close_pool(o, *pool);
		return lib_fail(o, "fill", rc);
	}
	return 0;
}

static int bench_repair(struct opts *o)
{
	if (o->protection == KR_PROTECT_NONE || o->protection == KR_PROTECT_ML)
		return util_usage_error(PROG, "repair needs parity (--config mlp or full)");
	kr_pool *pool;
	kr_oid *oids;
	uint64_t n, rng = 7;
	if (filled_pool(o, &pool, &oids, &n))
		return 1;
	struct result r = {.workload = "repair", .n = o->ops,
			   .lat = touched_malloc(o->ops * sizeof(uint64_t))};
	int rc = r.lat ? 0 : KR_E_NOMEM;
	uint64_t t0 = util_now_ns();
	for (uint64_t i = 0; i < o->ops && !rc; i++) {
		/* Poison a page of a random object, then read it: the fault repairs it online. */
		kr_oid oid = oids[util_rand_below(&rng, n)];
		volatile const unsigned char *p = kr_get(pool, oid);
		if ((rc = kr_inject_poison(pool, oid)))
			break;
		(void)p[0];
		struct kr_pool_stat st;
		if ((rc = kr_pool_stat(pool, &st)))
			break;
		r.lat[i] = st.last_repair_ns;
	}
	r.seconds = (double)(util_now_ns() - t0) / 1e9;
	close_pool(o, pool);
	if (!rc)
		print_row(o, &r);
	free(oids);
	free(r.lat);
	return rc ? lib_fail(o, "repair", rc) : 0;
}

static int bench_scrub(struct opts *o)
{
	kr_pool *pool;
	kr_oid *oids;
	uint64_t n;
	if (filled_pool(o, &pool, &oids, &n))
		return 1;
	struct kr_check_report rep = {0};
	uint64_t lat[1];
	int rc = kr_pool_check(pool, 0, &rep); /* warm: the pages are in the cache */
	uint64_t t0 = util_now_ns();
	if (!rc)
		rc = kr_pool_check(pool, 0, &rep);
	lat[0] = util_now_ns() - t0;
	close_pool(o, pool);
	free(oids);
	if (rc)
		return lib_fail(o, "scrub", rc);
	/* The row's "operations" are the bytes scanned: ops_per_s is bytes per second. */
	double secs = (double)lat[0] / 1e9;
	printf("keratin,%s,scrub,%s,1,%llu,%.6f,%llu,%llu,%.1f,,,,\n", levels[o->protection],
	       o->param, (unsigned long long)rep.bytes_scanned, secs, (unsigned long long)lat[0],
	       (unsigned long long)lat[0], (double)rep.bytes_scanned / secs);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */
static int usage(void)
{
	printf("usage: " PROG " --workload W [--param P] [--config L] [--ops N] [--threads T]\n"
	       "                     [--pool-mib M] [--dir DIR] [--header]\n\n"
	       "Runs one keratin measurement and prints it as CSV (see bench/run.py for the whole\n"
	       "benchmark against libpmemobj). Columns:\n"
	       "  library,config,workload,param,threads,ops,seconds,median_ns,p99_ns,ops_per_s,\n"
	       "  fences,flushed_lines,logged_bytes,written_bytes (the last four per operation)\n\n"
	       "  --workload W  alloc, overwrite, replace, free, tx_alloc, tx_free (pmembench's pattern:\n"
	       "                no slot) (--param SIZE in bytes); mt_overwrite\n"
	       "                (--param SIZE, --threads T); map (--param ctree|rbtree|btree|\n"
	       "                skiplist|rtree|hashmap: insert, lookup and remove rows); create\n"
	       "                (--param MIB); repair, scrub (--param pool MIB)\n"
	       "  --config L    protection level: none, ml, mlp, full (default full)\n"
	       "  --ops N       timed operations (default 20000; map: keys)\n"
	       "  --threads T   threads for mt_overwrite, or for map: one map per thread (default 1)\n"
	       "  --pool-mib M  pool size (default: enough for the workload)\n"
	       "  --dir DIR     where the pool goes (default /dev/shm)\n"
	       "  --header      print the column names first\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"workload", required_argument, NULL, 'w'}, {"param", required_argument, NULL, 'p'},
		{"config", required_argument, NULL, 'c'},   {"ops", required_argument, NULL, 'n'},
		{"threads", required_argument, NULL, 't'},  {"pool-mib", required_argument, NULL, 'm'},
		{"dir", required_argument, NULL, 'd'},      {"header", no_argument, NULL, 'H'},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	struct opts o = {.protection = KR_PROTECT_FULL, .ops = 20000, .threads = 1, .dir = "/dev/shm",
			 .param = ""};
	int c, header = 0;
	while ((c = util_getopt(PROG, argc, argv, longopts)) != -1) {
		switch (c) {
		case 'w': o.workload = optarg; break;
		case 'p': o.param = optarg; break;
		case 'c':
			for (o.protection = 0; o.protection < 4; o.protection++)
				if (strcmp(optarg, levels[o.protection]) == 0)
					break;
			if (o.protection == 4)
				return util_usage_error(PROG, "invalid --config '%s' (none, ml, mlp, full)", optarg);
			break;
		case 'n':
			if (util_parse_uint(optarg, 1, 100000000, &o.ops))
				return util_usage_error(PROG, "invalid --ops '%s' (1 to 100000000)", optarg);
			break;
		case 't':
			if (util_parse_uint(optarg, 1, MAX_THREADS, &o.threads))
				return util_usage_error(PROG, "invalid --threads '%s' (1 to %d)", optarg, MAX_THREADS);
			break;
		case 'm':
			if (util_parse_uint(optarg, 8, 1u << 20, &o.pool_mib))
				return util_usage_error(PROG, "invalid --pool-mib '%s' (8 to 1048576)", optarg);
			break;
		case 'd': o.dir = optarg; break;
		case 'H': header = 1; break;
		case 'h': return usage();
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return util_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
	if (!o.workload)
		return util_usage_error(PROG, "missing --workload");
	snprintf(o.path, sizeof(o.path), "%s/keratin-bench.%d.pool", o.dir, (int)getpid());
	if (header)
		printf("library,config,workload,param,threads,ops,seconds,median_ns,p99_ns,ops_per_s,"
		       "fences,flushed_lines,logged_bytes,written_bytes\n");

	uint64_t size = 0;
	int bare = !strcmp(o.workload, "tx_alloc") || !strcmp(o.workload, "tx_free");
	int sized = !strcmp(o.workload, "alloc") || !strcmp(o.workload, "overwrite") ||
		    !strcmp(o.workload, "replace") ||
		    !strcmp(o.workload, "free") || !strcmp(o.workload, "mt_overwrite") || bare;
	if (sized && (util_parse_uint(o.param, 1, 1u << 24, &size)))
		return util_usage_error(PROG, "%s: --param SIZE in bytes (1 to 16M)", o.workload);
	if (!strcmp(o.workload, "overwrite") || !strcmp(o.workload, "mt_overwrite") ||
	    !strcmp(o.workload, "replace"))
		return bench_overwrite(&o, size);
	if (!strcmp(o.workload, "alloc") || !strcmp(o.workload, "free") || bare)
		return bench_alloc_free(&o, size, !strcmp(o.workload, "free") || !strcmp(o.workload, "tx_free"),
					bare);
	if (!strcmp(o.workload, "map"))
		return bench_map(&o);
	if (!strcmp(o.workload, "create"))
		return bench_create(&o);
	if (!strcmp(o.workload, "repair"))
		return bench_repair(&o);
	if (!strcmp(o.workload, "scrub"))
		return bench_scrub(&o);
	return util_usage_error(PROG, "unknown workload '%s'", o.workload);
}
