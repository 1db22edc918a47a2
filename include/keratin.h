/*
 * keratin.h - the public API of libkeratin, a fault-tolerant persistent-memory object store.
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
 * Debug protection: with KERATIN_DEBUG_PROTECT=1 in the environment at create or open, the
 * pool is mapped a second time read-only, and kr_get() returns pointers into that view;
 * keratin writes through its own writable mapping. A store through a kr_get() pointer
 * then faults: keratin prints the object and offset it hit on stderr and passes the
 * fault on (by default the process dies there). Costs one more mapping; emulated poison
 * (kr_inject_poison) is not seen through the view.
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

#ifdef __cplusplus
extern "C" {
#endif

#define KERATIN_VERSION_MAJOR 0
#define KERATIN_VERSION_MINOR 1

/* ---------------------------------------------------------------------------------------
 * Errors. The high byte is the class; the low byte distinguishes cases inside the class.
 * ------------------------------------------------------------------------------------- */
enum kr_err {
	KR_OK = 0,

	KR_E_MISUSE = -0x100,        /* the API was used wrongly */
	KR_E_MISUSE_ARG = -0x101,    /* an argument is NULL, zero or out of range */
	KR_E_MISUSE_STATE = -0x102,  /* no transaction / one already open / tx ended */
	KR_E_MISUSE_OID = -0x103,    /* oid does not name a live object of this pool */
	KR_E_MISUSE_FREED = -0x104,  /* oid is where an object may start, but none is live
				      * there: freed (in this transaction or before), or never
				      * allocated */
	KR_E_MISUSE_RANGE = -0x105,  /* offset + length beyond the object */
	KR_E_MISUSE_THREAD = -0x106, /* transaction used from a thread that did not begin it */

	KR_E_NOSPACE = -0x200,      /* not enough room */
	KR_E_NOSPACE_HEAP = -0x201, /* the heap has no free extent large enough */
	KR_E_NOSPACE_LOG = -0x202,  /* transaction's log image exceeds one lane */
	KR_E_TOO_BIG = -0x203,      /* allocation larger than a zone can hold */

	KR_E_IO = -0x300,       /* the operating system refused an operation (errno in message) */
	KR_E_IO_OPEN = -0x301,  /* open/create of the file failed */
	KR_E_IO_MAP = -0x302,   /* mmap failed */
	KR_E_IO_SYNC = -0x303,  /* msync/fsync failed: durability not guaranteed */
	KR_E_IO_EXISTS = -0x304, /* creating a pool over an existing file */
	KR_E_IO_BUSY = -0x305,   /* pool is already open (in this or another process) */

	KR_E_FORMAT = -0x400,           /* the file is not a pool this build can use */
	KR_E_FORMAT_NOT_POOL = -0x401,  /* no keratin magic in either header copy */
	KR_E_FORMAT_VERSION = -0x402,   /* made by a newer keratin (version or incompat feature) */
	KR_E_FORMAT_TRUNCATED = -0x403, /* file shorter than the pool it holds */
	KR_E_FORMAT_GEOMETRY = -0x404,  /* header fields inconsistent with each other */
	KR_E_FORMAT_MISMATCH = -0x405,  /* a region's sidecar describes another file, or this
					 * file at another size */

	KR_E_CORRUPT = -0x500,        /* stored data failed a consistency check */
	KR_E_CORRUPT_HEADER = -0x501, /* both header copies damaged */
	KR_E_CORRUPT_META = -0x502,   /* heap metadata damaged */
	KR_E_CORRUPT_LOG = -0x503,    /* a committed log entry is damaged in both copies */
	KR_E_CORRUPT_OBJECT = -0x504, /* an object fails its checksum and cannot be repaired */
	KR_E_CORRUPT_REGION = -0x505, /* a protected region has pages that fail their checksum
				       * and cannot be repaired (or cannot be verified) */

	KR_E_MEDIA = -0x600, /* media error (poison) that could not be repaired */

	KR_E_NOMEM = -0x700, /* DRAM allocation failed */

	KR_E_POOL_FAILED = -0x800, /* pool is in the error state; close and reopen it */
	KR_E_CANARY = -0x801,      /* a micro-buffer was overrun; transaction aborted */
};

#define KR_ERR_CLASS(e) (-((-(e)) & ~0xff))

