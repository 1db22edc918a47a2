/*
 * test_online.c - media errors in an open pool, repaired while threads use it.
 *
 * The filled pool of ftutil.c (8 MiB, 8 data rows, 2 lanes, mixed object sizes) is opened
 * and a sample of its data pages (with live objects), zone-metadata pages and parity pages
 * is poisoned one at a time with kr_inject_poison: the page loses its content and the next
 * access faults. For each page:
 *   - a reader thread keeps reading the objects in that page (kr_get + memcmp with the
 *     expected bytes); for metadata and parity pages, which hold no objects, it reads the
 *     objects in that page column of the even data rows instead;
 *   - a writer thread keeps committing kr_update()s inside the pages of that column in the
 *     other rows (the odd rows for metadata and parity pages), so every commit patches the
 *     parity that the repair of a data page reads, or faults on the poisoned parity page
 *     itself, inside the commit: the repair must pause the other commits, still see
 *     settled parity, and let the faulting commit finish;
 *   - the main thread injects the poison and waits until the reader has read everything
 *     a few more times and the writer has committed a few more transactions.
 * Every read must return the expected bytes (the fault is repaired and the access resumes),
 * kr_pool_check(pool, 0) afterwards must be KR_OK (it reads metadata and parity pages, so
 * a page no thread touched is repaired there), and kr_pool_stat().media_repairs must have
 * grown by exactly one per poisoned page. A last step poisons several pages in different
 * columns at once. At the end every object is compared with the expected bytes, and once
 * more after close and reopen (the bad-block list left by the injections is repaired by
 * the open, harmlessly).
 *
 * Expected bytes live in a DRAM shadow of the pool: the writer updates its objects' bytes
 * there after each commit; the reader only reads objects no thread writes during the step.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftutil.h"
#include "testutil.h"
#include "workload.h"

#define MAX_SET 16 /* objects read or written per step */
#define MAX_MULTI 4

static struct ft_pool g_fp;
static kr_pool *g_pool;
static uint8_t *g_shadow; /* expected bytes of every object, at pool offsets */
static uint64_t g_seed;

/* ---- the threads ---------------------------------------------------------------------------- */

struct step {
	const struct ft_obj *r[MAX_SET], *w[MAX_SET];
	uint64_t wlo[MAX_SET], whi[MAX_SET]; /* the writer's window in w[i]: its page of the
					      * column, object-relative */
	unsigned nr, nw;
	atomic_uint passes;  /* complete read passes over r */
	atomic_uint commits; /* writer commits */
	atomic_int stop;
	uint64_t seed;
	/* First failure of a thread (written once by that thread, read after join). */
	char rfail[256], wfail[256];
};

static void *reader(void *arg)
{
	struct step *s = arg;
	while (!atomic_load(&s->stop) && !s->rfail[0]) {
		for (unsigned i = 0; i < s->nr; i++) {
			const struct ft_obj *o = s->r[i];
			const uint8_t *p = kr_get(g_pool, o->oid);
			if (!p) {
				snprintf(s->rfail, sizeof(s->rfail), "kr_get(%#llx) = NULL: %s",
					 (unsigned long long)o->oid, kr_errmsg());
				break;
			}
			if (memcmp(p, g_shadow + o->oid, o->size) != 0) {
				size_t k = 0;
				while (p[k] == g_shadow[o->oid + k])
					k++;
				snprintf(s->rfail, sizeof(s->rfail),
					 "object %#llx (%llu bytes): byte %zu (pool offset %#llx) "
					 "reads "
					 "0x%02x, expected 0x%02x",
					 (unsigned long long)o->oid, (unsigned long long)o->size, k,
					 (unsigned long long)(o->oid + k), p[k],
					 g_shadow[o->oid + k]);
				break;
			}
		}
		atomic_fetch_add(&s->passes, 1);
	}
	return NULL;
}

static void *writer(void *arg)
{
	struct step *s = arg;
	struct tu_rng rng;
	uint8_t buf[8192];
	tu_rng_seed(&rng, s->seed);
	while (!atomic_load(&s->stop) && s->nw) {
		/* Inside the object's page of the poisoned column: every commit patches that
		 * column's parity. */
		unsigned k = (unsigned)tu_rng_below(&rng, s->nw);
		const struct ft_obj *o = s->w[k];
		uint64_t win = s->whi[k] - s->wlo[k];
		uint64_t len = tu_rng_logu(&rng, 1, win < sizeof(buf) ? win : sizeof(buf));
		uint64_t off = s->wlo[k] + tu_rng_below(&rng, win - len + 1);
		tu_fill(buf, len, tu_rng_next(&rng));
		int rc = kr_update(g_pool, o->oid, off, buf, len);
		if (rc != KR_OK) {
			snprintf(s->wfail, sizeof(s->wfail),
				 "kr_update(%#llx, %llu, %llu) = %d (%s): %s",
				 (unsigned long long)o->oid, (unsigned long long)off,
				 (unsigned long long)len, rc, kr_strerror(rc), kr_errmsg());
			break;
		}
		memcpy(g_shadow + o->oid + off, buf, len);
		atomic_fetch_add(&s->commits, 1);
	}
	return NULL;
}

