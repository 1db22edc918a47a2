/*
 * test_readonly.c - KR_OPEN_READONLY: inspection changes no byte of the file.
 *
 *   crash:   a pool left by a writer that never closed it (its log must be replayed) opens
 *            read-only: reads and kr_pool_check see every committed transaction, and the
 *            file is byte-identical afterwards; a read-write open then recovers it for real.
 *   badblock: a listed bad page is repaired in the view (the check is clean) while the file
 *            keeps the damage and the list stays.
 *   misuse:  transactions, the root's creation, KR_CHECK_REPAIR and poison injection are
 *            refused with KR_E_MISUSE_STATE; a writer and a reader exclude each other;
 *            several readers do not.
 *   perm:    as an unprivileged user, a mode 0444 pool opens read-only and not read-write.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define NOBJ 40

static void digest(const char *path, uint32_t *crc, size_t *len)
{
	void *buf = tu_read_file(path, len);
	*crc = tu_crc32c(buf, *len);
	free(buf);
}

static void expect_unchanged(const char *path, uint32_t crc, size_t len, const char *when)
{
	uint32_t c;
	size_t l;
	digest(path, &c, &l);
	TU_ASSERT(c == crc && l == len, "%s: the file changed (crc %08x -> %08x)", when, crc, c);
}

static int open_ro(const char *path, kr_pool **pool)
{
	return kr_pool_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, pool);
}

/* A pool with NOBJ objects listed in the root, object i filled from seed i; written by a
 * child that exits without closing, so that the last transactions live only in the log. */
static void make_crashed_pool(const char *path)
{
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		kr_pool *pool;
		TU_OK(tu_create(path, 16ull << 20, 0, 0, 0, &pool));
		kr_oid root;
		TU_OK(kr_root(pool, NOBJ * sizeof(kr_oid), &root));
		for (unsigned i = 0; i < NOBJ; i++) {
			kr_tx *tx;
			TU_OK(kr_tx_begin(pool, &tx));
			kr_oid *slot = kr_tx_add(tx, root, i * sizeof(kr_oid), sizeof(kr_oid));
			TU_ASSERT(slot, "add: %s", kr_errmsg());
			TU_OK(kr_tx_alloc(tx, 200 + i, 1, slot));
			void *p = kr_tx_open(tx, *slot);
			TU_ASSERT(p, "open: %s", kr_errmsg());
			tu_fill(p, 200 + i, i);
			TU_OK(kr_tx_commit(tx));
		}
		_exit(0); /* no close: recovery must replay what the log still holds */
	}
	int st;
	waitpid(pid, &st, 0);
	TU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer failed");
}

static void expect_objects(kr_pool *pool, const char *when)
{
	kr_oid root;
	TU_OK(kr_root(pool, NOBJ * sizeof(kr_oid), &root));
	const kr_oid *oids = kr_get(pool, root);
	TU_ASSERT(oids, "%s: no root", when);
	uint8_t want[256];
	for (unsigned i = 0; i < NOBJ; i++) {
		const void *p = kr_get(pool, oids[i]);
		TU_ASSERT(p, "%s: object %u missing", when, i);
		tu_fill(want, 200 + i, i);
		TU_ASSERT(memcmp(p, want, 200 + i) == 0, "%s: object %u differs", when, i);
	}
	TU_DEEP_CHECK(pool, when);
}

