/*
 * test_kill.c - process-crash consistency: SIGKILL a process in the middle of random
 * transactions, again and again, and check what recovery makes of the pool each time.
 *
 * Usage: test_kill [NTHREADS]   (default 1)
 *
 * Each round forks a child that opens the pool (running recovery if the previous round
 * left it unclean) and runs the random workload of workload.c - on one thread, or on
 * NTHREADS threads each owning a directory of its own - writing to a pipe, after each
 * commit, which thread it was and how many of its kr_tx_commit() calls have returned.
 * After a random delay (sometimes zero: a kill during open or recovery) the parent
 * SIGKILLs the child, reads each thread's acknowledged count A, and computes by dry run -
 * the workload is a deterministic function of the seed and the model - each thread's
 * models after A and after A+1 commits (the +1 covers a kill between a commit and its
 * acknowledgement). A verifier process opens the pool: every thread's directory must equal
 * one of its two models, exactly the referenced objects may be live, and every parity
 * column and checksum must agree with the data (threads share parity columns). The
 * verifier then either closes the pool cleanly or exits without closing it, so the next child
 * sometimes recovers a pool whose previous recovery was never followed by a clean close.
 * The next round continues from the states that matched. Prints kills and recoveries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "workload.h"

#define MAX_THREADS 8

/* Where a thread's round starts: its committed model (no oids: the child reads them from
 * the pool) and the generator state that will draw its next plan. */
struct state {
	struct wl_model model;
	struct tu_rng rng;
};

/* One acknowledgement, written atomically to the pipe (16 bytes < PIPE_BUF). */
struct ack {
	uint32_t thread;
	uint32_t pad;
	uint64_t commits;
};

/* What a verifier process reports back through shared memory. */
struct verdict {
	int recovered;
	unsigned long long replayed, discarded;
	int matched_b[MAX_THREADS]; /* 1 if thread t matched "acked + 1" */
	char why[768];
};

static char g_path[128];
static kr_oid g_root;
static unsigned g_nthreads;
static kr_oid g_dir[MAX_THREADS];
static struct wl_params g_params[MAX_THREADS];

static struct wl_params params_for(unsigned t, unsigned nthreads)
{
	return (struct wl_params){
		.nslots = nthreads == 1 ? 48 : 24,
		.min_size = 8,
		.max_size = 64 * 1024,
		.max_ops = 4,
		.abort_pct = 3,
		.type_base = 1000 * (t + 1),
	};
}

/* ---- the child that gets killed ------------------------------------------------------------ */

struct worker {
	unsigned t;
	kr_pool *pool;
	const struct state *st;
	int wfd;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct wl_ctx c;
	wl_ctx_init(&c, w->pool, g_dir[w->t], &g_params[w->t]);
	wl_model_copy(&c.model, &w->st->model);
	wl_load_oids(w->pool, g_dir[w->t], &c.model);
	struct tu_rng rng = w->st->rng;
	struct wl_plan plan;
	for (unsigned i = 0; i < 10000000; i++) {
		wl_plan_gen(&rng, &g_params[w->t], &c.model, &plan);
		wl_exec(&c, &plan);
		if (!plan.abort) {
			struct ack a = { .thread = w->t, .commits = c.commits };
			if (write(w->wfd, &a, sizeof(a)) != sizeof(a))
				_exit(11);
		}
	}
	_exit(12); /* never killed: the parent is gone */
}

static noreturn void run_child(const struct state *st, int wfd)
{
	kr_pool *pool;
	int rc = tu_open(g_path, &pool);
	if (rc != KR_OK) {
		fprintf(stderr, "child: kr_pool_open = %d (%s): %s\n", rc, kr_strerror(rc),
			kr_errmsg());
		_exit(10);
	}
	struct worker w[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	for (unsigned t = 0; t < g_nthreads; t++) {
		w[t] = (struct worker){ .t = t, .pool = pool, .st = &st[t], .wfd = wfd };
		if (g_nthreads == 1)
			worker_main(&w[0]); /* does not return */
		if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0)
			_exit(13);
	}
	for (unsigned t = 0; t < g_nthreads; t++)
		pthread_join(tid[t], NULL);
	_exit(12);
}

