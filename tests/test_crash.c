/*
 * test_crash.c - power-failure atomicity of transactions, checked with the crash simulator.
 *
 * An 8 MiB pool's root object is a directory of 48 slots {oid, size}. Up to 2000 random
 * transactions (workload.c: allocations of 8 B..64 KiB log-uniform, partial overwrites
 * through kr_tx_add, frees, replacements, several objects per transaction, a few aborts)
 * run with the crash simulator installed. At every store fence the simulator builds crash
 * images (nothing pending persisted, everything persisted, random subsets), recovers each
 * in a child process and calls check_image(), which requires the recovered pool to equal
 * the reference model after K commits, or after K+1 while a kr_tx_commit() is in flight,
 * where K is the number of kr_tx_commit() calls that had returned: every slot's oid, size
 * and bytes, and a live-object set of exactly {root} + slot oids (nothing leaked). Finally
 * the pool is closed, reopened normally and compared with the final model.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "crashsim.h"
#include "testutil.h"
#include "workload.h"

#define NSLOTS 48
#define ROOT_SIZE (NSLOTS * sizeof(struct wl_dir_entry))

static struct wl_ctx g_wl; /* the workload; check_image reads its models in the child */
static kr_oid g_root;

static int check_live_set(kr_pool *pool, kr_oid root, char *why, size_t whylen)
{
	kr_oid live[NSLOTS + 1];
	live[0] = root;
	size_t n = 1 + wl_dir_oids(pool, root, NSLOTS, live + 1, NSLOTS);
	return wl_check_live(pool, live, n, why, whylen);
}

/* Runs in a forked child on a recovered crash image. */
static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	char why_k[256], why_k1[256] = "no commit was in flight", why[256];
	unsigned long long k = (unsigned long long)g_wl.commits;
	kr_oid root = 0;
	int rc = kr_root(pool, ROOT_SIZE, &root);
	if (rc != KR_OK || root != g_root) {
		fprintf(stderr, "crash image fence %llu %d#%u: kr_root = %d, oid %#llx (expected %#llx): %s\n",
			(unsigned long long)img->fence, (int)img->kind, img->index, rc,
			(unsigned long long)root, (unsigned long long)g_root, kr_errmsg());
		return 1;
	}
	bool ok = wl_verify(pool, root, &g_wl.model, true, why_k, sizeof(why_k)) == 0;
	if (!ok && g_wl.in_commit)
		ok = wl_verify(pool, root, &g_wl.pending, true, why_k1, sizeof(why_k1)) == 0;
	if (!ok) {
		fprintf(stderr,
			"crash image fence %llu kind %d#%u (K=%llu commits returned, in commit: %d): "
			"recovered pool matches neither K (%s) nor K+1 (%s)\n",
			(unsigned long long)img->fence, (int)img->kind, img->index, k, g_wl.in_commit,
			why_k, why_k1);
		return 1;
	}
	/* The deep check of every recovered image (parity.c 2: recovery recomputed, not
	 * re-applied, the parity its replays touched):
	 * checks invariants parity.c 1, parity.c 2, redund.c 1, redund.c 2, heap.c 1, heap.c 4 */
	if (check_live_set(pool, root, why, sizeof(why)) != 0 ||
	    tu_deep_check(pool, why, sizeof(why)) != 0) {
		fprintf(stderr, "crash image fence %llu kind %d#%u (K=%llu): %s\n",
			(unsigned long long)img->fence, (int)img->kind, img->index, k, why);
		return 1;
	}
	return 0;
}

