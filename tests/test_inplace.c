/*
 * test_inplace.c - in-place writes (kr_tx_add_in_place, kr_tx_add_stored): the application
 * stores straight into the pool, as libpmemobj programs do, and keratin keeps atomicity,
 * checksums and parity.
 *
 * Part 1 runs each kind of in-place change once and checks values, kr_pool_check and the
 * deep check after it: a committed in-place overwrite, an aborted one (old bytes back), a new
 * object written in place (small: logged whole; large: fenced where it is, behind the
 * intent made when it was first written), one freed after
 * being written in place, stores declared after the fact with and without the old bytes, and
 * the misuse cases (mixing with micro-buffers, a range beyond the object, a transaction
 * whose undo does not fit a lane), and a large object whose DRAM block checksums another
 * thread's object evicts while it is written in place (its next range is verified whole,
 * with the ranges' old bytes: no false damage, and a real scribble still found).
 *
 * Part 2 runs the same scenarios under the crash simulator: an image at every fence (the
 * "nothing", "all" and random ones), the application's own stores reported to it
 * (crashsim_note_store) so that random images may hold them, as eviction would. Every image
 * must recover to the state before the scenario or (once the commit was called) after it,
 * object by object, and pass the deep check: no lost or garbled data, no false damage.
 * An image with the new bytes stored in place but the commit not reached recovers the old
 * bytes only because the undo entry stayed pending (this checks invariant log.c 7).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crashsim.h"
#include "parity.h"
#include "pool_state.h"
#include "quiesce.h"
#include "ftutil.h"
#include "testutil.h"
#include "tx.h"
#include "vcache.h"

#define NSLOTS 4
#define MAXOBJ 12288

/* The model: for each root slot, the object's size and bytes before and after the scenario. */
struct state {
	uint32_t size[NSLOTS];
	uint8_t bytes[NSLOTS][MAXOBJ];
};
static struct state g_before, g_after;
static int g_committing; /* the scenario's commit has been called: after is acceptable too */
static const char *g_scenario = "setup";
static kr_oid g_root;

static uint8_t *home(kr_pool *pool, kr_oid oid) { return (uint8_t *)kr_pool_base(pool) + oid; }

/* 0 if the pool's slots hold st, else 1 with why. */
static int matches(kr_pool *pool, const struct state *st, char *why, size_t n)
{
	const kr_oid *slot = kr_get(pool, g_root);
	if (!slot)
		return snprintf(why, n, "no root"), 1;
	for (int i = 0; i < NSLOTS; i++) {
		if (!st->size[i]) {
			if (slot[i])
				return snprintf(why, n, "slot %d holds an object, expected none", i), 1;
			continue;
		}
		const uint8_t *p = kr_get(pool, slot[i]);
		if (!p || kr_size(pool, slot[i]) != st->size[i])
			return snprintf(why, n, "slot %d: no object of %u bytes", i, st->size[i]), 1;
		for (uint32_t b = 0; b < st->size[i]; b++)
			if (p[b] != st->bytes[i][b])
				return snprintf(why, n, "slot %d byte %u is 0x%02x, expected 0x%02x", i, b,
						p[b], st->bytes[i][b]),
				       1;
	}
	return 0;
}

/* Stores declared after the fact on a pool without redundancy: keratin has no old bytes to
 * put back while it commits, so a crash before the commit may leave any line old or new
 * (as a libpmemobj persist that did not finish): each 64-byte line of each object must be
 * before's or after's. */
static int g_line_atomic;
static int lines_match(kr_pool *pool, char *why, size_t n)
{
	const kr_oid *slot = kr_get(pool, g_root);
	for (int i = 0; i < NSLOTS; i++) {
		if (!g_after.size[i] && !g_before.size[i] && !slot[i])
			continue;
		const uint8_t *p = slot[i] ? kr_get(pool, slot[i]) : NULL;
		if (!p || g_before.size[i] != g_after.size[i] || kr_size(pool, slot[i]) != g_after.size[i])
			return snprintf(why, n, "slot %d is not the object both states have", i), 1;
		uint64_t base = slot[i];
		for (uint32_t b = 0; b < g_after.size[i];) {
			uint32_t end = (uint32_t)(((base + b) / 64 + 1) * 64 - base);
			if (end > g_after.size[i])
				end = g_after.size[i];
			if (memcmp(p + b, g_before.bytes[i] + b, end - b) != 0 &&
			    memcmp(p + b, g_after.bytes[i] + b, end - b) != 0)
				return snprintf(why, n, "slot %d: the line at byte %u is neither", i, b), 1;
			b = end;
		}
	}
	return 0;
}

static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	char w0[200], w1[200] = "commit not called", why[256];
	int bad = matches(pool, &g_before, w0, sizeof(w0));
	if (bad && g_committing)
		bad = matches(pool, &g_after, w1, sizeof(w1));
	if (bad && g_line_atomic)
		bad = lines_match(pool, w1, sizeof(w1));
	if (bad) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: neither before (%s) nor after (%s)\n",
			g_scenario, (unsigned long long)img->fence, (int)img->kind, img->index, w0, w1);
		return 1;
	}
	if (tu_deep_check(pool, why, sizeof(why))) {
		fprintf(stderr, "[%s] fence %llu image %d#%u: %s\n", g_scenario,
			(unsigned long long)img->fence, (int)img->kind, img->index, why);
		return 1;
	}
	return 0;
}

/* The pool as it is now becomes g_before (and g_after, until the scenario changes it). */
static void snapshot(kr_pool *pool)
{
	const kr_oid *slot = kr_get(pool, g_root);
	memset(&g_before, 0, sizeof(g_before));
	for (int i = 0; i < NSLOTS; i++)
		if (slot[i]) {
			g_before.size[i] = (uint32_t)kr_size(pool, slot[i]);
			memcpy(g_before.bytes[i], kr_get(pool, slot[i]), g_before.size[i]);
		}
	g_after = g_before;
	g_committing = 0;
	g_line_atomic = 0;
}

static int g_sim; /* the crash simulator is running: report the application's stores */

/* The application's stores into the pool, mirrored into the model's after state. evictable:
 * reported to the crash simulator, so that images may hold them before any fence. */
static void app_store_ex(kr_pool *pool, kr_oid oid, int slot, size_t off, size_t len,
			 uint64_t seed, int evictable)
{
	uint8_t buf[MAXOBJ];
	tu_fill(buf, len, seed);
	memcpy(home(pool, oid) + off, buf, len);
	if (g_sim && evictable)
		crashsim_note_store(home(pool, oid) + off, len);
	if (slot >= 0)
		memcpy(g_after.bytes[slot] + off, buf, len);
}

static void app_store(kr_pool *pool, kr_oid oid, int slot, size_t off, size_t len, uint64_t seed)
{
	app_store_ex(pool, oid, slot, off, len, seed, 1);
}

static void check_now(kr_pool *pool, const struct state *st, const char *when)
{
	char why[256];
	TU_ASSERT(matches(pool, st, why, sizeof(why)) == 0, "%s: %s", when, why);
	struct kr_check_report rep = {0};
	TU_ASSERT(kr_pool_check(pool, 0, &rep) == KR_OK,
		  "%s: check finds %llu bad objects, %llu bad columns", when,
		  (unsigned long long)rep.bad_objects, (unsigned long long)rep.bad_columns);
	TU_DEEP_CHECK(pool, when);
}

