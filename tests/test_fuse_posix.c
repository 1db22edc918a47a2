/*
 * test_fuse_posix.c - a differential POSIX suite: every case runs once in a directory of a
 * keratin-fs mount and once in a directory of a reference file system (tmpfs), and the two
 * traces must be equal.
 *
 * A case is a function of plain system calls. Each step is recorded as one line: the call's
 * text, its return value (a file descriptor as "fd", so numbering cannot differ) and errno
 * when it failed, plus whatever the case chooses to record (bytes read, stat fields that
 * must agree: type and permissions, link count, size, owner; offsets from SEEK_DATA and
 * SEEK_HOLE; sorted directory listings). Fields that legitimately differ between file
 * systems (inode numbers, st_dev, block counts, timestamps' values) are never recorded;
 * timestamps are recorded as relations ("mtime advanced").
 *
 * usage: test_fuse_posix KERATIN_DIR REFERENCE_DIR [CASE]
 * Prints one line per case and a summary; exits 1 if any case differs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- the trace ------------------------------------------------------------------------ */

static char *trace;
static size_t trace_len, trace_cap;
static unsigned steps;

static void note(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (trace_len + (size_t)n + 2 > trace_cap) {
		trace_cap = (trace_len + (size_t)n + 2) * 2;
		trace = realloc(trace, trace_cap);
		if (!trace)
			abort();
	}
	memcpy(trace + trace_len, line, (size_t)n);
	trace_len += (size_t)n;
	trace[trace_len++] = '\n';
	trace[trace_len] = '\0';
	steps++;
}

/* Records a call's result; returns it so cases can go on using it. */
static long rec(const char *what, long rc)
{
	if (rc < 0)
		note("%s = -1 %s", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	else
		note("%s = %ld", what, rc);
	return rc;
}
#define R(call) rec(#call, (long)(call))

static int rec_fd(const char *what, int fd)
{
	if (fd < 0)
		note("%s = -1 %s", what, strerrorname_np(errno));
	else
		note("%s = fd", what);
	return fd;
}
#define FD(call) rec_fd(#call, (call))

static void rec_stat(const char *path, int follow)
{
	struct stat st;
	int rc = follow ? stat(path, &st) : lstat(path, &st);
	if (rc != 0) {
		note("stat %s = -1 %s", path, strerrorname_np(errno));
		return;
	}
	/* A directory's size is the file system's own business (tmpfs: 20 bytes an entry). */
	note("stat %s: mode %o nlink %lu size %lld uid %u gid %u", path, st.st_mode, (unsigned long)st.st_nlink,
	     S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size, st.st_uid, st.st_gid);
}

static void rec_read(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		note("read %s: open -1 %s", path, strerrorname_np(errno));
		return;
	}
	char *buf = calloc(1, max + 1);
	ssize_t n = pread(fd, buf, max, 0);
	/* Bytes as printable text, zeros as '0': cases write printable data. */
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = '0';
	note("read %s = %zd '%.*s'", path, n, (int)(n > 200 ? 200 : n), buf);
	free(buf);
	close(fd);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void rec_listing(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		note("ls %s = -1 %s", path, strerrorname_np(errno));
		return;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	char line[900] = "";
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		if (used < sizeof(line) - 64)
			used += (size_t)snprintf(line + used, sizeof(line) - used, "%s ", names[i]);
		free(names[i]);
	}
	free(names);
	note("ls %s: %zu entries: %s", path, n, line);
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		note("put %s failed: %s", path, strerrorname_np(errno));
	if (fd >= 0)
		close(fd);
}

/* ---- the cases ------------------------------------------------------------------------ */

static void c_create_write_read(void)
{
	int fd = FD(open("f", O_RDWR | O_CREAT | O_EXCL, 0640));
	R(write(fd, "hello world", 11));
	R(pwrite(fd, "HELLO", 5, 0));
	R(close(fd));
	rec_read("f", 64);
	rec_stat("f", 1);
}

