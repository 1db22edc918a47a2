/*
 * test_crash_focus.c - power-failure atomicity of single, hand-picked transactions.
 *
 * test_crash throws a thousand random transactions at the crash simulator; when it fails,
 * this test says which kind of operation is at fault. Each scenario below is one
 * transaction of one kind (allocating and linking fresh objects, a large logged overwrite,
 * small scattered overwrites, a free, a free + allocation in one slot, freeing everything),
 * run with the crash simulator taking 64 random images, plus the "nothing" and "all"
 * images, at every fence. Every recovered image must equal the directory model before the
 * transaction or, once kr_tx_commit() has been called, after it. Scenarios run in order on
 * one pool, each starting from the state the previous one committed; all of them run even
 * if one fails, and the failing ones are listed at the end.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crashsim.h"
#include "testutil.h"
#include "workload.h"

#define NSLOTS 8
#define ROOT_SIZE (NSLOTS * sizeof(struct wl_dir_entry))

static struct wl_ctx g_wl;
static kr_oid g_root;
static const char *g_scenario = "open";

static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	char why_k[256], why_k1[256] = "no commit in flight", why[256];
	bool ok = wl_verify(pool, g_root, &g_wl.model, true, why_k, sizeof(why_k)) == 0;
	if (!ok && g_wl.in_commit)
		ok = wl_verify(pool, g_root, &g_wl.pending, true, why_k1, sizeof(why_k1)) == 0;
	if (!ok) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: neither before (%s) nor after (%s)\n",
			g_scenario, (unsigned long long)img->fence, (int)img->kind, img->index, why_k,
			why_k1);
		return 1;
	}
	kr_oid live[NSLOTS + 1];
	live[0] = g_root;
	size_t n = 1 + wl_dir_oids(pool, g_root, NSLOTS, live + 1, NSLOTS);
	if (wl_check_live(pool, live, n, why, sizeof(why)) != 0 ||
	    tu_deep_check(pool, why, sizeof(why)) != 0) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: %s\n", g_scenario,
			(unsigned long long)img->fence, (int)img->kind, img->index, why);
		return 1;
	}
	return 0;
}

static struct wl_op op_alloc(unsigned slot, uint32_t size, uint64_t seed)
{
	return (struct wl_op){ .kind = WL_ALLOC, .slot = slot, .size = size, .whole = true,
			       .nranges = 1, .r = { { 0, size, seed } } };
}

static struct wl_op op_write(unsigned slot, uint32_t off, uint32_t len, uint64_t seed)
{
	return (struct wl_op){ .kind = WL_WRITE, .slot = slot, .nranges = 1,
			       .r = { { off, len, seed } } };
}

static struct wl_op op_free(unsigned slot)
{
	return (struct wl_op){ .kind = WL_FREE, .slot = slot };
}

int main(void)
{
	uint64_t seed = tu_seed("test_crash_focus", 5150);
	const struct wl_params params = { .nslots = NSLOTS, .min_size = 8, .max_size = 65536,
					  .max_ops = 4, .type_base = 1 };
	/* fences: what the scenario costs in a pool without parity: its commit, which also
	 * makes the new runs its allocations need (pinned: the pool and the sequence are fixed).
	 * direct: it writes a new object above 1 KiB straight home, fenced before the commit
	 * (one fence more), and with parity behind an intent of its own (one more); without
	 * those fences the scenario would not test the direct-write path at all. */
	struct {
		const char *name;
		struct wl_plan plan;
		unsigned fences;
		bool direct;
	} sc[] = {
		{ "alloc+link one fresh 4 KiB object", { 1, false, { op_alloc(0, 4096, 1) } }, 1, true },
		{ "alloc+link fresh 64 B, 1 KiB and 40 KiB objects",
		  { 3, false, { op_alloc(1, 64, 2), op_alloc(2, 1024, 3), op_alloc(3, 40000, 4) } },
		  1, true },
		{ "logged overwrite of 20 KiB of an existing object",
		  { 1, false, { op_write(3, 10000, 20480, 5) } }, 1, false },
		{ "small overwrites of three existing objects",
		  { 3, false, { op_write(0, 100, 8, 6), op_write(1, 0, 64, 7), op_write(2, 1000, 24, 8) } },
		  1, false },
		{ "free of one object", { 1, false, { op_free(1) } }, 1, false },
		{ "replace: free and allocate in one slot",
		  { 1, false, { { .kind = WL_REPLACE, .slot = 2, .size = 3000, .whole = true,
				  .nranges = 1, .r = { { 0, 3000, 9 } } } } },
		  1, true },
		{ "alloc into a freed slot and overwrite another",
		  { 2, false, { op_alloc(1, 200, 10), op_write(3, 0, 40000, 11) } }, 1, false },
		{ "free everything", { 4, false, { op_free(0), op_free(1), op_free(2), op_free(3) } },
		  1, false },
	};
	size_t nsc = sizeof(sc) / sizeof(sc[0]);
	char path[128];
	kr_pool *pool;

	tu_pool_path(path, sizeof(path), "crash-focus");
	TU_OK(tu_create(path, 8ull << 20, 8, 2, 512, &pool));
	TU_OK(kr_root(pool, ROOT_SIZE, &g_root));
	TU_OK(kr_pool_close(pool));

	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.seed = seed;
	/* Every fence of each hand-picked transaction is imaged; a sanitizer build, there for
	 * memory errors along the recovery paths, takes 16 random images at each, not 64. */
	o.fence_every = 1;
	o.random_images = tu_sanitized() ? 16 : 64;
	o.max_reports = 5;
	o.open_flags |= KR_OPEN_PREFAULT; /* the deep check reads every page (see test_crash.c) */
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim busy");
	TU_OK(tu_open(path, &pool));
	wl_ctx_init(&g_wl, pool, g_root, &params);
	crashsim_drain();

	struct kr_pool_stat ps;
	TU_OK(kr_pool_stat(pool, &ps));
	bool parity = (ps.features & KR_FEAT_PARITY) != 0;
	unsigned failed = 0, live_bad = 0, bad_fences = 0;
	const char *failed_names[16];
	struct crashsim_stats prev, st;
	crashsim_get_stats(&prev);
	for (size_t i = 0; i < nsc; i++) {
		g_scenario = sc[i].name;
		struct kr_counters c;
		kr_counters_reset();
		wl_exec(&g_wl, &sc[i].plan);
		kr_counters_get(&c);
		unsigned want = sc[i].fences + (sc[i].direct ? 1 + parity : 0);
		if (c.fences != want) {
			fprintf(stderr, "[%s] %llu fences, expected %u%s\n", sc[i].name,
				(unsigned long long)c.fences, want,
				sc[i].direct ? " (the direct write's payload fence, and its intent's with parity)" : "");
			bad_fences++;
		}
		crashsim_drain(); /* so the failures counted below are this scenario's */
		/* The live pool itself, no crash involved, must hold the new state. */
		char why[256];
		if (wl_verify(pool, g_root, &g_wl.model, true, why, sizeof(why)) != 0) {
			fprintf(stderr, "[%s] the LIVE pool after commit: %s\n", sc[i].name, why);
			live_bad++;
		}
		crashsim_get_stats(&st);
		printf("  %-52s %llu fences, %4llu images, %llu failed\n", sc[i].name,
		       (unsigned long long)c.fences, (unsigned long long)(st.images - prev.images),
		       (unsigned long long)(st.failures - prev.failures));
		if (st.failures > prev.failures)
			failed_names[failed++] = sc[i].name;
		prev = st;
	}
	g_scenario = "close";
	TU_OK(kr_pool_close(pool));
	crashsim_stop(&st);

	printf("test_crash_focus: %llu crash images checked, %llu failed\n",
	       (unsigned long long)st.images, (unsigned long long)st.failures);
	for (unsigned i = 0; i < failed; i++)
		fprintf(stderr, "test_crash_focus: NOT ATOMIC: %s\n", failed_names[i]);
	/* and a normal reopen must give the final state */
	TU_OK(tu_open(path, &pool));
	char why[256];
	if (wl_verify(pool, g_root, &g_wl.model, true, why, sizeof(why)) != 0) {
		fprintf(stderr, "after close and reopen: %s\n", why);
		live_bad++;
	}
	TU_OK(kr_pool_close(pool));
	TU_ASSERT(live_bad == 0, "the pool is wrong even without a crash (see above)");
	TU_ASSERT(bad_fences == 0, "%u scenarios took other paths than pinned (see above)",
		  bad_fences);
	TU_ASSERT(st.images > 0, "no image checked");
	TU_ASSERT(st.failures == 0, "%u of %zu scenarios are not crash-atomic", failed, nsc);
	wl_ctx_free(&g_wl);
	TU_END_CHECK_ALL("test_crash_focus");
	return 0;
}
