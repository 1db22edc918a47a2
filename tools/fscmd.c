/*
 * fscmd.c - `keratin fs ...`: keratin-fs pools from the command line (make, describe, check,
 * repair, and a few file commands by path).
 *
 * info and check never change a byte of the pool: they mount a private in-memory copy
 * (KR_FS_MOUNT_CHECK), so they also report what a repairing mount would fix. repair mounts
 * for real (the mount repairs), scrubs every structure and checks the result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fscmd.h"
#include "fsmount.h"
#include "fsreport.h"
#include "keratin_fs.h"
#include "util.h"

/* The verbs: name, the operands after the verb, and what they are (for the usage error).
 * One list, from which both the table below and the synopsis are made. (snapshot has verbs
 * of its own and is parsed apart.) */
#define FS_VERBS(X)                                                                            \
	X(mkfs, 1, "POOL")                                                                     \
	X(mount, 2, "POOL and DIR")                                                            \
	X(umount, 1, "DIR")                                                                    \
	X(info, 1, "POOL or DIR")                                                              \
	X(fsck, 1, "POOL")                                                                     \
	X(check, 1, "POOL")                                                                    \
	X(repair, 1, "POOL")                                                                   \
	X(scrub, 1, "POOL or DIR")                                                             \
	X(requests, 1, "DIR (a mount)")                                                        \
	X(ls, 2, "POOL and a PATH")                                                            \
	X(cat, 2, "POOL and a PATH")                                                           \
	X(put, 3, "POOL, a local FILE and a PATH")                                             \
	X(mkdir, 2, "POOL and a PATH")                                                         \
	X(rm, 2, "POOL and a PATH")                                                            \
	X(locate, 3, "POOL, a PATH and a file OFFSET")
#define FS_VERB_SYNOPSIS(name, nargs, operands) #name "|"
const char fs_synopsis[] = FS_VERBS(FS_VERB_SYNOPSIS) "snapshot ARGS [OPTIONS]";
const char fs_details[] =
	"keratin-fs: a fault-tolerant file system in one pool file (NOVA-Fortis's design).\n"
	"\n"
	"  mkfs POOL --size SIZE   make a pool (the file must not exist)\n"
	"       [--protect full|metadata|none] [--inodes N] [--log-size SIZE]\n"
	"       [--dead-zone SIZE] [--relaxed] [--parity page|zone[:COLUMNS]]\n"
	"                          full: metadata replica, strip CRCs, parity;\n"
	"                          metadata: the replica only; none: neither;\n"
	"                          --relaxed: overwrites in place (no write atomicity);\n"
	"                          --parity: a parity strip per page (default, 1/8 of\n"
	"                          the data space) or a parity page per row of COLUMNS\n"
	"                          pages (default 64, 2..1024; whole lost pages rebuilt)\n"
	"  mount POOL DIR [-f] [-o OPTIONS]\n"
	"                          mount it with FUSE; returns once the mount is ready\n"
	"                          (-f: stay in the foreground; SIGINT/SIGTERM unmount)\n"
	"  umount DIR              unmount; returns once the pool is closed cleanly\n"
	"  info POOL|DIR           geometry, space, redundancy; changes nothing\n"
	"  fsck POOL [--repair] [--json]\n"
	"                          verify every structure and invariant; changes nothing\n"
	"                          unless --repair (lists what a repairing mount would fix)\n"
	"  check POOL, repair POOL the same as fsck and fsck --repair\n"
	"  scrub POOL|DIR          verify and repair every strip and metadata copy (DIR: in\n"
	"                          the daemon of that mount)\n"
	"  requests DIR            the FUSE requests the mount's daemon has received, by kind\n"
	"  ls POOL PATH            list a directory (or show one file)\n"
	"  cat POOL PATH           write a file's bytes to standard output\n"
	"  put POOL FILE PATH      copy a local FILE into the pool at PATH\n"
	"  mkdir POOL PATH         make a directory\n"
	"  rm POOL PATH            remove a file, or an empty directory\n"
	"  snapshot create|delete DIR|POOL NAME, snapshot list DIR|POOL\n"
	"                          read-only copies of the whole tree, browsable at\n"
	"                          DIR/.snapshots/NAME/ while mounted\n"
	"  locate POOL PATH OFFSET where that byte of the file, its strip's CRCs and its\n"
	"                          page's parity lie in the pool file (for fault injection)\n"
	"\n"
	"  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n"
	"  --quiet        no progress bars (mkfs, fsck, scrub draw them on a terminal)\n"
	"  -o OPTIONS     mount options: FUSE's (allow_other, ro, ...; ro also leaves\n"
	"                 every byte of the pool file as it is) and keratin's:\n"
	"                 writeback (kernel writeback cache: writes durable at fsync),\n"
	"                 splice, attr_timeout=S, entry_timeout=S (default 1), threads=N,\n"
	"                 clone_fd, noprefault (do not map the whole pool at mount),\n"
	"                 max_write=BYTES (largest write request, 4096 to 1048576;\n"
	"                 default 1048576),\n"
	"                 scan_threads=N (threads walking the inode logs at mount; at most\n"
	"                 the CPUs; default up to 4), poll=US (a daemon thread looks for\n"
	"                 the next request for up to US microseconds before it sleeps;\n"
	"                 default 0, never: see docs/BENCHMARKS-FS.md), uring (requests\n"
	"                 over io_uring, each served on its caller's CPU; needs Linux 6.14+\n"
	"                 and echo 1 > /sys/module/fuse/parameters/enable_uring)\n"
	"\n"
	"Exit status: 0 success (fsck, scrub: sound), 1 damage found or a library error,\n"
	"2 bad command line.\n";

