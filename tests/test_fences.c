/*
 * test_fences.c - the persistence cost of a transaction, through kr_counters.
 *
 * keratin's central promise is one persist round trip per commit. After a warm-up, every
 * one of many consecutive transactions that overwrites a small range (8, 64, 256 or
 * 1024 bytes) of one existing object must cost EXACTLY one store fence, whether it goes
 * through kr_tx_begin/kr_tx_add/kr_tx_commit or kr_update. The test prints a table of
 * fences, flushed lines, bytes written and bytes logged per transaction for overwrites of
 * 8 B..4 KiB and for allocate-and-fill and free transactions; for those it asserts only
 * sanity (a commit counted, at least one fence and flush, logged <= written, no msync in
 * emulated mode, the overwritten bytes at least logged once).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define TARGET_SIZE (64 * 1024)

struct row {
	const char *what;
	size_t size;
	unsigned n;
	struct kr_counters sum;
};

static void add(struct kr_counters *s, const struct kr_counters *c)
{
	s->fences += c->fences;
	s->flushed_lines += c->flushed_lines;
	s->bytes_written += c->bytes_written;
	s->bytes_logged += c->bytes_logged;
	s->msyncs += c->msyncs;
	s->commits += c->commits;
}

/* Sanity every transaction must meet, whatever it does. An allocation or free may also
 * commit an internal heap transaction (a run created or reclaimed), so those may count
 * more than one commit; an overwrite never does. */
static void check_sane(const char *what, size_t size, unsigned i, const struct kr_counters *c)
{
	bool heap_op = !strcmp(what, "alloc") || !strcmp(what, "free");
	TU_ASSERT(heap_op ? c->commits >= 1 : c->commits == 1, "%s %zu #%u: %llu commits counted",
		  what, size, i, (unsigned long long)c->commits);
	TU_ASSERT(c->fences >= 1, "%s %zu #%u: a commit without a fence cannot be durable", what,
		  size, i);
	TU_ASSERT(c->flushed_lines >= 1, "%s %zu #%u: nothing flushed", what, size, i);
	TU_ASSERT(c->bytes_logged <= c->bytes_written, "%s %zu #%u: logged %llu > written %llu",
		  what, size, i, (unsigned long long)c->bytes_logged,
		  (unsigned long long)c->bytes_written);
	TU_ASSERT(c->msyncs == 0, "%s %zu #%u: msync in emulated-pmem mode", what, size, i);
}

/* One overwrite of `size` bytes at a random offset of the target object; counters of the
 * whole transaction, begin to commit. */
static void overwrite(kr_pool *pool, kr_oid target, size_t size, struct tu_rng *rng, bool update,
		      struct kr_counters *c)
{
	static uint8_t src[TARGET_SIZE];
	size_t off = tu_rng_below(rng, TARGET_SIZE - size + 1);
	tu_fill(src, size, tu_rng_next(rng));
	kr_counters_reset();
	if (update) {
		TU_OK(kr_update(pool, target, off, src, size));
	} else {
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		void *p = kr_tx_add(tx, target, off, size);
		TU_ASSERT(p, "kr_tx_add: %s", kr_errmsg());
		memcpy(p, src, size);
		TU_OK(kr_tx_commit(tx));
	}
	kr_counters_get(c);
	/* The bytes must really be there: a cheap commit that loses data proves nothing. */
	TU_ASSERT(memcmp((const uint8_t *)kr_get(pool, target) + off, src, size) == 0,
		  "overwrite of %zu bytes at %zu not visible after commit", size, off);
}

/* Commits of ten new 1 KiB objects each (logged whole, no direct write), kept: about every
 * third needs a new run, which its own commit makes (heap.c), so every commit costs one
 * fence, and in page-cache mode one sync. */
static void many_allocs(kr_pool *pool, const char *mode, unsigned syncs)
{
	enum { COMMITS = 40, PER = 10, SIZE = 1024 };
	kr_oid oids[COMMITS * PER];
	struct kr_counters c;
	for (unsigned i = 0; i < COMMITS; i++) {
		kr_tx *tx;
		kr_counters_reset();
		TU_OK(kr_tx_begin(pool, &tx));
		for (unsigned j = 0; j < PER; j++)
			TU_OK(kr_tx_alloc(tx, SIZE, 3, &oids[i * PER + j]));
		TU_OK(kr_tx_commit(tx));
		kr_counters_get(&c);
		TU_ASSERT(c.fences == 1 && c.msyncs == syncs,
			  "%s: commit %u of %u new %u-byte objects: %llu fences, %llu syncs, not 1 and %u",
			  mode, i, PER, SIZE, (unsigned long long)c.fences, (unsigned long long)c.msyncs,
			  syncs);
	}
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	for (unsigned i = 0; i < COMMITS * PER; i++)
		TU_OK(kr_tx_free(tx, oids[i]));
	TU_OK(kr_tx_commit(tx));
	printf("test_fences: %s: %u commits of %u new %u-byte objects (new runs among them), one "
	       "fence each\n", mode, COMMITS, PER, SIZE);
}

