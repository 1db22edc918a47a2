/*
 * fs_snap.c - snapshots: read-only copies of the whole tree that share its data pages. Here
 * images are written and loaded, snapshots made and deleted (kr_fs_snapshot_*), and checked;
 * the manifest in DRAM (the SNAPSHOT_INFO entry applied, the data pages held) is
 * fs_manifest.c's, which the apply code reaches from below.
 *
 * Design. NOVA-Fortis keeps every log entry a snapshot still needs in place and records its
 * death in per-snapshot manifests; here a snapshot is instead an image: at creation every
 * live inode's state is written, as the entries a log compaction would write (fs_gc.c)
 * behind a SNAP_INODE entry naming the inode, into a chain of log pages of its own (a
 * detached log, fs_op.c). The chain is committed by one SNAPSHOT_INFO entry in the root
 * directory's log: the root's log is the snapshot manifest, so it is replicated, verified,
 * replayed at mount and compacted like any log, and creating or deleting a snapshot is one
 * tail store. The live inodes' logs need no epoch bookkeeping and log compaction stays as
 * it was; the price is a creation time and image size in proportion to the metadata (not to
 * the data, which is shared), where NOVA-Fortis's creation is constant-time.
 *
 * Data pages are shared by reference: snap_refs[pg] counts the snapshots whose image names
 * page pg. When the live tree lets go of a page (an overwrite, a truncate, an unlink) that
 * a snapshot holds, the page stays allocated and is marked `held`. Deleting a snapshot
 * frees its image pages and every held page whose count falls to zero, right after the
 * delete commits - in the foreground, because the pass is short (one walk of the snapshot's
 * page maps) and because a background reclaimer would need a persistent to-do list to
 * survive a crash, while doing it at once leaves nothing to redo: after a crash the mount
 * scan rebuilds counts and allocators from the surviving manifest.
 *
 * Reading: snapshot id's inodes are DRAM inodes numbered KR_FS_SNAP_INO(id, ino) (their
 * names and ".." translated to such numbers), so every read operation works on them
 * through krfs_get; the changing operations refuse them with -EROFS.
 *
 * Invariants
 *   1. A SNAPSHOT_INFO create entry is committed only after its whole image is durable; the
 *      image is never written again, and its pages belong to it until a delete commits.
 *   2. For every data page, snap_refs is the number of loaded snapshots whose trees name it;
 *      the data allocator marks a page in use iff a live file or a loaded snapshot names it,
 *      and `held` marks those only snapshots name. (A snapshot whose image is damaged in
 *      both copies holds nothing: its tree is unknown, and it reads -EIO until deleted.)
 *   3. The manifest is applied in log order and images are loaded only once the manifest is
 *      complete (a deleted snapshot's pages may have been reused since), at the end of the
 *      mount scan or right after the create commits.
 *   4. Snapshot ids come from the superblock's epoch, which is written after each create
 *      and raised at mount past every id in the manifest: an id is never reused while its
 *      snapshot lives.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "invariant.h"

/* ---- loading an image ----------------------------------------------------------------------------- */
static int refs_init(struct kr_fs *fs)
{
	if (fs->snap_refs)
		return 0;
	fs->snap_refs = kr_calloc(fs->sb.data_pages, sizeof(*fs->snap_refs));
	if (!fs->snap_refs || krfs_bm_init(&fs->held, fs->sb.data_pages, fs->data_bm.nshards) != 0)
		return -ENOMEM;
	/* held's bits are guarded by data_bm's shard locks (krfs_release_data). */
	KR_INVARIANT("fs_alloc.c", 3, krfs_bm_same_shards(&fs->held, &fs->data_bm));
	return 0;
}

struct loader {
	struct krfs_snap *s;
	struct krfs_inode *cur;
};

static int image_bad(const struct krfs_snap *s, const char *what)
{
	return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "snapshot '%s' (id %llu): %s", s->name,
			(unsigned long long)s->id, what);
}

static int load_cb(struct kr_fs *fs, struct krfs_inode *image, const struct krfs_entry_hdr *e, void *ctx)
{
	(void)image;
	struct loader *l = ctx;
	if (e->type != KRFS_E_SNAP_INODE) {
		if (!l->cur)
			return image_bad(l->s, "an entry before the first SNAP_INODE");
		return krfs_inode_apply(fs, l->cur, e, 0, NULL);
	}
	const struct krfs_e_snap_inode *si = (const void *)e;
	uint32_t t = si->ftype;
	if (si->h.size != sizeof(*si) || si->ino == 0 || si->ino >= fs->sb.ninodes || l->s->inodes[si->ino] ||
	    (t != S_IFREG && t != S_IFDIR && t != S_IFLNK && t != S_IFCHR && t != S_IFBLK && t != S_IFIFO &&
	     t != S_IFSOCK))
		return image_bad(l->s, "a malformed or repeated SNAP_INODE");
	struct krfs_inode *ip = krfs_inode_new(KR_FS_SNAP_INO(l->s->id, si->ino));
	if (!ip)
		return -ENOMEM;
	ip->mode = t;
	ip->generation = si->generation;
	ip->create_time = si->create_time;
	ip->rdev = si->rdev;
	l->s->inodes[si->ino] = l->cur = ip;
	return 0;
}

