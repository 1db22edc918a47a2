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
 *     3. for each damaged item, rebuilds from parity each of its pages whose column is in
 *        M (the page of that column that the damaged item owns), and checks it again;
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
 *   (kr_pool_check refuses to run while transactions are open).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csum.h"
#include "err.h"
#include "pool.h"

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
	uint64_t row_size;
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
	const struct kr_pool_hdr *h = &s->pool->hdr;
	uint64_t rel = off - h->heap_off, z = rel / h->zone_size, zoff = rel % h->zone_size;
	*row = (uint32_t)(zoff / s->row_size);
	return z * h->row_pages + (zoff % s->row_size) / P;
}

static uint64_t col_data_off(const struct scrub *s, uint64_t col)
{
	const struct kr_pool_hdr *h = &s->pool->hdr;
	return h->heap_off + col / h->row_pages * h->zone_size + col % h->row_pages * P;
}

static uint64_t col_page(const struct scrub *s, uint64_t col, uint32_t row)
{
	return col_data_off(s, col) + (uint64_t)row * s->row_size;
}

/* Every page column of every zone. */
static void scan_parity(struct scrub *s)
{
	for (uint64_t c = 0; c < s->ncols; c++) {
		s->rep->columns++;
		progress(s, (uint64_t)(s->pool->hdr.rows + 1) * P);
		if (!kr_parity_column_ok(&s->pool->redund.parity, col_data_off(s, c))) {
			s->bad_col[c] = 1;
			s->rep->bad_columns++;
		}
	}
}

static int chunk_ok(const struct kr_chunk_meta *m) { return kr_redund_chunk_crc(m) == m->crc; }
static int chunk_ok_v(const void *m) { return chunk_ok(m); }

/* An object is sound if its header fits its block and its payload matches the CRC. */
static int object_ok(kr_pool *pool, const struct kr_block *b)
{
	const struct kr_obj_hdr *hdr = (const void *)(pool->pm.base + b->off);
	if (hdr->size == 0 || hdr->size > b->bytes - sizeof(*hdr))
		return 0;
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_OBJ_CSUM))
		return 1;
	return kr_obj_crc(hdr, hdr + 1) == hdr->crc;
}

static int item_ok(const struct scrub *s, const struct item *it)
{
	if (it->is_object)
		return object_ok(s->pool, &it->b);
	return chunk_ok((const struct kr_chunk_meta *)(s->pool->pm.base + it->off));
}

