/*
 * test_canary.c - a micro-buffer overrun aborts the transaction and leaves the pool exactly
 * as it was.
 *
 * kr_tx_open / kr_tx_add hand out a DRAM buffer that mirrors the whole object; the library
 * keeps a canary right after its last byte. An application that writes one byte past the
 * end (buf[size] for kr_tx_open, p[size - off] for kr_tx_add at off) has scribbled, and
 * none of its transaction may reach the pool: kr_tx_commit must return KR_E_CANARY.
 *
 * A pool with objects of many sizes (1 byte to a multi-chunk extent) is built and closed;
 * its file bytes are kept. First, an open/close cycle without transactions must leave the
 * file byte-for-byte unchanged (otherwise the comparisons below would mean nothing). Then,
 * in one open of the pool, each case copies the whole mapping, runs one transaction that
 * overruns one buffer and must fail to commit with KR_E_CANARY, and compares the mapping
 * with the copy (nothing written, not even to the lanes) and the live set with the one
 * before. Cases:
 *   - kr_tx_open of an existing object of each size, legitimate changes, then buf[size];
 *   - kr_tx_add of a sub-range, then the byte past the object's end through that pointer;
 *   - an overrun in one of several objects of a transaction that also allocates, frees and
 *     changes others: no allocation appears, the freed object stays live;
 *   - a freshly allocated object's buffer overrun (small, run-sized and extent-sized);
 * then the pool is closed and the file must equal the pristine bytes. Finally, controls:
 * after a failed commit the same thread begins and commits new transactions, and writing
 * the last byte (buf[size - 1]) of each object commits fine.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const size_t sizes[] = { 1, 7, 8, 9, 100, 4095, 4096, 5000, 70000 };
#define NOBJ (sizeof(sizes) / sizeof(sizes[0]))

static char g_path[128];
static uint8_t *g_img;
static size_t g_len;
static kr_oid g_oid[NOBJ];
static unsigned g_cases;

/* The file must equal the pristine bytes; names the first difference. */
static void expect_file_pristine(const char *when)
{
	size_t len;
	uint8_t *now = tu_read_file(g_path, &len);
	TU_ASSERT(len == g_len, "%s: file size changed from %zu to %zu", when, g_len, len);
	if (memcmp(now, g_img, len) != 0) {
		size_t k = 0, n = 0;
		while (now[k] == g_img[k])
			k++;
		for (size_t i = 0; i < len; i++)
			n += now[i] != g_img[i];
		TU_FAIL("%s: the pool file changed: %zu bytes differ, the first at offset %#zx",
			when, n, k);
	}
	free(now);
}

struct snap {
	uint8_t *copy;
	size_t len;
	uint64_t nobjects;
};

static void snap_take(kr_pool *pool, struct snap *s)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	s->len = kr_pool_mapped_size(pool);
	s->copy = malloc(s->len);
	TU_ASSERT(s->copy, "out of memory");
	memcpy(s->copy, kr_pool_base(pool), s->len);
	s->nobjects = st.nobjects;
}

/* After the failed commit: mapping unchanged, same live objects, the right error. */
static void snap_expect(kr_pool *pool, struct snap *s, int rc, const char *what)
{
	TU_ASSERT(rc == KR_E_CANARY, "%s: kr_tx_commit = %d (%s), expected KR_E_CANARY", what, rc,
		  kr_strerror(rc));
	TU_ASSERT(kr_errcode() == KR_E_CANARY, "%s: kr_errcode() = %d after the failed commit",
		  what, kr_errcode());
	const uint8_t *now = kr_pool_base(pool);
	TU_ASSERT(kr_pool_mapped_size(pool) == s->len, "%s: mapping size changed", what);
	if (memcmp(now, s->copy, s->len) != 0) {
		size_t k = 0;
		while (now[k] == s->copy[k])
			k++;
		TU_FAIL("%s: the aborted transaction wrote to the pool (first change at offset "
			"%#zx, page kind %d)",
			what, k, kr_pool_page_kind(pool, k));
	}
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(st.nobjects == s->nobjects, "%s: %llu live objects, %llu before", what,
		  (unsigned long long)st.nobjects, (unsigned long long)s->nobjects);
	for (size_t i = 0; i < NOBJ; i++)
		TU_ASSERT(kr_size(pool, g_oid[i]) == sizes[i], "%s: object %zu is gone", what, i);
	free(s->copy);
	g_cases++;
}

