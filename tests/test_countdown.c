/*
 * test_countdown.c - countdown fault injection at the system-call choke points
 * (src/base/fault.h: malloc/calloc/realloc/strdup, mmap, msync, pwrite, write, fsync,
 * fallocate, ftruncate, mprotect).
 *
 * Each operation runs with the Nth wrapped call failing, for N = 1, 2, ... until it runs
 * without the fault firing. After every failure:
 *   - the operation returned a clean error code declared in keratin.h (or KR_OK, if the
 *     caller could absorb the failure), never crashed (ASan also checks for leaks at exit);
 *   - the file is absent, or opens and is sound with nothing committed lost: a pool passes
 *     the deep check (kr_pool_check_deep) and holds the objects committed before, the
 *     transaction's objects all or none; a region's data is unchanged and checks clean; a
 *     map holds the old value or the new one.
 * The number of countdown points each operation exercised is printed and must reach the
 * lower bound pinned below, so that the test cannot pass by silently exercising nothing.
 *
 * Operations: pool create, pool open, a commit (small and large allocations plus an update
 * of an existing object), an open that repairs a page of the bad-block list (media.c: the
 * list written, read, the kernel's list walked, the page rebuilt, the list cleared),
 * emulated poison and the read that repairs it, an allocation whose room must first be
 * reclaimed from empty runs (page-cache mode, going on after each failure), region open (creating its sidecar; and on
 * its own, one of the new sidecar's hot marks failing to persist), stores tracked and
 * synced in a manual region with each tracker (track.c), a map put (open, put, close), and
 * keratin-fs: mkfs, mount, emulated poison (also with write protection, and
 * with the file read after a failed injection), and create + write + fsync + rename +
 * unmount. A keratin-fs pool is judged by kr_fs_check on an inspection mount (with its
 * space audit), a region by the read-only region check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "keratin_fs.h"
#include "keratin_hmap.h"
#include "keratin_region.h"
#include "testutil.h"

#define POOL_SIZE (16u << 20)
#define KEEP 4 /* objects committed before the commit case */
#define FS_SIZE (8u << 20)

/* Runs fails with the Nth call failing and check after each failure. Returns the number of
 * countdown points (failures) it went through. */
static unsigned countdown(const char *name, int (*op)(void *), void (*check)(void *, int), void *ctx,
			  unsigned min_points)
{
	unsigned points = 0;
	for (uint64_t n = 1;; n++) {
		kr_fault_countdown(n);
		int rc = op(ctx);
		int fired = kr_fault_fired();
		kr_fault_countdown(0);
		if (!fired) {
			TU_ASSERT(rc == KR_OK, "%s: fails without a fault: %d %s", name, rc, kr_errmsg());
			break;
		}
		points++;
		/* keratin-fs operations fail with a negative errno, the rest with keratin codes. */
		bool errno_ok = rc == -ENOMEM || rc == -EIO || rc == -ENOSPC;
		TU_ASSERT(rc == KR_OK || tu_known_err(rc) || errno_ok, "%s: call %llu failing gave %d, "
			  "not a keratin error code", name, (unsigned long long)n, rc);
		check(ctx, rc);
	}
	printf("%-14s %u countdown points exercised (lower bound %u)\n", name, points, min_points);
	TU_ASSERT(points >= min_points, "%s: only %u countdown points", name, points);
	return points;
}

/* ---- pools -------------------------------------------------------------------------------- */

struct pool_case {
	char path[128];
	kr_pool *pool; /* the commit case's open pool */
	kr_oid keep[KEEP];
	uint64_t nobjects_before;
};

static uint64_t pool_objects(kr_pool *pool)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	return st.nobjects;
}

/* The closed pool at path is sound and holds the KEEP objects intact, and lo..hi objects. */
static void pool_sound(struct pool_case *c, uint64_t lo, uint64_t hi, const char *when)
{
	kr_pool *pool;
	TU_OK(kr_pool_open(c->path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &pool));
	TU_DEEP_CHECK(pool, when);
	uint64_t n = pool_objects(pool);
	TU_ASSERT(n >= lo && n <= hi, "%s: %llu objects, expected %llu..%llu", when,
		  (unsigned long long)n, (unsigned long long)lo, (unsigned long long)hi);
	for (int i = 0; i < KEEP && c->keep[i]; i++) {
		const uint64_t *v = kr_get(pool, c->keep[i]);
		TU_ASSERT(v && (*v == (uint64_t)i || *v == 1000u + (uint64_t)i),
			  "%s: object %d lost or changed", when, i);
	}
	TU_OK(kr_pool_close(pool));
}

