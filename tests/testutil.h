/*
 * testutil.h - small helpers shared by every keratin test: failure reporting, a seeded
 * PRNG (so every random test can be replayed from the seed it prints), pool paths in
 * /dev/shm that are removed when the creating process exits, the iteration-count scaling
 * that keeps sanitizer builds inside their time budget, CRC-32C as the on-media format
 * defines it, and raw file access for tests that damage pool files on purpose.
 */
#ifndef KR_TESTUTIL_H
#define KR_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <string.h>

#include "keratin.h"

/* ---- failure reporting ------------------------------------------------------------- */

/* Prints "FAIL file:line: message" and exits with status 1. */
noreturn void tu_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define TU_FAIL(...) tu_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define TU_ASSERT(cond, fmt, ...)                                                          \
	do {                                                                               \
		if (!(cond))                                                               \
			tu_fail_at(__FILE__, __LINE__, "assertion '%s' failed: " fmt, #cond,   \
				   ##__VA_ARGS__);                                         \
	} while (0)
/* rc must be KR_OK; otherwise fail with the library's own message. */
#define TU_OK(expr)                                                                        \
	do {                                                                               \
		int tu_rc_ = (expr);                                                       \
		if (tu_rc_ != KR_OK)                                                       \
			tu_fail_at(__FILE__, __LINE__, "%s returned %d (%s): %s", #expr,   \
				   tu_rc_, kr_strerror(tu_rc_), kr_errmsg());              \
	} while (0)

/* Assertions of values, each failing with both sides printed. */
#define TU_CHECK(cond) TU_ASSERT(cond, "%s", "")
#define TU_EQ(a, b) tu_cmp_at(__FILE__, __LINE__, #a " == " #b, (long long)(a), (long long)(b), 1)
#define TU_NE(a, b) tu_cmp_at(__FILE__, __LINE__, #a " != " #b, (long long)(a), (long long)(b), 0)
#define TU_MEM_EQ(a, b, n) TU_ASSERT(memcmp((a), (b), (n)) == 0, "%zu bytes differ", (size_t)(n))
#define TU_MEM_NE(a, b, n) TU_ASSERT(memcmp((a), (b), (n)) != 0, "%zu bytes equal", (size_t)(n))
#define TU_NOT_NULL(p) TU_ASSERT((p) != NULL, "%s", "")
#define TU_NULL(p) TU_ASSERT((p) == NULL, "%s", "")
#define TU_PTR_EQ(a, b) TU_ASSERT((const void *)(a) == (const void *)(b), "%p != %p", (const void *)(a), \
				  (const void *)(b))
/* Fails "what: a vs b" unless a == b (eq) or a != b (!eq). */
void tu_cmp_at(const char *file, int line, const char *what, long long a, long long b, int eq);

/* ---- cases ---------------------------------------------------------------------------- */

/* A program of several cases: each runs fn(&state) between setup and teardown (either may
 * be NULL; they return 0 on success), in order, announced as it starts and reported as it
 * passes. A failing case ends the program (tu_fail_at), as in every other test here. */
struct tu_case {
	const char *name;
	void (*fn)(void **state);
	int (*setup)(void **state);
	int (*teardown)(void **state);
};
#define TU_CASE(fn, setup, teardown) {#fn, fn, setup, teardown}
#define TU_RUN_CASES(group, cases) tu_run_cases(group, cases, sizeof(cases) / sizeof((cases)[0]))
/* Returns 0 (every case passed). */
int tu_run_cases(const char *group, const struct tu_case *cases, size_t n);

/* ---- configuration ------------------------------------------------------------------ */

/* True when the test binary was built with ASan or TSan (they slow everything 3-10x). */
bool tu_sanitized(void);

/* Runs fn(arg) in a forked child that then exits 0; its stderr goes into err (cap bytes,
 * NUL-terminated). Returns the child's wait status. For tests of what dies or reports. */
int tu_run_child(void (*fn)(void *), void *arg, char *err, size_t cap);
/* base * KR_TEST_SCALE (default 1.0), times 0.25 in an ASan build and 0.5 in a TSan one,
 * never below min. */
