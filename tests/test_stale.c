/*
 * test_stale.c - stores the application makes durable itself (kr_stored_persist, what
 * libpmemobj's pmemobj_persist becomes) and the stale map behind them (obj/stale.c).
 *
 *   costs     a persist in a marked column is one fence and its own lines, as libpmemobj's;
 *             the first in a column adds one fence and the map's line in each control page
 *   check     kr_pool_check brings a marked column up to date and judges it; the cleaner
 *             thread does the same within its period
 *   window    a lost page in a marked column is refused at open with KR_E_MEDIA (its parity
 *             is stale), never rebuilt wrong; after a clean close it is repaired
 *   crash     the crash simulator over persists mixed with transactions on the same objects
 *             and checks, and flushes drained only after a pass of another thread ran
 *             between (kr_pool_check): every image recovers to before or after each
 *             operation, with sound redundancy (stale.c invariants 1, 2 and 5)
 *   threads   two threads persist while two commit transactions on the same objects and the
 *             cleaner runs every millisecond: afterwards every byte is the last one written
 *             and the deep check passes (stale.c invariants 3 and 4)
 *   first     a transaction commits right after open, then the application persists its own
 *             bytes over the same range, then the process dies: recovery keeps the
 *             persisted bytes (the transaction counts as a writer of the range even though
 *             nothing had asked for writers when it committed: stale.c invariant 5)
 *   oldpool   a pool made before the stale map refuses kr_stored_persist cleanly
 *
 * Usage: test_stale FIXTURE_DIR
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crashsim.h"
#include "testutil.h"

#define POOL_SIZE (64u << 20)
#define OBJ_SIZE (16u << 10)
#define NOBJ 4

static const char *fixture_dir;

static kr_pool *make_pool_sized(const char *tag, char path[128], uint64_t size)
{
	tu_pool_path(path, 128, tag);
	unlink(path);
	kr_pool *pool;
	TU_OK(tu_create(path, size, 0, 0, 0, &pool));
	return pool;
}

static kr_pool *make_pool(const char *tag, char path[128])
{
	return make_pool_sized(tag, path, POOL_SIZE);
}

static uint8_t *home(kr_pool *pool, kr_oid oid) { return (uint8_t *)kr_pool_base(pool) + oid; }

static struct kr_pool_stat stat_of(kr_pool *pool)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	return st;
}

/* ---- costs ----------------------------------------------------------------------------- */

/* Stores len bytes at p and persists them: the counters of the persist alone. */
static struct kr_counters persist_counted(kr_pool *pool, uint8_t *p, size_t len, const char *where)
{
	struct kr_counters c;
	memset(p, 0x5a, len);
	kr_counters_reset();
	TU_OK(kr_stored_persist(pool, p, len));
	kr_counters_get(&c);
	printf("persist of %zu B %s: %llu fence(s), %llu line(s) written back\n", len, where,
	       (unsigned long long)c.fences, (unsigned long long)c.flushed_lines);
	TU_EQ(c.commits, 0);
	return c;
}

static void costs(void **state)
{
	(void)state;
	char path[128];
	kr_pool *pool = make_pool("stale-costs", path);
	TU_ASSERT(stat_of(pool).stale_map, "a new pool has the stale map");
	kr_oid x = tu_alloc_zeros(pool, OBJ_SIZE);
	uint8_t *p = home(pool, x);
	/* The first persist may push durable_seq past the allocation (stale.c invariant 5). */
	p[0] = 1;
	TU_OK(kr_stored_persist(pool, p, 8));

	size_t at = 64 - ((uintptr_t)p % 64) + 64; /* a line of its own, the first's column */
	struct kr_counters c = persist_counted(pool, p + at, 8, "in a marked column");
	TU_EQ(c.fences, 1);
	TU_EQ(c.flushed_lines, 1);
	/* The next page is the next column: marked first, in both control pages. */
	c = persist_counted(pool, p + (4096 - (uintptr_t)p % 4096) + 128, 8, "in a column not marked yet");
	TU_EQ(c.fences, 2);
	TU_EQ(c.flushed_lines, 3);
	/* A range over two lines writes back both, still one fence. */
	c = persist_counted(pool, p + at, 100, "over two lines");
	TU_EQ(c.fences, 1);
	TU_EQ(c.flushed_lines, 2);

	/* Misuse: outside the pool, NULL pool. */
	uint8_t dram[8];
	TU_EQ(kr_stored_persist(pool, dram, 8), KR_E_MISUSE_ARG);
	TU_EQ(kr_stored_persist(NULL, p, 8), KR_E_MISUSE_ARG);
	TU_OK(kr_pool_close(pool));
	TU_DEEP_CHECK_FILE(path, "costs");
}

