/*
 * test_basic.c - the ordinary life of a pool, through the public API .
 *
 * Create/open/close and what kr_pool_stat() says about them; the root object; allocate,
 * write, commit, close, reopen round trips (partial overwrites and frees included);
 * kr_tx_get() semantics (the transaction's own writes visible through the micro-buffer,
 * the whole object reading correctly after a partial kr_tx_add, committed bytes untouched
 * until commit, abort discarding everything); kr_tx_owner() on every kind of offset;
 * kr_update(); iteration over live objects in
 * pool order; objects from 16 B to 16 MiB in a 64 MiB pool; and the used/free accounting
 * of kr_pool_stat() around allocations and frees of small and large objects; and that a
 * prefaulted create maps the pool whole once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "layout.h"
#include "testutil.h"

struct fixture {
	char path[128];
	kr_pool *pool;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	tu_pool_path(f->path, sizeof(f->path), "basic");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	/* Every pool a case leaves behind passes the deep check, open or closed. */
	if (f->pool) {
		TU_DEEP_CHECK(f->pool, "basic teardown");
		kr_pool_close(f->pool);
	} else if (access(f->path, F_OK) == 0) {
		TU_DEEP_CHECK_FILE(f->path, "basic teardown");
	}
	unlink(f->path);
	free(f);
	return 0;
}

#define ASSERT_OK(expr)                                                                      \
	do {                                                                                 \
		int rc_ = (expr);                                                            \
		if (rc_ != KR_OK)                                                            \
			TU_FAIL("%s = %d (%s): %s", #expr, rc_, kr_strerror(rc_), kr_errmsg()); \
	} while (0)

static void reopen(struct fixture *f)
{
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(tu_open(f->path, &f->pool));
}

/* Allocates an object of `size` bytes filled with tu_fill(seed) in a transaction of its
 * own. New objects are written home, not logged, so any size fits in one transaction. */
static kr_oid alloc_filled(kr_pool *pool, size_t size, uint32_t type, uint64_t seed)
{
	kr_tx *tx;
	kr_oid oid;
	ASSERT_OK(kr_tx_begin(pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, size, type, &oid));
	uint8_t *p = kr_tx_open(tx, oid);
	TU_NOT_NULL(p);
	tu_fill(p, size, seed);
	ASSERT_OK(kr_tx_commit(tx));
	return oid;
}

static void assert_filled(kr_pool *pool, kr_oid oid, size_t size, uint32_t type, uint64_t seed)
{
	uint8_t *want = malloc(size);
	tu_fill(want, size, seed);
	const uint8_t *got = kr_get(pool, oid);
	TU_NOT_NULL(got);
	TU_EQ(kr_size(pool, oid), size);
	TU_EQ(kr_type(pool, oid), type);
	TU_MEM_EQ(got, want, size);
	free(want);
}

/* ---- pools ------------------------------------------------------------------------------ */

static void test_create_open_close(void **state)
{
	struct fixture *f = *state;
	struct kr_pool_stat a, b;
	ASSERT_OK(tu_create(f->path, 16ull << 20, 8, 4, 256, &f->pool));
	ASSERT_OK(kr_pool_stat(f->pool, &a));
	TU_EQ(a.pool_size, 16ull << 20);
	TU_EQ(a.mode, KR_MODE_EMULATED);
	TU_EQ(a.rows, 8);
	TU_EQ(a.nlanes, 4);
	TU_EQ(a.lane_size, 256 * 1024);
	TU_EQ(a.nobjects, 0);
	TU_EQ(a.used_bytes, 0);
	TU_CHECK(a.free_bytes > 0 && a.free_bytes <= a.heap_size);
	TU_CHECK(a.max_alloc > 0 && a.max_alloc <= a.heap_size);
	/* heap_size and meta_bytes both count the zone metadata (keratin.h), so only these
	 * sums are bounded by the pool size. */
	TU_CHECK(a.heap_size + a.parity_bytes <= a.pool_size);
	TU_CHECK(a.meta_bytes + a.parity_bytes < a.pool_size);
	TU_CHECK(a.meta_bytes >= a.pool_size - a.heap_size - a.parity_bytes);
	TU_EQ(a.recovered, 0);
	TU_CHECK(tu_fully_allocated(f->path)); /* checks invariant pool.c 3 */
	TU_NOT_NULL(kr_pool_base(f->pool));
	/* The header copies as created: checks invariant pool.c 2 below, with
	 * test_create_crash for the crash during creation. */
	struct kr_pool_hdr hdr_a, hdr_b;
	memcpy(&hdr_a, kr_pool_base(f->pool), sizeof(hdr_a));
	memcpy(&hdr_b, (const char *)kr_pool_base(f->pool) + a.pool_size - KR_PAGE_SIZE, sizeof(hdr_b));
	TU_MEM_EQ(&hdr_a, &hdr_b, sizeof(hdr_a));
	TU_CHECK(kr_pool_mapped_size(f->pool) >= a.pool_size);

	reopen(f);
	ASSERT_OK(kr_pool_stat(f->pool, &b));
	TU_MEM_EQ(a.uuid, b.uuid, 16);
	TU_EQ(a.pool_size, b.pool_size);
	TU_EQ(a.nzones, b.nzones);
	TU_EQ(a.zone_size, b.zone_size);
	TU_EQ(a.free_bytes, b.free_bytes);
	TU_EQ(b.recovered, 0); /* a clean close needs no recovery */
	TU_EQ(b.replayed_txs, 0);
	TU_EQ(b.discarded_txs, 0);
	TU_EQ(b.mode, KR_MODE_EMULATED);
	/* KR_OPEN_PREFAULT changes nothing but the first-touch cost. */
	ASSERT_OK(kr_pool_close(f->pool));
	f->pool = NULL;
	ASSERT_OK(kr_pool_open(f->path, KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT, &f->pool));
	ASSERT_OK(kr_pool_stat(f->pool, &b));
	TU_MEM_EQ(a.uuid, b.uuid, 16);
	/* Sessions, transactions and closes leave both header copies as they were made. */
	kr_oid o;
	kr_tx *tx;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 5000, 1, &o));
	ASSERT_OK(kr_tx_commit(tx));
	reopen(f);
	TU_MEM_EQ(kr_pool_base(f->pool), &hdr_a, sizeof(hdr_a));
	TU_MEM_EQ((const char *)kr_pool_base(f->pool) + a.pool_size - KR_PAGE_SIZE, &hdr_b,
			    sizeof(hdr_b));

	/* A second pool has another uuid. */
	char other[128];
	kr_pool *p2;
	tu_pool_path(other, sizeof(other), "basic-other");
	ASSERT_OK(tu_create(other, 8ull << 20, 0, 0, 0, &p2));
	ASSERT_OK(kr_pool_stat(p2, &b));
	TU_MEM_NE(a.uuid, b.uuid, 16);
	ASSERT_OK(kr_pool_close(p2));
	unlink(other);
}

