/*
 * fs_op.c - the operation context: what one file-system operation takes (inode slots, log
 * pages, data pages), the entries it appends, and its commit.
 *
 * An operation first appends everything it needs beyond the committed tails (new log pages,
 * entries, copy-on-write data pages) without touching anything a committed state can see,
 * then commits:
 *
 *   one inode, no slot image:            fence; store the tail (primary, replica); fence
 *   several inodes, or a slot (new/freed): journal the old tails and slots; fence;
 *                                          store tails and slots in place; fence;
 *                                          journal idle; fence
 *
 * Invariants
 *   1. Before commit nothing reachable from a committed tail or slot has changed, so an
 *      operation that fails before its commit (ENOSPC, ENOMEM) leaves the pool as it was and
 *      krfs_op_end gives back everything it took.
 *   2. A single inode's operation is committed by one atomic 8-byte store of its primary
 *      tail (the replica's tail follows before the same fence; if only the replica's store
 *      reaches the media the primary still wins, invariant 3 of fs_meta.c).
 *   3. Pages and slots that an operation stops using are released only after its commit is
 *      durable (by krfs_inode_apply's callback and krfs_release_inode, called after commit),
 *      so a committed state never references a page that was reused; a data page that a
 *      snapshot holds is not released at all (fs_manifest.c frees it with the last snapshot).
 *   4. Every entry of one operation carries the same transaction id, and ids increase; a
 *      log compaction (fs_gc.c) and a snapshot image (fs_snap.c) are the exception: they
 *      rewrite each name with the id of the entry that made it, since that id is the name's
 *      readdir cookie.
 *   5. A detached log (a snapshot image) is written like any other but named by no inode
 *      slot: the entry that names it, appended to an attached log of the same operation,
 *      is what commits it.
 *   6. Operations of different inodes run at once under the shared lock (fs_enter.c rules
 *      2 to 4): what they take from and give back to the allocators goes through the
 *      owning shard's lock, their transaction ids come from one atomic counter.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "invariant.h"
#include "grow.h"

#ifdef KR_DEBUG_INVARIANTS
/* Operations this thread has begun and neither committed nor ended: no page or slot may be
 * released while one is open (invariant 3), since its commit may still fail. */
static _Thread_local int open_ops;
#define OPEN_OPS(delta) (open_ops += (delta))
#else
#define OPEN_OPS(delta) ((void)0)
#endif

void krfs_op_begin(struct krfs_op *op, struct kr_fs *fs)
{
	memset(op, 0, sizeof(*op));
	op->fs = fs;
	op->trans = fs->next_trans++;
	op->new_ino = -1;
	OPEN_OPS(1);
}

static int push_u64(uint64_t **v, unsigned *n, unsigned *cap, uint64_t x)
{
	if (KR_GROW(*v, *cap, *n + 1u, 8))
		return -ENOMEM;
	(*v)[(*n)++] = x;
	return 0;
}

static struct krfs_op_log *op_log(struct krfs_op *op, struct krfs_inode *ip)
{
	for (unsigned i = 0; i < op->nlogs; i++)
		if (op->logs[i].ip == ip)
			return &op->logs[i];
	if (op->nlogs == KRFS_OP_LOGS)
		return NULL;
	struct krfs_op_log *l = &op->logs[op->nlogs++];
	*l = (struct krfs_op_log){.ip = ip, .old_tail = ip->tail, .pos = ip->tail, .old_npages = ip->npages};
	return l;
}

/* A new log page for ip at chain position seq. */
static int take_log_page(struct krfs_op *op, uint64_t ino, uint32_t seq, uint64_t *page)
{
	struct kr_fs *fs = op->fs;
	int64_t i = krfs_bm_alloc(&fs->meta_bm);
	if (i < 0)
		return KRFS_ERR(-ENOSPC, KR_E_NOSPACE, "no free log page (%llu in the log area)",
				(unsigned long long)fs->sb.meta_pages);
	if (push_u64(&op->meta, &op->nmeta, &op->capmeta, (uint64_t)i) != 0) {
		krfs_bm_put(&fs->meta_bm, (uint64_t)i, 1);
		return -ENOMEM;
	}
	*page = fs->sb.meta_off + (uint64_t)i * P;
	fs->live[i] = 0; /* no entry in it yet */
	krfs_log_page_init(fs, *page, ino, seq);
	return 0;
}

