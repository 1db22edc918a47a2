/*
 * fs_layout.h - every on-media structure of a keratin-fs pool, format version 1.
 *
 * This is the only file that says how bytes sit in a keratin-fs pool. docs/FORMAT-FS.md is
 * the human description of the same thing; the two change together (tests/test_fs_layout.c
 * pins the sizes, offsets and constants below).
 *
 * Rules kept throughout:
 *   - fixed-width little-endian fields (x86-64 only today);
 *   - reserved bytes are written as zero and checked to be zero when read;
 *   - on-media constants (KRFS_E_*, KRFS_J_*, KRFS_A_*, ...) are never reused as in-memory
 *     enums;
 *   - sizes and offsets are pinned with _Static_assert;
 *   - a word that is updated in place after its structure was written (an inode's log
 *     tail, a log page's next pointer) is self-checking: 48 bits of value and a 16-bit
 *     check of (value, owner), stored by one aligned 8-byte store. Such a word is never
 *     torn and a scribbled one is recognised, so it needs no structure checksum.
 *
 * Pool layout (P = 4096; every area page aligned; "meta zone" = journals + inode table +
 * log pages, written as a primary at low addresses and as a byte-identical replica at high
 * addresses, twin(x) = x + replica_off - P for every x in the primary meta zone):
 *
 *   offset          size                    content
 *   0               P                       superblock, primary (512 bytes used)
 *   P               njournals * P           lite journals, primary
 *   itab_off        itab_pages * P          inode table, primary (128-byte slots)
 *   meta_off        meta_pages * P          log pages, primary
 *   csum_a_off      csum_pages * P          data strip CRCs, copy A (32 bytes per data page)
 *   data_off        data_pages * P          file data pages
 *   parity_off      parity_pages * P        parity strips (512 bytes per data page), or in a
 *                                           zone-parity pool one parity page per row
 *   csum_b_off      csum_pages * P          data strip CRCs, copy B
 *   replica_off     meta zone size          journals, inode table, log pages: replicas
 *   pool_size - P   P                       superblock, replica
 *
 * Everything between the end of the primary meta zone and replica_off (checksums, data,
 * parity) is the dead zone: no metadata lives there, so a scribble shorter than it cannot
 * reach both copies of any metadata byte. mkfs refuses a geometry whose dead zone is
 * smaller than the requested one (default 1 MiB).
 */
#ifndef KRFS_LAYOUT_H
#define KRFS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define KRFS_PAGE 4096u
#define KRFS_STRIP 512u
#define KRFS_STRIPS (KRFS_PAGE / KRFS_STRIP)           /* 8 strips per data page */
#define KRFS_CSUM_PER_PAGE (KRFS_STRIPS * 4u)          /* 32 bytes of CRCs per data page */
#define KRFS_VERSION 1u
#define KRFS_MAGIC 0x0053462d4e54524bull                /* "KRTN-FS\0" little-endian */
#define KRFS_NAME_MAX 255u
#define KRFS_ROOT_INO 1u
#define KRFS_FIRST_TRANS 16u /* transaction ids (and readdir cookies) start here */
#define KRFS_MIN_POOL (4ull << 20)
#define KRFS_MAX_POOL (1ull << 46) /* 64 TiB: offsets fit the 48-bit self-checking words */
#define KRFS_DEAD_ZONE_DEFAULT (1ull << 20)
#define KRFS_MAX_JOURNALS 64u
#define KRFS_MAX_INODES (1u << 30)

/* Feature masks (ext4 style). A reader refuses a pool with an incompat or ro_compat bit it
 * does not know (this build has no read-only mode). Version 1 pools carry all four
 * ro_compat bits: the redundancy every writer must maintain. */
#define KRFS_RO_META_REPLICA 0x1u /* meta zone replica + CRCs on every metadata structure */
#define KRFS_RO_DATA_CSUM 0x2u    /* two CRC-32C copies per 512-byte data strip */
#define KRFS_RO_DATA_PARITY 0x4u  /* one RAID-4 parity strip per data page */
#define KRFS_RO_DEAD_ZONE 0x8u    /* the geometry keeps >= dead_zone bytes between copies */
/* Zone parity (with KRFS_RO_DATA_PARITY): the data area is zone_columns columns of rows
 * consecutive pages; data page pg sits in row pg % rows, and the parity page of a row is the
 * XOR of every data page of the row, in use or free (see "Zone parity" below). A reader that
 * does not know it could still read and verify data, but a writer would leave the rows'
 * parity stale: read-only compatible. */
