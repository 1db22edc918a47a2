/*
 * fs_super.c - keratin-fs pools: geometry, mkfs, mount, unmount, and the superblock's two
 * copies as mount reads them (they are written by krfs_sb_write, fs_base.c).
 *
 * Design
 *
 *   The geometry is a pure function of the numbers chosen at mkfs (pool_size, ninodes,
 *   meta_pages, njournals, dead_zone, and zone_columns for zone parity): geometry() derives every area's offset and the
 *   number of data pages. The superblock stores the derived fields too; mount recomputes
 *   them and refuses a superblock that disagrees, so no damaged field steers pointer
 *   arithmetic.
 *
 *   States of a pool file:
 *
 *     (no file) --kr_fs_mkfs--> CLEAN --kr_fs_mount--> MOUNTED --kr_fs_unmount--> CLEAN
 *     MOUNTED --crash--> MOUNTED (on the media) --kr_fs_mount: the same scan--> MOUNTED
 *
 *   Mount always scans every log (it rebuilds the DRAM indexes and the free space from
 *   them), so a clean and a crashed pool take the same path; the state records whether the
 *   last session ended cleanly, for the checker and for a later fast mount.
 *
 *   Invariants
 *   1. mkfs writes the superblock last, its magic number last of all (both copies without
 *      it, fence, then the primary's magic, fence, the replica's, fence: krfs_sb_create): a
 *      crash during mkfs leaves a file that is refused as "not a keratin-fs pool", never
 *      a half-made one (a superblock torn across lines with its magic was refused as
 *      damaged).
 *   2. The superblock is updated tick-tock: primary, fence, replica, fence; mount takes the
 *      primary if it checks (repairing the replica from it), else the replica.
 *   3. The file is fully allocated at mkfs (posix_fallocate), so a store to the mapping never
 *      faults for lack of space later.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csum.h"
#include "fs.h"
#include "media.h"

#define SB_CSUM_LEN offsetof(struct krfs_super, csum)

/* ---- geometry ---------------------------------------------------------------------------- */
/* Pages of parity for d data pages: one strip per page, or one page per row of zone_columns
 * (a zone-parity pool, zone_columns != 0). */
static uint64_t parity_pages(uint64_t d, uint32_t zone_columns)
{
	return zone_columns ? (d + zone_columns - 1) / zone_columns : (d * KRFS_STRIP + P - 1) / P;
}

/* Pages needed by d data pages with their redundancy. */
static uint64_t data_cost(uint64_t d, uint32_t zone_columns)
{
	uint64_t csum_pages = (d * KRFS_CSUM_PER_PAGE + P - 1) / P;
	return d + parity_pages(d, zone_columns) + 2 * csum_pages;
}

