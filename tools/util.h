/*
 * util.h - small helpers shared by the programs built around libkeratin: the keratin tool,
 * the demo and the benchmark. Parsing of sizes and counts, human-readable byte counts, the
 * creation progress bar, consistent usage and library error messages, monotonic time and a
 * scratch directory on tmpfs. Nothing here knows a pool's format; it only uses keratin.h.
 */
#ifndef KR_TOOLS_UTIL_H
#define KR_TOOLS_UTIL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"

/* Exit status for bad command lines, as most Unix tools use; library failures exit 1. */
#define UTIL_EXIT_USAGE 2

/* "64M" -> 67108864. Decimal digits, then optionally K, M, G or T (powers of 1024),
 * optionally followed by "iB" or "B". Returns 0, or -1 if s is not such a size or overflows. */
int util_parse_size(const char *s, uint64_t *out);
/* A plain decimal number in [min, max]. Returns 0, or -1 if s is not one. */
int util_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* "64.0 MiB", "512 B": bytes in binary units with one decimal. buf needs UTIL_HUMAN_LEN. */
#define UTIL_HUMAN_LEN 24
const char *util_human(uint64_t bytes, char *buf);

/* "dax", "page cache", "emulated". */
const char *util_mode_name(enum kr_mode mode);

/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t util_now_ns(void);

/* Progress bar for kr_create_opts.progress: pass util_progress_cb as the callback and the
 * struct as its context. It draws on stderr only when stderr is a terminal and the work has
 * already taken a moment, redraws at most ten times a second, and util_progress_end()
 * erases it, so a quick or redirected run prints nothing. */
struct util_progress {
	const char *label;
	int tty;
	uint64_t start_ns;
	uint64_t last_draw_ns;
	int drawn;
};
void util_progress_init(struct util_progress *p, const char *label);
void util_progress_cb(void *ctx, uint64_t done, uint64_t total);
void util_progress_end(struct util_progress *p);

/* Command-line errors, one line on stderr and a hint:
 *     PROG: MESSAGE
 *     Try 'PROG --help'.
 * Returns UTIL_EXIT_USAGE so callers can write "return util_usage_error(...)". */
int util_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long() over long options only (plus -h), with the '?' and ':' cases reported through
 * util_usage_error(). Returns the option's val, -1 after the last option, or '?' once an
 * error was printed. Reset optind = 1 before the first call for a new argv. */
int util_getopt(const char *prog, int argc, char **argv, const struct option *longopts);

/* A library call failed with rc: prints "PROG: WHAT: message" with the thread's detailed
 * message (kr_errmsg()) and returns 1, the exit status for library errors. */
int util_lib_error(const char *prog, const char *what, int rc);

/* Makes a fresh directory "PREFIX.XXXXXX" under /dev/shm (or /tmp if there is none) and
 * writes its path to dir. *tmpfs tells whether it is on tmpfs, where a pool must be opened
 * with KR_OPEN_FORCE_PMEM to be treated as persistent memory. Returns 0 or -1 (errno). */
int util_scratch_dir(const char *prefix, char *dir, size_t dirlen, int *tmpfs);
/* Whether path lies on a tmpfs file system (0 if it cannot tell). */
int util_is_tmpfs(const char *path);

#endif
