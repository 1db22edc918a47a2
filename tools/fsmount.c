/*
 * fsmount.c - the life of a keratin-fs mount: `keratin fs mount` (start the daemon, return
 * once the mount is ready), `keratin fs umount` (unmount, then wait until the daemon has
 * closed the pool cleanly), and the commands a mounted file system answers through its
 * control attributes (`keratin fs scrub|info DIR`).
 *
 * The daemon is a child of the command: it mounts the pool (so that errors such as a
 * damaged pool are printed on the user's terminal), mounts the FUSE file system, tells the
 * parent through a pipe, and only then detaches. A parent that reads nothing from the pipe
 * knows the child failed and has said why (with -o uring the mount is ready once the ring
 * serves, after INIT). -f keeps everything in the foreground. SIGINT,
 * SIGTERM and SIGHUP end the session loop (libfuse's handlers); the daemon then unmounts the
 * directory and the pool, which marks the pool clean.
 *
 * One pool, one mount, read-only ones too: every mount holds the pool's mount lock (an
 * open-file-description write lock on one byte far past any pool's end). The command takes
 * it before it starts the daemon and the daemon inherits it, so two mounts started at the
 * same instant cannot both pass; it drops when the daemon exits, after kr_fs_unmount has
 * closed the pool (and, read-write, written the clean mark). umount waits on it: once it
 * is free the pool is consistent on the media and `fsck` may run. It is not the library's
 * flock, which says who may open the pool (OFD byte locks and flock locks do not interact
 * on Linux): a read-only mount shares the pool with read-only keratin commands, and its
 * umount waits for its own daemon, not for them.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fsfuse.h"
#include "fsmount.h"
#include "fsreport.h"
#include "fsuring.h"
#include "util.h"

static const char *prog = "keratin fs";

/* ---- options ------------------------------------------------------------------------- */

/* Appends key and value to the option list at o (comma-separated), escaping ',' and '\' of
 * value as libfuse's option parser expects. A list that does not fit in cap bytes is a usage
 * error: cut short, it could lose an option such as ro. */
static int opt_append(char *o, size_t cap, const char *key, const char *value)
{
	size_t n = strlen(o), need = (n ? 1 : 0) + strlen(key);
	for (const char *p = value; p && *p; p++)
		need += *p == ',' || *p == '\\' ? 2 : 1;
	if (n + need >= cap)
		return util_usage_error(prog, "mount options too long (at most %zu bytes, keratin's "
					"fsname=POOL and subtype included)", cap - 1);
	if (n)
		o[n++] = ',';
	n = (size_t)(stpcpy(o + n, key) - o);
	for (const char *p = value; p && *p; p++) {
		if (*p == ',' || *p == '\\')
			o[n++] = '\\';
		o[n++] = *p;
	}
	o[n] = '\0';
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 86400)
		return -1;
	*out = v;
	return 0;
}

