/*
 * cli.c - the keratin command-line tool: creates pools, shows what is inside them,
 * checks and repairs them, and damages them on purpose to see the repairs work.
 *
 * "keratin COMMAND [ARGS]" looks COMMAND up in the command table below and hands it the
 * rest of the command line; each command parses its own options (long options only, plus
 * -h/--help everywhere) and returns the process exit status: 0 on success, 1 when the
 * library reports an error or a check finds damage ("keratin: PATH: message"), 2 for a bad
 * command line (one line saying what is wrong, then a hint to --help). A command is one
 * function and one table entry; check, repair and scrub are one function with three faces,
 * and the drawing of `keratin map` lives in map.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keratin.h"
#include "keratin_hmap.h"
#include "map.h"
#include "fscmd.h"
#include "mounthelper.h"
#include "regioncmd.h"
#include "util.h"

struct command {
	const char *name;
	const char *synopsis; /* the arguments, as in the usage line */
	const char *accepts;  /* the kind of file it takes: "pool", "region" or "-" */
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
	printf("usage: keratin %s %s\n\naccepts: %s\n\n%s", cmd->name, cmd->synopsis, cmd->accepts,
	       cmd->details);
	return 0;
}

/* What the option parsers below return when the command should go on; any other value is
 * the exit status to return at once (0 after --help, 2 after a bad command line). */
#define PROCEED (-1)

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

/* The command line of commands that only open a pool: PATH [--force-pmem]. */
static int pool_args(const struct command *cmd, int argc, char **argv, const char **path,
		     unsigned *flags, int *json, int *deep)
{
	static const struct option longopts[] = {
		{"force-pmem", no_argument, NULL, 'f'},
		{"json", no_argument, NULL, 'j'},
		{"deep", no_argument, NULL, 'd'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;

	*flags = 0;
	*json = 0;
	*deep = 0;
	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 'f': *flags |= KR_OPEN_FORCE_PMEM; break;
		case 'j': *json = 1; break;
		case 'q': util_progress_quiet = 1; break;
		case 'd':
			if (strcmp(cmd->name, "check") != 0) {
				util_usage_error(prog_name(cmd), "--deep is an option of check only");
				return UTIL_EXIT_USAGE;
			}
			*deep = 1;
			break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if ((rc = want_path(cmd, argc, argv, path)))
		return rc;
	return PROCEED;
}

/* Opens a pool and reads its statistics. The open is where recovery after a crash and the
 * repair of reported bad blocks happen, so on a terminal a slow one says what it is doing.
 * Returns 0, or 1 after printing the library's error. */
static int open_pool(const char *path, unsigned flags, kr_pool **pool, struct kr_pool_stat *st)
{
	struct util_busy busy;

	util_busy_begin(&busy, "opening %s ...", path);
	int rc = kr_pool_open(path, flags, pool);
	util_busy_end(&busy);
	if (rc)
		return util_lib_error("keratin", path, rc);
	if ((rc = kr_pool_stat(*pool, st))) {
		util_lib_error("keratin", path, rc);
		kr_pool_close(*pool);
		return 1;
	}
	return 0;
}

/* Closes a pool; a failed close turns a successful run into a failed one. Returns the
 * exit status. */
static int close_pool(const char *path, kr_pool *pool, int status)
{
	int rc = kr_pool_close(pool);
	if (rc)
		return util_lib_error("keratin", path, rc);
	return status;
}

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

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

/* ---------------------------------------------------------------------------------------
 * keratin create
 * ------------------------------------------------------------------------------------- */

static int cmd_create(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"size", required_argument, NULL, 's'},   {"rows", required_argument, NULL, 'r'},
		{"lanes", required_argument, NULL, 'l'},  {"lane-kib", required_argument, NULL, 'k'},
		{"force-pmem", no_argument, NULL, 'f'},   {"help", no_argument, NULL, 'h'},
		{"protection", required_argument, NULL, 'p'},
		{NULL, 0, NULL, 0},
	};
	static const char *const levels[] = {[KR_PROTECT_FULL] = "full", [KR_PROTECT_NONE] = "none",
					     [KR_PROTECT_ML] = "ml", [KR_PROTECT_MLP] = "mlp"};
	struct kr_create_opts opts = KR_CREATE_OPTS_INIT;
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
		case 'p':
			for (opts.protection = 0; opts.protection < 4; opts.protection++)
				if (strcmp(optarg, levels[opts.protection]) == 0)
					break;
			if (opts.protection == 4)
				return util_usage_error(prog_name(cmd),
							"invalid --protection '%s' (none, ml, mlp or full)",
							optarg);
			break;
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

/* "meta checksums, object checksums, parity": the redundancy the pool keeps. */
static const char *features_str(char *buf, size_t len, unsigned features)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{KR_FEAT_META_CSUM, "meta checksums"},
		{KR_FEAT_OBJ_CSUM, "object checksums"},
		{KR_FEAT_PARITY, "parity"},
		{KR_FEAT_LOG_REPLICA, "log replica"},
	};
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (features & names[i].bit)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", names[i].name);
	if (n == 0)
		snprintf(buf, len, "none");
	return buf;
}

/* What opening the pool did to it: recovery after a crash, and the repairs made on the way
 * (pages from the bad-block list, items whose checksum failed). */
/* The protection level a pool was created with, from the redundancy it keeps. */
static const char *protection_name(unsigned f)
{
	const unsigned all = KR_FEAT_META_CSUM | KR_FEAT_OBJ_CSUM | KR_FEAT_PARITY | KR_FEAT_LOG_REPLICA;
	if ((f & all) == all)
		return "full (crashes, media errors and scribbles repaired)";
	if ((f & all) == (all & ~KR_FEAT_OBJ_CSUM))
		return "mlp (no object checksums: scribbles in objects go undetected)";
	if ((f & all) == (KR_FEAT_META_CSUM | KR_FEAT_LOG_REPLICA))
		return "ml (no parity: lost pages of data cannot be rebuilt)";
	if ((f & all) == 0)
		return "none (crash recovery only)";
	return "custom";
}

static void print_open_state(const struct kr_pool_stat *st)
{
	/* A read-only open (info, check) recovers and repairs in its private view only: the
	 * file still holds what an ordinary open would change. */
	int view = st->readonly;
	if (st->recovered)
		util_field("recovered", "yes%s: %llu transaction%s replayed, %llu discarded",
		      view ? " (in the view only; the next read-write open replays them)" : "",
		      (unsigned long long)st->replayed_txs, plural(st->replayed_txs),
		      (unsigned long long)st->discarded_txs);
	else
		util_field("recovered", "no");
	util_field(view ? "repairable at open" : "repaired at open",
	      "%llu page%s after media errors, %llu item%s after checksum errors",
	      (unsigned long long)st->media_repairs, plural(st->media_repairs),
	      (unsigned long long)st->csum_repairs, plural(st->csum_repairs));
}

