/*
 * pmdk-bench.c - the libpmemobj (PMDK 1.12) baseline driver of the benchmark harness.
 *
 * One invocation runs one measurement against libpmemobj and prints it as one CSV row
 * (the columns are in CSV_HEADER below), so that the harness can set the same workloads
 * on keratin and on PMDK side by side. The program creates a fresh pool in --dir (a single
 * file, or for --config replica a pool set with one replica), does the workload's untimed
 * setup, times every operation of the workload on its own with CLOCK_MONOTONIC, checks
 * that the result makes sense, and removes the pool files when it exits, also on an error
 * or a signal. Object workloads (alloc, overwrite, replace, free, mt_overwrite, and tx_alloc and
 * tx_free, pmembench's own pattern) are written here;
 * the map workloads (insert, remove, lookup) drive PMDK's own example structures through
 * their map.h abstraction, compiled by bench/pmdk-build.sh from the copy in
 * /usr/share/doc/libpmemobj-dev/examples. A structure that script could not build is
 * reported as unavailable (exit status 3). PMDK has no counters of fences, flushed lines
 * or written bytes: with bench/pmem-count.so preloaded (an LD_PRELOAD counter of libpmem's
 * write-back calls) those columns are filled over the timed loop, otherwise they stay
 * empty; logged bytes always do.
 *
 * Exit status: 0 measured, 1 the library or the system failed (the message says which),
 * 2 bad arguments, 3 the requested map structure is not in this build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libpmemobj.h>

#include "pmem-count.h"
#ifdef KR_HAVE_REGION
#include <keratin.h>
#else
typedef struct kr_region kr_region;
#endif

/* The example maps, as far as bench/pmdk-build.sh could build them (it defines these). */
#ifdef PMDK_HAVE_MAP
#include "map.h"
#endif
#ifdef PMDK_HAVE_CTREE
#include "map_ctree.h"
#endif
#ifdef PMDK_HAVE_RBTREE
#include "map_rbtree.h"
#endif
#ifdef PMDK_HAVE_BTREE
#include "map_btree.h"
#endif
#ifdef PMDK_HAVE_SKIPLIST
#include "map_skiplist.h"
#endif
#ifdef PMDK_HAVE_RTREE
#include "map_rtree.h"
#endif
#if defined(PMDK_HAVE_HASHMAP) || defined(PMDK_HAVE_HASHMAP_ATOMIC) || defined(PMDK_HAVE_HASHMAP_RP)
#define PMDK_ANY_HASHMAP 1
#include "hashmap.h" /* struct hashmap_args */
#endif
#ifdef PMDK_HAVE_HASHMAP
#include "map_hashmap_tx.h"
#endif
#ifdef PMDK_HAVE_HASHMAP_ATOMIC
#include "map_hashmap_atomic.h"
#endif
#ifdef PMDK_HAVE_HASHMAP_RP
#include "map_hashmap_rp.h"
#endif

#define PROG "pmdk-bench"
#define LAYOUT "pmdk-bench"
#define CSV_HEADER                                                                         \
	"library,config,workload,param,threads,ops,seconds,median_ns,p99_ns,ops_per_s,"     \
	"fences,flushed_lines,logged_bytes,written_bytes"
#define MAX_THREADS 64

/* Type numbers of our own objects; the example maps use 1000 and up. */
#define TYPE_OBJ 1
#define TYPE_SLOTS 2

#define MIB (1ull << 20)

/* W_MAP and W_CREATE are what bench/run.py and keratin-bench also run: map is insert,
 * lookup and remove on one pool (three rows), create times pool creation. */
enum workload {
	W_ALLOC, W_OVERWRITE, W_FREE, W_MT_OVERWRITE,
	W_INSERT, W_REMOVE, W_LOOKUP, W_MAP,
	W_CREATE, W_TX_ALLOC, W_TX_FREE, W_PERSIST,
	W_REPLACE,
};
static const char *const workload_names[] = {"alloc",  "overwrite", "free",   "mt_overwrite",
					     "insert", "remove",    "lookup", "map",
					     "create", "tx_alloc",  "tx_free", "persist",
					     "replace"};
#define N_WORKLOADS (sizeof(workload_names) / sizeof(workload_names[0]))

static int is_map_workload(enum workload w) { return w >= W_INSERT && w <= W_MAP; }
static int is_overwrite(enum workload w)
{
	return w == W_OVERWRITE || w == W_MT_OVERWRITE || w == W_REPLACE;
}

/*
 * The structures. ops is NULL for one pmdk-build.sh left out. pool_bytes_per_key sizes the
 * default pool (plus a fixed 64 MiB) with room to spare. Heap in use after inserting 1M
 * keys, from --verbose: ctree and rbtree 128 bytes a key, btree 69, hashmap 139 (skiplist
 * 128 at 100k keys); rtree allocates a 4136-byte node (256 child pointers) for every key
 * and for every branching prefix: 4552 bytes a key with random 64-bit keys, 4.3 GiB for
 * 1M, so its default pool of 6 KiB a key is 5.8 GiB (twice that on tmpfs for replica).
 * hashmap is hashmap_tx (the name keratin-bench's hash map shares); hashmap_atomic and
 * hashmap_rp are the examples' other two hash maps. hashmap_rp keeps its entries' swap
 * counts in one process-global array (swaps_array), so a process can hold only one of
 * them: process_global refuses --threads above 1 for it.
 */
struct map_kind {
	const char *name;
	const void *ops; /* const struct map_ops * */
	uint64_t pool_bytes_per_key;
	int process_global;
};

#ifdef PMDK_HAVE_CTREE
#define OPS_CTREE MAP_CTREE
#else
#define OPS_CTREE NULL
#endif
#ifdef PMDK_HAVE_RBTREE
#define OPS_RBTREE MAP_RBTREE
#else
#define OPS_RBTREE NULL
#endif
#ifdef PMDK_HAVE_BTREE
#define OPS_BTREE MAP_BTREE
#else
#define OPS_BTREE NULL
#endif
#ifdef PMDK_HAVE_SKIPLIST
#define OPS_SKIPLIST MAP_SKIPLIST
#else
#define OPS_SKIPLIST NULL
#endif
#ifdef PMDK_HAVE_RTREE
#define OPS_RTREE MAP_RTREE
#else
#define OPS_RTREE NULL
#endif
#ifdef PMDK_HAVE_HASHMAP
#define OPS_HASHMAP MAP_HASHMAP_TX
#else
#define OPS_HASHMAP NULL
#endif
#ifdef PMDK_HAVE_HASHMAP_ATOMIC
#define OPS_HASHMAP_ATOMIC MAP_HASHMAP_ATOMIC
#else
#define OPS_HASHMAP_ATOMIC NULL
#endif
#ifdef PMDK_HAVE_HASHMAP_RP
#define OPS_HASHMAP_RP MAP_HASHMAP_RP
#else
#define OPS_HASHMAP_RP NULL
#endif