/* An in-place overwrite of 8 KiB commits at home (tx.c): the undo entry's fence before the
 * stores, the home write's, the commit's; the new checksum rides in the commit. */
static void home_commit(kr_pool *pool)
{
	enum { SIZE = 8192, N = 20 };
	kr_oid oid;
	kr_tx *tx;
	struct kr_counters c;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 4, &oid));
	TU_OK(kr_tx_commit(tx));
	for (unsigned i = 0; i < N; i++) {
		kr_counters_reset();
		TU_OK(kr_tx_begin(pool, &tx));
		uint8_t *p = kr_tx_add_in_place(tx, oid, 0, SIZE);
		TU_ASSERT(p, "kr_tx_add_in_place: %s", kr_errmsg());
		memset(p, (int)i + 1, SIZE);
		TU_OK(kr_tx_commit(tx));
		kr_counters_get(&c);
		TU_ASSERT(c.fences == 3, "in-place overwrite of %d bytes #%u: %llu fences, not 3", SIZE, i,
			  (unsigned long long)c.fences);
	}
	const uint8_t *g = kr_get(pool, oid);
	TU_ASSERT(g && g[0] == N && g[SIZE - 1] == N, "in-place overwrite: the last bytes did not stay");
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, oid));
	TU_OK(kr_tx_commit(tx));
	printf("test_fences: %u in-place overwrites of %d bytes (committed at home), 3 fences each\n", N, SIZE);

	/* Many objects changed in place in one transaction (PMDK's hashmap_tx rebuilds its
	 * table so): their checksums are too many for the last entry and take undo entries
	 * of their own (tx.c, HOME_CRCS_IN_COMMIT). Putting them all in the last entry failed
	 * the pool at 40982 keys. */
	enum { MANY = 40000 };
	static kr_oid many[MANY];
	for (unsigned i = 0; i < MANY; i++) {
		if (i % 100 == 0)
			TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, 64, 4, &many[i]));
		if (i % 100 == 99)
			TU_OK(kr_tx_commit(tx));
	}
	TU_OK(kr_tx_begin(pool, &tx));
	for (unsigned i = 0; i < MANY; i++) {
		uint64_t *p = kr_tx_add_in_place(tx, many[i], 0, 8);
		TU_ASSERT(p, "kr_tx_add_in_place #%u: %s", i, kr_errmsg());
		*p = i + 1;
	}
	TU_OK(kr_tx_commit(tx));
	for (unsigned i = 0; i < MANY; i++) {
		const uint64_t *v = kr_get(pool, many[i]);
		TU_ASSERT(v && *v == i + 1, "object %u of %u changed in place in one transaction", i, MANY);
	}
	TU_DEEP_CHECK(pool, "after one transaction changed 40000 objects in place");
	for (unsigned i = 0; i < MANY; i++) {
		if (i % 100 == 0)
			TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_free(tx, many[i]));
		if (i % 100 == 99)
			TU_OK(kr_tx_commit(tx));
	}
	printf("test_fences: one transaction changed %u objects in place (committed at home)\n", MANY);
}

static void print_row(const struct row *r)
{
	double n = r->n;
	printf("%-10s %8zu %10.2f %14.2f %14.1f %14.1f\n", r->what, r->size, r->sum.fences / n,
	       r->sum.flushed_lines / n, r->sum.bytes_written / n, r->sum.bytes_logged / n);
}

