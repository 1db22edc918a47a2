/*
 * crashstate.c - the debug mode's crash-state check (kr_debug_crash_states): runs an
 * application operation on a pool and, at every persist point of keratin's own commit
 * protocol (every store fence it issues), recovers the pool as a crash there could leave
 * it and hands the recovered pool to the application's check.
 *
 * Model (x86, whole-line persistence), kept through the persistence recorder (pmem.h), which
 * sees every store, flush, non-temporal copy and fence keratin makes:
 *   - a shadow copy of the file holds what is durable: the file as mapped, then each fence
 *     adds the lines flushed before it, as they were when flushed (a snapshot taken at the
 *     flush, so a store after the flush does not count as durable);
 *   - a line stored since it was last durable is pending; it may or may not have reached the
 *     media by a crash (eviction), so just before each fence two images are cut: the shadow
 *     alone ("none": no pending line persisted) and the shadow with every pending line's
 *     current bytes ("all"). Images are taken only where a line is pending.
 * Each image is written to PATH.crash-PID and checked in a fork()ed child: kr_pool_open
 * (recovery runs), the check callback, close; the exit status is the verdict. The parent
 * never re-enters the library in the middle of its commit, and the child's pool is another
 * file, so no lock the parent holds is needed.
 *
 * This is a smaller model than the test suite's crash simulator (tests/crashsim.c), which
 * also keeps every version of a line, draws random mixtures, runs children in parallel and
 * supports several writing threads: that one proves keratin's protocol; this one exists for
 * applications, which need the images their own transaction boundaries produce, with the
 * library's internal ordering as it is. The two pending-line extremes are where a wrong
 * invariant across transactions shows; the harness's mixtures are where keratin's own bugs
 * would.
 *
 * One operation at a time per process; the operation must run on the calling thread (other
 * threads' fences would be cut as if they were its own, and a fork from several running
 * threads is unsafe).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "grow.h"
#include "keratin.h"

#define LINE 64u

struct snapshot {
	uint64_t line;
	uint8_t bytes[LINE];
};

static struct {
	const char *path;
	unsigned flags;
	kr_crash_check_fn check;
	void *arg;
	struct kr_crash_report *rep;
	char *base;     /* the pool's mapping while it is mapped */
	size_t size;
	uint8_t *shadow; /* durable bytes */
	uint64_t *pending; /* bitmap: lines stored since they were last durable */
	struct snapshot *snaps; /* lines flushed since the last fence */
	size_t nsnaps, capsnaps;
	int armed;       /* the operation runs: fences are persist points */
	int oom;         /* a snapshot could not be kept: the model is incomplete */
	uint64_t commits0;
	char image[4200];
} cs;

static atomic_flag cs_busy = ATOMIC_FLAG_INIT;

static int line_range(const void *addr, size_t len, uint64_t *lo, uint64_t *hi)
{
	const char *a = addr;
	if (!cs.base || a < cs.base || a >= cs.base + cs.size || len == 0)
		return 0;
	uint64_t off = (uint64_t)(a - cs.base), end = off + len;
	if (end > cs.size)
		end = cs.size;
	*lo = off / LINE;
	*hi = (end + LINE - 1) / LINE;
	return 1;
}

static void on_map(void *ctx, void *base, size_t len, const char *path)
{
	(void)ctx;
	if (cs.base || strcmp(path, cs.path) != 0)
		return;
	cs.shadow = malloc(len);
	cs.pending = calloc((len / LINE + 63) / 64, 8);
	if (!cs.shadow || !cs.pending) {
		cs.oom = 1;
		return;
	}
	memcpy(cs.shadow, base, len);
	cs.base = base;
	cs.size = len;
}

static void on_unmap(void *ctx, void *base, size_t len)
{
	(void)ctx;
	(void)len;
	if (base == cs.base)
		cs.base = NULL;
}

static void on_store(void *ctx, const void *addr, size_t len)
{
	(void)ctx;
	uint64_t lo, hi;
	if (line_range(addr, len, &lo, &hi))
		for (uint64_t l = lo; l < hi; l++)
			cs.pending[l / 64] |= 1ull << (l % 64);
}

static void on_flush(void *ctx, const void *addr, size_t len)
{
	(void)ctx;
	uint64_t lo, hi;
	if (!line_range(addr, len, &lo, &hi))
		return;
	for (uint64_t l = lo; l < hi; l++) {
		if (!(cs.pending[l / 64] & (1ull << (l % 64))))
			continue;
		if (KR_GROW(cs.snaps, cs.capsnaps, cs.nsnaps + 1, 256)) {
			cs.oom = 1;
			return;
		}
		cs.snaps[cs.nsnaps].line = l;
		memcpy(cs.snaps[cs.nsnaps++].bytes, cs.base + l * LINE, LINE);
	}
}

static void on_nt(void *ctx, const void *addr, size_t len)
{
	on_store(ctx, addr, len);
	on_flush(ctx, addr, len);
}

