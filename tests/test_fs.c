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
 *   fastgc  one 4 KiB page overwritten 100 000 times, then mode and times changed 100 000
 *           times: the file's log stays a few pages long, freed by fast GC without a copy
 *           (statfs counters), the bytes and attributes right, the checker clean, and the
 *           same again after a remount (the scan recounts what is live)
 *   enospc  a small pool filled until data pages and then inodes run out: every failing
 *           operation returns -ENOSPC and changes nothing (the model and a remount agree)
 *   xattr   extended attributes by hand: every errno, size queries, the listing order,
 *           the incompat bit, persistence across remounts and log compaction
 *   snapshot snapshots by hand: the copy stays as it was while the live tree changes (bytes,
 *           names, links, attributes, extended attributes), every change refused with
 *           -EROFS, pages held and freed by delete (statfs), persistence across remounts
 *   bad     pools that are not keratin-fs pools, damaged or truncated, and bad arguments:
 *           clean error codes, never a crash; then seeded random damage of metadata bytes:
 *           mount works (repairing) or fails with a known code, and the checker runs
 *
 * KR_FS_TRACE=1 makes the model cases print every operation and compare after each.
 *
 *   threads four threads, each with its own directory and model, on one file system, and a
 *           fifth making, reading and deleting snapshots; then every model, the checker, and
 *           the same after a remount
 *   datapath four writers, each writing, reading, fsyncing, truncating a file of its own in one
 *           directory (the data path runs under the shared lock), each file's first page
 *           damaged beforehand (its read repairs under the exclusive lock), beside a thread
 *           creating, renaming, linking and removing other names in that directory; then
 *           every file equal to its writer's copy, the checker clean (parity, zone rows
 *           included), and the same after a remount
 *   fences  fences and bytes written per operation, pinned, with full protection, none, and
 *           full protection in relaxed mode (a 512 B overwrite in place)
 *   wprotect KR_FS_MOUNT_WPROTECT: the model's operations on a write-protected mount; a stray
 *           store through the pool mapping faults in a forked child (and lands without it)
 *   relaxed relaxed mode by hand: overwrites stay in their pages (kr_fs_locate) and read
 *           back, extensions, holes and snapshot-held pages stay copy-on-write, a damaged
 *           strip under an overwrite is repaired first, the checker finds nothing
 *   layout  the format of docs/FORMAT-FS.md recomputed from raw bytes: geometry, dead zone,
 *           byte-identical replicas, the root's slot, self-checking tail word, entry CRC
 *   zone    zone parity's format from raw bytes: the feature bit, columns, the parity area,
 *           every row's parity recomputed, the intent word; bad options refused
 *   scan    the mount scan with one thread and with several: the same DRAM state (inodes,
 *           indexes, allocators, transaction ids), on a clean pool and on one whose logs and
 *           slots need repairs
 * KR_TEST_FS_PARITY=zone runs the other cases on zone-parity pools.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "fs_layout.h"
#include "fsmodel.h"
#include "keratin_fs.h"
#include "testutil.h"

static void mkfs_at(const char *path, uint64_t size, uint32_t ninodes, uint64_t meta_bytes)
{
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .ninodes = ninodes,
				    .meta_bytes = meta_bytes, .open_flags = KR_OPEN_FORCE_PMEM,
				    .unprotect = fm_unprotect_from_env(), .parity = fm_parity_from_env()};
	TU_OK(kr_fs_mkfs(path, &o));
	/* checks invariant fs_super.c 3 */
	TU_ASSERT(tu_fully_allocated(path), "%s: mkfs left the file sparse", path);
}

static kr_fs *mount_at(const char *path)
{
	kr_fs *fs;
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
	return fs;
}

/* The model's truncates, extensions and writes past the end read zeros where no write
 * went, so a page's tail past an old size must be zero on the media (the model case fails
 * within its run when truncation leaves the tail): checks invariant fs_apply.c 3 */
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
	/* Dropping privileges: set-group-ID only with group execution, or when told to. */
	static const struct {
		uint32_t mode;
		unsigned kill;
		uint32_t after;
	} kills[] = {{06770, KR_FS_SET_KILL_SUIDGID, 0770},
		     {06760, KR_FS_SET_KILL_SUIDGID, 02760},
		     {02760, KR_FS_SET_KILL_SUIDGID | KR_FS_SET_KILL_SGID, 0760},
		     {04600, KR_FS_SET_KILL_SGID, 04600}};
	for (size_t i = 0; i < sizeof(kills) / sizeof(kills[0]); i++) {
		set.mode = kills[i].mode;
		TU_ASSERT(kr_fs_setattr(fs, a.ino, KR_FS_SET_MODE, &set, NULL) == 0 &&
			  kr_fs_setattr(fs, a.ino, kills[i].kill, NULL, &b) == 0 && b.mode == (S_IFREG | kills[i].after),
			  "mode %o, drop %#x: %o (expected %o)", kills[i].mode, kills[i].kill, b.mode & 07777, kills[i].after);
	}
	set.mode = 0600;
	TU_OK(kr_fs_setattr(fs, a.ino, KR_FS_SET_MODE, &set, NULL));
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
	/* Paths. */
	fs = mount_at(path);
	struct kr_fs_attr p1, q, f2;
	TU_ASSERT(kr_fs_mkdir(fs, 1, "p", 0755, 0, 0, &p1) == 0 && kr_fs_mkdir(fs, p1.ino, "q", 0755, 0, 0, &q) == 0 &&
		  kr_fs_create(fs, q.ino, "file", 0644, 0, 0, &f2) == 0, "tree for paths");
	TU_ASSERT(kr_fs_symlink(fs, p1.ino, "ln", "q", 0, 0, NULL) == 0 && kr_fs_symlink(fs, 1, "abs", "/p/q", 0, 0, NULL) == 0 &&
		  kr_fs_symlink(fs, 1, "loop", "/loop/x", 0, 0, NULL) == 0, "symlinks");
	TU_ASSERT(kr_fs_resolve(fs, "/", 1, &b) == 0 && b.ino == 1, "/");
	TU_ASSERT(kr_fs_resolve(fs, "/p/q/file", 1, &b) == 0 && b.ino == f2.ino, "plain path");
	TU_ASSERT(kr_fs_resolve(fs, "//p/./ln/../q/file", 1, &b) == 0 && b.ino == f2.ino, "dots, slashes, a relative link");
	TU_ASSERT(kr_fs_resolve(fs, "/abs/file", 1, &b) == 0 && b.ino == f2.ino, "an absolute link");
	TU_ASSERT(kr_fs_resolve(fs, "/p/ln", 0, &b) == 0 && S_ISLNK(b.mode), "the last link not followed");
	TU_ASSERT(kr_fs_resolve(fs, "/p/ln", 1, &b) == 0 && b.ino == q.ino, "the last link followed");
	TU_ASSERT(kr_fs_resolve(fs, "/loop", 1, &b) == -ELOOP, "a loop");
	TU_ASSERT(kr_fs_resolve(fs, "/p/q/file/x", 1, &b) == -ENOTDIR, "through a file");
	TU_ASSERT(kr_fs_resolve(fs, "/p/nope", 1, &b) == -ENOENT, "missing");
	TU_ASSERT(kr_fs_resolve(fs, "p", 1, &b) == -EINVAL, "relative");
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
	struct fm m;
	kr_fs *fs = fm_mount_new(path, &m);
	struct kr_fs_statfs st;
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed(tag, 4242));
	unsigned fails[FM_NKINDS] = {0}, oks[FM_NKINDS] = {0};
	bool trace = getenv("KR_FS_TRACE") != NULL;
	if (trace)
		compare_every = 1;
	uint64_t largest = 0, compactions = 0;
	for (unsigned i = 1; i <= nops; i++) {
		struct fm_op op;
		fm_gen(&r, &m, p, &op);
		int64_t res;
		if (fm_step(fs, &m, &op, &res, why, sizeof(why)) != 0)
			TU_FAIL("%s: operation %u: %s", tag, i, why);
		(res < 0 ? fails : oks)[op.kind]++;
		if (i % compare_every == 0) {
			if (trace) {
				char d[300];
				fm_describe(&op, d, sizeof(d));
				fprintf(stderr, "%u: %s -> %lld\n", i, d, (long long)res);
			}
			compare_or_fail(fs, &m, tag);
		}
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

/* One file, n changes to the same place: its log stays short, fast GC frees the pages and
 * compaction copies next to none. attrs: the changes alternate chmod and utimes, else 512-byte
 * overwrites of its first page. */
static void fastgc_loop(kr_fs *fs, uint64_t ino, unsigned n, bool attrs, uint64_t *max_used)
{
	struct kr_fs_statfs st0, st;
	uint64_t fast0, copied0, fast, copied;
	TU_ASSERT(kr_fs_statfs(fs, &st0) == 0, "statfs");
	TU_OK(kr_fs_gc_counts(fs, &fast0, &copied0));
	uint8_t buf[512];
	for (unsigned i = 0; i < n; i++) {
		if (attrs) {
			struct kr_fs_attr a = {.mode = 0600 | (i & 077), .atime_ns = i, .mtime_ns = 2 * (int64_t)i};
			TU_ASSERT(kr_fs_setattr(fs, ino, i % 2 ? KR_FS_SET_MODE : KR_FS_SET_ATIME | KR_FS_SET_MTIME, &a, NULL) == 0,
				  "setattr %u", i);
		} else {
			memset(buf, (int)(i % 251), sizeof(buf));
			TU_ASSERT(kr_fs_write(fs, ino, buf, sizeof(buf), (i % 8) * 512) == (ssize_t)sizeof(buf), "overwrite %u", i);
		}
		if (i % 1000 == 0) {
			TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
			if (st.log_pages - st.log_pages_free > *max_used)
				*max_used = st.log_pages - st.log_pages_free;
		}
	}
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	TU_OK(kr_fs_gc_counts(fs, &fast, &copied));
	TU_ASSERT(fast - fast0 >= n / 100, "fast GC freed %llu log pages in %u changes",
		  (unsigned long long)(fast - fast0), n);
	/* At most one compaction: of a page fast GC cannot free (it holds the last write when
	 * the attribute changes begin). */
	TU_ASSERT(st.compactions - st0.compactions <= 1 && copied - copied0 <= 2,
		  "%llu compactions copied %llu pages", (unsigned long long)(st.compactions - st0.compactions),
		  (unsigned long long)(copied - copied0));
}

/* What fastgc_loop left: the last write of each 512-byte slot, or the last mode and times. */
static void fastgc_verify(kr_fs *fs, uint64_t ino, unsigned n, bool attrs)
{
	struct kr_fs_attr a;
	TU_ASSERT(kr_fs_getattr(fs, ino, &a) == 0, "getattr");
	if (attrs) {
		unsigned lm = n - 1 - (n % 2 == 0 ? 0 : 1), lt = n - 1 - (n % 2 == 0 ? 1 : 0);
		TU_ASSERT(a.mode == (S_IFREG | 0600 | (lm & 077)) && a.atime_ns == lt && a.mtime_ns == 2 * (int64_t)lt,
			  "mode %o and times after %u changes", a.mode, n);
		TU_ASSERT(a.size == 4096, "size %llu", (unsigned long long)a.size);
	}
	uint8_t page[4096];
	TU_ASSERT(kr_fs_read(fs, ino, page, sizeof(page), 0) == (ssize_t)sizeof(page), "read");
	for (unsigned slot = 0; slot < 8 && !attrs; slot++) {
		unsigned last = n - 1 - ((n - 1 - slot) % 8);
		for (unsigned k = 0; k < 512; k++)
			TU_ASSERT(page[slot * 512 + k] == last % 251, "byte %u of slot %u", k, slot);
	}
	TU_OK(kr_fs_check(fs, stderr, NULL));
}

static void case_fastgc(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-fastgc");
	mkfs_at(path, 16 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr f;
	uint8_t zero[4096] = {0};
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0600, 0, 0, &f) == 0 && kr_fs_write(fs, f.ino, zero, sizeof(zero), 0) == 4096,
		  "create f");
	unsigned n = tu_scaled(100000, 20000);
	for (int attrs = 0; attrs < 2; attrs++) {
		uint64_t max_used = 0;
		fastgc_loop(fs, f.ino, n, attrs, &max_used);
		fastgc_verify(fs, f.ino, n, attrs);
		TU_OK(kr_fs_unmount(fs));
		fs = mount_at(path);
		fastgc_verify(fs, f.ino, n, attrs);
		fastgc_loop(fs, f.ino, n / 10, attrs, &max_used); /* counts rebuilt by the scan */
		fastgc_verify(fs, f.ino, n / 10, attrs);
		/* The root's log, f's first page, a dead page or two, the page being appended. */
		TU_ASSERT(max_used <= 5, "%llu log pages in use", (unsigned long long)max_used);
		printf("fs fastgc: %u %s: at most %llu log pages in use\n", n + n / 10, attrs ? "chmod/utimes" : "overwrites",
		       (unsigned long long)max_used);
	}
	uint64_t fast, copied;
	TU_OK(kr_fs_gc_counts(fs, &fast, &copied));
	TU_ASSERT(kr_fs_gc_counts(NULL, &fast, NULL) == -EINVAL, "kr_fs_gc_counts of no file system");
	printf("fs fastgc: since the last mount %llu log pages freed by fast GC, %llu copied by compaction\n",
	       (unsigned long long)fast, (unsigned long long)copied);
	TU_OK(kr_fs_unmount(fs));
}