static const struct map_kind map_kinds[] = {
	{"ctree", OPS_CTREE, 1024, 0},
	{"rbtree", OPS_RBTREE, 1024, 0},
	{"btree", OPS_BTREE, 1024, 0},
	{"skiplist", OPS_SKIPLIST, 1024, 0},
	{"rtree", OPS_RTREE, 6 * 1024, 0},
	{"hashmap", OPS_HASHMAP, 1024, 0},
	{"hashmap_atomic", OPS_HASHMAP_ATOMIC, 1024, 0},
	{"hashmap_rp", OPS_HASHMAP_RP, 1024, 1},
};
#define N_MAP_KINDS (sizeof(map_kinds) / sizeof(map_kinds[0]))

struct opts {
	int replica;
	unsigned region_ms; /* --config regionMS: the pool attached as a protected region */
	const char *dir;
	enum workload wl;
	const char *param;	    /* as given: the CSV's param column */
	uint64_t size;		    /* object size (object workloads), MiB (create) */
	const struct map_kind *map; /* map workloads */
	uint64_t ops;
	unsigned threads;
	uint64_t objects;  /* overwrite: objects per thread; 0: ops / threads */
	uint64_t pool_mib; /* 0: the workload's default */
	int header;
	int verbose;
};

struct result {
	uint64_t ops;
	double seconds;	    /* wall time of the timed loop */
	uint64_t median_ns; /* per operation */
	uint64_t p99_ns;
	struct pmem_count pc; /* over the timed loop, thread 0 (with pmem-count.so preloaded) */
	uint64_t pc_ops;      /* operations thread 0 ran in it; 0: no counts */
};

/* ---------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------- */

/* "pmdk-bench: message" and the tail on stderr, then exit with status. */
static void vfail(int status, const char *tail, const char *fmt, va_list ap)
	__attribute__((noreturn, format(printf, 3, 0)));
static void vfail(int status, const char *tail, const char *fmt, va_list ap)
{
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(tail, stderr);
	exit(status);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(1, "\n", fmt, ap);
}

/* A libpmemobj call failed: its own message says why. */
static void die_pmem(const char *what) __attribute__((noreturn));
static void die_pmem(const char *what)
{
	const char *msg = pmemobj_errormsg();
	die("%s failed: %s", what, msg && *msg ? msg : strerror(errno));
}

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(2, " (see --help)\n", fmt, ap);
}

