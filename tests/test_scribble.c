/*
 * test_scribble.c - wild writes into the heap of a closed pool: random bytes of random
 * length written with pwrite at random offsets inside the data rows (the way a stray
 * pointer or a misdirected DMA would), then open + repair must give back every object.
 *
 * The filled pool of ftutil.c (8 MiB, 8 data rows, 2 lanes, mixed object sizes) is built
 * once and kept. Each seeded round starts from the pristine bytes and writes one scribble
 * inside the data rows of a zone (zone metadata included, never the parity row):
 *   - random: anywhere, length log-uniform from 1 byte to row_size - 4095 bytes. That is
 *     the longest run that can never touch two pages of one page column (a range of one
 *     full row width starting mid-page covers the start page's column in two rows, which
 *     parity cannot rebuild: test_twofaults covers that);
 *   - rowcross: 7/8 of a row's width up to the same limit, across the boundary between two
 *     data rows (the end of one row and the start of the next: one damaged page per
 *     column, but damaged objects of both rows share the damaged columns);
 *   - header: inside one field (size, type or crc) of a live object's 16-byte header;
 *   - meta: a short run inside the zone's chunk records, in half the rounds across a page
 *     boundary (144-byte records are packed, so some straddle two pages).
 * Random bytes that happen to equal the old ones are redrawn, so every scribble changes
 * something. Then:
 *   - kr_pool_open must succeed (it repairs allocator records from parity);
 *   - kr_pool_check(pool, 0) must report the damage: KR_E_CORRUPT whenever a byte outside
 *     the zone metadata changed (parity disagrees there: the metadata alone may already
 *     have been repaired by the open), with bad_objects >= 1 whenever a byte an object
 *     checksum covers changed (payload, or any field of a live object's header: the crc
 *     covers size, type and payload, docs/FORMAT.md), and every page it names through
 *     on_page must be a scribbled page, the parity page of a scribbled column, or a page of
 *     a damaged object's block in a scribbled column (these are counted apart, so that they
 *     do not hide what the repair does);
 *   - kr_pool_check(KR_CHECK_REPAIR) must return KR_OK, every object must equal the model
 *     (contents, sizes, types, the live set) and kr_pool_check(pool, 0) must then be KR_OK.
 * Failing rounds are reported with seed, mode, offset and length, and the test goes on;
 * the exit status is 1 if any failed.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftutil.h"
#include "testutil.h"
#include "workload.h"

#define MAX_PRINTED 30

enum mode { M_RANDOM, M_ROWCROSS, M_HEADER, M_META, M_N };
static const char *mode_name[M_N] = { "random", "rowcross", "header", "meta" };

/* What each byte of the pristine pool is, for judging a scribble. */
enum { B_FREE = 0, B_PAYLOAD, B_HDR_CSUM, B_HDR_TYPE };

static struct ft_pool g_fp;
static uint8_t *g_byte; /* B_* per pool byte */
static unsigned g_rounds[M_N], g_failed[M_N], g_nfail, g_nbad_report;
static uint8_t *g_bad_col; /* per page column: a scribbled page lies in it (this round) */
static uint8_t *g_bad_obj; /* per object of g_fp.objs: checksummed bytes changed */

struct round {
	unsigned idx;
	enum mode m;
	uint64_t off, len;
	uint64_t first_page, last_page; /* scribbled pages (offsets) */
	bool outside_meta, csum_covered, type_changed;
	kr_pool *pool;
	unsigned nreported;
	uint64_t bad_report; /* a reported page outside the allowed set, or 0 */
	uint64_t unrep[4];   /* pages the repair pass reports unrepairable */
	unsigned nunrep;
};

__attribute__((format(printf, 2, 3))) static void round_fail(struct round *r, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (g_nfail < MAX_PRINTED)
		printf("  FAIL round %u (%s scribble of %llu bytes at %#llx%s%s): %s\n", r->idx,
		       mode_name[r->m], (unsigned long long)r->len, (unsigned long long)r->off,
		       r->csum_covered ? ", checksummed object bytes" : "",
		       r->type_changed ? ", an object type field" : "", msg);
	else if (g_nfail == MAX_PRINTED)
		printf("  (further failures are only counted)\n");
	fflush(stdout);
	g_nfail++;
	g_failed[r->m]++;
	if (r->pool) {
		kr_pool_close(r->pool);
		r->pool = NULL;
	}
}

