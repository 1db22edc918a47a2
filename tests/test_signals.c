/*
 * test_signals.c - keratin's SIGSEGV/SIGBUS handlers repair media errors inside pools and
 * must not swallow any other fault.
 *
 * keratin.h: "a fault inside a pool is repaired online ...; a fault anywhere else goes to
 * the handler that was installed before keratin's, or kills the process as it would have
 * without keratin." Checked here:
 *
 *   In this process, with the application's own handlers installed BEFORE the first pool
 *   is opened (SIGSEGV with SA_SIGINFO, SIGBUS with a plain handler; both siglongjmp out):
 *     1. a fault on the application's own PROT_NONE page reaches its SIGSEGV handler, with
 *        si_addr = that page; a read beyond the end of a truncated mmap'd file reaches its
 *        SIGBUS handler;
 *     2. emulated poison in the pool (kr_inject_poison) is repaired without the
 *        application's handler hearing of it, and the read returns the right bytes;
 *     3. after the pool is closed, the application's handlers still get their faults;
 *     4. the application replaces its SIGSEGV handler while no pool is open, then opens a
 *        pool: poison in it is still repaired by keratin (handlers are in place "while pools
 *        are open"), and the new handler gets the application's own faults.
 *   In forked children that set a signal to its default action (SIG_DFL, explicitly, so
 *   that a sanitizer's handler is not the "previous" one) and then create a pool (forked
 *   before this process ever opened one, so keratin installs its handlers there for the
 *   first time) or open the test's pool (forked after this process used pools):
 *     5. a load from an unmapped address outside the pool kills the child with SIGSEGV;
 *     6. a read beyond the end of a truncated mmap'd file kills it with SIGBUS;
 *     7. with SIGSEGV ignored (SIG_IGN), a fault still kills it with SIGSEGV, as the kernel
 *        does for an ignored synchronous fault without keratin (and does not loop).
 * Children have no core dumps and an alarm, so a handler that loops shows as a timeout.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define PAGE 4096
#define OBJ_SIZE (3 * PAGE)

static sigjmp_buf g_jb;
static volatile sig_atomic_t g_segv_calls, g_segv2_calls, g_bus_calls;
static void *volatile g_segv_addr;

static void app_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	g_segv_calls++;
	g_segv_addr = si->si_addr;
	siglongjmp(g_jb, 1);
}

static void app_segv2(int sig)
{
	(void)sig;
	g_segv2_calls++;
	siglongjmp(g_jb, 1);
}

static void app_bus(int sig)
{
	(void)sig;
	g_bus_calls++;
	siglongjmp(g_jb, 1);
}

static void install(int sig, void (*h)(int), void (*sa)(int, siginfo_t *, void *))
{
	struct sigaction act;
	memset(&act, 0, sizeof(act));
	sigemptyset(&act.sa_mask);
	if (sa) {
		act.sa_sigaction = sa;
		act.sa_flags = SA_SIGINFO;
	} else {
		act.sa_handler = h;
	}
	TU_ASSERT(sigaction(sig, &act, NULL) == 0, "sigaction");
}

/* ---- faults of the application's own -------------------------------------------------------- */

static char *g_noaccess; /* a PROT_NONE page */
static char g_trunc_path[128];
static char *g_trunc_map; /* two pages mapped over a one-page file */

