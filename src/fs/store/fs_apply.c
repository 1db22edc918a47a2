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
 *   4. Liveness, for fast GC (fs_gc.c): fs->live[page] counts what the entries of a log page
 *      still own - each field of the inode (owner[]), each file page (src, the map's twin)
 *      and each name (the dentry's src) belongs to the last entry that set it - plus one pin
 *      for every entry that must stay. A page whose count is 0 holds only entries that
 *      later ones overwrite entirely, so replaying the log without it gives the same inode.
 *   5. An entry that removes something is pinned: replayed without it, what it removed would
 *      come back from older entries. So are the entries it removed from a directory (the
 *      remove would find no name) and every XATTR entry (a name's place in the listing is
 *      where it was first set) and SNAPSHOT_INFO entry. Log compaction drops these.
 */
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "invariant.h"

static int bad(const struct krfs_inode *ip, const struct krfs_entry_hdr *e, const char *what)
{
	return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "inode %llu: entry of transaction %llu: %s",
			(unsigned long long)ip->ino, (unsigned long long)e->trans, what);
}

static bool has_pages(const struct krfs_inode *ip)
{
	return S_ISREG(ip->mode) || S_ISLNK(ip->mode);
}

/* ---- liveness (invariants 4 and 5) ---------------------------------------------------------- */
/* How owners name log page `page`: its number + 1; 0 for an entry no live count follows (a
 * snapshot image's, or any in a log area too large for 32-bit numbers, where fast GC is off). */
static uint32_t src_of(const struct kr_fs *fs, uint64_t page)
{
	if (!page || fs->sb.meta_pages >= UINT32_MAX)
		return 0;
	return (uint32_t)((page - fs->sb.meta_off) / P + 1);
}

static void live_add(struct kr_fs *fs, uint32_t src, int delta)
{
	if (src)
		fs->live[src - 1] += (uint32_t)delta;
}

/* What *slot stands for now belongs to the entry in src. */
static void own(struct kr_fs *fs, uint32_t *slot, uint32_t src)
{
	live_add(fs, *slot, -1);
	*slot = src;
	live_add(fs, src, 1);
}

static void own_fields(struct kr_fs *fs, struct krfs_inode *ip, uint32_t src, unsigned mask)
{
	for (unsigned f = 0; f < KRFS_NFIELDS; f++)
		if (mask & 1u << f)
			own(fs, &ip->owner[f], src);
}
#define F(x) (1u << KRFS_F_##x)

/* File page key now comes from the entry in src (0: it became a hole). */
static int own_page(struct kr_fs *fs, struct krfs_inode *ip, uint64_t key, uint32_t src)
{
	uint32_t old = 0;
	if (!src && !ip->src.root)
		return 0;
	int rc = krfs_radix_set(&ip->src, key, src, &old);
	if (rc == 0) {
		live_add(fs, old, -1);
		live_add(fs, src, 1);
	}
	return rc;
}

bool krfs_live_owns_nothing(const struct kr_fs *fs, const struct krfs_inode *ip, uint64_t page)
{
	uint32_t src = src_of(fs, page);
	if (!src)
		return true;
	for (unsigned f = 0; f < KRFS_NFIELDS; f++)
		if (ip->owner[f] == src)
			return false;
	for (const struct krfs_dentry *d = ip->dir.first; d; d = d->next)
		if (d->src == src)
			return false;
	uint64_t key = 0;
	uint32_t val;
	while (krfs_radix_next(&ip->src, key, &key, &val)) {
		if (val == src)
			return false;
		key++;
	}
	return true;
}

void krfs_live_reset(struct kr_fs *fs, struct krfs_inode *ip)
{
	memset(ip->owner, 0, sizeof(ip->owner));
	krfs_radix_free(&ip->src);
	for (struct krfs_dentry *d = ip->dir.first; d; d = d->next)
		d->src = 0;
	for (uint32_t i = 0; i < ip->npages; i++) {
		uint32_t src = src_of(fs, ip->pages[i]);
		if (src)
			fs->live[src - 1] = 1;
	}
}

static int apply_write(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_write *w, uint32_t src,
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
	bool dropped = false;
	for (uint32_t i = 0; i < w->npages; i++) {
		uint32_t old = 0;
		int rc = krfs_radix_set(&ip->map, w->pgoff + i, punch ? 0 : (uint32_t)(first + i + 1), &old);
		if (rc == 0)
			rc = own_page(fs, ip, w->pgoff + i, punch ? 0 : src);
		if (rc)
			return rc;
		if (old && release)
			release(fs, old - 1);
		if (punch)
			ip->nblocks -= old != 0;
		else
			ip->nblocks += old == 0;
		dropped |= punch && old;
	}
	ip->size = w->size;
	ip->mtime = ip->ctime = w->mtime;
	own_fields(fs, ip, src, F(SIZE) | F(MTIME) | F(CTIME));
	live_add(fs, src, dropped); /* a punch that made holes stays (invariant 5) */
	return 0;
}

/* Drops every page at or past page index `from`; *dropped tells whether there was one. */
static int drop_pages(struct kr_fs *fs, struct krfs_inode *ip, uint64_t from, krfs_release_fn release, bool *dropped)
{
	uint64_t key;
	uint32_t val;
	while (krfs_radix_next(&ip->map, from, &key, &val)) {
		int rc = krfs_radix_set(&ip->map, key, 0, NULL);
		if (rc == 0)
			rc = own_page(fs, ip, key, 0);
		if (rc)
			return rc;
		*dropped = true;
		if (release)
			release(fs, val - 1);
		ip->nblocks--;
		from = key + 1;
	}
	return 0;
}

static int apply_attr(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_attr *a, uint32_t src,
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
	bool dropped = false;
	if (a->mask & KRFS_A_SIZE) {
		if (a->size < ip->size) {
			int rc = drop_pages(fs, ip, (a->size + P - 1) / P, release, &dropped);
			if (rc)
				return rc;
		}
		ip->size = a->size;
	}
	static const unsigned fields[][2] = {{KRFS_A_MODE, F(MODE)},   {KRFS_A_UID, F(UID)},
					     {KRFS_A_GID, F(GID)},     {KRFS_A_ATIME, F(ATIME)},
					     {KRFS_A_MTIME, F(MTIME)}, {KRFS_A_SIZE, F(SIZE)}};
	unsigned mask = F(CTIME);
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (a->mask & fields[i][0])
			mask |= fields[i][1];
	own_fields(fs, ip, src, mask);
	live_add(fs, src, dropped); /* a truncation that dropped pages stays (invariant 5) */
	return 0;
}

static int apply_dentry(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_dentry *d, uint32_t src)
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
		if (rc == 0) /* a replaced name's entry is dead */
			own(fs, &krfs_dir_find(&ip->dir, d->name, d->name_len)->src, src);
	} else if (d->op == KRFS_D_REMOVE) {
		/* The name's entry keeps its count (invariant 5), this one is pinned. */
		rc = krfs_dir_remove(&ip->dir, d->name, d->name_len);
		if (rc == -ENOENT)
			return bad(ip, &d->h, "DENTRY removes a name that is not there");
		live_add(fs, src, 1);
	} else {
		return bad(ip, &d->h, "DENTRY with an unknown operation");
	}
	if (rc)
		return rc;
	ip->nlink = d->links;
	ip->mtime = ip->ctime = d->mtime;
	own_fields(fs, ip, src, F(NLINK) | F(MTIME) | F(CTIME));
	return 0;
}

