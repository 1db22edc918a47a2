/*
 * fs.h - keratin-fs internals shared by the files of src/fs/: the mounted file system, DRAM inodes
 * and their indexes, allocators, and the operation context that commits changes.
 *
 * Folders and files, bottom up. The folders are the floors: a file calls only files of its
 * own folder on a lower line below, or of a lower folder, never one above (where a lower
 * file must reach up, the upper file owns the thing and the lower one does without:
 * compaction writes its entries through builders that fs_xattr.c and fs_manifest.c
 * provide, rather than their files calling fs_op.c). This header and the format are below
 * them all:
 *   fs_layout.h   the on-media format; this header, the DRAM state every file shares
 * state/  the DRAM state and the metadata's two copies
 *   fs_base.c      the sticky error state and its fence, the superblock's tick-tock
 *                  write, the clock
 *   fs_enter.c     the way into every call: the locks and their rules, the error state
 *                  checked, inodes (the live tree's or a snapshot's) by number
 *   fs_alloc.c     DRAM bitmaps for inode slots, log pages and data pages, in shards
 *                  that threads allocate from at once
 *   fs_index.c     DRAM indexes: the radix tree of file pages, the per-directory name table
 *   fs_xattr.c     extended attributes: the DRAM list, the XATTR entry
 *   fs_zone_row.c  zone parity's row arithmetic: parity page, strip rebuild, deltas
 *   fs_meta.c      tick-tock metadata: twins, self-checking words, inode slots, repair notes
 *   fs_inode.c     DRAM inodes: made, freed, their log pages, their attributes
 * store/  what is on the media: data pages, logs, journals, and how entries read back
 *   fs_data.c      data pages: CoW writes with strip CRCs and parity, verified reads, repair
 *   fs_log.c       per-inode logs: page tails and links, entry checksums, the verified walk
 *   fs_journal.c   the lite undo journal: write, clear, roll back at mount
 *   fs_manifest.c  the snapshot manifest in DRAM, held data pages, inodes by number
 *   fs_zone.c      zone parity kept right: the intent, rows settled after a crash, row scrub
 *   fs_apply.c     krfs_inode_apply, the one function that interprets log entries
 *   fs_media.c     media errors: the fault resolver, emulated poison, the bad-block list
 * commit/  changing the file system
 *   fs_op.c        the operation context: allocation, commit (one tail store or a journal)
 *   fs_gc.c        log GC (fast: dead pages unlinked; compaction), and krfs_op_finish,
 *                  which ends every running operation
 *   fs_inplace.c   relaxed mode: overwrites in place under an in-place intent
 * ops/  the library's calls on files and names
 *   fs_file.c      attributes, extended attributes, read, write, truncate, readdir, statfs
 *   fs_ops.c       the namespace operations (lookup, create, link, unlink, rename, ...)
 *   fs_snap.c      snapshots: images written and loaded, create and delete, their check
 * mount/  what runs over the whole pool
 *   fs_recover.c   mount-time scan: journals, inodes, logs, allocators, orphans
 *   fs_check.c     the read-only checker of every invariant
 *   fs_scrub.c     the scrubber (kr_fs_scrub)
 *   fs_super.c     geometry, mkfs, mount, unmount
 */
#ifndef KRFS_FS_H
#define KRFS_FS_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "fault.h"
#include "pmem.h"
#include "fs_layout.h"
#include "keratin_fs.h"

#define P KRFS_PAGE

/* ---- allocators (fs_alloc.c) ----------------------------------------------------------- */
/* One shard of an allocator: indexes [lo, hi), whole words of the bitmap (invariants at the
 * top of fs_alloc.c). A cache line of its own, so threads allocating at once do not share one. */
struct krfs_shard {
	_Alignas(64) pthread_mutex_t lock;
	uint64_t lo, hi, nfree, hint;
};
struct krfs_bitmap {
	uint64_t *bits; /* bit set = in use */
	uint64_t n;
	uint64_t per; /* indexes per shard (a multiple of 64; the last shard may hold fewer) */
	unsigned nshards;
	struct krfs_shard *shards;
};
/* n indexes, all free, in nshards shards (capped to one per word of bits and to
 * KR_FS_ALLOC_SHARDS_MAX; at least 1). -ENOMEM. */
int krfs_bm_init(struct krfs_bitmap *bm, uint64_t n, unsigned nshards);
void krfs_bm_fini(struct krfs_bitmap *bm);
/* The free count: the sum of the shards' (exact when no shared holder runs). */
uint64_t krfs_bm_nfree(const struct krfs_bitmap *bm);
/* Whether a and b have the same shards (fs_alloc.c invariant 3): a shard's lock in one then
 * guards the same words in the other. */
bool krfs_bm_same_shards(const struct krfs_bitmap *a, const struct krfs_bitmap *b);
/* The shard owning index i; krfs_bm_lock also takes its lock, krfs_bm_unlock lets go. */
struct krfs_shard *krfs_bm_shard(const struct krfs_bitmap *bm, uint64_t i);
struct krfs_shard *krfs_bm_lock(const struct krfs_bitmap *bm, uint64_t i);
void krfs_bm_unlock(struct krfs_shard *s);
bool krfs_bm_test(const struct krfs_bitmap *bm, uint64_t i);
/* Set and clear take no lock: the caller holds the owning shard's lock or the file
 * system's exclusive lock. */
