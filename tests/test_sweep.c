/*
 * test_sweep.c - the exhaustive single-page sweep: whatever one 4 KiB page of a pool file
 * holds, losing it must cost nothing.
 *
 * Usage: test_sweep sample            a seeded sample (ctest)
 *        test_sweep full              every page of the file (make torture)
 *        test_sweep page OFF [random|media]   replay one page (same KR_TEST_SEED)
 *
 * A small pool (8 MiB, 8 data rows per zone, 2 lanes) is filled by the random workload of
 * workload.c with objects of mixed sizes, plus large objects of a quarter and of one and a
 * quarter rows (the latter has two pages in some page columns), closed cleanly, and its
 * bytes are kept with the reference model. kr_pool_page_kind on the pristine pool says what
 * each page holds: header, control, lane, lane replica, zone metadata, data (with or
 * without live object bytes), parity, unused. Then for each page under test, twice:
 *
 *   random: the pristine bytes come back, the page is overwritten with random bytes and
 *           nobody says so (a scribble, silent corruption);
 *   media:  the same, and the page is put on the platform's bad-block list (through
 *           kr_badblocks_add, or by writing PATH.badblocks in the documented format with
 *           an offset inside the page), as the kernel reports a poisoned page of a DAX
 *           file; after the open the list must be gone (docs/FORMAT.md).
 *
 * and each time:
 *   - kr_pool_open must succeed (it repairs headers, control lines and allocator records
 *     itself; with a bad-block list it repairs the listed page, and kr_pool_stat counts it
 *     in media_repairs);
 *   - what must already be whole after open is compared with the pristine bytes: the
 *     listed page itself for every kind that has one right content (not lanes: a clean
 *     pool's lane may also be rebuilt empty), the root line of a damaged control page;
 *   - kr_pool_check(KR_CHECK_REPAIR) must return KR_OK (and find nothing left to do when
 *     the open was told about the page); a data page holding live bytes, a zone-meta page
 *     and a parity page must then be byte-identical to the pristine page;
 *   - every object equals the model (root, directory, workload objects, large objects, and
 *     exactly these are live), and kr_pool_check(pool, 0) returns KR_OK;
 *   - the repaired pool keeps working: a few more random transactions commit, the
 *     redundancy holds after them, and after close and reopen the pool matches the model
 *     once more.
 *
 * A failing page is reported (offset, kind, variant, what happened) and the sweep goes on,
 * so one run shows every kind of page that fails; the exit status is 1 if any did. A crash
 * or hang prints the page being tried. Counts per kind and the time are printed at the end.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftutil.h"
#include "testutil.h"
#include "workload.h"

#define POOL_SIZE (8ull << 20)
#define AFTER_TXS 3    /* transactions run on each repaired pool */
#define MAX_PRINTED 40 /* failure lines printed in full */

enum variant { V_RANDOM = 0, V_MEDIA = 1 };
static const char *variant_name[2] = { "random", "media" };

static struct ft_pool g_fp;
static uint64_t g_seed;
static unsigned g_checked[2][FT_NKINDS], g_failed[2][FT_NKINDS], g_nfail;
static unsigned g_checked_live[2], g_failed_live[2];

/* ---- one page ------------------------------------------------------------------------------- */

struct run {
	kr_pool *pool;
	uint64_t off;
	int kind, live;
	enum variant v;
};

/* Records a failed page; the caller returns after it. */
__attribute__((format(printf, 2, 3))) static void page_fail(struct run *r, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (g_nfail < MAX_PRINTED)
		printf("  FAIL page %#llx (%s%s, %s): %s\n", (unsigned long long)r->off,
		       ft_kind_name(r->kind),
		       r->kind == KR_PAGE_DATA ? (r->live ? ", live" : ", free") : "",
		       variant_name[r->v], msg);
	else if (g_nfail == MAX_PRINTED)
		printf("  (further failures are only counted)\n");
	fflush(stdout);
	g_nfail++;
	g_failed[r->v][r->kind]++;
	if (r->kind == KR_PAGE_DATA && r->live)
		g_failed_live[r->v]++;
	if (r->pool) {
		kr_pool_close(r->pool);
		r->pool = NULL;
	}
}

/* The page must hold its pristine bytes again (a page that has one right content). */
static int page_restored(struct run *r, const char *when)
{
	const uint8_t *now = (const uint8_t *)kr_pool_base(r->pool) + r->off;
	const uint8_t *want = g_fp.img + r->off;
	if (memcmp(now, want, FT_PAGE) == 0)
		return 1;
	unsigned k = 0, n = 0;
	while (now[k] == want[k])
		k++;
	for (unsigned i = 0; i < FT_PAGE; i++)
		n += now[i] != want[i];
	page_fail(r, "%s: the page differs from its pristine bytes (%u bytes, the first at +%u)",
		  when, n, k);
	return 0;
}

