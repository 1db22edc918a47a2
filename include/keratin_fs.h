/*
 * keratin_fs.h - keratin-fs: a fault-tolerant file system in one pool file, as a library.
 *
 * The design is NOVA-Fortis's: every inode has its own log of 4 KiB pages holding only
 * metadata entries; an operation on one inode appends entries and commits with one 8-byte
 * store of the log tail; operations on several inodes (create, link, unlink, rename, ...)
 * commit under a small undo journal; file data is copy-on-write, in 4 KiB pages of eight
 * 512-byte strips, each strip with two CRC-32C copies in separate areas and one RAID-4
 * parity strip per page; all metadata (superblock, journals, inodes, log pages) has a
 * checksummed primary at low addresses and a replica at high addresses with a dead zone of
 * at least 1 MiB between them. Reads verify and repair from the good copy or from parity.
 * DRAM indexes (a radix tree of file pages, a hash table of names per directory) are built
 * at mount by scanning every inode's log. docs/FORMAT-FS.md describes the bytes.
 *
 * Operations name inodes by number, as a FUSE low-level file system does (the root is
 * KR_FS_ROOT_INO = 1); a FUSE front end only translates.
 *
 * Durability: every operation is atomic and durable when it returns (there is no page
 * cache; kr_fs_fsync exists for symmetry and does nothing). After a crash, mount finds the
 * state after some prefix of the operations, including every one that returned.
 *
 * Threads: a kr_fs may be used from several threads. Reads and writes of different files run
 * in parallel (a reader-writer lock taken shared, and a lock per inode); operations that
 * change the namespace, snapshots or the superblock run alone (the lock taken exclusive).
 *
 * Errors. Two conventions, by what can fail:
 *   - pool lifecycle (kr_fs_mkfs, kr_fs_mount, kr_fs_unmount, kr_fs_check) returns keratin
 *     codes (enum kr_err in keratin.h: KR_E_IO_*, KR_E_FORMAT_*, KR_E_CORRUPT_*, ...),
 *     because their failures are about the pool file;
 *   - file-system operations return 0 (or a byte count) on success and a negative errno
 *     value on failure (-ENOENT, -EEXIST, -ENOTEMPTY, -ENOSPC, ...), as POSIX and FUSE
 *     expect, so a FUSE layer passes them through unchanged.
 *   Either way kr_errmsg() gives the detail for the calling thread (for -EIO: which
 *   structure failed its checks, at which pool offset). Damage that redundancy cannot repair
 *   gives -EIO for the operations that need the damaged bytes; a failed durability call
 *   (msync in page-cache mode) puts the file system in an error state where every later
 *   operation fails with -EIO until it is unmounted and mounted again.
 *
 * Permissions are not checked (a FUSE front end mounts with default_permissions); uid and
 * gid are stored as given.
 */
#ifndef KERATIN_FS_H
#define KERATIN_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "keratin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_fs kr_fs;

#define KR_FS_ROOT_INO 1u
#define KR_FS_NAME_MAX 255u
#define KR_FS_SYMLINK_MAX 4095u          /* longest symlink target */
#define KR_FS_MAX_FILE_SIZE (1ull << 46) /* 64 TiB: larger sizes/offsets are -EFBIG */

/* ---------------------------------------------------------------------------------------
 * Pool lifecycle (enum kr_err codes)
 * ------------------------------------------------------------------------------------- */
