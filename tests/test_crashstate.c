/*
 * test_crashstate.c - kr_debug_crash_states: an application's invariant checked at every
 * persist point of keratin's commit protocol.
 *
 * The application moves 10 units from account a to account b of its root object; its
 * invariant is a + b == 100.
 *   test_crashstate bug         the move is two transactions (a -= 10; then b += 10): a
 *                               crash between them loses 10 units. Must fail, first at the
 *                               commit fence of the first transaction, on the image where
 *                               its lines persisted (the durable-only image there is the
 *                               state before, which is consistent).
 *   test_crashstate fixed       the move is one transaction: every image passes.
 *   test_crashstate wrongcheck  the fixed move, checked by a wrong invariant (b == 10: the
 *                               state before the move is consistent too): must fail at the
 *                               first persist point, on the durable-only image.
 * Each also checks the report's counts against a run of the same operation without the
 * check (persist points = the fences the operation and the close issue).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

struct accounts {
	int64_t a, b;
};

static int move_split(kr_pool *pool, void *arg)
{
	(void)arg;
	kr_oid root;
	int rc = kr_root(pool, sizeof(struct accounts), &root);
	const struct accounts *cur = rc ? NULL : KR_GET(pool, root, struct accounts);
	if (!cur)
		return kr_errcode();
	int64_t a = cur->a - 10, b = cur->b + 10;
	if ((rc = kr_update(pool, root, offsetof(struct accounts, a), &a, sizeof(a))))
		return rc;
	return kr_update(pool, root, offsetof(struct accounts, b), &b, sizeof(b));
}

static int move_whole(kr_pool *pool, void *arg)
{
	(void)arg;
	kr_oid root;
	kr_tx *tx;
	int rc = kr_root(pool, sizeof(struct accounts), &root);
	if (rc || (rc = kr_tx_begin(pool, &tx)))
		return rc;
	struct accounts *acc = KR_TX_OPEN(tx, root, struct accounts);
	if (acc) {
		acc->a -= 10;
		acc->b += 10;
	}
	return kr_tx_commit(tx);
}

static int check_sum(kr_pool *pool, void *arg)
{
	(void)arg;
	kr_oid root;
	const struct accounts *acc;
	if (kr_root(pool, sizeof(struct accounts), &root) || !(acc = KR_GET(pool, root, struct accounts))) {
		fprintf(stderr, "check: no root: %s\n", kr_errmsg());
		return 1;
	}
	if (acc->a + acc->b == 100)
		return 0;
	fprintf(stderr, "check: a %lld + b %lld != 100\n", (long long)acc->a, (long long)acc->b);
	return 1;
}

static int check_wrong(kr_pool *pool, void *arg)
{
	(void)arg;
	kr_oid root;
	const struct accounts *acc;
	if (kr_root(pool, sizeof(struct accounts), &root) || !(acc = KR_GET(pool, root, struct accounts)))
		return 1;
	return acc->b == 10 ? 0 : 1;
}

/* A fresh pool holding a = 100, b = 0. */
static void make_pool(const char *path)
{
	kr_pool *pool;
	kr_oid root;
	unlink(path);
	TU_OK(tu_create(path, 8u << 20, 0, 0, 0, &pool));
	TU_OK(kr_root(pool, sizeof(struct accounts), &root));
	struct accounts init = {100, 0};
	TU_OK(kr_update(pool, root, 0, &init, sizeof(init)));
	TU_OK(kr_pool_close(pool));
}

/* The fences op and the close issue, counted without the crash-state check. */
static uint64_t fences_of(const char *path, kr_crash_op_fn op)
{
	kr_pool *pool;
	make_pool(path);
	TU_OK(tu_open(path, &pool));
	struct kr_counters c0, c1;
	kr_counters_get(&c0);
	TU_OK(op(pool, NULL));
	TU_OK(kr_pool_close(pool));
	kr_counters_get(&c1);
	return c1.fences - c0.fences;
}

int main(int argc, char **argv)
{
	TU_ASSERT(argc == 2, "usage: test_crashstate bug|fixed|wrongcheck");
	const char *mode = argv[1];
	int bug = !strcmp(mode, "bug"), wrong = !strcmp(mode, "wrongcheck");
	TU_ASSERT(bug || wrong || !strcmp(mode, "fixed"), "unknown mode %s", mode);
	kr_crash_op_fn op = bug ? move_split : move_whole;
	kr_crash_check_fn check = wrong ? check_wrong : check_sum;
	char path[128];
	tu_pool_path(path, sizeof(path), "crashstate");

	uint64_t fences = fences_of(path, op);
	make_pool(path);
	struct kr_crash_report rep = KR_CRASH_REPORT_INIT;
	int rc = kr_debug_crash_states(path, KR_OPEN_FORCE_PMEM, op, check, NULL, &rep);
	printf("%s: %llu persist points, %llu images, %llu failures; rc %d (%s)\n", mode,
	       (unsigned long long)rep.persist_points, (unsigned long long)rep.images,
	       (unsigned long long)rep.failures, rc, kr_strerror(rc));
	if (rep.failures)
		printf("  first: %s\n", rep.first_failure);
	TU_ASSERT(rep.persist_points == fences, "persist points %llu = the operation's fences %llu",
		  (unsigned long long)rep.persist_points, (unsigned long long)fences);
	TU_ASSERT(rep.images >= 2 && rep.images <= 2 * rep.persist_points, "two images per point at most");
	if (!bug && !wrong) {
		TU_ASSERT(rc == KR_OK && rep.failures == 0, "the one-transaction move passes");
	} else {
		TU_ASSERT(rc == KR_E_CORRUPT && rep.failures > 0, "the %s must fail", mode);
		TU_ASSERT(rep.first_commit == 1 && rep.first_all == bug,
			  "first failure in commit 1 on the %s image (got commit %llu, all %d)",
			  bug ? "all-pending" : "durable-only", (unsigned long long)rep.first_commit,
			  rep.first_all);
		TU_ASSERT(strstr(rep.first_failure, "fails the check"), "the check said no: %s",
			  rep.first_failure);
	}
	/* The pool itself went through the operation: a + b = 100 there too, b = 10. */
	kr_pool *pool;
	kr_oid root;
	TU_OK(tu_open(path, &pool));
	TU_OK(kr_root(pool, sizeof(struct accounts), &root));
	const struct accounts *acc = KR_GET(pool, root, struct accounts);
	TU_ASSERT(acc->a == 90 && acc->b == 10, "the operation ran once on the pool");
	TU_OK(kr_pool_close(pool));
	printf("ok   %s\n", mode);
	TU_END_CHECK_ALL("test_crashstate");
	return 0;
}
