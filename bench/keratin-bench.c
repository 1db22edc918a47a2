/*
 * keratin-bench.c - latency and persistence cost of keratin transactions, as a table.
 *
 * The benchmark is a table of workloads. A workload says how to set up a pool with its
 * objects, how to run one transaction and how to tear down; the driver runs every workload
 * at every object size, several times on a fresh pool each, timing each transaction on its
 * own. A row of the output gives the median of the runs' median latencies, the median of
 * their 99th percentiles, the spread of the run medians (min-max: if it is wide, the machine
 * was noisy and the row means little), and, from kr_counters, what one transaction cost in
 * fences, flushed cache lines, logged bytes and written bytes. Pools live on /dev/shm,
 * opened with KR_OPEN_FORCE_PMEM and KR_OPEN_PREFAULT, so the numbers are keratin's own
 * and not the page-fault handler's. After the table comes the cost of creating a pool, per
 * GiB (the pool is not prefaulted there: creation's own zeroing is what is timed).
 *
 * Another engine (libpmemobj, say) is one more set of workload functions with its own name
 * in the table; engines without keratin's counters print "-" there. Benchmarks report, they
 * do not judge: nothing here fails on a slow number.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keratin.h"
#include "util.h"

#define PROG "keratin-bench"
#define POOL_SIZE (64ull << 20)
#define MAX_RUNS 101

struct bench_opts {
	uint64_t runs;
	uint64_t txs;         /* timed transactions per run */
	uint64_t create_size; /* pool size for the creation timing */
	const char *dir;      /* where pools go */
	unsigned flags;       /* KR_OPEN_FORCE_PMEM on tmpfs */
};

/* One run of one workload at one object size. */
struct run {
	size_t size;      /* object size */
	const char *path; /* pool file to create */
	unsigned flags;
	kr_pool *pool;    /* the workload's state from here on */
	kr_oid oid;
	unsigned char *src; /* size bytes of data to write */
};

struct workload {
	const char *name;
	int has_counters; /* reports kr_counters */
	int (*setup)(struct run *r);
	int (*tx)(struct run *r, uint64_t i);
	void (*teardown)(struct run *r);
};

/* ---------------------------------------------------------------------------------------
 * keratin: single-object overwrite
 * ------------------------------------------------------------------------------------- */

static int kr_overwrite_setup(struct run *r)
{
	/* Prefaulted: no timed transaction may take a first-touch page fault. */
	struct kr_create_opts opts = {.size = POOL_SIZE, .flags = r->flags | KR_OPEN_PREFAULT};
	kr_tx *tx;
	int rc;

	if ((rc = kr_pool_create(r->path, &opts, &r->pool)))
		return util_lib_error(PROG, r->path, rc);
	if ((rc = kr_tx_begin(r->pool, &tx)))
		return util_lib_error(PROG, r->path, rc);
	if ((rc = kr_tx_alloc(tx, r->size, 1, &r->oid))) {
		kr_tx_abort(tx);
		return util_lib_error(PROG, r->path, rc);
	}
	if ((rc = kr_tx_commit(tx)))
		return util_lib_error(PROG, r->path, rc);
	return 0;
}

/* The whole object is rewritten with bytes that differ from one transaction to the next. */
static int kr_overwrite_tx(struct run *r, uint64_t i)
{
	kr_tx *tx;
	int rc = kr_tx_begin(r->pool, &tx);

	if (rc)
		return rc;
	unsigned char *p = kr_tx_open(tx, r->oid);
	if (p) {
		memcpy(p, r->src, r->size);
		p[0] = (unsigned char)i;
	}
	return kr_tx_commit(tx); /* reports kr_tx_open's failure too: errors are sticky */
}

static void kr_teardown(struct run *r)
{
	int rc;
	if (r->pool && (rc = kr_pool_close(r->pool)))
		util_lib_error(PROG, r->path, rc);
	r->pool = NULL;
}

