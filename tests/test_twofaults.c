/*
 * test_twofaults.c - two damaged pages in one page column: beyond what parity can rebuild,
 * so the pool must say so and contain the loss.
 *
 * The filled pool of ftutil.c (8 MiB, 8 data rows, 2 lanes, mixed object sizes) is built
 * once. Each seeded round starts from the pristine bytes and overwrites with random bytes
 * two pages of the same page column (the same offset within the row: zone z at heap_off +
 * z * zone_size, row r at + r * row_size, docs/FORMAT.md) in two different data rows, both
 * holding live object bytes. Then:
 *   - kr_pool_open succeeds (object pages are not needed to open);
 *   - kr_pool_check(KR_CHECK_REPAIR) returns KR_E_CORRUPT with unrepairable > 0, and
 *     does not crash; kr_pool_check(pool, 0) afterwards still returns KR_E_CORRUPT;
 *   - every object with bytes in either page fails cleanly when opened for writing:
 *     kr_tx_open or kr_tx_add returns NULL with KR_E_CORRUPT_OBJECT, and the transaction's
 *     commit returns that sticky error;
 *   - every other object still equals the model (contents, size, type), the directory
 *     and the root included when they are not hit, and a few of them can still be changed
 *     by committed transactions;
 *   - the pool closes and opens again.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftutil.h"
#include "testutil.h"
#include "workload.h"

#define MAX_PRINTED 30

static struct ft_pool g_fp;
static unsigned g_nfail, g_hit_objects, g_other_objects;

struct round {
	unsigned idx;
	uint64_t pg[2];
	kr_pool *pool;
	bool failed;
};

__attribute__((format(printf, 2, 3))) static void round_fail(struct round *r, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (g_nfail < MAX_PRINTED)
		printf("  FAIL round %u (pages %#llx and %#llx): %s\n", r->idx,
		       (unsigned long long)r->pg[0], (unsigned long long)r->pg[1], msg);
	fflush(stdout);
	g_nfail++;
	r->failed = true;
}

static bool hit(const struct round *r, kr_oid oid, uint64_t size)
{
	struct ft_obj o = { oid, size };
	return ft_obj_overlaps(&o, r->pg[0], FT_PAGE) || ft_obj_overlaps(&o, r->pg[1], FT_PAGE);
}

/* Opening a damaged object for writing must fail with KR_E_CORRUPT_OBJECT, and so must the
 * commit of that transaction. */
static void expect_corrupt(struct round *r, kr_oid oid, uint64_t size, bool whole)
{
	kr_tx *tx;
	TU_OK(kr_tx_begin(r->pool, &tx));
	void *p = whole ? kr_tx_open(tx, oid) : kr_tx_add(tx, oid, size / 2, 1);
	int err = kr_errcode();
	int rc = kr_tx_commit(tx);
	if (p || err != KR_E_CORRUPT_OBJECT || rc != KR_E_CORRUPT_OBJECT)
		round_fail(r,
			   "damaged object %#llx (%llu bytes, header %s): kr_tx_%s returned %p "
			   "with error %d (%s), commit %d; expected NULL, KR_E_CORRUPT_OBJECT and "
			   "a failing commit",
			   (unsigned long long)oid, (unsigned long long)size,
			   ((oid - 16) & ~(uint64_t)(FT_PAGE - 1)) == r->pg[0] ||
					   ((oid - 16) & ~(uint64_t)(FT_PAGE - 1)) == r->pg[1]
				   ? "damaged too"
				   : "intact",
			   whole ? "open" : "add", p, err, kr_strerror(err), rc);
}

#define ANY_TYPE UINT32_MAX /* the root's type number is the library's business */