/* ---- check and cleaner ----------------------------------------------------------------- */

static void check(void **state)
{
	(void)state;
	char path[128];
	setenv("KERATIN_STALE_MS", "0", 1); /* no cleaner: the check's own clean is tested */
	kr_pool *pool = make_pool("stale-check", path);
	kr_oid x = tu_alloc_zeros(pool, OBJ_SIZE);
	uint8_t *p = home(pool, x);
	memset(p + 100, 0xab, 300);
	TU_OK(kr_stored_persist(pool, p + 100, 300));
	struct kr_pool_stat st = stat_of(pool);
	TU_ASSERT(st.stale_columns >= 1, "the persisted column is marked");
	/* Its checksum trails: a conservative read recomputes it rather than repairing the
	 * application's bytes away. */
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_CONSERVATIVE, 0, 0));
	const uint8_t *r = kr_get(pool, x);
	TU_ASSERT(r && r[100] == 0xab && r[399] == 0xab, "a read returns the persisted bytes: %s",
		  kr_errmsg());
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_DEFAULT, 0, 0));

	memset(p + 5000, 0xcd, 64);
	TU_OK(kr_stored_persist(pool, p + 5000, 64));
	struct kr_check_report rep = {0};
	TU_OK(kr_pool_check(pool, 0, &rep));
	TU_EQ(rep.bad_objects, 0);
	TU_EQ(rep.bad_columns, 0);
	st = stat_of(pool);
	TU_EQ(st.stale_columns, 0);
	TU_ASSERT(st.stale_cleaned >= 2, "%llu columns cleaned", (unsigned long long)st.stale_cleaned);
	TU_DEEP_CHECK(pool, "after the check");
	TU_OK(kr_pool_close(pool));

	/* The cleaner thread, every 5 ms. */
	setenv("KERATIN_STALE_MS", "5", 1);
	TU_OK(tu_open(path, &pool));
	p = home(pool, x);
	memset(p + 9000, 0xef, 200);
	TU_OK(kr_stored_persist(pool, p + 9000, 200));
	double until = tu_now() + 10;
	while (stat_of(pool).stale_columns && tu_now() < until)
		usleep(1000);
	TU_EQ(stat_of(pool).stale_columns, 0);
	TU_DEEP_CHECK(pool, "after the cleaner's pass");
	TU_OK(kr_pool_close(pool));
	unsetenv("KERATIN_STALE_MS");
}

/* ---- the window: a lost page in a marked column ---------------------------------------- */

struct lost {
	char path[128];
	kr_oid x;
};

/* In a child: persist into x and end without closing (a crash). */
static void persist_and_crash(void *arg)
{
	struct lost *l = arg;
	kr_pool *pool;
	TU_OK(tu_open(l->path, &pool));
	memset(home(pool, l->x) + 8, 0x77, 64);
	TU_OK(kr_stored_persist(pool, home(pool, l->x) + 8, 64));
	_exit(0);
}

/* ---- the first persist after transactions ---------------------------------------------- */