static void verbose(const struct opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void verbose(const struct opts *o, const char *fmt, ...)
{
	if (!o->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Touched here: a fresh malloc of megabytes (the latency arrays) is mapped lazily, and its
 * first-touch faults would land in the timed loop. keratin-bench does the same. */
static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	memset(p, 0, n);
	return p;
}

/*
 * SplitMix64 (Steele, Lea and Flood; Vigna's reference splitmix64.c). The generator's
 * state starts at the seed and each output first adds 0x9E3779B97F4A7C15 to the state,
 * then mixes it:
 *	z = (state += 0x9E3779B97F4A7C15);
 *	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *	z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *	return z ^ (z >> 31);
 * Map keys: key i (i = 0, 1, ...) is output i of the generator seeded with 42, that is
 * mix(42 + (i + 1) * 0x9E3779B97F4A7C15) (mod 2^64). The states differ for every i below
 * 2^64 and mix is a bijection, so the keys are distinct without any checking. The first
 * three are 0xBDD732262FEB6E95, 0x28EFE333B266F103, 0x47526757130F9F52. Key 0, which
 * ctree takes for an empty slot, is refused at run time (one state in 2^64 gives it; none
 * of the first 1M keys is 0). The keratin driver must use the same sequence.
 */
static uint64_t splitmix64_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#define KEY_SEED 42
/* Object workloads pick object j of thread t's set with output j of seed OBJ_SEED + t. */
#define OBJ_SEED 0x5EED

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts the n latencies and fills in the median and the 99th percentile (nearest rank,
 * as keratin-bench does). */
static void summarize(uint64_t *lat, size_t n, struct result *r)
{
	qsort(lat, n, sizeof(*lat), cmp_u64);
	r->median_ns = lat[(size_t)(0.50 * (double)(n - 1) + 0.5)];
	r->p99_ns = lat[(size_t)(0.99 * (double)(n - 1) + 0.5)];
}

static void print_row(const struct opts *o, const char *workload, const struct result *r)
{
	char cfg[32];
	if (o->region_ms)
		snprintf(cfg, sizeof(cfg), "region%u", o->region_ms);
	printf("pmdk,%s,%s,%s,%u,%" PRIu64 ",%.6f,%" PRIu64 ",%" PRIu64 ",%.1f,",
	       o->replica ? "replica" : o->region_ms ? cfg : "plain", workload, o->param, o->threads, r->ops,
	       r->seconds, r->median_ns, r->p99_ns,
	       r->seconds > 0 ? (double)r->ops / r->seconds : 0.0);
	if (r->pc_ops) { /* logged bytes stay empty: libpmem cannot tell log from data */
		double n = (double)r->pc_ops;
		printf("%.3f,%.2f,,%.1f\n", (double)r->pc.fences / n, (double)r->pc.flushed_lines / n,
		       (double)r->pc.written_bytes / n);
	} else {
		printf(",,,\n");
	}
	if (fflush(stdout))
		die("cannot write the result: %s", strerror(errno));
}

/* --verbose: where the time went beyond the median and p99 (lat sorted). A mean well
 * above the median comes from a few very slow operations: preemption on a busy machine,
 * or the library's own occasional work (heap run recycling, hashmap_tx rebuilding). */
static void report_tail(const struct opts *o, const uint64_t *lat, size_t n)
{
	if (!o->verbose)
		return;
	uint64_t sum = 0, slow = 0, slow_sum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += lat[i];
		if (lat[i] > 100000) {
			slow++;
			slow_sum += lat[i];
		}
	}
	verbose(o,
		"latency: mean %.0f ns, p99.9 %" PRIu64 " ns, max %" PRIu64 " ns; %" PRIu64
		" ops over 100 us took %.3f s in all",
		(double)sum / (double)n, lat[(size_t)(0.999 * (double)(n - 1) + 0.5)], lat[n - 1],
		slow, (double)slow_sum / 1e9);
}

/* The wall clock of a timed loop, and for --verbose the CPU time the process got in it:
 * on a busy machine wall time (hence ops/s) includes time spent preempted, which the
 * involuntary context switches count. */
struct loop_clock {
	uint64_t t0;
	struct rusage ru0;
	struct pmem_count pc0;
};

/* keratin's counters (keratin.h's struct kr_counters begins with these three), which
 * libkeratin-pmemobj exports: the same driver linked against keratin-pmemobj counts what
 * keratin writes back, as pmem-count.so counts libpmem's. */
struct kr_counters_head {
	uint64_t fences, flushed_lines, bytes_written, rest[3];
};
static void (*kr_counters_fn)(struct kr_counters_head *);
static void kr_count_get(struct pmem_count *out)
{
	struct kr_counters_head c;
	kr_counters_fn(&c);
	*out = (struct pmem_count){c.fences, c.flushed_lines, c.bytes_written};
}

/* bench/pmem-count.so's counters, when it is preloaded (run.py's counting runs), or
 * keratin's when this driver runs on keratin-pmemobj. */
static pmem_count_get_fn pmem_counter(void)
{
	static pmem_count_get_fn fn;
	static int looked;
	if (!looked) {
		fn = (pmem_count_get_fn)dlsym(RTLD_DEFAULT, "pmem_count_get");
		if (!fn && (kr_counters_fn = dlsym(RTLD_DEFAULT, "kr_counters_get")))
			fn = kr_count_get;
		looked = 1;
	}
	return fn;
}

/* The counters' change over the loop of clock c, for the ops thread 0 ran in it. */
static void loop_counts(const struct loop_clock *c, uint64_t ops, struct result *r)
{
	pmem_count_get_fn get = pmem_counter();
	if (!get || !ops)
		return;
	struct pmem_count now;
	get(&now);
	r->pc = (struct pmem_count){.fences = now.fences - c->pc0.fences,
				    .flushed_lines = now.flushed_lines - c->pc0.flushed_lines,
				    .written_bytes = now.written_bytes - c->pc0.written_bytes};
	r->pc_ops = ops;
}

static void loop_begin(struct loop_clock *c)
{
	getrusage(RUSAGE_SELF, &c->ru0);
	if (pmem_counter())
		pmem_counter()(&c->pc0);
	c->t0 = now_ns();
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

/* Returns the loop's wall time in seconds. */
static double loop_end(const struct opts *o, const struct loop_clock *c)
{
	double wall = (double)(now_ns() - c->t0) / 1e9;
	if (o->verbose) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		double cpu = tv_s(ru.ru_utime) + tv_s(ru.ru_stime) - tv_s(c->ru0.ru_utime) -
			     tv_s(c->ru0.ru_stime);
		verbose(o, "loop: %.3f s wall, %.3f s cpu (all threads), %ld involuntary "
			   "context switches, %ld page faults", wall, cpu, ru.ru_nivcsw - c->ru0.ru_nivcsw,
			ru.ru_minflt + ru.ru_majflt - c->ru0.ru_minflt - c->ru0.ru_majflt);
	}
	return wall;
}

/* ---------------------------------------------------------------------------------------
 * Pool files: created fresh for each invocation, removed however the process ends
 * ------------------------------------------------------------------------------------- */

static char pool_file[PATH_MAX];    /* the pool, or the pool set's primary part */
static char replica_file[PATH_MAX]; /* replica part (config replica) */
static char set_file[PATH_MAX];	    /* pool set description (config replica) */

static char side_file[PATH_MAX + 8]; /* the protected region's sidecar (config regionMS) */

static void remove_pool_files(void)
{
	/* unlink only: async-signal-safe, and tmpfs frees the memory once unmapped too. */
	if (pool_file[0])
		unlink(pool_file);
	if (side_file[0])
		unlink(side_file);
	if (replica_file[0])
		unlink(replica_file);
	if (set_file[0])
		unlink(set_file);
}

static void on_signal(int sig)
{
	remove_pool_files();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void path_in(char *buf, const char *dir, const char *suffix)
{
	if ((size_t)snprintf(buf, PATH_MAX, "%s/" PROG "-%ld.%s", dir, (long)getpid(), suffix) >=
	    PATH_MAX)
		die("--dir path too long");
}

static PMEMobjpool *create_pool(const struct opts *o, uint64_t mib)
{
	PMEMobjpool *pop;

	path_in(pool_file, o->dir, "pool");
	/* A file of ours with this pid can only be left over from a killed run. */
	unlink(pool_file);
	if (!o->replica) {
		pop = pmemobj_create(pool_file, LAYOUT, mib * MIB, 0600);
	} else {
		path_in(replica_file, o->dir, "replica");
		path_in(set_file, o->dir, "set");
		unlink(replica_file);
		/* PMDK poolset(5): a primary of one part and one replica of the same size. */
		FILE *f = fopen(set_file, "w");
		if (!f)
			die("cannot create %s: %s", set_file, strerror(errno));
		fprintf(f, "PMEMPOOLSET\n%" PRIu64 "M %s\nREPLICA\n%" PRIu64 "M %s\n", mib,
			pool_file, mib, replica_file);
		if (fclose(f))
			die("cannot write %s: %s", set_file, strerror(errno));
		pop = pmemobj_create(set_file, LAYOUT, 0, 0600); /* size 0: the set says */
	}
	if (!pop)
		die_pmem("pmemobj_create");
	if (o->verbose && o->wl != W_CREATE) {
		/* Heap statistics for --verbose only: they add counter updates to every
		 * allocation. */
		enum pobj_stats_enabled e = POBJ_STATS_ENABLED_BOTH;
		if (pmemobj_ctl_set(pop, "stats.enabled", &e))
			die_pmem("pmemobj_ctl_set(stats.enabled)");
	}
	return pop;
}

static void report_heap(const struct opts *o, PMEMobjpool *pop, const char *when)
{
	uint64_t allocated = 0;
	if (!o->verbose)
		return;
	if (pmemobj_ctl_get(pop, "stats.heap.curr_allocated", &allocated))
		die_pmem("pmemobj_ctl_get(stats.heap.curr_allocated)");
	verbose(o, "heap allocated %s: %" PRIu64 " bytes (%.1f MiB)", when, allocated,
		(double)allocated / MIB);
}

/* ---------------------------------------------------------------------------------------
 * Object workloads: alloc, overwrite, free, mt_overwrite
 * ------------------------------------------------------------------------------------- */

/* The pool's root: the array object whose slots hold the benchmark's objects. */
struct obj_root {
	PMEMoid slots; /* ops PMEMoids */
};

/* alloc: one transaction allocates a zeroed object (keratin's kr_tx_alloc zeroes too) and
 * stores its oid in slot i of the array, which must be snapshotted to be persisted with
 * the transaction. Returns nonzero if the transaction aborted. */
static int tx_alloc_one(PMEMobjpool *pop, PMEMoid slots_oid, PMEMoid *slots, uint64_t i,
			size_t size)
{
	volatile int failed = 0; /* set after setjmp: must be volatile */
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(slots_oid, i * sizeof(PMEMoid), sizeof(PMEMoid));
		slots[i] = pmemobj_tx_zalloc(size, TYPE_OBJ);
	} TX_ONABORT {
		failed = 1;
	} TX_END
	return failed;
}

/* tx_alloc, tx_free: pmembench's obj_tx_alloc and obj_tx_free, libpmemobj's own pattern -
 * one transaction allocates (not zeroed, as there) or frees one object, whose oid lives in
 * DRAM only. */
static int tx_bare_one(PMEMobjpool *pop, PMEMoid *oids, uint64_t i, size_t size, int is_free)
{
	volatile int failed = 0;
	TX_BEGIN(pop) {
		if (is_free)
			pmemobj_tx_free(oids[i]);
		else
			oids[i] = pmemobj_tx_alloc(size, TYPE_OBJ);
	} TX_ONABORT {
		failed = 1;
	} TX_END
	return failed;
}

/* free: one transaction frees the object in slot i and clears the slot, so that no
 * dangling oid survives a crash. */
static int tx_free_one(PMEMobjpool *pop, PMEMoid slots_oid, PMEMoid *slots, uint64_t i)
{
	volatile int failed = 0;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(slots_oid, i * sizeof(PMEMoid), sizeof(PMEMoid));
		pmemobj_tx_free(slots[i]);
		slots[i] = OID_NULL;
	} TX_ONABORT {
		failed = 1;
	} TX_END
	return failed;
}