void krfs_bm_set(struct krfs_bitmap *bm, uint64_t i);
void krfs_bm_clear(struct krfs_bitmap *bm, uint64_t i);
/* Indexes [start, start + n) freed, each under its shard's lock. */
void krfs_bm_put(struct krfs_bitmap *bm, uint64_t start, uint64_t n);
/* One free index (marked used), or -1. Takes the shards' locks. */
int64_t krfs_bm_alloc(struct krfs_bitmap *bm);
/* A run of 1..max consecutive free indexes (marked used) from the calling thread's home
 * shard, else from the next shard with any free, in order: its length, 0 if every shard is
 * full. Takes the shards' locks. */
uint64_t krfs_bm_alloc_run(struct krfs_bitmap *bm, uint64_t max, uint64_t *start);

/* ---- indexes (fs_index.c) -------------------------------------------------------------- */
/* File page -> data page number + 1 (0 = hole). 64-way radix tree, grown upward. */
struct krfs_radix {
	void *root;
	unsigned height; /* levels; keys < 64^height */
};
uint32_t krfs_radix_get(const struct krfs_radix *r, uint64_t key);
/* Sets key to val (0 clears); *old (may be NULL) gets the previous value. -ENOMEM. */
int krfs_radix_set(struct krfs_radix *r, uint64_t key, uint32_t val, uint32_t *old);
/* The first key >= from with a nonzero value: 1 and *key, *val; 0 if none. */
int krfs_radix_next(const struct krfs_radix *r, uint64_t from, uint64_t *key, uint32_t *val);
void krfs_radix_free(struct krfs_radix *r);

struct krfs_dentry {
	struct krfs_dentry *hnext;      /* hash chain */
	struct krfs_dentry *prev, *next; /* listing order = cookie order */
	uint64_t ino;
	uint64_t cookie; /* transaction id of the entry that added the name */
	uint32_t hash;
	uint32_t src; /* log page number + 1 of the entry that added the name (fs_apply.c) */
	uint8_t dtype;
	uint8_t len;
	char name[];
};
struct krfs_dir {
	struct krfs_dentry **tab;
	uint32_t nbuckets, count;
	uint64_t bytes; /* log bytes the live names take as DENTRY entries (for compaction) */
	struct krfs_dentry *first, *last;
};
/* Size of the DENTRY entry for a name of len bytes. */
static inline uint32_t krfs_dentry_size(size_t len) { return (uint32_t)((48 + len + 7) & ~(size_t)7); }
struct krfs_dentry *krfs_dir_find(const struct krfs_dir *d, const char *name, size_t len);
/* Adds or replaces name (moved to the end of the listing with the new cookie). -ENOMEM. */
int krfs_dir_add(struct krfs_dir *d, const char *name, size_t len, uint64_t ino, uint8_t dtype,
		 uint64_t cookie);
/* 0, or -ENOENT if the name is not there. */
int krfs_dir_remove(struct krfs_dir *d, const char *name, size_t len);
void krfs_dir_free(struct krfs_dir *d);

/* One extended attribute of a DRAM inode: name_len bytes of name, then value_len bytes. */
struct krfs_xattr {
	struct krfs_xattr *next; /* in the order names were first set */
	uint16_t value_len;
	uint8_t name_len;
	char bytes[];
};

/* ---- DRAM inodes (fs_inode.c) ---------------------------------------------------------- */
/* The fields of a DRAM inode that log entries set whole: each is owned by the last applied
 * entry that set it, and that entry's log page counts it as live (fast GC, fs_apply.c). */
enum krfs_field { KRFS_F_MODE, KRFS_F_UID, KRFS_F_GID, KRFS_F_ATIME, KRFS_F_MTIME, KRFS_F_CTIME, KRFS_F_SIZE,
		  KRFS_F_NLINK, KRFS_F_PARENT, KRFS_NFIELDS };
struct krfs_inode {
	uint64_t ino, generation, create_time;
	uint32_t mode, uid, gid, nlink, rdev;
	uint64_t size, atime, mtime, ctime, parent;
	uint64_t tail;    /* committed end of the log (primary pool offset), 0 = no log yet */
	uint64_t max_trans; /* the largest transaction id krfs_log_walk met in the log */
	uint64_t *pages;  /* log pages in chain order (primary offsets) */
	uint32_t npages, cap;
	uint32_t unlinked; /* pages fast GC took out of the chain: a new page's seq is npages + unlinked */
	uint32_t open_count;
	uint64_t nblocks; /* data pages held */
	pthread_mutex_t lock; /* held by a data-path operation on this inode (fs_enter.c, rule 2) */
	struct krfs_radix map; /* regular files and symlinks */
	struct krfs_dir dir;   /* directories */
	struct krfs_xattr *xattrs;
	uint64_t xattr_bytes;  /* log bytes the live attributes take as XATTR entries */
	/* What the log's live entries are (fs_apply.c), as log page numbers + 1 (0 = no page
	 * counts it): the owner of each field, and (map's twin) of each file page. */
	uint32_t owner[KRFS_NFIELDS];
	struct krfs_radix src;
};

struct kr_fs;
struct krfs_inode *krfs_inode_new(uint64_t ino);
void krfs_inode_free(struct krfs_inode *ip);
int krfs_inode_push_page(struct krfs_inode *ip, uint64_t page);
void krfs_inode_attr(const struct kr_fs *fs, const struct krfs_inode *ip, struct kr_fs_attr *a);
uint8_t krfs_dtype(uint32_t mode);