/* Sets slot to oid inside tx, in place (the root is written in place too). */
static void set_slot(kr_pool *pool, kr_tx *tx, int slot, kr_oid oid)
{
	kr_oid *s = kr_tx_add_in_place(tx, g_root, slot * sizeof(kr_oid), sizeof(kr_oid));
	TU_ASSERT(s, "root slot %d in place: %s", slot, kr_errmsg());
	*s = oid;
	if (g_sim)
		crashsim_note_store(s, sizeof(*s));
}

/* ---- the scenarios (each leaves g_after as what it committed) ---------------------------- */

static void sc_overwrite(kr_pool *pool)
{
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[0];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, a, 16, 32), "%s", kr_errmsg());
	app_store(pool, a, 0, 16, 32, 11);
	TU_ASSERT(kr_tx_add_in_place(tx, a, 100, 400), "%s", kr_errmsg());
	app_store(pool, a, 0, 100, 400, 12);
	/* Named again, overlapping: the undo must keep the oldest bytes. */
	TU_ASSERT(kr_tx_add_in_place(tx, a, 90, 40), "%s", kr_errmsg());
	app_store(pool, a, 0, 90, 40, 13);
	/* kr_tx_get sees the stores. */
	TU_ASSERT(memcmp((const uint8_t *)kr_tx_get(tx, a) + 90, g_after.bytes[0] + 90, 40) == 0,
		  "kr_tx_get does not see the in-place stores");
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

static void sc_abort(kr_pool *pool)
{
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[0];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, a, 0, 256), "%s", kr_errmsg());
	app_store(pool, a, -1, 0, 256, 21); /* aborted: after stays before */
	kr_tx_abort(tx);
}

static void sc_new(kr_pool *pool, int slot, uint32_t size, uint64_t seed)
{
	kr_tx *tx;
	kr_oid n;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 3, &n));
	TU_ASSERT(kr_tx_add_in_place(tx, n, 0, size), "%s", kr_errmsg());
	g_after.size[slot] = size;
	app_store(pool, n, slot, 0, size, seed);
	set_slot(pool, tx, slot, n);
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

static void sc_free_written(kr_pool *pool, int slot)
{
	kr_oid c = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, c, 8, 64), "%s", kr_errmsg());
	app_store(pool, c, -1, 8, 64, 31);
	TU_OK(kr_tx_free(tx, c));
	set_slot(pool, tx, slot, 0);
	g_after.size[slot] = 0;
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

static void sc_stored(kr_pool *pool, int slot, size_t off, size_t len, int give_old)
{
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[slot];
	uint8_t old[MAXOBJ];
	memcpy(old, home(pool, a) + off, len);
	/* Not evictable: stores declared after the fact are unprotected until the commit fence
	 * (the window, docs/DESIGN.md), and an image holding some of them before it would show
	 * a mix of old and new lines under the old checksum. What this scenario pins is that
	 * from the declaration on, every fence leaves before or after. */
	app_store_ex(pool, a, slot, off, len, 41 + off, 0);
	g_line_atomic = tu_protection() == KR_PROTECT_NONE || tu_protection() == KR_PROTECT_ML;
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_add_stored(tx, a, off, len, give_old ? old : NULL));
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

/* Undo past a lane (16 KiB lanes: 256 lines, a quarter kept for the commit): the third
 * 4000-byte range of the slot's 12000-byte object (setup) spills into a segment, and the
 * transaction commits at home. abort: the same, aborted. */
static void sc_large(kr_pool *pool, int slot, int abort)
{
	kr_oid o = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[0];
	TU_OK(kr_tx_begin(pool, &tx));
	for (int i = 0; i < 3; i++) {
		TU_ASSERT(kr_tx_add_in_place(tx, o, 4000 * i, 4000), "%s", kr_errmsg());
		app_store(pool, o, abort ? -1 : slot, 4000 * i, 4000, 61 + i);
		TU_ASSERT(kr_tx_add_in_place(tx, a, 64 * i, 8), "%s", kr_errmsg());
		app_store(pool, a, abort ? -1 : 0, 64 * i, 8, 71 + i);
	}
	if (abort) {
		kr_tx_abort(tx);
		return;
	}
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

/* sc_large whose commit does not fit what the lane has left (six new objects logged whole,
 * 6 KB of redo in a 16 KiB lane whose undo spilled): its last entry, CANCEL included, goes
 * to the spill segment. Segment lines keep their parity through the patch hook, made
 * durable by the entry's own fence: recovery must recompute the segment although that
 * CANCEL cancels the entry that attached it. The allocations make a new run on the
 * transaction's lane while its undo is open: that commit must keep the undo's hold on
 * durable_seq, and its apply must be durable before the CANCEL, which covers it. */
static void sc_large_last(kr_pool *pool, int slot)
{
	kr_oid o = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	for (int i = 0; i < 3; i++) {
		TU_ASSERT(kr_tx_add_in_place(tx, o, 4000 * i, 4000), "%s", kr_errmsg());
		app_store(pool, o, slot, 4000 * i, 4000, 81 + i);
	}
	for (int i = 0; i < 6; i++) {
		kr_oid n;
		TU_OK(kr_tx_alloc(tx, 1000, 9, &n));
		uint8_t *p = kr_tx_open(tx, n);
		TU_ASSERT(p, "%s", kr_errmsg());
		tu_fill(p, 1000, 90 + (uint64_t)i);
	}
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

/* Another thread's in-place transaction, open from pin_start to pin_end: its undo holds
 * durable_seq below it, so everything committed meanwhile stays replayable. It stores
 * nothing (its undo replays the bytes that are there). */
static pthread_barrier_t pin_meet;
static pthread_t pin_thread;

static void *pin_run(void *arg)
{
	kr_pool *pool = arg;
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[0];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, a, 900, 8), "%s", kr_errmsg());
	pthread_barrier_wait(&pin_meet); /* pinned */
	pthread_barrier_wait(&pin_meet); /* the scenario is over */
	kr_tx_abort(tx);
	return NULL;
}

static void pin_start(kr_pool *pool)
{
	pthread_barrier_init(&pin_meet, NULL, 2);
	TU_ASSERT(pthread_create(&pin_thread, NULL, pin_run, pool) == 0, "pthread_create");
	pthread_barrier_wait(&pin_meet);
}

static void pin_end(void)
{
	pthread_barrier_wait(&pin_meet);
	pthread_join(pin_thread, NULL);
	pthread_barrier_destroy(&pin_meet);
}

/* A home commit over bytes an older transaction committed normally (its redo still
 * replayable, durable_seq held back by another thread's transaction): a recovery after
 * the home commit must not replay the older redo over them (log.c, masks). With the undo
 * of sc_large's crash images, this checks invariant log.c 8. */
static void sc_older_redo(kr_pool *pool, int slot)
{
	kr_oid o = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, o, 100, 64), "%s", kr_errmsg());
	app_store(pool, o, slot, 100, 64, 81);
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
	snapshot(pool); /* the older transaction is in; now the home commit */
	sc_large(pool, slot, 0);
}

/* 5000 bytes in place: the undo fits the lane, and the commit is at home by size
 * (HOME_MIN_REDO, tx.c), with no segment. */
static void sc_home_by_size(kr_pool *pool, int slot)
{
	kr_oid o = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, o, 3000, 5000), "%s", kr_errmsg());
	app_store(pool, o, slot, 3000, 5000, 95);
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

/* Two ranges named one after the other in one 1 KiB block of a large object (verified by
 * block, vcache.h), with a store in place between them: naming the second must not take
 * the first one's store for damage and repair it away. */