static int op_create(void *ctx)
{
	struct pool_case *c = ctx;
	kr_pool *pool;
	int rc = tu_create(c->path, POOL_SIZE, 0, 0, 0, &pool);
	if (rc == KR_OK)
		rc = kr_pool_close(pool);
	return rc;
}

static void check_create(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	if (access(c->path, F_OK) == 0) {
		/* A create that returned an error leaves no file behind. */
		TU_ASSERT(rc == KR_OK, "create failed with %d but left %s behind", rc, c->path);
		pool_sound(c, 0, 0, "after a create with a fault");
		unlink(c->path);
	}
}

static void fill_pool(struct pool_case *c)
{
	kr_pool *pool;
	TU_OK(tu_create(c->path, POOL_SIZE, 0, 0, 0, &pool));
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	for (int i = 0; i < KEEP; i++) {
		TU_OK(kr_tx_alloc(tx, i == KEEP - 1 ? 50000 : 64, 1, &c->keep[i]));
		uint64_t *v = kr_tx_open(tx, c->keep[i]);
		TU_ASSERT(v, "kr_tx_open: %s", kr_errmsg());
		*v = (uint64_t)i;
	}
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));
}

static int op_open(void *ctx)
{
	struct pool_case *c = ctx;
	kr_pool *pool;
	int rc = tu_open(c->path, &pool);
	if (rc == KR_OK)
		rc = kr_pool_close(pool);
	return rc;
}

static void check_open(void *ctx, int rc)
{
	(void)rc;
	pool_sound(ctx, KEEP, KEEP, "after an open with a fault");
}

/* Three new objects (two small, one extent) and an update of kept object 0, in one commit;
 * then close. The pool is opened before the countdown is armed. */
static int op_commit(void *ctx)
{
	struct pool_case *c = ctx;
	kr_tx *tx;
	kr_oid oid;
	int rc = kr_tx_begin(c->pool, &tx);
	if (rc != KR_OK)
		return rc;
	static const size_t sizes[] = {100, 3000, 70000};
	for (int i = 0; i < 3 && rc == KR_OK; i++)
		rc = kr_tx_alloc(tx, sizes[i], 2, &oid);
	uint64_t *v = rc == KR_OK ? kr_tx_add(tx, c->keep[0], 0, 8) : NULL;
	if (v)
		*v = 1000;
	return kr_tx_commit(tx); /* ends the transaction, committing or aborting */
}

static int op_commit_and_close(void *ctx)
{
	struct pool_case *c = ctx;
	int rc = op_commit(ctx);
	int crc = kr_pool_close(c->pool);
	c->pool = NULL;
	return rc ? rc : crc;
}

static void check_commit(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	(void)rc;
	/* Committed or not, all or nothing; the kept objects intact either way. */
	pool_sound(c, c->nobjects_before, c->nobjects_before + 3, "after a commit with a fault");
	/* Back to the state before the commit for the next round. */
	kr_pool *pool;
	TU_OK(tu_open(c->path, &pool));
	if (pool_objects(pool) != c->nobjects_before) {
		TU_ASSERT(pool_objects(pool) == c->nobjects_before + 3, "partial commit");
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o))
			if (kr_type(pool, o) == 2)
				TU_OK(kr_tx_free(tx, o));
		uint64_t *v = kr_tx_add(tx, c->keep[0], 0, 8);
		TU_ASSERT(v, "kr_tx_add: %s", kr_errmsg());
		*v = 0;
		TU_OK(kr_tx_commit(tx));
		/* Reopened, so that the next round's commit asks for all its memory, as the
		 * first did: a lane keeps an ended transaction's DRAM for its next one. */
		TU_OK(kr_pool_close(pool));
		TU_OK(tu_open(c->path, &pool));
	}
	c->pool = pool;
}

/* ---- media: the bad-block list and emulated poison ------------------------------------------ */