struct kr_fs_mkfs_opts {
	uint32_t struct_size; /* sizeof(struct kr_fs_mkfs_opts) */
	uint32_t ninodes;     /* inode slots, a multiple of 32; 0 = one per 64 KiB of pool
			       * (at least 64) */
	uint64_t size;        /* pool size in bytes, >= 4 MiB, rounded down to 4096 */
	uint64_t meta_bytes;  /* space for inode logs (primary; every inode's log takes at least
			       * one 4 KiB page), 0 = the larger of pool size / 16 and two pages
			       * per inode */
	uint64_t dead_zone;   /* minimum bytes between a metadata primary and its replica,
			       * 0 = 1 MiB; mkfs fails with KR_E_FORMAT_GEOMETRY if the pool
			       * is too small to keep it */
	uint32_t njournals;   /* lite journals, 0 = 4 */
	unsigned open_flags;  /* KR_OPEN_FORCE_PMEM, KR_OPEN_PREFAULT (keratin.h) */
	uint32_t unprotect;   /* redundancy NOT to keep (0 = full protection): KR_FS_NO_* */
	/* Added after the first version (a struct_size that ends before them is accepted: no
	 * progress, page parity). */
	/* Called now and then with the bytes of the pool allocated and formatted so far and
	 * the total (NULL: none), from the calling thread. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	uint32_t parity;      /* data parity layout: KR_FS_PARITY_PAGE (0) or KR_FS_PARITY_ZONE */
	uint32_t zone_columns; /* KR_FS_PARITY_ZONE: pages per parity row (2..1024, 0 = 64) */
};
#define KR_FS_MKFS_OPTS_INIT {.struct_size = sizeof(struct kr_fs_mkfs_opts)}

/* Protection knobs, chosen at mkfs and kept by every mount (the pool records them; there is
 * nothing to change at mount). The space of what is turned off stays reserved, so the
 * geometry does not depend on them. They exist to measure what each protection costs:
 *   KR_FS_NO_META_REPLICA  one copy of journals, inodes and logs (the superblock keeps its
 *                          replica); metadata damage is then detected (CRCs) but lost
 *   KR_FS_NO_DATA_CSUM     no strip CRCs: data is neither verified nor repaired on read
 *   KR_FS_NO_DATA_PARITY   no parity: a bad strip is detected (-EIO), not rebuilt
 *   KR_FS_RELAXED          no write atomicity for overwrites ("relaxed mode"): a write that
 *                          changes neither the size nor a hole, to pages no snapshot shares,
 *                          stores the bytes in place and updates the touched strips' CRCs and
 *                          the page parity, instead of copying the page. A crash during it may
 *                          leave any mix of old and new bytes in the range written (never
 *                          damage: mount recomputes those pages' CRCs and parity); every other
 *                          operation stays atomic. Writes that extend a file or fill a hole
 *                          stay copy-on-write. */
#define KR_FS_NO_META_REPLICA 0x1u
#define KR_FS_NO_DATA_CSUM 0x2u
#define KR_FS_NO_DATA_PARITY 0x4u
#define KR_FS_RELAXED 0x8u

/* Data parity layouts. Page parity: one 512-byte parity strip per 4 KiB page (the eight
 * strips of the page XORed; 1/8 of the data space); a page survives one bad strip (or one
 * scribble across two neighbouring strips). Zone parity: the data area is zone_columns
 * columns, and one parity page per row covers the page at the same position in every column
 * (1/zone_columns of the data space); a page survives any number of bad strips, a whole lost
 * page included, as long as no other page of its row is damaged at the same strip. Writes
 * update the row's parity by delta (a read of the old page and of the parity page each).
 * Ignored with KR_FS_NO_DATA_PARITY. */
#define KR_FS_PARITY_PAGE 0u
#define KR_FS_PARITY_ZONE 1u

/* Creates the pool file (which must not exist: KR_E_IO_EXISTS) with an empty root
 * directory (mode 0755, uid/gid of the caller) and leaves it unmounted. Errors:
 * KR_E_MISUSE_ARG (bad options), KR_E_FORMAT_GEOMETRY (size too small for the dead zone
 * and the areas), KR_E_IO_*. */
KR_API int kr_fs_mkfs(const char *path, const struct kr_fs_mkfs_opts *opts);

/* Mounts the pool at path: verifies and repairs the superblock, rolls back an unfinished
 * journal, scans every inode log (verifying and repairing each entry from its replica),
 * rebuilds the DRAM indexes and the free space, and reclaims orphans (inodes whose link
 * count reached zero while open). flags: KR_OPEN_FORCE_PMEM, KR_OPEN_PREFAULT,
 * KR_FS_MOUNT_CHECK, KR_FS_MOUNT_WPROTECT. Errors:
 * KR_E_IO_* (KR_E_IO_BUSY: mounted elsewhere), KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_VERSION,
 * KR_E_FORMAT_TRUNCATED, KR_E_FORMAT_GEOMETRY, KR_E_CORRUPT_HEADER (both superblocks bad),
 * KR_E_CORRUPT_META (a structure needed to mount is damaged in both copies), KR_E_NOMEM. */