static void sc_same_block(kr_pool *pool, int slot)
{
	kr_oid o = ((const kr_oid *)kr_get(pool, g_root))[slot];
	kr_tx *tx;
	/* Opened in a transaction that is then aborted: verified whole, which leaves its block
	 * checksums in DRAM. */
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add(tx, o, 0, 8), "%s", kr_errmsg());
	kr_tx_abort(tx);
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, o, 2100, 8), "%s", kr_errmsg());
	app_store(pool, o, slot, 2100, 8, 91);
	TU_ASSERT(kr_tx_add_in_place(tx, o, 2200, 8), "%s", kr_errmsg());
	app_store(pool, o, slot, 2200, 8, 92);
	g_committing = 1;
	TU_OK(kr_tx_commit(tx));
}

static void run_all(kr_pool *pool, void (*each)(kr_pool *, const char *))
{
	g_scenario = "overwrite in place";
	snapshot(pool), sc_overwrite(pool), each(pool, g_scenario);
	g_scenario = "abort in place";
	snapshot(pool), sc_abort(pool), each(pool, g_scenario);
	g_scenario = "new object in place, logged (300 B)";
	snapshot(pool), sc_new(pool, 1, 300, 51), each(pool, g_scenario);
	g_scenario = "new object in place, direct (9000 B)";
	snapshot(pool), sc_new(pool, 2, 9000, 52), each(pool, g_scenario);
	g_scenario = "free an object written in place";
	snapshot(pool), sc_free_written(pool, 1), each(pool, g_scenario);
	g_scenario = "stored, old from parity";
	snapshot(pool), sc_stored(pool, 0, 600, 24, 0), each(pool, g_scenario);
	g_scenario = "stored across pages, old from parity";
	snapshot(pool), sc_stored(pool, 2, 4000, 300, 0), each(pool, g_scenario);
	g_scenario = "stored, old given";
	snapshot(pool), sc_stored(pool, 2, 10, 100, 1), each(pool, g_scenario);
	g_scenario = "large in place, spilled, committed at home";
	snapshot(pool), sc_large(pool, 3, 0), each(pool, g_scenario);
	g_scenario = "large in place, spilled, aborted";
	snapshot(pool), sc_large(pool, 3, 1), each(pool, g_scenario);
	/* Its segment's block may serve the next one: the abort's CANCEL keeps recovery from
	 * reading the new segment's lines for the aborted transaction's too. */
	g_scenario = "large in place again, after the abort";
	snapshot(pool), sc_large(pool, 3, 0), each(pool, g_scenario);
	g_scenario = "large in place, spilled, its commit in the segment";
	snapshot(pool), sc_large_last(pool, 3), each(pool, g_scenario);
	g_scenario = "home commit by size, no segment";
	snapshot(pool), sc_home_by_size(pool, 3), each(pool, g_scenario);
	g_scenario = "two ranges of one block of a large object, a store between";
	snapshot(pool), sc_same_block(pool, 3), each(pool, g_scenario);
	g_scenario = "home commit over an older transaction's replayable redo";
	pin_start(pool);
	snapshot(pool), sc_older_redo(pool, 3), pin_end(), each(pool, g_scenario);
}

static void check_after(kr_pool *pool, const char *when) { check_now(pool, &g_after, when); }
static void no_check(kr_pool *pool, const char *when) {}

static kr_pool *setup(const char *path)
{
	kr_pool *pool;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 16, &pool)); /* small lanes: sc_large spills */
	TU_OK(kr_root(pool, NSLOTS * sizeof(kr_oid), &g_root));
	kr_tx *tx;
	kr_oid a;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, 1024, 1, &a));
	uint8_t *p = kr_tx_open(tx, a);
	TU_ASSERT(p, "%s", kr_errmsg());
	tu_fill(p, 1024, 1);
	kr_oid big;
	TU_OK(kr_tx_alloc(tx, 12000, 4, &big));
	TU_ASSERT((p = kr_tx_open(tx, big)), "%s", kr_errmsg());
	tu_fill(p, 12000, 2);
	kr_oid *r = kr_tx_open(tx, g_root);
	TU_ASSERT(r, "%s", kr_errmsg());
	r[0] = a;
	r[3] = big;
	TU_OK(kr_tx_commit(tx));
	return pool;
}

static void misuse(kr_pool *pool)
{
	kr_oid a = ((const kr_oid *)kr_get(pool, g_root))[0];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add(tx, a, 0, 8), "%s", kr_errmsg());
	TU_ASSERT(!kr_tx_add_in_place(tx, a, 0, 8) && kr_errcode() == KR_E_MISUSE_STATE,
		  "in place after a micro-buffer: %d", kr_errcode());
	kr_tx_abort(tx);
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_add_in_place(tx, a, 0, 8), "%s", kr_errmsg());
	TU_ASSERT(!kr_tx_add(tx, a, 0, 8) && kr_errcode() == KR_E_MISUSE_STATE,
		  "micro-buffer after in place: %d", kr_errcode());
	kr_tx_abort(tx);
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(!kr_tx_add_in_place(tx, a, 1000, 100) && kr_errcode() == KR_E_MISUSE_RANGE,
		  "range beyond the object: %d", kr_errcode());
	kr_tx_abort(tx);
	/* 1 MiB of undo in 4 KiB ranges, sixteen times a lane: it spills, and commits at home
	 * with every byte; aborted, every byte comes back. */
	kr_oid big;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, 1 << 20, 2, &big));
	TU_OK(kr_tx_commit(tx));
	uint8_t *was = malloc(1 << 20);
	for (int round = 0; round < 2; round++) {
		memcpy(was, home(pool, big), 1 << 20);
		TU_OK(kr_tx_begin(pool, &tx));
		for (size_t off = 0; off < (1 << 20); off += 4096) {
			uint8_t *p = kr_tx_add_in_place(tx, big, off, 4096);
			TU_ASSERT(p, "in place at %zu of 1 MiB: %s", off, kr_errmsg());
			memset(p, 0xa0 + round, 4096);
		}
		if (round == 0) {
			TU_OK(kr_tx_commit(tx));
			const uint8_t *now = kr_get(pool, big);
			for (size_t i = 0; i < (1 << 20); i++)
				TU_ASSERT(now[i] == 0xa0, "byte %zu of the committed 1 MiB is %#x", i, now[i]);
		} else {
			kr_tx_abort(tx);
			TU_ASSERT(memcmp(was, home(pool, big), 1 << 20) == 0, "the aborted 1 MiB did not come back");
		}
		TU_DEEP_CHECK(pool, round ? "after the large abort" : "after the large commit");
	}
	/* Undo of one line an entry, 4096 of them: the lane, then segments filled to their
	 * last lines, each attaching the next (PMDK's hashmap_tx rebuild). */
	TU_OK(kr_tx_begin(pool, &tx));
	for (size_t off = 0; off < 4096 * 16; off += 16) {
		uint8_t *p = kr_tx_add_in_place(tx, big, off, 8);
		TU_ASSERT(p, "8 bytes in place at %zu: %s", off, kr_errmsg());
		memset(p, 0x5c, 8);
	}
	TU_OK(kr_tx_commit(tx));
	const uint8_t *now = kr_get(pool, big);
	for (size_t i = 0; i < 4096 * 16; i++)
		TU_ASSERT(now[i] == (i % 16 < 8 ? 0x5c : 0xa0), "byte %zu after 4096 small ranges: %#x", i, now[i]);
	TU_DEEP_CHECK(pool, "after 4096 small ranges in place");
	free(was);
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, big));
	TU_OK(kr_tx_commit(tx));
	check_now(pool, &g_after, "after misuse");
}

/* Another thread verifies the objects of oids[0..n) whole (kr_tx_open), each in a
 * transaction of its own, and stops once the first one holds the slot of the watched
 * object's DRAM block checksums: what a thread working on objects of its own does to them. */