static int add_item(struct scrub *s, struct item it)
{
	if (s->nitems == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct item *n = realloc(s->items, cap * sizeof(*n));
		if (!n)
			return kr_err_set(KR_E_NOMEM, "damaged item table");
		s->items = n;
		s->cap = cap;
	}
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
				uint64_t off = h->heap_off + z * h->zone_size +
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
		if (object_ok(pool, &b))
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

static void rebuild_page(struct scrub *s, uint64_t page)
{
	uint8_t buf[P];
	struct kr_pm *pm = &s->pool->pm;
	kr_parity_rebuild(&s->pool->redund.parity, page, P, buf);
	kr_pm_copy(pm, pm->base + page, buf, P);
	kr_pm_flush(pm, pm->base + page, P);
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

/* Resolves disagreeing columns until nothing changes: a column with one candidate row is
 * rebuilt there; fixing items can leave other columns with one candidate. Then columns with
 * several candidates: a row is kept only if rebuilding it makes an item sound. */
static void repair_columns(struct scrub *s)
{
	for (int progress = 1; progress;) {
		progress = 0;
		for (uint64_t c = 0; c < s->ncols; c++) {
			uint32_t rows[MAX_ROWS];
			if (s->bad_col[c] != 1 || col_candidates(s, c, rows) != 1)
				continue;
			uint64_t page = col_page(s, c, rows[0]);
			rebuild_page(s, page);
			s->bad_col[c] = 2;
			s->rep->repaired_pages++;
			report_page(s, page, KR_PAGE_REPAIRED);
			recheck_items(s);
			progress = 1;
		}
		for (uint64_t c = 0; c < s->ncols && !progress; c++) {
			uint32_t rows[MAX_ROWS];
			int n = s->bad_col[c] == 1 ? col_candidates(s, c, rows) : 0;
			for (int k = 0; k < n && !progress; k++) {
				uint64_t page = col_page(s, c, rows[k]);
				uint8_t save[P];
				size_t fixed_before = 0, fixed_after = 0;
				for (size_t i = 0; i < s->nitems; i++)
					fixed_before += s->items[i].fixed;
				memcpy(save, s->pool->pm.base + page, P);
				rebuild_page(s, page);
				recheck_items(s);
				for (size_t i = 0; i < s->nitems; i++)
					fixed_after += s->items[i].fixed;
				if (fixed_after > fixed_before) {
					s->bad_col[c] = 2;
					s->rep->repaired_pages++;
					report_page(s, page, KR_PAGE_REPAIRED);
					progress = 1;
				} else {
					kr_pm_copy(&s->pool->pm, s->pool->pm.base + page, save, P);
					kr_pm_flush(&s->pool->pm, s->pool->pm.base + page, P);
				}
			}
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
	s.row_size = (uint64_t)h->row_pages * P;
	s.ncols = (uint64_t)h->nzones * h->row_pages;
	s.bad_col = calloc(s.ncols, 1);
	s.total = ((h->ro_compat & KR_FEAT_RO_PARITY) ? (uint64_t)h->nzones * h->zone_size : 0) +
		  pool->heap.used_bytes;
	int rc = s.bad_col ? KR_OK : kr_err_set(KR_E_NOMEM, "check tables");
	if (rc == KR_OK) {
		if (h->ro_compat & KR_FEAT_RO_PARITY)
			scan_parity(&s);
		rc = scan_items(&s);
	}
	if (rc == KR_OK) {
		if (s.repair && (h->ro_compat & KR_FEAT_RO_PARITY))
			repair_columns(&s);
		settle(&s);
		if (s.repair) {
			rc = kr_pm_fence(&pool->pm);
			pool->csum_repairs += rep->repaired_pages;
		}
	}
	free(s.bad_col);
	free(s.items);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rep->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	rep->bytes_scanned = (uint64_t)h->nzones * h->zone_size;
	if (rc)
		return rc;
	if (rep->unrepairable || (!s.repair && (rep->bad_objects || rep->bad_chunks || rep->bad_columns)))
		return KR_CORRUPT(KR_E_CORRUPT, rep->first_bad_off,
				  "%llu damaged objects, %llu damaged chunk records, %llu parity columns "
				  "disagree, %llu unrepairable",
				  (unsigned long long)rep->bad_objects, (unsigned long long)rep->bad_chunks,
				  (unsigned long long)rep->bad_columns, (unsigned long long)rep->unrepairable);
	return KR_OK;
}

int kr_pool_check(kr_pool *pool, unsigned flags, struct kr_check_report *rep)
{
	if (!pool || !rep)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_check: NULL argument");
	int rc = kr_pool_usable(pool);
	if (rc)
		return rc;
	if (kr_log_lanes_held(&pool->log) != 0)
		return kr_err_set(KR_E_MISUSE_STATE, "kr_pool_check: transactions are open");
	/* Applied transactions durable and parity settled before anything is judged. */
	if ((rc = kr_log_sync(&pool->log, NULL)))
		return rc;
	return scrub_run(pool, flags, rep);
}

/* An object that failed its checksum, repaired online: with commits held back, each of its
 * pages whose column disagrees with parity is rebuilt; KR_OK if the object then verifies. */
int kr_scrub_object(kr_pool *pool, const struct kr_block *b)
{
	struct kr_parity *par = &pool->redund.parity;
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_PARITY))
		return KR_E_CORRUPT_OBJECT;
	int token = kr_log_suspend();
	kr_log_quiesce(&pool->log);
	kr_parity_unlocked = 1; /* commits are held back; a waiting one may hold a lock */
	for (uint64_t page = b->off & ~(uint64_t)(P - 1); page < b->off + b->bytes; page += P) {
		if (!kr_parity_covers(par, page, P) || kr_parity_column_ok(par, page))
			continue;
		uint8_t buf[P];
		kr_parity_rebuild(par, page, P, buf);
		kr_pm_copy(&pool->pm, pool->pm.base + page, buf, P);
		kr_pm_flush(&pool->pm, pool->pm.base + page, P);
	}
	int rc = kr_pm_fence(&pool->pm);
	int ok = object_ok(pool, b);
	kr_parity_unlocked = 0;
	kr_log_resume(&pool->log);
	kr_log_unsuspend(token);
	if (rc)
		return rc;
	if (!ok)
		return KR_E_CORRUPT_OBJECT;
	pool->csum_repairs++;
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Read policies and the background scrubber
 * ------------------------------------------------------------------------------------- */
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
	uint64_t last = commits_so_far(pool);
	pthread_mutex_lock(&pool->scrub_lock);
	while (pool->scrub_run) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		/* Wake up often enough to notice the commit count, at most every 100 ms. */
		double wait = pool->scrub_seconds < 0.1 ? pool->scrub_seconds : 0.1;
		until.tv_nsec += (long)(wait * 1e9);
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&pool->scrub_cond, &pool->scrub_lock, &until);
		if (!pool->scrub_run)
			break;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double elapsed = (double)(now.tv_sec - pool->scrub_last.tv_sec) +
				 (double)(now.tv_nsec - pool->scrub_last.tv_nsec) / 1e9;
		uint64_t c = commits_so_far(pool);
		if (elapsed < pool->scrub_seconds && (pool->scrub_txs == 0 || c - last < pool->scrub_txs))
			continue;
		pthread_mutex_unlock(&pool->scrub_lock);
		/* A pass holds commits back for its duration (a whole-pool pass; scrubbing in
		 * slices is the next step for large pools). */
		struct kr_check_report rep = {0};
		kr_log_quiesce(&pool->log);
		kr_parity_unlocked = 1;
		if (kr_log_sync(&pool->log, NULL) == KR_OK)
			scrub_run(pool, KR_CHECK_REPAIR, &rep);
		kr_parity_unlocked = 0;
		kr_log_resume(&pool->log);
		pthread_mutex_lock(&pool->scrub_lock);
		pool->scrub_passes++;
		last = c;
		clock_gettime(CLOCK_MONOTONIC, &pool->scrub_last);
	}
	pthread_mutex_unlock(&pool->scrub_lock);
	return NULL;
}