/* A live snapshot (fs_snap.c): its manifest entry and its tree, read-only, in DRAM. */
struct krfs_snap {
	struct krfs_snap *next; /* oldest first */
	uint64_t id, time;
	uint8_t name_len;
	char name[KRFS_NAME_MAX + 1];
	uint64_t head, end; /* the image chain, as the manifest names it */
	uint32_t npages;
	bool loaded, damaged;
	struct krfs_inode *image;   /* the pseudo-inode owning the image chain (pages, tail) */
	struct krfs_inode **inodes; /* [ninodes]: the tree, inode numbers KR_FS_SNAP_INO(id, i) */
};

/* ---- the mounted file system ----------------------------------------------------------- */
struct kr_fs {
	struct kr_pm pm;
	char *path;
	pthread_rwlock_t lock;       /* the file system's lock: the rules are at the top of fs_enter.c */
	pthread_mutex_t repair_lock; /* repairs (krfs_meta_repair, krfs_word_repair) made by the
				      * mount scan's threads, one at a time */
	struct krfs_super sb; /* DRAM copy of the superblock */
	uint64_t delta;       /* replica_off - P: twin(x) = x + delta in the meta zone */
	_Atomic int failed;   /* sticky: a durability call failed */
	_Atomic uint64_t next_trans;
	uint64_t journal_seq;
	struct krfs_bitmap ino_bm, meta_bm, data_bm;
	struct krfs_inode **inodes; /* [ninodes], NULL for free slots */
	uint8_t *buf;               /* page-aligned scratch pages for data I/O (4 pages) */
	uint64_t repairs;           /* structures repaired from a replica or parity */
	uint64_t compactions;       /* logs rewritten by GC */
	uint64_t gc_fast_pages;     /* log pages fast GC unlinked and freed */
	uint64_t gc_copied_pages;   /* log pages compactions wrote */
	/* live[i]: how many fields, file pages and names of its inode entries in log page i own,
	 * plus one for each entry that must stay (fs_apply.c); 0 = the page's entries are all
	 * dead. Meaningful for the pages of live inodes' chains. */
	uint32_t *live;
	/* What the first KRFS_NOTES repairs were (for kr_fs_check and the tool). */
#define KRFS_NOTES 32
	char notes[KRFS_NOTES][112];
	unsigned nnotes;
	bool check_mount;           /* KR_FS_MOUNT_CHECK: a private copy, nothing reaches the file */
	unsigned scan_threads;      /* threads of the mount scan (fs_recover.c) */
	unsigned cpus;              /* online at mount */
	unsigned alloc_shards;      /* kr_fs_mount_opts.alloc_shards (0: the default) */
	int file_fd;                /* the pool file (pm.fd is a private copy for a check mount) */
	bool was_clean;             /* the superblock said CLEAN at mount */
	bool replica, csum, parity; /* the protections this pool keeps (superblock ro_compat) */
	bool relaxed;               /* overwrites in place (superblock incompat INPLACE) */
	uint64_t zone_rows;         /* zone parity (ro_compat ZONE_PARITY): rows; 0 = page parity */
	uint64_t zone_first, zone_len; /* the window of data pages the durable zone intent names */
	/* Zone parity under the shared lock (fs_zone.c invariant 3): zone_lock guards the window
	 * and zone_users, the operations holding it (their parity deltas in it may not be
	 * durable yet); zone_cond wakes one waiting to move the window. */
	pthread_mutex_t zone_lock;
	pthread_cond_t zone_cond;
	unsigned zone_users;
	/* Snapshots (fs_snap.c). snap_refs[pg]: how many snapshots hold data page pg (allocated
	 * with the first snapshot); held: pages only snapshots hold (the live tree let go). */
	struct krfs_snap *snaps;
	unsigned nsnaps;
	uint64_t snap_bytes; /* log bytes the manifest takes as SNAPSHOT_INFO entries */
	uint16_t *snap_refs;
	struct krfs_bitmap held;
	/* Media errors (fs_media.c): pages emulated poison made inaccessible (offset + 1, 0 =
	 * free slot), and whether the mapping is watched. */
#define KRFS_POISON 16
	_Atomic uint64_t poison[KRFS_POISON];
	bool watched;
	/* kr_fs_set_progress: told how far kr_fs_check and kr_fs_scrub are. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
};

/* Reports done of total to the kr_fs_set_progress callback, if there is one. */
static inline void krfs_progress(const struct kr_fs *fs, uint64_t done, uint64_t total)
{
	if (fs->progress)
		fs->progress(fs->progress_ctx, done, total);
}

/* Sets the thread's error message (keratin code `code`) and evaluates to neg_errno. */
#define KRFS_ERR(neg_errno, code, ...) (kr_err_set((code), __VA_ARGS__), (neg_errno))

/* Where the file system reads pool offset off: the mapping, or with KR_FS_MOUNT_WPROTECT its
 * read-only view, whose stores the persistence layer carries out through its writable alias
 * (so only kr_pm_* writes land; any other store faults). */
static inline void *krfs_ptr(const struct kr_fs *fs, uint64_t off) { return fs->pm.view + off; }

/* ---- the way in and out of every call (fs_enter.c) ------------------------------------ */
/* Takes the lock exclusive; -EINVAL for a NULL fs, -EIO (lock released) in the error state. */
int krfs_enter(struct kr_fs *fs);
/* Exclusive, whatever the error state: the check and the unmount. */
void krfs_enter_any(struct kr_fs *fs);
/* The same, shared (a data-path operation: it also takes its inode's mutex, krfs_enter_inode). */
int krfs_enter_shared(struct kr_fs *fs);
/* Releases the lock, exclusive or shared. */
void krfs_leave(struct kr_fs *fs);
/* Whether this thread holds the lock of fs exclusive (rather than shared; one of the two is
 * held whenever this is asked). */
bool krfs_exclusive(const struct kr_fs *fs);
/* What an operation running under the shared lock returns when it meets something only the
 * exclusive lock allows (a repair, an in-place write, a compaction): it has changed
 * nothing, and its caller runs it again under krfs_enter. Never returned to the API. */
#define KRFS_EXCL (-ERESTART)
/* Initialises and destroys the locks of fs. */
void krfs_locks_init(struct kr_fs *fs);
void krfs_locks_fini(struct kr_fs *fs);
struct krfs_snap *krfs_snap_by_id(const struct kr_fs *fs, uint64_t id);
struct krfs_snap *krfs_snap_by_name(const struct kr_fs *fs, const char *name, size_t len);
/* The inode ino of a live snapshot: 0, or -ENOENT. */
int krfs_snap_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip);
/* The live inode ino, or a snapshot's: 0, or -ENOENT (no such inode), -EIO (its slot or log
 * is damaged). */
