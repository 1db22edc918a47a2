/*
 * fs_enter.c - the way into and out of every keratin-fs call: the file system's lock, taken
 * shared or exclusive, and the rules it keeps; the error state checked on the way in; the
 * inode by number (the live tree's or a snapshot's); and the inode's mutex on the data path.
 * Every entry point of ops/ and mount/ begins with one of krfs_enter, krfs_enter_get,
 * krfs_enter_inode or (the check and the unmount, which a failed file system still allows)
 * krfs_enter_any, and ends with krfs_leave or krfs_leave_inode.
 *
 * Invariants (the locking rules). Operations on different files run in parallel; everything
 * else runs alone. Rules 3 and 5 are checked where they are relied on in the debug build;
 * a breach of the others is a data race or a lock-order inversion, which ThreadSanitizer
 * reports in the threaded tests (test_fs_shards, make check's TSan stage).
 *   1. fs->lock is a reader-writer lock, writers preferred (a stream of reads and writes does
 *      not starve a rename). Every operation but the data path takes it exclusive: the
 *      namespace, setattr and truncate, fallocate, extended attributes, open and release,
 *      snapshots, scrub, check, statfs, poison, unmount. An exclusive holder is alone and may
 *      touch anything, as when this was a mutex.
 *   2. The data path - read, copy-on-write write, fsync, getattr, lseek of one existing
 *      inode - takes it shared and then that inode's mutex (krfs_enter_inode). An inode's
 *      DRAM state, its log and slot, and its data pages with their CRCs and page-parity
 *      strips change only under the exclusive lock, or under the shared lock and the
 *      inode's mutex; shared holders read them only under its mutex. fs->inodes, the
 *      namespace, snapshots and their page counts, the superblock, the journals, the repair
 *      notes and counters change only under the exclusive lock.
 *   3. A shared holder changes nothing another inode reaches but through rules 4 to 6: it
 *      repairs nothing (krfs_data_read returns KRFS_EXCL where it would repair), writes
 *      nothing in place (the intent is journal 0), compacts no log (a journaled commit);
 *      the caller then lets go and runs the operation again exclusive. Its commit is one
 *      tail store (one inode, no slot), and each fence covers the stores of its own
 *      thread only, which is all a one-inode commit needs.
 *   4. The allocators are split into shards (fs_alloc.c), each with its own lock. When
 *      the lock is held shared, a shard's bits, free count and hint change only under that
 *      shard's lock (krfs_op_take_data, log pages, krfs_op_end, krfs_release_data: allocation
 *      takes the locks itself, a free takes the owning shard's), and so do the bits of
 *      fs->held, under the lock of data_bm's shard owning the page. An exclusive holder
 *      needs no shard lock, and only it reads the free counts whole (statfs, GC's room
 *      check, scrub), so their sum over the shards is exact.
 *   5. Zone parity (fs_zone.c invariant 3): the zone window moves under zone_lock and only
 *      when no other operation holds it (zone_users); an operation holds it from its first
 *      run until its deltas are fenced by its own thread (krfs_op_end). The deltas made at
 *      once are thus to pages of one window, whose rows are distinct: two writers never
 *      read-modify-write one parity page at once, and no row needs a lock.
 *   6. fs->failed and fs->next_trans are atomic. Transaction ids stay unique; within one
 *      log they increase, since one inode's operations are serialised by its mutex.
 *   7. Lock order: fs->lock; one inode's mutex; zone_lock; one shard lock (a leaf: no
 *      thread holds two shard locks, an allocation trying shard after shard lets go of each).
 *      No lock is upgraded: a shared holder that needs the exclusive lock lets go of
 *      everything first (KRFS_EXCL), so no two threads wait for each other.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <stdlib.h>
#include <string.h>

#include "fs.h"

/* ---- the locks --------------------------------------------------------------------------- */
void krfs_locks_init(struct kr_fs *fs)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&fs->lock, &a);
	pthread_rwlockattr_destroy(&a);
	pthread_mutex_init(&fs->repair_lock, NULL);
	pthread_mutex_init(&fs->zone_lock, NULL);
	pthread_cond_init(&fs->zone_cond, NULL);
}