static void test_root(void **state)
{
	struct fixture *f = *state;
	kr_oid root, again;
	ASSERT_OK(tu_create(f->path, 8ull << 20, 0, 0, 0, &f->pool));
	ASSERT_OK(kr_root(f->pool, 500, &root));
	TU_NE(root, KR_OID_NULL);
	TU_EQ(kr_size(f->pool, root), 500);
	const uint8_t *p = kr_get(f->pool, root);
	TU_NOT_NULL(p);
	for (int i = 0; i < 500; i++)
		TU_EQ(p[i], 0);
	ASSERT_OK(kr_root(f->pool, 500, &again));
	TU_EQ(again, root);
	ASSERT_OK(kr_root(f->pool, 10, &again)); /* smaller: the existing root */
	TU_EQ(again, root);
	TU_EQ(kr_root(f->pool, 501, &again), KR_E_MISUSE_ARG);

	uint8_t bytes[500];
	tu_fill(bytes, sizeof(bytes), 1);
	ASSERT_OK(kr_update(f->pool, root, 0, bytes, sizeof(bytes)));
	reopen(f);
	ASSERT_OK(kr_root(f->pool, 500, &again));
	TU_EQ(again, root);
	TU_MEM_EQ(kr_get(f->pool, root), bytes, sizeof(bytes));
	TU_EQ(kr_first(f->pool), root);
}

/* ---- round trips -------------------------------------------------------------------------- */

