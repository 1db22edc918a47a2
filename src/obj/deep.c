/*
 * deep.c - the deep check of a pool (kr_pool_check_deep, `keratin check --deep`): the
 * ordinary verification pass, then every invariant that ties the pool's parts together.
 *
 * The ordinary pass (scrub.c) judges each item by its own redundancy: checksums, parity
 * columns, the twin of a replicated line. It cannot see an allocator record that is well
 * formed and correctly checksummed but wrong: a bit set with no object behind it, an extent
 * the DRAM indexes do not know (a leak until the next open), counters that drifted. The
 * deep check adds, on a quiet pool and without writing a byte:
 *
 *   1. the geometry: the header's areas tile the file exactly, and the space audit
 *      pool_size = used + free + run slack + parity + metadata, each term computed from
 *      its own source (chunk records for the first three, the layout for the rest);
 *   2. the allocator (heap.c, kr_heap_audit): every chunk record against the DRAM chunk
 *      table and run bitmaps, every allocated block against the object header in it;
 *   3. the log (log.c, kr_log_audit): control copies equal and current, lane heads and
 *      tails consistent with the transactions they hold, lanes equal to their replicas.
 *
 * Findings are counted in the report, the first one described; KR_E_CORRUPT if any.
 */
#include <string.h>

#include "err.h"
#include "pool_state.h"

#define P KR_PAGE_SIZE

/* Area 1: the header's areas in file order, and the metadata bytes they add up to. */
static uint64_t audit_geometry(const struct kr_pool_hdr *h, struct kr_audit *a)
{
	uint64_t lane_bytes = (uint64_t)h->nlanes * h->lane_pages * P;
	uint64_t data_pages = (uint64_t)h->rows * h->row_pages;
	uint64_t chunk_pages = (uint64_t)h->chunks_per_zone * h->chunk_pages;
	struct kr_geom g = kr_geom_of(h);
	uint64_t heap_end = kr_geom_heap_end(&g);
	if (h->ctl_off != P || h->lanes_off != 2 * P || h->heap_off != h->lanes_off + lane_bytes ||
	    h->lanes_replica_off != heap_end ||
	    h->ctl_replica_off < h->lanes_replica_off + lane_bytes ||
	    h->ctl_replica_off != h->pool_size - 2 * P)
		kr_audit_note(a, 0, "pool areas do not follow each other in file order");
	if (h->zone_size != kr_geom_zone_size(h->rows, h->row_pages) || h->chunk_pages != KR_CHUNK_PAGES ||
	    (uint64_t)h->zone_meta_pages * P < (uint64_t)h->chunks_per_zone * sizeof(struct kr_chunk_meta) ||
	    h->zone_meta_pages + chunk_pages > data_pages)
		kr_audit_note(a, h->heap_off, "zone geometry does not hold its chunks and records");
	uint64_t headers = 2 * P, control = 2 * P, lanes = 2 * lane_bytes;
	uint64_t zone_meta = (uint64_t)h->nzones * (data_pages - chunk_pages) * P;
	uint64_t unused = h->ctl_replica_off - h->lanes_replica_off - lane_bytes;
	return headers + control + lanes + zone_meta + unused;
}

static void fill_space(kr_pool *pool, const struct kr_heap_space *sp, uint64_t meta,
		       struct kr_deep_report *rep, struct kr_audit *a)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	uint64_t chunk_bytes = (uint64_t)h->nzones * h->chunks_per_zone * KR_CHUNK_SIZE;
	rep->pool_size = h->pool_size;
	rep->used_bytes = sp->used;
	rep->free_bytes = sp->free;
	rep->slack_bytes = sp->slack;
	rep->parity_bytes = kr_geom_parity_bytes(&pool->g);
	rep->meta_bytes = meta;
	rep->nobjects = sp->nobjects;
	rep->free_chunks = sp->free_chunks;
	rep->run_chunks = sp->run_chunks;
	rep->extent_chunks = sp->extent_chunks;
	if (sp->used + sp->free + sp->slack != chunk_bytes ||
	    sp->free_chunks + sp->run_chunks + sp->extent_chunks != chunk_bytes / KR_CHUNK_SIZE)
		kr_audit_note(a, h->heap_off, "chunk records account for %llu of %llu chunk bytes",
			      (unsigned long long)(sp->used + sp->free + sp->slack),
			      (unsigned long long)chunk_bytes);
	if (chunk_bytes + rep->parity_bytes + meta != h->pool_size)
		kr_audit_note(a, 0, "space audit: %llu chunk + %llu parity + %llu metadata bytes != "
			      "pool size %llu", (unsigned long long)chunk_bytes,
			      (unsigned long long)rep->parity_bytes, (unsigned long long)meta,
			      (unsigned long long)h->pool_size);
}

int kr_pool_check_deep(kr_pool *pool, struct kr_deep_report *rep)
{
	if (!pool || !rep)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_pool_check_deep: NULL argument");
	int rc = kr_opts_size_check(rep->struct_size, sizeof(*rep), "kr_deep_report");
	if (rc)
		return rc;
	struct kr_deep_report caller = *rep; /* keep the callbacks of the ordinary pass */
	memset(rep, 0, sizeof(*rep));
	rep->struct_size = caller.struct_size;
	rep->check = caller.check;
	int check_rc = kr_pool_check(pool, 0, &rep->check);
	if (check_rc && KR_ERR_CLASS(check_rc) != KR_E_CORRUPT)
		return check_rc;
	if (kr_log_lanes_held(&pool->log) != 0)
		return kr_err_set(KR_E_MISUSE_STATE, "kr_pool_check_deep: transactions are open");
	/* The ordinary pass made every commit durable: deferred frees are reusable now, so
	 * DRAM and media must agree exactly. (DRAM only; the pool is not written.) */
	kr_heap_release_all(&pool->heap);

	struct kr_audit a = {0};
	struct kr_heap_space sp;
	uint64_t meta = audit_geometry(&pool->hdr, &a);
	kr_heap_audit(&pool->heap, &sp, &a);
	fill_space(pool, &sp, meta, rep, &a);
	kr_log_audit(&pool->log, &rep->log_lines, &a);
	rep->lanes = pool->log.nlanes;
	rep->problems = a.problems;
	rep->first_problem_off = a.first_off;
	memcpy(rep->first_problem, a.first, sizeof(rep->first_problem));
	if (a.problems)
		return KR_CORRUPT(KR_E_CORRUPT, a.first_off,
				  "deep check: %llu invariant violation%s; first: %s",
				  (unsigned long long)a.problems, a.problems == 1 ? "" : "s", a.first);
	return check_rc; /* the ordinary pass's finding, with its message */
}