/* Numbers in the loaded tree become snapshot numbers; every name must lead somewhere. */
static int translate(struct kr_fs *fs, struct krfs_snap *s)
{
	const struct krfs_inode *root = s->inodes[KRFS_ROOT_INO];
	if (!root || !S_ISDIR(root->mode))
		return image_bad(s, "no root directory");
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		struct krfs_inode *ip = s->inodes[ino];
		if (!ip)
			continue;
		bool dir = S_ISDIR(ip->mode); /* only a directory's parent is its ".." */
		if (dir && (ip->parent == 0 || ip->parent >= fs->sb.ninodes || !s->inodes[ip->parent]))
			return image_bad(s, "a directory's parent is not in the image");
		ip->parent = KR_FS_SNAP_INO(s->id, KR_FS_INO_IN_TREE(ip->parent));
		for (struct krfs_dentry *d = ip->dir.first; d; d = d->next) {
			if (d->ino >= fs->sb.ninodes || !s->inodes[d->ino])
				return image_bad(s, "a name points outside the image");
			d->ino = KR_FS_SNAP_INO(s->id, d->ino);
		}
	}
	return 0;
}

/* Loads the image of s (invariant 3): walked and verified like a log, its pages marked in
 * use, its data pages held. A damaged image leaves s marked damaged (reads give -EIO). */
static int load(struct kr_fs *fs, struct krfs_snap *s)
{
	uint64_t owner = KRFS_SNAP_OWNER | s->id;
	/* The root's log, the manifest, was walked whole: the scan registers an inode after. */
	KR_INVARIANT("fs_snap.c", 3, fs->inodes[KRFS_ROOT_INO] != NULL);
	s->loaded = true;
	s->image = krfs_inode_new(owner);
	s->inodes = kr_calloc(fs->sb.ninodes, sizeof(*s->inodes));
	if (!s->image || !s->inodes || refs_init(fs) != 0)
		return -ENOMEM;
	struct krfs_pinode pi = {.ino = owner, .tail = krfs_word_make(s->end, owner), .log_head = s->head};
	struct loader l = {.s = s};
	int rc = krfs_log_walk(fs, s->image, &pi, load_cb, &l);
	if (s->image->max_trans >= fs->next_trans) /* image entries keep their first ids */
		fs->next_trans = s->image->max_trans + 1;
	for (uint32_t i = 0; i < s->image->npages; i++)
		krfs_bm_set(&fs->meta_bm, (s->image->pages[i] - fs->sb.meta_off) / P);
	if (rc == 0 && s->image->npages != s->npages)
		rc = image_bad(s, "the image's page count disagrees with the manifest");
	if (rc == 0)
		rc = translate(fs, s);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		s->damaged = true;
		krfs_snap_drop_tree(fs, s);
		return 0;
	}
	krfs_snap_hold(fs, s, +1);
	return 0;
}

static int load_pending(struct kr_fs *fs)
{
	for (struct krfs_snap *s = fs->snaps; s; s = s->next)
		if (!s->loaded) {
			int rc = load(fs, s);
			if (rc)
				return rc;
		}
	return 0;
}

int krfs_snap_recover(struct kr_fs *fs)
{
	if (load_pending(fs) != 0)
		return kr_err_set(KR_E_NOMEM, "out of memory loading snapshots");
	for (uint64_t pg = 0; fs->snap_refs && pg < fs->sb.data_pages; pg++)
		if (fs->snap_refs[pg] && !krfs_bm_test(&fs->data_bm, pg)) {
			krfs_bm_set(&fs->data_bm, pg);
			krfs_bm_set(&fs->held, pg);
		}
	return KR_OK;
}

/* Appends one SNAPSHOT_INFO entry to log in op; image (may be NULL) gives head, end, npages. */
static int append_info(struct krfs_op *op, struct krfs_inode *log, uint8_t sop, uint64_t id, uint64_t time,
		       const struct krfs_snap *image, const char *name, size_t len)
{
	union krfs_snap_buf b;
	return krfs_op_append(op, log, krfs_snap_entry(&b, sop, id, time, image, name, len));
}