#define NOBJ 60

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct tu_rng rng;
	kr_oid oid[NOBJ];
	size_t size[NOBJ];
	uint8_t *model[NOBJ];
	tu_rng_seed(&rng, 11);
	ASSERT_OK(tu_create(f->path, 16ull << 20, 0, 0, 0, &f->pool));

	/* Five objects per transaction. */
	for (int i = 0; i < NOBJ; i += 5) {
		kr_tx *tx;
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		for (int j = i; j < i + 5; j++) {
			size[j] = tu_rng_logu(&rng, 1, 40000);
			model[j] = malloc(size[j]);
			tu_fill(model[j], size[j], 100 + j);
			ASSERT_OK(kr_tx_alloc(tx, size[j], 7000 + j, &oid[j]));
			uint8_t *p = kr_tx_open(tx, oid[j]);
			TU_NOT_NULL(p);
			memcpy(p, model[j], size[j]);
		}
		ASSERT_OK(kr_tx_commit(tx));
	}
	reopen(f);
	for (int j = 0; j < NOBJ; j++) {
		TU_EQ(kr_size(f->pool, oid[j]), size[j]);
		TU_EQ(kr_type(f->pool, oid[j]), 7000 + j);
		TU_MEM_EQ(kr_get(f->pool, oid[j]), model[j], size[j]);
	}

	/* Partial overwrites of some, frees of others, in mixed transactions. */
	for (int round = 0; round < 20; round++) {
		kr_tx *tx;
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		for (int k = 0; k < 3; k++) {
			int j = (int)tu_rng_below(&rng, NOBJ);
			if (!model[j])
				continue;
			size_t len = tu_rng_logu(&rng, 1, size[j]);
			size_t off = tu_rng_below(&rng, size[j] - len + 1);
			uint8_t *p = kr_tx_add(tx, oid[j], off, len);
			TU_NOT_NULL(p);
			TU_MEM_EQ(p, model[j] + off, len);
			tu_fill(p, len, round * 10 + k);
			tu_fill(model[j] + off, len, round * 10 + k);
		}
		/* Freeing an object written earlier in the same transaction is allowed too. */
		int victim = (int)tu_rng_below(&rng, NOBJ);
		if (model[victim] && round % 2 == 0) {
			ASSERT_OK(kr_tx_free(tx, oid[victim]));
			free(model[victim]);
			model[victim] = NULL;
		}
		ASSERT_OK(kr_tx_commit(tx));
	}
	reopen(f);
	size_t live = 0;
	for (int j = 0; j < NOBJ; j++) {
		if (!model[j]) {
			TU_NULL(kr_get(f->pool, oid[j]));
			continue;
		}
		live++;
		TU_MEM_EQ(kr_get(f->pool, oid[j]), model[j], size[j]);
		free(model[j]);
	}
	struct kr_pool_stat st;
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	TU_EQ(st.nobjects, live);
}

/* ---- kr_tx_get ------------------------------------------------------------------------------ */