/* Static text for a code ("object id is not a live object", ...). Never NULL. */
const char *kr_strerror(int err);
/* The calling thread's last error code and its detailed message (file, offset, errno). */
int kr_errcode(void);
const char *kr_errmsg(void);
/* Records code and a printf-style message as the calling thread's last error and returns
 * code: for libraries built on keratin (libkeratin-map) to report through the same channel. */
int kr_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------------------------
 * Pools
 * ------------------------------------------------------------------------------------- */
typedef struct kr_pool kr_pool;
typedef uint64_t kr_oid; /* pool offset of an object's first payload byte; 0 is null */
#define KR_OID_NULL ((kr_oid)0)

enum kr_mode { KR_MODE_DAX = 1, KR_MODE_PAGECACHE = 2, KR_MODE_EMULATED = 3 };

#define KR_OPEN_FORCE_PMEM 0x1u /* treat the mapping as persistent memory (tmpfs, tests) */
#define KR_OPEN_PREFAULT 0x2u   /* touch every page at open (benchmarks: no first-touch cost) */

struct kr_create_opts {
	uint64_t size;   /* pool size in bytes, >= 8 MiB; rounded down to a multiple of 4096 */
	uint32_t rows;   /* data rows per zone (parity costs 1/rows); 0 = default (100) */
	uint32_t nlanes; /* log lanes = concurrent transactions; 0 = default (16) */
	/* Size of one lane in KiB, a multiple of 4 from 16 to 1024 (others: KR_E_MISUSE_ARG).
	 * It bounds one transaction's changes to existing objects (KR_E_NOSPACE_LOG beyond).
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

/* Creates a new pool file at path (which must not exist) and opens it.
 * Errors: KR_E_MISUSE_ARG (size out of range, bad geometry), KR_E_IO_EXISTS, KR_E_IO_*. */
int kr_pool_create(const char *path, const struct kr_create_opts *opts, kr_pool **pool);

/* Opens a pool, recovering it if it was not closed cleanly: committed transactions still in
 * the log are replayed and torn ones discarded. A cleanly closed pool opens without scanning
 * the log or the data. A pool is open at most once at a time (an exclusive flock on the
 * file); a second open fails with KR_E_IO_BUSY. Errors: KR_E_IO_*, KR_E_FORMAT_*, KR_E_CORRUPT_*, KR_E_NOMEM. */
int kr_pool_open(const char *path, unsigned flags, kr_pool **pool);

/* Waits for nothing: the caller must have ended every transaction. Makes everything durable,
 * marks the pool clean and unmaps it. Returns KR_E_MISUSE_STATE (and closes nothing) if a
 * transaction is still open; the pool handle is freed in every other case. */
int kr_pool_close(kr_pool *pool);

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
};
#define KR_FEAT_META_CSUM 0x1u /* allocator records checksummed */
#define KR_FEAT_OBJ_CSUM 0x2u  /* objects checksummed */
#define KR_FEAT_PARITY 0x4u    /* zone parity rows */
#define KR_FEAT_LOG_REPLICA 0x8u /* redo log written in two copies */
int kr_pool_stat(kr_pool *pool, struct kr_pool_stat *st);

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
int kr_pool_page_kind(kr_pool *pool, uint64_t off);

/* Zero-initialise the report (`struct kr_check_report rep = {0};`) and set only the
 * callbacks you want: kr_pool_check reads on_page and progress from it.
 * Verifies every object checksum, every chunk record and every parity column; with
 * KR_CHECK_REPAIR rebuilds damaged pages from parity (a page is rebuilt when a checksum
 * says an item is damaged and parity says which of its pages disagree) and recomputes parity
 * where only parity or free space was damaged. Needs a quiet pool: returns
 * KR_E_MISUSE_STATE while transactions are open. Returns KR_OK if the pool is sound (or
 * was fully repaired), KR_E_CORRUPT if damage remains; *rep is filled in both cases.
 * Two damaged pages in one page column cannot be rebuilt: they are counted unrepairable and
 * the objects there fail with KR_E_CORRUPT_OBJECT when opened for writing. */
int kr_pool_check(kr_pool *pool, unsigned flags, struct kr_check_report *rep);

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
int kr_badblocks_add(const char *pool_path, uint64_t off);

/* Emulated poison in an open pool: the page at off loses its content and becomes
 * inaccessible; the next access to it faults and is repaired online. For tests and tools. */
int kr_inject_poison(kr_pool *pool, uint64_t off);

