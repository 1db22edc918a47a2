/*
 * test_oldformat.c - pools written by the code of the previous on-media format open and work
 * with this build, and stay writable by that code. The fixtures are real files from that
 * build (tests/fixtures/README.md: what wrote them and how to make them again), made before
 * the fresh frontier: header ro_compat 0xf (no FRESH bit), bytes 16..63 of the control
 * pages' log line reserved and zero.
 *   pool-v1-prefresh.kr.gz          closed cleanly; its root names four objects of 64 B,
 *                                   4 KiB, 40 KiB and 300 B (types 1..4) filled with
 *                                   pattern(); a freed 48 KiB object's bytes lie in free space.
 *   pool-v1-prefresh-crashed.kr.gz  the same pool, then one more committed transaction (the
 *                                   4 KiB object's first 100 bytes set to 0xee) and SIGKILL
 *                                   before any close: recovery's work.
 * Each case runs on a fresh decompressed copy of each fixture:
 *   readonly: KR_OPEN_READONLY sees the root and every object (the crashed copy recovered in
 *             its private view), passes the deep check, and leaves every byte of the file
 *             as it was.
 *   write:    opened for writing (the crashed copy recovered), the objects are there; a
 *             session allocates (zeros, also where the freed object's bytes lie),
 *             overwrites, frees and closes; after a reopen the changes are there and the
 *             deep check passes; after every close the header copies are still the ones the
 *             old build wrote (no FRESH bit) and the log line's reserved bytes still zero,
 *             so the old build can still write the pool.
 * Usage: test_oldformat FIXTURE_DIR (the gzip program decompresses the fixtures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "testutil.h"

#define NOBJ 4
/* The root object the fixture's writer stored (all little-endian). */
struct fixture_root {
	char magic[32];
	uint64_t n;
	uint64_t oid[NOBJ];
	uint64_t size[NOBJ];
};
static const char root_magic[] = "keratin pool-v1-prefresh";
static const size_t sizes[NOBJ] = {64, 4096, 40960, 300};
#define FREED_SIZE 49152 /* the object the writer allocated, filled and freed */
#define CRASH_BYTES 100  /* the crashed copy's last transaction: 0xee over these of object 1 */
/* The write case's overwrite of object 2 (40 KiB). */
#define OVER_OFF 1000
#define OVER_LEN 5000
#define OVER_VAL 0x5a

static const char *fixture_dir;

/* Byte i of a fixture object of size bytes (fixtures/README.md gives the same formula). */
static uint8_t pattern(size_t size, size_t i)
{
	return (uint8_t)(size / 64 + i * 7 + (i >> 8));
}

/* Decompresses fixture name into a new pool path (path: 128 bytes); returns its bytes
 * (malloc'd) and their count in *len. */
static uint8_t *unpack(const char *name, char path[128], size_t *len)
{
	char cmd[1024];
	tu_pool_path(path, 128, "oldformat");
	snprintf(cmd, sizeof(cmd), "gzip -dc -- '%s/%s' > '%s'", fixture_dir, name, path);
	TU_ASSERT(system(cmd) == 0, "could not decompress %s/%s", fixture_dir, name);
	uint8_t *bytes = tu_read_file(path, len);
	TU_ASSERT(*len == 8u << 20, "%s: %zu bytes, expected the 8 MiB the old build made", name, *len);
	return bytes;
}

/* Object k of the fixture at oid, as the old build wrote it (crashed: with the last
 * transaction; session: with the write case's overwrite of object 2). */
static void expect_object(kr_pool *pool, kr_oid oid, int k, int crashed, int session, const char *when)
{
	TU_ASSERT(kr_size(pool, oid) == sizes[k], "%s: object %d: size %zu, expected %zu", when, k,
		  kr_size(pool, oid), sizes[k]);
	TU_ASSERT(kr_type(pool, oid) == (uint32_t)k + 1, "%s: object %d: type %u", when, k,
		  kr_type(pool, oid));
	const uint8_t *p = kr_get(pool, oid);
	TU_ASSERT(p, "%s: object %d: %s", when, k, kr_errmsg());
	for (size_t i = 0; i < sizes[k]; i++) {
		uint8_t want = pattern(sizes[k], i);
		if (k == 1 && crashed && i < CRASH_BYTES)
			want = 0xee;
		if (k == 2 && session && i >= OVER_OFF && i < OVER_OFF + OVER_LEN)
			want = OVER_VAL;
		TU_ASSERT(p[i] == want, "%s: object %d byte %zu is %#x, expected %#x", when, k, i, p[i],
			  want);
	}
}

