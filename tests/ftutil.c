/*
 * ftutil.c - the filled pool, its pristine image and page maps, and the model check shared
 * by the fault-tolerance tests (see ftutil.h).
 */
#define _GNU_SOURCE
#include "ftutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- geometry ------------------------------------------------------------------------------- */

static uint64_t rd64(const uint8_t *p, unsigned off)
{
	uint64_t v;
	memcpy(&v, p + off, 8);
	return v;
}

static uint32_t rd32(const uint8_t *p, unsigned off)
{
	uint32_t v;
	memcpy(&v, p + off, 4);
	return v;
}

void ft_geom_load(struct ft_geom *g, const uint8_t *hdr)
{
	/* docs/FORMAT.md, "Pool header". */
	g->pool_size = rd64(hdr, 48);
	g->nlanes = rd32(hdr, 64);
	g->lane_pages = rd32(hdr, 68);
	g->lanes_off = rd64(hdr, 72);
	g->lanes_replica_off = rd64(hdr, 80);
	g->ctl_off = rd64(hdr, 88);
	g->ctl_replica_off = rd64(hdr, 96);
	g->heap_off = rd64(hdr, 104);
	g->nzones = rd32(hdr, 112);
	g->rows = rd32(hdr, 116);
	g->row_pages = rd32(hdr, 120);
	g->zone_meta_pages = rd32(hdr, 124);
	g->chunks_per_zone = rd32(hdr, 132);
	g->zone_size = rd64(hdr, 136);
	g->row_size = (uint64_t)g->row_pages * FT_PAGE;
	g->lane_bytes = (uint64_t)g->lane_pages * FT_PAGE;
}

uint64_t ft_page_off(const struct ft_geom *g, uint32_t z, uint32_t row, uint32_t col)
{
	return g->heap_off + z * g->zone_size + row * g->row_size + (uint64_t)col * FT_PAGE;
}

void ft_page_pos(const struct ft_geom *g, uint64_t off, uint32_t *z, uint32_t *row, uint32_t *col)
{
	uint64_t rel = off - g->heap_off, zoff = rel % g->zone_size;
	*z = (uint32_t)(rel / g->zone_size);
	*row = (uint32_t)(zoff / g->row_size);
	*col = (uint32_t)(zoff % g->row_size / FT_PAGE);
}

const char *ft_kind_name(int kind)
{
	static const char *names[FT_NKINDS] = { "?",	"header",	"control",
						"lane", "lane-replica", "zone-meta",
						"data", "parity",	"unused" };
	return kind >= 1 && kind < FT_NKINDS ? names[kind] : "?";
}

/* ---- bad-block lists are files next to the pool: removed at exit like the pools ------------- */

#define FT_MAX_BB 16
static char *ft_bb[FT_MAX_BB];
static pid_t ft_bb_pid;
static unsigned ft_nbb;

static void ft_bb_cleanup(void)
{
	if (getpid() != ft_bb_pid)
		return;
	for (unsigned i = 0; i < ft_nbb; i++)
		unlink(ft_bb[i]);
}

static void ft_bb_register(const char *p)
{
	if (ft_nbb == 0) {
		ft_bb_pid = getpid();
		atexit(ft_bb_cleanup);
	}
	if (ft_nbb < FT_MAX_BB)
		ft_bb[ft_nbb++] = strdup(p);
	unlink(p);
}

/* ---- the filled pool ------------------------------------------------------------------------ */

static void set_root(kr_pool *pool, kr_oid root, const struct ft_root *r)
{
	TU_OK(kr_update(pool, root, 0, r, sizeof(*r)));
}

static void add_big(struct ft_pool *fp, kr_pool *pool, struct ft_root *r, unsigned i, uint64_t seed)
{
	/* An odd size, so the payload does not end on a page boundary. */
	uint64_t size = fp->o.big_quarters[i] * fp->st.row_size / 4 - 1000 + 8 * i + 3;
	if (size > fp->st.max_alloc)
		size = fp->st.max_alloc;
	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 900 + i, &oid));
	uint8_t *p = kr_tx_open(tx, oid);
	TU_ASSERT(p, "kr_tx_open(big object of %llu bytes): %s", (unsigned long long)size,
		  kr_errmsg());
	fp->big_data[i] = malloc(size);
	TU_ASSERT(fp->big_data[i], "out of memory");
	tu_fill(fp->big_data[i], size, seed);
	memcpy(p, fp->big_data[i], size);
	TU_OK(kr_tx_commit(tx));
	fp->big[i] = oid;
	fp->big_size[i] = size;
	r->big[i] = oid;
	r->big_size[i] = size;
}

