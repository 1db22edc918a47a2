/*
 * keratin_region.h - protected regions: lazy redundancy for memory written with plain
 * stores (Vilamb).
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
 *
 * Part of libkeratin (pkg-config keratin). Errors are keratin.h's codes, details in
 * kr_errmsg().
 */
#ifndef KERATIN_REGION_H
#define KERATIN_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "keratin_common.h" /* errors (enum kr_err, kr_errmsg), KR_API, KR_OPEN_* flags */

#ifdef __cplusplus
extern "C" {
#endif

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

/* Begins with struct_size, like every option struct (keratin.h, kr_create_opts); a NULL
 * options pointer means every default. */
struct kr_region_opts {
	uint32_t struct_size;      /* sizeof(struct kr_region_opts) */
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
#define KR_REGION_OPTS_INIT {.struct_size = sizeof(struct kr_region_opts)}

/* Opens the file at path, maps it MAP_SHARED read/write itself, and protects it: creates
 * the sidecar (computing all redundancy) or opens it and recovers (see above). *base and
 * *len receive the mapping (the whole file; its size must be a nonzero multiple of 4096).
 * Errors: KR_E_MISUSE_ARG (also a wrong struct_size), KR_E_IO_* (KR_E_IO_BUSY: attached
 * elsewhere), KR_E_IO (the kernel cannot track writes; the message says what is missing),
 * KR_E_FORMAT_* (damaged or foreign sidecar), KR_E_CORRUPT_REGION (open with damage that
 * could not be repaired: the region is attached anyway; kr_region_check reports which
 * pages), KR_E_NOMEM. */
KR_API int kr_region_open(const char *path, const struct kr_region_opts *opts, kr_region **region,
		   void **base, size_t *len);
/* Protects the application's own mapping [base, base + len) of the file at path, which must
 * be one read/write MAP_SHARED mapping of the whole file from offset 0 (for a libpmemobj
 * pool: base = the PMEMobjpool pointer, len = the file size). Same errors as
 * kr_region_open, and KR_E_MISUSE_ARG if the range is not such a mapping. */
KR_API int kr_region_attach(const char *path, void *base, size_t len, const struct kr_region_opts *opts,
		     kr_region **region);
/* Brings all redundancy up to date (final pass), marks the sidecar CLEAN, stops tracking;
 * unmaps the file if kr_region_open mapped it (an attached mapping stays, writable).
 * Frees the handle in every case. In a forked child it only frees the handle. */
KR_API int kr_region_close(kr_region *region);

/* Runs one full pass now: every store that completed before the call is covered when it
 * returns. */
KR_API int kr_region_sync(kr_region *region);

struct kr_region_report {
	uint64_t pages_checked;     /* pages whose CRC was compared */
	uint64_t pages_bad;         /* of those, pages that failed it */
	uint64_t pages_repaired;    /* failing pages rebuilt from their stripe */
	uint64_t pages_unverifiable;/* pages in the window (written since the last pass, or in a
				     * segment hot at a crash): not judged */
	uint64_t stripes_checked;   /* stripes whose parity was compared (KR_REGION_CHECK_PARITY) */
	uint64_t parity_rebuilt;    /* parity pages that disagreed with sound data, rewritten */
	uint64_t first_bad_page;    /* page index of the first unrepaired data page (if any) */
	/* Damage in the sidecar's own redundancy, counted apart from data pages. */
	uint64_t parity_bad;        /* parity pages that disagreed with sound data */
	uint64_t crc_pages_bad;     /* sidecar pages of stored checksums failing their own CRC;
				     * their pages are judged by stripe parity instead */
	uint64_t crcs_rebuilt;      /* checksums recomputed from data that parity vouched for */
	/* The first damage not repaired: KR_REGION_BAD_*, its index (data page, stripe, or page
	 * of the checksum array) and its offset (in the data file for a data page, in the
	 * sidecar for a parity or checksum page). */
	int first_bad_kind;
	uint64_t first_bad_index, first_bad_off;
};
#define KR_REGION_BAD_NONE 0
#define KR_REGION_BAD_DATA 1   /* a data page (first_bad_page) */
#define KR_REGION_BAD_PARITY 2 /* a stripe's parity page in the sidecar */
#define KR_REGION_BAD_CRCS 3   /* a page of stored checksums in the sidecar */
#define KR_REGION_CHECK_REPAIR 0x1u /* rebuild failing pages (and parity) where possible */
#define KR_REGION_CHECK_PARITY 0x2u /* also compare each clean stripe's parity with its data */
/* Verifies pages [first, first + count) (count 0: to the end) against their CRCs, skipping
 * those in the window. Returns KR_OK if every judged page is sound (or was repaired),
 * KR_E_CORRUPT_REGION otherwise; *rep (may be NULL) is filled in both cases. */
KR_API int kr_region_check(kr_region *region, uint64_t first, uint64_t count, unsigned flags,
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
KR_API int kr_region_stats(kr_region *region, struct kr_region_stats *st);

/* Emulated poison in a protected region: the page at off loses its content (through the
 * file) and becomes inaccessible; the next access faults and is repaired from its stripe
 * if the stripe is covered. For tests and tools. */
KR_API int kr_region_inject_poison(kr_region *region, uint64_t off);

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
KR_API int kr_region_info(const char *path, const char *sidecar, struct kr_region_info *info);

#ifdef __cplusplus
}
#endif
#endif
