/*
 * util.h - small helpers shared by the programs built around libkeratin: the keratin tool,
 * the demo and the benchmark. Parsing of sizes and counts, human-readable byte counts, the
 * progress bar and the "still working" note, consistent usage and library error messages,
 * monotonic time, a seeded random generator and a scratch directory on tmpfs. Nothing here
 * knows a pool's format; it only uses keratin.h.
 */
#ifndef KR_TOOLS_UTIL_H
#define KR_TOOLS_UTIL_H

#include <getopt.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "keratin.h"

/* Exit status for bad command lines, as most Unix tools use; library failures exit 1. */
#define UTIL_EXIT_USAGE 2

/* The number at the start of s: decimal digits, or 0x and hex digits; *end points past
 * it. Returns 0, or -1 if s does not start with one or it overflows. */
int util_parse_number(const char *s, uint64_t *out, char **end);

/* "64M" -> 67108864. Decimal digits (or 0x and hex digits: "0x5c3000"), then optionally K,
 * M, G or T (powers of 1024), optionally followed by "iB" or "B" (after hex digits a B is a
 * digit). Returns 0, or -1 if s is not such a size or overflows. Used for offsets too. */
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

/* Seeded pseudo-random numbers (splitmix64): the same seed gives the same sequence on every
 * machine, so a fault injected with --seed S can be injected again. util_seed() is a seed
 * for runs that were given none (time and pid); print it so the run can be repeated. */
uint64_t util_rand64(uint64_t *state);
uint64_t util_rand_below(uint64_t *state, uint64_t n); /* uniform in [0, n), n > 0 */
void util_rand_bytes(uint64_t *state, void *buf, size_t len);
uint64_t util_seed(void);

/* Progress bar for kr_create_opts.progress: pass util_progress_cb as the callback and the
 * struct as its context. It draws on stderr only when stderr is a terminal and the work has
 * already taken a moment, redraws at most ten times a second, and util_progress_end()
 * erases it, so a quick or redirected run prints nothing. */
struct util_progress {
	const char *label;
	int tty;
	uint64_t start_ns;
	uint64_t delay_ns; /* nothing is drawn before (KERATIN_PROGRESS_DELAY_MS) */
	uint64_t last_draw_ns;
	int drawn;
};
/* Set by --quiet: no bar is ever drawn. */
extern int util_progress_quiet;
void util_progress_init(struct util_progress *p, const char *label);
void util_progress_cb(void *ctx, uint64_t done, uint64_t total);
void util_progress_end(struct util_progress *p);

/* For work that cannot report progress (kr_pool_check, an open that recovers): a note such
 * as "checking p.pool (16.0 MiB) ..." on stderr, shown under the same rules as the bar (a
 * terminal, and only once the work has taken a moment) and erased by util_busy_end(). A
 * helper thread waits out the delay, so the work is neither polled nor interrupted. */
struct util_busy {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int running; /* the helper thread exists */
	int done;    /* util_busy_end() was called */
	int drawn;   /* the note is on the screen */
	char note[200];
};
void util_busy_begin(struct util_busy *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void util_busy_end(struct util_busy *b);

/* One "key: value" line of a report; the values line up in the column after the longest
 * key ("metadata overhead:") and a space or two. */
void util_field(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* util_field on another stream. */
void util_field_to(FILE *out, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Command-line errors, one line on stderr and a hint:
 *     PROG: MESSAGE
 *     Try 'PROG --help'.
 * Returns UTIL_EXIT_USAGE so callers can write "return util_usage_error(...)". */
int util_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long() over long options only (plus -h), with the '?' and ':' cases reported through
 * util_usage_error(). Returns the option's val, -1 after the last option, or '?' once an
 * error was printed. Reset optind = 1 before the first call for a new argv. */
int util_getopt(const char *prog, int argc, char **argv, const struct option *longopts);
/* The same with short options too: shortopts is getopt's string and must begin with ':'. */
int util_getopt_short(const char *prog, int argc, char **argv, const char *shortopts,
		      const struct option *longopts);

/* A library call failed with rc: prints "PROG: WHAT: message[; what to do]" with the
 * thread's detailed message (kr_errmsg()) and, for codes that tell, what the user can do
 * about it; returns 1, the exit status for library errors. */
int util_lib_error(const char *prog, const char *what, int rc);

/* Makes a fresh directory "PREFIX.XXXXXX" under /dev/shm (or /tmp if there is none) and
 * writes its path to dir. *tmpfs tells whether it is on tmpfs, where a pool must be opened
 * with KR_OPEN_FORCE_PMEM to be treated as persistent memory. Returns 0 or -1 (errno). */
int util_scratch_dir(const char *prefix, char *dir, size_t dirlen, int *tmpfs);
/* Whether path lies on a tmpfs file system (0 if it cannot tell). */
int util_is_tmpfs(const char *path);

/* Prints s as a JSON string literal: quotes, backslashes and control characters escaped,
 * bytes outside well-formed UTF-8 as \\udcXX (valid JSON for any path). */
void util_json_str(const char *s);

#endif
