/*
 * map.h - where things lie in a pool, as far as the public API tells, and the picture that
 * `keratin map` draws of it. Which zone, row and page column an offset falls in is what
 * kr_pool_locate() says; the extent of the heap and its rows come from kr_pool_stat() and
 * kr_pool_page_kind(), so the tool keeps working whatever the library does to its layout
 * internals; `keratin inject` uses it to choose and describe the pages it damages.
 */
#ifndef KR_TOOLS_MAP_H
#define KR_TOOLS_MAP_H

#include <stdint.h>
#include <stdio.h>

#include "keratin.h"

#define MAP_PAGE 4096u

struct pool_geom {
	uint64_t pool_size;
	uint64_t heap_off, heap_end; /* the zones: [heap_off, heap_end) */
	uint64_t zone_size, row_size, row_pages;
	uint32_t nzones;
	uint32_t rows; /* data rows per zone; row number `rows` is the zone's parity row */
};

/* Fills g for an open pool. KR_OK, or the library's error code (its message is set). */
int geom_load(kr_pool *pool, struct pool_geom *g);

/* "data page, zone 0 row 41 column 3", "lane replica page", ...: what holds offset off
 * (kr_pool_locate). */
const char *geom_describe(kr_pool *pool, uint64_t off, char *buf, size_t len);

/* The name of an enum kr_page_kind value: "header", "zone metadata", ... */
const char *geom_kind_name(int kind);

/* The offset a check report names as the first damage: the first damaged object or chunk
 * record, or, for damage that only parity sees (free space, a parity page) and that names
 * no item, the lowest page reported through on_page. check_note_page() keeps that page in
 * *lowest as offset + 1 (0: none yet); call it from the on_page callback. */
void check_note_page(uint64_t *lowest, uint64_t off);
uint64_t check_first_bad(const struct kr_check_report *rep, uint64_t lowest);

/* The offsets listed in PATH.badblocks, keratin.h's stand-in for the platform's bad-block
 * list (one offset per line). The open repairs those pages and may empty the list, so it
 * is read before the open. Returns how many (0 without a list); free(*offs) afterwards. */
size_t badblocks_read(const char *path, uint64_t **offs);

/* The picture of a pool. map_collect() walks an open pool once (the layout, one pass over
 * the objects, one kr_pool_check without repair) and keeps only what is drawn, so the pool
 * can be closed before printing. The pages in repaired[] are drawn as repaired (those the
 * open rebuilt from the bad-block list). Returns NULL with *rc set (a library error, or
 * KR_E_NOMEM). */
struct pool_map;
struct pool_map *map_collect(kr_pool *pool, const char *path, const uint64_t *repaired,
			     size_t nrepaired, int *rc);
/* The text picture: one line per zone row, one for the pages outside the heap, a legend
 * and a summary. ANSI colours if color is set. */
void map_print(const struct pool_map *m, FILE *out, int color);
/* The same picture as SVG, written by hand to f, which it closes. 0, or -1 with errno set. */
int map_write_svg(const struct pool_map *m, FILE *f);
/* What the check inside map_collect() returned: KR_OK or KR_E_CORRUPT. */
int map_check_result(const struct pool_map *m);
void map_free(struct pool_map *m);

#endif
