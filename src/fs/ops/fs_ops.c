/*
 * fs_ops.c - the namespace operations: lookup, mknod/create, mkdir, symlink, link, unlink,
 * rmdir, rename, open/release, and the freeing of inodes.
 *
 * Each operation checks everything that can fail with an errno first, then builds one
 * krfs_op: entries appended to the logs of every inode it changes (a DENTRY in each
 * directory, a LINK_CHANGE in each inode whose link count or parent changes, a new inode's
 * SET_ATTR and LINK_CHANGE), slot images for inodes born or freed, then one commit. The
 * DRAM state changes only by applying the committed entries (krfs_op_commit), so a failed
 * operation changes nothing.
 *
 * Link counts: a directory has 2 + its subdirectories; a DENTRY carries the directory's
 * count after the change. An inode is freed in the same operation that removes its last
 * name unless it is open; then it stays as an orphan (nlink 0) until kr_fs_release, or
 * until the next mount after a crash.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

#define LINK_MAX_COUNT 65000u

int krfs_name_check(const char *name, size_t *len)
{
	if (!name)
		return -EINVAL;
	size_t n = strnlen(name, KRFS_NAME_MAX + 1);
	if (n > KRFS_NAME_MAX)
		return KRFS_ERR(-ENAMETOOLONG, KR_E_MISUSE_ARG, "name longer than %u bytes", KRFS_NAME_MAX);
	if (n == 0 || memchr(name, '/', n))
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "name '%s' is empty or contains '/'", name);
	*len = n;
	return 0;
}

static bool is_dot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

/* A name that a new entry can take: checked, and not "." or "..". */
static int new_name(const char *name, size_t *len)
{
	int rc = krfs_name_check(name, len);
	if (rc == 0 && is_dot(name, *len))
		return KRFS_ERR(-EEXIST, KR_E_MISUSE_ARG, "'%s' always exists", name);
	return rc;
}

static int get_dir(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip)
{
	int rc = krfs_get(fs, ino, ip);
	if (rc == 0 && !S_ISDIR((*ip)->mode))
		return -ENOTDIR;
	return rc;
}

/* ---- entry builders ------------------------------------------------------------------------ */
union entry_buf {
	struct krfs_entry_hdr h;
	struct krfs_e_dentry d;
	struct krfs_e_link l;
	struct krfs_e_attr a;
	uint8_t bytes[KRFS_ENTRY_MAX];
};

static int add_dentry(struct krfs_op *op, struct krfs_inode *dir, const char *name, size_t len,
		      uint8_t dop, uint64_t ino, uint8_t dtype, uint32_t links, uint64_t now)
{
	union entry_buf b;
	memset(&b, 0, sizeof(b));
	b.d.h.type = KRFS_E_DENTRY;
	b.d.h.size = (uint16_t)((sizeof(b.d) + len + 7u) & ~7u);
	b.d.ino = ino;
	b.d.mtime = now;
	b.d.links = links;
	b.d.name_len = (uint8_t)len;
	b.d.ftype = dtype;
	b.d.op = dop;
	memcpy(b.d.name, name, len);
	return krfs_op_append(op, dir, &b.h);
}

static int add_link(struct krfs_op *op, struct krfs_inode *ip, uint32_t links, uint64_t parent, uint64_t now)
{
	union entry_buf b;
	memset(&b, 0, sizeof(b));
	b.l.h.type = KRFS_E_LINK_CHANGE;
	b.l.h.size = sizeof(b.l);
	b.l.links = links;
	b.l.ctime = now;
	b.l.parent = parent;
	return krfs_op_append(op, ip, &b.h);
}