static void test_tx_get(void **state)
{
	struct fixture *f = *state;
	enum { N = 1000 };
	uint8_t committed[N], want[N];
	kr_tx *tx;
	ASSERT_OK(tu_create(f->path, 8ull << 20, 0, 0, 0, &f->pool));
	tu_fill(committed, N, 5);
	kr_oid a = alloc_filled(f->pool, N, 1, 5);
	const uint8_t *direct = kr_get(f->pool, a);
	memcpy(want, committed, N);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	/* No micro-buffer yet: kr_tx_get is the direct pointer. */
	TU_PTR_EQ(kr_tx_get(tx, a), direct);

	uint8_t *p = kr_tx_add(tx, a, 100, 50);
	TU_NOT_NULL(p);
	TU_MEM_EQ(p, committed + 100, 50); /* copied in */
	memset(p, 0xa1, 50);
	memset(want + 100, 0xa1, 50);
	/* The committed bytes do not change before the commit. */
	TU_MEM_EQ(kr_get(f->pool, a), committed, N);
	/* The whole object reads correctly through the micro-buffer after a partial add. */
	const uint8_t *v = kr_tx_get(tx, a);
	TU_NOT_NULL(v);
	TU_MEM_EQ(v, want, N);

	/* An overlapping second range sees the first range's writes. */
	uint8_t *q = kr_tx_add(tx, a, 120, 100);
	TU_NOT_NULL(q);
	TU_MEM_EQ(q, want + 120, 100);
	memset(q, 0xb2, 100);
	memset(want + 120, 0xb2, 100);
	/* Both pointers point into one buffer mirroring the whole object. */
	uint8_t *r = kr_tx_add(tx, a, 900, 10);
	TU_NOT_NULL(r);
	TU_PTR_EQ(r - 900, q - 120);
	r[9] = 0xc3;
	want[909] = 0xc3;
	v = kr_tx_get(tx, a);
	TU_MEM_EQ(v, want, N);
	TU_MEM_EQ(kr_get(f->pool, a), committed, N);

	/* A new object reads as zeros plus the transaction's writes. */
	kr_oid b;
	ASSERT_OK(kr_tx_alloc(tx, 200, 2, &b));
	const uint8_t *bv = kr_tx_get(tx, b);
	TU_NOT_NULL(bv);
	for (int i = 0; i < 200; i++)
		TU_EQ(bv[i], 0);
	uint8_t *bp = kr_tx_add(tx, b, 10, 5);
	TU_NOT_NULL(bp);
	memcpy(bp, "hello", 5);
	bv = kr_tx_get(tx, b);
	TU_MEM_EQ(bv + 10, "hello", 5);
	TU_EQ(bv[9], 0);
	TU_EQ(bv[15], 0);
	ASSERT_OK(kr_tx_commit(tx));

	TU_MEM_EQ(kr_get(f->pool, a), want, N);
	const uint8_t *bc = kr_get(f->pool, b);
	TU_NOT_NULL(bc);
	TU_MEM_EQ(bc + 10, "hello", 5);
	TU_EQ(bc[0], 0);
	TU_EQ(bc[199], 0);

	/* Abort discards the micro-buffers. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	p = kr_tx_add(tx, a, 0, N);
	TU_NOT_NULL(p);
	memset(p, 0xee, N);
	kr_tx_abort(tx);
	TU_MEM_EQ(kr_get(f->pool, a), want, N);
	reopen(f);
	TU_MEM_EQ(kr_get(f->pool, a), want, N);
	TU_MEM_EQ(kr_get(f->pool, b) + 10, "hello", 5);

	/* A transaction that only reads commits without changing anything. */
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	TU_MEM_EQ(kr_tx_get(tx, a), want, N);
	ASSERT_OK(kr_tx_commit(tx));
	TU_MEM_EQ(kr_get(f->pool, a), want, N);
}

/* kr_tx_owner: the object holding an offset, as the transaction sees the pool. Objects in
 * runs and in extents, their first and last payload bytes, the bytes around them (headers,
 * one past the end, outside the heap), a freed object, and one the transaction allocated. */
static void test_tx_owner(void **state)
{
	struct fixture *f = *state;
	ASSERT_OK(tu_create(f->path, 16ull << 20, 0, 0, 0, &f->pool));
	struct { size_t size; uint32_t type; kr_oid oid; } o[] = {
		{100, 7, 0}, {48, 8, 0}, {3000, 9, 0}, {1u << 20, 10, 0},
	};
	enum { NO = sizeof(o) / sizeof(o[0]) };
	for (int i = 0; i < NO; i++)
		o[i].oid = alloc_filled(f->pool, o[i].size, o[i].type, (uint64_t)i);
	kr_oid gone = alloc_filled(f->pool, 200, 11, 9);
	kr_tx *tx;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, gone));
	ASSERT_OK(kr_tx_commit(tx));

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	kr_oid fresh;
	ASSERT_OK(kr_tx_alloc(tx, 64, 12, &fresh));
	size_t size;
	uint32_t type;
	for (int i = 0; i < NO; i++) {
		uint64_t in[] = {o[i].oid, o[i].oid + o[i].size / 2, o[i].oid + o[i].size - 1};
		for (int k = 0; k < 3; k++) {
			size = 0;
			type = 0;
			TU_EQ(kr_tx_owner(tx, in[k], &size, &type), o[i].oid);
			TU_EQ(size, o[i].size);
			TU_EQ(type, o[i].type);
		}
		TU_EQ(kr_tx_owner(tx, o[i].oid - 1, &size, NULL), KR_OID_NULL); /* header */
		TU_EQ(kr_tx_owner(tx, o[i].oid + o[i].size, &size, NULL), KR_OID_NULL);
	}
	TU_EQ(kr_tx_owner(tx, gone, &size, NULL), KR_OID_NULL);
	/* A damaged header size does not stretch an object past its block (100 bytes in a
	 * 128-byte block: the byte at 200 is the next block's). */
	struct kr_obj_hdr *h = (struct kr_obj_hdr *)((char *)kr_pool_base(f->pool) + o[0].oid - sizeof(*h));
	uint64_t kept = h->size;
	h->size = 1u << 20;
	TU_EQ(kr_tx_owner(tx, o[0].oid + 200, &size, NULL), KR_OID_NULL);
	TU_EQ(kr_tx_owner(tx, o[0].oid, &size, NULL), KR_OID_NULL);
	h->size = kept;
	TU_EQ(kr_tx_owner(tx, 0, &size, NULL), KR_OID_NULL);
	TU_EQ(kr_tx_owner(tx, kr_pool_mapped_size(f->pool) - 1, &size, NULL), KR_OID_NULL);
	TU_EQ(kr_tx_owner(tx, fresh + 10, &size, &type), fresh);
	TU_EQ(size, 64);
	TU_EQ(type, 12);
	kr_tx_abort(tx);
	TU_EQ(kr_tx_owner(NULL, o[0].oid, &size, NULL), KR_OID_NULL);
}