void kr_scrub_stop(kr_pool *pool)
{
	pthread_mutex_lock(&pool->scrub_lock);
	int running = pool->scrub_run;
	pool->scrub_run = 0;
	pthread_cond_signal(&pool->scrub_cond);
	pthread_mutex_unlock(&pool->scrub_lock);
	if (running)
		pthread_join(pool->scrub_thread, NULL);
}

int kr_pool_set_read_policy(kr_pool *pool, enum kr_read_policy policy, uint64_t scrub_txs,
			    double scrub_seconds)
{
	if (!pool || policy > KR_READ_CONSERVATIVE || scrub_seconds < 0)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_set_read_policy: bad argument");
	kr_scrub_stop(pool);
	atomic_store(&pool->read_policy, policy);
	if (policy != KR_READ_SCRUB)
		return KR_OK;
	pthread_mutex_lock(&pool->scrub_lock);
	pool->scrub_txs = scrub_txs;
	pool->scrub_seconds = scrub_seconds > 0 ? scrub_seconds : 60;
	clock_gettime(CLOCK_MONOTONIC, &pool->scrub_last);
	pool->scrub_run = 1;
	int e = pthread_create(&pool->scrub_thread, NULL, scrubber, pool);
	if (e)
		pool->scrub_run = 0;
	pthread_mutex_unlock(&pool->scrub_lock);
	return e ? kr_err_set(KR_E_NOMEM, "cannot start the scrubber thread") : KR_OK;
}