int krfs_new_inode(struct krfs_op *op, uint32_t mode, uint32_t rdev, uint32_t uid, uint32_t gid,
		   uint64_t parent, uint32_t links, uint64_t now, struct krfs_inode **out)
{
	struct kr_fs *fs = op->fs;
	int64_t ino = krfs_op_take_ino(op);
	if (ino < 0)
		return (int)ino;
	struct krfs_inode *ip = krfs_inode_new((uint64_t)ino);
	if (!ip)
		return -ENOMEM;
	op->new_ip = ip;
	const struct krfs_pinode *old = krfs_ptr(fs, krfs_inode_off(fs, (uint64_t)ino));
	ip->mode = mode & S_IFMT;
	ip->generation = old->generation + 1;
	ip->create_time = now;
	ip->rdev = rdev;
	union entry_buf b;
	memset(&b, 0, sizeof(b));
	b.a.h.type = KRFS_E_SET_ATTR;
	b.a.h.size = sizeof(b.a);
	b.a.mask = KRFS_A_ALL;
	b.a.mode = mode & 07777;
	b.a.uid = uid;
	b.a.gid = gid;
	b.a.atime = b.a.mtime = b.a.ctime = now;
	int rc = krfs_op_append(op, ip, &b.h);
	if (rc == 0)
		rc = add_link(op, ip, links, parent, now);
	if (rc)
		return rc;
	struct krfs_pinode img = {
		.state = KRFS_INODE_LIVE,
		.ftype = mode & S_IFMT,
		.ino = (uint64_t)ino,
		.generation = ip->generation,
		.create_time = now,
		.rdev = rdev,
	};
	*out = ip;
	return krfs_op_set_image(op, &img);
}

/* The slot image of a freed inode (generation kept for the next user of the slot). */
static int free_image(struct krfs_op *op, const struct krfs_inode *ip)
{
	struct krfs_pinode img = {.state = KRFS_INODE_FREE, .ino = ip->ino, .generation = ip->generation};
	return krfs_op_set_image(op, &img);
}

/* Drops one link of victim in op: frees it (slot image) if that was its last and it is not
 * open, else logs its new count. *freed tells which. */
static int drop_link(struct krfs_op *op, struct krfs_inode *victim, uint64_t now, bool *freed)
{
	uint32_t links = S_ISDIR(victim->mode) ? 0 : victim->nlink - 1;
	*freed = links == 0 && victim->open_count == 0;
	return *freed ? free_image(op, victim) : add_link(op, victim, links, victim->parent, now);
}

/* Commits op, ends it, releases a freed inode; returns rc or the commit's error. */
static int finish(struct krfs_op *op, int rc, struct krfs_inode *freed)
{
	if (rc == 0)
		rc = krfs_op_commit(op);
	krfs_op_finish(op);
	if (rc == 0 && freed)
		krfs_release_inode(op->fs, freed);
	return rc;
}

int krfs_free_orphan(struct kr_fs *fs, struct krfs_inode *ip)
{
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	return finish(&op, free_image(&op, ip), ip);
}

/* ---- lookup ---------------------------------------------------------------------------------- */
int kr_fs_lookup(kr_fs *fs, uint64_t dir, const char *name, struct kr_fs_attr *out)
{
	size_t len;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	struct krfs_inode *dp, *ip = NULL;
	rc = get_dir(fs, dir, &dp);
	if (rc == 0)
		rc = krfs_name_check(name, &len);
	if (rc == 0) {
		uint64_t ino = dp->ino;
		if (len == 2 && is_dot(name, len))
			ino = dp->parent;
		else if (!is_dot(name, len)) {
			struct krfs_dentry *d = krfs_dir_find(&dp->dir, name, len);
			ino = d ? d->ino : 0;
		}
		rc = ino ? krfs_get(fs, ino, &ip) : -ENOENT;
	}
	if (rc == 0 && out)
		krfs_inode_attr(fs, ip, out);
	krfs_leave(fs);
	return rc;
}

/* ---- making inodes ------------------------------------------------------------------------------ */
/* The common part of mknod, mkdir and symlink: checks, the new inode, its name. The op is
 * left open for the caller to add to (symlink's target) and commit. */
