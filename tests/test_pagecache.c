/*
 * test_pagecache.c - page-cache mode on an ordinary file system writes what a commit
 * changed, a few pages, not the page cache's large folios around them.
 *
 * Kernels with large folios for regular files (ext4, xfs on Linux 6.x) cache a file in
 * pieces of up to 2 MiB, and a store through a shared mapping dirties its whole folio,
 * which the commit's sync then writes whole: 2 to 4 MB for a 64-byte update was measured.
 * keratin maps page-cache pools without read-ahead, so that a fault brings one page, and
 * drops what the cache held of the file before, which may be in large folios (here: the
 * pool copied by write(2), as cp does).
 *
 * The pool is prefaulted (KR_OPEN_PREFAULT, as the benchmarks open it): that population
 * reads ahead, which is where large folios come from on a fresh file.
 *
 * The count is the kernel's: /proc/self/io write_bytes, the bytes this process dirtied for
 * storage. Each of 50 small updates must dirty at most MAX_DIRTY (a commit changes about six
 * pages: the lane, its replica, the object's page, parity). Runs in $KR_PAGECACHE_DIR, else
 * /var/tmp; prints SKIP where that is tmpfs (nothing reaches storage) or the kernel keeps
 * no I/O accounting.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_DIRTY (64u << 10) /* per commit: 16 pages */
#define UPDATES 50

/* Bytes dirtied by this process so far, or -1 without I/O accounting. */
static long long dirtied(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	long long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "write_bytes: %lld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* The pool copied to a new file with write(2) and renamed over the old one, as cp and mv
 * would: the cache holds the new file as the kernel caches written files. */
static void copy_over(const char *path)
{
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.copy", path);
	int in = open(path, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	TU_ASSERT(in >= 0 && out >= 0, "open %s, %s", path, tmp);
	char *buf = malloc(1 << 20);
	TU_NOT_NULL(buf);
	for (;;) {
		ssize_t n = read(in, buf, 1 << 20);
		TU_ASSERT(n >= 0, "read %s", path);
		if (n == 0)
			break;
		TU_ASSERT(write(out, buf, (size_t)n) == n, "write %s", tmp);
	}
	TU_ASSERT(fsync(out) == 0, "fsync %s", tmp);
	free(buf);
	close(in);
	close(out);
	TU_ASSERT(rename(tmp, path) == 0, "rename %s", tmp);
}

/* UPDATES updates of 64 bytes of random objects among n; returns the most any dirtied. */
static long long worst_update(kr_pool *pool, const kr_oid *oids, unsigned n)
{
	struct tu_rng r;
	tu_rng_seed(&r, 5);
	long long worst = 0;
	for (unsigned i = 0; i < UPDATES; i++) {
		char v[64];
		tu_fill(v, sizeof(v), i);
		long long before = dirtied();
		TU_OK(kr_update(pool, oids[tu_rng_below(&r, n)], 0, v, sizeof(v)));
		long long d = dirtied() - before;
		worst = d > worst ? d : worst;
	}
	return worst;
}

static char path[256];

/* A failed assertion exits: the 64 MiB pool must not stay behind in /var/tmp. */
static void remove_pool(void) { unlink(path); }

int main(void)
{
	const char *dir = getenv("KR_PAGECACHE_DIR") ? getenv("KR_PAGECACHE_DIR") : "/var/tmp";
	struct statfs fs;
	if (statfs(dir, &fs) != 0 || fs.f_type == 0x01021994 /* tmpfs */ || dirtied() < 0) {
		printf("test_pagecache: SKIP: %s is not an ordinary file system with I/O accounting\n", dir);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/kr-pagecache-%d.pool", dir, (int)getpid());
	unlink(path);
	atexit(remove_pool);
	kr_pool *pool;
	struct kr_create_opts co = {.struct_size = sizeof(co), .size = 64ull << 20, .flags = KR_OPEN_PREFAULT};
	TU_OK(kr_pool_create(path, &co, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_EQ(st.mode, KR_MODE_PAGECACHE);
	enum { N = 2000 };
	static kr_oid oids[N];
	for (unsigned i = 0; i < N; i += 100) { /* a hundred per transaction */
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		for (unsigned k = i; k < i + 100; k++)
			TU_OK(kr_tx_alloc(tx, 64, 1, &oids[k]));
		TU_OK(kr_tx_commit(tx));
	}

	long long fresh = worst_update(pool, oids, N);
	printf("test_pagecache: a 64-byte update dirtied at most %lld bytes (new pool)\n", fresh);
	TU_ASSERT(fresh <= MAX_DIRTY, "a 64-byte update dirtied %lld bytes, more than %u", fresh, MAX_DIRTY);

	TU_OK(kr_pool_close(pool));
	copy_over(path);
	TU_OK(kr_pool_open(path, KR_OPEN_PREFAULT, &pool));
	long long reopened = worst_update(pool, oids, N);
	printf("test_pagecache: a 64-byte update dirtied at most %lld bytes (pool copied, reopened)\n",
	       reopened);
	TU_ASSERT(reopened <= MAX_DIRTY, "after a reopen, a 64-byte update dirtied %lld bytes, more than %u",
		  reopened, MAX_DIRTY);
	TU_OK(kr_pool_close(pool));
	return 0;
}