/* Fast GC in a directory's log. 600 names are made and kept, 150 more made and removed,
 * a subdirectory made (its entry takes the directory's link count from the last removal),
 * then thousands of attribute changes of the directory leave every older entry dead but
 * the names and the removals. Fast GC must unlink only pages of attribute changes: a page
 * holding a kept name owns it (fs_apply.c invariant 4), and the pages that hold only
 * removals are pinned (invariant 5), else the removed names come back from their older
 * entries at the next mount. The churn stays below compaction's threshold (a compaction
 * copies the names from DRAM and would hide a lost page). So this
 * checks invariants fs_apply.c 4, fs_apply.c 5
 * (seen failing: with removals unpinned the remount found the removed names, with the names'
 * entries uncounted it lost kept ones). */
static void case_fastgc_dir(void)
{
	char path[128], name[16];
	tu_pool_path(path, sizeof(path), "fs-fastgc-dir");
	mkfs_at(path, 32 << 20, 1024, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr d, a;
	enum { KEPT = 600, GONE = 150 };
	TU_ASSERT(kr_fs_mkdir(fs, 1, "d", 0755, 0, 0, &d) == 0, "mkdir d");
	for (unsigned i = 0; i < KEPT + GONE; i++) {
		snprintf(name, sizeof(name), "%c%03u", i < GONE ? 'r' : 'k', i);
		TU_ASSERT(kr_fs_create(fs, d.ino, name, 0600, 0, 0, &a) == 0, "create %s", name);
	}
	for (unsigned i = 0; i < GONE; i++) {
		snprintf(name, sizeof(name), "r%03u", i);
		TU_ASSERT(kr_fs_unlink(fs, d.ino, name) == 0, "unlink %s", name);
	}
	TU_ASSERT(kr_fs_mkdir(fs, d.ino, "sub", 0755, 0, 0, &a) == 0, "mkdir d/sub");
	struct kr_fs_statfs st0, st;
	uint64_t fast0, fast, copied;
	TU_ASSERT(kr_fs_statfs(fs, &st0) == 0, "statfs");
	TU_OK(kr_fs_gc_counts(fs, &fast0, &copied));
	for (unsigned i = 0; i < 3000; i++) {
		struct kr_fs_attr t = {.mode = 0700 | (i & 07), .atime_ns = i, .mtime_ns = i};
		TU_ASSERT(kr_fs_setattr(fs, d.ino, i % 2 ? KR_FS_SET_MODE : KR_FS_SET_ATIME | KR_FS_SET_MTIME, &t,
					NULL) == 0, "setattr %u", i);
	}
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	TU_OK(kr_fs_gc_counts(fs, &fast, &copied));
	TU_ASSERT(fast - fast0 >= 40 && st.compactions == st0.compactions,
		  "the churn must be fast GC's alone: %llu pages unlinked, %llu compactions",
		  (unsigned long long)(fast - fast0), (unsigned long long)(st.compactions - st0.compactions));
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < KEPT + GONE; i++) {
			snprintf(name, sizeof(name), "%c%03u", i < GONE ? 'r' : 'k', i);
			int rc = kr_fs_lookup(fs, d.ino, name, &a);
			TU_ASSERT(i < GONE ? rc == -ENOENT : rc == 0, "%s: lookup of %s gives %d",
				  round ? "after a remount" : "mounted", name, rc);
		}
		TU_OK(kr_fs_check(fs, stderr, NULL));
		TU_OK(kr_fs_unmount(fs));
		if (round == 0)
			fs = mount_at(path);
	}
	printf("fs fastgc: a directory of %u names (%u removed): %llu log pages unlinked, names intact after a remount\n",
	       KEPT + GONE, GONE, (unsigned long long)(fast - fast0));
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


/* ---- enospc ----------------------------------------------------------------------------- */
/* A small pool and large writes: the model predicts exactly when data pages or inode slots
 * run out; a failing operation must change nothing. */
static void case_enospc(void)
{
	char path[128], why[512];
	tu_pool_path(path, sizeof(path), "fs-enospc");
	mkfs_at(path, 6 << 20, 64, 256 * 4096);
	struct fm m;
	kr_fs *fs = fm_mount_new(path, &m);
	struct fm_params p;
	fm_params_default(&p);
	p.names = 40;
	p.max_write = 300000;
	p.weight[FM_CREATE] = 30;
	p.weight[FM_WRITE] = 40;
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("fs-enospc", 99));
	unsigned nospc_write = 0, nospc_create = 0, nops = tu_scaled(3000, 1000);
	for (unsigned i = 1; i <= nops; i++) {
		struct fm_op op;
		int64_t res;
		fm_gen(&r, &m, &p, &op);
		if (fm_step(fs, &m, &op, &res, why, sizeof(why)) != 0)
			TU_FAIL("operation %u: %s", i, why);
		nospc_write += res == -ENOSPC && (op.kind == FM_WRITE || op.kind == FM_TRUNCATE || op.kind == FM_SYMLINK);
		nospc_create += res == -ENOSPC && (op.kind == FM_CREATE || op.kind == FM_MKDIR);
		if (res == -ENOSPC)
			compare_or_fail(fs, &m, "after ENOSPC");
	}
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	compare_or_fail(fs, &m, "after remount");
	TU_OK(kr_fs_unmount(fs));
	printf("fs enospc: %u operations, %u ran out of data pages, %u out of inodes; nothing changed by any of them\n",
	       nops, nospc_write, nospc_create);
	TU_ASSERT(nospc_write > 0 && nospc_create > 0, "the pool never filled up");
	fm_free(&m);
}

/* ---- bad input ------------------------------------------------------------------------------ */
static int mount_rc(const char *path)
{
	kr_fs *fs;
	int rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs);
	if (rc == KR_OK)
		TU_OK(kr_fs_unmount(fs));
	return rc;
}

static void fix_sb_csum(struct krfs_super *sb) { sb->csum = tu_crc32c(sb, offsetof(struct krfs_super, csum)); }

static void case_bad_pools(void)
{
	char path[128], other[128];
	tu_pool_path(path, sizeof(path), "fs-bad");
	tu_pool_path(other, sizeof(other), "fs-bad-other");
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 8 << 20, .open_flags = KR_OPEN_FORCE_PMEM};
	TU_ASSERT(kr_fs_mkfs(NULL, &o) == KR_E_MISUSE_ARG, "mkfs NULL path");
	o.struct_size = sizeof(o) + 8;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_MISUSE_ARG, "mkfs options of another size");
	o.struct_size = sizeof(o);
	o.unprotect = 0x80;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_MISUSE_ARG, "mkfs unknown protection flag");
	o.unprotect = 0;
	o.struct_size = sizeof(o);
	o.size = 1 << 20;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_FORMAT_GEOMETRY, "mkfs too small: %s", kr_errmsg());
	o.size = 8 << 20;
	o.dead_zone = 16 << 20;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_FORMAT_GEOMETRY, "dead zone larger than the pool");
	o.dead_zone = 0;
	o.ninodes = 100;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_FORMAT_GEOMETRY, "inodes not a multiple of 32");
	o.ninodes = 0;
	TU_ASSERT(access(path, F_OK) != 0, "a failed mkfs leaves no file");
	TU_OK(kr_fs_mkfs(path, &o));
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_IO_EXISTS, "mkfs over a file");
	TU_ASSERT(mount_rc("/dev/shm/kr-fs-no-such-pool") == KR_E_IO_OPEN, "missing file");
	kr_fs *fs, *fs2;
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
	TU_ASSERT(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs2) == KR_E_IO_BUSY, "mounted twice");
	TU_OK(kr_fs_unmount(fs));

	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	struct krfs_super sb;
	memcpy(&sb, img, sizeof(sb));
	/* Not a pool: zeros, a tiny file, a keratin object pool. */
	uint8_t *zero = calloc(1, len);
	tu_write_file(other, zero, len);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_NOT_POOL, "zeros: %s", kr_errmsg());
	tu_write_file(other, zero, 100);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_NOT_POOL, "100 bytes");
	unlink(other);
	kr_pool *pool;
	struct kr_create_opts po = {.struct_size = sizeof(po), .size = 8 << 20, .flags = KR_OPEN_FORCE_PMEM};
	TU_OK(kr_pool_create(other, &po, &pool));
	TU_OK(kr_pool_close(pool));
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_NOT_POOL, "an object pool: %s", kr_errmsg());
	/* One superblock damaged: repaired; both: refused. */
	tu_write_file(other, img, len);
	tu_flip_byte(other, 40);
	TU_ASSERT(mount_rc(other) == KR_OK, "primary superblock damaged: %s", kr_errmsg());
	uint8_t *fixed = tu_read_file(other, &len);
	TU_ASSERT(memcmp(fixed, fixed + len - 4096, 512) == 0 && memcmp(fixed + 48, img + 48, 8) == 0,
		  "the primary superblock was rewritten from the replica");
	free(fixed);
	tu_flip_byte(other, len - 4096 + 100);
	TU_ASSERT(mount_rc(other) == KR_OK, "replica damaged");
	tu_flip_byte(other, 40);
	tu_flip_byte(other, len - 4096 + 40);
	TU_ASSERT(mount_rc(other) == KR_E_CORRUPT_HEADER, "both superblocks damaged: %d %s", mount_rc(other), kr_errmsg());
	/* Newer version, unknown feature, forged geometry, truncation. */
	struct krfs_super b = sb;
	b.version = 2;
	fix_sb_csum(&b);
	tu_write_file(other, img, len);
	tu_pwrite(other, &b, sizeof(b), 0);
	tu_pwrite(other, &b, sizeof(b), len - 4096);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_VERSION, "version 2");
	b = sb;
	b.incompat = 0x100;
	fix_sb_csum(&b);
	tu_pwrite(other, &b, sizeof(b), 0);
	tu_pwrite(other, &b, sizeof(b), len - 4096);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_VERSION, "unknown incompat feature");
	b = sb;
	b.data_off += 4096;
	fix_sb_csum(&b);
	tu_pwrite(other, &b, sizeof(b), 0);
	tu_pwrite(other, &b, sizeof(b), len - 4096);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_GEOMETRY, "forged geometry");
	tu_write_file(other, img, len - 8192);
	TU_ASSERT(mount_rc(other) == KR_E_FORMAT_TRUNCATED, "truncated: %s", kr_errmsg());
	free(zero);
	free(img);
	unlink(other);
}

