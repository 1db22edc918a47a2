/*
 * test_mt_parity.c - redundancy after several threads allocate, free and overwrite at once.
 *
 * Usage: test_mt_parity mechanism | clean T | kill T | crash T
 *        (test_mt_parity crashcheck IMAGE CTX FENCE KIND: the exec'd crash-image checker)
 *
 * Every mode ends with kr_pool_check on what the threads left: every parity column, every
 * object checksum and every chunk record must verify, and the live objects must be the
 * ones the model says.
 *
 *   mechanism: the race in isolation, on the library's own code paths. One thread patches
 *              a data page's parity with the SIMD path (exclusive range lock, a plain
 *              read-modify-write of the parity bytes), another applies bit records (what an
 *              allocation or a free in a run commits) whose parity word shares that page
 *              column. The bit path must respect the range lock, or its XOR is lost when it
 *              lands between the SIMD load and store.
 *   clean:     T threads run transactions that allocate (64 B .. 64 KiB and multi-chunk
 *              extents), free and overwrite their own objects, through micro-buffers or
 *              in place (large ones spill their undo and commit at home); check the open
 *              pool, close, reopen, check again and compare with the model.
 *   kill:      the same threads in a child killed by SIGKILL at a random moment, 8 times;
 *              every reopen recovers and checks clean.
 *   crash:     the crash simulator over 2 writing threads: at the fences of a bounded run,
 *              images with none, all and random subsets of the pending lines persisted are
 *              recovered and checked (by a fresh process; see crashsim.h, exec_path).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crashsim.h"
#include "pool_state.h"
#include "testutil.h"

#define MAX_THREADS 8
#define KEEP 6 /* objects each thread keeps alive and overwrites */

/* ---- mechanism ----------------------------------------------------------------------------- */

struct mech {
	kr_pool *pool;
	uint64_t data_off;  /* a page in data row 1 whose parity column holds bit_off's */
	uint64_t bit_off;   /* an 8-byte bitmap word of a chunk record, in row 0 */
	unsigned rounds;
	pthread_barrier_t *start;
};

static void *mech_patcher(void *arg)
{
	struct mech *m = arg;
	static uint8_t a[KR_PAGE_SIZE], b[KR_PAGE_SIZE];
	tu_fill(a, sizeof(a), 1);
	tu_fill(b, sizeof(b), 2);
	pthread_barrier_wait(m->start);
	/* As if the page went a -> b -> a: parity ends where it started, the data never
	 * changes, and each patch is a whole page (far above the SIMD crossover). */
	for (unsigned i = 0; i < m->rounds; i++) {
		kr_parity_patch(&m->pool->redund.parity, m->data_off, a, b, sizeof(a));
		kr_parity_patch(&m->pool->redund.parity, m->data_off, b, a, sizeof(a));
	}
	return NULL;
}

static void *mech_bits(void *arg)
{
	struct mech *m = arg;
	struct kr_log_hooks hooks;
	kr_redund_hooks(&m->pool->redund, &hooks);
	struct kr_rec_hdr h = {.off = m->bit_off, .len = 8};
	uint64_t mask = 0x5a5a5a5a5a5a5a5aull;
	pthread_barrier_wait(m->start);
	for (unsigned i = 0; i < 4 * m->rounds; i++) {
		h.kind = i % 2 ? KR_REC_CLRBITS : KR_REC_SETBITS;
		hooks.apply(hooks.ctx, &h, (const uint8_t *)&mask);
	}
	return NULL;
}