static const struct workload workloads[] = {
	{"keratin overwrite", 1, kr_overwrite_setup, kr_overwrite_tx, kr_teardown},
};

static const size_t sizes[] = {64, 256, 1024, 4096, 16384};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void sort_u64(uint64_t *v, size_t n) { qsort(v, n, sizeof(*v), cmp_u64); }

/* The q-quantile (0..1) of n sorted values, nearest rank. */
static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* Runs one workload at one size o->runs times and prints its row. Returns 0, or 1 if a
 * run failed (the library's message is already printed). */
static int bench_row(const struct bench_opts *o, const struct workload *w, size_t size,
		     uint64_t *lat, unsigned char *src)
{
	uint64_t med[MAX_RUNS], p99[MAX_RUNS];
	struct kr_counters sum = {0};
	char path[4096];

	snprintf(path, sizeof(path), "%s/bench.pool", o->dir);
	for (unsigned r = 0; r < o->runs; r++) {
		struct run run = {.size = size, .path = path, .flags = o->flags, .src = src};
		int rc = 0;

		if (w->setup(&run)) {
			w->teardown(&run);
			unlink(path);
			return 1;
		}
		/* Warm up the code paths, the log lanes and the caches before timing. */
		for (uint64_t i = 0; i < o->txs / 10 + 1 && !rc; i++)
			rc = w->tx(&run, i);
		kr_counters_reset();
		for (uint64_t i = 0; i < o->txs && !rc; i++) {
			uint64_t t0 = util_now_ns();
			rc = w->tx(&run, i);
			lat[i] = util_now_ns() - t0;
		}
		struct kr_counters c;
		kr_counters_get(&c);
		w->teardown(&run);
		unlink(path);
		if (rc)
			return util_lib_error(PROG, w->name, rc);

		sum.fences += c.fences;
		sum.flushed_lines += c.flushed_lines;
		sum.bytes_logged += c.bytes_logged;
		sum.bytes_written += c.bytes_written;
		sort_u64(lat, o->txs);
		med[r] = quantile(lat, o->txs, 0.50);
		p99[r] = quantile(lat, o->txs, 0.99);
	}

	sort_u64(med, o->runs);
	sort_u64(p99, o->runs);
	char spread[48], sz[UTIL_HUMAN_LEN];
	snprintf(spread, sizeof(spread), "%llu-%llu", (unsigned long long)med[0],
		 (unsigned long long)med[o->runs - 1]);
	printf("%-20s %9s %10llu %10llu %15s", w->name, util_human(size, sz),
	       (unsigned long long)quantile(med, o->runs, 0.5),
	       (unsigned long long)quantile(p99, o->runs, 0.5), spread);
	if (w->has_counters) {
		double n = (double)o->runs * (double)o->txs;
		printf(" %8.2f %8.2f %10.1f %10.1f\n", sum.fences / n, sum.flushed_lines / n,
		       sum.bytes_logged / n, sum.bytes_written / n);
	} else {
		printf(" %8s %8s %10s %10s\n", "-", "-", "-", "-");
	}
	fflush(stdout);
	return 0;
}

/* Creating a pool zeroes the whole file; report the median time over the runs per GiB. */
static int bench_create(const struct bench_opts *o)
{
	uint64_t ns[MAX_RUNS];
	char path[4096], h[UTIL_HUMAN_LEN];

	snprintf(path, sizeof(path), "%s/create.pool", o->dir);
	for (unsigned r = 0; r < o->runs; r++) {
		struct kr_create_opts opts = {.size = o->create_size, .flags = o->flags};
		kr_pool *pool;
		uint64_t t0 = util_now_ns();
		int rc = kr_pool_create(path, &opts, &pool);
		if (rc == 0)
			rc = kr_pool_close(pool);
		ns[r] = util_now_ns() - t0;
		unlink(path);
		if (rc)
			return util_lib_error(PROG, path, rc);
	}
	sort_u64(ns, o->runs);
	double secs = (double)quantile(ns, o->runs, 0.5) / 1e9;
	printf("\npool creation: %.3f s per GiB (median of %llu creations of %s, close included)\n",
	       secs * (double)(1ull << 30) / (double)o->create_size, (unsigned long long)o->runs,
	       util_human(o->create_size, h));
	return 0;
}

static int usage(void)
{
	printf("usage: " PROG " [--runs N] [--txs N] [--create-size SIZE] [--dir DIR]\n\n"
	       "Times single-object overwrite transactions of 64 B to 16 KiB and pool creation.\n\n"
	       "  --runs N            runs per row, each on a fresh pool (default 5)\n"
	       "  --txs N             timed transactions per run (default 20000)\n"
	       "  --create-size SIZE  pool size for the creation timing (default 1G)\n"
	       "  --dir DIR           where to put the pools (default: a new directory in /dev/shm)\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"txs", required_argument, NULL, 't'},
		{"create-size", required_argument, NULL, 'c'},
		{"dir", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct bench_opts o = {.runs = 5, .txs = 20000, .create_size = 1ull << 30};
	char scratch[64];
	int c, tmpfs, failed = 0;

	while ((c = util_getopt(PROG, argc, argv, longopts)) != -1) {
		switch (c) {
		case 'r':
			if (util_parse_uint(optarg, 1, MAX_RUNS, &o.runs))
				return util_usage_error(PROG, "invalid --runs '%s' (1 to %d)", optarg, MAX_RUNS);
			break;
		case 't':
			if (util_parse_uint(optarg, 1, 100000000, &o.txs))
				return util_usage_error(PROG, "invalid --txs '%s' (1 to 100000000)", optarg);
			break;
		case 'c':
			if (util_parse_size(optarg, &o.create_size) || o.create_size == 0)
				return util_usage_error(PROG, "invalid --create-size '%s' (e.g. 64M, 1G)", optarg);
			break;
		case 'd': o.dir = optarg; break;
		case 'h': return usage();
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return util_usage_error(PROG, "unexpected argument '%s'", argv[optind]);

	if (o.dir) {
		tmpfs = util_is_tmpfs(o.dir);
	} else {
		if (util_scratch_dir(PROG, scratch, sizeof(scratch), &tmpfs)) {
			fprintf(stderr, PROG ": cannot make a scratch directory: %s\n", strerror(errno));
			return 1;
		}
		o.dir = scratch;
	}
	o.flags = tmpfs ? KR_OPEN_FORCE_PMEM : 0;

	size_t max_size = sizes[ARRAY_LEN(sizes) - 1];
	uint64_t *lat = malloc(o.txs * sizeof(*lat));
	unsigned char *src = malloc(max_size);
	if (!lat || !src) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < max_size; i++)
		src[i] = (unsigned char)(i * 131 + 7);

	printf("%s: %llu runs x %llu transactions per row; pools in %s (%s%s)\n\n", PROG,
	       (unsigned long long)o.runs, (unsigned long long)o.txs, o.dir,
	       tmpfs ? "emulated persistent memory" : "page-cache mode: not tmpfs",
	       ", prefaulted");
	printf("%-20s %9s %10s %10s %15s %8s %8s %10s %10s\n", "workload", "size", "median ns",
	       "p99 ns", "spread ns", "fences", "flushed", "logged B", "written B");
	printf("%-20s %9s %10s %10s %15s %8s %8s %10s %10s\n", "", "", "", "", "(run medians)",
	       "per tx", "lines/tx", "per tx", "per tx");
	for (size_t w = 0; w < ARRAY_LEN(workloads); w++)
		for (size_t s = 0; s < ARRAY_LEN(sizes); s++)
			failed |= bench_row(&o, &workloads[w], sizes[s], lat, src);
	failed |= bench_create(&o);

	free(lat);
	free(src);
	if (o.dir == scratch)
		rmdir(scratch);
	return failed;
}