static int geometry(struct krfs_super *sb)
{
	if (sb->pool_size < KRFS_MIN_POOL || sb->pool_size > KRFS_MAX_POOL || sb->pool_size % P)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "pool size %llu: must be a multiple of 4096 from %llu to %llu",
				  (unsigned long long)sb->pool_size, (unsigned long long)KRFS_MIN_POOL,
				  (unsigned long long)KRFS_MAX_POOL);
	if (sb->ninodes < 64 || sb->ninodes > KRFS_MAX_INODES || sb->ninodes % (P / KRFS_INODE_SIZE))
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%u inodes: must be a multiple of 32 from 64 to %u",
				  sb->ninodes, KRFS_MAX_INODES);
	if (sb->njournals < 1 || sb->njournals > KRFS_MAX_JOURNALS)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%u journals: must be 1..%u", sb->njournals,
				  KRFS_MAX_JOURNALS);
	uint32_t cols = sb->zone_columns;
	bool zoned = sb->ro_compat & KRFS_RO_ZONE_PARITY;
	if (zoned ? cols < 2 || cols > KRFS_ZONE_MAX_COLUMNS || !(sb->ro_compat & KRFS_RO_DATA_PARITY) : cols != 0)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "zone parity with %u columns: must be 2..%u, with parity",
				  cols, KRFS_ZONE_MAX_COLUMNS);
	uint64_t pages = sb->pool_size / P, itab_pages = (uint64_t)sb->ninodes * KRFS_INODE_SIZE / P;
	uint64_t zone = sb->njournals + itab_pages + sb->meta_pages;
	if (sb->meta_pages < 4 || 2 + 2 * zone >= pages)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%llu log pages and %llu inode-table pages do not fit a %llu-page pool",
				  (unsigned long long)sb->meta_pages, (unsigned long long)itab_pages,
				  (unsigned long long)pages);
	uint64_t avail = pages - 2 - 2 * zone, d = avail * 128 / 146;
	while (d > 0 && data_cost(d, cols) > avail)
		d--;
	while (data_cost(d + 1, cols) <= avail)
		d++;
	uint64_t csum_pages = (d * KRFS_CSUM_PER_PAGE + P - 1) / P;
	sb->data_pages = d;
	sb->meta_zone_size = zone * P;
	sb->itab_off = P + (uint64_t)sb->njournals * P;
	sb->meta_off = sb->itab_off + itab_pages * P;
	sb->csum_a_off = sb->meta_off + sb->meta_pages * P;
	sb->data_off = sb->csum_a_off + csum_pages * P;
	sb->parity_off = sb->data_off + d * P;
	sb->replica_off = sb->pool_size - P - zone * P;
	sb->csum_b_off = sb->replica_off - csum_pages * P;
	if (d < 1 || sb->replica_off - sb->csum_a_off < sb->dead_zone)
		return kr_err_set(KR_E_FORMAT_GEOMETRY,
				  "a %llu-byte pool leaves %llu bytes between metadata copies; the dead zone needs %llu",
				  (unsigned long long)sb->pool_size,
				  (unsigned long long)(sb->replica_off - sb->csum_a_off),
				  (unsigned long long)sb->dead_zone);
	return KR_OK;
}

/* ---- the superblock ---------------------------------------------------------------------- */
enum sb_verdict { SB_GOOD, SB_NOT_POOL, SB_TOO_NEW, SB_DAMAGED };

/* A newer version is "too new" whatever its checksum (a newer format may checksum
 * differently); unknown feature bits are believed only under a good checksum, so damage
 * is not mistaken for a newer pool. */
static enum sb_verdict sb_check(const struct krfs_super *sb)
{
	if (sb->magic != KRFS_MAGIC)
		return SB_NOT_POOL;
	if (sb->version > KRFS_VERSION)
		return SB_TOO_NEW;
	if (sb->csum != kr_crc32c(sb, SB_CSUM_LEN))
		return SB_DAMAGED;
	if ((sb->incompat & ~KRFS_INCOMPAT_KNOWN) || (sb->ro_compat & ~KRFS_RO_KNOWN))
		return SB_TOO_NEW;
	if (sb->version != KRFS_VERSION || sb->sb_size != sizeof(*sb) || sb->page_size != P ||
	    (sb->state != KRFS_STATE_CLEAN && sb->state != KRFS_STATE_MOUNTED))
		return SB_DAMAGED;
	for (size_t i = 0; i < sizeof(sb->reserved); i++)
		if (sb->reserved[i])
			return SB_DAMAGED;
	return SB_GOOD;
}

