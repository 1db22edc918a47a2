/*
 * test_fs_shards.c - keratin-fs's sharded free-space allocators (src/fs/state/fs_alloc.c).
 *
 * Cases (argv[1]):
 *   threads N  N threads (each allocating from its home shard) create files, append, write
 *              past the end (holes), truncate and unlink at once in directories of their
 *              own until the data area is nearly full, then free part of it and fill again;
 *              after them the checker is clean (every shard's free count matches its bits),
 *              statfs's free counts equal a recount of what the files hold, and a remount
 *              (with the default shards and with one) gives the same counts
 *              Run by make check's ThreadSanitizer stage too, where a breach of the locking
 *              rules is a data race or a lock-order inversion and fails the test: this one
 *              checks invariants fs_enter.c 1, fs_enter.c 2, fs_enter.c 4, fs_enter.c 6, fs_enter.c 7.
 *   enospc     one thread whose home shard is full still gets pages from the others (a
 *              write needing more than its shard has left takes runs from two shards); once
 *              every shard is full a write fails with -ENOSPC, the file as it was, every
 *              page it took given back; the checker and a remount agree
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "keratin_fs.h"
#include "testutil.h"

#define SHARDS 4

static kr_fs *mount_shards(const char *path, unsigned shards)
{
	struct kr_fs_mount_opts o = KR_FS_MOUNT_OPTS_INIT;
	o.flags = KR_OPEN_FORCE_PMEM;
	o.alloc_shards = shards;
	kr_fs *fs;
	TU_OK(kr_fs_mount_opts(path, &o, &fs));
	return fs;
}

static void mkfs_small(const char *path, uint64_t size)
{
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = size, .open_flags = KR_OPEN_FORCE_PMEM};
	TU_OK(kr_fs_mkfs(path, &o));
}

static void expect_clean(kr_fs *fs, const char *when)
{
	struct kr_fs_check_report rep;
	if (kr_fs_check(fs, stderr, &rep) != KR_OK)
		TU_FAIL("%s: kr_fs_check found %llu problems", when, (unsigned long long)rep.problems);
}

/* statfs's free counts against a recount from what the live inodes hold (no snapshots):
 * data pages from their page indexes, log pages from their chains, slots from the inode
 * table; and the allocators' own bits. Exclusive: taken while no operation runs. */
static void expect_counts(kr_fs *fs, struct kr_fs_statfs *out, const char *when)
{
	TU_OK(kr_fs_statfs(fs, out));
	uint64_t data = 0, log = 0, inodes = 0, bits = 0;
	for (uint64_t ino = 1; ino < fs->sb.ninodes; ino++) {
		const struct krfs_inode *ip = fs->inodes[ino];
		if (!ip)
			continue;
		inodes++;
		log += ip->npages;
		uint64_t key = 0;
		uint32_t val;
		while (krfs_radix_next(&ip->map, key, &key, &val))
			data++, key++;
	}
	for (uint64_t i = 0; i < fs->sb.data_pages; i++)
		bits += krfs_bm_test(&fs->data_bm, i);
	TU_ASSERT(out->bfree == fs->sb.data_pages - data && bits == data,
		  "%s: statfs says %llu data pages free, the files hold %llu of %llu (%llu bits set)", when,
		  (unsigned long long)out->bfree, (unsigned long long)data, (unsigned long long)fs->sb.data_pages,
		  (unsigned long long)bits);
	TU_ASSERT(out->log_pages_free == fs->sb.meta_pages - log, "%s: %llu log pages free, the logs hold %llu of %llu",
		  when, (unsigned long long)out->log_pages_free, (unsigned long long)log,
		  (unsigned long long)fs->sb.meta_pages);
	TU_ASSERT(out->ffree == out->files - inodes, "%s: %llu inode slots free, %llu live of %llu", when,
		  (unsigned long long)out->ffree, (unsigned long long)inodes, (unsigned long long)out->files);
}