/* Whether the comma-separated list opts holds the option name. */
static bool opt_has(const char *opts, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = opts; (p = strstr(p, name)) != NULL; p += n)
		if ((p == opts || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return true;
	return false;
}

/* How the daemon serves requests: libfuse's threads on /dev/fuse, and the io_uring transport. */
struct loop_opts {
	unsigned threads;
	bool clone_fd, prefault, uring;
	bool readonly; /* -o ro (the last of ro and rw wins): an inspection mount */
};

/* Splits -o OPTIONS into keratin's own (below) and the mount options passed to libfuse
 * (allow_other, ro, ...; ro and rw are also keratin's, see loop_opts). keratin's: writeback,
 * splice, attr_timeout=S, entry_timeout=S,
 * threads=N, clone_fd, prefault (the default), noprefault, scan_threads=N, max_write=BYTES,
 * poll=US and uring. */
static int parse_options(const char *opts, struct fsfuse *f, char *fuse_opts, size_t cap, struct loop_opts *lo)
{
	char *copy = strdup(opts ? opts : "");
	if (!copy)
		return util_usage_error(prog, "out of memory");
	int rc = 0;
	for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t n;
		if (!strcmp(tok, "writeback"))
			f->writeback = true;
		else if (!strcmp(tok, "splice"))
			f->splice = true;
		else if (!strcmp(tok, "clone_fd"))
			lo->clone_fd = true;
		else if (!strcmp(tok, "uring"))
			lo->uring = true;
		else if (!strcmp(tok, "prefault") || !strcmp(tok, "noprefault"))
			lo->prefault = tok[0] == 'p';
		else if (!strncmp(tok, "attr_timeout=", 13)) {
			if (parse_seconds(tok + 13, &f->attr_timeout))
				rc = util_usage_error(prog, "invalid attr_timeout '%s' (seconds, 0 to 86400)", tok + 13);
		} else if (!strncmp(tok, "entry_timeout=", 14)) {
			if (parse_seconds(tok + 14, &f->entry_timeout))
				rc = util_usage_error(prog, "invalid entry_timeout '%s' (seconds, 0 to 86400)", tok + 14);
		} else if (!strncmp(tok, "threads=", 8)) {
			if (util_parse_uint(tok + 8, 1, 256, &n))
				rc = util_usage_error(prog, "invalid threads '%s' (1 to 256)", tok + 8);
			lo->threads = (unsigned)n;
		} else if (!strncmp(tok, "max_write=", 10)) {
			if (util_parse_uint(tok + 10, 4096, 1u << 20, &n))
				rc = util_usage_error(prog, "invalid max_write '%s' (bytes, 4096 to 1048576)", tok + 10);
			f->max_write = (unsigned)n;
		} else if (!strncmp(tok, "poll=", 5)) {
			if (util_parse_uint(tok + 5, 0, 1000, &n))
				rc = util_usage_error(prog, "invalid poll '%s' (microseconds, 0 to 1000)", tok + 5);
			f->poll_ns = n * 1000;
		} else if (!strncmp(tok, "scan_threads=", 13)) {
			if (util_parse_uint(tok + 13, 1, KR_FS_SCAN_THREADS_MAX, &n))
				rc = util_usage_error(prog, "invalid scan_threads '%s' (1 to %u)", tok + 13,
						      KR_FS_SCAN_THREADS_MAX);
			f->scan_threads = (unsigned)n;
		} else if (!strcmp(tok, "ro") || !strcmp(tok, "rw")) {
			/* Passed on too: the kernel then refuses writes with EROFS. */
			lo->readonly = tok[1] == 'o';
			rc = opt_append(fuse_opts, cap, tok, NULL);
		} else if (!strncmp(tok, "fsname=", 7) || !strncmp(tok, "subtype=", 8)) {
			rc = util_usage_error(prog, "option '%s' is set by keratin (the pool's path)", tok);
		} else {
			rc = opt_append(fuse_opts, cap, tok, NULL);
		}
		if (rc)
			break;
	}
	free(copy);
	/* Spliced requests pass by the transports (fsfuse.c), the ring's too. */
	if (!rc && lo->uring && f->splice)
		rc = util_usage_error(prog, "options 'uring' and 'splice' exclude each other");
	return rc;
}

/* ---- the daemon -------------------------------------------------------------------- */

static void tell_parent(int fd, char status)
{
	if (fd >= 0) {
		if (write(fd, &status, 1) != 1) {
			/* the parent is gone: nobody to tell */
		}
		close(fd);
	}
}

/* Tells the parent that the mount is up (*ready_fd: -1 in the foreground, and after this),
 * and leaves the terminal to it. */
static void detach(int *ready_fd)
{
	if (*ready_fd < 0)
		return;
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	if (chdir("/") != 0) {
		/* "/" always exists; nothing depends on the directory */
	}
	tell_parent(*ready_fd, 0);
	*ready_fd = -1;
}

/* The io_uring transport's side of the mount: requests go to the translation, and the
 * ring's start decides when the mount is ready. */
struct ring_ctx {
	struct fsfuse *f;
	const char *dir;
	int *ready_fd;
	bool failed;
};

static void ring_serve(void *arg, void *req, size_t len)
{
	struct ring_ctx *c = arg;
	fsfuse_serve_ring(c->f, req, len);
}

/* The mount is ready once the ring serves, for a parent waiting on a mount -o uring; if it
 * cannot, the daemon says why on the terminal and ends its session as SIGTERM would
 * (libfuse's handler: the main thread takes the signal, every other thread blocks it),
 * which unmounts; serve() then exits 1. */
static void ring_started(void *arg, const char *error)
{
	struct ring_ctx *s = arg;
	if (!error) {
		detach(s->ready_fd);
		return;
	}
	fprintf(stderr, "%s: %s: %s\n", prog, s->dir, error);
	s->failed = true;
	fuse_session_exit(s->f->se);
	kill(getpid(), SIGTERM);
}