/* overwrite: one transaction snapshots the whole object and rewrites all of it. */
static int tx_overwrite_one(PMEMobjpool *pop, PMEMoid oid, size_t size, unsigned char byte)
{
	volatile int failed = 0;
	unsigned char *p = pmemobj_direct(oid); /* oid itself is not kept across setjmp */
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(p, size);
		memset(p, byte, size);
	} TX_ONABORT {
		failed = 1;
	} TX_END
	return failed;
}

/* replace: the same new bytes out of place, in one transaction: a new object (which
 * libpmemobj flushes at commit), the old one freed, the slot pointed at the new one. */
static int tx_replace_one(PMEMobjpool *pop, PMEMoid *slot, size_t size, unsigned char byte)
{
	volatile int failed = 0;
	TX_BEGIN(pop) {
		PMEMoid n = pmemobj_tx_alloc(size, TYPE_OBJ);
		memset(pmemobj_direct(n), byte, size);
		pmemobj_tx_free(*slot);
		pmemobj_tx_add_range_direct(slot, sizeof(*slot));
		*slot = n;
	} TX_ONABORT {
		failed = 1;
	} TX_END
	return failed;
}

/* One rewrite of object i of objs: in place (overwrite, mt_overwrite) or out of place. */
static int tx_rewrite_one(PMEMobjpool *pop, PMEMoid *objs, uint64_t i, size_t size,
			  unsigned char byte, int replace)
{
	if (replace)
		return tx_replace_one(pop, &objs[i], size, byte);
	return tx_overwrite_one(pop, objs[i], size, byte);
}

/* The untimed setup of overwrite and free: n objects in slots [0, n). pmemobj_zalloc
 * allocates atomically and stores the oid in the slot persistently. */
static void alloc_objects(PMEMobjpool *pop, PMEMoid *slots, uint64_t n, size_t size)
{
	for (uint64_t i = 0; i < n; i++)
		if (pmemobj_zalloc(pop, &slots[i], size, TYPE_OBJ))
			die_pmem("pmemobj_zalloc (setup)");
}

/* One overwrite thread: its own objects, its own random stream, its own latencies. */
struct overwriter {
	pthread_t tid;
	PMEMobjpool *pop;
	PMEMoid *objs; /* this thread's objects' slots */
	uint64_t nobjs, ops;
	int replace;
	size_t size;
	uint64_t seed;
	uint64_t *lat;
	pthread_barrier_t *start;
	int failed;
	char err[256]; /* pmemobj_errormsg() is per thread: copied here */
};

static void *overwrite_loop(void *arg)
{
	struct overwriter *w = arg;
	uint64_t rng = w->seed;

	pthread_barrier_wait(w->start);
	for (uint64_t j = 0; j < w->ops; j++) {
		uint64_t i = splitmix64_next(&rng) % w->nobjs;
		uint64_t t0 = now_ns();
		int failed = tx_rewrite_one(w->pop, w->objs, i, w->size, (unsigned char)(j + 1), w->replace);
		w->lat[j] = now_ns() - t0;
		if (failed) {
			w->failed = 1;
			snprintf(w->err, sizeof(w->err), "%s", pmemobj_errormsg());
			break;
		}
	}
	return NULL;
}

/* Objects per overwrite thread: --objects, or by default ops / threads. */
static uint64_t objects_per_thread(const struct opts *o)
{
	return o->objects ? o->objects : o->ops / o->threads;
}

/* overwrite and mt_overwrite: each thread has objects_per_thread() objects of its own and
 * does its share of the ops overwrites (ops split evenly). Thread 0 is the calling thread;
 * it times the whole run from the common start to the last thread's end. */
static void run_overwrite(const struct opts *o, PMEMobjpool *pop, PMEMoid *slots,
			  struct result *res)
{
	unsigned nt = o->threads;
	struct overwriter w[MAX_THREADS];
	pthread_barrier_t start;

	uint64_t nobjs = objects_per_thread(o);
	alloc_objects(pop, slots, nobjs * nt, o->size);
	if (pthread_barrier_init(&start, NULL, nt))
		die("pthread_barrier_init failed");
	for (unsigned t = 0; t < nt; t++) {
		uint64_t lo = o->ops * t / nt, hi = o->ops * (t + 1) / nt;
		w[t] = (struct overwriter){.pop = pop,
					   .objs = slots + nobjs * t,
					   .nobjs = nobjs,
					   .ops = hi - lo,
					   .size = o->size,
					   .seed = OBJ_SEED + t,
					   .lat = xmalloc((hi - lo) * sizeof(uint64_t)),
					   .start = &start,
					   .replace = o->wl == W_REPLACE};
	}
	for (unsigned t = 1; t < nt; t++)
		if ((errno = pthread_create(&w[t].tid, NULL, overwrite_loop, &w[t])))
			die("pthread_create: %s", strerror(errno));

	/* Thread 0 inlined, so that the timer starts right after the barrier. */
	uint64_t rng = w[0].seed;
	struct loop_clock clock;
	pthread_barrier_wait(&start);
	loop_begin(&clock);
	for (uint64_t j = 0; j < w[0].ops; j++) {
		uint64_t i = splitmix64_next(&rng) % w[0].nobjs;
		uint64_t t0 = now_ns();
		int failed = tx_rewrite_one(pop, w[0].objs, i, o->size, (unsigned char)(j + 1), w[0].replace);
		w[0].lat[j] = now_ns() - t0;
		if (failed)
			die_pmem("overwrite transaction");
	}
	loop_counts(&clock, w[0].ops, res);
	for (unsigned t = 1; t < nt; t++)
		pthread_join(w[t].tid, NULL);
	res->seconds = loop_end(o, &clock);
	for (unsigned t = 1; t < nt; t++)
		if (w[t].failed)
			die("overwrite transaction failed (thread %u): %s", t, w[t].err);

	/* Sanity: every object of thread 0 was either never picked (zero) or holds the byte
	 * of the last overwrite that picked it. Spot-check the last one written. */
	{
		uint64_t r = w[0].seed, last = 0;
		for (uint64_t j = 0; j < w[0].ops; j++)
			last = splitmix64_next(&r) % w[0].nobjs;
		const unsigned char *p = pmemobj_direct(w[0].objs[last]);
		unsigned char want = (unsigned char)w[0].ops;
		if (p[0] != want || p[o->size - 1] != want)
			die("sanity check failed: last overwritten object does not hold its bytes");
		verbose(o, "sanity: last overwritten object holds byte %u throughout its ends",
			want);
	}

	res->ops = o->ops;
	summarize(w[0].lat, w[0].ops, res); /* median and p99 from thread 0, as specified */
	report_tail(o, w[0].lat, w[0].ops);
	pthread_barrier_destroy(&start);
	for (unsigned t = 0; t < nt; t++)
		free(w[t].lat);
}

/* persist: plain stores into an object, then pmemobj_persist of what they wrote: the way
 * libpmemobj programs write outside transactions (hashmap_atomic, constructors). */
