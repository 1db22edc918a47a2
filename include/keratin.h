/*
 * keratin.h - the object store of libkeratin, a fault-tolerant persistent-memory library:
 * errors, pools, transactions, objects, verification and repair, counters.
 *
 * The other parts have headers of their own, each the manual of its part: keratin_region.h
 * (protected regions), keratin_hmap.h (the single-trip hash map), keratin_fs.h (keratin-fs)
 * and keratin_map.h (map structures in a pool, libkeratin-map); keratin_common.h holds what
 * they all share (errors, open flags, persistence counters). keratin.h includes the first
 * two (see its end).
 *
 * A pool is a file mapped into memory. Applications keep objects in it and change them only
 * through transactions: a transaction copies the ranges it will change into DRAM
 * micro-buffers, the application edits those, and kr_tx_commit() makes every change of the
 * transaction durable at once with a single persist round trip (one store fence). A crash at
 * any instant leaves the pool holding exactly the transactions that committed before it.
 *
 * Conventions
 *   - Functions that can fail return an int: KR_OK (0) or a negative kr_err code. The
 *     thread's last error is also kept with a detailed message: kr_errcode(), kr_errmsg().
 *   - Functions that return a pointer return NULL on failure and set the thread's error.
 *   - Errors inside a transaction are sticky: once an operation of a transaction fails, every
 *     later operation of it fails with the same code, and kr_tx_commit() aborts the
 *     transaction and returns that code. An application may therefore check only the commit.
 *   - A pool whose memory may disagree with the media (a failed msync, say) enters an error
 *     state: every later call fails with KR_E_POOL_FAILED until the pool is closed and
 *     reopened, which runs recovery.
 *
 * Thread-safety
 *   - A kr_pool may be shared by any number of threads.
 *   - A kr_tx belongs to the thread that began it; each thread has at most one open
 *     transaction per pool. Transactions of different threads run concurrently; keratin does
 *     not isolate them from each other, so two threads that change the same object must
 *     serialise those transactions themselves (as with libpmemobj). Allocation and free are
 *     safe from any number of threads.
 *   - kr_get() pointers stay valid until the object is freed and the pool is closed.
 *
 * Debug mode: with KR_OPEN_DEBUG in the flags of create or open, or KERATIN_DEBUG_PROTECT=1
 * in the environment then, the pool is mapped a second time read-only, and kr_get() returns
 * pointers into that view; keratin writes through its own writable mapping. Then
 *   - a store through a kr_get() pointer faults;
 *   - a micro-buffer (kr_tx_add/kr_tx_open/kr_tx_get) touched after its transaction ended
 *     faults (buffers get pages of their own, made inaccessible at commit or abort; the
 *     last 256 buffers retired stay so);
 *   - opening for write (or freeing) an object that another live transaction has open for
 *     write fails with KR_E_MISUSE_SHARED;
 *   - an access to a freed object by its oid fails with KR_E_MISUSE_FREED as always, and a
 *     read through an old pointer into a freed object of 4 KiB or more faults (the last 64
 *     freed blocks are held back from reuse, so a stale oid or pointer stays detectable).
 * Each finding is one line on stderr, "keratin: ..." naming the object and the offset; a
 * fault is then passed on (by default the process dies where the access was made). Costs
 * one more mapping, a page per micro-buffer, and a table lookup per object opened for
 * write; nothing without the mode. Emulated poison (kr_inject_poison) is not seen through
 * the view. kr_debug_crash_states() (below) is the mode's fourth check.
 *
 * Durability modes (chosen at open, reported by kr_pool_stat()):
 *   - KR_MODE_DAX: the file supports MAP_SYNC; cache-line flushes + sfence make data durable.
 *   - KR_MODE_PAGECACHE: ordinary file; the same, plus msync() of the touched pages before a
 *     commit returns. Correct, slower.
 *   - KR_MODE_EMULATED: the caller asserts that the mapping is persistent (KR_OPEN_FORCE_PMEM
 *     or KERATIN_FORCE_PMEM=1 in the environment); used for benchmarks on tmpfs.
 */
#ifndef KERATIN_H
#define KERATIN_H

#include <stddef.h>
#include <stdint.h>

#include "keratin_common.h" /* version, KR_API, errors, open flags, file kinds, counters */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Pools
 * ------------------------------------------------------------------------------------- */
typedef struct kr_pool kr_pool;
typedef uint64_t kr_oid; /* pool offset of an object's first payload byte; 0 is null */
#define KR_OID_NULL ((kr_oid)0)

