/*
 * keratin_common.h - what every part of libkeratin shares: the release version, KR_API,
 * error codes and messages, the KR_OPEN_* flags and durability modes, the kinds of file
 * keratin makes, and the persistence counters and recorder (every part writes persistent
 * memory through the same layer).
 *
 * Each part's header includes it (keratin.h, keratin_region.h, keratin_hmap.h,
 * keratin_fs.h); a program includes the part's header, not this one.
 */
#ifndef KERATIN_COMMON_H
#define KERATIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release version, the one source of every version string (the CLI's, keratin.pc's,
 * the CMake package's). The library's file is named by the ABI number alone
 * (libkeratin.so.1): docs/ABI.md. */
#define KERATIN_VERSION_MAJOR 0
#define KERATIN_VERSION_MINOR 1
#define KERATIN_VERSION_PATCH 0

/* Marks what the shared library exports. It is built with -fvisibility=hidden, so the
 * functions declared with KR_API in the public headers are its whole ABI (a test compares
 * the two lists). */
#if defined(__GNUC__)
#define KR_API __attribute__((visibility("default")))
#else
#define KR_API
#endif

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
	KR_E_MISUSE_SHARED = -0x107, /* debug mode: the object is open for write in another
				      * live transaction */

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
KR_API const char *kr_strerror(int err);
/* The calling thread's last error code and its detailed message (file, offset, errno). */
KR_API int kr_errcode(void);
KR_API const char *kr_errmsg(void);
/* Records code and a printf-style message as the calling thread's last error and returns
 * code: for libraries built on keratin (libkeratin-map) to report through the same channel. */
KR_API int kr_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------------------------
 * Opening: durability modes and flags (create and open of every part take KR_OPEN_*)
 * ------------------------------------------------------------------------------------- */
enum kr_mode { KR_MODE_DAX = 1, KR_MODE_PAGECACHE = 2, KR_MODE_EMULATED = 3 };

#define KR_OPEN_FORCE_PMEM 0x1u /* treat the mapping as persistent memory (tmpfs, tests) */
#define KR_OPEN_PREFAULT 0x2u   /* map every page at open (no first-touch faults later; writable
                                  * where the pool is memory, readable in page-cache mode) */
/* Inspect without changing a byte: the file is opened read-only (a mode 0444 file will do)
 * under a shared lock (refused with KR_E_IO_BUSY while a writer has it open) and mapped
 * private, copy-on-write (kr_pool_stat: readonly = 1; mode is the one a read-write open
 * would get). Recovery after a crash and the repair of
 * listed bad blocks still run, in the private view only, so reads and kr_pool_check see the
 * recovered state while the file and its bad-block list stay as they were; kr_pool_stat
 * reports what an ordinary open would repair. Transactions, KR_CHECK_REPAIR and poison
 * injection return KR_E_MISUSE_STATE. */
#define KR_OPEN_READONLY 0x4u
/* The debug mode (see "Debug mode" at the top); the same as KERATIN_DEBUG_PROTECT=1. Ignored
 * with KR_OPEN_READONLY. */
#define KR_OPEN_DEBUG 0x8u

/* The kinds of file keratin makes, told apart by their first bytes (kr_file_kind). */
enum kr_file_kind {
	KR_FILE_UNKNOWN = 0, /* none of keratin's (or a directory, or shorter than 8 bytes) */
	KR_FILE_POOL,        /* an object pool (kr_pool_create) */
	KR_FILE_FS,          /* a keratin-fs pool (kr_fs_mkfs, keratin_fs.h) */
	KR_FILE_HMAP,        /* a single-trip hash map (kr_hmap_create, keratin_hmap.h) */
	KR_FILE_SIDECAR,     /* a protected region's sidecar (keratin_region.h) */
	KR_FILE_REGION,      /* another file whose sidecar path + ".krs" exists: a region */
	KR_FILE_LIBPMEMOBJ,  /* not keratin's: a pool of PMDK's libpmemobj, named so that a
			      * program pointed at one by mistake can say what it is */
};
/* Says which kind path is without opening it as any (nothing is recovered or changed).
 * KR_OK with KR_FILE_UNKNOWN for a file of no keratin kind; KR_E_IO_* if it cannot be read. */
KR_API int kr_file_kind(const char *path, enum kr_file_kind *kind);

/* ---------------------------------------------------------------------------------------
 * Persistence counters. Per thread, summed over every pool the thread wrote. Deterministic:
 * tests assert on them and benchmarks report them per transaction.
 * ------------------------------------------------------------------------------------- */
struct kr_counters {
	uint64_t fences;        /* store fences issued (the persist round trips) */
	uint64_t flushed_lines; /* cache lines written back (clwb/clflushopt/clflush, NT) */
	uint64_t bytes_written; /* bytes stored to persistent memory, all kinds */
	uint64_t bytes_logged;  /* of those, bytes of redo-log lines (primary + replica) */
	uint64_t msyncs;        /* sync round trips in page-cache mode: msync or fdatasync
				 * calls, one per fence at most */
	uint64_t commits;       /* log commits: application transactions, plus the allocator's
				 * own (reclaiming empty runs) */
};
KR_API void kr_counters_get(struct kr_counters *c);
KR_API void kr_counters_reset(void);

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
KR_API void kr_set_recorder(const struct kr_recorder *rec);

#ifdef __cplusplus
}
#endif

#endif
