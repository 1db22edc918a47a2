/*
 * files-bench.c - file creation and deletion through system calls, timed, for
 * bench/fuse-bench.sh: the same program measures every peer (keratin-fs under FUSE, tmpfs,
 * ext4, libfuse's passthrough_ll), so the metadata rows of its table compare file systems,
 * not shells.
 *
 * Phases, each timed as a whole in wall-clock time (the daemon of a FUSE file system does
 * the work in another process, so this process's CPU time would miss it):
 *   create  N times: open(O_CREAT|O_EXCL|O_WRONLY), write SIZE bytes, close
 *   unlink  the N files, in the order they were made
 * Prints one line, "create_per_s,unlink_per_s". The directory is left as it was found.
 *
 * Usage: files-bench DIR [N] [SIZE]   (defaults 2000 files of 4096 bytes). Exit status: 0,
 * 1 when a system call fails (with a one-line message), 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "files-bench: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static long parse_count(const char *s, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || end == s || *end || v < 1 || v > max ? -1 : v;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: files-bench DIR [N] [SIZE]\n");
		return 2;
	}
	long n = argc > 2 ? parse_count(argv[2], 1000000) : 2000;
	long size = argc > 3 ? parse_count(argv[3], 1 << 20) : 4096;
	if (n < 0 || size < 0) {
		fprintf(stderr, "files-bench: N must be 1 to 1000000 and SIZE 1 to 1048576\n");
		return 2;
	}
	char *buf = malloc((size_t)size);
	if (!buf)
		return fail("malloc", "");
	memset(buf, 'k', (size_t)size);
	char path[4096];

	double t0 = now();
	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%07ld", argv[1], i);
		int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			return fail("create", path);
		if (write(fd, buf, (size_t)size) != size)
			return fail("write", path);
		if (close(fd))
			return fail("close", path);
	}
	double t1 = now();
	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%07ld", argv[1], i);
		if (unlink(path))
			return fail("unlink", path);
	}
	double t2 = now();
	printf("%.1f,%.1f\n", (double)n / (t1 - t0), (double)n / (t2 - t1));
	free(buf);
	return 0;
}
