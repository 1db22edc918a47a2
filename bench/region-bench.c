/*
 * region-bench.c - the protected-region (lazy redundancy) driver of the benchmark harness.
 *
 * One invocation runs one timed measurement and prints one CSV row (columns in CSV_HEADER).
 * A file of --size MiB in --dir (tmpfs: /dev/shm) is mapped MAP_SHARED; one thread then
 * runs 64-byte accesses at page granularity for --seconds, in one of three patterns:
 *   write   random 64 B stores, pages uniform over the file;
 *   zipf    random 64 B stores, pages Zipf-distributed (theta 0.99, hot pages scattered);
 *   read    random 64 B loads, pages uniform (what protection costs a reader).
 * under one of three protections:
 *   none    no redundancy at all (the baseline);
 *   sync    synchronous protection, the Pangolin-style stand-in of the Vilamb paper: every
 *           store also patches its page's CRC-32C incrementally (kr_crc32c_delta, time in
 *           proportion to the 64 bytes changed) and XORs its delta into the stripe's
 *           parity, then writes back the data line, the CRC and the parity line and fences;
 *   lazy    a protected region (kr_region_open) with the background thread at --period ms.
 * For lazy, the row carries the region's pass statistics: passes, pages recomputed and
 * stripes updated per pass, mean and longest pass, background CPU as a share of one core,
 * minor faults of the process per pass (nearly all of them the write-protect faults of
 * first stores), unseals.
 *
 * --first-store measures instead what a store costs when it is the first one to its page
 * in a period (the write-protect fault every page takes once per period), in rows of
 * kind,ns_per_page: plain page, armed page (userfaultfd), the same page again, a sealed
 * segment's first store (unseal trap), and the mprotect fallback.
 *
 * Exit status: 0 measured, 1 failure, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "csum.h"
#include "keratin.h"

#define PROG "region-bench"
#define P 4096u
#define STRIPE 4u
#define CSV_HEADER                                                                         \
	"pattern,mode,period_ms,size_mib,seconds,ops,ops_per_s,passes,dirty_per_pass,"       \
	"stripes_per_pass,pass_ms_mean,pass_ms_max,bg_cpu_pct,faults_per_pass,unseals"

struct opts {
	const char *pattern, *mode, *dir;
	uint64_t period_ms, size_mib;
	double seconds;
	int header, first_store;
};

static char file_path[512], side_path[600];

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	if (file_path[0]) {
		unlink(file_path);
		unlink(side_path);
	}
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Zipf over n items (theta < 1), Gray et al.'s method as in YCSB; the rank is scattered
 * over the file by a multiplicative hash so the hot pages are not neighbours. */
struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta;
};

static void zipf_init(struct zipf *z, uint64_t n, double theta)
{
	double zeta2 = 1.0 + pow(0.5, theta), zetan = 0;
	for (uint64_t i = 1; i <= n; i++)
		zetan += 1.0 / pow((double)i, theta);
	z->n = n;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan;
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / zetan);
}

static uint64_t zipf_next(const struct zipf *z)
{
	double u = (double)(rnd() >> 11) / 9007199254740992.0, uz = u * z->zetan;
	uint64_t rank;
	if (uz < 1.0)
		rank = 0;
	else if (uz < 1.0 + pow(0.5, z->theta))
		rank = 1;
	else
		rank = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	if (rank >= z->n)
		rank = z->n - 1;
	return (rank * 0x9e3779b97f4a7c15ull) % z->n;
}

static uint8_t *map_file(uint64_t bytes, int populate)
{
	int fd = open(file_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
		die("cannot create %s: %s", file_path, strerror(errno));
	uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0),
			  fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	/* Every page holds data (and is allocated in tmpfs) before anything is timed. */
	for (uint64_t off = 0; off < bytes; off += P)
		memset(m + off, (int)(off / P), 64);
	return m;
}

/* Synchronous protection's state: page CRCs and stripe parity in a second tmpfs file. */
struct sync_prot {
	uint32_t *crcs;
	uint8_t *parity;
};