static void print_info(const char *path, const struct kr_pool_stat *st)
{
	const uint8_t *u = st->uuid;
	char b[128], h[UTIL_HUMAN_LEN];

	util_field("pool", "%s", path);
	util_field("uuid", "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
	      u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
	      u[14], u[15]);
	util_field("pool size", "%s", bytes_str(b, sizeof(b), st->pool_size, 0, NULL));
	util_field("durability mode", "%s", util_mode_name(st->mode));
	util_field("zones", "%u", st->nzones);
	util_field("rows", "%u data + 1 parity per zone", st->rows);
	util_field("row size", "%s", bytes_str(b, sizeof(b), st->row_size, 0, NULL));
	util_field("zone size", "%s", bytes_str(b, sizeof(b), st->zone_size, 0, NULL));
	util_field("lanes", "%u x %s", st->nlanes, util_human(st->lane_size, h));
	util_field("heap size", "%s", bytes_str(b, sizeof(b), st->heap_size, 0, NULL));
	util_field("used", "%s", bytes_str(b, sizeof(b), st->used_bytes, st->heap_size, "heap"));
	util_field("free", "%s", bytes_str(b, sizeof(b), st->free_bytes, st->heap_size, "heap"));
	util_field("live objects", "%llu", (unsigned long long)st->nobjects);
	util_field("max object size", "%s", bytes_str(b, sizeof(b), st->max_alloc, 0, NULL));
	util_field("parity overhead", "%s", bytes_str(b, sizeof(b), st->parity_bytes, st->pool_size, "pool"));
	util_field("metadata overhead", "%s", bytes_str(b, sizeof(b), st->meta_bytes, st->pool_size, "pool"));
	util_field("redundancy", "%s", features_str(b, sizeof(b), st->features));
	util_field("protection", "%s", protection_name(st->features));
	util_field("plain reads", "%s", st->features & KR_FEAT_OBJ_CSUM
		   ? "not verified by default (kr_get returns the bytes stored; checksums are "
		     "verified on open for write, by the scrubber, and on every read with "
		     "KR_READ_CONSERVATIVE)"
		   : "never verified (objects carry no checksums)");
	print_open_state(st);
}

/* The open state and the pool's identity as JSON members (no braces), for info and check. */
static void json_pool_members(const char *path, const struct kr_pool_stat *st)
{
	char b[128];
	printf("\"file\": ");
	util_json_str(path);
	printf(", \"kind\": \"pool\", \"readonly_view\": %s, \"durability_mode\": \"%s\", "
	       "\"pool_size\": %llu, \"redundancy\": \"%s\", \"protection\": \"%s\", "
	       "\"recovered\": %s, "
	       "\"replayed_transactions\": %llu, \"discarded_transactions\": %llu, "
	       "\"%s\": {\"media_pages\": %llu, \"checksum_items\": %llu}",
	       st->readonly ? "true" : "false", util_mode_name(st->mode),
	       (unsigned long long)st->pool_size, features_str(b, sizeof(b), st->features),
	       protection_name(st->features), st->recovered ? "true" : "false", (unsigned long long)st->replayed_txs,
	       (unsigned long long)st->discarded_txs,
	       st->readonly ? "repairable_at_open" : "repaired_at_open",
	       (unsigned long long)st->media_repairs, (unsigned long long)st->csum_repairs);
}

static void print_info_json(const char *path, const struct kr_pool_stat *st)
{
	printf("{");
	json_pool_members(path, st);
	printf(", \"nzones\": %u, \"rows\": %u, \"nlanes\": %u, \"heap_size\": %llu, "
	       "\"parity_bytes\": %llu, \"meta_bytes\": %llu, \"used_bytes\": %llu, "
	       "\"free_bytes\": %llu, \"objects\": %llu, \"max_object_size\": %llu}\n",
	       st->nzones, st->rows, st->nlanes, (unsigned long long)st->heap_size,
	       (unsigned long long)st->parity_bytes, (unsigned long long)st->meta_bytes,
	       (unsigned long long)st->used_bytes, (unsigned long long)st->free_bytes,
	       (unsigned long long)st->nobjects, (unsigned long long)st->max_alloc);
}

/* info, check, repair and scrub take every kind of file keratin makes: a keratin-fs pool
 * goes to `keratin fs`, a region (its data file or its sidecar) and a protected map to
 * `keratin region`; object pools (and unknown files, which get the not-a-pool message)
 * PROCEED here. verb is the command's name. */
static int by_kind(const char *verb, const char *path, unsigned flags, int json)
{
	enum kr_file_kind kind;
	if (kr_file_kind(path, &kind) != KR_OK || kind == KR_FILE_POOL || kind == KR_FILE_UNKNOWN ||
	    kind == KR_FILE_LIBPMEMOBJ)
		return PROCEED; /* the pool path reports unreadable and foreign files */
	char data[4096], side[4200];
	snprintf(data, sizeof(data), "%s", path);
	size_t n = strlen(data);
	if (kind == KR_FILE_SIDECAR && n > 4 && strcmp(data + n - 4, ".krs") == 0)
		data[n - 4] = '\0'; /* the data file of a sidecar at its default path */
	snprintf(side, sizeof(side), "%s.krs", data);
	static const char *const names[] = {[KR_FILE_FS] = "keratin-fs pool",
					    [KR_FILE_HMAP] = "single-trip hash map",
					    [KR_FILE_SIDECAR] = "protected region (sidecar)",
					    [KR_FILE_REGION] = "protected region"};
	if (!json)
		util_field("kind", "%s", names[kind]);
	optind = 1; /* the command below parses its own arguments */
	if (kind == KR_FILE_FS) {
		const char *fverb = !strcmp(verb, "info") ? "info" : !strcmp(verb, "check") ? "fsck" : verb;
		char *args[] = {(char *)"fs", (char *)fverb, (char *)path, NULL, NULL, NULL};
		int k = 3;
		if (!strcmp(verb, "repair"))
			args[1] = (char *)"fsck", args[k++] = (char *)"--repair";
		if (json && strcmp(verb, "info") != 0)
			args[k++] = (char *)"--json";
		if (flags & KR_OPEN_FORCE_PMEM)
			args[k++] = (char *)"--force-pmem";
		return fs_command(k, args);
	}
	if (json)
		return util_usage_error("keratin", "--json is for pools and file systems, not for a %s", names[kind]);
	bool protected_map = kind == KR_FILE_HMAP && access(side, F_OK) == 0;
	if (kind == KR_FILE_HMAP && !strcmp(verb, "info")) {
		/* What the map holds, from a read-only open (recovered in a private view). */
		kr_hmap *m;
		struct kr_hmap_stats hs;
		unsigned mflags = KR_OPEN_READONLY | (flags & KR_OPEN_FORCE_PMEM) | (protected_map ? KR_HMAP_PROTECT : 0);
		int rc = kr_hmap_open(path, mflags, &m);
		if (rc)
			return util_lib_error("keratin", path, rc);
		kr_hmap_stats(m, &hs);
		util_field("entries", "%" PRIu64 " live in %" PRIu64 " slots of %" PRIu64 " cache lines", hs.live,
			   hs.nslots, hs.entry_lines);
		util_field("recovery", "%" PRIu64 " torn entries, %" PRIu64 " of unfinished transactions dropped",
			   hs.recovered_torn, hs.recovered_dropped);
		util_field("protection", "%s", protected_map ? "sidecar (page CRCs and stripe parity)" : "none");
		kr_hmap_close(m);
		if (!protected_map)
			return 0;
	}
	if (kind == KR_FILE_HMAP && !protected_map) {
		printf("an unprotected map: its entries carry no checksums, so there is nothing to %s; "
		       "KR_HMAP_PROTECT maps keep a sidecar that can be checked\n", verb);
		return 0;
	}
	if (kind == KR_FILE_SIDECAR && access(data, F_OK) != 0)
	{
		fprintf(stderr, "keratin: %s: a sidecar whose data file %s is missing\n", path, data);
		return 1;
	}
	char *args[] = {(char *)"region", (char *)(!strcmp(verb, "info") ? "status" : verb), data, NULL};
	return region_command(3, args);
}