KR_API int kr_fs_mount(const char *path, unsigned flags, kr_fs **fs);
/* Inspection mount: the pool file is opened read-only (shared lock: KR_E_IO_BUSY while it is
 * mounted for writing) and mapped privately (copy-on-write), so a pool of any size mounts
 * at once and only the pages written are copied. Nothing ever reaches the file: the repairs
 * mount makes (counted and listed by kr_fs_check, as damage a repairing mount would fix)
 * and any operation change only this process's copy. */
#define KR_FS_MOUNT_CHECK 0x100u
/* Write protection: the pool is mapped read-only for everything but the library's write
 * path, which stores through a second, writable mapping of the same file whose address only
 * the persistence layer uses. A stray store through a pointer into the pool (the file
 * system's own reads, or anything derived from them) faults (SIGSEGV) instead of damaging
 * it. A store that happens to hit the writable alias is not stopped: this is the user-space
 * stand-in for a write-protect bit, not a hardware key per thread. */
#define KR_FS_MOUNT_WPROTECT 0x200u

/* kr_fs_mount with more choices. scan_threads: threads that walk the inode logs at mount
 * (each log is walked by one of them; the mounted state is the same for any number), at most
 * the online CPUs and KR_FS_SCAN_THREADS_MAX; 0 = up to 4. alloc_shards: the shards the
 * data-page and log-page allocators are split into (threads allocating at once take
 * different locks; each thread allocates from a home shard first), at most
 * KR_FS_ALLOC_SHARDS_MAX and one per 64 pages; 0 = one per online CPU, each at least
 * KR_FS_ALLOC_SHARD_MIN pages (the data pages of a zone-parity pool: one shard, so that runs
 * taken at once stay in one zone window). Nothing on the media depends on it. A caller built
 * before alloc_shards existed passes the smaller struct_size and gets the default. */
struct kr_fs_mount_opts {
	uint32_t struct_size;   /* sizeof(struct kr_fs_mount_opts) */
	unsigned flags;         /* as kr_fs_mount's */
	uint32_t scan_threads;
	uint32_t alloc_shards;
};
#define KR_FS_MOUNT_OPTS_INIT {.struct_size = sizeof(struct kr_fs_mount_opts)}
#define KR_FS_SCAN_THREADS_MAX 64u
#define KR_FS_ALLOC_SHARDS_MAX 64u
#define KR_FS_ALLOC_SHARD_MIN 512u
#define KR_FS_SCAN_THREADS_DEFAULT 4u
KR_API int kr_fs_mount_opts(const char *path, const struct kr_fs_mount_opts *opts, kr_fs **fs);

/* Marks the pool clean and unmaps it; fs is freed even on error. KR_E_IO_SYNC if the last
 * durability call failed. */
KR_API int kr_fs_unmount(kr_fs *fs);

/* How the pool file's last session ended, read from its superblock without mounting it
 * (no lock taken, no byte written): *clean is 1 if it ended with kr_fs_unmount, 0 if the
 * pool is mounted now or its last session crashed (the next mount recovers it); in
 * *mount_count (may be NULL) the mounts since mkfs. `keratin fs umount` uses it to tell a
 * daemon that unmounted from one that died. KR_OK, or kr_fs_mount's errors for the file
 * (KR_E_IO_OPEN, KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_VERSION, KR_E_CORRUPT_HEADER). */
KR_API int kr_fs_last_session(const char *path, uint32_t *clean, uint64_t *mount_count);

/* ---------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------- */
struct kr_fs_attr {
	uint64_t ino;
	uint64_t generation; /* changes when an inode number is reused */
	uint32_t mode;       /* type and permission bits, as st_mode */
	uint32_t nlink;
	uint32_t uid, gid;
	uint32_t rdev;
	uint64_t size;
	uint64_t blocks;     /* 512-byte units of data pages held */
	int64_t atime_ns, mtime_ns, ctime_ns; /* ns since the epoch */
};