static const char *prog = "keratin fs";

/* File-system operations return -errno: one line naming the path. */
static int op_error(const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(-rc));
	return 1;
}

/* --parity page|zone[:COLUMNS] into o; -1 if malformed. */
static int parity_layout(const char *arg, struct kr_fs_mkfs_opts *o)
{
	uint64_t cols = 0;
	if (!strcmp(arg, "page"))
		o->parity = KR_FS_PARITY_PAGE;
	else if (!strncmp(arg, "zone", 4) && (!arg[4] || (arg[4] == ':' && !util_parse_uint(arg + 5, 2, 1024, &cols))))
		o->parity = KR_FS_PARITY_ZONE;
	else
		return -1;
	o->zone_columns = (uint32_t)cols;
	return 0;
}

/* --protect LEVEL as the KR_FS_NO_* knobs it turns off; -1 for an unknown level. */
static int protect_level(const char *level)
{
	if (!strcmp(level, "full"))
		return 0;
	if (!strcmp(level, "metadata"))
		return KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY;
	if (!strcmp(level, "none"))
		return KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY;
	return -1;
}

static int do_mkfs(const char *pool, struct kr_fs_mkfs_opts *o)
{
	if (!o->size)
		return util_usage_error(prog, "mkfs needs --size");
	struct util_progress bar;
	util_progress_init(&bar, "formatting");
	o->progress = util_progress_cb;
	o->progress_ctx = &bar;
	int rc = kr_fs_mkfs(pool, o);
	util_progress_end(&bar);
	if (rc)
		return util_lib_error("keratin", pool, rc);
	return 0;
}

static int do_check(kr_fs *fs, const char *pool)
{
	struct kr_fs_check_report rep;
	int rc = kr_fs_check(fs, stdout, &rep);
	printf("check: %" PRIu64 " inodes (%" PRIu64 " directories, %" PRIu64 " others), %" PRIu64
	       " log pages, %" PRIu64 " data pages: %" PRIu64 " problems\n",
	       rep.inodes, rep.dirs, rep.files, rep.log_pages, rep.data_pages, rep.problems);
	if (rc != KR_OK && rc != KR_E_CORRUPT)
		return util_lib_error("keratin", pool, rc);
	return rc == KR_OK ? 0 : 1;
}