/* When checksums are verified: always when an object is opened for writing; with
 * KR_READ_CONSERVATIVE also on every kr_get/kr_tx_get (a failing object is repaired, or
 * the read fails with KR_E_CORRUPT_OBJECT); with KR_READ_SCRUB a background thread also
 * runs a repair pass (kr_pool_check with KR_CHECK_REPAIR) every scrub_txs commits or
 * scrub_seconds seconds, whichever comes first. Changeable at any time. */
enum kr_read_policy { KR_READ_DEFAULT = 0, KR_READ_SCRUB = 1, KR_READ_CONSERVATIVE = 2 };
int kr_pool_set_read_policy(kr_pool *pool, enum kr_read_policy policy, uint64_t scrub_txs,
			    double scrub_seconds);

/* ---------------------------------------------------------------------------------------
 * Objects (reads)
 * ------------------------------------------------------------------------------------- */

/* Direct pointer to an object's committed bytes, or NULL (KR_E_MISUSE_OID) if oid does not
 * name a live object. Never write through it: changes go through a transaction. */
const void *kr_get(kr_pool *pool, kr_oid oid);
/* Size and type number given at allocation; 0 (and KR_E_MISUSE_OID) for a bad oid. */
size_t kr_size(kr_pool *pool, kr_oid oid);
uint32_t kr_type(kr_pool *pool, kr_oid oid);

/* Iteration over live objects in pool order (the root object included). Returns KR_OID_NULL
 * at the end. Do not run transactions that allocate or free while iterating. */
kr_oid kr_first(kr_pool *pool);
kr_oid kr_next(kr_pool *pool, kr_oid oid);

/* The root object: the one object an application finds without knowing an oid. Creates it
 * zero-filled (in a transaction of its own) on first call; later calls return it. If size is
 * larger than the existing root, KR_E_MISUSE_ARG. */
int kr_root(kr_pool *pool, size_t size, kr_oid *oid);

/* ---------------------------------------------------------------------------------------
 * Transactions
 * ------------------------------------------------------------------------------------- */
typedef struct kr_tx kr_tx;

/* Begins a transaction on the calling thread (binds a log lane; waits for one if all are in
 * use). Errors: KR_E_MISUSE_STATE (this thread already has one open on this pool). */
int kr_tx_begin(kr_pool *pool, kr_tx **tx);

/* Allocates a zero-filled object of size bytes (1 .. kr_pool_stat().max_alloc) with an
 * application type number. The object exists only if the transaction commits; its content
 * is written with the transaction. */
int kr_tx_alloc(kr_tx *tx, size_t size, uint32_t type, kr_oid *oid);

/* Frees an object at commit (an object allocated by the same transaction is simply never
 * created). Freeing an object twice is KR_E_MISUSE_FREED; the root object cannot be freed
 * (KR_E_MISUSE_ARG); later access to a freed object in the transaction is
 * KR_E_MISUSE_FREED. */
int kr_tx_free(kr_tx *tx, kr_oid oid);

/* Returns a writable DRAM micro-buffer for bytes [off, off+len) of the object: the bytes are
 * copied from the pool (or from the transaction's earlier changes) and logged at commit. The
 * pointer is to byte off of a buffer that mirrors the whole object, so pointer arithmetic
 * inside the requested range is valid. Only requested ranges are copied and logged.
 * NULL on error (KR_E_MISUSE_OID, KR_E_MISUSE_RANGE, KR_E_NOMEM). */
void *kr_tx_add(kr_tx *tx, kr_oid oid, size_t off, size_t len);

/* kr_tx_add(tx, oid, 0, kr_size(oid)): the whole object, writable. */
void *kr_tx_open(kr_tx *tx, kr_oid oid);

/* Read access inside a transaction: the transaction's micro-buffer for the object if it has
 * one (completed with the object's committed bytes, so the whole object reads correctly),
 * else the direct pointer of kr_get(). */
const void *kr_tx_get(kr_tx *tx, kr_oid oid);

/* Commits: the changes become durable atomically with one store fence, then the
 * transaction ends. On error the transaction is aborted (nothing reaches the pool) and
 * ended. Errors: the transaction's sticky error, KR_E_NOSPACE_LOG, KR_E_CANARY,
 * KR_E_IO_SYNC (pool enters the error state). */
int kr_tx_commit(kr_tx *tx);