static void run_persist(const struct opts *o, PMEMobjpool *pop, PMEMoid *slots, struct result *res)
{
	alloc_objects(pop, slots, o->ops, o->size);
	uint64_t *lat = xmalloc(o->ops * sizeof(uint64_t));
	uint64_t rng = OBJ_SEED;
	struct loop_clock clock;
	loop_begin(&clock);
	for (uint64_t j = 0; j < o->ops; j++) {
		unsigned char *p = pmemobj_direct(slots[splitmix64_next(&rng) % o->ops]);
		uint64_t t0 = now_ns();
		memset(p, (unsigned char)(j + 1), o->size);
		pmemobj_persist(pop, p, o->size);
		lat[j] = now_ns() - t0;
	}
	res->seconds = loop_end(o, &clock);
	loop_counts(&clock, o->ops, res);
	res->ops = o->ops;
	summarize(lat, o->ops, res);
	report_tail(o, lat, o->ops);
	free(lat);
}

static void run_objects(const struct opts *o, PMEMobjpool *pop)
{
	struct result r = {0}, *res = &r;
	uint64_t nslots = is_overwrite(o->wl) ? objects_per_thread(o) * o->threads : o->ops;
	struct obj_root *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct obj_root)));
	if (!root)
		die_pmem("pmemobj_root");
	if (pmemobj_zalloc(pop, &root->slots, nslots * sizeof(PMEMoid), TYPE_SLOTS))
		die_pmem("pmemobj_zalloc (slot array)");
	PMEMoid slots_oid = root->slots;
	PMEMoid *slots = pmemobj_direct(slots_oid);

	if (is_overwrite(o->wl)) {
		run_overwrite(o, pop, slots, res);
		print_row(o, workload_names[o->wl], res);
		return;
	}
	if (o->wl == W_PERSIST) {
		run_persist(o, pop, slots, res);
		print_row(o, workload_names[o->wl], res);
		return;
	}

	int bare = o->wl == W_TX_ALLOC || o->wl == W_TX_FREE;
	int allocs = o->wl == W_ALLOC || o->wl == W_TX_ALLOC;
	if (!allocs)
		alloc_objects(pop, slots, o->ops, o->size);
	PMEMoid *oids = bare ? xmalloc(o->ops * sizeof(PMEMoid)) : NULL;
	if (o->wl == W_TX_FREE)
		memcpy(oids, slots, o->ops * sizeof(PMEMoid));
	report_heap(o, pop, "before the timed loop");

	uint64_t *lat = xmalloc(o->ops * sizeof(uint64_t));
	struct loop_clock clock;
	loop_begin(&clock);
	for (uint64_t i = 0; i < o->ops; i++) {
		uint64_t t0 = now_ns();
		int failed = bare	    ? tx_bare_one(pop, oids, i, o->size, !allocs)
			     : allocs ? tx_alloc_one(pop, slots_oid, slots, i, o->size)
				      : tx_free_one(pop, slots_oid, slots, i);
		lat[i] = now_ns() - t0;
		if (failed)
			die_pmem(allocs ? "alloc transaction" : "free transaction");
	}
	res->seconds = loop_end(o, &clock);
	loop_counts(&clock, o->ops, res);
	report_heap(o, pop, "after the timed loop");

	/* Sanity: alloc filled every slot with a distinct zeroed object of the right size;
	 * free emptied every slot. Checked on a sample to keep the exit quick. */
	uint64_t step = o->ops / 16 + 1;
	for (uint64_t i = 0; i < o->ops; i += step) {
		if (o->wl == W_ALLOC) {
			const unsigned char *p = pmemobj_direct(slots[i]);
			if (!p || pmemobj_alloc_usable_size(slots[i]) < o->size || p[0] ||
			    p[o->size - 1] || pmemobj_type_num(slots[i]) != TYPE_OBJ)
				die("sanity check failed: slot %" PRIu64 " after alloc", i);
		} else if (o->wl == W_TX_ALLOC) {
			if (pmemobj_alloc_usable_size(oids[i]) < o->size ||
			    pmemobj_type_num(oids[i]) != TYPE_OBJ)
				die("sanity check failed: object %" PRIu64 " after tx_alloc", i);
		} else if (o->wl == W_FREE && !OID_IS_NULL(slots[i])) {
			die("sanity check failed: slot %" PRIu64 " not empty after free", i);
		}
	}
	verbose(o, "sanity: %s checked", allocs ? "allocations" : "frees");
	free(oids);

	res->ops = o->ops;
	summarize(lat, o->ops, res);
	report_tail(o, lat, o->ops);
	free(lat);
	print_row(o, workload_names[o->wl], res);
}

/* ---------------------------------------------------------------------------------------
 * Map workloads: insert, remove, lookup on PMDK's example structures
 * ------------------------------------------------------------------------------------- */

#ifdef PMDK_HAVE_MAP

/* One map per thread (--threads), in the pool's root. */
struct map_root {
	TOID(struct map) map[MAX_THREADS];
};

static int count_cb(uint64_t key, PMEMoid value, void *arg)
{
	(void)key;
	(void)value;
	++*(uint64_t *)arg;
	return 0;
}

/* A map operation ran its transactions to the end: the examples do not all report an
 * abort in their return value (rbtree_map_insert returns 0 whatever happened), but
 * libpmemobj remembers the last transaction's error. */
static void check_map_op(int rc, const char *what, uint64_t i)
{
	int err = pmemobj_tx_errno();
	if (rc || err) {
		errno = err;
		die("%s of key #%" PRIu64 " failed (returned %d): %s", what, i, rc,
		    pmemobj_errormsg()[0] ? pmemobj_errormsg() : strerror(err ? err : EINVAL));
	}
}

enum map_phase { P_INSERT, P_LOOKUP, P_REMOVE };
static const char *const phase_names[] = {"insert", "lookup", "remove"};

/* One thread's map, its keys and the value stored with them, through the phases of a run. */
struct map_run {
	const struct opts *o;
	PMEMobjpool *pop;
	struct map_ctx *mapc;
	TOID(struct map) map;
	PMEMoid value;
	uint64_t n;	      /* keys */
	const uint64_t *keys; /* n + 1: key n is never inserted into this map */
	uint64_t *lat;
	enum map_phase phase;
	pthread_t tid;
};

/* Runs the run's phase over its n keys in key order, each operation timed on its own, and
 * checks its outcome: every lookup finds its key, every remove returns the key's value
 * (OID_NULL would mean it found none). A thread of its own, or called inline. */
static void *map_phase(void *arg)
{
	struct map_run *m = arg;
	uint64_t bad = 0;
	for (uint64_t i = 0; i < m->n; i++) {
		uint64_t t0 = now_ns();
		if (m->phase == P_INSERT) {
			int rc = map_insert(m->mapc, m->map, m->keys[i], m->value);
			m->lat[i] = now_ns() - t0;
			check_map_op(rc, "map_insert", i);
		} else if (m->phase == P_LOOKUP) {
			int hit = map_lookup(m->mapc, m->map, m->keys[i]);
			m->lat[i] = now_ns() - t0;
			bad += hit != 1;
		} else {
			PMEMoid v = map_remove(m->mapc, m->map, m->keys[i]);
			m->lat[i] = now_ns() - t0;
			check_map_op(0, "map_remove", i);
			bad += !OID_EQUALS(v, m->value);
		}
	}
	if (bad)
		die("sanity check failed: %" PRIu64 " of %" PRIu64 " %s operations missed their "
		    "key", bad, m->n, phase_names[m->phase]);
	return NULL;
}