/* kr_fs_setattr mask bits: which fields of attr to apply (ctime is always set to now). */
#define KR_FS_SET_MODE 0x01u  /* permission bits only; the type cannot change */
#define KR_FS_SET_UID 0x02u
#define KR_FS_SET_GID 0x04u
#define KR_FS_SET_SIZE 0x08u  /* truncate or extend (regular files; -EISDIR/-EINVAL else) */
#define KR_FS_SET_ATIME 0x10u
#define KR_FS_SET_MTIME 0x20u
#define KR_FS_SET_ATIME_NOW 0x40u
#define KR_FS_SET_MTIME_NOW 0x80u
/* Drop set-user-ID, and set-group-ID where group execution is allowed, from the mode (the
 * new one if KR_FS_SET_MODE is also given): what a write, truncation or change of owner by
 * a caller without CAP_FSETID does. A no-op (nothing written, ctime kept) on a file without
 * those bits or with this bit (and KR_FS_SET_KILL_SGID) alone. */
#define KR_FS_SET_KILL_SUIDGID 0x100u
/* Drop set-group-ID even without group execution: the caller is outside the file's group
 * (the library knows no caller's groups; whoever calls decides). */
#define KR_FS_SET_KILL_SGID 0x200u

struct kr_fs_statfs {
	uint64_t bsize;        /* 4096 */
	uint64_t blocks;       /* data pages */
	uint64_t bfree;        /* free data pages */
	uint64_t files;        /* inode slots */
	uint64_t ffree;        /* free inode slots */
	uint64_t namemax;      /* 255 */
	uint64_t log_pages;    /* pages for inode logs (metadata), and how many are free */
	uint64_t log_pages_free;
	uint64_t repairs;      /* since mount: structures rewritten from a replica or parity */
	uint64_t compactions;  /* since mount: inode logs rewritten by garbage collection */
	uint64_t mount_count;  /* mounts since mkfs, this one included */
	uint32_t was_clean;    /* 1 if the previous session ended with kr_fs_unmount */
	uint32_t dead_zone;    /* bytes between the end of the primary and the start of the
				* replica metadata (capped at 4 GiB - 1) */
	uint32_t unprotect;    /* the KR_FS_NO_* knobs the pool was made with */
};
/* The pool's data parity layout: KR_FS_PARITY_PAGE or KR_FS_PARITY_ZONE (and then in
 * *zone_columns, may be NULL, the pages per parity row; else 0), or -EINVAL for a NULL fs. */
KR_API int kr_fs_parity_layout(kr_fs *fs, uint32_t *zone_columns);
/* Log garbage collection since mount (a function, as kr_fs_statfs's struct may not grow):
 * in *fast_pages the log pages whose entries were all dead, unlinked from their logs and
 * freed without a copy (fast GC); in *copied_pages the log pages compactions wrote. Either
 * pointer may be NULL. 0, or -EINVAL for a NULL fs. */
KR_API int kr_fs_gc_counts(kr_fs *fs, uint64_t *fast_pages, uint64_t *copied_pages);

/* ---------------------------------------------------------------------------------------
 * Operations (0 or a byte count on success, -errno on failure)
 *
 * Names are 1..255 bytes without '/' or NUL, and not "." or ".." where a new entry is made
 * (-EINVAL for those; -ENAMETOOLONG beyond 255). Directory arguments that are not
 * directories give -ENOTDIR; unknown inode numbers -ENOENT (stale handles: -ESTALE is not
 * distinguished). A full log area or data area gives -ENOSPC with nothing changed.
 * ------------------------------------------------------------------------------------- */
KR_API int kr_fs_lookup(kr_fs *fs, uint64_t dir, const char *name, struct kr_fs_attr *out);
KR_API int kr_fs_getattr(kr_fs *fs, uint64_t ino, struct kr_fs_attr *out);
/* out (may be NULL) receives the attributes after the change. */
KR_API int kr_fs_setattr(kr_fs *fs, uint64_t ino, unsigned mask, const struct kr_fs_attr *attr,
		  struct kr_fs_attr *out);
