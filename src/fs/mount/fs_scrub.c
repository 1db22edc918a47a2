/*
 * fs_scrub.c - the scrubber: one pass over every byte keratin-fs keeps on the media,
 * verifying and repairing (kr_fs_scrub), and the names used to report what is lost.
 *
 * Mount verifies all metadata once; after that the running file system reads only file
 * data (verified on every read), so damage to metadata or to pages nobody reads would wait
 * for the next mount. A scrub pass closes that gap: it applies the mount-time rules to both
 * copies of the superblock, journals, every inode slot and every committed log and snapshot
 * image (one bad copy is rewritten from the good one), reads every data page (snapshots'
 * included) through the verifying path
 * (strips rebuilt from parity, CRC copies rewritten) and recomputes a parity strip that
 * disagrees with verified data (zone parity: a row's parity page, once the row's pages in
 * use verify). What it cannot repair it reports with the file's path and
 * byte offset. It holds the file system's lock for the pass (a background, incremental
 * scrubber is future work).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

/* The name of ino in its directory dir, or NULL. */
static const char *name_in(const struct krfs_inode *dir, uint64_t ino)
{
	for (const struct krfs_dentry *d = dir->dir.first; d; d = d->next)
		if (d->ino == ino)
			return d->name;
	return NULL;
}

void krfs_path_of(struct kr_fs *fs, uint64_t ino, char *buf, size_t n)
{
	char tmp[4096] = "";
	uint64_t at = ino;
	for (unsigned depth = 0; at != KRFS_ROOT_INO && depth < 64; depth++) {
		const struct krfs_inode *ip = fs->inodes[at], *dir = NULL;
		const char *name = NULL;
		if (ip && S_ISDIR(ip->mode) && ip->parent < fs->sb.ninodes && (dir = fs->inodes[ip->parent]))
			name = name_in(dir, at);
		for (uint64_t d = 1; !name && d < fs->sb.ninodes; d++) /* a file: any directory naming it */
			if (fs->inodes[d] && S_ISDIR(fs->inodes[d]->mode) && (name = name_in(fs->inodes[d], at)))
				dir = fs->inodes[d];
		if (!name) {
			snprintf(buf, n, "inode %llu", (unsigned long long)ino);
			return;
		}
		char next[sizeof(tmp)];
		int w = snprintf(next, sizeof(next), "/%s%s", name, tmp);
		if (w < 0 || (size_t)w >= sizeof(next))
			break; /* deeper than a path can name: the tail found so far */
		memcpy(tmp, next, sizeof(tmp));
		at = dir->ino;
	}
	snprintf(buf, n, "%s", tmp[0] ? tmp : "/");
}

struct scrub {
	struct kr_fs *fs;
	FILE *out;
	struct kr_fs_scrub_report *rep;
	uint64_t work; /* for kr_fs_set_progress: inode slots, then the data pages in use */
};

static void lost(struct scrub *s, uint64_t ino, uint64_t off, const char *what)
{
	char path[512];
	krfs_path_of(s->fs, ino, path, sizeof(path));
	if (s->out)
		fprintf(s->out, "kr_fs_scrub: %s (inode %llu), offset %llu: %s\n", path, (unsigned long long)ino,
			(unsigned long long)off, what);
	s->rep->unrepairable++;
}

static int count_entry(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, void *ctx)
{
	(void)fs, (void)ip, (void)e;
	++*(uint64_t *)ctx;
	return 0;
}

/* Both copies of ino's slot and, if live, of its whole log. */
static void scrub_inode(struct scrub *s, uint64_t ino)
{
	struct kr_fs *fs = s->fs;
	struct krfs_inode *ip = fs->inodes[ino];
	if (!ip && krfs_bm_test(&fs->ino_bm, ino) && ino) {
		lost(s, ino, 0, "inode damaged beyond repair since mount");
		return;
	}
	struct krfs_pinode pi;
	s->rep->meta_items++;
	if (krfs_inode_read(fs, ino, &pi) != 0) {
		lost(s, ino, 0, kr_errmsg());
		return;
	}
	if ((pi.state == KRFS_INODE_LIVE) != (ip != NULL) ||
	    (ip && (krfs_word_value(pi.tail, ino) != ip->tail || pi.log_head != ip->pages[0]))) {
		lost(s, ino, 0, "inode slot disagrees with the mounted state");
		return;
	}
	if (!ip)
		return;
	struct krfs_inode *walk = krfs_inode_new(ino);
	if (!walk) {
		lost(s, ino, 0, "out of memory");
		return;
	}
	walk->mode = ip->mode;
	if (krfs_log_walk(fs, walk, &pi, count_entry, &s->rep->meta_items) != 0)
		lost(s, ino, 0, kr_errmsg());
	else if (walk->npages != ip->npages || memcmp(walk->pages, ip->pages, ip->npages * sizeof(uint64_t)) != 0)
		lost(s, ino, 0, "log chain disagrees with the mounted state");
	s->rep->meta_items += walk->npages;
	krfs_inode_free(walk);
}

