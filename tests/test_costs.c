/*
 * test_costs.c - the persistence cost of whole-object overwrites and allocations, pinned.
 *
 * With full protection, on a warmed-up pool, for objects of 64 B, 4 KiB and 64 KiB, written
 * through a micro-buffer or in place (kr_tx_add_in_place): every transaction costs exactly
 * one fence per log commit, and PIN.fences_more more (an allocation whose payload is
 * written above the logged size commits an intent first and fences the payload before the
 * commit: two commits, three fences; a large in-place rewrite fences home once more), and the
 * usual transaction (the most frequent value over the run) flushes exactly PIN.lines cache
 * lines, logs exactly PIN.logged bytes and asks the system for memory exactly PIN.mallocs
 * times (a lane keeps what its last transaction allocated). The rare transaction that also
 * advances durable_seq (or, for an allocation, creates an allocator run) may cost a few
 * lines more; that is bounded too. A change that writes, logs or allocates more fails here;
 * one that does less must lower the pin (the new value is printed).
 *
 * Also: a fresh object the transaction never wrote gets the checksum of zeros without a
 * pass over it (kr_obj_crc_zeros); such objects of odd sizes must verify when reopened. And
 * a commit that fails after writing fresh objects home directly fences those writes before
 * their blocks are free again (one fence more, on that failure path only): a later
 * allocation takes zeros it finds in a block for durable.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "testutil.h"

#define SAMPLES 300
#define MAX_VALUES 64

/* The pinned usual costs of one transaction (full protection). */
struct pin {
	const char *what;
	size_t size;
	unsigned commits; /* log commits, each with exactly one fence */
	uint64_t lines;   /* cache lines written back */
	uint64_t logged;  /* bytes of log lines (primary and replica) */
	uint64_t spike;   /* lines a rare transaction may add */
	uint64_t mallocs; /* requests for memory to the system (kr_malloc and kin) */
	unsigned fences_more; /* fences beyond one per log commit */
};

static const struct pin pins[] = {
	/* Memory: an ended transaction leaves its DRAM (header, redo image up to 64 KiB,
	 * micro-buffers up to 4 KiB) to its lane's next one, so a steady small transaction
	 * asks the system for none (three to six requests before). A 64 KiB overwrite asks
	 * for its 150 KB redo image and the block checksums of its next opening (the rewrite
	 * dropped them); its micro-buffer is the one the lane kept (two large ones up to
	 * 64 MiB; it asked for that too before). A rewrite of up to 1 KiB carries the object's
	 * checksum in its own record (tx.c, crc_merged): 64 B was 12 lines and 384 bytes. */
	{"overwrite", 64, 1, 8, 256, 4, 0, 0},
	{"overwrite", 4096, 1, 282, 9600, 4, 0, 0},
	{"overwrite", 65536, 1, 4398, 150016, 4, 2, 0},
	/* Allocations of objects the transaction writes whole log only the allocator's
	 * records above 1 KiB: the object goes home directly behind an intent (its own
	 * commit), 9600 logged bytes at 4 KiB before, and is fenced before the commit (the
	 * fence more: test_after_commit says why). */
	{"alloc+write", 64, 1, 14, 384, 40, 0, 0},
	{"alloc+write", 4096, 2, 141, 384, 40, 0, 1},
	{"alloc+write", 65536, 2, 2061, 384, 40, 1, 1},
	/* Allocations left zero, over space that holds zeros (this pool's is unused): the
	 * header alone is logged and written, no intent (before: the costs above). */
	{"alloc", 64, 1, 10, 256, 40, 0, 0},
	{"alloc", 4096, 1, 10, 256, 40, 0, 0},
	{"alloc", 65536, 1, 10, 256, 40, 0, 0},
	/* In place, as keratin-pmemobj writes (TX_ADD, then stores at home): the old bytes'
	 * undo is one commit, the rest another. */
	{"inplace", 64, 2, 12, 512, 4, 0, 0},
	/* From 2 KiB the new bytes stay home (tx.c, the home commit): home and parity get a
	 * fence of their own before the last commit, which carries the new checksum (it was a
	 * commit of its own, an undo entry of the old one: 3 commits, as many lines). */
	{"inplace", 4096, 2, 284, 9728, 4, 0, 1},
	/* A new object written in place: up to 1 KiB logged whole, as through a micro-buffer;
	 * above, it stays home, fenced before the commit, and the intent made when it was
	 * first written covers it (before: a second intent, and the bytes traded out of home
	 * and streamed back). */
	{"alloc+inplace", 64, 2, 16, 512, 40, 0, 0},
	{"alloc+inplace", 4096, 2, 142, 384, 40, 0, 1},
	{"alloc+inplace", 65536, 2, 2062, 384, 40, 1, 1},
};