int kr_fs_last_session(const char *path, uint32_t *clean, uint64_t *mount_count)
{
	if (!path || !clean)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_last_session: path and clean are required");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kr_err_errno(KR_E_IO_OPEN, "%s: open", path);
	/* Copy A, else copy B at the end of the file (invariant 2: one of them is whole). */
	struct krfs_super sb[2];
	struct stat st;
	enum sb_verdict v[2] = {SB_NOT_POOL, SB_NOT_POOL};
	if (pread(fd, &sb[0], sizeof(sb[0]), 0) == (ssize_t)sizeof(sb[0]))
		v[0] = sb_check(&sb[0]);
	if (v[0] != SB_GOOD && fstat(fd, &st) == 0 && st.st_size >= 2 * (off_t)P &&
	    pread(fd, &sb[1], sizeof(sb[1]), (st.st_size & ~(off_t)(P - 1)) - P) == (ssize_t)sizeof(sb[1]))
		v[1] = sb_check(&sb[1]);
	close(fd);
	int good = v[0] == SB_GOOD ? 0 : v[1] == SB_GOOD ? 1 : -1;
	if (good < 0)
		return v[0] == SB_TOO_NEW || v[1] == SB_TOO_NEW
			       ? kr_err_set(KR_E_FORMAT_VERSION, "%s: made by a newer keratin-fs", path)
		       : v[0] == SB_NOT_POOL && v[1] == SB_NOT_POOL
			       ? kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin-fs pool", path)
			       : kr_err_set(KR_E_CORRUPT_HEADER, "%s: both superblocks are damaged", path);
	*clean = sb[good].state == KRFS_STATE_CLEAN;
	if (mount_count)
		*mount_count = sb[good].mount_count;
	return KR_OK;
}

/* Loads the superblock through the tick-tock rules and checks the geometry. */
static int sb_load(struct kr_fs *fs, uint64_t file_size)
{
	const struct krfs_super *a = (const void *)fs->pm.base;
	enum sb_verdict va = sb_check(a);
	uint64_t b_off = (va == SB_GOOD && a->pool_size <= file_size ? a->pool_size : file_size) - P;
	const struct krfs_super *b = krfs_ptr(fs, b_off);
	enum sb_verdict vb = sb_check(b);
	if (va == SB_TOO_NEW || (va != SB_GOOD && vb == SB_TOO_NEW))
		return kr_err_set(KR_E_FORMAT_VERSION, "%s: made by a newer keratin-fs (version %u, features %#x/%#x)",
				  fs->path, (va == SB_TOO_NEW ? a : b)->version,
				  (va == SB_TOO_NEW ? a : b)->incompat, (va == SB_TOO_NEW ? a : b)->ro_compat);
	if (va != SB_GOOD && vb != SB_GOOD) {
		if (va == SB_NOT_POOL && vb == SB_NOT_POOL)
			return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin-fs pool", fs->path);
		return kr_err_set(KR_E_CORRUPT_HEADER, "%s: both superblocks are damaged", fs->path);
	}
	fs->sb = va == SB_GOOD ? *a : *b;
	if (fs->sb.pool_size > file_size)
		return kr_err_set(KR_E_FORMAT_TRUNCATED, "%s: %llu bytes, the pool needs %llu", fs->path,
				  (unsigned long long)file_size, (unsigned long long)fs->sb.pool_size);
	struct krfs_super g = fs->sb;
	if (geometry(&g) != KR_OK || memcmp(&g, &fs->sb, sizeof(g)) != 0)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: superblock geometry is inconsistent", fs->path);
	if (va != SB_GOOD || vb != SB_GOOD || memcmp(a, b, sizeof(*a)) != 0) {
		if (krfs_sb_write(fs) != KR_OK)
			return kr_err_set(KR_E_IO_SYNC, "%s: cannot repair the superblock", fs->path);
		krfs_note_repair(fs, "superblock", va != SB_GOOD ? 0 : fs->sb.pool_size - P);
	}
	return KR_OK;
}

/* ---- DRAM state ---------------------------------------------------------------------------- */
/* Shards for an allocator of n pages (krfs_bm_init caps the number): the mount option's, or
 * one per CPU with at least KR_FS_ALLOC_SHARD_MIN pages each. Zone parity's data pages get
 * one: a parity delta needs its run inside the one zone window, which moves only when no
 * other operation holds it, so runs taken at once from shards far apart would make the
 * writers wait for each other's commits (fs_zone.c). */