int krfs_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip);
/* krfs_enter then krfs_get: 0 with the lock held, or an error with it released. */
int krfs_enter_get(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip);
/* The data path's entry: krfs_enter_shared, krfs_get, the inode's mutex. 0 with both held,
 * or an error with neither. */
int krfs_enter_inode(struct kr_fs *fs, uint64_t ino, struct krfs_inode **ip);
/* Releases the inode's mutex and the shared lock. */
void krfs_leave_inode(struct kr_fs *fs, struct krfs_inode *ip);

/* ---- the common ground (fs_base.c) ----------------------------------------------------- */
uint64_t krfs_now(void);
/* Records a durability failure (sticky error state); returns -EIO. */
int krfs_fail(struct kr_fs *fs, int kr_code);
/* kr_pm_fence, entering the error state if it fails. */
int krfs_fence(struct kr_fs *fs);
/* Writes the DRAM superblock to both copies, tick-tock (KR_OK or KR_E_IO_SYNC). */
int krfs_sb_write(struct kr_fs *fs);
/* The superblock's first write, at mkfs: both copies whole without the magic number (a
 * fence), then the primary's magic and the replica's, one 8-byte store and a fence each,
 * so that a crash leaves a file refused as "not a keratin-fs pool" or one whole copy. */
int krfs_sb_create(struct kr_fs *fs);
/* Sets an incompat feature bit in the superblock (both copies) before its first use. */
int krfs_mark_incompat(struct kr_fs *fs, uint32_t bit);

/* ---- tick-tock metadata (fs_meta.c) ---------------------------------------------------- */
static inline uint64_t krfs_twin(const struct kr_fs *fs, uint64_t off) { return off + fs->delta; }
/* Where the second copy of the primary byte at off is read: its twin, or the primary itself
 * when the pool keeps no replica (a copy compared with itself is equal: nothing to repair). */
static inline uint64_t krfs_copy_b(const struct kr_fs *fs, uint64_t off)
{
	return fs->replica ? krfs_twin(fs, off) : off;
}
uint64_t krfs_word_make(uint64_t value, uint64_t owner);
/* The value of a self-checking word, or 0 if its check fails. */
uint64_t krfs_word_value(uint64_t word, uint64_t owner);
uint64_t krfs_inode_off(const struct kr_fs *fs, uint64_t ino);
void krfs_pinode_seal(struct krfs_pinode *pi);
bool krfs_pinode_ok(const struct krfs_pinode *pi, uint64_t ino);
/* Reads slot ino through the tick-tock rules (verify both copies, repair the bad one from
 * the good one, roll an interrupted update forward from the primary). 0 and *out (tail
 * checked), or -EUCLEAN if both copies are bad. */
int krfs_inode_read(struct kr_fs *fs, uint64_t ino, struct krfs_pinode *out);
/* Writes both copies of a slot (no fence). */
void krfs_inode_write(struct kr_fs *fs, uint64_t ino, const struct krfs_pinode *pi);
/* Writes n bytes at primary offset off and the same bytes at its twin, flushed. Without the
 * metadata replica (KR_FS_NO_META_REPLICA), only the primary. */
void krfs_meta_write(struct kr_fs *fs, uint64_t off, const void *src, size_t n);
/* The same for one 8-byte word, with one atomic store per copy. */
void krfs_word_write(struct kr_fs *fs, uint64_t off, uint64_t word);
/* krfs_ptr of krfs_copy_b. */
const void *krfs_replica(const struct kr_fs *fs, uint64_t off);
/* Counts a repair of `what` at pool offset off and keeps a note of it. */
void krfs_note_repair(struct kr_fs *fs, const char *what, uint64_t off);
/* Rewrites the n bytes at pool offset dst (a bad copy of `what`) from src (the good one),
 * flushed and fenced, noted as a repair. */
void krfs_meta_repair(struct kr_fs *fs, const char *what, uint64_t dst, uint64_t src, size_t n);
/* The same for one self-checking word, with one atomic store. */
void krfs_word_repair(struct kr_fs *fs, const char *what, uint64_t off, uint64_t word);

