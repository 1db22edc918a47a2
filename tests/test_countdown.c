/*
 * test_countdown.c - countdown fault injection at the system-call choke points
 * (src/base/fault.h: malloc/calloc/realloc/strdup, mmap, msync, pwrite, posix_fallocate,
 * ftruncate).
 *
 * Each operation runs with the Nth wrapped call failing, for N = 1, 2, ... until it runs
 * without the fault firing. After every failure:
 *   - the operation returned a clean error code declared in keratin.h (or KR_OK, if the
 *     caller could absorb the failure), never crashed (ASan also checks for leaks at exit);
 *   - the file is absent, or opens and is sound with nothing committed lost: a pool passes
 *     the deep check (kr_pool_check_deep) and holds the objects committed before, the
 *     transaction's objects all or none; a region's data is unchanged and checks clean; a
 *     map holds the old value or the new one.
 * The number of countdown points each operation exercised is printed and must reach the
 * lower bound pinned below, so that the test cannot pass by silently exercising nothing.
 *
 * Operations: pool create, pool open, a commit (small and large allocations plus an update
 * of an existing object), region open (creating its sidecar) and a map put (open, put,
 * close).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "keratin_hmap.h"
#include "keratin_region.h"
#include "testutil.h"

#define POOL_SIZE (16u << 20)
#define KEEP 4 /* objects committed before the commit case */

/* Runs fails with the Nth call failing and check after each failure. Returns the number of
 * countdown points (failures) it went through. */
static unsigned countdown(const char *name, int (*op)(void *), void (*check)(void *, int), void *ctx,
			  unsigned min_points)
{
	unsigned points = 0;
	for (uint64_t n = 1;; n++) {
		kr_fault_countdown(n);
		int rc = op(ctx);
		int fired = kr_fault_fired();
		kr_fault_countdown(0);
		if (!fired) {
			TU_ASSERT(rc == KR_OK, "%s: fails without a fault: %d %s", name, rc, kr_errmsg());
			break;
		}
		points++;
		TU_ASSERT(rc == KR_OK || tu_known_err(rc), "%s: call %llu failing gave %d, not a "
			  "keratin error code", name, (unsigned long long)n, rc);
		check(ctx, rc);
	}
	printf("%-14s %u countdown points exercised (lower bound %u)\n", name, points, min_points);
	TU_ASSERT(points >= min_points, "%s: only %u countdown points", name, points);
	return points;
}

/* ---- pools -------------------------------------------------------------------------------- */

struct pool_case {
	char path[128];
	kr_pool *pool; /* the commit case's open pool */
	kr_oid keep[KEEP];
	uint64_t nobjects_before;
};

static uint64_t pool_objects(kr_pool *pool)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	return st.nobjects;
}

/* The closed pool at path is sound and holds the KEEP objects intact, and lo..hi objects. */
static void pool_sound(struct pool_case *c, uint64_t lo, uint64_t hi, const char *when)
{
	kr_pool *pool;
	TU_OK(kr_pool_open(c->path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &pool));
	TU_DEEP_CHECK(pool, when);
	uint64_t n = pool_objects(pool);
	TU_ASSERT(n >= lo && n <= hi, "%s: %llu objects, expected %llu..%llu", when,
		  (unsigned long long)n, (unsigned long long)lo, (unsigned long long)hi);
	for (int i = 0; i < KEEP && c->keep[i]; i++) {
		const uint64_t *v = kr_get(pool, c->keep[i]);
		TU_ASSERT(v && (*v == (uint64_t)i || *v == 1000u + (uint64_t)i),
			  "%s: object %d lost or changed", when, i);
	}
	TU_OK(kr_pool_close(pool));
}

static int op_create(void *ctx)
{
	struct pool_case *c = ctx;
	kr_pool *pool;
	int rc = tu_create(c->path, POOL_SIZE, 0, 0, 0, &pool);
	if (rc == KR_OK)
		rc = kr_pool_close(pool);
	return rc;
}