static void test_update(void **state)
{
	struct fixture *f = *state;
	uint8_t want[4096];
	ASSERT_OK(tu_create(f->path, 8ull << 20, 0, 0, 0, &f->pool));
	tu_fill(want, sizeof(want), 3);
	kr_oid a = alloc_filled(f->pool, sizeof(want), 1, 3);
	for (int i = 0; i < 50; i++) {
		uint8_t src[300];
		size_t off = (size_t)(i * 61) % (sizeof(want) - sizeof(src)), len = 1 + (size_t)(i * 7) % 300;
		tu_fill(src, len, 1000 + i);
		ASSERT_OK(kr_update(f->pool, a, off, src, len));
		memcpy(want + off, src, len);
		TU_MEM_EQ(kr_get(f->pool, a), want, sizeof(want));
	}
	reopen(f);
	TU_MEM_EQ(kr_get(f->pool, a), want, sizeof(want));
}

/* ---- iteration -------------------------------------------------------------------------------- */

static int cmp_oid(const void *x, const void *y)
{
	kr_oid a = *(const kr_oid *)x, b = *(const kr_oid *)y;
	return a < b ? -1 : a > b;
}

/* Iterates and compares with the expected set (n oids). */
static void assert_live_set(kr_pool *pool, kr_oid *expected, size_t n)
{
	qsort(expected, n, sizeof(*expected), cmp_oid);
	size_t seen = 0;
	kr_oid prev = 0;
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o)) {
		TU_CHECK(seen < n);
		TU_CHECK(o > prev); /* pool order */
		TU_EQ(o, expected[seen]);
		prev = o;
		seen++;
	}
	TU_EQ(seen, n);
}

static void test_iteration(void **state)
{
	struct fixture *f = *state;
	enum { N = 300 };
	kr_oid all[N + 1], keep[N + 1];
	struct tu_rng rng;
	tu_rng_seed(&rng, 17);
	ASSERT_OK(tu_create(f->path, 32ull << 20, 0, 0, 0, &f->pool));
	TU_EQ(kr_first(f->pool), KR_OID_NULL);
	ASSERT_OK(kr_root(f->pool, 64, &all[0]));
	for (int i = 1; i <= N; i += 10) {
		kr_tx *tx;
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		for (int j = i; j < i + 10 && j <= N; j++)
			ASSERT_OK(kr_tx_alloc(tx, tu_rng_logu(&rng, 1, 100000), 1, &all[j]));
		ASSERT_OK(kr_tx_commit(tx));
	}
	memcpy(keep, all, sizeof(all));
	assert_live_set(f->pool, keep, N + 1);

	/* Free every third object. */
	size_t n = 0;
	kr_tx *tx;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	for (int j = 0; j <= N; j++) {
		if (j > 0 && j % 3 == 0)
			ASSERT_OK(kr_tx_free(tx, all[j]));
		else
			keep[n++] = all[j];
	}
	ASSERT_OK(kr_tx_commit(tx));
	assert_live_set(f->pool, keep, n);
	reopen(f);
	assert_live_set(f->pool, keep, n);
	struct kr_pool_stat st;
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	TU_EQ(st.nobjects, n);
}

/* ---- sizes ---------------------------------------------------------------------------------- */