/* kr_tx_open of an existing object, changes, then one byte past the end. */
static void case_open(kr_pool *pool, size_t i)
{
	struct snap s;
	kr_tx *tx;
	char what[96];
	snprintf(what, sizeof(what), "kr_tx_open of a %zu-byte object, buf[size] written",
		 sizes[i]);
	snap_take(pool, &s);
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *buf = kr_tx_open(tx, g_oid[i]);
	TU_ASSERT(buf, "%s: kr_tx_open: %s", what, kr_errmsg());
	memset(buf, 0xee, sizes[i]);
	buf[sizes[i]] = (uint8_t)~buf[sizes[i]]; /* the overrun: surely not the canary's byte */
	snap_expect(pool, &s, kr_tx_commit(tx), what);
}

/* kr_tx_add of a sub-range: the pointer is to byte off of the mirror, so the byte past the
 * object's end is p[size - off]. */
static void case_add(kr_pool *pool, size_t i)
{
	struct snap s;
	kr_tx *tx;
	char what[96];
	size_t off = sizes[i] / 2, len = sizes[i] - off > 3 ? 3 : sizes[i] - off;
	snprintf(what, sizeof(what), "kr_tx_add(%zu, %zu) of a %zu-byte object, overrun", off, len,
		 sizes[i]);
	snap_take(pool, &s);
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *p = kr_tx_add(tx, g_oid[i], off, len);
	TU_ASSERT(p, "%s: kr_tx_add: %s", what, kr_errmsg());
	memset(p, 0x11, len);
	p[sizes[i] - off] = (uint8_t)~p[sizes[i] - off];
	snap_expect(pool, &s, kr_tx_commit(tx), what);
}

/* A transaction doing everything at once, with one overrun among correct buffers. */
static void case_mixed(kr_pool *pool, kr_oid root)
{
	struct snap s;
	kr_tx *tx;
	kr_oid fresh[3];
	const char *what = "a transaction that allocates, frees and writes, one buffer overrun";
	snap_take(pool, &s);
	TU_OK(kr_tx_begin(pool, &tx));
	for (int k = 0; k < 3; k++) {
		TU_OK(kr_tx_alloc(tx, (size_t)100 << (5 * k), 50 + k, &fresh[k]));
		uint8_t *p = kr_tx_open(tx, fresh[k]);
		TU_ASSERT(p, "kr_tx_open(fresh): %s", kr_errmsg());
		memset(p, 0x42, (size_t)100 << (5 * k));
	}
	TU_OK(kr_tx_free(tx, g_oid[3]));
	kr_oid *slot = kr_tx_add(tx, root, 3 * sizeof(kr_oid), sizeof(kr_oid));
	TU_ASSERT(slot, "kr_tx_add(root): %s", kr_errmsg());
	*slot = fresh[0];
	uint8_t *a = kr_tx_add(tx, g_oid[5], 10, 20);
	TU_ASSERT(a, "kr_tx_add: %s", kr_errmsg());
	memset(a, 0x99, 20);
	uint8_t *b = kr_tx_open(tx, g_oid[7]);
	TU_ASSERT(b, "kr_tx_open: %s", kr_errmsg());
	b[0] ^= 1;
	b[sizes[7]] = (uint8_t)~b[sizes[7]];
	uint8_t *c = kr_tx_open(tx, g_oid[8]);
	TU_ASSERT(c, "kr_tx_open: %s", kr_errmsg());
	c[sizes[8] - 1] ^= 1; /* the last byte: allowed */
	snap_expect(pool, &s, kr_tx_commit(tx), what);
}

