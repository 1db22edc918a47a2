/*
 * fs-bench.c - keratin-fs at its library API, with each protection level, against the same
 * operations as system calls on tmpfs, in one run.
 *
 * Operations (each timed over --ops operations, per round):
 *   create     a new empty file in one directory
 *   append     4 KiB appended to one file
 *   overwrite  4 KiB at a random page of that file
 *   small      512 B at a random aligned offset of that file (a whole page copied on write)
 *   read       4 KiB from a random page of that file
 *   unlink     the files made by create
 * Peers: keratin-fs made with full protection (metadata replica + strip CRCs + parity),
 * with the metadata replica only ("meta"), with none ("none": the NOVA baseline), and tmpfs
 * (open/pwrite/pread/unlink in a directory of /dev/shm). Every round runs every peer, in a
 * rotating order, so that noise from other processes falls on all of them; the table shows
 * each peer's median over the rounds in ns per operation, then the ratios the NOVA-Fortis
 * paper reports as overheads (full and meta against none) and keratin-fs against tmpfs.
 * Times are the thread's CPU time (user and system), not wall-clock time: on a shared
 * machine wall-clock time also counts other processes' turns on the core.
 * keratin-fs pools are in /dev/shm, treated as persistent memory (clwb/clflushopt + sfence).
 *
 * Usage: fs-bench [--ops N] [--rounds R]   (defaults 2000 and 5). Exit status: 0, 1 on a
 * failure, 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keratin_fs.h"

enum { OP_CREATE, OP_APPEND, OP_OVERWRITE, OP_SMALL, OP_READ, OP_UNLINK, NOPS };
static const char *op_name[NOPS] = {"create", "append 4K", "overwrite 4K", "overwrite 512", "read 4K", "unlink"};
enum { PEER_FULL, PEER_META, PEER_NONE, PEER_TMPFS, NPEERS };
static const char *peer_name[NPEERS] = {"full", "meta", "none", "tmpfs"};
static const uint32_t unprotect[] = {0, KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY,
				     KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY};

static unsigned nops = 2000, rounds = 5;
static char buf[4096];

/* The thread's CPU time (user + system): the machine is shared, and wall-clock time would
 * count the moments another process held the core. Nothing here waits for a device. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, long rc)
{
	fprintf(stderr, "fs-bench: %s failed: %ld (%s)\n", what, rc, rc < 0 && rc > -4096 ? strerror((int)-rc) : kr_errmsg());
	exit(1);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One round of every operation on keratin-fs; ns per operation into t. */
static void run_fs(uint32_t unprot, double *t)
{
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/kr-fs-bench-%d.pool", (int)getpid());
	unlink(path);
	uint64_t size = (uint64_t)nops * 4096 * 3 + (64 << 20);
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .ninodes = (nops + 127) / 32 * 32 + 64,
				    .open_flags = KR_OPEN_FORCE_PMEM, .unprotect = unprot};
	int rc = kr_fs_mkfs(path, &o);
	kr_fs *fs;
	if (rc || (rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT, &fs)))
		die("mkfs/mount", rc);
	struct kr_fs_attr dir, file;
	if ((rc = kr_fs_mkdir(fs, KR_FS_ROOT_INO, "d", 0755, 0, 0, &dir)) ||
	    (rc = kr_fs_create(fs, KR_FS_ROOT_INO, "data", 0644, 0, 0, &file)))
		die("setup", rc);
	char name[32];
	uint64_t seed = 42;
	double t0 = now();
	for (unsigned i = 0; i < nops; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		if ((rc = kr_fs_create(fs, dir.ino, name, 0644, 0, 0, NULL)))
			die("create", rc);
	}
	double t1 = now();
	for (unsigned i = 0; i < nops; i++)
		if (kr_fs_write(fs, file.ino, buf, 4096, (uint64_t)i * 4096) != 4096)
			die("append", -1);
	double t2 = now();
	for (unsigned i = 0; i < nops; i++)
		if (kr_fs_write(fs, file.ino, buf, 4096, rnd(&seed) % nops * 4096) != 4096)
			die("overwrite", -1);
	double t3 = now();
	for (unsigned i = 0; i < nops; i++)
		if (kr_fs_write(fs, file.ino, buf, 512, rnd(&seed) % (nops * 8) * 512) != 512)
			die("small overwrite", -1);
	double t4 = now();
	for (unsigned i = 0; i < nops; i++)
		if (kr_fs_read(fs, file.ino, buf, 4096, rnd(&seed) % nops * 4096) != 4096)
			die("read", -1);
	double t5 = now();
	for (unsigned i = 0; i < nops; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		if ((rc = kr_fs_unlink(fs, dir.ino, name)))
			die("unlink", rc);
	}
	double t6 = now();
	double tt[] = {t0, t1, t2, t3, t4, t5, t6};
	for (int k = 0; k < NOPS; k++)
		t[k] = (tt[k + 1] - tt[k]) / nops;
	if ((rc = kr_fs_unmount(fs)))
		die("unmount", rc);
	unlink(path);
}