KR_API int kr_fs_truncate(kr_fs *fs, uint64_t ino, uint64_t size);

/* Makes a regular file (S_IFREG), FIFO, socket or device node (rdev) named name in dir;
 * mode's type bits choose (0 = regular). -EEXIST if the name exists. */
KR_API int kr_fs_mknod(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t rdev,
		uint32_t uid, uint32_t gid, struct kr_fs_attr *out);
KR_API int kr_fs_create(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t uid,
		 uint32_t gid, struct kr_fs_attr *out);
KR_API int kr_fs_mkdir(kr_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint32_t uid,
		uint32_t gid, struct kr_fs_attr *out);
KR_API int kr_fs_symlink(kr_fs *fs, uint64_t dir, const char *name, const char *target, uint32_t uid,
		  uint32_t gid, struct kr_fs_attr *out);
/* Copies the target (not NUL-terminated) into buf, at most size bytes; returns its full
 * length. -EINVAL if ino is not a symlink. */
KR_API ssize_t kr_fs_readlink(kr_fs *fs, uint64_t ino, char *buf, size_t size);
/* -EPERM for directories, -EMLINK past 65000 links. */
KR_API int kr_fs_link(kr_fs *fs, uint64_t ino, uint64_t newdir, const char *newname,
	       struct kr_fs_attr *out);
/* Removes a non-directory name (-EISDIR for a directory). The inode is freed when its last
 * link goes and it is not open (kr_fs_open); otherwise when the last kr_fs_release comes,
 * or at the next mount after a crash. */
KR_API int kr_fs_unlink(kr_fs *fs, uint64_t dir, const char *name);
/* Removes an empty directory (-ENOTEMPTY, -ENOTDIR; -EBUSY for the root). */
KR_API int kr_fs_rmdir(kr_fs *fs, uint64_t dir, const char *name);

/* rename(2)/renameat2(2) semantics. flags: 0, KR_FS_RENAME_NOREPLACE (-EEXIST if newname
 * exists) or KR_FS_RENAME_EXCHANGE (both must exist; they swap). A directory cannot move
 * into its own subtree (-EINVAL); replacing a directory needs an empty one (-ENOTEMPTY);
 * directory over non-directory is -ENOTDIR, the reverse -EISDIR. */
#define KR_FS_RENAME_NOREPLACE 0x1u
#define KR_FS_RENAME_EXCHANGE 0x2u
KR_API int kr_fs_rename(kr_fs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
		 const char *newname, unsigned flags);

/* Open counts: an inode that is open survives the removal of its last name until released. */
KR_API int kr_fs_open(kr_fs *fs, uint64_t ino);
KR_API int kr_fs_release(kr_fs *fs, uint64_t ino);
/* Every operation is durable at return: fsync only reports the error state (-EIO). */
KR_API int kr_fs_fsync(kr_fs *fs, uint64_t ino);

/* Reads up to len bytes at off (short at end of file; holes read as zeros). Every 512-byte
 * strip is verified against its CRCs; a bad strip is rebuilt from parity and rewritten;
 * a page with two bad strips fails the read with -EIO (never wrong bytes). -EISDIR for
 * directories, -EINVAL for other non-regular files. */
KR_API ssize_t kr_fs_read(kr_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off);
/* Writes len bytes at off, copy-on-write: the whole write is atomic. Extends the file;
 * a gap before off becomes a hole. -EFBIG past KR_FS_MAX_FILE_SIZE. */
KR_API ssize_t kr_fs_write(kr_fs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off);

/* lseek(2)'s SEEK_DATA (3) and SEEK_HOLE (4) for a regular file, at 4 KiB granularity:
 * the first offset >= off in data (a page that was written or allocated) or in a hole (the
 * end of the file counts as one). -ENXIO if off >= size, or if SEEK_DATA finds no data. */
#define KR_FS_SEEK_DATA 3
#define KR_FS_SEEK_HOLE 4
KR_API int64_t kr_fs_lseek(kr_fs *fs, uint64_t ino, uint64_t off, int whence);