/* Pages kr_pool_check may name for this scribble: the scribbled pages, the parity page of
 * each one's column, and the pages of damaged objects that lie in a scribbled column (the
 * check cannot tell which row of a disagreeing column holds the damage; keratin.h: "parity
 * says which of its pages disagree"). */
static bool allowed_page(const struct round *r, uint64_t off)
{
	const struct ft_geom *g = &g_fp.g;
	off &= ~(uint64_t)(FT_PAGE - 1);
	if (off >= r->first_page && off <= r->last_page)
		return true;
	if (off < g->heap_off || off >= g->heap_off + g->nzones * g->zone_size)
		return false;
	uint32_t z, row, col;
	ft_page_pos(g, off, &z, &row, &col);
	if (!g_bad_col[(uint64_t)z * g->row_pages + col])
		return false;
	if (row == g->rows)
		return true; /* the column's parity page */
	/* A damaged object is its whole block: the header may be the damaged part. Blocks
	 * are at most a zone's chunks, so look back from the first object ending after off. */
	size_t i = ft_obj_at(&g_fp, off);
	for (size_t j = i < g_fp.nobjs ? i + 1 : g_fp.nobjs; j-- > 0;) {
		const struct ft_obj *o = &g_fp.objs[j];
		if (o->oid - 16 >= off + FT_PAGE)
			continue;
		if (o->oid - 16 + ft_block_bytes(o->size) <= off)
			break;
		if (g_bad_obj[j])
			return true;
	}
	return false;
}

static void on_page_unrepairable(void *ctx, uint64_t off, int state)
{
	struct round *r = ctx;
	if (state == KR_PAGE_UNREPAIRABLE && r->nunrep < 4)
		r->unrep[r->nunrep++] = off;
}

static void on_page(void *ctx, uint64_t off, int state)
{
	struct round *r = ctx;
	(void)state;
	r->nreported++;
	if (!r->bad_report && !allowed_page(r, off))
		r->bad_report = off;
}

/* Draws the scribble's place. */
static void place(struct round *r, struct tu_rng *rng)
{
	const struct ft_geom *g = &g_fp.g;
	uint32_t z = (uint32_t)tu_rng_below(rng, g->nzones);
	uint64_t zstart = g->heap_off + z * g->zone_size, zend = zstart + g->rows * g->row_size;
	switch (r->m) {
	case M_RANDOM:
		r->off = zstart + tu_rng_below(rng, zend - zstart);
		r->len = tu_rng_logu(rng, 1, g->row_size - FT_PAGE + 1);
		if (r->off + r->len > zend)
			r->len = zend - r->off;
		break;
	case M_HEADER: {
		static const unsigned fo[3] = { 0, 8, 12 }, fl[3] = { 8, 4, 4 };
		const struct ft_obj *o = &g_fp.objs[tu_rng_below(rng, g_fp.nobjs)];
		unsigned f = (unsigned)tu_rng_below(rng, 3);
		unsigned start = (unsigned)tu_rng_below(rng, fl[f]);
		r->off = o->oid - 16 + fo[f] + start;
		r->len = tu_rng_range(rng, 1, fl[f] - start);
		break;
	}
	case M_ROWCROSS: {
		/* Across the boundary between data rows r and r + 1: the end of row r and the
		 * start of row r + 1, different page columns, objects on both sides. */
		uint32_t row = (uint32_t)tu_rng_below(rng, g->rows - 1);
		uint64_t boundary = zstart + (row + 1) * g->row_size;
		r->len = tu_rng_range(rng, g->row_size / 8 * 7, g->row_size - FT_PAGE + 1);
		r->off = boundary - tu_rng_range(rng, 1, r->len - 1);
		break;
	}
	default: {
		/* Chunk records are 144 bytes, packed: some straddle a page boundary. Half the
		 * scribbles cross one of the metadata's page boundaries. */
		uint64_t meta = (uint64_t)g->chunks_per_zone * 144;
		r->len = tu_rng_logu(rng, 1, 288);
		if (meta > FT_PAGE && r->len > 1 && tu_rng_chance(rng, 1, 2)) {
			uint64_t boundary =
				zstart + FT_PAGE * tu_rng_range(rng, 1, (meta - 1) / FT_PAGE);
			r->off = boundary - tu_rng_range(rng, 1, r->len - 1);
		} else {
			r->off = zstart + tu_rng_below(rng, meta);
		}
		if (r->off + r->len > zstart + meta)
			r->len = zstart + meta - r->off;
		break;
	}
	}
}