/* ---- object sets ---------------------------------------------------------------------------- */

static bool in_set(const struct ft_obj *const *set, unsigned n, const struct ft_obj *o)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i] == o)
			return true;
	return false;
}

/* Adds the objects overlapping [off, off + len) to set (up to MAX_SET), skipping those in
 * `not`; with lo/hi, also the part of each one's payload inside the range. Writers only get
 * workload objects (the large ones and the root stay as built, the directory is only
 * read). */
static void add_objs(const struct ft_obj **set, unsigned *n, uint64_t off, uint64_t len,
		     const struct ft_obj *const * not, unsigned nnot, uint64_t *lo, uint64_t *hi)
{
	bool for_writer = lo != NULL;
	for (size_t i = ft_obj_at(&g_fp, off); i < g_fp.nobjs && *n < MAX_SET; i++) {
		const struct ft_obj *o = &g_fp.objs[i];
		if (!ft_obj_overlaps(o, off, len))
			break;
		if (in_set(set, *n, o) || in_set(not, nnot, o))
			continue;
		if (for_writer && (o->oid == g_fp.root || o->oid == g_fp.dir))
			continue;
		bool big = false;
		for (unsigned b = 0; b < g_fp.nbig; b++)
			big |= o->oid == g_fp.big[b];
		if (for_writer && big)
			continue;
		if (for_writer) {
			uint64_t a = off > o->oid ? off : o->oid;
			uint64_t e = off + len < o->oid + o->size ? off + len : o->oid + o->size;
			if (a >= e)
				continue; /* only its header is in the page */
			lo[*n] = a - o->oid;
			hi[*n] = e - o->oid;
		}
		set[(*n)++] = o;
	}
}

/* The objects in the pages of the column of `off` in the other data rows of its zone; with
 * parity 0 or 1, only in the rows of that parity (metadata and parity pages hold no
 * objects, so their readers and writers share the column's rows between them). */
static void column_objs(uint64_t off, int parity, const struct ft_obj **set, unsigned *n,
			const struct ft_obj *const * not, unsigned nnot, uint64_t *lo, uint64_t *hi)
{
	uint32_t z, row, col;
	ft_page_pos(&g_fp.g, off, &z, &row, &col);
	for (uint32_t r = 0; r < g_fp.g.rows; r++)
		if (r != row && (parity < 0 || (int)(r % 2) == parity))
			add_objs(set, n, ft_page_off(&g_fp.g, z, r, col), FT_PAGE, not, nnot, lo,
				 hi);
}

/* ---- one step: poison pages, read and write meanwhile, check -------------------------------- */

static unsigned g_steps, g_fail;
static uint64_t g_repair_ns_sum, g_repairs;

