/*
 * parity.h - zone parity: geometry, XOR patches, recomputation and rebuild.
 *
 * A zone is R data rows and one parity row of equal width; parity byte x is the XOR of
 * byte x of every data row. Any one lost page of a page column can be rebuilt from the
 * others. Patches (parity ^= old ^ new) commute, so concurrent commits need no ordering;
 * small ones are atomic word XORs under a shared range lock, large ones SIMD XOR (ISA-L)
 * under the exclusive lock of the same range.
 */
#ifndef KR_PARITY_H
#define KR_PARITY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "geom.h"
#include "layout.h"
#include "pmem.h"

#define KR_PARITY_LOCKS 256

/* Each lock on a line of its own: two threads patching neighbouring page columns must not
 * move one line between their caches. */
struct kr_parity_lock {
	_Alignas(64) pthread_rwlock_t rw;
};

struct kr_parity {
	struct kr_pm *pm;
	struct kr_geom g;
	size_t crossover; /* patches of at least this many bytes take the SIMD path */
	struct kr_parity_lock locks[KR_PARITY_LOCKS];
	/* Called around a wait for a range lock (the pool steps the thread out of the commit
	 * gate meanwhile, see log.h); may be NULL. */
	int (*wait_begin)(void);
	void (*wait_end)(int token);
};

/* Set by a thread that repairs while every commit is held back (online repair): its parity
 * calls take no range locks, which a faulting thread may be holding. */
extern _Thread_local int kr_parity_unlocked;

/* Default crossover (bytes) between atomic-word and SIMD patches, measured with
 * build/bench/parity-crossover on the development machine (2 cores, AVX-512): SIMD under the
 * exclusive lock was at least as fast from 128 bytes with one and with two threads (e.g. 256 B:
 * 211 vs 582 ns alone, 422 vs 928 ns contended); at 64 B the atomic words won contended
 * (542 vs 1050 ns). Override with KERATIN_PARITY_CROSSOVER=<bytes>. */
#define KR_PARITY_CROSSOVER_DEFAULT 128

void kr_parity_init(struct kr_parity *p, struct kr_pm *pm, const struct kr_pool_hdr *h);
void kr_parity_fini(struct kr_parity *p);

/* 1 if [off, off+len) lies inside the data rows of one zone. */
int kr_parity_covers(const struct kr_parity *p, uint64_t off, size_t len);

/* The range locks of the parity of data bytes [off, off+len), held until kr_parity_release:
 * this thread's parity calls inside take none of them again. For a change of several
 * pieces (a chunk record's bytes, its bitmap word, its CRC) that must reach home and parity
 * together: a wait for a lock lets a repair run (wait_begin), and it must not find some
 * pieces changed and others not, or home changed and parity not. exclusive: held so, as a
 * patch of crossover bytes or more needs it. */
struct kr_parity_hold {
	int n;
	uint16_t idx[KR_PARITY_LOCKS];
};
void kr_parity_hold(struct kr_parity *p, uint64_t off, size_t len, int exclusive,
		    struct kr_parity_hold *h);
void kr_parity_release(struct kr_parity *p, struct kr_parity_hold *h);

/* XORs delta into the parity word of the 8-byte aligned data word at off (covered), holding
 * its column's range lock shared, and flushes it. */
void kr_parity_xor_word(struct kr_parity *p, uint64_t off, uint64_t delta);
/* parity ^= old ^ new over [off, off+len) of the data rows (may cross rows and zones);
 * the parity lines are flushed, not fenced. */
void kr_parity_patch(struct kr_parity *p, uint64_t off, const void *old, const void *new,
		     size_t len);
/* new written over [off, off+len) of the data rows (covered) with its parity patch, both
 * flushed, not fenced; large pieces in one pass over old, new and parity. */
void kr_parity_write(struct kr_parity *p, uint64_t off, const void *new, size_t len);

/* Parity of every page column overlapping [off, off+len) recomputed from the data rows,
 * flushed, not fenced. The caller keeps writers away from those columns. */
void kr_parity_recompute(struct kr_parity *p, uint64_t off, size_t len);

/* The parity of exactly the bytes [off, off+len) of a data row (one page at most)
 * recomputed from the rows, flushed, not fenced. For recovery, where nothing else runs:
 * bytes of the column outside the range keep the parity they had. */
void kr_parity_recompute_bytes(struct kr_parity *p, uint64_t off, size_t len);

/* The same for the one page column whose parity page starts at pool offset poff. */
void kr_parity_recompute_column(struct kr_parity *p, uint64_t poff);

/* What the data row bytes [off, off+len) should hold according to parity and the other
 * rows (one page column at most). */
void kr_parity_rebuild(struct kr_parity *p, uint64_t off, size_t len, void *out);

/* The same for a few bytes (within one page): only those bytes of each row are read. No
 * locks: for a caller that holds commits still (kr_quiesce). */
void kr_parity_rebuild_bytes(struct kr_parity *p, uint64_t off, size_t len, void *out);

/* 1 if the parity page of the column holding pool offset off equals the XOR of its rows. */
int kr_parity_column_ok(struct kr_parity *p, uint64_t off);

/* Pool offset of the parity byte for data byte off (off must be covered). */
uint64_t kr_parity_offset(const struct kr_parity *p, uint64_t off);

/* Starts fetching the parity lines of the first bytes of [off, off+len), and their range
 * locks' lines, for writing: a caller about to patch them later lets the cache misses run
 * beside its own work. With several threads in one pool these are often lines another CPU
 * wrote last (objects of different threads in one page column share parity), and a fetch
 * for writing then takes one transfer instead of two. */
void kr_parity_prefetch(const struct kr_parity *p, uint64_t off, size_t len);

#endif
