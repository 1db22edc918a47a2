/*
 * fs_gc.c - garbage collection of inode logs: fast GC, which unlinks pages whose entries are
 * all dead, and compaction, which copies the live state into fresh pages.
 *
 * A log accumulates entries that later ones made dead (overwritten pages, removed names,
 * old attributes). Fast GC (NOVA's "fast" GC) first takes out of the chain every page but
 * the first and the last whose live count is 0 (fs_apply.c keeps the counts: a page is dead
 * when every entry in it was overwritten entirely by later ones): the page before each run
 * of dead pages gets its next word pointed past them - one self-checking word in both
 * copies, the store an append makes when a page joins the chain - and after a fence the
 * pages are free. Nothing is copied; the entries that stay are not moved. A file written
 * over and over at the same place, or an inode whose attributes change again and again,
 * keeps a log of a few pages this way.
 *
 * Compaction (the "thorough" GC) comes next, for what fast GC cannot take: when a log with
 * two pages or more between its first and its last (fast GC leaves those two; one page
 * between them is usually dead after a few more entries: an attribute set in the last
 * page of it gets set again) would fit in at most half of its pages, it is rewritten
 * from the DRAM inode - one FILE_WRITE per run of consecutive pages,
 * one DENTRY per name (with the transaction id of the entry that made it, which is its
 * readdir cookie), one XATTR per extended attribute, then SET_ATTR with every attribute
 * (its ctime is the inode's, whatever the XATTR entries said) and LINK_CHANGE, then for the
 * root the snapshot manifest (one SNAPSHOT_INFO per live snapshot, fs_manifest.c) - into fresh pages,
 * and the inode slot switches to the new chain under the lite journal (the head and the
 * tail change together). The old pages are freed after that commit. The new pages count
 * as live until the next compaction (krfs_live_reset): what their entries own is not
 * tracked, so fast GC leaves them; the mount scan counts them exactly again.
 *
 * Both are tried when an operation of the running system ends (krfs_op_finish), on every
 * log that operation appended to. Compaction is itself an operation, built on fs_op.c like
 * any other, which is why the operations end here and not in fs_op.c. Both need the
 * exclusive lock (fast GC frees pages and may set a superblock bit; compaction commits
 * under the lite journal): an operation under the shared lock only reports that its log has
 * garbage, and its caller collects it under the exclusive lock once it let go (fs_enter.c
 * rule 3).
 *
 * Invariants
 *   1. The compacted log, applied from scratch, gives exactly the DRAM inode it was made
 *      from (so recovery after the switch finds the same state).
 *   2. The switch is one journaled slot write; a crash before it leaves the old log in force
 *      and the new pages unreferenced (free at the next mount).
 *   3. Nothing is compacted when the log area lacks the pages for the copy: GC never turns a
 *      working state into -ENOSPC.
 *   4. Fast GC unlinks only pages whose entries are all dead (invariant 4 of fs_apply.c), and
 *      only after the operations that made them dead committed: the log, replayed with or
 *      without them, gives the same inode. So a crash before a link store reaches the media
 *      leaves a log with dead pages in it, and one after it a log without them.
 *   5. Fast GC never unlinks the first page (the slot names it) or the last (appends go on
 *      there; the tail points into it), so the slot is not written, and every page keeps its
 *      tail: the chain stays one the walk verifies (fs_log.c), with seq increasing.
 *   6. An unlinked page is freed only after a fence made every link past it durable: a page
 *      reused by another log is never still linked from this one. Until the fence, and if
 *      the system stops before the free, nothing names the page; the mount scan rebuilds
 *      the allocator from the chains it walks, where the page is not.
 *   7. The superblock carries KRFS_INCOMPAT_LOG_GAPS before the first link store that
 *      skips pages, and fast GC stops once a chain has skipped KRFS_GAPS_MAX pages (until a
 *      compaction starts it afresh), so seq never wraps.
 *   8. Both kinds run under the exclusive lock only; under the shared lock krfs_op_finish
 *      reads ip's own state to say whether there is work, and changes nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "invariant.h"

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

/* Pages a chain may skip before fast GC leaves it to compaction (invariant 7). */
#define KRFS_GAPS_MAX (1u << 30)

static bool page_dead(const struct kr_fs *fs, uint64_t page)
{
	return fs->live[(page - fs->sb.meta_off) / P] == 0;
}

#ifdef KR_DEBUG_INVARIANTS
static uint64_t fences_so_far(void)
{
	struct kr_counters c;
	kr_counters_get(&c);
	return c.fences;
}
#endif

/* The pages between ip's first and last whose entries are all dead: what fast GC may
 * unlink (none while the chain is shorter than three pages or has skipped KRFS_GAPS_MAX).
 * Reads only ip's own state and its pages' live counts. */