/* In a child: a transaction writes x's first 64 bytes, the application persists others over
 * them, and the process ends without closing. */
static void commit_persist_and_crash(void *arg)
{
	struct lost *l = arg;
	kr_pool *pool;
	TU_OK(tu_open(l->path, &pool));
	uint8_t v[64];
	memset(v, 0x11, sizeof(v));
	TU_OK(kr_update(pool, l->x, 0, v, sizeof(v)));
	memset(home(pool, l->x), 0x22, 64);
	TU_OK(kr_stored_persist(pool, home(pool, l->x), 64));
	_exit(0);
}

static void first(void **state)
{
	(void)state;
	struct lost l;
	setenv("KERATIN_STALE_MS", "0", 1); /* no cleaner pass asks before the persist does */
	kr_pool *pool = make_pool("stale-first", l.path);
	l.x = tu_alloc_zeros(pool, 64);
	TU_OK(kr_pool_close(pool));
	char err[512];
	TU_OK(tu_run_child(commit_persist_and_crash, &l, err, sizeof(err)));
	TU_OK(tu_open(l.path, &pool));
	for (int j = 0; j < 64; j++)
		TU_ASSERT(home(pool, l.x)[j] == 0x22, "byte %d is 0x%02x: recovery replayed the "
			  "transaction over the persisted bytes", j, home(pool, l.x)[j]);
	TU_DEEP_CHECK(pool, "after recovery");
	TU_OK(kr_pool_close(pool));
	unlink(l.path);
	unsetenv("KERATIN_STALE_MS");
}

static void window(void **state)
{
	(void)state;
	struct lost l;
	setenv("KERATIN_STALE_MS", "0", 1);
	kr_pool *pool = make_pool("stale-window", l.path);
	struct kr_pool_stat st = stat_of(pool);
	l.x = tu_alloc_zeros(pool, 64);
	/* y covers two whole rows: one of its pages shares x's column. */
	kr_oid y = tu_alloc_zeros(pool, 2 * st.row_size + 8192);
	uint8_t pat[4096];
	tu_fill(pat, sizeof(pat), 42);
	for (uint64_t o = 0; o + sizeof(pat) <= kr_size(pool, y); o += sizeof(pat))
		TU_OK(kr_update(pool, y, o, pat, sizeof(pat)));
	struct kr_location lx = KR_LOCATION_INIT, ly = KR_LOCATION_INIT;
	TU_OK(kr_pool_locate(pool, l.x, &lx));
	TU_OK(kr_pool_locate(pool, y, &ly));
	uint32_t row = ly.row + 1; /* wholly inside y */
	uint64_t lost = lx.page + ((int64_t)row - (int64_t)lx.row) * (int64_t)st.row_size;
	struct kr_location lz = KR_LOCATION_INIT;
	TU_OK(kr_pool_locate(pool, lost, &lz));
	TU_ASSERT(lz.object == y && lz.column == lx.column && lz.row != lx.row,
		  "the lost page is y's, in x's column");
	TU_OK(kr_pool_close(pool));

	char err[512];
	TU_OK(tu_run_child(persist_and_crash, &l, err, sizeof(err)));
	TU_OK(kr_badblocks_add(l.path, lost));
	int rc = tu_open(l.path, &pool);
	printf("open with a lost page in a marked column: %s\n", kr_strerror(rc));
	TU_EQ(rc, KR_E_MEDIA);
	TU_ASSERT(strstr(kr_errmsg(), "stale"), "the message says why: %s", kr_errmsg());

	/* Without the lost page the crash recovers (the column recomputed), and after a clean
	 * close the same page is rebuilt at open. */
	char bb[140];
	snprintf(bb, sizeof(bb), "%s.badblocks", l.path);
	unlink(bb);
	TU_OK(tu_open(l.path, &pool));
	TU_EQ(stat_of(pool).stale_columns, 0);
	TU_ASSERT(home(pool, l.x)[8] == 0x77 && home(pool, l.x)[71] == 0x77, "the persist survived");
	TU_DEEP_CHECK(pool, "after recovery");
	TU_OK(kr_pool_close(pool));
	TU_OK(kr_badblocks_add(l.path, lost));
	TU_OK(tu_open(l.path, &pool));
	TU_EQ(stat_of(pool).media_repairs, 1);
	for (uint64_t j = 0; j < 4096; j++)
		TU_ASSERT(home(pool, y)[lost - y + j] == pat[(lost - y + j) % sizeof(pat)],
			  "byte %llu of the rebuilt page", (unsigned long long)j);
	TU_DEEP_CHECK(pool, "after the repair");
	TU_OK(kr_pool_close(pool));
	unlink(bb);
	unsetenv("KERATIN_STALE_MS");
}

