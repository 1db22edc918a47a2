/*
 * fs_zone_row.c - zone parity's row arithmetic, the part fs_data.c builds on: where a row's
 * parity page is, a strip rebuilt from the rest of its row, the parity's delta when a page
 * of the row changes, a row checked or its parity recomputed.
 *
 * The layout (fs_zone.c says why): row r of a zone-parity pool is data pages r, r + R,
 * r + 2R, ... (R = zone_rows), and its parity page, at parity_off + r * P, is their XOR,
 * free pages included. What keeps a row right across crashes (the zone intent) and what
 * repairs a row through the verified read of its pages is in fs_zone.c.
 *
 * A delta is a read-modify-write of the parity page, and writers of different files run at
 * once, yet it takes no lock: the writers' pages are all inside the one window they hold,
 * whose rows are distinct (fs_zone.c invariant 3). Whole-row reads (rebuild, check, reseal)
 * and in-place patches run under the exclusive lock.
 */
#include <isa-l/raid.h>
#include <string.h>

#include "invariant.h"
#include "simd.h"
#include "fs.h"

uint64_t krfs_zone_parity(const struct kr_fs *fs, uint64_t pg)
{
	return fs->sb.parity_off + krfs_zone_row(fs, pg) * P;
}

/* Pointers to bytes [off, off + len) of every data page of row r but `skip` (UINT64_MAX:
 * none), then of the parity page; their count. v has room for KRFS_ZONE_MAX_COLUMNS + 2. */
static int row_vectors(const struct kr_fs *fs, uint64_t r, uint64_t skip, unsigned off, void **v)
{
	int k = 0;
	for (uint64_t pg = r; pg < fs->sb.data_pages; pg += fs->zone_rows)
		if (pg != skip)
			v[k++] = krfs_ptr(fs, krfs_data_off(fs, pg) + off);
	v[k++] = krfs_ptr(fs, fs->sb.parity_off + r * P + off);
	return k;
}

/* out (DRAM, 64-byte aligned) = XOR of the k vectors of v (v has room for one more). */
static void xor_into(void **v, int k, size_t len, void *out)
{
	if (k == 1) {
		memcpy(out, v[0], len);
		return;
	}
	v[k] = out;
	xor_gen(k + 1, (int)len, v);
	kr_simd_done();
}

void krfs_zone_rebuild_strip(struct kr_fs *fs, uint64_t pg, unsigned strip, void *out)
{
	void *v[KRFS_ZONE_MAX_COLUMNS + 2];
	int k = row_vectors(fs, krfs_zone_row(fs, pg), pg, strip * KRFS_STRIP, v);
	xor_into(v, k, KRFS_STRIP, out);
}

bool krfs_zone_row_ok(struct kr_fs *fs, uint64_t r)
{
	void *v[KRFS_ZONE_MAX_COLUMNS + 2];
	_Alignas(64) uint8_t x[P];
	static const uint8_t zero[P];
	int k = row_vectors(fs, r, UINT64_MAX, 0, v);
	xor_into(v, k, P, x);
	return memcmp(x, zero, P) == 0;
}

void krfs_zone_reseal(struct kr_fs *fs, uint64_t r)
{
	void *v[KRFS_ZONE_MAX_COLUMNS + 2];
	int k = row_vectors(fs, r, UINT64_MAX, 0, v); /* the data pages, then the parity page */
	if (k == 2)
		kr_pm_copy(&fs->pm, v[1], v[0], P);
	else
		kr_pm_xor_gen(&fs->pm, k, P, v);
	kr_pm_flush(&fs->pm, v[k - 1], P);
}

void krfs_zone_update(struct kr_fs *fs, uint64_t pg, const void *src)
{
	/* The window held (no one moves it meanwhile) is what keeps concurrent deltas apart. */
	KR_INVARIANT("fs_zone.c", 3, pg >= fs->zone_first && pg - fs->zone_first < fs->zone_len);
	void *par = krfs_ptr(fs, krfs_zone_parity(fs, pg));
	kr_pm_xor2(&fs->pm, par, krfs_ptr(fs, krfs_data_off(fs, pg)), src, P);
	kr_pm_flush(&fs->pm, par, P);
}

void krfs_zone_patch(struct kr_fs *fs, uint64_t pg, unsigned strip, const void *old, const void *neu)
{
	void *par = krfs_ptr(fs, krfs_zone_parity(fs, pg) + strip * KRFS_STRIP);
	kr_pm_xor2(&fs->pm, par, old, neu, KRFS_STRIP);
	kr_pm_flush(&fs->pm, par, KRFS_STRIP);
}