/* Each line of text as a JSON string in an array (the check's and scrub's problem lines). */
static void json_lines(const char *key, char *text)
{
	printf("  \"%s\": [", key);
	const char *sep = "";
	for (char *save, *l = strtok_r(text ? text : (char[]){0}, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		printf("%s\n    ", sep);
		util_json_str(l);
		sep = ",";
	}
	printf("%s]", *sep ? "\n  " : "");
}

/* fsck --json [--repair]: what was walked, what was repaired, every problem line. */
static int do_fsck_json(kr_fs *fs, const char *pool, bool repair)
{
	char *scrub_text = NULL, *check_text = NULL;
	size_t scrub_len = 0, check_len = 0;
	struct kr_fs_scrub_report srep = {0};
	struct kr_fs_check_report crep = {0};
	struct kr_fs_statfs st = {0};
	kr_fs_statfs(fs, &st);
	int src = KR_OK;
	FILE *m = open_memstream(&scrub_text, &scrub_len);
	if (repair && m)
		src = kr_fs_scrub(fs, m, &srep);
	if (m)
		fclose(m);
	m = open_memstream(&check_text, &check_len);
	int crc = kr_fs_check(fs, m, &crep);
	if (m)
		fclose(m);
	printf("{\n  \"pool\": ");
	util_json_str(pool);
	printf(",\n  \"mode\": \"%s\",\n", repair ? "repair" : "check");
	printf("  \"inodes\": %" PRIu64 ", \"directories\": %" PRIu64 ", \"log_pages\": %" PRIu64
	       ", \"data_pages\": %" PRIu64 ",\n",
	       crep.inodes, crep.dirs, crep.log_pages, crep.data_pages);
	printf("  \"repaired_at_mount\": %" PRIu64 ", \"repaired_by_scrub\": %" PRIu64
	       ", \"unrepairable\": %" PRIu64 ",\n  \"problems\": %" PRIu64 ",\n",
	       repair ? st.repairs : 0, srep.repaired, srep.unrepairable, crep.problems);
	json_lines("scrub_report", scrub_text);
	printf(",\n");
	json_lines("check_report", check_text);
	printf(",\n  \"clean\": %s\n}\n", crc == KR_OK && src == KR_OK ? "true" : "false");
	free(scrub_text);
	free(check_text);
	if ((crc != KR_OK && crc != KR_E_CORRUPT) || (src != KR_OK && src != KR_E_CORRUPT))
		return util_lib_error("keratin", pool, crc != KR_OK && crc != KR_E_CORRUPT ? crc : src);
	return crc == KR_OK && src == KR_OK ? 0 : 1;
}

static int do_repair(kr_fs *fs, const char *pool)
{
	struct kr_fs_statfs st;
	kr_fs_statfs(fs, &st);
	printf("repair: %" PRIu64 " repaired by the mount\n", st.repairs);
	int rc = fs_print_scrub(stdout, fs, pool);
	int crc = do_check(fs, pool);
	return rc ? rc : crc;
}

static int print_entry(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t dtype, uint64_t cookie)
{
	kr_fs *fs = ctx;
	(void)dtype, (void)cookie;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	struct kr_fs_attr a;
	if (kr_fs_getattr(fs, ino, &a) == 0)
		printf("%06o %3u %5u %5u %12" PRIu64 " %.*s\n", a.mode, a.nlink, a.uid, a.gid, a.size, (int)len, name);
	return 0;
}

static int do_ls(kr_fs *fs, const char *path)
{
	struct kr_fs_attr a;
	int rc = kr_fs_resolve(fs, path, 1, &a);
	if (rc)
		return op_error(path, rc);
	if (!S_ISDIR(a.mode)) {
		printf("%06o %3u %5u %5u %12" PRIu64 " %s\n", a.mode, a.nlink, a.uid, a.gid, a.size, path);
		return 0;
	}
	rc = kr_fs_readdir(fs, a.ino, 0, print_entry, fs);
	return rc < 0 ? op_error(path, rc) : 0;
}

static int do_cat(kr_fs *fs, const char *path)
{
	struct kr_fs_attr a;
	int rc = kr_fs_resolve(fs, path, 1, &a);
	if (rc)
		return op_error(path, rc);
	static char buf[1 << 16];
	for (uint64_t off = 0;;) {
		ssize_t n = kr_fs_read(fs, a.ino, buf, sizeof(buf), off);
		if (n < 0)
			return op_error(path, (int)n);
		if (n == 0)
			return 0;
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			return 1;
		off += (uint64_t)n;
	}
}

/* The directory of path and its last component (in name). */
static int parent_of(kr_fs *fs, const char *path, struct kr_fs_attr *dir, char *name, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash || !slash[1] || strlen(slash + 1) >= n)
		return -EINVAL;
	snprintf(name, n, "%s", slash + 1);
	char *d = strndup(path, (size_t)(slash - path) + 1);
	if (!d)
		return -ENOMEM;
	int rc = kr_fs_resolve(fs, d, 1, dir);
	free(d);
	return rc;
}