static void c_open_errors(void)
{
	put("f", "x");
	R(mkdir("d", 0755));
	FD(open("f", O_RDWR | O_CREAT | O_EXCL, 0644));
	FD(open("missing", O_RDONLY));
	FD(open("d", O_WRONLY));
	FD(open("f", O_RDONLY | O_DIRECTORY));
	FD(open("f/x", O_RDONLY));
	FD(open("missing/x", O_RDONLY | O_CREAT, 0644));
	char longname[300];
	memset(longname, 'n', 256);
	longname[256] = '\0';
	FD(open(longname, O_RDWR | O_CREAT, 0644));
	longname[255] = '\0';
	int fd = FD(open(longname, O_RDWR | O_CREAT, 0644));
	if (fd >= 0)
		close(fd);
	R(unlink(longname));
}

static void c_trunc_append(void)
{
	put("f", "0123456789");
	int fd = FD(open("f", O_WRONLY | O_TRUNC));
	R(write(fd, "ab", 2));
	R(close(fd));
	rec_read("f", 64);
	fd = FD(open("f", O_WRONLY | O_APPEND));
	R(lseek(fd, 0, SEEK_SET));
	R(write(fd, "cd", 2));
	R(pwrite(fd, "ef", 2, 0)); /* Linux: pwrite on O_APPEND appends */
	R(close(fd));
	rec_read("f", 64);
}

static void c_truncate(void)
{
	put("f", "abcdefghij");
	R(truncate("f", 4));
	rec_read("f", 64);
	R(truncate("f", 9000));
	rec_stat("f", 1);
	int fd = FD(open("f", O_RDONLY));
	char buf[16];
	R(pread(fd, buf, 8, 8990));
	note("tail zero %d", buf[0] == 0 && buf[7] == 0);
	R(close(fd));
	R(truncate("f", 0));
	rec_stat("f", 1);
	R(truncate("missing", 0));
	R(mkdir("d", 0755));
	R(truncate("d", 0));
}

static void c_unlink_rmdir(void)
{
	put("f", "x");
	R(mkdir("d", 0755));
	R(mkdir("e", 0755));
	put("e/g", "y");
	R(unlink("d"));
	R(rmdir("f"));
	R(rmdir("e"));
	R(unlink("missing"));
	R(rmdir("."));
	R(unlink("e/g"));
	R(rmdir("e"));
	R(unlink("f"));
	R(rmdir("d"));
	rec_listing(".");
}

static void c_mkdir(void)
{
	R(mkdir("d", 0750));
	R(mkdir("d", 0755));
	R(mkdir("d/e", 0755));
	R(mkdir("d/e/f", 0755));
	rec_stat("d", 1);
	rec_stat("d/e", 1);
	put("file", "x");
	R(mkdir("file/x", 0755));
	R(mkdir("missing/x", 0755));
}

static void c_rename_basic(void)
{
	put("a", "aaa");
	put("b", "bbb");
	R(rename("a", "b"));
	rec_read("b", 16);
	R(access("a", F_OK));
	R(rename("b", "b"));
	R(rename("missing", "c"));
	R(mkdir("d", 0755));
	R(rename("b", "d/b2"));
	rec_listing("d");
}

static void c_rename_dirs(void)
{
	R(mkdir("d1", 0755));
	R(mkdir("d2", 0755));
	put("d2/x", "x");
	put("f", "f");
	R(rename("d1", "d2"));
	R(rename("f", "d1"));
	R(rename("d1", "f"));
	R(rename("d1", "d1/sub"));
	R(mkdir("d3", 0755));
	R(rename("d1", "d3"));
	rec_listing(".");
	R(rename("d2", "d3/d2"));
	rec_stat("d3", 1);
	rec_listing("d3/d2");
}

