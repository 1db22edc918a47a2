/*
 * rt_common.c - the ground floor of the pmsan runtime: its options, its allocation and its
 * report output. Everything else in the runtime calls down to it, and it calls nothing of
 * theirs (the compiler-rt sanitizer_common habit: flags, allocation and report printing at
 * the bottom).
 *
 * Options come from PMSAN_OPTIONS, key=value items separated by ':' or spaces, read once
 * before the first hook does anything, through one table (opt_table) that gives each its
 * type, default and description. A process started as a check command (PMSAN_CHILD set by
 * rt_image.c) turns every hook off: it is examining a crash image, not being examined.
 *
 * A report is one line,
 *
 *   pmsan: rule R (NAME): DETAIL at FILE:LINE (FUNCTION)
 *
 * printed once per rule and source line, followed by the process and thread and a
 * symbolised stack (via llvm-symbolizer when one is found, else addresses with the nearest
 * exported symbol): the offending instruction's, or, for a report found later, the stack
 * of the point that found it. Warnings have the same shape with "warning (NAME)".
 * Suppressions (a file of lines NAME:PATTERN, PATTERN a glob over the function, the file
 * or FILE:LINE) silence matching reports. The last line, as the sanitizers print it, is
 * "SUMMARY: pmsan: ..." with the counts; the floors above add their own lines before it
 * through pmsan_on_summary.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmsan.h"

extern char **environ;

struct pmsan_options pmsan_opt; /* filled by init() from the table of options */
int pmsan_active = 1;
const struct pmsan_loc pmsan_loc_exit = {"<exit>", "exit", 0, 0};
const struct pmsan_loc pmsan_loc_unknown = {"<unknown>", "?", 0, 0};

static const char *const kind_names[PMSAN_NKINDS] = {
	"missing-flush", "flush-not-pm",     "partial-flush",   "missing-fence", "unlogged-write",
	"uninitialized-alloc", "use-after-free", "logging-race", "missing-barrier",
	"redundant-flush", "redundant-fence", "volatile-pointer",
};
static const char *const rule_ids[PMSAN_NRULES] = {"1", "1a", "1b", "1c", "2", "3", "4", "5", "6"};

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static unsigned counts[PMSAN_NKINDS];
static unsigned suppressed;
static int last_printed; /* the last report was printed (its notes follow) */
/* The summary's further lines: a registered hook, because what they count (crash images)
 * lives on a floor above this one, and a summary can be printed from here (halt_on_error). */
static void (*summary_tail)(FILE *out);

/* Reports already printed, by hash of kind and place: an open-addressing set. */
static uint64_t *seen;
static size_t seen_n, seen_cap;

struct suppression {
	int kind; /* -1: every kind */
	char *pattern;
};
static struct suppression *supps;
static size_t nsupps;

#ifdef KR_DEBUG_INVARIANTS
void pmsan_invariant_failed(const char *file, int n, const char *cond, const char *src, int line)
{
	fprintf(stderr, "pmsan: invariant %s %d broken: %s (at %s:%d)\n", file, n, cond, src, line);
	abort();
}
#endif

void *pmsan_xalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (p == NULL) {
		fputs("pmsan: out of memory\n", stderr);
		_exit(70);
	}
	return p;
}

void *pmsan_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL) {
		fputs("pmsan: out of memory\n", stderr);
		_exit(70);
	}
	return p;
}