static const struct fsuring_ops ring_ops = {.serve = ring_serve, .started = ring_started};

/* The option list libfuse gets, into o: keratin's own, then the user's FUSE options. Built
 * before the fork, so that a list too long is refused before anything is mounted. */
static int mount_options(char *o, size_t cap, const char *pool, const char *fuse_opts)
{
	/* Who checks permissions. With allow_other other users come in, and a user who is not
	 * root is held to the mode bits of their own files: the kernel checks every access
	 * (default_permissions). When root mounts without allow_other, FUSE lets in only
	 * processes whose user and group ids are all 0, and root's own check would grant them
	 * everything but executing a file with no execute bit, which FUSE checks without the
	 * option as well (access(2) comes to op_access, which answers the same). Leaving the
	 * option out then changes no answer and saves a GETATTR of the directory before each
	 * creation and removal (the kernel forgets a directory's attributes whenever it changes,
	 * and the check needs them). A root process that dropped CAP_DAC_OVERRIDE is treated as
	 * root: it could write the pool file itself. */
	bool checks = geteuid() != 0 || opt_has(fuse_opts, "allow_other") || opt_has(fuse_opts, "allow_root");
	if ((checks && opt_append(o, cap, "default_permissions", NULL)) ||
	    opt_append(o, cap, "subtype=keratin", NULL) || opt_append(o, cap, "fsname=", pool) ||
	    (*fuse_opts && opt_append(o, cap, fuse_opts, NULL)))
		return UTIL_EXIT_USAGE;
	return 0;
}

/* Everything after the fork (or in the foreground): returns the exit status. ready_fd gets
 * one byte once the mount is up; it is closed without one on failure. */
static int serve(const char *pool, const char *dir, struct fsfuse *f, char *mount_opts,
		 const struct loop_opts *lo, unsigned open_flags, int ready_fd)
{
	struct kr_fs_mount_opts mo = {.struct_size = sizeof(mo), .flags = open_flags, .scan_threads = f->scan_threads};
	struct ring_ctx ring = {.f = f, .dir = dir, .ready_fd = &ready_fd};
	int rc = kr_fs_mount_opts(pool, &mo, &f->fs);
	if (rc) {
		close(ready_fd);
		return util_lib_error("keratin", pool, rc);
	}
	f->pool = pool;
	char *argv[] = {(char *)"keratin-fs", (char *)"-o", mount_opts, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	int status = 1;
	struct fuse_session *se = fuse_session_new(&args, &fsfuse_ops, sizeof(fsfuse_ops), f);
	if (!se) {
		fprintf(stderr, "%s: %s: the mount options were refused\n", prog, dir);
		goto out_fs;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "%s: cannot install signal handlers\n", prog);
		goto out_se;
	}
	if (fuse_session_mount(se, dir) != 0) {
		fprintf(stderr, "%s: %s: cannot mount (is /dev/fuse there, and the directory empty?)\n", prog, dir);
		goto out_sig;
	}
	/* The counting transport (fsfuse.c); with splice libfuse would pass it by. */
	if (!f->splice && fuse_session_custom_io(se, &fsfuse_io, fuse_session_fd(se)) != 0) {
		fprintf(stderr, "%s: %s: cannot set up the transport\n", prog, dir);
		goto out_mount;
	}
	/* With io_uring, the mount is ready when the ring serves (ring_started, after INIT). */
	f->se = se;
	if (lo->uring && !(f->uring = fsuring_new(fuse_session_fd(se), &ring_ops, &ring))) {
		fprintf(stderr, "%s: %s: cannot set up io_uring: %s\n", prog, dir, strerror(errno));
		goto out_mount;
	}
	if (!lo->uring)
		detach(&ready_fd);
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg) {
		fprintf(stderr, "%s: out of memory\n", prog);
	} else {
		fuse_loop_cfg_set_clone_fd(cfg, lo->clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, lo->threads);
		status = fuse_session_loop_mt(se, cfg) < 0 ? 1 : 0;
		fuse_loop_cfg_destroy(cfg);
	}