static unsigned shards_for(const struct kr_fs *fs, uint64_t n, bool data)
{
	if (fs->alloc_shards)
		return fs->alloc_shards;
	if (data && fs->zone_rows)
		return 1;
	uint64_t most = n / KR_FS_ALLOC_SHARD_MIN;
	return most < fs->cpus ? (unsigned)most : fs->cpus;
}

static int dram_init(struct kr_fs *fs)
{
	fs->delta = fs->sb.replica_off - P;
	fs->replica = fs->sb.ro_compat & KRFS_RO_META_REPLICA;
	fs->csum = fs->sb.ro_compat & KRFS_RO_DATA_CSUM;
	fs->parity = fs->sb.ro_compat & KRFS_RO_DATA_PARITY;
	fs->relaxed = fs->sb.incompat & KRFS_INCOMPAT_INPLACE;
	fs->zone_rows = fs->sb.zone_columns ? parity_pages(fs->sb.data_pages, fs->sb.zone_columns) : 0;
	fs->next_trans = KRFS_FIRST_TRANS;
	fs->inodes = kr_calloc(fs->sb.ninodes, sizeof(*fs->inodes));
	fs->buf = aligned_alloc(P, 4 * P);
	fs->live = kr_calloc(fs->sb.meta_pages, sizeof(*fs->live));
	/* Inode slots are taken under the exclusive lock only: one shard. */
	if (!fs->inodes || !fs->buf || !fs->live || krfs_bm_init(&fs->ino_bm, fs->sb.ninodes, 1) ||
	    krfs_bm_init(&fs->meta_bm, fs->sb.meta_pages, shards_for(fs, fs->sb.meta_pages, false)) ||
	    krfs_bm_init(&fs->data_bm, fs->sb.data_pages, shards_for(fs, fs->sb.data_pages, true)))
		return kr_err_set(KR_E_NOMEM, "out of memory for the file system's DRAM state");
	krfs_bm_set(&fs->ino_bm, 0); /* slot 0 is never an inode */
	return KR_OK;
}

static void fs_free(struct kr_fs *fs)
{
	if (!fs)
		return;
	krfs_snap_free_all(fs);
	for (uint64_t i = 0; fs->inodes && i < fs->sb.ninodes; i++)
		krfs_inode_free(fs->inodes[i]);
	free(fs->inodes);
	free(fs->buf);
	free(fs->live);
	krfs_bm_fini(&fs->ino_bm);
	krfs_bm_fini(&fs->meta_bm);
	krfs_bm_fini(&fs->data_bm);
	krfs_media_detach(fs);
	kr_pm_unmap(&fs->pm);
	if (fs->pm.fd >= 0)
		close(fs->pm.fd);
	if (fs->file_fd >= 0 && fs->file_fd != fs->pm.fd)
		close(fs->file_fd);
	krfs_locks_fini(fs);
	free(fs->path);
	free(fs);
}

static struct kr_fs *fs_alloc(const char *path)
{
	struct kr_fs *fs = kr_calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->pm.fd = fs->file_fd = -1;
	krfs_locks_init(fs);
	fs->path = kr_strdup(path);
	if (!fs->path) {
		free(fs);
		return NULL;
	}
	return fs;
}

