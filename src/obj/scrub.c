/*
 * scrub.c - verification and repair of a whole pool: what `keratin check`, `keratin
 * repair` and the scrubber run.
 *
 * Design
 *
 *   Two kinds of evidence meet here. Checksums (objects, chunk records, headers, control
 *   lines) say WHICH item is damaged but not where inside it; parity says WHICH page
 *   columns disagree but not which row. A repair pass therefore:
 *
 *     1. checks every parity column and notes those that disagree (set M);
 *     2. checks every chunk record and every live object against its checksum;
 *     3. for each damaged item, finds which of its pages in columns of M hold the damage
 *        (the checksum decides, below: "Locating the damage inside one item"), rebuilds
 *        those from parity, and goes on until no item changes;
 *     4. recomputes parity for the columns of M that no damaged item claimed: there the
 *        damage was in the parity row itself or in free space, where any bytes are valid.
 *
 *   A column with damaged pages in two rows cannot be rebuilt (two faults in one column):
 *   the items involved are reported as unrepairable and left as they are, every other item
 *   is repaired, and the objects concerned fail cleanly (KR_E_CORRUPT_OBJECT) when opened.
 *
 *   A rebuilt page is written home with plain stores: by construction it agrees with parity,
 *   so no parity update goes with it, and writing it twice is harmless, so a crash during
 *   repair needs nothing but another repair.
 *
 *   The pass needs the pool quiet: parity is only settled when no commit is applying
 *   (kr_pool_check refuses to run while transactions are open; the scrubber closes the
 *   commit gate). In-place transactions may still be open under the scrubber: home holds
 *   their stores, which neither checksums nor parity reflect yet. The page columns their
 *   blocks lie in go unjudged, as marked ones do (the in-flight list held still for the
 *   pass): repaired from parity, those stores would be lost, and a new object's block,
 *   free until its commit, would get parity recomputed over them.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "query.h"
#include "quiesce.h"
#include "scrub.h"
#include "stale.h"
#include "tx.h"

#define P KR_PAGE_SIZE

/* A damaged item: a chunk record or an object whose checksum fails. */
struct item {
	uint64_t off, len; /* the bytes it owns: record, or whole block (its header may be hit) */
	struct kr_block b; /* objects only */
	int is_object;
	int fixed;
};

struct scrub {
	kr_pool *pool;
	struct kr_check_report *rep;
	int repair;
	uint64_t ncols;   /* nzones * row_pages page columns */
	uint8_t *bad_col; /* 1 = parity disagrees, 2 = resolved (rebuilt or recomputed) */
	uint8_t *busy_col; /* 1 = an open in-place transaction's block lies here: unjudged */
	struct item *items;
	size_t nitems, cap;
	uint64_t done, total; /* progress, in bytes read: columns scanned + objects verified */
};

static void progress(struct scrub *s, uint64_t step)
{
	uint64_t before = s->done;
	s->done += step;
	/* Every 16 MiB read, and at the end: cheap next to the work itself. */
	if (s->rep->progress && (s->done >> 24 != before >> 24 || s->done == s->total))
		s->rep->progress(s->rep->progress_ctx, s->done, s->total);
}

static void report_page(struct scrub *s, uint64_t off, int state)
{
	if (s->rep->on_page)
		s->rep->on_page(s->rep->ctx, off, state);
}

static void note_bad(struct scrub *s, uint64_t off)
{
	if (!s->rep->first_bad_off || off < s->rep->first_bad_off)
		s->rep->first_bad_off = off;
}

static uint64_t col_index(const struct scrub *s, uint64_t off, uint32_t *row)
{
	*row = kr_geom_row(&s->pool->g, off);
	return kr_geom_column(&s->pool->g, off);
}

static uint64_t col_data_off(const struct scrub *s, uint64_t col)
{
	return kr_geom_column_page(&s->pool->g, col, 0);
}

/* Every page column of every zone. */
static void scan_parity(struct scrub *s)
{
	for (uint64_t c = 0; c < s->ncols; c++) {
		s->rep->columns++;
		progress(s, kr_geom_column_bytes(&s->pool->g));
		if (s->busy_col[c] || kr_stale_covers(s->pool, col_data_off(s, c), P)) /* its parity says nothing yet */
			continue;
		if (!kr_parity_column_ok(&s->pool->redund.parity, col_data_off(s, c))) {
			s->bad_col[c] = 1;
			s->rep->bad_columns++;
		}
	}
}

static int chunk_ok(const struct kr_chunk_meta *m) { return kr_redund_chunk_crc(m) == m->crc; }

/* Whether a page of [off, off + len) lies in a busy column (struct scrub). */
static int busy_covers(const struct scrub *s, uint64_t off, uint64_t len)
{
	for (uint64_t pg = off & ~(uint64_t)(P - 1); s->busy_col && pg < off + len; pg += P) {
		uint32_t row;
		if (kr_parity_covers(&s->pool->redund.parity, pg, P) && s->busy_col[col_index(s, pg, &row)])
			return 1;
	}
	return 0;
}

