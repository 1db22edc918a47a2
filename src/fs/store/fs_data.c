/*
 * fs_data.c - file data pages: copy-on-write writes with strip checksums and parity,
 * verified reads, and repair.
 *
 * Each 4 KiB data page is a RAID-4 stripe of eight 512-byte strips. Strip s of data page pg
 * has two CRC-32C copies, at csum_a_off + 32 pg + 4 s and csum_b_off + 32 pg + 4 s (areas on
 * either side of the data), and the page has one parity strip (XOR of its eight strips) at
 * parity_off + 512 pg. A page is always written whole, into a page no committed state uses
 * (copy-on-write), so its checksums and parity are computed from the DRAM source and written
 * before the commit that makes the page visible: no parity read-modify-write, no journal.
 *
 * Read of a page: the page is copied out with each strip's CRC taken on the way
 * (kr_crc32c_copy: one pass, the CRCs are of the very bytes the caller gets), and each
 * strip's CRC is compared with both copies. Matching one copy means
 * the strip is good and the other copy is rewritten. Matching neither means the strip is
 * bad; with exactly one bad strip the page is rebuilt from parity and the other seven, the
 * result accepted only if it matches a stored CRC, and written back. Two bad strips that
 * are neighbours may be one scribble of at most 512 bytes across their boundary: then the
 * first strip's head and the second's tail are intact, and for the right split point i the
 * first strip is its own bytes before i and (parity XOR the other six XOR the second
 * strip) from i on; every i is tried and a candidate is accepted only if both strips then
 * match their CRCs. Anything else (two bad strips apart, a rebuild that matches no CRC
 * because parity is damaged too) fails the read with -EIO: the caller never sees wrong
 * bytes.
 *
 * Relaxed pools (KR_FS_RELAXED) also patch pages in place (fs_inplace.c drives it): the
 * touched strips' CRCs are replaced and the parity takes the XOR delta of old and new
 * strip, under an in-place intent that recovery reseals from (krfs_data_reseal).
 *
 * Zone-parity pools (fs_zone.c) keep no parity strip per page: a row's parity page covers
 * strip s of each of its pages with its own strip s. A write changes the row parity by
 * delta before the page is overwritten; a read rebuilds every bad strip from the row (so a
 * whole lost page is rebuilt); the parity itself is checked and scrubbed by row.
 *
 * Pools made with KR_FS_NO_DATA_CSUM keep no CRCs (reads copy, unverified); with
 * KR_FS_NO_DATA_PARITY no parity (a bad strip fails the read).
 *
 * Invariants
 *   1. A data page referenced by a committed log entry has both CRC copies and its parity
 *      strip durable and consistent with its bytes (they were fenced with the entry), as far
 *      as the pool keeps them.
 *   2. Repairs rewrite only bytes whose correct value was proven by a CRC, and fence.
 *   3. A read under the shared lock (fs_enter.c rule 3) stores nothing: where it would
 *      repair it returns KRFS_EXCL, and its caller reads again under the exclusive lock
 *      (a rebuild from a zone row reads other files' pages, which only that lock holds
 *      still).
 */
#include <isa-l/raid.h>
#include <string.h>

#include "csum.h"
#include "invariant.h"
#include "simd.h"
#include "fs.h"

static uint64_t csum_a(const struct kr_fs *fs, uint64_t pg) { return fs->sb.csum_a_off + pg * KRFS_CSUM_PER_PAGE; }
static uint64_t csum_b(const struct kr_fs *fs, uint64_t pg) { return fs->sb.csum_b_off + pg * KRFS_CSUM_PER_PAGE; }
static uint64_t parity(const struct kr_fs *fs, uint64_t pg) { return fs->sb.parity_off + pg * KRFS_STRIP; }

static void strip_crcs(const uint8_t *page, uint32_t crc[KRFS_STRIPS])
{
	for (unsigned s = 0; s < KRFS_STRIPS; s++)
		crc[s] = kr_crc32c(page + s * KRFS_STRIP, KRFS_STRIP);
}

static bool crc_ok(uint32_t c, const uint32_t *a, const uint32_t *b, unsigned s) { return c == a[s] || c == b[s]; }

static void put(struct kr_fs *fs, uint64_t off, const void *src, size_t n)
{
	kr_pm_copy(&fs->pm, krfs_ptr(fs, off), src, n);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, off), n);
}

/* A read's repair of strip s of page pg: only under the exclusive lock (invariant 3), and
 * only bytes that one of the strip's CRC copies a, b proves (invariant 2). */
