/*
 * test_track.c - the dirty-page tracker (src/region/track.c) against a model.
 *
 * A 64 MiB file in /dev/shm is mapped MAP_SHARED and tracked. Each round stores into a
 * random set of pages (some several times, some rounds none), sometimes reads clean pages
 * and drops page-table entries with MADV_DONTNEED, then harvests (in pieces of random
 * size) and requires the harvested set to EQUAL the set written since the previous
 * harvest. The kernel keeps a PTE marker for a clean armed page whose entry is dropped, so
 * MADV_DONTNEED on a clean page must not make it "written"; a written page whose entry is
 * dropped must still be reported. Then: a second thread storing at the same time as the
 * main thread, a writer racing with harvests (every store reported at least once, nothing
 * unwritten ever reported), kernel-mode stores (read(2) into the range), the data against
 * a byte model, detach and reattach, and the misuse errors.
 *
 * `test_track bench` (not run by ctest) times harvests of a 1 GiB mapping and the cost of
 * a first store to an armed page.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#include "track.h"

#define PAGE 4096

struct fixture {
	char path[128];
	int fd;
	uint8_t *map;
	size_t len, npages;
};

static void fixture_open(struct fixture *f, const char *tag, size_t len)
{
	tu_pool_path(f->path, sizeof(f->path), tag);
	f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	TU_ASSERT(f->fd >= 0, "open %s", f->path);
	TU_ASSERT(ftruncate(f->fd, (off_t)len) == 0, "ftruncate");
	f->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	TU_ASSERT(f->map != MAP_FAILED, "mmap");
	f->len = len;
	f->npages = len / PAGE;
}

static void fixture_close(struct fixture *f)
{
	munmap(f->map, f->len);
	close(f->fd);
	unlink(f->path);
}

/* Harvests a whole pass in pieces of at most `piece` pages; marks every reported page in
 * got[] (which must start zeroed) and checks order and uniqueness. Returns the count. */
static size_t harvest_all(struct kr_track *t, size_t piece, uint8_t *got, size_t npages)
{
	uint64_t *buf = malloc(piece * sizeof(*buf));
	TU_ASSERT(buf, "malloc");
	size_t total = 0;
	int64_t last = -1;
	for (;;) {
		size_t n;
		int rc = kr_track_harvest(t, buf, piece, &n);
		TU_ASSERT(rc == KR_OK || rc == 1, "harvest returned %d: %s", rc, kr_errmsg());
		TU_ASSERT(n <= piece, "n %zu > max %zu", n, piece);
		TU_ASSERT(rc == KR_OK || n == piece, "stopped early with %zu of %zu", n, piece);
		for (size_t i = 0; i < n; i++) {
			TU_ASSERT(buf[i] < npages, "page %llu out of range",
				  (unsigned long long)buf[i]);
			TU_ASSERT((int64_t)buf[i] > last, "page %llu not increasing (after %lld)",
				  (unsigned long long)buf[i], (long long)last);
			last = (int64_t)buf[i];
			got[buf[i]] = 1;
		}
		total += n;
		if (rc == KR_OK)
			break;
	}
	free(buf);
	return total;
}

/* One store of a random byte at a random offset of page pg, in the map and the model. */
static void store(struct fixture *f, uint8_t *model, struct tu_rng *r, size_t pg)
{
	size_t off = pg * PAGE + tu_rng_below(r, PAGE);
	uint8_t v = (uint8_t)tu_rng_next(r);
	f->map[off] = v;
	model[off] = v;
}

static void check_data(const struct fixture *f, const uint8_t *model, const char *when)
{
	if (memcmp(f->map, model, f->len) == 0)
		return;
	for (size_t i = 0; i < f->len; i++)
		TU_ASSERT(f->map[i] == model[i], "%s: byte %zu is %u, model %u", when, i,
			  f->map[i], model[i]);
}

static void expect_equal(const uint8_t *want, const uint8_t *got, size_t npages, unsigned round)
{
	for (size_t p = 0; p < npages; p++) {
		TU_ASSERT(!want[p] || got[p], "round %u: written page %zu not reported", round, p);
		TU_ASSERT(want[p] || !got[p], "round %u: unwritten page %zu reported", round, p);
	}
}

/* ---- the random rounds ----------------------------------------------------------------- */