/* pool_args, then files of other kinds handled by_kind: PROCEED only for a pool (or a
 * file of no kind, which the pool code reports). */
static int file_args(const struct command *cmd, int argc, char **argv, const char **path, unsigned *flags,
		     int *json, int *deep)
{
	int rc = pool_args(cmd, argc, argv, path, flags, json, deep);
	return rc == PROCEED ? by_kind(cmd->name, *path, *flags, *json) : rc;
}

static int cmd_info(const struct command *cmd, int argc, char **argv)
{
	const char *path;
	unsigned flags;
	int json, deep;
	int rc = file_args(cmd, argc, argv, &path, &flags, &json, &deep);
	if (rc != PROCEED)
		return rc;

	kr_pool *pool;
	struct kr_pool_stat st;
	if (open_pool(path, flags | KR_OPEN_READONLY, &pool, &st))
		return 1;
	if (json)
		print_info_json(path, &st);
	else
		print_info(path, &st);
	return close_pool(path, pool, 0);
}

/* ---------------------------------------------------------------------------------------
 * keratin check, repair, scrub
 *
 * One kr_pool_check pass each: check only reads, repair and scrub rebuild what they can.
 * repair and scrub differ in what they put first: repair the account of what was fixed,
 * scrub the speed of the pass (what a periodic scrub of a large pool costs).
 * ------------------------------------------------------------------------------------- */

enum verify_kind { VERIFY_CHECK, VERIFY_REPAIR, VERIFY_SCRUB };

/* Every damaged page a pass reports: the lowest for the summary, all of them (up to a
 * bound) for --json. */
struct damage_list {
	uint64_t lowest; /* see check_note_page() */
	uint64_t *off;
	int *state;
	size_t n, cap, dropped;
};

static void note_damaged_page(void *ctx, uint64_t off, int state)
{
	struct damage_list *d = ctx;
	check_note_page(&d->lowest, off);
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		uint64_t *o = cap <= 65536 ? realloc(d->off, cap * sizeof(*o)) : NULL;
		int *s = o ? realloc(d->state, cap * sizeof(*s)) : NULL;
		if (o)
			d->off = o;
		if (!s) {
			d->dropped++;
			return;
		}
		d->state = s;
		d->cap = cap;
	}
	d->off[d->n] = off;
	d->state[d->n++] = state;
}

/* The deep pass's audit and findings as a JSON member ("deep": {...}, ). */
static void print_deep_json(const struct kr_deep_report *d)
{
	const struct {
		const char *name;
		uint64_t value;
	} f[] = {
		{"pool_size", d->pool_size},     {"used_bytes", d->used_bytes},
		{"free_bytes", d->free_bytes},   {"slack_bytes", d->slack_bytes},
		{"parity_bytes", d->parity_bytes}, {"meta_bytes", d->meta_bytes},
		{"objects", d->nobjects},        {"free_chunks", d->free_chunks},
		{"run_chunks", d->run_chunks},   {"extent_chunks", d->extent_chunks},
		{"log_lanes", d->lanes},         {"log_lines", d->log_lines},
		{"problems", d->problems},
	};
	printf("\"deep\": {");
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		printf("\"%s\": %llu, ", f[i].name, (unsigned long long)f[i].value);
	printf("\"first_problem\": ");
	util_json_str(d->first_problem);
	printf("}, ");
}

static void print_verify_json(kr_pool *pool, const char *path, const struct kr_pool_stat *st,
			      const struct kr_check_report *rep, const struct kr_deep_report *deep,
			      int rc, const struct damage_list *d, const char *result)
{
	printf("{");
	json_pool_members(path, st);
	printf(", \"checked\": {\"objects\": %llu, \"chunk_records\": %llu, "
	       "\"parity_columns\": %llu, \"bytes\": %llu}, "
	       "\"bad\": {\"objects\": %llu, \"chunk_records\": %llu, \"parity_columns\": %llu, "
	       "\"unrepairable\": %llu}, \"pages_rebuilt\": %llu, \"parity_recomputed\": %llu, "
	       "\"damaged\": [",
	       (unsigned long long)rep->objects, (unsigned long long)rep->chunks,
	       (unsigned long long)rep->columns, (unsigned long long)rep->bytes_scanned,
	       (unsigned long long)rep->bad_objects, (unsigned long long)rep->bad_chunks,
	       (unsigned long long)rep->bad_columns, (unsigned long long)rep->unrepairable,
	       (unsigned long long)rep->repaired_pages, (unsigned long long)rep->recomputed_columns);
	for (size_t i = 0; i < d->n; i++) {
		char where[128];
		geom_describe(pool, d->off[i], where, sizeof(where));
		printf("%s{\"offset\": %llu, \"holds\": ", i ? ", " : "",
		       (unsigned long long)d->off[i]);
		util_json_str(where);
		printf(", \"state\": %d}", d->state[i]);
	}
	printf("], \"damaged_not_listed\": %llu, ", (unsigned long long)d->dropped);
	if (deep)
		print_deep_json(deep);
	printf("\"error\": ");
	if (rc)
		util_json_str(kr_errmsg());
	else
		printf("null");
	printf(", \"result\": \"%s\"}\n", result);
}