static void check_create(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	if (access(c->path, F_OK) == 0) {
		/* A create that returned an error leaves no file behind. */
		TU_ASSERT(rc == KR_OK, "create failed with %d but left %s behind", rc, c->path);
		pool_sound(c, 0, 0, "after a create with a fault");
		unlink(c->path);
	}
}

static void fill_pool(struct pool_case *c)
{
	kr_pool *pool;
	TU_OK(tu_create(c->path, POOL_SIZE, 0, 0, 0, &pool));
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	for (int i = 0; i < KEEP; i++) {
		TU_OK(kr_tx_alloc(tx, i == KEEP - 1 ? 50000 : 64, 1, &c->keep[i]));
		uint64_t *v = kr_tx_open(tx, c->keep[i]);
		TU_ASSERT(v, "kr_tx_open: %s", kr_errmsg());
		*v = (uint64_t)i;
	}
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));
}

static int op_open(void *ctx)
{
	struct pool_case *c = ctx;
	kr_pool *pool;
	int rc = tu_open(c->path, &pool);
	if (rc == KR_OK)
		rc = kr_pool_close(pool);
	return rc;
}

static void check_open(void *ctx, int rc)
{
	(void)rc;
	pool_sound(ctx, KEEP, KEEP, "after an open with a fault");
}

/* Three new objects (two small, one extent) and an update of kept object 0, in one commit;
 * then close. The pool is opened before the countdown is armed. */
static int op_commit(void *ctx)
{
	struct pool_case *c = ctx;
	kr_tx *tx;
	kr_oid oid;
	int rc = kr_tx_begin(c->pool, &tx);
	if (rc != KR_OK)
		return rc;
	static const size_t sizes[] = {100, 3000, 70000};
	for (int i = 0; i < 3 && rc == KR_OK; i++)
		rc = kr_tx_alloc(tx, sizes[i], 2, &oid);
	uint64_t *v = rc == KR_OK ? kr_tx_add(tx, c->keep[0], 0, 8) : NULL;
	if (v)
		*v = 1000;
	return kr_tx_commit(tx); /* ends the transaction, committing or aborting */
}

static int op_commit_and_close(void *ctx)
{
	struct pool_case *c = ctx;
	int rc = op_commit(ctx);
	int crc = kr_pool_close(c->pool);
	c->pool = NULL;
	return rc ? rc : crc;
}

static void check_commit(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	(void)rc;
	/* Committed or not, all or nothing; the kept objects intact either way. */
	pool_sound(c, c->nobjects_before, c->nobjects_before + 3, "after a commit with a fault");
	/* Back to the state before the commit for the next round. */
	kr_pool *pool;
	TU_OK(tu_open(c->path, &pool));
	if (pool_objects(pool) != c->nobjects_before) {
		TU_ASSERT(pool_objects(pool) == c->nobjects_before + 3, "partial commit");
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o))
			if (kr_type(pool, o) == 2)
				TU_OK(kr_tx_free(tx, o));
		uint64_t *v = kr_tx_add(tx, c->keep[0], 0, 8);
		TU_ASSERT(v, "kr_tx_add: %s", kr_errmsg());
		*v = 0;
		TU_OK(kr_tx_commit(tx));
	}
	c->pool = pool;
}

/* ---- regions and maps ------------------------------------------------------------------- */

struct file_case {
	char path[128], side[160];
	uint8_t data[64 << 10];
};

static int op_region(void *ctx)
{
	struct file_case *c = ctx;
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	kr_region *r;
	void *base;
	size_t len;
	int rc = kr_region_open(c->path, &o, &r, &base, &len);
	if (rc == KR_OK)
		rc = kr_region_close(r);
	return rc;
}