static uint64_t kept_page(const struct pool_case *c)
{
	return c->keep[0] & ~(uint64_t)4095;
}

/* The platform lists a page of kept object 0 as lost (its content is intact, so a listed
 * page that never reaches the list is no loss); the open repairs it from parity and clears
 * the list. Also walks the kernel's list (KERATIN_SYSFS_BADBLOCKS, set by main). */
static int op_listed_open(void *ctx)
{
	struct pool_case *c = ctx;
	int rc = kr_badblocks_add(c->path, kept_page(c));
	return rc == KR_OK ? op_open(ctx) : rc;
}

/* Back to a pool without a list: a writable open repairs what is listed and clears it. */
static void clear_list(struct pool_case *c)
{
	kr_pool *pool;
	TU_OK(tu_open(c->path, &pool));
	TU_OK(kr_pool_close(pool));
	char list[160];
	snprintf(list, sizeof(list), "%s.badblocks", c->path);
	/* (A list add that failed at its write leaves an empty list: nothing to repair.) */
	TU_ASSERT(access(list, F_OK) != 0 || tu_file_size(list) == 0,
		  "the bad-block list outlived a writable open");
	unlink(list);
}

static void check_listed(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	(void)rc;
	pool_sound(c, c->nobjects_before + 3, c->nobjects_before + 3, "after a listed-page open with a fault");
	clear_list(c);
}

/* Emulated poison on a page of kept object 0, then a read of it (the fault handler
 * repairs the page), then close. */
static int op_poison(void *ctx)
{
	struct pool_case *c = ctx;
	kr_pool *pool;
	int rc = tu_open(c->path, &pool);
	if (rc != KR_OK)
		return rc;
	rc = kr_inject_poison(pool, kept_page(c));
	if (rc == KR_OK) {
		const volatile uint64_t *v = kr_get(pool, c->keep[0]);
		TU_ASSERT(v && *v == 1000, "the poisoned object reads back wrong");
	}
	int crc = kr_pool_close(pool);
	return rc ? rc : crc;
}

static void check_poison(void *ctx, int rc)
{
	struct pool_case *c = ctx;
	(void)rc;
	pool_sound(c, c->nobjects_before + 3, c->nobjects_before + 3, "after emulated poison with a fault");
	clear_list(c);
}

/* ---- regions and maps ------------------------------------------------------------------- */

struct file_case {
	char path[128], side[160];
	uint8_t data[64 << 10];
};

static int op_region(void *ctx)
{
	struct file_case *c = ctx;
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	kr_region *r;
	void *base;
	size_t len;
	int rc = kr_region_open(c->path, &o, &r, &base, &len);
	if (rc == KR_OK)
		rc = kr_region_close(r);
	return rc;
}

static void check_region(void *ctx, int rc)
{
	struct file_case *c = ctx;
	(void)rc;
	size_t len;
	void *now = tu_read_file(c->path, &len);
	TU_ASSERT(len == sizeof(c->data) && memcmp(now, c->data, len) == 0,
		  "region open with a fault changed the data file");
	free(now);
	if (access(c->side, F_OK) != 0)
		return;
	/* A sidecar left behind opens (recovering, if it must) and checks clean. */
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	kr_region *r;
	void *base;
	TU_OK(kr_region_open(c->path, &o, &r, &base, &len));
	struct kr_region_report rep;
	TU_OK(kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, &rep));
	TU_OK(kr_region_close(r));
	unlink(c->side); /* the next round creates it again */
}

/* The hot-mark cases' data file: 1024 pages, with 2-page stripes and segments (opts) 512
 * segments, so that the 256th wrapped call of an open that marks them all is one of the
 * marks' msyncs in page-cache mode (the open makes a handful of calls before them). Returns
 * the open's status with that call failing. */