/* "13.8 MiB in 3.9 ms" and "3.53 GB/s" (decimal gigabytes, as storage speeds are quoted). */
static void pass_strs(const struct kr_check_report *rep, char *span, size_t span_len, char *rate,
		      size_t rate_len)
{
	char h[UTIL_HUMAN_LEN];

	if (rep->seconds < 1)
		snprintf(span, span_len, "%s in %.1f ms", util_human(rep->bytes_scanned, h),
			 rep->seconds * 1e3);
	else
		snprintf(span, span_len, "%s in %.2f s", util_human(rep->bytes_scanned, h), rep->seconds);
	if (rep->seconds > 0)
		snprintf(rate, rate_len, "%.2f GB/s", (double)rep->bytes_scanned / rep->seconds / 1e9);
	else
		snprintf(rate, rate_len, "too fast to time");
}

static void print_verify(const char *path, const struct kr_pool_stat *st,
			 const struct kr_check_report *rep, enum verify_kind kind, int rc,
			 uint64_t first_bad, const char *first_bad_where)
{
	char span[64], rate[64];

	pass_strs(rep, span, sizeof(span), rate, sizeof(rate));
	if (kind == VERIFY_SCRUB)
		printf("scrub: %s (%s)\n", rate, span);
	util_field("pool", "%s", path);
	print_open_state(st);
	util_field("objects", "%llu checked, %llu bad", (unsigned long long)rep->objects,
	      (unsigned long long)rep->bad_objects);
	util_field("chunk records", "%llu checked, %llu bad", (unsigned long long)rep->chunks,
	      (unsigned long long)rep->bad_chunks);
	util_field("parity columns", "%llu checked, %llu disagreeing", (unsigned long long)rep->columns,
	      (unsigned long long)rep->bad_columns);
	if (kind != VERIFY_CHECK) {
		util_field("pages rebuilt", "%llu", (unsigned long long)rep->repaired_pages);
		util_field("parity recomputed", "%llu column%s", (unsigned long long)rep->recomputed_columns,
		      plural(rep->recomputed_columns));
	}
	util_field("unrepairable", "%llu", (unsigned long long)rep->unrepairable);
	if (kind != VERIFY_SCRUB)
		util_field("scanned", "%s, %s", span, rate);

	int repaired = rep->repaired_pages || rep->recomputed_columns || st->media_repairs ||
		       st->csum_repairs;
	if (rc == KR_OK && repaired && st->readonly)
		util_field("result", "REPAIRABLE: sound once the damage found at open is repaired "
				     "(keratin repair writes it)");
	else if (rc == KR_OK)
		util_field("result", "%s", repaired ? "sound after repairs" : "sound");
	else
		util_field("result", "DAMAGED, first bad offset 0x%llx (%s)", (unsigned long long)first_bad,
		      first_bad_where);
}

/* What the deep pass adds to check's table: the space audit and the invariants. */
static void print_deep(const struct kr_deep_report *d)
{
	char h[6][UTIL_HUMAN_LEN];
	util_field("space audit", "%s = %s used + %s free + %s slack + %s parity + %s metadata",
		   util_human(d->pool_size, h[0]), util_human(d->used_bytes, h[1]),
		   util_human(d->free_bytes, h[2]), util_human(d->slack_bytes, h[3]),
		   util_human(d->parity_bytes, h[4]), util_human(d->meta_bytes, h[5]));
	util_field("allocator", "%llu objects; chunks: %llu free, %llu in runs, %llu in extents",
		   (unsigned long long)d->nobjects, (unsigned long long)d->free_chunks,
		   (unsigned long long)d->run_chunks, (unsigned long long)d->extent_chunks);
	util_field("log", "%llu lanes, %llu lines examined", (unsigned long long)d->lanes,
		   (unsigned long long)d->log_lines);
	if (d->problems)
		util_field("invariants", "%llu violated; first at 0x%llx: %s",
			   (unsigned long long)d->problems, (unsigned long long)d->first_problem_off,
			   d->first_problem);
	else
		util_field("invariants", "all hold");
}

static int verify(const struct command *cmd, int argc, char **argv, enum verify_kind kind)
{
	static const char *const doing[] = {"checking", "repairing", "scrubbing"};
	const char *path;
	unsigned flags;
	int json, deep;
	int rc = file_args(cmd, argc, argv, &path, &flags, &json, &deep);
	if (rc != PROCEED)
		return rc;

	kr_pool *pool;
	struct kr_pool_stat st;
	if (kind == VERIFY_CHECK)
		flags |= KR_OPEN_READONLY; /* inspection changes nothing */
	/* Every page is read: mapped in one call, not faulted in one by one. */
	flags |= KR_OPEN_PREFAULT;
	if (open_pool(path, flags, &pool, &st))
		return 1;

	struct damage_list dl = {0};
	struct util_progress bar;
	util_progress_init(&bar, doing[kind]);
	struct kr_deep_report dr = KR_DEEP_REPORT_INIT;
	struct kr_check_report *rep_p = &dr.check, rep;
	dr.check = (struct kr_check_report){.on_page = note_damaged_page, .ctx = &dl,
					    .progress = util_progress_cb, .progress_ctx = &bar};
	if (deep)
		rc = kr_pool_check_deep(pool, &dr);
	else
		rc = kr_pool_check(pool, kind == VERIFY_CHECK ? 0 : KR_CHECK_REPAIR, rep_p);
	util_progress_end(&bar);
	rep = *rep_p;

	/* Damage is an answer, printed in full; any other error means there is none. */
	if (rc && KR_ERR_CLASS(rc) != KR_E_CORRUPT) {
		util_lib_error("keratin", path, rc);
		free(dl.off);
		free(dl.state);
		return close_pool(path, pool, 1);
	}
	/* Damage the read-only open repaired in its view is still in the file. */
	int unwritten = rc == KR_OK && st.readonly &&
			(st.media_repairs || st.csum_repairs);
	if (json) {
		print_verify_json(pool, path, &st, &rep, deep ? &dr : NULL, rc, &dl,
				  rc ? "damaged" : unwritten ? "repairable" : "sound");
		free(dl.off);
		free(dl.state);
		return close_pool(path, pool, rc || unwritten ? 1 : 0);
	}
	/* Where the first damage is: an object's page, or a parity page when only parity
	 * disagreed (damage in free space or in parity itself). */
	uint64_t first_bad = check_first_bad(&rep, dl.lowest);
	free(dl.off);
	free(dl.state);
	char where[128] = "";
	if (rc)
		geom_describe(pool, first_bad, where, sizeof(where));
	print_verify(path, &st, &rep, kind, rc, first_bad, where);
	if (deep)
		print_deep(&dr);
	fflush(stdout);
	if (rc)
		util_lib_error("keratin", path, rc);
	if (unwritten)
		fprintf(stderr, "keratin: %s: damage found at open (%llu page%s, %llu item%s) is "
				"not repaired in the file; run 'keratin repair %s'\n", path,
			(unsigned long long)st.media_repairs, plural(st.media_repairs),
			(unsigned long long)st.csum_repairs, plural(st.csum_repairs), path);
	return close_pool(path, pool, rc || unwritten ? 1 : 0);
}