static void c_rename_flags(void)
{
	put("a", "aaa");
	put("b", "bbb");
	R(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE));
	R(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", RENAME_NOREPLACE));
	R(renameat2(AT_FDCWD, "c", AT_FDCWD, "b", RENAME_EXCHANGE));
	rec_read("b", 16);
	rec_read("c", 16);
	R(renameat2(AT_FDCWD, "c", AT_FDCWD, "missing", RENAME_EXCHANGE));
	R(mkdir("d", 0755));
	R(renameat2(AT_FDCWD, "d", AT_FDCWD, "b", RENAME_EXCHANGE));
	rec_stat("d", 0);
	rec_stat("b", 0);
}

static void c_links(void)
{
	put("f", "data");
	R(link("f", "g"));
	rec_stat("f", 1);
	R(link("f", "g"));
	R(link("missing", "h"));
	R(mkdir("d", 0755));
	R(link("d", "d2"));
	int fd = FD(open("g", O_WRONLY | O_APPEND));
	R(write(fd, "++", 2));
	R(close(fd));
	rec_read("f", 16);
	R(unlink("f"));
	rec_stat("g", 1);
}

static void c_symlinks(void)
{
	put("target", "pointed");
	R(symlink("target", "s"));
	R(symlink("nowhere", "dangling"));
	R(symlink("loop2", "loop1"));
	R(symlink("loop1", "loop2"));
	char buf[64] = "";
	long n = R(readlink("s", buf, sizeof(buf)));
	note("readlink s '%.*s'", (int)(n > 0 ? n : 0), buf);
	R(readlink("target", buf, sizeof(buf)));
	rec_read("s", 16);
	rec_stat("s", 0);
	rec_stat("dangling", 1);
	FD(open("loop1", O_RDONLY));
	R(symlink("x", "s"));
	R(mkdir("d", 0755));
	R(symlink("../target", "d/up"));
	rec_read("d/up", 16);
	FD(open("s", O_RDONLY | O_NOFOLLOW));
}

static void c_unlink_open(void)
{
	put("f", "still here");
	int fd = FD(open("f", O_RDWR));
	R(unlink("f"));
	char buf[32] = "";
	R(pread(fd, buf, sizeof(buf), 0));
	note("content '%s'", buf);
	struct stat st;
	R(fstat(fd, &st));
	note("nlink %lu size %lld", (unsigned long)st.st_nlink, (long long)st.st_size);
	R(pwrite(fd, "more", 4, 10));
	R(fstat(fd, &st));
	note("size %lld", (long long)st.st_size);
	R(close(fd));
	rec_listing(".");
}

static void c_sparse_seek(void)
{
	int fd = FD(open("f", O_RDWR | O_CREAT, 0644));
	R(pwrite(fd, "A", 1, 0));
	R(pwrite(fd, "B", 1, 1 << 20));
	R(pwrite(fd, "C", 1, (off_t)5 << 30)); /* past 4 GiB */
	R(lseek(fd, 0, SEEK_HOLE));
	R(lseek(fd, 4096, SEEK_DATA));
	R(lseek(fd, (1 << 20) + 1, SEEK_HOLE));
	R(lseek(fd, (1 << 20) + 4096, SEEK_DATA));
	R(lseek(fd, ((off_t)5 << 30) + 1, SEEK_HOLE));
	R(lseek(fd, ((off_t)5 << 30) + 4096, SEEK_DATA));
	char b[2] = "";
	R(pread(fd, b, 1, 1 << 20));
	note("byte %c", b[0]);
	R(pread(fd, b, 1, 123456));
	note("hole byte %d", b[0]);
	struct stat st;
	R(fstat(fd, &st));
	note("size %lld", (long long)st.st_size);
	R(close(fd));
}