static void run_tmpfs(double *t)
{
	char dir[128], path[192];
	snprintf(dir, sizeof(dir), "/dev/shm/kr-fs-bench-%d.d", (int)getpid());
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/data", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("tmpfs open", -errno);
	uint64_t seed = 42;
	double t0 = now();
	for (unsigned i = 0; i < nops; i++) {
		snprintf(path, sizeof(path), "%s/f%u", dir, i);
		int f = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (f < 0)
			die("tmpfs create", -errno);
		close(f);
	}
	double t1 = now();
	for (unsigned i = 0; i < nops; i++)
		if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096)
			die("tmpfs append", -errno);
	double t2 = now();
	for (unsigned i = 0; i < nops; i++)
		if (pwrite(fd, buf, 4096, (off_t)(rnd(&seed) % nops * 4096)) != 4096)
			die("tmpfs overwrite", -errno);
	double t3 = now();
	for (unsigned i = 0; i < nops; i++)
		if (pwrite(fd, buf, 512, (off_t)(rnd(&seed) % (nops * 8) * 512)) != 512)
			die("tmpfs small", -errno);
	double t4 = now();
	for (unsigned i = 0; i < nops; i++)
		if (pread(fd, buf, 4096, (off_t)(rnd(&seed) % nops * 4096)) != 4096)
			die("tmpfs read", -errno);
	double t5 = now();
	for (unsigned i = 0; i < nops; i++) {
		snprintf(path, sizeof(path), "%s/f%u", dir, i);
		if (unlink(path) != 0)
			die("tmpfs unlink", -errno);
	}
	double t6 = now();
	double tt[] = {t0, t1, t2, t3, t4, t5, t6};
	for (int k = 0; k < NOPS; k++)
		t[k] = (tt[k + 1] - tt[k]) / nops;
	close(fd);
	snprintf(path, sizeof(path), "%s/data", dir);
	unlink(path);
	rmdir(dir);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ops", required_argument, NULL, 'n'}, {"rounds", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		long v = optarg ? strtol(optarg, NULL, 10) : 0;
		if (c == 'n' && v > 0)
			nops = (unsigned)v;
		else if (c == 'r' && v > 0)
			rounds = (unsigned)v;
		else {
			fprintf(stderr, "usage: fs-bench [--ops N] [--rounds R]\n");
			return 2;
		}
	}
	memset(buf, 'k', sizeof(buf));
	double *t = calloc((size_t)rounds * NPEERS * NOPS, sizeof(double));
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned k = 0; k < NPEERS; k++) {
			unsigned p = (r + k) % NPEERS; /* rotate who goes first */
			double *row = &t[((size_t)p * rounds + r) * NOPS];
			if (p == PEER_TMPFS)
				run_tmpfs(row);
			else
				run_fs(unprotect[p], row);
		}
	double med[NPEERS][NOPS];
	double *col = calloc(rounds, sizeof(double));
	for (int p = 0; p < NPEERS; p++)
		for (int k = 0; k < NOPS; k++) {
			for (unsigned r = 0; r < rounds; r++)
				col[r] = t[((size_t)p * rounds + r) * NOPS + k];
			qsort(col, rounds, sizeof(double), cmp_double);
			med[p][k] = col[rounds / 2];
		}
	printf("fs-bench: %u operations per kind, median of %u rounds, ns per operation\n", nops, rounds);
	printf("%-14s %9s %9s %9s %9s   %9s %9s %10s %10s\n", "operation", peer_name[0], peer_name[1], peer_name[2],
	       peer_name[3], "full/none", "meta/none", "none/tmpfs", "full/tmpfs");
	for (int k = 0; k < NOPS; k++)
		printf("%-14s %9.0f %9.0f %9.0f %9.0f   %9.2f %9.2f %10.2f %10.2f\n", op_name[k], med[0][k], med[1][k],
		       med[2][k], med[3][k], med[0][k] / med[2][k], med[1][k] / med[2][k], med[2][k] / med[3][k],
		       med[0][k] / med[3][k]);
	free(col);
	free(t);
	return 0;
}