static void check_region(void *ctx, int rc)
{
	struct file_case *c = ctx;
	(void)rc;
	size_t len;
	void *now = tu_read_file(c->path, &len);
	TU_ASSERT(len == sizeof(c->data) && memcmp(now, c->data, len) == 0,
		  "region open with a fault changed the data file");
	free(now);
	if (access(c->side, F_OK) != 0)
		return;
	/* A sidecar left behind opens (recovering, if it must) and checks clean. */
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	kr_region *r;
	void *base;
	TU_OK(kr_region_open(c->path, &o, &r, &base, &len));
	struct kr_region_report rep;
	TU_OK(kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, &rep));
	TU_OK(kr_region_close(r));
	unlink(c->side); /* the next round creates it again */
}

static int op_map(void *ctx)
{
	struct file_case *c = ctx;
	kr_hmap *m;
	int rc = kr_hmap_open(c->path, KR_OPEN_FORCE_PMEM, &m);
	if (rc != KR_OK)
		return rc;
	rc = kr_hmap_put(m, "key", 3, "new", 4);
	int crc = kr_hmap_close(m);
	return rc ? rc : crc;
}

static void check_map(void *ctx, int rc)
{
	struct file_case *c = ctx;
	(void)rc;
	kr_hmap *m;
	TU_OK(kr_hmap_open(c->path, KR_OPEN_FORCE_PMEM, &m));
	char v[8];
	size_t vlen;
	int got = kr_hmap_get(m, "key", 3, v, sizeof(v), &vlen);
	TU_ASSERT(got == 1, "the key is gone after a put with a fault: %d %s", got, kr_errmsg());
	TU_ASSERT(vlen == 4 && (strcmp(v, "old") == 0 || strcmp(v, "new") == 0),
		  "map holds neither the old value nor the new one");
	TU_ASSERT(kr_hmap_count(m) == 2, "map has %llu keys, expected 2",
		  (unsigned long long)kr_hmap_count(m));
	TU_OK(kr_hmap_put(m, "key", 3, "old", 4));
	TU_OK(kr_hmap_close(m));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct pool_case pc = {0};
	tu_pool_path(pc.path, sizeof(pc.path), "deep2-countdown");
	countdown("pool create", op_create, check_create, &pc, 20);
	unlink(pc.path);

	fill_pool(&pc);
	countdown("pool open", op_open, check_open, &pc, 20);

	TU_OK(tu_open(pc.path, &pc.pool));
	pc.nobjects_before = pool_objects(pc.pool);
	countdown("commit", op_commit_and_close, check_commit, &pc, 6);
	TU_ASSERT(pc.pool == NULL, "the last round closed the pool");
	pool_sound(&pc, pc.nobjects_before + 3, pc.nobjects_before + 3, "after the commit");

	struct file_case *fc = calloc(1, sizeof(*fc));
	TU_ASSERT(fc, "no memory");
	tu_pool_path(fc->path, sizeof(fc->path), "deep2-region");
	snprintf(fc->side, sizeof(fc->side), "%s.krs", fc->path);
	tu_fill(fc->data, sizeof(fc->data), 7);
	tu_write_file(fc->path, fc->data, sizeof(fc->data));
	countdown("region open", op_region, check_region, fc, 10);

	tu_pool_path(fc->path, sizeof(fc->path), "deep2-map");
	struct kr_hmap_opts mo = KR_HMAP_OPTS_INIT;
	mo.size = 256 << 10;
	mo.flags = KR_OPEN_FORCE_PMEM;
	kr_hmap *m;
	TU_OK(kr_hmap_create(fc->path, &mo, &m));
	TU_OK(kr_hmap_put(m, "key", 3, "old", 4));
	TU_OK(kr_hmap_put(m, "other", 5, "x", 2));
	TU_OK(kr_hmap_close(m));
	countdown("map put", op_map, check_map, fc, 100);
	free(fc);
	printf("deep checks run: %u\n", tu_deep_checks());
	return 0;
}
