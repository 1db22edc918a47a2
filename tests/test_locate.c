/*
 * test_locate.c - kr_pool_locate against a geometry computed independently of the library:
 * the pool header's fields are read from the file at the offsets docs/FORMAT.md gives
 * (ftutil.c), and each expectation (area, zone, row, column, parity byte, twin) is worked out
 * here from those numbers.
 *
 * Steps: create a pool of 4 data rows, commit a small, a medium and a large object (the
 * last an extent of several chunks) and free a fourth. Then:
 *   - named offsets: both header copies, both control pages, a primary and a replica lane
 *     byte, zone metadata, data bytes in rows 0 and 2, a parity byte, bytes inside, at the
 *     header of and just past each object, the freed object's bytes;
 *   - every page of the pool (first and last byte): kind agrees with kr_pool_page_kind and
 *     with the documented layout, zone/row/column with the header's geometry, the parity
 *     byte lies in the parity row at the same offset in its row;
 *   - errors: an offset at and past the end, a NULL pool, a NULL result, a wrong struct_size.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ftutil.h"
#include "testutil.h"

#define P FT_PAGE

static struct ft_geom g;
static kr_pool *pool;

/* The documented layout (docs/FORMAT.md), page by page. */
static int expected_kind(uint64_t off, int replica)
{
	uint64_t heap_end = g.heap_off + (uint64_t)g.nzones * g.zone_size;
	uint64_t lanes = (uint64_t)g.nlanes * g.lane_bytes;
	if (off < P || off >= g.pool_size - P)
		return KR_PAGE_HEADER;
	if (off / P == g.ctl_off / P || off / P == g.ctl_replica_off / P)
		return KR_PAGE_CONTROL;
	if (off >= g.lanes_off && off < g.lanes_off + lanes)
		return KR_PAGE_LANE;
	if (off >= g.lanes_replica_off && off < g.lanes_replica_off + lanes)
		return replica ? KR_PAGE_LANE_REPLICA : KR_PAGE_UNUSED;
	if (off < g.heap_off || off >= heap_end)
		return KR_PAGE_UNUSED;
	uint64_t zoff = (off - g.heap_off) % g.zone_size;
	if (zoff >= (uint64_t)g.rows * g.row_size)
		return KR_PAGE_PARITY;
	return zoff < (uint64_t)g.zone_meta_pages * P ? KR_PAGE_ZONE_META : KR_PAGE_DATA;
}

static uint64_t expected_twin(uint64_t off, int kind)
{
	switch (kind) {
	case KR_PAGE_HEADER:
		return off < P ? g.pool_size - P + off : off - (g.pool_size - P);
	case KR_PAGE_CONTROL:
		return off < g.ctl_replica_off ? off - g.ctl_off + g.ctl_replica_off
					       : off - g.ctl_replica_off + g.ctl_off;
	case KR_PAGE_LANE:
		return off - g.lanes_off + g.lanes_replica_off;
	case KR_PAGE_LANE_REPLICA:
		return off - g.lanes_replica_off + g.lanes_off;
	}
	return 0;
}

/* Locates off and checks everything but the object against the expectations above. */
static struct kr_location check(uint64_t off, int replica, const char *what)
{
	struct kr_location w = KR_LOCATION_INIT;
	int rc = kr_pool_locate(pool, off, &w);
	TU_ASSERT(rc == KR_OK, "%s (0x%llx): %s", what, (unsigned long long)off, kr_errmsg());
	int kind = expected_kind(off, replica);
	TU_ASSERT(w.kind == kind && w.kind == kr_pool_page_kind(pool, off),
		  "%s (0x%llx): kind %d, want %d", what, (unsigned long long)off, w.kind, kind);
	TU_ASSERT(w.page == off / P * P, "%s: page 0x%llx", what, (unsigned long long)w.page);
	uint64_t twin = (kind == KR_PAGE_LANE && !replica) ? 0 : expected_twin(off, kind);
	TU_ASSERT(w.twin == twin, "%s (0x%llx): twin 0x%llx, want 0x%llx", what,
		  (unsigned long long)off, (unsigned long long)w.twin, (unsigned long long)twin);
	int in_zone = kind == KR_PAGE_ZONE_META || kind == KR_PAGE_DATA || kind == KR_PAGE_PARITY;
	TU_ASSERT(w.in_zone == in_zone, "%s: in_zone %d", what, w.in_zone);
	if (in_zone) {
		uint32_t z, row, col;
		ft_page_pos(&g, off, &z, &row, &col);
		uint64_t parity = ft_page_off(&g, z, g.rows, col) + off % P;
		TU_ASSERT(w.zone == z && w.row == row && w.column == col,
			  "%s (0x%llx): zone %u row %u column %u, want %u %u %u", what,
			  (unsigned long long)off, w.zone, w.row, w.column, z, row, col);
		TU_ASSERT(w.parity == parity, "%s (0x%llx): parity 0x%llx, want 0x%llx", what,
			  (unsigned long long)off, (unsigned long long)w.parity,
			  (unsigned long long)parity);
	} else {
		TU_ASSERT(!w.zone && !w.row && !w.column && !w.parity, "%s: zone fields set", what);
	}
	return w;
}