/* fallocate(2) for a regular file. mode 0: every hole page in [off, off + len) gets a zeroed
 * data page (with its checksums and parity) and the size grows to off + len if smaller;
 * KR_FS_FALLOC_KEEP_SIZE: the same without growing (pages past the end are not allocated:
 * unlike Linux, keratin-fs keeps no pages beyond the size); KR_FS_FALLOC_PUNCH_HOLE |
 * KR_FS_FALLOC_KEEP_SIZE: [off, off + len) reads as zeros afterwards, whole pages inside it
 * become holes (freed). Atomic. Other modes: -EOPNOTSUPP. */
#define KR_FS_FALLOC_KEEP_SIZE 0x01
#define KR_FS_FALLOC_PUNCH_HOLE 0x02
KR_API int kr_fs_fallocate(kr_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len);

/* Directory listing. fn is called for ".", ".." and each entry in order with the cookie
 * that resumes after that entry; a nonzero return from fn stops the listing before that
 * entry is counted. Start with cookie 0; entries added during a listing may be missed,
 * no entry is listed twice. fn runs without the file system's lock (entries are copied in
 * batches), so it may call other operations. Returns the number of entries passed to fn
 * that returned 0. */
typedef int (*kr_fs_filldir_fn)(void *ctx, const char *name, size_t name_len, uint64_t ino,
				uint32_t dtype, uint64_t next_cookie);
KR_API int kr_fs_readdir(kr_fs *fs, uint64_t dir, uint64_t cookie, kr_fs_filldir_fn fn, void *ctx);

KR_API int kr_fs_statfs(kr_fs *fs, struct kr_fs_statfs *out);

/* ---------------------------------------------------------------------------------------
 * Extended attributes (0 or a byte count on success, -errno on failure)
 *
 * Any inode may carry them. A name is 1..KR_FS_XATTR_NAME_MAX bytes (NUL-terminated, any
 * prefix: namespace policy such as "user." is the front end's); a value is
 * 0..KR_FS_XATTR_SIZE_MAX bytes. Each change is one atomic, durable log entry of the inode
 * (its ctime changes too). Errors: -ERANGE for an empty or too long name (and for a buffer
 * too small, below), -E2BIG for a value too large, -ENODATA for a name the inode does not
 * have, -EEXIST for KR_FS_XATTR_CREATE of a name it has, -EINVAL for unknown flags (or
 * both), -ENOSPC when the log area is full.
 * ------------------------------------------------------------------------------------- */
#define KR_FS_XATTR_NAME_MAX 255u
#define KR_FS_XATTR_SIZE_MAX 2048u
#define KR_FS_XATTR_CREATE 0x1 /* fail if the name exists (as XATTR_CREATE) */
#define KR_FS_XATTR_REPLACE 0x2 /* fail if it does not (as XATTR_REPLACE) */
KR_API int kr_fs_setxattr(kr_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
			  int flags);
/* Copies the value into value (size bytes of room) and returns its length; size 0 only
 * returns the length (value may be NULL); a smaller nonzero size is -ERANGE. */
KR_API ssize_t kr_fs_getxattr(kr_fs *fs, uint64_t ino, const char *name, void *value, size_t size);
/* The names, each followed by a NUL, in the order they were first set; returns the bytes
 * that takes. size 0 only returns the length; a smaller nonzero size is -ERANGE. */
KR_API ssize_t kr_fs_listxattr(kr_fs *fs, uint64_t ino, char *list, size_t size);
KR_API int kr_fs_removexattr(kr_fs *fs, uint64_t ino, const char *name);