/* ---- the operations ------------------------------------------------------------------------------------ */
static int snap_name(const char *name, size_t *len)
{
	int rc = krfs_name_check(name, len);
	if (rc == 0 && (*len == 1 || *len == 2) && memcmp(name, "..", *len) == 0)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "snapshot name '%s'", name);
	return rc;
}

static void attr_of(const struct krfs_snap *s, struct kr_fs_snapshot_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->id = s->id;
	out->root = KR_FS_SNAP_INO(s->id, KRFS_ROOT_INO);
	out->time_ns = (int64_t)s->time;
	memcpy(out->name, s->name, s->name_len);
}

/* -EIO if a name of the live tree leads to an inode damaged beyond repair: an image of
 * such a tree could not be loaded. */
static int tree_whole(const struct kr_fs *fs)
{
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++)
		for (const struct krfs_dentry *d = fs->inodes[ino] ? fs->inodes[ino]->dir.first : NULL; d; d = d->next)
			if (d->ino >= fs->sb.ninodes || !fs->inodes[d->ino])
				return KRFS_ERR(-EIO, KR_E_CORRUPT_META, "snapshot: '%s' in directory %llu is damaged",
						d->name, (unsigned long long)ino);
	return 0;
}

/* Writes the image of every live inode with a name (orphans are not in the tree) into
 * image, a detached log of op. */
static int write_image(struct kr_fs *fs, struct krfs_op *op, struct krfs_inode *image)
{
	int rc = tree_whole(fs);
	if (rc == 0)
		rc = krfs_op_detach(op, image);
	for (uint64_t ino = 1; ino < fs->sb.ninodes && rc == 0; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		if (!ip || ip->nlink == 0)
			continue;
		struct krfs_e_snap_inode si = {
			.h = {.type = KRFS_E_SNAP_INODE, .size = sizeof(si)},
			.ino = ino,
			.generation = ip->generation,
			.create_time = ip->create_time,
			.ftype = ip->mode & S_IFMT,
			.rdev = ip->rdev,
		};
		rc = krfs_op_append(op, image, &si.h);
		if (rc == 0)
			rc = krfs_append_state(op, image, ip);
	}
	return rc;
}

static int create(struct kr_fs *fs, const char *name, size_t len)
{
	uint64_t id = fs->sb.epoch, owner = KRFS_SNAP_OWNER | id;
	if (id >= (1ull << (64 - KR_FS_SNAP_SHIFT)) - 1)
		return KRFS_ERR(-ENOSPC, KR_E_NOSPACE, "snapshot ids are used up");
	int rc = krfs_mark_incompat(fs, KRFS_INCOMPAT_SNAPSHOTS);
	struct krfs_inode *image = krfs_inode_new(owner);
	if (rc || !image) {
		krfs_inode_free(image);
		return rc ? rc : -ENOMEM;
	}
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	rc = write_image(fs, &op, image);
	if (rc == 0) {
		struct krfs_snap where = {.head = image->pages[0], .end = op.logs[0].pos, .npages = image->npages};
		rc = append_info(&op, fs->inodes[KRFS_ROOT_INO], KRFS_S_CREATE, id, krfs_now(), &where, name, len);
	}
	if (rc == 0)
		rc = krfs_op_commit(&op);
	krfs_op_finish(&op);
	krfs_inode_free(image);
	if (rc)
		return rc;
	fs->sb.epoch = id + 1; /* invariant 4 */
	if (krfs_sb_write(fs) != KR_OK)
		return krfs_fail(fs, KR_E_IO_SYNC);
	rc = load_pending(fs);
	struct krfs_snap *s = krfs_snap_by_id(fs, id);
	if (rc == 0 && s->damaged)
		rc = -EIO; /* message set by the load */
	return rc;
}

/* Checks name and takes the lock: 0 (lock held; *s the snapshot of that name, or NULL), or
 * an error (lock not held). */
static int enter_named(kr_fs *fs, const char *name, size_t *len, struct krfs_snap **s)
{
	int rc = snap_name(name, len);
	if (rc || (rc = krfs_enter(fs)) != 0)
		return rc;
	*s = krfs_snap_by_name(fs, name, *len);
	return 0;
}

