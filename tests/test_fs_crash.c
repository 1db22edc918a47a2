/*
 * test_fs_crash.c - power failure at every store fence of keratin-fs, with the crash
 * simulator (tests/crashsim.c).
 *
 * A small pool takes a few hundred random operations from the model (tests/fsmodel.c:
 * creates, mkdirs, symlinks, writes, truncates, unlinks, rmdirs, renames with flags, links,
 * setattrs, extended attributes set and removed, snapshots made and deleted), with a
 * remount every 150 operations so that mount's own writes (journal roll-back, repairs,
 * orphan reclaim, superblock) are crashed too. At every fence the
 * simulator builds crash images (nothing pending persisted, everything persisted, random
 * subsets of the pending lines), and a child mounts each image (recovery runs) and requires
 * the file system to equal the model after the K operations that had returned, or after
 * K+1 while an operation was in flight - the whole tree, bytes, link counts, used inodes and
 * data pages, every snapshot's tree - and kr_fs_check to find every invariant intact. A
 * first phase writes one file over and over, so that its log is compacted (garbage
 * collection) under the simulator (in a relaxed pool, KR_TEST_FS_PROTECTION=relaxed, most of
 * these writes are overwrites in place, and an image taken while one is in flight may hold
 * any mix of its old and new bytes, but nothing else may differ and no read may fail); a
 * second overwrites one page of another file and changes its mode and owner, turn about,
 * so that pages whose entries are all dead are unlinked from its log (fast GC); a third makes
 * snapshots of the first, overwrites it and deletes them in turn.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crashsim.h"
#include "fsmodel.h"
#include "keratin_fs.h"
#include "testutil.h"

static struct fm g_model;       /* after every returned operation */
static struct fm_op g_inflight; /* the operation running, if any */
static bool g_have_inflight;
static unsigned g_done;
static bool g_relaxed; /* KR_FS_RELAXED: an overwrite in flight may land partly */

static const char *kind_name(enum crashsim_kind k)
{
	return k == CRASHSIM_NONE ? "none" : k == CRASHSIM_ALL ? "all" : "random";
}

/* Runs in a forked child on each crash image. The image must hold the K or K+1 operations
 * and pass kr_fs_check; a broken rule of the commit, journal, log, data, zone parity,
 * replica, compaction, snapshot, in-place or superblock protocol shows as an image that
 * does neither. So this
 * checks invariants fs_op.c 1, fs_op.c 2, fs_journal.c 1, fs_journal.c 2, fs_log.c 1
 * checks invariants fs_data.c 1, fs_zone.c 1, fs_meta.c 1, fs_super.c 2
 * checks invariants fs_gc.c 1, fs_gc.c 2, fs_gc.c 4, fs_snap.c 1, fs_snap.c 2, fs_snap.c 4
 * checks invariants fs_inplace.c 1, fs_inplace.c 2, fs_journal.c 3
 * (zone parity in the fs_crash.zone variants, in-place writes in the relaxed ones;
 * kr_fs_check reports a live snapshot whose id is not below the epoch, which a remount
 * that failed to raise the epoch past the manifest would leave; an image taken while a
 * journal was being written holds it torn, and its mount must take it as idle). Seen
 * failing with the commit's first fence removed, with the journal's fence before the slot
 * stores removed, and with a torn journal refused as damage. */
static int check_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_fs *fs;
	int rc = kr_fs_mount(img->path, KR_OPEN_FORCE_PMEM, &fs);
	if (rc != KR_OK) {
		fprintf(stderr, "fence %llu (%s): mount failed: %s\n", (unsigned long long)img->fence,
			kind_name(img->kind), kr_errmsg());
		return 1;
	}
	char why_k[512], why_k1[512] = "no operation in flight";
	bool ok = fm_compare(fs, &g_model, why_k, sizeof(why_k)) == 0;
	if (!ok && g_have_inflight) {
		struct fm next;
		uint32_t id;
		fm_copy(&next, &g_model);
		fm_apply(&next, &g_inflight, &id);
		ok = fm_compare(fs, &next, why_k1, sizeof(why_k1)) == 0;
		/* A relaxed pool's overwrite is not atomic: any mix of the bytes before and
		 * after it, every other byte and everything else exactly as the model says. */
		if (!ok && g_relaxed && g_inflight.kind == FM_WRITE)
			ok = fm_compare_torn(fs, &g_model, &next, why_k1, sizeof(why_k1)) == 0;
		fm_free(&next);
	}
	if (!ok) {
		char d[256] = "none";
		if (g_have_inflight)
			fm_describe(&g_inflight, d, sizeof(d));
		fprintf(stderr, "fence %llu (%s #%u) after %u operations, in flight %s: neither K (%s) nor K+1 (%s)\n",
			(unsigned long long)img->fence, kind_name(img->kind), img->index, g_done, d, why_k, why_k1);
		return 1;
	}
	struct kr_fs_check_report rep;
	if (kr_fs_check(fs, stderr, &rep) != KR_OK) {
		fprintf(stderr, "fence %llu (%s #%u): kr_fs_check found %llu problems\n", (unsigned long long)img->fence,
			kind_name(img->kind), img->index, (unsigned long long)rep.problems);
		return 1;
	}
	return kr_fs_unmount(fs) == KR_OK ? 0 : 1;
}