static int make(struct kr_fs *fs, struct krfs_op *op, uint64_t dir, const char *name, uint32_t mode,
		uint32_t rdev, uint32_t uid, uint32_t gid, struct krfs_inode **out)
{
	size_t len;
	struct krfs_inode *dp;
	int rc = get_dir(fs, dir, &dp);
	if (rc == 0)
		rc = new_name(name, &len);
	if (rc)
		return rc;
	if (krfs_dir_find(&dp->dir, name, len))
		return -EEXIST;
	bool isdir = S_ISDIR(mode);
	if (isdir && dp->nlink >= LINK_MAX_COUNT)
		return -EMLINK;
	uint64_t now = krfs_now();
	rc = krfs_new_inode(op, mode, rdev, uid, gid, dp->ino, isdir ? 2 : 1, now, out);
	if (rc == 0)
		rc = add_dentry(op, dp, name, len, KRFS_D_ADD, (*out)->ino, krfs_dtype(mode),
				dp->nlink + isdir, now);
	return rc;
}

/* mknod, mkdir and symlink (target: its bytes, else NULL): one operation, committed. */
static int make_op(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t rdev, uint32_t uid,
		   uint32_t gid, const char *target, size_t tlen, struct kr_fs_attr *out)
{
	if (krfs_is_snap_ino(dir))
		return -EROFS;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	struct krfs_op op;
	struct krfs_inode *ip = NULL;
	krfs_op_begin(&op, fs);
	rc = make(fs, &op, dir, name, mode, rdev, uid, gid, &ip);
	if (rc == 0 && target) {
		struct krfs_src src = {.buf = target, .off = 0, .len = tlen};
		rc = krfs_write_pages(&op, ip, 0, 1, &src, tlen);
	}
	rc = finish(&op, rc, NULL);
	if (rc == 0 && out)
		krfs_inode_attr(fs, ip, out);
	krfs_leave(fs);
	return rc;
}

int kr_fs_mknod(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t rdev,
		uint32_t uid, uint32_t gid, struct kr_fs_attr *out)
{
	uint32_t type = mode & S_IFMT;
	if (type == 0)
		mode |= S_IFREG;
	else if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "mknod: file type %#o (use mkdir or symlink)", type);
	return make_op(fs, dir, name, mode, rdev, uid, gid, NULL, 0, out);
}

int kr_fs_create(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
		 struct kr_fs_attr *out)
{
	return kr_fs_mknod(fs, dir, name, S_IFREG | (mode & 07777), 0, uid, gid, out);
}

int kr_fs_mkdir(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
		struct kr_fs_attr *out)
{
	return make_op(fs, dir, name, S_IFDIR | (mode & 07777), 0, uid, gid, NULL, 0, out);
}

int kr_fs_symlink(kr_fs *fs, uint64_t dir, const char *name, const char *target, uint32_t uid,
		  uint32_t gid, struct kr_fs_attr *out)
{
	size_t tlen = target ? strnlen(target, KR_FS_SYMLINK_MAX + 1) : 0;
	if (!target || tlen == 0)
		return KRFS_ERR(-ENOENT, KR_E_MISUSE_ARG, "symlink: empty target");
	if (tlen > KR_FS_SYMLINK_MAX)
		return KRFS_ERR(-ENAMETOOLONG, KR_E_MISUSE_ARG, "symlink: target longer than %u bytes",
				KR_FS_SYMLINK_MAX);
	return make_op(fs, dir, name, S_IFLNK | 0777, 0, uid, gid, target, tlen, out);
}

ssize_t kr_fs_readlink(kr_fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	if (!S_ISLNK(ip->mode))
		rc = -EINVAL;
	uint32_t pg = rc == 0 ? krfs_radix_get(&ip->map, 0) : 0;
	if (rc == 0 && !pg)
		rc = KRFS_ERR(-EIO, KR_E_CORRUPT_META, "symlink %llu has no target page", (unsigned long long)ino);
	if (rc == 0)
		rc = krfs_data_read(fs, pg - 1, fs->buf);
	ssize_t n = rc;
	if (rc == 0) {
		n = (ssize_t)ip->size;
		memcpy(buf, fs->buf, size < ip->size ? size : ip->size);
	}
	krfs_leave(fs);
	return n;
}