struct evictor {
	kr_pool *pool;
	const kr_oid *oids;
	unsigned n;
	kr_oid watched;
	uint32_t watched_size;
	unsigned used;
	int rc; /* its first failure, or KR_OK */
};

static void *evict_run(void *arg)
{
	struct evictor *e = arg;
	for (e->used = 0; e->used < e->n; e->used++) {
		kr_tx *tx;
		if ((e->rc = kr_tx_begin(e->pool, &tx)) != KR_OK)
			break;
		const void *got = kr_tx_open(tx, e->oids[e->used]);
		if (!got)
			e->rc = kr_errcode();
		kr_tx_abort(tx);
		if (!got || !kr_tx_blocks_cached(e->pool, e->watched, e->watched_size))
			break;
	}
	return NULL;
}

/* evict: another thread takes the slot of the object's block checksums mid-transaction;
 * scribble: a byte outside the named ranges is damaged before the next range is named. */
static void vcache_evicted(const char *path, int evict, int scribble)
{
	enum { SIZE = 2 * KR_VCACHE_MIN, OTHERS = 1024 };
	kr_pool *pool;
	TU_OK(tu_create(path, 128ull << 20, 0, 0, 0, &pool));
	static kr_oid others[OTHERS];
	kr_oid a;
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 1, &a));
	TU_ASSERT(kr_tx_open(tx, a), "%s", kr_errmsg());
	tu_fill(kr_tx_open(tx, a), SIZE, 5);
	TU_OK(kr_tx_commit(tx));
	for (unsigned i = 0; i < OTHERS; i += 32) {
		TU_OK(kr_tx_begin(pool, &tx));
		for (unsigned k = i; k < i + 32; k++)
			TU_OK(kr_tx_alloc(tx, SIZE, 1, &others[k]));
		TU_OK(kr_tx_commit(tx));
	}
	/* Verified whole once: its block checksums are cached, so the next transaction
	 * verifies it block by block as it names ranges. */
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT(kr_tx_open(tx, a), "%s", kr_errmsg());
	kr_tx_abort(tx);
	TU_ASSERT(kr_tx_blocks_cached(pool, a, SIZE), "the object's blocks are not cached");

	/* Two ranges named first: the whole check must take the old bytes of each. */
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *p = kr_tx_add_in_place(tx, a, 0, 64);
	TU_ASSERT(p, "%s", kr_errmsg());
	memset(p, 0xee, 64);
	TU_ASSERT((p = kr_tx_add_in_place(tx, a, 5000, 100)), "%s", kr_errmsg());
	memset(p, 0xcc, 100);
	if (evict) {
		struct evictor ev = {pool, others, OTHERS, a, SIZE, 0, KR_OK};
		pthread_t th;
		TU_EQ(pthread_create(&th, NULL, evict_run, &ev), 0);
		pthread_join(th, NULL);
		TU_ASSERT(ev.rc == KR_OK, "the other thread failed: %d", ev.rc);
		TU_ASSERT(!kr_tx_blocks_cached(pool, a, SIZE),
			  "%u other objects verified, none took the slot of the object's blocks", ev.used);
	}
	if (scribble) /* damage outside the ranges, in a block not read yet */
		((uint8_t *)kr_pool_base(pool))[a + SIZE - 100] ^= 0x40;
	p = kr_tx_add_in_place(tx, a, SIZE - 64, 64);
	if (scribble) {
		TU_ASSERT(!p && kr_errcode() == KR_E_CORRUPT,
			  "a scribble outside the ranges went unseen (%d)", kr_errcode());
		kr_tx_abort(tx);
		/* Dropped, so that the next opening verifies whole (and would repair). */
		TU_ASSERT(!kr_tx_blocks_cached(pool, a, SIZE), "damaged, yet its block checksums stay");
		((uint8_t *)kr_pool_base(pool))[a + SIZE - 100] ^= 0x40;
	} else {
		TU_ASSERT(p, "sound bytes reported damaged after the block checksums were evicted: %s",
			  kr_errmsg());
		memset(p, 0xdd, 64);
		TU_OK(kr_tx_commit(tx));
		const uint8_t *now = kr_get(pool, a);
		TU_ASSERT(now[0] == 0xee && now[5000] == 0xcc && now[SIZE - 1] == 0xdd,
			  "the in-place stores were lost");
	}
	struct kr_check_report rep = {0};
	TU_OK(kr_pool_check(pool, 0, &rep));
	TU_ASSERT(rep.bad_objects == 0 && rep.bad_columns == 0, "check after eviction: %llu bad objects",
		  (unsigned long long)rep.bad_objects);
	TU_DEEP_CHECK(pool, "vcache eviction");
	TU_OK(kr_pool_close(pool));
}

/* Two transactions write disjoint ranges of one object in place at once (libpmemobj allows
 * it). The second one's opening verifies the object while home holds the first one's
 * stores: its checksum holds with those ranges' old bytes, and nothing may be "repaired"
 * (a repair from parity undid the first one's stores, which its commit then lost). */
struct second_writer {
	kr_pool *pool;
	kr_oid oid;
};

static void *second_writer(void *arg)
{
	struct second_writer *w = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(w->pool, &tx));
	uint8_t *p = kr_tx_add_in_place(tx, w->oid, 1000, 64);
	TU_ASSERT(p, "the second writer's range: %s", kr_errmsg());
	memset(p, 0x44, 64);
	TU_OK(kr_tx_commit(tx));
	return NULL;
}

static void two_writers(const char *path, size_t size)
{
	kr_tx *tx;
	struct second_writer w;
	kr_pool *pool = tu_pool_with_object(path, 16 << 20, 0, size, &w.oid);
	w.pool = pool;
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *a = kr_tx_add_in_place(tx, w.oid, 0, 64);
	TU_ASSERT(a, "%s", kr_errmsg());
	memset(a, 0x22, 64);
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, second_writer, &w) == 0, "pthread_create");
	pthread_join(t, NULL);
	TU_ASSERT(a[0] == 0x22, "two writers, %zu B: the first one's stores were undone (%#x)", size, a[0]);
	TU_OK(kr_tx_commit(tx));
	const uint8_t *g = kr_get(pool, w.oid);
	TU_ASSERT(g[0] == 0x22 && g[63] == 0x22 && g[1000] == 0x44 && g[1063] == 0x44 && g[64] == 0x11,
		  "two writers, %zu B: bytes %#x %#x %#x %#x %#x", size, g[0], g[63], g[1000], g[1063], g[64]);
	TU_DEEP_CHECK(pool, "after two in-place writers of one object");
	TU_OK(kr_pool_close(pool));
	printf("two in-place writers of one %zu-byte object: both kept\n", size);
}

/* The same while the first writer's home commit waits for a parity lock halfway through its
 * patch (another thread, here the test, holds it): it has patched its first page into
 * parity and not the second, and waits outside the commit gate, so the second writer's
 * opening may judge the object meanwhile. The checksum is still the old one: it holds with
 * every range's old bytes, the patched page's too (they were counted as new once: the
 * opening failed with a false checksum error). */
struct home_writer {
	kr_pool *pool;
	kr_oid oid;
	size_t len;
	sem_t stored; /* its stores are made: the other thread reads them from here on */
};

static void *home_writer(void *arg)
{
	struct home_writer *w = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(w->pool, &tx));
	uint8_t *p = kr_tx_add_in_place(tx, w->oid, 0, w->len); /* committed at home */
	TU_ASSERT(p, "the home writer's range: %s", kr_errmsg());
	memset(p, 0x22, w->len);
	sem_post(&w->stored);
	TU_OK(kr_tx_commit(tx));
	return NULL;
}

