/*
 * pool.c - pool files: geometry, creation, opening (with recovery), closing.
 *
 * Design
 *
 *   A pool's geometry is a pure function of four numbers: pool_size, rows, nlanes and
 *   lane_pages (layout_compute). The header stores the derived fields too, so a reader
 *   can check them: open recomputes the geometry and refuses a header whose derived fields
 *   disagree, which keeps a damaged or forged header from steering any pointer arithmetic.
 *
 *   States of a pool file:
 *
 *     (no file) --kr_pool_create--> OPEN --kr_pool_close--> CLEAN
 *     CLEAN --kr_pool_open: no scan, mark open--> OPEN
 *     OPEN --crash--> DIRTY --kr_pool_open: kr_log_recover, mark open--> OPEN
 *
 *   Invariants
 *   1. The clean flag is set only after every transaction is durable and durable_seq
 *      covers them all (kr_log_mark_clean); it is cleared, durably, before the first
 *      transaction of a session can write anything (kr_log_mark_open).
 *   2. Both header copies are identical and never change after creation; the header is
 *      written last at creation, its magic number last of all, so a crash while creating
 *      leaves a file that is refused as "not a pool", never a half-made pool.
 *   3. The file is fully allocated at creation (posix_fallocate), so a store to the mapping
 *      can never fault for lack of space later.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csum.h"
#include "debug.h"
#include "err.h"
#include "fault.h"
#include "pool_state.h"
#include "repair.h"
#include "scrub.h"
#include "stale.h"
#include "tx.h"

#define P KR_PAGE_SIZE

/* ---------------------------------------------------------------------------------------
 * Geometry
 * ------------------------------------------------------------------------------------- */
static int layout_compute(struct kr_pool_hdr *h)
{
	if (h->pool_size < KR_MIN_POOL_SIZE || h->pool_size > KR_MAX_POOL_SIZE || h->pool_size % P)
		return kr_err_set(KR_E_FORMAT_GEOMETRY,
				  "pool size %llu: must be a multiple of 4096 between %llu and %llu",
				  (unsigned long long)h->pool_size, (unsigned long long)KR_MIN_POOL_SIZE,
				  (unsigned long long)KR_MAX_POOL_SIZE);
	if (h->rows < KR_MIN_ROWS || h->rows > KR_MAX_ROWS)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "rows %u: must be %u..%u", h->rows, KR_MIN_ROWS,
				  KR_MAX_ROWS);
	if (h->nlanes < 1 || h->nlanes > KR_MAX_NLANES)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "lanes %u: must be 1..%u", h->nlanes,
				  KR_MAX_NLANES);
	if (h->lane_pages < KR_MIN_LANE_PAGES || h->lane_pages > KR_MAX_LANE_PAGES)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "lane of %u KiB: must be %u..%u KiB",
				  h->lane_pages * 4, KR_MIN_LANE_PAGES * 4, (unsigned)(KR_MAX_LANE_PAGES * 4));
	uint64_t pages = h->pool_size / P;
	uint64_t lane_bytes = (uint64_t)h->nlanes * h->lane_pages * P;
	uint64_t fixed = 4 + 2 * (uint64_t)h->nlanes * h->lane_pages;
	if (fixed >= pages)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "lanes take %llu of %llu pages",
				  (unsigned long long)fixed, (unsigned long long)pages);
	uint64_t heap_pages = pages - fixed;
	uint64_t max_row_pages = KR_MAX_ZONE_DATA_PAGES / h->rows;
	uint64_t max_zone_pages = (h->rows + 1) * max_row_pages;
	uint64_t nzones = (heap_pages + max_zone_pages - 1) / max_zone_pages;
	uint64_t row_pages = heap_pages / nzones / (h->rows + 1);
	if (row_pages == 0)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "heap of %llu pages cannot hold %u rows",
				  (unsigned long long)heap_pages, h->rows + 1);
	uint64_t data_pages = h->rows * row_pages;
	uint64_t cpz = data_pages / KR_CHUNK_PAGES, meta = 0;
	while (cpz > 0) {
		meta = (cpz * sizeof(struct kr_chunk_meta) + P - 1) / P;
		if (meta + cpz * KR_CHUNK_PAGES <= data_pages)
			break;
		cpz--;
	}
	if (cpz == 0)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "a zone of %llu data pages holds no chunk",
				  (unsigned long long)data_pages);
	h->page_size = P;
	h->lanes_off = 2 * P;
	h->ctl_off = P;
	h->heap_off = h->lanes_off + lane_bytes;
	h->nzones = (uint32_t)nzones;
	h->row_pages = (uint32_t)row_pages;
	h->zone_meta_pages = (uint32_t)meta;
	h->chunk_pages = KR_CHUNK_PAGES;
	h->chunks_per_zone = (uint32_t)cpz;
	h->zone_size = kr_geom_zone_size(h->rows, row_pages);
	h->lanes_replica_off = h->heap_off + nzones * h->zone_size;
	h->ctl_replica_off = h->pool_size - 2 * P;
	if (h->lanes_replica_off - h->lanes_off < KR_MIN_REPLICA_DISTANCE)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "log replica only %llu bytes from its primary",
				  (unsigned long long)(h->lanes_replica_off - h->lanes_off));
	return KR_OK;
}

