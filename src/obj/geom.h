/*
 * geom.h - where things are in a pool: the one place that turns a pool offset into an area,
 * a zone, a row, a page column and the parity that covers it, and back.
 *
 * The geometry
 *
 *   A pool is, in file order (layout.h has the byte-exact table): header copy A, control
 *   page A, the primary redo-log lanes, the heap, the replica lanes, control page B, header
 *   copy B. Everything that is not the heap has a twin at a fixed distance.
 *
 *   The heap is nzones zones of zone_size bytes. A zone is rows + 1 rows of row_size
 *   (= row_pages pages) bytes each: rows data rows, then one parity row. Byte x of the parity
 *   row is the XOR of byte x of every data row, so the data bytes at zone offset
 *   r * row_size + x (r = 0 .. rows-1) and the parity byte at rows * row_size + x form one
 *   stripe, and the pages holding them one page column: any one lost page of a column is
 *   rebuilt from the others. Columns are numbered across the whole heap, zone by zone:
 *   column = zone * row_pages + page index within the row. The first zone_meta_pages pages
 *   of data row 0 hold the zone's chunk records; chunks follow and ignore row boundaries.
 *
 * Every function is a few integer operations on a struct kr_geom filled once from the
 * validated header (kr_geom_of); zone parity (parity.c) keeps one too.
 * Functions taking a heap offset require kr_geom_in_heap(g, off).
 */
#ifndef KR_GEOM_H
#define KR_GEOM_H

#include <stdint.h>

#include "layout.h"

struct kr_geom {
	uint64_t pool_size, heap_off, zone_size, row_size, lanes_off, lanes_replica_off,
		lanes_bytes, ctl_off, ctl_replica_off;
	uint32_t nzones, rows, row_pages, zone_meta_pages;
};

/* The size of a zone of `rows` data rows of row_pages pages, its parity row included
 * (pool.c's layout_compute chooses the numbers; the deep check audits a header against this). */
static inline uint64_t kr_geom_zone_size(uint32_t rows, uint64_t row_pages)
{
	return ((uint64_t)rows + 1) * row_pages * KR_PAGE_SIZE;
}

static inline struct kr_geom kr_geom_of(const struct kr_pool_hdr *h)
{
	struct kr_geom g = {
		.pool_size = h->pool_size,
		.heap_off = h->heap_off,
		.zone_size = h->zone_size,
		.row_size = (uint64_t)h->row_pages * KR_PAGE_SIZE,
		.lanes_off = h->lanes_off,
		.lanes_replica_off = h->lanes_replica_off,
		.lanes_bytes = (uint64_t)h->nlanes * h->lane_pages * KR_PAGE_SIZE,
		.ctl_off = h->ctl_off,
		.ctl_replica_off = h->ctl_replica_off,
		.nzones = h->nzones,
		.rows = h->rows,
		.row_pages = h->row_pages,
		.zone_meta_pages = h->zone_meta_pages,
	};
	return g;
}

/* Bytes of the whole heap, of its data rows, of its parity rows; its page columns. */
static inline uint64_t kr_geom_heap_bytes(const struct kr_geom *g)
{
	return (uint64_t)g->nzones * g->zone_size;
}

static inline uint64_t kr_geom_columns(const struct kr_geom *g)
{
	return (uint64_t)g->nzones * g->row_pages;
}

/* Bytes of one page column: a page in each data row and its parity page. */
static inline uint64_t kr_geom_column_bytes(const struct kr_geom *g)
{
	return ((uint64_t)g->rows + 1) * KR_PAGE_SIZE;
}

static inline uint64_t kr_geom_data_bytes(const struct kr_geom *g)
{
	return (uint64_t)g->nzones * g->rows * g->row_size;
}

static inline uint64_t kr_geom_parity_bytes(const struct kr_geom *g)
{
	return (uint64_t)g->nzones * g->row_size;
}

/* The first byte past the last zone. */
static inline uint64_t kr_geom_heap_end(const struct kr_geom *g)
{
	return g->heap_off + kr_geom_heap_bytes(g);
}

static inline int kr_geom_in_heap(const struct kr_geom *g, uint64_t off)
{
	return off >= g->heap_off && off < kr_geom_heap_end(g);
}

static inline uint32_t kr_geom_zone(const struct kr_geom *g, uint64_t off)
{
	return (uint32_t)((off - g->heap_off) / g->zone_size);
}

static inline uint64_t kr_geom_zone_start(const struct kr_geom *g, uint32_t zone)
{
	return g->heap_off + (uint64_t)zone * g->zone_size;
}

/* Offset of off inside its zone. */
static inline uint64_t kr_geom_in_zone(const struct kr_geom *g, uint64_t off)
{
	return (off - g->heap_off) % g->zone_size;
}