static int seen_insert(uint64_t h)
{
	if (h == 0)
		h = 1;
	if (2 * (seen_n + 1) > seen_cap) {
		size_t cap = seen_cap ? seen_cap * 2 : 256;
		uint64_t *t = pmsan_xalloc(cap * sizeof(*t));
		for (size_t i = 0; i < seen_cap; i++) {
			if (seen[i] == 0)
				continue;
			size_t j = seen[i] & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = seen[i];
		}
		free(seen);
		seen = t;
		seen_cap = cap;
	}
	size_t j = h & (seen_cap - 1);
	while (seen[j]) {
		if (seen[j] == h)
			return 0;
		j = (j + 1) & (seen_cap - 1);
	}
	seen[j] = h;
	seen_n++;
	return 1;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* ---- options */

static int parse_kind(const char *s, size_t n)
{
	for (int k = 0; k < PMSAN_NKINDS; k++) {
		if (strlen(kind_names[k]) == n && strncmp(kind_names[k], s, n) == 0)
			return k;
		if (k < PMSAN_NRULES && strlen(rule_ids[k]) == n && strncmp(rule_ids[k], s, n) == 0)
			return k;
	}
	return -2;
}

static void load_suppressions(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "pmsan: cannot read suppressions %s: %s\n", path, strerror(errno));
		_exit(1);
	}
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		char *p = line + strspn(line, " \t");
		if (*p == 0 || *p == '#')
			continue;
		char *colon = strchr(p, ':');
		int kind = -2;
		if (colon)
			kind = (colon - p == 1 && *p == '*') ? -1 : parse_kind(p, (size_t)(colon - p));
		if (kind == -2) {
			fprintf(stderr, "pmsan: bad suppression line '%s' (want NAME:PATTERN)\n", p);
			_exit(1);
		}
		supps = pmsan_xrealloc(supps, (nsupps + 1) * sizeof(*supps));
		supps[nsupps].kind = kind;
		supps[nsupps].pattern = strdup(colon + 1);
		nsupps++;
	}
	fclose(f);
}

static int suppressed_by_rule(enum pmsan_kind kind, const struct pmsan_loc *loc)
{
	char fileline[1024];
	const char *base = strrchr(loc->file, '/');
	base = base ? base + 1 : loc->file;
	snprintf(fileline, sizeof(fileline), "%s:%u", base, loc->line);
	for (size_t i = 0; i < nsupps; i++) {
		if (supps[i].kind != -1 && supps[i].kind != (int)kind)
			continue;
		const char *pat = supps[i].pattern;
		if (fnmatch(pat, loc->func, 0) == 0 || fnmatch(pat, loc->file, 0) == 0 ||
		    fnmatch(pat, base, 0) == 0 || fnmatch(pat, fileline, 0) == 0)
			return 1;
	}
	return 0;
}

/* The options: one table, from which come the defaults, the parsing, the checks of a
 * value and the list that help=1 prints (compiler-rt's sanitizer_flags habit). */
enum opt_type { OPT_BOOL, OPT_INT, OPT_U64, OPT_STRING, OPT_ENUM };

struct opt_choice {
	const char *name;
	int value;
};

struct opt_def {
	const char *name;
	enum opt_type type;
	void *dst;
	const char *def; /* the default, as it would be written in PMSAN_OPTIONS */
	long long min, max; /* OPT_INT */
	const struct opt_choice *choices; /* OPT_ENUM, ended by a NULL name */
	const char *help;
};

static const struct opt_choice reorder_choices[] = {
	{"none", REORDER_NONE},
	{"single", REORDER_SINGLE},
	{"accumulative", REORDER_ACCUMULATIVE},
	{"random", REORDER_RANDOM},
	{"RevertSingle", REORDER_SINGLE}, /* PmemSanitizer's names */
	{"RevertAccumulative", REORDER_ACCUMULATIVE},
	{NULL, 0},
};