/* ---- logs (fs_log.c) ------------------------------------------------------------------- */
uint32_t krfs_entry_csum(const struct krfs_entry_hdr *e);
/* 1 if off is the start of a page of the (primary) log area. */
bool krfs_log_page_ok(const struct kr_fs *fs, uint64_t off);
/* Writes the tail of a page joining ino's log at position seq (both copies, no next). */
void krfs_log_page_init(struct kr_fs *fs, uint64_t page, uint64_t ino, uint32_t seq);
/* Stores page's next word (both copies, flushed). */
void krfs_log_page_link(struct kr_fs *fs, uint64_t page, uint64_t next);
/* Walks the committed log of ip from head to tail (pi), verifying every entry and page
 * link in both copies and repairing one from the other, calling fn for each entry and
 * recording the chain's pages and the largest transaction id (max_trans) in ip. Touches
 * nothing else of fs but through the repair functions, so the mount scan walks different
 * inodes' logs in parallel. -EUCLEAN (message set) if the log is damaged beyond
 * repair. */
typedef int (*krfs_entry_fn)(struct kr_fs *fs, struct krfs_inode *ip,
			     const struct krfs_entry_hdr *e, void *ctx);
int krfs_log_walk(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_pinode *pi,
		  krfs_entry_fn fn, void *ctx);
