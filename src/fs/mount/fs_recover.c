/*
 * fs_recover.c - the mount-time scan: what makes a pool usable after a clean unmount or a
 * crash alike.
 *
 * Steps:
 *   1. roll back every active lite journal (an operation that had not finished its last
 *      fence is undone in all the inodes it touched);
 *   2. read every inode slot through the tick-tock rules; walk the committed log of every
 *      live inode, verifying and repairing each entry and page link from its replica, and
 *      apply the entries (fs_apply.c) to build the DRAM inode and its index;
 *   3. rebuild the allocators from what the logs reference: the log pages of every chain
 *      (snapshot images included), the data pages of every file index and every snapshot;
 *   4. check the tree's shape (root is a live directory, every name points at a live inode);
 *   5. free orphans: live inodes whose link count is zero (unlinked while open, then a crash).
 *
 * An inode whose slot or log is damaged in both copies is kept out of the free pool and
 * reported by the operations that need it (-EIO) and by the checker; the rest of the file
 * system mounts.
 *
 * Step 2 runs on fs->scan_threads threads (the root first, alone: its log holds the
 * snapshot manifest, which changes fs). Each thread takes the next chunk of KRFS_SCAN_CHUNK
 * slots and builds those inodes' DRAM state, touching nothing shared but its own slots of
 * fs->inodes and of the result array; repairs take fs->repair_lock. Everything shared - the
 * allocators, the next transaction id, the error to report - is folded in afterwards, in
 * inode order, by one thread, so the mounted state is the same for any number of threads.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

static int apply_cb(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, void *ctx)
{
	(void)ctx;
	return krfs_inode_apply(fs, ip, e, ip->pages[ip->npages - 1], NULL); /* the walk's page */
}

/* Loads inode ino from its slot and log into fs->inodes[ino]: 1 if live, 0 if free, -EUCLEAN,
 * -ENOMEM. A walk that failed leaves the pages it walked in *partial (freed by the caller). */
static int load_inode(struct kr_fs *fs, uint64_t ino, struct krfs_inode **partial)
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
	if (rc) {
		*partial = ip;
		return rc;
	}
	fs->inodes[ino] = ip;
	return 1;
}

#define KRFS_SCAN_CHUNK 64u /* inode slots a scan thread takes at a time */

struct scan {
	struct kr_fs *fs;
	_Atomic uint64_t next; /* first slot of the next chunk to take */
	int *rc;               /* [ninodes]: load_inode's result */
	struct krfs_inode **partial; /* [ninodes]: what a failed walk had walked */
};

static void *scan_thread(void *arg)
{
	struct scan *sc = arg;
	uint64_t n = sc->fs->sb.ninodes;
	for (uint64_t first; (first = atomic_fetch_add(&sc->next, KRFS_SCAN_CHUNK)) < n;)
		for (uint64_t ino = first; ino < first + KRFS_SCAN_CHUNK && ino < n; ino++)
			if (ino > KRFS_ROOT_INO)
				sc->rc[ino] = load_inode(sc->fs, ino, &sc->partial[ino]);
	return NULL;
}

/* Step 2 for every slot but 0: fs->inodes, and in rc/partial what each load gave. */
static void scan_all(struct kr_fs *fs, int *rc, struct krfs_inode **partial)
{
	struct scan sc = {.fs = fs, .rc = rc, .partial = partial};
	rc[KRFS_ROOT_INO] = load_inode(fs, KRFS_ROOT_INO, &partial[KRFS_ROOT_INO]);
	pthread_t t[KR_FS_SCAN_THREADS_MAX];
	unsigned started = 0;
	while (started + 1 < fs->scan_threads && pthread_create(&t[started], NULL, scan_thread, &sc) == 0)
		started++; /* a thread that cannot be made leaves its share to the others */
	scan_thread(&sc);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
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
	int *rcs = kr_calloc(fs->sb.ninodes, sizeof(*rcs));
	struct krfs_inode **partial = kr_calloc(fs->sb.ninodes, sizeof(*partial));
	if (!rcs || !partial) {
		free(rcs);
		free(partial);
		return kr_err_set(KR_E_NOMEM, "out of memory for the mount scan");
	}
	scan_all(fs, rcs, partial);
	int err = KR_OK;
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		/* The log pages walked are this inode's even if the walk failed later. */
		const struct krfs_inode *ip = fs->inodes[ino] ? fs->inodes[ino] : partial[ino];
		for (uint32_t i = 0; ip && i < ip->npages; i++)
			krfs_bm_set(&fs->meta_bm, (ip->pages[i] - fs->sb.meta_off) / P);
		if (ip && ip->max_trans >= fs->next_trans)
			fs->next_trans = ip->max_trans + 1;
		krfs_inode_free(partial[ino]);
		if (rcs[ino] == -ENOMEM && err == KR_OK)
			err = kr_err_set(KR_E_NOMEM, "out of memory loading inode %llu", (unsigned long long)ino);
		if (rcs[ino] != 0) /* live, or damaged: either way not free */
			krfs_bm_set(&fs->ino_bm, ino);
	}
	free(rcs);
	free(partial);
	if (fs->failed)
		return KR_E_IO_SYNC;
	if (err != KR_OK)
		return err;
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
