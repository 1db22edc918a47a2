/*
 * test_threads.c - concurrent transactions from several threads on one pool.
 *
 * Usage: test_threads NTHREADS close|noclose [large]
 *
 * large: objects up to 96 KiB instead of 16 KiB, so that several threads hold intents for
 * directly written objects while their lanes fill up (two such threads once waited on
 * each other until "lane N cannot be trimmed").
 *
 * Each thread owns a directory object of 24 slots (allocated by the main thread and
 * listed in the root before the threads start, so no object is ever changed by two
 * threads) and commits random transactions on its own objects: allocations, partial
 * overwrites, frees and replacements (workload.c), with its own model and seed. All
 * threads start together behind a barrier so their commits, allocations and frees really
 * interleave.
 *
 *   close:   after the threads join, the pool is closed, reopened and every thread's
 *            directory compared with its model (oids included), and the live objects must
 *            be exactly root + directories + referenced objects.
 *   noclose: the threads run in a forked child that exits without closing the pool (no
 *            kill: every commit returned); the parent recomputes each thread's model by
 *            dry run from the same seeds, reopens (recovery runs on a pool that was never
 *            closed) and checks the same things, then once more after a clean close.
 *
 * Each check also verifies every parity column and every checksum (kr_pool_check): threads
 * allocating, freeing and writing fresh objects patch parity columns they share, including
 * the allocator metadata's.
 *
 * The test itself shares nothing between threads but the pool handle and the barrier, so
 * any TSan report points into the library.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "workload.h"

#define MAX_THREADS 16
#define NSLOTS 24

struct thr {
	unsigned idx;
	kr_pool *pool;
	kr_oid dir;
	uint64_t seed;
	unsigned ntx;
	struct wl_params p;
	struct wl_ctx wl;
	pthread_barrier_t *start;
};

static struct wl_params thread_params(unsigned idx, bool large)
{
	return (struct wl_params){
		.nslots = NSLOTS,
		.min_size = 8,
		.max_size = large ? 96 * 1024 : 16 * 1024,
		.max_ops = 4,
		.abort_pct = 5,
		/* distinct type numbers per thread: a mixed-up object shows in kr_type */
		.type_base = 1000 * (idx + 1),
	};
}

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	struct tu_rng rng;
	struct wl_plan plan;
	tu_rng_seed(&rng, t->seed);
	wl_ctx_init(&t->wl, t->pool, t->dir, &t->p);
	pthread_barrier_wait(t->start);
	while (t->wl.commits < t->ntx) {
		wl_plan_gen(&rng, &t->p, &t->wl.model, &plan);
		wl_exec(&t->wl, &plan);
	}
	return NULL;
}

/* Runs the threads to completion; the pool stays open. */
static void run_threads(kr_pool *pool, struct thr *t, unsigned nthreads)
{
	pthread_t tid[MAX_THREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, nthreads);
	for (unsigned i = 0; i < nthreads; i++) {
		t[i].pool = pool;
		t[i].start = &start;
		TU_ASSERT(pthread_create(&tid[i], NULL, thread_main, &t[i]) == 0, "pthread_create");
	}
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&start);
}