static int do_put(kr_fs *fs, const char *local, const char *path)
{
	FILE *in = fopen(local, "rb");
	if (!in) {
		fprintf(stderr, "%s: %s: %s\n", prog, local, strerror(errno));
		return 1;
	}
	struct kr_fs_attr dir, a;
	char name[KR_FS_NAME_MAX + 1];
	int rc = parent_of(fs, path, &dir, name, sizeof(name));
	if (rc == 0) {
		rc = kr_fs_lookup(fs, dir.ino, name, &a);
		if (rc == -ENOENT)
			rc = kr_fs_create(fs, dir.ino, name, 0644, (uint32_t)getuid(), (uint32_t)getgid(), &a);
		else if (rc == 0)
			rc = kr_fs_truncate(fs, a.ino, 0);
	}
	static char buf[1 << 16];
	uint64_t off = 0;
	size_t n;
	while (rc == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0) {
		ssize_t w = kr_fs_write(fs, a.ino, buf, n, off);
		rc = w < 0 ? (int)w : 0;
		off += n;
	}
	fclose(in);
	return rc ? op_error(path, rc) : 0;
}

static int do_mkdir_rm(kr_fs *fs, const char *path, bool make)
{
	struct kr_fs_attr dir, a;
	char name[KR_FS_NAME_MAX + 1];
	int rc = parent_of(fs, path, &dir, name, sizeof(name));
	if (rc == 0 && make)
		rc = kr_fs_mkdir(fs, dir.ino, name, 0755, (uint32_t)getuid(), (uint32_t)getgid(), NULL);
	else if (rc == 0 && (rc = kr_fs_lookup(fs, dir.ino, name, &a)) == 0)
		rc = S_ISDIR(a.mode) ? kr_fs_rmdir(fs, dir.ino, name) : kr_fs_unlink(fs, dir.ino, name);
	return rc ? op_error(path, rc) : 0;
}

/* Where the byte at offset of a file lives in the pool (for fault injection by hand). */
static int do_locate(kr_fs *fs, const char *path, const char *offset)
{
	uint64_t off;
	if (util_parse_size(offset, &off))
		return util_usage_error(prog, "invalid offset '%s'", offset);
	struct kr_fs_attr a;
	struct kr_fs_location loc;
	int rc = kr_fs_resolve(fs, path, 1, &a);
	if (rc == 0)
		rc = kr_fs_locate(fs, a.ino, off, &loc);
	if (rc == -ENXIO) { /* strerror's "No such device or address" says neither */
		fprintf(stderr, "%s: %s: offset %" PRIu64 " is %s\n", prog, path, off,
			off >= a.size ? "past the end of the file" : "in a hole: no data page holds it");
		return 1;
	}
	if (rc)
		return op_error(path, rc);
	util_field("data page", "0x%" PRIx64, loc.page_off);
	util_field("strip", "0x%" PRIx64 " (512 bytes)", loc.strip_off);
	util_field("strip crcs", "0x%" PRIx64 " 0x%" PRIx64 " (4 bytes each)", loc.csum_off[0], loc.csum_off[1]);
	util_field("parity", "0x%" PRIx64 " (512 bytes)", loc.parity_off);
	return 0;
}

/* What a DIR-or-POOL operand names: 1 a directory (a mount's, for the daemon), 0 anything
 * else (a pool, opened directly), -1 a mount whose daemon has died, after saying so: stat
 * then fails with ENOTCONN, and opening the path as a pool would only say "Is a directory". */
static int mount_dir(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode);
	if (errno != ENOTCONN)
		return 0;
	fprintf(stderr, "%s: %s: the keratin-fs daemon serving this mount has died; "
		"'keratin fs umount %s' removes the mount, then mount the pool again\n", prog, path, path);
	return -1;
}

/* keratin fs snapshot create|list|delete DIR|POOL [NAME]: on a mount through its daemon,
 * on a pool directly. */