out_mount:
	fuse_session_unmount(se);
	/* After the unmount the kernel has ended the ring's commands; the threads serve no more. */
	fsuring_stop(f->uring);
	f->uring = NULL;
	if (ring.failed)
		status = 1;
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);
out_fs:
	fuse_opt_free_args(&args); /* what fuse_session_new's parsing allocated */
	close(ready_fd);
	rc = kr_fs_unmount(f->fs);
	if (rc) {
		/* Detached, nobody reads stderr: the next mount sees an unclean pool and scans. */
		util_lib_error("keratin", pool, rc);
		status = 1;
	}
	return status;
}

/* ---- the mount lock (see the top of the file) ------------------------------------------ */

#define MOUNT_LOCK_OFF ((off_t)1 << 62)

static int mount_lock_op(int fd, int cmd, struct flock *l)
{
	*l = (struct flock){.l_type = l->l_type, .l_whence = SEEK_SET, .l_start = MOUNT_LOCK_OFF, .l_len = 1};
	return fcntl(fd, cmd, l);
}

/* Takes the pool's mount lock: the descriptor that holds it (kept open by the daemon until
 * it exits), or -errno (-EAGAIN: another mount holds it). A pool this user may only read
 * can only be mounted read-only, and a write lock needs a writable descriptor: there a
 * read lock is taken, and two such mounts are not kept apart. */
