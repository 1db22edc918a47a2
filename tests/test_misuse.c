/*
 * test_misuse.c - every wrong use of the API and every unusable file gets the specific
 * error code keratin.h documents, a non-empty kr_errmsg(), and never a crash .
 *
 * Covered: invalid oids (0, inside another object, misaligned, in the metadata, beyond the
 * pool) to every oid-taking call; freed oids; double frees in one transaction and across
 * transactions; out-of-bounds and overflowing ranges; NULL arguments; a second
 * kr_tx_begin on a thread; close with a transaction open; a second open of an open pool;
 * size 0, oversized and heap-exhausting allocations; a transaction too big for its lane; a
 * micro-buffer overrun; kr_pool_create with bad sizes and geometry or over an existing
 * file; kr_pool_open of missing, empty, text, random, zero, truncated, newer-version,
 * inconsistent and doubly-corrupted files (header CRCs fixed up where the test needs the
 * field check, not the CRC, to fire); kr_strerror for every code; that an abort leaks
 * nothing; and that a transaction whose sticky error makes commit fail leaves the pool
 * unchanged.
 *
 * Usage: test_misuse [main|thread]. "thread" runs only the case that needs a second thread
 * (a transaction used from a thread that did not begin it); ctest registers it separately
 * with the "threads" label.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static void check_err(int rc, int want1, int want2, const char *expr, const char *file, int line)
{
	if (rc != want1 && rc != want2)
		tu_fail_at(file, line, "%s = %d (%s), expected %d (%s): %s", expr, rc, kr_strerror(rc),
			   want1, kr_strerror(want1), kr_errmsg());
	if (kr_errcode() != rc)
		tu_fail_at(file, line, "%s: kr_errcode() = %d, returned %d", expr, kr_errcode(), rc);
	const char *m = kr_errmsg();
	if (!m || !*m)
		tu_fail_at(file, line, "%s: empty kr_errmsg()", expr);
}

/* expr returns an int error code that must be `want` (or one of two acceptable codes). */
#define EXPECT_ERR(expr, want) check_err((expr), (want), (want), #expr, __FILE__, __LINE__)
#define EXPECT_ERR2(expr, w1, w2) check_err((expr), (w1), (w2), #expr, __FILE__, __LINE__)
/* expr returns a pointer or value that must be `nullv`, with kr_errcode() == want. */
#define EXPECT_FAILV(expr, nullv, w1, w2)                                                   \
	do {                                                                                \
		if ((expr) != (nullv))                                                      \
			tu_fail_at(__FILE__, __LINE__, "%s did not fail", #expr);           \
		check_err(kr_errcode(), (w1), (w2), #expr, __FILE__, __LINE__);             \
	} while (0)
#define EXPECT_NULL(expr, want) EXPECT_FAILV((expr), NULL, (want), (want))

#define ASSERT_OK(expr)                                                                      \
	do {                                                                                 \
		int rc_ = (expr);                                                            \
		if (rc_ != KR_OK)                                                            \
			TU_FAIL("%s = %d (%s): %s", #expr, rc_, kr_strerror(rc_), kr_errmsg()); \
	} while (0)

struct fixture {
	char path[128];
	kr_pool *pool;
	kr_oid root, a, big; /* root: 64 B, a: 100 B, big: 100000 B (a large extent) */
	uint8_t a_bytes[100];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	kr_tx *tx;
	tu_pool_path(f->path, sizeof(f->path), "misuse");
	if (tu_create(f->path, 16ull << 20, 0, 4, 0, &f->pool) != KR_OK)
		return -1;
	if (kr_root(f->pool, 64, &f->root) != KR_OK || kr_tx_begin(f->pool, &tx) != KR_OK ||
	    kr_tx_alloc(tx, 100, 1, &f->a) != KR_OK || kr_tx_alloc(tx, 100000, 2, &f->big) != KR_OK)
		return -1;
	tu_fill(f->a_bytes, 100, 42);
	memcpy(kr_tx_open(tx, f->a), f->a_bytes, 100);
	if (kr_tx_commit(tx) != KR_OK)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (f->pool)
		kr_pool_close(f->pool);
	/* Whatever misuse a case tried, the pool it leaves passes the deep check (a case that
	 * ruins the file on purpose removes it). */
	if (access(f->path, F_OK) == 0)
		TU_END_CHECK(f->path, "misuse teardown");
	unlink(f->path);
	free(f);
	return 0;
}

/* Fingerprint of what a failed transaction must not change. */
struct snap {
	struct kr_pool_stat st;
	uint8_t a[100];
	kr_oid live[64];
	size_t nlive;
};

static void take_snap(struct fixture *f, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	ASSERT_OK(kr_pool_stat(f->pool, &s->st));
	memcpy(s->a, kr_get(f->pool, f->a), 100);
	for (kr_oid o = kr_first(f->pool); o && s->nlive < 64; o = kr_next(f->pool, o))
		s->live[s->nlive++] = o;
}

static void assert_unchanged(struct fixture *f, const struct snap *before)
{
	struct snap now;
	take_snap(f, &now);
	TU_EQ(now.st.used_bytes, before->st.used_bytes);
	TU_EQ(now.st.free_bytes, before->st.free_bytes);
	TU_EQ(now.st.nobjects, before->st.nobjects);
	TU_MEM_EQ(now.a, before->a, 100);
	TU_EQ(now.nlive, before->nlive);
	TU_MEM_EQ(now.live, before->live, now.nlive * sizeof(kr_oid));
}

/* The first allocation of a size class may format a run in a committed internal
 * transaction, even if the application's transaction then aborts; the run's unusable tail
 * then leaves free_bytes. Doing that once up front lets the tests demand exact equality. */
static void warm_up_classes(struct fixture *f, size_t size)
{
	kr_tx *tx;
	kr_oid o;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, size, 1, &o));
	kr_tx_abort(tx);
}

/* ---- oids ---------------------------------------------------------------------------------- */

static void bad_oid_everywhere(struct fixture *f, kr_oid bad, int want1, int want2)
{
	kr_tx *tx;
	uint8_t byte = 1;
	EXPECT_FAILV(kr_get(f->pool, bad), NULL, want1, want2);
	EXPECT_FAILV(kr_size(f->pool, bad), 0, want1, want2);
	EXPECT_FAILV(kr_type(f->pool, bad), 0, want1, want2);
	EXPECT_ERR2(kr_update(f->pool, bad, 0, &byte, 1), want1, want2);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_FAILV(kr_tx_get(tx, bad), NULL, want1, want2);
	kr_tx_abort(tx);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_FAILV(kr_tx_add(tx, bad, 0, 1), NULL, want1, want2);
	int sticky = kr_errcode();
	EXPECT_ERR(kr_tx_commit(tx), sticky);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_FAILV(kr_tx_open(tx, bad), NULL, want1, want2);
	kr_tx_abort(tx);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_ERR2(kr_tx_free(tx, bad), want1, want2);
	sticky = kr_errcode();
	EXPECT_ERR(kr_tx_commit(tx), sticky);

	/* kr_next from a bad oid has no error contract, but must not crash or invent objects */
	kr_oid n = kr_next(f->pool, bad);
	TU_CHECK(n == KR_OID_NULL || kr_get(f->pool, n) != NULL);
}

static void test_invalid_oids(void **state)
{
	struct fixture *f = *state;
	struct kr_pool_stat st;
	struct snap before;
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	take_snap(f, &before);
	struct tu_rng rng;
	tu_rng_seed(&rng, 3);

	const kr_oid bad[] = {
		KR_OID_NULL,
		f->a + 1,              /* misaligned */
		f->a + 8,              /* misaligned to 16 */
		f->a + 32,             /* aligned, inside an object */
		f->big + 4096,         /* inside a large extent */
		f->big + 64 * 1024,    /* in the extent's second chunk */
		4096 + 16,             /* control page */
		3 * 4096,              /* log lanes */
		st.pool_size - 4096,   /* header copy B */
		st.pool_size + 4096,   /* beyond the pool */
		st.pool_size * 1000,
		UINT64_MAX,
		UINT64_MAX - 15,
		(uint64_t)1 << 63,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		bad_oid_everywhere(f, bad[i], KR_E_MISUSE_OID, KR_E_MISUSE_OID);
	/* Random aligned offsets inside the pool that are not objects: where a block may
	 * start but none is live, keratin.h calls that "freed" (KR_E_MISUSE_FREED). */
	for (int i = 0; i < 200; i++) {
		kr_oid o = tu_rng_below(&rng, st.pool_size) & ~(kr_oid)15;
		if (o == f->root || o == f->a || o == f->big)
			continue;
		bad_oid_everywhere(f, o, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	}
	assert_unchanged(f, &before);
}

static void test_freed_oid(void **state)
{
	struct fixture *f = *state;
	kr_tx *tx;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, f->a));
	ASSERT_OK(kr_tx_commit(tx));
	/* A freed object is not live: reads fail (the class of error is "freed" or "not an
	 * object", both are documented for this). */
	EXPECT_FAILV(kr_get(f->pool, f->a), NULL, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	EXPECT_FAILV(kr_size(f->pool, f->a), 0, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_FAILV(kr_tx_add(tx, f->a, 0, 8), NULL, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	kr_tx_abort(tx);
	/* Freeing it again, in a later transaction, is a double free. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_ERR(kr_tx_free(tx, f->a), KR_E_MISUSE_FREED);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_FREED);
	/* The same for a large extent, and after a reopen (freed state rebuilt from media). */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, f->big));
	ASSERT_OK(kr_tx_commit(tx));
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
	EXPECT_FAILV(kr_get(f->pool, f->big), NULL, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_ERR(kr_tx_free(tx, f->big), KR_E_MISUSE_FREED);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_FREED);
}

static void test_double_free_one_tx(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	kr_tx *tx;
	take_snap(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, f->a));
	EXPECT_ERR(kr_tx_free(tx, f->a), KR_E_MISUSE_FREED);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_FREED);
	assert_unchanged(f, &before); /* the first free did not happen either */

	/* An object freed in this transaction cannot be written or read through it. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, f->a));
	EXPECT_NULL(kr_tx_add(tx, f->a, 0, 1), KR_E_MISUSE_FREED);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_FREED);
	assert_unchanged(f, &before);

	/* An object allocated and freed in the same transaction (which keratin.h allows:
	 * the allocation simply never happens) cannot be freed a second time. */
	kr_oid o;
	warm_up_classes(f, 500);
	take_snap(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 500, 3, &o));
	ASSERT_OK(kr_tx_free(tx, o));
	EXPECT_ERR(kr_tx_free(tx, o), KR_E_MISUSE_FREED);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_FREED);
	assert_unchanged(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 500, 3, &o));
	ASSERT_OK(kr_tx_free(tx, o));
	ASSERT_OK(kr_tx_commit(tx));
	assert_unchanged(f, &before); /* and nothing leaked */
}

