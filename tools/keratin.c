/*
 * keratin.c - the keratin command-line tool: creates pools and shows what is inside them.
 *
 * "keratin COMMAND [ARGS]" looks COMMAND up in the command table below and hands it the
 * rest of the command line; each command parses its own options (long options only, plus
 * -h/--help everywhere) and returns the process exit status: 0 on success, 1 when the
 * library reports an error ("keratin: PATH: message"), 2 for a bad command line (one line
 * saying what is wrong, then a hint to --help). New commands (check, repair, scrub, inject,
 * map) are one function and one table entry each.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keratin.h"
#include "util.h"

struct command {
	const char *name;
	const char *synopsis; /* the arguments, as in the usage line */
	const char *summary;  /* one line for the command list */
	const char *details;  /* description and options, for "keratin COMMAND --help" */
	int (*run)(const struct command *cmd, int argc, char **argv);
};

static const struct command *find_command(const char *name);
static void print_overview(FILE *out);

/* ---------------------------------------------------------------------------------------
 * Helpers shared by the commands
 * ------------------------------------------------------------------------------------- */

/* "keratin create": how messages about one command name it. */
static const char *prog_name(const struct command *cmd)
{
	static char buf[64];
	snprintf(buf, sizeof(buf), "keratin %s", cmd->name);
	return buf;
}

static int show_help(const struct command *cmd)
{
	printf("usage: keratin %s %s\n\n%s", cmd->name, cmd->synopsis, cmd->details);
	return 0;
}

/* After the options: exactly one operand, the pool path. */
static int want_path(const struct command *cmd, int argc, char **argv, const char **path)
{
	if (optind >= argc)
		return util_usage_error(prog_name(cmd), "missing PATH");
	if (optind + 1 < argc)
		return util_usage_error(prog_name(cmd), "unexpected argument '%s'", argv[optind + 1]);
	*path = argv[optind];
	return 0;
}

/* A numeric option value that must fit the uint32_t field it goes to. Zero is refused:
 * the library reads 0 as "default", which is not what someone typing 0 asked for. */
static int parse_count(const struct command *cmd, const char *opt, const char *arg, uint32_t *out)
{
	uint64_t v;
	if (util_parse_uint(arg, 1, UINT32_MAX, &v))
		return util_usage_error(prog_name(cmd), "invalid %s '%s' (expected a whole number > 0)",
					opt, arg);
	*out = (uint32_t)v;
	return 0;
}

/* "67108864 (64.0 MiB)", with ", P% of WHOLE_NAME" when whole_name is given. */
static const char *bytes_str(char *buf, size_t len, uint64_t v, uint64_t whole, const char *whole_name)
{
	char h[UTIL_HUMAN_LEN];
	int n = snprintf(buf, len, "%llu (%s", (unsigned long long)v, util_human(v, h));
	if (whole_name)
		n += snprintf(buf + n, len - (size_t)n, ", %.2f%% of %s",
			      whole ? 100.0 * (double)v / (double)whole : 0.0, whole_name);
	snprintf(buf + n, len - (size_t)n, ")");
	return buf;
}

/* One "key: value" line of info; the values line up in the column after the longest key
 * ("metadata overhead:") and a space or two. */
