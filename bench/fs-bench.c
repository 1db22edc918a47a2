/*
 * fs-bench.c - keratin-fs at its library API, with each protection level, against the same
 * operations as system calls on tmpfs, in one run; and the space an aged file system spends
 * on redundancy.
 *
 * Operations (each timed over --ops operations, per round):
 *   create     a new empty file in one directory
 *   append     4 KiB appended to one file
 *   overwrite  4 KiB at a random page of that file
 *   small      512 B at a random aligned offset of that file (copy-on-write: a whole page;
 *              relaxed: in place)
 *   read       4 KiB from a random page of that file
 *   unlink     the files made by create
 * Peers: keratin-fs made with no protection ("none": the NOVA baseline), the metadata
 * replica only ("meta"), metadata replica + strip CRCs + parity ("full"), full mounted with
 * write protection ("+wprot", KR_FS_MOUNT_WPROTECT), full in relaxed mode ("relaxed",
 * KR_FS_RELAXED: overwrites in place), full with zone parity ("zone", KR_FS_PARITY_ZONE with
 * 64 columns: a write also reads the old page and the row's parity page), and tmpfs (open/pwrite/pread/unlink in a directory of
 * /dev/shm). Every round runs every peer, in a rotating order, so that noise from other
 * processes falls on all of them; the table shows each peer's median over the rounds in ns
 * per operation, then the ratios the NOVA-Fortis paper reports as overheads. Times are the
 * thread's CPU time (user and system), not wall-clock time: on a shared machine wall-clock
 * time also counts other processes' turns on the core. keratin-fs pools are in /dev/shm,
 * treated as persistent memory (clwb/clflushopt + sfence).
 *
 * Space: a fully protected pool is aged - filled to 90 % of its data pages with files of
 * mixed sizes (4 KiB to 1 MiB, log-uniform), a third of them deleted at random, filled to
 * 90 % again - and the bytes in use are split into primary data, primary metadata (log
 * pages and inode slots), metadata redundancy (their replica) and data redundancy (two CRC
 * copies and a parity strip per data page; with zone parity, the two CRC copies and the whole
 * parity area, one page per row: on an aged pool every row holds data), each as a share of
 * all bytes in use. Once with page parity, once with zone parity.
 *
 * Mount scan: a pool of --scan-files empty files (in directories of 1000) is mounted with
 * one scan thread and with two (kr_fs_mount_opts.scan_threads; at most the CPUs online),
 * alternately, --rounds times each; the table shows the median wall-clock time of a mount
 * (the scan's threads run at once, so here wall-clock time is the measure), the speed-up,
 * and the CPU time of the whole process (what the threads cost together).
 *
 * Threads (--threads T, instead of everything above): 1, 2, ... T threads, each making --ops
 * 4 KiB overwrites at random pages of its own file (of --ops pages, written first) on one
 * pool, page parity and zone parity; the table shows the median over the rounds of the
 * operations per second of wall-clock time, all threads together, and the speed-up over one
 * thread: how far writes to different files run in parallel.
 *
 * Usage: fs-bench [--ops N] [--rounds R] [--space-mib M] [--scan-files F] [--threads T] [--quick]
 * (defaults 2000, 5, 256, 50000; --quick: 200 operations, 1 round, a 32 MiB pool, 5000
 * files). Prints markdown tables. Exit status: 0, 1 on a failure, 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keratin_fs.h"

enum { OP_CREATE, OP_APPEND, OP_OVERWRITE, OP_SMALL, OP_READ, OP_UNLINK, NOPS };
static const char *op_name[NOPS] = {"create", "append 4K", "overwrite 4K", "overwrite 512", "read 4K", "unlink"};
enum { PEER_NONE, PEER_META, PEER_FULL, PEER_WPROT, PEER_RELAXED, PEER_ZONE, PEER_TMPFS, NPEERS };
static const char *peer_name[NPEERS] = {"none", "meta", "full", "+wprot", "relaxed", "zone", "tmpfs"};
static const struct {
	uint32_t unprotect;
	unsigned mount_flags;
	uint32_t parity;
} peer[] = {
	[PEER_NONE] = {KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY, 0, 0},
	[PEER_META] = {KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY, 0, 0},
	[PEER_FULL] = {0, 0, KR_FS_PARITY_PAGE},
	[PEER_WPROT] = {0, KR_FS_MOUNT_WPROTECT, KR_FS_PARITY_PAGE},
	[PEER_RELAXED] = {KR_FS_RELAXED, 0, KR_FS_PARITY_PAGE},
	[PEER_ZONE] = {0, 0, KR_FS_PARITY_ZONE},
};

static unsigned nops = 2000, rounds = 5, space_mib = 256, scan_files = 50000;
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
	fprintf(stderr, "fs-bench: %s failed: %ld (%s)\n", what, rc, rc < 0 && rc > -1000 ? strerror((int)-rc) : kr_errmsg());
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
static void run_fs(uint32_t unprot, unsigned mount_flags, uint32_t parity, double *t)
{
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/kr-fs-bench-%d.pool", (int)getpid());
	unlink(path);
	uint64_t size = (uint64_t)nops * 4096 * 3 + (64 << 20);
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .ninodes = (nops + 127) / 32 * 32 + 64,
				    .open_flags = KR_OPEN_FORCE_PMEM, .unprotect = unprot, .parity = parity};
	int rc = kr_fs_mkfs(path, &o);
	kr_fs *fs;
	if (rc || (rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT | mount_flags, &fs)))
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

/* ---- space on an aged file system ------------------------------------------------------- */
struct space {
	double data, meta, meta_red, data_red; /* bytes in use */
	unsigned files;
	uint32_t zone_columns; /* zone parity; 0 = page parity */
};