static void two_writers_one_waiting(const char *path)
{
	enum { SIZE = 3 * 4096, HOME = 8192, OTHER = 10000 };
	kr_tx *tx;
	struct home_writer w = {.len = HOME};
	sem_init(&w.stored, 0, 0);
	kr_pool *pool = tu_pool_with_object(path, 16 << 20, 0, SIZE, &w.oid);
	w.pool = pool;
	/* The parity lock of the home range's second page. */
	uint64_t second = (w.oid + 4096) & ~(uint64_t)4095;
	uint64_t poff = kr_parity_offset(&pool->redund.parity, second);
	pthread_rwlock_t *lock = &pool->redund.parity.locks[poff / 4096 % KR_PARITY_LOCKS].rw;
	TU_ASSERT(pthread_rwlock_wrlock(lock) == 0, "parity lock");
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, home_writer, &w) == 0, "pthread_create");
	sem_wait(&w.stored);
	usleep(200 * 1000); /* the home writer reaches the lock */
	TU_ASSERT(pthread_tryjoin_np(t, NULL) == EBUSY, "the home writer did not wait for the parity lock");
	kr_tx_forget(pool, w.oid, SIZE); /* no block checksums: the opening checks it whole */
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *b = kr_tx_add_in_place(tx, w.oid, OTHER, 64);
	TU_ASSERT(b, "the second writer, while the first one's home commit waits for a parity lock: %s",
		  kr_errmsg());
	memset(b, 0x44, 64);
	pthread_rwlock_unlock(lock);
	pthread_join(t, NULL);
	TU_OK(kr_tx_commit(tx));
	const uint8_t *g = kr_get(pool, w.oid);
	TU_ASSERT(g && g[0] == 0x22 && g[HOME - 1] == 0x22 && g[HOME] == 0x11 && g[OTHER] == 0x44,
		  "two writers, one waiting: bytes wrong");
	TU_DEEP_CHECK(pool, "after two in-place writers, one waiting for a parity lock");
	TU_OK(kr_pool_close(pool));
	printf("two in-place writers of one object, one waiting mid-patch: both kept\n");
}

/* The background scrubber (KR_READ_SCRUB) runs repair passes while an in-place transaction
 * is open: home holds the application's uncommitted stores, which neither the object's
 * checksum nor parity reflects yet. A pass must leave them alone: repaired from parity they
 * would be lost, and the commit would make the old bytes new; a new object's block, still
 * free, recomputed over them, would keep stale parity after the commit. */
static void scrub_while_open(const char *path)
{
	enum { SIZE = 2048, PASSES = 3 };
	kr_pool *pool;
	kr_oid old, fresh;
	kr_tx *tx;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 0, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 1, &old));
	memset(kr_tx_open(tx, old), 0x11, SIZE);
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_SCRUB, 0, 0.005));
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *a = kr_tx_add_in_place(tx, old, 0, SIZE);
	TU_ASSERT(a, "%s", kr_errmsg());
	memset(a, 0x22, SIZE);
	TU_OK(kr_tx_alloc(tx, SIZE, 2, &fresh));
	uint8_t *b = kr_tx_add_in_place(tx, fresh, 0, SIZE);
	TU_ASSERT(b, "%s", kr_errmsg());
	memset(b, 0x33, SIZE);
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	uint64_t until = st.scrub_passes + PASSES;
	for (int ms = 0; st.scrub_passes < until && ms < 10000; ms += 5) {
		struct timespec d = {0, 5000000};
		nanosleep(&d, NULL);
		TU_OK(kr_pool_stat(pool, &st));
	}
	TU_ASSERT(st.scrub_passes >= until, "the scrubber ran no pass in 10 s");
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_DEFAULT, 0, 0));
	const uint8_t *ga = kr_get(pool, old), *gb = kr_get(pool, fresh);
	for (size_t i = 0; i < SIZE; i++) {
		TU_ASSERT(ga[i] == 0x22, "scrub while open: the in-place stores were lost (byte %zu is %#x)", i,
			  ga[i]);
		TU_ASSERT(gb[i] == 0x33, "scrub while open: the new object's byte %zu is %#x", i, gb[i]);
	}
	TU_DEEP_CHECK(pool, "after scrub passes during an open in-place transaction");
	TU_OK(kr_pool_close(pool));
	printf("scrub passes while in place: %d passes, the stores kept, redundancy sound\n", PASSES);
}

/* A media error while an in-place transaction is open. Parity still reflects the
 * transaction's old bytes, and home holds its uncommitted stores:
 *   - POISON_ROW: a page of another row of the same column, rebuilt from parity and the
 *     rows, must take the transaction's old bytes for that row, not home's (or the page
 *     comes back wrong);
 *   - POISON_PAGE: a page holding the transaction's own range comes back with the old bytes:
 *     its stores are gone, so its commit must fail with KR_E_MEDIA and leave the old bytes,
 *     never commit them as new;
 *   - POISON_PARITY: the column's parity page, met by another thread's commit, is recomputed
 *     from the rows less the stores (or the transaction's commit patches them in twice);
 *   - POISON_FREED: no poison, but stores into B declared after the fact, whose old bytes
 *     come from parity too, where A's block was written in place and freed by another
 *     open transaction first: that one's buffer must not count as in flight any more (its
 *     old bytes are home again), or the two corrections cancel out.
 * The object written in place is A; B lies in the same page column, in another row or in
 * A's own page. */
enum poison_at { POISON_ROW, POISON_PAGE, POISON_PARITY, POISON_FREED };
static const char *const poison_name[] = {"another row of the column", "the stores' own page",
					  "the column's parity page", "no page: stores declared beside a block freed and taken again"};

static void *write_b(void *arg)
{
	struct second_writer *w = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(w->pool, &tx));
	uint8_t *p = kr_tx_open(tx, w->oid);
	TU_ASSERT(p, "%s", kr_errmsg());
	memset(p, 0x66, 64);
	TU_OK(kr_tx_commit(tx));
	return NULL;
}

/* An object of oids in a's page column and zone, in another row (other_row) with bytes at
 * the same offsets in the page, or in a's page; 0 if none. Objects within one page only,
 * which keeps the overlap plain. */
static kr_oid partner(const struct ft_geom *g, kr_oid a, const kr_oid *oids, int n, int other_row)
{
	enum { SIZE = 1000 };
	uint32_t za, ra, ca, zb, rb, cb;
	ft_page_pos(g, a, &za, &ra, &ca);
	if (a / FT_PAGE != (a + SIZE - 1) / FT_PAGE)
		return 0;
	for (int j = 0; j < n; j++) {
		ft_page_pos(g, oids[j], &zb, &rb, &cb);
		uint64_t xa = a % FT_PAGE, xb = oids[j] % FT_PAGE;
		int overlap = xb < xa + SIZE && xa < xb + SIZE;
		if (oids[j] != a && za == zb && ca == cb && (rb != ra) == other_row &&
		    (overlap || !other_row) && oids[j] / FT_PAGE == (oids[j] + SIZE - 1) / FT_PAGE)
			return oids[j];
	}
	return 0;
}

/* POISON_FREED's other transaction: a new object written in place and freed, then held
 * open until the main thread has done its part. */
struct freer {
	kr_pool *pool;
	kr_oid oid;
	pthread_barrier_t meet;
};