/* The most frequent value of v[0..n). */
static uint64_t mode_of(const uint64_t *v, unsigned n)
{
	uint64_t val[MAX_VALUES], cnt[MAX_VALUES];
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned j = 0;
		while (j < k && val[j] != v[i])
			j++;
		if (j == k) {
			TU_ASSERT(k < MAX_VALUES, "more than %d distinct costs", MAX_VALUES);
			val[k] = v[i];
			cnt[k++] = 0;
		}
		cnt[j]++;
	}
	unsigned best = 0;
	for (unsigned j = 1; j < k; j++)
		if (cnt[j] > cnt[best])
			best = j;
	return val[best];
}

/* One transaction of the pinned kind; its counters, and its requests for memory (counted
 * by the fault countdown, armed so far away that it never fires). */
static void one_tx(kr_pool *pool, const struct pin *p, kr_oid target, const uint8_t *src,
		   struct kr_counters *c, uint64_t *mallocs)
{
	kr_tx *tx;
	kr_counters_reset();
	kr_fault_countdown(UINT64_MAX);
	TU_OK(kr_tx_begin(pool, &tx));
	kr_oid oid = target;
	if (!target)
		TU_OK(kr_tx_alloc(tx, p->size, 3, &oid));
	if (strcmp(p->what, "alloc")) {
		int in_place = strstr(p->what, "inplace") != NULL;
		void *d = in_place ? kr_tx_add_in_place(tx, oid, 0, p->size) : kr_tx_add(tx, oid, 0, p->size);
		TU_ASSERT(d, "%s: %s", p->what, kr_errmsg());
		memcpy(d, src, p->size);
	}
	TU_OK(kr_tx_commit(tx));
	*mallocs = kr_fault_calls();
	kr_fault_countdown(0);
	kr_counters_get(c);
}

static void run_pin(kr_pool *pool, const struct pin *p, int *failed)
{
	static uint8_t src[65536];
	static uint64_t lines[SAMPLES], logged[SAMPLES], mallocs[SAMPLES];
	kr_oid target = 0;
	kr_tx *tx;
	if (strncmp(p->what, "alloc", 5)) { /* rewrites of one object */
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, p->size, 1, &target));
		TU_OK(kr_tx_commit(tx));
	}
	struct kr_counters c;
	for (unsigned i = 0; i < 50; i++) /* warm-up: lanes wrap, allocator runs exist */
		one_tx(pool, p, target, src, &c, &mallocs[0]);
	for (unsigned i = 0; i < SAMPLES; i++) {
		tu_fill(src, p->size, i);
		one_tx(pool, p, target, src, &c, &mallocs[i]);
		TU_ASSERT(c.fences == c.commits + p->fences_more, "%s %zu #%u: %llu fences for %llu commits",
			  p->what, p->size, i, (unsigned long long)c.fences, (unsigned long long)c.commits);
		TU_ASSERT(c.commits >= p->commits && c.commits <= p->commits + 1,
			  "%s %zu #%u: %llu commits, expected %u", p->what, p->size, i,
			  (unsigned long long)c.commits, p->commits);
		lines[i] = c.flushed_lines;
		logged[i] = c.bytes_logged;
		if (target) {
			TU_ASSERT(memcmp(kr_get(pool, target), src, p->size) == 0,
				  "%s %zu #%u: the new bytes are not there", p->what, p->size, i);
			TU_ASSERT(c.commits == p->commits, "%s %zu #%u: %llu commits", p->what,
				  p->size, i, (unsigned long long)c.commits);
		}
	}
	uint64_t ml = mode_of(lines, SAMPLES), mb = mode_of(logged, SAMPLES), max = 0;
	uint64_t mm = mode_of(mallocs, SAMPLES);
	for (unsigned i = 0; i < SAMPLES; i++)
		if (lines[i] > max)
			max = lines[i];
	printf("%-10s %6zu  lines %6llu (pinned %6llu, max %6llu)  logged %7llu (pinned %7llu)"
	       "  mallocs %llu (pinned %llu)\n",
	       p->what, p->size, (unsigned long long)ml, (unsigned long long)p->lines,
	       (unsigned long long)max, (unsigned long long)mb, (unsigned long long)p->logged,
	       (unsigned long long)mm, (unsigned long long)p->mallocs);
	if (ml != p->lines || mb != p->logged || max > ml + p->spike || mm != p->mallocs) {
		printf("  MISMATCH: %s of %zu bytes: usual lines %llu (pin %llu), logged %llu (pin "
		       "%llu), most lines %llu (bound %llu), mallocs %llu (pin %llu)\n",
		       p->what, p->size, (unsigned long long)ml, (unsigned long long)p->lines,
		       (unsigned long long)mb, (unsigned long long)p->logged,
		       (unsigned long long)max, (unsigned long long)(ml + p->spike),
		       (unsigned long long)mm, (unsigned long long)p->mallocs);
		*failed = 1;
	}
}