static int do_snapshot(int argc, char **argv, unsigned flags)
{
	const char *op = argc > 0 ? argv[0] : "";
	bool named = !strcmp(op, "create") || !strcmp(op, "delete");
	if (!named && strcmp(op, "list") != 0)
		return util_usage_error(prog, "snapshot takes create, list or delete");
	if (argc != (named ? 3 : 2))
		return util_usage_error(prog, "snapshot %s takes DIR or POOL%s", op, named ? " and a NAME" : "");
	const char *target = argv[1], *name = named ? argv[2] : NULL;
	int is_mount = mount_dir(target);
	if (is_mount < 0)
		return 1;
	if (is_mount)
		return named ? fs_control_set(target, !strcmp(op, "create") ? "snapshot-create" : "snapshot-delete", name)
			     : fs_control(target, "snapshots");
	kr_fs *fs;
	int rc = kr_fs_mount(target, flags | (named ? 0 : KR_FS_MOUNT_CHECK), &fs);
	if (rc)
		return util_lib_error("keratin", target, rc);
	if (!named)
		rc = fs_print_snapshots(stdout, fs);
	else if ((rc = !strcmp(op, "create") ? kr_fs_snapshot_create(fs, name, NULL) : kr_fs_snapshot_delete(fs, name)))
		rc = op_error(name, rc);
	int urc = kr_fs_unmount(fs);
	if (urc && !rc)
		rc = util_lib_error("keratin", target, urc);
	return rc;
}

#define FS_VERB_ENTRY(name, nargs, operands) {#name, nargs, operands},
static const struct verb {
	const char *name;
	int nargs;
	const char *operands;
} verbs[] = {FS_VERBS(FS_VERB_ENTRY)};