static void repair_put(struct kr_fs *fs, uint64_t pg, unsigned s, const uint8_t *strip, const uint32_t *a,
		       const uint32_t *b)
{
	KR_INVARIANT("fs_data.c", 3, krfs_exclusive(fs));
	KR_INVARIANT("fs_enter.c", 3, krfs_exclusive(fs)); /* a shared holder repairs nothing */
	KR_INVARIANT("fs_data.c", 2, crc_ok(kr_crc32c(strip, KRFS_STRIP), a, b, s));
	put(fs, krfs_data_off(fs, pg) + s * KRFS_STRIP, strip, KRFS_STRIP);
}

/* The parity strip of pg from the page's bytes in src (flushed, not fenced). */
static void write_parity(struct kr_fs *fs, uint64_t pg, const void *src)
{
	void *v[KRFS_STRIPS + 1];
	for (unsigned s = 0; s < KRFS_STRIPS; s++)
		v[s] = (uint8_t *)src + s * KRFS_STRIP;
	v[KRFS_STRIPS] = krfs_ptr(fs, parity(fs, pg));
	kr_pm_xor_gen(&fs->pm, KRFS_STRIPS + 1, KRFS_STRIP, v);
	kr_pm_flush(&fs->pm, v[KRFS_STRIPS], KRFS_STRIP);
}

void krfs_data_write(struct kr_fs *fs, uint64_t pg, const void *src)
{
	uint32_t crc[KRFS_STRIPS];
	if (fs->parity && fs->zone_rows)
		krfs_zone_update(fs, pg, src); /* reads the old bytes: before they are overwritten */
	kr_pm_copy_nt(&fs->pm, krfs_ptr(fs, krfs_data_off(fs, pg)), src, P);
	if (fs->csum) {
		strip_crcs(src, crc);
		put(fs, csum_a(fs, pg), crc, sizeof(crc));
		put(fs, csum_b(fs, pg), crc, sizeof(crc));
	}
	if (fs->parity && !fs->zone_rows)
		write_parity(fs, pg, src);
}

/* Relaxed pools: bytes [lo, hi) of page pg become src's, in place. Each touched strip's CRC
 * copies get the new strip's CRC and the parity takes the delta (old strip XOR new strip), so the untouched strips stay
 * rebuildable; the old strips must verify (krfs_data_strips_ok) or the delta would carry
 * their damage into the parity. Flushed, not fenced. */
void krfs_data_patch(struct kr_fs *fs, uint64_t pg, unsigned lo, unsigned hi, const void *src)
{
	_Alignas(64) uint8_t old[KRFS_STRIP], neu[KRFS_STRIP];
	uint64_t page = krfs_data_off(fs, pg);
	for (unsigned s = lo / KRFS_STRIP; s * KRFS_STRIP < hi; s++) {
		unsigned base = s * KRFS_STRIP, a = lo > base ? lo : base;
		unsigned b = hi < base + KRFS_STRIP ? hi : base + KRFS_STRIP;
		memcpy(old, krfs_ptr(fs, page + base), KRFS_STRIP);
		memcpy(neu, old, KRFS_STRIP);
		memcpy(neu + (a - base), (const uint8_t *)src + (a - lo), b - a);
		put(fs, page + a, neu + (a - base), b - a);
		if (fs->csum) {
			uint32_t crc = kr_crc32c(neu, KRFS_STRIP);
			put(fs, csum_a(fs, pg) + 4 * s, &crc, sizeof(crc));
			put(fs, csum_b(fs, pg) + 4 * s, &crc, sizeof(crc));
		}
		if (fs->parity && fs->zone_rows) {
			krfs_zone_patch(fs, pg, s, old, neu);
		} else if (fs->parity) {
			void *par = krfs_ptr(fs, parity(fs, pg));
			kr_pm_xor2(&fs->pm, par, old, neu, KRFS_STRIP);
			kr_pm_flush(&fs->pm, par, KRFS_STRIP);
		}
	}
}

bool krfs_data_strips_ok(const struct kr_fs *fs, uint64_t pg, unsigned mask)
{
	const uint8_t *page = krfs_ptr(fs, krfs_data_off(fs, pg));
	const uint32_t *a = krfs_ptr(fs, csum_a(fs, pg)), *b = krfs_ptr(fs, csum_b(fs, pg));
	for (unsigned s = 0; s < KRFS_STRIPS && fs->csum; s++)
		if (mask & (1u << s) && !crc_ok(kr_crc32c(page + s * KRFS_STRIP, KRFS_STRIP), a, b, s))
			return false;
	return true;
}

void krfs_data_reseal(struct kr_fs *fs, uint64_t pg, unsigned mask)
{
	const uint8_t *page = krfs_ptr(fs, krfs_data_off(fs, pg));
	for (unsigned s = 0; s < KRFS_STRIPS && fs->csum; s++) {
		if (!(mask & (1u << s)))
			continue;
		uint32_t crc = kr_crc32c(page + s * KRFS_STRIP, KRFS_STRIP);
		put(fs, csum_a(fs, pg) + 4 * s, &crc, sizeof(crc));
		put(fs, csum_b(fs, pg) + 4 * s, &crc, sizeof(crc));
	}
	if (fs->parity && fs->zone_rows)
		krfs_zone_reseal(fs, krfs_zone_row(fs, pg));
	else if (fs->parity)
		write_parity(fs, pg, page);
}