static void test_ranges(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	kr_tx *tx;
	uint8_t buf[200] = { 0 };
	take_snap(f, &before);
	const struct {
		size_t off, len;
	} bad[] = {
		{ 0, 101 }, { 100, 1 }, { 99, 2 }, { 101, 0 }, { SIZE_MAX, 2 }, { 50, SIZE_MAX - 10 },
		{ SIZE_MAX - 5, 10 }, { 1, SIZE_MAX }, { (size_t)1 << 40, 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		EXPECT_NULL(kr_tx_add(tx, f->a, bad[i].off, bad[i].len), KR_E_MISUSE_RANGE);
		EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_RANGE);
		if (bad[i].len <= sizeof(buf))
			EXPECT_ERR(kr_update(f->pool, f->a, bad[i].off, buf, bad[i].len),
				   KR_E_MISUSE_RANGE);
	}
	/* A zero-length range is refused (as "zero argument" or as an empty range). */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_FAILV(kr_tx_add(tx, f->a, 10, 0), NULL, KR_E_MISUSE_RANGE, KR_E_MISUSE_ARG);
	kr_tx_abort(tx);
	/* The last byte is fine. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	uint8_t *p = kr_tx_add(tx, f->a, 99, 1);
	TU_NOT_NULL(p);
	kr_tx_abort(tx);
	assert_unchanged(f, &before);
	EXPECT_ERR(kr_update(f->pool, f->a, 0, NULL, 10), KR_E_MISUSE_ARG);
}

/* ---- transaction state and NULL arguments ----------------------------------------------------- */

static void test_tx_state(void **state)
{
	struct fixture *f = *state;
	kr_tx *tx, *tx2;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	/* checks invariant tx.c 3: one open transaction per thread and pool */
	EXPECT_ERR(kr_tx_begin(f->pool, &tx2), KR_E_MISUSE_STATE);
	/* the first transaction is not disturbed by the refused second one */
	uint8_t *p = kr_tx_add(tx, f->a, 0, 4);
	TU_NOT_NULL(p);
	memcpy(p, "abcd", 4);
	/* close refuses while a transaction is open, and closes nothing */
	EXPECT_ERR(kr_pool_close(f->pool), KR_E_MISUSE_STATE);
	ASSERT_OK(kr_tx_commit(tx));
	TU_MEM_EQ(kr_get(f->pool, f->a), "abcd", 4);
	/* After the end a new transaction can begin. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	kr_tx_abort(tx);

	/* One transaction per pool per thread: another pool is independent. */
	char path2[128];
	kr_pool *p2;
	kr_tx *t2;
	kr_oid o2;
	tu_pool_path(path2, sizeof(path2), "misuse-2");
	ASSERT_OK(tu_create(path2, 8ull << 20, 0, 0, 0, &p2));
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_begin(p2, &t2));
	ASSERT_OK(kr_tx_alloc(t2, 10, 1, &o2));
	/* an oid of one pool means nothing in the other: o2 is no object of f->pool yet */
	ASSERT_OK(kr_tx_commit(t2));
	ASSERT_OK(kr_tx_commit(tx));
	ASSERT_OK(kr_pool_close(p2));
	unlink(path2);

	/* NULL arguments. */
	kr_oid oid;
	EXPECT_ERR(kr_tx_commit(NULL), KR_E_MISUSE_ARG);
	kr_tx_abort(NULL); /* must simply not crash */
	EXPECT_ERR(kr_tx_begin(NULL, &tx), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_tx_begin(f->pool, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_tx_alloc(NULL, 10, 1, &oid), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_tx_free(NULL, f->a), KR_E_MISUSE_ARG);
	EXPECT_NULL(kr_tx_add(NULL, f->a, 0, 1), KR_E_MISUSE_ARG);
	EXPECT_NULL(kr_tx_get(NULL, f->a), KR_E_MISUSE_ARG);
	EXPECT_NULL(kr_get(NULL, f->a), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_root(NULL, 64, &oid), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_root(f->pool, 64, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_stat(NULL, &(struct kr_pool_stat){ 0 }), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_stat(f->pool, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_close(NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_update(NULL, f->a, 0, "x", 1), KR_E_MISUSE_ARG);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_ERR(kr_tx_alloc(tx, 10, 1, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_ARG);
}

static void test_open_twice(void **state)
{
	struct fixture *f = *state;
	kr_pool *p2 = NULL;
	EXPECT_ERR(tu_open(f->path, &p2), KR_E_IO_BUSY);
	TU_NULL(p2);
	/* the first handle is unaffected */
	TU_MEM_EQ(kr_get(f->pool, f->a), f->a_bytes, 100);
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
	/* creating over an open pool is refused too */
	struct kr_create_opts o = { .struct_size = sizeof(o), .size = 8 << 20,
				    .flags = KR_OPEN_FORCE_PMEM };
	EXPECT_ERR(kr_pool_create(f->path, &o, &p2), KR_E_IO_EXISTS);
}

/* ---- allocation limits ---------------------------------------------------------------------- */

static void test_alloc_sizes(void **state)
{
	struct fixture *f = *state;
	struct kr_pool_stat st;
	struct snap before;
	kr_tx *tx;
	kr_oid o;
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	take_snap(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	EXPECT_ERR(kr_tx_alloc(tx, 0, 1, &o), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_ARG);
	const size_t too_big[] = { st.max_alloc + 1, st.heap_size, (size_t)1 << 50, SIZE_MAX,
				   SIZE_MAX - 15 };
	for (size_t i = 0; i < sizeof(too_big) / sizeof(too_big[0]); i++) {
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		EXPECT_ERR(kr_tx_alloc(tx, too_big[i], 1, &o), KR_E_TOO_BIG);
		EXPECT_ERR(kr_tx_commit(tx), KR_E_TOO_BIG);
	}
	assert_unchanged(f, &before);
}

static void test_nospace_heap(void **state)
{
	struct fixture *f = *state;
	kr_oid objs[64];
	int n = 0, rc = KR_OK;
	kr_tx *tx;
	/* 1 MiB objects until the 16 MiB pool is full. */
	while (n < 64) {
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		rc = kr_tx_alloc(tx, 1 << 20, 9, &objs[n]);
		if (rc != KR_OK) {
			check_err(rc, KR_E_NOSPACE_HEAP, KR_E_NOSPACE_HEAP, "kr_tx_alloc(1 MiB)",
				  __FILE__, __LINE__);
			EXPECT_ERR(kr_tx_commit(tx), KR_E_NOSPACE_HEAP);
			break;
		}
		ASSERT_OK(kr_tx_commit(tx));
		n++;
	}
	TU_CHECK(n > 5 && n < 64);
	/* The pool stays usable: free one, and the allocation fits again. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, objs[0]));
	ASSERT_OK(kr_tx_commit(tx));
	/* When freed space becomes reusable within a session is not specified; after a
	 * reopen it must be. */
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 1 << 20, 9, &objs[0]));
	ASSERT_OK(kr_tx_commit(tx));
	TU_MEM_EQ(kr_get(f->pool, f->a), f->a_bytes, 100);
}

static void test_nospace_log(void **state)
{
	(void)state; /* uses a pool of its own, with tiny lanes */
	char path[128];
	kr_pool *pool;
	kr_tx *tx;
	kr_oid big;
	tu_pool_path(path, sizeof(path), "misuse-log");
	/* 16 KiB lanes hold ~14 KiB of redo payload. */
	ASSERT_OK(tu_create(path, 8ull << 20, 0, 2, 16, &pool));
	ASSERT_OK(kr_tx_begin(pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 64 * 1024, 1, &big)); /* new objects are not logged */
	ASSERT_OK(kr_tx_commit(tx));
	const uint8_t *before = kr_get(pool, big);
	TU_NOT_NULL(before);

	ASSERT_OK(kr_tx_begin(pool, &tx));
	uint8_t *p = kr_tx_open(tx, big);
	if (p) /* the lane may be found too small at kr_tx_add or only at commit */
		memset(p, 0x77, 64 * 1024);
	else
		check_err(kr_errcode(), KR_E_NOSPACE_LOG, KR_E_NOSPACE_LOG, "kr_tx_open", __FILE__,
			  __LINE__);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_NOSPACE_LOG);
	for (int i = 0; i < 64 * 1024; i++)
		if (before[i] != 0)
			TU_FAIL("byte %d changed by a transaction that failed", i);
	/* Smaller transactions still work. */
	ASSERT_OK(kr_update(pool, big, 100, "ok", 2));
	ASSERT_OK(kr_pool_close(pool));
	unlink(path);
}

static void test_canary(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	kr_tx *tx;
	take_snap(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	uint8_t *p = kr_tx_open(tx, f->a);
	TU_NOT_NULL(p);
	p[0] = 0x11;
	p[100] = 0x55; /* one byte past the 100-byte object: the application scribbled */
	EXPECT_ERR(kr_tx_commit(tx), KR_E_CANARY);
	assert_unchanged(f, &before);
}

/* ---- abort and sticky errors ------------------------------------------------------------------ */

static size_t abort_size(int i)
{
	return (size_t)(37 << (i * 3)) % 300000 + 1;
}

static void test_abort_leaks_nothing(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	for (int i = 0; i < 6; i++)
		warm_up_classes(f, abort_size(i));
	take_snap(f, &before);
	for (int round = 0; round < 50; round++) {
		kr_tx *tx;
		kr_oid o;
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		for (int i = 0; i < 6; i++) {
			ASSERT_OK(kr_tx_alloc(tx, abort_size(i), 4, &o));
			uint8_t *p = kr_tx_add(tx, o, 0, 1);
			TU_NOT_NULL(p);
			*p = 1;
		}
		ASSERT_OK(kr_tx_free(tx, f->a));
		uint8_t *q = kr_tx_add(tx, f->big, 10, 10);
		TU_NOT_NULL(q);
		memset(q, 0xff, 10);
		kr_tx_abort(tx);
		assert_unchanged(f, &before);
	}
	/* and across a reopen */
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
	struct snap after;
	take_snap(f, &after);
	TU_EQ(after.st.used_bytes, before.st.used_bytes);
	TU_EQ(after.st.nobjects, before.st.nobjects);
}

static void test_sticky_error(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	kr_tx *tx;
	kr_oid fresh;
	warm_up_classes(f, 777);
	take_snap(f, &before);
	size_t len0, len1;
	uint8_t *file0 = tu_read_file(f->path, &len0);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	uint8_t *p = kr_tx_add(tx, f->a, 10, 20);
	TU_NOT_NULL(p);
	memset(p, 0xcc, 20);
	ASSERT_OK(kr_tx_alloc(tx, 777, 5, &fresh));
	ASSERT_OK(kr_tx_free(tx, f->big));
	/* the error */
	EXPECT_NULL(kr_tx_add(tx, f->a + 1, 0, 1), KR_E_MISUSE_OID);
	/* checks invariant tx.c 4: every later operation of the transaction fails with the
	 * same code, and commit aborts */
	EXPECT_NULL(kr_tx_add(tx, f->a, 0, 1), KR_E_MISUSE_OID);
	kr_oid o;
	EXPECT_ERR(kr_tx_alloc(tx, 10, 1, &o), KR_E_MISUSE_OID);
	EXPECT_ERR(kr_tx_free(tx, f->root), KR_E_MISUSE_OID);
	EXPECT_ERR(kr_tx_commit(tx), KR_E_MISUSE_OID);
	assert_unchanged(f, &before);
	/* checks invariant tx.c 1: nothing of an aborted transaction reached the pool, not
	 * even its log lanes: the file is byte-for-byte what it was before kr_tx_begin. */
	uint8_t *file1 = tu_read_file(f->path, &len1);
	TU_EQ(len0, len1);
	TU_MEM_EQ(file0, file1, len0);
	free(file0);
	free(file1);
	EXPECT_FAILV(kr_get(f->pool, fresh), NULL, KR_E_MISUSE_OID, KR_E_MISUSE_FREED);
	/* and nothing of it comes back after a reopen (recovery) */
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
	assert_unchanged(f, &before);
}

/* ---- creating and opening --------------------------------------------------------------------- */

static void test_create_errors(void **state)
{
	struct fixture *f = *state;
	char path[128];
	kr_pool *p = NULL;
	tu_pool_path(path, sizeof(path), "misuse-create");
	const struct kr_create_opts bad[] = {
		{ .size = 0 },
		{ .size = (8ull << 20) - 4096 },
		{ .size = 1 },
		{ .size = (1ull << 46) + (1ull << 30) },
		{ .size = 16 << 20, .rows = 1 },
		{ .size = 16 << 20, .rows = 100000 },
		{ .size = 16 << 20, .nlanes = 5000 },
		{ .size = 16 << 20, .lane_kib = 4 },
		{ .size = 16 << 20, .lane_kib = 1 << 20 },
		{ .size = 8 << 20, .nlanes = 64, .lane_kib = 1024 }, /* lanes bigger than the pool */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kr_create_opts o = bad[i];
		o.struct_size = sizeof(o);
		o.flags = KR_OPEN_FORCE_PMEM;
		EXPECT_ERR(kr_pool_create(path, &o, &p), KR_E_MISUSE_ARG);
		TU_NULL(p);
		TU_EQ(access(path, F_OK), -1); /* and no file left behind */
	}
	struct kr_create_opts ok = { .struct_size = sizeof(ok), .size = 8 << 20,
				     .flags = KR_OPEN_FORCE_PMEM };
	EXPECT_ERR(kr_pool_create(path, NULL, &p), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_create(NULL, &ok, &p), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_create(path, &ok, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_create("/dev/shm/no-such-dir-kr/x.pool", &ok, &p), KR_E_IO_OPEN);
	/* Over an existing pool (closed) and over any existing file. */
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	EXPECT_ERR(kr_pool_create(f->path, &ok, &p), KR_E_IO_EXISTS);
	tu_write_file(path, "hello\n", 6);
	EXPECT_ERR(kr_pool_create(path, &ok, &p), KR_E_IO_EXISTS);
	size_t len;
	char *txt = tu_read_file(path, &len); /* untouched */
	TU_EQ(len, 6);
	TU_MEM_EQ(txt, "hello\n", 6);
	free(txt);
	unlink(path);
	ASSERT_OK(tu_open(f->path, &f->pool));
	TU_MEM_EQ(kr_get(f->pool, f->a), f->a_bytes, 100);
}

/* Option structs carry their size: a caller that did not set it, or was built against
 * another layout, gets KR_E_MISUSE_ARG naming the struct, and nothing is created. */
static void test_opts_size(void **state)
{
	(void)state;
	char path[128];
	tu_pool_path(path, sizeof(path), "misuse-optsize");
	unlink(path);
	const uint32_t wrong[] = {0, 1, sizeof(struct kr_create_opts) - 4,
				  sizeof(struct kr_create_opts) + 8, UINT32_MAX};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		kr_pool *p = NULL;
		struct kr_create_opts co = {.struct_size = wrong[i], .size = 8 << 20,
					    .flags = KR_OPEN_FORCE_PMEM};
		EXPECT_ERR(kr_pool_create(path, &co, &p), KR_E_MISUSE_ARG);
		TU_NOT_NULL(strstr(kr_errmsg(), "kr_create_opts.struct_size"));
		TU_NULL(p);

		kr_hmap *h = NULL;
		struct kr_hmap_opts ho = {.struct_size = wrong[i], .size = 1 << 20,
					  .flags = KR_OPEN_FORCE_PMEM};
		EXPECT_ERR(kr_hmap_create(path, &ho, &h), KR_E_MISUSE_ARG);
		TU_NOT_NULL(strstr(kr_errmsg(), "kr_hmap_opts.struct_size"));
		TU_NULL(h);
		TU_EQ(access(path, F_OK), -1);

		tu_write_file(path, "0123", 4); /* any file; the size is judged first */
		kr_region *r = NULL;
		void *base = NULL;
		size_t len = 0;
		struct kr_region_opts ro = KR_REGION_OPTS_INIT;
		ro.struct_size = wrong[i];
		EXPECT_ERR(kr_region_open(path, &ro, &r, &base, &len), KR_E_MISUSE_ARG);
		TU_NOT_NULL(strstr(kr_errmsg(), "kr_region_opts.struct_size"));
		TU_NULL(r);
		unlink(path);
	}
	/* The right sizes are what every other test passes, and the README's programs start
	 * from the _OPTS_INIT macros. */
}

static void expect_open_fails(const char *path, int want1, int want2)
{
	kr_pool *p = NULL;
	int rc = tu_open(path, &p);
	check_err(rc, want1, want2, path, __FILE__, __LINE__);
	TU_NULL(p);
}

static void test_open_not_a_pool(void **state)
{
	(void)state;
	char path[128];
	kr_pool *p = NULL;
	tu_pool_path(path, sizeof(path), "misuse-open");
	EXPECT_ERR(kr_pool_open(NULL, KR_OPEN_FORCE_PMEM, &p), KR_E_MISUSE_ARG);
	EXPECT_ERR(kr_pool_open(path, KR_OPEN_FORCE_PMEM, NULL), KR_E_MISUSE_ARG);
	EXPECT_ERR(tu_open("/dev/shm/kr-does-not-exist.pool", &p), KR_E_IO_OPEN);
	EXPECT_ERR(tu_open("/dev/shm/no-such-dir-kr/x.pool", &p), KR_E_IO_OPEN);
	/* A directory is not a pool file (the open or the type check refuses it). */
	EXPECT_ERR2(tu_open("/dev/shm", &p), KR_E_IO_OPEN, KR_E_FORMAT_NOT_POOL);

	tu_write_file(path, "", 0);
	expect_open_fails(path, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL);
	const char *text = "This is not a keratin pool.\nIt is a text file.\n";
	tu_write_file(path, text, strlen(text));
	expect_open_fails(path, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL);

	const size_t sizes[] = { 1, 100, 4095, 4096, 8192, 65536, 8 << 20, (8 << 20) + 100,
				 16 << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *junk = malloc(sizes[i]);
		tu_fill(junk, sizes[i], 1000 + i);
		tu_write_file(path, junk, sizes[i]);
		expect_open_fails(path, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL);
		memset(junk, 0, sizes[i]);
		tu_write_file(path, junk, sizes[i]);
		expect_open_fails(path, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL);
		free(junk);
	}
	unlink(path);
}

/* Reads both header copies of a closed pool. */
static void read_headers(const char *path, struct kr_pool_hdr *a, struct kr_pool_hdr *b)
{
	tu_pread(path, a, sizeof(*a), 0);
	tu_pread(path, b, sizeof(*b), a->pool_size - KR_PAGE_SIZE);
}

static void write_headers(const char *path, uint64_t pool_size, const struct kr_pool_hdr *a,
			  const struct kr_pool_hdr *b)
{
	tu_pwrite(path, a, sizeof(*a), 0);
	tu_pwrite(path, b, sizeof(*b), pool_size - KR_PAGE_SIZE);
}

/* Applies edit() to both header copies (fixing their CRCs if fix_crc), expects open to fail
 * with want, then restores the original headers and checks that the pool opens again. */
static void header_case(struct fixture *f, void (*edit)(struct kr_pool_hdr *), bool fix_crc,
			int want1, int want2, const char *what)
{
	struct kr_pool_hdr a, b, ea, eb;
	read_headers(f->path, &a, &b);
	ea = a;
	eb = b;
	edit(&ea);
	edit(&eb);
	if (fix_crc) {
		tu_hdr_fix_crc(&ea);
		tu_hdr_fix_crc(&eb);
	}
	write_headers(f->path, a.pool_size, &ea, &eb);
	kr_pool *p = NULL;
	int rc = tu_open(f->path, &p);
	check_err(rc, want1, want2, what, __FILE__, __LINE__);
	TU_NULL(p);
	write_headers(f->path, a.pool_size, &a, &b);
	ASSERT_OK(tu_open(f->path, &p));
	TU_MEM_EQ(kr_get(p, f->a), f->a_bytes, 100);
	ASSERT_OK(kr_pool_close(p));
}

static void edit_version(struct kr_pool_hdr *h) { h->version = KR_FORMAT_VERSION + 1; }
static void edit_incompat(struct kr_pool_hdr *h) { h->incompat |= 0x80000000u; }
static void edit_ro_compat(struct kr_pool_hdr *h) { h->ro_compat |= 0x80000000u; }
static void edit_uuid(struct kr_pool_hdr *h) { h->uuid[3] ^= 0x40; }
static void edit_magic(struct kr_pool_hdr *h) { h->magic[0] = 'X'; }
static void edit_heap_off(struct kr_pool_hdr *h) { h->heap_off += KR_PAGE_SIZE; }
static void edit_nzones(struct kr_pool_hdr *h) { h->nzones += 1; }
static void edit_chunks(struct kr_pool_hdr *h) { h->chunks_per_zone += 7; }
static void edit_page_size(struct kr_pool_hdr *h) { h->page_size = 8192; }
static void edit_hdr_size(struct kr_pool_hdr *h) { h->hdr_size = 512; }
static void edit_reserved(struct kr_pool_hdr *h) { h->reserved[50] = 1; }
static void edit_lanes(struct kr_pool_hdr *h) { h->nlanes = 0; }
static void edit_pool_size(struct kr_pool_hdr *h) { h->pool_size += 64ull << 20; }

static void test_open_bad_headers(void **state)
{
	struct fixture *f = *state;
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	/* Field checks: the CRCs are made valid so that the field itself is what is refused. */
	header_case(f, edit_version, true, KR_E_FORMAT_VERSION, KR_E_FORMAT_VERSION, "version + 1");
	header_case(f, edit_incompat, true, KR_E_FORMAT_VERSION, KR_E_FORMAT_VERSION,
		    "unknown incompat feature");
	header_case(f, edit_ro_compat, true, KR_E_FORMAT_VERSION, KR_E_FORMAT_VERSION,
		    "unknown ro_compat feature (open is for writing)");
	header_case(f, edit_heap_off, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY, "heap_off");
	header_case(f, edit_nzones, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY, "nzones");
	header_case(f, edit_chunks, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY,
		    "chunks_per_zone");
	header_case(f, edit_page_size, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY,
		    "page_size");
	header_case(f, edit_hdr_size, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY, "hdr_size");
	header_case(f, edit_reserved, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY,
		    "reserved byte");
	header_case(f, edit_lanes, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY, "nlanes 0");
	header_case(f, edit_pool_size, true, KR_E_FORMAT_GEOMETRY, KR_E_FORMAT_GEOMETRY,
		    "pool_size changed alone (derived fields disagree)");
	/* Damage without CRC fix-up in both copies. */
	header_case(f, edit_uuid, false, KR_E_CORRUPT_HEADER, KR_E_CORRUPT_HEADER,
		    "both copies fail their CRC");
	header_case(f, edit_magic, false, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL,
		    "no magic in either copy");
	header_case(f, edit_magic, true, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_NOT_POOL,
		    "no magic in either copy, CRCs valid");

	/* A consistent header of a larger pool over this file: the file is too short. */
	{
		char bigger[128];
		kr_pool *p;
		struct kr_pool_hdr a, b, h;
		tu_pool_path(bigger, sizeof(bigger), "misuse-bigger");
		ASSERT_OK(tu_create(bigger, 24ull << 20, 0, 4, 0, &p));
		ASSERT_OK(kr_pool_close(p));
		tu_pread(bigger, &h, sizeof(h), 0);
		unlink(bigger);
		read_headers(f->path, &a, &b);
		tu_pwrite(f->path, &h, sizeof(h), 0);
		tu_pwrite(f->path, &h, sizeof(h), a.pool_size - KR_PAGE_SIZE);
		expect_open_fails(f->path, KR_E_FORMAT_TRUNCATED, KR_E_FORMAT_TRUNCATED);
		write_headers(f->path, a.pool_size, &a, &b);
	}

	/* One damaged copy is survivable: the other one is used. */
	struct kr_pool_hdr a, b, bad;
	for (int which = 0; which < 2; which++) {
		read_headers(f->path, &a, &b);
		bad = which ? b : a;
		bad.uuid[0] ^= 1;
		if (which)
			write_headers(f->path, a.pool_size, &a, &bad);
		else
			write_headers(f->path, a.pool_size, &bad, &b);
		kr_pool *p;
		ASSERT_OK(tu_open(f->path, &p));
		TU_MEM_EQ(kr_get(p, f->a), f->a_bytes, 100);
		ASSERT_OK(kr_pool_close(p));
		write_headers(f->path, a.pool_size, &a, &b);
	}
	ASSERT_OK(tu_open(f->path, &f->pool));
}

static void test_open_truncated(void **state)
{
	struct fixture *f = *state;
	struct kr_pool_stat st;
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	size_t len;
	uint8_t *orig = tu_read_file(f->path, &len);
	const uint64_t cuts[] = { st.pool_size - 1,    st.pool_size - 4096, st.pool_size / 2,
				  8 << 20,             3 * 4096,            4096 + 1,
				  4096 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		tu_write_file(f->path, orig, len);
		TU_EQ(truncate(f->path, (off_t)cuts[i]), 0);
		expect_open_fails(f->path, KR_E_FORMAT_TRUNCATED, KR_E_FORMAT_TRUNCATED);
	}
	/* Shorter than one header: there is no pool to speak of. */
	tu_write_file(f->path, orig, len);
	TU_EQ(truncate(f->path, 100), 0);
	expect_open_fails(f->path, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_TRUNCATED);
	tu_write_file(f->path, orig, len);
	free(orig);
	ASSERT_OK(tu_open(f->path, &f->pool));
}

static void test_strerror(void **state)
{
	(void)state;
	for (size_t i = 0; i < tu_n_errs; i++) {
		const char *s = kr_strerror(tu_all_errs[i]);
		TU_NOT_NULL(s);
		TU_CHECK(strlen(s) > 0);
		for (size_t j = 0; j < i; j++)
			if (strcmp(s, kr_strerror(tu_all_errs[j])) == 0)
				TU_FAIL("codes %d and %d share the text \"%s\"", tu_all_errs[i],
					 tu_all_errs[j], s);
		TU_EQ(KR_ERR_CLASS(tu_all_errs[i]), -((-tu_all_errs[i]) & ~0xff));
	}
	TU_NOT_NULL(kr_strerror(KR_OK));
	TU_NOT_NULL(kr_strerror(-0x9999));
	TU_NOT_NULL(kr_strerror(12345));
	TU_NOT_NULL(kr_strerror(INT32_MIN));
	TU_EQ(KR_ERR_CLASS(KR_E_MISUSE_OID), KR_E_MISUSE);
	TU_EQ(KR_ERR_CLASS(KR_E_FORMAT_TRUNCATED), KR_E_FORMAT);
	TU_EQ(KR_ERR_CLASS(KR_E_CANARY), KR_E_POOL_FAILED);
}

/* ---- the second thread -------------------------------------------------------------------------- */

struct thread_arg {
	kr_tx *tx;
	kr_oid a;
	int rc_add, err_add, rc_commit, rc_free, rc_alloc;
};

static void *foreign_thread(void *p)
{
	struct thread_arg *t = p;
	kr_oid o;
	t->rc_add = kr_tx_add(t->tx, t->a, 0, 8) ? KR_OK : kr_errcode();
	t->err_add = (kr_errmsg() && *kr_errmsg()) ? 1 : 0;
	t->rc_alloc = kr_tx_alloc(t->tx, 10, 1, &o);
	t->rc_free = kr_tx_free(t->tx, t->a);
	t->rc_commit = kr_tx_commit(t->tx);
	return NULL;
}

static void test_foreign_thread(void **state)
{
	struct fixture *f = *state;
	struct snap before;
	kr_tx *tx;
	take_snap(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	uint8_t *p = kr_tx_add(tx, f->a, 0, 4);
	TU_NOT_NULL(p);
	memcpy(p, "mine", 4);
	struct thread_arg t = { .tx = tx, .a = f->a };
	pthread_t th;
	TU_EQ(pthread_create(&th, NULL, foreign_thread, &t), 0);
	pthread_join(th, NULL);
	TU_EQ(t.rc_add, KR_E_MISUSE_THREAD);
	TU_EQ(t.err_add, 1);
	TU_EQ(t.rc_alloc, KR_E_MISUSE_THREAD);
	TU_EQ(t.rc_free, KR_E_MISUSE_THREAD);
	TU_EQ(t.rc_commit, KR_E_MISUSE_THREAD);
	/* The foreign commit neither committed nor ended the owner's transaction. */
	assert_unchanged(f, &before);
	kr_tx_abort(tx);
	assert_unchanged(f, &before);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_commit(tx));
}

int main(int argc, char **argv)
{
	const char *group = argc > 1 ? argv[1] : "main";
	const struct tu_case main_tests[] = {
		TU_CASE(test_invalid_oids, setup, teardown),
		TU_CASE(test_freed_oid, setup, teardown),
		TU_CASE(test_double_free_one_tx, setup, teardown),
		TU_CASE(test_ranges, setup, teardown),
		TU_CASE(test_tx_state, setup, teardown),
		TU_CASE(test_open_twice, setup, teardown),
		TU_CASE(test_alloc_sizes, setup, teardown),
		TU_CASE(test_nospace_heap, setup, teardown),
		TU_CASE(test_nospace_log, setup, teardown),
		TU_CASE(test_canary, setup, teardown),
		TU_CASE(test_abort_leaks_nothing, setup, teardown),
		TU_CASE(test_sticky_error, setup, teardown),
		TU_CASE(test_create_errors, setup, teardown),
		TU_CASE(test_opts_size, NULL, NULL),
		TU_CASE(test_open_not_a_pool, NULL, NULL),
		TU_CASE(test_open_bad_headers, setup, teardown),
		TU_CASE(test_open_truncated, setup, teardown),
		TU_CASE(test_strerror, NULL, NULL),
	};
	const struct tu_case thread_tests[] = {
		TU_CASE(test_foreign_thread, setup, teardown),
	};
	int failed = !strcmp(group, "thread")
			     ? TU_RUN_CASES("misuse-thread", thread_tests)
			     : TU_RUN_CASES("misuse", main_tests);
	printf("deep checks run: %u\n", tu_deep_checks());
	return failed;
}