static void test_rounds(struct fixture *f, struct kr_track *t, uint8_t *model, struct tu_rng *r)
{
	uint8_t *want = calloc(f->npages, 1), *got = calloc(f->npages, 1);
	TU_ASSERT(want && got, "calloc");
	unsigned rounds = tu_scaled(300, 30);
	volatile uint8_t sink = 0;

	for (unsigned round = 0; round < rounds; round++) {
		memset(want, 0, f->npages);
		memset(got, 0, f->npages);
		size_t nw = tu_rng_chance(r, 1, 8) ? 0 : tu_rng_logu(r, 1, 4096);
		for (size_t i = 0; i < nw; i++) {
			/* Sometimes a run of neighbours, so that regions of several pages occur. */
			size_t pg = tu_rng_below(r, f->npages);
			size_t run = tu_rng_chance(r, 1, 4) ? tu_rng_range(r, 2, 40) : 1;
			for (size_t k = 0; k < run && pg + k < f->npages; k++) {
				unsigned stores = tu_rng_chance(r, 1, 3) ? (unsigned)tu_rng_range(r, 2, 5) : 1;
				for (unsigned s = 0; s < stores; s++)
					store(f, model, r, pg + k);
				want[pg + k] = 1;
			}
		}
		/* Reads never count as writes. */
		for (unsigned i = 0; i < 64; i++)
			sink += f->map[tu_rng_below(r, f->len)];
		/* Dropped PTEs: a written page stays written (no PTE -> reported), a clean armed
		 * page keeps its uffd-wp marker and stays clean. The data is in the page cache. */
		if (tu_rng_chance(r, 1, 4)) {
			size_t pg = tu_rng_below(r, f->npages);
			size_t cnt = tu_rng_range(r, 1, 256);
			if (pg + cnt > f->npages)
				cnt = f->npages - pg;
			TU_ASSERT(madvise(f->map + pg * PAGE, cnt * PAGE, MADV_DONTNEED) == 0, "madvise");
			for (unsigned i = 0; i < 8; i++) /* and fault some back in by reading */
				sink += f->map[(pg + tu_rng_below(r, cnt)) * PAGE];
		}
		size_t piece = tu_rng_chance(r, 1, 3) ? tu_rng_range(r, 1, 64) : f->npages;
		harvest_all(t, piece, got, f->npages);
		expect_equal(want, got, f->npages, round);
		if (round % 32 == 0)
			check_data(f, model, "rounds");
	}
	(void)sink;
	/* Nothing written since the last harvest: an empty pass. */
	memset(got, 0, f->npages);
	TU_ASSERT(harvest_all(t, 17, got, f->npages) == 0, "idle harvest reported pages");
	check_data(f, model, "after rounds");
	printf("rounds: %u rounds, sets equal\n", rounds);
	free(want);
	free(got);
}

/* ---- two threads ------------------------------------------------------------------------ */

struct writer {
	struct fixture *f;
	uint8_t *model;
	uint8_t *written; /* pages this thread stored into (odd pages only) */
	uint64_t seed;
	size_t count;
	atomic_bool *stop; /* NULL: write count pages and return */
	size_t done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	size_t half = w->f->npages / 2;
	for (size_t i = 0;; i++) {
		if (w->stop ? atomic_load(w->stop) : i >= w->count)
			break;
		size_t pg = 2 * tu_rng_below(&r, half) + 1; /* odd: the main thread owns even */
		store(w->f, w->model, &r, pg);
		w->written[pg] = 1;
		w->done++;
	}
	return NULL;
}

static void test_threads(struct fixture *f, struct kr_track *t, uint8_t *model, struct tu_rng *r)
{
	uint8_t *want = calloc(f->npages, 1), *got = calloc(f->npages, 1);
	uint8_t *theirs = calloc(f->npages, 1), *seen = calloc(f->npages, 1);
	TU_ASSERT(want && got && theirs && seen, "calloc");
	size_t half = f->npages / 2;

	/* 1. Both threads store at once, then one harvest sees the union. */
	struct writer w = {.f = f, .model = model, .written = theirs, .seed = tu_rng_next(r),
			   .count = tu_scaled(3000, 300)};
	pthread_t th;
	TU_ASSERT(pthread_create(&th, NULL, writer_main, &w) == 0, "pthread_create");
	for (size_t i = 0; i < w.count; i++) {
		size_t pg = 2 * tu_rng_below(r, half);
		store(f, model, r, pg);
		want[pg] = 1;
	}
	TU_ASSERT(pthread_join(th, NULL) == 0, "pthread_join");
	for (size_t p = 0; p < f->npages; p++)
		want[p] |= theirs[p];
	harvest_all(t, f->npages, got, f->npages);
	expect_equal(want, got, f->npages, 0);

	/* 2. A writer keeps storing while the main thread harvests. Report and re-arm are
	 * atomic per page, so every page the writer stored into is reported by some harvest
	 * (the last one runs after the writer stopped) and nothing it did not store into is. */
	memset(theirs, 0, f->npages);
	atomic_bool stop = false;
	struct writer w2 = {.f = f, .model = model, .written = theirs, .seed = tu_rng_next(r),
			    .stop = &stop};
	TU_ASSERT(pthread_create(&th, NULL, writer_main, &w2) == 0, "pthread_create");
	unsigned harvests = tu_scaled(200, 20);
	for (unsigned i = 0; i < harvests; i++)
		harvest_all(t, tu_rng_chance(r, 1, 2) ? 33 : f->npages, seen, f->npages);
	atomic_store(&stop, true);
	TU_ASSERT(pthread_join(th, NULL) == 0, "pthread_join");
	harvest_all(t, f->npages, seen, f->npages);
	size_t reported = 0;
	for (size_t p = 0; p < f->npages; p++) {
		TU_ASSERT(!theirs[p] || seen[p], "page %zu written during harvests never reported", p);
		TU_ASSERT(theirs[p] || !seen[p], "page %zu reported but never written", p);
		reported += seen[p];
	}
	check_data(f, model, "threads");
	printf("threads: %zu stores racing %u harvests, %zu pages, all reported\n", w2.done,
	       harvests, reported);
	free(want);
	free(got);
	free(theirs);
	free(seen);
}