static void run_mechanism(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "mtpar-mech");
	kr_pool *pool;
	TU_OK(tu_create(path, 64ull << 20, 8, 0, 0, &pool));
	TU_ASSERT(pool->hdr.ro_compat & KR_FEAT_RO_PARITY, "the pool keeps no parity");
	uint64_t heap = pool->hdr.heap_off, row = (uint64_t)pool->hdr.row_pages * KR_PAGE_SIZE;
	/* Chunk record 1's bitmap (record 0 may hold the root's run); its word's column. */
	struct kr_chunk_meta *rec = (struct kr_chunk_meta *)(pool->pm.base + heap) + 1;
	uint64_t bit_off = (uint64_t)((char *)&rec->bitmap[3] - pool->pm.base);
	uint64_t col = (bit_off - heap) & ~(uint64_t)(KR_PAGE_SIZE - 1);
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 2);
	struct mech m = {.pool = pool, .data_off = heap + row + col, .bit_off = bit_off,
			 .rounds = tu_scaled(200000, 20000), .start = &start};
	uint64_t saved = *(uint64_t *)(pool->pm.base + bit_off);
	pthread_t p, b;
	TU_ASSERT(pthread_create(&p, NULL, mech_patcher, &m) == 0, "pthread_create");
	TU_ASSERT(pthread_create(&b, NULL, mech_bits, &m) == 0, "pthread_create");
	pthread_join(p, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&start);
	TU_ASSERT(*(uint64_t *)(pool->pm.base + bit_off) == saved, "the bit word did not return");
	/* checks invariant parity.c 3: the bit path's XOR respects the range lock */
	TU_ASSERT(kr_parity_column_ok(&pool->redund.parity, m.data_off),
		  "parity of the column of 0x%llx is stale after %u SIMD patch pairs racing %u bit "
		  "records", (unsigned long long)m.data_off, m.rounds, 4 * m.rounds);
	TU_DEEP_CHECK(pool, "mechanism");
	TU_OK(kr_pool_close(pool));
	printf("mechanism: %u SIMD patch pairs raced %u bit records on one parity column: "
	       "parity exact\n", m.rounds, 4 * m.rounds);
}

/* ---- the threaded workload ------------------------------------------------------------------ */

/* Each thread keeps KEEP objects in its own directory object (KEEP oids + KEEP seeds), so
 * the model is on the pool itself: an object's bytes must be tu_fill(size, seed). */
struct dir {
	kr_oid oid[KEEP];
	uint64_t seed[KEEP];
	uint64_t size[KEEP];
};

struct worker {
	kr_pool *pool;
	kr_oid dir;
	uint64_t seed;
	unsigned ntx;            /* 0: until stop */
	atomic_bool *stop;
	pthread_barrier_t *start;
	unsigned done;
};

/* The largest extent: one that spans 64 or more pages of a row takes every parity range
 * lock at once, more locks than ThreadSanitizer's deadlock detector can track (64 held by
 * one thread); under TSan, extents stay multi-chunk but below that. */
#ifdef __SANITIZE_THREAD__
#define MAX_EXTENT (200 << 10)
#else
#define MAX_EXTENT (600 << 10)
#endif

static uint64_t pick_size(struct tu_rng *r)
{
	switch (tu_rng_below(r, 8)) {
	case 0:
		return tu_rng_range(r, 40 << 10, MAX_EXTENT); /* multi-chunk extents */
	case 1:
	case 2:
		return tu_rng_logu(r, 4096, 64 << 10);
	default:
		return tu_rng_logu(r, 64, 4096); /* the small classes */
	}
}

/* One transaction: replace slot s by a new object (alloc + fill + free of the old one), or
 * overwrite part of it. */
