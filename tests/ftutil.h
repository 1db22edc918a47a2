/*
 * ftutil.h - helpers shared by the fault-tolerance tests (test_sweep, test_online,
 * test_scribble, test_twofaults): a small pool filled by the random workload plus a few
 * large objects, closed cleanly, with its reference model and the pristine file bytes so
 * that every damage case starts from the same image; the pool geometry read from the
 * header at the offsets docs/FORMAT.md gives (the tests use the documented format, not
 * src/obj/layout.h, so that they check the format as written down); a per-page map of what
 * kr_pool_page_kind says each page holds and whether live object bytes lie in it; and one
 * verification of a pool against the model (root, directory, every object, the live set).
 */
#ifndef KR_FTUTIL_H
#define KR_FTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"
#include "testutil.h"
#include "workload.h"

#define FT_PAGE 4096u
#define FT_NKINDS 9 /* kr_page_kind values are 1..8 */
#define FT_MAX_BIG 4

/* Geometry from the pool header (copy A), field offsets as in docs/FORMAT.md. */
struct ft_geom {
	uint64_t pool_size, lanes_off, lanes_replica_off, ctl_off, ctl_replica_off, heap_off;
	uint64_t zone_size, row_size, lane_bytes;
	uint32_t nlanes, lane_pages, nzones, rows, row_pages, zone_meta_pages, chunks_per_zone;
};
void ft_geom_load(struct ft_geom *g, const uint8_t *hdr);
/* Pool offset of page column `col` (0..row_pages-1) of row `row` (0..rows, rows = parity)
 * of zone z. */
uint64_t ft_page_off(const struct ft_geom *g, uint32_t z, uint32_t row, uint32_t col);
/* Inverse for heap offsets: zone, row (rows = the parity row) and page column. */
void ft_page_pos(const struct ft_geom *g, uint64_t off, uint32_t *z, uint32_t *row, uint32_t *col);

/* "header", "control", "lane", ... for a kr_page_kind value. */
const char *ft_kind_name(int kind);

/* A live object of the pristine pool: block header at oid - 16. */
struct ft_obj {
	kr_oid oid;
	uint64_t size;
};

/* The root object: where the directory and the large objects are. */
struct ft_root {
	uint64_t dir;
	uint64_t big[FT_MAX_BIG];
	uint64_t big_size[FT_MAX_BIG];
};

struct ft_opts {
	uint64_t size; /* pool bytes */
	uint32_t rows; /* data rows per zone */
	uint32_t nlanes;
	unsigned nslots;   /* workload directory slots */
	uint32_t max_size; /* workload object sizes are log-uniform in [8, max_size] */
	unsigned ntx;	   /* committed workload transactions */
	/* Large objects outside the workload, never changed after allocation, sized in
	 * quarters of a row's width (5 = a row and a quarter: such an object has two pages in
	 * some page columns). */
	unsigned nbig;
	unsigned big_quarters[FT_MAX_BIG];
};

struct ft_pool {
	char path[128];
	char bb_path[160]; /* PATH.badblocks, the emulated platform bad-block list */
	struct ft_opts o;
	struct wl_params p;
	kr_oid root, dir;
	struct wl_model model; /* the workload's objects, oids included */
	unsigned nbig;
	kr_oid big[FT_MAX_BIG];
	uint64_t big_size[FT_MAX_BIG];
	uint8_t *big_data[FT_MAX_BIG]; /* their content */
	struct kr_pool_stat st;
	struct ft_geom g;
	uint8_t *img; /* the pristine file */
	size_t len;
	size_t npages;
	uint8_t *kind;	     /* per page: kr_pool_page_kind of the pristine pool */
	uint8_t *live;	     /* per page: 1 if some live object's header or payload lies in it */
	struct ft_obj *objs; /* every live object of the pristine pool, in pool order */
	size_t nobjs;
};

/* Creates the pool at a fresh /dev/shm path (tag), runs the workload, adds the large
 * objects, closes it, reopens it to classify pages and list objects, closes it again and
 * keeps the file bytes. Prints a one-line summary. */
void ft_build(struct ft_pool *fp, const char *tag, const struct ft_opts *o, uint64_t seed);
void ft_free(struct ft_pool *fp);
/* Writes the pristine bytes back and removes the bad-block list. */
void ft_restore(const struct ft_pool *fp);

/* Compares an open pool with the model m (the workload's objects, oids included), the
 * large objects and the root, and checks that exactly these objects are live. Returns 0 if
 * equal, else 1 with a reason. */
int ft_verify(kr_pool *pool, const struct ft_pool *fp, const struct wl_model *m, char *why,
	      size_t whylen);

/* Index of the first object whose block [oid - 16, oid + size) ends after `off`
 * (nobjs if none); objects are sorted, so the ones overlapping [off, off+len) follow it. */
size_t ft_obj_at(const struct ft_pool *fp, uint64_t off);
/* 1 if object i's block header or payload overlaps [off, off + len). */
bool ft_obj_overlaps(const struct ft_obj *ob, uint64_t off, uint64_t len);
/* Bytes of the block holding an object of `size` bytes, its 16-byte header included: the
 * smallest size class that fits (docs/FORMAT.md, "Size classes"), else whole 32 KiB chunks. */
uint64_t ft_block_bytes(uint64_t size);

/* Formats the fields of a check report for a failure message. */
void ft_report_str(const struct kr_check_report *r, char *buf, size_t n);

#endif