/* Files of log-uniform sizes 4 KiB..1 MiB until 90 % of the data pages are in use (or
 * ENOSPC); the names go to names[*n]. */
static void fill(kr_fs *fs, uint64_t *seed, unsigned *n, unsigned cap, uint64_t *next_name)
{
	struct kr_fs_statfs st;
	char name[32];
	for (;;) {
		if (kr_fs_statfs(fs, &st))
			die("statfs", -1);
		if ((st.blocks - st.bfree) * 10 >= st.blocks * 9 || st.ffree < 2 || *n == cap)
			return;
		uint64_t size = 4096ull << (rnd(seed) % 9); /* 4 KiB .. 1 MiB */
		size += rnd(seed) % size;
		snprintf(name, sizeof(name), "a%llu", (unsigned long long)(*next_name)++);
		struct kr_fs_attr a;
		int rc = kr_fs_create(fs, KR_FS_ROOT_INO, name, 0644, 0, 0, &a);
		if (rc == -ENOSPC)
			return;
		if (rc)
			die("aging create", rc);
		static char chunk[65536];
		for (uint64_t off = 0; off < size; off += sizeof(chunk)) {
			size_t len = size - off < sizeof(chunk) ? size - off : sizeof(chunk);
			ssize_t w = kr_fs_write(fs, a.ino, chunk, len, off);
			if (w == -ENOSPC)
				break;
			if (w != (ssize_t)len)
				die("aging write", w);
		}
		(*n)++;
	}
}

static struct space age(uint32_t parity)
{
	char path[128], name[32];
	snprintf(path, sizeof(path), "/dev/shm/kr-fs-bench-age-%d.pool", (int)getpid());
	unlink(path);
	uint64_t size = (uint64_t)space_mib << 20;
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .ninodes = (uint32_t)(size >> 16),
				    .open_flags = KR_OPEN_FORCE_PMEM, .parity = parity};
	kr_fs *fs;
	int rc = kr_fs_mkfs(path, &o);
	if (rc || (rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs)))
		die("aging mkfs/mount", rc);
	uint64_t seed = 7, next = 0;
	unsigned n = 0, cap = o.ninodes;
	fill(fs, &seed, &n, cap, &next);
	unsigned deleted = 0;
	for (uint64_t i = 0; i < next; i++) /* a third of the files, at random */
		if (rnd(&seed) % 3 == 0) {
			snprintf(name, sizeof(name), "a%llu", (unsigned long long)i);
			if (kr_fs_unlink(fs, KR_FS_ROOT_INO, name) == 0)
				deleted++;
		}
	n -= deleted;
	fill(fs, &seed, &n, cap, &next);
	struct kr_fs_statfs st;
	if (kr_fs_statfs(fs, &st))
		die("statfs", -1);
	uint32_t columns;
	bool zoned = kr_fs_parity_layout(fs, &columns) == KR_FS_PARITY_ZONE;
	struct space sp = {.files = n, .zone_columns = columns};
	double pages = (double)(st.blocks - st.bfree);
	sp.data = pages * 4096;
	sp.meta = (double)(st.log_pages - st.log_pages_free) * 4096 + (double)(st.files - st.ffree) * 128;
	sp.meta_red = sp.meta; /* the replica: every log page and slot twice */
	if (zoned) /* two copies of 8 strip CRCs; the parity area */
		sp.data_red = pages * 2 * 32 + (double)((st.blocks + columns - 1) / columns) * 4096;
	else /* two copies of 8 strip CRCs, one parity strip */
		sp.data_red = pages * (2 * 32 + 512);
	if ((rc = kr_fs_unmount(fs)))
		die("unmount", rc);
	unlink(path);
	return sp;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---- mount scan ------------------------------------------------------------------------ */
