/*
 * test_debug.c - keratin's debug mode (KR_OPEN_DEBUG): each misuse it reports, as a small
 * buggy program and its fixed twin.
 *
 *   test_debug stale-buffer  bug|fixed   write to a kr_tx_open buffer after the commit
 *   test_debug write-conflict bug|fixed  two threads' live transactions open one object
 *   test_debug use-after-free bug|fixed  kr_get of a freed oid; a read through a kr_get
 *                                        pointer into a freed 8 KiB object
 *
 * Each program runs in a forked child whose stderr is captured. A bug must be reported
 * with the object (and offset) in the "keratin: debug (NAME): ..." line and, for the
 * faulting ones, stop the child; its twin must exit 0 with no report. The faulting bugs
 * also run once without the debug mode, where the same access goes unnoticed (the child
 * lives and says nothing), so the check above can fail. With KERATIN_DEBUG_PROTECT=1 in
 * the environment the mode comes from it instead of KR_OPEN_DEBUG.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define OBJ_SIZE 100
#define BIG_SIZE 8192
#define LATE_OFF 5

static char path[128];
static int mode_from_env; /* KERATIN_DEBUG_PROTECT=1 turns the mode on, not the flag */

static kr_pool *create_pool(int debug)
{
	struct kr_create_opts o = KR_CREATE_OPTS_INIT;
	o.size = 16u << 20;
	o.flags = KR_OPEN_FORCE_PMEM | (debug && !mode_from_env ? KR_OPEN_DEBUG : 0);
	if (!debug)
		unsetenv("KERATIN_DEBUG_PROTECT"); /* in the child only */
	kr_pool *pool;
	unlink(path);
	TU_OK(kr_pool_create(path, &o, &pool));
	return pool;
}

static kr_oid new_object(kr_pool *pool, size_t size)
{
	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 1, &oid));
	char *p = kr_tx_open(tx, oid);
	TU_ASSERT(p != NULL, "kr_tx_open: %s", kr_errmsg());
	memset(p, 'a', size);
	TU_OK(kr_tx_commit(tx));
	return oid;
}

static void free_object(kr_pool *pool, kr_oid oid)
{
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, oid));
	TU_OK(kr_tx_commit(tx));
}

/* ---- the programs ---------------------------------------------------------------------- */

/* Bug: the buffer of a committed transaction written. Twin: written before the commit. */
static void stale_buffer(int bug, int debug)
{
	kr_pool *pool = create_pool(debug);
	kr_oid oid = new_object(pool, OBJ_SIZE);
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	char *p = kr_tx_open(tx, oid);
	TU_ASSERT(p != NULL, "kr_tx_open: %s", kr_errmsg());
	p[0] = 'b';
	if (!bug)
		p[LATE_OFF] = 'c';
	TU_OK(kr_tx_commit(tx));
	if (bug)
		((volatile char *)p)[LATE_OFF] = 'c'; /* after the commit: lost, or worse */
	const char *home = kr_get(pool, oid);
	TU_ASSERT(home[0] == 'b', "the committed change is there");
	TU_OK(kr_pool_close(pool));
}

static kr_pool *shared_pool;
static kr_oid shared_oid;
static atomic_int stage; /* 1: the first transaction has the object open; 2: it committed */

static void *first_writer(void *arg)
{
	int bug = *(int *)arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(shared_pool, &tx));
	char *p = kr_tx_open(tx, shared_oid);
	TU_ASSERT(p != NULL, "first writer: kr_tx_open: %s", kr_errmsg());
	p[0] = '1';
	atomic_store(&stage, 1);
	if (bug) /* the bug: the other thread opens the object while this transaction lives */
		while (atomic_load(&stage) != 3)
			usleep(1000);
	TU_OK(kr_tx_commit(tx));
	atomic_store(&stage, 2);
	return NULL;
}

/* Bug: two threads change one object in overlapping transactions. Twin: the second waits
 * for the first to commit (the serialisation keratin leaves to the application). */
static void write_conflict(int bug)
{
	shared_pool = create_pool(1);
	shared_oid = new_object(shared_pool, OBJ_SIZE);
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, first_writer, &bug) == 0, "pthread_create");
	while (atomic_load(&stage) != (bug ? 1 : 2))
		usleep(1000);
	kr_tx *tx;
	TU_OK(kr_tx_begin(shared_pool, &tx));
	char *p = kr_tx_open(tx, shared_oid);
	if (bug) {
		TU_ASSERT(p == NULL && kr_errcode() == KR_E_MISUSE_SHARED,
			  "the second open for write must fail with KR_E_MISUSE_SHARED (got %s)",
			  p ? "a buffer" : kr_strerror(kr_errcode()));
		kr_tx_abort(tx);
		atomic_store(&stage, 3);
		while (atomic_load(&stage) != 2)
			usleep(1000);
		/* The first transaction ended: its claim went with it. */
		TU_OK(kr_tx_begin(shared_pool, &tx));
		p = kr_tx_open(tx, shared_oid);
	}
	TU_ASSERT(p != NULL, "kr_tx_open after the first commit: %s", kr_errmsg());
	TU_ASSERT(p[0] == '1', "the first writer's change is there");
	p[1] = '2';
	TU_OK(kr_tx_commit(tx));
	pthread_join(t, NULL);
	TU_OK(kr_pool_close(shared_pool));
}

/* Bug: a freed object used by its oid and read through an old pointer. Twin: the reads
 * before the free, then many frees and allocations (more than the quarantine holds) whose
 * new objects all read back: a freed page made unreadable is readable again once reused. */