unsigned tu_scaled(unsigned base, unsigned min);
/* KR_TEST_SEED from the environment, else dflt; printed so a failure can be replayed. */
uint64_t tu_seed(const char *test, uint64_t dflt);

/* ---- PRNG (xoshiro256**, seeded through splitmix64) --------------------------------- */

struct tu_rng {
	uint64_t s[4];
};
uint64_t tu_splitmix64(uint64_t *state);
void tu_rng_seed(struct tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(struct tu_rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t tu_rng_below(struct tu_rng *r, uint64_t n);
/* Uniform in [lo, hi] inclusive. */
uint64_t tu_rng_range(struct tu_rng *r, uint64_t lo, uint64_t hi);
/* Log-uniform in [lo, hi] inclusive (every power-of-two band equally likely); lo >= 1. */
uint64_t tu_rng_logu(struct tu_rng *r, uint64_t lo, uint64_t hi);
/* True with probability num/den. */
bool tu_rng_chance(struct tu_rng *r, unsigned num, unsigned den);
/* Fills buf with bytes derived only from seed (so a model can be rebuilt from the seed). */
void tu_fill(void *buf, size_t len, uint64_t seed);

/* ---- pool files ---------------------------------------------------------------------- */

/* Where test pools and crash images go: $KR_TEST_DIR, else /dev/shm. ctest points it at
 * a tmpfs with huge pages where it can mount one (tests/test-dir.sh): in a virtual
 * machine each first touch of a 4 KiB tmpfs page can cost tens of microseconds, and the
 * crash tests touch every page of thousands of fresh images. */
const char *tu_pool_dir(void);
/* Writes "DIR/kr-<tag>-<pid>-<n>.pool" (DIR: tu_pool_dir) into buf (>= 128 bytes; paths
 * are cut to fit), removes any stale
 * file of that name and registers the path to be unlinked when this process exits
 * normally (forked children that _exit() leave it alone), with PATH.krs (the sidecar a
 * protected region gets by default). */
void tu_pool_path(char *buf, size_t n, const char *tag);
/* Unlinks every registered path now (also run at exit). */
void tu_cleanup_paths(void);

/* The protection level KR_TEST_PROTECTION names (none, ml, mlp, full; default full). */
unsigned tu_protection(void);
/* KR_OPEN_FORCE_PMEM, or 0 with KR_TEST_PAGECACHE=1: pools then run in page-cache mode
 * (each fence a sync of what it flushed, homes written back lazily), tmpfs included. */
unsigned tu_map_flags(void);
/* kr_pool_create with tu_map_flags(), the given geometry (0 = library default) and the
 * protection level of tu_protection(). */
int tu_create(const char *path, uint64_t size, uint32_t rows, uint32_t nlanes, uint32_t lane_kib,
	      kr_pool **pool);
/* kr_pool_open with tu_map_flags(). */
int tu_open(const char *path, kr_pool **pool);
/* A new pool (tu_create, rows as there, default lanes) holding one object of size bytes,
 * all 0x11, committed; *oid names it. */
kr_pool *tu_pool_with_object(const char *path, uint64_t pool_size, uint32_t rows, size_t size, kr_oid *oid);
/* One transaction allocating size bytes of type 7; fails the test unless the new object
 * reads as zeros (free space that held data must not show through). */
kr_oid tu_alloc_zeros(kr_pool *pool, size_t size);

/* ---- the deep check ------------------------------------------------------------------
 * kr_pool_check_deep (the ordinary pass plus the allocator, space, log and replica
 * invariants) on the pools tests leave behind. */

/* On an open, quiet pool: 0 if sound, else 1 with what was found in why. */
int tu_deep_check(kr_pool *pool, char *why, size_t whylen);
/* The same, failing the test unless sound; when names the moment in the message. */
void tu_deep_check_at(const char *file, int line, kr_pool *pool, const char *when);
#define TU_DEEP_CHECK(pool, when) tu_deep_check_at(__FILE__, __LINE__, (pool), (when))
/* Opens the closed pool at path read-only (nothing is written) and deep-checks it. */
void tu_deep_check_file_at(const char *file, int line, const char *path, const char *when);
#define TU_DEEP_CHECK_FILE(path, when) tu_deep_check_file_at(__FILE__, __LINE__, (path), (when))
/* How many deep checks this process has run (tests print it, so a silent zero shows). */
unsigned tu_deep_checks(void);

/* ---- the end check: the deepest check of each kind on what a test leaves behind ---------
 * Dispatched on kr_file_kind, read-only: a pool gets kr_pool_check_deep; a keratin-fs pool
 * kr_fs_check on an inspection mount (KR_FS_MOUNT_CHECK), the repairs that mount needed
 * counting as problems; a protected region (data file + sidecar) the region check of every
 * page CRC and stripe parity; a map a read-only open (its recovery) and, with a sidecar, the
 * region check. The file must be closed (not open in this process). */

/* 0 if sound, 1 with what was found in why, -1 for a file of no keratin kind (unchecked). */
int tu_end_check(const char *path, char *why, size_t whylen);
/* The same, failing the test unless sound. */
void tu_end_check_at(const char *file, int line, const char *path, const char *when);
#define TU_END_CHECK(path, when) tu_end_check_at(__FILE__, __LINE__, (path), (when))
/* Every file this process registered with tu_pool_path that still exists (tests end with
 * it); prints and returns how many were checked. A file damaged on purpose must be repaired
 * or removed before. */
unsigned tu_end_check_all_at(const char *file, int line, const char *when);
#define TU_END_CHECK_ALL(when) tu_end_check_all_at(__FILE__, __LINE__, (when))

/* ---- raw files and checksums --------------------------------------------------------- */

/* CRC-32C (Castagnoli) as layout.h uses it: crc32_iscsi(buf, len, ~0) ^ ~0. */
uint32_t tu_crc32c(const void *buf, size_t len);
/* Recomputes the CRC of a 256-byte pool header in memory (bytes 0..251, stored at 252). */
void tu_hdr_fix_crc(void *hdr);
/* Whole-file helpers; they fail the test on I/O errors. Returned buffers are malloc'd. */
void *tu_read_file(const char *path, size_t *len);
/* Whether every byte of the file has storage allocated (st_blocks covers st_size): a
 * store to a mapping of it can then never fault for lack of space. */
bool tu_fully_allocated(const char *path);
void tu_write_file(const char *path, const void *buf, size_t len);
void tu_pread(const char *path, void *buf, size_t len, uint64_t off);
void tu_pwrite(const char *path, const void *buf, size_t len, uint64_t off);
/* Changes one byte of a file through write(2): damage no mapping of it sees being made. */
void tu_flip_byte(const char *path, uint64_t off);
uint64_t tu_file_size(const char *path);
/* The 512-byte device sector holding byte off of the file (FIEMAP): 0, or -1 where the file
 * system cannot map blocks (tmpfs). For tests that play the kernel's bad-block list. */
int tu_device_sector(const char *path, uint64_t off, uint64_t *sector);

/* Monotonic seconds, for printing how long phases took (never asserted on). */
double tu_now(void);

/* ---- a watchdog for tests that run many cases ------------------------------------------
 * After tu_case_watch(prefix, fatal), a case (between tu_case_begin and tu_case_end) that
 * outlives its timeout writes "<prefix><case name>" to stderr and exits with status 3; with
 * fatal, so does one that dies of a fatal signal, a sanitizer report or an exit (a TU_FAIL),
 * before dying as it would have. Call it before any pool is opened, so that keratin's fault
 * handlers chain to these for faults outside a pool. */
void tu_case_watch(const char *prefix, bool fatal);
/* Names the case now running (printf-style) and arms its timeout, in seconds. */
void tu_case_begin(unsigned timeout, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tu_case_end(void);
/* The name of the case running, or of the last one. */
const char *tu_case_name(void);

/* Checks that err is one of the codes declared in keratin.h (every test that feeds the
 * library garbage requires a clean, known code back). */
bool tu_known_err(int err);
/* Every code declared in keratin.h except KR_OK, and how many there are. */
extern const int tu_all_errs[];
extern const size_t tu_n_errs;

#endif