static uint32_t dead_pages(const struct kr_fs *fs, const struct krfs_inode *ip)
{
	uint32_t dead = 0;
	if (ip->npages >= 3 && ip->unlinked < KRFS_GAPS_MAX && fs->sb.meta_pages < UINT32_MAX)
		for (uint32_t i = 1; i + 1 < ip->npages; i++)
			dead += page_dead(fs, ip->pages[i]);
	return dead;
}

/* The log pages a compaction of ip would write, if one is due (a log of four pages or more
 * whose live state would fit in at most half of them), else 0. Reads only ip's own state. */
static uint64_t compaction_need(const struct kr_fs *fs, const struct krfs_inode *ip)
{
	if (ip->npages < 4)
		return 0;
	uint64_t need = pages_for(fs, ip);
	return need * 2 <= ip->npages ? need : 0;
}

/* Fast GC: unlinks and frees the pages between ip's first and last whose entries are all
 * dead. The number of pages freed, or -EIO on a durability failure. */
static int gc_fast(struct kr_fs *fs, struct krfs_inode *ip)
{
	uint32_t dead = dead_pages(fs, ip);
	if (dead == 0)
		return 0;
	if (krfs_mark_incompat(fs, KRFS_INCOMPAT_LOG_GAPS) != 0)
		return -EIO;
	KR_INVARIANT("fs_gc.c", 8, krfs_exclusive(fs));
	KR_INVARIANT("fs_gc.c", 7, (fs->sb.incompat & KRFS_INCOMPAT_LOG_GAPS) && ip->unlinked < KRFS_GAPS_MAX);
	uint64_t first = ip->pages[0], last = ip->pages[ip->npages - 1];
	(void)first, (void)last;
	uint32_t kept = 0; /* the last page that stays */
	for (uint32_t i = 1; i < ip->npages; i++) {
		if (i + 1 < ip->npages && page_dead(fs, ip->pages[i])) {
			/* A dead page owns nothing of ip's: its entries are overwritten entirely. */
			KR_INVARIANT("fs_apply.c", 4, krfs_live_owns_nothing(fs, ip, ip->pages[i]));
			continue;
		}
		if (i != kept + 1)
			krfs_log_page_link(fs, ip->pages[kept], ip->pages[i]);
		kept = i;
	}
#ifdef KR_DEBUG_INVARIANTS
	uint64_t linked = fences_so_far();
#endif
	/* Fence: the links are durable before the pages they skip can be reused (invariant 6). */
	if (krfs_fence(fs) != 0)
		return -EIO;
	uint32_t n = 1;
	for (uint32_t i = 1; i < ip->npages; i++) {
		if (i + 1 < ip->npages && page_dead(fs, ip->pages[i])) {
			KR_INVARIANT("fs_gc.c", 6, fences_so_far() > linked);
			krfs_bm_clear(&fs->meta_bm, (ip->pages[i] - fs->sb.meta_off) / P);
		} else {
			ip->pages[n++] = ip->pages[i];
		}
	}
	ip->npages = n;
	KR_INVARIANT("fs_gc.c", 5, ip->pages[0] == first && ip->pages[n - 1] == last);
	ip->unlinked += dead;
	fs->gc_fast_pages += dead;
	return (int)dead;
}

int krfs_gc_maybe(struct kr_fs *fs, struct krfs_inode *ip)
{
	if (!ip || fs->inodes[ip->ino] != ip)
		return 0;
	if (gc_fast(fs, ip) < 0)
		return -EIO;
	uint64_t need = compaction_need(fs, ip);
	if (need == 0 || need > krfs_bm_nfree(&fs->meta_bm))
		return 0;
	KR_INVARIANT("fs_enter.c", 3, krfs_exclusive(fs)); /* a shared holder compacts no log */
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
			/* What a shared holder of ip's mutex may read; the log area's free count
			 * is krfs_gc_maybe's to judge. */
			wanted |= dead_pages(op->fs, op->logs[i].ip) || compaction_need(op->fs, op->logs[i].ip);
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
	KR_INVARIANT("fs_gc.c", 8, krfs_exclusive(fs));
	KR_INVARIANT("fs_gc.c", 3, compaction_need(fs, ip) <= krfs_bm_nfree(&fs->meta_bm));
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
		ip->unlinked = 0;
		tmp->pages = old;
		tmp->npages = 0;
		fs->compactions++;
		fs->gc_copied_pages += ip->npages;
		krfs_live_reset(fs, ip);
	}
	krfs_op_end(&op);
	krfs_inode_free(tmp);
	return rc;
}
