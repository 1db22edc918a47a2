/*
 * util.c - helpers shared by the keratin tool, the demo and the benchmark (see util.h).
 *
 * Everything here is deliberately dull: each program would otherwise grow its own slightly
 * different size parser, error format or progress bar, and users would notice the seams.
 */
#include <ctype.h>
#include <errno.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* ---------------------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------------------- */

/* The leading number of s in base 10 or 16 (digits only, no prefix); *end points past it.
 * strtoull() alone would accept " 5", "+5" and "-5" (the last silently wrapped), so insist
 * on a digit first. */
static int parse_number(const char *s, int base, uint64_t *out, char **end)
{
	if (base == 16 ? !isxdigit((unsigned char)s[0]) : !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, end, base);
	if (errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

int util_parse_number(const char *s, uint64_t *out, char **end)
{
	/* Offsets are easiest to copy from hex dumps and from keratin's own messages. */
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return parse_number(s + 2, 16, out, end);
	return parse_number(s, 10, out, end);
}

int util_parse_size(const char *s, uint64_t *out)
{
	uint64_t v;
	char *end;
	unsigned shift = 0;

	if (util_parse_number(s, &v, &end))
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	}
	if (shift)
		end++;
	/* Tolerate the spelled-out forms people paste: "64MiB", "64MB", "4096B". */
	if (strcasecmp(end, "B") == 0 || (shift && strcasecmp(end, "iB") == 0))
		end += strlen(end);
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int util_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	char *end;

	if (parse_number(s, 10, &v, &end) || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

const char *util_human(uint64_t bytes, char *buf)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, UTIL_HUMAN_LEN, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, UTIL_HUMAN_LEN, "%.1f %s", v, units[u]);
	return buf;
}

const char *util_mode_name(enum kr_mode mode)
{
	switch (mode) {
	case KR_MODE_DAX: return "dax";
	case KR_MODE_PAGECACHE: return "page cache";
	case KR_MODE_EMULATED: return "emulated";
	}
	return "unknown";
}

uint64_t util_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------------------- */

uint64_t util_rand64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t util_rand_below(uint64_t *state, uint64_t n)
{
	/* Rejecting the top partial interval keeps small n exactly uniform. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n, v;
	do
		v = util_rand64(state);
	while (v >= limit);
	return v % n;
}

void util_rand_bytes(uint64_t *state, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len > 0) {
		uint64_t v = util_rand64(state);
		size_t n = len < sizeof(v) ? len : sizeof(v);
		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
}

uint64_t util_seed(void)
{
	uint64_t s = util_now_ns() ^ ((uint64_t)getpid() << 32);
	/* Mixed once, and kept to 32 bits: the seed is printed for the user to type again. */
	return util_rand64(&s) & 0xffffffffu;
}

/* ---------------------------------------------------------------------------------------
 * Progress bar
 * ------------------------------------------------------------------------------------- */

#define PROGRESS_DELAY_NS 300000000ull /* quicker work never shows a bar: no flicker */

/* The delay before a bar shows: PROGRESS_DELAY_NS, or KERATIN_PROGRESS_DELAY_MS (tests draw
 * bars of quick work with 0). */
static uint64_t progress_delay_ns(void)
{
	const char *v = getenv("KERATIN_PROGRESS_DELAY_MS");
	char *end;
	unsigned long long ms = v && *v ? strtoull(v, &end, 10) : 0;
	return v && *v && !*end ? ms * 1000000ull : PROGRESS_DELAY_NS;
}
#define PROGRESS_PERIOD_NS 100000000ull /* at most ten redraws a second */
#define PROGRESS_WIDTH 30

int util_progress_quiet;

void util_progress_init(struct util_progress *p, const char *label)
{
	p->label = label;
	p->tty = !util_progress_quiet && isatty(STDERR_FILENO);
	p->start_ns = util_now_ns();
	p->delay_ns = progress_delay_ns();
	p->last_draw_ns = 0;
	p->drawn = 0;
}

void util_progress_cb(void *ctx, uint64_t done, uint64_t total)
{
	struct util_progress *p = ctx;
	char a[UTIL_HUMAN_LEN], b[UTIL_HUMAN_LEN], bar[PROGRESS_WIDTH + 1];

	if (!p->tty || total == 0)
		return;
	uint64_t now = util_now_ns();
	if (now - p->start_ns < p->delay_ns || now - p->last_draw_ns < PROGRESS_PERIOD_NS)
		return;
	p->last_draw_ns = now;

	if (done > total)
		done = total;
	unsigned fill = (unsigned)((double)done / (double)total * PROGRESS_WIDTH);
	memset(bar, '#', fill);
	memset(bar + fill, '.', PROGRESS_WIDTH - fill);
	bar[PROGRESS_WIDTH] = '\0';
	/* \r and \033[K: rewrite the same line, erasing what a longer earlier draw left. */
	fprintf(stderr, "\r%s [%s] %3u%%  %s / %s\033[K", p->label, bar,
		(unsigned)((double)done * 100 / (double)total), util_human(done, a), util_human(total, b));
	fflush(stderr);
	p->drawn = 1;
}

void util_progress_end(struct util_progress *p)
{
	if (p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->drawn = 0;
	}
}

/* The helper thread: waits until the delay has passed or the work has ended, whichever
 * comes first, and draws the note only in the first case. Drawing under the lock means
 * util_busy_end() never erases a line that is still being written. */
static void *busy_thread(void *arg)
{
	struct util_busy *b = arg;
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += (long)PROGRESS_DELAY_NS;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->lock);
	while (!b->done && pthread_cond_timedwait(&b->cond, &b->lock, &deadline) == 0)
		;
	if (!b->done) {
		fprintf(stderr, "\r%s\033[K", b->note);
		fflush(stderr);
		b->drawn = 1;
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

void util_busy_begin(struct util_busy *b, const char *fmt, ...)
{
	va_list ap;
	pthread_condattr_t attr;

	memset(b, 0, sizeof(*b));
	if (!isatty(STDERR_FILENO))
		return;
	va_start(ap, fmt);
	vsnprintf(b->note, sizeof(b->note), fmt, ap);
	va_end(ap);
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &attr);
	pthread_condattr_destroy(&attr);
	/* Without a thread there is simply no note; the work goes on all the same. */
	b->running = pthread_create(&b->thread, NULL, busy_thread, b) == 0;
}

void util_busy_end(struct util_busy *b)
{
	if (!b->running)
		return;
	pthread_mutex_lock(&b->lock);
	b->done = 1;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	if (b->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	b->running = 0;
}

/* ---------------------------------------------------------------------------------------
 * Error messages
 * ------------------------------------------------------------------------------------- */

int util_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return UTIL_EXIT_USAGE;
}

int util_getopt(const char *prog, int argc, char **argv, const struct option *longopts)
{
	return util_getopt_short(prog, argc, argv, ":h", longopts);
}

int util_getopt_short(const char *prog, int argc, char **argv, const char *shortopts,
		      const struct option *longopts)
{
	/* The leading ':' of shortopts makes getopt return ':' for a missing argument and keeps
	 * it quiet: its own messages would not follow our format. */
	opterr = 0;
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);

	if (c == '?') {
		/* optopt names an unknown short option; for an unknown long one it is 0 and
		 * getopt has already stepped past the offending word. */
		if (optopt)
			util_usage_error(prog, "unknown option '-%c'", optopt);
		else
			util_usage_error(prog, "unknown option '%s'", argv[optind - 1]);
	} else if (c == ':') {
		util_usage_error(prog, "option '%s' needs a value", argv[optind - 1]);
		c = '?';
	}
	return c;
}

