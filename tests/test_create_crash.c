/*
 * test_create_crash.c - a crash at any fence of kr_pool_create (test_create_crash pool),
 * kr_fs_mkfs (fs), kr_hmap_create (hmap) or a region's first kr_region_open (region)
 * leaves a file that is refused as "not a pool", or a whole, empty one; never a half-made
 * one.
 *
 * The crash simulator runs across kr_pool_create (the file's zeroing, the control pages,
 * the log lanes and their replicas, the zone metadata, the two header copies, written
 * last). Every image at every fence (nothing, everything and random subsets of the
 * pending lines persisted) is opened: it must be refused with KR_E_FORMAT_NOT_POOL, or
 * open, pass the deep check and hold no object. At least one image of each outcome must
 * occur, so the test cannot pass by never reaching the header or by never crashing
 * before it. This checks invariant pool.c 2 (with test_basic's pin that the header copies
 * never change after creation). For kr_fs_mkfs (inode table, logs, journals, allocator
 * state, the superblock's two copies last) an image must be refused, or mount and pass
 * kr_fs_check with an empty root directory: this checks invariant fs_super.c 1. A map
 * must be refused, or open with no entry. A protected region's sidecar, made when the region
 * is first opened, must be refused as not a sidecar, or open and pass its check with parity.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "crashsim.h"
#include "keratin_fs.h"
#include "keratin_hmap.h"
#include "keratin_region.h"
#include "testutil.h"

/* Outcomes seen by the checking children, counted in shared memory. */
static _Atomic uint64_t *g_refused, *g_whole;

/* One image's verdict: refused as not a pool (rc), half-made (why says how; printed), or
 * whole (why empty). */
static int verdict(const struct crashsim_image *img, int rc, const char *why)
{
	if (rc == KR_E_FORMAT_NOT_POOL) {
		atomic_fetch_add(g_refused, 1);
		return 0;
	}
	if (why[0]) {
		fprintf(stderr, "fence %llu: half-made: %s\n", (unsigned long long)img->fence, why);
		return 1;
	}
	atomic_fetch_add(g_whole, 1);
	return 0;
}

static int check_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_pool *pool;
	char why[512] = "";
	int rc = kr_pool_open(img->path, KR_OPEN_FORCE_PMEM, &pool);
	if (rc != KR_OK && rc != KR_E_FORMAT_NOT_POOL)
		snprintf(why, sizeof(why), "open failed with %d (%s)", rc, kr_errmsg());
	else if (rc == KR_OK && tu_deep_check(pool, why, sizeof(why)) == 0 && kr_first(pool) != 0)
		snprintf(why, sizeof(why), "a new pool holds an object");
	return verdict(img, rc, why);
}

static int count_entry(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type,
		       uint64_t cookie)
{
	(void)ino, (void)type, (void)cookie;
	if (!(len == 1 && name[0] == '.') && !(len == 2 && !memcmp(name, "..", 2)))
		++*(unsigned *)ctx;
	return 0;
}

static int check_fs_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_fs *fs;
	char why[512] = "";
	/* A writing mount: it may repair a replica the crash left unwritten, in the image. */
	int rc = kr_fs_mount(img->path, KR_OPEN_FORCE_PMEM, &fs);
	struct kr_fs_check_report rep;
	unsigned entries = 0;
	if (rc != KR_OK && rc != KR_E_FORMAT_NOT_POOL)
		snprintf(why, sizeof(why), "mount failed with %d (%s)", rc, kr_errmsg());
	else if (rc == KR_OK && (kr_fs_check(fs, NULL, &rep) != KR_OK || rep.problems != 0 ||
				 kr_fs_readdir(fs, KR_FS_ROOT_INO, 0, count_entry, &entries) < 0 || entries != 0))
		snprintf(why, sizeof(why), "mounts but does not check clean and empty (%u entries): %s",
			 entries, kr_errmsg());
	return verdict(img, rc, why);
}

static int check_hmap_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_hmap *h;
	char why[512] = "";
	int rc = kr_hmap_open(img->path, KR_OPEN_FORCE_PMEM, &h);
	struct kr_hmap_stats hs;
	if (rc != KR_OK && rc != KR_E_FORMAT_NOT_POOL)
		snprintf(why, sizeof(why), "open failed with %d (%s)", rc, kr_errmsg());
	else if (rc == KR_OK && (kr_hmap_stats(h, &hs) != KR_OK || hs.live != 0))
		snprintf(why, sizeof(why), "a new map holds entries");
	return verdict(img, rc, why);
}

