/*
 * fs_file.c - attributes and file contents: getattr, setattr (and truncate), read, write,
 * readdir, statfs, and the extended attributes (setxattr, getxattr, listxattr, removexattr).
 *
 * Writes are copy-on-write: every file page the write touches is built whole in a DRAM
 * page (the caller's bytes, merged with the old page's verified bytes for a partial page,
 * or zeros in a hole), written with its checksums and parity into a free data page, and
 * named by a FILE_WRITE entry; one commit makes the whole write visible atomically and the
 * old pages free. Truncation to a size inside a page writes a zero-tailed copy of that page,
 * so bytes past the end of a file are always zero on the media (invariant 3 of fs_apply.c).
 * Relaxed pools make overwrites inside the size in place instead (fs_inplace.c).
 * Reads go through krfs_data_read, which verifies every strip. atime is not updated by
 * reads (as with noatime).
 *
 * getattr, read, write, lseek run under the shared lock and the inode's mutex (fs_enter.c
 * rule 2), so that operations on different files run at once; what only the exclusive lock
 * allows (a repair, an in-place write, compacting the log the write grew) makes them let go
 * and take it (on_inode). Everything else here takes the exclusive lock.
 *
 * An extended attribute is set or removed by one XATTR entry in the inode's log (fs_xattr.c);
 * the superblock carries KRFS_INCOMPAT_XATTR before the first such entry is written, so a
 * build that does not know the entry refuses the pool instead of taking the entry for
 * damage (invariant 3 of fs_xattr.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

/* ---- the data path's lock ------------------------------------------------------------- */
typedef int64_t (*inode_fn)(struct kr_fs *fs, struct krfs_inode *ip, void *ctx);

/* fn on inode ino under the shared lock and the inode's mutex; again under the exclusive
 * lock if it returns KRFS_EXCL (having changed nothing). Its result, or the entry's error. */