static int cmd_check(const struct command *cmd, int argc, char **argv)
{
	return verify(cmd, argc, argv, VERIFY_CHECK);
}

static int cmd_repair(const struct command *cmd, int argc, char **argv)
{
	return verify(cmd, argc, argv, VERIFY_REPAIR);
}

static int cmd_scrub(const struct command *cmd, int argc, char **argv)
{
	return verify(cmd, argc, argv, VERIFY_SCRUB);
}

/* ---------------------------------------------------------------------------------------
 * keratin inject
 *
 * Damage is written to the file with pwrite(), behind the library's back, so the library
 * must find it on its own, as after a real fault. The pool is opened (briefly, before the
 * damage) only to choose and describe what the command line leaves open.
 * ------------------------------------------------------------------------------------- */

enum fault { FAULT_MEDIA, FAULT_SCRIBBLE };

/* A random page of the heap's data rows holding objects or free space: a draw that lands
 * on zone metadata or a parity row is drawn again. 0 if the draws keep missing (a pool
 * whose rows are nearly all metadata). */
static uint64_t random_data_page(kr_pool *pool, const struct pool_geom *g, uint64_t *rng)
{
	for (int tries = 0; tries < 10000; tries++) {
		uint64_t off = g->heap_off +
			       util_rand_below(rng, (g->heap_end - g->heap_off) / MAP_PAGE) * MAP_PAGE;
		if (kr_pool_page_kind(pool, off) == KR_PAGE_DATA)
			return off;
	}
	return 0;
}

/* Overwrites [off, off + len) of the file with random bytes and makes them durable.
 * 0, or -1 with errno set. */
static int write_random(const char *path, uint64_t off, uint64_t len, uint64_t *rng)
{
	uint8_t buf[65536];
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int ok = 1;
	while (ok && len > 0) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		util_rand_bytes(rng, buf, n);
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0)
			errno = EIO; /* a file that will not grow, which a pool file never needs */
		ok = w > 0;
		off += ok ? (uint64_t)w : 0;
		len -= ok ? (uint64_t)w : 0;
	}
	ok = ok && fsync(fd) == 0;
	int err = errno;
	if (close(fd) != 0 || !ok) {
		errno = ok ? errno : err;
		return -1;
	}
	return 0;
}

/* Where a fault goes; first and last describe its first and last byte when the pool was
 * opened to choose it (empty otherwise). */
struct target {
	uint64_t off, len;
	int have_off, have_len; /* given on the command line */
	char first[128], last[128];
};

/* Opens the pool briefly to choose what the command line left open: a random data page
 * (and a random byte in it for a scribble) and a random length. Returns 0 or an exit
 * status. */
static int choose_target(const char *path, unsigned flags, enum fault fault, uint64_t *rng,
			 struct target *t)
{
	kr_pool *pool;
	struct kr_pool_stat st;
	struct pool_geom g;
	int rc;

	if (open_pool(path, flags, &pool, &st))
		return 1;
	if ((rc = geom_load(pool, &g))) {
		util_lib_error("keratin", path, rc);
		return close_pool(path, pool, 1);
	}
	if (!t->have_off) {
		t->off = random_data_page(pool, &g, rng);
		if (!t->off) {
			fprintf(stderr, "keratin: %s: found no data page to damage\n", path);
			return close_pool(path, pool, 1);
		}
		if (fault == FAULT_SCRIBBLE)
			t->off += util_rand_below(rng, MAP_PAGE);
	}
	/* Up to a row's width, but never back into the page column it started in: one column
	 * damaged in two rows cannot be rebuilt, and a default should stay repairable. */
	if (!t->have_len)
		t->len = 1 + util_rand_below(rng, g.row_size - t->off % MAP_PAGE);
	if (t->off < g.pool_size && t->len <= g.pool_size - t->off) {
		geom_describe(pool, t->off, t->first, sizeof(t->first));
		geom_describe(pool, t->off + t->len - 1, t->last, sizeof(t->last));
	}
	return close_pool(path, pool, 0);
}