static void c_fallocate(void)
{
	int fd = FD(open("f", O_RDWR | O_CREAT, 0644));
	char page[8192];
	memset(page, 'x', sizeof(page));
	R(pwrite(fd, page, sizeof(page), 0));
	R(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
	R(pread(fd, page, 8192, 0));
	note("punched %d %d %c", page[0], page[4095], page[4096]);
	R(lseek(fd, 0, SEEK_DATA));
	R(fallocate(fd, 0, 8192, 8192));
	struct stat st;
	R(fstat(fd, &st));
	note("size %lld", (long long)st.st_size);
	R(fallocate(fd, FALLOC_FL_KEEP_SIZE, 16384, 4096));
	R(fstat(fd, &st));
	note("size %lld", (long long)st.st_size);
	R(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096)); /* without KEEP_SIZE: EOPNOTSUPP */
	R(close(fd));
}

static void c_attrs(void)
{
	put("f", "x");
	R(chmod("f", 0600));
	rec_stat("f", 1);
	R(chown("f", 1234, 5678));
	rec_stat("f", 1);
	R(chmod("missing", 0600));
	struct timespec ts[2] = {{1000000000, 123456789}, {1100000000, 987654321}};
	R(utimensat(AT_FDCWD, "f", ts, 0));
	struct stat st;
	R(stat("f", &st));
	note("atime %lld.%09ld mtime %lld.%09ld", (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
	     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	struct stat before = st;
	int fd = FD(open("f", O_WRONLY));
	R(write(fd, "y", 1));
	R(fstat(fd, &st));
	note("mtime advanced %d ctime advanced %d", st.st_mtim.tv_sec > before.st_mtim.tv_sec,
	     st.st_ctim.tv_sec >= before.st_ctim.tv_sec);
	R(close(fd));
	R(mkfifo("fifo", 0644));
	rec_stat("fifo", 1);
}

static void c_readdir_many(void)
{
	R(mkdir("d", 0755));
	char name[64];
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "d/file-%03d", i);
		int fd = open(name, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0)
			close(fd);
	}
	for (int i = 0; i < 300; i += 3) {
		snprintf(name, sizeof(name), "d/file-%03d", i);
		unlink(name);
	}
	/* Removing entries while a listing is in progress: each entry that stays is seen once. */
	DIR *d = opendir("d");
	int seen = 0, dup = 0;
	char *mark = calloc(300, 1);
	struct dirent *e;
	while ((e = readdir(d))) {
		int k;
		if (sscanf(e->d_name, "file-%d", &k) == 1 && k >= 0 && k < 300) {
			dup += mark[k]++ > 0;
			seen++;
			if (k % 3 == 1) {
				snprintf(name, sizeof(name), "d/file-%03d", k + 1);
				unlink(name); /* may or may not be seen later; never twice */
			}
		}
	}
	closedir(d);
	free(mark);
	note("duplicates %d", dup);
	rec_listing("d");
	(void)seen;
}

static void c_statfs(void)
{
	struct statvfs v;
	R(statvfs(".", &v));
	note("namemax %lu", (unsigned long)v.f_namemax);
}

static void c_mmap(void)
{
	int fd = FD(open("f", O_RDWR | O_CREAT, 0644));
	R(ftruncate(fd, 8192));
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	note("mmap %s", p == MAP_FAILED ? strerrorname_np(errno) : "ok");
	if (p != MAP_FAILED) {
		memcpy(p + 4090, "mapped-write", 12);
		R(msync(p, 8192, MS_SYNC));
		R(munmap(p, 8192));
	}
	char buf[16] = "";
	R(pread(fd, buf, 12, 4090));
	note("read after msync '%s'", buf);
	R(close(fd));
}

static void c_copy_range(void)
{
	put("src", "0123456789abcdef");
	int in = FD(open("src", O_RDONLY)), out = FD(open("dst", O_RDWR | O_CREAT, 0644));
	loff_t a = 4, b = 2;
	R(copy_file_range(in, &a, out, &b, 8, 0));
	R(close(in));
	R(close(out));
	rec_read("dst", 32);
}

