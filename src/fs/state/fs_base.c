/*
 * fs_base.c - what every file of keratin-fs stands on: the sticky error state and the fence
 * that enters it, the superblock written back tick-tock, and the clock. The locks and their
 * rules are fs_enter.c's.
 *
 * A durability call that fails leaves the pool in a state the DRAM copy no longer matches,
 * so the first failure is sticky: every later operation gets -EIO until the pool is
 * mounted again (whose scan rebuilds DRAM from the media).
 */
#define _GNU_SOURCE
#include <time.h>

#include "csum.h"
#include "fs.h"

#define SB_CSUM_LEN offsetof(struct krfs_super, csum)

/* ---- the error state ------------------------------------------------------- */
int krfs_fail(struct kr_fs *fs, int kr_code)
{
	fs->failed = 1;
	return KRFS_ERR(-EIO, kr_code, "%s: durability call failed; the file system is in the error state: %s",
			fs->path, kr_errmsg());
}

int krfs_fence(struct kr_fs *fs)
{
	int rc = kr_pm_fence(&fs->pm);
	return rc == KR_OK ? 0 : krfs_fail(fs, rc);
}

/* ---- the superblock ---------------------------------------------------------------------- */
static void sb_seal(struct krfs_super *sb) { sb->csum = kr_crc32c(sb, SB_CSUM_LEN); }

/* Tick-tock: primary, fence, replica, fence. */
int krfs_sb_write(struct kr_fs *fs)
{
	sb_seal(&fs->sb);
	kr_pm_copy(&fs->pm, fs->pm.base, &fs->sb, sizeof(fs->sb));
	kr_pm_flush(&fs->pm, fs->pm.base, sizeof(fs->sb));
	int rc = kr_pm_fence(&fs->pm);
	char *r = krfs_ptr(fs, fs->sb.pool_size - P);
	kr_pm_copy(&fs->pm, r, &fs->sb, sizeof(fs->sb));
	kr_pm_flush(&fs->pm, r, sizeof(fs->sb));
	int rc2 = kr_pm_fence(&fs->pm);
	return rc ? rc : rc2;
}

int krfs_sb_create(struct kr_fs *fs)
{
	sb_seal(&fs->sb);
	void *copy[2] = {fs->pm.base, krfs_ptr(fs, fs->sb.pool_size - P)};
	return kr_pm_write_header(&fs->pm, copy, 2, &fs->sb, sizeof(fs->sb));
}

int krfs_mark_incompat(struct kr_fs *fs, uint32_t bit)
{
	if (fs->sb.incompat & bit)
		return 0;
	fs->sb.incompat |= bit;
	return krfs_sb_write(fs) == KR_OK ? 0 : krfs_fail(fs, KR_E_IO_SYNC);
}

/* ---- the clock ----------------------------------------------------------------------------- */
uint64_t krfs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