/* Kernel-mode stores (read(2) into the range) are tracked too. */
static void test_kernel_store(struct fixture *f, struct kr_track *t, uint8_t *model)
{
	int p[2];
	TU_ASSERT(pipe(p) == 0, "pipe");
	const char msg[] = "written by the kernel";
	TU_ASSERT(write(p[1], msg, sizeof(msg)) == (ssize_t)sizeof(msg), "write pipe");
	size_t pg = f->npages / 3;
	TU_ASSERT(read(p[0], f->map + pg * PAGE + 100, sizeof(msg)) == (ssize_t)sizeof(msg),
		  "read into mapping");
	memcpy(model + pg * PAGE + 100, msg, sizeof(msg));
	close(p[0]);
	close(p[1]);
	uint64_t out[4];
	size_t n;
	TU_OK(kr_track_harvest(t, out, 4, &n));
	TU_ASSERT(n == 1 && out[0] == pg, "read(2) into page %zu: %zu pages reported", pg, n);
}

/* ---- misuse ------------------------------------------------------------------------------ */

static void test_misuse(struct fixture *f)
{
	struct kr_track t;
	TU_ASSERT(kr_track_attach(NULL, f->map, f->len, 0) == KR_E_MISUSE_ARG, "NULL tracker");
	TU_ASSERT(kr_track_attach(&t, NULL, f->len, 0) == KR_E_MISUSE_ARG, "NULL base");
	TU_ASSERT(kr_track_attach(&t, f->map + 1, PAGE, 0) == KR_E_MISUSE_ARG, "misaligned base");
	TU_ASSERT(kr_track_attach(&t, f->map, PAGE + 1, 0) == KR_E_MISUSE_ARG, "misaligned len");
	TU_ASSERT(kr_track_attach(&t, f->map, 0, 0) == KR_E_MISUSE_ARG, "zero len");
	TU_ASSERT(kr_track_attach(&t, f->map, f->len, 0x80) == KR_E_MISUSE_ARG, "flags");
	/* A private mapping: the self-test's MADV_DONTNEED would discard its data. */
	void *priv = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, f->fd, 0);
	TU_ASSERT(priv != MAP_FAILED, "mmap private");
	TU_ASSERT(kr_track_attach(&t, priv, 4 * PAGE, 0) == KR_E_MISUSE_ARG, "private mapping");
	munmap(priv, 4 * PAGE);
	/* Beyond the end of the mapping. */
	TU_ASSERT(kr_track_attach(&t, f->map, f->len + 1024 * 1024 * 1024UL, 0) == KR_E_MISUSE_ARG,
		  "unmapped tail");

	uint64_t out[4];
	size_t n = 99;
	TU_ASSERT(kr_track_harvest(&t, out, 4, &n) == KR_E_MISUSE_ARG && n == 0, "detached");
	TU_ASSERT(kr_track_harvest(NULL, out, 4, &n) == KR_E_MISUSE_ARG, "NULL tracker");
	TU_OK(kr_track_attach(&t, f->map, f->len, 0));
	TU_ASSERT(kr_track_harvest(&t, NULL, 4, &n) == KR_E_MISUSE_ARG, "NULL pages");
	TU_ASSERT(kr_track_harvest(&t, out, 0, &n) == KR_E_MISUSE_ARG, "max 0");
	TU_ASSERT(kr_track_harvest(&t, out, 4, NULL) == KR_E_MISUSE_ARG, "NULL n");
	kr_track_detach(&t);
	kr_track_detach(&t); /* twice is harmless */
	kr_track_detach(NULL);
	printf("misuse: ok\n");
}