static int open_with_mark_failing(const char *path, struct kr_region_opts *o, uint64_t seed,
				  bool existing)
{
	size_t len = 1024 * 4096;
	uint8_t *data = malloc(len);
	TU_ASSERT(data, "no memory");
	tu_fill(data, len, seed);
	tu_write_file(path, data, len);
	free(data);
	o->stripe_pages = 2;
	o->segment_pages = 2;
	kr_region *r;
	if (existing) {
		TU_OK(kr_region_open(path, o, &r, NULL, NULL));
		TU_OK(kr_region_close(r));
	}
	kr_fault_countdown(256);
	int rc = kr_region_open(path, o, &r, NULL, NULL);
	int fired = kr_fault_fired();
	kr_fault_countdown(0);
	if (rc == KR_OK)
		TU_OK(kr_region_close(r));
	TU_ASSERT(fired, "the countdown did not reach the open's 256th call");
	return rc;
}

/* A new sidecar marks every segment hot (one msync each in page-cache mode) before its
 * superblock says ACTIVE: a mark that did not persist must fail the open, or a crash could
 * leave an ACTIVE sidecar whose unmarked segments have no checksums yet, and the next open
 * would take them for damage. */
static void region_hot_mark(void)
{
	char path[128], side[160];
	tu_pool_path(path, sizeof(path), "deep2-hotmark");
	snprintf(side, sizeof(side), "%s.krs", path);
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	int rc = open_with_mark_failing(path, &o, 9, false);
	TU_ASSERT(rc == KR_E_IO_SYNC, "region open with a hot mark not persisted: %d (%s), "
		  "want KR_E_IO_SYNC", rc, kr_strerror(rc));
	TU_ASSERT(access(side, F_OK) != 0, "the failed region open left its sidecar behind");
	kr_region *r;
	TU_OK(kr_region_open(path, &o, &r, NULL, NULL));
	TU_OK(kr_region_close(r));
	unlink(side);
	unlink(path);
	printf("region hot mark: the open fails, no sidecar left\n");
}

/* A level-1 session (KR_REGION_NO_SEAL) keeps every segment hot while it runs, and its open
 * marks them all before the application may write: a mark that did not persist must fail
 * the open, or a crash could leave pages written in a segment the media says is cold,
 * whose stale checksums the next open would take for damage and "repair". On an existing,
 * clean sidecar. */
static void region_level1_mark(void)
{
	char path[128], side[160];
	tu_pool_path(path, sizeof(path), "deep2-level1");
	snprintf(side, sizeof(side), "%s.krs", path);
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.flags |= KR_REGION_NO_SEAL;
	int rc = open_with_mark_failing(path, &o, 10, true);
	TU_ASSERT(rc == KR_E_IO_SYNC, "level-1 region open with a hot mark not persisted: %d (%s), "
		  "want KR_E_IO_SYNC", rc, kr_strerror(rc));
	kr_region *r;
	TU_OK(kr_region_open(path, &o, &r, NULL, NULL));
	TU_OK(kr_region_close(r));
	unlink(side);
	unlink(path);
	printf("region level-1 hot marks: the open fails\n");
}

/* Write tracking (region/track.c) in a manual region: open (attaching the tracker), store
 * into every 4th page, sync (harvest the written pages, checksum them), close. flags adds
 * KR_REGION_MPROTECT for the mprotect tracker. */
struct track_case {
	struct file_case *f;
	unsigned flags;
	int stored;             /* the stores were made (the open succeeded) */
	int tracking;           /* the tracker the last open got (kr_region_stats) */
	uint8_t now[64 << 10]; /* the data after the stores */
};

static int op_track(void *ctx)
{
	struct track_case *t = ctx;
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.flags = KR_REGION_MANUAL | KR_REGION_FORCE_PMEM | t->flags;
	kr_region *r;
	uint8_t *base;
	size_t len;
	int rc = kr_region_open(t->f->path, &o, &r, (void **)&base, &len);
	if (rc != KR_OK)
		return rc;
	struct kr_region_stats st;
	TU_OK(kr_region_stats(r, &st));
	t->tracking = st.tracking;
	memcpy(t->now, base, sizeof(t->now));
	for (size_t pg = 0; pg < len / 4096; pg += 4) {
		base[pg * 4096 + 7]++;
		t->now[pg * 4096 + 7]++;
	}
	t->stored = 1;
	rc = kr_region_sync(r);
	int crc = kr_region_close(r);
	return rc ? rc : crc;
}