#define KRFS_RO_ZONE_PARITY 0x10u
#define KRFS_RO_KNOWN 0x1fu
/* Set (once, before the first XATTR entry is written) in pools that hold extended
 * attributes: a reader that does not know the XATTR entry type must refuse the pool rather
 * than take such an entry for damage. */
#define KRFS_INCOMPAT_XATTR 0x1u
/* Set before the first SNAPSHOT_INFO entry: the root's log holds the snapshot manifest. */
#define KRFS_INCOMPAT_SNAPSHOTS 0x2u
/* Set at mkfs for relaxed pools (KR_FS_RELAXED): overwrites of unshared data pages are made
 * in place under an in-place intent (KRFS_J_DATA records in a lite journal), which a reader
 * must recompute checksums and parity from at mount rather than take for a bad record. */
#define KRFS_INCOMPAT_INPLACE 0x4u
/* Set before fast GC first unlinks a page from the middle of a log: page tails' seq then
 * increases along a chain with gaps, where a reader without the bit expects 0, 1, 2, ... */
#define KRFS_INCOMPAT_LOG_GAPS 0x8u
#define KRFS_INCOMPAT_KNOWN 0xfu
#define KRFS_COMPAT_KNOWN 0x0u

/* ---------------------------------------------------------------------------------------
 * Superblock (512 bytes at offset 0 and at pool_size - 4096; identical copies).
 *
 *   off size field
 *     0    8 magic          KRFS_MAGIC
 *     8    4 version        KRFS_VERSION
 *    12    4 sb_size        512
 *    16    4 compat, 20 incompat, 24 ro_compat
 *    28    4 page_size      4096
 *    32   16 uuid
 *    48    8 pool_size
 *    56    8 create_time    ns since the epoch
 *    64    4 ninodes        inode slots (slot 0 unused, 1 = root)
 *    68    4 njournals
 *    72    8 meta_pages, 80 data_pages, 88 dead_zone (requested minimum, bytes)
 *    96    8 itab_off, 104 meta_off, 112 csum_a_off, 120 data_off, 128 parity_off,
 *   136    8 csum_b_off, 144 replica_off, 152 meta_zone_size
 *   160    8 epoch          current snapshot epoch (0: no snapshots)
 *   168    8 mount_count
 *   176    4 state          KRFS_STATE_CLEAN or KRFS_STATE_MOUNTED
 *   180    4 zone_columns   KRFS_RO_ZONE_PARITY: columns of the data area (2..KRFS_ZONE_MAX_COLUMNS);
 *                           else zero
 *   184  324 reserved       zero
 *   508    4 csum           CRC-32C of bytes 0..507
 * ------------------------------------------------------------------------------------- */
#define KRFS_STATE_CLEAN 0x4e41454cu   /* "LEAN": unmounted cleanly */
#define KRFS_STATE_MOUNTED 0x544e554du /* "MUNT": mounted, or crashed while mounted */

struct krfs_super {
	uint64_t magic;
	uint32_t version;
	uint32_t sb_size;
	uint32_t compat;
	uint32_t incompat;
	uint32_t ro_compat;
	uint32_t page_size;
	uint8_t uuid[16];
	uint64_t pool_size;
	uint64_t create_time;
	uint32_t ninodes;
	uint32_t njournals;
	uint64_t meta_pages;
	uint64_t data_pages;
	uint64_t dead_zone;
	uint64_t itab_off;
	uint64_t meta_off;
	uint64_t csum_a_off;
	uint64_t data_off;
	uint64_t parity_off;
	uint64_t csum_b_off;
	uint64_t replica_off;
	uint64_t meta_zone_size;
	uint64_t epoch;
	uint64_t mount_count;
	uint32_t state;
	uint32_t zone_columns;
	uint8_t reserved[324];
	uint32_t csum;
};
_Static_assert(sizeof(struct krfs_super) == 512, "superblock is 512 bytes");
_Static_assert(offsetof(struct krfs_super, uuid) == 32, "sb uuid");
_Static_assert(offsetof(struct krfs_super, ninodes) == 64, "sb ninodes");
_Static_assert(offsetof(struct krfs_super, itab_off) == 96, "sb itab_off");
_Static_assert(offsetof(struct krfs_super, meta_zone_size) == 152, "sb meta_zone_size");
_Static_assert(offsetof(struct krfs_super, state) == 176, "sb state");
_Static_assert(offsetof(struct krfs_super, zone_columns) == 180, "sb zone_columns");
_Static_assert(offsetof(struct krfs_super, csum) == 508, "sb csum");