/* ---- threads ------------------------------------------------------------------------------ */
#define FILES 24

struct worker {
	kr_fs *fs;
	uint64_t seed, dir;
	unsigned rounds;
	uint64_t ino[FILES], size[FILES];
	bool tail_written[FILES]; /* the last change to the file was a write (of buf) */
	unsigned ops, nospc;
	char why[200];
};

static uint64_t data_free(kr_fs *fs)
{
	struct kr_fs_statfs st;
	return kr_fs_statfs(fs, &st) == 0 ? st.bfree : 0;
}

/* A failure other than -ENOSPC ends the worker with a reason. */
static bool op_ok(struct worker *w, long rc, const char *what, unsigned f)
{
	if (rc >= 0)
		return true;
	if (rc == -ENOSPC) {
		w->nospc++;
		return true;
	}
	snprintf(w->why, sizeof(w->why), "%s of file %u: %ld", what, f, rc);
	return false;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tu_rng r;
	tu_rng_seed(&r, w->seed);
	uint8_t *buf = malloc(8 * 4096);
	memset(buf, (int)(w->seed & 0xff), 8 * 4096);
	uint64_t total = w->fs->sb.data_pages;
	/* Each round fills to 97 % of the data area, then frees until 60 % is free. */
	for (unsigned round = 0; round < w->rounds && !w->why[0]; round++) {
		for (bool filling = true; !w->why[0];) {
			uint64_t nfree = data_free(w->fs);
			if (filling && nfree < total * 3 / 100)
				filling = false;
			else if (!filling && nfree > total * 60 / 100)
				break;
			unsigned f = (unsigned)tu_rng_below(&r, FILES);
			char name[16];
			snprintf(name, sizeof(name), "f%u", f);
			long rc = 0;
			const char *what = "";
			w->ops++;
			if (!w->ino[f]) {
				struct kr_fs_attr a;
				what = "create";
				rc = kr_fs_create(w->fs, w->dir, name, 0600, 0, 0, &a);
				if (rc == 0)
					w->ino[f] = a.ino, w->size[f] = 0, w->tail_written[f] = false;
			} else if (filling) {
				uint64_t n = tu_rng_range(&r, 1, 8) * 4096, off = w->size[f];
				if (tu_rng_below(&r, 3) == 0)
					off += tu_rng_range(&r, 1, 16) * 4096; /* past the end: a hole */
				what = "write";
				rc = kr_fs_write(w->fs, w->ino[f], buf, n, off);
				if (rc >= 0)
					w->size[f] = off + n, w->tail_written[f] = true;
			} else if (tu_rng_below(&r, 2) == 0) {
				what = "unlink";
				rc = kr_fs_unlink(w->fs, w->dir, name);
				if (rc == 0)
					w->ino[f] = 0;
			} else {
				uint64_t size = w->size[f] / 2 & ~(uint64_t)4095;
				what = "truncate";
				rc = kr_fs_truncate(w->fs, w->ino[f], size);
				if (rc == 0)
					w->size[f] = size, w->tail_written[f] = false;
			}
			if (!op_ok(w, rc, what, f))
				break;
		}
	}
	/* The last pages written read back. */
	for (unsigned f = 0; f < FILES && !w->why[0]; f++) {
		if (!w->ino[f] || !w->tail_written[f])
			continue;
		uint8_t got[4096];
		if (kr_fs_read(w->fs, w->ino[f], got, 4096, w->size[f] - 4096) != 4096 || memcmp(got, buf, 4096) != 0)
			snprintf(w->why, sizeof(w->why), "file %u: its last page does not read back", f);
	}
	free(buf);
	return NULL;
}