static void check_track(void *ctx, int rc)
{
	struct track_case *t = ctx;
	(void)rc;
	size_t len;
	uint8_t *now = tu_read_file(t->f->path, &len);
	TU_ASSERT(len == sizeof(t->now) && (!t->stored || memcmp(now, t->now, len) == 0),
		  "the region's data is not what was stored");
	free(now);
	t->stored = 0;
	/* The sidecar vouches for every page (the region check, read-only): a store the
	 * tracker lost would fail its checksum here. */
	TU_END_CHECK(t->f->path, "after tracked stores with a fault");
}

static int op_map(void *ctx)
{
	struct file_case *c = ctx;
	kr_hmap *m;
	int rc = kr_hmap_open(c->path, KR_OPEN_FORCE_PMEM, &m);
	if (rc != KR_OK)
		return rc;
	rc = kr_hmap_put(m, "key", 3, "new", 4);
	int crc = kr_hmap_close(m);
	return rc ? rc : crc;
}

static void check_map(void *ctx, int rc)
{
	struct file_case *c = ctx;
	(void)rc;
	kr_hmap *m;
	TU_OK(kr_hmap_open(c->path, KR_OPEN_FORCE_PMEM, &m));
	char v[8];
	size_t vlen;
	int got = kr_hmap_get(m, "key", 3, v, sizeof(v), &vlen);
	TU_ASSERT(got == 1, "the key is gone after a put with a fault: %d %s", got, kr_errmsg());
	TU_ASSERT(vlen == 4 && (strcmp(v, "old") == 0 || strcmp(v, "new") == 0),
		  "map holds neither the old value nor the new one");
	TU_ASSERT(kr_hmap_count(m) == 2, "map has %llu keys, expected 2",
		  (unsigned long long)kr_hmap_count(m));
	TU_OK(kr_hmap_put(m, "key", 3, "old", 4));
	TU_OK(kr_hmap_close(m));
}

/* ---- keratin-fs ------------------------------------------------------------------------------ */

struct fs_case {
	char path[128];
	kr_fs *fs; /* the operations case's mounted file system */
	unsigned poison_flags; /* the poison case's mount flags (KR_FS_MOUNT_WPROTECT or 0) */
	int read_anyway;       /* the poison case reads /kept even after a failed injection */
	uint8_t kept[10000]; /* the contents of /kept, written before every case */
};

static int op_mkfs(void *ctx)
{
	struct fs_case *c = ctx;
	struct kr_fs_mkfs_opts o = KR_FS_MKFS_OPTS_INIT;
	o.size = FS_SIZE;
	o.open_flags = KR_OPEN_FORCE_PMEM;
	return kr_fs_mkfs(c->path, &o);
}

static void check_mkfs(void *ctx, int rc)
{
	struct fs_case *c = ctx;
	if (access(c->path, F_OK) != 0)
		return;
	TU_ASSERT(rc == KR_OK, "mkfs failed with %d but left %s behind", rc, c->path);
	TU_END_CHECK(c->path, "after a mkfs with a fault");
	unlink(c->path);
}

/* /kept holds c->kept; the other names are absent or, after an operation, consistent. */
static void fs_sound(struct fs_case *c, const char *when)
{
	TU_END_CHECK(c->path, when);
	kr_fs *fs;
	TU_OK(kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM | KR_FS_MOUNT_CHECK, &fs));
	struct kr_fs_attr a;
	TU_ASSERT(kr_fs_lookup(fs, KR_FS_ROOT_INO, "kept", &a) == 0 && a.size == sizeof(c->kept), "%s: /kept lost", when);
	uint8_t buf[sizeof(c->kept)];
	TU_ASSERT(kr_fs_read(fs, a.ino, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
		  memcmp(buf, c->kept, sizeof(buf)) == 0, "%s: /kept changed", when);
	TU_OK(kr_fs_unmount(fs));
}

static int op_mount(void *ctx)
{
	struct fs_case *c = ctx;
	kr_fs *fs;
	int rc = kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM, &fs);
	return rc == KR_OK ? kr_fs_unmount(fs) : rc;
}

static void check_mount(void *ctx, int rc)
{
	(void)rc;
	fs_sound(ctx, "after a mount with a fault");
}

/* Create /new, write 9000 bytes to it, fsync, rename it to /renamed; then unmount. The
 * file system is mounted before the countdown is armed. */
