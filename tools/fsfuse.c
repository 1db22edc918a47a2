/*
 * fsfuse.c - keratin-fs behind FUSE: each low-level request translated into one call of
 * keratin_fs.h, and its result into one reply. No file-system rule lives here.
 *
 * Why the low-level API: keratin-fs names inodes by number, as FUSE's kernel protocol does,
 * so a request maps onto one library call without a path walk. The library's operations
 * return 0 or -errno and are durable when they return, so every reply is an honest one:
 * when a write is acknowledged (and the kernel's writeback cache is off, the default), its
 * bytes are on the media with their checksums and parity.
 *
 * Lookup counts: the library keeps an unlinked inode while it is open (kr_fs_open/release,
 * which FUSE's open/release and create drive), and reuses a freed inode number only with a
 * new generation, which every entry reply carries; the kernel's lookup counts therefore
 * need no bookkeeping here, and forget is a no-op.
 *
 * Snapshots are browsable under DIR/.snapshots/NAME/: the library gives every inode of a
 * snapshot a number of its own (KR_FS_SNAP_INO), which passes through as a node id, so the
 * daemon itself answers only for the .snapshots directory (a node above every number the
 * library hands out) and lists the snapshots in it; everything below NAME is forwarded, and
 * the library refuses changes there with EROFS. The name ".snapshots" in the root is
 * reserved. The directory and its names are never cached by the kernel (timeouts 0): the
 * list changes when snapshots are made or deleted, inside this daemon.
 *
 * Control from the command line (keratin fs scrub|info DIR): reading the extended
 * attribute "keratin.scrub" or "keratin.info" of the root directory runs the scrubber or
 * formats the statistics in the daemon and returns the text (fsmount.c, through the control callback of struct fsfuse).
 * The kernel passes names outside its own namespaces (user., trusted., ...) through to
 * FUSE after a read-permission check; the daemon itself admits only root and the user who
 * mounted.
 *
 * The transport (fsfuse_io) reads and writes /dev/fuse itself, for two things libfuse 3.14
 * does not do: it counts requests by opcode (`keratin fs requests DIR`), and it asks the
 * kernel for FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot name. Without it the kernel
 * asks for security.capability before every write(2) (one GETXATTR round trip each: this
 * file system has extended attributes); with it the kernel trusts the daemon to drop
 * set-user-ID and set-group-ID bits, and marks the writes, truncations and O_TRUNC opens
 * of callers without CAP_FSETID that must drop them. libfuse does not pass those marks on,
 * so the transport reads them from the raw request into a thread-local variable: libfuse
 * serves each request on the thread that read it. With -o splice, libfuse splices requests
 * past any transport, so the default transport and the kernel's own checks are kept.
 *
 * With -o uring most requests come through io_uring instead (fsuring.c), whole, to
 * fsfuse_serve_ring on the ring's thread, which counts and marks them as io_read does; their
 * replies still come to io_writev, which hands them to the ring entry (fsuring_take_reply).
 * The INIT reply asks for io_uring (fsuring_init_reply) and, once written, starts the ring.
 *
 * Adaptive polling: a synchronous client sends its next request a few microseconds after
 * the reply, and a daemon thread asleep in read(2) is then woken for it, a sleep and a wake
 * per request that cost more than most requests' work. So before its blocking read, one
 * thread at a time (the watcher) looks for the next request with poll(2) and a zero
 * timeout, for at most -o poll=US microseconds (off by default: see docs/DESIGN.md), and reads the
 * request it sees without sleeping. It spins only while the moving average of the waits it
 * has seen (from entering the transport to its request, a spell without requests counting
 * twice the budget) is within the budget: when requests come seldom it goes straight to the
 * blocking read. An idle mount therefore spends at most one budget after its last request,
 * then sleeps. The other threads sleep in read(2) as before, and the kernel wakes one of them
 * for a request that the watcher may take first (it goes back to sleep): the polling moves
 * the wake off the request's path rather than saving it, and costs some CPU time.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fsfuse.h"
#include "fsuring.h"
#include "keratin_fs.h"

static struct fsfuse *ctx_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- the transport ------------------------------------------------------------------- */

/* Whether the request this thread serves was marked by the kernel to drop set-user-ID and
 * set-group-ID bits (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID). */