/* An object is sound if its header fits its block and its payload matches the CRC. */
static int object_ok(kr_pool *pool, const struct kr_block *b)
{
	const struct kr_obj_hdr *hdr = (const void *)(pool->pm.base + b->off);
	if (hdr->size == 0 || hdr->size > b->bytes - sizeof(*hdr))
		return 0;
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_OBJ_CSUM))
		return 1;
	/* In a marked column the checksum may trail the application's persisted bytes. */
	return kr_obj_crc(hdr, hdr + 1) == hdr->crc || kr_stale_covers(pool, b->off, b->bytes);
}

static int item_ok(const struct scrub *s, const struct item *it)
{
	if (it->is_object)
		return object_ok(s->pool, &it->b);
	return chunk_ok((const struct kr_chunk_meta *)(s->pool->pm.base + it->off));
}

static int add_item(struct scrub *s, struct item it)
{
	if (KR_GROW(s->items, s->cap, s->nitems + 1, 16))
		return kr_err_set(KR_E_NOMEM, "damaged item table");
	s->items[s->nitems++] = it;
	note_bad(s, it.is_object ? it.off + sizeof(struct kr_obj_hdr) : it.off);
	return KR_OK;
}

/* Every chunk record and every live object against its checksum. */
static int scan_items(struct scrub *s)
{
	kr_pool *pool = s->pool;
	const struct kr_pool_hdr *h = &pool->hdr;
	int rc = KR_OK;
	if (h->ro_compat & KR_FEAT_RO_META_CSUM)
		for (uint32_t z = 0; z < h->nzones && rc == KR_OK; z++)
			for (uint32_t i = 0; i < h->chunks_per_zone && rc == KR_OK; i++) {
				uint64_t off = kr_geom_zone_start(&pool->g, z) +
					       (uint64_t)i * sizeof(struct kr_chunk_meta);
				s->rep->chunks++;
				if (chunk_ok((const void *)(pool->pm.base + off)))
					continue;
				s->rep->bad_chunks++;
				rc = add_item(s, (struct item){.off = off, .len = sizeof(struct kr_chunk_meta)});
			}
	for (kr_oid oid = kr_heap_next(&pool->heap, 0); oid && rc == KR_OK;
	     oid = kr_heap_next(&pool->heap, oid)) {
		struct kr_block b;
		if (kr_heap_lookup(&pool->heap, oid, &b) != KR_OK)
			continue;
		s->rep->objects++;
		progress(s, b.bytes);
		if (object_ok(pool, &b) || busy_covers(s, b.off, b.bytes))
			continue;
		s->rep->bad_objects++;
		rc = add_item(s, (struct item){.off = b.off, .len = b.bytes, .b = b, .is_object = 1});
	}
	return rc;
}

/* Does unfixed item it own a page in column c? In which row (the first one)? */
static int item_rows_in_col(const struct scrub *s, const struct item *it, uint64_t c,
			    uint32_t *rows, int max)
{
	int n = 0;
	for (uint64_t pg = it->off & ~(uint64_t)(P - 1); pg < it->off + it->len && n < max; pg += P) {
		uint32_t row;
		if (kr_parity_covers(&s->pool->redund.parity, pg, P) && col_index(s, pg, &row) == c)
			rows[n++] = row;
	}
	return n;
}

static void recheck_items(struct scrub *s)
{
	for (size_t i = 0; i < s->nitems; i++)
		if (!s->items[i].fixed && item_ok(s, &s->items[i]))
			s->items[i].fixed = 1;
}

/* The candidate rows of column c: rows where some unfixed damaged item owns a page. */
#define MAX_ROWS 8
static int col_candidates(const struct scrub *s, uint64_t c, uint32_t *rows)
{
	int n = 0;
	for (size_t i = 0; i < s->nitems; i++) {
		if (s->items[i].fixed)
			continue;
		uint32_t r[MAX_ROWS];
		int k = item_rows_in_col(s, &s->items[i], c, r, MAX_ROWS);
		for (int j = 0; j < k; j++) {
			int seen = 0;
			for (int q = 0; q < n; q++)
				seen |= rows[q] == r[j];
			if (!seen && n < MAX_ROWS)
				rows[n++] = r[j];
		}
	}
	return n;
}

/* ---------------------------------------------------------------------------------------
 * Locating the damage inside one item
 *
 * A damaged item owns pages in columns that disagree with parity, but a disagreeing column
 * does not say which of its rows holds the damage: it may be the item's page, or another row
 * of the column (free space, another object, the parity row). Rebuilding a sound page writes
 * the column's difference into it, so there is no guessing; the item's checksum decides.
 * CRC-32C is affine over GF(2): rebuilding page p changes the item's CRC by v_p, which depends
 * only on the column's difference D_p (p rebuilt XOR p as it is) where it meets the checked
 * bytes, so the damaged pages are a set S whose v_p XOR to the mismatch (stored ^ computed):
 *   - up to 32 unknowns, Gaussian elimination: S is taken only if the v_p are independent,
 *     so that S is the one subset that fits; then no wrong answer is possible;
 *   - more unknowns, or dependent ones: a scribble is contiguous (the fault model), so the
 *     item's damaged pages are consecutive suspects; S is taken if exactly one run fits
 *     (a wrong run fits with odds 2^-32).
 * Pages that hold check fields (an object's header, a chunk record) change what is checked:
 * each choice for them (at most 4) is evaluated on a copy, never by writing the pool.
 * A set with two pages in one column is refused: that is two faults, which parity cannot
 * undo. The answer is written home and the item verified once more before it is kept.
 * ------------------------------------------------------------------------------------- */
