/*
 * fs_gc.c - garbage collection of inode logs by compaction.
 *
 * A log accumulates entries that later ones made dead (overwritten pages, removed names,
 * old attributes). When an inode's live state would fit in at most half of its log pages,
 * its log is rewritten from the DRAM inode - one FILE_WRITE per run of consecutive pages,
 * one DENTRY per name (with the transaction id of the entry that made it, which is its
 * readdir cookie), one XATTR per extended attribute, then SET_ATTR with every attribute
 * (its ctime is the inode's, whatever the XATTR entries said) and LINK_CHANGE, then for the
 * root the snapshot manifest (one SNAPSHOT_INFO per live snapshot, fs_manifest.c) - into fresh pages,
 * and the inode slot switches to the new chain under the lite journal (the head and the
 * tail change together). The old pages are freed after that commit. This is NOVA's
 * "thorough" GC; its "fast" GC (unlinking pages whose entries are all dead without copying)
 * needs per-entry liveness counts and is not done: compaction also reclaims those pages.
 *
 * Compaction is tried when an operation of the running system ends (krfs_op_finish), on
 * every log that operation appended to. It is itself an operation, built on fs_op.c like
 * any other, which is why the operations end here and not in fs_op.c. Its journaled commit
 * needs the exclusive lock: an operation under the shared lock only reports that its log
 * wants compaction, and its caller compacts under the exclusive lock once it let go
 * (fs_base.c rule 3).
 *
 * Invariants
 *   1. The compacted log, applied from scratch, gives exactly the DRAM inode it was made
 *      from (so recovery after the switch finds the same state).
 *   2. The switch is one journaled slot write; a crash before it leaves the old log in force
 *      and the new pages unreferenced (free at the next mount).
 *   3. Nothing is compacted when the log area lacks the pages for the copy: GC never turns a
 *      working state into -ENOSPC.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

/* Upper bound of the bytes the compacted log takes (FILE_WRITE runs counted as pages; the
 * root's log also keeps the snapshot manifest). */
static uint64_t live_bytes(const struct kr_fs *fs, const struct krfs_inode *ip)
{
	uint64_t b = sizeof(struct krfs_e_attr) + sizeof(struct krfs_e_link) + ip->xattr_bytes;
	if (ip->ino == KRFS_ROOT_INO)
		b += fs->snap_bytes;
	return b + (S_ISDIR(ip->mode) ? ip->dir.bytes : ip->nblocks * sizeof(struct krfs_e_write));
}

/* Upper bound of the pages the compacted log of ip takes. */
static uint64_t pages_for(const struct kr_fs *fs, const struct krfs_inode *ip)
{
	/* Entries do not cross pages: less than the largest entry is lost at each page's end. */
	uint64_t largest = krfs_xattr_entry_max(ip);
	if (largest < KRFS_ENTRY_MAX)
		largest = KRFS_ENTRY_MAX;
	return live_bytes(fs, ip) / (KRFS_LOG_USABLE - largest) + 1;
}

/* Whether ip's live state would fit in at most half its log pages (nothing but ip asked). */
static bool mostly_dead(const struct kr_fs *fs, const struct krfs_inode *ip)
{
	return ip->npages >= 2 && pages_for(fs, ip) * 2 <= ip->npages;
}

int krfs_gc_maybe(struct kr_fs *fs, struct krfs_inode *ip)
{
	if (!ip || fs->inodes[ip->ino] != ip || !mostly_dead(fs, ip) || pages_for(fs, ip) > fs->meta_bm.nfree)
		return 0;
	int rc = krfs_log_compact(fs, ip);
	return rc == 0 ? 1 : rc == -EIO ? rc : 0;
}

bool krfs_op_finish(struct krfs_op *op)
{
	krfs_op_end(op);
	bool wanted = false;
	for (unsigned i = 0; op->committed && !op->compaction && i < op->nlogs; i++) {
		if (op->logs[i].detached)
			continue;
		if (krfs_exclusive(op->fs))
			krfs_gc_maybe(op->fs, op->logs[i].ip);
		else
			wanted |= mostly_dead(op->fs, op->logs[i].ip);
	}
	return wanted;
}

static int append_runs(struct krfs_op *op, struct krfs_inode *tmp, const struct krfs_inode *ip)
{
	uint64_t key = 0, run_key = 0, run_len = 0;
	uint32_t val, run_val = 0;
	int more;
	do {
		more = krfs_radix_next(&ip->map, key, &key, &val);
		if (run_len && (!more || key != run_key + run_len || val != run_val + run_len || run_len == UINT32_MAX)) {
			struct krfs_e_write w = {
				.h = {.type = KRFS_E_FILE_WRITE, .size = sizeof(w)},
				.pgoff = run_key,
				.block = krfs_data_off(op->fs, run_val - 1),
				.npages = (uint32_t)run_len,
				.size = ip->size,
				.mtime = ip->mtime,
			};
			int rc = krfs_op_append(op, tmp, &w.h);
			if (rc)
				return rc;
			run_len = 0;
		}
		if (more) {
			if (run_len == 0) {
				run_key = key;
				run_val = val;
			}
			run_len++;
			key++;
		}
	} while (more);
	return 0;
}

