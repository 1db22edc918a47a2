/*
 * fsmodel.h - a reference model of keratin-fs for the file-system tests: random operations,
 * their expected results (return values and errnos, in the order the library checks), and
 * a comparison of a mounted file system with the model.
 *
 * The model keeps inodes by its own ids (1 = root); each knows its type, permissions, owner,
 * link count, size, the pages written (sparse: only pages that exist, so holes past 4 GiB
 * cost nothing), a symlink's target, a directory's names and parent. fm_compare walks the
 * file system and the model from the root by names and requires the same names, the same
 * attributes and bytes, a consistent bijection between model ids and inode numbers (hard
 * links share one), the same extended attributes in the same order, every snapshot's tree
 * equal to the copy the model took, and statfs's used inodes and data pages equal to the
 * model's counts (nothing leaked, nothing lost; a data page is counted once however many
 * snapshots share it, which the model knows by numbering every page the library writes).
 */
#ifndef KR_FSMODEL_H
#define KR_FSMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "keratin_fs.h"
#include "testutil.h"

#define FM_PAGE 4096u

struct fm_page {
	uint64_t pg;
	uint8_t *data;
	uint64_t ver; /* which data page: a new one each time the library writes one */
};
struct fm_dent {
	char *name;
	uint32_t id;
};
struct fm_xattr {
	char *name;
	uint8_t *value;
	size_t len;
};
struct fm_inode {
	bool live;
	uint32_t mode, uid, gid, nlink;
	uint64_t size;
	uint32_t parent;
	struct fm_page *pages; /* sorted by pg */
	unsigned npages, cappages;
	char *target;
	uint64_t target_ver; /* a symlink's data page */
	struct fm_dent *dents;
	unsigned ndents, capdents;
	struct fm_xattr *xattrs; /* in the order names were first set */
	unsigned nxattrs;
	uint64_t fsino; /* inode number in the file system, 0 if not known */
};
struct fm {
	struct fm_inode *v; /* v[0] unused, v[1] root */
	unsigned n, cap;
	uint64_t max_inodes;  /* statfs files */
	uint64_t data_pages;  /* statfs blocks */
	/* A model of one subtree (several models share a file system, one per thread): the
	 * root's ".." is root_parent, and statfs's totals are not compared (nor ENOSPC
	 * predicted: the pool must be large enough). */
	bool subtree;
	uint64_t root_parent;
	/* fm_compare checks names and attributes only, not file bytes (a scribble sweep
	 * judges metadata). */
	bool meta_only;
	uint64_t next_ver;
	/* Snapshots, oldest first: a copy of the tree (without snapshots) each. */
	struct fm_snap {
		char name[300];
		struct fm *tree;
	} *snaps;
	unsigned nsnaps;
};

enum fm_kind {
	FM_CREATE,
	FM_MKDIR,
	FM_SYMLINK,
	FM_WRITE,
	FM_TRUNCATE,
	FM_UNLINK,
	FM_RMDIR,
	FM_RENAME,
	FM_LINK,
	FM_SETATTR,
	FM_READ,
	FM_FALLOCATE, /* flags: 0 or KR_FS_FALLOC_KEEP_SIZE */
	FM_PUNCH,
	FM_SEEK,      /* flags: KR_FS_SEEK_DATA or KR_FS_SEEK_HOLE */
	FM_SETXATTR,  /* name, len bytes from seed; flags: 0, KR_FS_XATTR_CREATE or _REPLACE */
	FM_REMOVEXATTR,
	FM_SNAPSHOT,       /* name */
	FM_SNAPSHOT_DELETE, /* name */
	FM_NKINDS
};

struct fm_op {
	enum fm_kind kind;
	uint32_t a, b;          /* model ids: the inode or directory, the second directory */
	char name[300], name2[300];
	uint64_t off, len, seed; /* write/read range and content seed; truncate: off = size */
	uint32_t mode, uid, gid, flags, mask;
};

struct fm_params {
	unsigned names;        /* size of the pool of short names */
	uint64_t max_write;    /* largest write */
	uint64_t far_off;      /* sparse writes land up to here (0: none) */
	uint64_t max_xattr;    /* largest extended attribute value */
	unsigned weight[FM_NKINDS];
};
void fm_params_default(struct fm_params *p);

/* The protection knobs (KR_FS_NO_*) that KR_TEST_FS_PROTECTION names: full (default), none,
 * meta (replica only), data (strip CRCs and parity only), noparity, relaxed (full, with
 * overwrites in place). */
uint32_t fm_unprotect_from_env(void);
/* The parity layout (KR_FS_PARITY_*) that KR_TEST_FS_PARITY names: page (default) or zone. */
uint32_t fm_parity_from_env(void);

/* A model of a freshly made file system (root only), sized from statfs. */
void fm_init(struct fm *m, const struct kr_fs_statfs *st, uint64_t root_ino);
/* Mounts the fresh pool at path (KR_OPEN_FORCE_PMEM) and initialises m from its statfs. */
kr_fs *fm_mount_new(const char *path, struct fm *m);
/* n random operations on fs and m; fails the test at the first result the model disputes. */
void fm_random(kr_fs *fs, struct fm *m, const struct fm_params *p, struct tu_rng *r, unsigned n);
/* A model of the empty directory dir_ino (whose parent is parent_ino). */
void fm_init_subtree(struct fm *m, uint64_t dir_ino, uint64_t parent_ino);
void fm_free(struct fm *m);
void fm_copy(struct fm *dst, const struct fm *src);

/* A random operation on the model's current state. */
void fm_gen(struct tu_rng *r, const struct fm *m, const struct fm_params *p, struct fm_op *op);
/* The result the library must give, applying the operation to the model if it succeeds;
 * *new_id gets the id of an inode it made (0 if none). */
int64_t fm_apply(struct fm *m, const struct fm_op *op, uint32_t *new_id);
/* Runs op on fs (model ids translated through m's fsino); *new_ino gets the inode number
 * of an inode it made. For FM_READ the bytes are compared with the model here: a mismatch
 * returns INT64_MIN. */
int64_t fm_run(kr_fs *fs, const struct fm *m, const struct fm_op *op, uint64_t *new_ino);
/* Runs op on fs and the model and requires equal results; 0, or -1 with why filled in.
 * *result (may be NULL) gets the result. */
int fm_step(kr_fs *fs, struct fm *m, const struct fm_op *op, int64_t *result, char *why, size_t whylen);
const char *fm_kind_name(enum fm_kind k);
void fm_describe(const struct fm_op *op, char *buf, size_t n);

/* Walks fs and the model from the root: 0 if equal, -1 with why filled in. */
int fm_compare(kr_fs *fs, const struct fm *m, char *why, size_t whylen);
/* The same, except that the live tree's file bytes may each be m's or alt's (a model with the
 * same inodes: m after one more write): a relaxed pool's overwrite torn by a crash. */
int fm_compare_torn(kr_fs *fs, const struct fm *m, const struct fm *alt, char *why, size_t whylen);

#endif