static void case_bad_args(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-badargs");
	mkfs_at(path, 8 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	char longname[300];
	memset(longname, 'x', 256);
	longname[256] = '\0';
	struct kr_fs_attr a;
	TU_ASSERT(kr_fs_create(fs, 1, longname, 0600, 0, 0, NULL) == -ENAMETOOLONG, "256-byte name");
	longname[255] = '\0';
	TU_ASSERT(kr_fs_create(fs, 1, longname, 0600, 0, 0, &a) == 0, "255-byte name");
	TU_ASSERT(kr_fs_lookup(fs, 1, longname, NULL) == 0, "lookup of a 255-byte name");
	TU_ASSERT(kr_fs_create(fs, 1, "a/b", 0600, 0, 0, NULL) == -EINVAL, "slash");
	TU_ASSERT(kr_fs_create(fs, 1, "", 0600, 0, 0, NULL) == -EINVAL, "empty");
	TU_ASSERT(kr_fs_create(fs, 1, NULL, 0600, 0, 0, NULL) == -EINVAL, "NULL name");
	TU_ASSERT(kr_fs_create(fs, 1, ".", 0600, 0, 0, NULL) == -EEXIST, "dot");
	TU_ASSERT(kr_fs_create(fs, a.ino, "x", 0600, 0, 0, NULL) == -ENOTDIR, "in a file");
	TU_ASSERT(kr_fs_create(fs, 0, "x", 0600, 0, 0, NULL) == -ENOENT, "inode 0");
	TU_ASSERT(kr_fs_getattr(fs, 1ull << 40, &a) == -ENOENT, "huge inode number");
	TU_ASSERT(kr_fs_getattr(fs, 7, &a) == -ENOENT, "free inode");
	TU_ASSERT(kr_fs_getattr(NULL, 1, &a) == -EINVAL, "NULL fs");
	TU_ASSERT(kr_fs_mknod(fs, 1, "d", S_IFDIR | 0700, 0, 0, 0, NULL) == -EINVAL, "mknod of a directory");
	TU_ASSERT(kr_fs_write(fs, 1, "x", 1, 0) == -EISDIR, "write to a directory");
	TU_ASSERT(kr_fs_write(fs, a.ino, "x", 1, KR_FS_MAX_FILE_SIZE) == -EFBIG, "write past the largest size");
	TU_ASSERT(kr_fs_truncate(fs, a.ino, KR_FS_MAX_FILE_SIZE + 1) == -EFBIG, "truncate past the largest size");
	TU_ASSERT(kr_fs_readlink(fs, a.ino, longname, 10) == -EINVAL, "readlink of a file");
	TU_ASSERT(kr_fs_symlink(fs, 1, "s", "", 0, 0, NULL) == -ENOENT, "empty symlink target");
	TU_ASSERT(kr_fs_rename(fs, 1, "nope", 1, "x", 0) == -ENOENT, "rename of a missing name");
	TU_ASSERT(kr_fs_rename(fs, 1, longname, 1, "x", 3) == -EINVAL, "rename with both flags");
	TU_ASSERT(kr_fs_rename(fs, 1, longname, 1, "x", KR_FS_RENAME_EXCHANGE) == -ENOENT, "exchange with nothing");
	TU_ASSERT(kr_fs_rmdir(fs, 1, ".") == -EINVAL && kr_fs_rmdir(fs, 1, "..") == -ENOTEMPTY, "rmdir . and ..");
	TU_ASSERT(kr_fs_release(fs, a.ino) == -EINVAL, "release of an inode that is not open");
	TU_ASSERT(kr_fs_setattr(fs, a.ino, 0x1000, &a, NULL) == -EINVAL, "unknown setattr bit");
	TU_OK(kr_fs_unmount(fs));
	TU_ASSERT(kr_fs_unmount(NULL) == KR_E_MISUSE_ARG, "unmount NULL");
}

/* Seeded damage of random metadata bytes of a populated pool, one to eight bytes at a
 * time: every mount works (repairing) or fails with a known code; a mounted one is walked
 * and checked without crashing. */
static void case_bad_fuzz(void)
{
	char path[128], img_path[128];
	tu_pool_path(path, sizeof(path), "fs-fuzz");
	tu_pool_path(img_path, sizeof(img_path), "fs-fuzz-img");
	mkfs_at(path, 4 << 20, 64, 64 * 4096);
	struct fm m;
	kr_fs *fs = fm_mount_new(path, &m);
	struct fm_params p;
	fm_params_default(&p);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("fs-fuzz", 5));
	char why[512];
	fm_random(fs, &m, &p, &r, 200);
	TU_OK(kr_fs_unmount(fs));
	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	struct krfs_super sb;
	memcpy(&sb, img, sizeof(sb));
	unsigned mounted = 0, refused = 0, equal = 0, nboth = 0, rounds = tu_scaled(400, 100);
	for (unsigned i = 0; i < rounds; i++) {
		uint8_t *bad = malloc(len);
		memcpy(bad, img, len);
		unsigned nbytes = 1 + (unsigned)tu_rng_below(&r, 8);
		/* The superblocks or either copy of the meta zone; one round in four damages the
		 * same bytes in both copies of the meta zone. */
		bool both = tu_rng_chance(&r, 1, 4);
		uint64_t zone = sb.meta_zone_size + 4096, at = tu_rng_below(&r, 2 * zone);
		if (both)
			at = 4096 + tu_rng_below(&r, sb.meta_zone_size);
		else if (at >= zone)
			at = sb.replica_off + (at - zone);
		for (unsigned k = 0; k < nbytes && at + k < len; k++) {
			uint8_t x = (uint8_t)(1 + tu_rng_below(&r, 255));
			bad[at + k] ^= x;
			if (both)
				bad[at + k + sb.replica_off - 4096] ^= x;
		}
		nboth += both;
		tu_write_file(img_path, bad, len);
		free(bad);
		int rc = kr_fs_mount(img_path, KR_OPEN_FORCE_PMEM, &fs);
		if (rc != KR_OK) {
			TU_ASSERT(tu_known_err(rc), "round %u: mount returned unknown code %d", i, rc);
			refused++;
			continue;
		}
		mounted++;
		struct kr_fs_check_report rep;
		(void)kr_fs_check(fs, NULL, &rep);
		equal += fm_compare(fs, &m, why, sizeof(why)) == 0;
		TU_OK(kr_fs_unmount(fs));
	}
	printf("fs bad fuzz: %u damaged pools (%u in both copies): %u mounted (%u equal to the model after repair), "
	       "%u refused with known codes\n", rounds, nboth, mounted, equal, refused);
	TU_ASSERT(equal >= rounds - nboth, "damage to one copy was not always repaired");
	free(img);
	fm_free(&m);
}

/* ---- extended attributes ------------------------------------------------------------------ */
static void case_xattr(void)
{
	char path[128], list[64], v[KR_FS_XATTR_SIZE_MAX + 1], big[KR_FS_XATTR_SIZE_MAX + 1], longname[300];
	tu_pool_path(path, sizeof(path), "fs-xattr");
	mkfs_at(path, 8 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr f, d, b;
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0644, 0, 0, &f) == 0 && kr_fs_mkdir(fs, 1, "d", 0755, 0, 0, &d) == 0, "create");
	TU_ASSERT(kr_fs_listxattr(fs, f.ino, NULL, 0) == 0, "no attributes yet");
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.a", v, sizeof(v)) == -ENODATA, "get of a missing name");
	TU_ASSERT(kr_fs_removexattr(fs, f.ino, "user.a") == -ENODATA, "remove of a missing name");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.a", "one", 3, KR_FS_XATTR_REPLACE) == -ENODATA, "replace of a missing name");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.a", "one", 3, KR_FS_XATTR_CREATE) == 0, "create");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.a", "two", 3, KR_FS_XATTR_CREATE) == -EEXIST, "create twice");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.a", "x", 1, 3) == -EINVAL && kr_fs_setxattr(fs, f.ino, "user.a", "x", 1, 4) == -EINVAL,
		  "bad flags");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "", "x", 1, 0) == -ERANGE, "empty name");
	memset(longname, 'n', KR_FS_XATTR_NAME_MAX + 1);
	longname[KR_FS_XATTR_NAME_MAX + 1] = '\0';
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, longname, "x", 1, 0) == -ERANGE && kr_fs_getxattr(fs, f.ino, longname, v, 1) == -ERANGE,
		  "name too long");
	longname[KR_FS_XATTR_NAME_MAX] = '\0';
	tu_fill(big, sizeof(big), 9);
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.big", big, sizeof(big), 0) == -E2BIG, "value too large");
	TU_ASSERT(kr_fs_setxattr(fs, d.ino, longname, big, KR_FS_XATTR_SIZE_MAX, 0) == 0, "the largest entry, on a directory");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.empty", NULL, 0, 0) == 0, "an empty value");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.b", "bee", 3, 0) == 0, "a third name");
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.a", NULL, 0) == 3, "size query");
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.a", v, 2) == -ERANGE, "buffer too small");
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.a", v, 3) == 3 && memcmp(v, "one", 3) == 0, "get");
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.empty", v, sizeof(v)) == 0, "get of an empty value");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.a", "replaced", 8, KR_FS_XATTR_REPLACE) == 0, "replace");
	static const char want[] = "user.a\0user.empty\0user.b\0"; /* a replace keeps its place */
	TU_ASSERT(kr_fs_listxattr(fs, f.ino, NULL, 0) == (ssize_t)sizeof(want) - 1, "list size query");
	TU_ASSERT(kr_fs_listxattr(fs, f.ino, list, sizeof(want) - 2) == -ERANGE, "list buffer too small");
	TU_ASSERT(kr_fs_listxattr(fs, f.ino, list, sizeof(list)) == (ssize_t)sizeof(want) - 1 &&
		  memcmp(list, want, sizeof(want) - 1) == 0, "list");
	TU_ASSERT(kr_fs_removexattr(fs, f.ino, "user.empty") == 0 && kr_fs_getxattr(fs, f.ino, "user.empty", v, 1) == -ENODATA,
		  "remove");
	TU_ASSERT(kr_fs_setxattr(fs, 999999, "user.a", "x", 1, 0) == -ENOENT && kr_fs_listxattr(fs, 999999, list, 1) == -ENOENT,
		  "unknown inode");
	TU_ASSERT(kr_fs_getattr(fs, f.ino, &b) == 0 && b.ctime_ns > f.ctime_ns, "a change sets ctime");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	struct krfs_super sb;
	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	memcpy(&sb, img, sizeof(sb));
	TU_ASSERT(sb.incompat == KRFS_INCOMPAT_XATTR, "the pool is marked as holding XATTR entries (%#x)", sb.incompat);
	/* The bytes of docs/FORMAT-FS.md: f's log is SET_ATTR, LINK_CHANGE, then the XATTR of
	 * user.a = "one": 40-byte header, name, value, padded to 56. */
	struct krfs_pinode fslot;
	memcpy(&fslot, img + sb.itab_off + f.ino * 128, sizeof(fslot));
	const uint8_t *x = img + fslot.log_head + 72 + 48;
	uint8_t body[56];
	memcpy(body, x, 4);
	memcpy(body + 4, x + 8, 48);
	TU_ASSERT(x[0] == 0x08 && x[1] == 0 && *(const uint16_t *)(x + 2) == 56 && *(const uint16_t *)(x + 24) == 3 &&
		  x[26] == 6 && x[27] == 1 && memcmp(x + 40, "user.aone", 9) == 0 && x[49] == 0 &&
		  *(const uint32_t *)(x + 4) == tu_crc32c(body, 52), "the XATTR entry as documented");
	free(img);

	/* Persistence, then many changes to one inode: its log is compacted with the values. */
	fs = mount_at(path);
	TU_ASSERT(kr_fs_getxattr(fs, f.ino, "user.a", v, sizeof(v)) == 8 && memcmp(v, "replaced", 8) == 0 &&
		  kr_fs_getxattr(fs, d.ino, longname, v, sizeof(v)) == KR_FS_XATTR_SIZE_MAX &&
		  memcmp(v, big, KR_FS_XATTR_SIZE_MAX) == 0, "after a remount");
	/* The list rebuilt from the log is the fold of its entries, in the order names were
	 * first set (the replace above kept its place): checks invariant fs_xattr.c 1 */
	TU_ASSERT(kr_fs_listxattr(fs, f.ino, list, sizeof(list)) == 14 && memcmp(list, "user.a\0user.b\0", 14) == 0,
		  "the listing after a remount");
	struct kr_fs_statfs st;
	for (unsigned i = 0; i < 40; i++)
		TU_ASSERT(kr_fs_setxattr(fs, d.ino, longname, big + i, KR_FS_XATTR_SIZE_MAX - i, 0) == 0, "set %u", i);
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0 && st.compactions > 0, "the directory's log was compacted");
	TU_ASSERT(kr_fs_getxattr(fs, d.ino, longname, v, sizeof(v)) == KR_FS_XATTR_SIZE_MAX - 39 &&
		  memcmp(v, big + 39, KR_FS_XATTR_SIZE_MAX - 39) == 0, "the value after compaction");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_getxattr(fs, d.ino, longname, v, sizeof(v)) == KR_FS_XATTR_SIZE_MAX - 39 &&
		  memcmp(v, big + 39, KR_FS_XATTR_SIZE_MAX - 39) == 0, "the compacted log after a remount");
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0 && st.log_pages - st.log_pages_free <= 6, "compaction freed the old pages (%llu in use)",
		  (unsigned long long)(st.log_pages - st.log_pages_free));
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	printf("fs xattr: errnos, size queries, listing order, incompat bit, remounts and compaction as documented\n");
}

/* ---- snapshots ------------------------------------------------------------------------------ */
static int collect_names(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t dtype, uint64_t c)
{
	(void)ino, (void)dtype, (void)c;
	strncat(ctx, name, len);
	strcat(ctx, " ");
	return 0;
}

/* The snapshot "s" of case_snapshot holds f (20000 bytes of seed 1), d/g (a link to f), d/l
 * (a symlink to "../f") and user.k = "v1" on f, whatever the live tree became. */
static void check_snapshot_tree(kr_fs *fs, const struct kr_fs_snapshot_attr *s, uint64_t f_ino)
{
	static char w[20000], r[20000];
	tu_fill(w, sizeof(w), 1);
	struct kr_fs_attr a, d, g, l;
	char names[256] = "";
	TU_ASSERT(kr_fs_getattr(fs, s->root, &a) == 0 && a.ino == s->root && S_ISDIR(a.mode) && a.nlink == 3, "snapshot root");
	TU_ASSERT(kr_fs_readdir(fs, s->root, 0, collect_names, names) == 4 && strcmp(names, ". .. f d ") == 0,
		  "snapshot root lists '%s'", names);
	TU_ASSERT(kr_fs_lookup(fs, s->root, "f", &a) == 0 && a.ino == KR_FS_SNAP_INO(s->id, f_ino) && a.size == sizeof(w) &&
		  a.nlink == 2 && a.mode == (S_IFREG | 0644), "snapshot f");
	TU_ASSERT(kr_fs_read(fs, a.ino, r, sizeof(r), 0) == (ssize_t)sizeof(r) && memcmp(r, w, sizeof(r)) == 0,
		  "snapshot f's bytes");
	TU_ASSERT(kr_fs_getxattr(fs, a.ino, "user.k", r, sizeof(r)) == 2 && memcmp(r, "v1", 2) == 0, "snapshot f's xattr");
	TU_ASSERT(kr_fs_lookup(fs, s->root, "d", &d) == 0 && kr_fs_lookup(fs, d.ino, "g", &g) == 0 && g.ino == a.ino,
		  "snapshot d/g is a link to f");
	TU_ASSERT(kr_fs_lookup(fs, d.ino, "..", &g) == 0 && g.ino == s->root, "snapshot d/..");
	TU_ASSERT(kr_fs_lookup(fs, d.ino, "l", &l) == 0 && kr_fs_readlink(fs, l.ino, r, sizeof(r)) == 4 &&
		  memcmp(r, "../f", 4) == 0, "snapshot d/l");
	TU_ASSERT(kr_fs_lookup(fs, s->root, "..", &g) == 0 && g.ino == s->root, "the snapshot root's '..' is itself");
}