/* The fixture's root, naming its objects (the caller checks them). */
static const struct fixture_root *expect_root(kr_pool *pool, const char *when)
{
	kr_oid r;
	TU_OK(kr_root(pool, 0, &r));
	const struct fixture_root *root = kr_get(pool, r);
	TU_ASSERT(root, "%s: kr_get(root): %s", when, kr_errmsg());
	TU_ASSERT(kr_size(pool, r) == sizeof(*root), "%s: root of %zu bytes", when, kr_size(pool, r));
	TU_ASSERT(!memcmp(root->magic, root_magic, sizeof(root_magic)) && root->n == NOBJ,
		  "%s: the root is not the fixture's", when);
	for (int k = 0; k < NOBJ; k++)
		TU_ASSERT(root->size[k] == sizes[k], "%s: the root gives object %d %llu bytes", when, k,
			  (unsigned long long)root->size[k]);
	return root;
}

/* The root and every object as the old build wrote them; the live objects are those and
 * no more. Returns the root. */
static const struct fixture_root *expect_fixture(kr_pool *pool, int crashed, const char *when)
{
	const struct fixture_root *root = expect_root(pool, when);
	for (int k = 0; k < NOBJ; k++)
		expect_object(pool, root->oid[k], k, crashed, 0, when);
	unsigned n = 0;
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o))
		n++;
	TU_ASSERT(n == NOBJ + 1, "%s: %u live objects, expected the root and %d", when, n, NOBJ);
	return root;
}

/* The file is still in the previous format: both header copies as the old build wrote
 * them (old: the fixture's bytes), both log lines' bytes 16..63 zero (reserved there). */
static void expect_old_format(const char *path, const uint8_t *old, const char *when)
{
	struct kr_pool_hdr h;
	tu_pread(path, &h, sizeof(h), 0);
	TU_ASSERT(!(h.ro_compat & KR_FEAT_RO_FRESH), "%s: the pool gained the FRESH bit", when);
	TU_ASSERT(!memcmp(&h, old, sizeof(h)), "%s: the header differs from the old build's", when);
	uint8_t copy[sizeof(h)];
	tu_pread(path, copy, sizeof(copy), h.pool_size - KR_PAGE_SIZE);
	TU_ASSERT(!memcmp(copy, old + h.pool_size - KR_PAGE_SIZE, sizeof(copy)), "%s: the header copy differs from the old build's",
		  when);
	static const uint8_t zeros[KR_LINE_SIZE];
	const size_t rsv = offsetof(struct kr_log_line, fresh_word);
	for (int i = 0; i < 2; i++) {
		uint8_t line[KR_LINE_SIZE];
		tu_pread(path, line, sizeof(line),
			 (i ? h.ctl_replica_off : h.ctl_off) + KR_CTL_LOG_LINE * KR_LINE_SIZE);
		TU_ASSERT(!memcmp(line + rsv, zeros, sizeof(line) - rsv),
			  "%s: control copy %d: the log line's reserved bytes are not zero", when, i);
	}
}

/* The pool has the redundancy of full protection and nothing else; writable as asked. */
static void expect_stat(kr_pool *pool, int readonly, int recovered, const char *when)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(st.features == 0xf, "%s: features %#x, expected 0xf", when, st.features);
	TU_ASSERT(st.readonly == readonly, "%s: readonly %d", when, st.readonly);
	TU_ASSERT(st.recovered == recovered, "%s: recovered %d, expected %d", when, st.recovered,
		  recovered);
}