/* Discards the transaction's changes and ends it. Allocations are returned. */
void kr_tx_abort(kr_tx *tx);

/* Single-object atomic update: copies len bytes from src to [off, off+len) of the object in
 * a transaction of its own. */
int kr_update(kr_pool *pool, kr_oid oid, size_t off, const void *src, size_t len);

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
 * Persistence counters. Per thread, summed over every pool the thread wrote. Deterministic:
 * tests assert on them and benchmarks report them per transaction.
 * ------------------------------------------------------------------------------------- */
struct kr_counters {
	uint64_t fences;        /* store fences issued (the persist round trips) */
	uint64_t flushed_lines; /* cache lines written back (clwb/clflushopt/clflush, NT) */
	uint64_t bytes_written; /* bytes stored to persistent memory, all kinds */
	uint64_t bytes_logged;  /* of those, bytes of redo-log lines (primary + replica) */
	uint64_t msyncs;        /* msync calls (page-cache mode) */
	uint64_t commits;       /* log commits: application transactions, plus the allocator's
				 * own (formatting a new run, reclaiming empty ones) */
};
void kr_counters_get(struct kr_counters *c);
void kr_counters_reset(void);

/* ---------------------------------------------------------------------------------------
 * Persistence recorder: a hook that sees every store, flush and fence keratin makes to
 * persistent memory, in program order, on the thread that makes it. Used by the crash
 * simulator (tests/crashsim.c) and by checking tools. One recorder for the whole process;
 * install it before opening pools and remove it after closing them.
 *   store: called after len bytes at addr were written (plain stores, cached)
 *   flush: called when [addr, addr+len) is written back (lines containing it)
 *   fence: called just before a store fence; everything flushed before it becomes durable
 *   nt:    called after a non-temporal copy of len bytes to addr (durable at the next fence)
 *   map:   called when a pool file is mapped (before any store to it), with its path
 *   unmap: called just before a pool mapping goes away
 * Any callback may be NULL.
 * ------------------------------------------------------------------------------------- */
struct kr_recorder {
	void (*map)(void *ctx, void *base, size_t len, const char *path);
	void (*unmap)(void *ctx, void *base, size_t len);
	void (*store)(void *ctx, const void *addr, size_t len);
	void (*flush)(void *ctx, const void *addr, size_t len);
	void (*fence)(void *ctx);
	void (*nt)(void *ctx, const void *addr, size_t len);
	void *ctx;
};
void kr_set_recorder(const struct kr_recorder *rec);

/* The mapping of an open pool: base address and length (for tools and the recorder). */
void *kr_pool_base(kr_pool *pool);
size_t kr_pool_mapped_size(kr_pool *pool);

/* ---------------------------------------------------------------------------------------
 * Protected regions: lazy redundancy for memory written with plain stores (Vilamb).
 *
 * For programs that do not use keratin's transactions: an existing mmap-based store, a
 * libpmemobj pool, any structure written with ordinary stores into a MAP_SHARED mapping of
 * a file. keratin keeps a CRC-32C per 4 KiB page and one XOR parity page per stripe of
 * consecutive pages in a separate sidecar file (the data file's format is never touched),
 * and a background thread brings them up to date once per period for the pages written
 * since the last pass. Stores cost nothing extra except a one-time kernel fault on the
 * first store to each page per period (about 1 us on tmpfs).
 *
 * The window: a page written in the current period is not covered (its redundancy is
 * stale) until the next pass; neither is the rest of its stripe. Everything else is:
 * a page that fails its CRC is rebuilt from its stripe, online (scrubber, emulated poison,
 * real SIGBUS) or offline (`keratin region repair`).
 *
 * Crash consistency: while attached, the region is cut into segments (2 MiB by default);
 * cold segments are write-protected ("sealed"), and the first store into one traps once
 * and durably marks it hot before the store proceeds. After a crash, cold segments'
 * redundancy is trusted and verified (damage found there is real and is repaired), hot
 * segments are rebuilt from the data; stale redundancy is never taken for valid.
 *
 * Contracts (stores that are not seen, whose pages would then look corrupt):
 *   - only stores through the attached mapping, by this process, are tracked: not
 *     write(2)/pwrite(2), not a second mapping, not another process; a forked child may
 *     read the region but a store from it is stopped with a message (SIGSEGV);
 *   - the file must not change size while attached (detected at each pass: the region
 *     stops and reports KR_E_FORMAT_MISMATCH);
 *   - with sealing (the default), kernel-mode writes into a sealed segment, such as
 *     read(2) into the mapping, fail with EFAULT: use KR_REGION_NO_SEAL for such programs;
 *   - do not store into the region while kr_region_close runs.
 * Thread safety: any number of threads may store into the region; calls on one kr_region
 * handle are serialized internally.
 * ------------------------------------------------------------------------------------- */
