/*
 * hmap-bench.c - the single-trip hash map (kr_hmap) driver of the benchmark harness.
 *
 * One invocation creates a map in --dir (tmpfs: /dev/shm, treated as persistent memory)
 * sized for --entries keys with entries of --lines cache lines, and times four phases, one
 * CSV row each: insert every key, update every key (random order), look every key up
 * (random order), delete every key. Keys are 8 bytes; the value fills the entry (48 + 56 *
 * (lines - 1) - 8 bytes), so an entry of L lines writes L lines. --mode one is the
 * single-trip commit (one fence per operation); --mode two the classic two-round-trip
 * commit on the same code and format (KR_HMAP_TWO_FENCES). --threads T splits every
 * phase's keys into T runs done at once by T threads (config "one-2t" and so on);
 * --protect opens the map with KR_HMAP_PROTECT (config "one-prot": CRCs and parity kept by
 * the lazy protected region, 1 s period, its recovery time includes verifying every page). Fences
 * per operation come from keratin's counters (summed over the threads). Recovery (an open
 * that rebuilds the index) is timed too, per GiB.
 *
 * Columns: library,config,workload,param,entries,ops,seconds,ops_per_s,fences_per_op,
 *          recovery_s_per_gib
 * Exit status: 0 measured, 1 failure, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keratin.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char path[512];

static void die(const char *what)
{
	fprintf(stderr, "hmap-bench: %s: %s\n", what, kr_errmsg());
	unlink(path);
	exit(1);
}

static void row(const char *config, const char *wl, unsigned lines, uint64_t n, double secs,
		uint64_t fences, double rec)
{
	printf("stps,%s,%s,%u,%" PRIu64 ",%" PRIu64 ",%.6f,%.1f,%.3f,%.4f\n", config, wl, lines, n, n,
	       secs, (double)n / secs, (double)fences / (double)n, rec);
}

static const char *phase[] = {"insert", "update", "lookup", "delete"};

/* One thread's run of a phase: keys order[from, to) (insert: from..to-1 in order). */
struct worker {
	pthread_t th;
	kr_hmap *h;
	int ph;
	const uint64_t *order;
	uint64_t from, to;
	size_t vlen;
	pthread_barrier_t *start;
	uint64_t fences;
	double t0, t1; /* its own start and end */
	int failed;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t val[2048] = {0};
	pthread_barrier_wait(w->start);
	kr_counters_reset();
	w->t0 = now();
	for (uint64_t i = w->from; i < w->to && !w->failed; i++) {
		uint64_t k = w->ph == 0 ? i : w->order[i];
		if (w->ph == 0 || w->ph == 1) {
			memcpy(val, &i, sizeof(i));
			w->failed = kr_hmap_put(w->h, &k, sizeof(k), val, w->vlen) != KR_OK;
		} else if (w->ph == 2) {
			size_t got;
			w->failed = kr_hmap_get(w->h, &k, sizeof(k), val, w->vlen, &got) != 1;
		} else {
			w->failed = kr_hmap_del(w->h, &k, sizeof(k)) != 1;
		}
	}
	w->t1 = now();
	struct kr_counters c;
	kr_counters_get(&c);
	w->fences = c.fences;
	return NULL;
}

/* Runs phase ph on nthreads threads; returns its wall time (first start to last end, as
 * the threads saw them) and sets *fences. */
static double run_phase(kr_hmap *h, int ph, const uint64_t *order, uint64_t n, size_t vlen,
			unsigned nthreads, uint64_t *fences)
{
	struct worker w[64];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, nthreads + 1);
	for (unsigned t = 0; t < nthreads; t++) {
		w[t] = (struct worker){.h = h, .ph = ph, .order = order, .from = n * t / nthreads,
				       .to = n * (t + 1) / nthreads, .vlen = vlen, .start = &start};
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]))
			die("pthread_create");
	}
	pthread_barrier_wait(&start);
	*fences = 0;
	int failed = 0;
	double t0 = 0, t1 = 0;
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(w[t].th, NULL);
		*fences += w[t].fences;
		failed |= w[t].failed;
		t0 = t == 0 || w[t].t0 < t0 ? w[t].t0 : t0;
		t1 = w[t].t1 > t1 ? w[t].t1 : t1;
	}
	double secs = t1 - t0;
	pthread_barrier_destroy(&start);
	if (failed)
		die(phase[ph]);
	return secs;
}

int main(int argc, char **argv)
{
	unsigned lines = 1, nthreads = 1, protect = 0;
	uint64_t n = 100000;
	const char *mode = "one", *dir = "/dev/shm";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lines") && i + 1 < argc)
			lines = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--entries") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--protect"))
			protect = KR_HMAP_PROTECT;
		else {
			fprintf(stderr, "usage: hmap-bench [--lines 1..32] [--entries N] [--mode one|two] "
					"[--threads 1..64] [--protect] [--dir DIR]\n");
			return 2;
		}
	}
	if (lines < 1 || lines > 32 || n < 1 || nthreads < 1 || nthreads > 64 ||
	    (strcmp(mode, "one") && strcmp(mode, "two"))) {
		fprintf(stderr, "hmap-bench: bad arguments\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/hmap-bench-%ld.map", dir, (long)getpid());
	unlink(path);
	unsigned flags = KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT | (strcmp(mode, "two") ? 0 : KR_HMAP_TWO_FENCES) | protect;
	/* Room for every key, a dead entry per key while updating, and the reserve. */
	uint64_t slots = n + n / 4 + 512;
	struct kr_hmap_opts o = {.struct_size = sizeof(o), .size = 8192 + slots * lines * 64,
				 .entry_lines = lines, .flags = flags};
	kr_hmap *h;
	if (kr_hmap_create(path, &o, &h) != KR_OK)
		die("create");
	size_t vlen = 48 + 56 * (lines - 1) - 8;
	uint64_t *order = malloc(n * sizeof(uint64_t));
	if (!order)
		die("malloc");
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	uint64_t x = 42;
	for (uint64_t i = n - 1; i > 0; i--) { /* a fixed shuffle for the random phases */
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t j = (x >> 33) % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	char config[32];
	snprintf(config, sizeof(config), "%s%s", mode, protect ? "-prot" : "");
	if (nthreads > 1)
		snprintf(config + strlen(config), sizeof(config) - strlen(config), "-%ut", nthreads);
	double rec = 0;
	for (int ph = 0; ph < 4; ph++) {
		uint64_t fences;
		double secs = run_phase(h, ph, order, n, vlen, nthreads, &fences);
		if (ph == 1) { /* recovery of the full map, between update and lookup */
			kr_hmap_close(h);
			double r0 = now();
			if (kr_hmap_open(path, flags, &h) != KR_OK)
				die("open");
			rec = (now() - r0) / ((double)o.size / (1 << 30));
			if (kr_hmap_count(h) != n)
				die("recovered count");
		}
		row(config, phase[ph], lines, n, secs, fences, rec);
	}
	kr_hmap_close(h);
	unlink(path);
	char side[600];
	snprintf(side, sizeof(side), "%s.krs", path);
	unlink(side);
	free(order);
	return 0;
}