static void *freer_run(void *arg)
{
	enum { SIZE = 1000 };
	struct freer *fr = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(fr->pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 1, &fr->oid));
	uint8_t *f = kr_tx_add_in_place(tx, fr->oid, 0, SIZE);
	TU_ASSERT(f, "%s", kr_errmsg());
	memset(f, 0x33, SIZE);
	TU_OK(kr_tx_free(tx, fr->oid));
	pthread_barrier_wait(&fr->meet);
	pthread_barrier_wait(&fr->meet);
	TU_OK(kr_tx_commit(tx));
	return NULL;
}

/* POISON_FREED: stores into B declared afterwards (kr_tx_add_stored): their old bytes come
 * from parity and the rows, corrected for the buffers in flight there. */
static void *declare_b(void *arg)
{
	struct second_writer *w = arg;
	memset((uint8_t *)kr_pool_base(w->pool) + w->oid, 0x77, 64);
	kr_tx *tx;
	TU_OK(kr_tx_begin(w->pool, &tx));
	TU_OK(kr_tx_add_stored(tx, w->oid, 0, 64, NULL));
	TU_OK(kr_tx_commit(tx));
	return NULL;
}

static void poison_while_open(const char *path, enum poison_at at)
{
	enum { SIZE = 1000, NOBJ = 2400 };
	kr_pool *pool;
	kr_tx *tx;
	TU_OK(tu_create(path, 8 << 20, 8, 0, 0, &pool)); /* rows of about 900 KiB */
	static kr_oid oids[NOBJ];
	for (int i = 0; i < NOBJ; i++) {
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, SIZE, 1, &oids[i]));
		memset(kr_tx_open(tx, oids[i]), 0x40 + i % 64, SIZE);
		TU_OK(kr_tx_commit(tx));
	}
	struct ft_geom g;
	ft_geom_load(&g, kr_pool_base(pool));
	kr_oid a = 0, b = 0, freed = 0;
	struct freer fr = {.pool = pool};
	pthread_t freer_t;
	uint32_t za, ra, ca;
	if (at == POISON_FREED) {
		/* The freer's block must lie in a committed run: a new one would be its
		 * transaction's alone until it ends (heap.c), and this one could not take the
		 * block. The objects above fill their runs exactly; one more makes a run with
		 * room, committed. */
		kr_oid spare;
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, SIZE, 1, &spare));
		TU_OK(kr_tx_commit(tx));
		pthread_barrier_init(&fr.meet, NULL, 2);
		TU_ASSERT(pthread_create(&freer_t, NULL, freer_run, &fr) == 0, "pthread_create");
		pthread_barrier_wait(&fr.meet);
		freed = fr.oid;
	}
	TU_OK(kr_tx_begin(pool, &tx));
	if (at == POISON_FREED) {
		TU_OK(kr_tx_alloc(tx, SIZE, 1, &a));
		TU_ASSERT(a == freed, "the freed block 0x%llx was not taken again (0x%llx)",
			  (unsigned long long)freed, (unsigned long long)a);
		b = partner(&g, a, oids, NOBJ, 1);
	}
	for (int i = 0; i < NOBJ && !b && at != POISON_FREED; i++)
		b = partner(&g, a = oids[i], oids, NOBJ, at != POISON_PAGE);
	TU_ASSERT(b, "no two objects of one page column (%s) among %d", poison_name[at], NOBJ);
	ft_page_pos(&g, a, &za, &ra, &ca);
	uint8_t want_b[SIZE], old_a = at == POISON_PAGE ? *(const uint8_t *)kr_get(pool, a) : 0;
	memcpy(want_b, kr_get(pool, b), SIZE);

	uint8_t *p = kr_tx_add_in_place(tx, a, 0, SIZE);
	TU_ASSERT(p, "%s", kr_errmsg());
	memset(p, 0x22, SIZE);
	if (at == POISON_FREED) {
		struct second_writer w = {pool, b};
		pthread_t t;
		TU_ASSERT(pthread_create(&t, NULL, declare_b, &w) == 0, "pthread_create");
		pthread_join(t, NULL);
		memset(want_b, 0x77, 64);
	} else if (at == POISON_PARITY) {
		TU_OK(kr_inject_poison(pool, ft_page_off(&g, za, g.rows, ca)));
		struct second_writer w = {pool, b};
		pthread_t t; /* its commit patches the parity page: it faults there */
		TU_ASSERT(pthread_create(&t, NULL, write_b, &w) == 0, "pthread_create");
		pthread_join(t, NULL);
		memset(want_b, 0x66, 64);
	} else {
		TU_OK(kr_inject_poison(pool, b));
	}
	const uint8_t *gb = kr_get(pool, b); /* a read of B's page faults: it is rebuilt */
	for (size_t i = 0; i < SIZE; i++)
		TU_ASSERT(gb[i] == want_b[i], "poison while in place (%s): byte %zu of B is %#x, not %#x",
			  poison_name[at], i, gb[i], want_b[i]);
	int rc = kr_tx_commit(tx);
	if (at == POISON_FREED) {
		pthread_barrier_wait(&fr.meet);
		pthread_join(freer_t, NULL);
		pthread_barrier_destroy(&fr.meet);
	}
	const uint8_t *ga = kr_get(pool, a);
	if (at != POISON_PAGE) {
		TU_OK(rc);
		TU_ASSERT(ga[0] == 0x22 && ga[SIZE - 1] == 0x22, "poison in %s: the stores were lost",
			  poison_name[at]);
	} else {
		TU_ASSERT(rc == KR_E_MEDIA, "poison under the stores: the commit returned %d, not KR_E_MEDIA "
			  "(byte 0 is %#x)", rc, ga[0]);
		TU_ASSERT(ga[0] == old_a && ga[SIZE - 1] == old_a, "poison under the stores: byte 0 is %#x, "
			  "not the old %#x", ga[0], old_a);
	}
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(st.media_repairs == (at != POISON_FREED), "poison in %s: %llu media repairs, not %d",
		  poison_name[at], (unsigned long long)st.media_repairs, at != POISON_FREED);
	TU_DEEP_CHECK(pool, "after a page repair during an open in-place transaction");
	TU_OK(kr_pool_close(pool));
	static const char *const outcome[] = {"rebuilt with the old bytes, the stores kept",
					      "the commit refused, the old bytes kept",
					      "recomputed less the stores, the stores kept",
					      "old bytes from parity corrected once, the stores kept"};
	printf("poison while in place, %s: %s\n", poison_name[at], outcome[at]);
}

/* A page of a home commit's range lost before the commit touches it: nothing reads home
 * until the commit does, after the trade, so the commit's own read faults and the page
 * comes back with the old bytes. The commit must not make them the new ones: it fails,
 * the pool with it, and the reopen's recovery replays the undo (every byte old). */
static void poison_home_commit(const char *path)
{
	enum { SIZE = 8192 };
	kr_pool *pool;
	kr_tx *tx;
	kr_oid x;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 0, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 1, &x));
	memset(kr_tx_open(tx, x), 0x11, SIZE);
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *p = kr_tx_add_in_place(tx, x, 0, SIZE); /* 8 KiB: committed at home */
	TU_ASSERT(p, "%s", kr_errmsg());
	memset(p, 0x22, SIZE);
	uint64_t page = (x + SIZE / 2) & ~(uint64_t)4095;
	TU_OK(kr_inject_poison(pool, page));
	int rc = kr_tx_commit(tx);
	TU_ASSERT(rc != KR_OK, "poison under a home commit's stores: the commit returned KR_OK, byte %llu "
		  "is %#x", (unsigned long long)(page - x), ((const uint8_t *)kr_pool_base(pool))[page]);
	kr_pool_close(pool);
	TU_OK(tu_open(path, &pool));
	const uint8_t *g = kr_get(pool, x);
	TU_ASSERT(g, "%s", kr_errmsg());
	for (size_t i = 0; i < SIZE; i++)
		TU_ASSERT(g[i] == 0x11, "poison under a home commit's stores: after the reopen byte %zu is %#x",
			  i, g[i]);
	TU_DEEP_CHECK(pool, "after a home commit that lost a page");
	TU_OK(kr_pool_close(pool));
	printf("poison under a home commit's stores: the commit failed (%d), the reopen kept the old bytes\n",
	       rc);
}