static void use_after_free(int bug, int debug)
{
	kr_pool *pool = create_pool(debug);
	kr_oid small = new_object(pool, OBJ_SIZE), big = new_object(pool, BIG_SIZE);
	const volatile char *p = kr_get(pool, big);
	char before = p[100];
	TU_ASSERT(before == 'a', "the object reads before the free");
	free_object(pool, small);
	free_object(pool, big);
	if (bug) {
		TU_ASSERT(kr_get(pool, small) == NULL && kr_errcode() == KR_E_MISUSE_FREED,
			  "kr_get of a freed oid fails with KR_E_MISUSE_FREED");
		char after = p[100]; /* the old pointer: faults in debug mode */
		(void)after;
	} else {
		kr_oid live[200];
		for (int i = 0; i < 200; i++) {
			live[i] = new_object(pool, i % 2 ? BIG_SIZE : OBJ_SIZE);
			if (i % 3 == 0)
				free_object(pool, live[i]);
		}
		for (int i = 1; i < 200; i += 1 + (i % 3 == 2)) { /* the ones not freed */
			const char *q = kr_get(pool, live[i]);
			TU_ASSERT(q != NULL, "object %d is live: %s", i, kr_errmsg());
			TU_ASSERT(q[0] == 'a' && q[(i % 2 ? BIG_SIZE : OBJ_SIZE) - 1] == 'a',
				  "object %d reads back", i);
		}
	}
	TU_OK(kr_pool_close(pool));
}

/* ---- the harness --------------------------------------------------------------------- */

struct program {
	void (*fn)(int bug, int debug);
	int bug, debug;
};

static void run_program(void *arg)
{
	const struct program *p = arg;
	p->fn(p->bug, p->debug);
}

/* Runs fn(bug, debug) in a child; its stderr into err; returns the wait status. */
static int run_child(void (*fn)(int, int), int bug, int debug, char *err, size_t cap)
{
	struct program p = {fn, bug, debug};
	return tu_run_child(run_program, &p, err, cap);
}

static void write_conflict_fn(int bug, int debug)
{
	(void)debug;
	write_conflict(bug);
}

static int died(int status)
{
	if (tu_sanitized()) /* the sanitizer reports the fault and exits */
		return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static int clean(int status, const char *err)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(err, "keratin:");
}

int main(int argc, char **argv)
{
	TU_ASSERT(argc == 3 && (!strcmp(argv[2], "bug") || !strcmp(argv[2], "fixed")),
		  "usage: test_debug stale-buffer|write-conflict|use-after-free bug|fixed");
	int bug = !strcmp(argv[2], "bug");
	mode_from_env = getenv("KERATIN_DEBUG_PROTECT") != NULL;
	char err[8192], want[256], want2[256];
	tu_pool_path(path, sizeof(path), "debug");
	void (*fn)(int, int);
	int faults = 1;
	if (!strcmp(argv[1], "stale-buffer")) {
		fn = stale_buffer;
		snprintf(want, sizeof(want), "keratin: debug (stale-buffer): write to the micro-buffer of object 0x");
		snprintf(want2, sizeof(want2), " + %d (of %d bytes) after its transaction ended", LATE_OFF, OBJ_SIZE);
	} else if (!strcmp(argv[1], "write-conflict")) {
		fn = write_conflict_fn;
		faults = 0;
		snprintf(want, sizeof(want), "keratin: debug (write-conflict): object 0x");
		snprintf(want2, sizeof(want2), "opened for write by two concurrent transactions");
	} else if (!strcmp(argv[1], "use-after-free")) {
		fn = use_after_free;
		snprintf(want, sizeof(want), "keratin: debug (use-after-free): access to object 0x");
		snprintf(want2, sizeof(want2), "keratin: debug (use-after-free): read of object 0x");
	} else {
		TU_FAIL("unknown program %s", argv[1]);
	}

	int status = run_child(fn, bug, 1, err, sizeof(err));
	if (!bug) {
		TU_ASSERT(clean(status, err), "the fixed program runs clean (status %#x): %s", status, err);
		printf("ok   %s fixed: clean\n", argv[1]);
		TU_END_CHECK_ALL("test_debug");
		return 0;
	}
	TU_ASSERT(faults ? died(status) : WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the buggy program %s (status %#x): %s", faults ? "must be stopped" : "must run on",
		  status, err);
	TU_ASSERT(strstr(err, want) && strstr(err, want2), "report: want '%s' and '%s', got '%s'", want,
		  want2, err);
	if (!strcmp(argv[1], "use-after-free")) { /* the pointer read names object and offset */
		snprintf(want2, sizeof(want2), " + 100 (of %d bytes)", BIG_SIZE);
		TU_ASSERT(strstr(err, want2), "the faulting read is named: want '%s', got '%s'", want2, err);
	}
	printf("ok   %s bug: reported\n%s", argv[1], err);
	/* Control: without the debug mode the same program runs on unnoticed (except a write to
	 * a freed micro-buffer under ASan, which ASan itself stops). */
	if (faults && !(fn == stale_buffer && tu_sanitized())) {
		status = run_child(fn, bug, 0, err, sizeof(err));
		TU_ASSERT(clean(status, err), "without the debug mode the bug goes unnoticed (status %#x): %s",
			  status, err);
		printf("ok   %s bug without the debug mode: unnoticed (the check above can fail)\n", argv[1]);
	}
	TU_END_CHECK_ALL("test_debug");
	return 0;
}