static void test_crash(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "ro-crash");
	make_crashed_pool(path);
	uint32_t crc;
	size_t len;
	digest(path, &crc, &len);
	for (int round = 0; round < 2; round++) { /* twice: the first must not have "fixed" it */
		kr_pool *pool;
		TU_OK(open_ro(path, &pool));
		struct kr_pool_stat st;
		TU_OK(kr_pool_stat(pool, &st));
		TU_ASSERT(st.readonly && st.recovered, "readonly %d, recovered %d", st.readonly,
			  st.recovered);
		expect_objects(pool, "read-only view");
		TU_OK(kr_pool_close(pool));
		expect_unchanged(path, crc, len, "after a read-only open of a crashed pool");
	}
	kr_pool *pool;
	TU_OK(tu_open(path, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(!st.readonly && st.recovered, "the read-write open did not recover");
	expect_objects(pool, "read-write");
	TU_OK(kr_pool_close(pool));
	printf("crash: a crashed pool inspected twice, unchanged; then recovered read-write\n");
}

static void test_badblock(void)
{
	char path[128], bb[160];
	tu_pool_path(path, sizeof(path), "ro-bad");
	make_crashed_pool(path);
	kr_pool *pool;
	TU_OK(tu_open(path, &pool)); /* a clean pool first */
	kr_oid root;
	TU_OK(kr_root(pool, NOBJ * sizeof(kr_oid), &root));
	uint64_t victim = ((const kr_oid *)kr_get(pool, root))[NOBJ / 2] & ~4095ull;
	TU_OK(kr_pool_close(pool));
	uint8_t junk[4096];
	tu_fill(junk, sizeof(junk), 99);
	tu_pwrite(path, junk, sizeof(junk), victim);
	TU_OK(kr_badblocks_add(path, victim));
	snprintf(bb, sizeof(bb), "%s.badblocks", path);
	uint32_t crc, bcrc;
	size_t len, blen;
	digest(path, &crc, &len);
	digest(bb, &bcrc, &blen);
	TU_OK(open_ro(path, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(st.media_repairs == 1, "%llu pages repaired in the view, want 1",
		  (unsigned long long)st.media_repairs);
	expect_objects(pool, "read-only view of a repaired bad block");
	TU_OK(kr_pool_close(pool));
	expect_unchanged(path, crc, len, "after a read-only open with a bad block");
	expect_unchanged(bb, bcrc, blen, "the bad-block list");
	TU_OK(tu_open(path, &pool));
	expect_objects(pool, "read-write repair");
	TU_OK(kr_pool_close(pool));
	TU_ASSERT(access(bb, F_OK) != 0, "the read-write open left the bad-block list");
	printf("badblock: repaired in the view only; the read-write open repaired the file\n");
}

static void test_misuse(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "ro-misuse");
	kr_pool *pool, *other;
	TU_OK(tu_create(path, 16ull << 20, 0, 0, 0, &pool));
	TU_OK(kr_pool_close(pool));
	TU_OK(open_ro(path, &pool));
	kr_tx *tx;
	kr_oid root;
	TU_ASSERT(kr_tx_begin(pool, &tx) == KR_E_MISUSE_STATE, "kr_tx_begin: %s", kr_errmsg());
	TU_ASSERT(strstr(kr_errmsg(), "read-only"), "message: %s", kr_errmsg());
	TU_ASSERT(kr_root(pool, 64, &root) == KR_E_MISUSE_STATE, "kr_root: %s", kr_errmsg());
	struct kr_check_report rep = {0};
	TU_ASSERT(kr_pool_check(pool, KR_CHECK_REPAIR, &rep) == KR_E_MISUSE_STATE,
		  "repair: %s", kr_errmsg());
	TU_ASSERT(kr_inject_poison(pool, 1 << 20) == KR_E_MISUSE_STATE, "poison: %s", kr_errmsg());
	TU_OK(open_ro(path, &other)); /* readers share */
	TU_OK(kr_pool_close(other));
	TU_ASSERT(tu_open(path, &other) == KR_E_IO_BUSY, "a writer opened beside a reader");
	TU_OK(kr_pool_close(pool));
	TU_OK(tu_open(path, &pool));
	TU_ASSERT(open_ro(path, &other) == KR_E_IO_BUSY, "a reader opened beside a writer");
	TU_OK(kr_pool_close(pool));
	printf("misuse: every change refused on a read-only pool; readers and writers exclude\n");
}

static void test_perm(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "ro-perm");
	make_crashed_pool(path);
	TU_ASSERT(chmod(path, 0444) == 0, "chmod");
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
			_exit(2);
		kr_pool *pool;
		if (tu_open(path, &pool) != KR_E_IO_OPEN)
			_exit(3);
		if (open_ro(path, &pool) != KR_OK)
			_exit(4);
		expect_objects(pool, "0444, unprivileged");
		_exit(kr_pool_close(pool) == KR_OK ? 0 : 5);
	}
	int st;
	waitpid(pid, &st, 0);
	TU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unprivileged reader: status %d", st);
	printf("perm: a 0444 pool inspected by an unprivileged user\n");
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	test_crash();
	test_badblock();
	test_misuse();
	test_perm();
	TU_END_CHECK_ALL("test_readonly");
	return 0;
}