/* One phase on every thread's map (m[0] on this thread), timed from the first start to
 * the last end; latencies of thread 0, operations of all. */
static void map_phase_all(struct map_run *m, unsigned nt, enum map_phase p, struct result *res)
{
	const struct opts *o = m[0].o;
	struct loop_clock clock;

	report_heap(o, m[0].pop, "before the loop");
	loop_begin(&clock);
	for (unsigned t = 0; t < nt; t++) {
		m[t].phase = p;
		if (t > 0 && (errno = pthread_create(&m[t].tid, NULL, map_phase, &m[t])))
			die("pthread_create: %s", strerror(errno));
	}
	map_phase(&m[0]);
	for (unsigned t = 1; t < nt; t++)
		pthread_join(m[t].tid, NULL);
	res->seconds = loop_end(o, &clock);
	loop_counts(&clock, o->ops, res);
	report_heap(o, m[0].pop, "after the loop");
	res->ops = o->ops;
	summarize(m[0].lat, m[0].n, res);
	report_tail(o, m[0].lat, m[0].n);
}

/* Sanity, untimed: the map holds the keys. A sample is found with its value, and the
 * next key of the sequence, never inserted into this map, is not. */
static void check_present(struct map_run *m)
{
	uint64_t step = m->n / 16 + 1;
	for (uint64_t i = 0; i < m->n; i += step)
		if (map_lookup(m->mapc, m->map, m->keys[i]) != 1 ||
		    !OID_EQUALS(map_get(m->mapc, m->map, m->keys[i]), m->value))
			die("sanity check failed: key #%" PRIu64 " not found", i);
	if (map_lookup(m->mapc, m->map, m->keys[m->n - 1]) != 1)
		die("sanity check failed: last key not found");
	if (map_lookup(m->mapc, m->map, m->keys[m->n]) != 0)
		die("sanity check failed: a key never inserted was found");
	verbose(m->o, "sanity: sampled keys found with their value, an absent key not found");
}

/* Sanity, untimed: the map is empty, counted with foreach, which all of them implement.
 * Not with map_is_empty: rbtree's never says empty (it tests the root's left child for
 * NULL, but an empty tree has the sentinel there) and ctree's says empty as soon as the
 * root is an inner node. */
static void check_empty(struct map_run *m)
{
	uint64_t left = 0;
	map_foreach(m->mapc, m->map, count_cb, &left);
	if (left)
		die("sanity check failed: %" PRIu64 " entries left after removing all", left);
	if (map_lookup(m->mapc, m->map, m->keys[0]) != 0)
		die("sanity check failed: a removed key was found");
	verbose(m->o, "sanity: map empty after removing all keys");
}

/* insert: timed inserts into an empty map. lookup, remove: the inserts untimed first.
 * map: insert, lookup and remove one after the other on the same map, a row for each
 * (keratin-bench's map workload). With --threads T, T maps in the pool, one per thread,
 * each with its own ops / T keys (the examples take no locks: a map is one thread's). */
static void run_map(const struct opts *o, PMEMobjpool *pop)
{
	unsigned nt = o->threads;
	struct map_run m[MAX_THREADS];
	struct map_root *root = pmemobj_direct(pmemobj_root(pop, sizeof(struct map_root)));
	if (!root)
		die_pmem("pmemobj_root");

	/* The examples draw hashmap's hash coefficients and skiplist's node levels from
	 * rand(): seeded so that every run builds the same structure (with one thread). */
	srand(KEY_SEED);
#ifdef PMDK_ANY_HASHMAP
	struct hashmap_args hargs = {.seed = KEY_SEED};
	void *create_arg = &hargs; /* only the hash maps read it */
#else
	void *create_arg = NULL;
#endif

	uint64_t rng = KEY_SEED;
	uint64_t *keys = xmalloc((o->ops + 1) * sizeof(uint64_t));
	for (uint64_t i = 0; i <= o->ops; i++)
		if ((keys[i] = splitmix64_next(&rng)) == 0)
			die("key #%" PRIu64 " is 0, which ctree cannot store", i);
	uint64_t *lat = xmalloc(o->ops * sizeof(uint64_t));

	for (unsigned t = 0; t < nt; t++) {
		uint64_t lo = o->ops * t / nt, hi = o->ops * (t + 1) / nt;
		/*
		 * The value stored with every key is the pool's root object, as PMDK's own
		 * map_bench does (map_insert_root_op). An oid made up from the key (.off = key)
		 * cannot be used: ctree tells its inner nodes from its leaves by OID_INSTANCEOF,
		 * that is pmemobj_type_num() of the slot, which reads the allocation header in
		 * front of the value, so a value must be a real object (a made-up one crashes
		 * the first insert that descends past a leaf). The other maps only copy the
		 * value in insert, remove and lookup; one value for all keeps them equal.
		 */
		m[t] = (struct map_run){.o = o, .pop = pop, .value = pmemobj_oid(root), .n = hi - lo,
					.keys = keys + lo, .lat = lat + lo};
		m[t].mapc = map_ctx_init(o->map->ops, pop);
		if (!m[t].mapc)
			die("map_ctx_init failed");
		if (map_create(m[t].mapc, &root->map[t], create_arg))
			die_pmem("map_create");
		m[t].map = root->map[t];
	}

	struct result r = {0};
	if (o->wl == W_INSERT || o->wl == W_MAP) {
		map_phase_all(m, nt, P_INSERT, &r);
		print_row(o, "insert", &r);
	} else {
		map_phase_all(m, nt, P_INSERT, &r);
		verbose(o, "setup: %" PRIu64 " keys inserted in %.3f s (untimed)", o->ops, r.seconds);
	}
	for (unsigned t = 0; t < nt; t++)
		check_present(&m[t]);
	if (o->wl == W_LOOKUP || o->wl == W_MAP) {
		map_phase_all(m, nt, P_LOOKUP, &r);
		for (unsigned t = 0; t < nt; t++)
			check_present(&m[t]);
		print_row(o, "lookup", &r);
	}
	if (o->wl == W_REMOVE || o->wl == W_MAP) {
		map_phase_all(m, nt, P_REMOVE, &r);
		for (unsigned t = 0; t < nt; t++)
			check_empty(&m[t]);
		print_row(o, "remove", &r);
	}
	for (unsigned t = 0; t < nt; t++)
		map_ctx_free(m[t].mapc);
	free(lat);
	free(keys);
}

#else /* !PMDK_HAVE_MAP */

static void run_map(const struct opts *o, PMEMobjpool *pop)
{
	(void)o;
	(void)pop; /* unreachable: main refuses structures without ops */
}

#endif

/* ---------------------------------------------------------------------------------------
 * Pool creation
 * ------------------------------------------------------------------------------------- */