int main(void)
{
	uint64_t seed = tu_seed("test_fs_crash", 777);
	unsigned nops = tu_scaled(500, 60); /* 500 in make torture; make check scales it down */
	char path[128];
	tu_pool_path(path, sizeof(path), "fs-crash");
	struct kr_fs_mkfs_opts mo = {.struct_size = sizeof(mo), .size = 4 << 20, .ninodes = 64,
				     .meta_bytes = 64 * 4096, .open_flags = KR_OPEN_FORCE_PMEM,
				     .unprotect = fm_unprotect_from_env(), .parity = fm_parity_from_env()};
	TU_OK(kr_fs_mkfs(path, &mo));
	g_relaxed = mo.unprotect & KR_FS_RELAXED;

	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.seed = seed;
	o.check_path = check_image;
	const char *r = getenv("KR_CRASHSIM_R");
	o.random_images = r && *r ? (unsigned)strtoul(r, NULL, 0) : 1;
	TU_ASSERT(crashsim_start(&o, NULL, NULL) == 0, "crashsim already running");

	crashsim_enable_checks(false); /* a mount that did not return need not be checked... */
	kr_fs *fs = fm_mount_new(path, &g_model);
	crashsim_enable_checks(true);
	struct kr_fs_statfs st;
	struct fm_params p;
	fm_params_default(&p);
	p.names = 3; /* few names: logs grow and get compacted under the simulator too */
	p.max_write = 12000;
	p.weight[FM_MKDIR] = 2;
	p.weight[FM_SETXATTR] = 10; /* attribute entries are crashed often, kept small for the */
	p.weight[FM_REMOVEXATTR] = 6; /* small log area */
	p.max_xattr = 600;
	p.weight[FM_SNAPSHOT] = 3;
	p.weight[FM_SNAPSHOT_DELETE] = 3;
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	char why[512];
	uint64_t compactions = 0, fast_pages = 0, gc_fast;
	unsigned xattr_changes = 0, snapshot_changes = 0;
	double t0 = tu_now();
	/* First one file written over and over: its log fills pages and is compacted, again
	 * and again, under the simulator. One write in thirty goes to a page of its own past
	 * the others, so that its entry stays live and fast GC cannot free the log page that
	 * holds it: compaction must. */
	g_inflight = (struct fm_op){.kind = FM_CREATE, .a = 1, .mode = 0600, .name = "hot"};
	g_have_inflight = true;
	if (fm_step(fs, &g_model, &g_inflight, NULL, why, sizeof(why)) != 0)
		TU_FAIL("create hot: %s", why);
	uint32_t hot = g_model.n - 1;
	for (unsigned i = 0; i < tu_scaled(400, 250); i++) {
		g_inflight = (struct fm_op){.kind = FM_WRITE, .a = hot, .off = tu_rng_below(&rng, 20000),
					    .len = tu_rng_range(&rng, 1, 3000), .seed = i};
		if (i % 30 == 29)
			g_inflight.off = 20480 + i / 30 * 4096;
		if (fm_step(fs, &g_model, &g_inflight, NULL, why, sizeof(why)) != 0)
			TU_FAIL("write to hot: %s", why);
	}
	/* Then the same page of another file overwritten, and its mode and owner changed, turn
	 * about: the pages of its log die whole and fast GC unlinks them under the simulator. */
	g_inflight = (struct fm_op){.kind = FM_CREATE, .a = 1, .mode = 0600, .name = "fast"};
	if (fm_step(fs, &g_model, &g_inflight, NULL, why, sizeof(why)) != 0)
		TU_FAIL("create fast: %s", why);
	uint32_t fast = g_model.n - 1;
	for (unsigned i = 0; i < tu_scaled(300, 120); i++) {
		if (i % 2 == 0)
			g_inflight = (struct fm_op){.kind = FM_WRITE, .a = fast, .off = (i / 2 % 8) * 512, .len = 512, .seed = i};
		else
			g_inflight = (struct fm_op){.kind = FM_SETATTR, .a = fast, .mode = 0600 | (i & 077), .uid = i, .gid = i,
						    .mask = i % 4 == 1 ? KR_FS_SET_MODE : KR_FS_SET_UID | KR_FS_SET_GID};
		if (fm_step(fs, &g_model, &g_inflight, NULL, why, sizeof(why)) != 0)
			TU_FAIL("change %u to fast: %s", i, why);
	}
	/* Then snapshots of it made, outlived by overwrites and deleted, over and over: every
	 * fence of an image, of the manifest and of the reclaim of held pages is crashed. */
	for (unsigned i = 0; i < tu_scaled(24, 8); i++) {
		struct fm_op seq[3] = {{.kind = FM_SNAPSHOT}, {.kind = FM_WRITE, .a = hot, .off = tu_rng_below(&rng, 12000),
							      .len = tu_rng_range(&rng, 1, 8000), .seed = 1000 + i},
				       {.kind = FM_SNAPSHOT_DELETE}};
		snprintf(seq[0].name, sizeof(seq[0].name), "h%u", i % 2);
		snprintf(seq[2].name, sizeof(seq[2].name), "h%u", (i + 1) % 2);
		for (unsigned k = 0; k < 3; k++) {
			g_inflight = seq[k];
			int64_t res;
			if (fm_step(fs, &g_model, &g_inflight, &res, why, sizeof(why)) != 0)
				TU_FAIL("snapshot phase %u.%u: %s", i, k, why);
			snapshot_changes += res == 0 && k != 1;
		}
	}
	g_have_inflight = false;
	for (g_done = 0; g_done < nops;) {
		fm_gen(&rng, &g_model, &p, &g_inflight);
		g_have_inflight = true;
		int64_t res;
		if (fm_step(fs, &g_model, &g_inflight, &res, why, sizeof(why)) != 0)
			TU_FAIL("operation %u: %s", g_done, why);
		xattr_changes += res == 0 && (g_inflight.kind == FM_SETXATTR || g_inflight.kind == FM_REMOVEXATTR);
		snapshot_changes += res == 0 && (g_inflight.kind == FM_SNAPSHOT || g_inflight.kind == FM_SNAPSHOT_DELETE);
		g_have_inflight = false;
		g_done++;
		if (g_done % 150 == 0) { /* ...but a remount's recovery writes are checked */
			TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
			compactions += st.compactions;
			TU_OK(kr_fs_gc_counts(fs, &gc_fast, NULL));
			fast_pages += gc_fast;
			TU_OK(kr_fs_unmount(fs));
			crashsim_drain(); /* checking children hold the pool file's lock */
			TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
		}
		if (g_done % 100 == 0) {
			struct crashsim_stats cs;
			crashsim_get_stats(&cs);
			printf("  %u operations, %llu fences, %llu images checked, %llu failed (%.1fs)\n", g_done,
			       (unsigned long long)cs.fences, (unsigned long long)cs.images,
			       (unsigned long long)cs.failures, tu_now() - t0);
			fflush(stdout);
		}
	}
	if (fm_compare(fs, &g_model, why, sizeof(why)) != 0)
		TU_FAIL("at the end: %s", why);
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	compactions += st.compactions;
	TU_OK(kr_fs_gc_counts(fs, &gc_fast, NULL));
	fast_pages += gc_fast;
	TU_OK(kr_fs_unmount(fs));
	struct crashsim_stats cs;
	crashsim_stop(&cs);
	printf("test_fs_crash: %u operations (%u extended attribute changes, %u snapshots made or deleted, %llu log "
	       "compactions, %llu log pages unlinked by fast GC), %llu fences, %llu crash images checked, %llu failed\n",
	       nops, xattr_changes, snapshot_changes, (unsigned long long)compactions, (unsigned long long)fast_pages,
	       (unsigned long long)cs.fences, (unsigned long long)cs.images, (unsigned long long)cs.failures);
	TU_ASSERT(compactions > 0, "no log compaction was crashed");
	TU_ASSERT(fast_pages > 0, "no fast GC was crashed");
	TU_ASSERT(xattr_changes > 0, "no extended attribute change was crashed");
	TU_ASSERT(snapshot_changes > 0, "no snapshot was made or deleted under the simulator");
	TU_ASSERT(cs.images >= nops, "too few crash images (%llu)", (unsigned long long)cs.images);
	TU_ASSERT(cs.failures == 0, "%llu crash images recovered wrongly (see above)", (unsigned long long)cs.failures);
	TU_ASSERT(cs.unrecorded_lines == 0, "%llu lines changed without a store hook", (unsigned long long)cs.unrecorded_lines);
	TU_ASSERT(cs.dirty_at_unmap == 0, "%llu lines not durable at unmount", (unsigned long long)cs.dirty_at_unmap);
	fm_free(&g_model);
	TU_END_CHECK_ALL("test_fs_crash");
	return 0;
}