/* The pool offset of a page of snapshot id's image (its page tail names the owner). */
static uint64_t find_image_page(const char *path, const struct krfs_super *sb, uint64_t id)
{
	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	uint64_t found = 0;
	for (uint64_t pg = sb->meta_off; pg < sb->csum_a_off && !found; pg += 4096) {
		struct krfs_page_tail t;
		memcpy(&t, img + pg + KRFS_LOG_TAIL_OFF, sizeof(t));
		if (t.self == pg && t.ino == (KRFS_SNAP_OWNER | id))
			found = pg;
	}
	free(img);
	TU_ASSERT(found, "no image page of snapshot %llu", (unsigned long long)id);
	return found;
}

/* Flips n (at most 64) bytes of the pool file at off. */
static void damage(const char *path, uint64_t off, size_t n)
{
	uint8_t b[64];
	tu_pread(path, b, n, off);
	for (size_t i = 0; i < n; i++)
		b[i] ^= 0x5a;
	tu_pwrite(path, b, n, off);
}

static void case_snapshot(void)
{
	char path[128], r[8192];
	static char w[20000], w2[20000];
	tu_fill(w, sizeof(w), 1);
	tu_fill(w2, sizeof(w2), 2);
	tu_pool_path(path, sizeof(path), "fs-snapshot");
	mkfs_at(path, 16 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr f, d, a;
	struct kr_fs_statfs st0, st1, st2, st3;
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0644, 0, 0, &f) == 0 && kr_fs_write(fs, f.ino, w, sizeof(w), 0) == (ssize_t)sizeof(w),
		  "f");
	TU_ASSERT(kr_fs_mkdir(fs, 1, "d", 0755, 0, 0, &d) == 0 && kr_fs_link(fs, f.ino, d.ino, "g", NULL) == 0 &&
		  kr_fs_symlink(fs, d.ino, "l", "../f", 0, 0, NULL) == 0, "d/g, d/l");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.k", "v1", 2, 0) == 0, "xattr");
	TU_ASSERT(kr_fs_snapshot_list(fs, NULL, 0) == 0, "no snapshots yet");
	TU_ASSERT(kr_fs_statfs(fs, &st0) == 0, "statfs");
	struct kr_fs_snapshot_attr s, s2, list[4];
	TU_ASSERT(kr_fs_snapshot_create(fs, "s", &s) == 0 && strcmp(s.name, "s") == 0 && s.root == KR_FS_SNAP_INO(s.id, 1),
		  "create");
	TU_ASSERT(kr_fs_snapshot_create(fs, "s", NULL) == -EEXIST, "create twice");
	TU_ASSERT(kr_fs_snapshot_create(fs, "a/b", NULL) == -EINVAL && kr_fs_snapshot_create(fs, "..", NULL) == -EINVAL &&
		  kr_fs_snapshot_delete(fs, "nope") == -ENOENT && kr_fs_snapshot_lookup(fs, "nope", NULL) == -ENOENT,
		  "bad names");
	TU_ASSERT(kr_fs_statfs(fs, &st1) == 0 && st1.bfree == st0.bfree, "a snapshot shares every data page");
	check_snapshot_tree(fs, &s, f.ino);

	/* The live tree changes; the snapshot does not. */
	TU_ASSERT(kr_fs_write(fs, f.ino, w2, sizeof(w2), 0) == (ssize_t)sizeof(w2), "overwrite f");
	TU_ASSERT(kr_fs_setxattr(fs, f.ino, "user.k", "v2", 2, 0) == 0 && kr_fs_setattr(fs, f.ino, KR_FS_SET_MODE,
		  &(struct kr_fs_attr){.mode = 0600}, NULL) == 0, "xattr and mode");
	TU_ASSERT(kr_fs_unlink(fs, d.ino, "l") == 0 && kr_fs_unlink(fs, d.ino, "g") == 0 && kr_fs_rename(fs, 1, "d", 1, "e", 0) == 0 &&
		  kr_fs_create(fs, 1, "new", 0644, 0, 0, NULL) == 0, "names");
	TU_ASSERT(kr_fs_statfs(fs, &st2) == 0 && st2.bfree == st1.bfree - 5,
		  "the overwritten pages stay held (%llu free, was %llu)", (unsigned long long)st2.bfree,
		  (unsigned long long)st1.bfree);
	check_snapshot_tree(fs, &s, f.ino);
	TU_ASSERT(kr_fs_read(fs, f.ino, r, sizeof(r), 0) == (ssize_t)sizeof(r) && memcmp(r, w2, sizeof(r)) == 0, "live f");

	/* Nothing inside a snapshot changes. */
	uint64_t sf = KR_FS_SNAP_INO(s.id, f.ino);
	TU_ASSERT(kr_fs_write(fs, sf, w, 1, 0) == -EROFS && kr_fs_truncate(fs, sf, 0) == -EROFS &&
		  kr_fs_setxattr(fs, sf, "user.k", "x", 1, 0) == -EROFS && kr_fs_removexattr(fs, sf, "user.k") == -EROFS &&
		  kr_fs_create(fs, s.root, "x", 0644, 0, 0, NULL) == -EROFS && kr_fs_unlink(fs, s.root, "f") == -EROFS &&
		  kr_fs_rename(fs, s.root, "f", 1, "x", 0) == -EROFS && kr_fs_link(fs, sf, 1, "x", NULL) == -EROFS &&
		  kr_fs_fallocate(fs, sf, 0, 0, 4096) == -EROFS && kr_fs_mkdir(fs, s.root, "x", 0755, 0, 0, NULL) == -EROFS,
		  "changes inside a snapshot are -EROFS");
	TU_ASSERT(kr_fs_open(fs, sf) == 0 && kr_fs_release(fs, sf) == 0, "open and release inside a snapshot");
	TU_ASSERT(kr_fs_getattr(fs, KR_FS_SNAP_INO(s.id + 5, 1), &a) == -ENOENT && kr_fs_getattr(fs, KR_FS_SNAP_INO(s.id, 9999), &a) == -ENOENT,
		  "unknown snapshot numbers");
	TU_ASSERT(kr_fs_snapshot_create(fs, "s2", &s2) == 0 && s2.id > s.id, "a second snapshot");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	size_t len;
	struct krfs_super sb;
	uint8_t *img = tu_read_file(path, &len);
	memcpy(&sb, img, sizeof(sb));
	free(img);
	TU_ASSERT((sb.incompat & KRFS_INCOMPAT_SNAPSHOTS) && sb.epoch == s2.id + 1, "superblock: incompat %#x epoch %llu",
		  sb.incompat, (unsigned long long)sb.epoch);

	/* An image is metadata like a log: one damaged copy is repaired at mount and by scrub. */
	uint64_t image = find_image_page(path, &sb, s.id);
	damage(path, image + 16, 64);
	fs = mount_at(path);
	TU_ASSERT(kr_fs_statfs(fs, &st3) == 0 && st3.repairs > 0, "mount repaired the image");
	TU_ASSERT(kr_fs_snapshot_list(fs, list, 4) == 2 && list[0].id == s.id && strcmp(list[1].name, "s2") == 0 &&
		  list[0].time_ns == s.time_ns, "the list after a remount");
	check_snapshot_tree(fs, &s, f.ino);
	TU_ASSERT(kr_fs_statfs(fs, &st3) == 0 && st3.bfree == st2.bfree, "the same pages held after a remount");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	damage(path, image + 16, 64);
	struct kr_fs_scrub_report srep;
	TU_ASSERT(kr_fs_scrub(fs, stderr, &srep) == KR_OK && srep.repaired > 0, "scrub repaired the image");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	/* Many snapshots made and deleted: the root's log (the manifest) is compacted. */
	uint64_t compactions = st3.compactions;
	for (unsigned i = 0; i < 120; i++)
		TU_ASSERT(kr_fs_snapshot_create(fs, "t", NULL) == 0 && kr_fs_snapshot_delete(fs, "t") == 0, "cycle %u", i);
	TU_ASSERT(kr_fs_statfs(fs, &st3) == 0 && st3.compactions > compactions, "the manifest was compacted");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_snapshot_list(fs, list, 4) == 2 && list[0].id == s.id && list[1].id == s2.id, "after compaction");
	check_snapshot_tree(fs, &s, f.ino);
	TU_OK(kr_fs_unmount(fs));
	/* Both copies of s2's image damaged: the pool mounts, s2 reads -EIO and can be deleted. */
	image = find_image_page(path, &sb, s2.id);
	damage(path, image + 16, 64);
	damage(path, image + 16 + sb.replica_off - 4096, 64);
	fs = mount_at(path);
	TU_ASSERT(kr_fs_getattr(fs, s2.root, &a) == -EIO && kr_fs_snapshot_list(fs, NULL, 0) == 2, "a damaged snapshot");
	check_snapshot_tree(fs, &s, f.ino);
	TU_ASSERT(kr_fs_check(fs, NULL, NULL) == KR_E_CORRUPT, "the checker reports the damaged snapshot");
	TU_ASSERT(kr_fs_snapshot_delete(fs, "s2") == 0 && kr_fs_snapshot_create(fs, "s2", &s2) == 0, "delete and remake it");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_ASSERT(kr_fs_snapshot_delete(fs, "s") == 0 && kr_fs_snapshot_lookup(fs, "s", NULL) == -ENOENT, "delete");
	TU_ASSERT(kr_fs_getattr(fs, s.root, &a) == -ENOENT, "a deleted snapshot's numbers are gone");
	/* f's 5 overwritten pages and the symlink's page were held by s alone. */
	TU_ASSERT(kr_fs_statfs(fs, &st3) == 0 && st3.bfree == st2.bfree + 6, "delete frees the pages only s held (%llu free, was %llu)",
		  (unsigned long long)st3.bfree, (unsigned long long)st2.bfree);
	TU_ASSERT(kr_fs_snapshot_delete(fs, "s2") == 0 && kr_fs_statfs(fs, &st0) == 0, "delete s2");
	TU_ASSERT(st0.bfree == st3.bfree && st0.log_pages_free > st3.log_pages_free,
		  "s2 held no page alone; its image is freed (%llu log pages free, was %llu)",
		  (unsigned long long)st0.log_pages_free, (unsigned long long)st3.log_pages_free);
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_snapshot_list(fs, list, 4) == 0 && kr_fs_statfs(fs, &st3) == 0 && st3.bfree == st2.bfree + 6,
		  "after a remount: no snapshots, the pages still free");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));

	/* A log area too full for the image: -ENOSPC, nothing changed. */
	tu_pool_path(path, sizeof(path), "fs-snapshot-full");
	mkfs_at(path, 8 << 20, 64, 20 * 4096);
	fs = mount_at(path);
	char name[16];
	int rc = 0;
	for (unsigned i = 0; rc == 0; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		rc = kr_fs_create(fs, 1, name, 0644, 0, 0, NULL);
	}
	TU_ASSERT(rc == -ENOSPC && kr_fs_statfs(fs, &st0) == 0 && st0.log_pages_free == 0, "log area full (%d)", rc);
	TU_ASSERT(kr_fs_snapshot_create(fs, "s", NULL) == -ENOSPC, "no room for the image");
	TU_ASSERT(kr_fs_statfs(fs, &st1) == 0 && st1.log_pages_free == 0 && kr_fs_snapshot_list(fs, NULL, 0) == 0,
		  "nothing changed");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_ASSERT(kr_fs_unlink(fs, 1, "f0") == 0 && kr_fs_unlink(fs, 1, "f1") == 0 && kr_fs_unlink(fs, 1, "f2") == 0,
		  "room for an image");
	TU_ASSERT(kr_fs_snapshot_create(fs, "s", NULL) == 0, "a snapshot once there is room");
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	printf("fs snapshot: contents kept while the live tree changed, -EROFS inside, pages held and freed, image "
	       "repaired, manifest compacted, -ENOSPC without change, remounts\n");
}