/* A page lost under one range of a commit that has settled an earlier one: the two ranges
 * share a page column, in two rows of one large object, and the lost page is the later
 * range's. The commit settles its ranges in order (traded back, or patched into parity at
 * home), so when its own read of the lost page faults the first range is settled: home
 * and parity agree on it. The repair must take that range's bytes from home as they are,
 * not correct them with the buffer's. The later range's stores are gone: the commit fails,
 * and every byte of the object is old again, the lost page's other bytes too. width:
 * the first range's (4096: the commit goes home). */
static void poison_half_settled(const char *path, size_t width)
{
	kr_pool *pool;
	kr_tx *tx;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 0, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	size_t size = 2 * st.row_size + 4 * 4096;
	kr_oid y = tu_alloc_zeros(pool, size);
	uint8_t old[4096];
	memset(old, 0x11, sizeof(old));
	for (uint64_t o = 0; o < size; o += sizeof(old))
		TU_OK(kr_update(pool, y, o, old, sizeof(old)));
	uint64_t a = (4096 - y % 4096) % 4096 + 4096; /* page-aligned in the pool */
	uint64_t b = a + st.row_size + 128;           /* the same column, the next row */
	struct kr_location la = KR_LOCATION_INIT, lb = KR_LOCATION_INIT;
	TU_OK(kr_pool_locate(pool, y + a, &la));
	TU_OK(kr_pool_locate(pool, y + b, &lb));
	TU_ASSERT(la.object == y && lb.object == y && la.column == lb.column && la.row != lb.row,
		  "both ranges in y, one column, two rows");

	TU_OK(kr_tx_begin(pool, &tx));
	uint8_t *pa = kr_tx_add_in_place(tx, y, a, width);
	uint8_t *pb = kr_tx_add_in_place(tx, y, b, 8);
	TU_ASSERT(pa && pb, "%s", kr_errmsg());
	memset(pa, 0x22, width);
	memset(pb, 0x22, 8);
	uint64_t page = lb.page;
	TU_OK(kr_inject_poison(pool, page));
	int rc = kr_tx_commit(tx);
	TU_ASSERT(rc != KR_OK, "a page lost under an in-place range (first range %zu B): the commit "
		  "returned KR_OK", width);
	const uint8_t *base = kr_pool_base(pool);
	int home = width >= 4096; /* the pool fails with the commit: the reopen settles it */
	for (uint64_t i = 0; !home && i < size; i++)
		TU_ASSERT(base[y + i] == 0x11, "a page lost under an in-place range (first range %zu B): "
			  "after the abort byte %llu is %#x (the lost page is at %llu)", width,
			  (unsigned long long)i, base[y + i], (unsigned long long)(page - y));
	kr_pool_close(pool);
	TU_DEEP_CHECK_FILE(path, "after a commit that lost a page under its later range");
	TU_OK(tu_open(path, &pool));
	base = kr_pool_base(pool);
	for (uint64_t i = 0; i < size; i++)
		TU_ASSERT(base[y + i] == 0x11, "a page lost under an in-place range (first range %zu B): "
			  "after the reopen byte %llu is %#x (the lost page is at %llu)", width,
			  (unsigned long long)i, base[y + i], (unsigned long long)(page - y));
	TU_DEEP_CHECK(pool, "after the reopen");
	TU_OK(kr_pool_close(pool));
	printf("poison under the later of two in-place ranges (%zu B first): the commit failed (%d), "
	       "every byte old\n", width, rc);
}

/* Two threads meet one lost page. A reader faulted there first and waits for the repair
 * lock (held here, so that both wait); then a transaction names a range of the page in
 * place, which reads its old bytes from home with the in-flight list held. That read
 * faulted under the list: when the reader won the repair lock, its repair waited 100 ms
 * for the list, gave up, and the reader died of SIGBUS. Home pages are now touched before
 * the list is taken. Eight rounds: either thread may win each time. */
struct lost_reader {
	const volatile uint8_t *p;
	uint8_t got;
};

static void *lost_read(void *arg)
{
	struct lost_reader *r = arg;
	r->got = *r->p;
	return NULL;
}

struct lost_writer {
	kr_pool *pool;
	kr_oid oid;
	size_t off;
	int rc;
};

static void *lost_write(void *arg)
{
	struct lost_writer *w = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(w->pool, &tx));
	kr_tx_trust(tx); /* as keratin-pmemobj: no whole-object check first, which would read it */
	uint8_t *p = kr_tx_add_in_place(tx, w->oid, w->off, 64);
	TU_ASSERT(p, "in place on a lost page: %s", kr_errmsg());
	memset(p, 0x33, 64);
	w->rc = kr_tx_commit(tx);
	return NULL;
}

static void poison_two_threads(const char *path)
{
	enum { SIZE = 3 * 4096, ROUNDS = 8 };
	kr_oid oid;
	kr_pool *pool = tu_pool_with_object(path, 16 << 20, 0, SIZE, &oid);
	for (int round = 0; round < ROUNDS; round++) {
		size_t off = 4096 + 128 * (size_t)round; /* a byte of the object's second page */
		uint64_t page = (oid + off) & ~4095ull;
		TU_OK(kr_inject_poison(pool, page));
		struct kr_quiesce q;
		kr_quiesce_begin(&q, &pool->log); /* the repair lock: both threads wait for it */
		struct lost_reader r = {.p = home(pool, oid) + off + 64};
		struct lost_writer w = {.pool = pool, .oid = oid, .off = off};
		pthread_t tr, tw;
		TU_ASSERT(pthread_create(&tr, NULL, lost_read, &r) == 0, "pthread_create");
		usleep(50 * 1000);
		TU_ASSERT(pthread_create(&tw, NULL, lost_write, &w) == 0, "pthread_create");
		usleep(50 * 1000);
		kr_quiesce_end(&q);
		pthread_join(tr, NULL);
		pthread_join(tw, NULL);
		TU_OK(w.rc);
		TU_ASSERT(r.got == 0x11, "round %d: the reader read %#x", round, r.got);
		const uint8_t *g = kr_get(pool, oid);
		TU_ASSERT(g[off] == 0x33 && g[off + 63] == 0x33 && g[off + 64] == 0x11,
			  "round %d: bytes wrong after the page was rebuilt", round);
	}
	TU_DEEP_CHECK(pool, "after lost pages met by a reader and an in-place range at once");
	TU_OK(kr_pool_close(pool));
	printf("a lost page met by a reader and an in-place range at once: %d rounds, both served\n",
	       ROUNDS);
}

/* A spill segment taken from a heap whose every chunk is a run, all of them empty: the
 * allocator turns empty runs back into chunks by a transaction of its own, from inside the
 * in-place transaction's commit gate. It must stay inside it (log.c invariant 10, checked
 * in debug builds: the internal commit once let the outer one out, so that a repair could
 * run in the middle of it) and must not hold the allocator's lock while it commits. */