/* ---------------------------------------------------------------------------------------
 * Zone parity (KRFS_RO_ZONE_PARITY). With C = zone_columns and D = data_pages, the data area
 * is C columns of R = ceil(D / C) consecutive pages: data page pg is in row pg % R, column
 * pg / R (the last column may be short). The parity area holds R pages; parity page r is the
 * XOR of data pages r, r + R, r + 2R, ... below D, whether in use or free. Pages next to each
 * other are in different rows, so a scribble shorter than R pages hits a row at most once,
 * and each 512-byte strip s of a page is rebuilt from strip s of the rest of its row.
 *
 * Data pages are still written copy-on-write, into free pages; the write changes its row's
 * parity by delta (parity ^= old page ^ new page). The zone intent says which rows may be
 * changing: a self-checking word (owner KRFS_ZONE_INTENT_OWNER) whose value is
 * (first data page << KRFS_ZONE_INTENT_NBITS) | n for a window of n data pages (1 <= n <=
 * KRFS_ZONE_INTENT_MAX, n <= R) that holds the runs copy-on-write is filling, at offset
 * KRFS_ZONE_INTENT_OFF of both superblock pages. It is durable before the first parity byte
 * in the window changes; mount recomputes the parity of the window's rows (every row if
 * neither copy checks). The zero word (never valid) means none was written yet.
 * ------------------------------------------------------------------------------------- */
#define KRFS_ZONE_INTENT_OFF 512u
#define KRFS_ZONE_INTENT_OWNER 0x5a4f4e45ull /* "ZONE" */
#define KRFS_ZONE_INTENT_NBITS 14
#define KRFS_ZONE_INTENT_MAX ((1u << KRFS_ZONE_INTENT_NBITS) - 1) /* pages in one run */
#define KRFS_ZONE_WINDOW 64u /* pages a new intent names at least (when the pool has them) */
#define KRFS_ZONE_MAX_COLUMNS 1024u
#define KRFS_ZONE_COLUMNS_DEFAULT 64u
_Static_assert(KRFS_ZONE_INTENT_OFF >= 512 && KRFS_ZONE_INTENT_OFF % 8 == 0, "the intent follows the superblock");
_Static_assert((KRFS_MAX_POOL / KRFS_PAGE) << KRFS_ZONE_INTENT_NBITS <= (1ull << 48),
	       "a data page number and a run length fit a self-checking word");

/* ---------------------------------------------------------------------------------------
 * Self-checking word: bits 0..47 value, bits 48..63 check. check = low 16 bits of
 * CRC-32C({value, owner} as two little-endian u64) XOR 0x5a5a, so the all-zero word is
 * never valid (value 0 is never a legal tail or link target anyway).
 * ------------------------------------------------------------------------------------- */
#define KRFS_WORD_VALUE_BITS 48
#define KRFS_WORD_VALUE_MASK ((1ull << KRFS_WORD_VALUE_BITS) - 1)
#define KRFS_WORD_CHECK_XOR 0x5a5au

/* ---------------------------------------------------------------------------------------
 * Inode slot (128 bytes; slot i of the inode table is inode number i; the replica slot is
 * the twin). The log tail is updated in place by the commit of every operation; the rest
 * changes only when the inode is allocated or freed, and is covered by csum.
 *
 *   off size field
 *     0    8 tail           self-checking word (owner = ino): pool offset (primary log)
 *                           just past the last committed entry; the commit point
 *     8    4 state          KRFS_INODE_LIVE or KRFS_INODE_FREE
 *    12    4 ftype          file type bits (S_IFMT part of st_mode), fixed at creation
 *    16    8 ino            must equal the slot number
 *    24    8 generation     bumped each time the slot is reused
 *    32    8 log_head       pool offset of the first log page (primary), 0 if FREE
 *    40    8 create_time    ns
 *    48    4 rdev           device number for character/block special files
 *    52    4 create_epoch   snapshot epoch at creation
 *    56   68 reserved       zero
 *   124    4 csum           CRC-32C of bytes 8..123
 * ------------------------------------------------------------------------------------- */