/* Keeps a copy of e, which goes to log page `page`, for applying to ip after the commit. */
static int keep_applied(struct krfs_op *op, struct krfs_inode *ip, uint64_t page, const struct krfs_entry_hdr *e)
{
	size_t need = sizeof(ip) + sizeof(page) + e->size;
	if (KR_GROW(op->applied, op->capapplied, op->napplied + need, 1024))
		return -ENOMEM;
	memcpy(op->applied + op->napplied, &ip, sizeof(ip));
	memcpy(op->applied + op->napplied + sizeof(ip), &page, sizeof(page));
	memcpy(op->applied + op->napplied + sizeof(ip) + sizeof(page), e, e->size);
	op->napplied += need;
	return 0;
}

int krfs_op_detach(struct krfs_op *op, struct krfs_inode *ip)
{
	struct krfs_op_log *l = op_log(op, ip);
	if (!l)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE, "operation touches more than %d inodes", KRFS_OP_LOGS);
	l->detached = true;
	return 0;
}

int krfs_op_append(struct krfs_op *op, struct krfs_inode *ip, struct krfs_entry_hdr *e)
{
	struct kr_fs *fs = op->fs;
	struct krfs_op_log *l = op_log(op, ip);
	if (!l)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE, "operation touches more than %d inodes", KRFS_OP_LOGS);
	e->flags = 0;
	e->reserved = 0;
	e->epoch = (uint32_t)fs->sb.epoch;
	if (!(op->compaction || l->detached) || e->trans == 0)
		e->trans = op->trans;
	e->csum = krfs_entry_csum(e);
	uint64_t page = l->pos & ~(uint64_t)(P - 1);
	if (l->pos == 0 || l->pos - page + e->size > KRFS_LOG_USABLE) {
		uint64_t np;
		int rc = take_log_page(op, ip->ino, ip->npages + ip->unlinked, &np);
		if (rc == 0)
			rc = krfs_inode_push_page(ip, np);
		if (rc)
			return rc;
		if (l->pos != 0) {
			if (l->pos - page < KRFS_LOG_USABLE) {
				const uint8_t marker[KRFS_MARKER_SIZE] = {KRFS_E_NEXT_PAGE};
				krfs_meta_write(fs, l->pos, marker, sizeof(marker));
			}
			krfs_log_page_link(fs, page, np);
		}
		l->pos = np;
	}
	if (!l->detached) {
		int rc = keep_applied(op, ip, l->pos & ~(uint64_t)(P - 1), e);
		if (rc)
			return rc;
	}
	/* An entry's feature bit is durable before the entry (fs_xattr.c invariant 3), and one
	 * operation's entries carry its id unless they rewrite old names (invariant 4). */
	KR_INVARIANT("fs_xattr.c", 3, e->type != KRFS_E_XATTR || (fs->sb.incompat & KRFS_INCOMPAT_XATTR));
	KR_INVARIANT("fs_op.c", 4, e->trans == op->trans || op->compaction || l->detached);
	krfs_meta_write(fs, l->pos, e, e->size);
	l->pos += e->size;
	return 0;
}

int64_t krfs_op_take_ino(struct krfs_op *op)
{
	int64_t i = krfs_bm_alloc(&op->fs->ino_bm);
	if (i < 0)
		return KRFS_ERR(-ENOSPC, KR_E_NOSPACE, "no free inode (%u slots)", op->fs->sb.ninodes);
	op->new_ino = i;
	return i;
}

int krfs_op_set_image(struct krfs_op *op, const struct krfs_pinode *img)
{
	if (op->nimages == KRFS_OP_IMAGES)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE, "operation writes more than %d inode slots", KRFS_OP_IMAGES);
	op->images[op->nimages].ino = img->ino;
	op->images[op->nimages++].img = *img;
	return 0;
}