static void spill_from_empty_runs(const char *path)
{
	enum { BIG = 256 << 10, SMALL = 64, BATCH = 150 };
	kr_pool *pool;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 16, &pool)); /* small lanes: the undo spills */
	kr_tx *tx;
	kr_oid big;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, BIG, 2, &big));
	TU_OK(kr_tx_commit(tx));
	size_t n = 0, cap = 1 << 16;
	kr_oid *small = malloc(cap * sizeof(*small));
	TU_ASSERT(small, "out of memory");
	for (int full = 0; !full;) {
		TU_OK(kr_tx_begin(pool, &tx));
		for (unsigned i = 0; i < BATCH && !full; i++) {
			if (n == cap && !(small = realloc(small, (cap *= 2) * sizeof(*small))))
				TU_ASSERT(0, "out of memory");
			int rc = kr_tx_alloc(tx, SMALL, 3, &small[n]);
			TU_ASSERT(rc == KR_OK || rc == KR_E_NOSPACE_HEAP, "filling: %s", kr_errmsg());
			full = rc != KR_OK;
			n += rc == KR_OK;
		}
		if (full) { /* a failed allocation aborts its transaction: commit the rest anew */
			kr_tx_abort(tx);
			n -= n % BATCH;
			break;
		}
		TU_OK(kr_tx_commit(tx));
	}
	TU_ASSERT(n > 10000, "the heap took only %zu small objects", n);
	for (size_t i = 0; i < n; i += BATCH) {
		TU_OK(kr_tx_begin(pool, &tx));
		for (size_t j = i; j < i + BATCH && j < n; j++)
			TU_OK(kr_tx_free(tx, small[j]));
		TU_OK(kr_tx_commit(tx));
	}
	free(small);
	TU_OK(kr_tx_begin(pool, &tx));
	for (size_t off = 0; off < BIG; off += 4096) {
		uint8_t *p = kr_tx_add_in_place(tx, big, off, 4096);
		TU_ASSERT(p, "in place at %zu with the heap's chunks all runs: %s", off, kr_errmsg());
		memset(p, 0x3c, 4096);
	}
	TU_OK(kr_tx_commit(tx));
	const uint8_t *now = kr_get(pool, big);
	for (size_t i = 0; i < BIG; i++)
		TU_ASSERT(now[i] == 0x3c, "byte %zu after a spill from empty runs: %#x", i, now[i]);
	TU_DEEP_CHECK(pool, "after a spill from empty runs");
	TU_OK(kr_pool_close(pool));
	printf("in-place undo spilled into chunks of empty runs: ok\n");
}

/* The scrubber's passes beside a stream of commits that allocate and free: a pass reads the
 * allocator's counters for its progress total, which every commit changes. Under TSan
 * (this test runs in the TSan build) an unlocked read is a reported race: the read once
 * went unlocked, and scrub_while_open above caught it only now and then. */
static void scrub_during_commits(const char *path)
{
	enum { ROUNDS = 3000, SIZE = 200, PASSES = 5 };
	kr_pool *pool;
	TU_OK(tu_create(path, 16 << 20, 0, 0, 0, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	uint64_t until = st.scrub_passes + PASSES;
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_SCRUB, 0, 0.001));
	kr_oid keep[8] = {0};
	for (int i = 0; i < ROUNDS || st.scrub_passes < until; i++) {
		TU_ASSERT(i < 100 * ROUNDS, "the scrubber ran %llu passes in %d commits",
			  (unsigned long long)(st.scrub_passes + PASSES - until), i);
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		if (keep[i % 8])
			TU_OK(kr_tx_free(tx, keep[i % 8]));
		TU_OK(kr_tx_alloc(tx, SIZE, 1, &keep[i % 8]));
		TU_OK(kr_tx_commit(tx));
		TU_OK(kr_pool_stat(pool, &st));
	}
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_DEFAULT, 0, 0));
	TU_DEEP_CHECK(pool, "after scrub passes beside allocating commits");
	TU_OK(kr_pool_close(pool));
	printf("scrub passes beside allocating commits: ok\n");
}

int main(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "inplace");
	kr_pool *pool = setup(path);
	run_all(pool, check_after);
	misuse(pool);
	TU_OK(kr_pool_close(pool));
	char path11[128];
	tu_pool_path(path11, sizeof(path11), "inplace-spill-runs");
	spill_from_empty_runs(path11);
	/* Object checksums, and with them the block cache, come with full protection only. */
	static const int modes[][2] = {{1, 0}, {1, 1}, {0, 1}}; /* evict, scribble */
	for (int i = 0; i < 3 && tu_protection() == KR_PROTECT_FULL; i++) {
		char path3[128];
		tu_pool_path(path3, sizeof(path3), "inplace-evicted");
		vcache_evicted(path3, modes[i][0], modes[i][1]);
	}
	if (tu_protection() != KR_PROTECT_FULL)
		printf("block checksums evicted mid-transaction: SKIP (no object checksums here)\n");
	char path4[128];
	tu_pool_path(path4, sizeof(path4), "inplace-scrub");
	scrub_while_open(path4);
	char path12[128];
	tu_pool_path(path12, sizeof(path12), "inplace-scrub-commits");
	scrub_during_commits(path12);
	char path5[128], path6[128];
	tu_pool_path(path5, sizeof(path5), "inplace-writers");
	two_writers(path5, 2048); /* verified whole */
	tu_pool_path(path6, sizeof(path6), "inplace-writers-large");
	two_writers(path6, 16384); /* verified by blocks (vcache.h) */
	if (tu_protection() == KR_PROTECT_FULL) {
		char path10[128];
		tu_pool_path(path10, sizeof(path10), "inplace-writers-waiting");
		two_writers_one_waiting(path10);
	} else {
		printf("two in-place writers, one waiting mid-patch: SKIP (no object checksums here)\n");
	}
	int parity = tu_protection() == KR_PROTECT_FULL || tu_protection() == KR_PROTECT_MLP;
	for (int at = POISON_ROW; at <= POISON_FREED && parity; at++) {
		char path7[128];
		tu_pool_path(path7, sizeof(path7), "inplace-poison");
		poison_while_open(path7, at);
	}
	if (parity) {
		char path9[128];
		tu_pool_path(path9, sizeof(path9), "inplace-poison-home");
		poison_home_commit(path9);
		tu_pool_path(path9, sizeof(path9), "inplace-poison-traded");
		poison_half_settled(path9, 256);  /* traded back */
		tu_pool_path(path9, sizeof(path9), "inplace-poison-patched");
		poison_half_settled(path9, 4096); /* patched at home */
		tu_pool_path(path9, sizeof(path9), "inplace-poison-two");
		poison_two_threads(path9);
	}
	if (!parity)
		printf("poison while in place: SKIP (no parity here)\n");
	printf("part 1: every in-place change checked\n");

	/* Part 2: the same under the crash simulator, on a fresh pool. */
	char path2[128];
	tu_pool_path(path2, sizeof(path2), "inplace-crash");
	pool = setup(path2);
	TU_OK(kr_pool_close(pool));
	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.random_images = tu_scaled(8, 2);
	o.seed = tu_seed("inplace", 7);
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim busy");
	crashsim_enable_checks(false); /* the open's fences: the model is not loaded yet */
	TU_OK(tu_open(path2, &pool));
	snapshot(pool);
	crashsim_enable_checks(true);
	g_sim = 1;
	run_all(pool, no_check);
	g_scenario = "close";
	snapshot(pool);
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);
	TU_ASSERT(st.failures == 0, "%llu of %llu crash images failed",
		  (unsigned long long)st.failures, (unsigned long long)st.images);
	TU_ASSERT(st.images > 0, "no crash image was checked");
	printf("part 2: %llu crash images at %llu fences, every one recovered to before or after\n",
	       (unsigned long long)st.images, (unsigned long long)st.fences);
	TU_END_CHECK_ALL("end");
	return 0;
}
