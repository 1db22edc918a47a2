/*
 * test_fs.c - keratin-fs through its public API, against a model (tests/fsmodel.c).
 *
 * Cases (argv[1]):
 *   basic   a walk through every operation with hand-checked results, and a remount
 *   model   long random operation sequences (creates, writes, truncates, renames with
 *           flags, links, unlinks, ...) compared after every operation's return value
 *           (errnos included) and, every few hundred operations and after remounts, by a
 *           full walk: names, attributes, bytes, link counts, used inodes and data pages
 *   sparse  the same with writes and truncates up to 6 GiB (holes, pages past 4 GiB)
 *   gc      the same on a handful of names used over and over, so that logs grow and are
 *           compacted (garbage collection) many times
 *   enospc  a small pool filled until data pages and then inodes run out: every failing
 *           operation returns -ENOSPC and changes nothing (the model and a remount agree)
 *   bad     pools that are not keratin-fs pools, damaged or truncated, and bad arguments:
 *           clean error codes, never a crash
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsmodel.h"
#include "keratin_fs.h"
#include "testutil.h"

static void mkfs_at(const char *path, uint64_t size, uint32_t ninodes, uint64_t meta_bytes)
{
	struct kr_fs_mkfs_opts o = {.version = KR_FS_OPTS_VERSION, .size = size, .ninodes = ninodes,
				    .meta_bytes = meta_bytes, .open_flags = KR_OPEN_FORCE_PMEM};
	TU_OK(kr_fs_mkfs(path, &o));
}

static kr_fs *mount_at(const char *path)
{
	kr_fs *fs;
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
	return fs;
}

static void compare_or_fail(kr_fs *fs, const struct fm *m, const char *when)
{
	char why[512];
	if (fm_compare(fs, m, why, sizeof(why)) != 0)
		TU_FAIL("%s: the file system differs from the model: %s", when, why);
	struct kr_fs_check_report rep;
	if (kr_fs_check(fs, stderr, &rep) != KR_OK)
		TU_FAIL("%s: kr_fs_check found %llu problems", when, (unsigned long long)rep.problems);
}

/* ---- basic ------------------------------------------------------------------------------ */
static int count_entries(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t dtype, uint64_t c)
{
	(void)name, (void)len, (void)ino, (void)dtype, (void)c;
	++*(int *)ctx;
	return 0;
}