/* ---- verification ---------------------------------------------------------------------------- */

/* Opens the pool (recovery) and compares every thread's directory with its two candidate
 * models; exits 0 (matched), 2 (mismatch) or 3 (open failed). */
static noreturn void run_verifier(const struct wl_model *a, const struct wl_model *b,
				  bool clean_close, struct verdict *v)
{
	kr_pool *pool;
	char why_a[300], why_b[300];
	int rc = tu_open(g_path, &pool);
	if (rc != KR_OK) {
		snprintf(v->why, sizeof(v->why), "kr_pool_open (recovery) = %d (%s): %s", rc,
			 kr_strerror(rc), kr_errmsg());
		_exit(3);
	}
	struct kr_pool_stat st;
	if (kr_pool_stat(pool, &st) == KR_OK) {
		v->recovered = st.recovered;
		v->replayed = st.replayed_txs;
		v->discarded = st.discarded_txs;
	}
	kr_oid root;
	size_t root_size = g_nthreads == 1 ? 48 * sizeof(struct wl_dir_entry)
					    : g_nthreads * sizeof(kr_oid);
	rc = kr_root(pool, root_size, &root);
	if (rc != KR_OK || root != g_root) {
		snprintf(v->why, sizeof(v->why), "kr_root = %d, oid %#llx (expected %#llx)", rc,
			 (unsigned long long)root, (unsigned long long)g_root);
		_exit(2);
	}
	kr_oid live[1 + MAX_THREADS * 49];
	size_t n = 0;
	live[n++] = root;
	for (unsigned t = 0; t < g_nthreads; t++) {
		if (wl_verify(pool, g_dir[t], &a[t], false, why_a, sizeof(why_a)) != 0) {
			v->matched_b[t] = 1;
			if (wl_verify(pool, g_dir[t], &b[t], false, why_b, sizeof(why_b)) != 0) {
				snprintf(v->why, sizeof(v->why),
					 "thread %u matches neither A (%s) nor A+1 (%s)", t, why_a,
					 why_b);
				_exit(2);
			}
		}
		if (g_dir[t] != root)
			live[n++] = g_dir[t];
		n += wl_dir_oids(pool, g_dir[t], g_params[t].nslots, live + n, 48);
	}
	if (wl_check_live(pool, live, n, v->why, sizeof(v->why)) != 0 ||
	    tu_deep_check(pool, v->why, sizeof(v->why)) != 0)
		_exit(2);
	if (clean_close && kr_pool_close(pool) != KR_OK) {
		snprintf(v->why, sizeof(v->why), "kr_pool_close: %s", kr_errmsg());
		_exit(2);
	}
	_exit(0);
}

/* ---- the parent ------------------------------------------------------------------------------- */

static int wait_status(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			TU_FAIL("waitpid: %s", strerror(errno));
	return status;
}

static void take_acks(const struct ack *a, size_t n, uint64_t *acked)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].thread < g_nthreads)
			acked[a[i].thread] = a[i].commits;
}

/* Reads acknowledgements until the deadline passes (the child keeps running meanwhile), or
 * with first set until the first one arrives; draining as we go keeps the pipe from filling
 * and stalling the child. */
static void read_acks(int fd, uint64_t *acked, double deadline, bool first)
{
	for (;;) {
		double left = deadline - tu_now();
		if (left < 0)
			left = 0;
		struct timespec ts = { .tv_sec = (time_t)left,
				       .tv_nsec = (long)((left - (time_t)left) * 1e9) };
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (ppoll(&p, 1, &ts, NULL) <= 0)
			return;
		struct ack buf[512];
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got <= 0)
			return;
		/* 16-byte writes to a pipe are atomic, so reads see whole records */
		take_acks(buf, (size_t)got / sizeof(buf[0]), acked);
		if (left == 0 || (first && got >= (ssize_t)sizeof(buf[0])))
			return;
	}
}