typedef struct kr_region kr_region;

#define KR_REGION_MPROTECT 0x01u    /* track with mprotect + SIGSEGV even if userfaultfd works */
#define KR_REGION_NO_FALLBACK 0x02u /* fail (KR_E_IO) instead of falling back to mprotect */
#define KR_REGION_MANUAL 0x04u      /* no background thread: passes run in kr_region_sync */
#define KR_REGION_NO_SEAL 0x08u     /* crash level 1: no sealing; after a crash every page's
				     * redundancy is rebuilt, none can be verified */
#define KR_REGION_FORCE_PMEM 0x10u  /* sidecar on emulated pmem (tmpfs): flush+fence, no msync */
#define KR_REGION_OFFLINE 0x20u     /* tools: no tracking, no thread; nobody writes the file
				     * meanwhile (the mapping is read-only; repairs go through
				     * the file); creates the sidecar unless NO_CREATE/READONLY */
#define KR_REGION_READONLY 0x40u    /* with OFFLINE: change nothing, only report (check) */
#define KR_REGION_NO_CREATE 0x80u   /* fail if the sidecar does not exist yet */

struct kr_region_opts {
	const char *sidecar;       /* NULL: the data file's path + ".krs" */
	uint32_t period_ms;        /* start-to-start period of the background pass; 0: 1000 */
	/* Geometry, used when the sidecar is created (0: default); an existing sidecar keeps
	 * its own, and a different nonzero value is KR_E_FORMAT_MISMATCH. */
	uint32_t stripe_pages;     /* data pages per stripe (+1 parity page), 2..64; 0: 4 */
	uint32_t batch_pages;      /* pages per background batch; 0: 512 */
	uint32_t segment_pages;    /* pages per sealable segment, a multiple of stripe_pages;
				    * 0: 512 (2 MiB), raised if the file has over 16384 */
	uint32_t scrub_kib_per_s;  /* background verification rate of clean pages; 0: off */
	unsigned flags;            /* KR_REGION_* */
	/* Called now and then during long verifications and rebuilds (open, check). */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
};

/* Opens the file at path, maps it MAP_SHARED read/write itself, and protects it: creates
 * the sidecar (computing all redundancy) or opens it and recovers (see above). *base and
 * *len receive the mapping (the whole file; its size must be a nonzero multiple of 4096).
 * Errors: KR_E_MISUSE_ARG, KR_E_IO_* (KR_E_IO_BUSY: attached elsewhere), KR_E_IO (the
 * kernel cannot track writes; the message says what is missing), KR_E_FORMAT_* (damaged or
 * foreign sidecar), KR_E_CORRUPT_REGION (open with damage that could not be repaired:
 * the region is attached anyway; kr_region_check reports which pages), KR_E_NOMEM. */
int kr_region_open(const char *path, const struct kr_region_opts *opts, kr_region **region,
		   void **base, size_t *len);
/* Protects the application's own mapping [base, base + len) of the file at path, which must
 * be one read/write MAP_SHARED mapping of the whole file from offset 0 (for a libpmemobj
 * pool: base = the PMEMobjpool pointer, len = the file size). Same errors as
 * kr_region_open, and KR_E_MISUSE_ARG if the range is not such a mapping. */
int kr_region_attach(const char *path, void *base, size_t len, const struct kr_region_opts *opts,
		     kr_region **region);
/* Brings all redundancy up to date (final pass), marks the sidecar CLEAN, stops tracking;
 * unmaps the file if kr_region_open mapped it (an attached mapping stays, writable).
 * Frees the handle in every case. In a forked child it only frees the handle. */
int kr_region_close(kr_region *region);

/* Runs one full pass now: every store that completed before the call is covered when it
 * returns. */
int kr_region_sync(kr_region *region);