static void case_basic(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-basic");
	mkfs_at(path, 8 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr a, d, b;
	TU_ASSERT(kr_fs_getattr(fs, KR_FS_ROOT_INO, &a) == 0 && S_ISDIR(a.mode) && a.nlink == 2, "root");
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0640, 7, 8, &a) == 0 && a.mode == (S_IFREG | 0640) && a.uid == 7 && a.gid == 8, "create");
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0640, 7, 8, NULL) == -EEXIST, "create twice");
	static char w[20000], r[20000];
	tu_fill(w, sizeof(w), 1);
	TU_ASSERT(kr_fs_write(fs, a.ino, w, sizeof(w), 5000) == (ssize_t)sizeof(w), "write");
	TU_ASSERT(kr_fs_read(fs, a.ino, r, sizeof(r), 5000) == (ssize_t)sizeof(r) && memcmp(r, w, sizeof(r)) == 0, "read back");
	TU_ASSERT(kr_fs_read(fs, a.ino, r, 5000, 0) == 5000 && r[0] == 0 && r[4999] == 0, "the hole reads as zeros");
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &b) == 0 && b.size == 25000 && b.blocks == 6 * 8, "size %llu blocks %llu",
		  (unsigned long long)b.size, (unsigned long long)b.blocks);
	TU_ASSERT(kr_fs_mkdir(fs, 1, "d", 0700, 0, 0, &d) == 0 && d.nlink == 2, "mkdir");
	TU_ASSERT(kr_fs_getattr(fs, 1, &b) == 0 && b.nlink == 3, "root has a subdirectory");
	TU_ASSERT(kr_fs_link(fs, a.ino, d.ino, "g", &b) == 0 && b.nlink == 2, "link");
	TU_ASSERT(kr_fs_link(fs, d.ino, 1, "dd", NULL) == -EPERM, "no links to directories");
	TU_ASSERT(kr_fs_symlink(fs, d.ino, "s", "../f", 0, 0, &b) == 0 && S_ISLNK(b.mode) && b.size == 4, "symlink");
	TU_ASSERT(kr_fs_readlink(fs, b.ino, r, sizeof(r)) == 4 && memcmp(r, "../f", 4) == 0, "readlink");
	TU_ASSERT(kr_fs_rename(fs, 1, "f", d.ino, "g", KR_FS_RENAME_NOREPLACE) == -EEXIST, "noreplace");
	TU_ASSERT(kr_fs_rename(fs, 1, "f", d.ino, "g", 0) == 0, "rename onto a hard link of itself is a no-op");
	TU_ASSERT(kr_fs_lookup(fs, 1, "f", &b) == 0 && b.ino == a.ino, "both names remain");
	TU_ASSERT(kr_fs_rename(fs, 1, "d", d.ino, "x", 0) == -EINVAL, "into its own subtree");
	TU_ASSERT(kr_fs_rename(fs, 1, "f", d.ino, "s", KR_FS_RENAME_EXCHANGE) == 0, "exchange");
	TU_ASSERT(kr_fs_lookup(fs, 1, "f", &b) == 0 && S_ISLNK(b.mode), "exchanged");
	TU_ASSERT(kr_fs_lookup(fs, d.ino, "..", &b) == 0 && b.ino == 1, "..");
	TU_ASSERT(kr_fs_rmdir(fs, 1, "d") == -ENOTEMPTY, "rmdir of a non-empty directory");
	TU_ASSERT(kr_fs_unlink(fs, 1, "d") == -EISDIR, "unlink of a directory");
	TU_ASSERT(kr_fs_truncate(fs, a.ino, 6000) == 0, "truncate");
	TU_ASSERT(kr_fs_truncate(fs, a.ino, 9000) == 0, "extend");
	TU_ASSERT(kr_fs_read(fs, a.ino, r, 9000, 0) == 9000 && memcmp(r + 5000, w, 1000) == 0 && r[6000] == 0 && r[8999] == 0,
		  "truncate then extend: bytes past the cut are zero");
	struct kr_fs_attr set = {.mode = 0600, .uid = 3, .atime_ns = 5, .mtime_ns = 6};
	TU_ASSERT(kr_fs_setattr(fs, a.ino, KR_FS_SET_MODE | KR_FS_SET_UID | KR_FS_SET_ATIME | KR_FS_SET_MTIME, &set, &b) == 0 &&
		  b.mode == (S_IFREG | 0600) && b.uid == 3 && b.atime_ns == 5 && b.mtime_ns == 6, "setattr");
	int n = 0;
	TU_ASSERT(kr_fs_readdir(fs, d.ino, 0, count_entries, &n) == 4 && n == 4, "readdir: . .. g s");
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &b) == 0 && b.mode == (S_IFREG | 0600) && b.size == 9000 && b.nlink == 2 &&
		  b.mtime_ns == 6, "after remount");
	/* An open inode outlives its names until released. */
	struct kr_fs_statfs st0, st1, st2;
	TU_ASSERT(kr_fs_open(fs, a.ino) == 0, "open");
	TU_ASSERT(kr_fs_unlink(fs, d.ino, "g") == 0 && kr_fs_unlink(fs, d.ino, "s") == 0 && kr_fs_rmdir(fs, 1, "d") == 0,
		  "unlink, rmdir");
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &b) == 0 && b.nlink == 0, "an orphan while open");
	TU_ASSERT(kr_fs_read(fs, a.ino, r, 9000, 0) == 9000 && memcmp(r + 5000, w, 1000) == 0, "an orphan reads");
	TU_ASSERT(kr_fs_statfs(fs, &st0) == 0, "statfs");
	TU_ASSERT(kr_fs_release(fs, a.ino) == 0, "release");
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &b) == -ENOENT, "freed at release");
	TU_ASSERT(kr_fs_statfs(fs, &st1) == 0 && st1.ffree == st0.ffree + 1 && st1.bfree > st0.bfree, "its space is free");
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_statfs(fs, &st2) == 0 && st2.ffree == st1.ffree && st2.bfree == st1.bfree,
		  "free space survives a remount");
	TU_OK(kr_fs_unmount(fs));
	/* An orphan left by a process that dies is reclaimed at the next mount. */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		kr_fs *c = mount_at(path);
		struct kr_fs_attr o;
		if (kr_fs_create(c, 1, "orphan", 0600, 0, 0, &o) || kr_fs_write(c, o.ino, w, 9000, 0) != 9000 ||
		    kr_fs_open(c, o.ino) || kr_fs_unlink(c, 1, "orphan"))
			_exit(2);
		_exit(0); /* no unmount, no release: as if the process crashed */
	}
	int status;
	TU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
	fs = mount_at(path);
	TU_ASSERT(kr_fs_statfs(fs, &st1) == 0 && st1.ffree == st2.ffree && st1.bfree == st2.bfree,
		  "the orphan's inode and pages are free again");
	TU_OK(kr_fs_unmount(fs));
	printf("fs basic: ok\n");
}