/* Option structs (kr_create_opts, kr_region_opts, kr_hmap_opts) begin with struct_size:
 * set it to sizeof the struct, or start from the struct's KR_*_OPTS_INIT, e.g.
 *     struct kr_create_opts o = KR_CREATE_OPTS_INIT;
 *     o.size = 64 << 20;
 * or  struct kr_create_opts o = {.struct_size = sizeof(o), .size = 64 << 20};
 * It lets a later release add fields at the end without breaking programs built against
 * this one (docs/ABI.md). Any other value is KR_E_MISUSE_ARG. */
struct kr_create_opts {
	uint32_t struct_size; /* sizeof(struct kr_create_opts) */
	uint64_t size;   /* pool size in bytes, >= 8 MiB; rounded down to a multiple of 4096 */
	uint32_t rows;   /* data rows per zone (parity costs 1/rows); 0 = default (100) */
	uint32_t nlanes; /* log lanes = concurrent transactions; 0 = default (16) */
	/* Size of one lane in KiB, a multiple of 4 from 16 to 1024 (others: KR_E_MISUSE_ARG).
	 * It bounds one transaction's micro-buffered changes to existing objects
	 * (KR_E_NOSPACE_LOG beyond); in-place changes continue in the heap (kr_tx_add_in_place).
	 * 0 = default: size / 16 / nlanes, clamped to 16..256 KiB, so that both lane copies
	 * take at most 1/8 of a small pool. */
	uint32_t lane_kib;
	unsigned flags;  /* KR_OPEN_* */
	/* Called from time to time while the file is zeroed, with bytes done and total. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* Redundancy kept, fixed at creation: KR_PROTECT_FULL (0, the default) or one of the
	 * lesser levels, for measuring what each mechanism costs (Pangolin's -ML/-MLP/-MLPC). */
	unsigned protection;
};

/* Protection levels (kr_create_opts.protection); each includes the ones above it. The pool
 * header, control lines and their copies are always kept. */
enum kr_protection {
	KR_PROTECT_FULL = 0, /* log replica + record CRCs + parity + object CRCs */
	KR_PROTECT_NONE = 1, /* one log copy; no checksums on records or objects; no parity */
	KR_PROTECT_ML = 2,   /* + replicated log and checksummed allocator records */
	KR_PROTECT_MLP = 3,  /* + zone parity (media errors repaired; scribbles not detected) */
};

#define KR_CREATE_OPTS_INIT {.struct_size = sizeof(struct kr_create_opts)}

/* Creates a new pool file at path (which must not exist) and opens it.
 * Errors: KR_E_MISUSE_ARG (size out of range, bad geometry, wrong struct_size),
 * KR_E_IO_EXISTS, KR_E_IO_*. */
KR_API int kr_pool_create(const char *path, const struct kr_create_opts *opts, kr_pool **pool);

/* Opens a pool, recovering it if it was not closed cleanly: committed transactions still in
 * the log are replayed and torn ones discarded. A cleanly closed pool opens without scanning
 * the log or the data. A pool is open at most once at a time (an exclusive flock on the
 * file); a second open fails with KR_E_IO_BUSY. Errors: KR_E_IO_*, KR_E_FORMAT_*, KR_E_CORRUPT_*, KR_E_NOMEM. */
KR_API int kr_pool_open(const char *path, unsigned flags, kr_pool **pool);

/* Waits for nothing: the caller must have ended every transaction. Makes everything durable,
 * marks the pool clean and unmaps it. Returns KR_E_MISUSE_STATE (and closes nothing) if a
 * transaction is still open; the pool handle is freed in every other case. */
KR_API int kr_pool_close(kr_pool *pool);