struct kr_region_report {
	uint64_t pages_checked;     /* pages whose CRC was compared */
	uint64_t pages_bad;         /* of those, pages that failed it */
	uint64_t pages_repaired;    /* failing pages rebuilt from their stripe */
	uint64_t pages_unverifiable;/* pages in the window (written since the last pass, or in a
				     * segment hot at a crash): not judged */
	uint64_t stripes_checked;   /* stripes whose parity was compared (KR_REGION_CHECK_PARITY) */
	uint64_t parity_rebuilt;    /* parity pages that disagreed with sound data, rewritten */
	uint64_t first_bad_page;    /* page index of the first unrepaired page (if any) */
};
#define KR_REGION_CHECK_REPAIR 0x1u /* rebuild failing pages (and parity) where possible */
#define KR_REGION_CHECK_PARITY 0x2u /* also compare each clean stripe's parity with its data */
/* Verifies pages [first, first + count) (count 0: to the end) against their CRCs, skipping
 * those in the window. Returns KR_OK if every judged page is sound (or was repaired),
 * KR_E_CORRUPT_REGION otherwise; *rep (may be NULL) is filled in both cases. */
int kr_region_check(kr_region *region, uint64_t first, uint64_t count, unsigned flags,
		    struct kr_region_report *rep);

struct kr_region_stats {
	uint64_t npages, nstripes, nsegments;
	uint32_t stripe_pages, segment_pages, batch_pages, period_ms;
	int tracking;             /* 1 userfaultfd, 2 mprotect, 0 offline */
	int failed;               /* 0, or the error that stopped the region (e.g. resized) */
	uint64_t passes;          /* completed background (or sync) passes */
	uint64_t hot_segments;    /* segments currently hot (unsealed) */
	uint64_t window_pages;    /* pages written since the last pass (not yet covered) */
	/* The last pass. */
	uint64_t last_dirty_pages, last_stripes, last_pass_ns, last_cpu_ns, last_harvest_ns;
	uint64_t last_wp_faults;  /* minor faults of the process during the last period */
	uint64_t last_pass_end_ns;/* CLOCK_MONOTONIC */
	/* Since attach. */
	uint64_t dirty_pages, stripes, pass_ns, cpu_ns, harvest_ns;
	uint64_t max_pass_ns;     /* the longest pass: time to coverage <= period + this */
	uint64_t unseals, seals, scrubbed_pages, repaired_pages, bad_pages;
	uint64_t recovered_pages; /* pages rebuilt at attach (hot at a crash, or a new sidecar) */
	uint64_t stale_at_recovery; /* of those, pages whose old CRC no longer matched */
};
int kr_region_stats(kr_region *region, struct kr_region_stats *st);

/* Emulated poison in a protected region: the page at off loses its content (through the
 * file) and becomes inaccessible; the next access faults and is repaired from its stripe
 * if the stripe is covered. For tests and tools. */
int kr_region_inject_poison(kr_region *region, uint64_t off);

/* Sidecar status of a region file without attaching (for `keratin region status`; works
 * while another process has it attached). */
struct kr_region_info {
	uint32_t state;            /* 1 CLEAN, 2 ACTIVE (attached now, or died attached) */
	uint32_t sealed;           /* the last session sealed cold segments (crash level 2) */
	uint64_t data_size, npages, nstripes, nsegments, epoch;
	uint32_t stripe_pages, segment_pages, batch_pages, period_ms;
	uint64_t hot_segments;     /* segments marked hot in the sidecar */
	uint64_t covered_pages;    /* pages whose redundancy is trusted (CLEAN: all) */
	uint64_t passes, last_pass_end_ns /* CLOCK_REALTIME */, last_pass_ns, last_dirty_pages;
	int32_t pid;               /* the process attached (or last attached) */
	int attached;              /* another process holds the region now */
};
int kr_region_info(const char *path, const char *sidecar, struct kr_region_info *info);

/* ---------------------------------------------------------------------------------------
 * Single-trip hash map (STPS): a persistent key-value map whose every update costs one
 * persist round trip (one fence), from Cohen, Friedman and Larus (OOPSLA'17).
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
 * ------------------------------------------------------------------------------------- */
typedef struct kr_hmap kr_hmap;