static int apply_link(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_e_link *l, uint32_t src)
{
	if (l->h.size != sizeof(*l) || l->reserved)
		return bad(ip, &l->h, "LINK_CHANGE malformed");
	ip->nlink = l->links;
	ip->ctime = l->ctime;
	ip->parent = l->parent;
	own_fields(fs, ip, src, F(NLINK) | F(CTIME) | F(PARENT));
	return 0;
}

static int apply_entry(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, uint64_t page,
		       krfs_release_fn release)
{
	uint32_t src = src_of(fs, page);
	int rc;
	switch (e->type) {
	case KRFS_E_FILE_WRITE:
		return apply_write(fs, ip, (const struct krfs_e_write *)e, src, release);
	case KRFS_E_SET_ATTR:
		return apply_attr(fs, ip, (const struct krfs_e_attr *)e, src, release);
	case KRFS_E_DENTRY:
		return apply_dentry(fs, ip, (const struct krfs_e_dentry *)e, src);
	case KRFS_E_LINK_CHANGE:
		return apply_link(fs, ip, (const struct krfs_e_link *)e, src);
	case KRFS_E_XATTR: /* pinned (invariant 5); it sets ctime */
		rc = krfs_xattr_apply(ip, (const struct krfs_e_xattr *)e);
		if (rc == 0) {
			own_fields(fs, ip, src, F(CTIME));
			live_add(fs, src, 1);
		}
		return rc;
	case KRFS_E_SNAPSHOT_INFO:
		if (ip->ino != KRFS_ROOT_INO)
			return bad(ip, e, "SNAPSHOT_INFO outside the root's log");
		rc = krfs_snap_apply(fs, (const struct krfs_e_snapshot *)e);
		live_add(fs, src, rc == 0); /* pinned (invariant 5) */
		return rc;
	}
	return bad(ip, e, "unknown entry type");
}

int krfs_inode_apply(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, uint64_t page,
		     krfs_release_fn release)
{
#ifdef KR_DEBUG_INVARIANTS
	/* Invariant 2: the thread's persistence counters see no store, flush or fence. */
	struct kr_counters before, after;
	kr_counters_get(&before);
	int rc = apply_entry(fs, ip, e, page, release);
	kr_counters_get(&after);
	KR_INVARIANT("fs_apply.c", 2, after.bytes_written == before.bytes_written &&
					      after.flushed_lines == before.flushed_lines && after.fences == before.fences);
	return rc;
#else
	return apply_entry(fs, ip, e, page, release);
#endif
}