static int append_names(struct krfs_op *op, struct krfs_inode *tmp, const struct krfs_inode *ip)
{
	for (const struct krfs_dentry *d = ip->dir.first; d; d = d->next) {
		union {
			struct krfs_e_dentry d;
			uint8_t bytes[KRFS_ENTRY_MAX];
		} b;
		memset(&b, 0, sizeof(b));
		b.d.h.type = KRFS_E_DENTRY;
		b.d.h.size = (uint16_t)krfs_dentry_size(d->len);
		b.d.h.trans = d->cookie;
		b.d.ino = d->ino;
		b.d.mtime = ip->mtime;
		b.d.links = ip->nlink;
		b.d.name_len = d->len;
		b.d.ftype = d->dtype;
		b.d.op = KRFS_D_ADD;
		memcpy(b.d.name, d->name, d->len);
		int rc = krfs_op_append(op, tmp, &b.d.h);
		if (rc)
			return rc;
	}
	return 0;
}

static int append_xattrs(struct krfs_op *op, struct krfs_inode *tmp, const struct krfs_inode *ip)
{
	union krfs_xattr_buf b;
	int rc = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x && rc == 0; x = x->next)
		rc = krfs_op_append(op, tmp, krfs_xattr_entry(&b, KRFS_X_SET, x->bytes, x->name_len,
							      x->bytes + x->name_len, x->value_len, ip->ctime));
	return rc;
}

int krfs_append_state(struct krfs_op *op, struct krfs_inode *log, const struct krfs_inode *ip)
{
	int rc = S_ISDIR(ip->mode) ? append_names(op, log, ip) : append_runs(op, log, ip);
	if (rc == 0)
		rc = append_xattrs(op, log, ip);
	if (rc == 0) {
		struct krfs_e_attr a = {
			.h = {.type = KRFS_E_SET_ATTR, .size = sizeof(a)},
			.mask = KRFS_A_ALL,
			.mode = ip->mode & 07777,
			.uid = ip->uid,
			.gid = ip->gid,
			.size = ip->size,
			.atime = ip->atime,
			.mtime = ip->mtime,
			.ctime = ip->ctime,
		};
		rc = krfs_op_append(op, log, &a.h);
	}
	if (rc == 0) {
		struct krfs_e_link l = {.h = {.type = KRFS_E_LINK_CHANGE, .size = sizeof(l)},
					.links = ip->nlink, .ctime = ip->ctime, .parent = ip->parent};
		rc = krfs_op_append(op, log, &l.h);
	}
	return rc;
}

/* The root's snapshot manifest: one SNAPSHOT_INFO create per live snapshot. */
static int append_manifest(struct krfs_op *op, struct krfs_inode *tmp)
{
	union krfs_snap_buf b;
	int rc = 0;
	for (const struct krfs_snap *s = op->fs->snaps; s && rc == 0; s = s->next)
		rc = krfs_op_append(op, tmp, krfs_snap_entry(&b, KRFS_S_CREATE, s->id, s->time, s, s->name, s->name_len));
	return rc;
}

int krfs_log_compact(struct kr_fs *fs, struct krfs_inode *ip)
{
	struct krfs_inode *tmp = krfs_inode_new(ip->ino);
	if (!tmp)
		return -ENOMEM;
	tmp->mode = ip->mode;
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	op.compaction = true;
	int rc = krfs_append_state(&op, tmp, ip);
	if (rc == 0 && ip->ino == KRFS_ROOT_INO)
		rc = append_manifest(&op, tmp);
	if (rc == 0) {
		struct krfs_pinode img = {.state = KRFS_INODE_LIVE, .ftype = ip->mode & S_IFMT, .ino = ip->ino,
					  .generation = ip->generation, .create_time = ip->create_time, .rdev = ip->rdev};
		rc = krfs_op_set_image(&op, &img);
	}
	if (rc == 0)
		rc = krfs_op_commit(&op);
	if (rc == 0) { /* the new chain is the inode's; the old one is free */
		for (uint32_t i = 0; i < ip->npages; i++)
			krfs_bm_clear(&fs->meta_bm, (ip->pages[i] - fs->sb.meta_off) / P);
		uint64_t *old = ip->pages;
		ip->pages = tmp->pages;
		ip->npages = tmp->npages;
		ip->cap = tmp->cap;
		ip->tail = tmp->tail;
		tmp->pages = old;
		tmp->npages = 0;
		fs->compactions++;
	}
	krfs_op_end(&op);
	krfs_inode_free(tmp);
	return rc;
}