/* ---- layout ------------------------------------------------------------------------------- */
static void case_layout(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-layout");
	mkfs_at(path, 16 << 20, 0, 0);
	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	struct krfs_super sb;
	memcpy(&sb, img, sizeof(sb));
	TU_ASSERT(sb.magic == KRFS_MAGIC && memcmp(img, "KRTN-FS", 8) == 0 && sb.version == 1, "magic, version");
	TU_ASSERT(sb.csum == tu_crc32c(img, 508), "superblock CRC-32C of bytes 0..507");
	TU_ASSERT(memcmp(img, img + len - 4096, 512) == 0, "superblock replica at the last page");
	TU_ASSERT(sb.ro_compat == 0xf && sb.incompat == 0 && sb.compat == 0 && sb.state == KRFS_STATE_CLEAN, "features");
	/* Defaults and geometry as the document states them. */
	TU_ASSERT(sb.ninodes == 256 && sb.meta_pages == 512 && sb.njournals == 4 && sb.dead_zone == 1 << 20,
		  "defaults: %u inodes, %llu log pages", sb.ninodes, (unsigned long long)sb.meta_pages);
	uint64_t d = sb.data_pages, cs = (d * 32 + 4095) / 4096, par = (d * 512 + 4095) / 4096;
	uint64_t zone = (sb.njournals + sb.ninodes * 128ull / 4096 + sb.meta_pages) * 4096;
	TU_ASSERT(sb.itab_off == 4096 * 5 && sb.meta_off == sb.itab_off + sb.ninodes * 128ull &&
		  sb.csum_a_off == sb.meta_off + sb.meta_pages * 4096 && sb.data_off == sb.csum_a_off + cs * 4096 &&
		  sb.parity_off == sb.data_off + d * 4096 && sb.meta_zone_size == zone &&
		  sb.replica_off == len - 4096 - zone && sb.csum_b_off == sb.replica_off - cs * 4096 &&
		  sb.parity_off + par * 4096 <= sb.csum_b_off, "area offsets");
	uint64_t avail = len / 4096 - 2 - 2 * zone / 4096;
	uint64_t d1 = d + 1, need1 = d1 + (d1 * 512 + 4095) / 4096 + 2 * ((d1 * 32 + 4095) / 4096);
	TU_ASSERT(d + par + 2 * cs <= avail && need1 > avail, "data_pages is the largest that fits");
	TU_ASSERT(sb.replica_off - sb.csum_a_off >= sb.dead_zone, "dead zone between the copies");
	TU_ASSERT(memcmp(img + 4096, img + sb.replica_off, zone) == 0, "the meta zone replica is byte-identical");
	/* The root's slot and its tail word. */
	struct krfs_pinode root;
	memcpy(&root, img + sb.itab_off + 128, sizeof(root));
	TU_ASSERT(root.state == KRFS_INODE_LIVE && root.ino == 1 && root.ftype == S_IFDIR &&
		  root.csum == tu_crc32c((uint8_t *)&root + 8, 116), "root slot");
	uint64_t tail = root.tail & ((1ull << 48) - 1), v[2] = {tail, 1};
	TU_ASSERT(root.tail >> 48 == ((tu_crc32c(v, 16) ^ 0x5a5a) & 0xffff), "self-checking tail word");
	TU_ASSERT(root.log_head >= sb.meta_off && tail == root.log_head + 72 + 48, "root log: SET_ATTR + LINK_CHANGE");
	const struct krfs_entry_hdr *e = (const void *)(img + root.log_head);
	uint32_t c = tu_crc32c(e, 4);
	uint8_t buf[72];
	memcpy(buf, e, 4);
	memcpy(buf + 4, (const uint8_t *)e + 8, 64);
	(void)c;
	TU_ASSERT(e->type == KRFS_E_SET_ATTR && e->size == 72 && e->csum == tu_crc32c(buf, 68), "entry CRC");
	const struct krfs_page_tail *pt = (const void *)(img + root.log_head + 4064);
	TU_ASSERT(pt->self == root.log_head && pt->ino == 1 && pt->seq == 0 && pt->csum == tu_crc32c((const uint8_t *)pt + 8, 20),
		  "page tail");
	for (uint64_t i = 0; i < sb.ninodes; i++) {
		struct krfs_pinode s;
		memcpy(&s, img + sb.itab_off + i * 128, sizeof(s));
		TU_ASSERT(s.ino == i && (i == 1 || s.state == KRFS_INODE_FREE), "slot %llu formatted", (unsigned long long)i);
	}
	printf("fs layout: %llu data pages, dead zone %llu bytes, redundancy %.2f%% of data\n", (unsigned long long)d,
	       (unsigned long long)(sb.replica_off - sb.csum_a_off), 100.0 * (par + 2 * cs) / d);
	free(img);
}

/* Zone parity: the format (feature bit, columns, parity area, the intent word) read from the
 * pool file and every row's parity recomputed here, independently of the library's checker;
 * bad options refused; the pool keeps more data pages than a page-parity one of the size. */
static void case_zone(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-zone");
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 16 << 20, .open_flags = KR_OPEN_FORCE_PMEM,
				    .parity = KR_FS_PARITY_ZONE, .zone_columns = 1};
	unlink(path);
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_FORMAT_GEOMETRY, "one column refused: %s", kr_errmsg());
	o.zone_columns = KRFS_ZONE_MAX_COLUMNS + 1;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_FORMAT_GEOMETRY, "too many columns refused");
	o.parity = 7;
	TU_ASSERT(kr_fs_mkfs(path, &o) == KR_E_MISUSE_ARG, "unknown parity layout refused");
	/* A caller built with the first version of the struct (no progress or parity fields) gets page
	 * parity whatever lies past its end. */
	o.struct_size = offsetof(struct kr_fs_mkfs_opts, progress);
	o.parity = KR_FS_PARITY_ZONE;
	TU_OK(kr_fs_mkfs(path, &o));
	kr_fs *fs = mount_at(path);
	TU_ASSERT(kr_fs_parity_layout(fs, NULL) == KR_FS_PARITY_PAGE, "first-version options: page parity");
	TU_OK(kr_fs_unmount(fs));
	unlink(path);
	o.struct_size = sizeof(o);
	o.zone_columns = 0;
	TU_OK(kr_fs_mkfs(path, &o));
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
	uint32_t columns;
	TU_ASSERT(kr_fs_parity_layout(fs, &columns) == KR_FS_PARITY_ZONE && columns == 64,
		  "the pool reports zone parity with 64 columns");
	TU_ASSERT(kr_fs_parity_layout(NULL, NULL) == -EINVAL, "NULL fs");
	struct kr_fs_attr a;
	TU_OK(kr_fs_create(fs, KR_FS_ROOT_INO, "z", 0644, 0, 0, &a));
	static uint8_t buf[5 * 4096];
	tu_fill(buf, sizeof(buf), 5);
	TU_ASSERT(kr_fs_write(fs, a.ino, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf), "write");
	TU_ASSERT(kr_fs_write(fs, a.ino, buf, 512, 4096 + 100) == 512, "overwrite");
	struct kr_fs_location loc;
	TU_ASSERT(kr_fs_locate(fs, a.ino, 4096 + 700, &loc) == 0, "locate");
	TU_OK(kr_fs_unmount(fs));

	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	struct krfs_super sb;
	memcpy(&sb, img, sizeof(sb));
	uint64_t d = sb.data_pages, rows = (d + 63) / 64, cs = (d * 32 + 4095) / 4096;
	TU_ASSERT(sb.ro_compat == 0x1f && sb.zone_columns == 64, "zone feature bit 0x10 and 64 columns");
	TU_ASSERT(sb.parity_off == sb.data_off + d * 4096 && sb.parity_off + rows * 4096 <= sb.csum_b_off &&
		  sb.csum_b_off == sb.replica_off - cs * 4096, "one parity page per row after the data");
	uint64_t avail = len / 4096 - 2 - 2 * sb.meta_zone_size / 4096, d1 = d + 1;
	TU_ASSERT(d + rows + 2 * cs <= avail && d1 + (d1 + 63) / 64 + 2 * ((d1 * 32 + 4095) / 4096) > avail,
		  "data_pages is the largest that fits");
	TU_ASSERT(loc.parity_off == sb.parity_off + (loc.page_off - sb.data_off) / 4096 % rows * 4096 + 512,
		  "locate names the row's parity page, strip 1");
	/* Every row: its parity page is the XOR of its data pages. */
	uint64_t bad_rows = 0;
	for (uint64_t r = 0; r < rows; r++) {
		uint8_t x[4096];
		memcpy(x, img + sb.parity_off + r * 4096, 4096);
		for (uint64_t pg = r; pg < d; pg += rows)
			for (unsigned k = 0; k < 4096; k++)
				x[k] ^= img[sb.data_off + pg * 4096 + k];
		for (unsigned k = 0; k < 4096; k++)
			if (x[k]) {
				bad_rows++;
				break;
			}
	}
	TU_ASSERT(bad_rows == 0, "%llu rows' parity disagrees", (unsigned long long)bad_rows);
	/* The intent word names a window of 64 pages (or as many as there are rows) holding the
	 * last page written (the overwrite's), in both copies. */
	uint64_t w, w2;
	memcpy(&w, img + KRFS_ZONE_INTENT_OFF, 8);
	memcpy(&w2, img + len - 4096 + KRFS_ZONE_INTENT_OFF, 8);
	uint64_t v = w & ((1ull << 48) - 1), key[2] = {v, KRFS_ZONE_INTENT_OWNER};
	TU_ASSERT(w == w2 && w >> 48 == ((tu_crc32c(key, 16) ^ 0x5a5a) & 0xffff), "intent word self-checking, two copies");
	uint64_t first = v >> KRFS_ZONE_INTENT_NBITS, npg = v & KRFS_ZONE_INTENT_MAX, last = (loc.page_off - sb.data_off) / 4096;
	TU_ASSERT(npg == (rows < 64 ? rows : 64) && first <= last && last < first + npg, "intent names a window of 64 pages "
		  "(at most the rows) holding the overwrite's page (%llu + %llu, page %llu)", (unsigned long long)first, (unsigned long long)npg,
		  (unsigned long long)last);
	free(img);
	unlink(path);

	/* The same size with page parity keeps fewer data pages. */
	o.parity = KR_FS_PARITY_PAGE;
	TU_OK(kr_fs_mkfs(path, &o));
	img = tu_read_file(path, &len);
	struct krfs_super pb;
	memcpy(&pb, img, sizeof(pb));
	TU_ASSERT(pb.ro_compat == 0xf && pb.zone_columns == 0 && pb.data_pages < d, "page parity: %llu data pages",
		  (unsigned long long)pb.data_pages);
	printf("fs zone: %llu data pages, %llu rows of 64 (page parity: %llu data pages); redundancy %.2f%% of data "
	       "(page parity %.2f%%); every row's parity checked from the pool file\n", (unsigned long long)d,
	       (unsigned long long)rows, (unsigned long long)pb.data_pages, 100.0 * (rows + 2 * cs) / d,
	       100.0 * ((pb.data_pages * 512 + 4095) / 4096 + 2 * ((pb.data_pages * 32 + 4095) / 4096)) / pb.data_pages);
	free(img);
	unlink(path);
}

/* ---- the parallel mount scan ------------------------------------------------------------ */
static uint64_t mix(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static uint64_t bitmap_digest(uint64_t h, const struct krfs_bitmap *bm)
{
	h = mix(mix(h, bm->n), krfs_bm_nfree(bm));
	for (uint64_t i = 0; i < (bm->n + 63) / 64; i++)
		h = mix(h, bm->bits[i]);
	return h;
}

/* A digest of the DRAM state the mount scan built: every inode (attributes, log chain, file
 * pages, names in listing order with their cookies, extended attributes), the three
 * allocators, the next transaction id, the snapshots and the repairs made. */
static uint64_t scan_digest(kr_fs *fs)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint64_t ino = 0; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		h = mix(h, ip != NULL);
		if (!ip)
			continue;
		const uint64_t f[] = {ip->ino, ip->generation, ip->create_time, ip->mode, ip->uid, ip->gid, ip->nlink,
				      ip->rdev, ip->size, ip->atime, ip->mtime, ip->ctime, ip->parent, ip->tail,
				      ip->npages, ip->nblocks, ip->max_trans};
		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
			h = mix(h, f[i]);
		for (uint32_t i = 0; i < ip->npages; i++)
			h = mix(h, ip->pages[i]);
		uint64_t key = 0;
		uint32_t val;
		while (krfs_radix_next(&ip->map, key, &key, &val))
			h = mix(mix(h, key++), val);
		for (const struct krfs_dentry *d = ip->dir.first; d; d = d->next)
			h = mix(mix(mix(mix(h, d->ino), d->cookie), d->dtype), tu_crc32c(d->name, d->len));
		for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next)
			h = mix(h, tu_crc32c(x->bytes, x->name_len + x->value_len));
	}
	h = bitmap_digest(bitmap_digest(bitmap_digest(h, &fs->ino_bm), &fs->meta_bm), &fs->data_bm);
	return mix(mix(mix(h, fs->next_trans), fs->nsnaps), fs->repairs);
}

/* Mounts a private copy of path (KR_FS_MOUNT_CHECK: nothing reaches the file, so every mount
 * scans the same bytes) with `threads` scan threads; the digest, the threads used, the
 * repairs, and the check's verdict. */