static void test_sizes(void **state)
{
	struct fixture *f = *state;
	/* Around every size-class boundary (block = size + 16-byte header), then large. */
	size_t sizes[128];
	size_t n = 0;
	sizes[n++] = 16;
	for (int c = 0; c < KR_NCLASSES_FINE; c++) { /* a new pool's table */
		size_t payload = kr_size_classes_fine[c] - sizeof(struct kr_obj_hdr);
		sizes[n++] = payload;
		sizes[n++] = payload + 1;
	}
	static const size_t large[] = { 32768 - 16, 32768 - 15, 100000, 1 << 20, (1 << 20) + 1,
					3 << 20, 16 << 20 };
	for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++)
		sizes[n++] = large[i];
	kr_oid *oid = calloc(n, sizeof(*oid));
	struct kr_pool_stat st0, st;

	ASSERT_OK(tu_create(f->path, 64ull << 20, 0, 4, 512, &f->pool));
	ASSERT_OK(kr_pool_stat(f->pool, &st0));
	TU_CHECK(st0.max_alloc >= (16u << 20));
	for (size_t i = 0; i < n; i++) {
		oid[i] = alloc_filled(f->pool, sizes[i], (uint32_t)i, 500 + i);
		assert_filled(f->pool, oid[i], sizes[i], (uint32_t)i, 500 + i);
	}
	/* The largest object also changes through the log, in pieces that fit a lane. */
	uint8_t *piece = malloc(128 * 1024);
	size_t big = n - 1;
	for (size_t off = 0; off < sizes[big]; off += 4 << 20) {
		tu_fill(piece, 128 * 1024, off);
		ASSERT_OK(kr_update(f->pool, oid[big], off, piece, 128 * 1024));
	}
	reopen(f);
	for (size_t i = 0; i < n; i++) {
		if (i != big) {
			assert_filled(f->pool, oid[i], sizes[i], (uint32_t)i, 500 + i);
			continue;
		}
		uint8_t *want = malloc(sizes[i]);
		tu_fill(want, sizes[i], 500 + i);
		for (size_t off = 0; off < sizes[big]; off += 4 << 20)
			tu_fill(want + off, 128 * 1024, off);
		TU_MEM_EQ(kr_get(f->pool, oid[i]), want, sizes[i]);
		free(want);
	}
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	TU_EQ(st.nobjects, n);

	kr_tx *tx;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	for (size_t i = 0; i < n; i++)
		ASSERT_OK(kr_tx_free(tx, oid[i]));
	ASSERT_OK(kr_tx_commit(tx));
	ASSERT_OK(kr_pool_stat(f->pool, &st));
	TU_EQ(st.nobjects, 0);
	TU_EQ(st.used_bytes, st0.used_bytes);
	/* With everything freed (and the frees durable: reopen), the largest allocation
	 * fits again. */
	reopen(f);
	kr_oid huge;
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, st.max_alloc, 1, &huge));
	ASSERT_OK(kr_tx_commit(tx));
	TU_EQ(kr_size(f->pool, huge), st.max_alloc);
	free(piece);
	free(oid);
}

/* ---- accounting -------------------------------------------------------------------------------- */

/* Bytes of heap a block for `size` payload bytes takes, from the size classes of a new
 * pool (FINE_CLASSES). */
static uint64_t block_bytes(size_t size)
{
	uint64_t need = size + sizeof(struct kr_obj_hdr);
	for (int c = 0; c < KR_NCLASSES_FINE; c++)
		if (kr_size_classes_fine[c] >= need)
			return kr_size_classes_fine[c];
	return (need + KR_CHUNK_SIZE - 1) / KR_CHUNK_SIZE * KR_CHUNK_SIZE;
}