static int64_t on_inode(struct kr_fs *fs, uint64_t ino, inode_fn fn, void *ctx)
{
	struct krfs_inode *ip;
	int64_t rc = krfs_enter_inode(fs, ino, &ip);
	if (rc)
		return rc;
	rc = fn(fs, ip, ctx);
	krfs_leave_inode(fs, ip);
	if (rc != KRFS_EXCL)
		return rc;
	if ((rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	rc = fn(fs, ip, ctx);
	krfs_leave(fs);
	return rc;
}

/* ---- attributes ------------------------------------------------------------------------ */
static int64_t getattr_locked(struct kr_fs *fs, struct krfs_inode *ip, void *out)
{
	if (out)
		krfs_inode_attr(fs, ip, out);
	return 0;
}

int kr_fs_getattr(kr_fs *fs, uint64_t ino, struct kr_fs_attr *out)
{
	return (int)on_inode(fs, ino, getattr_locked, out);
}

/* Builds file page pg (DRAM, aligned) from src and the old page; bytes at or past size
 * are zero (a no-op for writes, the point of it for truncation). */
static int fill_page(struct kr_fs *fs, struct krfs_inode *ip, uint64_t pg, const struct krfs_src *src,
		     uint64_t size, uint8_t *page)
{
	uint64_t start = pg * P, lo = src->off > start ? src->off : start;
	uint64_t hi = src->off + src->len < start + P ? src->off + src->len : start + P;
	if (lo > start || hi < start + P) {
		uint32_t old = krfs_radix_get(&ip->map, pg);
		if (old) {
			int rc = krfs_data_read(fs, old - 1, page);
			if (rc)
				return rc;
		} else {
			memset(page, 0, P);
		}
	}
	if (hi > lo)
		memcpy(page + (lo - start), (const uint8_t *)src->buf + (lo - src->off), hi - lo);
	if (size < start + P)
		memset(page + (size > start ? size - start : 0), 0, start + P - (size > start ? size : start));
	return 0;
}

int krfs_write_pages(struct krfs_op *op, struct krfs_inode *ip, uint64_t pgoff, uint64_t npages,
		     const struct krfs_src *src, uint64_t new_size)
{
	struct kr_fs *fs = op->fs;
	uint64_t now = krfs_now();
	_Alignas(64) uint8_t page[P]; /* this thread's: writers of other files run at once */
	for (uint64_t done = 0; done < npages;) {
		uint64_t start, n;
		uint64_t want = npages - done < UINT32_MAX ? npages - done : UINT32_MAX;
		int rc = krfs_op_take_data(op, want, &start, &n);
		for (uint64_t i = 0; rc == 0 && i < n; i++) {
			rc = fill_page(fs, ip, pgoff + done + i, src, new_size, page);
			if (rc == 0)
				krfs_data_write(fs, start + i, page);
		}
		if (rc)
			return rc;
		struct krfs_e_write w = {
			.h = {.type = KRFS_E_FILE_WRITE, .size = sizeof(w)},
			.pgoff = pgoff + done,
			.block = krfs_data_off(fs, start),
			.npages = (uint32_t)n,
			.size = new_size,
			.mtime = now,
		};
		if ((rc = krfs_op_append(op, ip, &w.h)) != 0)
			return rc;
		done += n;
	}
	return 0;
}

static int regular(struct krfs_inode *ip)
{
	return S_ISREG(ip->mode) ? 0 : S_ISDIR(ip->mode) ? -EISDIR : -EINVAL;
}

/* mode without the privileges that the KR_FS_SET_KILL_* bits of mask drop. */
static uint32_t kill_privs(unsigned mask, uint32_t mode)
{
	if (mask & KR_FS_SET_KILL_SUIDGID) {
		mode &= ~(uint32_t)S_ISUID;
		if (mode & S_IXGRP)
			mode &= ~(uint32_t)S_ISGID;
	}
	if (mask & KR_FS_SET_KILL_SGID)
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

int kr_fs_setattr(kr_fs *fs, uint64_t ino, unsigned mask, const struct kr_fs_attr *attr,
		  struct kr_fs_attr *out)
{
	const unsigned known = KR_FS_SET_MODE | KR_FS_SET_UID | KR_FS_SET_GID | KR_FS_SET_SIZE |
			       KR_FS_SET_ATIME | KR_FS_SET_MTIME | KR_FS_SET_ATIME_NOW | KR_FS_SET_MTIME_NOW |
			       KR_FS_SET_KILL_SUIDGID | KR_FS_SET_KILL_SGID;
	const unsigned no_attr = KR_FS_SET_ATIME_NOW | KR_FS_SET_MTIME_NOW | KR_FS_SET_KILL_SUIDGID | KR_FS_SET_KILL_SGID;
	if ((mask & ~known) || (mask && !attr && (mask & ~no_attr)))
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "setattr: mask %#x", mask);
	struct krfs_inode *ip;
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	if (mask & KR_FS_SET_SIZE)
		rc = regular(ip);
	if (rc == 0 && (mask & KR_FS_SET_SIZE) && attr->size > KR_FS_MAX_FILE_SIZE)
		rc = -EFBIG;
	if (rc == 0) {
		uint64_t now = krfs_now();
		struct krfs_e_attr a = {.h = {.type = KRFS_E_SET_ATTR, .size = sizeof(a)}, .ctime = now};
		if (mask & KR_FS_SET_MODE)
			a.mask |= KRFS_A_MODE, a.mode = attr->mode & 07777;
		uint32_t killed = kill_privs(mask, a.mask & KRFS_A_MODE ? a.mode : ip->mode & 07777);
		if (killed != (ip->mode & 07777) || (a.mask & KRFS_A_MODE))
			a.mask |= KRFS_A_MODE, a.mode = killed;
		if (mask & KR_FS_SET_UID)
			a.mask |= KRFS_A_UID, a.uid = attr->uid;
		if (mask & KR_FS_SET_GID)
			a.mask |= KRFS_A_GID, a.gid = attr->gid;
		if (mask & (KR_FS_SET_ATIME | KR_FS_SET_ATIME_NOW))
			a.mask |= KRFS_A_ATIME, a.atime = mask & KR_FS_SET_ATIME_NOW ? now : (uint64_t)attr->atime_ns;
		if (mask & (KR_FS_SET_MTIME | KR_FS_SET_MTIME_NOW))
			a.mask |= KRFS_A_MTIME, a.mtime = mask & KR_FS_SET_MTIME_NOW ? now : (uint64_t)attr->mtime_ns;
		if (mask & KR_FS_SET_SIZE) {
			a.mask |= KRFS_A_SIZE, a.size = attr->size;
			if (!(a.mask & KRFS_A_MTIME)) /* a size change is a modification */
				a.mask |= KRFS_A_MTIME, a.mtime = now;
		}
		const unsigned kills = KR_FS_SET_KILL_SUIDGID | KR_FS_SET_KILL_SGID;
		if ((mask & kills) && !(mask & ~kills) && a.mask == 0)
			goto done; /* only privileges to drop, and none there: nothing changes */
		struct krfs_op op;
		krfs_op_begin(&op, fs);
		rc = krfs_op_append(&op, ip, &a.h);
		/* Shrinking into a page: that page gets a zero-tailed copy. */
		uint64_t size = a.size, pg = size / P;
		if (rc == 0 && (a.mask & KRFS_A_SIZE) && size < ip->size && size % P && krfs_radix_get(&ip->map, pg)) {
			struct krfs_src none = {.buf = NULL, .off = size, .len = 0};
			rc = krfs_write_pages(&op, ip, pg, 1, &none, size);
		}
		if (rc == 0)
			rc = krfs_op_commit(&op);
		krfs_op_finish(&op);
	}
done:
	if (rc == 0 && out)
		krfs_inode_attr(fs, ip, out);
	krfs_leave(fs);
	return rc;
}

int kr_fs_truncate(kr_fs *fs, uint64_t ino, uint64_t size)
{
	struct kr_fs_attr a = {.size = size};
	return kr_fs_setattr(fs, ino, KR_FS_SET_SIZE, &a, NULL);
}

/* ---- read and write ------------------------------------------------------------------------- */
struct io {
	void *buf;
	size_t len;
	uint64_t off;
	bool compact; /* write: the log wants compaction, which the shared lock cannot do */
};

static int64_t read_locked(struct kr_fs *fs, struct krfs_inode *ip, void *ctx)
{
	struct io *io = ctx;
	size_t len = io->len;
	uint64_t off = io->off;
	char *buf = io->buf;
	_Alignas(64) uint8_t page[P]; /* this thread's: readers of other files run at once */
	int rc = regular(ip);
	ssize_t done = 0;
	if (rc == 0 && off < ip->size) {
		if (len > ip->size - off)
			len = (size_t)(ip->size - off);
		if (len > SSIZE_MAX)
			len = SSIZE_MAX;
		while ((size_t)done < len) {
			uint64_t pos = off + (uint64_t)done, pg = pos / P, in = pos % P;
			size_t n = P - in < len - (size_t)done ? P - in : len - (size_t)done;
			uint32_t dp = krfs_radix_get(&ip->map, pg);
			if (!dp) {
				memset(buf + done, 0, n);
			} else {
				if ((rc = krfs_data_read(fs, dp - 1, page)) != 0)
					break;
				memcpy(buf + done, page + in, n);
			}
			done += (ssize_t)n;
		}
	}
	return rc ? rc : done;
}

ssize_t kr_fs_read(kr_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off)
{
	struct io io = {.buf = buf, .len = len, .off = off};
	return (ssize_t)on_inode(fs, ino, read_locked, &io);
}

int kr_fs_locate(kr_fs *fs, uint64_t ino, uint64_t off, struct kr_fs_location *loc)
{
	if (!loc)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "locate: no location");
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	if ((rc = regular(ip)) == 0) {
		uint32_t dp = off < ip->size ? krfs_radix_get(&ip->map, off / P) : 0;
		if (dp)
			krfs_data_locate(fs, dp - 1, (unsigned)(off % P / KRFS_STRIP), loc);
		else
			rc = -ENXIO;
	}
	krfs_leave(fs);
	return rc;
}

static int64_t write_locked(struct kr_fs *fs, struct krfs_inode *ip, void *ctx)
{
	struct io *io = ctx;
	int rc = regular(ip);
	if (rc == 0 && krfs_inplace_fits(fs, ip, io->off, io->len)) /* its intent is journal 0 */
		return krfs_exclusive(fs) ? krfs_write_inplace(fs, ip, io->buf, io->off, io->len) : KRFS_EXCL;
	if (rc)
		return rc;
	struct krfs_op op;
	struct krfs_src src = {.buf = io->buf, .off = io->off, .len = io->len};
	uint64_t end = io->off + io->len, first = io->off / P;
	krfs_op_begin(&op, fs);
	rc = krfs_write_pages(&op, ip, first, (end - 1) / P - first + 1, &src, end > ip->size ? end : ip->size);
	if (rc == 0)
		rc = krfs_op_commit(&op);
	io->compact = krfs_op_finish(&op);
	return rc;
}

ssize_t kr_fs_write(kr_fs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off)
{
	if (len == 0)
		return 0;
	if (!buf || len > SSIZE_MAX)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "write: no buffer or %zu bytes", len);
	if (off >= KR_FS_MAX_FILE_SIZE || len > KR_FS_MAX_FILE_SIZE - off)
		return KRFS_ERR(-EFBIG, KR_E_MISUSE_ARG, "write past the largest file size");
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	struct io io = {.buf = (void *)buf, .len = len, .off = off};
	int rc = (int)on_inode(fs, ino, write_locked, &io);
	struct krfs_inode *ip;
	if (rc == 0 && io.compact && krfs_enter_get(fs, ino, &ip) == 0) {
		krfs_gc_maybe(fs, ip); /* the write is committed: a compaction that fails changes nothing */
		krfs_leave(fs);
	}
	return rc ? rc : (ssize_t)len;
}