static uint64_t scan_with(const char *path, unsigned threads, unsigned *used, uint64_t *repairs, int *check)
{
	struct kr_fs_mount_opts o = {.struct_size = sizeof(o), .flags = KR_OPEN_FORCE_PMEM | KR_FS_MOUNT_CHECK,
				     .scan_threads = threads};
	kr_fs *fs;
	TU_OK(kr_fs_mount_opts(path, &o, &fs));
	uint64_t d = scan_digest(fs);
	*used = fs->scan_threads;
	*repairs = fs->repairs;
	*check = kr_fs_check(fs, NULL, NULL);
	TU_OK(kr_fs_unmount(fs));
	return d;
}

/* Many files in many directories (data, hard links, extended attributes, a snapshot, names
 * removed), then mounted with one scan thread and with all of them: the same state, also
 * when every fourth inode's log has a damaged replica entry and every fifth a damaged
 * primary slot (the threads repair beside each other). */
static void case_scan(void)
{
	char path[128], bad[160];
	tu_pool_path(path, sizeof(path), "fs-scan");
	snprintf(bad, sizeof(bad), "%s.bad", path);
	unsigned ndirs = 16, per = tu_scaled(120, 30);
	mkfs_at(path, 64 << 20, (ndirs * per + 255) / 32 * 32 + 64, 0);
	kr_fs *fs = mount_at(path);
	static char data[3 * 4096];
	tu_fill(data, sizeof(data), 3);
	struct kr_fs_attr d, f;
	char name[32];
	for (unsigned i = 0; i < ndirs; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		TU_OK(kr_fs_mkdir(fs, KR_FS_ROOT_INO, name, 0755, 0, 0, &d));
		for (unsigned k = 0; k < per; k++) {
			snprintf(name, sizeof(name), "f%u", k);
			TU_OK(kr_fs_create(fs, d.ino, name, 0644, 0, 0, &f));
			size_t len = (i * per + k) % 4 * 3000;
			TU_ASSERT(kr_fs_write(fs, f.ino, data, len, 0) == (ssize_t)len, "write");
			if (k % 7 == 0)
				TU_OK(kr_fs_setxattr(fs, f.ino, "user.k", name, strlen(name), 0));
			if (k % 11 == 0) {
				snprintf(name, sizeof(name), "l%u", k);
				TU_OK(kr_fs_link(fs, f.ino, d.ino, name, NULL));
			}
		}
		if (i == ndirs / 2)
			TU_OK(kr_fs_snapshot_create(fs, "half", NULL));
		for (unsigned k = 0; k < per; k += 5) {
			snprintf(name, sizeof(name), "f%u", k);
			TU_OK(kr_fs_unlink(fs, d.ino, name));
		}
	}
	/* Damage for the second image: the first log entry's replica of every fourth inode, the
	 * primary slot of every fifth. */
	uint64_t *at = calloc(2 * fs->sb.ninodes, sizeof(uint64_t));
	unsigned damaged = 0;
	for (uint64_t ino = 2; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		if (ip && ino % 4 == 0)
			at[damaged++] = ip->pages[0] + fs->delta + 30;
		if (ip && ino % 5 == 0)
			at[damaged++] = krfs_inode_off(fs, ino) + 40;
	}
	TU_OK(kr_fs_unmount(fs));
	size_t len;
	uint8_t *img = tu_read_file(path, &len);
	for (unsigned i = 0; i < damaged; i++)
		img[at[i]] ^= 0x5a;
	free(at);
	tu_write_file(bad, img, len);
	free(img);
	const char *which[2] = {path, bad};
	for (int b = 0; b < 2; b++) {
		unsigned used1, usedn;
		uint64_t rep1, repn;
		int chk1, chkn;
		uint64_t d1 = scan_with(which[b], 1, &used1, &rep1, &chk1);
		uint64_t dn = scan_with(which[b], KR_FS_SCAN_THREADS_MAX, &usedn, &repn, &chkn);
		TU_ASSERT(used1 == 1, "one scan thread asked, %u used", used1);
		TU_ASSERT(d1 == dn && rep1 == repn, "%s: 1 thread and %u threads differ (digest %llx/%llx, repairs %llu/%llu)",
			  b ? "damaged" : "clean", usedn, (unsigned long long)d1, (unsigned long long)dn,
			  (unsigned long long)rep1, (unsigned long long)repn);
		TU_ASSERT(b ? rep1 >= damaged && chk1 == KR_E_CORRUPT && chkn == KR_E_CORRUPT /* repairs listed */
			    : rep1 == 0 && chk1 == KR_OK && chkn == KR_OK,
			  "%s: %llu repairs (%u damaged), check %d/%d", b ? "damaged" : "clean", (unsigned long long)rep1,
			  damaged, chk1, chkn);
		printf("fs scan: %s pool, %u directories x %u files: the same state with 1 and %u scan threads%s (%llu repairs)\n",
		       b ? "damaged" : "clean", ndirs, per, usedn, usedn == 1 ? " (one CPU online: nothing ran in parallel)" : "",
		       (unsigned long long)rep1);
	}
	unlink(bad);
}

/* ---- threads ------------------------------------------------------------------------------ */
/* Each thread runs random operations in its own directory against its own model, all on
 * one file system (one lock, shared journal, allocators, inode table); afterwards every
 * model is compared, kr_fs_check runs, and again after a remount. */
struct worker {
	kr_fs *fs;
	struct fm m;
	uint64_t seed;
	unsigned nops;
	char why[512];
	int failed;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fm_params p;
	fm_params_default(&p);
	p.max_write = 8000;
	p.weight[FM_SNAPSHOT] = 0; /* a snapshot copies the whole tree: no subtree model sees it */
	p.weight[FM_SNAPSHOT_DELETE] = 0;
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	for (unsigned i = 0; i < w->nops && !w->failed; i++) {
		struct fm_op op;
		fm_gen(&r, &w->m, &p, &op);
		if (fm_step(w->fs, &w->m, &op, NULL, w->why, sizeof(w->why)) != 0)
			w->failed = 1;
	}
	return NULL;
}

/* Beside the workers: snapshots made, read and deleted until they finish. */
struct snapshotter {
	kr_fs *fs;
	unsigned nthreads, made, stop;
	char why[256];
};

static void *snapshotter_main(void *arg)
{
	struct snapshotter *s = arg;
	for (unsigned i = 0; !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) && !s->why[0]; i++) {
		char name[16];
		struct kr_fs_snapshot_attr sa;
		struct kr_fs_attr a;
		snprintf(name, sizeof(name), "snap%u", i % 3);
		int rc = kr_fs_snapshot_delete(s->fs, name);
		if (rc != 0 && rc != -ENOENT)
			snprintf(s->why, sizeof(s->why), "delete %s: %d", name, rc);
		else if ((rc = kr_fs_snapshot_create(s->fs, name, &sa)) != 0)
			snprintf(s->why, sizeof(s->why), "create %s: %d (%s)", name, rc, kr_errmsg());
		else if ((rc = kr_fs_readdir(s->fs, sa.root, 0, count_entries, &(int){0})) != (int)s->nthreads + 2)
			snprintf(s->why, sizeof(s->why), "%s lists %d entries", name, rc);
		else if ((rc = kr_fs_lookup(s->fs, sa.root, "t0", &a)) != 0 || kr_fs_readdir(s->fs, a.ino, 0, count_entries, &(int){0}) < 2)
			snprintf(s->why, sizeof(s->why), "%s/t0: %d", name, rc);
		s->made++;
	}
	return NULL;
}

static void case_threads(unsigned nthreads)
{
	char path[128], why[512];
	tu_pool_path(path, sizeof(path), "fs-threads");
	mkfs_at(path, 64 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct worker w[8];
	pthread_t t[8];
	uint64_t seed = tu_seed("fs-threads", 8);
	for (unsigned i = 0; i < nthreads; i++) {
		char name[16];
		struct kr_fs_attr a;
		snprintf(name, sizeof(name), "t%u", i);
		TU_ASSERT(kr_fs_mkdir(fs, 1, name, 0700, 0, 0, &a) == 0, "mkdir");
		w[i] = (struct worker){.fs = fs, .seed = seed + i, .nops = tu_scaled(1500, 300)};
		fm_init_subtree(&w[i].m, a.ino, KR_FS_ROOT_INO);
	}
	struct snapshotter snap = {.fs = fs, .nthreads = nthreads};
	pthread_t st;
	TU_ASSERT(pthread_create(&st, NULL, snapshotter_main, &snap) == 0, "pthread_create");
	for (unsigned i = 0; i < nthreads; i++)
		TU_ASSERT(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0, "pthread_create");
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&snap.stop, 1, __ATOMIC_RELEASE);
	pthread_join(st, NULL);
	TU_ASSERT(!snap.why[0] && snap.made > 0, "snapshots beside the workers (%u made): %s", snap.made, snap.why);
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned i = 0; i < nthreads; i++) {
			TU_ASSERT(!w[i].failed, "thread %u: %s", i, w[i].why);
			if (fm_compare(fs, &w[i].m, why, sizeof(why)) != 0)
				TU_FAIL("thread %u's directory differs from its model%s: %s", i, round ? " after remount" : "", why);
		}
		/* Each allocator's free count is its clear bits, shard by shard, and every page has
		 * one owner, after threads of different inodes took and gave back at once (TSan
		 * runs this too): checks invariants fs_alloc.c 1, fs_alloc.c 2, fs_op.c 6 */
		struct kr_fs_check_report rep;
		if (kr_fs_check(fs, stderr, &rep) != KR_OK)
			TU_FAIL("kr_fs_check after the threads: %llu problems", (unsigned long long)rep.problems);
		TU_OK(kr_fs_unmount(fs));
		if (round == 0)
			fs = mount_at(path);
	}
	for (unsigned i = 0; i < nthreads; i++)
		fm_free(&w[i].m);
	printf("fs threads: %u threads x %u operations and %u snapshots made beside them, every directory equal to "
	       "its model, checker clean, also after a remount\n", nthreads, w[0].nops, snap.made);
}

/* ---- the data path in parallel ------------------------------------------------------------ */
/* Writers of files of their own in one directory (the shared lock and each file's mutex,
 * fs_enter.c rule 2) beside a thread changing other names of that directory (the exclusive
 * lock); each writer keeps a DRAM copy of its file. */
#define DP_FILE (160 * 1024)
struct dp_writer {
	kr_fs *fs;
	uint64_t ino, seed, size;
	unsigned nops;
	uint8_t *model; /* DP_FILE bytes: the file, zeros past its size */
	char why[256];
};

/* The whole file read back equals the writer's copy: 0, or 1 with why set. */
static int dp_compare(struct dp_writer *w, uint8_t *buf, const char *when)
{
	ssize_t n = kr_fs_read(w->fs, w->ino, buf, DP_FILE, 0);
	if (n != (ssize_t)w->size || memcmp(buf, w->model, w->size) != 0) {
		snprintf(w->why, sizeof(w->why), "%s: read of the whole file gave %zd bytes (size %llu)%s", when, n,
			 (unsigned long long)w->size, n == (ssize_t)w->size ? ", not the bytes written" : "");
		return 1;
	}
	return 0;
}

static void *dp_writer_main(void *arg)
{
	struct dp_writer *w = arg;
	uint8_t *buf = malloc(DP_FILE);
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	struct kr_fs_attr a;
	/* First a read of the damaged first page: the shared lock refuses the repair, the
	 * exclusive one makes it. */
	if (!buf || dp_compare(w, buf, "first read"))
		goto out;
	for (unsigned i = 0; i < w->nops && !w->why[0]; i++) {
		uint64_t k = tu_rng_below(&r, 100), off = tu_rng_below(&r, DP_FILE);
		uint64_t len = tu_rng_range(&r, 1, DP_FILE - off < 16384 ? DP_FILE - off : 16384);
		ssize_t n;
		if (k < 55) {
			for (uint64_t j = 0; j < len; j++)
				buf[j] = (uint8_t)tu_rng_next(&r);
			if ((n = kr_fs_write(w->fs, w->ino, buf, len, off)) != (ssize_t)len)
				snprintf(w->why, sizeof(w->why), "write %llu@%llu: %zd", (unsigned long long)len,
					 (unsigned long long)off, n);
			memcpy(w->model + off, buf, len);
			if (off + len > w->size)
				w->size = off + len;
		} else if (k < 80) {
			uint64_t want = off >= w->size ? 0 : w->size - off < len ? w->size - off : len;
			if ((n = kr_fs_read(w->fs, w->ino, buf, len, off)) != (ssize_t)want ||
			    memcmp(buf, w->model + off, want) != 0)
				snprintf(w->why, sizeof(w->why), "read %llu@%llu: %zd (%llu expected)%s", (unsigned long long)len,
					 (unsigned long long)off, n, (unsigned long long)want,
					 n == (ssize_t)want ? ", other bytes" : "");
		} else if (k < 88) {
			if ((n = kr_fs_fsync(w->fs, w->ino)) != 0)
				snprintf(w->why, sizeof(w->why), "fsync: %zd", n);
		} else if (k < 94) {
			if ((n = kr_fs_getattr(w->fs, w->ino, &a)) != 0 || a.size != w->size)
				snprintf(w->why, sizeof(w->why), "getattr: %zd, size %llu (%llu expected)", n,
					 (unsigned long long)a.size, (unsigned long long)w->size);
		} else if (k < 97) {
			int64_t d = kr_fs_lseek(w->fs, w->ino, off, KR_FS_SEEK_HOLE);
			if (off < w->size ? d < (int64_t)off || d > (int64_t)w->size : d != -ENXIO)
				snprintf(w->why, sizeof(w->why), "lseek hole at %llu: %lld", (unsigned long long)off, (long long)d);
		} else {
			if ((n = kr_fs_truncate(w->fs, w->ino, off)) != 0)
				snprintf(w->why, sizeof(w->why), "truncate to %llu: %zd", (unsigned long long)off, n);
			if (off < w->size)
				memset(w->model + off, 0, w->size - off);
			w->size = off;
		}
	}
out:
	free(buf);
	return NULL;
}

