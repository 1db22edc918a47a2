/*
 * fs_check.c - the read-only checker of a mounted keratin-fs (kr_fs_check).
 *
 * It compares the media with the DRAM state the mount scan built and with itself, and
 * reports (one line each) every broken invariant of the format and of the tree:
 *   - superblock, journals, inode slots: both copies check and are equal; journals idle;
 *   - each live inode's committed log: both copies equal, page tails and links good, every
 *     entry checks (fs_log.c krfs_log_verify);
 *   - each data page: every strip matches both CRC copies, the parity strip matches;
 *     zone parity (fs_zone.c): every row's parity page is the XOR of the row, free pages
 *     included, and the intent word's two copies are equal and valid;
 *   - ownership: every log page and data page belongs to exactly one inode (one file page)
 *     or snapshot image, and the allocators mark exactly the owned ones (data pages: those
 *     a live file or a snapshot names); inode slots likewise;
 *   - snapshots (fs_snap.c): images verified like logs, hold counts of data pages exact,
 *     pages only snapshots hold verified against their CRCs and parity;
 *   - space: the superblock's areas tile the file in order, data + metadata = pool size,
 *     and each allocator's used + free = its size (its free count agrees with its bitmap);
 *   - the tree: link counts equal the names found (directories: 2 + subdirectories), every
 *     directory has one name and its parent is the directory naming it, every name's type
 *     matches its inode, every live inode is reachable from the root or open, no file has a
 *     page at or past its size.
 * It writes nothing; it takes the file system's lock for its whole run.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "csum.h"
#include "fs.h"

struct checker {
	FILE *out;
	uint64_t problems;
};

static int report(void *ctx, const char *fmt, ...)
{
	struct checker *c = ctx;
	if (c->out) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(c->out, "kr_fs_check: ");
		vfprintf(c->out, fmt, ap);
		fputc('\n', c->out);
		va_end(ap);
	}
	c->problems++;
	return 1;
}

static void check_copies(struct kr_fs *fs, struct checker *c)
{
	const struct krfs_super *a = (const void *)fs->pm.base, *b = krfs_ptr(fs, fs->sb.pool_size - P);
	if (memcmp(a, &fs->sb, sizeof(*a)) != 0 || memcmp(b, &fs->sb, sizeof(*b)) != 0 ||
	    a->csum != kr_crc32c(a, offsetof(struct krfs_super, csum)))
		report(c, "superblock copies differ from the mounted superblock");
	for (unsigned jn = 0; jn < fs->sb.njournals; jn++) {
		uint64_t off = P + (uint64_t)jn * P;
		const struct krfs_journal_hdr *h = krfs_ptr(fs, off);
		if (h->state != 0 || memcmp(h, krfs_replica(fs, off), sizeof(*h)) != 0)
			report(c, "journal %u: not idle, or its copies differ", jn);
	}
	for (uint64_t ino = 0; ino < fs->sb.ninodes; ino++) {
		uint64_t off = krfs_inode_off(fs, ino);
		const struct krfs_pinode *pa = krfs_ptr(fs, off), *pb = krfs_replica(fs, off);
		const struct krfs_inode *ip = fs->inodes[ino];
		bool damaged = !ip && ino && krfs_bm_test(&fs->ino_bm, ino);
		if (damaged) {
			report(c, "inode %llu: damaged beyond repair", (unsigned long long)ino);
			continue;
		}
		if (!krfs_pinode_ok(pa, ino) || memcmp(pa, pb, sizeof(*pa)) != 0)
			report(c, "inode %llu: slot copies fail their checks or differ", (unsigned long long)ino);
		else if ((pa->state == KRFS_INODE_LIVE) != (ip != NULL) || (ino == 0 && pa->state != KRFS_INODE_FREE))
			report(c, "inode %llu: slot state disagrees with the mounted state", (unsigned long long)ino);
		else if (ip && (krfs_word_value(pa->tail, ino) != ip->tail || pa->log_head != ip->pages[0]))
			report(c, "inode %llu: slot's log head or tail disagrees with the log", (unsigned long long)ino);
	}
}

/* Per-page owners, for the ownership and allocator checks. */
struct owners {
	uint64_t *meta; /* log page -> ino + 1 */
	uint64_t *data; /* data page -> ino + 1 */
	uint32_t *names; /* ino -> names found */
	uint32_t *subdirs; /* ino -> subdirectories found */
	uint64_t *named_in; /* ino -> the directory holding its (last found) name */
};