/* ---- directories and the whole file system ------------------------------------------------- */
/* readdir copies a batch of entries under the lock and calls back without it, so that the
 * callback may use the file system (a listing with attributes, as FUSE's readdirplus). */
#define READDIR_BATCH 64
struct readdir_batch {
	unsigned n;
	struct {
		uint64_t ino, cookie;
		uint32_t dtype;
		uint8_t len;
		char name[KRFS_NAME_MAX + 1];
	} e[READDIR_BATCH];
};

static void batch_add(struct readdir_batch *b, const char *name, size_t len, uint64_t ino, uint32_t dtype,
		      uint64_t cookie)
{
	b->e[b->n].ino = ino;
	b->e[b->n].cookie = cookie;
	b->e[b->n].dtype = dtype;
	b->e[b->n].len = (uint8_t)len;
	memcpy(b->e[b->n].name, name, len);
	b->e[b->n++].name[len] = '\0';
}

/* The entries after cookie, up to a batch ("." has cookie 1, ".." 2). */
static int readdir_batch(kr_fs *fs, uint64_t dir, uint64_t cookie, struct readdir_batch *b)
{
	struct krfs_inode *dp;
	int rc = krfs_enter_get(fs, dir, &dp);
	if (rc)
		return rc;
	if (!S_ISDIR(dp->mode))
		rc = -ENOTDIR;
	b->n = 0;
	if (rc == 0 && cookie < 1)
		batch_add(b, ".", 1, dp->ino, krfs_dtype(S_IFDIR), 1);
	if (rc == 0 && cookie < 2)
		batch_add(b, "..", 2, dp->parent, krfs_dtype(S_IFDIR), 2);
	for (struct krfs_dentry *d = rc == 0 ? dp->dir.first : NULL; d && b->n < READDIR_BATCH; d = d->next)
		if (d->cookie > cookie)
			batch_add(b, d->name, d->len, d->ino, d->dtype, d->cookie);
	krfs_leave(fs);
	return rc;
}