struct suspect {
	uint64_t page;
	uint32_t v;    /* CRC change if rebuilt (an object's payload page) */
	uint8_t check; /* holds check fields: decided by trying both states */
	uint8_t pick;  /* in the answer */
};

/* Does page pg's column disagree with parity? From the pass's scan, or read now. */
static int column_suspect(const struct scrub *s, uint64_t pg)
{
	uint32_t row;
	if (s->bad_col)
		return s->bad_col[col_index(s, pg, &row)] == 1;
	return !kr_parity_column_ok(&s->pool->redund.parity, pg);
}

/* D over bytes [lo, hi) of page pg, into d; nonzero if D is. */
static int column_diff(const struct scrub *s, uint64_t pg, uint64_t lo, uint64_t hi, uint8_t *d)
{
	uint8_t buf[P];
	const uint8_t *cur = (const uint8_t *)s->pool->pm.base + pg;
	uint8_t any = 0;
	kr_parity_rebuild(&s->pool->redund.parity, pg, P, buf);
	for (uint64_t i = lo; i < hi; i++)
		any |= d[i - lo] = buf[i] ^ cur[i];
	return any != 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The item's pages in disagreeing columns whose D touches its bytes. */
static size_t list_suspects(const struct scrub *s, const struct item *it, struct suspect *v)
{
	uint64_t check_end = it->off + (it->is_object ? sizeof(struct kr_obj_hdr) : it->len);
	size_t n = 0;
	for (uint64_t pg = it->off & ~(uint64_t)(P - 1); pg < it->off + it->len; pg += P) {
		uint8_t d[P];
		uint64_t lo = max_u64(pg, it->off), hi = min_u64(pg + P, it->off + it->len);
		if (!kr_parity_covers(&s->pool->redund.parity, pg, P) || !column_suspect(s, pg) ||
		    !column_diff(s, pg, lo - pg, hi - pg, d))
			continue;
		v[n++] = (struct suspect){.page = pg, .check = lo < check_end};
	}
	return n;
}

/* XOR into dst (the copy of the bytes at pool offset off, len long) the D of page pg. */
static void apply_diff(const struct scrub *s, uint64_t pg, uint64_t off, size_t len, uint8_t *dst)
{
	uint8_t d[P];
	uint64_t lo = max_u64(pg, off), hi = min_u64(pg + P, off + len);
	if (lo >= hi)
		return;
	column_diff(s, pg, lo - pg, hi - pg, d);
	for (uint64_t i = lo; i < hi; i++)
		dst[i - off] ^= d[i - lo];
}

/* Under one choice for the check pages (bit j of mask: the j-th check suspect rebuilt): the
 * CRC change each other suspect would bring (v) and the mismatch they must explain. 0 if the
 * item cannot be sound under this choice whatever the rest. */
static int item_equation(const struct scrub *s, const struct item *it, struct suspect *v, size_t n,
			 unsigned mask, uint32_t *target)
{
	const uint8_t *base = (const uint8_t *)s->pool->pm.base;
	if (!it->is_object) { /* a chunk record: all its pages are check pages */
		uint8_t rec[sizeof(struct kr_chunk_meta)];
		memcpy(rec, base + it->off, sizeof(rec));
		for (size_t j = 0, c = 0; j < n; j++)
			if (v[j].check && (mask >> c++ & 1))
				apply_diff(s, v[j].page, it->off, sizeof(rec), rec);
		*target = 0;
		return chunk_ok((const struct kr_chunk_meta *)rec);
	}
	struct kr_obj_hdr h;
	memcpy(&h, base + it->off, sizeof(h));
	for (size_t j = 0, c = 0; j < n; j++)
		if (v[j].check && (mask >> c++ & 1))
			apply_diff(s, v[j].page, it->off, sizeof(h), (uint8_t *)&h);
	if (h.size == 0 || h.size > it->len - sizeof(h))
		return 0;
	uint32_t crc = kr_obj_crc(&h, base + it->off + sizeof(h));
	uint64_t pay = it->off + sizeof(h), end = pay + h.size;
	for (size_t j = 0, c = 0; j < n; j++) {
		uint8_t d[P];
		uint64_t lo = max_u64(v[j].page, pay), hi = min_u64(v[j].page + P, end);
		int chosen = v[j].check && (mask >> c++ & 1);
		v[j].v = 0;
		if (lo >= hi || !column_diff(s, v[j].page, lo - v[j].page, hi - v[j].page, d))
			continue;
		uint32_t delta = kr_crc32c_delta(d, hi - lo, end - hi);
		if (chosen)
			crc ^= delta; /* its payload bytes change with the header */
		else if (!v[j].check)
			v[j].v = delta;
	}
	*target = crc ^ h.crc;
	return 1;
}

/* Gaussian elimination over the unknowns u[0..k) (k <= 32): 1 and the picks set if exactly
 * one subset fits, 0 if none does, -1 if the v are dependent (undecided). */
static int solve_exact(struct suspect *v, const uint32_t *u, size_t k, uint32_t target)
{
	uint32_t vec[32] = {0}, comb[32] = {0};
	for (size_t i = 0; i < k; i++) {
		uint32_t x = v[u[i]].v, m = 1u << i;
		for (int b = 31; b >= 0 && x; b--) {
			if (!(x >> b & 1))
				continue;
			if (!vec[b]) {
				vec[b] = x;
				comb[b] = m;
				break;
			}
			x ^= vec[b];
			m ^= comb[b];
		}
		if (!x)
			return -1;
	}
	uint32_t m = 0;
	for (int b = 31; b >= 0 && target; b--)
		if (target >> b & 1) {
			if (!vec[b])
				return 0;
			target ^= vec[b];
			m ^= comb[b];
		}
	for (size_t i = 0; i < k; i++)
		v[u[i]].pick = m >> i & 1;
	return 1;
}

struct prefix {
	uint32_t x;
	uint32_t i;
};

static int prefix_cmp(const void *a, const void *b)
{
	const struct prefix *p = a, *q = b;
	return p->x != q->x ? (p->x < q->x ? -1 : 1) : (p->i < q->i ? -1 : p->i > q->i);
}

/* Runs of consecutive unknowns: run [a, b) fits iff prefix[b] ^ prefix[a] == target. 1 and
 * the picks set if exactly one run fits (the empty run when target is 0), 0 if none, -1 if
 * several. Sorted prefixes make it O(k log k). */
static int solve_run(struct suspect *v, const uint32_t *u, size_t k, uint32_t target)
{
	struct prefix *pre = kr_malloc((k + 1) * sizeof(*pre));
	if (!pre)
		return -1;
	pre[0] = (struct prefix){0, 0};
	for (size_t i = 0; i < k; i++)
		pre[i + 1] = (struct prefix){pre[i].x ^ v[u[i]].v, (uint32_t)(i + 1)};
	uint32_t *val = kr_malloc((k + 1) * sizeof(*val));
	if (!val) {
		free(pre);
		return -1;
	}
	for (size_t i = 0; i <= k; i++)
		val[i] = pre[i].x;
	qsort(pre, k + 1, sizeof(*pre), prefix_cmp);
	size_t fits = 0, ra = 0, rb = 0;
	for (size_t a = 0; a <= k && fits < 2; a++) {
		/* Ends b > a with prefix value val[a] ^ target: the first such entry, then on. */
		uint32_t want = val[a] ^ target;
		size_t lo = 0, hi = k + 1;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (pre[mid].x < want || (pre[mid].x == want && pre[mid].i <= a))
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo <= k && pre[lo].x == want && fits < 2; lo++, fits++) {
			ra = a;
			rb = pre[lo].i;
		}
	}
	free(pre);
	free(val);
	if (target == 0)
		fits++, ra = rb = 0;
	if (fits != 1)
		return fits ? -1 : 0;
	for (size_t i = 0; i < k; i++)
		v[u[i]].pick = i >= ra && i < rb;
	return 1;
}