/* In the child: the image file; with_pending adds every pending line's current bytes. */
static int write_image(const char *file, int with_pending)
{
	int fd = open(file, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int ok = 1;
	for (size_t done = 0; ok && done < cs.size;) {
		ssize_t w = pwrite(fd, cs.shadow + done, cs.size - done, (off_t)done);
		ok = w > 0;
		done += w > 0 ? (size_t)w : 0;
	}
	for (uint64_t l = 0; ok && with_pending && l < cs.size / LINE; l++)
		if (cs.pending[l / 64] & (1ull << (l % 64)))
			ok = pwrite(fd, cs.base + l * LINE, LINE, (off_t)(l * LINE)) == LINE;
	return close(fd) == 0 && ok ? 0 : -1;
}

static void check_image(uint64_t point, uint64_t commit, int all)
{
	struct kr_crash_report *rep = cs.rep;
	const char *kind = all ? "every pending line" : "no pending line";
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		kr_set_recorder(NULL);
		if (write_image(cs.image, all) != 0) {
			fprintf(stderr, "keratin: debug (crash-state): cannot write %s\n", cs.image);
			_exit(3);
		}
		kr_pool *pool;
		if (kr_pool_open(cs.image, cs.flags, &pool) != KR_OK) {
			fprintf(stderr, "keratin: debug (crash-state): recovery refused the image: %s\n",
				kr_errmsg());
			_exit(2);
		}
		int verdict = cs.check(pool, cs.arg);
		kr_pool_close(pool);
		_exit(verdict ? 1 : 0);
	}
	int status = 0;
	int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
	unlink(cs.image);
	rep->images++;
	if (waited && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	rep->failures++;
	char why[120];
	if (!waited)
		snprintf(why, sizeof(why), "could not be checked (fork failed)");
	else if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "killed the checking process (signal %d)", WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "%s", WEXITSTATUS(status) == 1 ? "fails the check"
						 : WEXITSTATUS(status) == 2 ? "does not recover"
									    : "could not be written");
	char line[400];
	snprintf(line, sizeof(line),
		 "persist point %llu (a fence in log commit %llu of the operation): the image with "
		 "%s persisted %s",
		 (unsigned long long)point, (unsigned long long)commit, kind, why);
	if (rep->failures == 1) {
		rep->first_point = point;
		rep->first_commit = commit;
		rep->first_all = all;
		snprintf(rep->first_failure, sizeof(rep->first_failure), "%s", line);
	}
	if (rep->failures <= 10)
		fprintf(stderr, "keratin: debug (crash-state): %s\n", line);
}

static void on_fence(void *ctx)
{
	(void)ctx;
	if (!cs.base)
		return;
	if (cs.armed && !cs.oom) {
		struct kr_counters c;
		kr_counters_get(&c);
		uint64_t point = ++cs.rep->persist_points, commit = c.commits - cs.commits0 + 1;
		int any = 0;
		for (size_t w = 0; w < (cs.size / LINE + 63) / 64 && !any; w++)
			any = cs.pending[w] != 0;
		if (any) {
			check_image(point, commit, 0);
			check_image(point, commit, 1);
		}
	}
	/* The fence takes effect: the flushed snapshots become durable. */
	for (size_t i = 0; i < cs.nsnaps; i++)
		memcpy(cs.shadow + cs.snaps[i].line * LINE, cs.snaps[i].bytes, LINE);
	for (size_t i = 0; i < cs.nsnaps; i++) {
		uint64_t l = cs.snaps[i].line;
		if (memcmp(cs.shadow + l * LINE, cs.base + l * LINE, LINE) == 0)
			cs.pending[l / 64] &= ~(1ull << (l % 64));
	}
	cs.nsnaps = 0;
}

int kr_debug_crash_states(const char *path, unsigned flags, kr_crash_op_fn op,
			  kr_crash_check_fn check, void *arg, struct kr_crash_report *rep)
{
	if (!path || !op || !check || !rep)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_debug_crash_states: NULL argument");
	int rc = kr_opts_size_check(rep->struct_size, sizeof(*rep), "kr_crash_report");
	if (rc)
		return rc;
	if (flags & KR_OPEN_READONLY)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_debug_crash_states: a read-only pool has no "
				  "persist points");
	if (atomic_flag_test_and_set(&cs_busy))
		return kr_err_set(KR_E_MISUSE_STATE, "kr_debug_crash_states: one is already running");
	memset(rep, 0, sizeof(*rep));
	rep->struct_size = sizeof(*rep);
	memset(&cs, 0, sizeof(cs));
	cs.path = path;
	cs.flags = flags;
	cs.check = check;
	cs.arg = arg;
	cs.rep = rep;
	snprintf(cs.image, sizeof(cs.image), "%s.crash-%d", path, (int)getpid());
	struct kr_recorder r = {.map = on_map, .unmap = on_unmap, .store = on_store,
				.flush = on_flush, .fence = on_fence, .nt = on_nt};
	kr_set_recorder(&r);

	kr_pool *pool;
	rc = kr_pool_open(path, flags, &pool);
	if (rc == KR_OK && (cs.oom || !cs.base)) {
		kr_pool_close(pool);
		rc = kr_err_set(KR_E_NOMEM, "kr_debug_crash_states: the durable image of %s", path);
	} else if (rc == KR_OK) {
		struct kr_counters c;
		kr_counters_get(&c);
		cs.commits0 = c.commits;
		cs.armed = 1;
		int op_rc = op(pool, arg);
		int close_rc = kr_pool_close(pool); /* its fences are persist points too */
		cs.armed = 0;
		if (cs.oom)
			rc = kr_err_set(KR_E_NOMEM, "kr_debug_crash_states: a flushed line's snapshot");
		else if (op_rc)
			rc = op_rc;
		else if (close_rc)
			rc = close_rc;
		else if (rep->failures)
			rc = kr_err_set(KR_E_CORRUPT, "%llu of %llu crash images fail; the first at %s",
					(unsigned long long)rep->failures,
					(unsigned long long)rep->images, rep->first_failure);
	}
	kr_set_recorder(NULL);
	free(cs.shadow);
	free(cs.pending);
	free(cs.snaps);
	memset(&cs, 0, sizeof(cs));
	atomic_flag_clear(&cs_busy);
	return rc;
}