/* ---- mkfs -------------------------------------------------------------------------------- */
static int format(struct kr_fs *fs)
{
	/* Journals idle, every slot FREE (both copies); the superblock comes last. */
	for (unsigned jn = 0; jn < fs->sb.njournals; jn++) {
		int rc = krfs_journal_recover(fs, jn);
		if (rc < 0)
			return rc;
	}
	_Alignas(64) struct krfs_pinode slots[P / KRFS_INODE_SIZE];
	for (uint64_t first = 0; first < fs->sb.ninodes; first += P / KRFS_INODE_SIZE) {
		/* Progress after the allocation (kr_fs_mkfs): the pool's bytes, then the slots. */
		if (first % 4096 == 0)
			krfs_progress(fs, fs->sb.pool_size + first, fs->sb.pool_size + fs->sb.ninodes);
		memset(slots, 0, sizeof(slots));
		for (unsigned i = 0; i < P / KRFS_INODE_SIZE; i++) {
			slots[i].state = KRFS_INODE_FREE;
			slots[i].ino = first + i;
			krfs_pinode_seal(&slots[i]);
		}
		krfs_meta_write(fs, krfs_inode_off(fs, first), slots, sizeof(slots));
	}
	/* The root directory, through the ordinary operation path. */
	struct krfs_op op;
	struct krfs_inode *root;
	krfs_op_begin(&op, fs);
	uint64_t now = krfs_now();
	int rc = krfs_new_inode(&op, S_IFDIR | 0755, 0, (uint32_t)getuid(), (uint32_t)getgid(),
				KRFS_ROOT_INO, 2, now, &root);
	if (rc == 0 && root->ino != KRFS_ROOT_INO)
		rc = -EINVAL;
	if (rc == 0)
		rc = krfs_op_commit(&op);
	krfs_op_finish(&op);
	return rc == 0 ? KR_OK : kr_err_set(KR_E_IO, "%s: cannot create the root directory (%d)", fs->path, rc);
}

int kr_fs_mkfs(const char *path, const struct kr_fs_mkfs_opts *o)
{
	if (!path || !o)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_mkfs: a path and options are required");
	/* The first version of the struct ended before progress: its callers get no progress
	 * reports and page parity. */
	const size_t v1 = offsetof(struct kr_fs_mkfs_opts, progress);
	if (o->struct_size != v1 && kr_opts_size_check(o->struct_size, sizeof(*o), "kr_fs_mkfs_opts"))
		return KR_E_MISUSE_ARG;
	uint32_t parity = o->struct_size > v1 ? o->parity : KR_FS_PARITY_PAGE;
	uint32_t columns = o->struct_size > v1 ? o->zone_columns : 0;
	if (o->unprotect & ~(KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY | KR_FS_RELAXED))
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_mkfs: unknown protection flags 0x%x", o->unprotect);
	if (parity > KR_FS_PARITY_ZONE)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_mkfs: unknown parity layout %u", parity);
	bool zoned = parity == KR_FS_PARITY_ZONE && !(o->unprotect & KR_FS_NO_DATA_PARITY);
	uint64_t size = o->size & ~(uint64_t)(P - 1);
	struct krfs_super sb = {
		.magic = KRFS_MAGIC,
		.version = KRFS_VERSION,
		.sb_size = sizeof(sb),
		.incompat = o->unprotect & KR_FS_RELAXED ? KRFS_INCOMPAT_INPLACE : 0,
		.ro_compat = KRFS_RO_KNOWN & ~((o->unprotect & KR_FS_NO_META_REPLICA ? KRFS_RO_META_REPLICA : 0) |
						(o->unprotect & KR_FS_NO_DATA_CSUM ? KRFS_RO_DATA_CSUM : 0) |
						(o->unprotect & KR_FS_NO_DATA_PARITY ? KRFS_RO_DATA_PARITY : 0) |
						(zoned ? 0 : KRFS_RO_ZONE_PARITY)),
		.page_size = P,
		.pool_size = size,
		.create_time = krfs_now(),
		.ninodes = o->ninodes,
		.njournals = o->njournals ? o->njournals : 4,
		.meta_pages = o->meta_bytes ? (o->meta_bytes + P - 1) / P : size / 16 / P,
		.dead_zone = o->dead_zone ? o->dead_zone : KRFS_DEAD_ZONE_DEFAULT,
		.state = KRFS_STATE_CLEAN,
		.zone_columns = zoned ? (columns ? columns : KRFS_ZONE_COLUMNS_DEFAULT) : 0,
	};
	if (!sb.ninodes) {
		uint64_t n = size / (64 << 10);
		n = n < 64 ? 64 : n > (1u << 24) ? (1u << 24) : n;
		sb.ninodes = (uint32_t)((n + 31) & ~31ull);
	}
	/* Every inode's log holds at least one page: by default room for two each. */
	if (!o->meta_bytes && sb.meta_pages < 2ull * sb.ninodes)
		sb.meta_pages = 2ull * sb.ninodes;
	if (sb.meta_pages < 16)
		sb.meta_pages = 16;
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != (ssize_t)sizeof(sb.uuid))
		memcpy(sb.uuid, &sb.create_time, sizeof(sb.create_time));
	int rc = geometry(&sb);
	if (rc != KR_OK)
		return rc;
	struct kr_fs *fs = fs_alloc(path);
	if (!fs)
		return kr_err_set(KR_E_NOMEM, "kr_fs_mkfs: out of memory");
	fs->sb = sb;
	fs->pm.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fs->pm.fd < 0) {
		rc = errno == EEXIST ? kr_err_set(KR_E_IO_EXISTS, "%s: file exists", path)
				     : kr_err_errno(KR_E_IO_OPEN, "%s: create", path);
		fs_free(fs);
		return rc;
	}
	if (o->struct_size > v1) {
		fs->progress = o->progress;
		fs->progress_ctx = o->progress_ctx;
	}
	int e = 0;
	/* In pieces, to tell the progress callback: a large pool on tmpfs takes seconds. */
	for (uint64_t at = 0, piece = 64 << 20; at < size && e == 0; at += piece) {
		krfs_progress(fs, at, size + sb.ninodes);
		e = kr_fallocate(fs->pm.fd, (off_t)at, (off_t)(size - at < piece ? size - at : piece));
	}
	if (e != 0) {
		errno = e;
		rc = kr_err_errno(KR_E_IO, "%s: allocating %llu bytes", path, (unsigned long long)size);
	} else {
		rc = kr_pm_map(&fs->pm, fs->pm.fd, size, o->open_flags, path);
	}
	if (rc == KR_OK)
		rc = dram_init(fs);
	if (rc == KR_OK)
		rc = format(fs);
	if (rc == KR_OK && krfs_fence(fs) != 0)
		rc = KR_E_IO_SYNC;
	if (rc == KR_OK && krfs_sb_create(fs) != KR_OK)
		rc = kr_err_set(KR_E_IO_SYNC, "%s: writing the superblock", path);
	if (rc == KR_OK)
		krfs_progress(fs, size + sb.ninodes, size + sb.ninodes);
	fs_free(fs);
	if (rc != KR_OK)
		unlink(path);
	return rc;
}