static int one_tx(struct worker *w, struct tu_rng *r, uint8_t *scratch)
{
	kr_tx *tx;
	int rc = kr_tx_begin(w->pool, &tx);
	if (rc)
		return rc;
	const struct dir *cur = kr_tx_get(tx, w->dir);
	unsigned s = (unsigned)tu_rng_below(r, KEEP);
	struct dir *d = kr_tx_add(tx, w->dir, 0, sizeof(struct dir));
	if (!cur || !d) {
		kr_tx_abort(tx);
		return kr_errcode();
	}
	uint64_t seed = tu_rng_next(r);
	if (d->oid[s] && tu_rng_chance(r, 1, 4)) {
		/* Overwrite it in place, as libpmemobj programs do, whatever its size: a large
		 * one's undo spills out of the lane and the transaction commits at home. */
		uint8_t *p = NULL;
		for (uint64_t off = 0; off < d->size[s]; off += 64 << 10) {
			uint64_t n = d->size[s] - off < (64 << 10) ? d->size[s] - off : 64 << 10;
			uint8_t *q = kr_tx_add_in_place(tx, d->oid[s], off, n);
			if (!q) {
				kr_tx_abort(tx);
				return kr_errcode();
			}
			p = p ? p : q;
		}
		tu_fill(p, d->size[s], seed);
	} else if (d->oid[s] && d->size[s] <= (64 << 10) && tu_rng_chance(r, 1, 3)) {
		/* Overwrite the whole object with new contents of the same size (larger ones
		 * would not fit one lane of the log). */
		void *p = kr_tx_open(tx, d->oid[s]);
		if (p)
			tu_fill(p, d->size[s], seed);
	} else {
		uint64_t size = pick_size(r);
		kr_oid n;
		if (kr_tx_alloc(tx, size, 7, &n) == KR_OK) {
			void *p = kr_tx_add(tx, n, 0, size);
			if (p) {
				tu_fill(scratch, size, seed);
				memcpy(p, scratch, size);
			}
			if (d->oid[s])
				kr_tx_free(tx, d->oid[s]);
			d->oid[s] = n;
			d->size[s] = size;
		}
	}
	d->seed[s] = seed;
	return kr_tx_commit(tx);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	uint8_t *scratch = malloc(MAX_EXTENT);
	TU_ASSERT(scratch, "malloc");
	pthread_barrier_wait(w->start);
	for (unsigned i = 0; w->ntx ? i < w->ntx : !atomic_load(w->stop); i++) {
		int rc = one_tx(w, &r, scratch);
		TU_ASSERT(rc == KR_OK || rc == KR_E_NOSPACE || rc == KR_E_NOSPACE_HEAP, "transaction %u: %s", i,
			  kr_errmsg());
		w->done++;
	}
	free(scratch);
	return NULL;
}

/* Creates a pool of `mib` MiB with one directory per thread, listed in the root. Its lanes
 * are those of a 48 MiB pool's defaults (16 x 192 KiB, room for a 64 KiB overwrite) at any
 * size; a heap too small for the objects kept makes some allocations fail with
 * KR_E_NOSPACE, which the workload takes as a normal outcome. */
static void setup(const char *path, unsigned nthreads, unsigned mib)
{
	kr_pool *pool;
	TU_OK(tu_create(path, (uint64_t)mib << 20, 0, 16, 192, &pool));
	kr_oid root;
	TU_OK(kr_root(pool, MAX_THREADS * sizeof(kr_oid), &root));
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	kr_oid *dirs = kr_tx_open(tx, root);
	TU_ASSERT(dirs, "open root: %s", kr_errmsg());
	for (unsigned t = 0; t < nthreads; t++) {
		TU_OK(kr_tx_alloc(tx, sizeof(struct dir), 3, &dirs[t]));
		struct dir *d = kr_tx_open(tx, dirs[t]);
		TU_ASSERT(d, "open dir: %s", kr_errmsg());
		memset(d, 0, sizeof(*d));
	}
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));
}

/* Runs the threads on an open pool until each has done ntx transactions (or until stop). */
static void run_threads(kr_pool *pool, unsigned nthreads, uint64_t seed, unsigned ntx,
			atomic_bool *stop)
{
	kr_oid root;
	TU_OK(kr_root(pool, MAX_THREADS * sizeof(kr_oid), &root));
	const kr_oid *dirs = kr_get(pool, root);
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, nthreads);
	struct worker w[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	for (unsigned t = 0; t < nthreads; t++) {
		w[t] = (struct worker){.pool = pool, .dir = dirs[t], .seed = seed * 1000 + t,
				       .ntx = ntx, .stop = stop, .start = &start};
		TU_ASSERT(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0, "pthread_create");
	}
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);
}