void krfs_locks_fini(struct kr_fs *fs)
{
	pthread_rwlock_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->repair_lock);
	pthread_mutex_destroy(&fs->zone_lock);
	pthread_cond_destroy(&fs->zone_cond);
}

/* The file system whose lock this thread holds shared, if any (rule 3 asks krfs_exclusive). */
static _Thread_local const struct kr_fs *shared_fs;

static int entered(struct kr_fs *fs)
{
	if (fs->failed) {
		krfs_leave(fs);
		return KRFS_ERR(-EIO, KR_E_POOL_FAILED, "%s: the file system is in the error state; remount it",
				fs->path);
	}
	return 0;
}

int krfs_enter(struct kr_fs *fs)
{
	if (!fs)
		return -EINVAL;
	pthread_rwlock_wrlock(&fs->lock);
	return entered(fs);
}

void krfs_enter_any(struct kr_fs *fs) { pthread_rwlock_wrlock(&fs->lock); }

int krfs_enter_shared(struct kr_fs *fs)
{
	if (!fs)
		return -EINVAL;
	pthread_rwlock_rdlock(&fs->lock);
	shared_fs = fs;
	return entered(fs);
}

void krfs_leave(struct kr_fs *fs)
{
	if (shared_fs == fs)
		shared_fs = NULL;
	pthread_rwlock_unlock(&fs->lock);
}

bool krfs_exclusive(const struct kr_fs *fs) { return shared_fs != fs; }

/* ---- snapshots and inodes by number ------------------------------------------------------------------------ */
struct krfs_snap *krfs_snap_by_id(const struct kr_fs *fs, uint64_t id)
{
	for (struct krfs_snap *s = fs->snaps; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

struct krfs_snap *krfs_snap_by_name(const struct kr_fs *fs, const char *name, size_t len)
{
	for (struct krfs_snap *s = fs->snaps; s; s = s->next)
		if (s->name_len == len && memcmp(s->name, name, len) == 0)
			return s;
	return NULL;
}

int krfs_snap_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip)
{
	struct krfs_snap *s = krfs_snap_by_id(fs, KR_FS_INO_SNAPSHOT(ino) - 1);
	uint64_t raw = KR_FS_INO_IN_TREE(ino);
	if (!s || raw == 0 || raw >= fs->sb.ninodes)
		return -ENOENT;
	if (s->damaged)
		return KRFS_ERR(-EIO, KR_E_CORRUPT_META, "snapshot '%s' is damaged beyond repair", s->name);
	*ip = s->inodes[raw];
	return *ip ? 0 : -ENOENT;
}

int krfs_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip)
{
	if (krfs_is_snap_ino(ino))
		return krfs_snap_get(fs, ino, ip);
	if (ino == 0 || ino >= fs->sb.ninodes)
		return -ENOENT;
	*ip = fs->inodes[ino];
	if (*ip)
		return 0;
	if (krfs_bm_test(&fs->ino_bm, ino))
		return KRFS_ERR(-EIO, KR_E_CORRUPT_META, "inode %llu is damaged beyond repair",
				(unsigned long long)ino);
	return -ENOENT;
}

int krfs_enter_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip)
{
	int rc = krfs_enter(fs);
	if (rc == 0 && (rc = krfs_get(fs, ino, ip)) != 0)
		krfs_leave(fs);
	return rc;
}

int krfs_enter_inode(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip)
{
	int rc = krfs_enter_shared(fs);
	if (rc == 0 && (rc = krfs_get(fs, ino, ip)) != 0)
		krfs_leave(fs);
	if (rc == 0)
		pthread_mutex_lock(&(*ip)->lock);
	return rc;
}

void krfs_leave_inode(struct kr_fs *fs, struct krfs_inode *ip)
{
	pthread_mutex_unlock(&ip->lock);
	krfs_leave(fs);
}