/* Row of off: 0 .. rows-1 for a data row, rows for the parity row. */
static inline uint32_t kr_geom_row(const struct kr_geom *g, uint64_t off)
{
	return (uint32_t)(kr_geom_in_zone(g, off) / g->row_size);
}

/* Offset of off inside its row (the same for every byte of its stripe). */
static inline uint64_t kr_geom_in_row(const struct kr_geom *g, uint64_t off)
{
	return kr_geom_in_zone(g, off) % g->row_size;
}

/* 1 if off lies in a data row (an offset anywhere in the pool). */
static inline int kr_geom_in_data(const struct kr_geom *g, uint64_t off)
{
	return kr_geom_in_heap(g, off) && kr_geom_row(g, off) < g->rows;
}

/* 1 if [off, off + len) lies inside the data rows of one zone. */
static inline int kr_geom_covers(const struct kr_geom *g, uint64_t off, uint64_t len)
{
	return kr_geom_in_heap(g, off) &&
	       kr_geom_in_zone(g, off) + len <= (uint64_t)g->rows * g->row_size;
}

/* 1 if off lies in the chunk records at the start of its zone's data rows. */
static inline int kr_geom_in_zone_meta(const struct kr_geom *g, uint64_t off)
{
	return kr_geom_in_heap(g, off) &&
	       kr_geom_in_zone(g, off) < (uint64_t)g->zone_meta_pages * KR_PAGE_SIZE;
}

/* Page column of a heap offset, numbered across the heap. */
static inline uint64_t kr_geom_column(const struct kr_geom *g, uint64_t off)
{
	return (uint64_t)kr_geom_zone(g, off) * g->row_pages + kr_geom_in_row(g, off) / KR_PAGE_SIZE;
}

/* Offset of byte `in_row` of row `row` of zone `zone`. */
static inline uint64_t kr_geom_at(const struct kr_geom *g, uint32_t zone, uint32_t row,
				  uint64_t in_row)
{
	return kr_geom_zone_start(g, zone) + (uint64_t)row * g->row_size + in_row;
}

/* Offset of the page of column col in row `row` (rows: its parity page). */
static inline uint64_t kr_geom_column_page(const struct kr_geom *g, uint64_t col, uint32_t row)
{
	return kr_geom_at(g, (uint32_t)(col / g->row_pages), row,
			  col % g->row_pages * KR_PAGE_SIZE);
}

/* The parity byte of off's stripe (off itself for a parity byte). */
static inline uint64_t kr_geom_parity_of(const struct kr_geom *g, uint64_t off)
{
	return kr_geom_at(g, kr_geom_zone(g, off), g->rows, kr_geom_in_row(g, off));
}

/* The byte of off's stripe in row `row`. */
static inline uint64_t kr_geom_in_stripe(const struct kr_geom *g, uint64_t off, uint32_t row)
{
	return kr_geom_at(g, kr_geom_zone(g, off), row, kr_geom_in_row(g, off));
}

/* Pages outside the heap. kr_geom_twin: the same byte in the other copy of a header,
 * control or lane page (0 for a heap or unused offset, which have none). The lane replica
 * is only kept when the pool says so (KR_FEAT_RO_LOG_REPLICA); the caller checks. */
static inline int kr_geom_in_lanes(const struct kr_geom *g, uint64_t off)
{
	return off >= g->lanes_off && off < g->lanes_off + g->lanes_bytes;
}

static inline int kr_geom_in_lane_replica(const struct kr_geom *g, uint64_t off)
{
	return off >= g->lanes_replica_off && off < g->lanes_replica_off + g->lanes_bytes;
}

static inline int kr_geom_in_header(const struct kr_geom *g, uint64_t off)
{
	return off < KR_PAGE_SIZE || (off >= g->pool_size - KR_PAGE_SIZE && off < g->pool_size);
}

static inline int kr_geom_in_control(const struct kr_geom *g, uint64_t off)
{
	return (off >= g->ctl_off && off < g->ctl_off + KR_PAGE_SIZE) ||
	       (off >= g->ctl_replica_off && off < g->ctl_replica_off + KR_PAGE_SIZE);
}

static inline uint64_t kr_geom_twin(const struct kr_geom *g, uint64_t off)
{
	uint64_t in_page = off % KR_PAGE_SIZE;
	if (kr_geom_in_header(g, off))
		return off < KR_PAGE_SIZE ? g->pool_size - KR_PAGE_SIZE + in_page : in_page;
	if (kr_geom_in_control(g, off))
		return off >= g->ctl_replica_off ? off - g->ctl_replica_off + g->ctl_off
						 : off - g->ctl_off + g->ctl_replica_off;
	if (kr_geom_in_lanes(g, off))
		return off - g->lanes_off + g->lanes_replica_off;
	if (kr_geom_in_lane_replica(g, off))
		return off - g->lanes_replica_off + g->lanes_off;
	return 0;
}

#endif