static int op_fs_ops(void *ctx)
{
	struct fs_case *c = ctx;
	struct kr_fs_attr a;
	int rc = kr_fs_create(c->fs, KR_FS_ROOT_INO, "new", 0644, 0, 0, &a);
	if (rc == 0) {
		ssize_t w = kr_fs_write(c->fs, a.ino, c->kept, 9000, 0);
		rc = w == 9000 ? 0 : w < 0 ? (int)w : -EIO;
	}
	if (rc == 0)
		rc = kr_fs_fsync(c->fs, a.ino);
	if (rc == 0)
		rc = kr_fs_rename(c->fs, KR_FS_ROOT_INO, "new", KR_FS_ROOT_INO, "renamed", 0);
	int urc = kr_fs_unmount(c->fs);
	c->fs = NULL;
	return rc ? rc : urc;
}

static void check_fs_ops(void *ctx, int rc)
{
	struct fs_case *c = ctx;
	(void)rc;
	fs_sound(c, "after file operations with a fault");
	/* Back to the state before the operations for the next round. */
	TU_OK(kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM, &c->fs));
	struct kr_fs_attr a;
	static const char *const names[] = {"new", "renamed"};
	for (int i = 0; i < 2; i++) {
		if (kr_fs_lookup(c->fs, KR_FS_ROOT_INO, names[i], &a) != 0)
			continue;
		/* What a name holds: nothing, or a prefix of the bytes written (each write atomic). */
		uint8_t buf[9000];
		ssize_t n = kr_fs_read(c->fs, a.ino, buf, sizeof(buf), 0);
		TU_ASSERT(n == 0 || (n == 9000 && memcmp(buf, c->kept, 9000) == 0), "/%s holds %zd wrong bytes",
			  names[i], n);
		TU_ASSERT(kr_fs_unlink(c->fs, KR_FS_ROOT_INO, names[i]) == 0, "unlink /%s", names[i]);
	}
}

/* Emulated poison on strip 1 of /kept's page 0, a read of /kept (which rebuilds the strip
 * from parity), unmount. An injection that fails is left at that (unmount at once), or with
 * read_anyway the file is still read. With KR_FS_MOUNT_WPROTECT the page is hidden in both
 * mappings. */
static int op_fs_poison(void *ctx)
{
	struct fs_case *c = ctx;
	kr_fs *fs;
	int rc = kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM | c->poison_flags, &fs);
	if (rc != KR_OK)
		return rc;
	struct kr_fs_attr a;
	struct kr_fs_location loc;
	TU_ASSERT(kr_fs_lookup(fs, KR_FS_ROOT_INO, "kept", &a) == 0, "lookup /kept");
	TU_OK(kr_fs_locate(fs, a.ino, 512, &loc));
	rc = kr_fs_inject_poison(fs, loc.strip_off, 512);
	if (rc == KR_OK || c->read_anyway) {
		uint8_t buf[sizeof(c->kept)];
		ssize_t n = kr_fs_read(fs, a.ino, buf, sizeof(buf), 0);
		TU_ASSERT(n < 0 || (n == (ssize_t)sizeof(buf) && memcmp(buf, c->kept, sizeof(buf)) == 0),
			  "/kept reads back wrong after poison");
		rc = rc ? rc : n < 0 ? (int)n : 0;
	}
	int urc = kr_fs_unmount(fs);
	return rc ? rc : urc;
}

static void check_fs_poison(void *ctx, int rc)
{
	(void)rc;
	/* A writable mount repairs what the platform listed and clears the list; then the
	 * file system must be sound with /kept intact. */
	TU_OK(op_mount(ctx));
	fs_sound(ctx, "after emulated poison with a fault");
}