static void run_step(const uint64_t *offs, unsigned npoison, uint64_t seed)
{
	struct step *s = calloc(1, sizeof(*s));
	TU_ASSERT(s, "out of memory");
	s->seed = seed;
	char where[128];
	int k = g_fp.kind[offs[0] / FT_PAGE];
	snprintf(where, sizeof(where), "%u page(s) from %#llx (%s)", npoison,
		 (unsigned long long)offs[0], ft_kind_name(k));
	tu_case_begin(tu_sanitized() ? 120 : 60, "%s, KR_TEST_SEED=%llu", where,
		      (unsigned long long)g_seed);

	bool has_objs = k == KR_PAGE_DATA;
	for (unsigned i = 0; i < npoison; i++)
		add_objs(s->r, &s->nr, offs[i], FT_PAGE, NULL, 0, NULL, NULL);
	if (!has_objs)
		column_objs(offs[0], 0, s->r, &s->nr, NULL, 0, NULL, NULL);
	for (unsigned i = 0; i < npoison; i++)
		column_objs(offs[i], has_objs ? -1 : 1, s->w, &s->nw, s->r, s->nr, s->wlo, s->whi);

	struct kr_pool_stat st0, st1;
	TU_OK(kr_pool_stat(g_pool, &st0));
	pthread_t rt, wt;
	TU_ASSERT(pthread_create(&rt, NULL, reader, s) == 0, "pthread_create");
	TU_ASSERT(pthread_create(&wt, NULL, writer, s) == 0, "pthread_create");
	/* Both threads are running before the poison arrives. */
	while (atomic_load(&s->passes) < 1 && !s->rfail[0])
		usleep(100);
	while (s->nw && atomic_load(&s->commits) < 1 && !s->wfail[0])
		usleep(100);
	for (unsigned i = 0; i < npoison; i++) {
		int rc = kr_inject_poison(g_pool, offs[i]);
		if (rc != KR_OK)
			TU_FAIL("%s: kr_inject_poison(%#llx) = %d (%s): %s", where,
				(unsigned long long)offs[i], rc, kr_strerror(rc), kr_errmsg());
	}
	unsigned p0 = atomic_load(&s->passes), c0 = atomic_load(&s->commits);
	while ((atomic_load(&s->passes) < p0 + 3 && !s->rfail[0]) ||
	       (s->nw && atomic_load(&s->commits) < c0 + 3 && !s->wfail[0]))
		usleep(200);
	atomic_store(&s->stop, 1);
	pthread_join(rt, NULL);
	pthread_join(wt, NULL);

	bool bad = false;
	if (s->rfail[0]) {
		printf("  FAIL %s: reader: %s\n", where, s->rfail);
		bad = true;
	}
	if (s->wfail[0]) {
		printf("  FAIL %s: writer: %s\n", where, s->wfail);
		bad = true;
	}
	struct kr_check_report rep = { 0 };
	int rc = kr_pool_check(g_pool, 0, &rep);
	if (rc != KR_OK) {
		char rs[400];
		ft_report_str(&rep, rs, sizeof(rs));
		printf("  FAIL %s: kr_pool_check(0) = %d (%s): %s; %s\n", where, rc,
		       kr_strerror(rc), kr_errmsg(), rs);
		bad = true;
	}
	TU_OK(kr_pool_stat(g_pool, &st1));
	if (st1.media_repairs - st0.media_repairs != npoison) {
		printf("  FAIL %s: media_repairs grew by %llu, expected %u\n", where,
		       (unsigned long long)(st1.media_repairs - st0.media_repairs), npoison);
		bad = true;
	}
	if (st1.media_repairs > st0.media_repairs && st1.last_repair_ns == 0) {
		printf("  FAIL %s: last_repair_ns is 0 after a repair\n", where);
		bad = true;
	}
	tu_case_end();
	g_repair_ns_sum += st1.last_repair_ns;
	g_repairs++;
	g_steps++;
	g_fail += bad;
	if (bad)
		printf("       (%u objects read, %u written, %u read passes, %u commits)\n", s->nr,
		       s->nw, atomic_load(&s->passes), atomic_load(&s->commits));
	fflush(stdout);
	free(s);
}

/* Up to `want` random unselected pages of a kind (data pages: with live bytes), by a partial
 * Fisher-Yates shuffle of the candidates. */
static unsigned pick(struct tu_rng *rng, int kind, unsigned want, uint8_t *sel, uint64_t *out,
		     unsigned *got)
{
	size_t *cand = malloc(g_fp.npages * sizeof(*cand)), nc = 0;
	unsigned n = 0;
	TU_ASSERT(cand, "out of memory");
	for (size_t i = 0; i < g_fp.npages; i++)
		if (g_fp.kind[i] == kind && !sel[i] && (kind != KR_PAGE_DATA || g_fp.live[i]))
			cand[nc++] = i;
	for (size_t t = 0; t < nc && n < want; t++) {
		size_t j = t + tu_rng_below(rng, nc - t), x = cand[j];
		cand[j] = cand[t];
		sel[x] = 1;
		out[n++] = x * FT_PAGE;
	}
	got[kind] += n;
	free(cand);
	return n;
}

