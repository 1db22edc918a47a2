/*
 * keratin_hmap.h - the single-trip hash map (STPS): a persistent key-value map whose every
 * update costs one persist round trip (one fence), from Cohen, Friedman and Larus
 * (OOPSLA'17).
 *
 * The map is a file of its own holding a log of fixed-size entries reused in place; the
 * index is in DRAM and is rebuilt by scanning the log when the map is opened (recovery
 * time grows with the file's size: kr_hmap_stats reports it). Keys of 1 to 128 bytes and
 * values of 0 bytes and up, as long as key + value fit the entry size chosen at creation
 * (lines * 56 - 8 bytes: 48 for 1 line, 1784 for 32). A put, a delete and a transaction
 * of up to 255 changes (all or nothing) are each durable on return, after one fence.
 *
 * Thread safety: every call may be made from any number of threads at once, except
 * kr_hmap_close. Changes to different keys run in parallel (the fences too); changes to
 * one key are serialised in call order. kr_hmap_get and kr_hmap_foreach copy values out
 * under a read lock that only the index updates of writers wait for.
 *
 * Part of libkeratin (pkg-config keratin). Errors are keratin.h's codes, details in
 * kr_errmsg(). A map created with KR_HMAP_PROTECT is a protected region
 * (keratin_region.h) too.
 */
#ifndef KERATIN_HMAP_H
#define KERATIN_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "keratin_common.h" /* errors (enum kr_err, kr_errmsg), KR_API, KR_OPEN_* flags */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_hmap kr_hmap;

/* Begins with struct_size, like every option struct (keratin.h, kr_create_opts). */
struct kr_hmap_opts {
	uint32_t struct_size;  /* sizeof(struct kr_hmap_opts) */
	uint64_t size;         /* file size in bytes, >= 64 KiB */
	uint32_t entry_lines;  /* cache lines per entry, 1..32; 0: 4 (200 bytes of key + value) */
	unsigned flags;        /* KR_OPEN_FORCE_PMEM, KR_OPEN_PREFAULT, KR_HMAP_TWO_FENCES,
				* KR_HMAP_PROTECT (the same flags for kr_hmap_open) */
};
#define KR_HMAP_OPTS_INIT {.struct_size = sizeof(struct kr_hmap_opts)}
/* Benchmarks only: commit the classic way, payload then a fence then the marks then a
 * second fence (the comparison the single-trip design is measured against). Same format. */
#define KR_HMAP_TWO_FENCES 0x100u
/* Protects the map's pages with CRCs and parity kept lazily in a sidecar (path + ".krs"):
 * the map's mapping is attached as a protected region (see keratin_region.h, with
 * its defaults: 1 s period, 4+1 stripes, sealing) before the map is read, so a damaged or
 * poisoned page is repaired at open, at its next access or by kr_region_check on
 * kr_hmap_region(map); a crash leaves nothing stale trusted. Give it at every open (an open
 * without it leaves the sidecar stale, and the next protected open refuses it). Create
 * deletes a sidecar already at that path. */
#define KR_HMAP_PROTECT 0x200u

/* Creates a map file at path (which must not exist) and opens it. Errors: KR_E_MISUSE_ARG
 * (also for a wrong struct_size), KR_E_IO_EXISTS, KR_E_IO_*. */
KR_API int kr_hmap_create(const char *path, const struct kr_hmap_opts *opts, kr_hmap **map);
/* Opens a map, rebuilding its index from the log: the newest complete version of each key
 * wins, torn entries and incomplete transactions are dropped. Errors: KR_E_IO_*,
 * KR_E_IO_BUSY (open elsewhere), KR_E_FORMAT_*, KR_E_CORRUPT_HEADER, KR_E_NOMEM,
 * KR_E_MISUSE_ARG (KR_HMAP_PROTECT given for an unprotected map or left out for a
 * protected one), KR_E_CORRUPT_REGION (a protected map with damage its redundancy
 * cannot repair).
 * KR_OPEN_READONLY inspects a map without changing a byte of it or of its sidecar: the file
 * is opened read-only under a shared lock (KR_E_IO_BUSY while a writer has it open, and
 * the reverse), mapped privately, and recovered in that private view; a protected map is
 * verified against its redundancy as it lies in the file, and damage is reported
 * (KR_E_CORRUPT_REGION), not repaired. kr_hmap_put, _del and _tx_begin then fail with
 * KR_E_MISUSE_STATE. */