int kr_fs_readdir(kr_fs *fs, uint64_t dir, uint64_t cookie, kr_fs_filldir_fn fn, void *ctx)
{
	if (!fn)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "readdir: no callback");
	struct readdir_batch *b = kr_malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	int n = 0, rc;
	while ((rc = readdir_batch(fs, dir, cookie, b)) == 0 && b->n) {
		unsigned i = 0;
		for (; i < b->n; i++, n++) {
			if (fn(ctx, b->e[i].name, b->e[i].len, b->e[i].ino, b->e[i].dtype, b->e[i].cookie))
				break;
			cookie = b->e[i].cookie;
		}
		if (i < b->n)
			break;
	}
	free(b);
	return rc ? rc : n;
}

int kr_fs_statfs(kr_fs *fs, struct kr_fs_statfs *out)
{
	if (!out)
		return -EINVAL;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	*out = (struct kr_fs_statfs){
		.bsize = P,
		.blocks = fs->sb.data_pages,
		.bfree = krfs_bm_nfree(&fs->data_bm),
		.files = fs->sb.ninodes - 1,
		.ffree = krfs_bm_nfree(&fs->ino_bm),
		.namemax = KRFS_NAME_MAX,
		.log_pages = fs->sb.meta_pages,
		.log_pages_free = krfs_bm_nfree(&fs->meta_bm),
		.repairs = fs->repairs,
		.compactions = fs->compactions,
		.mount_count = fs->sb.mount_count,
		.was_clean = fs->was_clean,
		.dead_zone = (uint32_t)(fs->sb.replica_off - fs->sb.csum_a_off < UINT32_MAX
					? fs->sb.replica_off - fs->sb.csum_a_off : UINT32_MAX),
		.unprotect = (fs->replica ? 0 : KR_FS_NO_META_REPLICA) | (fs->csum ? 0 : KR_FS_NO_DATA_CSUM) |
			     (fs->parity ? 0 : KR_FS_NO_DATA_PARITY) | (fs->relaxed ? KR_FS_RELAXED : 0),
	};
	krfs_leave(fs);
	return 0;
}