int main(void)
{
	uint64_t seed = tu_seed("test_fences", 99);
	unsigned n = tu_scaled(1000, 100);
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	char path[128];
	kr_pool *pool;
	kr_oid target;
	struct kr_counters c;

	tu_pool_path(path, sizeof(path), "fences");
	TU_OK(tu_create(path, 32ull << 20, 0, 4, 0, &pool));
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, TARGET_SIZE, 1, &target));
	TU_OK(kr_tx_commit(tx));

	/* Warm-up: lanes wrap, durable_seq starts moving, allocator caches fill. */
	for (unsigned i = 0; i < 200; i++)
		overwrite(pool, target, tu_rng_logu(&rng, 1, 4096), &rng, false, &c);

	static const size_t sizes[] = { 8, 64, 256, 1024, 4096 };
	struct row rows[32];
	unsigned nrows = 0;
	for (int upd = 0; upd < 2; upd++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct row *r = &rows[nrows++];
			*r = (struct row){ .what = upd ? "kr_update" : "overwrite", .size = sizes[s] };
			for (unsigned i = 0; i < n; i++) {
				overwrite(pool, target, sizes[s], &rng, upd, &c);
				check_sane(r->what, sizes[s], i, &c);
				if (sizes[s] <= 1024) /* checks invariant log.c 5 */
					TU_ASSERT(c.fences == 1,
						  "%s of %zu bytes, transaction %u of %u: %llu fences "
						  "(the commit must cost exactly one)",
						  r->what, sizes[s], i, n, (unsigned long long)c.fences);
				TU_ASSERT(c.bytes_logged >= sizes[s],
					  "%s of %zu bytes logged only %llu bytes", r->what, sizes[s],
					  (unsigned long long)c.bytes_logged);
				add(&r->sum, &c);
				r->n++;
			}
		}
	}

	/* Allocation and free: allocate-and-fill one object per transaction, then free it. */
	static const size_t asizes[] = { 64, 1024, 16 * 1024, 64 * 1024 };
	for (size_t s = 0; s < sizeof(asizes) / sizeof(asizes[0]); s++) {
		struct row *ra = &rows[nrows++], *rf = &rows[nrows++];
		*ra = (struct row){ .what = "alloc", .size = asizes[s] };
		*rf = (struct row){ .what = "free", .size = asizes[s] };
		for (unsigned i = 0; i < n / 2; i++) {
			kr_oid oid;
			kr_counters_reset();
			TU_OK(kr_tx_begin(pool, &tx));
			TU_OK(kr_tx_alloc(tx, asizes[s], 2, &oid));
			uint8_t *p = kr_tx_open(tx, oid);
			TU_ASSERT(p, "kr_tx_open of a new object: %s", kr_errmsg());
			tu_fill(p, asizes[s], i);
			TU_OK(kr_tx_commit(tx));
			kr_counters_get(&c);
			check_sane("alloc", asizes[s], i, &c);
			TU_ASSERT(c.bytes_written >= asizes[s], "alloc %zu wrote only %llu bytes",
				  asizes[s], (unsigned long long)c.bytes_written);
			add(&ra->sum, &c);
			ra->n++;

			kr_counters_reset();
			TU_OK(kr_tx_begin(pool, &tx));
			TU_OK(kr_tx_free(tx, oid));
			TU_OK(kr_tx_commit(tx));
			kr_counters_get(&c);
			check_sane("free", asizes[s], i, &c);
			add(&rf->sum, &c);
			rf->n++;
		}
	}

	many_allocs(pool, "emulated pmem", 0);
	if (tu_protection() == KR_PROTECT_FULL)
		home_commit(pool);
	else
		printf("test_fences: in-place overwrites committed at home: SKIP (not full protection)\n");

	printf("\n%-10s %8s %10s %14s %14s %14s\n", "tx", "bytes", "fences/tx", "flushed/tx",
	       "written/tx", "logged/tx");
	for (unsigned i = 0; i < nrows; i++)
		print_row(&rows[i]);
	printf("\ntest_fences: %u transactions per row, every small overwrite cost exactly 1 fence\n",
	       n);
	TU_OK(kr_pool_close(pool));

	/* Page-cache mode: the same pool opened without KR_OPEN_FORCE_PMEM (tmpfs has no
	 * MAP_SYNC). Every commit's fence syncs the pages the thread flushed before the commit
	 * returns, in one round trip however many ranges it flushed (its lane and the replica
	 * at the other end of the file): a small commit is one fence and one sync. This
	 * checks invariant pmem.c 3 */
	TU_OK(kr_pool_open(path, 0, &pool));
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(pool, &st));
	if (st.mode != KR_MODE_PAGECACHE) {
		printf("test_fences: SKIP page-cache mode (this file maps with MAP_SYNC)\n");
	} else {
		for (unsigned i = 0; i < 50; i++) {
			kr_counters_reset();
			uint64_t v = i;
			TU_OK(kr_update(pool, target, 8 * (i % 64), &v, sizeof(v)));
			kr_counters_get(&c);
			TU_ASSERT(c.msyncs == 1 && c.fences == 1,
				  "page-cache commit %u returned after %llu syncs (%llu fences), not 1 and 1",
				  i, (unsigned long long)c.msyncs, (unsigned long long)c.fences);
		}
		printf("test_fences: page-cache mode: every one of 50 commits synced once before it returned\n");
		many_allocs(pool, "page-cache mode", 1);
	}
	TU_OK(kr_pool_close(pool));
	TU_END_CHECK_ALL("test_fences");
	return 0;
}
