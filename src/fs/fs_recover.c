/*
 * fs_recover.c - the mount-time scan: what makes a pool usable after a clean unmount or a
 * crash alike.
 *
 * Steps:
 *   1. roll back every active lite journal (an operation that had not finished its last
 *      fence is undone in all the inodes it touched);
 *   2. read every inode slot through the tick-tock rules; walk the committed log of every
 *      live inode, verifying and repairing each entry and page link from its replica, and
 *      apply the entries (fs_inode.c) to build the DRAM inode and its index;
 *   3. rebuild the allocators from what the logs reference: the log pages of every chain
 *      (snapshot images included), the data pages of every file index and every snapshot;
 *   4. check the tree's shape (root is a live directory, every name points at a live inode);
 *   5. free orphans: live inodes whose link count is zero (unlinked while open, then a crash).
 *
 * An inode whose slot or log is damaged in both copies is kept out of the free pool and
 * reported by the operations that need it (-EIO) and by the checker; the rest of the file
 * system mounts.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

static int apply_cb(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, void *ctx)
{
	(void)ctx;
	return krfs_inode_apply(fs, ip, e, NULL);
}

/* Loads inode ino from its slot and log: 1 if live, 0 if free, -EUCLEAN, -ENOMEM. */
static int load_inode(struct kr_fs *fs, uint64_t ino)
{
	struct krfs_pinode pi;
	int rc = krfs_inode_read(fs, ino, &pi);
	if (rc)
		return rc;
	if (pi.state == KRFS_INODE_FREE)
		return 0;
	uint32_t t = pi.ftype;
	if (t != S_IFREG && t != S_IFDIR && t != S_IFLNK && t != S_IFCHR && t != S_IFBLK && t != S_IFIFO &&
	    t != S_IFSOCK)
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "inode %llu: unknown file type %#o",
				(unsigned long long)ino, t);
	struct krfs_inode *ip = krfs_inode_new(ino);
	if (!ip)
		return -ENOMEM;
	ip->mode = pi.ftype;
	ip->generation = pi.generation;
	ip->create_time = pi.create_time;
	ip->rdev = pi.rdev;
	rc = krfs_log_walk(fs, ip, &pi, apply_cb, NULL);
	/* The log pages walked so far are this inode's even if the walk failed later. */
	for (uint32_t i = 0; i < ip->npages; i++)
		krfs_bm_set(&fs->meta_bm, (ip->pages[i] - fs->sb.meta_off) / P);
	if (rc) {
		krfs_inode_free(ip);
		return rc;
	}
	fs->inodes[ino] = ip;
	return 1;
}

static int check_names(struct kr_fs *fs, struct krfs_inode *dir)
{
	for (struct krfs_dentry *d = dir->dir.first; d; d = d->next) {
		if (d->ino >= fs->sb.ninodes || (!fs->inodes[d->ino] && !krfs_bm_test(&fs->ino_bm, d->ino)))
			return kr_err_set(KR_E_CORRUPT_META, "directory %llu: name '%s' points at free inode %llu",
					  (unsigned long long)dir->ino, d->name, (unsigned long long)d->ino);
	}
	return KR_OK;
}

int krfs_recover(struct kr_fs *fs)
{
	for (unsigned jn = 0; jn < fs->sb.njournals; jn++) {
		int rc = krfs_journal_recover(fs, jn);
		if (rc < 0)
			return fs->failed ? KR_E_IO_SYNC : KR_E_CORRUPT_META;
	}
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		int rc = load_inode(fs, ino);
		if (rc == -ENOMEM)
			return kr_err_set(KR_E_NOMEM, "out of memory loading inode %llu", (unsigned long long)ino);
		if (fs->failed)
			return KR_E_IO_SYNC;
		if (rc != 0) /* live, or damaged: either way not free */
			krfs_bm_set(&fs->ino_bm, ino);
	}
	struct krfs_inode *root = fs->inodes[KRFS_ROOT_INO];
	if (!root || !S_ISDIR(root->mode))
		return kr_err_set(KR_E_CORRUPT_META, "%s: the root directory is damaged or missing", fs->path);
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		struct krfs_inode *ip = fs->inodes[ino];
		if (!ip)
			continue;
		uint64_t key = 0;
		uint32_t val;
		while (krfs_radix_next(&ip->map, key, &key, &val)) {
			krfs_bm_set(&fs->data_bm, val - 1);
			key++;
		}
		if (S_ISDIR(ip->mode) && check_names(fs, ip) != KR_OK)
			return KR_E_CORRUPT_META;
	}
	if (krfs_snap_recover(fs) != KR_OK)
		return KR_E_NOMEM;
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		struct krfs_inode *ip = fs->inodes[ino];
		if (ip && ip->nlink == 0 && ino != KRFS_ROOT_INO && krfs_free_orphan(fs, ip) != 0)
			return fs->failed ? KR_E_IO_SYNC : KR_E_NOMEM;
	}
	return KR_OK;
}