/* The data file of the region case; its sidecar is what the simulator records. */
static char g_data[160];

static int check_region_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	struct kr_region_opts ro = KR_REGION_OPTS_INIT;
	ro.sidecar = img->path;
	ro.flags = KR_REGION_MANUAL | KR_REGION_NO_CREATE | KR_REGION_FORCE_PMEM;
	kr_region *r;
	void *base;
	size_t len;
	char why[512] = "";
	int rc = kr_region_open(g_data, &ro, &r, &base, &len);
	if (rc != KR_OK && rc != KR_E_FORMAT_NOT_POOL) {
		snprintf(why, sizeof(why), "open failed with %d (%s)", rc, kr_errmsg());
	} else if (rc == KR_OK) {
		if (kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, NULL) != KR_OK)
			snprintf(why, sizeof(why), "the new sidecar fails its check: %s", kr_errmsg());
		if (kr_region_close(r) != KR_OK && !why[0])
			snprintf(why, sizeof(why), "close failed: %s", kr_errmsg());
	}
	return verdict(img, rc, why);
}

int main(int argc, char **argv)
{
	const char *what = argc == 2 ? argv[1] : "";
	bool fs = !strcmp(what, "fs"), hmap = !strcmp(what, "hmap"), region = !strcmp(what, "region");
	TU_ASSERT(fs || hmap || region || !strcmp(what, "pool"), "usage: test_create_crash pool|fs|hmap|region");
	_Atomic uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TU_ASSERT(shared != MAP_FAILED, "mmap");
	g_refused = &shared[0];
	g_whole = &shared[1];
	char path[128];
	tu_pool_path(path, sizeof(path), "create-crash");
	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.check_path = fs ? check_fs_image : hmap ? check_hmap_image : region ? check_region_image : check_image;
	if (region) { /* the data file exists before; only its sidecar is made under the simulator */
		snprintf(g_data, sizeof(g_data), "%s.data", path);
		static uint8_t data[64 << 10];
		tu_fill(data, sizeof(data), 3);
		tu_write_file(g_data, data, sizeof(data));
	}
	o.random_images = 4;
	o.fence_every = 1; /* creation has few fences, and each writes a different structure */
	o.seed = tu_seed("test_create_crash", 5);
	TU_ASSERT(crashsim_start(&o, NULL, NULL) == 0, "crashsim_start");
	if (region) {
		struct kr_region_opts ro = KR_REGION_OPTS_INIT;
		ro.flags = KR_REGION_MANUAL | KR_REGION_FORCE_PMEM;
		kr_region *r;
		void *base;
		size_t len;
		TU_OK(kr_region_open(g_data, &ro, &r, &base, &len));
		TU_OK(kr_region_close(r));
	} else if (hmap) {
		struct kr_hmap_opts ho = {.struct_size = sizeof(ho), .size = 64 << 10, .entry_lines = 4,
					  .flags = KR_OPEN_FORCE_PMEM};
		kr_hmap *h;
		TU_OK(kr_hmap_create(path, &ho, &h));
		TU_OK(kr_hmap_close(h));
	} else if (fs) {
		struct kr_fs_mkfs_opts mo = {.struct_size = sizeof(mo), .size = 8ull << 20,
					     .open_flags = KR_OPEN_FORCE_PMEM};
		TU_OK(kr_fs_mkfs(path, &mo));
	} else {
		kr_pool *pool;
		TU_OK(tu_create(path, 16ull << 20, 8, 2, 64, &pool));
		TU_OK(kr_pool_close(pool));
	}
	struct crashsim_stats st;
	crashsim_stop(&st);
	printf("test_create_crash: %llu fences, %llu images: %llu refused as not a pool, %llu whole "
	       "empty pools, %llu failed\n", (unsigned long long)st.fences,
	       (unsigned long long)st.images, (unsigned long long)atomic_load(g_refused),
	       (unsigned long long)atomic_load(g_whole), (unsigned long long)st.failures);
	TU_ASSERT(st.failures == 0, "%llu images were half-made pools", (unsigned long long)st.failures);
	TU_ASSERT(atomic_load(g_refused) > 0 && atomic_load(g_whole) > 0,
		  "every image had the same outcome: the crashes did not straddle the header");
	TU_ASSERT(st.unrecorded_lines == 0, "writes the simulator missed");
	return 0;
}