static void make_fault_sites(void)
{
	g_noaccess = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TU_ASSERT(g_noaccess != MAP_FAILED, "mmap");
	tu_pool_path(g_trunc_path, sizeof(g_trunc_path), "signals-trunc"); /* removed at exit */
	int fd = open(g_trunc_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	TU_ASSERT(fd >= 0 && ftruncate(fd, 2 * PAGE) == 0, "file for SIGBUS");
	g_trunc_map = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	TU_ASSERT(g_trunc_map != MAP_FAILED, "mmap");
	TU_ASSERT(ftruncate(fd, PAGE) == 0, "ftruncate");
	close(fd);
}

/* Touches the PROT_NONE page; returns 1 if a handler jumped out. */
static int own_segv(void)
{
	if (sigsetjmp(g_jb, 1))
		return 1;
	(void)*(volatile char *)(g_noaccess + 100);
	return 0;
}

static int own_bus(void)
{
	if (sigsetjmp(g_jb, 1))
		return 1;
	(void)*(volatile char *)(g_trunc_map + PAGE + 8);
	return 0;
}

static void expect_own_faults(const char *when, bool segv2)
{
	int s0 = g_segv_calls, s2 = g_segv2_calls, b0 = g_bus_calls;
	TU_ASSERT(own_segv(), "%s: the access to a PROT_NONE page did not fault", when);
	if (segv2) {
		TU_ASSERT(g_segv2_calls == s2 + 1 && g_segv_calls == s0,
			  "%s: the application's current SIGSEGV handler was not called (new %u, "
			  "old %u calls)",
			  when, (unsigned)(g_segv2_calls - s2), (unsigned)(g_segv_calls - s0));
	} else {
		TU_ASSERT(g_segv_calls == s0 + 1,
			  "%s: the application's SIGSEGV handler was not called", when);
		TU_ASSERT(g_segv_addr == g_noaccess + 100, "%s: si_addr %p, expected %p", when,
			  g_segv_addr, (void *)(g_noaccess + 100));
	}
	TU_ASSERT(own_bus(), "%s: the read beyond the truncated file did not fault", when);
	TU_ASSERT(g_bus_calls == b0 + 1, "%s: the application's SIGBUS handler was not called",
		  when);
}

/* ---- a pool with one object to poison ------------------------------------------------------- */

static char g_path[128];
static uint8_t g_obj[OBJ_SIZE];

static void make_pool(void)
{
	kr_pool *pool;
	kr_oid root, oid;
	kr_tx *tx;
	tu_pool_path(g_path, sizeof(g_path), "signals");
	TU_OK(tu_create(g_path, 8ull << 20, 0, 0, 0, &pool));
	TU_OK(kr_root(pool, sizeof(kr_oid), &root));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, OBJ_SIZE, 1, &oid));
	uint8_t *p = kr_tx_open(tx, oid);
	TU_ASSERT(p, "kr_tx_open: %s", kr_errmsg());
	tu_fill(g_obj, sizeof(g_obj), 4711);
	memcpy(p, g_obj, sizeof(g_obj));
	kr_oid *r = kr_tx_open(tx, root);
	TU_ASSERT(r, "kr_tx_open(root): %s", kr_errmsg());
	*r = oid;
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));
}

static kr_oid the_object(kr_pool *pool)
{
	kr_oid root;
	TU_OK(kr_root(pool, sizeof(kr_oid), &root));
	return *(const kr_oid *)kr_get(pool, root);
}

/* Poisons the object's middle page and reads it: right bytes, one repair, and no call to
 * any application handler. A failure is printed and counted (the remaining cases still
 * run). */
static unsigned g_fail;

static void poison_and_read(kr_pool *pool, const char *when)
{
	kr_oid oid = the_object(pool);
	uint64_t page = (oid + PAGE) & ~(uint64_t)(PAGE - 1);
	struct kr_pool_stat st0, st1;
	int s0 = g_segv_calls, s2 = g_segv2_calls;
	TU_OK(kr_pool_stat(pool, &st0));
	TU_OK(kr_inject_poison(pool, page));
	if (sigsetjmp(g_jb, 1)) {
		printf("  FAIL %s: poison inside the pool (page %#llx) went to the application's "
		       "%s handler instead of being repaired\n",
		       when, (unsigned long long)page,
		       g_segv2_calls != s2  ? "replacement SIGSEGV"
		       : g_segv_calls != s0 ? "SIGSEGV"
					    : "SIGBUS");
		g_fail++;
		return;
	}
	const uint8_t *p = kr_get(pool, oid);
	TU_ASSERT(p && memcmp(p, g_obj, sizeof(g_obj)) == 0,
		  "%s: the object reads wrong after its page was poisoned", when);
	TU_OK(kr_pool_stat(pool, &st1));
	TU_ASSERT(st1.media_repairs == st0.media_repairs + 1, "%s: media_repairs %llu -> %llu",
		  when, (unsigned long long)st0.media_repairs,
		  (unsigned long long)st1.media_repairs);
	TU_DEEP_CHECK(pool, when);
}