static double clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One mount of path with `threads` scan threads (the library caps them at the CPUs online):
 * ns of wall-clock time, and in *cpu ns of CPU time of the whole process (every thread). */
static double timed_mount(const char *path, uint32_t threads, double *cpu)
{
	struct kr_fs_mount_opts o = {.struct_size = sizeof(o), .flags = KR_OPEN_FORCE_PMEM, .scan_threads = threads};
	kr_fs *fs;
	double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
	int rc = kr_fs_mount_opts(path, &o, &fs);
	double t1 = clock_ns(CLOCK_MONOTONIC), c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (rc || (rc = kr_fs_unmount(fs)))
		die("scan mount", rc);
	*cpu = c1 - c0;
	return t1 - t0;
}

static void mount_scan(void)
{
	char path[128], name[32];
	snprintf(path, sizeof(path), "/dev/shm/kr-fs-bench-scan-%d.pool", (int)getpid());
	unlink(path);
	uint64_t ndirs = (scan_files + 999) / 1000, inodes = (scan_files + ndirs + 64 + 31) / 32 * 32;
	uint64_t meta = (inodes + ndirs * 16) * 4096; /* a page per log; directories grow more */
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 2 * meta + (64 << 20), .ninodes = (uint32_t)inodes,
				    .meta_bytes = meta, .open_flags = KR_OPEN_FORCE_PMEM};
	kr_fs *fs;
	int rc = kr_fs_mkfs(path, &o);
	if (rc || (rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs)))
		die("scan mkfs/mount", rc);
	struct kr_fs_attr d;
	for (unsigned i = 0; i < scan_files; i++) {
		if (i % 1000 == 0) {
			snprintf(name, sizeof(name), "d%u", i / 1000);
			if ((rc = kr_fs_mkdir(fs, KR_FS_ROOT_INO, name, 0755, 0, 0, &d)))
				die("scan mkdir", rc);
		}
		snprintf(name, sizeof(name), "f%u", i);
		if ((rc = kr_fs_create(fs, d.ino, name, 0644, 0, 0, NULL)))
			die("scan create", rc);
	}
	if ((rc = kr_fs_unmount(fs)))
		die("scan unmount", rc);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double *t = calloc(4 * (size_t)rounds, sizeof(double)); /* wall 1, wall 2, cpu 1, cpu 2 */
	if (!t)
		die("calloc", -ENOMEM);
	for (unsigned r = 0; r < rounds; r++) /* alternate who goes first */
		for (unsigned k = 0; k < 2; k++) {
			unsigned w = (r + k) % 2;
			t[w * rounds + r] = timed_mount(path, w + 1, &t[(2 + w) * rounds + r]);
		}
	for (unsigned k = 0; k < 4; k++)
		qsort(t + k * rounds, rounds, sizeof(double), cmp_double);
	double m[4];
	for (unsigned k = 0; k < 4; k++)
		m[k] = t[k * rounds + rounds / 2] / 1e6;
	printf("\nMount scan of a pool of %u empty files in %llu directories (%ld CPUs online; load average "
	       "counts), median of %u mounts each, ms:\n\n", scan_files, (unsigned long long)ndirs, cpus, rounds);
	printf("| mount scan | 1 thread, wall | 2 threads, wall | speed-up | 1 thread, CPU | 2 threads, CPU |\n"
	       "|---|---:|---:|---:|---:|---:|\n");
	printf("| mount scan %u files | %.1f | %.1f | %.2f | %.1f | %.1f |\n", scan_files, m[0], m[1], m[0] / m[1], m[2],
	       m[3]);
	free(t);
	unlink(path);
}

