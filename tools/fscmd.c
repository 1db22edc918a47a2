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
#include <unistd.h>

#include "fscmd.h"
#include "keratin_fs.h"
#include "util.h"

const char fs_synopsis[] = "mkfs|info|check|repair|ls|cat|put|mkdir|rm POOL [ARGS] [OPTIONS]";
const char fs_details[] =
	"keratin-fs: a fault-tolerant file system in one pool file (NOVA-Fortis's design).\n"
	"\n"
	"  mkfs POOL --size SIZE   make a pool (the file must not exist)\n"
	"       [--inodes N] [--log-size SIZE] [--dead-zone SIZE]\n"
	"  info POOL               geometry, space, redundancy; changes nothing\n"
	"  check POOL              verify every structure and invariant; changes nothing;\n"
	"                          lists what a repairing mount would fix\n"
	"  repair POOL             mount (repairing), scrub everything, check\n"
	"  ls POOL PATH            list a directory (or show one file)\n"
	"  cat POOL PATH           write a file's bytes to standard output\n"
	"  put POOL FILE PATH      copy a local FILE into the pool at PATH\n"
	"  mkdir POOL PATH         make a directory\n"
	"  rm POOL PATH            remove a file, or an empty directory\n"
	"\n"
	"  --force-pmem   treat the file as persistent memory (tmpfs, testing)\n"
	"\n"
	"Exit status: 0 success (check: sound), 1 damage found or a library error,\n"
	"2 bad command line.\n";

static const char *prog = "keratin fs";

/* File-system operations return -errno: one line naming the path. */
static int op_error(const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(-rc));
	return 1;
}

static int do_mkfs(const char *pool, uint64_t size, uint64_t inodes, uint64_t log, uint64_t dead, unsigned flags)
{
	if (!size)
		return util_usage_error(prog, "mkfs needs --size");
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .ninodes = (uint32_t)inodes,
				    .meta_bytes = log, .dead_zone = dead, .open_flags = flags};
	int rc = kr_fs_mkfs(pool, &o);
	if (rc)
		return util_lib_error("keratin", pool, rc);
	return 0;
}

static int do_info(kr_fs *fs, const char *pool)
{
	struct kr_fs_statfs st;
	int rc = kr_fs_statfs(fs, &st);
	if (rc)
		return op_error(pool, rc);
	char a[UTIL_HUMAN_LEN], b[UTIL_HUMAN_LEN], c[UTIL_HUMAN_LEN];
	util_field("pool", "%s", pool);
	util_field("data", "%s in %" PRIu64 " pages, %s free", util_human(st.blocks * st.bsize, a), st.blocks,
		   util_human(st.bfree * st.bsize, b));
	util_field("inodes", "%" PRIu64 " (%" PRIu64 " free)", st.files, st.ffree);
	util_field("inode logs", "%" PRIu64 " pages of %s, %" PRIu64 " free", st.log_pages, util_human(st.bsize, c),
		   st.log_pages_free);
	util_field("redundancy", "metadata replica + CRC-32C; data: 2 CRC-32C copies per 512 B strip, "
		   "1 parity strip per page (576 B per 4 KiB)");
	util_field("dead zone", "%s between metadata copies", util_human(st.dead_zone, a));
	util_field("last session", "%s (mount %" PRIu64 ")", st.was_clean ? "unmounted cleanly" : "did not unmount (crash)",
		   st.mount_count);
	util_field("repairs", "%" PRIu64 " needed at mount", st.repairs);
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

static int do_repair(kr_fs *fs, const char *pool)
{
	struct kr_fs_statfs st;
	kr_fs_statfs(fs, &st);
	struct kr_fs_scrub_report rep;
	int rc = kr_fs_scrub(fs, stdout, &rep);
	printf("repair: %" PRIu64 " repaired by the mount, %" PRIu64 " by the scrub (%" PRIu64 " metadata items, %" PRIu64
	       " data pages verified), %" PRIu64 " unrepairable\n",
	       st.repairs, rep.repaired, rep.meta_items, rep.data_pages, rep.unrepairable);
	if (rc != KR_OK && rc != KR_E_CORRUPT)
		return util_lib_error("keratin", pool, rc);
	int crc = do_check(fs, pool);
	return rc == KR_OK ? crc : 1;
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

int fs_command(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"size", required_argument, NULL, 's'},	    {"inodes", required_argument, NULL, 'i'},
		{"log-size", required_argument, NULL, 'l'}, {"dead-zone", required_argument, NULL, 'd'},
		{"force-pmem", no_argument, NULL, 'f'},	    {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t size = 0, inodes = 0, log = 0, dead = 0;
	unsigned flags = 0;
	int c;
	while ((c = util_getopt(prog, argc, argv, longopts)) != -1) {
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
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h': printf("usage: keratin fs %s\n\n%s", fs_synopsis, fs_details); return 0;
		default: return UTIL_EXIT_USAGE;
		}
	}
	static const struct {
		const char *verb;
		int nargs;
	} verbs[] = {{"mkfs", 0}, {"info", 0}, {"check", 0}, {"repair", 0}, {"ls", 1},
		     {"cat", 1},  {"put", 2},  {"mkdir", 1}, {"rm", 1}};
	if (optind >= argc)
		return util_usage_error(prog, "missing mkfs, info, check, repair, ls, cat, put, mkdir or rm");
	const char *verb = argv[optind];
	int nargs = -1;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verb, verbs[i].verb) == 0)
			nargs = verbs[i].nargs;
	if (nargs < 0)
		return util_usage_error(prog, "unknown subcommand '%s'", verb);
	if (argc - optind - 2 != nargs)
		return util_usage_error(prog, "%s takes POOL%s", verb,
					nargs == 0 ? "" : nargs == 1 ? " and a PATH" : ", a local FILE and a PATH");
	const char *pool = argv[optind + 1];
	if (strcmp(verb, "mkfs") == 0)
		return do_mkfs(pool, size, inodes, log, dead, flags);
	if (size || inodes || log || dead)
		return util_usage_error(prog, "--size, --inodes, --log-size and --dead-zone are for mkfs");
	bool inspect = !strcmp(verb, "info") || !strcmp(verb, "check") || !strcmp(verb, "ls") || !strcmp(verb, "cat");
	kr_fs *fs;
	int rc = kr_fs_mount(pool, flags | (inspect ? KR_FS_MOUNT_CHECK : 0), &fs);
	if (rc)
		return util_lib_error("keratin", pool, rc);
	const char *a1 = argv[optind + 2 < argc ? optind + 2 : optind];
	if (!strcmp(verb, "info"))
		rc = do_info(fs, pool);
	else if (!strcmp(verb, "check"))
		rc = do_check(fs, pool);
	else if (!strcmp(verb, "repair"))
		rc = do_repair(fs, pool);
	else if (!strcmp(verb, "ls"))
		rc = do_ls(fs, a1);
	else if (!strcmp(verb, "cat"))
		rc = do_cat(fs, a1);
	else if (!strcmp(verb, "put"))
		rc = do_put(fs, a1, argv[optind + 3]);
	else
		rc = do_mkdir_rm(fs, a1, !strcmp(verb, "mkdir"));
	int urc = kr_fs_unmount(fs);
	if (urc && !rc)
		rc = util_lib_error("keratin", pool, urc);
	return rc;
}