/* ---------------------------------------------------------------------------------------
 * Snapshots (0 or a count on success, -errno on failure)
 *
 * A snapshot is a read-only copy of the whole tree as it was when it was made, kept until
 * it is deleted; the live tree goes on changing. Making one writes a compact image of the
 * metadata (every inode's attributes, names, page maps and extended attributes: time, log
 * space and, while it lives, DRAM in proportion to the metadata, not to the data; -EIO if
 * a name of the live tree leads to a damaged inode) and shares every data page:
 * pages the live tree then overwrites or frees stay allocated while a snapshot holds them.
 * Deleting a snapshot frees its image and every page only it held, before returning.
 * Snapshots survive unmounts and crashes like everything else.
 *
 * Reading: every inode of snapshot id has the number KR_FS_SNAP_INO(id, ino), where ino is
 * its number in the tree the snapshot copied; the snapshot's root is
 * KR_FS_SNAP_INO(id, KR_FS_ROOT_INO) (kr_fs_snapshot_attr.root). The ordinary operations
 * take these numbers: lookup, getattr, readdir, read, readlink, lseek, getxattr, listxattr,
 * open, release and fsync work inside the snapshot and return snapshot inode numbers (".."
 * of the snapshot's root is the snapshot's root); every operation that would change it
 * gives -EROFS. Numbers are unique across the live tree and all snapshots, so a FUSE front
 * end that shows DIR/.snapshots/NAME/ passes them through as node ids: it only answers
 * lookup(".snapshots") and readdir of that directory itself (from kr_fs_snapshot_list) and
 * forwards everything below NAME. After a snapshot is deleted its numbers give -ENOENT.
 * ------------------------------------------------------------------------------------- */
#define KR_FS_SNAP_SHIFT 40
#define KR_FS_SNAP_INO(id, ino) ((((uint64_t)(id) + 1) << KR_FS_SNAP_SHIFT) | (uint64_t)(ino))
/* The snapshot an inode number belongs to plus one (0: the live tree), and its number in
 * the copied tree. */
#define KR_FS_INO_SNAPSHOT(ino) ((uint64_t)(ino) >> KR_FS_SNAP_SHIFT)
#define KR_FS_INO_IN_TREE(ino) ((uint64_t)(ino) & ((1ull << KR_FS_SNAP_SHIFT) - 1))
#define KR_FS_SNAPSHOTS_MAX 1024u /* live snapshots at once */

struct kr_fs_snapshot_attr {
	uint64_t id;      /* the snapshot's epoch: ids increase, never reused while it lives */
	uint64_t root;    /* KR_FS_SNAP_INO(id, KR_FS_ROOT_INO) */
	int64_t time_ns;  /* when it was made */
	char name[KR_FS_NAME_MAX + 1]; /* NUL-terminated */
};
/* Makes a snapshot of the live tree named name (the rules of a file name: 1..255 bytes, no
 * '/', not "." or ".."). -EEXIST if a snapshot has that name, -ENOSPC if the log area cannot
 * hold the image or KR_FS_SNAPSHOTS_MAX snapshots live. out may be NULL. */
KR_API int kr_fs_snapshot_create(kr_fs *fs, const char *name, struct kr_fs_snapshot_attr *out);
/* Deletes the snapshot named name (-ENOENT if none) and frees what only it held. */
KR_API int kr_fs_snapshot_delete(kr_fs *fs, const char *name);
/* The snapshot named name (-ENOENT if none). */
KR_API int kr_fs_snapshot_lookup(kr_fs *fs, const char *name, struct kr_fs_snapshot_attr *out);
/* Fills out[0..max) with the live snapshots, oldest first; returns how many there are (may
 * exceed max: call again with a larger array). */
KR_API int kr_fs_snapshot_list(kr_fs *fs, struct kr_fs_snapshot_attr *out, unsigned max);

/* ---------------------------------------------------------------------------------------
 * Checking and scrubbing (enum kr_err codes)
 * ------------------------------------------------------------------------------------- */
struct kr_fs_check_report {
	uint64_t inodes, dirs, files, log_pages, data_pages; /* what was walked */
	uint64_t problems;  /* invariants found broken (each described on the report stream);
			     * after a KR_FS_MOUNT_CHECK mount, also every repair that mount made */
};
/* Read-only check of a mounted file system against every invariant this version keeps:
 * both copies of the superblock, journals, inodes and committed log bytes equal and
 * checksummed; journals idle; every data strip matching both CRC copies and parity; every
 * log and data page owned by exactly one inode and counted by the allocators; link counts
 * equal to the names found; every inode reachable from the root (or open); directory
 * parents consistent; extended attributes well formed; snapshot images checksummed in both
 * copies and every data page a snapshot holds counted and verified; the space audit (the areas
 * tile the file in order, data + metadata = pool size, each allocator's used + free = its
 * size). Writes one line per problem to report (may be NULL). KR_OK if clean,
 * KR_E_CORRUPT otherwise. Changes nothing. */