static uint32_t hdr_crc(const struct kr_pool_hdr *h)
{
	return kr_crc32c(h, offsetof(struct kr_pool_hdr, crc));
}

/* Checks one header copy. Order matters for the error a user sees: not a pool, then too
 * new, then damaged, then inconsistent. */
static int hdr_check(const struct kr_pool_hdr *h, const char *path)
{
	if (memcmp(h->magic, KR_MAGIC, sizeof(h->magic)) != 0)
		return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin pool (no magic)", path);
	if (h->version > KR_FORMAT_VERSION || (h->incompat & ~KR_FEAT_INCOMPAT_KNOWN) ||
	    (h->ro_compat & ~KR_FEAT_RO_COMPAT_KNOWN))
		return kr_err_set(KR_E_FORMAT_VERSION,
				  "%s: format version %u (incompat 0x%x, ro_compat 0x%x); this build "
				  "reads version %u",
				  path, h->version, h->incompat, h->ro_compat, KR_FORMAT_VERSION);
	if (hdr_crc(h) != h->crc)
		return kr_err_set(KR_E_CORRUPT_HEADER, "%s: pool header checksum mismatch", path);
	if (h->version != KR_FORMAT_VERSION || h->hdr_size != sizeof(*h))
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: header version %u size %u", path,
				  h->version, h->hdr_size);
	for (size_t i = 0; i < sizeof(h->reserved); i++)
		if (h->reserved[i])
			return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: reserved header byte %zu set", path, i);
	struct kr_pool_hdr want;
	memset(&want, 0, sizeof(want));
	want.pool_size = h->pool_size;
	want.rows = h->rows;
	want.nlanes = h->nlanes;
	want.lane_pages = h->lane_pages;
	int rc = layout_compute(&want);
	if (rc)
		return rc;
	if (h->page_size != want.page_size || h->lanes_off != want.lanes_off ||
	    h->lanes_replica_off != want.lanes_replica_off || h->ctl_off != want.ctl_off ||
	    h->ctl_replica_off != want.ctl_replica_off || h->heap_off != want.heap_off ||
	    h->nzones != want.nzones || h->row_pages != want.row_pages ||
	    h->zone_meta_pages != want.zone_meta_pages || h->chunk_pages != want.chunk_pages ||
	    h->chunks_per_zone != want.chunks_per_zone || h->zone_size != want.zone_size)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: header geometry is inconsistent", path);
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Open / create
 * ------------------------------------------------------------------------------------- */