/* What a user can do about an error, where the code says enough to tell; NULL otherwise
 * (the library's message then says it all: a missing file, a refused permission). */
static const char *error_hint(int rc)
{
	switch (rc) {
	case KR_E_IO_EXISTS: return "remove it or choose another path";
	case KR_E_IO_BUSY: return "another process has it open; close that first";
	case KR_E_FORMAT_TRUNCATED: /* the header is a pool's: only its end is missing */
		return "the file lost its end (a copy cut short, a full disk?): the missing pages "
		       "cannot be rebuilt; restore the whole file";
	case KR_E_FORMAT_NOT_POOL:
		return "pools are made by 'keratin create', file systems by 'keratin fs mkfs'; files "
		       "protected as regions are checked with 'keratin region'";
	case KR_E_FORMAT_VERSION: return "open it with the (newer) keratin that made it";
	case KR_E_FORMAT_MISMATCH:
		return "the sidecar belongs to another file or size: give the right one with "
		       "--sidecar, or remove it and run 'keratin region protect'";
	case KR_E_CORRUPT_HEADER:
	case KR_E_CORRUPT_LOG: return "both copies are damaged: restore the file from a backup";
	case KR_E_CORRUPT_REGION: return "'keratin region repair' rebuilds what the redundancy allows";
	case KR_E_CORRUPT:
	case KR_E_CORRUPT_META:
	case KR_E_CORRUPT_OBJECT: return "'keratin repair' rebuilds what the redundancy allows";
	case KR_E_NOSPACE_HEAP: return "the pool is full: free objects, or create a larger pool";
	default: return NULL;
	}
}