static void test_stat_accounting(void **state)
{
	struct fixture *f = *state;
	struct kr_pool_stat fresh, s0, s1, s2;
	ASSERT_OK(tu_create(f->path, 16ull << 20, 0, 0, 0, &f->pool));
	ASSERT_OK(kr_pool_stat(f->pool, &fresh));
	static const size_t sizes[] = { 1, 100, 200, 1000, 4150, 16368, 16369, 40000, 100000, 1 << 20 };
	uint64_t run_slack = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t sz = sizes[i];
		kr_tx *tx;
		kr_oid oid;
		ASSERT_OK(kr_pool_stat(f->pool, &s0));
		TU_CHECK(s0.used_bytes + s0.free_bytes <= s0.heap_size);

		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		ASSERT_OK(kr_tx_alloc(tx, sz, 1, &oid));
		ASSERT_OK(kr_tx_commit(tx));
		ASSERT_OK(kr_pool_stat(f->pool, &s1));
		TU_EQ(s1.nobjects, s0.nobjects + 1);
		TU_EQ(s1.used_bytes - s0.used_bytes, block_bytes(sz));
		TU_CHECK(s0.free_bytes - s1.free_bytes >= block_bytes(sz));
		TU_CHECK(s1.used_bytes + s1.free_bytes <= s1.heap_size);
		if (block_bytes(sz) >= KR_CHUNK_SIZE) /* whole chunks: no run formatting slack */
			TU_EQ(s1.used_bytes + s1.free_bytes, s0.used_bytes + s0.free_bytes);
		else
			run_slack += block_bytes(sz);

		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		ASSERT_OK(kr_tx_free(tx, oid));
		ASSERT_OK(kr_tx_commit(tx));
		ASSERT_OK(kr_pool_stat(f->pool, &s2));
		TU_EQ(s2.nobjects, s0.nobjects);
		TU_EQ(s2.used_bytes, s0.used_bytes);
		/* A freed block becomes available only once the free is below durable_seq
		 * (heap invariant 3), so free_bytes may lag, but never overshoot. */
		TU_CHECK(s2.free_bytes >= s1.free_bytes && s2.free_bytes <= s0.free_bytes);
	}
	/* After a reopen the accounting is rebuilt from the heap metadata: nothing is used,
	 * and everything is free except the tails of the runs formatted above. */
	reopen(f);
	ASSERT_OK(kr_pool_stat(f->pool, &s1));
	TU_EQ(s1.used_bytes, fresh.used_bytes);
	TU_EQ(s1.nobjects, 0);
	TU_CHECK(s1.free_bytes <= fresh.free_bytes);
	TU_CHECK(s1.free_bytes + run_slack >= fresh.free_bytes);
}

/* A new run is made by the commit of the transaction that needs it (heap.c): one that
 * aborts, or frees its new objects again, leaves the heap as it found it, and an abort
 * writes nothing at all (tx.c invariant 1). One that commits makes the run with its
 * objects in it, one fence for the whole commit (checks invariant heap.c 6). */
static void test_new_run(void **state)
{
	struct fixture *f = *state;
	enum { SIZE = 5000 }; /* a class no run serves yet */
	struct kr_pool_stat s0, s1;
	struct kr_counters c;
	kr_tx *tx;
	kr_oid oid[3];
	ASSERT_OK(tu_create(f->path, 16ull << 20, 0, 0, 0, &f->pool));
	ASSERT_OK(kr_pool_stat(f->pool, &s0));

	kr_counters_reset();
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	for (int i = 0; i < 3; i++)
		ASSERT_OK(kr_tx_alloc(tx, SIZE, 1, &oid[i]));
	kr_tx_abort(tx);
	kr_counters_get(&c);
	TU_ASSERT(c.fences == 0 && c.bytes_written == 0, "an aborted transaction that needed a new run: "
		  "%llu fences, %llu bytes written", (unsigned long long)c.fences,
		  (unsigned long long)c.bytes_written);
	ASSERT_OK(kr_pool_stat(f->pool, &s1));
	TU_EQ(s1.free_bytes, s0.free_bytes);
	TU_EQ(kr_first(f->pool), KR_OID_NULL);

	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, SIZE, 1, &oid[0]));
	ASSERT_OK(kr_tx_free(tx, oid[0]));
	ASSERT_OK(kr_tx_commit(tx));
	ASSERT_OK(kr_pool_stat(f->pool, &s1));
	TU_EQ(s1.free_bytes, s0.free_bytes);
	TU_DEEP_CHECK(f->pool, "after a new run's only object was allocated and freed in one transaction");

	kr_counters_reset();
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	for (int i = 0; i < 3; i++)
		ASSERT_OK(kr_tx_alloc(tx, SIZE, 1, &oid[i]));
	ASSERT_OK(kr_tx_commit(tx));
	kr_counters_get(&c);
	TU_ASSERT(c.fences == 1, /* left zero over fresh zeros: no direct write, no intent */
		  "a commit of three new %d-byte objects in a new run: %llu fences", SIZE,
		  (unsigned long long)c.fences);
	reopen(f);
	kr_oid o = kr_first(f->pool);
	for (int i = 0; i < 3; i++, o = kr_next(f->pool, o))
		TU_EQ(o, oid[i]);
	TU_DEEP_CHECK(f->pool, "after a commit that made a run");

	/* The heap full but for one chunk: a transaction that made a run and freed its only
	 * object there gives that chunk back when it needs a run of another class (it held
	 * the last chunk, and the allocation failed with KR_E_NOSPACE_HEAP). */
	enum { BIG = 30000 }; /* one chunk each */
	kr_oid big = KR_OID_NULL, last = KR_OID_NULL;
	for (;;) {
		ASSERT_OK(kr_tx_begin(f->pool, &tx));
		int rc = kr_tx_alloc(tx, BIG, 2, &big);
		if (rc) {
			kr_tx_abort(tx);
			TU_EQ(rc, KR_E_NOSPACE_HEAP);
			break;
		}
		ASSERT_OK(kr_tx_commit(tx));
		last = big;
	}
	TU_CHECK(last != KR_OID_NULL);
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_free(tx, last)); /* the one free chunk */
	ASSERT_OK(kr_tx_commit(tx));
	ASSERT_OK(kr_tx_begin(f->pool, &tx));
	ASSERT_OK(kr_tx_alloc(tx, 3000, 1, &oid[0])); /* a new run takes it */
	ASSERT_OK(kr_tx_free(tx, oid[0]));
	int rc = kr_tx_alloc(tx, 700, 1, &oid[1]); /* another class: a run of its own */
	TU_ASSERT(rc == KR_OK, "a new run's chunk, emptied by its own transaction, was not given "
		  "back for another class: %s", kr_errmsg());
	ASSERT_OK(kr_tx_commit(tx));
	TU_DEEP_CHECK(f->pool, "after a new run gave its chunk back to another");
}