static void case_readonly(const char *name, int crashed)
{
	char path[128];
	size_t len;
	kr_pool *pool;
	uint8_t *before = unpack(name, path, &len);
	TU_OK(kr_pool_open(path, KR_OPEN_READONLY | KR_OPEN_FORCE_PMEM, &pool));
	expect_stat(pool, 1, crashed, "read-only");
	expect_fixture(pool, crashed, "read-only");
	TU_DEEP_CHECK(pool, "read-only");
	TU_OK(kr_pool_close(pool));
	size_t n;
	uint8_t *after = tu_read_file(path, &n);
	TU_ASSERT(n == len && !memcmp(before, after, len), "%s: a read-only open changed the file", name);
	free(after);
	free(before);
	printf("readonly %s: objects read, deep check passed, file unchanged\n", name);
}

static void case_write(const char *name, int crashed)
{
	char path[128];
	size_t len;
	kr_pool *pool;
	kr_tx *tx;
	uint8_t *old = unpack(name, path, &len);
	TU_OK(tu_open(path, &pool));
	expect_stat(pool, 0, crashed, "opened for writing");
	struct fixture_root root = *expect_fixture(pool, crashed, "opened for writing");
	TU_DEEP_CHECK(pool, "opened for writing");
	kr_oid fresh[3] = {tu_alloc_zeros(pool, FREED_SIZE), tu_alloc_zeros(pool, 100),
			   tu_alloc_zeros(pool, 64 << 10)};
	/* The first took the freed object's chunks (an oid is a file offset): its zeros were
	 * not there to be had for free. */
	size_t held = 0;
	for (size_t i = 0; i < FREED_SIZE; i++)
		held += old[fresh[0] + i] != 0;
	TU_ASSERT(held > FREED_SIZE / 2, "the first allocation took space that held no data (%zu bytes)",
		  held);
	/* The old pool keeps its size classes (no FINE_CLASSES bit): 4150 bytes and the header
	 * take a 5120-byte block there, 4672 in a new pool (test_basic's accounting). */
	struct kr_pool_stat st0, st1;
	TU_OK(kr_pool_stat(pool, &st0));
	kr_oid odd = tu_alloc_zeros(pool, 4150);
	TU_OK(kr_pool_stat(pool, &st1));
	TU_ASSERT(st1.used_bytes - st0.used_bytes == 5120, "a 4150-byte object took %llu bytes",
		  (unsigned long long)(st1.used_bytes - st0.used_bytes));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, odd));
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *buf = kr_tx_add(tx, root.oid[2], OVER_OFF, OVER_LEN);
	TU_ASSERT(buf, "kr_tx_add: %s", kr_errmsg());
	memset(buf, OVER_VAL, OVER_LEN);
	TU_OK(kr_tx_free(tx, root.oid[0]));
	TU_OK(kr_tx_free(tx, fresh[1]));
	TU_OK(kr_tx_commit(tx));
	TU_DEEP_CHECK(pool, "after the session");
	TU_OK(kr_pool_close(pool));
	expect_old_format(path, old, "the session closed");

	TU_OK(tu_open(path, &pool));
	expect_stat(pool, 0, 0, "reopened");
	expect_root(pool, "reopened");
	TU_ASSERT(kr_size(pool, root.oid[0]) == 0, "the freed 64-byte object is still there");
	for (int k = 1; k < NOBJ; k++)
		expect_object(pool, root.oid[k], k, crashed, 1, "reopened");
	TU_ASSERT(kr_size(pool, fresh[0]) == FREED_SIZE && kr_size(pool, fresh[1]) == 0 &&
		  kr_size(pool, fresh[2]) == 64 << 10, "the session's allocations and frees are not all there");
	TU_DEEP_CHECK(pool, "reopened");
	TU_OK(kr_pool_close(pool));
	expect_old_format(path, old, "reopened and closed");
	free(old);
	printf("write %s: objects read, a session allocated zeros, overwrote and freed; still the "
	       "previous format\n", name);
}

int main(int argc, char **argv)
{
	TU_ASSERT(argc == 2, "usage: %s FIXTURE_DIR", argv[0]);
	fixture_dir = argv[1];
	tu_seed("test_oldformat", 0); /* deterministic; printed for uniformity */
	static const char *const names[2] = {"pool-v1-prefresh.kr.gz", "pool-v1-prefresh-crashed.kr.gz"};
	for (int crashed = 0; crashed < 2; crashed++) {
		case_readonly(names[crashed], crashed);
		case_write(names[crashed], crashed);
	}
	TU_END_CHECK_ALL("test_oldformat");
	return 0;
}