/* Every object of the pool against the shadow. */
static int verify_all(char *why, size_t n)
{
	for (size_t i = 0; i < g_fp.nobjs; i++) {
		const struct ft_obj *o = &g_fp.objs[i];
		const uint8_t *p = kr_get(g_pool, o->oid);
		if (!p || kr_size(g_pool, o->oid) != o->size) {
			snprintf(why, n, "object %#llx: kr_get %p, size %zu: %s",
				 (unsigned long long)o->oid, (const void *)p,
				 kr_size(g_pool, o->oid), kr_errmsg());
			return 1;
		}
		if (memcmp(p, g_shadow + o->oid, o->size) != 0) {
			snprintf(why, n,
				 "object %#llx (%llu bytes) differs from the expected bytes",
				 (unsigned long long)o->oid, (unsigned long long)o->size);
			return 1;
		}
	}
	struct kr_check_report rep = { 0 };
	if (kr_pool_check(g_pool, 0, &rep) != KR_OK) {
		snprintf(why, n, "kr_pool_check(0): %s", kr_errmsg());
		return 1;
	}
	return 0;
}

int main(void)
{
	uint64_t seed = g_seed = tu_seed("test_online", 0x0411e5eedull);
	tu_case_watch("test_online: hung while trying: ", false);
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
	ft_build(&g_fp, "online", &o, seed);
	g_shadow = malloc(g_fp.len);
	TU_ASSERT(g_shadow, "out of memory");
	memcpy(g_shadow, g_fp.img, g_fp.len);
	double t0 = tu_now();

	/* The sample: data pages with live objects, every zone-metadata page (few), parity
	 * pages, and the pages holding the root's and the directory's headers. */
	struct tu_rng rng;
	tu_rng_seed(&rng, seed ^ 0x0411);
	unsigned ndata = tu_scaled(40, 12), nparity = tu_scaled(12, 4), nmeta = tu_scaled(8, 3);
	uint64_t *offs = malloc(g_fp.npages * sizeof(*offs));
	uint8_t *sel = calloc(g_fp.npages, 1);
	TU_ASSERT(offs && sel, "out of memory");
	unsigned n = 0, got[FT_NKINDS] = { 0 };
	size_t critical[2] = { (g_fp.root - 16) / FT_PAGE, (g_fp.dir - 16) / FT_PAGE };
	for (int i = 0; i < 2; i++)
		if (!sel[critical[i]]) {
			sel[critical[i]] = 1;
			offs[n++] = critical[i] * FT_PAGE;
			got[KR_PAGE_DATA]++;
		}
	n += pick(&rng, KR_PAGE_DATA, ndata, sel, offs + n, got);
	n += pick(&rng, KR_PAGE_ZONE_META, nmeta, sel, offs + n, got);
	n += pick(&rng, KR_PAGE_PARITY, nparity, sel, offs + n, got);

	TU_OK(tu_open(g_fp.path, &g_pool));
	for (unsigned i = 0; i < n; i++)
		run_step(&offs[i], 1, seed * 31 + i);

	/* Several pages at once, in different page columns (the same column twice would be two
	 * faults in one column, which parity cannot rebuild). */
	uint64_t multi[MAX_MULTI];
	unsigned nm = 0;
	for (unsigned guard = 0; nm < MAX_MULTI && guard < 100000; guard++) {
		size_t pg = tu_rng_below(&rng, g_fp.npages);
		if (g_fp.kind[pg] != KR_PAGE_DATA || !g_fp.live[pg])
			continue;
		uint32_t z, row, col, z2, row2, col2;
		ft_page_pos(&g_fp.g, pg * FT_PAGE, &z, &row, &col);
		bool clash = false;
		for (unsigned j = 0; j < nm; j++) {
			ft_page_pos(&g_fp.g, multi[j], &z2, &row2, &col2);
			clash |= z == z2 && col == col2;
		}
		if (!clash)
			multi[nm++] = pg * FT_PAGE;
	}
	run_step(multi, nm, seed * 31 + n);

	char why[512];
	if (verify_all(why, sizeof(why)) != 0)
		TU_FAIL("after all steps: %s", why);
	TU_OK(kr_pool_close(g_pool));
	TU_OK(tu_open(g_fp.path, &g_pool));
	if (verify_all(why, sizeof(why)) != 0)
		TU_FAIL("after close and reopen: %s", why);
	TU_OK(kr_pool_close(g_pool));

	printf("test_online: %u steps (%u data, %u zone-meta, %u parity pages, then %u at once), "
	       "%u failed, mean repair %.1f us, in %.2fs\n",
	       g_steps, got[KR_PAGE_DATA], got[KR_PAGE_ZONE_META], got[KR_PAGE_PARITY], nm, g_fail,
	       g_repairs ? g_repair_ns_sum / 1e3 / g_repairs : 0.0, tu_now() - t0);
	free(offs);
	free(sel);
	free(g_shadow);
	ft_free(&g_fp);
	TU_END_CHECK_ALL("test_online");
	return g_fail ? 1 : 0;
}