int kr_fs_gc_counts(kr_fs *fs, uint64_t *fast_pages, uint64_t *copied_pages)
{
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	if (fast_pages)
		*fast_pages = fs->gc_fast_pages;
	if (copied_pages)
		*copied_pages = fs->gc_copied_pages;
	krfs_leave(fs);
	return 0;
}

int kr_fs_parity_layout(kr_fs *fs, uint32_t *zone_columns)
{
	if (!fs)
		return -EINVAL;
	if (zone_columns) /* fixed at mkfs: no lock needed */
		*zone_columns = fs->sb.zone_columns;
	return fs->zone_rows ? KR_FS_PARITY_ZONE : KR_FS_PARITY_PAGE;
}

/* ---- holes ---------------------------------------------------------------------------------- */
struct seek {
	uint64_t off;
	int whence;
};

static int64_t lseek_locked(struct kr_fs *fs, struct krfs_inode *ip, void *ctx)
{
	(void)fs;
	uint64_t off = ((struct seek *)ctx)->off;
	int whence = ((struct seek *)ctx)->whence;
	int64_t res = regular(ip);
	if (res == 0 && off >= ip->size)
		res = -ENXIO;
	uint64_t key;
	uint32_t val;
	if (res == 0 && whence == KR_FS_SEEK_DATA) {
		if (!krfs_radix_next(&ip->map, off / P, &key, &val) || key * P >= ip->size)
			res = -ENXIO;
		else
			res = (int64_t)(key * P > off ? key * P : off);
	} else if (res == 0) {
		uint64_t pg = off / P;
		while (krfs_radix_next(&ip->map, pg, &key, &val) && key == pg)
			pg++;
		uint64_t hole = pg * P > off ? pg * P : off;
		res = (int64_t)(hole < ip->size ? hole : ip->size);
	}
	return res;
}

int64_t kr_fs_lseek(kr_fs *fs, uint64_t ino, uint64_t off, int whence)
{
	if (whence != KR_FS_SEEK_DATA && whence != KR_FS_SEEK_HOLE)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "lseek: whence %d", whence);
	struct seek sk = {.off = off, .whence = whence};
	return on_inode(fs, ino, lseek_locked, &sk);
}