int kr_fs_snapshot_create(kr_fs *fs, const char *name, struct kr_fs_snapshot_attr *out)
{
	size_t len;
	struct krfs_snap *s;
	int rc = enter_named(fs, name, &len, &s);
	if (rc)
		return rc;
	if (s)
		rc = -EEXIST;
	else if (fs->nsnaps >= KR_FS_SNAPSHOTS_MAX)
		rc = KRFS_ERR(-ENOSPC, KR_E_NOSPACE, "%u snapshots live already", fs->nsnaps);
	else
		rc = create(fs, name, len);
	if (rc == 0 && out)
		attr_of(krfs_snap_by_name(fs, name, len), out);
	krfs_leave(fs);
	return rc;
}

int kr_fs_snapshot_delete(kr_fs *fs, const char *name)
{
	size_t len;
	struct krfs_snap *s;
	int rc = enter_named(fs, name, &len, &s);
	if (rc)
		return rc;
	if (!s) {
		rc = -ENOENT;
	} else {
		struct krfs_op op;
		krfs_op_begin(&op, fs);
		rc = append_info(&op, fs->inodes[KRFS_ROOT_INO], KRFS_S_DELETE, s->id, 0, NULL, name, len);
		if (rc == 0)
			rc = krfs_op_commit(&op); /* applying the delete frees what s held */
		krfs_op_finish(&op);
	}
	krfs_leave(fs);
	return rc;
}

int kr_fs_snapshot_lookup(kr_fs *fs, const char *name, struct kr_fs_snapshot_attr *out)
{
	size_t len;
	struct krfs_snap *s;
	int rc = enter_named(fs, name, &len, &s);
	if (rc)
		return rc;
	if (!s)
		rc = -ENOENT;
	else if (out)
		attr_of(s, out);
	krfs_leave(fs);
	return rc;
}

int kr_fs_snapshot_list(kr_fs *fs, struct kr_fs_snapshot_attr *out, unsigned max)
{
	if (max && !out)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "snapshot_list: no array");
	int rc = krfs_enter(fs);
	if (rc)
		return rc;
	unsigned n = 0;
	for (const struct krfs_snap *s = fs->snaps; s; s = s->next, n++)
		if (n < max)
			attr_of(s, &out[n]);
	krfs_leave(fs);
	return (int)n;
}

/* ---- the checker ---------------------------------------------------------------------------------------- */
void krfs_snap_verify(struct kr_fs *fs, uint64_t *meta_owner, const uint64_t *data_owner, krfs_problem_fn report,
		      void *ctx)
{
	uint32_t *count = fs->snap_refs ? kr_calloc(fs->sb.data_pages, sizeof(*count)) : NULL;
	if (fs->snap_refs && !count) {
		report(ctx, "out of memory checking snapshots");
		return;
	}
	for (struct krfs_snap *s = fs->snaps; s; s = s->next) {
		if (s->damaged)
			report(ctx, "snapshot '%s' (id %llu) is damaged", s->name, (unsigned long long)s->id);
		if (s->id >= fs->sb.epoch)
			report(ctx, "snapshot '%s': id %llu is not below the epoch %llu", s->name, (unsigned long long)s->id,
			       (unsigned long long)fs->sb.epoch);
		if (!s->image)
			continue;
		krfs_log_verify(fs, s->image, report, ctx);
		for (uint32_t i = 0; i < s->image->npages; i++) {
			uint64_t pg = (s->image->pages[i] - fs->sb.meta_off) / P;
			if (meta_owner[pg])
				report(ctx, "log page %#llx is in snapshot '%s' and in the log of %llu",
				       (unsigned long long)s->image->pages[i], s->name, (unsigned long long)(meta_owner[pg] - 1));
			meta_owner[pg] = s->image->ino + 1;
		}
		for (uint64_t ino = 1; s->inodes && ino < fs->sb.ninodes; ino++) {
			uint64_t key = 0;
			uint32_t val;
			while (s->inodes[ino] && krfs_radix_next(&s->inodes[ino]->map, key, &key, &val)) {
				count[val - 1]++;
				key++;
			}
		}
	}
	for (uint64_t pg = 0; count && pg < fs->sb.data_pages; pg++) {
		bool held = krfs_bm_test(&fs->held, pg);
		if (count[pg] != fs->snap_refs[pg])
			report(ctx, "data page %llu: %u snapshots hold it, counted %u", (unsigned long long)pg, count[pg],
			       fs->snap_refs[pg]);
		if (held != (count[pg] && !data_owner[pg]))
			report(ctx, "data page %llu: %s only by snapshots", (unsigned long long)pg,
			       held ? "marked held, yet not" : "held, yet not marked");
		unsigned mismatch;
		bool parity_bad;
		if (held && (krfs_data_verify(fs, pg, &mismatch, &parity_bad) || mismatch || parity_bad))
			report(ctx, "data page %llu (held by snapshots) fails its CRCs or parity", (unsigned long long)pg);
	}
	free(count);
}