static void sync_init(struct sync_prot *s, const uint8_t *base, uint64_t npages)
{
	uint64_t nstripes = (npages + STRIPE - 1) / STRIPE;
	size_t len = npages * 4 + nstripes * P;
	int fd = open(side_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		die("cannot create %s: %s", side_path, strerror(errno));
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	s->parity = m;
	s->crcs = (uint32_t *)(m + nstripes * P);
	for (uint64_t p = 0; p < npages; p++) {
		s->crcs[p] = kr_crc32c(base + p * P, P);
		uint64_t *par = (uint64_t *)(s->parity + p / STRIPE * P);
		const uint64_t *d = (const uint64_t *)(base + p * P);
		for (size_t i = 0; i < P / 8; i++)
			par[i] ^= d[i];
	}
}

__attribute__((target("clwb"))) static inline void writeback(const void *p)
{
	__builtin_ia32_clwb((void *)p);
}

/* One synchronously protected 64-byte store at (page, line). */
static inline void sync_store(struct sync_prot *s, uint8_t *base, uint64_t page, uint64_t line,
			      const uint64_t *v)
{
	uint64_t *dst = (uint64_t *)(base + page * P + line * 64);
	uint64_t delta[8];
	for (int i = 0; i < 8; i++) {
		delta[i] = dst[i] ^ v[i];
		dst[i] = v[i];
	}
	s->crcs[page] ^= kr_crc32c_delta(delta, 64, P - line * 64 - 64);
	uint64_t *par = (uint64_t *)(s->parity + page / STRIPE * P + line * 64);
	for (int i = 0; i < 8; i++)
		par[i] ^= delta[i];
	writeback(dst);
	writeback(&s->crcs[page]);
	writeback(par);
	__builtin_ia32_sfence();
}

static void run(const struct opts *o)
{
	uint64_t bytes = o->size_mib << 20, npages = bytes / P;
	int write = strcmp(o->pattern, "read") != 0, zipf = strcmp(o->pattern, "zipf") == 0;
	struct zipf z = {0};
	if (zipf)
		zipf_init(&z, npages, 0.99);
	uint8_t *base;
	kr_region *r = NULL;
	struct sync_prot sp = {0};
	int mode_sync = strcmp(o->mode, "sync") == 0, mode_lazy = strcmp(o->mode, "lazy") == 0;
	if (mode_lazy) {
		munmap(map_file(bytes, 1), bytes);
		unlink(side_path);
		struct kr_region_opts ro = KR_REGION_OPTS_INIT;
		ro.period_ms = (uint32_t)o->period_ms;
		ro.flags = KR_REGION_FORCE_PMEM;
		ro.sidecar = side_path;
		void *b;
		size_t len;
		if (kr_region_open(file_path, &ro, &r, &b, &len) != KR_OK)
			die("kr_region_open: %s", kr_errmsg());
		base = b;
	} else {
		base = map_file(bytes, 1);
		if (mode_sync)
			sync_init(&sp, base, npages);
	}

	uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ops = 0, sum = 0;
	struct kr_region_stats s0 = {0}, s1 = {0};
	if (r)
		kr_region_stats(r, &s0);
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	double t0 = now(), end = t0 + o->seconds, t = t0;
	while (t < end) {
		for (int i = 0; i < 4096; i++) {
			uint64_t x = rnd();
			uint64_t page = zipf ? zipf_next(&z) : (x >> 20) % npages, line = x & 63;
			if (!write) {
				const uint64_t *src = (const uint64_t *)(base + page * P + line * 64);
				sum += src[0] + src[7];
			} else if (mode_sync) {
				v[0] = x;
				sync_store(&sp, base, page, line, v);
			} else {
				v[0] = x;
				memcpy(base + page * P + line * 64, v, 64);
			}
		}
		ops += 4096;
		t = now();
	}
	double secs = t - t0;
	getrusage(RUSAGE_SELF, &ru1);
	if (r)
		kr_region_stats(r, &s1);
	double faults = (double)(ru1.ru_minflt - ru0.ru_minflt);
	uint64_t passes = s1.passes - s0.passes;
	double per = passes ? (double)passes : 1.0;
	printf("%s,%s,%" PRIu64 ",%" PRIu64 ",%.3f,%" PRIu64 ",%.0f,%" PRIu64 ",%.0f,%.0f,%.3f,%.3f,"
	       "%.2f,%.0f,%" PRIu64 "\n",
	       o->pattern, o->mode, mode_lazy ? o->period_ms : 0, o->size_mib, secs, ops,
	       (double)ops / secs, passes, (double)(s1.dirty_pages - s0.dirty_pages) / per,
	       (double)(s1.stripes - s0.stripes) / per, (double)(s1.pass_ns - s0.pass_ns) / per / 1e6,
	       (double)s1.max_pass_ns / 1e6, 100.0 * (double)(s1.cpu_ns - s0.cpu_ns) / (secs * 1e9),
	       faults / per, s1.unseals - s0.unseals);
	if (sum == 42)
		fputc(' ', stderr); /* keeps the loads */
	if (r && kr_region_close(r) != KR_OK)
		die("kr_region_close: %s", kr_errmsg());
	if (!r)
		munmap(base, bytes);
}

/* ---- the cost of a first store per page ------------------------------------------------ */
static double store_pages(uint8_t *base, uint64_t first, uint64_t n, uint64_t stride)
{
	double t0 = now();
	for (uint64_t i = 0; i < n; i++)
		base[(first + i * stride) * P + 8] += 1;
	return (now() - t0) * 1e9 / (double)n;
}

static void first_store(const struct opts *o)
{
	uint64_t bytes = o->size_mib << 20, npages = bytes / P, n = npages / 2;
	printf("kind,ns_per_page\n");
	uint8_t *base = map_file(bytes, 1);
	printf("plain page (no tracking),%.0f\n", store_pages(base, 0, n, 2));
	munmap(base, bytes);

	for (int mp = 0; mp < 2; mp++) {
		struct kr_region_opts ro = KR_REGION_OPTS_INIT;
		ro.flags = KR_REGION_FORCE_PMEM | KR_REGION_MANUAL | (mp ? KR_REGION_MPROTECT : 0);
		ro.sidecar = side_path;
		unlink(side_path);
		kr_region *r;
		void *b;
		size_t len;
		if (kr_region_open(file_path, &ro, &r, &b, &len) != KR_OK)
			die("kr_region_open: %s", kr_errmsg());
		base = b;
		struct kr_region_stats st;
		kr_region_stats(r, &st);
		/* Every segment sealed: the first store to each traps once (plus its page's
		 * write-protect fault). One page per segment. */
		double sealed = store_pages(base, 0, st.nsegments, st.segment_pages);
		store_pages(base, 0, npages, 1); /* every segment hot, every page written */
		kr_region_sync(r);                /* every page armed again, segments stay hot */
		double armed = store_pages(base, 0, n, 2);
		double again = store_pages(base, 0, n, 2);
		const char *how = mp ? "mprotect fallback" : "userfaultfd";
		printf("first store to an armed page (%s),%.0f\n", how, armed);
		printf("second store to the same page (%s),%.0f\n", how, again);
		printf("first store into a sealed segment (%s; once per segment),%.0f\n", how, sealed);
		if (kr_region_close(r) != KR_OK)
			die("kr_region_close: %s", kr_errmsg());
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--pattern write|zipf|read] [--mode none|sync|lazy] [--period MS]\n"
		   "       [--seconds S] [--size MIB] [--dir DIR] [--header] | --first-store [--size MIB]\n"
		   "One measurement, one CSV row:\n  " CSV_HEADER "\n"
		   "(see the top of bench/region-bench.c for what each mode and column means)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"pattern", required_argument, NULL, 'p'}, {"mode", required_argument, NULL, 'm'},
		{"period", required_argument, NULL, 'P'},  {"seconds", required_argument, NULL, 's'},
		{"size", required_argument, NULL, 'S'},    {"dir", required_argument, NULL, 'd'},
		{"header", no_argument, NULL, 'H'},        {"first-store", no_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
	};
	struct opts o = {.pattern = "write", .mode = "none", .dir = "/dev/shm", .period_ms = 1000,
			 .size_mib = 1024, .seconds = 3};
	int c;
	char *end;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': o.pattern = optarg; break;
		case 'm': o.mode = optarg; break;
		case 'P': o.period_ms = strtoull(optarg, &end, 10); if (*end || !o.period_ms) goto bad; break;
		case 's': o.seconds = strtod(optarg, &end); if (*end || o.seconds <= 0) goto bad; break;
		case 'S': o.size_mib = strtoull(optarg, &end, 10); if (*end || o.size_mib < 4) goto bad; break;
		case 'd': o.dir = optarg; break;
		case 'H': o.header = 1; break;
		case 'F': o.first_store = 1; break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind < argc || (strcmp(o.pattern, "write") && strcmp(o.pattern, "zipf") &&
			      strcmp(o.pattern, "read")) ||
	    (strcmp(o.mode, "none") && strcmp(o.mode, "sync") && strcmp(o.mode, "lazy")))
		goto bad;
	snprintf(file_path, sizeof(file_path), "%s/" PROG "-%ld.data", o.dir, (long)getpid());
	snprintf(side_path, sizeof(side_path), "%s.krs", file_path);
	if (o.header && !o.first_store)
		printf("%s\n", CSV_HEADER);
	if (o.first_store)
		first_store(&o);
	else
		run(&o);
	unlink(file_path);
	unlink(side_path);
	return 0;
bad:
	fprintf(stderr, PROG ": bad arguments (try --help)\n");
	return 2;
}