/* ---- bench ------------------------------------------------------------------------------- */

static void bench(void)
{
	struct fixture f;
	size_t len = 1024UL * 1024 * 1024;
	fixture_open(&f, "track-bench", len);
	/* Populate the page cache so that first stores time the WP fault, not allocation. */
	memset(f.map, 1, len);
	struct kr_track t;
	double t0 = tu_now();
	TU_OK(kr_track_attach(&t, f.map, len, 0));
	printf("attach (arm + self-test) 1 GiB: %.2f ms\n", (tu_now() - t0) * 1e3);

	uint64_t *out = malloc(f.npages * sizeof(*out));
	uint64_t *pick = malloc(f.npages * sizeof(*pick));
	TU_ASSERT(out && pick, "malloc");
	struct tu_rng r;
	tu_rng_seed(&r, 42);
	size_t n;

	t0 = tu_now();
	TU_OK(kr_track_harvest(&t, out, f.npages, &n));
	printf("harvest 1 GiB, 0%% dirty: %.3f ms (%zu pages)\n", (tu_now() - t0) * 1e3, n);

	const unsigned pct[] = {1, 10, 100};
	for (unsigned k = 0; k < 3; k++) {
		/* A random sample without repeats: a partial Fisher-Yates shuffle. */
		size_t cnt = f.npages * pct[k] / 100;
		for (size_t i = 0; i < f.npages; i++)
			pick[i] = i;
		for (size_t i = 0; i < cnt; i++) {
			size_t j = i + tu_rng_below(&r, f.npages - i);
			uint64_t x = pick[i];
			pick[i] = pick[j];
			pick[j] = x;
		}
		volatile uint8_t *m = f.map;
		t0 = tu_now();
		for (size_t i = 0; i < cnt; i++)
			m[pick[i] * PAGE] = 2;
		double first = tu_now() - t0;
		t0 = tu_now();
		for (size_t i = 0; i < cnt; i++)
			m[pick[i] * PAGE + 8] = 3;
		double second = tu_now() - t0;
		t0 = tu_now();
		TU_OK(kr_track_harvest(&t, out, f.npages, &n));
		double h = tu_now() - t0;
		TU_ASSERT(n == cnt, "harvested %zu of %zu", n, cnt);
		printf("%3u%% dirty (%zu pages): first store %.0f ns/page, second store %.0f ns/page, "
		       "harvest %.3f ms (%.1f ns per dirty page)\n",
		       pct[k], cnt, first * 1e9 / cnt, second * 1e9 / cnt, h * 1e3, h * 1e9 / cnt);
	}
	kr_track_detach(&t);
	free(out);
	free(pick);
	fixture_close(&f);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "bench") == 0) {
		bench();
		return 0;
	}
	TU_ASSERT(sysconf(_SC_PAGESIZE) == PAGE, "page size is not 4 KiB");
	TU_ASSERT(kr_track_probe(), "kr_track_probe: %s", kr_errmsg());

	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("track", 0x7ac4));
	struct fixture f;
	fixture_open(&f, "track", 64UL * 1024 * 1024);
	/* The file starts with data the self-test must not change. */
	uint8_t *model = malloc(f.len);
	TU_ASSERT(model, "malloc");
	tu_fill(model, f.len, tu_rng_next(&r));
	memcpy(f.map, model, f.len);

	test_misuse(&f);
	check_data(&f, model, "after misuse (attach self-test)");

	struct kr_track t;
	TU_OK(kr_track_attach(&t, f.map, f.len, 0));
	check_data(&f, model, "after attach");
	test_rounds(&f, &t, model, &r);
	test_kernel_store(&f, &t, model);
	test_threads(&f, &t, model, &r);
	kr_track_detach(&t);

	/* After detach the range is plain memory; a new attach starts clean. */
	f.map[5 * PAGE] = 7;
	model[5 * PAGE] = 7;
	TU_OK(kr_track_attach(&t, f.map, f.len, 0));
	uint64_t out[8];
	size_t n;
	TU_OK(kr_track_harvest(&t, out, 8, &n));
	TU_ASSERT(n == 0, "fresh attach reported %zu pages", n);
	f.map[9 * PAGE + 1] = 8;
	model[9 * PAGE + 1] = 8;
	TU_OK(kr_track_harvest(&t, out, 8, &n));
	TU_ASSERT(n == 1 && out[0] == 9, "reattach: %zu pages, first %llu", n,
		  (unsigned long long)out[0]);
	kr_track_detach(&t);
	check_data(&f, model, "end");

	free(model);
	fixture_close(&f);
	printf("test_track: ok\n");
	TU_END_CHECK_ALL("test_track");
	return 0;
}