/* Every directory's objects hold what their seeds say, and nothing else is alive. */
static void check_model(kr_pool *pool, unsigned nthreads, const char *when)
{
	kr_oid root;
	TU_OK(kr_root(pool, MAX_THREADS * sizeof(kr_oid), &root));
	const kr_oid *dirs = kr_get(pool, root);
	uint64_t want_live = 1 + nthreads, live = 0;
	uint8_t *buf = malloc(MAX_EXTENT);
	TU_ASSERT(buf, "malloc");
	for (unsigned t = 0; t < nthreads; t++) {
		const struct dir *d = kr_get(pool, dirs[t]);
		TU_ASSERT(d, "%s: directory %u gone", when, t);
		for (unsigned s = 0; s < KEEP; s++) {
			if (!d->oid[s])
				continue;
			want_live++;
			const void *p = kr_get(pool, d->oid[s]);
			TU_ASSERT(p, "%s: thread %u slot %u: object gone", when, t, s);
			tu_fill(buf, d->size[s], d->seed[s]);
			TU_ASSERT(memcmp(p, buf, d->size[s]) == 0,
				  "%s: thread %u slot %u: %llu bytes differ from the model", when, t,
				  s, (unsigned long long)d->size[s]);
		}
	}
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o))
		live++;
	TU_ASSERT(live == want_live, "%s: %llu live objects, the model has %llu (leak or loss)",
		  when, (unsigned long long)live, (unsigned long long)want_live);
	free(buf);
}

/* Opens the pool (recovering it if the last session died), checks redundancy and model,
 * closes it. */
static void reopen_and_check(const char *path, unsigned nthreads, const char *when)
{
	kr_pool *pool;
	TU_OK(tu_open(path, &pool));
	TU_DEEP_CHECK(pool, when);
	check_model(pool, nthreads, when);
	TU_OK(kr_pool_close(pool));
}

static void run_clean(unsigned nthreads)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "mtpar-clean");
	setup(path, nthreads, 48);
	uint64_t seed = tu_seed("mt_parity", 7);
	unsigned rounds = tu_scaled(6, 2), ntx = tu_scaled(1500, 150);
	for (unsigned round = 0; round < rounds; round++) {
		kr_pool *pool;
		TU_OK(tu_open(path, &pool));
		run_threads(pool, nthreads, seed + round, ntx, NULL);
		TU_DEEP_CHECK(pool, "after the threads, open");
		check_model(pool, nthreads, "after the threads");
		TU_OK(kr_pool_close(pool));
		reopen_and_check(path, nthreads, "after a clean close and reopen");
	}
	printf("clean: %u threads, %u rounds of %u transactions each: parity, checksums and "
	       "model exact\n", nthreads, rounds, ntx);
}

/* KR_MTPAR_KEEP=DIR keeps the pool as the kill left it (before recovery), as DIR/kill-K.pool,
 * for replaying a failure. */
static void keep_image(const char *path, unsigned k)
{
	const char *dir = getenv("KR_MTPAR_KEEP");
	if (!dir || !*dir)
		return;
	char dst[512];
	snprintf(dst, sizeof(dst), "%s/kill-%u.pool", dir, k);
	size_t len;
	void *buf = tu_read_file(path, &len);
	tu_write_file(dst, buf, len);
	free(buf);
}

/* checks invariant log.c 6: an intent adopted before its direct writes were fenced let
 * another thread trim it mid-write, and the reopen after a SIGKILL found stale parity. */
