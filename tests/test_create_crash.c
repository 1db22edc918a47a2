/*
 * test_create_crash.c - a crash at any fence of kr_pool_create leaves a file that is
 * refused as "not a pool", or a whole, empty pool; never a half-made one.
 *
 * The crash simulator runs across kr_pool_create (the file's zeroing, the control pages,
 * the log lanes and their replicas, the zone metadata, the two header copies, written
 * last). Every image at every fence (nothing, everything and random subsets of the
 * pending lines persisted) is opened: it must be refused with KR_E_FORMAT_NOT_POOL, or
 * open, pass the deep check and hold no object. At least one image of each outcome must
 * occur, so the test cannot pass by never reaching the header or by never crashing
 * before it. This checks invariant pool.c 2 (with test_basic's pin that the header copies
 * never change after creation).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "crashsim.h"
#include "testutil.h"

/* Outcomes seen by the checking children, counted in shared memory. */
static _Atomic uint64_t *g_refused, *g_whole;

static int check_image(void *ctx, const struct crashsim_image *img)
{
	(void)ctx;
	kr_pool *pool;
	int rc = kr_pool_open(img->path, KR_OPEN_FORCE_PMEM, &pool);
	if (rc == KR_E_FORMAT_NOT_POOL) {
		atomic_fetch_add(g_refused, 1);
		return 0;
	}
	if (rc != KR_OK) {
		fprintf(stderr, "fence %llu: a half-made pool: open failed with %d (%s)\n",
			(unsigned long long)img->fence, rc, kr_errmsg());
		return 1;
	}
	char why[512];
	if (tu_deep_check(pool, why, sizeof(why)) != 0) {
		fprintf(stderr, "fence %llu: the pool opens but %s\n", (unsigned long long)img->fence, why);
		return 1;
	}
	if (kr_first(pool) != 0) {
		fprintf(stderr, "fence %llu: a new pool holds an object\n", (unsigned long long)img->fence);
		return 1;
	}
	atomic_fetch_add(g_whole, 1);
	return 0;
}

int main(void)
{
	_Atomic uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TU_ASSERT(shared != MAP_FAILED, "mmap");
	g_refused = &shared[0];
	g_whole = &shared[1];
	char path[128];
	tu_pool_path(path, sizeof(path), "create-crash");
	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.check_path = check_image;
	o.random_images = 4;
	o.seed = tu_seed("test_create_crash", 5);
	TU_ASSERT(crashsim_start(&o, NULL, NULL) == 0, "crashsim_start");
	kr_pool *pool;
	TU_OK(tu_create(path, 16ull << 20, 8, 2, 64, &pool));
	TU_OK(kr_pool_close(pool));
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