/* ---- children ------------------------------------------------------------------------------- */

enum child_case { C_SEGV, C_BUS, C_SEGV_IGN };
static const char *child_name[] = { "SIGSEGV outside the pool, default action",
				    "SIGBUS outside the pool, default action",
				    "SIGSEGV outside the pool, SIGSEGV ignored" };

/* fresh: the child creates a pool of its own, so keratin installs its handlers for the
 * first time in a process whose disposition is the one just set; otherwise it opens the
 * test's pool in a process forked after pools were used. */
static void run_child(enum child_case c, bool fresh)
{
	char path[128];
	if (fresh)
		tu_pool_path(path, sizeof(path), "signals-child"); /* the parent removes it */
	fflush(stdout);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		struct rlimit nocore = { 0, 0 };
		setrlimit(RLIMIT_CORE, &nocore);
		alarm(8); /* a handler that loops on the fault dies of SIGALRM instead */
		struct sigaction act;
		memset(&act, 0, sizeof(act));
		sigemptyset(&act.sa_mask);
		act.sa_handler = c == C_SEGV_IGN ? SIG_IGN : SIG_DFL;
		sigaction(c == C_BUS ? SIGBUS : SIGSEGV, &act, NULL);
		kr_pool *pool;
		if ((fresh ? tu_create(path, 8ull << 20, 0, 0, 0, &pool)
			   : tu_open(g_path, &pool)) != KR_OK)
			_exit(10);
		if (c == C_BUS) {
			(void)*(volatile char *)(g_trunc_map + PAGE + 8);
		} else {
			char *gone =
				mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (gone == MAP_FAILED || munmap(gone, PAGE) != 0)
				_exit(11);
			(void)*(volatile char *)(gone + 16);
		}
		_exit(12); /* survived the fault */
	}
	int st;
	TU_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
	int want = c == C_BUS ? SIGBUS : SIGSEGV;
	if (WIFSIGNALED(st) && WTERMSIG(st) == want)
		return;
	g_fail++;
	if (WIFSIGNALED(st))
		printf("  FAIL child (%s, %s) died of signal %d (%s), expected %s\n", child_name[c],
		       fresh ? "fresh process" : "forked after pools were used", WTERMSIG(st),
		       strsignal(WTERMSIG(st)), strsignal(want));
	else
		printf("  FAIL child (%s, %s) exited with status %d (10: open failed, 11: mmap, "
		       "12: "
		       "survived the fault), expected death by %s\n",
		       child_name[c], fresh ? "fresh process" : "forked after pools were used",
		       WEXITSTATUS(st), strsignal(want));
}

int main(void)
{
	tu_seed("test_signals", 0); /* deterministic; printed for uniformity */
	double t0 = tu_now();
	kr_pool *pool;
	make_fault_sites();

	/* Children first, while this process has never installed keratin's handlers. */
	for (int c = C_SEGV; c <= C_SEGV_IGN; c++)
		run_child((enum child_case)c, true);

	/* The application's handlers come first, before keratin's first pool. */
	install(SIGSEGV, NULL, app_segv);
	install(SIGBUS, app_bus, NULL);
	expect_own_faults("before any pool is open", false);
	make_pool();
	expect_own_faults("after a pool was created and closed", false);
	TU_OK(tu_open(g_path, &pool));
	expect_own_faults("with a pool open", false);
	poison_and_read(pool, "with the application's handlers installed first");
	expect_own_faults("with a pool open, after an online repair", false);
	TU_OK(kr_pool_close(pool));
	expect_own_faults("after the pool was closed", false);

	/* A new application handler while no pool is open; then a pool again. */
	install(SIGSEGV, app_segv2, NULL);
	TU_OK(tu_open(g_path, &pool));
	poison_and_read(pool, "a pool opened after the application replaced its handler");
	expect_own_faults("with the replacement handler and a pool open", true);
	TU_OK(kr_pool_close(pool));

	for (int c = C_SEGV; c <= C_SEGV_IGN; c++)
		run_child((enum child_case)c, false);
	printf("test_signals: %u case(s) failed; in %.2fs\n", g_fail, tu_now() - t0);
	TU_END_CHECK_ALL("test_signals");
	return g_fail ? 1 : 0;
}