/* ---- links -------------------------------------------------------------------------------------- */
int kr_fs_link(kr_fs *fs, uint64_t ino, uint64_t newdir, const char *newname, struct kr_fs_attr *out)
{
	size_t len;
	if (krfs_is_snap_ino(ino) || krfs_is_snap_ino(newdir))
		return -EROFS;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	struct krfs_inode *ip, *dp;
	rc = krfs_get(fs, ino, &ip);
	if (rc == 0)
		rc = get_dir(fs, newdir, &dp);
	if (rc == 0)
		rc = new_name(newname, &len);
	if (rc == 0 && S_ISDIR(ip->mode))
		rc = -EPERM;
	if (rc == 0 && ip->nlink >= LINK_MAX_COUNT)
		rc = -EMLINK;
	if (rc == 0 && ip->nlink == 0)
		rc = -ENOENT; /* an orphan cannot be linked back (as linkat without AT_EMPTY_PATH) */
	if (rc == 0 && krfs_dir_find(&dp->dir, newname, len))
		rc = -EEXIST;
	if (rc == 0) {
		struct krfs_op op;
		uint64_t now = krfs_now();
		krfs_op_begin(&op, fs);
		rc = add_dentry(&op, dp, newname, len, KRFS_D_ADD, ip->ino, krfs_dtype(ip->mode), dp->nlink, now);
		if (rc == 0)
			rc = add_link(&op, ip, ip->nlink + 1, ip->parent, now);
		rc = finish(&op, rc, NULL);
	}
	if (rc == 0 && out)
		krfs_inode_attr(fs, ip, out);
	krfs_leave(fs);
	return rc;
}

/* unlink and rmdir. */
static int remove_name(kr_fs *fs, uint64_t dir, const char *name, bool want_dir)
{
	size_t len;
	if (krfs_is_snap_ino(dir))
		return -EROFS;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	struct krfs_inode *dp, *ip = NULL;
	struct krfs_dentry *d = NULL;
	rc = get_dir(fs, dir, &dp);
	if (rc == 0)
		rc = krfs_name_check(name, &len);
	if (rc == 0 && is_dot(name, len))
		rc = !want_dir ? -EISDIR : len == 1 ? -EINVAL : -ENOTEMPTY;
	if (rc == 0 && !(d = krfs_dir_find(&dp->dir, name, len)))
		rc = -ENOENT;
	if (rc == 0)
		rc = krfs_get(fs, d->ino, &ip);
	if (rc == 0 && want_dir && !S_ISDIR(ip->mode))
		rc = -ENOTDIR;
	if (rc == 0 && !want_dir && S_ISDIR(ip->mode))
		rc = -EISDIR;
	if (rc == 0 && want_dir && ip->dir.count)
		rc = -ENOTEMPTY;
	if (rc == 0) {
		struct krfs_op op;
		bool freed = false;
		uint64_t now = krfs_now();
		krfs_op_begin(&op, fs);
		rc = add_dentry(&op, dp, name, len, KRFS_D_REMOVE, ip->ino, krfs_dtype(ip->mode),
				dp->nlink - want_dir, now);
		if (rc == 0)
			rc = drop_link(&op, ip, now, &freed);
		rc = finish(&op, rc, freed ? ip : NULL);
	}
	krfs_leave(fs);
	return rc;
}

int kr_fs_unlink(kr_fs *fs, uint64_t dir, const char *name) { return remove_name(fs, dir, name, false); }
int kr_fs_rmdir(kr_fs *fs, uint64_t dir, const char *name) { return remove_name(fs, dir, name, true); }

/* ---- rename --------------------------------------------------------------------------------------- */
/* 1 if dir is ip or lies below it. */
static bool inside(struct kr_fs *fs, const struct krfs_inode *dir, const struct krfs_inode *ip)
{
	for (unsigned depth = 0; dir && depth < fs->sb.ninodes; depth++) {
		if (dir == ip)
			return true;
		if (dir->ino == KRFS_ROOT_INO)
			return false;
		dir = dir->parent < fs->sb.ninodes ? fs->inodes[dir->parent] : NULL;
	}
	return false;
}