static long minor_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* The page faults of prefaulting a fresh file of size bytes in dir (mmap, MADV_POPULATE_WRITE). */
static long populate_faults(const char *dir, size_t size)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/keratin-basic-populate-%d", dir, (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	TU_ASSERT(fd >= 0 && ftruncate(fd, (off_t)size) == 0, "%s: %s", path, strerror(errno));
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	TU_ASSERT(m != MAP_FAILED, "mmap: %s", strerror(errno));
	long before = minor_faults();
	int rc = madvise(m, size, MADV_POPULATE_WRITE);
	long faults = minor_faults() - before;
	munmap(m, size);
	close(fd);
	unlink(path);
	return rc == 0 ? faults : -1;
}

/* kr_pool_create with KR_OPEN_PREFAULT prefaults the pool once, at the mapping it returns:
 * the mapping that formats the file writes a few pages only. Counted in minor faults against
 * one prefault of a file of the same size, in /dev/shm (4 KiB pages there, where a test
 * directory may have huge ones). */
static void test_create_prefaults_once(void **state)
{
	struct fixture *f = *state;
	const size_t size = 16u << 20;
	const char *dir = "/dev/shm";
	long one = populate_faults(dir, size);
	if (one < (long)(size / 4096 / 2)) {
		printf("create prefaults once: SKIP (prefaulting %zu MiB in %s took %ld faults: "
		       "no 4 KiB pages or no MADV_POPULATE_WRITE here)\n", size >> 20, dir, one);
		return;
	}
	char path[160];
	snprintf(path, sizeof(path), "%s/keratin-basic-create-%d", dir, (int)getpid());
	struct kr_create_opts o = {.struct_size = sizeof(o), .size = size,
				   .flags = KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT,
				   .protection = KR_PROTECT_FULL};
	long before = minor_faults();
	int rc = kr_pool_create(path, &o, &f->pool);
	long faults = minor_faults() - before;
	if (rc == KR_OK) {
		TU_DEEP_CHECK(f->pool, "after a prefaulted create");
		kr_pool_close(f->pool);
		f->pool = NULL;
	}
	unlink(path);
	ASSERT_OK(rc);
	TU_ASSERT(faults < one + one / 2, "kr_pool_create prefaulted %ld faults' worth, one prefault "
		  "of the file is %ld: it mapped the pool whole more than once", faults, one);
}

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_create_open_close, setup, teardown),
		TU_CASE(test_root, setup, teardown),
		TU_CASE(test_roundtrip, setup, teardown),
		TU_CASE(test_tx_get, setup, teardown),
		TU_CASE(test_tx_owner, setup, teardown),
		TU_CASE(test_update, setup, teardown),
		TU_CASE(test_iteration, setup, teardown),
		TU_CASE(test_sizes, setup, teardown),
		TU_CASE(test_stat_accounting, setup, teardown),
		TU_CASE(test_new_run, setup, teardown),
		TU_CASE(test_create_prefaults_once, setup, teardown),
	};
	return TU_RUN_CASES("basic", tests);
}