#define KRFS_INODE_SIZE 128u
#define KRFS_INODE_LIVE 0x4556494cu /* "LIVE" */
#define KRFS_INODE_FREE 0x45455246u /* "FREE" */

struct krfs_pinode {
	uint64_t tail;
	uint32_t state;
	uint32_t ftype;
	uint64_t ino;
	uint64_t generation;
	uint64_t log_head;
	uint64_t create_time;
	uint32_t rdev;
	uint32_t create_epoch;
	uint8_t reserved[68];
	uint32_t csum;
};
_Static_assert(sizeof(struct krfs_pinode) == KRFS_INODE_SIZE, "inode slot is 128 bytes");
_Static_assert(offsetof(struct krfs_pinode, state) == 8, "inode state");
_Static_assert(offsetof(struct krfs_pinode, log_head) == 32, "inode log_head");
_Static_assert(offsetof(struct krfs_pinode, rdev) == 48, "inode rdev");
_Static_assert(offsetof(struct krfs_pinode, csum) == 124, "inode csum");

/* ---------------------------------------------------------------------------------------
 * Log page (4096 bytes in the log area). Entries are packed from offset 0, 8-byte aligned;
 * the 32-byte page tail sits at KRFS_LOG_TAIL_OFF. An entry never crosses a page: when the
 * next one does not fit, an 8-byte NEXT_PAGE marker (type byte KRFS_E_NEXT_PAGE, seven zero
 * bytes) is written where it would have started, unless the page is exactly full.
 *
 * Page tail:
 *   off size field
 *     0    8 next           self-checking word (owner = this page's offset): pool offset
 *                           of the next log page; 0 (not a valid word) when none. Beyond
 *                           the inode's tail page it may hold a stale link: ignored.
 *     8    8 self           pool offset of this page in the primary area
 *    16    8 ino            owning inode
 *    24    4 seq            the head page's is 0; each later page's is larger than the
 *                           previous page's: one more, or more after fast GC unlinked pages
 *                           between them (KRFS_INCOMPAT_LOG_GAPS)
 *    28    4 csum           CRC-32C of tail bytes 8..27
 * ------------------------------------------------------------------------------------- */
#define KRFS_LOG_TAIL_OFF 4064u
#define KRFS_LOG_USABLE KRFS_LOG_TAIL_OFF

struct krfs_page_tail {
	uint64_t next;
	uint64_t self;
	uint64_t ino;
	uint32_t seq;
	uint32_t csum;
};
_Static_assert(sizeof(struct krfs_page_tail) == 32, "page tail is 32 bytes");
_Static_assert(KRFS_LOG_TAIL_OFF + sizeof(struct krfs_page_tail) == KRFS_PAGE, "tail at end");

/* ---------------------------------------------------------------------------------------
 * Log entries. Every entry starts with this 24-byte header; size is the whole entry in
 * bytes (a multiple of 8); csum is CRC-32C of header bytes 0..3 followed by bytes
 * 8..size-1 (the entry without its csum field).
 *
 *   off size field
 *     0    1 type           KRFS_E_*
 *     1    1 flags          zero
 *     2    2 size
 *     4    4 csum
 *     8    4 epoch          snapshot epoch the entry was written in
 *    12    4 reserved       zero
 *    16    8 trans          file-system-wide transaction id (increasing)
 * ------------------------------------------------------------------------------------- */
#define KRFS_E_NEXT_PAGE 0x01u
#define KRFS_E_FILE_WRITE 0x02u
#define KRFS_E_DENTRY 0x03u
#define KRFS_E_SET_ATTR 0x04u
#define KRFS_E_LINK_CHANGE 0x05u
#define KRFS_E_MMAP_WRITE 0x06u    /* reserved: not written by version 1 */
#define KRFS_E_SNAPSHOT_INFO 0x07u /* the root's log only; needs KRFS_INCOMPAT_SNAPSHOTS */
#define KRFS_E_XATTR 0x08u         /* needs KRFS_INCOMPAT_XATTR */
#define KRFS_E_SNAP_INODE 0x09u    /* snapshot images only */
#define KRFS_MARKER_SIZE 8u

struct krfs_entry_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t size;
	uint32_t csum;
	uint32_t epoch;
	uint32_t reserved;
	uint64_t trans;
};
_Static_assert(sizeof(struct krfs_entry_hdr) == 24, "entry header is 24 bytes");