static void fs_cases(void)
{
	struct fs_case *c = calloc(1, sizeof(*c));
	TU_ASSERT(c, "no memory");
	tu_pool_path(c->path, sizeof(c->path), "deep3-fs");
	countdown("fs mkfs", op_mkfs, check_mkfs, c, 10);
	unlink(c->path);

	TU_OK(op_mkfs(c));
	tu_fill(c->kept, sizeof(c->kept), 11);
	kr_fs *fs;
	TU_OK(kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM, &fs));
	struct kr_fs_attr a;
	TU_ASSERT(kr_fs_create(fs, KR_FS_ROOT_INO, "kept", 0644, 0, 0, &a) == 0, "create /kept");
	TU_ASSERT(kr_fs_write(fs, a.ino, c->kept, sizeof(c->kept), 0) == (ssize_t)sizeof(c->kept), "write /kept");
	TU_OK(kr_fs_unmount(fs));
	countdown("fs mount", op_mount, check_mount, c, 10);
	countdown("fs poison", op_fs_poison, check_fs_poison, c, 10);
	c->poison_flags = KR_FS_MOUNT_WPROTECT;
	countdown("fs poison (wp)", op_fs_poison, check_fs_poison, c, 10);
	c->read_anyway = 1;
	countdown("fs poison+read", op_fs_poison, check_fs_poison, c, 10);

	TU_OK(kr_fs_mount(c->path, KR_OPEN_FORCE_PMEM, &c->fs));
	countdown("fs operations", op_fs_ops, check_fs_ops, c, 5);
	TU_ASSERT(c->fs == NULL, "the last round unmounted");
	fs_sound(c, "after the file operations");
	free(c);
}

/* ---- the allocator's own commit: empty runs back into chunks ------------------------------- */

enum { RECLAIM_SMALL = 1000, RECLAIM_AFTER = 64 };

/* Fills the pool with small objects, in runs, then frees them all: every run is empty. */
static void fill_and_empty(kr_pool *pool)
{
	static kr_oid oids[16384];
	size_t n = 0;
	for (int full = 0; !full;) {
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		for (int i = 0; i < 64 && n < 16384; i++) {
			int rc = kr_tx_alloc(tx, RECLAIM_SMALL, 5, &oids[n]);
			if (rc == KR_E_NOSPACE_HEAP) {
				full = 1;
				break;
			}
			TU_OK(rc);
			n++;
		}
		if (full) {
			kr_tx_abort(tx);
			n -= n % 64; /* the last batch was not committed */
		} else {
			TU_OK(kr_tx_commit(tx));
		}
		TU_ASSERT(n < 16384, "the pool did not fill");
	}
	for (size_t i = 0; i < n;) {
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		for (size_t end = i + 256 < n ? i + 256 : n; i < end; i++)
			TU_OK(kr_tx_free(tx, oids[i]));
		TU_OK(kr_tx_commit(tx));
	}
}

/* An allocation of 512 KiB in a pool whose room is all in empty runs makes the allocator
 * commit their chunks free (heap.c, runs_reclaim), in page-cache mode, where a fence is an
 * msync that can fail. Failing at that commit's fence, after its records were applied at
 * home, the allocator must follow home (the chunks are free), not put the runs back, where
 * later allocations' bits lay in chunks the file says are free: the objects committed
 * after the failure were gone at the next open. After every failure the test goes on: 64
 * small objects committed, close, reopen; each is there, or the pool refused them. */