/* How many answers one check choice allows: 0, 1 (picks set) or -1 (undecided). */
static int solve_choice(const struct scrub *s, const struct item *it, struct suspect *v, size_t n,
			unsigned mask, uint32_t *u)
{
	uint32_t target;
	if (!item_equation(s, it, v, n, mask, &target))
		return 0;
	size_t k = 0;
	for (size_t j = 0, c = 0; j < n; j++) {
		v[j].pick = v[j].check ? (mask >> c++ & 1) : 0;
		if (!v[j].check && v[j].v)
			u[k++] = (uint32_t)j;
	}
	int r = k <= 32 ? solve_exact(v, u, k, target) : -1;
	if (r < 0)
		r = solve_run(v, u, k, target);
	/* Two picks in one column are two faults: not an answer parity can give. */
	for (size_t a = 0; r == 1 && a < n; a++)
		for (size_t b = a + 1; b < n && r == 1; b++) {
			uint32_t ra, rb;
			if (v[a].pick && v[b].pick &&
			    col_index(s, v[a].page, &ra) == col_index(s, v[b].page, &rb))
				r = 0;
		}
	return r;
}

/* Rebuilds the picked pages and keeps them if the item then verifies. */
static int rebuild_picked(struct scrub *s, struct item *it, const struct suspect *v, size_t n)
{
	struct kr_pm *pm = &s->pool->pm;
	size_t np = 0;
	for (size_t j = 0; j < n; j++)
		np += v[j].pick;
	uint8_t *save = kr_malloc(np * P), buf[P];
	if (!save)
		return 0;
	for (size_t j = 0, i = 0; j < n; j++)
		if (v[j].pick) {
			memcpy(save + i++ * P, pm->base + v[j].page, P);
			kr_parity_rebuild(&s->pool->redund.parity, v[j].page, P, buf);
			kr_pm_copy(pm, pm->base + v[j].page, buf, P);
			kr_pm_flush(pm, pm->base + v[j].page, P);
		}
	int ok = item_ok(s, it);
	for (size_t j = 0, i = 0; j < n; j++)
		if (v[j].pick && !ok) { /* the algebra says this cannot happen: a guard, not a try */
			kr_pm_copy(pm, pm->base + v[j].page, save + i++ * P, P);
			kr_pm_flush(pm, pm->base + v[j].page, P);
		}
	free(save);
	return ok;
}