static const struct opt_def opt_table[] = {
	{"exitcode", OPT_INT, &pmsan_opt.exitcode, "66", 0, 255, NULL,
	 "exit status of a program that broke a rule"},
	{"halt_on_error", OPT_BOOL, &pmsan_opt.halt_on_error, "false", 0, 0, NULL,
	 "stop at the first violation (summary, then exit status exitcode)"},
	{"log_path", OPT_STRING, &pmsan_opt.log_path, "stderr", 0, 0, NULL,
	 "write reports to PATH.PID instead of stderr"},
	{"suppressions", OPT_STRING, &pmsan_opt.suppressions, "", 0, 0, NULL,
	 "file of suppressions, one NAME:PATTERN per line"},
	{"warnings", OPT_BOOL, &pmsan_opt.warnings, "true", 0, 0, NULL,
	 "report the warnings (redundant flush or fence, volatile pointer)"},
	{"stack", OPT_BOOL, &pmsan_opt.stack, "true", 0, 0, NULL,
	 "print a stack under every report"},
	{"check", OPT_STRING, &pmsan_opt.check, "", 0, 0, NULL,
	 "command that judges crash images (rule 6); sets reorder=single unless given"},
	{"reorder", OPT_ENUM, &pmsan_opt.reorder, "none", 0, 0, reorder_choices,
	 "which crash images to cut at a fence: none, single, accumulative, random"},
	{"random_cases", OPT_INT, &pmsan_opt.random_cases, "16", 1, 999999, NULL,
	 "images per fence with reorder=random"},
	{"max_cases", OPT_INT, &pmsan_opt.max_cases, "64", 1, 999999, NULL,
	 "images per fence at most"},
	{"seed", OPT_U64, &pmsan_opt.seed, "1", 0, 0, NULL, "seed of reorder=random"},
	{"image_dir", OPT_STRING, &pmsan_opt.image_dir, "", 0, 0, NULL,
	 "where crash images are written (none: /dev/shm, or /tmp without it)"},
	{"keep_images", OPT_BOOL, &pmsan_opt.keep_images, "false", 0, 0, NULL,
	 "keep the crash images that fail the check"},
	{"verbose", OPT_INT, &pmsan_opt.verbose, "0", 0, 2, NULL,
	 "1: summary even without persistent memory; 2: also the check command's output"},
	{"help", OPT_BOOL, &pmsan_opt.help, "false", 0, 0, NULL,
	 "list these options on stderr at start-up"},
};
#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static void refuse(const char *name, const char *value, const char *why)
{
	fprintf(stderr, "pmsan: PMSAN_OPTIONS: %s=%s refused: %s\n", name, value, why);
	_exit(1);
}

/* Stores value into the option; returns NULL, or why the value is refused. */
static const char *set_value(const struct opt_def *o, const char *v)
{
	char *end;
	switch (o->type) {
	case OPT_BOOL:
		if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
			*(int *)o->dst = 1;
		else if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
			*(int *)o->dst = 0;
		else
			return "want true, false, 1 or 0";
		return NULL;
	case OPT_INT: {
		errno = 0;
		long long n = strtoll(v, &end, 0);
		if (errno || *v == 0 || *end != 0)
			return "not a number";
		if (n < o->min || n > o->max) {
			static char why[64];
			snprintf(why, sizeof(why), "want %lld to %lld", o->min, o->max);
			return why;
		}
		*(int *)o->dst = (int)n;
		return NULL;
	}
	case OPT_U64: {
		errno = 0;
		unsigned long long n = strtoull(v, &end, 0);
		if (errno || *v == 0 || *v == '-' || *end != 0)
			return "want an unsigned 64-bit number";
		*(uint64_t *)o->dst = n;
		return NULL;
	}
	case OPT_STRING:
		/* An empty value, or stderr for log_path, means "none". */
		*(const char **)o->dst =
		    *v == 0 || (o->dst == &pmsan_opt.log_path && strcmp(v, "stderr") == 0)
			? NULL
			: strdup(v);
		return NULL;
	case OPT_ENUM:
		for (const struct opt_choice *c = o->choices; c->name; c++)
			if (strcmp(c->name, v) == 0) {
				*(int *)o->dst = c->value;
				return NULL;
			}
		return "want none, single, accumulative or random";
	}
	return "unknown option type";
}

static void set_defaults(void)
{
	for (size_t i = 0; i < NOPTS; i++)
		set_value(&opt_table[i], opt_table[i].def);
}