struct kr_pool_stat {
	uint64_t pool_size;
	enum kr_mode mode;
	uint32_t nzones, rows, nlanes;
	uint64_t row_size, zone_size, lane_size;
	/* Space: pool_size = chunk bytes + parity_bytes + meta_bytes, where chunk bytes hold
	 * objects. heap_size (all data rows) includes the zone metadata, which meta_bytes
	 * also counts. */
	uint64_t heap_size;      /* bytes of data rows (chunks + zone metadata) */
	uint64_t parity_bytes;   /* bytes of parity rows */
	uint64_t meta_bytes;     /* headers, control pages, lanes and replicas, zone metadata,
				  * unused pages */
	uint64_t used_bytes;     /* bytes of allocated blocks, headers included */
	uint64_t free_bytes;     /* bytes available for new objects now (blocks freed by recent
				  * transactions return once the log's durable point passes
				  * them, at the latest at the next open) */
	uint64_t nobjects;       /* live objects */
	uint64_t max_alloc;      /* largest object size this pool can hold */
	uint8_t uuid[16];
	int recovered;           /* 1 if the last open replayed or discarded log entries */
	uint64_t replayed_txs;   /* transactions replayed by that recovery */
	uint64_t discarded_txs;  /* torn transactions discarded by it */
	/* Fault tolerance since open. */
	uint64_t media_repairs;    /* pages repaired after a media error (online or at open) */
	uint64_t csum_repairs;     /* objects or records repaired after a checksum mismatch */
	uint64_t scrub_passes;     /* background scrub passes completed */
	uint64_t last_repair_ns;   /* duration of the last online page repair */
	unsigned features;         /* redundancy kept: KR_FEAT_* below */
	int readonly;              /* opened with KR_OPEN_READONLY: recovery and the repairs
				    * counted above happened in a private view, not in the file */
	/* kr_stored_persist: 1 if the pool has the stale map (made since it), page columns
	 * whose redundancy does not follow their persisted bytes yet, and columns brought up
	 * to date since open (the cleaner, checks, close). */
	int stale_map;
	uint64_t stale_columns, stale_cleaned;
};
#define KR_FEAT_META_CSUM 0x1u /* allocator records checksummed */
#define KR_FEAT_OBJ_CSUM 0x2u  /* objects checksummed */
#define KR_FEAT_PARITY 0x4u    /* zone parity rows */
#define KR_FEAT_LOG_REPLICA 0x8u /* redo log written in two copies */
KR_API int kr_pool_stat(kr_pool *pool, struct kr_pool_stat *st);

/* ---------------------------------------------------------------------------------------
 * Verification and repair
 *
 * A pool keeps three kinds of redundancy (all on at the default protection, KR_PROTECT_FULL):
 * a CRC-32C per object (header), a CRC-32C per chunk record of the allocator, and one parity
 * row per zone (RAID-4 across the zone's rows, about 1/rows of the heap). Headers and
 * control lines are kept in two copies with checksums, and so are log entries unless the
 * pool was created with KR_PROTECT_NONE. Checks skip what a pool does not keep.
 * ------------------------------------------------------------------------------------- */