static int mount_lock_take(const char *pool)
{
	int fd = open(pool, O_RDWR | O_CLOEXEC);
	short type = F_WRLCK;
	if (fd < 0 && (errno == EACCES || errno == EROFS)) {
		fd = open(pool, O_RDONLY | O_CLOEXEC);
		type = F_RDLCK;
	}
	if (fd < 0)
		return -errno;
	struct flock l = {.l_type = type};
	if (mount_lock_op(fd, F_OFD_SETLK, &l) != 0) {
		int e = errno == EACCES ? EAGAIN : errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* Whether a mount's daemon holds the pool's mount lock (false if the pool is gone). */
static bool mount_lock_held(const char *pool)
{
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct flock l = {.l_type = F_WRLCK};
	bool held = mount_lock_op(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
	close(fd);
	return held;
}

/* Waits until no daemon holds the pool's mount lock: 0, or -ETIMEDOUT. */
static int wait_mount_released(const char *pool, int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		if (!mount_lock_held(pool))
			return 0;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}

static int control(struct fsfuse *f, const char *cmd, const char *arg, unsigned uid, char **text, size_t *len);
static int find_mount(const char *dir, const char *pool, char *out, size_t cap, bool *readonly);

int fs_mount(const char *pool, const char *dir, bool foreground, const char *opts, unsigned open_flags)
{
	struct fsfuse f = {.attr_timeout = 1.0, .entry_timeout = 1.0, .owner_uid = (unsigned)getuid(),
			  .control = control};
	char fuse_opts[FS_MOUNT_OPTS_MAX] = "";
	struct loop_opts lo = {.threads = 8, .prefault = true};
	int rc = parse_options(opts, &f, fuse_opts, sizeof(fuse_opts), &lo);
	if (rc)
		return rc;
	/* Every page of the pool mapped before the first request: a fresh pool's first-touch
	 * faults would otherwise land in the requests that first write each page. */
	if (lo.prefault)
		open_flags |= KR_OPEN_PREFAULT;
	/* A read-only mount leaves the file as it is: the pool is opened for inspection (its
	 * recovery and repairs stay in a private copy-on-write view), and not prefaulted, which
	 * in that view would copy every page. */
	if (lo.readonly)
		open_flags = (open_flags & ~KR_OPEN_PREFAULT) | KR_FS_MOUNT_CHECK;
	/* Refused before anything is mounted; the daemon does not turn the switch itself (it is
	 * the whole system's). */
	char why[256];
	if (lo.uring && fsuring_kernel_check(why, sizeof(why)) != 0) {
		fprintf(stderr, "%s: %s\n", prog, why);
		return 1;
	}
	/* The daemon works from "/": the paths must not depend on the current directory. */
	char pool_abs[PATH_MAX], dir_abs[PATH_MAX];
	if (!realpath(pool, pool_abs)) {
		fprintf(stderr, "%s: %s: %s\n", prog, pool, strerror(errno));
		return 1;
	}
	if (!realpath(dir, dir_abs)) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
		return 1;
	}
	char mount_opts[FS_MOUNT_OPTS_MAX] = "";
	rc = mount_options(mount_opts, sizeof(mount_opts), pool_abs, fuse_opts);
	if (rc)
		return rc;
	/* One pool, one mount (the mount lock). A keratin command that has the pool open is
	 * the library's to refuse, in the daemon, by the pool's flock. */
	char where[PATH_MAX];
	int lock = mount_lock_take(pool_abs);
	if (lock < 0) {
		if (lock != -EAGAIN)
			fprintf(stderr, "%s: %s: %s\n", prog, pool, strerror(-lock));
		else if (find_mount(NULL, pool_abs, where, sizeof(where), NULL) == 0)
			fprintf(stderr, "%s: %s: already mounted at %s\n", prog, pool, where);
		else
			fprintf(stderr, "%s: %s: being mounted by another process, or mounted in "
				"another mount namespace\n", prog, pool);
		return 1;
	}
	if (foreground) {
		rc = serve(pool_abs, dir_abs, &f, mount_opts, &lo, open_flags, -1);
		close(lock);
		return rc;
	}

	int pfd[2];
	if (pipe(pfd) != 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		close(lock);
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		close(lock);
		return 1;
	}
	if (pid == 0) {
		/* The daemon keeps the lock's descriptor until it exits. */
		close(pfd[0]);
		setsid();
		_exit(serve(pool_abs, dir_abs, &f, mount_opts, &lo, open_flags, pfd[1]));
	}
	close(lock); /* the lock is the daemon's now */
	close(pfd[1]);
	char status;
	ssize_t n;
	while ((n = read(pfd[0], &status, 1)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (n == 1)
		return 0;
	/* The child failed before the mount was ready and said why on stderr. */
	int ws;
	waitpid(pid, &ws, 0);
	return WIFEXITED(ws) && WEXITSTATUS(ws) ? WEXITSTATUS(ws) : 1;
}

/* ---- umount ------------------------------------------------------------------------ */

/* Decodes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* The keratin-fs mount of /proc/self/mountinfo whose directory is dir (then the pool it
 * serves goes to out), or whose pool is pool (then its directory goes to out); both paths
 * absolute. Whether it is mounted read-only goes to *readonly if that is not NULL. 0, or
 * -ENOENT if there is none. */
static int find_mount(const char *dir, const char *pool, char *out, size_t cap, bool *readonly)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	if (!mi)
		return -errno;
	char line[3 * PATH_MAX];
	int rc = -ENOENT;
	while (fgets(line, sizeof(line), mi)) {
		/* id parent major:minor root mountpoint options [optional...] - fstype source ... */
		char *f[6], *save, *p = line;
		int i = 0;
		for (; i < 6 && (f[i] = strtok_r(p, " ", &save)); i++)
			p = NULL;
		if (i < 6)
			continue;
		char *t;
		while ((t = strtok_r(NULL, " ", &save)) && strcmp(t, "-") != 0)
			;
		char *fstype = strtok_r(NULL, " ", &save), *source = strtok_r(NULL, " ", &save);
		if (!fstype || !source || strcmp(fstype, "fuse.keratin") != 0)
			continue;
		unescape(f[4]);
		unescape(source);
		if (dir ? strcmp(f[4], dir) != 0 : strcmp(source, pool) != 0)
			continue;
		snprintf(out, cap, "%s", dir ? source : f[4]);
		if (readonly)
			*readonly = !strcmp(f[5], "ro") || !strncmp(f[5], "ro,", 3);
		rc = 0; /* the last match is the one on top */
	}
	fclose(mi);
	return rc;
}

int fs_umount(const char *dir)
{
	char abs[PATH_MAX], pool[PATH_MAX];
	if (!realpath(dir, abs)) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
		return 1;
	}
	bool readonly = false;
	if (find_mount(abs, NULL, pool, sizeof(pool), &readonly) != 0) {
		fprintf(stderr, "%s: %s: not a keratin-fs mount\n", prog, dir);
		return 1;
	}
	/* A daemon that died left the mount behind ("Transport endpoint is not connected") and
	 * released its mount lock: the mount is still removed, but the exit says the session
	 * did not end cleanly (the promise is that umount returns once the pool is closed). */
	bool died_before = !mount_lock_held(pool);
	if (umount2(abs, 0) != 0) {
		if (errno == EBUSY) {
			fprintf(stderr, "%s: %s: busy (a process uses it); close it first\n", prog, dir);
			return 1;
		}
		if (errno != EPERM) {
			fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
			return 1;
		}
		/* Not root: the setuid helper unmounts what this user mounted. */
		pid_t pid = fork();
		if (pid == 0) {
			execlp("fusermount3", "fusermount3", "-u", abs, (char *)NULL);
			_exit(127);
		}
		int ws;
		if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			return 1; /* fusermount3 said why */
	}
	if (wait_mount_released(pool, 60) != 0) {
		fprintf(stderr, "%s: %s: unmounted, but the daemon has not released %s after 60 s\n", prog, dir, pool);
		return 1;
	}
	/* A read-only mount wrote nothing: how the file's last read-write session ended is not
	 * this one's to report. (Known from mountinfo, not asked of the mount: a wedged daemon
	 * would never answer.) */
	if (readonly)
		return 0;
	uint32_t clean = 0;
	int rc = kr_fs_last_session(pool, &clean, NULL);
	if (rc != KR_OK)
		return util_lib_error(prog, pool, rc);
	if (!clean) {
		fprintf(stderr, "%s: %s: unmounted, but its daemon had died %s: %s was not closed "
			"cleanly (the next mount recovers it; 'keratin fs fsck' checks it)\n", prog, dir,
			died_before ? "before" : "during the unmount", pool);
		return 1;
	}
	return 0;
}

/* ---- control --------------------------------------------------------------------------- */

static int control(struct fsfuse *f, const char *cmd, const char *arg, unsigned uid, char **text, size_t *len)
{
	if (uid != 0 && uid != f->owner_uid)
		return -EPERM;
	bool set = !strcmp(cmd, "snapshot-create") || !strcmp(cmd, "snapshot-delete");
	if (set != (arg != NULL) ||
	    (!set && strcmp(cmd, "info") && strcmp(cmd, "scrub") && strcmp(cmd, "snapshots") && strcmp(cmd, "requests")))
		return -ENODATA;
	if (set) {
		*text = NULL;
		*len = 0;
		return !strcmp(cmd, "snapshot-create") ? kr_fs_snapshot_create(f->fs, arg, NULL)
						       : kr_fs_snapshot_delete(f->fs, arg);
	}
	char *body = NULL;
	size_t body_len = 0;
	FILE *out = open_memstream(&body, &body_len);
	if (!out)
		return -ENOMEM;
	int status = 0;
	if (!strcmp(cmd, "info"))
		status = fs_print_info(out, f->fs, f->pool);
	else if (!strcmp(cmd, "scrub"))
		status = fs_print_scrub(out, f->fs, f->pool);
	else if (!strcmp(cmd, "requests"))
		fsfuse_print_requests(f, out);
	else
		status = fs_print_snapshots(out, f->fs);
	int rc = fclose(out) == 0 ? 0 : -ENOMEM;
	/* The reply: the command's exit status on the first line, then its text. */
	if (rc == 0 && asprintf(text, "%d\n%s", status, body) < 0)
		rc = -ENOMEM;
	else if (rc == 0)
		*len = strlen(*text);
	free(body);
	return rc;
}

int fs_control_set(const char *dir, const char *cmd, const char *arg)
{
	char name[64];
	snprintf(name, sizeof(name), "%s%s", FSFUSE_CONTROL_PREFIX, cmd);
	if (setxattr(dir, name, arg, strlen(arg), 0) != 0) {
		fprintf(stderr, "%s: %s: %s: %s\n", prog, dir, arg,
			errno == ENOTSUP ? "not the root of a keratin-fs mount" : strerror(errno));
		return 1;
	}
	return 0;
}

int fs_control(const char *dir, const char *cmd)
{
	char name[64];
	snprintf(name, sizeof(name), "%s%s", FSFUSE_CONTROL_PREFIX, cmd);
	/* One read runs the command (a size query would not: fsfuse.c). */
	char *buf = malloc(FSFUSE_CONTROL_MAX);
	ssize_t n = buf ? getxattr(dir, name, buf, FSFUSE_CONTROL_MAX) : -1;
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir,
			errno == ENODATA || errno == ENOTSUP ? "not the root of a keratin-fs mount" : strerror(errno));
		free(buf);
		return 1;
	}
	/* The first line is the command's exit status (control, above). */
	char *nl = memchr(buf, '\n', (size_t)n);
	int status = nl ? atoi(buf) : 1;
	if (nl)
		fwrite(nl + 1, 1, (size_t)(buf + n - (nl + 1)), stdout);
	free(buf);
	return status;
}