static void case_threads(unsigned nthreads)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-shards-threads");
	mkfs_small(path, 24 << 20);
	kr_fs *fs = mount_shards(path, SHARDS);
	TU_ASSERT(fs->data_bm.nshards == SHARDS && fs->meta_bm.nshards == SHARDS, "%u data shards, %u log shards",
		  fs->data_bm.nshards, fs->meta_bm.nshards);
	struct worker w[4];
	pthread_t t[4];
	uint64_t seed = tu_seed("fs-shards-threads", 7);
	for (unsigned i = 0; i < nthreads; i++) {
		char name[16];
		struct kr_fs_attr a;
		snprintf(name, sizeof(name), "t%u", i);
		TU_OK(kr_fs_mkdir(fs, KR_FS_ROOT_INO, name, 0700, 0, 0, &a));
		w[i] = (struct worker){.fs = fs, .seed = seed + i, .dir = a.ino, .rounds = (unsigned)tu_scaled(3, 1)};
	}
	for (unsigned i = 0; i < nthreads; i++)
		TU_ASSERT(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0, "pthread_create");
	unsigned ops = 0, nospc = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		TU_ASSERT(!w[i].why[0], "thread %u: %s", i, w[i].why);
		ops += w[i].ops, nospc += w[i].nospc;
	}
	expect_clean(fs, "after the threads");
	struct kr_fs_statfs before, after;
	expect_counts(fs, &before, "after the threads");
	TU_OK(kr_fs_unmount(fs));
	const unsigned remount[] = {0, 1};
	for (unsigned k = 0; k < 2; k++) {
		fs = mount_shards(path, remount[k]);
		expect_clean(fs, "after a remount");
		expect_counts(fs, &after, "after a remount");
		TU_ASSERT(after.bfree == before.bfree && after.log_pages_free == before.log_pages_free &&
				  after.ffree == before.ffree,
			  "remount (%u shards): free data %llu -> %llu, log %llu -> %llu, slots %llu -> %llu",
			  fs->data_bm.nshards, (unsigned long long)before.bfree, (unsigned long long)after.bfree,
			  (unsigned long long)before.log_pages_free, (unsigned long long)after.log_pages_free,
			  (unsigned long long)before.ffree, (unsigned long long)after.ffree);
		TU_OK(kr_fs_unmount(fs));
	}
	printf("fs shards: %u threads on %u shards, %u operations (%u ran out of space), %llu of %llu data pages "
	       "free at the end; checker clean, statfs equal to a recount, the same after remounts\n",
	       nthreads, SHARDS, ops, nospc, (unsigned long long)before.bfree, (unsigned long long)before.blocks);
}

/* ---- enospc --------------------------------------------------------------------------------- */
static uint8_t want[8 << 20]; /* what the file should hold */

/* kr_fs_write of len bytes of src at off, kept in want when it succeeds. */
static ssize_t put(kr_fs *fs, uint64_t ino, const uint8_t *src, size_t len, uint64_t off)
{
	ssize_t rc = kr_fs_write(fs, ino, src, len, off);
	if (rc == (ssize_t)len)
		memcpy(want + off, src, len);
	return rc;
}

static unsigned shard_of_offset(kr_fs *fs, uint64_t ino, uint64_t off)
{
	struct kr_fs_location loc;
	TU_ASSERT(kr_fs_locate(fs, ino, off, &loc) == 0, "locate %llu", (unsigned long long)off);
	uint64_t pg = (loc.page_off - fs->sb.data_off) / 4096;
	return (unsigned)(krfs_bm_shard(&fs->data_bm, pg) - fs->data_bm.shards);
}