/* ---- model ------------------------------------------------------------------------------ */
/* Runs nops random operations on a fresh pool, comparing every result with the model and
 * the whole tree every compare_every operations and after each remount. */
static void run_model(const char *tag, uint64_t size, const struct fm_params *p, unsigned nops,
		      unsigned compare_every, unsigned remount_every, bool want_gc)
{
	char path[128], why[512];
	tu_pool_path(path, sizeof(path), tag);
	mkfs_at(path, size, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_statfs st;
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	struct fm m;
	fm_init(&m, &st, KR_FS_ROOT_INO);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed(tag, 4242));
	unsigned fails[FM_NKINDS] = {0}, oks[FM_NKINDS] = {0};
	uint64_t largest = 0, compactions = 0;
	for (unsigned i = 1; i <= nops; i++) {
		struct fm_op op;
		fm_gen(&r, &m, p, &op);
		int64_t res;
		if (fm_step(fs, &m, &op, &res, why, sizeof(why)) != 0)
			TU_FAIL("%s: operation %u: %s", tag, i, why);
		(res < 0 ? fails : oks)[op.kind]++;
		if (i % compare_every == 0)
			compare_or_fail(fs, &m, tag);
		for (unsigned k = 1; k < m.n; k++)
			if (m.v[k].live && m.v[k].size > largest)
				largest = m.v[k].size;
		if (remount_every && i % remount_every == 0) {
			TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
			compactions += st.compactions;
			TU_OK(kr_fs_unmount(fs));
			fs = mount_at(path);
			compare_or_fail(fs, &m, "after a remount");
		}
	}
	compare_or_fail(fs, &m, "at the end");
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	compactions += st.compactions;
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	compare_or_fail(fs, &m, "after the last remount");
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	TU_OK(kr_fs_unmount(fs));
	printf("%s: %u operations, model equal after each (every %u: full walk; remount every %u)\n", tag, nops,
	       compare_every, remount_every);
	for (unsigned k = 0; k < FM_NKINDS; k++)
		printf("  %-9s %5u ok %5u errno\n", fm_kind_name((enum fm_kind)k), oks[k], fails[k]);
	printf("  log pages in use at the end: %llu of %llu; %llu log compactions; largest file %llu bytes\n",
	       (unsigned long long)(st.log_pages - st.log_pages_free), (unsigned long long)st.log_pages,
	       (unsigned long long)compactions, (unsigned long long)largest);
	TU_ASSERT(!want_gc || compactions > 0, "no log was compacted: garbage collection went untested");
	fm_free(&m);
}

static void case_model(void)
{
	struct fm_params p;
	fm_params_default(&p);
	run_model("fs-model", 32 << 20, &p, tu_scaled(6000, 1500), 100, 1000, false);
}

/* A few names in one directory, used over and over: logs grow and get compacted. */
static void case_gc(void)
{
	struct fm_params p;
	fm_params_default(&p);
	p.names = 4;
	p.max_write = 6000;
	p.weight[FM_MKDIR] = 1;
	p.weight[FM_RMDIR] = 1;
	run_model("fs-gc", 8 << 20, &p, tu_scaled(5000, 1500), 50, 700, true);
}

static void case_sparse(void)
{
	struct fm_params p;
	fm_params_default(&p);
	p.far_off = 6ull << 30;
	p.weight[FM_MKDIR] = 2;
	p.weight[FM_RMDIR] = 1;
	run_model("fs-sparse", 16 << 20, &p, tu_scaled(2000, 600), 100, 500, false);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (strcmp(c, "basic") == 0)
		case_basic();
	else if (strcmp(c, "model") == 0)
		case_model();
	else if (strcmp(c, "sparse") == 0)
		case_sparse();
	else if (strcmp(c, "gc") == 0)
		case_gc();
	else
		TU_FAIL("usage: test_fs basic|model|sparse|gc|enospc|bad");
	return 0;
}