static void run_round(unsigned idx, enum mode m, uint64_t seed)
{
	struct round r = { .idx = idx, .m = m };
	struct tu_rng rng;
	struct kr_check_report rep = { 0 };
	char why[512], rs[400];
	int rc;
	tu_rng_seed(&rng, seed);
	g_rounds[m]++;
	place(&r, &rng);
	r.first_page = r.off & ~(uint64_t)(FT_PAGE - 1);
	r.last_page = (r.off + r.len - 1) & ~(uint64_t)(FT_PAGE - 1);

	/* New bytes, redrawn until the scribble changes something. */
	uint8_t *buf = malloc(r.len);
	TU_ASSERT(buf, "out of memory");
	do
		tu_fill(buf, r.len, tu_rng_next(&rng));
	while (memcmp(buf, g_fp.img + r.off, r.len) == 0);
	const struct ft_geom *g = &g_fp.g;
	memset(g_bad_col, 0, (size_t)g->nzones * g->row_pages);
	memset(g_bad_obj, 0, g_fp.nobjs);
	for (uint64_t i = 0; i < r.len; i++) {
		uint64_t o = r.off + i;
		if (buf[i] == g_fp.img[o])
			continue;
		uint32_t z, row, col;
		ft_page_pos(g, o, &z, &row, &col);
		g_bad_col[(uint64_t)z * g->row_pages + col] = 1;
		r.outside_meta |= g_fp.kind[o / FT_PAGE] != KR_PAGE_ZONE_META;
		r.type_changed |= g_byte[o] == B_HDR_TYPE;
		if (g_byte[o] != B_FREE) {
			r.csum_covered = true;
			g_bad_obj[ft_obj_at(&g_fp, o)] = 1;
		}
	}
	ft_restore(&g_fp);
	tu_pwrite(g_fp.path, buf, r.len, r.off);
	free(buf);

	if ((rc = tu_open(g_fp.path, &r.pool)) != KR_OK) {
		r.pool = NULL;
		round_fail(&r, "kr_pool_open = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		return;
	}
	/* Without repair: the damage is reported, and only where it is. */
	memset(&rep, 0, sizeof(rep));
	rep.on_page = on_page;
	rep.ctx = &r;
	rc = kr_pool_check(r.pool, 0, &rep);
	ft_report_str(&rep, rs, sizeof(rs));
	if (r.outside_meta && rc != KR_E_CORRUPT) {
		round_fail(&r, "kr_pool_check(0) = %d (%s), expected KR_E_CORRUPT: %s", rc,
			   kr_strerror(rc), rs);
		return;
	}
	if (rc != KR_OK && rc != KR_E_CORRUPT) {
		round_fail(&r, "kr_pool_check(0) = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
		return;
	}
	if (r.csum_covered && rep.bad_objects == 0) {
		round_fail(&r,
			   "checksummed object bytes changed, kr_pool_check(0) finds no bad "
			   "object: %s",
			   rs);
		return;
	}
	if (r.outside_meta && r.nreported == 0) {
		round_fail(&r, "kr_pool_check(0) found damage but named no page through on_page");
		return;
	}
	if (r.bad_report) {
		/* Counted apart and not fatal to the round, so that a wrong page in the report
		 * does not hide what the repair does. */
		if (g_nbad_report++ < 3) {
			size_t i = ft_obj_at(&g_fp, r.bad_report);
			bool in = i < g_fp.nobjs &&
				  ft_obj_overlaps(&g_fp.objs[i], r.bad_report, FT_PAGE);
			printf("  FAIL round %u (%s scribble of %llu bytes at %#llx): "
			       "kr_pool_check(0) "
			       "names page %#llx (%s; first object there: %#llx, %llu bytes, %s) "
			       "through on_page, neither scribbled, nor the parity of a scribbled "
			       "column, nor a damaged object's block in one\n",
			       r.idx, mode_name[r.m], (unsigned long long)r.len,
			       (unsigned long long)r.off, (unsigned long long)r.bad_report,
			       ft_kind_name(g_fp.kind[r.bad_report / FT_PAGE]),
			       in ? (unsigned long long)g_fp.objs[i].oid : 0ull,
			       in ? (unsigned long long)g_fp.objs[i].size : 0ull,
			       in && g_bad_obj[i] ? "damaged" : "intact");
		}
	}
	/* Repair. */
	memset(&rep, 0, sizeof(rep));
	rep.on_page = on_page_unrepairable;
	rep.ctx = &r;
	if ((rc = kr_pool_check(r.pool, KR_CHECK_REPAIR, &rep)) != KR_OK) {
		char pages[160] = "";
		for (unsigned i = 0; i < r.nunrep && i < 4; i++)
			snprintf(pages + strlen(pages), sizeof(pages) - strlen(pages), " %#llx",
				 (unsigned long long)r.unrep[i]);
		ft_report_str(&rep, rs, sizeof(rs));
		round_fail(&r,
			   "kr_pool_check(REPAIR) = %d (%s): %s; %s; pages reported "
			   "unrepairable:%s",
			   rc, kr_strerror(rc), kr_errmsg(), rs, pages);
		return;
	}
	if (ft_verify(r.pool, &g_fp, &g_fp.model, why, sizeof(why)) != 0) {
		ft_report_str(&rep, rs, sizeof(rs));
		round_fail(&r, "after a repair that returned KR_OK (%s): %s", rs, why);
		return;
	}
	memset(&rep, 0, sizeof(rep));
	if ((rc = kr_pool_check(r.pool, 0, &rep)) != KR_OK) {
		ft_report_str(&rep, rs, sizeof(rs));
		round_fail(&r, "kr_pool_check(0) after repair = %d (%s): %s", rc, kr_strerror(rc),
			   rs);
		return;
	}
	rc = kr_pool_close(r.pool);
	r.pool = NULL;
	if (rc != KR_OK)
		round_fail(&r, "kr_pool_close = %d (%s): %s", rc, kr_strerror(rc), kr_errmsg());
}

int main(void)
{
	uint64_t seed = tu_seed("test_scribble", 0x5c1bb1eull);
	double t0 = tu_now();
	struct ft_opts o = {
		.size = 8ull << 20,
		.rows = 8,
		.nlanes = 2,
		.nslots = 600,
		.max_size = 32 * 1024,
		.ntx = 1500,
		.nbig = 1,
		.big_quarters = { 1 }, /* smaller than a row: no object has two pages in a column */
	};
	ft_build(&g_fp, "scribble", &o, seed);
	g_byte = calloc(g_fp.len, 1);
	g_bad_col = calloc((size_t)g_fp.g.nzones * g_fp.g.row_pages, 1);
	g_bad_obj = calloc(g_fp.nobjs + 1, 1);
	TU_ASSERT(g_byte && g_bad_col && g_bad_obj, "out of memory");
	for (size_t i = 0; i < g_fp.nobjs; i++) {
		const struct ft_obj *ob = &g_fp.objs[i];
		memset(g_byte + ob->oid - 16, B_HDR_CSUM, 8); /* size */
		memset(g_byte + ob->oid - 8, B_HDR_TYPE, 4);
		memset(g_byte + ob->oid - 4, B_HDR_CSUM, 4); /* crc */
		memset(g_byte + ob->oid, B_PAYLOAD, ob->size);
	}

	unsigned n = tu_scaled(600, 150);
	struct tu_rng rng;
	tu_rng_seed(&rng, seed ^ 0x5c);
	for (unsigned i = 0; i < n; i++) {
		unsigned d = (unsigned)tu_rng_below(&rng, 8);
		enum mode m = d < 5 ? M_RANDOM : d == 5 ? M_ROWCROSS : d == 6 ? M_HEADER : M_META;
		run_round(i, m, tu_rng_next(&rng));
	}
	for (int m = 0; m < M_N; m++)
		printf("  %-8s %5u rounds, %u failed\n", mode_name[m], g_rounds[m], g_failed[m]);
	printf("  %u rounds where on_page named a page outside the damage (first 3 shown)\n",
	       g_nbad_report);
	printf("test_scribble: %u rounds, %u failed, in %.2fs\n", n, g_nfail, tu_now() - t0);
	free(g_byte);
	free(g_bad_col);
	free(g_bad_obj);
	ft_free(&g_fp);
	TU_END_CHECK_ALL("test_scribble");
	return g_nfail || g_nbad_report ? 1 : 0;
}