static void case_enospc(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-shards-enospc");
	mkfs_small(path, 8 << 20);
	kr_fs *fs = mount_shards(path, SHARDS);
	struct krfs_bitmap *bm = &fs->data_bm;
	TU_ASSERT(bm->nshards == SHARDS, "%u shards", bm->nshards);
	struct kr_fs_attr a;
	TU_OK(kr_fs_create(fs, KR_FS_ROOT_INO, "f", 0600, 0, 0, &a));
	uint64_t ino = a.ino;
	static uint8_t buf[16 * 4096], got[16 * 4096];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	/* This thread's home shard: where its first page goes. */
	TU_ASSERT(put(fs, ino, buf, 4096, 0) == 4096, "first page");
	unsigned home = shard_of_offset(fs, ino, 0);
	struct krfs_shard *hs = &bm->shards[home];
	uint64_t size = 4096;
	/* Fill the home shard but 3 pages, one page per write (each CoW write takes a new page
	 * and frees none: the file only grows). */
	while (hs->nfree > 3) {
		TU_ASSERT(put(fs, ino, buf, 4096, size) == 4096, "filling the home shard");
		TU_ASSERT(shard_of_offset(fs, ino, size) == home, "a page outside the home shard while it had room");
		size += 4096;
	}
	/* 8 pages with 3 left at home: a run from the home shard, the rest from the next. */
	uint64_t others = krfs_bm_nfree(bm) - hs->nfree;
	TU_ASSERT(put(fs, ino, buf, 8 * 4096, size) == 8 * 4096, "a write across shards");
	TU_ASSERT(hs->nfree == 0 && shard_of_offset(fs, ino, size) == home &&
			  shard_of_offset(fs, ino, size + 7 * 4096) == (home + 1) % SHARDS,
		  "the write across shards: home shard %llu free, first page in shard %u, last in %u",
		  (unsigned long long)hs->nfree, shard_of_offset(fs, ino, size), shard_of_offset(fs, ino, size + 7 * 4096));
	size += 8 * 4096;
	TU_ASSERT(krfs_bm_nfree(bm) == others - 5, "free pages elsewhere %llu, want %llu",
		  (unsigned long long)krfs_bm_nfree(bm), (unsigned long long)(others - 5));
	/* The home shard is empty, the others have room: a page still comes. */
	TU_ASSERT(put(fs, ino, buf, 4096, size) == 4096, "a page with the home shard full");
	TU_ASSERT(shard_of_offset(fs, ino, size) != home, "a page from a full shard");
	size += 4096;
	expect_clean(fs, "home shard full");
	/* Fill everything with 16-page writes; the one that does not fit fails whole. */
	uint64_t nospc_free = 0;
	for (;;) {
		struct kr_fs_statfs st;
		TU_OK(kr_fs_statfs(fs, &st));
		ssize_t rc = put(fs, ino, buf, sizeof(buf), size);
		if (rc == -ENOSPC) {
			struct kr_fs_statfs st2;
			TU_OK(kr_fs_statfs(fs, &st2));
			TU_ASSERT(st2.bfree == st.bfree && st.bfree < 16, "ENOSPC with %llu free before, %llu after",
				  (unsigned long long)st.bfree, (unsigned long long)st2.bfree);
			nospc_free = st.bfree;
			break;
		}
		TU_ASSERT(rc == (ssize_t)sizeof(buf), "write: %zd", rc);
		size += sizeof(buf);
	}
	/* Then single pages until no shard has one. */
	while (put(fs, ino, buf, 4096, size) == 4096)
		size += 4096;
	for (unsigned k = 0; k < bm->nshards; k++)
		TU_ASSERT(bm->shards[k].nfree == 0, "shard %u: %llu free after ENOSPC", k,
			  (unsigned long long)bm->shards[k].nfree);
	TU_ASSERT(kr_fs_write(fs, ino, buf, 4096, size) == -ENOSPC, "a write with every shard full");
	TU_ASSERT(kr_fs_getattr(fs, ino, &a) == 0 && a.size == size, "size %llu after ENOSPC, want %llu",
		  (unsigned long long)a.size, (unsigned long long)size);
	struct kr_fs_statfs st;
	expect_clean(fs, "every shard full");
	expect_counts(fs, &st, "every shard full");
	TU_ASSERT(st.bfree == 0, "%llu free", (unsigned long long)st.bfree);
	TU_OK(kr_fs_unmount(fs));
	fs = mount_shards(path, SHARDS);
	expect_clean(fs, "remount");
	expect_counts(fs, &st, "remount");
	TU_ASSERT(st.bfree == 0 && kr_fs_getattr(fs, ino, &a) == 0 && a.size == size, "remount: %llu free, size %llu",
		  (unsigned long long)st.bfree, (unsigned long long)a.size);
	for (uint64_t off = 0; off < size; off += sizeof(got)) {
		size_t n = size - off < sizeof(got) ? size - off : sizeof(got);
		TU_ASSERT(kr_fs_read(fs, ino, got, n, off) == (ssize_t)n && memcmp(got, want + off, n) == 0,
			  "the file's bytes at %llu differ after the remount", (unsigned long long)off);
	}
	TU_OK(kr_fs_unmount(fs));
	printf("fs shards: with the home shard full pages came from the next shard (a write split across two); "
	       "with all %u full, -ENOSPC (%llu pages were free before the 16-page write), size and counts kept, "
	       "the same after a remount\n",
	       SHARDS, (unsigned long long)nospc_free);
}

