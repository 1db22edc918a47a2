/*
 * fsfuse.h - what the FUSE translation (fsfuse.c) and the mount's lifecycle (fsmount.c)
 * share: the mounted file system with the options that shape replies.
 */
#ifndef KR_TOOLS_FSFUSE_H
#define KR_TOOLS_FSFUSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "keratin_fs.h"

/* Requests are counted by opcode below this (the kernel's opcodes end in the fifties). */
#define FSFUSE_OPCODES 64

struct fsfuse {
	kr_fs *fs;
	const char *pool;
	double attr_timeout;  /* seconds the kernel may cache attributes */
	double entry_timeout; /* ... and names, present or absent */
	bool writeback;       /* the kernel's writeback cache (writes durable at fsync only) */
	bool splice;          /* splice reads and writes through /dev/fuse */
	unsigned max_write;   /* the largest WRITE request (0: 1 MiB) */
	unsigned owner_uid;   /* who mounted: may run the control attributes, with root */
	/* Runs the control command cmd for a caller with uid (the daemon's, fsmount.c): read as
	 * attributes, "info", "scrub", "snapshots" (the list) and "requests"; set, with arg a
	 * snapshot's name, "snapshot-create" and "snapshot-delete". *text (malloc'd, the caller
	 * frees it) and *len receive its output, whose first line is the command's exit status.
	 * 0, -EPERM, -ENODATA (unknown command), -ENOMEM, or the snapshot operation's -errno.
	 * A callback, so that the translation needs nothing of the code that mounts it. */
	int (*control)(struct fsfuse *f, const char *cmd, const char *arg, unsigned uid, char **text,
		       size_t *len);
	/* The transport (fsfuse_io): requests received, by opcode, and the kernel's INIT while
	 * its reply is pending. */
	_Atomic uint64_t requests[FSFUSE_OPCODES];
	atomic_bool init_pending; /* every reply looks at it; the INIT's thread owns the rest */
	uint64_t kernel_flags;	  /* the INIT request's 64 flag bits: what the kernel offers */
	uint64_t init_unique;
	/* The FUSE-over-io_uring transport (fsuring.c; NULL: /dev/fuse only), the session its
	 * requests go to, and how many it served (of those counted above). */
	struct fsuring *uring;
	struct fuse_session *se;
	_Atomic uint64_t ring_requests;
	unsigned scan_threads; /* threads of the mount scan (0: the library's default) */
	/* Adaptive polling (fsfuse.c): the most a thread spins for the next request (0: never),
	 * whether one spins or is about to, and the moving average of the gaps it saw. */
	uint64_t poll_ns;
	atomic_bool watching;
	_Atomic uint64_t poll_gap_ns;
};

/* Extended attributes of the root whose names begin with this run commands. */
#define FSFUSE_CONTROL_PREFIX "keratin."
/* The most a control attribute returns (its size query's answer). */
#define FSFUSE_CONTROL_MAX (1u << 20)

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fsfuse_ops;
/* The transport: reads and writes of /dev/fuse that count requests by opcode and ask the
 * kernel to leave the dropping of set-user-ID bits to the daemon (fsfuse.c). */
struct fuse_custom_io;
extern const struct fuse_custom_io fsfuse_io;

/* Serves a request that came through the io_uring transport (fsuring.c), whole: counted and
 * marked as requests from /dev/fuse are. */
void fsfuse_serve_ring(struct fsfuse *f, void *req, size_t len);

/* The requests counted so far, one "NAME COUNT" line per opcode seen, then "io_uring COUNT"
 * for those the io_uring transport served, into out. */
void fsfuse_print_requests(struct fsfuse *f, FILE *out);

#endif