struct rename_args {
	struct krfs_inode *od, *nd, *src, *dst;
	const char *oldname, *newname;
	size_t oldlen, newlen;
	unsigned flags;
};

static int rename_check(struct kr_fs *fs, struct rename_args *r)
{
	bool sdir = S_ISDIR(r->src->mode);
	if (sdir && inside(fs, r->nd, r->src))
		return -EINVAL;
	if (!r->dst)
		return r->flags & KR_FS_RENAME_EXCHANGE ? -ENOENT : sdir && r->nd->nlink >= LINK_MAX_COUNT ? -EMLINK : 0;
	bool ddir = S_ISDIR(r->dst->mode);
	if (r->flags & KR_FS_RENAME_EXCHANGE)
		return ddir && inside(fs, r->od, r->dst) ? -EINVAL : 0;
	if (sdir && !ddir)
		return -ENOTDIR;
	if (!sdir && ddir)
		return -EISDIR;
	return ddir && r->dst->dir.count ? -ENOTEMPTY : 0;
}

static int rename_op(struct kr_fs *fs, struct rename_args *r)
{
	struct krfs_op op;
	uint64_t now = krfs_now();
	bool exch = r->flags & KR_FS_RENAME_EXCHANGE, freed = false;
	int sdir = S_ISDIR(r->src->mode), ddir = r->dst && S_ISDIR(r->dst->mode);
	/* Link counts of the two directories after the move. */
	int64_t olinks = r->od->nlink, nlinks = r->nd->nlink;
	if (r->od != r->nd) {
		olinks -= sdir;
		nlinks += sdir;
		if (exch) {
			olinks += ddir;
			nlinks -= ddir;
		}
	}
	if (r->dst && !exch)
		nlinks -= ddir;
	if (r->od == r->nd)
		olinks = nlinks;
	krfs_op_begin(&op, fs);
	int rc = add_dentry(&op, r->nd, r->newname, r->newlen, KRFS_D_ADD, r->src->ino, krfs_dtype(r->src->mode),
			    (uint32_t)nlinks, now);
	if (rc == 0)
		rc = exch ? add_dentry(&op, r->od, r->oldname, r->oldlen, KRFS_D_ADD, r->dst->ino,
				       krfs_dtype(r->dst->mode), (uint32_t)olinks, now)
			  : add_dentry(&op, r->od, r->oldname, r->oldlen, KRFS_D_REMOVE, r->src->ino,
				       krfs_dtype(r->src->mode), (uint32_t)olinks, now);
	if (rc == 0)
		rc = add_link(&op, r->src, r->src->nlink, r->nd->ino, now);
	if (rc == 0 && r->dst)
		rc = exch ? add_link(&op, r->dst, r->dst->nlink, r->od->ino, now) : drop_link(&op, r->dst, now, &freed);
	return finish(&op, rc, freed ? r->dst : NULL);
}

int kr_fs_rename(kr_fs *fs, uint64_t olddir, const char *oldname, uint64_t newdir, const char *newname,
		 unsigned flags)
{
	if ((flags & ~(KR_FS_RENAME_NOREPLACE | KR_FS_RENAME_EXCHANGE)) ||
	    flags == (KR_FS_RENAME_NOREPLACE | KR_FS_RENAME_EXCHANGE))
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "rename: flags %#x", flags);
	if (krfs_is_snap_ino(olddir) || krfs_is_snap_ino(newdir))
		return -EROFS;
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	struct rename_args r = {.oldname = oldname, .newname = newname, .flags = flags};
	struct krfs_dentry *sd = NULL, *dd;
	rc = get_dir(fs, olddir, &r.od);
	if (rc == 0)
		rc = get_dir(fs, newdir, &r.nd);
	if (rc == 0)
		rc = krfs_name_check(oldname, &r.oldlen);
	if (rc == 0)
		rc = krfs_name_check(newname, &r.newlen);
	if (rc == 0 && (is_dot(oldname, r.oldlen) || is_dot(newname, r.newlen)))
		rc = -EBUSY;
	if (rc == 0 && !(sd = krfs_dir_find(&r.od->dir, oldname, r.oldlen)))
		rc = -ENOENT;
	if (rc == 0)
		rc = krfs_get(fs, sd->ino, &r.src);
	if (rc == 0 && (dd = krfs_dir_find(&r.nd->dir, newname, r.newlen)) != NULL)
		rc = krfs_get(fs, dd->ino, &r.dst);
	if (rc == 0 && r.dst && (flags & KR_FS_RENAME_NOREPLACE))
		rc = -EEXIST;
	if (rc == 0 && r.dst != r.src) /* the same inode under both names: nothing to do */
		rc = rename_check(fs, &r);
	if (rc == 0 && r.dst != r.src)
		rc = rename_op(fs, &r);
	krfs_leave(fs);
	return rc;
}