/* Finds the damaged pages of a damaged item and rebuilds them: 1 if the item is then sound,
 * 0 if the evidence does not single out one answer (it is left as it was). */
static int repair_item(struct scrub *s, struct item *it)
{
	size_t cap = it->len / P + 2;
	struct suspect *v = kr_malloc(cap * (sizeof(*v) + sizeof(uint32_t)));
	if (!v)
		return 0;
	uint32_t *u = (uint32_t *)(v + cap);
	struct suspect *best = NULL;
	size_t n = list_suspects(s, it, v), nchecks = 0, answers = 0;
	for (size_t j = 0; j < n; j++)
		nchecks += v[j].check;
	for (unsigned mask = 0; mask < 1u << nchecks && answers < 2; mask++) {
		int r = solve_choice(s, it, v, n, mask, u);
		if (r < 0)
			answers = 2;
		else if (r == 1 && answers++ == 0) {
			best = kr_malloc(n * sizeof(*best));
			if (!best)
				answers = 2;
			else
				memcpy(best, v, n * sizeof(*best));
		}
	}
	int ok = answers == 1 && rebuild_picked(s, it, best, n);
	for (size_t j = 0; ok && s->bad_col && j < n; j++)
		if (best[j].pick) {
			uint32_t row;
			s->bad_col[col_index(s, best[j].page, &row)] = 2;
			s->rep->repaired_pages++;
			report_page(s, best[j].page, KR_PAGE_REPAIRED);
		}
	free(best);
	free(v);
	if (ok)
		it->fixed = 1;
	return ok;
}

/* Every damaged item located and repaired, until nothing changes: repairing one item settles
 * columns, which removes suspects from the others. */
static void repair_items(struct scrub *s)
{
	for (int progress = 1; progress;) {
		progress = 0;
		for (size_t i = 0; i < s->nitems; i++)
			if (!s->items[i].fixed && repair_item(s, &s->items[i])) {
				recheck_items(s);
				progress = 1;
			}
	}
}

/* What is left: damaged items are unrepairable; a disagreeing column that no damaged item
 * claims held damage in parity or free space, and its parity is recomputed. A column that a
 * damaged item still claims is left alone: recomputing it would make the damage permanent. */
static void settle(struct scrub *s)
{
	for (size_t i = 0; i < s->nitems; i++) {
		const struct item *it = &s->items[i];
		int claimed = 0;
		for (uint64_t pg = it->off & ~(uint64_t)(P - 1); pg < it->off + it->len; pg += P) {
			uint32_t row;
			if (kr_parity_covers(&s->pool->redund.parity, pg, P) &&
			    s->bad_col[col_index(s, pg, &row)] == 1)
				claimed = 1;
		}
		/* Checking only: an item is repairable if it lies in some disagreeing column, and
		 * its pages there are the damaged ones. */
		if (s->repair ? !it->fixed : !claimed) {
			s->rep->unrepairable++;
			report_page(s, it->off & ~(uint64_t)(P - 1), KR_PAGE_UNREPAIRABLE);
		} else if (!s->repair) {
			for (uint64_t pg = it->off & ~(uint64_t)(P - 1); pg < it->off + it->len; pg += P) {
				uint32_t row;
				if (kr_parity_covers(&s->pool->redund.parity, pg, P) &&
				    s->bad_col[col_index(s, pg, &row)] == 1)
					report_page(s, pg, KR_PAGE_DAMAGED);
			}
		}
	}
	for (uint64_t c = 0; c < s->ncols; c++) {
		uint32_t rows[MAX_ROWS];
		if (s->bad_col[c] != 1)
			continue;
		uint64_t poff = kr_parity_offset(&s->pool->redund.parity, col_data_off(s, c));
		if (!s->nitems)
			note_bad(s, poff);
		if (col_candidates(s, c, rows) > 0)
			continue;
		report_page(s, poff, s->repair ? KR_PAGE_REPAIRED : KR_PAGE_DAMAGED);
		if (s->repair) {
			kr_parity_recompute(&s->pool->redund.parity, col_data_off(s, c), P);
			s->bad_col[c] = 2;
			s->rep->recomputed_columns++;
		}
	}
}

/* One pass over the pool. The caller keeps commits away (no open transaction, or the
 * commit gate closed). */