static void check_inode(struct kr_fs *fs, struct checker *c, struct owners *o, const struct krfs_inode *ip,
			struct kr_fs_check_report *rep)
{
	krfs_log_verify(fs, ip, report, c);
	krfs_xattr_verify(ip, report, c);
	for (uint32_t i = 0; i < ip->npages; i++) {
		uint64_t pg = (ip->pages[i] - fs->sb.meta_off) / P;
		if (o->meta[pg])
			report(c, "log page %#llx is in the logs of inodes %llu and %llu", (unsigned long long)ip->pages[i],
			       (unsigned long long)(o->meta[pg] - 1), (unsigned long long)ip->ino);
		o->meta[pg] = ip->ino + 1;
	}
	rep->log_pages += ip->npages;
	uint64_t key = 0;
	uint32_t val;
	while (krfs_radix_next(&ip->map, key, &key, &val)) {
		uint64_t pg = val - 1;
		if (o->data[pg])
			report(c, "data page %llu is in inodes %llu and %llu (or twice in one)", (unsigned long long)pg,
			       (unsigned long long)(o->data[pg] - 1), (unsigned long long)ip->ino);
		o->data[pg] = ip->ino + 1;
		if (key >= (ip->size + P - 1) / P)
			report(c, "inode %llu: page %llu lies past the size %llu", (unsigned long long)ip->ino,
			       (unsigned long long)key, (unsigned long long)ip->size);
		unsigned mismatch;
		bool parity_bad;
		int bad = krfs_data_verify(fs, pg, &mismatch, &parity_bad);
		if (bad || mismatch || parity_bad)
			report(c, "inode %llu page %llu (data page %llu): %d strips fail their CRCs, %u CRC pairs differ%s",
			       (unsigned long long)ip->ino, (unsigned long long)key, (unsigned long long)pg, bad, mismatch,
			       parity_bad ? ", parity is wrong" : "");
		rep->data_pages++;
		key++;
	}
	if (S_ISLNK(ip->mode) && (!krfs_radix_get(&ip->map, 0) || ip->size == 0 || ip->size > KR_FS_SYMLINK_MAX))
		report(c, "symlink %llu has no target", (unsigned long long)ip->ino);
	for (const struct krfs_dentry *d = ip->dir.first; d; d = d->next) {
		const struct krfs_inode *ch = d->ino < fs->sb.ninodes ? fs->inodes[d->ino] : NULL;
		if (!ch) {
			report(c, "directory %llu: '%s' names inode %llu, which is not live", (unsigned long long)ip->ino,
			       d->name, (unsigned long long)d->ino);
			continue;
		}
		o->names[d->ino]++;
		o->named_in[d->ino] = ip->ino;
		if (S_ISDIR(ch->mode))
			o->subdirs[ip->ino]++;
		if (d->dtype != krfs_dtype(ch->mode))
			report(c, "directory %llu: '%s' has type %u, its inode %llu is a %u", (unsigned long long)ip->ino,
			       d->name, d->dtype, (unsigned long long)d->ino, krfs_dtype(ch->mode));
	}
}

static void check_tree(struct kr_fs *fs, struct checker *c, struct owners *o, struct kr_fs_check_report *rep)
{
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		if (!ip)
			continue;
		rep->inodes++;
		if (S_ISDIR(ip->mode)) {
			rep->dirs++;
			uint32_t want_names = ino == KRFS_ROOT_INO ? 0 : ip->nlink ? 1 : 0;
			if (ip->nlink && ip->nlink != 2 + o->subdirs[ino])
				report(c, "directory %llu: link count %u, expected %u", (unsigned long long)ino, ip->nlink,
				       2 + o->subdirs[ino]);
			if (o->names[ino] != want_names)
				report(c, "directory %llu has %u names", (unsigned long long)ino, o->names[ino]);
			uint64_t parent = ino == KRFS_ROOT_INO ? KRFS_ROOT_INO : o->named_in[ino];
			if (want_names == o->names[ino] && ip->parent != parent && ip->nlink)
				report(c, "directory %llu: '..' is %llu, it is named in %llu", (unsigned long long)ino,
				       (unsigned long long)ip->parent, (unsigned long long)parent);
		} else {
			rep->files++;
			if (ip->nlink != o->names[ino])
				report(c, "inode %llu: link count %u, %u names found", (unsigned long long)ino, ip->nlink,
				       o->names[ino]);
		}
		if (ip->nlink == 0 && ip->open_count == 0)
			report(c, "inode %llu: no links and not open", (unsigned long long)ino);
	}
	/* Reachability: every directory's chain of parents ends at the root. */
	for (uint64_t ino = 2; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		if (!ip || !S_ISDIR(ip->mode) || ip->nlink == 0)
			continue;
		uint64_t at = ino, steps = 0;
		while (at != KRFS_ROOT_INO && steps++ < fs->sb.ninodes && o->names[at] == 1 && fs->inodes[o->named_in[at]])
			at = o->named_in[at];
		if (at != KRFS_ROOT_INO)
			report(c, "directory %llu is not reachable from the root", (unsigned long long)ino);
	}
}