/* Runs fn in a child that gave up root (uid and gid 65534) and appends its trace. */
static void as_nobody(void (*fn)(void))
{
	fflush(stdout);
	int pfd[2];
	if (pipe(pfd) != 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		trace_len = 0;
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		fn();
		if (write(pfd[1], trace, trace_len) != (ssize_t)trace_len)
			_exit(4);
		_exit(0);
	}
	close(pfd[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(pfd[0], buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		note("%s", buf);
	}
	close(pfd[0]);
	int ws;
	waitpid(pid, &ws, 0);
	note("child exit %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

static void permissions_as_nobody(void)
{
	FD(open("secret", O_RDONLY));
	FD(open("closed/new", O_CREAT | O_WRONLY, 0644));
	int fd = FD(open("open/new", O_CREAT | O_WRONLY, 0644));
	if (fd >= 0)
		close(fd);
	R(unlink("secret"));
	R(chmod("secret", 0644));
	R(rename("open/new", "closed/new"));
	rec_stat("open/new", 1);
}

/* As an unprivileged user: the kernel's permission checks (default_permissions) must
 * refuse what tmpfs refuses. */
static void c_permissions(void)
{
	put("secret", "s");
	R(chmod("secret", 0600));
	R(mkdir("closed", 0755));
	R(mkdir("open", 0777));
	as_nobody(permissions_as_nobody);
}

/* The files of c_killpriv, each set-user-ID or set-group-ID and writable by everyone. */
static const struct {
	const char *name;
	mode_t mode;
} privfiles[] = {{"suid", 04777}, {"sgid-x", 02777}, {"sgid", 02767}, {"both", 06777}};

static void privfiles_make(const char *prefix)
{
	char name[64];
	for (size_t i = 0; i < sizeof(privfiles) / sizeof(privfiles[0]); i++) {
		snprintf(name, sizeof(name), "%s-%s", prefix, privfiles[i].name);
		put(name, "0123456789");
		R(chmod(name, privfiles[i].mode));
	}
}

static void privfiles_stat(const char *prefix)
{
	char name[64];
	for (size_t i = 0; i < sizeof(privfiles) / sizeof(privfiles[0]); i++) {
		snprintf(name, sizeof(name), "%s-%s", prefix, privfiles[i].name);
		rec_stat(name, 1);
	}
}

/* Changes each file of a set the way named by its prefix. */
static void privfiles_change(const char *prefix)
{
	char name[64];
	for (size_t i = 0; i < sizeof(privfiles) / sizeof(privfiles[0]); i++) {
		snprintf(name, sizeof(name), "%s-%s", prefix, privfiles[i].name);
		if (!strcmp(prefix, "write")) {
			int fd = FD(open(name, O_WRONLY));
			R(pwrite(fd, "ab", 2, 3));
			R(close(fd));
		} else if (!strcmp(prefix, "truncate")) {
			R(truncate(name, 4));
		} else if (!strcmp(prefix, "otrunc")) {
			R(close(FD(open(name, O_WRONLY | O_TRUNC))));
		}
	}
}

static void killpriv_as_nobody(void)
{
	privfiles_change("write");
	privfiles_change("truncate");
	privfiles_change("otrunc");
}

/* Set-user-ID and set-group-ID bits after a change of the file: a write, truncation or
 * O_TRUNC open by a user without CAP_FSETID drops set-user-ID, and set-group-ID where group
 * execution is allowed; root's keeps them; a change of owner drops them. */
static void c_killpriv(void)
{
	static const char *const sets[] = {"write", "truncate", "otrunc", "root", "chown"};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		privfiles_make(sets[i]);
	as_nobody(killpriv_as_nobody);
	char name[64];
	for (size_t i = 0; i < sizeof(privfiles) / sizeof(privfiles[0]); i++) {
		snprintf(name, sizeof(name), "root-%s", privfiles[i].name);
		int fd = FD(open(name, O_WRONLY));
		R(pwrite(fd, "ab", 2, 3));
		R(ftruncate(fd, 5));
		R(close(fd));
		snprintf(name, sizeof(name), "chown-%s", privfiles[i].name);
		R(chown(name, 65534, 65534));
	}
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		privfiles_stat(sets[i]);
	/* File capabilities go with any write, root's too (the kernel removes them: the
	 * daemon's set-user-ID duty does not cover them). VFS_CAP_REVISION_2, effective, CAP_KILL. */
	static const uint32_t cap[5] = {0x02000001, 1u << 5, 0, 0, 0};
	put("caps", "0123456789");
	R(setxattr("caps", "security.capability", cap, sizeof(cap), 0));
	R(getxattr("caps", "security.capability", NULL, 0));
	int fd = FD(open("caps", O_WRONLY));
	R(pwrite(fd, "ab", 2, 3));
	R(close(fd));
	R(getxattr("caps", "security.capability", NULL, 0));
}

static void c_big_write(void)
{
	size_t n = 3 << 20;
	char *buf = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	int fd = FD(open("f", O_RDWR | O_CREAT, 0644));
	R(pwrite(fd, buf, n, 1000));
	char *back = malloc(n);
	R(pread(fd, back, n, 1000));
	note("equal %d", memcmp(buf, back, n) == 0);
	R(fsync(fd));
	R(fdatasync(fd));
	R(close(fd));
	free(buf);
	free(back);
}

static void rec_xattr_list(const char *path)
{
	char buf[1024];
	ssize_t n = listxattr(path, buf, sizeof(buf));
	if (n < 0) {
		note("listxattr %s = -1 %s", path, strerrorname_np(errno));
		return;
	}
	char *names[64];
	int k = 0;
	for (char *p = buf; p < buf + n && k < 64; p += strlen(p) + 1)
		names[k++] = p;
	qsort(names, (size_t)k, sizeof(names[0]), cmp_str);
	char line[1024] = "";
	for (int i = 0; i < k; i++)
		strncat(line, names[i], sizeof(line) - strlen(line) - 2), strcat(line, " ");
	note("listxattr %s: %d names: %s", path, k, line);
}

static void c_xattrs(void)
{
	put("f", "x");
	R(mkdir("d", 0755));
	R(setxattr("f", "user.colour", "blue", 4, 0));
	R(setxattr("f", "user.empty", "", 0, 0));
	R(setxattr("d", "user.on-a-dir", "yes", 3, 0));
	R(setxattr("f", "user.colour", "red", 3, XATTR_CREATE));
	R(setxattr("f", "user.missing", "x", 1, XATTR_REPLACE));
	R(setxattr("f", "user.colour", "green", 5, XATTR_REPLACE));
	char v[64] = "";
	long n = R(getxattr("f", "user.colour", v, sizeof(v)));
	note("value '%.*s'", (int)(n > 0 ? n : 0), v);
	R(getxattr("f", "user.colour", NULL, 0));
	R(getxattr("f", "user.colour", v, 2));
	R(getxattr("f", "user.empty", v, sizeof(v)));
	R(getxattr("f", "user.nothing", v, sizeof(v)));
	rec_xattr_list("f");
	rec_xattr_list("d");
	R(removexattr("f", "user.colour"));
	R(removexattr("f", "user.colour"));
	rec_xattr_list("f");
	R(link("f", "g"));
	R(setxattr("g", "user.via-link", "1", 1, 0));
	rec_xattr_list("f");
}

/* A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): a write past it fails with EFBIG, a
 * write up to it is cut short there. */
static void c_efbig(void)
{
	int fd = FD(open("f", O_RDWR | O_CREAT, 0644));
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {.rlim_cur = 10000, .rlim_max = RLIM_INFINITY};
		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(3);
		char buf[4096] = {0};
		int a = pwrite(fd, buf, sizeof(buf), 9000) == 1000;
		errno = 0;
		int b = pwrite(fd, buf, 1, 20000) < 0 && errno == EFBIG;
		_exit(a * 10 + b);
	}
	int ws;
	waitpid(pid, &ws, 0);
	note("child %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
	struct stat st;
	R(fstat(fd, &st));
	note("size %lld", (long long)st.st_size);
	R(close(fd));
}

/* A large directory (FUSE_BIGDIR entries, 2000 by default; `make torture` asks for
 * 100,000): all listed once, then all removed. */
static void c_bigdir(void)
{
	const char *env = getenv("FUSE_BIGDIR");
	int N = env ? atoi(env) : 2000;
	R(mkdir("big", 0755));
	char name[64];
	int made = 0;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "big/entry-with-a-longish-name-%06d", i);
		int fd = open(name, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0) {
			made++;
			close(fd);
		}
	}
	note("made %d", made);
	DIR *d = opendir("big");
	int listed = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		listed += strncmp(e->d_name, "entry-", 6) == 0;
	if (d)
		closedir(d);
	note("listed %d", listed);
	int removed = 0;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "big/entry-with-a-longish-name-%06d", i);
		removed += unlink(name) == 0;
	}
	note("removed %d", removed);
	R(rmdir("big"));
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{"create_write_read", c_create_write_read}, {"open_errors", c_open_errors},
	{"trunc_append", c_trunc_append},	    {"truncate", c_truncate},
	{"unlink_rmdir", c_unlink_rmdir},	    {"mkdir", c_mkdir},
	{"rename_basic", c_rename_basic},	    {"rename_dirs", c_rename_dirs},
	{"rename_flags", c_rename_flags},	    {"links", c_links},
	{"symlinks", c_symlinks},		    {"unlink_open", c_unlink_open},
	{"sparse_seek", c_sparse_seek},		    {"fallocate", c_fallocate},
	{"attrs", c_attrs},			    {"readdir_many", c_readdir_many},
	{"statfs", c_statfs},			    {"mmap", c_mmap},
	{"copy_range", c_copy_range},		    {"permissions", c_permissions},
	{"big_write", c_big_write},		    {"bigdir", c_bigdir},
	{"xattrs", c_xattrs},			    {"efbig", c_efbig},
	{"killpriv", c_killpriv},
};