static _Thread_local bool req_kill_privs;

static bool request_kills_privs(const struct fuse_in_header *h, const void *arg, size_t len)
{
	if (h->opcode == FUSE_WRITE && len >= sizeof(struct fuse_write_in))
		return ((const struct fuse_write_in *)arg)->write_flags & FUSE_WRITE_KILL_SUIDGID;
	if (h->opcode == FUSE_SETATTR && len >= sizeof(struct fuse_setattr_in))
		return ((const struct fuse_setattr_in *)arg)->valid & FATTR_KILL_SUIDGID;
	if (h->opcode == FUSE_OPEN && len >= sizeof(struct fuse_open_in))
		return ((const struct fuse_open_in *)arg)->open_flags & FUSE_OPEN_KILL_SUIDGID;
	return false;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Adaptive polling (see the top of this file). One thread at a time, the watcher, waits
 * for the next request: while the gaps between the requests it has waited for are short on
 * average, it looks for one with poll(2) and a zero timeout, for at most f->poll_ns, before
 * the blocking read. Returns whether this thread is the watcher, with the time it started. */
static bool poll_for_request(struct fsfuse *f, int fd, uint64_t *t0)
{
	if (!f->poll_ns || atomic_exchange_explicit(&f->watching, true, memory_order_acquire))
		return false;
	*t0 = now_ns();
	if (atomic_load_explicit(&f->poll_gap_ns, memory_order_relaxed) <= f->poll_ns) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		while (poll(&p, 1, 0) == 0 && now_ns() - *t0 < f->poll_ns)
			;
	}
	atomic_store_explicit(&f->watching, false, memory_order_release);
	return true;
}

/* The watcher's gap, from poll_for_request to its request, into the moving average (a
 * quarter weight). A gap counts at most twice the budget: one idle spell stops the spinning
 * for a request or two, not until many short gaps have outweighed it. */
static void note_gap(struct fsfuse *f, uint64_t t0)
{
	uint64_t seen = now_ns() - t0, cap = 2 * f->poll_ns;
	uint64_t avg = atomic_load_explicit(&f->poll_gap_ns, memory_order_relaxed);
	seen = seen < cap ? seen : cap;
	atomic_store_explicit(&f->poll_gap_ns, avg - avg / 4 + seen / 4, memory_order_relaxed);
}

/* What the transport learns from each request, however it came (/dev/fuse or the ring): its
 * count, the kernel's INIT flags, and the marks to drop set-user-ID bits (req_kill_privs,
 * for this thread, which serves the request). */
static void note_request(struct fsfuse *f, const void *req, size_t n)
{
	req_kill_privs = false;
	if (n < sizeof(struct fuse_in_header))
		return;
	const struct fuse_in_header *h = req;
	const void *arg = h + 1;
	size_t len = n - sizeof(*h);
	if (h->opcode < FSFUSE_OPCODES)
		atomic_fetch_add_explicit(&f->requests[h->opcode], 1, memory_order_relaxed);
	if (h->opcode == FUSE_INIT && len >= offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
		/* The first request, alone: no other thread runs yet. */
		const struct fuse_init_in *in = arg;
		f->kernel_flags = in->flags;
		if ((in->flags & FUSE_INIT_EXT) && len >= offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t))
			f->kernel_flags |= (uint64_t)in->flags2 << 32;
		f->init_unique = h->unique;
		atomic_store_explicit(&f->init_pending, true, memory_order_release);
	}
	req_kill_privs = request_kills_privs(h, arg, len);
}

static ssize_t io_read(int fd, void *buf, size_t size, void *userdata)
{
	struct fsfuse *f = userdata;
	uint64_t t0;
	bool watcher = poll_for_request(f, fd, &t0);
	ssize_t n = read(fd, buf, size);
	if (watcher)
		note_gap(f, t0);
	note_request(f, buf, n > 0 ? (size_t)n : 0);
	return n;
}