/* The buffer of an object allocated by the transaction. */
static void case_fresh(kr_pool *pool, size_t size)
{
	struct snap s;
	kr_tx *tx;
	kr_oid oid;
	char what[96];
	snprintf(what, sizeof(what), "a freshly allocated %zu-byte object, buf[size] written",
		 size);
	snap_take(pool, &s);
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 77, &oid));
	uint8_t *buf = kr_tx_open(tx, oid);
	TU_ASSERT(buf, "%s: kr_tx_open: %s", what, kr_errmsg());
	memset(buf, 0x37, size);
	buf[size] = (uint8_t)~buf[size];
	snap_expect(pool, &s, kr_tx_commit(tx), what);
}

int main(void)
{
	tu_seed("test_canary", 0); /* deterministic; printed for uniformity */
	double t0 = tu_now();
	kr_pool *pool;
	kr_oid root;
	kr_tx *tx;
	tu_pool_path(g_path, sizeof(g_path), "canary");
	/* Two lanes of 256 KiB: the controls log a whole 70000-byte object. */
	TU_OK(tu_create(g_path, 16ull << 20, 0, 2, 0, &pool));
	TU_OK(kr_root(pool, 16 * sizeof(kr_oid), &root));
	TU_OK(kr_tx_begin(pool, &tx));
	kr_oid *dir = kr_tx_open(tx, root);
	TU_ASSERT(dir, "kr_tx_open(root): %s", kr_errmsg());
	for (size_t i = 0; i < NOBJ; i++) {
		TU_OK(kr_tx_alloc(tx, sizes[i], (uint32_t)i + 1, &g_oid[i]));
		uint8_t *p = kr_tx_open(tx, g_oid[i]);
		TU_ASSERT(p, "kr_tx_open: %s", kr_errmsg());
		tu_fill(p, sizes[i], i);
		dir[i] = g_oid[i];
	}
	TU_OK(kr_tx_commit(tx));
	/* Runs with free blocks for every size the cases allocate: kr_tx_alloc formats a new
	 * run with an allocator transaction of its own when none has room, which is durable
	 * whatever becomes of the application's transaction, and would change the file. */
	static const size_t fresh_sizes[] = { 24, 100, 3000, 3200 };
	kr_oid spare;
	for (size_t i = 0; i < sizeof(fresh_sizes) / sizeof(fresh_sizes[0]); i++) {
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, fresh_sizes[i], 99, &spare));
		TU_OK(kr_tx_commit(tx));
	}
	TU_OK(kr_pool_close(pool));
	g_img = tu_read_file(g_path, &g_len);

	/* Precondition: open and close alone leave the file as it was. */
	TU_OK(tu_open(g_path, &pool));
	TU_OK(kr_pool_close(pool));
	expect_file_pristine("an open/close cycle without transactions");

	TU_OK(tu_open(g_path, &pool));
	for (size_t i = 0; i < NOBJ; i++) {
		case_open(pool, i);
		case_add(pool, i);
	}
	case_mixed(pool, root);
	case_fresh(pool, 24);
	case_fresh(pool, 3000);
	case_fresh(pool, 200000);
	TU_OK(kr_pool_close(pool));
	expect_file_pristine("after every overrun case and a clean close");

	/* Controls: the pool goes on working after a failed commit, and the last byte is the
	 * object's. */
	TU_OK(tu_open(g_path, &pool));
	case_open(pool, 4);
	for (size_t i = 0; i < NOBJ; i++) {
		TU_OK(kr_tx_begin(pool, &tx));
		uint8_t *buf = kr_tx_open(tx, g_oid[i]);
		TU_ASSERT(buf, "kr_tx_open: %s", kr_errmsg());
		buf[sizes[i] - 1] ^= 0xff;
		TU_OK(kr_tx_commit(tx));
		const uint8_t *p = kr_get(pool, g_oid[i]);
		uint8_t want = g_img[g_oid[i] + sizes[i] - 1] ^ 0xff;
		TU_ASSERT(p && p[sizes[i] - 1] == want,
			  "writing the last byte of a %zu-byte object did not commit", sizes[i]);
	}
	TU_DEEP_CHECK(pool, "after the overrun cases");
	TU_OK(kr_pool_close(pool));
	printf("test_canary: %u overrun cases aborted with KR_E_CANARY, pool unchanged; passed in "
	       "%.2fs\n",
	       g_cases, tu_now() - t0);
	free(g_img);
	TU_END_CHECK_ALL("test_canary");
	return 0;
}