void kr_fs_set_progress(kr_fs *fs, void (*cb)(void *ctx, uint64_t done, uint64_t total), void *ctx)
{
	if (!fs)
		return;
	fs->progress = cb;
	fs->progress_ctx = ctx;
}

/* ---- mount and unmount ------------------------------------------------------------------- */
int kr_fs_mount(const char *path, unsigned flags, kr_fs **out)
{
	struct kr_fs_mount_opts o = {.struct_size = sizeof(o), .flags = flags};
	return kr_fs_mount_opts(path, &o, out);
}

int kr_fs_mount_opts(const char *path, const struct kr_fs_mount_opts *opts, kr_fs **out)
{
	if (!path || !opts || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_mount: path, options and out are required");
	/* The first version of the struct ended before alloc_shards: its callers get the default. */
	const size_t v1 = offsetof(struct kr_fs_mount_opts, alloc_shards);
	if (opts->struct_size != v1 && kr_opts_size_check(opts->struct_size, sizeof(*opts), "kr_fs_mount_opts"))
		return KR_E_MISUSE_ARG;
	unsigned flags = opts->flags;
	*out = NULL;
	struct kr_fs *fs = fs_alloc(path);
	if (!fs)
		return kr_err_set(KR_E_NOMEM, "kr_fs_mount: out of memory");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t want = opts->scan_threads ? opts->scan_threads : KR_FS_SCAN_THREADS_DEFAULT;
	fs->scan_threads = want < KR_FS_SCAN_THREADS_MAX ? want : KR_FS_SCAN_THREADS_MAX;
	if (cpus >= 1 && fs->scan_threads > (unsigned long)cpus)
		fs->scan_threads = (unsigned)cpus;
	fs->cpus = cpus >= 1 ? (unsigned)cpus : 1;
	fs->alloc_shards = opts->struct_size > v1 ? opts->alloc_shards : 0;
	fs->check_mount = flags & KR_FS_MOUNT_CHECK;
	int rc = KR_OK;
	struct stat st;
	fs->file_fd = open(path, (fs->check_mount ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fs->file_fd < 0)
		rc = kr_err_errno(KR_E_IO_OPEN, "%s: open", path);
	else if (flock(fs->file_fd, (fs->check_mount ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
		rc = errno == EWOULDBLOCK ? kr_err_set(KR_E_IO_BUSY, "%s: in use by another process (mounted, or open in a keratin command)", path)
					  : kr_err_errno(KR_E_IO_OPEN, "%s: flock", path);
	else if (fstat(fs->file_fd, &st) != 0)
		rc = kr_err_errno(KR_E_IO_OPEN, "%s: fstat", path);
	else if ((uint64_t)st.st_size < 2 * P)
		rc = kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: %lld bytes is too small for a keratin-fs pool",
				path, (long long)st.st_size);
	size_t size = rc == KR_OK ? (size_t)st.st_size & ~(size_t)(P - 1) : 0;
	if (rc == KR_OK)
		fs->pm.fd = fs->file_fd;
	/* An inspection mount maps the pool privately (copy-on-write): what the mount repairs
	 * and marks lands in this process's pages only, and only the pages it touches are
	 * copied. */
	if (rc == KR_OK)
		rc = kr_pm_map(&fs->pm, fs->pm.fd, size,
			       (flags & (KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT)) |
				       (fs->check_mount ? KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY : 0),
			       path);
	if (rc == KR_OK && (flags & KR_FS_MOUNT_WPROTECT))
		rc = kr_pm_protect(&fs->pm, path, flags);
	if (rc == KR_OK)
		rc = krfs_media_attach(fs);
	if (rc == KR_OK)
		rc = sb_load(fs, size);
	if (rc == KR_OK)
		rc = dram_init(fs);
	if (rc == KR_OK) {
		fs->was_clean = fs->sb.state == KRFS_STATE_CLEAN;
		rc = krfs_recover(fs);
	}
	if (rc == KR_OK) /* before the rows are settled: a lost free page is rebuilt from its row */
		rc = krfs_media_repair_listed(fs);
	if (rc == KR_OK && krfs_zone_recover(fs) != 0)
		rc = KR_E_IO_SYNC;
	if (rc == KR_OK) {
		for (const struct krfs_snap *s = fs->snaps; s; s = s->next) /* ids are never reused */
			if (s->id >= fs->sb.epoch)
				fs->sb.epoch = s->id + 1;
		fs->sb.state = KRFS_STATE_MOUNTED;
		fs->sb.mount_count++;
		if (krfs_sb_write(fs) != KR_OK)
			rc = kr_err_set(KR_E_IO_SYNC, "%s: marking the superblock mounted", path);
	}
	if (rc != KR_OK) {
		fs_free(fs);
		return rc;
	}
	*out = fs;
	return KR_OK;
}

int kr_fs_unmount(kr_fs *fs)
{
	if (!fs)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_unmount: NULL");
	int rc = KR_OK;
	krfs_enter_any(fs);
	if (fs->failed) {
		rc = kr_err_set(KR_E_IO_SYNC, "%s: unmounted in the error state (not marked clean)", fs->path);
	} else {
		fs->sb.state = KRFS_STATE_CLEAN;
		if (krfs_sb_write(fs) != KR_OK)
			rc = kr_err_set(KR_E_IO_SYNC, "%s: marking the superblock clean", fs->path);
	}
	krfs_leave(fs);
	fs_free(fs);
	return rc;
}