static void set_option(char *kv)
{
	char *eq = strchr(kv, '=');
	if (eq == NULL) {
		fprintf(stderr, "pmsan: PMSAN_OPTIONS: '%s' refused: want key=value (quote a value "
				"that holds spaces or ':')\n", kv);
		_exit(1);
	}
	*eq = 0;
	for (size_t i = 0; i < NOPTS; i++)
		if (strcmp(opt_table[i].name, kv) == 0) {
			const char *why = set_value(&opt_table[i], eq + 1);
			if (why)
				refuse(kv, eq + 1, why);
			return;
		}
	refuse(kv, eq + 1, "no such option (help=1 lists them)");
}

static void print_options(void)
{
	static const char *const type_names[] = {"bool", "int", "uint64", "string", "choice"};
	fprintf(stderr, "pmsan: PMSAN_OPTIONS, as key=value separated by ':' or spaces:\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt_def *o = &opt_table[i];
		fprintf(stderr, "  %-14s %-7s default %-9s %s\n", o->name, type_names[o->type],
			*o->def ? o->def : "(none)", o->help);
	}
}

/* key=value items, separated by ':' or white space (as ASAN_OPTIONS); a value may be
 * quoted with ' or " to hold either. */
static void parse_options(const char *s)
{
	char *buf = strdup(s), *w = buf;
	char item[4096];
	int reorder_given = 0;
	while (*w) {
		size_t n = 0;
		char quote = 0;
		for (; *w && (quote || (*w != ':' && !isspace((unsigned char)*w))); w++) {
			if (!quote && (*w == '\'' || *w == '"')) {
				quote = *w;
				continue;
			}
			if (quote && *w == quote) {
				quote = 0;
				continue;
			}
			if (n + 1 < sizeof(item))
				item[n++] = *w;
		}
		item[n] = 0;
		if (*w)
			w++;
		if (n) {
			reorder_given |= strncmp(item, "reorder=", 8) == 0;
			set_option(item);
		}
	}
	free(buf);
	/* Reordering needs something to judge the images with, and a check command needs
	 * images to judge. */
	if (pmsan_opt.check && !reorder_given)
		pmsan_opt.reorder = REORDER_SINGLE;
	if (pmsan_opt.check && pmsan_opt.reorder == REORDER_NONE)
		refuse("reorder", "none", "check= needs images: want single, accumulative or random");
	if (!pmsan_opt.check)
		pmsan_opt.reorder = REORDER_NONE;
	if (pmsan_opt.help)
		print_options();
}

/* ---- output */

static void open_log(void)
{
	out = stderr;
	if (pmsan_opt.log_path == NULL)
		return;
	char path[4096];
	snprintf(path, sizeof(path), "%s.%d", pmsan_opt.log_path, (int)getpid());
	FILE *f = fopen(path, "a");
	if (f == NULL) {
		fprintf(stderr, "pmsan: cannot open log_path %s: %s\n", path, strerror(errno));
		_exit(1);
	}
	setvbuf(f, NULL, _IOLBF, 0);
	out = f;
}

void pmsan_log(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&report_lock);
	va_start(ap, fmt);
	vfprintf(out ? out : stderr, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&report_lock);
}

static const char *symbolizer_path(void)
{
	static char found[4096];
	static int looked;
	if (looked)
		return found[0] ? found : NULL;
	looked = 1;
	const char *env = getenv("LLVM_SYMBOLIZER_PATH");
	if (env && access(env, X_OK) == 0) {
		snprintf(found, sizeof(found), "%s", env);
		return found;
	}
	const char *names[] = {"llvm-symbolizer-14", "llvm-symbolizer"};
	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/usr/bin:/bin";
	for (size_t i = 0; i < 2; i++) {
		const char *p = path;
		while (*p) {
			size_t n = strcspn(p, ":");
			snprintf(found, sizeof(found), "%.*s/%s", (int)n, p, names[i]);
			if (access(found, X_OK) == 0)
				return found;
			p += n + (p[n] == ':');
		}
	}
	found[0] = 0;
	return NULL;
}