static int check(struct run *r, unsigned flags, struct kr_check_report *rep, const char *when)
{
	memset(rep, 0, sizeof(*rep));
	int rc = kr_pool_check(r->pool, flags, rep);
	if (rc == KR_OK)
		return 1;
	char rs[400];
	ft_report_str(rep, rs, sizeof(rs));
	page_fail(r, "%s: kr_pool_check(%s) = %d (%s): %s; %s", when,
		  flags & KR_CHECK_REPAIR ? "REPAIR" : "0", rc, kr_strerror(rc), kr_errmsg(), rs);
	return 0;
}

/* Runs one page in one variant; returns 0 if it passed. */
static int sweep_page(uint64_t off, enum variant v, uint64_t case_seed)
{
	struct ft_pool *fp = &g_fp;
	struct run r = {
		.off = off, .kind = fp->kind[off / FT_PAGE], .live = fp->live[off / FT_PAGE], .v = v
	};
	struct kr_check_report rep = { 0 };
	struct kr_pool_stat st;
	char why[512];
	int rc;

	tu_case_begin(tu_sanitized() ? 240 : 60,
		      "page %#llx (%s), variant %s, KR_TEST_SEED=%llu; replay: "
		      "test_sweep page %#llx %s",
		      (unsigned long long)off, ft_kind_name(r.kind), variant_name[v],
		      (unsigned long long)g_seed, (unsigned long long)off, variant_name[v]);
	g_checked[v][r.kind]++;
	if (r.kind == KR_PAGE_DATA && r.live)
		g_checked_live[v]++;

	ft_restore(fp);
	uint8_t page[FT_PAGE];
	tu_fill(page, sizeof(page), case_seed);
	tu_pwrite(fp->path, page, sizeof(page), off);
	if (v == V_MEDIA) {
		/* Any offset inside the page names it. Half the cases go through
		 * kr_badblocks_add, half write the list as docs/FORMAT.md describes it: decimal,
		 * after a line that is not a number (ignored). */
		uint64_t in_page = off + (case_seed >> 8) % FT_PAGE;
		if (case_seed & 1) {
			char list[96];
			int n = snprintf(list, sizeof(list), "not a number\n%llu\n",
					 (unsigned long long)in_page);
			tu_write_file(fp->bb_path, list, (size_t)n);
		} else if ((rc = kr_badblocks_add(fp->path, in_page)) != KR_OK) {
			page_fail(&r, "kr_badblocks_add = %d (%s): %s", rc, kr_strerror(rc),
				  kr_errmsg());
			goto out;
		}
	}

	if ((rc = tu_open(fp->path, &r.pool)) != KR_OK) {
		r.pool = NULL;
		page_fail(&r, "kr_pool_open = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		goto out;
	}
	TU_OK(kr_pool_stat(r.pool, &st));
	if (v == V_MEDIA && access(fp->bb_path, F_OK) == 0) {
		page_fail(&r, "after a successful open the bad-block list %s still exists",
			  fp->bb_path);
		goto out;
	}
	if (v == V_MEDIA) {
		if (st.media_repairs < 1) {
			page_fail(&r,
				  "after open: kr_pool_stat media_repairs = %llu, expected >= 1",
				  (unsigned long long)st.media_repairs);
			goto out;
		}
		if (r.kind != KR_PAGE_LANE && r.kind != KR_PAGE_LANE_REPLICA &&
		    r.kind != KR_PAGE_CONTROL &&
		    !page_restored(&r, "after open with the page listed bad"))
			goto out;
	}
	if (r.kind == KR_PAGE_CONTROL &&
	    memcmp((uint8_t *)kr_pool_base(r.pool) + off, fp->img + off, 64) != 0) {
		page_fail(&r, "after open: the root line of the damaged control page was not "
			      "rewritten from the other copy");
		goto out;
	}

	memset(&rep, 0, sizeof(rep));
	if ((rc = kr_pool_check(r.pool, KR_CHECK_REPAIR, &rep)) != KR_OK) {
		/* Say also whether the objects survived: a failed repair that wrote over good
		 * pages is worse than one that gave up. */
		char rs[400], msg[300];
		snprintf(msg, sizeof(msg), "%s", kr_errmsg());
		ft_report_str(&rep, rs, sizeof(rs));
		if (ft_verify(r.pool, fp, &fp->model, why, sizeof(why)) == 0)
			snprintf(why, sizeof(why), "every object still equals the model");
		page_fail(&r, "kr_pool_check(REPAIR) = %d (%s): %s; %s; objects afterwards: %s", rc,
			  kr_strerror(rc), msg, rs, why);
		goto out;
	}
	if (v == V_MEDIA && (rep.bad_objects || rep.bad_chunks || rep.bad_columns)) {
		ft_report_str(&rep, why, sizeof(why));
		page_fail(&r,
			  "the open was told the page is bad, yet the repair pass still found "
			  "damage: %s",
			  why);
		goto out;
	}
	if (v == V_RANDOM &&
	    (r.kind == KR_PAGE_ZONE_META || r.kind == KR_PAGE_PARITY ||
	     (r.kind == KR_PAGE_DATA && r.live)) &&
	    !page_restored(&r, "after kr_pool_check(REPAIR)"))
		goto out;
	if (ft_verify(r.pool, fp, &fp->model, why, sizeof(why)) != 0) {
		page_fail(&r, "after repair: %s", why);
		goto out;
	}
	if (!check(&r, 0, &rep, "second check after repair"))
		goto out;

	/* The repaired pool keeps working: allocations over repaired chunk records, commits
	 * through repaired lanes, parity patched over repaired pages. */
	struct wl_ctx c;
	struct wl_plan plan;
	struct tu_rng rng;
	tu_rng_seed(&rng, case_seed ^ 0xa5a5);
	wl_ctx_init(&c, r.pool, fp->dir, &fp->p);
	wl_model_copy(&c.model, &fp->model);
	while (c.commits < AFTER_TXS) {
		wl_plan_gen(&rng, &fp->p, &c.model, &plan);
		wl_exec(&c, &plan);
	}
	if (!check(&r, 0, &rep, "check after more transactions"))
		goto out_ctx;
	rc = kr_pool_close(r.pool);
	r.pool = NULL;
	if (rc != KR_OK) {
		page_fail(&r, "kr_pool_close = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		goto out_ctx;
	}
	if ((rc = tu_open(fp->path, &r.pool)) != KR_OK) {
		r.pool = NULL;
		page_fail(&r, "reopen after repair = %d (%s): %s", rc, kr_strerror(rc),
			  kr_errmsg());
		goto out_ctx;
	}
	if (ft_verify(r.pool, fp, &c.model, why, sizeof(why)) != 0) {
		page_fail(&r, "after more transactions, close and reopen: %s", why);
		goto out_ctx;
	}
	if (!check(&r, 0, &rep, "check after reopen"))
		goto out_ctx;
	rc = kr_pool_close(r.pool);
	r.pool = NULL;
	if (rc != KR_OK)
		page_fail(&r, "final kr_pool_close = %d (%s): %s", rc, kr_strerror(rc),
			  kr_errmsg());
out_ctx:
	wl_ctx_free(&c);
out:
	tu_case_end();
	return r.pool != NULL; /* page_fail closed it; nonzero would be a bug of this test */
}

/* ---- page selection ------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A sample of at least n pages with every kind present, several of each: the first and the
 * last page of each kind (where off-by-one errors live) and `per_kind` random others (all
 * of a kind with fewer pages), the header pages of the root, the directory and the large
 * objects, then random data pages with live bytes and random pages of any kind for the
 * rest. Sorted by offset. */
static size_t pick_sample(struct tu_rng *rng, size_t n, uint64_t *out)
{
	const struct ft_pool *fp = &g_fp;
	uint8_t *sel = calloc(fp->npages, 1);
	size_t cnt = 0, per_kind = 6;
	TU_ASSERT(sel, "out of memory");
#define TAKE(pg)                                             \
	do {                                                 \
		size_t p_ = (pg);                            \
		if (!sel[p_]) {                              \
			sel[p_] = 1;                         \
			out[cnt++] = (uint64_t)p_ * FT_PAGE; \
		}                                            \
	} while (0)
	size_t *of_kind = malloc(fp->npages * sizeof(*of_kind));
	TU_ASSERT(of_kind, "out of memory");
	for (int k = 1; k < FT_NKINDS; k++) {
		size_t nk = 0;
		for (size_t i = 0; i < fp->npages; i++)
			if (fp->kind[i] == k)
				of_kind[nk++] = i;
		if (!nk)
			continue;
		TAKE(of_kind[0]);
		TAKE(of_kind[nk - 1]);
		/* A partial Fisher-Yates shuffle draws the others without repeats. */
		for (size_t t = 0; t < per_kind && t < nk; t++) {
			size_t j = t + tu_rng_below(rng, nk - t), x = of_kind[j];
			of_kind[j] = of_kind[t];
			of_kind[t] = x;
			TAKE(x);
		}
	}
	free(of_kind);
	TAKE((fp->root - 16) / FT_PAGE);
	TAKE((fp->dir - 16) / FT_PAGE);
	for (unsigned i = 0; i < fp->nbig; i++)
		TAKE((fp->big[i] - 16) / FT_PAGE);
	size_t guard = 0;
	while (cnt < n && guard++ < 100 * n) {
		size_t i = tu_rng_below(rng, fp->npages);
		if (tu_rng_chance(rng, 1, 2) && !(fp->kind[i] == KR_PAGE_DATA && fp->live[i]))
			continue; /* half of the rest: data pages that hold live objects */
		TAKE(i);
	}
#undef TAKE
	free(sel);
	qsort(out, cnt, sizeof(*out), cmp_u64);
	return cnt;
}

/* ---- main ----------------------------------------------------------------------------------- */

static void print_counts(const char *mode, size_t npages_tested, double secs)
{
	unsigned inpool[FT_NKINDS] = { 0 }, live_inpool = 0;
	for (size_t i = 0; i < g_fp.npages; i++) {
		inpool[g_fp.kind[i]]++;
		live_inpool += g_fp.kind[i] == KR_PAGE_DATA && g_fp.live[i];
	}
	printf("  %-14s %8s %10s %10s %10s %10s\n", "kind", "in pool", "random", "failed", "media",
	       "failed");
	for (int k = 1; k < FT_NKINDS; k++) {
		if (!inpool[k])
			continue;
		printf("  %-14s %8u %10u %10u %10u %10u\n", ft_kind_name(k), inpool[k],
		       g_checked[V_RANDOM][k], g_failed[V_RANDOM][k], g_checked[V_MEDIA][k],
		       g_failed[V_MEDIA][k]);
		if (k == KR_PAGE_DATA)
			printf("  %-14s %8u %10u %10u %10u %10u\n", " (live bytes)", live_inpool,
			       g_checked_live[V_RANDOM], g_failed_live[V_RANDOM],
			       g_checked_live[V_MEDIA], g_failed_live[V_MEDIA]);
	}
	unsigned cases = 0;
	for (int k = 1; k < FT_NKINDS; k++)
		cases += g_checked[V_RANDOM][k] + g_checked[V_MEDIA][k];
	printf("test_sweep %s: %zu pages, %u cases (random + media), %u failed, in %.1fs\n", mode,
	       npages_tested, cases, g_nfail, secs);
}

int main(int argc, char **argv)
{
	const char *mode = argc >= 2 ? argv[1] : "";
	bool one = !strcmp(mode, "page");
	if (!(!strcmp(mode, "sample") || !strcmp(mode, "full") || (one && argc >= 3)))
		TU_FAIL("usage: %s sample | full | page OFF [random|media]", argv[0]);
	g_seed = tu_seed("test_sweep", 0x5eed5eedull);
	tu_case_watch("test_sweep: died or hung while trying: ", true);

	struct ft_opts o = {
		.size = POOL_SIZE,
		.rows = 8,
		.nlanes = 2,
		.nslots = 600,
		.max_size = 32 * 1024,
		.ntx = 1500,
		.nbig = 2,
		.big_quarters = { 1, 5 },
	};
	ft_build(&g_fp, "sweep", &o, g_seed);

	struct tu_rng rng;
	tu_rng_seed(&rng, g_seed ^ 0x5a3c);
	uint64_t *pages = malloc(g_fp.npages * sizeof(*pages));
	TU_ASSERT(pages, "out of memory");
	size_t n;
	if (!strcmp(mode, "full")) {
		for (n = 0; n < g_fp.npages; n++)
			pages[n] = (uint64_t)n * FT_PAGE;
	} else if (one) {
		pages[0] = strtoull(argv[2], NULL, 0) & ~(uint64_t)(FT_PAGE - 1);
		TU_ASSERT(pages[0] < g_fp.st.pool_size, "offset beyond the pool");
		n = 1;
	} else {
		n = pick_sample(&rng, tu_scaled(600, 500), pages);
	}

	double t0 = tu_now(), last = t0;
	for (size_t i = 0; i < n; i++) {
		/* The case seed depends on the page only, so `page OFF` replays a sweep's case. */
		uint64_t cs = g_seed * 1000003 + pages[i] / FT_PAGE;
		for (int v = 0; v < 2; v++) {
			if (one && argc >= 4 && strcmp(argv[3], variant_name[v]))
				continue;
			TU_ASSERT(sweep_page(pages[i], (enum variant)v,
					     cs + (uint64_t)v * 0x9e37) == 0,
				  "internal: pool left open");
		}
		if (tu_now() - last > 30) {
			last = tu_now();
			printf("  ... %zu/%zu pages, %u failed, %.0fs\n", i + 1, n, g_nfail,
			       last - t0);
			fflush(stdout);
		}
	}
	print_counts(mode, n, tu_now() - t0);
	free(pages);
	ft_free(&g_fp);
	TU_END_CHECK_ALL("test_sweep");
	return g_nfail ? 1 : 0;
}