/* ---- threads -------------------------------------------------------------------------- */
struct writer {
	kr_fs *fs;
	uint64_t ino, seed;
	pthread_barrier_t *go;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	_Alignas(64) char page[4096];
	memset(page, 'w', sizeof(page));
	pthread_barrier_wait(w->go);
	for (unsigned i = 0; i < nops; i++)
		if (kr_fs_write(w->fs, w->ino, page, 4096, rnd(&w->seed) % nops * 4096) != 4096)
			die("threaded overwrite", -1);
	return NULL;
}

/* One round: `threads` writers on files of their own; operations per second of wall-clock
 * time, all threads together. */
static double run_threads(unsigned threads, uint32_t parity)
{
	char path[128], name[32];
	snprintf(path, sizeof(path), "/dev/shm/kr-fs-bench-threads-%d.pool", (int)getpid());
	unlink(path);
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = (uint64_t)threads * nops * 4096 * 3 + (64 << 20),
				    .open_flags = KR_OPEN_FORCE_PMEM, .parity = parity};
	kr_fs *fs;
	int rc = kr_fs_mkfs(path, &o);
	if (rc || (rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT, &fs)))
		die("threads mkfs/mount", rc);
	struct writer w[16];
	pthread_t t[16];
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, threads + 1);
	for (unsigned i = 0; i < threads; i++) {
		struct kr_fs_attr a;
		snprintf(name, sizeof(name), "w%u", i);
		if ((rc = kr_fs_create(fs, KR_FS_ROOT_INO, name, 0644, 0, 0, &a)))
			die("threads create", rc);
		for (unsigned k = 0; k < nops; k++)
			if (kr_fs_write(fs, a.ino, buf, 4096, (uint64_t)k * 4096) != 4096)
				die("threads fill", -1);
		w[i] = (struct writer){.fs = fs, .ino = a.ino, .seed = 42 + i, .go = &go};
		if (pthread_create(&t[i], NULL, writer_main, &w[i]))
			die("pthread_create", -1);
	}
	pthread_barrier_wait(&go);
	double t0 = clock_ns(CLOCK_MONOTONIC);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double t1 = clock_ns(CLOCK_MONOTONIC);
	pthread_barrier_destroy(&go);
	if ((rc = kr_fs_unmount(fs)))
		die("threads unmount", rc);
	unlink(path);
	return (double)threads * nops / ((t1 - t0) / 1e9);
}