static void pool_free(kr_pool *pool)
{
	kr_scrubber_free(pool);
	kr_stale_free(pool);
	kr_pool_media_detach(pool);
	kr_tx_shared_free(pool);
	kr_heap_fini(&pool->heap);
	kr_log_fini(&pool->log);
	kr_redund_fini(&pool->redund);
	kr_pm_unmap(&pool->pm);
	kr_debug_free(pool->debug);
	kr_poison_free(pool);
	if (pool->pm.fd >= 0)
		close(pool->pm.fd);
	free(pool->path);
	free(pool);
}

/* Maps the file and brings up the log and heap from a validated header. */
static int pool_start(kr_pool *pool, unsigned flags)
{
	struct kr_pool_hdr *h = &pool->hdr;
	pool->g = kr_geom_of(h);
	int rc = kr_pm_map(&pool->pm, pool->pm.fd, h->pool_size, flags, pool->path);
	if (rc)
		return rc;
	char *base = pool->pm.base;
	struct kr_log_geom g = {
		.lanes = base + h->lanes_off,
		.replica = (h->ro_compat & KR_FEAT_RO_LOG_REPLICA) ? base + h->lanes_replica_off : NULL,
		.nlanes = h->nlanes,
		.lane_pages = h->lane_pages,
		.ctl = {(struct kr_log_line *)(base + h->ctl_off) + KR_CTL_LOG_LINE,
			(struct kr_log_line *)(base + h->ctl_replica_off) + KR_CTL_LOG_LINE},
		/* Records may target the heap and the two root lines, nothing else. */
		.valid_lo = {h->heap_off, h->ctl_off, h->ctl_replica_off},
		.valid_hi = {kr_geom_heap_end(&pool->g),
			     h->ctl_off + KR_LINE_SIZE, h->ctl_replica_off + KR_LINE_SIZE},
		.spill = !!(h->incompat & KR_FEAT_INCOMPAT_LOG_SPILL),
	};
	pool->root[0] = (struct kr_root_line *)(base + h->ctl_off) + KR_CTL_ROOT_LINE;
	pool->root[1] = (struct kr_root_line *)(base + h->ctl_replica_off) + KR_CTL_ROOT_LINE;
	kr_redund_init(&pool->redund, &pool->pm, h);
	if ((rc = kr_log_init(&pool->log, &pool->pm, &g)))
		return rc;
	if ((rc = kr_tx_shared_new(pool)))
		return rc;
	pool->repair_object = kr_scrub_object;
	kr_redund_hooks(&pool->redund, &pool->log.hooks);
	pool->redund.parity.wait_begin = kr_log_suspend;
	pool->redund.parity.wait_end = kr_log_unsuspend;
	if ((rc = kr_heap_init(&pool->heap, &pool->pm, &pool->log, h)))
		return rc;
	if (pool->pm.view != pool->pm.base) { /* the debug mode's read-only view is up */
		if ((rc = kr_debug_new(&pool->debug)) != KR_OK)
			return rc;
		pool->heap.quarantine = KR_HEAP_QUARANTINE;
		pool->heap.released = kr_debug_unfreed;
	}
	/* The fresh frontier a clean close left; cleared by kr_log_mark_open, so a crash in
	 * this session leaves none to trust. A read-only pool allocates nothing. */
	uint64_t fresh_word = (h->ro_compat & KR_FEAT_RO_FRESH) && !(flags & KR_OPEN_READONLY)
				      ? kr_log_fresh_word(&pool->log)
				      : 0;
	if (kr_log_is_clean(&pool->log)) {
		rc = kr_log_start_clean(&pool->log);
		if (rc == KR_OK)
			rc = kr_log_mark_open(&pool->log);
	} else {
		pool->recovered = 1;
		rc = kr_log_recover(&pool->log, &pool->recovery);
	}
	if (rc)
		return rc;
	/* Marked columns are known before any repair, which must not rebuild from them. */
	if ((rc = kr_stale_new(pool)))
		return rc;
	/* Repairs, once the log is settled: pages the platform reports lost, header copies,
	 * allocator records (the heap must not load from damaged ones). */
	if ((rc = kr_pool_repair_listed(pool)))
		return rc;
	struct kr_copies_tally opened = {0}; /* repaired here and counted in csum_repairs */
	if ((rc = kr_scrub_header_copies(pool, 1, &opened)))
		return rc;
	if ((rc = kr_scrub_chunk_records(pool)))
		return rc;
	if ((rc = kr_heap_load(&pool->heap)))
		return rc;
	kr_heap_set_fresh(&pool->heap, fresh_word);
	if ((rc = kr_stale_recover(pool)))
		return rc;
	if ((rc = kr_scrub_root_lines(pool, 1, &opened)))
		return rc;
	uint64_t root = pool->root[0]->root_oid;
	struct kr_block b;
	if (root && kr_heap_lookup(&pool->heap, root, &b) != KR_OK)
		return KR_CORRUPT(KR_E_CORRUPT_META, h->ctl_off, "root oid 0x%llx is not a live object",
				  (unsigned long long)root);
	return kr_pool_media_attach(pool);
}