void ft_build(struct ft_pool *fp, const char *tag, const struct ft_opts *o, uint64_t seed)
{
	double t0 = tu_now();
	memset(fp, 0, sizeof(*fp));
	fp->o = *o;
	tu_pool_path(fp->path, sizeof(fp->path), tag);
	snprintf(fp->bb_path, sizeof(fp->bb_path), "%s.badblocks", fp->path);
	ft_bb_register(fp->bb_path);
	fp->p = (struct wl_params){
		.nslots = o->nslots,
		.min_size = 8,
		.max_size = o->max_size,
		.max_ops = 4,
		.abort_pct = 5,
		.type_base = 1000,
	};

	kr_pool *pool;
	struct tu_rng rng;
	struct wl_ctx c;
	struct wl_plan plan;
	struct ft_root r = { 0 };
	tu_rng_seed(&rng, seed);
	TU_OK(tu_create(fp->path, o->size, o->rows, o->nlanes, 0, &pool));
	TU_OK(kr_pool_stat(pool, &fp->st));
	TU_OK(kr_root(pool, sizeof(struct ft_root), &fp->root));
	wl_ctx_init(&c, pool, 0, &fp->p);
	fp->dir = r.dir = c.dir;
	set_root(pool, fp->root, &r);
	/* A tenth of the history, the large objects (so they land between small ones, while
	 * there is still contiguous room), the rest: frees and replacements leave a fragmented
	 * heap around them. */
	for (unsigned part = 0; part < 2; part++) {
		while (c.commits < (part ? o->ntx : o->ntx / 10)) {
			wl_plan_gen(&rng, &fp->p, &c.model, &plan);
			wl_exec(&c, &plan);
		}
		if (part == 0) {
			fp->nbig = o->nbig;
			for (unsigned i = 0; i < o->nbig; i++)
				add_big(fp, pool, &r, i, seed * 7 + i);
			set_root(pool, fp->root, &r);
		}
	}
	wl_model_copy(&fp->model, &c.model);
	wl_ctx_free(&c);
	TU_OK(kr_pool_stat(pool, &fp->st));
	TU_OK(kr_pool_close(pool));

	/* Reopen (a clean open changes nothing but the clean flag, which close restores) to
	 * classify the pages and list the objects of the image the tests damage. */
	char why[256];
	TU_OK(tu_open(fp->path, &pool));
	if (ft_verify(pool, fp, &fp->model, why, sizeof(why)) != 0)
		TU_FAIL("freshly built pool does not match its model: %s", why);
	if (tu_deep_check(pool, why, sizeof(why)) != 0)
		TU_FAIL("freshly built pool: %s", why);
	fp->npages = fp->st.pool_size / FT_PAGE;
	fp->kind = calloc(fp->npages, 1);
	fp->live = calloc(fp->npages, 1);
	fp->objs = malloc((fp->st.nobjects + 1) * sizeof(*fp->objs));
	TU_ASSERT(fp->kind && fp->live && fp->objs, "out of memory");
	for (size_t i = 0; i < fp->npages; i++) {
		int k = kr_pool_page_kind(pool, (uint64_t)i * FT_PAGE);
		TU_ASSERT(k >= 1 && k < FT_NKINDS, "kr_pool_page_kind(%#llx) = %d",
			  (unsigned long long)i * FT_PAGE, k);
		fp->kind[i] = (uint8_t)k;
	}
	TU_ASSERT(kr_pool_page_kind(pool, fp->st.pool_size) == KR_E_MISUSE_ARG,
		  "kr_pool_page_kind beyond the pool must be KR_E_MISUSE_ARG");
	for (kr_oid oid = kr_first(pool); oid; oid = kr_next(pool, oid)) {
		TU_ASSERT(fp->nobjs <= fp->st.nobjects, "more live objects than kr_pool_stat says");
		uint64_t size = kr_size(pool, oid);
		fp->objs[fp->nobjs++] = (struct ft_obj){ oid, size };
		for (uint64_t pg = (oid - 16) / FT_PAGE; pg <= (oid + size - 1) / FT_PAGE; pg++)
			fp->live[pg] = 1;
	}
	TU_OK(kr_pool_close(pool));
	fp->img = tu_read_file(fp->path, &fp->len);
	TU_ASSERT(fp->len == fp->st.pool_size, "file is %zu bytes, pool %llu", fp->len,
		  (unsigned long long)fp->st.pool_size);
	ft_geom_load(&fp->g, fp->img);
	const struct ft_geom *g = &fp->g;
	TU_ASSERT(g->pool_size == fp->st.pool_size && g->row_size == fp->st.row_size &&
			  g->zone_size == fp->st.zone_size && g->nzones == fp->st.nzones &&
			  g->rows == fp->st.rows && g->zone_size == (g->rows + 1) * g->row_size,
		  "header geometry (docs/FORMAT.md offsets) disagrees with kr_pool_stat");
	for (size_t i = 0; i < fp->nobjs; i++)
		TU_ASSERT(fp->kind[(fp->objs[i].oid - 16) / FT_PAGE] == KR_PAGE_DATA,
			  "object %#llx starts in a page that is not a data page",
			  (unsigned long long)fp->objs[i].oid);

	unsigned nlive = 0, ndata = 0;
	for (size_t i = 0; i < fp->npages; i++) {
		ndata += fp->kind[i] == KR_PAGE_DATA;
		nlive += fp->live[i];
	}
	printf("  pool: %llu MiB, %u zone(s) of %u rows x %u pages + parity, %u lanes of %llu "
	       "KiB; %zu objects (%u large), %llu KiB used; %u of %u data pages hold live "
	       "objects; built in %.2fs\n",
	       (unsigned long long)(fp->st.pool_size >> 20), g->nzones, g->rows, g->row_pages,
	       g->nlanes, (unsigned long long)(g->lane_bytes >> 10), fp->nobjs, fp->nbig,
	       (unsigned long long)(fp->st.used_bytes >> 10), nlive, ndata, tu_now() - t0);
	fflush(stdout);
}