/* Fresh objects never written: their checksum is that of zeros, and they verify. */
static void untouched_fresh(kr_pool *pool)
{
	static const size_t sizes[] = {1, 7, 64, 100, 4095, 4096, 5000, 65536, 70001};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	kr_oid oids[N];
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	for (unsigned i = 0; i < N; i++)
		TU_OK(kr_tx_alloc(tx, sizes[i], 9, &oids[i]));
	TU_OK(kr_tx_commit(tx));
	for (unsigned i = 0; i < N; i++) {
		/* Opening for write verifies the checksum: a wrong one fails here. */
		TU_OK(kr_tx_begin(pool, &tx));
		uint8_t *p = kr_tx_add(tx, oids[i], 0, sizes[i]);
		TU_ASSERT(p, "untouched fresh object of %zu bytes does not verify: %s", sizes[i],
			  kr_errmsg());
		for (size_t k = 0; k < sizes[i]; k++)
			TU_ASSERT(p[k] == 0, "fresh object of %zu bytes: byte %zu is %u", sizes[i], k,
				  p[k]);
		kr_tx_abort(tx);
	}
	TU_DEEP_CHECK(pool, "after untouched fresh objects");
}

/* Commits of many written 4 KiB objects, failed by an allocation failing at each point in
 * turn; those that fail after their direct writes fence again. Through micro-buffers, those
 * are the failures after the intent's commit. In place, the intents were made as the
 * objects were first written, and the commit's direct writes only flush home and patch
 * parity: a failure after them must leave home and parity agreeing (the deep check). */
static void failed_direct_commit(kr_pool *pool, int in_place)
{
	enum { N = 64, SZ = 4096, BIG = 200 << 10 };
	unsigned after_intent = 0;
	kr_oid big = 0;
	kr_tx *tx;
	if (in_place) { /* its redo image, built after the new objects', grows: a failure */
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, BIG, 5, &big));
		TU_OK(kr_tx_commit(tx));
	}
	for (uint64_t n = 1; n < 1000; n++) {
		TU_OK(kr_tx_begin(pool, &tx));
		if (big) { /* added first: the commit builds the buffers newest first */
			void *d = kr_tx_add(tx, big, 0, BIG);
			TU_ASSERT(d, "kr_tx_add: %s", kr_errmsg());
			memset(d, (int)n, BIG);
		}
		for (unsigned i = 0; i < N; i++) {
			kr_oid oid;
			TU_OK(kr_tx_alloc(tx, SZ, 5, &oid));
			void *d = in_place ? kr_tx_add_in_place(tx, oid, 0, SZ) : kr_tx_add(tx, oid, 0, SZ);
			TU_ASSERT(d, "kr_tx_add: %s", kr_errmsg());
			memset(d, 0xa5, SZ);
		}
		struct kr_counters c;
		kr_counters_reset();
		kr_fault_countdown(n);
		int rc = kr_tx_commit(tx);
		kr_fault_countdown(0);
		kr_counters_get(&c);
		if (rc == KR_OK)
			break;
		if (!in_place && c.commits == 1) {
			after_intent++;
			TU_ASSERT(c.fences == 2, "commit failed after its intent (failure %llu): %llu "
				  "fences, expected the intent's and the failure path's",
				  (unsigned long long)n, (unsigned long long)c.fences);
		}
		/* In place: the abort's own fence (its old bytes back), and one for the direct
		 * writes if the commit had begun them. */
		if (in_place && c.fences == 2)
			after_intent++;
	}
	TU_ASSERT(after_intent > 0, "no commit failed after its direct writes");
	printf("failed commits after direct writes%s: %u, each fenced\n", in_place ? " in place" : "",
	       after_intent);
	TU_DEEP_CHECK(pool, "after failed commits");
}

int main(void)
{
	if (tu_protection() != KR_PROTECT_FULL) {
		printf("SKIP: the pins are for full protection\n");
		return 77;
	}
	char path[128];
	kr_pool *pool;
	int failed = 0;
	tu_pool_path(path, sizeof(path), "costs");
	TU_OK(tu_create(path, 256ull << 20, 0, 4, 0, &pool));
	untouched_fresh(pool);
	failed_direct_commit(pool, 0);
	failed_direct_commit(pool, 1);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
		run_pin(pool, &pins[i], &failed);
	TU_DEEP_CHECK(pool, "after the pinned transactions");
	TU_OK(kr_pool_close(pool));
	TU_ASSERT(!failed, "a pinned persistence cost changed (see MISMATCH above)");
	printf("test_costs: %zu kinds of transaction, %d each, at their pinned costs\n",
	       sizeof(pins) / sizeof(pins[0]), SAMPLES);
	TU_END_CHECK_ALL("test_costs");
	return 0;
}