/* create: pmemobj_create and pmemobj_close of a --param MiB pool (set), reported like
 * keratin-bench's create: one "operation" is one GiB, its time in the latency columns.
 * No prefault here (main leaves PMEMOBJ_CONF alone): what creation itself does to the
 * file is what is timed. */
static void run_create(const struct opts *o)
{
	uint64_t t0 = now_ns();
	PMEMobjpool *pop = create_pool(o, o->size);
	pmemobj_close(pop);
	uint64_t ns = now_ns() - t0;
	remove_pool_files();

	struct result r = {.ops = 1};
	r.median_ns = r.p99_ns = (uint64_t)((double)ns * 1024.0 / (double)o->size);
	r.seconds = (double)r.median_ns / 1e9;
	verbose(o, "created and closed %" PRIu64 " MiB in %.3f s", o->size, (double)ns / 1e9);
	print_row(o, "create", &r);
}

/* Prefaulting keeps first-touch page faults out of the timed loop, as KR_OPEN_PREFAULT
 * does for keratin (create times creation without it). libpmemobj reads PMEMOBJ_CONF in
 * its load-time constructor, before main: a setenv() here would be silently ignored
 * (measured: a 256 MiB pool created with it set by setenv maps 14 MiB, with it set by
 * the shell 267 MiB). So the setting goes through the ctl API, read back to be sure,
 * unless the caller's environment already chose. */
static void prefault_pools(void)
{
	if (getenv("PMEMOBJ_CONF"))
		return;
	int on = 1, got_create = 0, got_open = 0;
	if (pmemobj_ctl_set(NULL, "prefault.at_create", &on) != 0 ||
	    pmemobj_ctl_set(NULL, "prefault.at_open", &on) != 0 ||
	    pmemobj_ctl_get(NULL, "prefault.at_create", &got_create) != 0 ||
	    pmemobj_ctl_get(NULL, "prefault.at_open", &got_open) != 0 || !got_create || !got_open)
		die("cannot turn on libpmemobj's prefault: %s", pmemobj_errormsg());
}

/* ---------------------------------------------------------------------------------------
 * Command line
 * ------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"Runs one libpmemobj measurement on a fresh pool and prints it as CSV (one row,\n"
		"three for the map workload):\n"
		"  " CSV_HEADER "\n"
		"(fences, flushed_lines and written_bytes are counted only with bench/pmem-count.so\n"
		"preloaded, which counts libpmem's write-back calls; logged_bytes stays empty).\n"
		"\n"
		"  --config plain|replica|regionMS\n"
		"                          one pool file, or a pool set with one replica of the\n"
		"                          same size in a second file (default plain), or one\n"
		"                          pool file attached as a keratin protected region\n"
		"                          (kr_region_attach, lazy redundancy) updated every MS\n"
		"                          milliseconds (e.g. region1000)\n"
		"  --dir DIR               where the pool files go (default /dev/shm)\n"
		"  --workload W            alloc, overwrite, replace, free, mt_overwrite,\n"
		"                          tx_alloc, tx_free (param: object\n"
		"                          SIZE in bytes, e.g. 64 256 1024 4096 16384);\n"
		"                          insert, remove, lookup, map (param: STRUCT, one of\n"
		"                          ctree rbtree btree skiplist rtree hashmap\n"
		"                          (hashmap_tx) hashmap_atomic hashmap_rp);\n"
		"                          create (param: pool size in MiB)\n"
		"  --param P               SIZE, STRUCT or MiB, as the workload wants\n"
		"  --ops N                 timed operations; also the number of objects or keys\n"
		"                          (default 1000000 for maps, 100000 for objects)\n"
		"  --threads T             mt_overwrite: threads, each with its own objects; map\n"
		"                          workloads: threads, each with its own map and ops / T\n"
		"                          keys, all maps in one pool (not hashmap_rp)\n"
		"                          (default 1; the others run on 1 thread)\n"
		"  --objects K             overwrite, replace, mt_overwrite: objects per thread\n"
		"                          (default: ops / threads)\n"
		"  --pool-mib M            size of the pool (and of the replica) in MiB\n"
		"                          (default: enough for the workload)\n"
		"  --header                print the CSV header line first\n"
		"  --verbose               setup, heap statistics and sanity checks on stderr\n"
		"                          (turns heap statistics on: not for reported numbers)\n"
		"  --help                  this text\n"
		"\n"
		"Workloads: alloc - each op one transaction allocating a zeroed SIZE object\n"
		"into a slot of a preallocated array; free - each op one transaction freeing\n"
		"one of N objects allocated beforehand; overwrite - each op one transaction\n"
		"snapshotting and rewriting all SIZE bytes of a random one of N objects;\n"
		"mt_overwrite - the same on T threads with distinct objects, aggregate ops/s,\n"
		"latencies of thread 0; insert - N keys into an empty map; remove, lookup - N\n"
		"keys after inserting them untimed; map - insert, lookup, remove on one map,\n"
		"three rows; create - pool creation, ns per GiB; tx_alloc, tx_free - pmembench's\n"
		"obj_tx_alloc and obj_tx_free (libpmemobj's own pattern): each op one transaction\n"
		"allocating (not zeroed) or freeing one SIZE object, oids in DRAM only;\n"
		"persist - each op stores SIZE bytes into a random one of N objects with plain\n"
		"stores and makes them durable with pmemobj_persist (hashmap_atomic's way). Keys:\n"
		"SplitMix64 seeded with 42 (see the source).\n"
		"Exit status: 0 ok, 1 failure, 2 bad arguments, 3 structure not built.\n");
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		usage_error("%s needs a number, got '%s'", opt, s ? s : "");
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		usage_error("%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, opt, s, min,
			    max);
	return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_CONFIG = 256, O_DIR, O_WORKLOAD, O_PARAM, O_OPS, O_THREADS, O_OBJECTS, O_POOL,
	       O_HEADER, O_VERBOSE, O_HELP };
	static const struct option longopts[] = {
		{"config", required_argument, NULL, O_CONFIG},
		{"dir", required_argument, NULL, O_DIR},
		{"workload", required_argument, NULL, O_WORKLOAD},
		{"param", required_argument, NULL, O_PARAM},
		{"ops", required_argument, NULL, O_OPS},
		{"threads", required_argument, NULL, O_THREADS},
		{"objects", required_argument, NULL, O_OBJECTS},
		{"pool-mib", required_argument, NULL, O_POOL},
		{"header", no_argument, NULL, O_HEADER},
		{"verbose", no_argument, NULL, O_VERBOSE},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	const char *workload = NULL;
	int c, have_ops = 0;

	*o = (struct opts){.dir = "/dev/shm", .threads = 1};
	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_CONFIG:
			if (!strcmp(optarg, "plain"))
				o->replica = 0;
			else if (!strcmp(optarg, "replica"))
				o->replica = 1;
			else if (!strncmp(optarg, "region", 6) && optarg[6])
				o->region_ms = (unsigned)parse_u64("--config region", optarg + 6, 1, 3600000);
			else
				usage_error("--config must be plain, replica or regionMS, not '%s'", optarg);
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_WORKLOAD:
			workload = optarg;
			break;
		case O_PARAM:
			o->param = optarg;
			break;
		case O_OPS:
			o->ops = parse_u64("--ops", optarg, 1, 1ull << 32);
			have_ops = 1;
			break;
		case O_THREADS:
			o->threads = (unsigned)parse_u64("--threads", optarg, 1, MAX_THREADS);
			break;
		case O_OBJECTS:
			o->objects = parse_u64("--objects", optarg, 1, 1ull << 32);
			break;
		case O_POOL:
			o->pool_mib = parse_u64("--pool-mib", optarg, 8, 1ull << 24);
			break;
		case O_HEADER:
			o->header = 1;
			break;
		case O_VERBOSE:
			o->verbose = 1;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			if (optopt && optopt < 256)
				usage_error("unknown option '-%c'", optopt);
			else if (optopt)
				usage_error("option '%s' needs a value", argv[optind - 1]);
			else
				usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!workload)
		usage_error("--workload is required");

	size_t w;
	for (w = 0; w < N_WORKLOADS && strcmp(workload, workload_names[w]); w++)
		;
	if (w == N_WORKLOADS)
		usage_error("unknown workload '%s'", workload);
	o->wl = (enum workload)w;
	if (!o->param)
		usage_error("--param is required (%s)",
			    is_map_workload(o->wl) ? "a structure"
			    : o->wl == W_CREATE	   ? "a size in MiB"
						   : "an object size in bytes");

	if (is_map_workload(o->wl)) {
		for (size_t i = 0; i < N_MAP_KINDS; i++)
			if (!strcmp(o->param, map_kinds[i].name))
				o->map = &map_kinds[i];
		if (!o->map)
			usage_error("unknown structure '%s' (ctree, rbtree, btree, skiplist, "
				    "rtree, hashmap, hashmap_atomic, hashmap_rp)", o->param);
		if (!have_ops)
			o->ops = 1000000;
	} else if (o->wl == W_CREATE) {
		o->size = parse_u64("--param", o->param, 8, 1ull << 24);
		o->ops = 1;
	} else {
		o->size = parse_u64("--param", o->param, 1, 1ull << 30);
		if (!have_ops)
			o->ops = 100000;
	}
	if (o->threads != 1 && o->wl != W_MT_OVERWRITE && !is_map_workload(o->wl))
		usage_error("--threads applies to mt_overwrite and the map workloads only");
	if (o->threads != 1 && o->map && o->map->process_global)
		usage_error("%s keeps its state in process globals: one map, one thread", o->map->name);
	if ((o->wl == W_MT_OVERWRITE || is_map_workload(o->wl)) && o->ops < o->threads)
		usage_error("--ops must be at least --threads");
	if (o->objects && !is_overwrite(o->wl))
		usage_error("--objects applies to overwrite, replace and mt_overwrite only");
	if (is_overwrite(o->wl) && !o->objects && o->ops / o->threads == 0)
		usage_error("--ops gives the threads no objects");

	struct stat st;
	if (stat(o->dir, &st) || !S_ISDIR(st.st_mode))
		usage_error("--dir '%s' is not a directory", o->dir);
	/* A pool set names its parts by absolute path. */
	static char dir[PATH_MAX];
	if (!realpath(o->dir, dir))
		usage_error("--dir '%s': %s", o->dir, strerror(errno));
	o->dir = dir;
}