int main(void)
{
	uint64_t seed = tu_seed("test_crash", 20240601);
	/* make check runs two parts (KR_TEST_SCALE=0.1, two seeds): 200 transactions each
	 * in the normal build, 100 under ASan (tu_scaled); make torture 2000 each. */
	unsigned ntx = tu_scaled(2000, 100);
	const struct wl_params params = {
		.nslots = NSLOTS,
		.min_size = 8,
		.max_size = 64 * 1024,
		.max_ops = 4,
		.abort_pct = 4,
		.type_base = 1,
	};
	char path[128];
	kr_pool *pool;
	double t0 = tu_now();

	/* Pool and root are made before the simulator starts: the test is about transactions
	 * on an existing pool, and K = 0 then means "empty directory". */
	tu_pool_path(path, sizeof(path), "crash");
	TU_OK(tu_create(path, 8ull << 20, 8, 2, 512, &pool));
	TU_OK(kr_root(pool, ROOT_SIZE, &g_root));
	TU_OK(kr_pool_close(pool));

	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.seed = seed;
	/* The deep check reads every page of each image: mapping them all at once costs less
	 * than a fault per page. */
	o.open_flags |= KR_OPEN_PREFAULT;
	const char *r = getenv("KR_CRASHSIM_R");
	if (r && *r)
		o.random_images = (unsigned)strtoul(r, NULL, 0);
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim already running");

	TU_OK(tu_open(path, &pool));
	wl_ctx_init(&g_wl, pool, g_root, &params);
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	struct wl_plan plan;
	while (g_wl.commits < ntx) {
		wl_plan_gen(&rng, &params, &g_wl.model, &plan);
		wl_exec(&g_wl, &plan);
		if (plan.abort == false && g_wl.commits % 250 == 0) {
			struct crashsim_stats st;
			crashsim_get_stats(&st);
			printf("  %llu commits, %llu fences, %llu images checked, %llu failed (%.1fs)\n",
			       (unsigned long long)g_wl.commits, (unsigned long long)st.fences,
			       (unsigned long long)st.images, (unsigned long long)st.failures,
			       tu_now() - t0);
			fflush(stdout);
		}
	}
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);

	printf("test_crash: %llu transactions committed, %llu aborted, %u live objects at the end\n",
	       (unsigned long long)g_wl.commits, (unsigned long long)g_wl.aborts,
	       wl_model_live(&g_wl.model));
	printf("test_crash: %llu crash images checked, %llu failed\n", (unsigned long long)st.images,
	       (unsigned long long)st.failures);
	TU_ASSERT(st.images > 0, "no crash image was checked");
	TU_ASSERT(st.fences >= g_wl.commits, "%llu fences for %llu commits: the recorder misses fences",
		  (unsigned long long)st.fences, (unsigned long long)g_wl.commits);
	TU_ASSERT(st.failures == 0, "%llu crash images recovered wrongly (see above)",
		  (unsigned long long)st.failures);
	/* The recorder snapshots a line when a store is reported; a store reported before it
	 * happened leaves the live line different from the snapshot, which the simulator
	 * counts here: checks invariant pmem.c 1 */
	TU_ASSERT(st.unrecorded_lines == 0,
		  "%llu lines changed in the pool without a store hook: crash states were missed",
		  (unsigned long long)st.unrecorded_lines);
	TU_ASSERT(st.dirty_at_unmap == 0, "%llu lines were not durable when the pool was closed",
		  (unsigned long long)st.dirty_at_unmap);

	/* A normal close and reopen must give exactly the final model. */
	char why[256];
	TU_OK(tu_open(path, &pool));
	kr_oid root;
	TU_OK(kr_root(pool, ROOT_SIZE, &root));
	TU_ASSERT(root == g_root, "root moved");
	if (wl_verify(pool, root, &g_wl.model, true, why, sizeof(why)) != 0)
		TU_FAIL("after reopen: %s", why);
	if (check_live_set(pool, root, why, sizeof(why)) != 0)
		TU_FAIL("after reopen: %s", why);
	TU_OK(kr_pool_close(pool));
	wl_ctx_free(&g_wl);
	printf("test_crash: passed in %.1fs\n", tu_now() - t0);
	TU_END_CHECK_ALL("test_crash");
	return 0;
}