struct kr_hmap_opts {
	uint64_t size;         /* file size in bytes, >= 64 KiB */
	uint32_t entry_lines;  /* cache lines per entry, 1..32; 0: 4 (200 bytes of key + value) */
	unsigned flags;        /* KR_OPEN_FORCE_PMEM, KR_OPEN_PREFAULT, KR_HMAP_TWO_FENCES,
				* KR_HMAP_PROTECT (the same flags for kr_hmap_open) */
};
/* Benchmarks only: commit the classic way, payload then a fence then the marks then a
 * second fence (the comparison the single-trip design is measured against). Same format. */
#define KR_HMAP_TWO_FENCES 0x100u
/* Protects the map's pages with CRCs and parity kept lazily in a sidecar (path + ".krs"):
 * the map's mapping is attached as a protected region (see "Protected regions" below, with
 * its defaults: 1 s period, 4+1 stripes, sealing) before the map is read, so a damaged or
 * poisoned page is repaired at open, at its next access or by kr_region_check on
 * kr_hmap_region(map); a crash leaves nothing stale trusted. Give it at every open (an open
 * without it leaves the sidecar stale, and the next protected open refuses it). Create
 * deletes a sidecar already at that path. */
#define KR_HMAP_PROTECT 0x200u

/* Creates a map file at path (which must not exist) and opens it. Errors: KR_E_MISUSE_ARG,
 * KR_E_IO_EXISTS, KR_E_IO_*. */
int kr_hmap_create(const char *path, const struct kr_hmap_opts *opts, kr_hmap **map);
/* Opens a map, rebuilding its index from the log: the newest complete version of each key
 * wins, torn entries and incomplete transactions are dropped. Errors: KR_E_IO_*,
 * KR_E_IO_BUSY (open elsewhere), KR_E_FORMAT_*, KR_E_CORRUPT_HEADER, KR_E_NOMEM,
 * KR_E_MISUSE_ARG (KR_HMAP_PROTECT given for an unprotected map or left out for a
 * protected one), KR_E_CORRUPT_REGION (a protected map with damage its redundancy
 * cannot repair). */
int kr_hmap_open(const char *path, unsigned flags, kr_hmap **map);
/* Frees the handle; everything acknowledged is already durable. With KR_HMAP_PROTECT, the
 * region's final pass brings the redundancy up to date first. */
int kr_hmap_close(kr_hmap *map);
/* The protected region of a map opened with KR_HMAP_PROTECT (NULL otherwise), for
 * kr_region_check, _sync, _stats and _inject_poison. Do not close it. */
struct kr_region *kr_hmap_region(kr_hmap *map);

/* Inserts or replaces. KR_E_TOO_BIG if key + value do not fit an entry, KR_E_MISUSE_ARG for
 * a key of 0 or over 128 bytes, KR_E_NOSPACE when a new key would take one of the last
 * entries, which are kept (1/8 of the map, at most 256) so that updates and deletes always
 * find room. Every change writes a new entry and frees the old one. */
int kr_hmap_put(kr_hmap *map, const void *key, size_t klen, const void *val, size_t vlen);
/* Deletes: 1 if the key was there, 0 if not (nothing written), or an error. */
int kr_hmap_del(kr_hmap *map, const void *key, size_t klen);
/* Looks up: 1 and the value (up to cap bytes copied, its length in *vlen), 0 if absent. */
int kr_hmap_get(kr_hmap *map, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
uint64_t kr_hmap_count(kr_hmap *map);
/* Calls fn for every key in no particular order; a nonzero return stops and is returned.
 * Writers of other threads wait meanwhile. fn may call kr_hmap_get; a change of the map
 * from fn, or a nested foreach, fails with KR_E_MISUSE_STATE. */
int kr_hmap_foreach(kr_hmap *map,
		    int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen),
		    void *ctx);

/* Transactions: up to 255 puts and deletes of distinct keys, all or nothing, one fence. */
typedef struct kr_hmap_tx kr_hmap_tx;
int kr_hmap_tx_begin(kr_hmap *map, kr_hmap_tx **tx);
int kr_hmap_tx_put(kr_hmap_tx *tx, const void *key, size_t klen, const void *val, size_t vlen);
int kr_hmap_tx_del(kr_hmap_tx *tx, const void *key, size_t klen);
/* Writes every change (one fence) and frees tx; on error nothing changed. */
int kr_hmap_tx_commit(kr_hmap_tx *tx);
void kr_hmap_tx_abort(kr_hmap_tx *tx);

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
int kr_hmap_stats(kr_hmap *map, struct kr_hmap_stats *st);

#ifdef __cplusplus
}
#endif
#endif