/* ---- crash ----------------------------------------------------------------------------- */

static kr_oid g_obj[NOBJ];
static uint8_t g_before[NOBJ][OBJ_SIZE], g_after[NOBJ][OBJ_SIZE];
static const char *g_step = "open";

static int matches(kr_pool *pool, uint8_t (*want)[OBJ_SIZE])
{
	for (int i = 0; i < NOBJ; i++)
		if (memcmp(kr_get(pool, g_obj[i]), want[i], OBJ_SIZE) != 0)
			return 0;
	return 1;
}

static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	(void)ctx;
	char why[256];
	/* checks invariants stale.c 1, stale.c 2 and stale.c 5: a persisted word survives
	 * every later fence, and no image's redundancy disagrees with its bytes */
	if (!matches(pool, g_before) && !matches(pool, g_after)) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: neither before nor after\n", g_step,
			(unsigned long long)img->fence, (int)img->kind, img->index);
		return 1;
	}
	if (tu_deep_check(pool, why, sizeof(why))) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: %s\n", g_step,
			(unsigned long long)img->fence, (int)img->kind, img->index, why);
		return 1;
	}
	return 0;
}

/* kr_pool_check on a thread of its own: a pass of the cleaner that runs between another
 * thread's kr_stored_flush and its kr_stored_drain. */
static void *check_run(void *arg)
{
	struct kr_check_report rep = {0};
	return (void *)(intptr_t)kr_pool_check(arg, 0, &rep);
}

/* One step: a word persisted, a word committed, or a check. Each changes one 8-byte word,
 * so every image holds the state before the step or after it. The words are few (the
 * first 8 and 8 across the rest of each object), so that persists often land on words a
 * transaction above durable_seq wrote: its replay must not bring them back (invariant 5). */
static void crash_step(kr_pool *pool, struct tu_rng *rng)
{
	int i = (int)tu_rng_below(rng, NOBJ);
	size_t w = tu_rng_below(rng, 16);
	size_t off = w < 8 ? w * 8 : (w - 7) * (OBJ_SIZE / 9) / 8 * 8;
	uint64_t v = tu_rng_next(rng);
	memcpy(g_before, g_after, sizeof(g_before));
	memcpy(g_after[i] + off, &v, 8);
	switch (tu_rng_below(rng, 8)) {
	case 0:
		g_step = "check";
		memcpy(g_after, g_before, sizeof(g_after));
		struct kr_check_report rep = {0};
		TU_OK(kr_pool_check(pool, 0, &rep));
		break;
	case 1:
	case 2:
		g_step = "transaction";
		TU_OK(kr_update(pool, g_obj[i], off, &v, 8));
		break;
	case 3: {
		/* The pass computes over the flushed word and unmarks its column before this
		 * thread's fence: it must make the word durable itself first (invariant 1). */
		g_step = "flush, a pass on another thread, drain";
		memcpy(home(pool, g_obj[i]) + off, &v, 8);
		crashsim_note_persisted_store(home(pool, g_obj[i]) + off, 8);
		TU_OK(kr_stored_flush(pool, home(pool, g_obj[i]) + off, 8));
		pthread_t th;
		void *rc;
		TU_EQ(pthread_create(&th, NULL, check_run, pool), 0);
		pthread_join(th, &rc);
		TU_EQ((intptr_t)rc, KR_OK);
		TU_OK(kr_stored_drain(pool));
		break;
	}
	default:
		g_step = "persist";
		memcpy(home(pool, g_obj[i]) + off, &v, 8);
		crashsim_note_persisted_store(home(pool, g_obj[i]) + off, 8);
		TU_OK(kr_stored_persist(pool, home(pool, g_obj[i]) + off, 8));
		break;
	}
}

