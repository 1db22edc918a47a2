/*
 * test_after_commit.c - a transaction that returned stays committed, whatever the
 * application stores afterwards.
 *
 * Recovery discards a lane's newest transaction when the payload of a new object written
 * directly (a FRESH record) does not match the CRC-64 its record carries: that proves the
 * commit fence never completed, as long as nothing changed the payload after the commit
 * returned. A program may store into its objects afterwards without naming the bytes in
 * the log first: libpmemobj programs store and then persist (pmemobj_persist, kr_stored_*),
 * and until the persist nothing is logged. A process killed in between leaves the store
 * in the pool, and a commit judged torn for it would be half undone (its other changes are
 * home already) or lose its object.
 *
 * Each case runs in a child on a fresh pool: one transaction allocates an object, fills it
 * and points the root at it, commits; then the child stores a byte into the object's first
 * and last page with no persist and exits without closing (as SIGKILL would; every store
 * stays in the file). The parent reopens the pool: the root must point at the object, which
 * must be allocated with its size and bytes (the late stores kept or not: they were never
 * persisted). Then kr_pool_check with repair must take the object back to its committed
 * bytes: recovery must not recompute parity over the late stores (the new object's intent,
 * which its commit settled, nor the rest of a column it replayed into), or the object
 * fails its checksum with parity agreeing, beyond repair.
 *   - "in place": the object written in place (kr_tx_add_in_place, as keratin-pmemobj's
 *     TX_ADD of a new object), small (logged whole) and large (written home directly);
 *   - "buffered": the object written through a micro-buffer, large (written home directly);
 * in a run's block and in an extent of its own. Recovery must discard nothing.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

struct root {
	kr_oid obj;
	uint64_t marker;
};

enum { FILL = 0xdd, LATE = 0xee, MARKER = 7 };

static void child(const char *path, size_t size, int in_place)
{
	kr_pool *p;
	kr_oid root, x;
	kr_tx *tx;
	TU_OK(tu_open(path, &p));
	TU_OK(kr_root(p, sizeof(struct root), &root));
	TU_OK(kr_tx_begin(p, &tx));
	TU_OK(kr_tx_alloc(tx, size, 3, &x));
	uint8_t *b = in_place ? kr_tx_add_in_place(tx, x, 0, size) : kr_tx_add(tx, x, 0, size);
	TU_ASSERT(b, "%s", kr_errmsg());
	memset(b, FILL, size);
	struct root *r = kr_tx_open(tx, root);
	TU_ASSERT(r, "%s", kr_errmsg());
	r->obj = x;
	r->marker = MARKER;
	TU_OK(kr_tx_commit(tx));
	/* After the commit returned, not persisted: in the header's page and in the last one. */
	((uint8_t *)kr_pool_base(p) + x)[0] = LATE;
	((uint8_t *)kr_pool_base(p) + x)[size - 1] = LATE;
	_exit(0);
}

static void run_case(const char *what, size_t size, int in_place)
{
	char path[128];
	kr_pool *p;
	kr_oid root;
	tu_pool_path(path, sizeof(path), "after-commit");
	TU_OK(tu_create(path, 32 << 20, 0, 0, 0, &p));
	TU_OK(kr_root(p, sizeof(struct root), &root));
	TU_OK(kr_pool_close(p));
	fflush(stdout);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0)
		child(path, size, in_place);
	int st;
	TU_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "%s %zu: the child failed (status %#x)", what, size, st);
	TU_OK(tu_open(path, &p));
	struct kr_pool_stat ps;
	TU_OK(kr_pool_stat(p, &ps));
	/* Discarded and applied at run time already, a transaction could still look whole. */
	TU_ASSERT(ps.discarded_txs == 0, "%s %zu: recovery discarded %llu transactions", what, size,
		  (unsigned long long)ps.discarded_txs);
	TU_OK(kr_root(p, sizeof(struct root), &root));
	const struct root *r = kr_get(p, root);
	TU_ASSERT(r->marker == MARKER && r->obj, "%s %zu: the committed transaction was undone (marker %llu)",
		  what, size, (unsigned long long)r->marker);
	TU_ASSERT(kr_size(p, r->obj) == size, "%s %zu: the committed object is gone (%s)", what, size,
		  kr_errmsg());
	const uint8_t *o = (const uint8_t *)kr_pool_base(p) + r->obj;
	TU_ASSERT(o[0] == FILL || o[0] == LATE, "%s %zu: byte 0 is %#x", what, size, o[0]);
	for (size_t i = 1; i < size - 1; i++)
		TU_ASSERT(o[i] == FILL, "%s %zu: byte %zu is %#x, committed %#x", what, size, i, o[i], FILL);
	const char *late = o[0] == LATE ? "stored" : "as committed";
	/* The stores may stand under the committed checksum: a check finds them, and parity,
	 * which recovery must not have recomputed over them, takes the object back to its
	 * committed bytes. Unrepairable would fail keratin-pmemobj's open with EIO. */
	struct kr_check_report rep = {0};
	int rc = kr_pool_check(p, KR_CHECK_REPAIR, &rep);
	TU_ASSERT(rc == KR_OK, "%s %zu: after an unpersisted store and a kill, the check says %d: %s", what,
		  size, rc, kr_errmsg());
	for (size_t i = 0; i < size; i++)
		TU_ASSERT(o[i] == FILL, "%s %zu: after the check, byte %zu is %#x, committed %#x", what, size,
			  i, o[i], FILL);
	TU_DEEP_CHECK(p, "after the check");
	printf("%-8s %6zu B: committed and whole after a later store and a kill (byte 0 %s), "
	       "repaired to the committed bytes\n", what, size, late);
	TU_OK(kr_pool_close(p));
	unlink(path);
}

int main(void)
{
	run_case("in place", 300, 1);
	run_case("in place", 2048, 1);
	run_case("buffered", 2048, 0);
	run_case("in place", 100000, 1); /* an extent, not a run's block */
	run_case("buffered", 100000, 0);
	printf("test_after_commit: every transaction stayed committed\n");
	return 0;
}