static void check_allocators(struct kr_fs *fs, struct checker *c, const struct owners *o)
{
	for (uint64_t i = 0; i < fs->sb.meta_pages; i++)
		if (krfs_bm_test(&fs->meta_bm, i) != (o->meta[i] != 0))
			report(c, "log page %#llx: allocator says %s, owner %llu", (unsigned long long)(fs->sb.meta_off + i * P),
			       krfs_bm_test(&fs->meta_bm, i) ? "used" : "free", (unsigned long long)o->meta[i]);
	for (uint64_t i = 0; i < fs->sb.data_pages; i++)
		if (krfs_bm_test(&fs->data_bm, i) != (o->data[i] != 0 || (fs->snap_refs && fs->snap_refs[i])))
			report(c, "data page %llu: allocator says %s, owner %llu", (unsigned long long)i,
			       krfs_bm_test(&fs->data_bm, i) ? "used" : "free", (unsigned long long)o->data[i]);
	for (uint64_t i = 1; i < fs->sb.ninodes; i++)
		if (krfs_bm_test(&fs->ino_bm, i) != (fs->inodes[i] != NULL) && fs->inodes[i])
			report(c, "inode %llu: allocator says free", (unsigned long long)i);
	if (!krfs_bm_test(&fs->ino_bm, 0))
		report(c, "inode slot 0 is free in the allocator");
}

/* The number of set bits of bm in words [w0, w1) below n, and whether any bit at or past n
 * in them is set. */
static uint64_t bm_used(const struct krfs_bitmap *bm, uint64_t w0, uint64_t w1, bool *stray)
{
	uint64_t used = 0;
	for (uint64_t w = w0; w < w1; w++) {
		uint64_t bits = bm->bits[w];
		uint64_t past = w * 64 >= bm->n ? ~0ull : (bm->n - w * 64 < 64 ? ~0ull << (bm->n - w * 64) : 0);
		*stray |= (bits & past) != 0;
		used += (uint64_t)__builtin_popcountll(bits & ~past);
	}
	return used;
}

/* One allocator's audit: its shards tile [0, n) in order, each on whole words, each one's
 * free count is the clear bits of its range; used + free = size; no bit past the end. */
static void check_bitmap(struct checker *c, const struct krfs_bitmap *bm, uint64_t size, const char *what)
{
	bool stray = false, tiled = bm->n == size && bm->nshards >= 1;
	uint64_t used = 0, words = (bm->n + 63) / 64 + 1; /* krfs_bm_init allocates one spare */
	for (unsigned k = 0; tiled && k < bm->nshards; k++) {
		const struct krfs_shard *s = &bm->shards[k];
		uint64_t lo = k ? bm->shards[k - 1].hi : 0, hi = k + 1 < bm->nshards ? s->hi : bm->n;
		tiled = s->lo == lo && s->hi == hi && lo <= hi && lo % 64 == 0 && (hi % 64 == 0 || hi == bm->n);
		uint64_t u = tiled ? bm_used(bm, lo / 64, (hi + 63) / 64, &stray) : 0;
		if (tiled && u + s->nfree != hi - lo)
			report(c, "%s: shard %u [%llu, %llu): %llu used + %llu free", what, k, (unsigned long long)lo,
			       (unsigned long long)hi, (unsigned long long)u, (unsigned long long)s->nfree);
		used += u;
	}
	if (!tiled) {
		report(c, "%s: the allocator's %u shards do not tile its %llu indexes", what, bm->nshards,
		       (unsigned long long)size);
		return;
	}
	bm_used(bm, (bm->n + 63) / 64, words, &stray);
	if (used + krfs_bm_nfree(bm) != size || stray)
		report(c, "%s: %llu used + %llu free != %llu%s", what, (unsigned long long)used,
		       (unsigned long long)krfs_bm_nfree(bm), (unsigned long long)size, stray ? ", bits set past the end" : "");
}