/* Runs one case in ROOT/NAME and returns its trace (malloc'd). */
static char *run_case(const char *root, size_t i)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", root, cases[i].name);
	trace_len = 0;
	if (trace)
		trace[0] = '\0';
	if (mkdir(dir, 0755) != 0 || chmod(dir, 0755) != 0 || chdir(dir) != 0) {
		fprintf(stderr, "cannot enter %s: %s\n", dir, strerror(errno));
		exit(2);
	}
	cases[i].fn();
	if (chdir("/") != 0)
		exit(2);
	return strdup(trace ? trace : "");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: test_fuse_posix KERATIN_DIR REFERENCE_DIR [CASE]\n");
		return 2;
	}
	umask(022);
	int failed = 0, ran = 0;
	unsigned total_steps = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 3 && strcmp(argv[3], cases[i].name) != 0)
			continue;
		ran++;
		steps = 0;
		char *a = run_case(argv[1], i);
		char *b = run_case(argv[2], i);
		steps /= 2; /* each step ran twice */
		total_steps += steps;
		if (strcmp(a, b) == 0) {
			printf("ok   %s (%u steps)\n", cases[i].name, steps);
		} else {
			failed++;
			/* The first differing line of each trace. */
			char *la = a, *lb = b;
			while (*la && *lb) {
				char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
				if (!ea || !eb || ea - la != eb - lb || memcmp(la, lb, (size_t)(ea - la)) != 0)
					break;
				la = ea + 1;
				lb = eb + 1;
			}
			printf("FAIL %s\n  keratin:   %.*s\n  reference: %.*s\n", cases[i].name, (int)strcspn(la, "\n"), la,
			       (int)strcspn(lb, "\n"), lb);
		}
		free(a);
		free(b);
	}
	printf("%s: %d cases, %u steps compared, %d differ\n", failed ? "FAIL" : "PASS", ran, total_steps, failed);
	return failed ? 1 : 0;
}
