/*
 * fsfuse.h - what the FUSE translation (fsfuse.c) and the mount's lifecycle (fsmount.c)
 * share: the mounted file system with the options that shape replies.
 */
#ifndef KR_TOOLS_FSFUSE_H
#define KR_TOOLS_FSFUSE_H

#include <stdbool.h>
#include <stddef.h>

#include "keratin_fs.h"

struct fsfuse {
	kr_fs *fs;
	const char *pool;
	double attr_timeout;  /* seconds the kernel may cache attributes */
	double entry_timeout; /* ... and names, present or absent */
	bool writeback;       /* the kernel's writeback cache (writes durable at fsync only) */
	bool splice;          /* splice reads and writes through /dev/fuse */
	unsigned owner_uid;   /* who mounted: may run the control attributes, with root */
	unsigned scan_threads; /* threads of the mount scan (0: the library's default) */
};

/* Extended attributes of the root whose names begin with this run commands. */
#define FSFUSE_CONTROL_PREFIX "keratin."
/* The most a control attribute returns (its size query's answer). */
#define FSFUSE_CONTROL_MAX (1u << 20)

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fsfuse_ops;

/* Runs the control command cmd for a caller with uid: read as attributes, "info", "scrub"
 * and "snapshots" (the list); set, with arg a snapshot's name, "snapshot-create" and
 * "snapshot-delete". *text (malloc'd, the caller frees it) and *len receive its output,
 * whose first line is the command's exit status. 0, -EPERM, -ENODATA (unknown command),
 * -ENOMEM, or the snapshot operation's -errno. */
int fsfuse_control(struct fsfuse *f, const char *cmd, const char *arg, unsigned uid, char **text, size_t *len);

#endif