static void run_kill(unsigned nthreads)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "mtpar-kill");
	setup(path, nthreads, 48);
	uint64_t seed = tu_seed("mt_parity", 7);
	struct tu_rng r;
	tu_rng_seed(&r, seed);
	unsigned kills = tu_scaled(8, 3);
	for (unsigned k = 0; k < kills; k++) {
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork");
		if (pid == 0) {
			kr_pool *pool;
			if (tu_open(path, &pool) != KR_OK)
				_exit(2);
			atomic_bool stop = false;
			run_threads(pool, nthreads, seed + k, 0, &stop); /* until killed */
			_exit(3);
		}
		struct timespec ts = {0, (long)tu_rng_range(&r, 150, 600) * 1000000L};
		if (tu_sanitized())
			ts.tv_nsec *= 3;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec = ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
		}
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		TU_ASSERT(WIFSIGNALED(st), "kill %u: the child ended by itself (status %d)", k, st);
		keep_image(path, k);
		reopen_and_check(path, nthreads, "after SIGKILL and recovery");
	}
	printf("kill: %u threads killed %u times: every recovery checks clean\n", nthreads, kills);
}

/* ---- crash images ----------------------------------------------------------------------- */

static unsigned crash_threads;

/* The exec'd checker: the image must recover and check clean. The model cannot be
 * compared here (it lives in the image itself and is whatever prefix recovery kept; the
 * workload's acknowledged-prefix property is test_crash's and test_threads' job). */
static int crashcheck_main(const char *image)
{
	kr_pool *pool;
	/* One pass over the mapping beats a fault per page (the deep check reads it all). */
	if (kr_pool_open(image, tu_map_flags() | KR_OPEN_PREFAULT, &pool) != KR_OK) {
		fprintf(stderr, "crashcheck: %s does not open: %s\n", image, kr_errmsg());
		return 1;
	}
	char why[512];
	if (tu_deep_check(pool, why, sizeof(why)) != 0) {
		fprintf(stderr, "crashcheck: %s: %s\n", image, why);
		return 1;
	}
	return kr_pool_close(pool) == KR_OK ? 0 : 1;
}

static int no_prepare(void *ctx, const struct crashsim_image *img) { return 0; }

/* checks invariant log.c 3: the simulator makes a fence durable only for its own thread's
 * flushes, so a lane passed between threads keeps its acknowledged transactions in the
 * images only if the new thread adopted (re-flushed) the pending one. */
static void run_crash(unsigned nthreads)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "mtpar-crash");
	/* Every crash image is written, recovered and deep-checked whole: a small pool. */
	setup(path, nthreads, 16);
	crash_threads = nthreads;
	struct crashsim_opts co;
	crashsim_opts_init(&co);
	co.random_images = 1;
	co.seed = tu_seed("mt_parity_crash", 11);
	co.exec_path = "/proc/self/exe";
	co.exec_arg = "crashcheck";
	co.exec_prepare = no_prepare;
	TU_ASSERT(crashsim_start(&co, NULL, NULL) == 0, "crashsim_start");
	kr_pool *pool;
	TU_OK(tu_open(path, &pool));
	run_threads(pool, nthreads, co.seed, tu_scaled(60, 12), NULL);
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);
	TU_ASSERT(st.images > 0, "no crash image was taken");
	TU_ASSERT(st.failures == 0, "%llu of %llu crash images failed",
		  (unsigned long long)st.failures, (unsigned long long)st.images);
	reopen_and_check(path, nthreads, "after the crash run");
	printf("crash: %u threads, %llu fences, %llu crash images recovered and checked clean\n",
	       nthreads, (unsigned long long)st.fences, (unsigned long long)st.images);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 6 && !strcmp(argv[1], "crashcheck"))
		return crashcheck_main(argv[2]);
	unsigned t = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	TU_ASSERT(t >= 1 && t <= MAX_THREADS, "threads: 1 to %d", MAX_THREADS);
	if (argc >= 2 && !strcmp(argv[1], "mechanism"))
		run_mechanism();
	else if (argc >= 2 && !strcmp(argv[1], "clean"))
		run_clean(t);
	else if (argc >= 2 && !strcmp(argv[1], "kill"))
		run_kill(t);
	else if (argc >= 2 && !strcmp(argv[1], "crash"))
		run_crash(t);
	else
		TU_FAIL("usage: test_mt_parity mechanism | clean T | kill T | crash T");
	TU_END_CHECK_ALL("test_mt_parity");
	return 0;
}