static int scrub_run(kr_pool *pool, unsigned flags, struct kr_check_report *rep)
{
	struct kr_check_report caller = *rep; /* keep the caller's callbacks */
	memset(rep, 0, sizeof(*rep));
	rep->on_page = caller.on_page;
	rep->ctx = caller.ctx;
	rep->progress = caller.progress;
	rep->progress_ctx = caller.progress_ctx;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	const struct kr_pool_hdr *h = &pool->hdr;
	struct scrub s = {.pool = pool, .rep = rep, .repair = (flags & KR_CHECK_REPAIR) != 0};
	s.ncols = kr_geom_columns(&pool->g);
	s.bad_col = kr_calloc(s.ncols, 1);
	s.busy_col = kr_calloc(s.ncols, 1);
	uint64_t used, free_bytes, nobjects;
	kr_heap_counters(&pool->heap, &used, &free_bytes, &nobjects);
	s.total = ((h->ro_compat & KR_FEAT_RO_PARITY) ? kr_geom_heap_bytes(&pool->g) : 0) + used;
	int rc = s.bad_col && s.busy_col ? KR_OK : kr_err_set(KR_E_NOMEM, "check tables");
	int held = rc == KR_OK;
	if (held) {
		kr_tx_inflight_hold(pool);
		kr_tx_inflight_columns(pool, s.busy_col);
		if (h->ro_compat & KR_FEAT_RO_PARITY)
			scan_parity(&s);
		rc = scan_items(&s);
	}
	if (rc == KR_OK) {
		if (s.repair && (h->ro_compat & KR_FEAT_RO_PARITY))
			repair_items(&s);
		settle(&s);
	}
	if (held)
		kr_tx_inflight_release(pool);
	if (rc == KR_OK) {
		/* The redundancy of the metadata too: a twin damaged while open is found here,
		 * not at the next open. */
		rc = kr_pool_check_copies(pool, s.repair, rep);
	}
	if (rc == KR_OK) {
		if (s.repair) {
			rc = kr_pm_fence(&pool->pm);
			pool->csum_repairs += rep->repaired_pages;
		}
	}
	free(s.bad_col);
	free(s.busy_col);
	free(s.items);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rep->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	rep->bytes_scanned = kr_geom_heap_bytes(&pool->g);
	if (rc)
		return rc;
	if (rep->unrepairable ||
	    (!s.repair && (rep->bad_objects || rep->bad_chunks || rep->bad_columns || rep->bad_copies)))
		return KR_CORRUPT(KR_E_CORRUPT, rep->first_bad_off,
				  "%llu damaged objects, %llu damaged chunk records, %llu parity columns "
				  "disagree, %llu metadata copies damaged, %llu unrepairable",
				  (unsigned long long)rep->bad_objects, (unsigned long long)rep->bad_chunks,
				  (unsigned long long)rep->bad_columns, (unsigned long long)rep->bad_copies,
				  (unsigned long long)rep->unrepairable);
	return KR_OK;
}

int kr_pool_check(kr_pool *pool, unsigned flags, struct kr_check_report *rep)
{
	if (!pool || !rep)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_check: NULL argument");
	int rc = kr_pool_usable(pool);
	if (rc == KR_OK && (flags & KR_CHECK_REPAIR))
		rc = kr_pool_writable(pool, "kr_pool_check with KR_CHECK_REPAIR");
	if (rc)
		return rc;
	if (kr_log_lanes_held(&pool->log) != 0)
		return kr_err_set(KR_E_MISUSE_STATE, "kr_pool_check: transactions are open");
	/* Applied transactions durable and parity settled before anything is judged, and the
	 * redundancy of marked columns brought up to date (a read-only pool keeps its marks,
	 * and those columns go unjudged). */
	if ((rc = kr_log_sync(&pool->log, NULL)) || (rc = kr_stale_clean(pool)))
		return rc;
	return scrub_run(pool, flags, rep);
}

/* Whether an in-flight block lies in a page column of [off, off + len). Caller holds the
 * in-flight list. */
static int inflight_in_pages(kr_pool *pool, uint64_t off, uint64_t len)
{
	for (uint64_t pg = off & ~(uint64_t)(P - 1); pg < off + len; pg += P) {
		if (!kr_geom_in_data(&pool->g, pg))
			continue;
		uint64_t c = kr_geom_column(&pool->g, pg);
		if (kr_tx_inflight_in_columns(pool, c, c + 1))
			return 1;
	}
	return 0;
}

/* Whether an in-flight in-place range lies in the object (*holds: kr_tx_inflight_object_holds)
 * or in one of its page columns. */
static int inflight_busy(kr_pool *pool, const struct kr_block *b, int *holds)
{
	kr_tx_inflight_hold(pool);
	*holds = kr_tx_inflight_object_holds(pool, b);
	int busy = *holds >= 0 || inflight_in_pages(pool, b->off, b->bytes);
	kr_tx_inflight_release(pool);
	return busy;
}

/* An object that failed its checksum, repaired online (commits held back): its damaged pages
 * located and rebuilt as in a pass. KR_OK if the object then verifies. */
int kr_scrub_object(kr_pool *pool, const struct kr_block *b)
{
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_PARITY))
		return KR_E_CORRUPT_OBJECT;
	/* In a marked column the bytes are trusted as they are (the window, stale.c). */
	if (kr_stale_covers(pool, b->off, b->bytes))
		return kr_stale_trust_object(pool, b);
	struct kr_check_report rep = {0};
	struct scrub s = {.pool = pool, .rep = &rep, .repair = 1};
	struct item it = {.off = b->off, .len = b->bytes, .b = *b, .is_object = 1};
	/* An open in-place transaction writes this object, or another in one of its page
	 * columns: home holds stores that the checksum, or parity, does not reflect yet. The
	 * object is sound if its checksum holds with those ranges' old bytes; a repair now
	 * would undo the stores, or rebuild from rows that parity does not describe.
	 * Otherwise a commit out of the gate may have written this object's bytes and not yet
	 * its checksum: it goes on first (that transaction may be an in-place one, waiting for
	 * a lock that this thread holds: so the in-flight test comes first). */
	struct kr_quiesce q;
	int holds, busy;
	kr_quiesce_hold(&q, &pool->log);
	while (!(busy = inflight_busy(pool, b, &holds)) && kr_log_any_stepped_out(&pool->log)) {
		kr_quiesce_release(&q);
		if (!kr_quiesce_hold_settled(&q, &pool->log, 0))
			return object_ok(pool, b) ? KR_OK : KR_E_CORRUPT_OBJECT;
	}
	if (busy) {
		kr_quiesce_release(&q);
		return holds == 1 || object_ok(pool, b) ? KR_OK : KR_E_CORRUPT_OBJECT;
	}
	int ok = object_ok(pool, b) || repair_item(&s, &it);
	int rc = kr_pm_fence(&pool->pm);
	kr_quiesce_release(&q);
	if (rc)
		return rc;
	if (!ok)
		return KR_E_CORRUPT_OBJECT;
	pool->csum_repairs++;
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * The metadata copies: both header copies and both root lines (also run at open)
 * ------------------------------------------------------------------------------------- */