/* ---- options ------------------------------------------------------------------------------- */
/* A caller built before alloc_shards (the smaller struct_size) mounts with the default; a
 * count past what the areas hold is capped (each shard at least a word of 64 pages). */
static void case_opts(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-shards-opts");
	mkfs_small(path, 8 << 20);
	struct kr_fs_mount_opts o = {.struct_size = (uint32_t)offsetof(struct kr_fs_mount_opts, alloc_shards),
				     .flags = KR_OPEN_FORCE_PMEM};
	kr_fs *fs;
	TU_OK(kr_fs_mount_opts(path, &o, &fs));
	unsigned dflt = fs->data_bm.nshards;
	TU_ASSERT(dflt >= 1 && fs->ino_bm.nshards == 1, "%u data shards, %u slot shards", dflt, fs->ino_bm.nshards);
	TU_OK(kr_fs_unmount(fs));
	o.struct_size = sizeof(o) + 4;
	TU_ASSERT(kr_fs_mount_opts(path, &o, &fs) == KR_E_MISUSE_ARG, "an unknown struct_size accepted");
	fs = mount_shards(path, 1000);
	uint64_t dw = (fs->sb.data_pages + 63) / 64, mw = (fs->sb.meta_pages + 63) / 64;
	TU_ASSERT(fs->data_bm.nshards == (dw < KR_FS_ALLOC_SHARDS_MAX ? dw : KR_FS_ALLOC_SHARDS_MAX) &&
			  fs->meta_bm.nshards == (mw < KR_FS_ALLOC_SHARDS_MAX ? mw : KR_FS_ALLOC_SHARDS_MAX),
		  "1000 shards asked: %u data shards of %llu pages, %u log shards of %llu pages", fs->data_bm.nshards,
		  (unsigned long long)fs->sb.data_pages, fs->meta_bm.nshards, (unsigned long long)fs->sb.meta_pages);
	expect_clean(fs, "1000 shards asked");
	TU_OK(kr_fs_unmount(fs));
	printf("fs shards: the old kr_fs_mount_opts size mounts with the default (%u data shards); 1000 shards asked "
	       "gives one per 64 pages (%llu data, %llu log)\n", dflt, (unsigned long long)dw, (unsigned long long)mw);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (strcmp(c, "threads") == 0 && argc > 2 && (atoi(argv[2]) == 2 || atoi(argv[2]) == 4))
		case_threads((unsigned)atoi(argv[2]));
	else if (strcmp(c, "enospc") == 0) {
		case_opts();
		case_enospc();
	}
	else
		TU_FAIL("usage: test_fs_shards threads 2|4 | enospc");
	TU_END_CHECK_ALL("test_fs_shards");
	return 0;
}