static void crash(void **state)
{
	(void)state;
	char path[128];
	kr_pool *pool = make_pool_sized("stale-crash", path, 8u << 20); /* small images */
	for (int i = 0; i < NOBJ; i++)
		g_obj[i] = tu_alloc_zeros(pool, OBJ_SIZE);
	memset(g_after, 0, sizeof(g_after));
	TU_OK(kr_pool_close(pool));

	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.random_images = tu_scaled(4, 1);
	o.seed = tu_seed("stale", 5);
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim busy");
	memcpy(g_before, g_after, sizeof(g_before));
	TU_OK(tu_open(path, &pool));
	struct tu_rng rng;
	tu_rng_seed(&rng, o.seed);
	unsigned steps = tu_scaled(120, 30);
	for (unsigned s = 0; s < steps; s++)
		crash_step(pool, &rng);
	g_step = "close";
	memcpy(g_before, g_after, sizeof(g_before));
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);
	TU_ASSERT(st.failures == 0, "%llu of %llu crash images failed", (unsigned long long)st.failures,
		  (unsigned long long)st.images);
	TU_ASSERT(st.images > 0, "no crash image was checked");
	TU_EQ(st.unrecorded_lines, 0);
	printf("crash: %u steps, %llu images at %llu fences, each before or after its step\n", steps,
	       (unsigned long long)st.images, (unsigned long long)st.fences);
}

/* ---- threads --------------------------------------------------------------------------- */

struct worker {
	kr_pool *pool;
	int id;       /* 0, 1: persist; 2: transactions; 3: in-place transactions */
	unsigned ops; /* at least; then on until the cleaner has finished a pass */
	uint64_t last[NOBJ][OBJ_SIZE / 8 / 4]; /* the last value of each word this worker owns */
};

/* Worker w owns every fourth word of each object (w, w + 4, ...): the threads share objects,
 * pages and columns, never a word. Workers 0 and 1 persist their stores, 2 commits
 * micro-buffered transactions, 3 in-place ones (whose ranges the cleaner must not judge
 * while they are open: stale.c invariant 4). */
static void *work(void *arg)
{
	struct worker *w = arg;
	struct tu_rng rng;
	tu_rng_seed(&rng, 1000 + (uint64_t)w->id);
	/* The cleaner's first pass over a fresh pool maps its pages in and may outlast the
	 * minimum (90 ms on a huge-page tmpfs, where the 4 x 20000 operations take less):
	 * the workers go on until a pass has cleaned columns under them, up to 50 times. */
	for (unsigned n = 0; n < w->ops || (n < 50 * w->ops && !stat_of(w->pool).stale_cleaned); n++) {
		int i = (int)tu_rng_below(&rng, NOBJ);
		size_t k = tu_rng_below(&rng, OBJ_SIZE / 8 / 4);
		size_t off = (k * 4 + (size_t)w->id) * 8;
		uint64_t v = tu_rng_next(&rng) | 1;
		if (w->id < 2) {
			uint8_t *p = home(w->pool, g_obj[i]) + off;
			__atomic_store_n((uint64_t *)p, v, __ATOMIC_RELAXED);
			TU_OK(kr_stored_persist(w->pool, p, 8));
		} else {
			/* Trusting: a persisting thread's store, not persisted yet, would fail a
			 * verification, and its repair would take the store back (keratin.h). */
			kr_tx *tx;
			TU_OK(kr_tx_begin(w->pool, &tx));
			kr_tx_trust(tx);
			uint64_t *p = w->id == 2 ? kr_tx_add(tx, g_obj[i], off, 8)
						 : kr_tx_add_in_place(tx, g_obj[i], off, 8);
			TU_ASSERT(p, "kr_tx_add: %s", kr_errmsg());
			*p = v;
			TU_OK(kr_tx_commit(tx));
		}
		w->last[i][k] = v;
	}
	return NULL;
}