static kr_pool *pool_alloc(const char *path)
{
	kr_pool *pool = kr_calloc_aligned(_Alignof(kr_pool), 1, sizeof(*pool));
	if (!pool || !(pool->path = kr_strdup(path))) {
		free(pool);
		kr_err_set(KR_E_NOMEM, "pool handle");
		return NULL;
	}
	pool->pm.fd = -1;
	if (kr_scrubber_new(pool) != KR_OK || kr_poison_new(pool) != KR_OK) {
		pool_free(pool);
		return NULL;
	}
	return pool;
}

int kr_pool_open(const char *path, unsigned flags, kr_pool **out)
{
	if (!path || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_open: NULL argument");
	kr_pool *pool = pool_alloc(path);
	if (!pool)
		return KR_E_NOMEM;
	int rc;
	struct stat st;
	/* A reader shares the lock with other readers, never with a writer: inspecting a pool
	 * while it changes would report damage that is only a commit in flight. */
	int ro = (flags & KR_OPEN_READONLY) != 0;
	if ((pool->pm.fd = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC)) < 0) {
		rc = kr_err_errno(KR_E_IO_OPEN, "%s", path);
		goto fail;
	}
	if (flock(pool->pm.fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? kr_err_set(KR_E_IO_BUSY, "%s: pool is already open%s", path,
						       ro ? " for writing" : "")
					  : kr_err_errno(KR_E_IO_OPEN, "%s: flock", path);
		goto fail;
	}
	if (fstat(pool->pm.fd, &st) != 0) {
		rc = kr_err_errno(KR_E_IO_OPEN, "%s: stat", path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a regular file", path);
		goto fail;
	}
	/* Copy A at the front; copy B at the end of the file (= pool_size when intact). */
	struct kr_pool_hdr ha, hb;
	memset(&ha, 0, sizeof(ha));
	memset(&hb, 0, sizeof(hb));
	ssize_t na = pread(pool->pm.fd, &ha, sizeof(ha), 0);
	rc = na == (ssize_t)sizeof(ha) ? hdr_check(&ha, path)
				       : kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: too short for a pool", path);
	if (rc == KR_OK) {
		pool->hdr = ha;
	} else if (st.st_size >= 2 * P) {
		int rca = rc;
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", kr_errmsg());
		ssize_t nb = pread(pool->pm.fd, &hb, sizeof(hb), st.st_size - P);
		rc = nb == (ssize_t)sizeof(hb) ? hdr_check(&hb, path) : KR_E_FORMAT_NOT_POOL;
		if (rc == KR_OK && hb.pool_size == (uint64_t)st.st_size)
			pool->hdr = hb;
		else if (rca == KR_E_FORMAT_NOT_POOL && rc == KR_E_FORMAT_NOT_POOL)
			rc = kr_err_set(rca, "%s", msg);
		else if (rca != KR_E_FORMAT_NOT_POOL)
			rc = kr_err_set(rca, "%s", msg); /* copy A's own complaint is the informative one */
		else if (rc == KR_OK)
			rc = kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: header copies disagree", path);
	}
	if (rc)
		goto fail;
	if ((uint64_t)st.st_size < pool->hdr.pool_size) {
		rc = kr_err_set(KR_E_FORMAT_TRUNCATED, "%s: file has %lld bytes, pool needs %llu", path,
				(long long)st.st_size, (unsigned long long)pool->hdr.pool_size);
		goto fail;
	}
	if ((rc = pool_start(pool, flags)))
		goto fail;
	*out = pool;
	return KR_OK;
fail:
	pool_free(pool);
	return rc;
}

/* Allocates the file's blocks, reporting progress; on tmpfs and DAX this is the zeroing. */
static int pool_allocate(int fd, uint64_t size, const struct kr_create_opts *o, const char *path)
{
	const uint64_t step = 64ull << 20;
	for (uint64_t done = 0; done < size;) {
		uint64_t n = size - done < step ? size - done : step;
		int e = kr_fallocate(fd, (off_t)done, (off_t)n);
		if (e) {
			errno = e;
			return kr_err_errno(KR_E_IO, "%s: allocating %llu bytes", path,
					    (unsigned long long)size);
		}
		done += n;
		if (o->progress)
			o->progress(o->progress_ctx, done, size);
	}
	return KR_OK;
}

int kr_pool_create(const char *path, const struct kr_create_opts *o, kr_pool **out)
{
	if (!path || !o || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_create: NULL argument");
	if (kr_opts_size_check(o->struct_size, sizeof(*o), "kr_create_opts"))
		return KR_E_MISUSE_ARG;
	struct kr_pool_hdr h;
	memset(&h, 0, sizeof(h));
	h.pool_size = o->size & ~(uint64_t)(P - 1);
	h.rows = o->rows ? o->rows : KR_DEFAULT_ROWS;
	h.nlanes = o->nlanes ? o->nlanes : KR_DEFAULT_NLANES;
	if (o->lane_kib % 4)
		return kr_err_set(KR_E_MISUSE_ARG, "lane of %u KiB: must be a multiple of 4 KiB",
				  o->lane_kib);
	if (o->protection > KR_PROTECT_MLP)
		return kr_err_set(KR_E_MISUSE_ARG, "unknown protection level %u", o->protection);
	if (o->lane_kib) {
		h.lane_pages = o->lane_kib / 4;
	} else {
		/* Default lanes: the two copies together take at most 1/8 of the pool. */
		uint64_t lp = h.pool_size / P / (16 * (uint64_t)h.nlanes);
		h.lane_pages = (uint32_t)(lp < KR_MIN_LANE_PAGES ? KR_MIN_LANE_PAGES
				 : lp > KR_DEFAULT_LANE_PAGES ? KR_DEFAULT_LANE_PAGES : lp);
	}
	int rc = layout_compute(&h);
	if (rc)
		return kr_err_recode(KR_E_MISUSE_ARG); /* a bad request, not a bad file */
	memcpy(h.magic, KR_MAGIC, sizeof(h.magic));
	h.version = KR_FORMAT_VERSION;
	h.hdr_size = sizeof(h);
	/* The redundancy asked for. A new pool is all zero, which every kind accepts as
	 * consistent (zero CRCs of zero records and objects, zero parity of zero rows). */
	static const uint32_t level_feats[] = {
		[KR_PROTECT_FULL] = KR_FEAT_RO_COMPAT_KNOWN,
		[KR_PROTECT_NONE] = 0,
		[KR_PROTECT_ML] = KR_FEAT_RO_LOG_REPLICA | KR_FEAT_RO_META_CSUM,
		[KR_PROTECT_MLP] = KR_FEAT_RO_LOG_REPLICA | KR_FEAT_RO_META_CSUM | KR_FEAT_RO_PARITY,
	};
	/* The fresh frontier is not redundancy: every level keeps it. */
	h.ro_compat = level_feats[o->protection] | KR_FEAT_RO_FRESH;
	h.incompat = KR_FEAT_INCOMPAT_FINE_CLASSES | KR_FEAT_INCOMPAT_LOG_SPILL | KR_FEAT_INCOMPAT_STALE_MAP;
	h.create_time = (uint64_t)time(NULL);
	if (getrandom(h.uuid, sizeof(h.uuid), 0) != (ssize_t)sizeof(h.uuid))
		return kr_err_errno(KR_E_IO, "getrandom");
	h.crc = hdr_crc(&h);

	kr_pool *pool = pool_alloc(path);
	if (!pool)
		return KR_E_NOMEM;
	pool->hdr = h;
	int created = 0;
	pool->pm.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (pool->pm.fd < 0) {
		rc = kr_err_errno(errno == EEXIST ? KR_E_IO_EXISTS : KR_E_IO_OPEN, "%s", path);
		goto fail;
	}
	created = 1;
	if (flock(pool->pm.fd, LOCK_EX | LOCK_NB) != 0) {
		rc = kr_err_errno(KR_E_IO_BUSY, "%s: flock", path);
		goto fail;
	}
	if ((rc = pool_allocate(pool->pm.fd, h.pool_size, o, path)))
		goto fail;
	/* This mapping writes a few pages of format and is dropped; pool_start's maps the pool
	 * for use, prefaulted if asked. */
	if ((rc = kr_pm_map(&pool->pm, pool->pm.fd, h.pool_size, o->flags & ~KR_OPEN_PREFAULT, path)))
		goto fail;
	/* The file is all zero: an empty heap, empty lanes, no root. Then durable_seq 0 and
	 * "clean", and the header last (invariant 2). */
	char *base = pool->pm.base;
	struct kr_log_line *ctl[2] = {(struct kr_log_line *)(base + h.ctl_off) + KR_CTL_LOG_LINE,
				      (struct kr_log_line *)(base + h.ctl_replica_off) + KR_CTL_LOG_LINE};
	kr_log_format(&pool->pm, ctl, (h.ro_compat & KR_FEAT_RO_FRESH) ? 1 : 0); /* every chunk fresh */
	/* The header's magic number is the commit point: a crash before a magic is durable
	 * leaves a file refused as "not a pool"; once one is, its copy is whole. */
	void *copy[2] = {base + h.pool_size - P, base}; /* the replica's magic first */
	if ((rc = kr_pm_write_header(&pool->pm, copy, 2, &h, sizeof(h))))
		goto fail;
	if (fsync(pool->pm.fd) != 0) {
		rc = kr_err_errno(KR_E_IO_SYNC, "%s: fsync", path);
		goto fail;
	}
	kr_pm_unmap(&pool->pm);
	if ((rc = pool_start(pool, o->flags)))
		goto fail;
	*out = pool;
	return KR_OK;
fail:
	pool_free(pool);
	if (created)
		unlink(path);
	return rc;
}

int kr_pool_close(kr_pool *pool)
{
	if (!pool)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_close: pool is NULL");
	uint32_t open = kr_log_lanes_held(&pool->log);
	if (open)
		return kr_err_set(KR_E_MISUSE_STATE, "%s: %u transaction(s) still open", pool->path, open);
	int rc = KR_OK;
	kr_scrub_stop(pool);
	kr_stale_stop(pool);
	if (!atomic_load(&pool->failed))
		rc = kr_stale_clean(pool); /* a clean pool has no marks */
	if (rc == KR_OK && !atomic_load(&pool->failed))
		rc = kr_log_mark_clean(&pool->log, (pool->hdr.ro_compat & KR_FEAT_RO_FRESH)
							   ? kr_heap_fresh_word(&pool->heap)
							   : 0);
	pool_free(pool);
	return rc;
}