/* out = XOR of parity and every strip of page except strip `skip` (DRAM only). */
static void rebuild_strip(struct kr_fs *fs, uint64_t pg, const uint8_t *page, unsigned skip, uint8_t *out)
{
	void *v[KRFS_STRIPS + 2];
	int k = 0;
	for (unsigned s = 0; s < KRFS_STRIPS; s++)
		if (s != skip)
			v[k++] = (uint8_t *)page + s * KRFS_STRIP;
	v[k++] = krfs_ptr(fs, parity(fs, pg));
	v[k++] = out;
	xor_gen(k, KRFS_STRIP, v);
	kr_simd_done();
}

/* Strips s and s + 1 of page d both fail: tries every split point of one scribble across
 * their boundary (see above). On success the two strips of d are corrected. */
static bool split_point(struct kr_fs *fs, uint64_t pg, uint8_t *d, unsigned s, const uint32_t *a,
			const uint32_t *b)
{
	_Alignas(64) uint8_t q[KRFS_STRIP], x[KRFS_STRIP], y[KRFS_STRIP];
	uint8_t *s0 = d + s * KRFS_STRIP, *s1 = s0 + KRFS_STRIP;
	/* q = strip s XOR strip s+1 as parity says: parity XOR the six others (the XOR of
	 * everything but s, XORed with the damaged s+1 taken back out). */
	rebuild_strip(fs, pg, d, s, q);
	for (unsigned k = 0; k < KRFS_STRIP; k++)
		q[k] ^= s1[k];
	for (unsigned i = 0; i <= KRFS_STRIP; i++) {
		memcpy(x, s0, i);
		for (unsigned k = i; k < KRFS_STRIP; k++)
			x[k] = q[k] ^ s1[k];
		if (!crc_ok(kr_crc32c(x, KRFS_STRIP), a, b, s))
			continue;
		for (unsigned k = 0; k < KRFS_STRIP; k++)
			y[k] = q[k] ^ x[k];
		if (crc_ok(kr_crc32c(y, KRFS_STRIP), a, b, s + 1)) {
			memcpy(s0, x, KRFS_STRIP);
			memcpy(s1, y, KRFS_STRIP);
			return true;
		}
	}
	return false;
}

static int lost(uint64_t pg, uint64_t off, const char *what)
{
	return KRFS_ERR(-EIO, KR_E_CORRUPT_OBJECT, "data page %llu (pool offset %#llx): %s",
			(unsigned long long)pg, (unsigned long long)off, what);
}