/* ---- open counts ------------------------------------------------------------------------------------- */
int kr_fs_open(kr_fs *fs, uint64_t ino)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	ip->open_count++;
	krfs_leave(fs);
	return 0;
}

int kr_fs_release(kr_fs *fs, uint64_t ino)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	if (ip->open_count == 0)
		rc = KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "release of inode %llu that is not open", (unsigned long long)ino);
	else if (--ip->open_count == 0 && ip->nlink == 0 && !krfs_is_snap_ino(ino))
		rc = krfs_free_orphan(fs, ip);
	krfs_leave(fs);
	return rc;
}

/* Every operation is durable when it returns: only whether the inode is there (under the
 * shared lock, fs_enter.c rule 2). */
int kr_fs_fsync(kr_fs *fs, uint64_t ino)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_inode(fs, ino, &ip);
	if (rc == 0)
		krfs_leave_inode(fs, ip);
	return rc;
}

/* ---- paths ------------------------------------------------------------------------------------------ */
int kr_fs_resolve(kr_fs *fs, const char *path, int follow, struct kr_fs_attr *out)
{
	if (!path || path[0] != '/')
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "kr_fs_resolve: '%s' is not an absolute path", path ? path : "(null)");
	char *work = kr_strdup(path); /* the path still to walk, rewritten when a symlink expands */
	if (!work)
		return -ENOMEM;
	struct kr_fs_attr cur, dir;
	int rc = kr_fs_getattr(fs, KR_FS_ROOT_INO, &cur), links = 0;
	size_t at = 0;
	while (rc == 0) {
		while (work[at] == '/')
			at++;
		if (!work[at])
			break;
		size_t len = strcspn(work + at, "/");
		char name[KR_FS_NAME_MAX + 1];
		if (len > KR_FS_NAME_MAX) {
			rc = -ENAMETOOLONG;
			break;
		}
		memcpy(name, work + at, len);
		name[len] = '\0';
		at += len;
		bool last = work[at + strspn(work + at, "/")] == '\0';
		dir = cur;
		if ((rc = kr_fs_lookup(fs, dir.ino, name, &cur)) != 0)
			break;
		if (!S_ISLNK(cur.mode) || (last && !follow))
			continue;
		if (++links > 40) {
			rc = -ELOOP;
			break;
		}
		char target[KR_FS_SYMLINK_MAX + 1];
		ssize_t n = kr_fs_readlink(fs, cur.ino, target, sizeof(target) - 1);
		if (n < 0) {
			rc = (int)n;
			break;
		}
		target[n] = '\0';
		/* The rest of the path continues after the target, from the root or from dir. */
		size_t rest = strlen(work + at);
		char *next = kr_malloc((size_t)n + rest + 2);
		if (!next) {
			rc = -ENOMEM;
			break;
		}
		snprintf(next, (size_t)n + rest + 2, "%s/%s", target, work + at);
		free(work);
		work = next;
		at = 0;
		if (target[0] == '/')
			rc = kr_fs_getattr(fs, KR_FS_ROOT_INO, &cur);
		else
			cur = dir;
	}
	free(work);
	if (rc == 0 && out)
		*out = cur;
	return rc;
}