/* After the child died: everything it wrote, up to end of file. */
static void drain_acks(int fd, uint64_t *acked)
{
	struct ack buf[512];
	ssize_t got;
	while ((got = read(fd, buf, sizeof(buf))) > 0)
		take_acks(buf, (size_t)got / sizeof(buf[0]), acked);
}

int main(int argc, char **argv)
{
	g_nthreads = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
	TU_ASSERT(g_nthreads >= 1 && g_nthreads <= MAX_THREADS, "1..%d threads", MAX_THREADS);
	uint64_t seed = tu_seed("test_kill", 777 + g_nthreads);
	unsigned rounds = tu_scaled(300, 50);
	struct tu_rng timing;
	tu_rng_seed(&timing, seed ^ 0x5eed);
	double t0 = tu_now();

	/* One thread: the root is the directory. Several: the root lists one directory per
	 * thread, all made before any child runs. */
	tu_pool_path(g_path, sizeof(g_path), "kill");
	kr_pool *pool;
	/* Room for every thread's worst case (24 slots of 64 KiB) beside its lanes. */
	uint64_t size = g_nthreads == 1 ? 16ull << 20 : (16ull + 4ull * g_nthreads) << 20;
	TU_OK(tu_create(g_path, size, 8, g_nthreads == 1 ? 2 : g_nthreads + 1, 512, &pool));
	for (unsigned t = 0; t < g_nthreads; t++)
		g_params[t] = params_for(t, g_nthreads);
	if (g_nthreads == 1) {
		TU_OK(kr_root(pool, 48 * sizeof(struct wl_dir_entry), &g_root));
		g_dir[0] = g_root;
	} else {
		kr_tx *tx;
		TU_OK(kr_root(pool, g_nthreads * sizeof(kr_oid), &g_root));
		TU_OK(kr_tx_begin(pool, &tx));
		kr_oid *list = kr_tx_open(tx, g_root);
		TU_ASSERT(list, "kr_tx_open(root): %s", kr_errmsg());
		for (unsigned t = 0; t < g_nthreads; t++) {
			TU_OK(kr_tx_alloc(tx, g_params[t].nslots * sizeof(struct wl_dir_entry), 1,
					  &g_dir[t]));
			list[t] = g_dir[t];
		}
		TU_OK(kr_tx_commit(tx));
	}
	TU_OK(kr_pool_close(pool));

	struct verdict *v = mmap(NULL, sizeof(*v), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				 -1, 0);
	TU_ASSERT(v != MAP_FAILED, "mmap: %s", strerror(errno));

	static struct state st[MAX_THREADS];
	static struct wl_model a[MAX_THREADS], b[MAX_THREADS];
	struct tu_rng rng_a[MAX_THREADS], rng_b[MAX_THREADS];
	for (unsigned t = 0; t < g_nthreads; t++) {
		wl_model_init(&st[t].model, g_params[t].nslots, g_params[t].type_base);
		tu_rng_seed(&st[t].rng, seed * 7919 + t);
	}
	unsigned kills = 0, recoveries = 0, plus_one = 0, unclean = 0, replays = 0;
	uint64_t total_acked = 0;

	for (unsigned round = 0; round < rounds; round++) {
		int fds[2];
		TU_ASSERT(pipe(fds) == 0, "pipe: %s", strerror(errno));
		fflush(stdout);
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			close(fds[0]);
			run_child(st, fds[1]);
		}
		close(fds[1]);

		/* Kill at a random moment: 1 round in 6 at once (during open or recovery),
		 * otherwise 0.1..6 ms (ten times that under a sanitizer) after the child's first
		 * commit. Counted from the first commit, not from the fork: under TSan on a loaded
		 * machine the child's open took longer than any fixed delay, and a whole run's
		 * children died before committing anything. */
		double delay = tu_rng_chance(&timing, 1, 6) ? 0 : tu_rng_range(&timing, 100, 6000) * 1e-6;
		if (tu_sanitized())
			delay *= 10;
		uint64_t acked[MAX_THREADS] = { 0 };
		if (delay > 0)
			read_acks(fds[0], acked, tu_now() + 120, true);
		read_acks(fds[0], acked, tu_now() + delay, false);
		TU_ASSERT(kill(pid, SIGKILL) == 0, "kill: %s", strerror(errno));
		int status = wait_status(pid);
		drain_acks(fds[0], acked); /* whatever it wrote before dying */
		close(fds[0]);
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			TU_FAIL("round %u: workload child did not die by our SIGKILL (status %#x: %s "
				"%d)",
				round, status, WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		kills++;

		/* The two states each thread's directory may be in, by dry run. */
		for (unsigned t = 0; t < g_nthreads; t++) {
			rng_a[t] = st[t].rng;
			wl_model_copy(&a[t], &st[t].model);
			for (uint64_t i = 0; i < acked[t]; i++)
				wl_dry_commit(&rng_a[t], &g_params[t], &a[t]);
			wl_model_copy(&b[t], &a[t]);
			rng_b[t] = rng_a[t];
			wl_dry_commit(&rng_b[t], &g_params[t], &b[t]);
			total_acked += acked[t];
		}

		bool clean_close = tu_rng_chance(&timing, 1, 2);
		memset(v, 0, sizeof(*v));
		pid_t vp = fork();
		TU_ASSERT(vp >= 0, "fork: %s", strerror(errno));
		if (vp == 0)
			run_verifier(a, b, clean_close, v);
		status = wait_status(vp);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			char acks[200];
			int n = 0;
			for (unsigned t = 0; t < g_nthreads && n < (int)sizeof(acks) - 24; t++)
				n += snprintf(acks + n, sizeof(acks) - (size_t)n, "%s%llu", t ? "," : "",
					      (unsigned long long)acked[t]);
			TU_FAIL("round %u (seed %llu, commits acknowledged %s, killed after %.2f ms): "
				"recovered pool is wrong: %s (verifier status %#x)",
				round, (unsigned long long)seed, acks, delay * 1e3, v->why, status);
		}
		recoveries++;
		replays += v->replayed > 0;
		unclean += !clean_close;
		for (unsigned t = 0; t < g_nthreads; t++) {
			plus_one += v->matched_b[t];
			wl_model_copy(&st[t].model, v->matched_b[t] ? &b[t] : &a[t]);
			st[t].rng = v->matched_b[t] ? rng_b[t] : rng_a[t];
		}
	}

	/* The last state, once more through a clean open. */
	TU_OK(tu_open(g_path, &pool));
	char why[256];
	for (unsigned t = 0; t < g_nthreads; t++)
		if (wl_verify(pool, g_dir[t], &st[t].model, false, why, sizeof(why)) != 0)
			TU_FAIL("final reopen, thread %u: %s", t, why);
	TU_OK(kr_pool_close(pool));

	printf("test_kill: %u thread(s): %u kills, %u recoveries verified (%u thread states matched "
	       "acked+1, %u recoveries replayed transactions, %u left unclean for the next child), "
	       "%llu commits acknowledged in total, %.1fs\n",
	       g_nthreads, kills, recoveries, plus_one, replays, unclean,
	       (unsigned long long)total_acked, tu_now() - t0);
	TU_ASSERT(kills >= 50, "only %u kills", kills);
	TU_ASSERT(total_acked > 0, "no child ever committed: the kills tested nothing");
	for (unsigned t = 0; t < g_nthreads; t++) {
		wl_model_free(&st[t].model);
		wl_model_free(&a[t]);
		wl_model_free(&b[t]);
	}
	munmap(v, sizeof(*v));
	TU_END_CHECK_ALL("test_kill");
	return 0;
}