/* Punches file pages [first, first + n) in op (entries of at most 2^32 - 1 pages). */
static int punch_pages(struct krfs_op *op, struct krfs_inode *ip, uint64_t first, uint64_t n)
{
	for (uint64_t done = 0; done < n;) {
		uint64_t k = n - done < UINT32_MAX ? n - done : UINT32_MAX;
		struct krfs_e_write w = {.h = {.type = KRFS_E_FILE_WRITE, .size = sizeof(w)}, .pgoff = first + done,
					 .block = 0, .npages = (uint32_t)k, .size = ip->size, .mtime = krfs_now()};
		int rc = krfs_op_append(op, ip, &w.h);
		if (rc)
			return rc;
		done += k;
	}
	return 0;
}

/* Zeroes [lo, hi) inside one page (a partial edge of a punched range), if the page exists. */
static int zero_part(struct krfs_op *op, struct krfs_inode *ip, uint64_t lo, uint64_t hi)
{
	static const uint8_t zeros[P];
	if (hi <= lo || !krfs_radix_get(&ip->map, lo / P))
		return 0;
	struct krfs_src src = {.buf = zeros, .off = lo, .len = hi - lo};
	return krfs_write_pages(op, ip, lo / P, 1, &src, ip->size);
}

/* [off, end) reads as zeros: whole pages become holes, partial edges are rewritten. */
static int punch(struct krfs_op *op, struct krfs_inode *ip, uint64_t off, uint64_t end)
{
	uint64_t first = (off + P - 1) / P, last = end / P; /* whole pages: [first, last) */
	if (off / P == (end - 1) / P && (off % P || end % P))
		return zero_part(op, ip, off, end); /* inside one page */
	int rc = zero_part(op, ip, off, first * P);
	if (rc == 0)
		rc = zero_part(op, ip, last * P > off ? last * P : off, end);
	if (rc == 0 && last > first)
		rc = punch_pages(op, ip, first, last - first);
	return rc;
}

/* Allocates zeroed pages for every hole page in [off, end) (end <= the new size). */
static int allocate(struct krfs_op *op, struct krfs_inode *ip, uint64_t off, uint64_t end, uint64_t new_size)
{
	struct krfs_src none = {.buf = NULL, .off = 0, .len = 0};
	for (uint64_t pg = off / P; pg * P < end;) {
		uint64_t key;
		uint32_t val;
		uint64_t stop = (end + P - 1) / P;
		if (krfs_radix_next(&ip->map, pg, &key, &val) && key < stop)
			stop = key;
		if (stop > pg) {
			int rc = krfs_write_pages(op, ip, pg, stop - pg, &none, new_size);
			if (rc)
				return rc;
		}
		pg = stop + 1;
	}
	return 0;
}

int kr_fs_fallocate(kr_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	bool punching = mode == (KR_FS_FALLOC_PUNCH_HOLE | KR_FS_FALLOC_KEEP_SIZE);
	if (mode != 0 && mode != KR_FS_FALLOC_KEEP_SIZE && !punching)
		return KRFS_ERR(-EOPNOTSUPP, KR_E_MISUSE_ARG, "fallocate: mode %#x", mode);
	if (len == 0)
		return -EINVAL;
	if (off >= KR_FS_MAX_FILE_SIZE || len > KR_FS_MAX_FILE_SIZE - off)
		return -EFBIG;
	struct krfs_inode *ip;
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	rc = regular(ip);
	if (rc == 0) {
		struct krfs_op op;
		uint64_t end = off + len, new_size = mode == 0 && end > ip->size ? end : ip->size;
		krfs_op_begin(&op, fs);
		if (punching)
			rc = off < ip->size ? punch(&op, ip, off, end < ip->size ? end : ip->size) : 0;
		else if (off < new_size)
			rc = allocate(&op, ip, off, end < new_size ? end : new_size, new_size);
		if (rc == 0 && new_size != ip->size) { /* growing without a hole page to write */
			struct krfs_e_attr a = {.h = {.type = KRFS_E_SET_ATTR, .size = sizeof(a)}, .mask = KRFS_A_SIZE,
						.size = new_size, .ctime = krfs_now()};
			rc = krfs_op_append(&op, ip, &a.h);
		}
		if (rc == 0 && op.nlogs)
			rc = krfs_op_commit(&op);
		krfs_op_finish(&op);
	}
	krfs_leave(fs);
	return rc;
}