static int cmd_inject(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"offset", required_argument, NULL, 'o'}, {"length", required_argument, NULL, 'l'},
		{"seed", required_argument, NULL, 's'},   {"force-pmem", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	uint64_t off = 0, len = 0, seed = 0;
	int have_off = 0, have_len = 0, have_seed = 0;
	unsigned flags = 0;
	int c, rc;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 'o':
			if (util_parse_size(optarg, &off))
				return util_usage_error(prog_name(cmd),
							"invalid --offset '%s' (e.g. 0x5c3000, 4096, 2M)", optarg);
			have_off = 1;
			break;
		case 'l':
			if (util_parse_size(optarg, &len) || len == 0)
				return util_usage_error(prog_name(cmd),
							"invalid --length '%s' (bytes > 0, e.g. 100, 0x80, 8K)", optarg);
			have_len = 1;
			break;
		case 's':
			if (util_parse_uint(optarg, 0, UINT64_MAX, &seed))
				return util_usage_error(prog_name(cmd), "invalid --seed '%s' (a whole number)", optarg);
			have_seed = 1;
			break;
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return util_usage_error(prog_name(cmd), "missing PATH");
	if (optind + 1 >= argc)
		return util_usage_error(prog_name(cmd), "missing the kind of fault (media or scribble)");
	if (optind + 2 < argc)
		return util_usage_error(prog_name(cmd), "unexpected argument '%s'", argv[optind + 2]);
	const char *path = argv[optind], *what = argv[optind + 1];
	enum fault fault;
	if (strcmp(what, "media") == 0)
		fault = FAULT_MEDIA;
	else if (strcmp(what, "scribble") == 0)
		fault = FAULT_SCRIBBLE;
	else
		return util_usage_error(prog_name(cmd), "unknown fault '%s' (media or scribble)", what);
	if (fault == FAULT_MEDIA && have_len)
		return util_usage_error(prog_name(cmd), "--length is for scribble: a media error takes one page");
	if (!have_seed)
		seed = util_seed();

	struct target t = {.off = off, .len = len, .have_off = have_off, .have_len = have_len};
	if (fault == FAULT_MEDIA) {
		t.off &= ~(uint64_t)(MAP_PAGE - 1);
		t.len = MAP_PAGE;
		t.have_len = 1;
	}

	/* The file's size bounds the offsets. The pool itself is opened only to choose what the
	 * command line left open: an open repairs the bad blocks reported so far, so faults
	 * given in full can be stacked (two media errors in one page column, say). */
	struct stat sb;
	if (stat(path, &sb) != 0) {
		fprintf(stderr, "keratin: %s: %s\n", path, strerror(errno));
		return 1;
	}
	/* Pools and file-system pools honour the bad-block list (PATH.badblocks); any other
	 * file would only be scribbled on, which is not what the command promises. */
	enum kr_file_kind kind;
	if ((rc = kr_file_kind(path, &kind)) != KR_OK)
		return util_lib_error("keratin", path, rc);
	if (kind != KR_FILE_POOL && kind != KR_FILE_FS) {
		fprintf(stderr, "keratin: %s: not a keratin pool or file-system pool; inject damages only "
			"those\n", path);
		return 1;
	}
	if (kind == KR_FILE_FS && (!t.have_off || !t.have_len))
		return util_usage_error(prog_name(cmd), "a file-system pool needs --offset%s (keratin fs "
					"locate POOL PATH OFFSET names a file's bytes)",
					fault == FAULT_SCRIBBLE ? " and --length" : "");
	uint64_t size = (uint64_t)sb.st_size, rng = seed;
	if ((!t.have_off || !t.have_len) && (rc = choose_target(path, flags, fault, &rng, &t)))
		return rc;
	if (t.off >= size)
		return util_usage_error(prog_name(cmd), "offset 0x%llx is beyond the pool (%llu bytes)",
					(unsigned long long)t.off, (unsigned long long)size);
	if (t.len > size - t.off)
		return util_usage_error(prog_name(cmd), "0x%llx + %llu bytes runs past the end of the pool (%llu bytes)",
					(unsigned long long)t.off, (unsigned long long)t.len,
					(unsigned long long)size);

	if (write_random(path, t.off, t.len, &rng)) {
		fprintf(stderr, "keratin: %s: cannot write: %s\n", path, strerror(errno));
		return 1;
	}
	if (fault == FAULT_MEDIA) {
		if ((rc = kr_badblocks_add(path, t.off)))
			return util_lib_error("keratin", path, rc);
		printf("media error: page 0x%llx overwritten with %llu random bytes (seed %llu)\n",
		       (unsigned long long)t.off, (unsigned long long)t.len, (unsigned long long)seed);
	} else {
		printf("scribble: %llu random byte%s written at 0x%llx (seed %llu)\n",
		       (unsigned long long)t.len, plural(t.len), (unsigned long long)t.off,
		       (unsigned long long)seed);
	}
	if (t.first[0] && strcmp(t.first, t.last) != 0)
		printf("  from the %s\n  to the %s\n", t.first, t.last);
	else if (t.first[0])
		printf("  in the %s\n", t.first);
	if (fault == FAULT_MEDIA)
		printf("  reported as a bad block: the next open of the pool repairs it\n");
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * keratin rm
 * ------------------------------------------------------------------------------------- */

/* Removes a keratin file and the side files keratin keeps beside it: PATH.badblocks (the
 * emulated bad-block list) and PATH.krs (a region's or protected map's sidecar). Only
 * keratin's own kinds, and only while no process holds the file's lock (an open pool, a
 * mount): removing a file in use would leave its user writing to a deleted inode. */
static int cmd_rm(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"force", no_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, force = 0;
	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 'F': force = 1; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	const char *path;
	int rc = want_path(cmd, argc, argv, &path);
	if (rc)
		return rc;
	if (force && access(path, F_OK) != 0 && errno == ENOENT)
		return 0;
	enum kr_file_kind kind;
	if ((rc = kr_file_kind(path, &kind)) != KR_OK)
		return util_lib_error("keratin", path, rc);
	if (kind == KR_FILE_UNKNOWN || kind == KR_FILE_LIBPMEMOBJ || kind == KR_FILE_SIDECAR) {
		fprintf(stderr, "keratin: %s: %s; rm removes keratin pools, file systems, maps and "
			"regions (give the data file, not its sidecar)\n", path,
			kind == KR_FILE_SIDECAR ? "a sidecar" : "not a keratin file");
		return 1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "keratin: %s: %s\n", path,
			fd < 0 ? strerror(errno) : "in use (open in a program, or mounted): close it first");
		if (fd >= 0)
			close(fd);
		return 1;
	}
	char side[2][PATH_MAX];
	snprintf(side[0], sizeof(side[0]), "%s.badblocks", path);
	snprintf(side[1], sizeof(side[1]), "%s.krs", path);
	/* The data file last: until it goes, a failed rm can be run again. */
	const char *files[] = {side[0], side[1], path};
	int status = 0;
	for (int i = 0; i < 3; i++) {
		if (unlink(files[i]) == 0)
			printf("removed %s\n", files[i]);
		else if (errno != ENOENT || i == 2) {
			fprintf(stderr, "keratin: %s: %s\n", files[i], strerror(errno));
			status = 1;
			break;
		}
	}
	close(fd);
	return status;
}

/* ---------------------------------------------------------------------------------------
 * keratin map
 * ------------------------------------------------------------------------------------- */

/* Opens the pool, walks it into a map and closes it. NULL after printing the error. */
static struct pool_map *collect_map(const char *path, unsigned flags)
{
	/* Pages the open is about to repair from the bad-block list are drawn as repaired. */
	uint64_t *bad;
	size_t nbad = badblocks_read(path, &bad);
	kr_pool *pool;
	struct kr_pool_stat st;
	int rc;

	if (open_pool(path, flags, &pool, &st)) {
		free(bad);
		return NULL;
	}
	struct pool_map *m = map_collect(pool, path, bad, st.media_repairs ? nbad : 0, &rc);
	free(bad);
	if (!m)
		util_lib_error("keratin", path, rc);
	if (close_pool(path, pool, 0) != 0) {
		map_free(m);
		return NULL;
	}
	return m;
}