static void expect_equal(struct round *r, kr_oid oid, const void *want, uint64_t size,
			 uint32_t type, const char *what)
{
	const uint8_t *p = kr_get(r->pool, oid);
	if (!p || kr_size(r->pool, oid) != size ||
	    (type != ANY_TYPE && kr_type(r->pool, oid) != type) || memcmp(p, want, size) != 0)
		round_fail(r,
			   "%s %#llx (%llu bytes), untouched by the damage, no longer equals the "
			   "model (kr_get %p, size %zu, type %u): %s",
			   what, (unsigned long long)oid, (unsigned long long)size, (const void *)p,
			   kr_size(r->pool, oid), kr_type(r->pool, oid), kr_errmsg());
}

static void run_round(struct round *r, uint64_t seed)
{
	struct ft_pool *fp = &g_fp;
	const struct wl_model *m = &fp->model;
	struct kr_check_report rep = { 0 };
	char rs[400];
	int rc;

	ft_restore(fp);
	for (int i = 0; i < 2; i++) {
		uint8_t page[FT_PAGE];
		tu_fill(page, sizeof(page), seed + (uint64_t)i);
		tu_pwrite(fp->path, page, sizeof(page), r->pg[i]);
	}
	if ((rc = tu_open(fp->path, &r->pool)) != KR_OK) {
		round_fail(r, "kr_pool_open = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		return;
	}
	rc = kr_pool_check(r->pool, KR_CHECK_REPAIR, &rep);
	ft_report_str(&rep, rs, sizeof(rs));
	if (rc != KR_E_CORRUPT || rep.unrepairable == 0)
		round_fail(r,
			   "kr_pool_check(REPAIR) = %d (%s), expected KR_E_CORRUPT with "
			   "unrepairable > 0: %s",
			   rc, kr_strerror(rc), rs);
	memset(&rep, 0, sizeof(rep));
	rc = kr_pool_check(r->pool, 0, &rep);
	if (rc != KR_E_CORRUPT) {
		ft_report_str(&rep, rs, sizeof(rs));
		round_fail(r, "second kr_pool_check(0) = %d (%s), expected KR_E_CORRUPT: %s", rc,
			   kr_strerror(rc), rs);
	}

	/* The objects hit: clean failures. The others: as in the model. */
	uint64_t dir_bytes = m->nslots * sizeof(struct wl_dir_entry);
	bool dir_hit = hit(r, fp->dir, dir_bytes);
	bool root_hit = hit(r, fp->root, sizeof(struct ft_root));
	unsigned nwrite = 0;
	struct tu_rng rng;
	tu_rng_seed(&rng, seed ^ 0x77);
	for (unsigned i = 0; i < m->nslots; i++) {
		const struct wl_slot *s = &m->slots[i];
		if (!s->size)
			continue;
		if (hit(r, s->oid, s->size)) {
			expect_corrupt(r, s->oid, s->size, (g_hit_objects++ & 1) != 0);
			continue;
		}
		g_other_objects++;
		expect_equal(r, s->oid, s->data, s->size, m->type_base + i, "object");
		if (nwrite < 2 && tu_rng_chance(&rng, 1, 4)) {
			/* Still writable: one byte changed and changed back, both committed. */
			uint8_t b = (uint8_t)~s->data[0];
			nwrite++;
			if ((rc = kr_update(r->pool, s->oid, 0, &b, 1)) != KR_OK ||
			    (rc = kr_update(r->pool, s->oid, 0, s->data, 1)) != KR_OK)
				round_fail(r, "kr_update of undamaged object %#llx = %d (%s): %s",
					   (unsigned long long)s->oid, rc, kr_strerror(rc),
					   kr_errmsg());
		}
	}
	for (unsigned i = 0; i < fp->nbig; i++) {
		if (hit(r, fp->big[i], fp->big_size[i]))
			expect_corrupt(r, fp->big[i], fp->big_size[i], true);
		else
			expect_equal(r, fp->big[i], fp->big_data[i], fp->big_size[i], 900 + i,
				     "large object");
	}
	if (dir_hit) {
		expect_corrupt(r, fp->dir, dir_bytes, false);
	} else {
		struct wl_dir_entry *d = calloc(m->nslots, sizeof(*d));
		TU_ASSERT(d, "out of memory");
		for (unsigned i = 0; i < m->nslots; i++)
			d[i] = (struct wl_dir_entry){ m->slots[i].oid, m->slots[i].size };
		expect_equal(r, fp->dir, d, dir_bytes, m->type_base - 1, "directory");
		free(d);
	}
	if (root_hit) {
		expect_corrupt(r, fp->root, sizeof(struct ft_root), true);
	} else {
		struct ft_root want = { .dir = fp->dir };
		for (unsigned i = 0; i < fp->nbig; i++) {
			want.big[i] = fp->big[i];
			want.big_size[i] = fp->big_size[i];
		}
		expect_equal(r, fp->root, &want, sizeof(want), ANY_TYPE, "root object");
	}

	rc = kr_pool_close(r->pool);
	r->pool = NULL;
	if (rc != KR_OK) {
		round_fail(r, "kr_pool_close = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		return;
	}
	if ((rc = tu_open(fp->path, &r->pool)) != KR_OK) {
		round_fail(r, "reopen = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		return;
	}
	TU_OK(kr_pool_close(r->pool));
	r->pool = NULL;
}

int main(void)
{
	uint64_t seed = tu_seed("test_twofaults", 0x2fa17ull);
	double t0 = tu_now();
	struct ft_opts o = {
		.size = 8ull << 20,
		.rows = 8,
		.nlanes = 2,
		.nslots = 600,
		.max_size = 32 * 1024,
		.ntx = 1500,
		.nbig = 1,
		.big_quarters = { 1 },
	};
	ft_build(&g_fp, "twofaults", &o, seed);
	const struct ft_geom *g = &g_fp.g;

	/* Columns with live object bytes in at least two data rows. */
	uint64_t ncols = (uint64_t)g->nzones * g->row_pages, ngood = 0;
	uint64_t *good = malloc(ncols * sizeof(*good));
	TU_ASSERT(good, "out of memory");
	for (uint64_t c = 0; c < ncols; c++) {
		unsigned nlive = 0;
		for (uint32_t row = 0; row < g->rows; row++) {
			size_t pg = ft_page_off(g, (uint32_t)(c / g->row_pages), row,
						(uint32_t)(c % g->row_pages)) /
				    FT_PAGE;
			nlive += g_fp.kind[pg] == KR_PAGE_DATA && g_fp.live[pg];
		}
		if (nlive >= 2)
			good[ngood++] = c;
	}
	TU_ASSERT(ngood > 0, "no page column has live objects in two rows");

	unsigned n = tu_scaled(60, 15);
	struct tu_rng rng;
	tu_rng_seed(&rng, seed ^ 0x2f);
	for (unsigned i = 0; i < n; i++) {
		uint64_t c = good[tu_rng_below(&rng, ngood)];
		uint32_t z = (uint32_t)(c / g->row_pages), col = (uint32_t)(c % g->row_pages);
		uint32_t rows[2];
		for (int k = 0; k < 2;) {
			uint32_t row = (uint32_t)tu_rng_below(&rng, g->rows);
			size_t pg = ft_page_off(g, z, row, col) / FT_PAGE;
			if (g_fp.kind[pg] != KR_PAGE_DATA || !g_fp.live[pg] ||
			    (k == 1 && row == rows[0]))
				continue;
			rows[k++] = row;
		}
		struct round r = { .idx = i,
				   .pg = { ft_page_off(g, z, rows[0], col),
					   ft_page_off(g, z, rows[1], col) } };
		run_round(&r, tu_rng_next(&rng));
	}
	printf("test_twofaults: %u rounds (%u page columns eligible), %u damaged objects refused, "
	       "%u others checked, %u failures, in %.2fs\n",
	       n, (unsigned)ngood, g_hit_objects, g_other_objects, g_nfail, tu_now() - t0);
	free(good);
	ft_free(&g_fp);
	unlink(g_fp.path); /* the last round's two faults in a column: beyond repair by design */
	TU_END_CHECK_ALL("test_twofaults");
	return g_nfail ? 1 : 0;
}