#define FIELD_WIDTH 20
static void field(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void field(const char *key, const char *fmt, ...)
{
	va_list ap;
	printf("%s:%*s", key, (int)(FIELD_WIDTH - strlen(key)), "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* ---------------------------------------------------------------------------------------
 * keratin create
 * ------------------------------------------------------------------------------------- */

static int cmd_create(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"size", required_argument, NULL, 's'},   {"rows", required_argument, NULL, 'r'},
		{"lanes", required_argument, NULL, 'l'},  {"lane-kib", required_argument, NULL, 'k'},
		{"force-pmem", no_argument, NULL, 'f'},   {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct kr_create_opts opts = {0};
	const char *path;
	int c, rc;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 's':
			if (util_parse_size(optarg, &opts.size) || opts.size == 0)
				return util_usage_error(prog_name(cmd), "invalid size '%s' (e.g. 64M, 1G)",
							optarg);
			break;
		case 'r': if ((rc = parse_count(cmd, "--rows", optarg, &opts.rows))) return rc; break;
		case 'l': if ((rc = parse_count(cmd, "--lanes", optarg, &opts.nlanes))) return rc; break;
		case 'k':
			if ((rc = parse_count(cmd, "--lane-kib", optarg, &opts.lane_kib)))
				return rc;
			/* Lanes are whole pages; the library would silently round down. */
			if (opts.lane_kib % 4)
				return util_usage_error(prog_name(cmd), "invalid --lane-kib '%s' (a multiple of 4)",
							optarg);
			break;
		case 'f': opts.flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if ((rc = want_path(cmd, argc, argv, &path)))
		return rc;
	if (opts.size == 0)
		return util_usage_error(prog_name(cmd), "missing --size SIZE");

	struct util_progress bar;
	util_progress_init(&bar, "creating");
	opts.progress = util_progress_cb;
	opts.progress_ctx = &bar;

	kr_pool *pool;
	rc = kr_pool_create(path, &opts, &pool);
	util_progress_end(&bar);
	if (rc)
		return util_lib_error("keratin", path, rc);

	struct kr_pool_stat st;
	if ((rc = kr_pool_stat(pool, &st))) {
		util_lib_error("keratin", path, rc);
		kr_pool_close(pool);
		return 1;
	}
	if ((rc = kr_pool_close(pool)))
		return util_lib_error("keratin", path, rc);

	char size[UTIL_HUMAN_LEN], heap[UTIL_HUMAN_LEN];
	printf("created %s: %s, %u zone%s of %u+1 rows, heap %s, %s mode\n", path,
	       util_human(st.pool_size, size), st.nzones, st.nzones == 1 ? "" : "s", st.rows,
	       util_human(st.heap_size, heap), util_mode_name(st.mode));
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * keratin info
 * ------------------------------------------------------------------------------------- */

static void print_info(const char *path, const struct kr_pool_stat *st)
{
	const uint8_t *u = st->uuid;
	char b[128], h[UTIL_HUMAN_LEN];

	field("pool", "%s", path);
	field("uuid", "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
	      u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
	      u[14], u[15]);
	field("pool size", "%s", bytes_str(b, sizeof(b), st->pool_size, 0, NULL));
	field("durability mode", "%s", util_mode_name(st->mode));
	field("zones", "%u", st->nzones);
	field("rows", "%u data + 1 parity per zone", st->rows);
	field("row size", "%s", bytes_str(b, sizeof(b), st->row_size, 0, NULL));
	field("zone size", "%s", bytes_str(b, sizeof(b), st->zone_size, 0, NULL));
	field("lanes", "%u x %s", st->nlanes, util_human(st->lane_size, h));
	field("heap size", "%s", bytes_str(b, sizeof(b), st->heap_size, 0, NULL));
	field("used", "%s", bytes_str(b, sizeof(b), st->used_bytes, st->heap_size, "heap"));
	field("free", "%s", bytes_str(b, sizeof(b), st->free_bytes, st->heap_size, "heap"));
	field("live objects", "%llu", (unsigned long long)st->nobjects);
	field("max object size", "%s", bytes_str(b, sizeof(b), st->max_alloc, 0, NULL));
	field("parity overhead", "%s", bytes_str(b, sizeof(b), st->parity_bytes, st->pool_size, "pool"));
	field("metadata overhead", "%s", bytes_str(b, sizeof(b), st->meta_bytes, st->pool_size, "pool"));
	if (st->recovered)
		field("recovered", "yes: %llu transaction%s replayed, %llu discarded",
		      (unsigned long long)st->replayed_txs, st->replayed_txs == 1 ? "" : "s",
		      (unsigned long long)st->discarded_txs);
	else
		field("recovered", "no");
}

static int cmd_info(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"force-pmem", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned flags = 0;
	const char *path;
	int c, rc;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if ((rc = want_path(cmd, argc, argv, &path)))
		return rc;

	kr_pool *pool;
	if ((rc = kr_pool_open(path, flags, &pool)))
		return util_lib_error("keratin", path, rc);

	struct kr_pool_stat st;
	if ((rc = kr_pool_stat(pool, &st))) {
		util_lib_error("keratin", path, rc);
		kr_pool_close(pool);
		return 1;
	}
	print_info(path, &st);
	if ((rc = kr_pool_close(pool)))
		return util_lib_error("keratin", path, rc);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * keratin help
 * ------------------------------------------------------------------------------------- */

static int cmd_help(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		if (c == 'h')
			return show_help(cmd);
		return UTIL_EXIT_USAGE;
	}
	if (optind == argc) {
		print_overview(stdout);
		return 0;
	}
	if (optind + 1 < argc)
		return util_usage_error(prog_name(cmd), "unexpected argument '%s'", argv[optind + 1]);
	const struct command *topic = find_command(argv[optind]);
	if (!topic)
		return util_usage_error("keratin", "unknown command '%s'", argv[optind]);
	return show_help(topic);
}

/* ---------------------------------------------------------------------------------------
 * The command table and main
 * ------------------------------------------------------------------------------------- */

static const struct command commands[] = {
	{"create", "PATH --size SIZE [--rows N] [--lanes N] [--lane-kib N] [--force-pmem]",
	 "create a new pool file",
	 "Creates a pool file at PATH, which must not exist yet, and zeroes it.\n"
	 "\n"
	 "  --size SIZE    pool size in bytes; suffixes K, M, G, T are powers of 1024\n"
	 "                 (64M, 1G); at least 8M\n"
	 "  --rows N       data rows per zone; parity costs 1/N of the heap (default 100)\n"
	 "  --lanes N      log lanes, i.e. transactions that can run at once (default 16)\n"
	 "  --lane-kib N   size of one lane in KiB, a multiple of 4; bounds the log of one\n"
	 "                 transaction (default 256, or less in a pool under 64M)\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_create},
	{"info", "PATH [--force-pmem]", "show a pool's geometry, space use and overhead",
	 "Opens the pool at PATH (recovering it if it was not closed cleanly) and prints its\n"
	 "geometry, space use, redundancy overhead and whether the open recovered it.\n"
	 "\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_info},
	{"help", "[COMMAND]", "show this overview or a command's options",
	 "Prints the list of commands, or the options of COMMAND.\n", cmd_help},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_overview(FILE *out)
{
	fprintf(out, "usage: keratin COMMAND [ARGS]\n\n"
		     "keratin manages keratin persistent-memory pools.\n\nCommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nRun 'keratin COMMAND --help' for the arguments and options of a command.\n"
		     "Exit status: 0 success, 1 error reported by the library, 2 bad command line.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return util_usage_error("keratin", "missing COMMAND");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_overview(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("keratin %d.%d\n", KERATIN_VERSION_MAJOR, KERATIN_VERSION_MINOR);
		return 0;
	}
	if (argv[1][0] == '-')
		return util_usage_error("keratin", "unknown option '%s'", argv[1]);

	const struct command *cmd = find_command(argv[1]);
	if (!cmd)
		return util_usage_error("keratin", "unknown command '%s'", argv[1]);
	/* The command sees itself as argv[0], as getopt expects. */
	optind = 1;
	return cmd->run(cmd, argc - 1, argv + 1);
}