void ft_free(struct ft_pool *fp)
{
	wl_model_free(&fp->model);
	for (unsigned i = 0; i < fp->nbig; i++)
		free(fp->big_data[i]);
	free(fp->img);
	free(fp->kind);
	free(fp->live);
	free(fp->objs);
}

void ft_restore(const struct ft_pool *fp)
{
	tu_write_file(fp->path, fp->img, fp->len);
	unlink(fp->bb_path);
}

/* ---- verification --------------------------------------------------------------------------- */

int ft_verify(kr_pool *pool, const struct ft_pool *fp, const struct wl_model *m, char *why,
	      size_t whylen)
{
	kr_oid root;
	int rc = kr_root(pool, sizeof(struct ft_root), &root);
	if (rc != KR_OK || root != fp->root) {
		snprintf(why, whylen, "kr_root = %d (%s), oid %#llx, expected %#llx", rc,
			 kr_errmsg(), (unsigned long long)root, (unsigned long long)fp->root);
		return 1;
	}
	const struct ft_root *r = kr_get(pool, root);
	if (!r || r->dir != fp->dir) {
		snprintf(why, whylen, "root object unreadable or its directory oid changed");
		return 1;
	}
	for (unsigned i = 0; i < fp->nbig; i++) {
		if (r->big[i] != fp->big[i] || r->big_size[i] != fp->big_size[i]) {
			snprintf(why, whylen, "root object: large object %u changed", i);
			return 1;
		}
	}
	if (wl_verify(pool, fp->dir, m, true, why, whylen) != 0)
		return 1;
	for (unsigned i = 0; i < fp->nbig; i++) {
		const uint8_t *p = kr_get(pool, fp->big[i]);
		if (!p || kr_size(pool, fp->big[i]) != fp->big_size[i] ||
		    kr_type(pool, fp->big[i]) != 900 + i) {
			snprintf(why, whylen,
				 "large object %u (%#llx): kr_get %p, size %zu, type %u", i,
				 (unsigned long long)fp->big[i], (const void *)p,
				 kr_size(pool, fp->big[i]), kr_type(pool, fp->big[i]));
			return 1;
		}
		if (memcmp(p, fp->big_data[i], fp->big_size[i]) != 0) {
			size_t k = 0;
			while (p[k] == fp->big_data[i][k])
				k++;
			snprintf(why, whylen,
				 "large object %u (%#llx, %llu bytes): byte %zu differs", i,
				 (unsigned long long)fp->big[i],
				 (unsigned long long)fp->big_size[i], k);
			return 1;
		}
	}
	/* Exactly these objects are live: a repaired allocator record that lost or invented an
	 * allocation shows here. */
	size_t cap = 2 + fp->nbig + m->nslots, n = 0;
	kr_oid *live = malloc(cap * sizeof(*live));
	TU_ASSERT(live, "out of memory");
	live[n++] = fp->root;
	live[n++] = fp->dir;
	for (unsigned i = 0; i < fp->nbig; i++)
		live[n++] = fp->big[i];
	for (unsigned i = 0; i < m->nslots; i++)
		if (m->slots[i].size)
			live[n++] = m->slots[i].oid;
	int bad = wl_check_live(pool, live, n, why, whylen);
	free(live);
	return bad;
}

size_t ft_obj_at(const struct ft_pool *fp, uint64_t off)
{
	size_t lo = 0, hi = fp->nobjs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (fp->objs[mid].oid + fp->objs[mid].size <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t ft_block_bytes(uint64_t size)
{
	static const uint32_t classes[] = {
		32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024, 1280,
		1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 16384,
	};
	uint64_t need = size + 16;
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (need <= classes[i])
			return classes[i];
	return (need + 32767) / 32768 * 32768;
}

bool ft_obj_overlaps(const struct ft_obj *ob, uint64_t off, uint64_t len)
{
	return ob->oid - 16 < off + len && off < ob->oid + ob->size;
}

void ft_report_str(const struct kr_check_report *r, char *buf, size_t n)
{
	snprintf(buf, n,
		 "objects %llu/%llu bad, chunk records %llu/%llu bad, columns %llu/%llu bad, "
		 "repaired pages %llu, recomputed columns %llu, unrepairable %llu, first bad "
		 "%#llx",
		 (unsigned long long)r->bad_objects, (unsigned long long)r->objects,
		 (unsigned long long)r->bad_chunks, (unsigned long long)r->chunks,
		 (unsigned long long)r->bad_columns, (unsigned long long)r->columns,
		 (unsigned long long)r->repaired_pages, (unsigned long long)r->recomputed_columns,
		 (unsigned long long)r->unrepairable, (unsigned long long)r->first_bad_off);
}