static void threads_table(unsigned max)
{
	double *col = calloc(rounds, sizeof(double));
	if (!col)
		die("calloc", -ENOMEM);
	printf("fs-bench --threads: 4 KiB overwrites at random pages, %u per thread, each thread its own file "
	       "(%ld CPUs online), median of %u rounds, operations per second (wall clock):\n\n",
	       nops, sysconf(_SC_NPROCESSORS_ONLN), rounds);
	printf("| parity | threads | ops/s | speed-up |\n|---|---:|---:|---:|\n");
	for (uint32_t parity = KR_FS_PARITY_PAGE; parity <= KR_FS_PARITY_ZONE; parity++) {
		double one = 0;
		for (unsigned n = 1; n <= max; n++) {
			for (unsigned r = 0; r < rounds; r++)
				col[r] = run_threads(n, parity);
			qsort(col, rounds, sizeof(double), cmp_double);
			double m = col[rounds / 2];
			if (n == 1)
				one = m;
			printf("| %s | %u | %.0f | %.2f |\n", parity == KR_FS_PARITY_ZONE ? "zone" : "page", n, m, m / one);
		}
	}
	free(col);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"ops", required_argument, NULL, 'n'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"space-mib", required_argument, NULL, 's'},
						 {"scan-files", required_argument, NULL, 'f'},
						 {"threads", required_argument, NULL, 't'},
						 {"quick", no_argument, NULL, 'q'},
						 {NULL, 0, NULL, 0}};
	int c;
	unsigned threads = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		long v = optarg ? strtol(optarg, NULL, 10) : 0;
		if (c == 'n' && v > 0)
			nops = (unsigned)v;
		else if (c == 'r' && v > 0)
			rounds = (unsigned)v;
		else if (c == 's' && v >= 8)
			space_mib = (unsigned)v;
		else if (c == 'f' && v >= 1 && v <= 1000000)
			scan_files = (unsigned)v;
		else if (c == 't' && v >= 1 && v <= 16)
			threads = (unsigned)v;
		else if (c == 'q')
			nops = 200, rounds = 1, space_mib = 32, scan_files = 5000;
		else {
			fprintf(stderr, "usage: fs-bench [--ops N] [--rounds R] [--space-mib M (>= 8)] [--scan-files F] [--threads T (1..16)] [--quick]\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "fs-bench: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	memset(buf, 'k', sizeof(buf));
	if (threads) {
		threads_table(threads);
		return 0;
	}
	double *t = calloc((size_t)rounds * NPEERS * NOPS, sizeof(double));
	double *col = calloc(rounds, sizeof(double));
	if (!t || !col)
		die("calloc", -ENOMEM);
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned k = 0; k < NPEERS; k++) {
			unsigned p = (r + k) % NPEERS; /* rotate who goes first */
			double *row = &t[((size_t)p * rounds + r) * NOPS];
			if (p == PEER_TMPFS)
				run_tmpfs(row);
			else
				run_fs(peer[p].unprotect, peer[p].mount_flags, peer[p].parity, row);
		}
	double med[NPEERS][NOPS];
	for (int p = 0; p < NPEERS; p++)
		for (int k = 0; k < NOPS; k++) {
			for (unsigned r = 0; r < rounds; r++)
				col[r] = t[((size_t)p * rounds + r) * NOPS + k];
			qsort(col, rounds, sizeof(double), cmp_double);
			med[p][k] = col[rounds / 2];
		}
	printf("fs-bench: %u operations per kind, median of %u rounds, ns of thread CPU time per operation\n\n", nops,
	       rounds);
	printf("| operation |");
	for (int p = 0; p < NPEERS; p++)
		printf(" %s |", peer_name[p]);
	printf(" meta/none | full/none | +wprot/full | relaxed/full | relaxed/none | zone/full | none/tmpfs | full/tmpfs "
	       "|\n|---|");
	for (int p = 0; p < NPEERS + 8; p++)
		printf("---:|");
	printf("\n");
	for (int k = 0; k < NOPS; k++) {
		printf("| %s |", op_name[k]);
		for (int p = 0; p < NPEERS; p++)
			printf(" %.0f |", med[p][k]);
		const double *m = (const double *)med; /* shorthand: m[p * NOPS + k] */
#define R(a, b) (m[(a) * NOPS + k] / m[(b) * NOPS + k])
		printf(" %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", R(PEER_META, PEER_NONE),
		       R(PEER_FULL, PEER_NONE), R(PEER_WPROT, PEER_FULL), R(PEER_RELAXED, PEER_FULL), R(PEER_RELAXED, PEER_NONE),
		       R(PEER_ZONE, PEER_FULL), R(PEER_NONE, PEER_TMPFS), R(PEER_FULL, PEER_TMPFS));
#undef R
	}
	printf("\nSpace on an aged, fully protected %u MiB pool:\n\n", space_mib);
	printf("| parity | files | MiB in use | data | metadata | metadata redundancy | data redundancy | redundancy in all |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (uint32_t layout = KR_FS_PARITY_PAGE; layout <= KR_FS_PARITY_ZONE; layout++) {
		struct space sp = age(layout);
		double used = sp.data + sp.meta + sp.meta_red + sp.data_red;
		char name[32];
		snprintf(name, sizeof(name), sp.zone_columns ? "zone (%u columns)" : "page", sp.zone_columns);
		printf("| %s | %u | %.1f | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %.1f %% |\n", name, sp.files, used / 1048576,
		       100 * sp.data / used, 100 * sp.meta / used, 100 * sp.meta_red / used, 100 * sp.data_red / used,
		       100 * (sp.meta_red + sp.data_red) / used);
	}
	mount_scan();
	free(col);
	free(t);
	return 0;
}