/* keratin locate PATH OFFSET: what the library's kr_pool_locate says of one pool offset. */
static int cmd_locate(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"force-pmem", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned flags = KR_OPEN_READONLY;
	uint64_t off;
	int c;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (argc - optind < 2)
		return util_usage_error(prog_name(cmd), "missing PATH or OFFSET");
	if (argc - optind > 2)
		return util_usage_error(prog_name(cmd), "unexpected argument '%s'", argv[optind + 2]);
	const char *path = argv[optind];
	if (util_parse_size(argv[optind + 1], &off))
		return util_usage_error(prog_name(cmd), "invalid offset '%s'", argv[optind + 1]);

	kr_pool *pool;
	struct kr_pool_stat st;
	if (open_pool(path, flags, &pool, &st))
		return 1;
	struct kr_location w = KR_LOCATION_INIT;
	int rc = kr_pool_locate(pool, off, &w);
	if (rc) {
		util_lib_error("keratin", path, rc);
		return close_pool(path, pool, 1);
	}
	char holds[128];
	util_field("offset", "0x%llx", (unsigned long long)off);
	util_field("holds", "%s", geom_describe(pool, off, holds, sizeof(holds)));
	util_field("page", "0x%llx", (unsigned long long)w.page);
	if (w.in_zone)
		util_field("parity", "0x%llx", (unsigned long long)w.parity);
	if (w.twin)
		util_field("other copy", "0x%llx", (unsigned long long)w.twin);
	if (w.object)
		util_field("object", "0x%llx (%llu bytes), %s", (unsigned long long)w.object,
			   (unsigned long long)w.object_size,
			   off < w.object ? "its header"
			   : off - w.object < w.object_size ? "a byte of it" : "padding after it");
	else if (w.kind == KR_PAGE_DATA)
		util_field("object", "none (free space)");
	return close_pool(path, pool, 0);
}

static int cmd_map(const struct command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"svg", required_argument, NULL, 's'},
		{"force-pmem", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path, *svg = NULL;
	unsigned flags = 0;
	int c, rc;

	while ((c = util_getopt(prog_name(cmd), argc, argv, longopts)) != -1) {
		switch (c) {
		case 's': svg = optarg; break;
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': return show_help(cmd);
		default: return UTIL_EXIT_USAGE;
		}
	}
	if ((rc = want_path(cmd, argc, argv, &path)))
		return rc;
	if (svg && svg[0] == '\0')
		return util_usage_error(prog_name(cmd), "--svg needs a file name");

	/* The SVG file is opened first: a mistyped name should not cost a walk of the pool. */
	FILE *svgf = NULL;
	if (svg && !(svgf = fopen(svg, "w"))) {
		fprintf(stderr, "keratin: %s: %s\n", svg, strerror(errno));
		return 1;
	}
	struct pool_map *m = collect_map(path, flags);
	if (!m) {
		if (svgf) {
			fclose(svgf);
			unlink(svg);
		}
		return 1;
	}

	/* Colours only for a person looking at a terminal; https://no-color.org says how to
	 * ask for none. */
	const char *no_color = getenv("NO_COLOR");
	map_print(m, stdout, isatty(STDOUT_FILENO) && !(no_color && no_color[0]));
	rc = 0;
	if (svgf && map_write_svg(m, svgf)) {
		fprintf(stderr, "keratin: %s: %s\n", svg, strerror(errno));
		unlink(svg);
		rc = 1;
	} else if (svgf) {
		printf("wrote %s\n", svg);
	}
	map_free(m);
	return rc;
}

static int cmd_region(const struct command *cmd, int argc, char **argv)
{
	(void)cmd;
	return region_command(argc, argv);
}