static void scrub_data(struct scrub *s, struct krfs_inode *ip)
{
	uint64_t key = 0;
	uint32_t val;
	while (krfs_radix_next(&ip->map, key, &key, &val)) {
		if (++s->rep->data_pages % 256 == 0)
			krfs_progress(s->fs, s->fs->sb.ninodes + s->rep->data_pages, s->work);
		if (krfs_data_scrub(s->fs, val - 1, s->fs->buf) != 0 && !s->fs->failed)
			lost(s, ip->ino, key * P, kr_errmsg());
		key++;
	}
}

static void snap_lost(struct scrub *s, const struct krfs_snap *sn, uint64_t pg, const char *what)
{
	if (s->out && sn)
		fprintf(s->out, "kr_fs_scrub: snapshot '%s' (id %llu): %s\n", sn->name, (unsigned long long)sn->id, what);
	else if (s->out)
		fprintf(s->out, "kr_fs_scrub: data page %llu, held by snapshots only: %s\n", (unsigned long long)pg, what);
	s->rep->unrepairable++;
}

/* Both copies of every snapshot image, and the data pages only snapshots hold. */
static void scrub_snapshots(struct scrub *s)
{
	struct kr_fs *fs = s->fs;
	for (const struct krfs_snap *sn = fs->snaps; sn && !fs->failed; sn = sn->next) {
		uint64_t owner = KRFS_SNAP_OWNER | sn->id;
		struct krfs_pinode pi = {.ino = owner, .tail = krfs_word_make(sn->end, owner), .log_head = sn->head};
		struct krfs_inode *walk = krfs_inode_new(owner);
		if (!walk)
			snap_lost(s, sn, 0, "out of memory");
		else if (krfs_log_walk(fs, walk, &pi, count_entry, &s->rep->meta_items) != 0)
			snap_lost(s, sn, 0, kr_errmsg());
		else
			s->rep->meta_items += walk->npages;
		krfs_inode_free(walk);
	}
	for (uint64_t pg = 0; fs->snap_refs && pg < fs->sb.data_pages && !fs->failed; pg++)
		if (krfs_bm_test(&fs->held, pg)) {
			s->rep->data_pages++;
			if (krfs_data_scrub(fs, pg, fs->buf) != 0 && !fs->failed)
				snap_lost(s, NULL, pg, kr_errmsg());
		}
}

int kr_fs_scrub(kr_fs *fs, FILE *out, struct kr_fs_scrub_report *rep)
{
	struct kr_fs_scrub_report local;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (krfs_enter(fs) != 0)
		return fs ? KR_E_POOL_FAILED : kr_err_set(KR_E_MISUSE_ARG, "kr_fs_scrub: NULL");
	struct scrub s = {.fs = fs, .out = out, .rep = rep};
	uint64_t before = fs->repairs;
	/* Superblock: both copies equal to the mounted one. */
	const struct krfs_super *sa = (const void *)fs->pm.base, *sb = krfs_ptr(fs, fs->sb.pool_size - P);
	rep->meta_items += 2;
	if (memcmp(sa, &fs->sb, sizeof(*sa)) != 0 || memcmp(sb, &fs->sb, sizeof(*sb)) != 0) {
		krfs_note_repair(fs, "superblock", memcmp(sa, &fs->sb, sizeof(*sa)) ? 0 : fs->sb.pool_size - P);
		krfs_sb_write(fs);
	}
	krfs_zone_scrub_intent(fs); /* the zone intent's two copies (a failure leaves fs->failed set) */
	for (unsigned jn = 0; jn < fs->sb.njournals; jn++, rep->meta_items++)
		if (krfs_journal_recover(fs, jn) != 0) /* idle between operations: 1 would be a bug */
			lost(&s, 0, P + (uint64_t)jn * P, "journal active or unreadable between operations");
	/* The work: every inode slot, then every data page in use (the live files' pages are
	 * counted as verified; the pages only snapshots hold, at the end). */
	s.work = fs->sb.ninodes + (fs->sb.data_pages - krfs_bm_nfree(&fs->data_bm));
	for (uint64_t ino = 0; ino < fs->sb.ninodes && !fs->failed; ino++) {
		scrub_inode(&s, ino);
		if (ino % 256 == 0)
			krfs_progress(fs, ino, s.work);
	}
	for (uint64_t ino = 1; ino < fs->sb.ninodes && !fs->failed; ino++)
		if (fs->inodes[ino])
			scrub_data(&s, fs->inodes[ino]);
	scrub_snapshots(&s);
	krfs_progress(fs, s.work, s.work);
	if (!fs->failed)
		krfs_media_repair_listed(fs);
	/* Rows last: a listed free page was rebuilt from its row above, which a recomputed
	 * parity would have made impossible. */
	for (uint64_t r = 0; fs->parity && r < fs->zone_rows && !fs->failed; r++)
		krfs_zone_scrub_row(fs, r); /* a lost page of the row was reported by its file's pass */
	rep->repaired = fs->repairs - before;
	int rc = fs->failed ? KR_E_IO_SYNC
		 : rep->unrepairable ? kr_err_set(KR_E_CORRUPT, "%s: %llu damaged structures could not be repaired",
						  fs->path, (unsigned long long)rep->unrepairable)
				     : KR_OK;
	krfs_leave(fs);
	return rc;
}