int util_lib_error(const char *prog, const char *what, int rc)
{
	char saved[512]; /* kr_file_kind below sets the thread's error of its own */
	snprintf(saved, sizeof(saved), "%s", kr_errcode() == rc ? kr_errmsg() : kr_strerror(rc));
	const char *msg = saved;
	const char *hint = error_hint(rc);
	size_t n = strlen(what);
	enum kr_file_kind kind;
	if (rc == KR_E_FORMAT_NOT_POOL && kr_file_kind(what, &kind) == KR_OK &&
	    kind == KR_FILE_LIBPMEMOBJ)
		hint = "it is a libpmemobj (PMDK) pool, whose format keratin does not read; "
		       "programs built against keratin-pmemobj make keratin pools";

	/* The library's messages often begin with the file they are about; say it once. */
	if (strncmp(msg, what, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
		msg += n + 2;
	fprintf(stderr, "%s: %s: %s%s%s\n", prog, what, msg, hint ? "; " : "", hint ? hint : "");
	return 1;
}

/* ---------------------------------------------------------------------------------------
 * Scratch space
 * ------------------------------------------------------------------------------------- */

int util_is_tmpfs(const char *path)
{
	struct statfs fs;
	return statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

int util_scratch_dir(const char *prefix, char *dir, size_t dirlen, int *tmpfs)
{
	struct stat st;
	const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";

	if ((size_t)snprintf(dir, dirlen, "%s/%s.XXXXXX", base, prefix) >= dirlen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (!mkdtemp(dir))
		return -1;
	*tmpfs = util_is_tmpfs(dir);
	return 0;
}

#define FIELD_WIDTH 20

static void vfield(FILE *out, const char *key, const char *fmt, va_list ap)
{
	fprintf(out, "%s:%*s", key, (int)(FIELD_WIDTH - strlen(key)), "");
	vfprintf(out, fmt, ap);
	fputc('\n', out);
}

void util_field(const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfield(stdout, key, fmt, ap);
	va_end(ap);
}

void util_field_to(FILE *out, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfield(out, key, fmt, ap);
	va_end(ap);
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 if the bytes there are not one. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || /* overlong, surrogate */
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))   /* overlong, > U+10FFFF */
		return 0;
	return n;
}

/* Paths are bytes, JSON strings are Unicode: a byte that is not part of well-formed UTF-8
 * is written as the escape \udcXX (a lone low surrogate, Python's "surrogateescape"), so
 * the output is valid JSON for any name and the bytes can be recovered from it. */
void util_json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_len(p);
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else if (n == 0)
			printf("\\udc%02x", *p);
		else
			fwrite(p, 1, n, stdout);
		p += n ? n : 1;
	}
	putchar('"');
}