void fsfuse_serve_ring(struct fsfuse *f, void *req, size_t len)
{
	note_request(f, req, len);
	atomic_fetch_add_explicit(&f->ring_requests, 1, memory_order_relaxed);
	struct fuse_buf buf = {.size = len, .mem = req};
	fuse_session_process_buf(f->se, &buf);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fsfuse *f = userdata;
	const struct fuse_out_header *h = iov[0].iov_base;
	if (fsuring_take_reply(iov, count))
		return (ssize_t)h->len;
	if (!atomic_load_explicit(&f->init_pending, memory_order_acquire) || h->unique != f->init_unique ||
	    count < 2 || iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
		return writev(fd, iov, count);
	/* libfuse's INIT reply: add what it cannot name, when the kernel offered it. */
	atomic_store_explicit(&f->init_pending, false, memory_order_relaxed);
	struct fuse_init_out *out = iov[1].iov_base;
	if (h->error == 0 && (f->kernel_flags & FUSE_HANDLE_KILLPRIV_V2))
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (h->error == 0 && f->uring)
		fsuring_init_reply(f->uring, f->kernel_flags, out, iov[1].iov_len);
	ssize_t n = writev(fd, iov, count);
	/* The kernel has taken the reply: the ring may be set up. */
	if (f->uring)
		fsuring_start(f->uring);
	return n;
}

const struct fuse_custom_io fsfuse_io = {.read = io_read, .writev = io_writev};

void fsfuse_print_requests(struct fsfuse *f, FILE *out)
{
	static const char *const names[FSFUSE_OPCODES] = {
		[FUSE_LOOKUP] = "LOOKUP",	    [FUSE_FORGET] = "FORGET",	      [FUSE_GETATTR] = "GETATTR",
		[FUSE_SETATTR] = "SETATTR",	    [FUSE_READLINK] = "READLINK",     [FUSE_SYMLINK] = "SYMLINK",
		[FUSE_MKNOD] = "MKNOD",		    [FUSE_MKDIR] = "MKDIR",	      [FUSE_UNLINK] = "UNLINK",
		[FUSE_RMDIR] = "RMDIR",		    [FUSE_RENAME] = "RENAME",	      [FUSE_LINK] = "LINK",
		[FUSE_OPEN] = "OPEN",		    [FUSE_READ] = "READ",	      [FUSE_WRITE] = "WRITE",
		[FUSE_STATFS] = "STATFS",	    [FUSE_RELEASE] = "RELEASE",	      [FUSE_FSYNC] = "FSYNC",
		[FUSE_SETXATTR] = "SETXATTR",	    [FUSE_GETXATTR] = "GETXATTR",     [FUSE_LISTXATTR] = "LISTXATTR",
		[FUSE_REMOVEXATTR] = "REMOVEXATTR", [FUSE_FLUSH] = "FLUSH",	      [FUSE_INIT] = "INIT",
		[FUSE_OPENDIR] = "OPENDIR",	    [FUSE_READDIR] = "READDIR",	      [FUSE_RELEASEDIR] = "RELEASEDIR",
		[FUSE_FSYNCDIR] = "FSYNCDIR",	    [FUSE_GETLK] = "GETLK",	      [FUSE_SETLK] = "SETLK",
		[FUSE_SETLKW] = "SETLKW",	    [FUSE_ACCESS] = "ACCESS",	      [FUSE_CREATE] = "CREATE",
		[FUSE_INTERRUPT] = "INTERRUPT",	    [FUSE_BMAP] = "BMAP",	      [FUSE_DESTROY] = "DESTROY",
		[FUSE_IOCTL] = "IOCTL",		    [FUSE_POLL] = "POLL",	      [FUSE_BATCH_FORGET] = "BATCH_FORGET",
		[FUSE_FALLOCATE] = "FALLOCATE",	    [FUSE_READDIRPLUS] = "READDIRPLUS", [FUSE_RENAME2] = "RENAME2",
		[FUSE_LSEEK] = "LSEEK",		    [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
		[FUSE_SYNCFS] = "SYNCFS",	    [FUSE_TMPFILE] = "TMPFILE",
	};
	for (unsigned op = 0; op < FSFUSE_OPCODES; op++) {
		uint64_t n = atomic_load_explicit(&f->requests[op], memory_order_relaxed);
		if (n && names[op])
			fprintf(out, "%s %" PRIu64 "\n", names[op], n);
		else if (n)
			fprintf(out, "OPCODE_%u %" PRIu64 "\n", op, n);
	}
	uint64_t ring = atomic_load_explicit(&f->ring_requests, memory_order_relaxed);
	if (ring)
		fprintf(out, "io_uring %" PRIu64 "\n", ring);
}

/* Drops set-user-ID and set-group-ID bits from ino when the kernel marked the request: as
 * the kernel would, set-group-ID without group execution only for a caller outside the
 * file's group (root counts as inside every group: it holds CAP_FSETID). */
static int kill_privs(fuse_req_t req, fuse_ino_t ino)
{
	if (!req_kill_privs)
		return 0;
	struct fsfuse *f = ctx_of(req);
	struct kr_fs_attr a;
	int rc = kr_fs_getattr(f->fs, ino, &a);
	if (rc < 0 || !(a.mode & (S_ISUID | S_ISGID)))
		return rc;
	const struct fuse_ctx *c = fuse_req_ctx(req);
	bool in_group = c->uid == 0 || c->gid == a.gid;
	if (!in_group && (a.mode & S_ISGID) && !(a.mode & S_IXGRP)) {
		gid_t groups[64];
		int n = fuse_req_getgroups(req, 64, groups);
		for (int i = 0; i < n && i < 64; i++)
			in_group |= groups[i] == a.gid;
	}
	return kr_fs_setattr(f->fs, ino, KR_FS_SET_KILL_SUIDGID | (in_group ? 0 : KR_FS_SET_KILL_SGID), NULL, NULL);
}

/* ---- the .snapshots directory --------------------------------------------------------- */

#define SNAPDIR_INO ((fuse_ino_t)UINT64_MAX - 1)
static const char snapdir_name[] = ".snapshots";

static bool is_snapdir_name(fuse_ino_t parent, const char *name)
{
	return parent == KR_FS_ROOT_INO && strcmp(name, snapdir_name) == 0;
}

/* Whether a name may be made or removed in parent: 0, -EROFS inside .snapshots (the
 * directory itself; below it the library says EROFS), -EEXIST for the reserved name. */
static int name_check(fuse_ino_t parent, const char *name)
{
	if (parent == SNAPDIR_INO)
		return -EROFS;
	return is_snapdir_name(parent, name) ? -EEXIST : 0;
}

static void to_stat(const struct kr_fs_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = 4096;
	st->st_atim.tv_sec = a->atime_ns / 1000000000;
	st->st_atim.tv_nsec = a->atime_ns % 1000000000;
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	st->st_ctim.tv_sec = a->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = a->ctime_ns % 1000000000;
}

/* The entry the kernel may cache for the inode with attributes a. */
static struct fuse_entry_param entry_of(const struct fsfuse *f, const struct kr_fs_attr *a)
{
	struct fuse_entry_param e = {.ino = a->ino,
				     .generation = a->generation,
				     .attr_timeout = f->attr_timeout,
				     .entry_timeout = f->entry_timeout};
	to_stat(a, &e.attr);
	return e;
}

/* An entry reply (lookup, mknod, mkdir, symlink, link) from rc and the new attributes. */
static void reply_entry(fuse_req_t req, int rc, const struct kr_fs_attr *a)
{
	struct fsfuse *f = ctx_of(req);
	if (rc == -ENOENT && f->entry_timeout > 0) {
		/* A negative entry: only this daemon changes the tree, so the kernel may cache
		 * that the name is absent as long as it caches names that exist. */
		struct fuse_entry_param e = {.ino = 0, .entry_timeout = f->entry_timeout};
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e = entry_of(f, a);
	fuse_reply_entry(req, &e);
}

static void reply_attr(fuse_req_t req, int rc, const struct kr_fs_attr *a)
{
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct stat st;
	to_stat(a, &st);
	fuse_reply_attr(req, &st, ctx_of(req)->attr_timeout);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fsfuse *f = userdata;
	/* Large writes: one request (and one copy-on-write transaction) per MiB, unless asked
	 * for less (-o max_write, to measure what large writes buy). */
	conn->max_write = f->max_write ? f->max_write : 1u << 20;
	if (f->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	if (f->splice) {
		conn->want |= conn->capable & (FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
					       FUSE_CAP_SPLICE_MOVE);
	} else {
		conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	}
	/* The kernel does the permission checks (mount option default_permissions, or FUSE's
	 * own check of execute bits and op_access for root's mount: fsmount.c) and local POSIX
	 * and flock locks: the library keeps no lock state. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
}

/* The attributes of .snapshots: a read-only directory owned like the root, as old as it. */
static int snapdir_stat(struct fsfuse *f, struct stat *st)
{
	struct kr_fs_attr root;
	int rc = kr_fs_getattr(f->fs, KR_FS_ROOT_INO, &root);
	if (rc < 0)
		return rc;
	root.ino = SNAPDIR_INO;
	root.mode = S_IFDIR | 0555;
	root.nlink = 2;
	root.size = 0;
	root.blocks = 0;
	to_stat(&root, st);
	return 0;
}

/* An entry the kernel must not cache (the snapshot list changes under it). */
static void reply_uncached_entry(fuse_req_t req, int rc, const struct stat *st)
{
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e = {.ino = st->st_ino, .attr = *st};
	fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fsfuse *f = ctx_of(req);
	struct kr_fs_attr a;
	struct stat st;
	if (is_snapdir_name(parent, name)) {
		reply_uncached_entry(req, snapdir_stat(f, &st), &st);
	} else if (parent == SNAPDIR_INO) {
		struct kr_fs_snapshot_attr s;
		int rc = kr_fs_snapshot_lookup(f->fs, name, &s);
		if (rc == 0 && (rc = kr_fs_getattr(f->fs, s.root, &a)) == 0)
			to_stat(&a, &st);
		reply_uncached_entry(req, rc, &st);
	} else {
		reply_entry(req, kr_fs_lookup(f->fs, parent, name, &a), &a);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct kr_fs_attr a;
	if (ino == SNAPDIR_INO) {
		struct stat st;
		int rc = snapdir_stat(ctx_of(req), &st);
		if (rc < 0)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_attr(req, &st, 0);
		return;
	}
	reply_attr(req, kr_fs_getattr(ctx_of(req)->fs, ino, &a), &a);
}

/* access(2) and chdir come here only when the kernel checks no permissions, that is when
 * root mounted without allow_other (fsmount.c) and every caller is root: root may read,
 * write and search anything, and execute a file that has an execute bit. */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct kr_fs_attr a;
	if (ino == SNAPDIR_INO || !(mask & X_OK)) {
		fuse_reply_err(req, 0);
		return;
	}
	int rc = kr_fs_getattr(ctx_of(req)->fs, ino, &a);
	if (rc == 0 && !S_ISDIR(a.mode) && !(a.mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
		rc = -EACCES;
	fuse_reply_err(req, -rc);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *st, int to_set,
		       struct fuse_file_info *fi)
{
	(void)fi;
	static const struct {
		int fuse;
		unsigned kr;
	} bits[] = {{FUSE_SET_ATTR_MODE, KR_FS_SET_MODE},	  {FUSE_SET_ATTR_UID, KR_FS_SET_UID},
		    {FUSE_SET_ATTR_GID, KR_FS_SET_GID},		  {FUSE_SET_ATTR_SIZE, KR_FS_SET_SIZE},
		    {FUSE_SET_ATTR_ATIME, KR_FS_SET_ATIME},	  {FUSE_SET_ATTR_MTIME, KR_FS_SET_MTIME},
		    {FUSE_SET_ATTR_ATIME_NOW, KR_FS_SET_ATIME_NOW}, {FUSE_SET_ATTR_MTIME_NOW, KR_FS_SET_MTIME_NOW}};
	unsigned mask = 0;
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (to_set & bits[i].fuse)
			mask |= bits[i].kr;
	struct kr_fs_attr in = {.mode = st->st_mode,
				.uid = st->st_uid,
				.gid = st->st_gid,
				.size = (uint64_t)st->st_size,
				.atime_ns = (int64_t)st->st_atim.tv_sec * 1000000000 + st->st_atim.tv_nsec,
				.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec};
	struct kr_fs_attr out;
	int rc;
	if (ino == SNAPDIR_INO)
		rc = -EROFS;
	else if (mask && (rc = kill_privs(req, ino)) < 0)
		; /* the error is the reply */
	else if (mask)
		rc = kr_fs_setattr(ctx_of(req)->fs, ino, mask, &in, &out);
	else /* only ctime asked for (FUSE_SET_ATTR_CTIME alone): nothing the library stores */
		rc = kr_fs_getattr(ctx_of(req)->fs, ino, &out);
	reply_attr(req, rc, &out);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[KR_FS_SYMLINK_MAX + 1];
	ssize_t n = kr_fs_readlink(ctx_of(req)->fs, ino, buf, KR_FS_SYMLINK_MAX);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct kr_fs_attr a;
	int rc = name_check(parent, name);
	if (rc == 0)
		rc = kr_fs_mknod(ctx_of(req)->fs, parent, name, mode, (uint32_t)rdev, c->uid, c->gid, &a);
	reply_entry(req, rc, &a);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct kr_fs_attr a;
	int rc = name_check(parent, name);
	if (rc == 0)
		rc = kr_fs_mkdir(ctx_of(req)->fs, parent, name, mode, c->uid, c->gid, &a);
	reply_entry(req, rc, &a);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct kr_fs_attr a;
	int rc = name_check(parent, name);
	if (rc == 0)
		rc = kr_fs_symlink(ctx_of(req)->fs, parent, name, link, c->uid, c->gid, &a);
	reply_entry(req, rc, &a);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct kr_fs_attr a;
	int rc = name_check(newparent, newname);
	if (rc == 0)
		rc = kr_fs_link(ctx_of(req)->fs, ino, newparent, newname, &a);
	reply_entry(req, rc, &a);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int rc = name_check(parent, name);
	fuse_reply_err(req, rc == -EEXIST ? EROFS : rc ? -rc : -kr_fs_unlink(ctx_of(req)->fs, parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int rc = name_check(parent, name);
	fuse_reply_err(req, rc == -EEXIST ? EROFS : rc ? -rc : -kr_fs_rmdir(ctx_of(req)->fs, parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	unsigned kflags = 0;
	if (flags & RENAME_NOREPLACE)
		kflags |= KR_FS_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		kflags |= KR_FS_RENAME_EXCHANGE;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL); /* RENAME_WHITEOUT: overlay file systems only */
		return;
	}
	int rc = name_check(parent, name);
	if (rc == 0)
		rc = name_check(newparent, newname);
	if (rc == -EEXIST)
		rc = -EROFS; /* .snapshots moves nowhere, and nothing replaces it */
	if (rc == 0)
		rc = kr_fs_rename(ctx_of(req)->fs, parent, name, newparent, newname, kflags);
	fuse_reply_err(req, -rc);
}

static void set_open_flags(struct fsfuse *f, struct fuse_file_info *fi)
{
	/* Only this daemon changes files, so the kernel's cached pages stay valid across
	 * opens. */
	fi->keep_cache = f->attr_timeout > 0;
	/* No FLUSH at close(2): there is nothing to flush (writes are durable when answered)
	 * and no lock to drop (the kernel keeps them). With the writeback cache the kernel
	 * sends it anyway, after writing the dirty pages back. */
	fi->noflush = 1;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fsfuse *f = ctx_of(req);
	int rc = kr_fs_open(f->fs, ino);
	/* libfuse asks for atomic O_TRUNC: the kernel leaves the truncation to open. */
	if (rc == 0 && (fi->flags & O_TRUNC) && ((rc = kill_privs(req, ino)) < 0 || (rc = kr_fs_truncate(f->fs, ino, 0)) < 0))
		kr_fs_release(f->fs, ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	set_open_flags(f, fi);
	if (fuse_reply_open(req, fi) != 0)
		kr_fs_release(f->fs, ino); /* the opener was interrupted: no release will come */
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fsfuse *f = ctx_of(req);
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct kr_fs_attr a;
	int rc = name_check(parent, name);
	if (rc == 0)
		rc = kr_fs_create(f->fs, parent, name, mode, c->uid, c->gid, &a);
	if (rc == 0)
		rc = kr_fs_open(f->fs, a.ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e = entry_of(f, &a);
	set_open_flags(f, fi);
	if (fuse_reply_create(req, &e, fi) != 0)
		kr_fs_release(f->fs, a.ino);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, -kr_fs_release(ctx_of(req)->fs, ino));
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0); /* writes are durable when acknowledged: nothing to flush */
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	/* With the kernel's writeback cache on, the kernel has sent every dirty page before
	 * this request; the library has made each durable on its return. */
	fuse_reply_err(req, -kr_fs_fsync(ctx_of(req)->fs, ino));
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	/* On an io_uring thread, straight into the ring entry: one copy fewer. */
	char *ring = fsuring_reply_space(size);
	char *buf = ring ? ring : malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = kr_fs_read(ctx_of(req)->fs, ino, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	if (!ring)
		free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)fi;
	int rc = kill_privs(req, ino);
	ssize_t n = rc < 0 ? rc : kr_fs_write(ctx_of(req)->fs, ino, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	/* libfuse hands every write here, once this is set. Data in memory (read from /dev/fuse,
	 * or in an io_uring entry) is written from where it lies; spliced data arrives in a pipe:
	 * copy it into memory once, then one write. */
	if (in->count == 1 && in->idx == 0 && in->off == 0 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
		op_write(req, ino, in->buf[0].mem, in->buf[0].size, off, fi);
		return;
	}
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(size);
	mem.buf[0].mem = malloc(size ? size : 1);
	if (!mem.buf[0].mem) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t got = fuse_buf_copy(&mem, in, 0);
	if (got < 0)
		fuse_reply_err(req, (int)-got);
	else
		op_write(req, ino, mem.buf[0].mem, (size_t)got, off, fi);
	free(mem.buf[0].mem);
}

struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
};

static int fill_dir(void *ctx, const char *name, size_t name_len, uint64_t ino, uint32_t dtype,
		    uint64_t next_cookie)
{
	struct dirbuf *d = ctx;
	char nm[KR_FS_NAME_MAX + 1];
	memcpy(nm, name, name_len);
	nm[name_len] = '\0';
	struct stat st = {.st_ino = ino, .st_mode = DTTOIF(dtype)};
	size_t need = fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, nm, &st,
					(off_t)next_cookie);
	if (need > d->size - d->used)
		return 1; /* full: the kernel asks again from this entry's cookie */
	d->used += need;
	return 0;
}

/* The listing of .snapshots from cookie on: "." (cookie 0), ".." (1), then snapshot i at
 * cookie i + 2, each entry's next cookie one more. */
static int snapdir_list(struct fsfuse *f, uint64_t cookie, struct dirbuf *d)
{
	struct kr_fs_snapshot_attr *s = malloc(KR_FS_SNAPSHOTS_MAX * sizeof(*s));
	if (!s)
		return -ENOMEM;
	int n = kr_fs_snapshot_list(f->fs, s, KR_FS_SNAPSHOTS_MAX);
	if (n > (int)KR_FS_SNAPSHOTS_MAX)
		n = KR_FS_SNAPSHOTS_MAX;
	for (uint64_t c = cookie; n >= 0 && c < (uint64_t)n + 2; c++) {
		const char *name = c == 0 ? "." : c == 1 ? ".." : s[c - 2].name;
		uint64_t ino = c == 0 ? SNAPDIR_INO : c == 1 ? KR_FS_ROOT_INO : s[c - 2].root;
		if (fill_dir(d, name, strlen(name), ino, DT_DIR, c + 1))
			break;
	}
	free(s);
	return n < 0 ? n : 0;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	struct dirbuf d = {.req = req, .buf = malloc(size ? size : 1), .size = size};
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = ino == SNAPDIR_INO ? snapdir_list(ctx_of(req), (uint64_t)off, &d)
				    : kr_fs_readdir(ctx_of(req)->fs, ino, (uint64_t)off, fill_dir, &d);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct kr_fs_statfs s;
	int rc = kr_fs_statfs(ctx_of(req)->fs, &s);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct statvfs v = {.f_bsize = s.bsize,
			    .f_frsize = s.bsize,
			    .f_blocks = s.blocks,
			    .f_bfree = s.bfree,
			    .f_bavail = s.bfree,
			    .f_files = s.files,
			    .f_ffree = s.ffree,
			    .f_favail = s.ffree,
			    .f_namemax = s.namemax};
	fuse_reply_statfs(req, &v);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)fi;
	int kmode = 0;
	if (mode & FALLOC_FL_KEEP_SIZE)
		kmode |= KR_FS_FALLOC_KEEP_SIZE;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		kmode |= KR_FS_FALLOC_PUNCH_HOLE;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	fuse_reply_err(req, -kr_fs_fallocate(ctx_of(req)->fs, ino, kmode, (uint64_t)off, (uint64_t)len));
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)fi;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL); /* the kernel handles SEEK_SET, _CUR and _END */
		return;
	}
	int64_t r = kr_fs_lseek(ctx_of(req)->fs, ino, (uint64_t)off,
				whence == SEEK_DATA ? KR_FS_SEEK_DATA : KR_FS_SEEK_HOLE);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_lseek(req, (off_t)r);
}

static bool is_control(fuse_ino_t ino, const char *name)
{
	return ino == KR_FS_ROOT_INO && strncmp(name, FSFUSE_CONTROL_PREFIX, strlen(FSFUSE_CONTROL_PREFIX)) == 0;
}

/* Replies to a get/list of extended attributes from the library's answer: n is the value's
 * length (or -errno); size 0 asked only for it. */
static void reply_xattr_value(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* The control attributes of the root (see the top of this file) are read like others; a
 * size query (size 0) answers FSFUSE_CONTROL_MAX without running anything, so that the
 * command runs once, when the value is read; a longer text is cut at the buffer's end with a
 * last line saying so. Every other name is the file's own. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fsfuse *f = ctx_of(req);
	char *buf = NULL;
	if (ino == SNAPDIR_INO) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (!is_control(ino, name)) {
		if (size && !(buf = malloc(size))) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_xattr_value(req, kr_fs_getxattr(f->fs, ino, name, buf, size), buf, size);
		free(buf);
		return;
	}
	if (size == 0) {
		fuse_reply_xattr(req, FSFUSE_CONTROL_MAX);
		return;
	}
	size_t len = 0;
	int rc = f->control(f, name + strlen(FSFUSE_CONTROL_PREFIX), NULL, fuse_req_ctx(req)->uid, &buf, &len);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		static const char cut[] = "\n(output cut)\n";
		if (len > size && size > sizeof(cut)) {
			memcpy(buf + size - (sizeof(cut) - 1), cut, sizeof(cut) - 1);
			len = size;
		}
		if (len > size)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, buf, len);
	}
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = NULL;
	if (ino == SNAPDIR_INO) {
		reply_xattr_value(req, 0, NULL, size);
		return;
	}
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr_value(req, kr_fs_listxattr(ctx_of(req)->fs, ino, buf, size), buf, size);
	free(buf);
}

/* Setting a control attribute of the root runs a command with the value as its argument
 * (keratin.snapshot-create, keratin.snapshot-delete); its reply carries no text. */
static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct fsfuse *f = ctx_of(req);
	if (ino == SNAPDIR_INO) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (is_control(ino, name)) {
		char arg[KR_FS_NAME_MAX + 1];
		if (size > KR_FS_NAME_MAX) {
			fuse_reply_err(req, ENAMETOOLONG);
			return;
		}
		memcpy(arg, value, size);
		arg[size] = '\0';
		char *text = NULL;
		size_t len;
		int rc = f->control(f, name + strlen(FSFUSE_CONTROL_PREFIX), arg, fuse_req_ctx(req)->uid, &text,
					&len);
		free(text);
		fuse_reply_err(req, -rc);
		return;
	}
	int kflags = (flags & XATTR_CREATE ? KR_FS_XATTR_CREATE : 0) | (flags & XATTR_REPLACE ? KR_FS_XATTR_REPLACE : 0);
	fuse_reply_err(req, -kr_fs_setxattr(f->fs, ino, name, value, size, kflags));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, ino == SNAPDIR_INO ? EROFS : -kr_fs_removexattr(ctx_of(req)->fs, ino, name));
}

const struct fuse_lowlevel_ops fsfuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.access = op_access,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.release = op_release,
	.flush = op_flush,
	.fsync = op_fsync,
	.read = op_read,
	.write = op_write,
	.write_buf = op_write_buf,
	.readdir = op_readdir,
	.statfs = op_statfs,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};
