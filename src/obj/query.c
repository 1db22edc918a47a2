/*
 * query.c - an open pool's error state and what it tells about itself: usable or failed,
 * writable or read-only, its statistics, and where an offset is (kr_pool_page_kind,
 * kr_pool_locate, through geom.h). Only reads; the open, the repair paths and the check
 * all call here, and nothing here calls them back.
 */
#include <string.h>

#include "err.h"
#include "geom.h"
#include "query.h"

#define P KR_PAGE_SIZE

int kr_pool_usable(kr_pool *pool)
{
	if (atomic_load_explicit(&pool->failed, memory_order_relaxed))
		return kr_err_set(KR_E_POOL_FAILED, "%s: pool is in the error state; reopen it",
				  pool->path);
	return KR_OK;
}

void kr_pool_fail(kr_pool *pool, int err)
{
	atomic_store(&pool->failed, err ? err : KR_E_POOL_FAILED);
}

int kr_pool_writable(kr_pool *pool, const char *what)
{
	if (!pool->pm.readonly)
		return KR_OK;
	return kr_err_set(KR_E_MISUSE_STATE, "%s: %s is open read-only (KR_OPEN_READONLY)", what,
			  pool->path);
}

int kr_pool_stat(kr_pool *pool, struct kr_pool_stat *st)
{
	if (!pool || !st)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_stat: NULL argument");
	const struct kr_pool_hdr *h = &pool->hdr;
	memset(st, 0, sizeof(*st));
	st->pool_size = h->pool_size;
	st->mode = pool->pm.mode;
	st->nzones = h->nzones;
	st->rows = h->rows;
	st->nlanes = h->nlanes;
	st->row_size = pool->g.row_size;
	st->zone_size = h->zone_size;
	st->lane_size = (uint64_t)h->lane_pages * P;
	st->heap_size = kr_geom_data_bytes(&pool->g);
	st->parity_bytes = kr_geom_parity_bytes(&pool->g);
	uint64_t chunk_bytes = (uint64_t)h->nzones * h->chunks_per_zone * KR_CHUNK_SIZE;
	st->meta_bytes = h->pool_size - st->parity_bytes - chunk_bytes;
	kr_heap_counters(&pool->heap, &st->used_bytes, &st->free_bytes, &st->nobjects);
	st->max_alloc = pool->heap.max_alloc;
	memcpy(st->uuid, h->uuid, sizeof(st->uuid));
	st->recovered = pool->recovered;
	st->replayed_txs = pool->recovery.replayed;
	st->discarded_txs = pool->recovery.discarded;
	st->media_repairs = pool->media_repairs;
	st->csum_repairs = pool->csum_repairs;
	st->scrub_passes = pool->scrub_passes;
	st->last_repair_ns = pool->last_repair_ns;
	st->features = h->ro_compat & KR_FEAT_RO_COMPAT_KNOWN & ~KR_FEAT_RO_FRESH; /* redundancy only */
	st->readonly = pool->pm.readonly;
	st->stale_map = (pool->hdr.incompat & KR_FEAT_INCOMPAT_STALE_MAP) != 0;
	st->stale_columns = pool->stale_columns;
	st->stale_cleaned = pool->stale_cleaned;
	return KR_OK;
}

int kr_pool_page_kind(kr_pool *pool, uint64_t off)
{
	if (!pool || off >= pool->hdr.pool_size)
		return kr_err_set(KR_E_MISUSE_ARG, "offset beyond the pool");
	const struct kr_geom *g = &pool->g;
	if (kr_geom_in_header(g, off))
		return KR_PAGE_HEADER;
	if (kr_geom_in_control(g, off))
		return KR_PAGE_CONTROL;
	if (kr_geom_in_lanes(g, off))
		return KR_PAGE_LANE;
	if (kr_geom_in_lane_replica(g, off))
		return (pool->hdr.ro_compat & KR_FEAT_RO_LOG_REPLICA) ? KR_PAGE_LANE_REPLICA
								   : KR_PAGE_UNUSED;
	if (!kr_geom_in_heap(g, off))
		return KR_PAGE_UNUSED;
	if (!kr_geom_in_data(g, off))
		return KR_PAGE_PARITY;
	return kr_geom_in_zone_meta(g, off) ? KR_PAGE_ZONE_META : KR_PAGE_DATA;
}

int kr_pool_locate(kr_pool *pool, uint64_t off, struct kr_location *where)
{
	if (!pool || !where)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_locate: NULL argument");
	int rc = kr_opts_size_check(where->struct_size, sizeof(*where), "struct kr_location");
	if (rc)
		return rc;
	int kind = kr_pool_page_kind(pool, off);
	if (kind < 0)
		return kind;
	const struct kr_geom *g = &pool->g;
	memset(where, 0, sizeof(*where));
	where->struct_size = sizeof(*where);
	where->kind = kind;
	where->page = off & ~(uint64_t)(P - 1);
	if (kind != KR_PAGE_LANE || (pool->hdr.ro_compat & KR_FEAT_RO_LOG_REPLICA))
		where->twin = kr_geom_twin(g, off);
	where->in_zone = kr_geom_in_heap(g, off);
	if (where->in_zone) {
		where->zone = kr_geom_zone(g, off);
		where->row = kr_geom_row(g, off);
		where->column = (uint32_t)(kr_geom_in_row(g, off) / P);
		where->parity = kr_geom_parity_of(g, off);
	}
	struct kr_block b;
	if (kr_heap_owner(&pool->heap, off, &b)) {
		const struct kr_obj_hdr *hdr = (const void *)(pool->pm.base + b.off);
		where->object = b.off + sizeof(*hdr);
		where->object_size = hdr->size;
	}
	return KR_OK;
}

void *kr_pool_base(kr_pool *pool) { return pool ? pool->pm.base : NULL; }
size_t kr_pool_mapped_size(kr_pool *pool) { return pool ? pool->pm.size : 0; }

uint64_t kr_pool_offset(kr_pool *pool, const void *p)
{
	if (!pool)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_offset: NULL pool"), UINT64_MAX;
	uintptr_t a = (uintptr_t)p, size = pool->pm.size;
	for (int i = 0; i < 2; i++) {
		uintptr_t lo = (uintptr_t)(i ? pool->pm.view : pool->pm.base);
		if (lo && a >= lo && a - lo < size)
			return a - lo;
	}
	return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_offset: %p is in neither mapping of the pool",
			  p), UINT64_MAX;
}