#include <stdio.h>
KR_API int kr_fs_check(kr_fs *fs, FILE *report, struct kr_fs_check_report *rep);

/* Progress of kr_fs_check and kr_fs_scrub on fs: each calls cb(ctx, done, total) now and
 * then, from the calling thread, counting inode slots walked and then data pages verified
 * (total is fixed when the pass begins; done reaches it at the end). cb NULL: none. */
KR_API void kr_fs_set_progress(kr_fs *fs, void (*cb)(void *ctx, uint64_t done, uint64_t total), void *ctx);

struct kr_fs_scrub_report {
	uint64_t meta_items;   /* superblock, journals, slots, log entries and pages verified */
	uint64_t data_pages;   /* data pages verified */
	uint64_t repaired;     /* structures rewritten from a replica, parity or CRCs */
	uint64_t unrepairable; /* damage left (each reported with the file's path and offset) */
};
/* One pass over everything on the media: both copies of every metadata structure (the
 * mount-time rules: one bad copy is rewritten from the good one; snapshot images included)
 * and every strip of every data page (snapshots' included) (rebuilt from parity when bad; a wrong parity strip is recomputed). Damage that
 * cannot be repaired is reported on report (may be NULL) with the path of the file and the
 * byte offset. Holds the file system's lock for the whole pass. KR_OK if everything is
 * sound or was repaired, KR_E_CORRUPT if damage remains, KR_E_IO_SYNC on a durability
 * failure. */
KR_API int kr_fs_scrub(kr_fs *fs, FILE *report, struct kr_fs_scrub_report *rep);

/* Where a byte of a file lives in the pool file, for tools and fault-injection tests: the
 * pool offsets of the data page holding file offset off, of its 512-byte strip, of that
 * strip's two CRC-32C copies (4 bytes each) and of the page's parity strip (512 bytes; with
 * zone parity, the strip of the row's parity page that covers this strip).
 * 0, or -ENXIO for a hole or an offset past the end, -EINVAL for a non-regular file. */
struct kr_fs_location {
	uint64_t page_off, strip_off;
	uint64_t csum_off[2];
	uint64_t parity_off;
};
KR_API int kr_fs_locate(kr_fs *fs, uint64_t ino, uint64_t off, struct kr_fs_location *loc);

/* Media errors. A read of a page the hardware lost (SIGBUS on persistent memory) does not
 * kill the process: the page is listed in PATH.badblocks and the read goes on as if its
 * lost bytes were damaged, so metadata is read from its other copy, a data strip is rebuilt
 * from parity, and what cannot be rebuilt fails with -EIO for that range. Mount and
 * kr_fs_scrub repair the pages of the platform's bad-block list (PATH.badblocks and the
 * kernel's list of the device) and then clear PATH.badblocks.
 * kr_fs_inject_poison emulates such an error for tests: bytes [off, off + len) of one page
 * (len 0: the whole page) lose their content and the page faults on its next access.
 * KR_E_MISUSE_ARG for a range outside one page, or an inspection mount; KR_E_MISUSE_STATE
 * for a page still poisoned (not yet met by an access) or too many such pages. */
KR_API int kr_fs_inject_poison(kr_fs *fs, uint64_t off, uint64_t len);

/* ---------------------------------------------------------------------------------------
 * Paths (a convenience for programs and tests; the operations above are the interface)
 * ------------------------------------------------------------------------------------- */
/* Resolves an absolute path ("/", "/a/b") from the root, following symlinks in the middle
 * (and at the end if follow) up to 40 of them; -ELOOP beyond, and the errnos of lookup. */
KR_API int kr_fs_resolve(kr_fs *fs, const char *path, int follow, struct kr_fs_attr *out);

#ifdef __cplusplus
}
#endif

#endif