static int root_line_ok(const struct kr_root_line *rl)
{
	static const struct kr_root_line zero;
	if (memcmp(rl, &zero, sizeof(zero)) == 0)
		return 1;
	for (size_t i = 0; i < sizeof(rl->reserved); i++)
		if (rl->reserved[i])
			return 0;
	return rl->crc == kr_crc32c(rl, offsetof(struct kr_root_line, crc));
}

static void tally_bad(kr_pool *pool, struct kr_copies_tally *t, const void *where)
{
	if (t->bad++ == 0)
		t->first_bad_off = (uint64_t)((const char *)where - (const char *)pool->pm.base) / P * P;
}

int kr_scrub_root_lines(kr_pool *pool, int repair, struct kr_copies_tally *t)
{
	int ok0 = root_line_ok(pool->root[0]), ok1 = root_line_ok(pool->root[1]);
	if (!ok0 && !ok1)
		return KR_CORRUPT(KR_E_CORRUPT_META, pool->hdr.ctl_off,
				  "root line is damaged in both control pages");
	if (ok0 && ok1 && memcmp(pool->root[0], pool->root[1], KR_LINE_SIZE) == 0)
		return KR_OK;
	struct kr_root_line *good = ok0 ? pool->root[0] : pool->root[1];
	struct kr_root_line *bad = ok0 ? pool->root[1] : pool->root[0];
	tally_bad(pool, t, bad);
	if (!repair)
		return KR_OK;
	kr_pm_copy(&pool->pm, bad, good, KR_LINE_SIZE);
	t->repaired++;
	return kr_pm_persist(&pool->pm, bad, KR_LINE_SIZE);
}

int kr_scrub_header_copies(kr_pool *pool, int repair, struct kr_copies_tally *t)
{
	static const uint8_t zero[P - sizeof(struct kr_pool_hdr)];
	char *copies[2] = {pool->pm.base, pool->pm.base + pool->hdr.pool_size - P};
	int fixed = 0;
	for (int i = 0; i < 2; i++) {
		if (memcmp(copies[i], &pool->hdr, sizeof(pool->hdr)) == 0 &&
		    memcmp(copies[i] + sizeof(pool->hdr), zero, sizeof(zero)) == 0)
			continue;
		tally_bad(pool, t, copies[i]);
		if (!repair)
			continue;
		kr_pm_copy(&pool->pm, copies[i], &pool->hdr, sizeof(pool->hdr));
		kr_pm_set(&pool->pm, copies[i] + sizeof(pool->hdr), 0, sizeof(zero));
		kr_pm_flush(&pool->pm, copies[i], P);
		pool->csum_repairs++;
		t->repaired++;
		fixed = 1;
	}
	return fixed ? kr_pm_fence(&pool->pm) : KR_OK;
}

int kr_pool_check_copies(kr_pool *pool, int repair, struct kr_check_report *rep)
{
	struct kr_copies_tally t = {0};
	int rc = kr_scrub_header_copies(pool, repair, &t);
	if (rc == KR_OK)
		rc = kr_scrub_root_lines(pool, repair, &t);
	rep->copies += 4; /* two header copies, two root lines */
	rep->bad_copies += t.bad;
	rep->repaired_copies += t.repaired;
	if (t.bad && !rep->first_bad_off)
		rep->first_bad_off = t.first_bad_off;
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Read policies and the background scrubber
 * ------------------------------------------------------------------------------------- */
/* pool->scrubber: the background scrubber's thread and schedule (the read policy it serves
 * is the pool's, read_policy: tx.c reads it too). */
struct kr_scrubber {
	pthread_mutex_t lock;    /* the fields below */
	pthread_cond_t cond;
	pthread_t thread;
	int run;
	uint64_t txs;           /* a pass after this many commits (0: time only) */
	double seconds;         /* or after this long */
	struct timespec last;   /* when the last pass ended */
};

int kr_scrubber_new(kr_pool *pool)
{
	struct kr_scrubber *sc = kr_calloc(1, sizeof(*sc));
	if (!sc)
		return kr_err_set(KR_E_NOMEM, "scrubber");
	pthread_mutex_init(&sc->lock, NULL);
	pthread_cond_init(&sc->cond, NULL);
	pool->scrubber = sc;
	return KR_OK;
}

void kr_scrubber_free(kr_pool *pool)
{
	struct kr_scrubber *sc = pool->scrubber;
	if (!sc)
		return;
	kr_scrub_stop(pool);
	pthread_mutex_destroy(&sc->lock);
	pthread_cond_destroy(&sc->cond);
	free(sc);
	pool->scrubber = NULL;
}

static uint64_t commits_so_far(kr_pool *pool)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < pool->log.nlanes; i++)
		n += atomic_load_explicit(&pool->log.lanes[i].commits, memory_order_relaxed);
	return n;
}