int krfs_data_read(struct kr_fs *fs, uint64_t pg, void *dst)
{
	uint8_t *d = dst;
	uint32_t crc[KRFS_STRIPS], a[KRFS_STRIPS], b[KRFS_STRIPS];
	if (!fs->csum) { /* nothing to verify against */
		memcpy(d, krfs_ptr(fs, krfs_data_off(fs, pg)), P);
		return 0;
	}
	/* The CRCs are of the bytes in d, taken as they are copied: one pass over the page. */
	kr_crc32c_copy(d, krfs_ptr(fs, krfs_data_off(fs, pg)), KRFS_STRIP, KRFS_STRIPS, crc);
	memcpy(a, krfs_ptr(fs, csum_a(fs, pg)), sizeof(a));
	memcpy(b, krfs_ptr(fs, csum_b(fs, pg)), sizeof(b));
	unsigned nbad = 0, badstrip = 0, first_bad = 0, badmask = 0;
	bool fix = false;
	const char *repaired = "data page's strip CRC copies";
	for (unsigned s = 0; s < KRFS_STRIPS; s++) {
		if (crc[s] == a[s] && crc[s] == b[s])
			continue;
		if (crc[s] == a[s] || crc[s] == b[s]) {
			a[s] = b[s] = crc[s];
			fix = true;
			continue;
		}
		if (nbad++ == 0)
			first_bad = s;
		badstrip = s;
		badmask |= 1u << s;
	}
	if (nbad && !fs->parity)
		return lost(pg, krfs_data_off(fs, pg) + first_bad * KRFS_STRIP,
			    "strip fails its checksum (the pool keeps no parity)");
	if ((nbad || fix) && !krfs_exclusive(fs))
		return KRFS_EXCL;
	for (unsigned s = first_bad; nbad && fs->zone_rows && s < KRFS_STRIPS; s++) {
		if (!(badmask & (1u << s)))
			continue;
		uint8_t *strip = d + s * KRFS_STRIP; /* d is 64-byte aligned */
		krfs_zone_rebuild_strip(fs, pg, s, strip);
		uint32_t c = kr_crc32c(strip, KRFS_STRIP);
		if (c != a[s] && c != b[s])
			return lost(pg, krfs_data_off(fs, pg) + s * KRFS_STRIP,
				    "strip fails its checksum and its zone parity row cannot rebuild it");
		repair_put(fs, pg, s, strip, a, b);
		a[s] = b[s] = c;
		if (--nbad == 0) {
			fix = true;
			repaired = "data strips rebuilt from zone parity";
		}
	}
	if (nbad == 2 && badstrip == first_bad + 1 && split_point(fs, pg, d, first_bad, a, b)) {
		for (unsigned s = first_bad; s <= badstrip; s++) {
			repair_put(fs, pg, s, d + s * KRFS_STRIP, a, b);
			a[s] = b[s] = kr_crc32c(d + s * KRFS_STRIP, KRFS_STRIP);
		}
		nbad = 0;
		fix = true;
		repaired = "data page (scribble across two strips)";
	}
	if (nbad > 1)
		return lost(pg, krfs_data_off(fs, pg), "two or more strips fail their checksums");
	if (nbad == 1) {
		_Alignas(64) uint8_t strip[KRFS_STRIP];
		rebuild_strip(fs, pg, d, badstrip, strip);
		uint32_t c = kr_crc32c(strip, KRFS_STRIP);
		if (c != a[badstrip] && c != b[badstrip])
			return lost(pg, krfs_data_off(fs, pg) + badstrip * KRFS_STRIP,
				    "strip fails its checksum and parity cannot rebuild it");
		memcpy(d + badstrip * KRFS_STRIP, strip, KRFS_STRIP);
		repair_put(fs, pg, badstrip, strip, a, b);
		a[badstrip] = b[badstrip] = c;
		fix = true;
		repaired = "data strip rebuilt from parity";
	}
	if (fix) {
		put(fs, csum_a(fs, pg), a, sizeof(a));
		put(fs, csum_b(fs, pg), b, sizeof(b));
		krfs_note_repair(fs, repaired, krfs_data_off(fs, pg));
		return krfs_fence(fs);
	}
	return 0;
}

int krfs_data_scrub(struct kr_fs *fs, uint64_t pg, void *buf)
{
	int rc = krfs_data_read(fs, pg, buf);
	if (rc || !fs->parity || fs->zone_rows) /* zone parity is scrubbed by row */
		return rc;
	_Alignas(64) uint8_t x[KRFS_STRIP];
	static const uint8_t zero[KRFS_STRIP];
	rebuild_strip(fs, pg, buf, KRFS_STRIPS, x); /* every strip and parity: zero if consistent */
	if (memcmp(x, zero, KRFS_STRIP) == 0)
		return 0;
	write_parity(fs, pg, buf);
	krfs_note_repair(fs, "parity strip recomputed", parity(fs, pg));
	return krfs_fence(fs);
}

int krfs_data_verify(struct kr_fs *fs, uint64_t pg, unsigned *csum_mismatch, bool *parity_bad)
{
	const uint8_t *d = krfs_ptr(fs, krfs_data_off(fs, pg));
	uint32_t crc[KRFS_STRIPS], a[KRFS_STRIPS], b[KRFS_STRIPS];
	memcpy(a, krfs_ptr(fs, csum_a(fs, pg)), sizeof(a));
	memcpy(b, krfs_ptr(fs, csum_b(fs, pg)), sizeof(b));
	strip_crcs(d, crc);
	int nbad = 0;
	*csum_mismatch = 0;
	*parity_bad = false;
	for (unsigned s = 0; s < KRFS_STRIPS && fs->csum; s++) {
		nbad += crc[s] != a[s] && crc[s] != b[s];
		*csum_mismatch += a[s] != b[s];
	}
	if (!fs->parity || fs->zone_rows) /* zone parity is checked by row */
		return nbad;
	_Alignas(64) uint8_t x[KRFS_STRIP];
	rebuild_strip(fs, pg, d, KRFS_STRIPS, x); /* skip none: XOR of all strips and parity */
	static const uint8_t zero[KRFS_STRIP];
	*parity_bad = memcmp(x, zero, KRFS_STRIP) != 0;
	return nbad;
}

void krfs_data_locate(const struct kr_fs *fs, uint64_t pg, unsigned strip, struct kr_fs_location *loc)
{
	loc->page_off = krfs_data_off(fs, pg);
	loc->strip_off = loc->page_off + strip * KRFS_STRIP;
	loc->csum_off[0] = csum_a(fs, pg) + strip * sizeof(uint32_t);
	loc->csum_off[1] = csum_b(fs, pg) + strip * sizeof(uint32_t);
	loc->parity_off = fs->zone_rows ? krfs_zone_parity(fs, pg) + strip * KRFS_STRIP : parity(fs, pg);
}