/* Opens the pool and checks every thread's directory against its model, and the live set. */
static void verify_pool(const char *path, kr_oid root, struct thr *t, unsigned nthreads,
			bool check_oids, const char *when)
{
	kr_pool *pool;
	char why[256];
	TU_OK(tu_open(path, &pool));
	kr_oid r;
	TU_OK(kr_root(pool, nthreads * sizeof(kr_oid), &r));
	TU_ASSERT(r == root, "%s: root moved", when);
	kr_oid *live = malloc((1 + nthreads * (NSLOTS + 1)) * sizeof(*live));
	TU_ASSERT(live, "out of memory");
	size_t n = 0;
	live[n++] = root;
	for (unsigned i = 0; i < nthreads; i++) {
		if (wl_verify(pool, t[i].dir, &t[i].wl.model, check_oids, why, sizeof(why)) != 0)
			TU_FAIL("%s: thread %u: %s", when, i, why);
		live[n++] = t[i].dir;
		n += wl_dir_oids(pool, t[i].dir, NSLOTS, live + n, NSLOTS);
	}
	if (wl_check_live(pool, live, n, why, sizeof(why)) != 0)
		TU_FAIL("%s: %s", when, why);
	if (tu_deep_check(pool, why, sizeof(why)) != 0)
		TU_FAIL("%s: redundancy: %s", when, why);
	printf("  %s: %u threads' objects verified, %zu live objects\n", when, nthreads, n);
	free(live);
	TU_OK(kr_pool_close(pool));
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (strcmp(argv[2], "close") && strcmp(argv[2], "noclose")) ||
	    (argc == 4 && strcmp(argv[3], "large")))
		TU_FAIL("usage: %s NTHREADS close|noclose [large]", argv[0]);
	bool large = argc == 4;
	unsigned nthreads = (unsigned)atoi(argv[1]);
	bool noclose = !strcmp(argv[2], "noclose");
	TU_ASSERT(nthreads >= 1 && nthreads <= MAX_THREADS, "1..%d threads", MAX_THREADS);
	uint64_t seed = tu_seed("test_threads", 4242 + nthreads);
	unsigned ntx = tu_scaled(3000, 200);
	double t0 = tu_now();

	char path[128];
	kr_pool *pool;
	kr_oid root;
	tu_pool_path(path, sizeof(path), "threads");
	TU_OK(tu_create(path, 48ull << 20, 0, nthreads, 0, &pool));
	TU_OK(kr_root(pool, nthreads * sizeof(kr_oid), &root));

	/* One directory per thread, recorded in the root, before any thread starts. */
	static struct thr t[MAX_THREADS];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	kr_oid *dirs = kr_tx_open(tx, root);
	TU_ASSERT(dirs, "kr_tx_open(root): %s", kr_errmsg());
	for (unsigned i = 0; i < nthreads; i++) {
		t[i] = (struct thr){ .idx = i, .seed = seed * 131 + i, .ntx = ntx,
				     .p = thread_params(i, large) };
		TU_OK(kr_tx_alloc(tx, NSLOTS * sizeof(struct wl_dir_entry), 1, &t[i].dir));
		dirs[i] = t[i].dir;
	}
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));

	if (!noclose) {
		TU_OK(tu_open(path, &pool));
		run_threads(pool, t, nthreads);
		TU_OK(kr_pool_close(pool));
		verify_pool(path, root, t, nthreads, true, "after close and reopen");
	} else {
		fflush(stdout);
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork");
		if (pid == 0) {
			TU_OK(tu_open(path, &pool));
			run_threads(pool, t, nthreads);
			_exit(0); /* every commit returned; the pool is never closed */
		}
		int status;
		TU_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
		TU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "workload child failed (status %#x)", status);
		/* The models, rebuilt from the threads' seeds. */
		for (unsigned i = 0; i < nthreads; i++) {
			struct tu_rng rng;
			tu_rng_seed(&rng, t[i].seed);
			wl_model_init(&t[i].wl.model, NSLOTS, t[i].p.type_base);
			for (unsigned k = 0; k < ntx; k++)
				wl_dry_commit(&rng, &t[i].p, &t[i].wl.model);
		}
		verify_pool(path, root, t, nthreads, false, "after recovery of the unclosed pool");
		verify_pool(path, root, t, nthreads, false, "after a clean close");
	}
	for (unsigned i = 0; i < nthreads; i++)
		wl_model_free(&t[i].wl.model), wl_model_free(&t[i].wl.pending);
	printf("test_threads: %u threads x %u commits (%s) passed in %.2fs\n", nthreads, ntx,
	       argv[2], tu_now() - t0);
	TU_END_CHECK_ALL("test_threads");
	return 0;
}
