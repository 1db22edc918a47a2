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

struct scrub {
	kr_pool *pool;
	struct kr_check_report *rep;
	int repair;
	uint64_t ncols;         /* nzones * row_pages page columns */
	uint8_t *bad_col;       /* 1 = parity disagrees (set M), 2 = claimed by an item */
	uint32_t *claim_row;    /* the row that claimed the column */
	uint64_t row_size;
};

static void report_page(struct scrub *s, uint64_t off, int state)
{
	if (s->rep->on_page)
		s->rep->on_page(s->rep->ctx, off, state);
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

/* Step 1: every page column of every zone. */
static void scan_parity(struct scrub *s)
{
	for (uint64_t c = 0; c < s->ncols; c++) {
		s->rep->columns++;
		if (!kr_parity_column_ok(&s->pool->redund.parity, col_data_off(s, c))) {
			s->bad_col[c] = 1;
			s->rep->bad_columns++;
		}
	}
}

static void rebuild_page(struct scrub *s, uint64_t page)
{
	uint8_t buf[P];
	struct kr_pm *pm = &s->pool->pm;
	kr_parity_rebuild(&s->pool->redund.parity, page, P, buf);
	kr_pm_copy(pm, pm->base + page, buf, P);
	kr_pm_flush(pm, pm->base + page, P);
}

/* Step 3 for one damaged item [off, off+len), whose soundness ok(item) tells. Its pages in
 * disagreeing columns are the candidates. A column where the item has a single candidate
 * is rebuilt at once. An item larger than a row may have several pages in one column; then
 * each is tried (rebuilt, checked, put back if that did not make the item sound), since
 * rebuilding the wrong one would replace good bytes. Returns how many columns the item
 * claims, or -1 if it cannot be repaired (another row's item claims one of them: two faults
 * in one column; or more than one column is ambiguous). */
#define MAX_CAND 64

static int rebuild_item(struct scrub *s, uint64_t off, uint64_t len, int (*ok)(const void *),
			const void *item)
{
	uint64_t cand[MAX_CAND];
	uint64_t ccol[MAX_CAND];
	uint32_t crow[MAX_CAND];
	int n = 0;
	for (uint64_t page = off & ~(uint64_t)(P - 1); page < off + len; page += P) {
		if (!kr_parity_covers(&s->pool->redund.parity, page, P))
			continue;
		uint32_t row;
		uint64_t c = col_index(s, page, &row);
		if (s->bad_col[c] == 0)
			continue;
		if (s->bad_col[c] == 2 && s->claim_row[c] != row)
			return -1; /* another row's damaged item needs this column too */
		if (n == MAX_CAND)
			return -1;
		cand[n] = page;
		ccol[n] = c;
		crow[n++] = row;
	}
	/* Columns with one candidate, and at most one column with several. */
	int claimed = 0;
	uint64_t amb = UINT64_MAX;
	for (int i = 0; i < n; i++) {
		int same = 0;
		for (int j = 0; j < n; j++)
			same += ccol[j] == ccol[i];
		if (same > 1) {
			if (amb != UINT64_MAX && amb != ccol[i])
				return -1;
			amb = ccol[i];
			continue;
		}
		if (s->bad_col[ccol[i]] != 2) {
			s->bad_col[ccol[i]] = 2;
			s->claim_row[ccol[i]] = crow[i];
			report_page(s, cand[i], s->repair ? KR_PAGE_REPAIRED : KR_PAGE_DAMAGED);
			if (s->repair) {
				rebuild_page(s, cand[i]);
				s->rep->repaired_pages++;
			}
		}
		claimed++;
	}
	if (amb == UINT64_MAX)
		return claimed;
	if (!s->repair)
		return claimed + 1; /* repairable if one of the candidates is the culprit */
	for (int i = 0; i < n; i++) {
		if (ccol[i] != amb)
			continue;
		uint8_t save[P];
		char *home = s->pool->pm.base + cand[i];
		memcpy(save, home, P);
		rebuild_page(s, cand[i]);
		if (ok(item)) {
			s->bad_col[amb] = 2;
			s->claim_row[amb] = crow[i];
			report_page(s, cand[i], KR_PAGE_REPAIRED);
			s->rep->repaired_pages++;
			return claimed + 1;
		}
		kr_pm_copy(&s->pool->pm, home, save, P);
		kr_pm_flush(&s->pool->pm, home, P);
	}
	return -1;
}

/* A damaged item is repairable if it claims some disagreeing column and none twice; when
 * repairing, only if it checks out afterwards. */
static void judge_item(struct scrub *s, uint64_t off, int claimed, int ok_after)
{
	if (claimed <= 0 || (s->repair && !ok_after)) {
		s->rep->unrepairable++;
		report_page(s, off & ~(uint64_t)(P - 1), KR_PAGE_UNREPAIRABLE);
	}
}

static int chunk_ok(const struct kr_chunk_meta *m) { return kr_redund_chunk_crc(m) == m->crc; }
static int chunk_ok_v(const void *m) { return chunk_ok(m); }

/* Step 2+3 for chunk records. */
static void scan_chunks(struct scrub *s)
{
	const struct kr_pool_hdr *h = &s->pool->hdr;
	if (!(h->ro_compat & KR_FEAT_RO_META_CSUM))
		return;
	for (uint32_t z = 0; z < h->nzones; z++)
		for (uint32_t i = 0; i < h->chunks_per_zone; i++) {
			uint64_t off = h->heap_off + z * h->zone_size + (uint64_t)i * sizeof(struct kr_chunk_meta);
			const struct kr_chunk_meta *m = (const void *)(s->pool->pm.base + off);
			s->rep->chunks++;
			if (chunk_ok(m))
				continue;
			s->rep->bad_chunks++;
			if (!s->rep->first_bad_off)
				s->rep->first_bad_off = off;
			int n = rebuild_item(s, off, sizeof(*m), chunk_ok_v, m);
			judge_item(s, off, n, chunk_ok(m));
		}
}

/* An object is sound if its header fits its block and its payload matches the CRC. */
static int object_ok(kr_pool *pool, const struct kr_block *b)
{
	const struct kr_obj_hdr *hdr = (const void *)(pool->pm.base + b->off);
	if (hdr->size == 0 || hdr->size > b->bytes - sizeof(*hdr))
		return 0;
	if (!(pool->hdr.ro_compat & KR_FEAT_RO_OBJ_CSUM))
		return 1;
	return kr_crc32c(hdr + 1, hdr->size) == hdr->crc;
}

struct object_ref {
	kr_pool *pool;
	const struct kr_block *b;
};

static int object_ok_v(const void *r)
{
	const struct object_ref *ref = r;
	return object_ok(ref->pool, ref->b);
}

static void scan_objects(struct scrub *s)
{
	kr_pool *pool = s->pool;
	for (kr_oid oid = kr_heap_next(&pool->heap, 0); oid; oid = kr_heap_next(&pool->heap, oid)) {
		struct kr_block b;
		if (kr_heap_lookup(&pool->heap, oid, &b) != KR_OK)
			continue;
		s->rep->objects++;
		if (object_ok(pool, &b))
			continue;
		s->rep->bad_objects++;
		if (!s->rep->first_bad_off)
			s->rep->first_bad_off = oid;
		/* The header may be the damaged part, so the whole block is suspect. */
		struct object_ref ref = {pool, &b};
		int n = rebuild_item(s, b.off, b.bytes, object_ok_v, &ref);
		judge_item(s, b.off, n, object_ok(pool, &b));
	}
}

/* Step 4: disagreeing columns no damaged item explains. */
static void settle_columns(struct scrub *s)
{
	for (uint64_t c = 0; c < s->ncols; c++) {
		if (s->bad_col[c] != 1)
			continue;
		report_page(s, kr_parity_offset(&s->pool->redund.parity, col_data_off(s, c)),
			    s->repair ? KR_PAGE_REPAIRED : KR_PAGE_DAMAGED);
		if (s->repair) {
			kr_parity_recompute(&s->pool->redund.parity, col_data_off(s, c), P);
			s->rep->recomputed_columns++;
		}
	}
}

/* One pass over the pool. The caller keeps commits away (no open transaction, or the
 * commit gate closed). */
static int scrub_run(kr_pool *pool, unsigned flags, struct kr_check_report *rep)
{
	void (*on_page)(void *, uint64_t, int) = rep->on_page;
	void *ctx = rep->ctx;
	memset(rep, 0, sizeof(*rep));
	rep->on_page = on_page;
	rep->ctx = ctx;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	const struct kr_pool_hdr *h = &pool->hdr;
	struct scrub s = {.pool = pool, .rep = rep, .repair = (flags & KR_CHECK_REPAIR) != 0};
	s.row_size = (uint64_t)h->row_pages * P;
	s.ncols = (uint64_t)h->nzones * h->row_pages;
	s.bad_col = calloc(s.ncols, 1);
	s.claim_row = calloc(s.ncols, sizeof(uint32_t));
	int rc = KR_OK;
	if (!s.bad_col || !s.claim_row)
		rc = kr_err_set(KR_E_NOMEM, "check tables");
	if (rc == KR_OK) {
		if (h->ro_compat & KR_FEAT_RO_PARITY)
			scan_parity(&s);
		scan_chunks(&s);
		scan_objects(&s);
		settle_columns(&s);
		if (s.repair)
			rc = kr_pm_fence(&pool->pm);
		if (s.repair)
			pool->csum_repairs += rep->repaired_pages;
	}
	free(s.bad_col);
	free(s.claim_row);
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
	if (atomic_load(&pool->open_txs) != 0)
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
		if (kr_log_sync(&pool->log, NULL) == KR_OK)
			scrub_run(pool, KR_CHECK_REPAIR, &rep);
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

int kr_pool_page_kind(kr_pool *pool, uint64_t off)
{
	if (!pool || off >= pool->hdr.pool_size)
		return kr_err_set(KR_E_MISUSE_ARG, "offset beyond the pool");
	const struct kr_pool_hdr *h = &pool->hdr;
	off &= ~(uint64_t)(P - 1);
	uint64_t lanes = (uint64_t)h->nlanes * h->lane_pages * P;
	uint64_t heap_end = h->heap_off + (uint64_t)h->nzones * h->zone_size;
	if (off == 0 || off == h->pool_size - P)
		return KR_PAGE_HEADER;
	if (off == h->ctl_off || off == h->ctl_replica_off)
		return KR_PAGE_CONTROL;
	if (off >= h->lanes_off && off < h->lanes_off + lanes)
		return KR_PAGE_LANE;
	if (off >= h->lanes_replica_off && off < h->lanes_replica_off + lanes)
		return KR_PAGE_LANE_REPLICA;
	if (off < h->heap_off || off >= heap_end)
		return KR_PAGE_UNUSED;
	uint64_t zoff = (off - h->heap_off) % h->zone_size;
	uint64_t row_size = (uint64_t)h->row_pages * P;
	if (zoff >= (uint64_t)h->rows * row_size)
		return KR_PAGE_PARITY;
	if (zoff < (uint64_t)h->zone_meta_pages * P)
		return KR_PAGE_ZONE_META;
	return KR_PAGE_DATA;
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
			/* A record may straddle two pages: try each. */
			if (!rebuild_if(pool, off, chunk_ok_v, m) &&
			    !rebuild_if(pool, off + sizeof(*m) - 1, chunk_ok_v, m))
				return KR_CORRUPT(KR_E_CORRUPT_META, off,
						  "chunk record %u of zone %u fails its checksum and "
						  "cannot be rebuilt",
						  i, z);
			pool->csum_repairs++;
			repaired = 1;
		}
	return repaired ? kr_pm_fence(&pool->pm) : KR_OK;
}