/* The checker's report: prints one problem, returns 1. */
typedef int (*krfs_problem_fn)(void *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read-only check of ip's committed log (chain from DRAM): both copies equal, page tails
 * and links good, every entry checks. Returns the number of problems reported. */
int krfs_log_verify(struct kr_fs *fs, const struct krfs_inode *ip, krfs_problem_fn report, void *ctx);

/* ---- applying log entries (fs_apply.c) ------------------------------------------------- */
/* Called for every data page an applied entry stops referencing (overwritten, truncated). */
typedef void (*krfs_release_fn)(struct kr_fs *fs, uint32_t data_page);
/* Applies one verified log entry to the DRAM inode: the one function that interprets
 * entries, used by the mount scan and after each commit. page: the log page that holds the
 * entry, whose live count (fs->live) the entry's ownerships go to; 0 for an entry of no live
 * inode's log (a snapshot image). -EUCLEAN if the entry is inconsistent (a page outside the
 * data area, a dentry in a non-directory, ...), -ENOMEM. */
int krfs_inode_apply(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_entry_hdr *e, uint64_t page,
		     krfs_release_fn release);
/* After ip's log was rewritten: nothing owned by the old pages any more; every page of the
 * new chain counts as live for good (it is rewritten by the next compaction, not unlinked). */
void krfs_live_reset(struct kr_fs *fs, struct krfs_inode *ip);
/* Whether no field, name or file page of ip belongs to an entry in log page `page` (what a
 * live count of 0 promises; fs_apply.c invariant 4). */
bool krfs_live_owns_nothing(const struct kr_fs *fs, const struct krfs_inode *ip, uint64_t page);

/* ---- operations (fs_op.c) -------------------------------------------------------------- */
#define KRFS_OP_LOGS 4
#define KRFS_OP_IMAGES 2
struct krfs_op {
	struct kr_fs *fs;
	uint64_t trans;
	struct krfs_op_log {
		struct krfs_inode *ip;
		uint64_t old_tail, pos; /* pos: end of this op's appends */
		uint32_t old_npages;
		bool detached; /* a chain no inode slot names (a snapshot image): no tail store,
				* nothing applied, no GC; entries keep a preset trans */
	} logs[KRFS_OP_LOGS];
	unsigned nlogs;
	struct krfs_op_image {
		uint64_t ino;
		struct krfs_pinode img; /* new contents (tail filled in at commit for LIVE) */
	} images[KRFS_OP_IMAGES];
	unsigned nimages;
	/* Pages taken by this op (returned on abort): log pages, then data runs. */
	uint64_t *meta, *runs; /* runs: pairs (start, n) */
	unsigned nmeta, capmeta, nruns, capruns;
	int64_t new_ino;      /* slot taken by this op, -1 if none */
	struct krfs_inode *new_ip; /* its DRAM inode: registered at commit, freed at abort */
	/* Entries appended, applied to their DRAM inodes after commit: a sequence of
	 * (struct krfs_inode *, uint64_t log page, entry bytes rounded to 8). */
	uint8_t *applied;
	size_t napplied, capapplied;
	bool committed;
	bool zone_held; /* counted in zone_users (krfs_zone_intent) until krfs_op_end */
	bool compaction; /* rewrites a log: entries keep preset ids, nothing to apply, no GC */
	/* Stores made between the commit's two fences, once the entries (and anything else
	 * flushed before the commit, such as an in-place intent) are durable: relaxed in-place
	 * data. One-inode operations only (the journaled commit refuses it). */
	void (*in_commit)(struct krfs_op *op, void *ctx);
	void *in_commit_ctx;
};
void krfs_op_begin(struct krfs_op *op, struct kr_fs *fs);
/* Appends entry (type and size set by the caller; epoch, trans and csum filled in here, but
 * a compaction keeps a preset trans) to ip's log, in both copies, flushed, not fenced.
 * -ENOSPC (log area full), -ENOMEM. */
int krfs_op_append(struct krfs_op *op, struct krfs_inode *ip, struct krfs_entry_hdr *e);
/* Makes ip (a pseudo-inode with no slot) a detached log of op; before its first append. */
int krfs_op_detach(struct krfs_op *op, struct krfs_inode *ip);
/* A free inode slot for a new inode: its number, or -ENOSPC. */
int64_t krfs_op_take_ino(struct krfs_op *op);
/* Writes the slot image at commit (allocation: state LIVE, head and tail from the log;
 * freeing: state FREE). */
int krfs_op_set_image(struct krfs_op *op, const struct krfs_pinode *img);
/* Data pages for a write: a run of 1..max consecutive pages (number of the first in *start).
 * -ENOSPC if none is free. */
int krfs_op_take_data(struct krfs_op *op, uint64_t max, uint64_t *start, uint64_t *n);
/* Makes everything durable and atomic (one tail store for one inode, else the journal),
 * then applies the appended entries to their DRAM inodes (releasing data pages they stop
 * using) and registers a new inode. -EIO on a durability failure or if applying fails
 * (the file system then enters the error state: the pool is right, DRAM is not). */
int krfs_op_commit(struct krfs_op *op);
/* Ends the op: after an uncommitted op returns every page and slot it took and restores the
 * DRAM log state; after a committed one, only frees the op's bookkeeping. Either way it lets
 * go of its hold on the zone window (after a fence if uncommitted). */
/* (The operations of the running system end with krfs_op_finish, fs_gc.c, which also
 * compacts the logs they grew.) */
void krfs_op_end(struct krfs_op *op);
/* After commit: the data page goes back to the free pool (callback for krfs_inode_apply). */
void krfs_release_data(struct kr_fs *fs, uint32_t data_page);
/* After commit: the inode's log pages and data pages are free and its DRAM inode gone. */
void krfs_release_inode(struct kr_fs *fs, struct krfs_inode *ip);

/* ---- journal (fs_journal.c) ------------------------------------------------------------ */
struct krfs_jbuf {
	uint8_t bytes[KRFS_JOURNAL_CAP];
	uint32_t n;
};
int krfs_journal_add(struct krfs_jbuf *j, uint32_t kind, uint64_t target, const void *old,
		     uint32_t len);
/* Writes and activates journal jn (both copies, flushed; the caller fences). */
void krfs_journal_activate(struct kr_fs *fs, unsigned jn, const struct krfs_jbuf *j, uint64_t seq);
/* Marks journal jn idle (both copies, flushed; the caller fences). */
void krfs_journal_clear(struct kr_fs *fs, unsigned jn);
/* At mount: rolls back journal jn if it is active. 1 if it rolled back, 0 if idle,
 * -EUCLEAN if both copies are unreadable while one claims to be active. */
int krfs_journal_recover(struct kr_fs *fs, unsigned jn);

/* ---- data (fs_data.c) ------------------------------------------------------------------ */
static inline uint64_t krfs_data_off(const struct kr_fs *fs, uint64_t pg)
{
	return fs->sb.data_off + pg * P;
}
/* Writes one data page from src (4096 bytes, 64-byte aligned DRAM) with its strip CRCs
 * (both copies) and its parity strip; flushed, not fenced. */
void krfs_data_write(struct kr_fs *fs, uint64_t pg, const void *src);
/* Relaxed pools: bytes [lo, hi) of page pg (0 <= lo < hi <= 4096) become src's in place, the
 * touched strips' CRCs and the parity updated by delta; flushed, not fenced. */
void krfs_data_patch(struct kr_fs *fs, uint64_t pg, unsigned lo, unsigned hi, const void *src);
/* Whether every strip in mask (bit s = strip s) matches one of its CRC copies. */
bool krfs_data_strips_ok(const struct kr_fs *fs, uint64_t pg, unsigned mask);
/* Recomputes the CRCs of the strips in mask and the page's parity from its bytes as they
 * are (recovery of an in-place intent); flushed, not fenced. */
void krfs_data_reseal(struct kr_fs *fs, uint64_t pg, unsigned mask);
/* Reads one data page into dst (4096 bytes, 64-byte aligned), verifying every strip and
 * repairing what can be repaired. 0, or -EIO (message set) if a strip is lost. */
int krfs_data_read(struct kr_fs *fs, uint64_t pg, void *dst);
/* The pool offsets of data page pg's strip, its CRC copies and its parity (kr_fs_locate). */
void krfs_data_locate(const struct kr_fs *fs, uint64_t pg, unsigned strip, struct kr_fs_location *loc);
/* krfs_data_read into buf, then a parity strip that disagrees with the verified bytes is
 * recomputed (the scrubber's pass over one page). */
int krfs_data_scrub(struct kr_fs *fs, uint64_t pg, void *buf);
/* Verifies a page without repairing: number of strips that match neither CRC copy plus,
 * in *csum_mismatch, strips whose two CRC copies differ and *parity_bad whether parity
 * disagrees. For the checker. */
int krfs_data_verify(struct kr_fs *fs, uint64_t pg, unsigned *csum_mismatch, bool *parity_bad);

/* ---- zone parity rows (fs_zone_row.c) ----------------------------------------------- */
static inline uint64_t krfs_zone_row(const struct kr_fs *fs, uint64_t pg) { return pg % fs->zone_rows; }
/* Pool offset of the parity page of data page pg's row. */
uint64_t krfs_zone_parity(const struct kr_fs *fs, uint64_t pg);
/* Before data page pg (in the run the intent names) is overwritten with src: its row's
 * parity takes the delta; flushed, not fenced. */
void krfs_zone_update(struct kr_fs *fs, uint64_t pg, const void *src);
/* Relaxed pools: strip `strip` of pg changes from old to neu in place; parity by delta. */
void krfs_zone_patch(struct kr_fs *fs, uint64_t pg, unsigned strip, const void *old, const void *neu);
/* out (DRAM, 64-byte aligned) = strip `strip` of pg as the rest of its row and the parity
 * say it is. */
void krfs_zone_rebuild_strip(struct kr_fs *fs, uint64_t pg, unsigned strip, void *out);
/* Whether row r's parity page is the XOR of its data pages. */
bool krfs_zone_row_ok(struct kr_fs *fs, uint64_t r);
/* Recomputes row r's parity page from its data pages; flushed, not fenced. */
void krfs_zone_reseal(struct kr_fs *fs, uint64_t r);

/* ---- zone parity kept right (fs_zone.c) ---------------------------------------------- */
/* The longest run of data pages one intent names (krfs_op_take_data asks for no more). */
uint64_t krfs_zone_run_max(const struct kr_fs *fs);
/* Makes sure the durable intent's window holds the run [start, start + n): nothing to do if
 * it does, else (once no other operation holds the window) fence, a new window from start,
 * fence. The op then holds the window (op->zone_held) until krfs_op_end. 0 or -EIO. */
int krfs_zone_intent(struct krfs_op *op, uint64_t start, uint64_t n);
/* krfs_op_end's part: the op's hold on the window let go. */
void krfs_zone_release(struct krfs_op *op);
/* At mount (after the scan and the bad-block list): after a crash, the rows of the intent's
 * window get parity matching their bytes (every row if both copies of the intent are
 * damaged); a damaged copy of the intent is rewritten; fenced. 0 or -EIO. */
int krfs_zone_recover(struct kr_fs *fs);
/* The scrubber's part of the intent: copies that differ from the window rewritten. */
int krfs_zone_scrub_intent(struct kr_fs *fs);
/* The checker: the intent's copies and every row's parity; problems reported. */
int krfs_zone_verify(struct kr_fs *fs, krfs_problem_fn report, void *ctx);
/* A free data page the platform lost (bad-block list): its bytes rebuilt from its row, so
 * the row's parity holds again without trusting less. 0 or -EIO. */
int krfs_zone_rebuild_free(struct kr_fs *fs, uint64_t pg);
/* Scrub of row r: a parity page that disagrees is recomputed once the row's pages in use
 * verify (repaired first if they can be). 0, or -EIO (a page of the row is lost). */
int krfs_zone_scrub_row(struct kr_fs *fs, uint64_t r);

/* ---- relaxed mode (fs_inplace.c) ------------------------------------------------------ */
/* Whether a write of len bytes at off to ip is made in place: a relaxed pool, inside the
 * size, no page covered whole (so at most two pages), every page present and held by no
 * snapshot. */
bool krfs_inplace_fits(const struct kr_fs *fs, const struct krfs_inode *ip, uint64_t off, uint64_t len);
/* The in-place write (intent, bytes, mtime entry, commit, intent cleared). 0, -EIO, -ENOSPC. */
int krfs_write_inplace(struct kr_fs *fs, struct krfs_inode *ip, const void *buf, uint64_t off, uint64_t len);

/* ---- files (fs_file.c) ---------------------------------------------------------------- */
/* Bytes [off, off + len) of a file come from buf; the rest of each page written keeps the
 * file's old bytes (or zeros in a hole or past the end). */
struct krfs_src {
	const void *buf;
	uint64_t off, len;
};
/* Copy-on-write of file pages [pgoff, pgoff + npages) of ip in op: new data pages built
 * from src and the old contents, one FILE_WRITE entry per run of data pages, all saying the
 * file's size is new_size. -ENOSPC, -EIO (an old page needed for merging is lost). */
int krfs_write_pages(struct krfs_op *op, struct krfs_inode *ip, uint64_t pgoff, uint64_t npages,
		     const struct krfs_src *src, uint64_t new_size);

/* ---- log garbage collection (fs_gc.c) ------------------------------------------------- */
/* Fast GC, then a rewrite of ip's log from its DRAM state if the log still has four pages
 * or more and the live state would fit in at most half of them (and the log area has room
 * for the copy). 1 if it compacted, 0 if not needed or no room, -EIO on a durability
 * failure. Exclusive lock only. */
int krfs_gc_maybe(struct kr_fs *fs, struct krfs_inode *ip);
/* How an operation of the running system ends: krfs_op_end, then, after a commit, each log
 * the operation appended to is collected by krfs_gc_maybe. Under the shared lock nothing is
 * collected (fast GC frees pages and may set a superblock bit; compaction needs the lite
 * journal): true if a log has garbage to collect, for the caller to run krfs_gc_maybe under
 * the exclusive lock. */
bool krfs_op_finish(struct krfs_op *op);
/* Rewrites ip's log unconditionally. */
int krfs_log_compact(struct kr_fs *fs, struct krfs_inode *ip);
/* Appends to log, in op, the entries that rebuild ip's state from nothing: FILE_WRITE runs
 * or DENTRYs (with their cookies), XATTRs, SET_ATTR, LINK_CHANGE (not the root's snapshot
 * manifest: compaction adds that). */
int krfs_append_state(struct krfs_op *op, struct krfs_inode *log, const struct krfs_inode *ip);

/* ---- media errors (fs_media.c) -------------------------------------------------------- */
/* Watches the mapping: a media error inside it is resolved (the faulting read then sees
 * junk that the structures' checks catch) instead of killing the process. */
int krfs_media_attach(struct kr_fs *fs);
void krfs_media_detach(struct kr_fs *fs);
/* Scrubs the data pages whose bytes, CRCs or parity are in a page of the platform's
 * bad-block list, completes lost CRC pages from their other copy, and clears the list if
 * everything was repaired. KR_OK (damage left stays listed), or KR_E_IO_SYNC. */
int krfs_media_repair_listed(struct kr_fs *fs);

/* ---- mount scan (fs_recover.c) --------------------------------------------------------- */
/* Rolls back journals, loads every inode, rebuilds allocators, reclaims orphans. A keratin
 * code (KR_OK, KR_E_CORRUPT_META, KR_E_NOMEM, KR_E_IO_SYNC). */
int krfs_recover(struct kr_fs *fs);

/* ---- extended attributes (fs_xattr.c) ------------------------------------------------- */
/* Size of the XATTR entry for a name and value of these lengths. */
static inline uint32_t krfs_xattr_size(size_t name_len, size_t value_len)
{
	return (uint32_t)((sizeof(struct krfs_e_xattr) + name_len + value_len + 7) & ~(size_t)7);
}
/* Applies a verified XATTR entry to ip's list (krfs_inode_apply dispatches). -EUCLEAN, -ENOMEM. */
int krfs_xattr_apply(struct krfs_inode *ip, const struct krfs_e_xattr *x);
void krfs_xattr_free(struct krfs_inode *ip);
/* The largest XATTR entry ip's live attributes take (0 if none), for compaction's estimate. */
uint32_t krfs_xattr_entry_max(const struct krfs_inode *ip);
/* The slot of the pair named name in ip's list: the pair's link, or the list's end (*slot
 * NULL) if there is none. */
struct krfs_xattr **krfs_xattr_find(struct krfs_inode *ip, const char *name, size_t len);
union krfs_xattr_buf {
	struct krfs_e_xattr x;
	uint8_t bytes[KRFS_XATTR_ENTRY_MAX];
};
/* Builds in b the XATTR entry (xop, name, value, ctime) and returns its header, for
 * krfs_op_append. */
struct krfs_entry_hdr *krfs_xattr_entry(union krfs_xattr_buf *b, uint8_t xop, const char *name, size_t len,
				       const void *value, size_t vlen, uint64_t ctime);
/* The checker: names unique and well formed, sizes within limits; problems reported. */
int krfs_xattr_verify(const struct krfs_inode *ip, krfs_problem_fn report, void *ctx);

/* ---- the snapshot manifest (fs_manifest.c) ------------------------------------------- */
static inline bool krfs_is_snap_ino(uint64_t ino) { return KR_FS_INO_SNAPSHOT(ino) != 0; }
/* Counts (delta +1) or uncounts (-1) every data page of s's loaded tree in snap_refs; a page
 * no snapshot holds any more and no live file names is freed. */
void krfs_snap_hold(struct kr_fs *fs, struct krfs_snap *s, int delta);
/* Frees s's tree (not its image). */
void krfs_snap_drop_tree(struct kr_fs *fs, struct krfs_snap *s);
/* Applies a verified SNAPSHOT_INFO entry of the root's log (krfs_inode_apply dispatches): a
 * create adds the snapshot, whose tree is loaded once the manifest is complete
 * (krfs_snap_recover, or right after the create commits); a delete lets go of its image
 * pages and of the data pages only it held (after the commit, or at the mount scan).
 * -EUCLEAN, -ENOMEM. */
int krfs_snap_apply(struct kr_fs *fs, const struct krfs_e_snapshot *e);
union krfs_snap_buf {
	struct krfs_e_snapshot e;
	uint8_t bytes[KRFS_ENTRY_MAX];
};
/* Builds in b the SNAPSHOT_INFO entry (sop, id, time, name; image, which may be NULL, gives
 * head, end and npages) and returns its header, for krfs_op_append. */
struct krfs_entry_hdr *krfs_snap_entry(union krfs_snap_buf *b, uint8_t sop, uint64_t id, uint64_t time,
				      const struct krfs_snap *image, const char *name, size_t len);
void krfs_snap_free_all(struct kr_fs *fs);

/* ---- snapshots (fs_snap.c) ----------------------------------------------------------- */
/* At the end of the mount scan: loads the images, and marks the data pages that snapshots
 * hold and no live file does in use (and held). KR_OK or KR_E_NOMEM. */
int krfs_snap_recover(struct kr_fs *fs);
/* The checker's part: images verified, their pages owned once, data page holds counted.
 * meta_owner: log page -> owner + 1 (filled in here for image pages). */
void krfs_snap_verify(struct kr_fs *fs, uint64_t *meta_owner, const uint64_t *data_owner, krfs_problem_fn report,
		      void *ctx);

/* ---- the namespace (fs_ops.c) ------------------------------------------------------------ */
/* 0, or -EINVAL / -ENAMETOOLONG for a name that cannot be made. */
int krfs_name_check(const char *name, size_t *len);
/* A new inode in op: slot, log with its SET_ATTR and LINK_CHANGE, slot image. */
int krfs_new_inode(struct krfs_op *op, uint32_t mode, uint32_t rdev, uint32_t uid, uint32_t gid,
		   uint64_t parent, uint32_t links, uint64_t now, struct krfs_inode **out);
/* Frees an inode with no links and no opener: its slot becomes FREE under the journal. */
int krfs_free_orphan(struct kr_fs *fs, struct krfs_inode *ip);

/* ---- names in reports (fs_scrub.c) ------------------------------------------------------- */
/* A path of inode ino for reports ("/a/b", or "inode N" if no name leads to it). */
void krfs_path_of(struct kr_fs *fs, uint64_t ino, char *buf, size_t n);

#endif