/* ---- extended attributes (the DRAM list and the entry: fs_xattr.c) ------------------------------------------------------------------------- */
static int xattr_name(const char *name, size_t *len)
{
	size_t n = name ? strnlen(name, KR_FS_XATTR_NAME_MAX + 1) : 0;
	if (n == 0 || n > KR_FS_XATTR_NAME_MAX)
		return KRFS_ERR(-ERANGE, KR_E_MISUSE_ARG, "extended attribute name: 1..%u bytes", KR_FS_XATTR_NAME_MAX);
	*len = n;
	return 0;
}

/* One XATTR entry committed to ip's log. */
static int change(struct kr_fs *fs, struct krfs_inode *ip, uint8_t xop, const char *name, size_t len,
		  const void *value, size_t vlen)
{
	int rc = krfs_mark_incompat(fs, KRFS_INCOMPAT_XATTR);
	if (rc)
		return rc;
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	union krfs_xattr_buf b;
	rc = krfs_op_append(&op, ip, krfs_xattr_entry(&b, xop, name, len, value, vlen, krfs_now()));
	if (rc == 0)
		rc = krfs_op_commit(&op);
	krfs_op_finish(&op);
	return rc;
}

int kr_fs_setxattr(kr_fs *fs, uint64_t ino, const char *name, const void *value, size_t size, int flags)
{
	size_t len;
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	if (flags & ~(KR_FS_XATTR_CREATE | KR_FS_XATTR_REPLACE) ||
	    flags == (KR_FS_XATTR_CREATE | KR_FS_XATTR_REPLACE))
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "setxattr: flags %#x", (unsigned)flags);
	int rc = xattr_name(name, &len);
	if (rc)
		return rc;
	if (size > KR_FS_XATTR_SIZE_MAX)
		return KRFS_ERR(-E2BIG, KR_E_MISUSE_ARG, "setxattr: a value of %zu bytes (at most %u)", size,
				KR_FS_XATTR_SIZE_MAX);
	if (size && !value)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "setxattr: NULL value");
	struct krfs_inode *ip;
	if ((rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	bool exists = *krfs_xattr_find(ip, name, len) != NULL;
	if (exists && (flags & KR_FS_XATTR_CREATE))
		rc = -EEXIST;
	else if (!exists && (flags & KR_FS_XATTR_REPLACE))
		rc = -ENODATA;
	else
		rc = change(fs, ip, KRFS_X_SET, name, len, value, size);
	krfs_leave(fs);
	return rc;
}

/* Copies n bytes to out, or only reports n (size 0), or -ERANGE if size is too small. */
static ssize_t copy_out(void *out, size_t size, const void *src, size_t n)
{
	if (size == 0)
		return (ssize_t)n;
	if (size < n || !out)
		return -ERANGE;
	memcpy(out, src, n);
	return (ssize_t)n;
}

ssize_t kr_fs_getxattr(kr_fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	size_t len;
	int rc = xattr_name(name, &len);
	struct krfs_inode *ip;
	if (rc || (rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	const struct krfs_xattr *x = *krfs_xattr_find(ip, name, len);
	ssize_t n = x ? copy_out(value, size, x->bytes + x->name_len, x->value_len) : -ENODATA;
	krfs_leave(fs);
	return n;
}

ssize_t kr_fs_listxattr(kr_fs *fs, uint64_t ino, char *list, size_t size)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	size_t total = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next)
		total += x->name_len + 1u;
	ssize_t n = size == 0 ? (ssize_t)total : size < total || !list ? -ERANGE : (ssize_t)total;
	if (n > 0 && size) {
		char *at = list;
		for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next) {
			memcpy(at, x->bytes, x->name_len);
			at[x->name_len] = '\0';
			at += x->name_len + 1u;
		}
	}
	krfs_leave(fs);
	return n;
}

int kr_fs_removexattr(kr_fs *fs, uint64_t ino, const char *name)
{
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	size_t len;
	int rc = xattr_name(name, &len);
	struct krfs_inode *ip;
	if (rc || (rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	rc = *krfs_xattr_find(ip, name, len) ? change(fs, ip, KRFS_X_REMOVE, name, len, NULL, 0) : -ENODATA;
	krfs_leave(fs);
	return rc;
}