/* Beside the writers, in their directory: names made, renamed, linked and removed (some
 * rounds keep their link, whose bytes are checked at the end). */
static bool dp_kept(unsigned i) { return i % 16 == 1 && i < 1600; }

struct dp_names {
	kr_fs *fs;
	uint64_t dir;
	unsigned rounds, stop;
	char why[256];
};

static void dp_name_bytes(unsigned i, uint8_t *b, size_t n)
{
	for (size_t j = 0; j < n; j++)
		b[j] = (uint8_t)(i * 131 + j);
}

static void *dp_names_main(void *arg)
{
	struct dp_names *s = arg;
	uint8_t b[5000];
	char n1[32], n2[32], n3[32];
	for (unsigned i = 0; !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) && !s->why[0]; i++, s->rounds++) {
		struct kr_fs_attr a;
		int rc;
		snprintf(n1, sizeof(n1), "n%u", i);
		snprintf(n2, sizeof(n2), "m%u", i);
		snprintf(n3, sizeof(n3), "l%u", i);
		dp_name_bytes(i, b, sizeof(b));
		if ((rc = kr_fs_create(s->fs, s->dir, n1, 0644, 0, 0, &a)) != 0 ||
		    (rc = (int)kr_fs_write(s->fs, a.ino, b, sizeof(b), 0)) != (int)sizeof(b) ||
		    (rc = kr_fs_rename(s->fs, s->dir, n1, s->dir, n2, 0)) != 0 ||
		    (rc = kr_fs_link(s->fs, a.ino, s->dir, n3, NULL)) != 0 || (rc = kr_fs_unlink(s->fs, s->dir, n2)) != 0 ||
		    (rc = kr_fs_mkdir(s->fs, s->dir, n1, 0755, 0, 0, NULL)) != 0 || (rc = kr_fs_rmdir(s->fs, s->dir, n1)) != 0 ||
		    (!dp_kept(i) && (rc = kr_fs_unlink(s->fs, s->dir, n3)) != 0))
			snprintf(s->why, sizeof(s->why), "round %u: %d (%s)", i, rc, kr_errmsg());
	}
	return NULL;
}

/* Every writer's file equals its copy, the kept links their bytes, the directory holds
 * nothing else, the checker finds nothing. */
static void dp_verify(kr_fs *fs, uint64_t dir, struct dp_writer *w, unsigned nw, unsigned rounds, const char *when)
{
	uint8_t *buf = malloc(DP_FILE), b[5000];
	TU_ASSERT(buf, "malloc");
	for (unsigned i = 0; i < nw; i++) {
		w[i].fs = fs;
		TU_ASSERT(dp_compare(&w[i], buf, when) == 0, "writer %u: %s", i, w[i].why);
	}
	unsigned kept = 0;
	for (unsigned i = 0; i < rounds; i++) {
		char name[32];
		if (!dp_kept(i))
			continue;
		kept++;
		struct kr_fs_attr a;
		snprintf(name, sizeof(name), "l%u", i);
		dp_name_bytes(i, b, sizeof(b));
		TU_ASSERT(kr_fs_lookup(fs, dir, name, &a) == 0 && a.nlink == 1, "%s: %s", when, name);
		TU_ASSERT(kr_fs_read(fs, a.ino, buf, sizeof(b), 0) == (ssize_t)sizeof(b) && memcmp(buf, b, sizeof(b)) == 0,
			  "%s: %s's bytes", when, name);
	}
	int n = 0;
	TU_ASSERT(kr_fs_readdir(fs, dir, 0, count_entries, &n) >= 0 && n == (int)(nw + kept + 2),
		  "%s: %d entries, %u expected", when, n, nw + kept + 2);
	struct kr_fs_check_report rep;
	if (kr_fs_check(fs, stderr, &rep) != KR_OK)
		TU_FAIL("%s: kr_fs_check found %llu problems", when, (unsigned long long)rep.problems);
	for (uint64_t r = 0; r < fs->zone_rows; r++) /* the checker's verdict, made explicit */
		TU_ASSERT(krfs_zone_row_ok(fs, r), "%s: zone parity row %llu", when, (unsigned long long)r);
	free(buf);
}

static void case_datapath(unsigned nw)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-datapath");
	mkfs_at(path, 24 << 20, 0, 0);
	kr_fs *fs = mount_at(path);
	struct kr_fs_attr d;
	TU_OK(kr_fs_mkdir(fs, KR_FS_ROOT_INO, "d", 0755, 0, 0, &d));
	struct dp_writer w[8];
	pthread_t t[8], nt;
	uint64_t seed = tu_seed("fs-datapath", 5);
	for (unsigned i = 0; i < nw; i++) {
		char name[16];
		struct kr_fs_attr a;
		struct kr_fs_location loc;
		snprintf(name, sizeof(name), "w%u", i);
		w[i] = (struct dp_writer){.fs = fs, .seed = seed + i, .nops = tu_scaled(3000, 400), .model = calloc(1, DP_FILE)};
		TU_ASSERT(w[i].model && kr_fs_create(fs, d.ino, name, 0644, 0, 0, &a) == 0, "create %s", name);
		w[i].ino = a.ino;
		memset(w[i].model, 'a' + (int)i, 3 * 4096);
		w[i].size = 3 * 4096;
		TU_ASSERT(kr_fs_write(fs, a.ino, w[i].model, w[i].size, 0) == (ssize_t)w[i].size, "fill %s", name);
		TU_OK(kr_fs_locate(fs, a.ino, 100, &loc));
		damage(path, loc.strip_off + 100, 8); /* the first read's repair */
	}
	struct kr_fs_statfs before, after;
	TU_OK(kr_fs_statfs(fs, &before));
	struct dp_names names = {.fs = fs, .dir = d.ino};
	TU_ASSERT(pthread_create(&nt, NULL, dp_names_main, &names) == 0, "pthread_create");
	for (unsigned i = 0; i < nw; i++)
		TU_ASSERT(pthread_create(&t[i], NULL, dp_writer_main, &w[i]) == 0, "pthread_create");
	for (unsigned i = 0; i < nw; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&names.stop, 1, __ATOMIC_RELEASE);
	pthread_join(nt, NULL);
	for (unsigned i = 0; i < nw; i++)
		TU_ASSERT(!w[i].why[0], "writer %u: %s", i, w[i].why);
	TU_ASSERT(!names.why[0] && names.rounds > 0, "names beside the writers (%u rounds): %s", names.rounds, names.why);
	TU_OK(kr_fs_statfs(fs, &after));
	TU_ASSERT(after.repairs >= before.repairs + nw, "%llu repairs, %u damaged pages",
		  (unsigned long long)(after.repairs - before.repairs), nw);
	dp_verify(fs, d.ino, w, nw, names.rounds, "after the threads");
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	dp_verify(fs, d.ino, w, nw, names.rounds, "after a remount");
	TU_OK(kr_fs_unmount(fs));
	for (unsigned i = 0; i < nw; i++)
		free(w[i].model);
	printf("fs datapath: %u writers x %u operations on files of their own beside %u rounds of name changes in "
	       "their directory; every file equal to its copy, first-page repairs made, checker clean, also after a "
	       "remount\n", nw, w[0].nops, names.rounds);
}

/* ---- relaxed mode ------------------------------------------------------------------------- */
/* A fresh 8 MiB pool made with these knobs, mounted; its path in path. */
static kr_fs *mkfs_mount_8m(char *path, size_t n, const char *name, uint32_t unprotect, uint32_t parity)
{
	tu_pool_path(path, n, name);
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 8 << 20, .open_flags = KR_OPEN_FORCE_PMEM,
				    .unprotect = unprotect, .parity = parity};
	TU_OK(kr_fs_mkfs(path, &o));
	return mount_at(path);
}

/* kr_fs_check's space audit sees what no media check can: an allocator whose free count
 * drifted from its bitmap, a bit set past its end, areas that do not tile the file. Each is
 * planted in the mount's DRAM state, caught, and undone. */
static void expect_space_finding(kr_fs *fs, const char *what, const char *needle)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	TU_ASSERT(out, "open_memstream");
	struct kr_fs_check_report rep;
	int rc = kr_fs_check(fs, out, &rep);
	fclose(out);
	TU_ASSERT(rc == KR_E_CORRUPT && rep.problems >= 1 && strstr(text, needle),
		  "%s: kr_fs_check %d, %llu problems, report: %s", what, rc, (unsigned long long)rep.problems, text);
	free(text);
}

static void case_space_audit(void)
{
	char path[128];
	kr_fs *fs = mkfs_mount_8m(path, sizeof(path), "fs-space", 0, fm_parity_from_env());
	TU_OK(kr_fs_check(fs, stderr, NULL));
	fs->data_bm.shards[fs->data_bm.nshards - 1].nfree--;
	expect_space_finding(fs, "data allocator's free count drifted", "data pages: ");
	fs->data_bm.shards[fs->data_bm.nshards - 1].nfree++;
	uint64_t n = fs->meta_bm.n, *w = &fs->meta_bm.bits[n / 64];
	*w |= 1ull << (n % 64);
	expect_space_finding(fs, "a log-page bit past the end", "bits set past the end");
	*w &= ~(1ull << (n % 64));
	fs->sb.parity_off += 4096;
	expect_space_finding(fs, "areas out of order", "file order");
	fs->sb.parity_off -= 4096;
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
	printf("fs layout: the space audit catches a drifted free count, a stray bit and a misplaced area\n");
}

static uint64_t page_at(kr_fs *fs, uint64_t ino, uint64_t off)
{
	struct kr_fs_location loc;
	TU_ASSERT(kr_fs_locate(fs, ino, off, &loc) == 0, "locate %llu", (unsigned long long)off);
	return loc.page_off;
}

static void expect_bytes(kr_fs *fs, uint64_t ino, const uint8_t *want, size_t n, const char *what)
{
	static uint8_t got[5 * 4096];
	TU_ASSERT(kr_fs_read(fs, ino, got, n, 0) == (ssize_t)n && memcmp(got, want, n) == 0, "%s: bytes differ", what);
}

static void expect_clean(kr_fs *fs, const char *what)
{
	struct kr_fs_check_report rep;
	TU_ASSERT(kr_fs_check(fs, stderr, &rep) == KR_OK && rep.problems == 0, "%s: checker found problems", what);
}