/* FILE_WRITE (64 bytes): npages file pages from pgoff now live in the npages consecutive
 * data pages starting at pool offset block (block 0: the pages become holes, as a hole
 * punch makes them); the file's size after the write is size. */
struct krfs_e_write {
	struct krfs_entry_hdr h;
	uint64_t pgoff;
	uint64_t block;
	uint32_t npages;
	uint32_t reserved;
	uint64_t size;
	uint64_t mtime;
};
_Static_assert(sizeof(struct krfs_e_write) == 64, "FILE_WRITE is 64 bytes");

/* DENTRY (48 bytes + name, rounded up to 8): add (name -> ino, replacing any entry of that
 * name) or remove a name in this directory. links is the directory's link count after the
 * change, mtime its new mtime and ctime. */
#define KRFS_D_ADD 1u
#define KRFS_D_REMOVE 2u
struct krfs_e_dentry {
	struct krfs_entry_hdr h;
	uint64_t ino;
	uint64_t mtime;
	uint32_t links;
	uint8_t name_len;
	uint8_t ftype; /* DT_* value of the child (DT_REG = 8, DT_DIR = 4, ...) */
	uint8_t op;
	uint8_t reserved;
	char name[];
};
_Static_assert(sizeof(struct krfs_e_dentry) == 48, "DENTRY header is 48 bytes");

/* SET_ATTR (72 bytes): the attributes named by mask take the given values; ctime always.
 * A size change truncates or extends (pages at or past the new end are dropped). */
#define KRFS_A_MODE 0x01u
#define KRFS_A_UID 0x02u
#define KRFS_A_GID 0x04u
#define KRFS_A_SIZE 0x08u
#define KRFS_A_ATIME 0x10u
#define KRFS_A_MTIME 0x20u
#define KRFS_A_ALL 0x3fu
struct krfs_e_attr {
	struct krfs_entry_hdr h;
	uint32_t mask;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	uint64_t atime;
	uint64_t mtime;
	uint64_t ctime;
};
_Static_assert(sizeof(struct krfs_e_attr) == 72, "SET_ATTR is 72 bytes");

/* LINK_CHANGE (48 bytes): the inode's link count, ctime and parent directory (directories:
 * the target of ".."; others: the directory it was last linked into). */
struct krfs_e_link {
	struct krfs_entry_hdr h;
	uint32_t links;
	uint32_t reserved;
	uint64_t ctime;
	uint64_t parent;
};
_Static_assert(sizeof(struct krfs_e_link) == 48, "LINK_CHANGE is 48 bytes");

/* XATTR (40 bytes + name + value, rounded up to 8): set (add or replace) or remove the
 * extended attribute name of this inode. The name (1..255 bytes, no NUL) is followed by the
 * value (value_len bytes, 0..KRFS_XATTR_VALUE_MAX; zero for a remove). ctime is the inode's
 * new ctime. */
#define KRFS_X_SET 1u
#define KRFS_X_REMOVE 2u
#define KRFS_XATTR_VALUE_MAX 2048u
struct krfs_e_xattr {
	struct krfs_entry_hdr h;
	uint16_t value_len;
	uint8_t name_len;
	uint8_t op;
	uint32_t reserved;
	uint64_t ctime;
	char data[];
};
_Static_assert(sizeof(struct krfs_e_xattr) == 40, "XATTR header is 40 bytes");
_Static_assert(offsetof(struct krfs_e_xattr, ctime) == 32, "XATTR ctime");

/* SNAPSHOT_INFO (64 bytes + name, rounded up to 8), in the root directory's log only: the
 * snapshot manifest. op KRFS_S_CREATE: snapshot id (the epoch it closed), made at time,
 * whose image is the chain of log pages from head, committed up to end (a pool offset, as
 * an inode's tail), npages pages long; op KRFS_S_DELETE: snapshot id is gone (head, end,
 * npages, time zero; the name repeated). A snapshot image is a log of its own: page tails
 * owned by KRFS_SNAP_OWNER | id, and for every inode of the tree a SNAP_INODE entry
 * followed by the entries a log compaction would write for it (fs_gc.c). */