static void threads(void **state)
{
	(void)state;
	char path[128];
	setenv("KERATIN_STALE_MS", "1", 1);
	kr_pool *pool = make_pool("stale-threads", path);
	for (int i = 0; i < NOBJ; i++)
		g_obj[i] = tu_alloc_zeros(pool, OBJ_SIZE);
	static struct worker w[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i] = (struct worker){.pool = pool, .id = i, .ops = tu_scaled(20000, 2000)};
		TU_ASSERT(pthread_create(&t[i], NULL, work, &w[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	struct kr_pool_stat st = stat_of(pool);
	printf("threads: at least %u operations each; %llu columns cleaned meanwhile\n", w[0].ops,
	       (unsigned long long)st.stale_cleaned);
	TU_ASSERT(st.stale_cleaned > 0, "the cleaner ran");
	for (int id = 0; id < 4; id++)
		for (int i = 0; i < NOBJ; i++)
			for (size_t k = 0; k < OBJ_SIZE / 8 / 4; k++) {
				uint64_t got;
				memcpy(&got, home(pool, g_obj[i]) + (k * 4 + (size_t)id) * 8, 8);
				TU_ASSERT(got == w[id].last[i][k], "worker %d object %d word %zu", id, i, k);
			}
	/* checks invariants stale.c 3 and stale.c 4: marks and cleans raced with commits */
	TU_DEEP_CHECK(pool, "after the threads");
	TU_OK(kr_pool_close(pool));
	TU_DEEP_CHECK_FILE(path, "threads, reopened");
	unsetenv("KERATIN_STALE_MS");
}

/* ---- a pool made before the stale map --------------------------------------------------- */

static void oldpool(void **state)
{
	(void)state;
	char path[128], cmd[1024];
	tu_pool_path(path, sizeof(path), "stale-old");
	snprintf(cmd, sizeof(cmd), "gzip -dc -- '%s/pool-v1-prefresh.kr.gz' > '%s'", fixture_dir, path);
	TU_ASSERT(system(cmd) == 0, "could not decompress the fixture");
	kr_pool *pool;
	TU_OK(tu_open(path, &pool));
	TU_ASSERT(!stat_of(pool).stale_map, "the old pool has no stale map");
	kr_oid r;
	TU_OK(kr_root(pool, 0, &r));
	int rc = kr_stored_persist(pool, home(pool, r), 8);
	printf("kr_stored_persist on an old pool: %s: %s\n", kr_strerror(rc), kr_errmsg());
	TU_EQ(rc, KR_E_MISUSE_STATE);
	TU_OK(kr_pool_close(pool));
	unlink(path);
}

int main(int argc, char **argv)
{
	TU_ASSERT(argc == 2, "usage: test_stale FIXTURE_DIR");
	fixture_dir = argv[1];
	static const struct tu_case cases[] = {
		TU_CASE(costs, NULL, NULL),   TU_CASE(check, NULL, NULL),
		TU_CASE(window, NULL, NULL),  TU_CASE(crash, NULL, NULL),
		TU_CASE(threads, NULL, NULL), TU_CASE(first, NULL, NULL),
		TU_CASE(oldpool, NULL, NULL),
	};
	return TU_RUN_CASES("stale", cases);
}