static void *scrubber(void *arg)
{
	kr_pool *pool = arg;
	struct kr_scrubber *sc = pool->scrubber;
	uint64_t last = commits_so_far(pool);
	pthread_mutex_lock(&sc->lock);
	while (sc->run) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		/* Wake up often enough to notice the commit count, at most every 100 ms. */
		double wait = sc->seconds < 0.1 ? sc->seconds : 0.1;
		until.tv_nsec += (long)(wait * 1e9);
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&sc->cond, &sc->lock, &until);
		if (!sc->run)
			break;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double elapsed = (double)(now.tv_sec - sc->last.tv_sec) +
				 (double)(now.tv_nsec - sc->last.tv_nsec) / 1e9;
		uint64_t c = commits_so_far(pool);
		if (elapsed < sc->seconds && (sc->txs == 0 || c - last < sc->txs))
			continue;
		pthread_mutex_unlock(&sc->lock);
		/* A pass holds commits back for its duration (a whole-pool pass; scrubbing in
		 * slices is the next step for large pools). */
		struct kr_check_report rep = {0};
		struct kr_quiesce q;
		/* A commit that waits for a parity lock steps out of the gate, maybe half applied
		 * (log.h): its object's bytes new and its checksum old, which the pass would
		 * report as damage. Such waits are short; the pass waits for them for up to a
		 * second, and is skipped if one outlasts that. */
		int ran = 0;
		if (kr_quiesce_hold_settled(&q, &pool->log, 1000)) {
			if (kr_log_sync(&pool->log, NULL) == KR_OK) {
				scrub_run(pool, KR_CHECK_REPAIR, &rep);
				ran = 1;
			}
			kr_quiesce_release(&q);
		}
		pthread_mutex_lock(&sc->lock);
		pool->scrub_passes += ran;
		last = c;
		clock_gettime(CLOCK_MONOTONIC, &sc->last);
	}
	pthread_mutex_unlock(&sc->lock);
	return NULL;
}

void kr_scrub_stop(kr_pool *pool)
{
	struct kr_scrubber *sc = pool->scrubber;
	pthread_mutex_lock(&sc->lock);
	int running = sc->run;
	sc->run = 0;
	pthread_cond_signal(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
	if (running)
		pthread_join(sc->thread, NULL);
}

int kr_pool_set_read_policy(kr_pool *pool, enum kr_read_policy policy, uint64_t scrub_txs,
			    double scrub_seconds)
{
	if (!pool || policy > KR_READ_CONSERVATIVE || scrub_seconds < 0)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_set_read_policy: bad argument");
	kr_scrub_stop(pool);
	struct kr_scrubber *sc = pool->scrubber;
	atomic_store(&pool->read_policy, policy);
	if (policy != KR_READ_SCRUB)
		return KR_OK;
	pthread_mutex_lock(&sc->lock);
	sc->txs = scrub_txs;
	sc->seconds = scrub_seconds > 0 ? scrub_seconds : 60;
	clock_gettime(CLOCK_MONOTONIC, &sc->last);
	sc->run = 1;
	int e = pthread_create(&sc->thread, NULL, scrubber, pool);
	if (e)
		sc->run = 0;
	pthread_mutex_unlock(&sc->lock);
	return e ? kr_err_set(KR_E_NOMEM, "cannot start the scrubber thread") : KR_OK;
}


int kr_scrub_chunk_records(kr_pool *pool)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	if (!(h->ro_compat & KR_FEAT_RO_META_CSUM))
		return KR_OK;
	struct kr_check_report rep = {0};
	struct scrub s = {.pool = pool, .rep = &rep, .repair = 1};
	int repaired = 0;
	for (uint32_t z = 0; z < h->nzones; z++)
		for (uint32_t i = 0; i < h->chunks_per_zone; i++) {
			uint64_t off = kr_geom_zone_start(&pool->g, z) + (uint64_t)i * sizeof(struct kr_chunk_meta);
			const struct kr_chunk_meta *m = (const void *)(pool->pm.base + off);
			if (chunk_ok(m))
				continue;
			/* At open, before anything else reads the records. A record may straddle two
			 * pages, in two columns: still one fault per column. */
			struct item it = {.off = off, .len = sizeof(*m)};
			if (!(h->ro_compat & KR_FEAT_RO_PARITY) || !repair_item(&s, &it))
				return KR_CORRUPT(KR_E_CORRUPT_META, off,
						  "chunk record %u of zone %u fails its checksum and "
						  "cannot be rebuilt",
						  i, z);
			pool->csum_repairs++;
			repaired = 1;
		}
	return repaired ? kr_pm_fence(&pool->pm) : KR_OK;
}