/* Runs llvm-symbolizer over "MODULE 0xOFFSET" lines and returns its output, or NULL. */
static char *run_symbolizer(const char *input)
{
	const char *sym = symbolizer_path();
	if (sym == NULL)
		return NULL;
	char tmpl[] = "/tmp/pmsan-sym-XXXXXX";
	int in = mkstemp(tmpl);
	if (in < 0)
		return NULL;
	unlink(tmpl);
	if (write(in, input, strlen(input)) != (ssize_t)strlen(input)) {
		close(in);
		return NULL;
	}
	lseek(in, 0, SEEK_SET);
	int pipefd[2];
	if (pipe(pipefd) != 0) {
		close(in);
		return NULL;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pipefd[0]);
	char *argv[] = {(char *)sym, "--inlining=true", "--functions=linkage", NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, sym, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		return NULL;
	}
	size_t n = 0, cap = 4096;
	char *buf = pmsan_xalloc(cap);
	ssize_t r;
	while ((r = read(pipefd[0], buf + n, cap - n - 1)) > 0) {
		n += (size_t)r;
		if (cap - n < 2)
			buf = pmsan_xrealloc(buf, cap *= 2);
	}
	buf[n] = 0;
	close(pipefd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return buf;
}

/* The caller's stack, without the runtime's own frames. */
static void print_stack(void)
{
	void *frames[64];
	int n = backtrace(frames, 64);
	char *input = pmsan_xalloc((size_t)n * 4200);
	size_t len = 0;
	for (int i = 0; i < n; i++) {
		Dl_info di;
		uintptr_t pc = (uintptr_t)frames[i] - (i > 0);
		if (dladdr((void *)pc, &di) == 0 || di.dli_fname == NULL) {
			len += (size_t)sprintf(input + len, "?? 0x%lx\n", (unsigned long)pc);
			continue;
		}
		uintptr_t base = (uintptr_t)di.dli_fbase;
		const Elf64_Ehdr *eh = di.dli_fbase;
		uintptr_t off = eh->e_type == ET_EXEC ? pc : pc - base;
		const char *mod = di.dli_fname[0] ? di.dli_fname : "/proc/self/exe";
		len += (size_t)snprintf(input + len, 4200, "\"%s\" 0x%lx\n", mod, (unsigned long)off);
	}
	char *res = run_symbolizer(input);
	free(input);
	/* Frames: skip everything up to the last runtime frame (__pmsan_* or pmsan_*). */
	char *lines[256];
	int nl = 0;
	if (res) {
		for (char *p = strtok(res, "\n"); p && nl < 255; p = strtok(NULL, "\n"))
			lines[nl++] = p;
		int start = 0;
		for (int i = 0; i + 1 < nl; i += 2)
			if (strncmp(lines[i], "__pmsan_", 8) == 0 || strncmp(lines[i], "pmsan_", 6) == 0)
				start = i + 2;
		int k = 0;
		for (int i = start; i + 1 < nl; i += 2) {
			if (strcmp(lines[i], "??") == 0 && strncmp(lines[i + 1], "??", 2) == 0)
				continue;
			fprintf(out, "    #%d %s %s\n", k++, lines[i], lines[i + 1]);
			if (strcmp(lines[i], "main") == 0)
				break;
		}
		free(res);
		return;
	}
	int k = 0;
	for (int i = 2; i < n; i++) {
		Dl_info di;
		if (dladdr(frames[i], &di) && di.dli_sname && strncmp(di.dli_sname, "__pmsan_", 8) == 0)
			continue;
		fprintf(out, "    #%d %p %s (%s)\n", k++, frames[i],
			di.dli_sname ? di.dli_sname : "?", di.dli_fname ? di.dli_fname : "?");
	}
}

static void summary(void)
{
	unsigned v = 0, w = 0;
	for (int k = 0; k < PMSAN_NKINDS; k++)
		*(k < PMSAN_NRULES ? &v : &w) += counts[k];
	char detail[512] = "";
	size_t n = 0;
	for (int k = 0; k < PMSAN_NRULES; k++)
		if (counts[k])
			n += (size_t)snprintf(detail + n, sizeof(detail) - n, "%srule %s: %u",
					      n ? ", " : " (", rule_ids[k], counts[k]);
	if (n)
		snprintf(detail + n, sizeof(detail) - n, ")");
	/* The sanitizers' last line: what the run found, in one line a script can grep. */
	if (summary_tail)
		summary_tail(out);
	fprintf(out, "SUMMARY: pmsan: %u violation%s%s, %u warning%s, %u suppressed\n", v,
		v == 1 ? "" : "s", detail, w, w == 1 ? "" : "s", suppressed);
}

void pmsan_on_summary(void (*tail)(FILE *out))
{
	summary_tail = tail;
}

static unsigned violations(void)
{
	unsigned v = 0;
	for (int k = 0; k < PMSAN_NRULES; k++)
		v += counts[k];
	return v;
}

static void halt(void)
{
	summary();
	fflush(NULL);
	_exit(pmsan_opt.exitcode);
}

void pmsan_report(enum pmsan_kind kind, const struct pmsan_loc *loc, int here,
		  const char *fmt, ...)
{
	if (!loc)
		loc = &pmsan_loc_unknown;
	if (kind >= PMSAN_NRULES && !pmsan_opt.warnings)
		return;
	pthread_mutex_lock(&report_lock);
	last_printed = 0;
	uint64_t h = fnv(fnv(0xcbf29ce484222325ull ^ (uint64_t)kind, loc->file), loc->func);
	h = (h ^ loc->line) * 0x100000001b3ull;
	if (!seen_insert(h)) {
		pthread_mutex_unlock(&report_lock);
		return;
	}
	if (suppressed_by_rule(kind, loc)) {
		suppressed++;
		pthread_mutex_unlock(&report_lock);
		return;
	}
	counts[kind]++;
	char detail[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (kind < PMSAN_NRULES)
		fprintf(out, "pmsan: rule %s (%s): %s at %s:%u (%s)\n", rule_ids[kind],
			kind_names[kind], detail, loc->file, loc->line, loc->func);
	else
		fprintf(out, "pmsan: warning (%s): %s at %s:%u (%s)\n", kind_names[kind], detail,
			loc->file, loc->line, loc->func);
	fprintf(out, "    process %d, thread %d\n", (int)getpid(), (int)gettid());
	if (here && pmsan_opt.stack)
		print_stack();
	last_printed = 1;
	if (kind < PMSAN_NRULES && pmsan_opt.halt_on_error)
		halt();
	pthread_mutex_unlock(&report_lock);
}

void pmsan_note(const char *fmt, ...)
{
	pthread_mutex_lock(&report_lock);
	if (last_printed) {
		va_list ap;
		va_start(ap, fmt);
		fputs("    ", out);
		vfprintf(out, fmt, ap);
		fputc('\n', out);
		va_end(ap);
	}
	pthread_mutex_unlock(&report_lock);
}

void pmsan_note_stack(void)
{
	pthread_mutex_lock(&report_lock);
	if (last_printed && pmsan_opt.stack)
		print_stack();
	pthread_mutex_unlock(&report_lock);
}

/* ---- start and end */

unsigned pmsan_report_summary(int always)
{
	pthread_mutex_lock(&report_lock);
	if (always || violations() > 0)
		summary();
	unsigned v = violations();
	fflush(NULL);
	pthread_mutex_unlock(&report_lock);
	return v;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void)
{
	set_defaults();
	if (getenv("PMSAN_CHILD")) {
		pmsan_active = 0;
		return;
	}
	const char *o = getenv("PMSAN_OPTIONS");
	if (o)
		parse_options(o);
	if (pmsan_opt.suppressions)
		load_suppressions(pmsan_opt.suppressions);
	open_log();
}

void pmsan_init(void)
{
	pthread_once(&init_once, init);
}