KR_API int kr_hmap_open(const char *path, unsigned flags, kr_hmap **map);
/* Frees the handle; everything acknowledged is already durable. With KR_HMAP_PROTECT, the
 * region's final pass brings the redundancy up to date first. */
KR_API int kr_hmap_close(kr_hmap *map);
/* The protected region of a map opened with KR_HMAP_PROTECT (NULL otherwise), for
 * kr_region_check, _sync, _stats and _inject_poison. Do not close it. */
KR_API struct kr_region *kr_hmap_region(kr_hmap *map);

/* Inserts or replaces. KR_E_TOO_BIG if key + value do not fit an entry, KR_E_MISUSE_ARG for
 * a key of 0 or over 128 bytes, KR_E_NOSPACE when a new key would take one of the last
 * entries, which are kept (1/8 of the map, at most 256) so that updates and deletes always
 * find room. Every change writes a new entry and frees the old one. */
KR_API int kr_hmap_put(kr_hmap *map, const void *key, size_t klen, const void *val, size_t vlen);
/* Deletes: 1 if the key was there, 0 if not (nothing written), or an error. */
KR_API int kr_hmap_del(kr_hmap *map, const void *key, size_t klen);
/* Looks up: 1 and the value (up to cap bytes copied, its length in *vlen), 0 if absent. */
KR_API int kr_hmap_get(kr_hmap *map, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
KR_API uint64_t kr_hmap_count(kr_hmap *map);
/* Calls fn for every key in no particular order; a nonzero return stops and is returned.
 * Writers of other threads wait meanwhile. fn may call kr_hmap_get; a change of the map
 * from fn, or a nested foreach, fails with KR_E_MISUSE_STATE. */
KR_API int kr_hmap_foreach(kr_hmap *map,
		    int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen),
		    void *ctx);

/* Transactions: up to 255 puts and deletes of distinct keys, all or nothing, one fence. */
typedef struct kr_hmap_tx kr_hmap_tx;
KR_API int kr_hmap_tx_begin(kr_hmap *map, kr_hmap_tx **tx);
KR_API int kr_hmap_tx_put(kr_hmap_tx *tx, const void *key, size_t klen, const void *val, size_t vlen);
KR_API int kr_hmap_tx_del(kr_hmap_tx *tx, const void *key, size_t klen);
/* Writes every change (one fence) and frees tx; on error nothing changed. */
KR_API int kr_hmap_tx_commit(kr_hmap_tx *tx);
KR_API void kr_hmap_tx_abort(kr_hmap_tx *tx);

struct kr_hmap_stats {
	uint64_t nslots, entry_lines, live, free_slots, dead_slots;
	uint64_t recovery_ns;      /* the last open's log scan and index rebuild */
	uint64_t recovered_torn;   /* entries found torn by a crash */
	uint64_t recovered_dropped;/* entries of incomplete transactions dropped */
	uint64_t extra_fences;     /* fences beyond one per operation: a transaction reusing
				    * both a tombstone and an entry it cancels, or an entry of a
				    * transaction whose watermark another thread stored */
	uint64_t waits;            /* operations that waited for another thread's fence before
				    * reusing a slot (tombstone and watermark rules) */
	uint64_t next_version;
};
KR_API int kr_hmap_stats(kr_hmap *map, struct kr_hmap_stats *st);

#ifdef __cplusplus
}
#endif
#endif