/* The default pool: 64 MiB of room for the heap's own metadata and the transaction logs,
 * plus the workload's objects or keys with a quarter to spare (allocation classes round
 * sizes up, and each object has a 16-byte header). */
static uint64_t default_pool_mib(const struct opts *o)
{
	uint64_t bytes, objects = is_overwrite(o->wl) ? objects_per_thread(o) * o->threads : o->ops;
	if (is_map_workload(o->wl))
		bytes = o->ops * o->map->pool_bytes_per_key;
	else
		bytes = objects * (sizeof(PMEMoid) + (o->size + 128) * 5 / 4) +
			(o->wl == W_REPLACE ? 2 * (o->size + 128) : 0); /* the new one, before the free */
	return 64 + (bytes + MIB - 1) / MIB;
}

int main(int argc, char **argv)
{
	struct opts o;

	parse_args(argc, argv, &o);
	if (is_map_workload(o.wl) && !o.map->ops) {
		fprintf(stderr,
			PROG ": structure %s unavailable: bench/pmdk-build.sh could not build it "
			     "from the libpmemobj-dev examples\n",
			o.map->name);
		return 3;
	}

	/* tmpfs is no pmem: forcing it makes libpmem flush with cache-line instructions as
	 * on real pmem instead of msync (libpmem reads this at its first mapping, so setenv
	 * here is in time; the caller's own setting wins). */
	setenv("PMEM_IS_PMEM_FORCE", "1", 0);
	if (o.wl != W_CREATE)
		prefault_pools();

	atexit(remove_pool_files);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, on_signal); /* stdout or stderr piped into a reader that quit */
	signal(SIGBUS, on_signal);  /* tmpfs full */
	signal(SIGSEGV, on_signal);

	if (o.header)
		printf("%s\n", CSV_HEADER);
	if (o.wl == W_CREATE) {
		run_create(&o);
		return 0;
	}

	uint64_t mib = o.pool_mib ? o.pool_mib : default_pool_mib(&o);
	uint64_t s0 = now_ns();
	PMEMobjpool *pop = create_pool(&o, mib);
	verbose(&o, "pool %s: %" PRIu64 " MiB%s, created in %.3f s",
		o.replica ? set_file : pool_file, mib,
		o.replica ? " (primary and replica)" : "", (double)(now_ns() - s0) / 1e9);

	kr_region *region = NULL;
	if (o.region_ms) {
#ifdef KR_HAVE_REGION
		/* One call after pmemobj_create: the pool file, mapped by libpmemobj at pop,
		 * gets page checksums and stripe parity kept by keratin's background thread. */
		snprintf(side_file, sizeof(side_file), "%s.krs", pool_file);
		struct kr_region_opts ro = {.struct_size = sizeof(ro), .period_ms = o.region_ms,
					    .flags = KR_REGION_FORCE_PMEM};
		s0 = now_ns();
		if (kr_region_attach(pool_file, pop, mib * MIB, &ro, &region) != KR_OK)
			die("kr_region_attach: %s", kr_errmsg());
		verbose(&o, "attached as a protected region (period %u ms) in %.3f s", o.region_ms,
			(double)(now_ns() - s0) / 1e9);
#else
		die("this pmdk-bench was built without keratin (bench/pmdk-build.sh found no libkeratin.a)");
#endif
	}

	if (is_map_workload(o.wl))
		run_map(&o, pop);
	else
		run_objects(&o, pop);

#ifdef KR_HAVE_REGION
	if (region) {
		struct kr_region_stats st;
		kr_region_stats(region, &st);
		verbose(&o, "region: %" PRIu64 " passes, %" PRIu64 " pages recomputed, longest pass "
			"%.1f ms, background CPU %.2f s, %" PRIu64 " unseals", st.passes,
			st.dirty_pages, (double)st.max_pass_ns / 1e6, (double)st.cpu_ns / 1e9,
			st.unseals);
		if (kr_region_close(region) != KR_OK)
			die("kr_region_close: %s", kr_errmsg());
	}
#endif
	pmemobj_close(pop);
	return 0;
}
