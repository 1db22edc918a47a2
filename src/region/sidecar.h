/*
 * sidecar.h - the sidecar file of a protected region: geometry, superblock, the areas and
 * the hot-segment bitmap (format: region_layout.h; docs/FORMAT.md).
 *
 * This is the on-media half of protected regions: how each piece is laid out, validated
 * and written (always through pmem.c). When each piece is written, and why that order is
 * safe, is region.c's business.
 */
#ifndef KR_SIDECAR_H
#define KR_SIDECAR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "region_layout.h"
#include "pmem.h"

struct kr_sidecar {
	struct kr_pm pm;          /* the mapping; pm.fd holds the flock */
	bool readonly;            /* mapped read-only (a check): nothing may be written */
	struct kr_side_sb sb;     /* the current superblock */
	int sb_copy;              /* which copy holds it (0: A, 1: B) */
	uint32_t *crcs, *meta;
	uint8_t *parity;
	uint64_t *intent[2];
	struct kr_side_shadow *shadow;
	struct kr_side_passrec *passrec;
	uint64_t npages, nstripes, nsegs, ncrcpages;
	uint32_t W, G, B;         /* stripe, segment and batch pages */
};

/* Pages in stripe s and in segment g (the last ones may be short). */
static inline uint64_t kr_side_stripe_pages(const struct kr_sidecar *sc, uint64_t s)
{
	uint64_t first = s * sc->W;
	return sc->npages - first < sc->W ? sc->npages - first : sc->W;
}
static inline uint64_t kr_side_seg_pages(const struct kr_sidecar *sc, uint64_t g)
{
	uint64_t first = g * sc->G;
	return sc->npages - first < sc->G ? sc->npages - first : sc->G;
}

/* A superblock for a new sidecar of a data_size-byte file (stripe, batch, segment: 0 for the
 * defaults; the segment is doubled until there are at most KR_SIDE_MAX_SEGMENTS), ACTIVE. */
int kr_side_sb_new(struct kr_side_sb *sb, uint64_t data_size, uint64_t dev, uint64_t ino,
		   uint32_t stripe, uint32_t batch, uint32_t segment);

/* Opens (or with may_create, creates: every segment hot, superblock last) and maps the
 * sidecar at path, holding an flock (shared when readonly) so one process owns it; reads
 * and validates the superblock. For creation, `fresh` must hold the new superblock
 * (kr_side_sb_new) and is set true; otherwise it is set false and `*fresh_sb` ignored.
 * Errors: KR_E_IO_OPEN, KR_E_IO_BUSY, KR_E_IO, KR_E_IO_MAP, KR_E_IO_SYNC (a new sidecar
 * not persisted), KR_E_FORMAT_*, KR_E_CORRUPT_HEADER. On error *sc holds what was opened,
 * for kr_side_close, and a new sidecar is left for the caller to remove. */
int kr_side_open(struct kr_sidecar *sc, const char *path, bool readonly, bool may_create,
		 bool force_pmem, const struct kr_side_sb *fresh_sb, bool *fresh);
void kr_side_close(struct kr_sidecar *sc);

/* Reads the current superblock of a mapped sidecar and validates it; binds *sc's pointers
 * to map (for readers that mapped the file themselves, as kr_region_info does). */
int kr_side_load(struct kr_sidecar *sc, uint8_t *map, size_t len, const char *path);

/* Writes sc->sb as the next superblock, into the other copy, and persists it. */
int kr_side_sb_write(struct kr_sidecar *sc);

/* The hot-segment bitmap: hot if set in either copy (atomic loads: the fault handler sets
 * bits concurrently). kr_side_set_hot sets or clears both copies and persists them; from a
 * signal handler with kr_pm_persist_now. */
bool kr_side_hot(const struct kr_sidecar *sc, uint64_t g);
int kr_side_set_hot(struct kr_sidecar *sc, uint64_t g, bool hot, bool from_handler);

/* Redundancy writes, flushed and not fenced: page p's CRC, stripe s's parity from the data
 * mapped at data, the meta-CRC of CRC page cp, the shadow record, the pass record. */
void kr_side_set_crc(struct kr_sidecar *sc, uint64_t p, uint32_t crc);
void kr_side_parity(struct kr_sidecar *sc, uint64_t s, const uint8_t *data);
void kr_side_meta(struct kr_sidecar *sc, uint64_t cp);
void kr_side_shadow(struct kr_sidecar *sc, uint64_t seq, uint64_t lo, uint64_t hi);
void kr_side_passrec(struct kr_sidecar *sc, struct kr_side_passrec *pr);

/* Whether CRC page cp matches its meta-CRC; the CRC of the whole meta array. */
bool kr_side_meta_ok(const struct kr_sidecar *sc, uint64_t cp);
uint32_t kr_side_meta_crc(const struct kr_sidecar *sc);

#endif