struct kr_check_report {
	uint64_t objects, bad_objects;     /* live objects checked / failing their checksum */
	uint64_t chunks, bad_chunks;       /* allocator chunk records checked / failing */
	uint64_t columns, bad_columns;     /* parity page columns checked / disagreeing */
	uint64_t repaired_pages;           /* pages rebuilt from parity (KR_CHECK_REPAIR) */
	uint64_t recomputed_columns;       /* parity pages recomputed (damage in parity or free
					    * space, KR_CHECK_REPAIR) */
	uint64_t unrepairable;             /* damaged items that could not be (or were not) fixed */
	uint64_t first_bad_off;            /* pool offset of the first damaged item, 0 if none */
	uint64_t bytes_scanned;            /* heap bytes read */
	double seconds;
	uint64_t copies, bad_copies;       /* metadata copies compared (header copies, root
					    * lines) / damaged or disagreeing with their twin */
	uint64_t repaired_copies;          /* of those, rewritten from the twin (KR_CHECK_REPAIR) */
	/* Optional, set by the caller: called for every damaged page found, with its state. */
	void (*on_page)(void *ctx, uint64_t off, int state);
	void *ctx;
	/* Optional: called from time to time with bytes read so far and in all (the zones, for
	 * parity, plus the live objects, for checksums), like kr_create_opts.progress. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
};
#define KR_CHECK_REPAIR 0x1u
enum kr_page_state { KR_PAGE_DAMAGED = 1, KR_PAGE_REPAIRED = 2, KR_PAGE_UNREPAIRABLE = 3 };

/* What the 4 KiB page at pool offset off holds (for maps and fault injection). */
enum kr_page_kind {
	KR_PAGE_HEADER = 1,   /* pool header copy */
	KR_PAGE_CONTROL,      /* control page copy (root, durable_seq) */
	KR_PAGE_LANE,         /* redo-log lane */
	KR_PAGE_LANE_REPLICA, /* its replica */
	KR_PAGE_ZONE_META,    /* chunk records */
	KR_PAGE_DATA,         /* data row page for objects (kr_first/kr_next tell which hold some) */
	KR_PAGE_PARITY,       /* parity row */
	KR_PAGE_UNUSED,       /* between the last zone and the replica lanes, never written */
};
/* O(1); KR_E_MISUSE_ARG (negative) for an offset beyond the pool. */
KR_API int kr_pool_page_kind(kr_pool *pool, uint64_t off);

/* Where the byte at pool offset off is, and what protects it (kr_pool_locate). Set
 * struct_size (or start from KR_LOCATION_INIT); the library fills in the rest.
 *
 * The heap is nzones zones of kr_pool_stat().zone_size bytes; a zone is `rows` data rows of
 * row_size bytes and one parity row. Byte x of a zone's parity row is the XOR of byte x of
 * each of its data rows: those bytes form a stripe, and the 4 KiB pages holding them one
 * page column, of which any one lost page can be rebuilt from the others. The pages
 * outside the heap (headers, control pages, log lanes) each have a twin copy instead. */
struct kr_location {
	uint32_t struct_size;  /* sizeof(struct kr_location) */
	int kind;              /* enum kr_page_kind of the page holding the byte */
	uint64_t page;         /* pool offset of that page */
	uint64_t twin;         /* header, control and lane pages: the same byte in the other copy
				* (lanes: only if the pool keeps the log replica); else 0 */
	int in_zone;           /* 1 for zone metadata, data and parity: the next four are set */
	uint32_t zone;         /* 0 .. nzones - 1 */
	uint32_t row;          /* 0 .. rows - 1 for a data row, rows for the parity row */
	uint32_t column;       /* page column within the zone: 0 .. row_size / 4096 - 1 */
	uint64_t parity;       /* pool offset of the parity byte of the byte's stripe (the byte
				* itself in the parity row) */
	kr_oid object;         /* the live object whose block (header, payload, padding up to the
				* next block) holds the byte, or 0 */
	uint64_t object_size;  /* kr_size(object), or 0 */
};
#define KR_LOCATION_INIT {.struct_size = sizeof(struct kr_location)}
/* O(1) but for an object in a large extent (a walk back to its first chunk). Reads only
 * DRAM state and object headers. Errors: KR_E_MISUSE_ARG for a NULL pool or where, a
 * struct_size this library does not know, or an offset beyond the pool. */
KR_API int kr_pool_locate(kr_pool *pool, uint64_t off, struct kr_location *where);

/* Zero-initialise the report (`struct kr_check_report rep = {0};`) and set only the
 * callbacks you want: kr_pool_check reads on_page and progress from it.
 * Verifies every object checksum, every chunk record, every parity column and the metadata
 * copies (header copies, root lines); with
 * KR_CHECK_REPAIR rebuilds damaged pages from parity (a page is rebuilt when a checksum
 * says an item is damaged and parity says which of its pages disagree) and recomputes parity
 * where only parity or free space was damaged. Needs a quiet pool: returns
 * KR_E_MISUSE_STATE while transactions are open. Returns KR_OK if the pool is sound (or
 * was fully repaired), KR_E_CORRUPT if damage remains; *rep is filled in both cases.
 * Two damaged pages in one page column cannot be rebuilt: they are counted unrepairable and
 * the objects there fail with KR_E_CORRUPT_OBJECT when opened for writing. */
KR_API int kr_pool_check(kr_pool *pool, unsigned flags, struct kr_check_report *rep);

/* The deep check: kr_pool_check's ordinary pass (no repair), then every invariant that ties
 * the pool's parts together, reading only (it never changes a byte of the pool):
 *   - the allocator: each chunk record against the in-memory indexes the library keeps
 *     (free, run with its bitmap, extent), and each allocated block or extent against the
 *     object header in it (a bit set or an extent recorded with no object there, a record
 *     the indexes do not know, counters that disagree with the records);
 *   - the space audit: pool_size = used + free + slack + parity + meta, each term from its
 *     own source (the chunk records for the first three, the layout for the others);
 *   - the log: both control copies carry the durable sequence number, every commit is
 *     durable, each lane's live transactions are whole, pass their CRC and equal their
 *     replica, and no log line carries a sequence number above the durable one.
 * Set struct_size (or start from KR_DEEP_REPORT_INIT) and, if wanted, the callbacks of
 * check. Needs a quiet pool (KR_E_MISUSE_STATE while transactions are open; start none
 * until it returns). Returns KR_OK if sound, KR_E_CORRUPT if the ordinary pass or the deep
 * one found damage (problems counts the deep findings, first_problem describes the first);
 * *rep is filled in both cases. Works on a pool opened with KR_OPEN_READONLY. */
struct kr_deep_report {
	uint32_t struct_size;          /* sizeof(struct kr_deep_report) */
	struct kr_check_report check;  /* the ordinary pass */
	uint64_t pool_size;            /* = used + free + slack + parity + meta bytes */
	uint64_t used_bytes;           /* allocated blocks and extents, headers included */
	uint64_t free_bytes;           /* free chunks and free blocks of runs */
	uint64_t slack_bytes;          /* run tails too small for a block */
	uint64_t parity_bytes;         /* parity rows */
	uint64_t meta_bytes;           /* headers, control pages, lanes, zone records, unused */
	uint64_t nobjects;             /* objects the chunk records say are allocated */
	uint64_t free_chunks, run_chunks, extent_chunks;
	uint64_t lanes, log_lines;     /* log lanes and lines (both copies) examined */
	uint64_t problems;             /* invariant violations found by the deep pass */
	uint64_t first_problem_off;    /* pool offset of the first one (0 if none or not placed) */
	char first_problem[200];       /* what it is, "" if none */
};
#define KR_DEEP_REPORT_INIT {.struct_size = sizeof(struct kr_deep_report)}
KR_API int kr_pool_check_deep(kr_pool *pool, struct kr_deep_report *rep);

/* Media errors. A real machine check arrives as SIGBUS (BUS_MCEERR_AR/AO) with the
 * address; emulated poison is a page of the mapping made inaccessible (SIGSEGV). keratin
 * installs handlers for both while pools are open: a fault inside a pool is repaired online
 * (commits pause, the page is rebuilt from parity or from its replica, the access resumes
 * with correct data); a fault anywhere else goes to the handler that was installed before
 * keratin's, or kills the process as it would have without keratin.
 *
 * Pages the platform reports as bad for the pool file are repaired when the pool is opened.
 * Without persistent-memory hardware, the "platform" list is emulated by a text file next
 * to the pool, PATH.badblocks, holding one pool offset per line; kr_badblocks_add appends
 * to it (the `keratin inject media` command uses it). */
KR_API int kr_badblocks_add(const char *pool_path, uint64_t off);

/* Emulated poison in an open pool: the page at off loses its content and becomes
 * inaccessible; the next access to it faults and is repaired online. For tests and tools. */
KR_API int kr_inject_poison(kr_pool *pool, uint64_t off);

/* When checksums are verified: always when an object is opened for writing (of an object of
 * 8 KiB or more verified before, the blocks of the ranges the transaction reads); with
 * KR_READ_CONSERVATIVE also on every kr_get/kr_tx_get (a failing object is repaired, or
 * the read fails with KR_E_CORRUPT_OBJECT); with KR_READ_SCRUB a background thread also
 * runs a repair pass (kr_pool_check with KR_CHECK_REPAIR) every scrub_txs commits or
 * scrub_seconds seconds, whichever comes first. Changeable at any time. */
enum kr_read_policy { KR_READ_DEFAULT = 0, KR_READ_SCRUB = 1, KR_READ_CONSERVATIVE = 2 };
KR_API int kr_pool_set_read_policy(kr_pool *pool, enum kr_read_policy policy, uint64_t scrub_txs,
			    double scrub_seconds);

/* ---------------------------------------------------------------------------------------
 * Objects (reads)
 * ------------------------------------------------------------------------------------- */

/* Direct pointer to an object's committed bytes, or NULL (KR_E_MISUSE_OID) if oid does not
 * name a live object. Never write through it: changes go through a transaction. */
KR_API const void *kr_get(kr_pool *pool, kr_oid oid);
/* Size and type number given at allocation; 0 (and KR_E_MISUSE_OID) for a bad oid. */
KR_API size_t kr_size(kr_pool *pool, kr_oid oid);
KR_API uint32_t kr_type(kr_pool *pool, kr_oid oid);

/* Iteration over live objects in pool order (the root object included). Returns KR_OID_NULL
 * at the end. Do not run transactions that allocate or free while iterating. */
KR_API kr_oid kr_first(kr_pool *pool);
KR_API kr_oid kr_next(kr_pool *pool, kr_oid oid);

/* The root object: the one object an application finds without knowing an oid. Creates it
 * zero-filled (in a transaction of its own) on first call; later calls return it. If size is
 * larger than the existing root, KR_E_MISUSE_ARG. */
KR_API int kr_root(kr_pool *pool, size_t size, kr_oid *oid);

/* ---------------------------------------------------------------------------------------
 * Transactions
 * ------------------------------------------------------------------------------------- */
typedef struct kr_tx kr_tx;

/* Begins a transaction on the calling thread (binds a log lane; waits for one if all are in
 * use). Errors: KR_E_MISUSE_STATE (this thread already has one open on this pool). */
KR_API int kr_tx_begin(kr_pool *pool, kr_tx **tx);

/* Allocates a zero-filled object of size bytes (1 .. kr_pool_stat().max_alloc) with an
 * application type number. The object exists only if the transaction commits; its content
 * is written with the transaction. */
KR_API int kr_tx_alloc(kr_tx *tx, size_t size, uint32_t type, kr_oid *oid);

/* Frees an object at commit (an object allocated by the same transaction is simply never
 * created). Freeing an object twice is KR_E_MISUSE_FREED; the root object cannot be freed
 * (KR_E_MISUSE_ARG); later access to a freed object in the transaction is
 * KR_E_MISUSE_FREED. */
KR_API int kr_tx_free(kr_tx *tx, kr_oid oid);

/* Returns a writable DRAM micro-buffer for bytes [off, off+len) of the object: the bytes are
 * copied from the pool (or from the transaction's earlier changes) and logged at commit. The
 * pointer is to byte off of a buffer that mirrors the whole object, so pointer arithmetic
 * inside the requested range is valid. Only requested ranges are copied and logged.
 * NULL on error (KR_E_MISUSE_OID, KR_E_MISUSE_RANGE, KR_E_NOMEM). */
KR_API void *kr_tx_add(kr_tx *tx, kr_oid oid, size_t off, size_t len);

/* kr_tx_add(tx, oid, 0, kr_size(oid)): the whole object, writable. */
KR_API void *kr_tx_open(kr_tx *tx, kr_oid oid);

/* Read access inside a transaction: the transaction's micro-buffer for the object if it has
 * one (completed with the object's committed bytes, so the whole object reads correctly),
 * else the direct pointer of kr_get(). */
KR_API const void *kr_tx_get(kr_tx *tx, kr_oid oid);

/* Commits: the changes become durable atomically with one store fence, then the
 * transaction ends. On error the transaction is aborted (nothing reaches the pool) and
 * ended. Errors: the transaction's sticky error, KR_E_NOSPACE_LOG, KR_E_CANARY,
 * KR_E_IO_SYNC (pool enters the error state). */
KR_API int kr_tx_commit(kr_tx *tx);

/* Discards the transaction's changes and ends it. Allocations are returned. */
KR_API void kr_tx_abort(kr_tx *tx);

/* Single-object atomic update: copies len bytes from src to [off, off+len) of the object in
 * a transaction of its own. */
KR_API int kr_update(kr_pool *pool, kr_oid oid, size_t off, const void *src, size_t len);

/* In-place writes, for programs that store straight into the pool rather than into
 * micro-buffers (libpmemobj's model: keratin-pmemobj is built on these two calls).
 *
 * kr_tx_add_in_place: makes [off, off+len) of the object writable IN PLACE for the rest of
 * the transaction and returns its home address. The range's current bytes are logged first
 * as an undo entry (one fence, like libpmemobj's snapshot), so the application may then
 * store there directly and read its stores back from there. At commit the stores become
 * durable with the object's checksum and parity following them (the ordinary commit: one
 * fence; from 4 KiB of in-place bytes, or when the undo outgrew the lane, a commit at home
 * that does not log them again: three fences); at abort, or after a crash before the
 * commit, the old bytes come back. On an
 * object allocated by the same transaction the whole object is written in place (an intent
 * makes recovery recompute the parity of its block if the commit never happens), and reads
 * zeros. An object
 * is written either in place or through micro-buffers within one transaction
 * (KR_E_MISUSE_STATE otherwise); kr_tx_get returns its home bytes. Undo entries that would
 * leave less than a quarter of the log lane free continue in blocks of the heap (pools
 * made since the LOG_SPILL format feature; older pools: KR_E_NOSPACE_LOG when the lane is
 * full; no heap room: KR_E_NOSPACE_HEAP). NULL on error, as kr_tx_add.
 *
 * kr_tx_add_stored: the application HAS stored into [off, off+len) of a live object,
 * outside any transaction (libpmemobj's pmemobj_persist after direct stores): the bytes
 * become durable at this transaction's commit with checksum and parity patched for them.
 * old: what the range held before, if the caller kept it; NULL recovers it from the zone's
 * parity (every commit of the pool waits meanwhile, for one parity read of the range). The
 * object is not verified (other ranges may hold stores of their own not yet declared); the
 * patch is exact for the declared range, so damage elsewhere stays detectable. A range
 * already written in place by this transaction is left to its commit. Until the commit
 * fence the declared bytes are unprotected: a crash may leave them new with the old
 * checksum (docs/DESIGN.md, "the window"). */
KR_API void *kr_tx_add_in_place(kr_tx *tx, kr_oid oid, size_t off, size_t len);
KR_API int kr_tx_add_stored(kr_tx *tx, kr_oid oid, size_t off, size_t len, const void *old);
/* kr_tx_add_in_place, then len bytes of src (zeros if src is NULL) stored there by keratin:
 * for libraries that write in-place ranges themselves (realloc's copy, strdup). */
KR_API int kr_tx_write_in_place(kr_tx *tx, kr_oid oid, size_t off, const void *src, size_t len);
/* The transaction opens objects without verifying their checksums first. For programs whose
 * threads store into objects in place and declare the stores later (libpmemobj's
 * pmemobj_persist): another thread's store, not declared yet, would fail the check, and the
 * repair that follows would undo it. Checksum patches stay exact either way (they cover the
 * ranges changed); damage is then found by kr_pool_check and the scrubber instead. */
KR_API void kr_tx_trust(kr_tx *tx);

/* Stores the application made itself, outside transactions (libpmemobj's pmemobj_persist,
 * pmemobj_flush and pmemobj_drain). kr_stored_flush writes [addr, addr + len) back, after
 * marking the page columns it touches stale (durably: one fence more, only for a column not
 * marked yet); kr_stored_drain waits for this thread's flushes; kr_stored_persist is both:
 * one fence, as libpmemobj's persist. addr points into the pool's mapping (kr_pool_base).
 * The bytes' parity and the checksums of the objects holding them follow within one period
 * of the pool's cleaner thread (KERATIN_STALE_MS, default 100 ms; longer after a long pass,
 * so that the thread takes at most a tenth of a CPU), at kr_pool_check, at
 * close, or in recovery after a crash. Until then a media error in those columns cannot be
 * repaired and their objects are not verified (docs/DESIGN.md, "the window"). Any thread;
 * inside a transaction of its own, KR_E_MISUSE_STATE when the range's bytes would have to be
 * logged (another thread's open in-place transaction holds the log back after a transaction
 * wrote those columns: kr_tx_add_stored is the way there). Transactions of other threads on
 * objects stored into this way call kr_tx_trust (a store not persisted yet fails
 * verification, and the repair would take it back). Pools made before the stale map (kr_pool_stat's
 * stale_map is 0): KR_E_MISUSE_STATE, and kr_tx_add_stored is the way there.
 * Errors: KR_E_MISUSE_ARG (a range outside the pool), KR_E_IO_SYNC (the pool fails). */
KR_API int kr_stored_flush(kr_pool *pool, const void *addr, size_t len);
/* kr_stored_flush of n ranges, all marked before any is written back (libpmemobj's drain
 * after several flushes: no fence of keratin's falls between their write-backs). */
struct kr_stored_range {
	const void *addr;
	size_t len;
};
KR_API int kr_stored_flush_ranges(kr_pool *pool, const struct kr_stored_range *r, size_t n);
KR_API int kr_stored_drain(kr_pool *pool);
KR_API int kr_stored_persist(kr_pool *pool, const void *addr, size_t len);
/* The object whose payload holds pool offset off, as the transaction sees the pool: its own
 * new objects included (kr_pool_locate knows only live ones). *size is its size and *type
 * (if type is not NULL) its type number. KR_OID_NULL if none. */
KR_API kr_oid kr_tx_owner(kr_tx *tx, uint64_t off, size_t *size, uint32_t *type);

/* Typed helpers. T is the C type stored in the object. */
#define KR_GET(pool, oid, T) ((const T *)kr_get((pool), (oid)))
#define KR_TX_GET(tx, oid, T) ((const T *)kr_tx_get((tx), (oid)))
#define KR_TX_OPEN(tx, oid, T) ((T *)kr_tx_open((tx), (oid)))
/* Writable pointer to one field of a T object; only that field is copied and logged. */
#define KR_TX_FIELD(tx, oid, T, field)                                                      \
	((__typeof__(((T *)0)->field) *)kr_tx_add((tx), (oid), offsetof(T, field),            \
						   sizeof(((T *)0)->field)))
#define KR_TX_NEW(tx, T, typenum, oidp) kr_tx_alloc((tx), sizeof(T), (typenum), (oidp))

/* ---------------------------------------------------------------------------------------
 * Crash states (the debug mode's fourth check): does the application's invariant survive a
 * crash at any point of keratin's commit protocol?
 *
 * kr_debug_crash_states opens the closed pool at path with flags, runs op(pool, arg), and
 * closes the pool. At each persist point meanwhile (each store fence keratin issues: the
 * commit points of transactions and the internal ones around them, the close's too) it
 * cuts crash images of the pool: the durable bytes alone, and the durable bytes with every
 * line written since it was last durable (the two extremes of what a crash there can
 * leave). Each image is recovered in a fresh kr_pool_open (with flags) in a child process,
 * and check(recovered pool, arg) is called there: it returns 0 if the pool is consistent,
 * nonzero otherwise (after saying why on stderr, which the child shares). Images are files
 * named path.crash-PID, removed after each check.
 *
 * The report counts persist points, images and failures and names the first failing one:
 * its persist point (1-based, in the order the fences ran), the log commit it belongs to
 * (1-based: a fence before the first commit point, or at it, is in commit 1), and which of
 * the two images failed. Each failure (up to ten) is also a line on stderr:
 *   keratin: debug (crash-state): persist point 3 (a fence in log commit 1 of the
 *   operation): the image with every pending line persisted fails the check
 * Returns KR_OK if every image passed, KR_E_CORRUPT if one failed (the report says where),
 * op's own nonzero return, or the error of opening or closing the pool. op must run its
 * transactions on the calling thread and leave none open; the check runs in a forked child
 * with the parent's memory as it was at the fence (it can consult the op's own notes).
 * One call at a time per process (KR_E_MISUSE_STATE); it replaces any recorder
 * (kr_set_recorder) while it runs. Cost: a copy of the pool in DRAM, and per persist point
 * two writes of the pool file, two opens and two checks.
 * ------------------------------------------------------------------------------------- */
typedef int (*kr_crash_op_fn)(kr_pool *pool, void *arg);
typedef int (*kr_crash_check_fn)(kr_pool *recovered, void *arg);
struct kr_crash_report {
	uint32_t struct_size;    /* sizeof(struct kr_crash_report) */
	uint64_t persist_points; /* fences during the operation and the close */
	uint64_t images;         /* crash images recovered and checked */
	uint64_t failures;       /* images that did not recover or failed the check */
	uint64_t first_point;    /* the first failure's persist point, 0 if none */
	uint64_t first_commit;   /* its log commit (1-based), 0 if none */
	int first_all;           /* 1: the image with every pending line failed; 0: durable only */
	char first_failure[400]; /* its line, "" if none */
};
#define KR_CRASH_REPORT_INIT {.struct_size = sizeof(struct kr_crash_report)}
KR_API int kr_debug_crash_states(const char *path, unsigned flags, kr_crash_op_fn op,
				 kr_crash_check_fn check, void *arg, struct kr_crash_report *rep);

/* The mapping of an open pool: base address and length (for tools and the recorder). This is
 * the mapping keratin writes through; in debug mode kr_get's pointers are into a second,
 * read-only view, so a pointer's pool offset is kr_pool_offset's job, not p - base. */
KR_API void *kr_pool_base(kr_pool *pool);
KR_API size_t kr_pool_mapped_size(kr_pool *pool);
/* The pool offset of the byte p points at, p into either mapping (a kr_get pointer, in
 * debug mode or not): what kr_pool_locate, kr_inject_poison and kr_badblocks_add take.
 * UINT64_MAX (KR_E_MISUSE_ARG) if p is in neither. */
KR_API uint64_t kr_pool_offset(kr_pool *pool, const void *p);

#ifdef __cplusplus
}
#endif

/* The other parts of libkeratin, each in a header of its own. keratin.h includes them so
 * that programs written when it declared everything still build; new code includes the
 * header of each part it uses. */
#include "keratin_region.h"
#include "keratin_hmap.h"

#endif