static void reclaim_fence(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "deep2-reclaim");
	unsigned points = 0;
	for (uint64_t n = 1;; n++) {
		unlink(path);
		struct kr_create_opts o = {.struct_size = sizeof(o), .size = 8 << 20, .flags = 0,
					   .protection = tu_protection()};
		kr_pool *pool;
		TU_OK(kr_pool_create(path, &o, &pool));
		fill_and_empty(pool);
		kr_tx *tx;
		kr_oid big, after[RECLAIM_AFTER];
		kr_fault_countdown(n);
		int rc = kr_tx_begin(pool, &tx);
		if (rc == KR_OK) {
			rc = kr_tx_alloc(tx, 512 << 10, 6, &big);
			int crc = kr_tx_commit(tx);
			rc = rc ? rc : crc;
		}
		int fired = kr_fault_fired();
		kr_fault_countdown(0);
		if (!fired) {
			TU_ASSERT(rc == KR_OK, "reclaim: fails without a fault: %d %s", rc, kr_errmsg());
			TU_OK(kr_pool_close(pool));
			break;
		}
		points++;
		int committed = 0;
		if (kr_tx_begin(pool, &tx) == KR_OK) {
			int arc = KR_OK;
			for (int i = 0; i < RECLAIM_AFTER && arc == KR_OK; i++)
				arc = kr_tx_alloc(tx, RECLAIM_SMALL, 7, &after[i]);
			committed = kr_tx_commit(tx) == KR_OK && arc == KR_OK;
		}
		kr_pool_close(pool);
		TU_OK(kr_pool_open(path, 0, &pool));
		TU_DEEP_CHECK(pool, "after a failed reclaim and the commits that followed");
		for (int i = 0; committed && i < RECLAIM_AFTER; i++)
			TU_ASSERT(kr_size(pool, after[i]) == RECLAIM_SMALL && kr_type(pool, after[i]) == 7,
				  "reclaim (call %llu failed): object %d of %d committed after the failure "
				  "is gone at the next open", (unsigned long long)n, i, RECLAIM_AFTER);
		TU_OK(kr_pool_close(pool));
	}
	unlink(path);
	printf("%-14s %u countdown points exercised (lower bound %u)\n", "reclaim", points, 4);
	TU_ASSERT(points >= 4, "reclaim: only %u countdown points", points);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct pool_case pc = {0};
	tu_pool_path(pc.path, sizeof(pc.path), "deep2-countdown");
	countdown("pool create", op_create, check_create, &pc, 20);
	unlink(pc.path);

	fill_pool(&pc);
	countdown("pool open", op_open, check_open, &pc, 20);

	TU_OK(tu_open(pc.path, &pc.pool));
	pc.nobjects_before = pool_objects(pc.pool);
	countdown("commit", op_commit_and_close, check_commit, &pc, 6);
	TU_ASSERT(pc.pool == NULL, "the last round closed the pool");
	pool_sound(&pc, pc.nobjects_before + 3, pc.nobjects_before + 3, "after the commit");

	/* The kernel's list too (a device list the pool's blocks are looked up in; tmpfs maps
	 * none of them, so only the walk is exercised). */
	char sysfs[160];
	snprintf(sysfs, sizeof(sysfs), "%s.sysfs", pc.path);
	tu_write_file(sysfs, "0 8\n", 4);
	setenv("KERATIN_SYSFS_BADBLOCKS", sysfs, 1);
	countdown("listed open", op_listed_open, check_listed, &pc, 20);
	unsetenv("KERATIN_SYSFS_BADBLOCKS");
	unlink(sysfs);
	countdown("poison", op_poison, check_poison, &pc, 20);
	reclaim_fence();

	struct file_case *fc = calloc(1, sizeof(*fc));
	TU_ASSERT(fc, "no memory");
	tu_pool_path(fc->path, sizeof(fc->path), "deep2-region");
	snprintf(fc->side, sizeof(fc->side), "%s.krs", fc->path);
	tu_fill(fc->data, sizeof(fc->data), 7);
	tu_write_file(fc->path, fc->data, sizeof(fc->data));
	countdown("region open", op_region, check_region, fc, 10);
	region_hot_mark();
	region_level1_mark();
	struct track_case *tc = calloc(1, sizeof(*tc));
	TU_ASSERT(tc, "no memory");
	tc->f = fc;
	countdown("tracked (uffd)", op_track, check_track, tc, 10);
	if (tc->tracking != 1) /* the kernel lacks async write-protect: it fell back */
		printf("tracked (uffd): SKIP userfaultfd (this kernel tracked with mprotect)\n");
	tc->flags = KR_REGION_MPROTECT;
	countdown("tracked (mprot)", op_track, check_track, tc, 10);
	free(tc);

	tu_pool_path(fc->path, sizeof(fc->path), "deep2-map");
	struct kr_hmap_opts mo = KR_HMAP_OPTS_INIT;
	mo.size = 256 << 10;
	mo.flags = KR_OPEN_FORCE_PMEM;
	kr_hmap *m;
	TU_OK(kr_hmap_create(fc->path, &mo, &m));
	TU_OK(kr_hmap_put(m, "key", 3, "old", 4));
	TU_OK(kr_hmap_put(m, "other", 5, "x", 2));
	TU_OK(kr_hmap_close(m));
	countdown("map put", op_map, check_map, fc, 100);
	free(fc);
	fs_cases();
	TU_END_CHECK_ALL("test_countdown");
	printf("deep checks run: %u\n", tu_deep_checks());
	return 0;
}
