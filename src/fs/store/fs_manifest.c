/*
 * fs_manifest.c - the snapshot manifest in DRAM: the live snapshots that the SNAPSHOT_INFO
 * entries of the root's log name (each entry applied here) and the data pages their trees
 * hold. Finding a snapshot or an inode by number is fs_enter.c's.
 *
 * fs_snap.c has the design and the invariants; it loads a snapshot's tree once the manifest
 * is complete, and makes and deletes snapshots. This file is what the apply code needs of
 * them: a create entry adds a snapshot whose tree is not loaded yet, a delete lets go of
 * what the snapshot held.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"

static uint32_t entry_size(size_t name_len)
{
	return (uint32_t)((sizeof(struct krfs_e_snapshot) + name_len + 7) & ~(size_t)7);
}

/* ---- holding data pages ------------------------------------------------------------------------ */
/* Counts (delta +1) or uncounts (-1) every data page of the snapshot's tree; a page no
 * snapshot holds any more and no live file names is freed. */
void krfs_snap_hold(struct kr_fs *fs, struct krfs_snap *s, int delta)
{
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = s->inodes[ino];
		uint64_t key = 0;
		uint32_t val;
		while (ip && krfs_radix_next(&ip->map, key, &key, &val)) {
			uint64_t pg = val - 1;
			fs->snap_refs[pg] = (uint16_t)(fs->snap_refs[pg] + delta);
			if (fs->snap_refs[pg] == 0 && krfs_bm_test(&fs->held, pg)) {
				krfs_bm_clear(&fs->held, pg);
				krfs_bm_clear(&fs->data_bm, pg);
			}
			key++;
		}
	}
}

void krfs_snap_drop_tree(struct kr_fs *fs, struct krfs_snap *s)
{
	for (uint64_t ino = 0; s->inodes && ino < fs->sb.ninodes; ino++)
		krfs_inode_free(s->inodes[ino]);
	free(s->inodes);
	s->inodes = NULL;
}

/* ---- the manifest's entries ------------------------------------------------------------------------- */
static void snap_free(struct kr_fs *fs, struct krfs_snap *s)
{
	krfs_snap_drop_tree(fs, s);
	krfs_inode_free(s->image);
	free(s);
}

/* Unlinks s from the list and gives back its image pages and the data only it held. */
static void snap_release(struct kr_fs *fs, struct krfs_snap *s)
{
	struct krfs_snap **pp = &fs->snaps;
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	fs->nsnaps--;
	fs->snap_bytes -= entry_size(s->name_len);
	if (s->inodes)
		krfs_snap_hold(fs, s, -1);
	for (uint32_t i = 0; s->image && i < s->image->npages; i++)
		krfs_bm_clear(&fs->meta_bm, (s->image->pages[i] - fs->sb.meta_off) / P);
	snap_free(fs, s);
}

int krfs_snap_apply(struct kr_fs *fs, const struct krfs_e_snapshot *e)
{
	if (e->h.size != entry_size(e->name_len) || e->reserved || e->name_len == 0 ||
	    memchr(e->name, '/', e->name_len) || memchr(e->name, '\0', e->name_len) ||
	    (e->op != KRFS_S_CREATE && e->op != KRFS_S_DELETE))
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "root log: SNAPSHOT_INFO of transaction %llu malformed",
				(unsigned long long)e->h.trans);
	struct krfs_snap *old = krfs_snap_by_id(fs, e->id);
	if (e->op == KRFS_S_DELETE) {
		if (!old)
			return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "root log: deletes snapshot %llu, which is not there",
					(unsigned long long)e->id);
		snap_release(fs, old);
		return 0;
	}
	if (old || krfs_snap_by_name(fs, e->name, e->name_len) || e->id >= (1ull << (64 - KR_FS_SNAP_SHIFT)) - 1 ||
	    !krfs_log_page_ok(fs, e->head) || e->npages == 0)
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "root log: snapshot %llu repeated or malformed",
				(unsigned long long)e->id);
	struct krfs_snap *s = kr_calloc(1, sizeof(*s)), **pp = &fs->snaps;
	if (!s)
		return -ENOMEM;
	s->id = e->id;
	s->time = e->time;
	s->name_len = e->name_len;
	memcpy(s->name, e->name, e->name_len);
	s->head = e->head;
	s->end = e->end;
	s->npages = e->npages;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	fs->nsnaps++;
	fs->snap_bytes += entry_size(e->name_len);
	return 0;
}

struct krfs_entry_hdr *krfs_snap_entry(union krfs_snap_buf *b, uint8_t sop, uint64_t id, uint64_t time,
				      const struct krfs_snap *image, const char *name, size_t len)
{
	memset(b, 0, sizeof(*b));
	b->e.h.type = KRFS_E_SNAPSHOT_INFO;
	b->e.h.size = (uint16_t)entry_size(len);
	b->e.id = id;
	b->e.time = time;
	if (image) {
		b->e.head = image->head;
		b->e.end = image->end;
		b->e.npages = image->npages;
	}
	b->e.op = sop;
	b->e.name_len = (uint8_t)len;
	memcpy(b->e.name, name, len);
	return &b->e.h;
}

void krfs_snap_free_all(struct kr_fs *fs)
{
	for (struct krfs_snap *s = fs->snaps, *n; s; s = n) {
		n = s->next;
		snap_free(fs, s);
	}
	fs->snaps = NULL;
	free(fs->snap_refs);
	fs->snap_refs = NULL;
	krfs_bm_fini(&fs->held);
}