static void check_object(uint64_t off, kr_oid oid, uint64_t size, int replica, const char *what)
{
	struct kr_location w = check(off, replica, what);
	TU_ASSERT(w.object == oid && w.object_size == size,
		  "%s (0x%llx): object 0x%llx of %llu bytes, want 0x%llx of %llu", what,
		  (unsigned long long)off, (unsigned long long)w.object,
		  (unsigned long long)w.object_size, (unsigned long long)oid, (unsigned long long)size);
}

static kr_oid alloc(size_t size)
{
	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 1, &oid));
	TU_OK(kr_tx_commit(tx));
	return oid;
}

int main(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "locate");
	TU_OK(tu_create(path, 16 << 20, 4, 2, 0, &pool));
	uint8_t hdr[256];
	tu_pread(path, hdr, sizeof(hdr), 0);
	ft_geom_load(&g, hdr);
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	int replica = (st.features & KR_FEAT_LOG_REPLICA) != 0;
	TU_ASSERT(g.rows == 4 && g.zone_size == 5 * g.row_size, "geometry: %u rows", g.rows);

	const size_t sizes[3] = {64, 5000, 5 * 256 * 1024 + 100};
	kr_oid oids[3];
	for (int i = 0; i < 3; i++)
		oids[i] = alloc(sizes[i]);
	kr_oid gone = alloc(200);
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, gone));
	TU_OK(kr_tx_commit(tx));

	/* Named offsets. */
	check_object(0, 0, 0, replica, "header A");
	check_object(g.pool_size - 1, 0, 0, replica, "header B, last byte");
	check_object(g.ctl_off + 100, 0, 0, replica, "control A");
	check_object(g.ctl_replica_off + 100, 0, 0, replica, "control B");
	check_object(g.lanes_off + P + 7, 0, 0, replica, "lane");
	check_object(g.lanes_replica_off + 7, 0, 0, replica, "lane replica");
	check_object(g.heap_off + 3, 0, 0, replica, "zone metadata");
	check_object(ft_page_off(&g, 0, 2, 3) + 11, 0, 0, replica, "row 2, column 3");
	struct kr_location w = check(ft_page_off(&g, 0, g.rows, 5) + 17, replica, "parity row");
	TU_ASSERT(w.row == g.rows && w.parity == ft_page_off(&g, 0, g.rows, 5) + 17,
		  "a parity byte is its own parity");
	for (int i = 0; i < 3; i++) {
		check_object(oids[i], oids[i], sizes[i], replica, "object start");
		check_object(oids[i] + sizes[i] - 1, oids[i], sizes[i], replica, "object end");
		check_object(oids[i] - 16, oids[i], sizes[i], replica, "object header");
	}
	/* The large object's extent spans chunks: its bytes deep inside it find the head. */
	check_object(oids[2] + 3 * 256 * 1024, oids[2], sizes[2], replica, "extent body");
	check_object(gone, 0, 0, replica, "freed object");

	/* Every page, first and last byte. */
	for (uint64_t off = 0; off < g.pool_size; off += P) {
		check(off, replica, "page sweep");
		check(off + P - 1, replica, "page sweep, last byte");
	}

	/* Errors. */
	w = (struct kr_location)KR_LOCATION_INIT;
	TU_ASSERT(kr_pool_locate(pool, g.pool_size, &w) == KR_E_MISUSE_ARG, "offset = pool size");
	TU_ASSERT(kr_pool_locate(pool, UINT64_MAX, &w) == KR_E_MISUSE_ARG, "offset UINT64_MAX");
	TU_ASSERT(kr_pool_locate(NULL, 0, &w) == KR_E_MISUSE_ARG, "NULL pool");
	TU_ASSERT(kr_pool_locate(pool, 0, NULL) == KR_E_MISUSE_ARG, "NULL result");
	w.struct_size = 0;
	TU_ASSERT(kr_pool_locate(pool, 0, &w) == KR_E_MISUSE_ARG, "struct_size 0");
	w.struct_size = sizeof(w) + 8;
	TU_ASSERT(kr_pool_locate(pool, 0, &w) == KR_E_MISUSE_ARG, "struct_size too large");

	TU_OK(kr_pool_close(pool));
	printf("test_locate: %llu pages located (%u rows, zone of %llu bytes): PASS\n",
	       (unsigned long long)(g.pool_size / P), g.rows, (unsigned long long)g.zone_size);
	TU_END_CHECK_ALL("test_locate");
	return 0;
}