int krfs_op_take_data(struct krfs_op *op, uint64_t max, uint64_t *start, uint64_t *n)
{
	struct kr_fs *fs = op->fs;
	bool zoned = fs->parity && fs->zone_rows;
	if (zoned && max > krfs_zone_run_max(fs))
		max = krfs_zone_run_max(fs);
	*n = krfs_bm_alloc_run(&fs->data_bm, max, start);
	if (*n == 0)
		return KRFS_ERR(-ENOSPC, KR_E_NOSPACE, "no free data page (%llu in the data area)",
				(unsigned long long)fs->sb.data_pages);
	/* Zone parity: the run's rows are named durably before their parity changes. */
	int rc = zoned ? krfs_zone_intent(op, *start, *n) : 0;
	if (rc) {
		krfs_bm_put(&fs->data_bm, *start, *n);
		return rc;
	}
	if (push_u64(&op->runs, &op->nruns, &op->capruns, *start) != 0 ||
	    push_u64(&op->runs, &op->nruns, &op->capruns, *n) != 0) {
		krfs_bm_put(&fs->data_bm, *start, *n);
		if (op->nruns % 2)
			op->nruns--;
		return -ENOMEM;
	}
	return 0;
}

static struct krfs_op_image *image_of(struct krfs_op *op, uint64_t ino)
{
	for (unsigned i = 0; i < op->nimages; i++)
		if (op->images[i].ino == ino)
			return &op->images[i];
	return NULL;
}

/* Stores the new tail of every log whose slot is not rewritten whole (both copies). */
static void store_tails(struct krfs_op *op)
{
	struct kr_fs *fs = op->fs;
	for (unsigned i = 0; i < op->nlogs; i++) {
		struct krfs_op_log *l = &op->logs[i];
		if (l->detached || image_of(op, l->ip->ino))
			continue;
		krfs_word_write(fs, krfs_inode_off(fs, l->ip->ino), krfs_word_make(l->pos, l->ip->ino));
	}
}

static int commit_journaled(struct krfs_op *op)
{
	struct kr_fs *fs = op->fs;
	struct krfs_jbuf *j = kr_malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->n = 0;
	int rc = 0;
	for (unsigned i = 0; i < op->nlogs && rc == 0; i++) {
		uint64_t ino = op->logs[i].ip->ino, off = krfs_inode_off(fs, ino);
		if (!op->logs[i].detached && !image_of(op, ino))
			rc = krfs_journal_add(j, KRFS_J_WORD, off, krfs_ptr(fs, off), 8);
	}
	for (unsigned i = 0; i < op->nimages && rc == 0; i++) {
		uint64_t off = krfs_inode_off(fs, op->images[i].ino);
		rc = krfs_journal_add(j, KRFS_J_INODE, off, krfs_ptr(fs, off), KRFS_INODE_SIZE);
	}
	if (rc) {
		free(j);
		return KRFS_ERR(-EINVAL, KR_E_MISUSE, "journal overflow");
	}
	krfs_journal_activate(fs, 0, j, ++fs->journal_seq);
	free(j);
	/* Fence: the new entries, data and the undo records are durable before anything
	 * a committed state can see is changed in place. */
	if ((rc = krfs_fence(fs)) != 0)
		return rc;
	store_tails(op);
	for (unsigned i = 0; i < op->nimages; i++)
		krfs_inode_write(fs, op->images[i].ino, &op->images[i].img);
	/* Fence: the new tails and slots are durable before the journal stops protecting them. */
	if ((rc = krfs_fence(fs)) != 0)
		return rc;
	krfs_journal_clear(fs, 0);
	/* Fence: the operation is committed. */
	return krfs_fence(fs);
}

