/*
 * fs_apply.c - the one function that interprets log entries: krfs_inode_apply folds one
 * committed entry into the DRAM state it changes. The inode's pages, attributes, names and
 * links are folded here; its extended attributes by fs_xattr.c; the root's SNAPSHOT_INFO
 * entries, which change the snapshot manifest rather than the root, by fs_manifest.c.
 *
 * A DRAM inode is the sum of its committed log. The mount scan applies every committed
 * entry in log order; a running operation applies the entries it appended right after its
 * commit. Because both paths run this same code, the state after a crash and recovery is
 * exactly the state the running system had after the same committed operations.
 *
 * Invariants
 *   1. An entry is applied only once it is committed (it lies before the durable tail).
 *   2. Applying never writes the pool; data pages an entry stops referencing are handed to
 *      the release callback (the running system frees them; the scan ignores them, since
 *      free space is rebuilt from what the final indexes reference).
 *   3. Bytes of a file page past the file's size are zero on the media (truncate writes a
 *      zero-tailed copy of a partial last page), so extending a file never exposes old data.
 */
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

static int bad(const struct krfs_inode *ip, const struct krfs_entry_hdr *e, const char *what)
{
	return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "inode %llu: entry of transaction %llu: %s",
			(unsigned long long)ip->ino, (unsigned long long)e->trans, what);
}

static bool has_pages(const struct krfs_inode *ip)
{
	return S_ISREG(ip->mode) || S_ISLNK(ip->mode);
}

static int apply_write(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_write *w,
		       krfs_release_fn release)
{
	if (w->h.size != sizeof(*w) || w->reserved || !has_pages(ip))
		return bad(ip, &w->h, "FILE_WRITE malformed or on an inode without data");
	bool punch = w->block == 0; /* the pages become holes */
	uint64_t first = punch ? 0 : (w->block - fs->sb.data_off) / P;
	if ((!punch && (w->block < fs->sb.data_off || (w->block - fs->sb.data_off) % P ||
			first + w->npages > fs->sb.data_pages)) ||
	    w->npages == 0 || w->size > KR_FS_MAX_FILE_SIZE || w->pgoff + w->npages > KR_FS_MAX_FILE_SIZE / P)
		return bad(ip, &w->h, "FILE_WRITE names pages outside the data area or the file");
	for (uint32_t i = 0; i < w->npages; i++) {
		uint32_t old;
		int rc = krfs_radix_set(&ip->map, w->pgoff + i, punch ? 0 : (uint32_t)(first + i + 1), &old);
		if (rc)
			return rc;
		if (old && release)
			release(fs, old - 1);
		if (punch)
			ip->nblocks -= old != 0;
		else
			ip->nblocks += old == 0;
	}
	ip->size = w->size;
	ip->mtime = ip->ctime = w->mtime;
	return 0;
}

/* Drops every page at or past page index `from`. */
static int drop_pages(struct kr_fs *fs, struct krfs_inode *ip, uint64_t from, krfs_release_fn release)
{
	uint64_t key;
	uint32_t val;
	while (krfs_radix_next(&ip->map, from, &key, &val)) {
		int rc = krfs_radix_set(&ip->map, key, 0, NULL);
		if (rc)
			return rc;
		if (release)
			release(fs, val - 1);
		ip->nblocks--;
		from = key + 1;
	}
	return 0;
}

static int apply_attr(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_attr *a,
		      krfs_release_fn release)
{
	if (a->h.size != sizeof(*a) || (a->mask & ~KRFS_A_ALL))
		return bad(ip, &a->h, "SET_ATTR malformed");
	if ((a->mask & KRFS_A_SIZE) && (a->size > KR_FS_MAX_FILE_SIZE || (a->size && !has_pages(ip))))
		return bad(ip, &a->h, "SET_ATTR size on an inode without data");
	if (a->mask & KRFS_A_MODE)
		ip->mode = (ip->mode & S_IFMT) | (a->mode & 07777);
	if (a->mask & KRFS_A_UID)
		ip->uid = a->uid;
	if (a->mask & KRFS_A_GID)
		ip->gid = a->gid;
	if (a->mask & KRFS_A_ATIME)
		ip->atime = a->atime;
	if (a->mask & KRFS_A_MTIME)
		ip->mtime = a->mtime;
	ip->ctime = a->ctime;
	if (a->mask & KRFS_A_SIZE) {
		if (a->size < ip->size) {
			int rc = drop_pages(fs, ip, (a->size + P - 1) / P, release);
			if (rc)
				return rc;
		}
		ip->size = a->size;
	}
	return 0;
}

static int apply_dentry(struct krfs_inode *ip, const struct krfs_e_dentry *d)
{
	size_t want = (sizeof(*d) + d->name_len + 7u) & ~7u;
	if (!S_ISDIR(ip->mode) || d->name_len == 0 || d->h.size != want || d->reserved ||
	    memchr(d->name, '/', d->name_len) || memchr(d->name, '\0', d->name_len))
		return bad(ip, &d->h, "DENTRY malformed or in a non-directory");
	int rc;
	if (d->op == KRFS_D_ADD) {
		if (d->ino == 0 || d->ino == ip->ino)
			return bad(ip, &d->h, "DENTRY names an impossible inode");
		rc = krfs_dir_add(&ip->dir, d->name, d->name_len, d->ino, d->ftype, d->h.trans);
	} else if (d->op == KRFS_D_REMOVE) {
		rc = krfs_dir_remove(&ip->dir, d->name, d->name_len);
		if (rc == -ENOENT)
			return bad(ip, &d->h, "DENTRY removes a name that is not there");
	} else {
		return bad(ip, &d->h, "DENTRY with an unknown operation");
	}
	if (rc)
		return rc;
	ip->nlink = d->links;
	ip->mtime = ip->ctime = d->mtime;
	return 0;
}

static int apply_link(struct krfs_inode *ip, const struct krfs_e_link *l)
{
	if (l->h.size != sizeof(*l) || l->reserved)
		return bad(ip, &l->h, "LINK_CHANGE malformed");
	ip->nlink = l->links;
	ip->ctime = l->ctime;
	ip->parent = l->parent;
	return 0;
}

int krfs_inode_apply(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e,
		     krfs_release_fn release)
{
	switch (e->type) {
	case KRFS_E_FILE_WRITE:
		return apply_write(fs, ip, (const struct krfs_e_write *)e, release);
	case KRFS_E_SET_ATTR:
		return apply_attr(fs, ip, (const struct krfs_e_attr *)e, release);
	case KRFS_E_DENTRY:
		return apply_dentry(ip, (const struct krfs_e_dentry *)e);
	case KRFS_E_LINK_CHANGE:
		return apply_link(ip, (const struct krfs_e_link *)e);
	case KRFS_E_XATTR:
		return krfs_xattr_apply(ip, (const struct krfs_e_xattr *)e);
	case KRFS_E_SNAPSHOT_INFO:
		if (ip->ino != KRFS_ROOT_INO)
			return bad(ip, e, "SNAPSHOT_INFO outside the root's log");
		return krfs_snap_apply(fs, (const struct krfs_e_snapshot *)e);
	}
	return bad(ip, e, "unknown entry type");
}