static int cmd_fs(const struct command *cmd, int argc, char **argv)
{
	(void)cmd;
	return fs_command(argc, argv);
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
	{"create", "PATH --size SIZE [--rows N] [--lanes N] [--lane-kib N] [--protection L] [--force-pmem]", "new pool",
	 "create a new pool file",
	 "Creates a pool file at PATH, which must not exist yet, and zeroes it.\n"
	 "\n"
	 "  --size SIZE    pool size in bytes; suffixes K, M, G, T are powers of 1024\n"
	 "                 (64M, 1G); at least 8M\n"
	 "  --rows N       data rows per zone; parity costs 1/N of the heap (default 100)\n"
	 "  --lanes N      log lanes, i.e. transactions that can run at once (default 16)\n"
	 "  --lane-kib N   size of one lane in KiB, a multiple of 4; bounds one transaction's\n"
	 "                 micro-buffered changes; in-place ones continue in the heap\n"
	 "                 (default 256, or less in a pool under 64M)\n"
	 "  --protection L redundancy kept: full (default: log replica, checksums, parity),\n"
	 "                 mlp (no object checksums), ml (no parity either), none (one log\n"
	 "                 copy, nothing else); the lesser levels exist to measure costs\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_create},
	{"info", "PATH [--json] [--force-pmem]", "any kind", "show a pool's geometry, space use and redundancy",
	 "Any kind of keratin file: a keratin-fs pool goes to 'keratin fs', a region (its\n"
	 "data file or its sidecar) or a single-trip map to 'keratin region'; the first line\n"
	 "then says which kind was found.\n"
	 "Opens the pool at PATH read-only and prints its geometry, space use, redundancy and\n"
	 "its overhead, whether it needs recovery after a crash and what an ordinary open\n"
	 "would repair (recovery and repairs run in a private view: the file is not changed).\n"
	 "\n"
	 "  --json         one JSON object instead of the table\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_info},
	{"check", "PATH [--deep] [--json] [--quiet] [--force-pmem]", "any kind", "verify every checksum and parity column",
	 "Opens the pool at PATH read-only and verifies every object checksum, every\n"
	 "allocator chunk record and every parity column. Recovery after a crash and the\n"
	 "repair of pages on the bad-block list happen in a private view, so the check sees\n"
	 "the recovered pool while not a byte of the file (or of its bad-block list) changes;\n"
	 "'keratin repair' is the command that writes. A file of mode 0444 can be checked.\n"
	 "\n"
	 "Exit status: 0 if the pool is sound, 1 if it is damaged (the first bad offset is\n"
	 "printed), if damage found at open is repairable but not yet repaired in the file,\n"
	 "or if it cannot be opened.\n"
	 "\n"
	 "  --deep         also check every invariant that ties the parts together: each\n"
	 "                 allocator record against the library's in-memory indexes and the\n"
	 "                 object it holds, the space audit (pool size = used + free + slack\n"
	 "                 + parity + metadata, printed), log heads and tails, log lanes\n"
	 "                 equal to their replica; still read-only. A file that is not a\n"
	 "                 pool but has a sidecar (PATH.krs: a protected region or map) gets\n"
	 "                 'keratin region check': every page checksum and stripe parity\n"
	 "  --json         one JSON object: what was checked, every damaged page's offset\n"
	 "                 and what it holds, the result (sound, repairable, damaged)\n"
	 "  --quiet        no progress bar (drawn on a terminal only)\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_check},
	{"repair", "PATH [--json] [--quiet] [--force-pmem]", "any kind", "check and rebuild damaged pages from parity",
	 "Like check, but opens the pool for writing: the open recovers it and repairs pages\n"
	 "on the bad-block list in the file, then the pass rebuilds the pages of damaged\n"
	 "objects and chunk records from parity and recomputes parity where only parity or\n"
	 "free space was damaged. Prints the pages rebuilt, the parity columns recomputed, what\n"
	 "could not be repaired (two damaged pages in one page column), and what the open\n"
	 "repaired from the bad-block list.\n"
	 "\n"
	 "Exit status: 0 if the pool is sound afterwards, 1 if damage remains.\n"
	 "\n"
	 "  --json         one JSON object, as check prints\n"
	 "  --quiet        no progress bar (drawn on a terminal only)\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_repair},
	{"scrub", "PATH [--json] [--quiet] [--force-pmem]", "any kind", "one scrub pass: repair, and report its speed",
	 "Runs one scrub pass over the pool at PATH: the repair pass that a background\n"
	 "scrubber runs, with its throughput in GB/s (heap bytes read per second) first.\n"
	 "\n"
	 "Exit status: 0 if the pool is sound afterwards, 1 if damage remains.\n"
	 "\n"
	 "  --json         one JSON object, as check prints\n"
	 "  --quiet        no progress bar (drawn on a terminal only)\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_scrub},
	{"inject", "PATH media|scribble [--offset N] [--length N] [--seed S] [--force-pmem]", "pool, fs",
	 "damage a pool on purpose, to test repairs",
	 "Damages the pool or file-system pool at PATH the way faults do, for testing check\n"
	 "and repair: the bytes are written with pwrite(), behind the library's back. A pool\n"
	 "is opened briefly only to choose what the options leave open; as an open repairs\n"
	 "the bad blocks reported so far, give --offset (and --length) to stack several\n"
	 "faults. A file-system pool is never opened: give --offset (and --length for a\n"
	 "scribble); 'keratin fs locate' names where a file's bytes are.\n"
	 "\n"
	 "  media      a media error: the 4 KiB page holding --offset is overwritten with\n"
	 "             random bytes and reported as a bad block (kr_badblocks_add), so that\n"
	 "             the next open of the pool rebuilds it\n"
	 "  scribble   a stray write: --length random bytes at --offset, which nothing\n"
	 "             reports; check finds them and repair undoes them\n"
	 "\n"
	 "  --offset N   pool offset: decimal or 0x hex, suffixes K, M, G (default: random,\n"
	 "               in a data page of the heap)\n"
	 "  --length N   bytes to scribble (default: random, from 1 to a row's width but\n"
	 "               within one page column per row, so that it stays repairable)\n"
	 "  --seed S     seed for the random choices and bytes (default: from the clock;\n"
	 "               printed, so a run can be repeated)\n"
	 "  --force-pmem treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_inject},
	{"locate", "PATH OFFSET [--force-pmem]", "pool", "where a pool offset is and what protects it",
	 "Opens the pool at PATH read-only and tells what holds the byte at OFFSET (decimal\n"
	 "or 0x hex, suffixes K, M, G): the kind of page, for a zone page its zone, row and\n"
	 "page column and the parity byte of its stripe, for a header, control or log page\n"
	 "its other copy, and the object whose block holds the byte. An offset beyond the\n"
	 "pool is an error (exit status 1).\n"
	 "\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_locate},
	{"map", "PATH [--svg FILE] [--force-pmem]", "pool", "draw the pool: what every page holds",
	 "Draws the pool at PATH: one line per zone row (data rows and the parity row), one\n"
	 "character per page, or per group of pages in a large pool (the scale is printed),\n"
	 "and a line for the pages outside the heap. Live object bytes come from one pass\n"
	 "over the objects; damage from a check without repair.\n"
	 "\n"
	 "  H header  C control page  L lane  R lane replica  M zone metadata\n"
	 "  # data page holding live object bytes  . free data page  P parity\n"
	 "  X damaged  + repaired  ! unrepairable  - unused\n"
	 "\n"
	 "Pages are drawn as repaired when this open rebuilt them from the bad-block list\n"
	 "(see inject media); damage found by the check stays X or ! until a repair.\n"
	 "\n"
	 "Colours are used when standard output is a terminal (unless NO_COLOR is set).\n"
	 "Exit status 0 once the map is drawn, damaged pool or not.\n"
	 "\n"
	 "  --svg FILE     also write the picture as an SVG file\n"
	 "  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n",
	 cmd_map},
	{"rm", "PATH [--force]", "any kind", "remove a keratin file and its side files",
	 "Removes the keratin file at PATH (a pool, a file-system pool, a single-trip map or\n"
	 "a protected region's data file) together with the files keratin keeps beside it:\n"
	 "PATH.badblocks (the bad-block list) and PATH.krs (a region's or map's sidecar).\n"
	 "Each removed file is printed. A file in use (a pool open in a program, a mounted\n"
	 "file system) is refused, as is any file that is not keratin's.\n"
	 "\n"
	 "  --force        a missing PATH is not an error\n",
	 cmd_rm},
	{"region", region_synopsis, "region", "protected regions (plain-store files): status, check, repair",
	 region_details, cmd_region},
	{"fs", fs_synopsis, "fs", "keratin-fs: make, mount, check and browse file-system pools", fs_details,
	 cmd_fs},
	{"help", "[COMMAND]", "-", "show this overview or a command's options",
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
		     "keratin manages keratin persistent-memory pools and protected regions.\n\nCommands:\n");
	fprintf(out, "  %-8s %-9s %s\n", "command", "accepts", "does");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-8s %-9s %s\n", commands[i].name, commands[i].accepts,
			commands[i].summary);
	fprintf(out, "\nFiles: a pool is made by 'keratin create' or kr_pool_create(); a region is any\n"
		     "file protected by kr_region_open/attach (sidecar FILE.krs), including a\n"
		     "single-trip hash map created with KR_HMAP_PROTECT.\n"
		     "\nRun 'keratin COMMAND --help' for the arguments and options of a command;\n"
		     "'man keratin' lists the manual page of each.\n"
		     "Exit status: 0 success, 1 error reported by the library or damage found,\n"
		     "2 bad command line.\n");
}

int main(int argc, char **argv)
{
	if (argc > 0 && mount_helper_called(argv[0]))
		return mount_helper(argc, argv);
	if (argc < 2)
		return util_usage_error("keratin", "missing COMMAND");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_overview(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("keratin %d.%d.%d (libkeratin.so.%d)\n", KERATIN_VERSION_MAJOR,
		       KERATIN_VERSION_MINOR, KERATIN_VERSION_PATCH, KR_ABI);
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