/* The space audit. The areas follow each other in file order (superblock, journals, inode
 * table, log pages, CRCs A, data, parity, unused tail, CRCs B, the metadata replica, the
 * superblock replica), so that data + metadata = pool size, each term computed from the
 * superblock's offsets; and each allocator's used + free = its size, its free count being
 * the bitmap's own, shard by shard. */
static void check_space(struct kr_fs *fs, struct checker *c)
{
	const struct krfs_super *sb = &fs->sb;
	uint64_t csum = sb->data_off - sb->csum_a_off, data = sb->data_pages * P;
	uint64_t parity = fs->zone_rows ? fs->zone_rows * P /* a page per row */
					: (sb->data_pages * KRFS_STRIP + P - 1) / P * P;
	if (sb->itab_off != P + (uint64_t)sb->njournals * P ||
	    sb->meta_off != sb->itab_off + (uint64_t)sb->ninodes * KRFS_INODE_SIZE ||
	    sb->csum_a_off != sb->meta_off + sb->meta_pages * P || sb->meta_zone_size != sb->csum_a_off - P ||
	    csum < sb->data_pages * KRFS_CSUM_PER_PAGE || sb->parity_off != sb->data_off + data ||
	    sb->parity_off + parity > sb->csum_b_off || sb->csum_b_off + csum != sb->replica_off ||
	    sb->replica_off + sb->meta_zone_size + P != sb->pool_size)
		report(c, "the superblock's areas do not follow each other in file order");
	uint64_t unused = sb->csum_b_off - sb->parity_off - parity;
	uint64_t meta = 2 * P + 2 * sb->meta_zone_size + 2 * csum + parity + unused;
	if (data + meta != sb->pool_size)
		report(c, "space audit: %llu data + %llu metadata bytes != pool size %llu", (unsigned long long)data,
		       (unsigned long long)meta, (unsigned long long)sb->pool_size);
	check_bitmap(c, &fs->data_bm, sb->data_pages, "data pages");
	check_bitmap(c, &fs->meta_bm, sb->meta_pages, "log pages");
	check_bitmap(c, &fs->ino_bm, sb->ninodes, "inode slots");
}

int kr_fs_check(kr_fs *fs, FILE *out, struct kr_fs_check_report *rep)
{
	struct kr_fs_check_report local;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (!fs)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_fs_check: NULL");
	krfs_enter_any(fs);
	struct checker c = {.out = out};
	struct owners o = {
		.meta = kr_calloc(fs->sb.meta_pages, sizeof(uint64_t)),
		.data = kr_calloc(fs->sb.data_pages, sizeof(uint64_t)),
		.names = kr_calloc(fs->sb.ninodes, sizeof(uint32_t)),
		.subdirs = kr_calloc(fs->sb.ninodes, sizeof(uint32_t)),
		.named_in = kr_calloc(fs->sb.ninodes, sizeof(uint64_t)),
	};
	int rc = KR_OK;
	if (!o.meta || !o.data || !o.names || !o.subdirs || !o.named_in) {
		rc = kr_err_set(KR_E_NOMEM, "kr_fs_check: out of memory");
	} else {
		if (fs->check_mount) { /* what the mount (of a private copy) had to repair */
			for (unsigned i = 0; i < fs->nnotes; i++)
				report(&c, "repairable: %s", fs->notes[i]);
			if (fs->repairs > fs->nnotes)
				report(&c, "repairable: %llu more", (unsigned long long)(fs->repairs - fs->nnotes));
			c.problems = fs->repairs;
		}
		check_copies(fs, &c);
		for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
			if (fs->inodes[ino])
				check_inode(fs, &c, &o, fs->inodes[ino], rep);
			if (ino % 256 == 0)
				krfs_progress(fs, ino, fs->sb.ninodes);
		}
		krfs_progress(fs, fs->sb.ninodes, fs->sb.ninodes);
		krfs_snap_verify(fs, o.meta, o.data, report, &c);
		check_tree(fs, &c, &o, rep);
		check_allocators(fs, &c, &o);
		if (fs->parity && fs->zone_rows)
			krfs_zone_verify(fs, report, &c);
		check_space(fs, &c);
		rep->problems = c.problems;
		if (c.problems)
			rc = kr_err_set(KR_E_CORRUPT, "%s: %llu problems found", fs->path, (unsigned long long)c.problems);
	}
	free(o.meta);
	free(o.data);
	free(o.names);
	free(o.subdirs);
	free(o.named_in);
	krfs_leave(fs);
	return rc;
}