int fs_command(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"size", required_argument, NULL, 's'},	    {"inodes", required_argument, NULL, 'i'},
		{"log-size", required_argument, NULL, 'l'}, {"dead-zone", required_argument, NULL, 'd'},
		{"force-pmem", no_argument, NULL, 'p'},	    {"repair", no_argument, NULL, 'r'},
		{"json", no_argument, NULL, 'j'},	    {"foreground", no_argument, NULL, 'f'},
		{"options", required_argument, NULL, 'o'},  {"protect", required_argument, NULL, 'P'},
		{"relaxed", no_argument, NULL, 'R'},	    {"help", no_argument, NULL, 'h'},
		{"quiet", no_argument, NULL, 'q'},
		{"parity", required_argument, NULL, 'Z'},   {NULL, 0, NULL, 0},
	};
	uint64_t size = 0, inodes = 0, log = 0, dead = 0;
	unsigned flags = 0;
	bool repair = false, json = false, foreground = false;
	const char *mount_opts = NULL;
	int unprotect = -1;
	bool relaxed = false, parity = false;
	struct kr_fs_mkfs_opts mo = {.struct_size = sizeof(mo)};
	int c;
	while ((c = util_getopt_short(prog, argc, argv, ":hfo:", longopts)) != -1) {
		switch (c) {
		case 's':
		case 'l':
		case 'd':
			if (util_parse_size(optarg, c == 's' ? &size : c == 'l' ? &log : &dead))
				return util_usage_error(prog, "invalid size '%s'", optarg);
			break;
		case 'i':
			if (util_parse_uint(optarg, 64, 1u << 30, &inodes))
				return util_usage_error(prog, "invalid --inodes '%s' (64 to 2^30, a multiple of 32)", optarg);
			break;
		case 'p': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'r': repair = true; break;
		case 'j': json = true; break;
		case 'f': foreground = true; break;
		case 'o': mount_opts = optarg; break;
		case 'R': relaxed = true; break;
		case 'q': util_progress_quiet = 1; break;
		case 'Z':
			if (parity_layout(optarg, &mo) != 0)
				return util_usage_error(prog, "invalid --parity '%s' (page, zone or zone:COLUMNS, 2..1024)", optarg);
			parity = true;
			break;
		case 'P':
			if ((unprotect = protect_level(optarg)) < 0)
				return util_usage_error(prog, "invalid --protect '%s' (full, metadata or none)", optarg);
			break;
		case 'h': printf("usage: keratin fs %s\n\n%s", fs_synopsis, fs_details); return 0;
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return util_usage_error(prog, "missing a subcommand (mkfs, mount, umount, info, fsck, scrub, ...)");
	const char *verb = argv[optind];
	if (!strcmp(verb, "snapshot"))
		return do_snapshot(argc - optind - 1, argv + optind + 1, flags);
	const struct verb *v = NULL;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verb, verbs[i].name) == 0)
			v = &verbs[i];
	if (!v)
		return util_usage_error(prog, "unknown subcommand '%s'", verb);
	if (argc - optind - 1 != v->nargs)
		return util_usage_error(prog, "%s takes %s", verb, v->operands);
	if ((size || inodes || log || dead || unprotect >= 0 || relaxed || parity) && strcmp(verb, "mkfs") != 0)
		return util_usage_error(prog, "--size, --inodes, --log-size, --dead-zone, --protect, --relaxed and --parity "
				       "are for mkfs");
	if ((foreground || mount_opts) && strcmp(verb, "mount") != 0)
		return util_usage_error(prog, "-f and -o are for mount");
	if ((repair || json) && strcmp(verb, "fsck") != 0)
		return util_usage_error(prog, "--repair and --json are for fsck");
	const char *pool = argv[optind + 1];
	if (!strcmp(verb, "mkfs")) {
		mo.size = size;
		mo.ninodes = (uint32_t)inodes;
		mo.meta_bytes = log;
		mo.dead_zone = dead;
		mo.open_flags = flags;
		mo.unprotect = (unprotect < 0 ? 0 : (uint32_t)unprotect) | (relaxed ? KR_FS_RELAXED : 0);
		return do_mkfs(pool, &mo);
	}
	if (!strcmp(verb, "mount"))
		return fs_mount(pool, argv[optind + 2], foreground, mount_opts, flags);
	if (!strcmp(verb, "umount"))
		return fs_umount(pool);
	if (!strcmp(verb, "info") || !strcmp(verb, "scrub") || !strcmp(verb, "requests")) {
		int is_mount = mount_dir(pool);
		if (is_mount)
			return is_mount < 0 ? 1 : fs_control(pool, verb);
	}
	if (!strcmp(verb, "requests"))
		return util_usage_error(prog, "requests takes the DIR of a mount");
	if (!strcmp(verb, "fsck") && !json)
		verb = repair ? "repair" : "check";

	bool inspect = !strcmp(verb, "info") || !strcmp(verb, "check") || !strcmp(verb, "ls") ||
		       !strcmp(verb, "cat") || !strcmp(verb, "locate") || (!strcmp(verb, "fsck") && !repair);
	kr_fs *fs;
	int rc = kr_fs_mount(pool, flags | (inspect ? KR_FS_MOUNT_CHECK : 0), &fs);
	if (rc)
		return util_lib_error("keratin", pool, rc);
	const char *a1 = argv[optind + 2 < argc ? optind + 2 : optind];
	/* check, repair, fsck --json and scrub walk every inode and data page: a bar for each
	 * pass (repair makes two: scrub, then check). */
	struct util_progress bar;
	util_progress_init(&bar, !strcmp(verb, "scrub") ? "scrubbing" : !strcmp(verb, "repair") ? "repairing" : "checking");
	if (!strcmp(verb, "check") || !strcmp(verb, "repair") || !strcmp(verb, "fsck") || !strcmp(verb, "scrub"))
		kr_fs_set_progress(fs, util_progress_cb, &bar);
	if (!strcmp(verb, "info"))
		rc = fs_print_info(stdout, fs, pool) ? 1 : 0;
	else if (!strcmp(verb, "check"))
		rc = do_check(fs, pool);
	else if (!strcmp(verb, "fsck"))
		rc = do_fsck_json(fs, pool, repair);
	else if (!strcmp(verb, "repair"))
		rc = do_repair(fs, pool);
	else if (!strcmp(verb, "scrub"))
		rc = fs_print_scrub(stdout, fs, pool);
	else if (!strcmp(verb, "ls"))
		rc = do_ls(fs, a1);
	else if (!strcmp(verb, "cat"))
		rc = do_cat(fs, a1);
	else if (!strcmp(verb, "locate"))
		rc = do_locate(fs, a1, argv[optind + 3]);
	else if (!strcmp(verb, "put"))
		rc = do_put(fs, a1, argv[optind + 3]);
	else
		rc = do_mkdir_rm(fs, a1, !strcmp(verb, "mkdir"));
	util_progress_end(&bar);
	int urc = kr_fs_unmount(fs);
	if (urc && !rc)
		rc = util_lib_error("keratin", pool, urc);
	return rc;
}