static void case_relaxed(void)
{
	char path[128];
	kr_fs *fs = mkfs_mount_8m(path, sizeof(path), "fs-relaxed", KR_FS_RELAXED, KR_FS_PARITY_PAGE);
	struct kr_fs_statfs st;
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0 && st.unprotect == KR_FS_RELAXED, "statfs reports relaxed mode");
	static uint8_t model[5 * 4096], part[6000];
	tu_fill(model, 3 * 4096, 1);
	struct kr_fs_attr a;
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0644, 0, 0, &a) == 0, "create");
	TU_ASSERT(kr_fs_write(fs, a.ino, model, 3 * 4096, 0) == 3 * 4096, "first write");
	uint64_t p0 = page_at(fs, a.ino, 0), p1 = page_at(fs, a.ino, 4096);
	struct kr_fs_attr before, after;
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &before) == 0, "getattr");
	/* An unaligned overwrite across a page boundary: in place, both pages kept. */
	tu_fill(part, 6000, 2);
	TU_ASSERT(kr_fs_write(fs, a.ino, part, 6000, 1000) == 6000, "overwrite");
	memcpy(model + 1000, part, 6000);
	TU_ASSERT(page_at(fs, a.ino, 0) == p0 && page_at(fs, a.ino, 4096) == p1, "the overwrite moved a page");
	TU_ASSERT(kr_fs_getattr(fs, a.ino, &after) == 0 && after.mtime_ns >= before.mtime_ns && after.size == 3 * 4096,
		  "mtime and size after an in-place write");
	expect_bytes(fs, a.ino, model, 3 * 4096, "after the in-place write");
	expect_clean(fs, "after the in-place write");
	/* Past the end: copy-on-write (the last page moves). */
	uint64_t p2 = page_at(fs, a.ino, 8192);
	TU_ASSERT(kr_fs_write(fs, a.ino, part, 100, 3 * 4096 - 50) == 100, "extending write");
	memcpy(model + 3 * 4096 - 50, part, 100);
	TU_ASSERT(page_at(fs, a.ino, 8192) != p2, "an extending write was made in place");
	/* A snapshot holds page 0: copy-on-write again, the snapshot keeps its bytes. */
	struct kr_fs_snapshot_attr s;
	TU_ASSERT(kr_fs_snapshot_create(fs, "s", &s) == 0, "snapshot");
	TU_ASSERT(kr_fs_write(fs, a.ino, part, 10, 5) == 10, "overwrite of a held page");
	TU_ASSERT(page_at(fs, a.ino, 0) != p0, "a page a snapshot holds was written in place");
	memcpy(model + 5, part, 10);
	TU_ASSERT(kr_fs_snapshot_delete(fs, "s") == 0, "snapshot delete");
	/* Now unshared: in place. */
	p0 = page_at(fs, a.ino, 0);
	TU_ASSERT(kr_fs_write(fs, a.ino, part + 7, 20, 30) == 20 && page_at(fs, a.ino, 0) == p0, "in place again");
	memcpy(model + 30, part + 7, 20);
	expect_bytes(fs, a.ino, model, 3 * 4096 + 50, "after the snapshot");
	/* A damaged strip under an overwrite is repaired from parity before the delta. */
	struct kr_fs_location loc;
	TU_ASSERT(kr_fs_locate(fs, a.ino, 4096 + 600, &loc) == 0, "locate");
	TU_OK(kr_fs_unmount(fs));
	int fd = open(path, O_RDWR);
	TU_ASSERT(fd >= 0 && pwrite(fd, "XXXXXXXX", 8, (off_t)loc.strip_off + 3) == 8, "damage a strip");
	close(fd);
	fs = mount_at(path);
	TU_ASSERT(kr_fs_write(fs, a.ino, part, 9, 4096 + 700) == 9, "overwrite of a damaged strip");
	memcpy(model + 4096 + 700, part, 9);
	expect_clean(fs, "after overwriting a damaged strip");
	expect_bytes(fs, a.ino, model, 3 * 4096 + 50, "after overwriting a damaged strip");
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0 && st.repairs >= 1, "the damaged strip was not repaired");
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	expect_bytes(fs, a.ino, model, 3 * 4096 + 50, "after a remount");
	expect_clean(fs, "after a remount");
	TU_OK(kr_fs_unmount(fs));
	unlink(path);
	printf("fs relaxed: overwrites in place, extensions and snapshot-held pages copied, a damaged strip repaired "
	       "first, checker clean\n");
}

/* ---- write protection ------------------------------------------------------------------- */
/* A forked child stores one byte through the file system's own pointer to a data page:
 * 1 if the store faulted (SIGSEGV), 0 if it went through. */
static int stray_store_faults(kr_fs *fs, uint64_t page_off)
{
	fflush(NULL);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		volatile uint8_t *p = (uint8_t *)fs->pm.view + page_off;
		*p = 0x5a;
		_exit(0);
	}
	int status;
	TU_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void case_wprotect(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-wprotect");
	mkfs_at(path, 8 << 20, 0, 0);
	kr_fs *fs;
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM | KR_FS_MOUNT_WPROTECT, &fs));
	TU_ASSERT(fs->pm.view != fs->pm.base, "no read-only view with KR_FS_MOUNT_WPROTECT");
	struct fm m;
	struct kr_fs_statfs st;
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	fm_init(&m, &st, KR_FS_ROOT_INO);
	struct fm_params p;
	fm_params_default(&p);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("fs wprotect", 9));
	fm_random(fs, &m, &p, &r, tu_scaled(600, 200)); /* every operation, compared as it returns */
	char why[512];
	TU_ASSERT(fm_compare(fs, &m, why, sizeof(why)) == 0, "write-protected mount: %s", why);
	expect_clean(fs, "write-protected mount");
	struct kr_fs_attr a;
	static uint8_t buf[4096];
	TU_ASSERT(kr_fs_create(fs, 1, "victim", 0644, 0, 0, &a) == 0 && kr_fs_write(fs, a.ino, buf, 4096, 0) == 4096,
		  "victim file");
	uint64_t page = page_at(fs, a.ino, 0);
	TU_ASSERT(stray_store_faults(fs, page), "a stray store into a write-protected pool did not fault");
	TU_ASSERT(kr_fs_read(fs, a.ino, buf, 4096, 0) == 4096 && buf[0] == 0, "the file after the stray store");
	TU_OK(kr_fs_unmount(fs));
	/* The same store without the flag goes through (and is then caught as damage). */
	fs = mount_at(path);
	TU_ASSERT(fs->pm.view == fs->pm.base && !stray_store_faults(fs, page), "an unprotected mount faulted");
	TU_OK(kr_fs_unmount(fs));
	fs = mount_at(path);
	TU_ASSERT(kr_fs_read(fs, a.ino, buf, 4096, 0) == 4096 && buf[0] == 0, "the stray store was not repaired");
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0 && st.repairs >= 1, "the stray store went unnoticed");
	TU_OK(kr_fs_unmount(fs));
	fm_free(&m);
	unlink(path);
	printf("fs wprotect: %u operations equal to the model and checker clean on a write-protected mount; a stray "
	       "store faults there, and lands (then is repaired) without the flag\n", tu_scaled(600, 200));
}

/* ---- fences -------------------------------------------------------------------------------- */
/* The persistence cost of each operation, pinned: fences and bytes written, with full
 * protection and with none (KR_FS_NO_*). A change to a commit protocol shows here first. */
struct cost {
	uint64_t fences, bytes;
};

static struct cost measure_reset(void)
{
	kr_counters_reset();
	return (struct cost){0, 0};
}

static struct cost measured(void)
{
	struct kr_counters c;
	kr_counters_get(&c);
	return (struct cost){c.fences, c.bytes_written};
}

static void expect_cost(const char *what, struct cost got, uint64_t fences, uint64_t bytes)
{
	printf("  %-38s %llu fences, %6llu bytes\n", what, (unsigned long long)got.fences,
	       (unsigned long long)got.bytes);
	TU_ASSERT(got.fences == fences && got.bytes == bytes, "%s: %llu fences, %llu bytes; expected %llu, %llu", what,
		  (unsigned long long)got.fences, (unsigned long long)got.bytes, (unsigned long long)fences,
		  (unsigned long long)bytes);
}

static void fences_at(uint32_t unprotect, uint32_t parity)
{
	char path[128];
	kr_fs *fs = mkfs_mount_8m(path, sizeof(path), "fs-fences", unprotect, parity);
	unsigned copies = unprotect & KR_FS_NO_META_REPLICA ? 1 : 2;
	/* A data page: its bytes, 8 CRCs twice, and a parity strip; with zone parity the row's
	 * parity page instead (4096, by delta), and the first write of the mount moves the zone
	 * intent's window (8 bytes per superblock copy, between two more fences); the next write's
	 * page falls inside the window. */
	bool zone = parity == KR_FS_PARITY_ZONE;
	uint64_t data = 4096 + (unprotect & KR_FS_NO_DATA_CSUM ? 0 : 64) +
			(unprotect & KR_FS_NO_DATA_PARITY ? 0 : zone ? 4096 : 512);
	printf("protection %s:\n", unprotect == KR_FS_RELAXED ? "full, relaxed" : unprotect ? "none" : zone ? "full, zone parity" : "full");
	struct kr_fs_attr a;
	static char buf[4096];
	/* create: new slot (128) + page tail (32) + SET_ATTR (72) + LINK_CHANGE (48) + DENTRY
	 * (48 + 8 for "f") per copy; journal header (32) + records (tail word 16 + 8, slot
	 * 16 + 128) per copy; the parent's tail word per copy; the journal cleared (8 per copy). */
	measure_reset();
	TU_ASSERT(kr_fs_create(fs, 1, "f", 0644, 0, 0, &a) == 0, "create");
	expect_cost("create (journaled)", measured(), 3,
		    copies * (128 + 32 + 72 + 48 + 56 + 32 + 24 + 144 + 8 + 8));
	measure_reset();
	TU_ASSERT(kr_fs_write(fs, a.ino, buf, 4096, 0) == 4096, "append");
	expect_cost(zone ? "4 KiB append (a new zone window)" : "4 KiB append", measured(), zone ? 4 : 2,
		    data + copies * (64 + 8) + (zone ? 2 * 8 : 0));
	measure_reset();
	TU_ASSERT(kr_fs_write(fs, a.ino, buf, 512, 1024) == 512, "overwrite");
	if (unprotect & KR_FS_RELAXED) {
		/* In place: the strip (512), its two CRCs (4 + 4) and the parity strip (512, by
		 * delta); the intent (journal header 32 + one data record 16 + 8) per copy, made
		 * durable by the commit's first fence with the SET_ATTR (72) for the mtime; the tail
		 * word per copy; the intent cleared (8 per copy). Copy-on-write writes the whole
		 * page instead. */
		expect_cost("512 B overwrite (relaxed: in place)", measured(), 2,
			    512 + 8 + 512 + copies * (32 + 24 + 72 + 8 + 8));
		measure_reset();
		TU_ASSERT(kr_fs_write(fs, a.ino, buf, 4096, 0) == 4096, "whole-page overwrite");
		/* A page written whole gains nothing in place: copy-on-write, atomic. */
		expect_cost("4 KiB overwrite (relaxed: copy-on-write)", measured(), 2, data + copies * (64 + 8));
		measure_reset();
		TU_ASSERT(kr_fs_write(fs, a.ino, buf, 4096, 4096) == 4096, "append after relaxed overwrite");
		expect_cost("4 KiB append (relaxed: copy-on-write)", measured(), 2, data + copies * (64 + 8));
	} else {
		expect_cost("512 B overwrite (copy-on-write page)", measured(), 2, data + copies * (64 + 8));
	}
	measure_reset();
	TU_ASSERT(kr_fs_read(fs, a.ino, buf, 4096, 0) == 4096, "read");
	expect_cost("4 KiB read", measured(), 0, 0);
	measure_reset();
	struct kr_fs_attr set = {.mode = 0600};
	TU_ASSERT(kr_fs_setattr(fs, a.ino, KR_FS_SET_MODE, &set, NULL) == 0, "chmod");
	expect_cost("chmod", measured(), 2, copies * (72 + 8));
	measure_reset();
	TU_ASSERT(kr_fs_setattr(fs, a.ino, KR_FS_SET_KILL_SUIDGID | KR_FS_SET_KILL_SGID, NULL, NULL) == 0,
		  "drop privileges that are not there");
	expect_cost("dropping absent set-user-ID bits (what every write by a user does)", measured(), 0, 0);
	measure_reset();
	TU_ASSERT(kr_fs_rename(fs, 1, "f", 1, "g", 0) == 0, "rename");
	/* two DENTRYs (56 each) + LINK_CHANGE (48); journal: header + 2 tail records. */
	expect_cost("rename in one directory (journaled)", measured(), 3,
		    copies * (56 + 56 + 48 + 32 + 2 * 24 + 2 * 8 + 8));
	measure_reset();
	TU_ASSERT(kr_fs_unlink(fs, 1, "g") == 0, "unlink");
	/* DENTRY + freed slot; journal: header + tail record + slot record. */
	expect_cost("unlink of the last name (journaled)", measured(), 3, copies * (56 + 128 + 32 + 24 + 144 + 8 + 8));
	TU_OK(kr_fs_unmount(fs));
}

static void case_fences(void)
{
	fences_at(0, KR_FS_PARITY_PAGE);
	fences_at(KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY, KR_FS_PARITY_PAGE);
	fences_at(KR_FS_RELAXED, KR_FS_PARITY_PAGE);
	fences_at(0, KR_FS_PARITY_ZONE);
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
	else if (strcmp(c, "fastgc") == 0) {
		case_fastgc();
		case_fastgc_dir();
	}
	else if (strcmp(c, "enospc") == 0)
		case_enospc();
	else if (strcmp(c, "bad") == 0) {
		case_bad_pools();
		case_bad_args();
		case_bad_fuzz();
	} else if (strcmp(c, "layout") == 0) {
		case_layout();
		case_space_audit();
	} else if (strcmp(c, "xattr") == 0)
		case_xattr();
	else if (strcmp(c, "snapshot") == 0)
		case_snapshot();
	else if (strcmp(c, "threads") == 0)
		case_threads(4);
	else if (strcmp(c, "datapath") == 0)
		case_datapath(4);
	else if (strcmp(c, "fences") == 0)
		case_fences();
	else if (strcmp(c, "relaxed") == 0)
		case_relaxed();
	else if (strcmp(c, "wprotect") == 0)
		case_wprotect();
	else if (strcmp(c, "zone") == 0)
		case_zone();
	else if (strcmp(c, "scan") == 0)
		case_scan();
	else
		TU_FAIL("usage: test_fs basic|model|sparse|gc|fastgc|enospc|bad|layout|xattr|snapshot|threads|datapath|fences|relaxed|wprotect|zone|scan");
	TU_END_CHECK_ALL("test_fs");
	return 0;
}