int krfs_op_commit(struct krfs_op *op)
{
	struct kr_fs *fs = op->fs;
	int rc;
	for (unsigned i = 0; i < op->nimages; i++) { /* a new inode's slot takes its log */
		struct krfs_pinode *img = &op->images[i].img;
		for (unsigned k = 0; k < op->nlogs && img->state == KRFS_INODE_LIVE; k++)
			if (op->logs[k].ip->ino == img->ino) {
				img->tail = krfs_word_make(op->logs[k].pos, img->ino);
				img->log_head = op->logs[k].ip->pages[0];
			}
		krfs_pinode_seal(img);
	}
	unsigned attached = 0;
	for (unsigned i = 0; i < op->nlogs; i++)
		attached += !op->logs[i].detached;
	/* A detached log is committed by the entry naming it, in an attached log (invariant 5). */
	KR_INVARIANT("fs_op.c", 5, attached > 0 || op->nlogs == 0);
	/* In-place stores ride a commit of one tail store, never the journal, which holds
	 * their intent meanwhile (fs_inplace.c invariant 3). */
	KR_INVARIANT("fs_inplace.c", 3, !op->in_commit || (op->nimages == 0 && attached == 1));
	if (op->nimages == 0 && attached == 1) {
		/* Fence: entries and data durable before the tail names them. */
		if ((rc = krfs_fence(fs)) != 0)
			return rc;
		store_tails(op);
		if (op->in_commit)
			op->in_commit(op, op->in_commit_ctx);
		/* Fence: the commit. */
		rc = krfs_fence(fs);
	} else if (op->in_commit) {
		return KRFS_ERR(-EINVAL, KR_E_MISUSE, "in-commit stores in a journaled commit");
	} else {
		rc = commit_journaled(op);
	}
	if (rc)
		return rc == -ENOMEM || rc == -EINVAL ? rc : -EIO;
	for (unsigned i = 0; i < op->nlogs; i++)
		op->logs[i].ip->tail = op->logs[i].pos;
	op->committed = true;
	OPEN_OPS(-1);
	kr_pm_count_commit();
	if (op->new_ip) {
		fs->inodes[op->new_ip->ino] = op->new_ip;
		op->new_ip = NULL;
	}
	for (size_t at = 0; at < op->napplied && !op->compaction;) {
		struct krfs_inode *ip;
		uint64_t page;
		_Alignas(8) uint8_t e[KRFS_XATTR_ENTRY_MAX];
		memcpy(&ip, op->applied + at, sizeof(ip));
		memcpy(&page, op->applied + at + sizeof(ip), sizeof(page));
		const struct krfs_entry_hdr *h = (const void *)(op->applied + at + sizeof(ip) + sizeof(page));
		memcpy(e, h, h->size);
		at += sizeof(ip) + sizeof(page) + h->size;
		KR_INVARIANT("fs_apply.c", 1, op->committed && ip->tail != 0);
		if ((rc = krfs_inode_apply(fs, ip, (const void *)e, page, krfs_release_data)) != 0) {
			fs->failed = 1;
			return KRFS_ERR(-EIO, rc == -EUCLEAN ? KR_E_CORRUPT_META : KR_E_NOMEM,
					"inode %llu: applying a committed entry failed (%d); remount",
					(unsigned long long)ip->ino, rc);
		}
	}
	return 0;
}

void krfs_op_end(struct krfs_op *op)
{
	struct kr_fs *fs = op->fs;
	if (!op->committed) {
		OPEN_OPS(-1);
		for (unsigned i = 0; i < op->nlogs; i++)
			op->logs[i].ip->npages = op->logs[i].old_npages;
		for (unsigned i = 0; i < op->nmeta; i++)
			krfs_bm_put(&fs->meta_bm, op->meta[i], 1);
		for (unsigned i = 0; i + 1 < op->nruns; i += 2)
			krfs_bm_put(&fs->data_bm, op->runs[i], op->runs[i + 1]);
		if (op->new_ino >= 0)
			krfs_bm_put(&fs->ino_bm, (uint64_t)op->new_ino, 1);
		krfs_inode_free(op->new_ip);
		op->new_ip = NULL;
	}
	krfs_zone_release(op);
	free(op->meta);
	free(op->runs);
	free(op->applied);
	op->meta = op->runs = NULL;
	op->applied = NULL;
}

void krfs_release_data(struct kr_fs *fs, uint32_t data_page)
{
	KR_INVARIANT("fs_op.c", 3, open_ops == 0);
	/* held has data_bm's shards (fs_alloc.c invariant 3): one lock guards both bits. */
	struct krfs_shard *s = krfs_bm_lock(&fs->data_bm, data_page);
	if (fs->snap_refs && fs->snap_refs[data_page])
		krfs_bm_set(&fs->held, data_page); /* a snapshot still reads it */
	else
		krfs_bm_clear(&fs->data_bm, data_page);
	krfs_bm_unlock(s);
}

void krfs_release_inode(struct kr_fs *fs, struct krfs_inode *ip)
{
	KR_INVARIANT("fs_op.c", 3, open_ops == 0);
	for (uint32_t i = 0; i < ip->npages; i++)
		krfs_bm_clear(&fs->meta_bm, (ip->pages[i] - fs->sb.meta_off) / P);
	uint64_t key = 0;
	uint32_t val;
	while (krfs_radix_next(&ip->map, key, &key, &val)) {
		krfs_release_data(fs, val - 1);
		key++;
	}
	krfs_bm_clear(&fs->ino_bm, ip->ino);
	fs->inodes[ip->ino] = NULL;
	krfs_inode_free(ip);
}