/* Rebuilds the page at off from parity and writes it home if that makes ok(ctx) true.
 * Used at open, before anything else reads the page. */
static int rebuild_if(kr_pool *pool, uint64_t off, int (*ok)(const void *), const void *item)
{
	struct kr_parity *par = &pool->redund.parity;
	uint64_t page = off & ~(uint64_t)(P - 1);
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_PARITY) || !kr_parity_covers(par, page, P))
		return 0;
	uint8_t buf[P], old[P];
	kr_parity_rebuild(par, page, P, buf);
	memcpy(old, pool->pm.base + page, P);
	kr_pm_copy(&pool->pm, pool->pm.base + page, buf, P);
	if (ok(item)) {
		kr_pm_flush(&pool->pm, pool->pm.base + page, P);
		return 1;
	}
	kr_pm_copy(&pool->pm, pool->pm.base + page, old, P); /* not the culprit: put it back */
	return 0;
}

/* Both pages of a straddling record rebuilt, kept only if that makes the record sound. */
static int rebuild_both(kr_pool *pool, uint64_t a, uint64_t b, const struct kr_chunk_meta *m)
{
	struct kr_parity *par = &pool->redund.parity;
	uint64_t pa = a & ~(uint64_t)(P - 1), pb = b & ~(uint64_t)(P - 1);
	if (pa == pb || !(pool->hdr.ro_compat & KR_FEAT_RO_PARITY) || !kr_parity_covers(par, pa, P) ||
	    !kr_parity_covers(par, pb, P))
		return 0;
	uint8_t old_a[P], old_b[P], buf[P];
	memcpy(old_a, pool->pm.base + pa, P);
	memcpy(old_b, pool->pm.base + pb, P);
	kr_parity_rebuild(par, pa, P, buf);
	kr_pm_copy(&pool->pm, pool->pm.base + pa, buf, P);
	kr_parity_rebuild(par, pb, P, buf);
	kr_pm_copy(&pool->pm, pool->pm.base + pb, buf, P);
	if (chunk_ok(m)) {
		kr_pm_flush(&pool->pm, pool->pm.base + pa, P);
		kr_pm_flush(&pool->pm, pool->pm.base + pb, P);
		return 1;
	}
	kr_pm_copy(&pool->pm, pool->pm.base + pa, old_a, P);
	kr_pm_copy(&pool->pm, pool->pm.base + pb, old_b, P);
	return 0;
}

int kr_scrub_chunk_records(kr_pool *pool)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	if (!(h->ro_compat & KR_FEAT_RO_META_CSUM))
		return KR_OK;
	int repaired = 0;
	for (uint32_t z = 0; z < h->nzones; z++)
		for (uint32_t i = 0; i < h->chunks_per_zone; i++) {
			uint64_t off = h->heap_off + z * h->zone_size + (uint64_t)i * sizeof(struct kr_chunk_meta);
			const struct kr_chunk_meta *m = (const void *)(pool->pm.base + off);
			if (chunk_ok(m))
				continue;
			/* A record may straddle two pages: try each, then both (two pages damaged at
			 * once, in two columns, is still one fault per column). */
			uint64_t last = off + sizeof(*m) - 1;
			if (!rebuild_if(pool, off, chunk_ok_v, m) && !rebuild_if(pool, last, chunk_ok_v, m) &&
			    !rebuild_both(pool, off, last, m))
				return KR_CORRUPT(KR_E_CORRUPT_META, off,
						  "chunk record %u of zone %u fails its checksum and "
						  "cannot be rebuilt",
						  i, z);
			pool->csum_repairs++;
			repaired = 1;
		}
	return repaired ? kr_pm_fence(&pool->pm) : KR_OK;
}