#define KRFS_S_CREATE 1u
#define KRFS_S_DELETE 2u
#define KRFS_SNAP_OWNER (1ull << 62)
struct krfs_e_snapshot {
	struct krfs_entry_hdr h;
	uint64_t id;
	uint64_t time;
	uint64_t head;
	uint64_t end;
	uint32_t npages;
	uint8_t op;
	uint8_t name_len;
	uint16_t reserved;
	char name[];
};
_Static_assert(sizeof(struct krfs_e_snapshot) == 64, "SNAPSHOT_INFO header is 64 bytes");

/* SNAP_INODE (56 bytes), in snapshot images only: the entries that follow, up to the next
 * SNAP_INODE, are inode ino's; the rest is what its slot holds. */
struct krfs_e_snap_inode {
	struct krfs_entry_hdr h;
	uint64_t ino;
	uint64_t generation;
	uint64_t create_time;
	uint32_t ftype;
	uint32_t rdev;
};
_Static_assert(sizeof(struct krfs_e_snap_inode) == 56, "SNAP_INODE is 56 bytes");

/* The largest entry of the fixed and name-carrying types (SNAPSHOT_INFO with a 255-byte
 * name), and the largest entry of any type (XATTR with the longest name and value); both
 * fit a log page with room to spare. */
#define KRFS_ENTRY_MAX (sizeof(struct krfs_e_snapshot) + 256u) /* 320 */
#define KRFS_XATTR_ENTRY_MAX ((sizeof(struct krfs_e_xattr) + 255u + KRFS_XATTR_VALUE_MAX + 7u) & ~7u) /* 2344 */
_Static_assert(KRFS_XATTR_ENTRY_MAX == 2344 && KRFS_XATTR_ENTRY_MAX < KRFS_LOG_USABLE,
	       "an XATTR entry fits a log page");

/* ---------------------------------------------------------------------------------------
 * Lite journal (one page per journal, primary and replica): an undo log for operations that
 * change several inodes. While state == seq (nonzero) and csum matches, the journal is
 * active: recovery writes every record's old bytes back to both copies of its target.
 *
 *   header: off 0 state (u64; 0 = idle), 8 seq (u64), 16 nbytes (u32, bytes of records),
 *           20 csum (u32, CRC-32C of bytes 8..19 then the records), 24 reserved (8)
 *   record: off 0 kind (u32), 4 len (u32: 8 for KRFS_J_WORD, 128 for KRFS_J_INODE),
 *           8 target (u64, pool offset in the primary meta zone), 16 old bytes (len)
 *
 * In a relaxed pool (KRFS_INCOMPAT_INPLACE) a journal may instead hold an in-place intent:
 * KRFS_J_DATA records, len 8, target the pool offset of a data page (page aligned, inside
 * the data area), the 8 bytes a little-endian u64 whose bits 0..7 name the strips being
 * overwritten in place (the rest zero). Recovery does not write bytes back for them: it
 * recomputes both CRC copies of the named strips and the page's parity from the data bytes
 * as they landed. This version writes at most two such records (an in-place write covers
 * no page whole, so it touches at most two pages); a reader accepts any number that fits.
 * ------------------------------------------------------------------------------------- */
#define KRFS_J_WORD 1u  /* an 8-byte word (a log tail) */
#define KRFS_J_INODE 2u /* a whole inode slot */
#define KRFS_J_DATA 3u  /* an in-place data page (relaxed pools): strips to reseal */
#define KRFS_J_DATA_LEN 8u
struct krfs_journal_hdr {
	uint64_t state;
	uint64_t seq;
	uint32_t nbytes;
	uint32_t csum;
	uint64_t reserved;
};
_Static_assert(sizeof(struct krfs_journal_hdr) == 32, "journal header is 32 bytes");
struct krfs_journal_rec {
	uint32_t kind;
	uint32_t len;
	uint64_t target;
	uint8_t old[];
};
_Static_assert(sizeof(struct krfs_journal_rec) == 16, "journal record header is 16 bytes");
#define KRFS_JOURNAL_CAP (KRFS_PAGE - sizeof(struct krfs_journal_hdr))
_Static_assert(sizeof(struct krfs_journal_rec) + KRFS_J_DATA_LEN == 24, "an in-place intent record is 24 bytes");
_Static_assert(KRFS_INCOMPAT_KNOWN == (KRFS_INCOMPAT_XATTR | KRFS_INCOMPAT_SNAPSHOTS | KRFS_INCOMPAT_INPLACE |
					KRFS_INCOMPAT_LOG_GAPS),
	       "incompat bits");

#endif
