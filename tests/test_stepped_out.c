/*
 * test_stepped_out.c - a commit that steps out of the commit gate to wait for a parity lock
 * (parity.c, lock_range), while a repair runs.
 *
 * The wait is what keeps a fault repair from deadlocking with a committing thread: the
 * repair waits for every commit to leave the gate, and the faulting thread may hold the
 * lock the commit wants. But the repair then sees that commit as far as it got:
 *
 *   - bits: a free's bitmap record (the whole commit) waits for its column's lock. A page of
 *     another row of that column is lost and rebuilt meanwhile. Each record of the chunk
 *     records must have changed all of home, parity and the record's CRC, or none of them
 *     (redund.c, hold_record): with the bitmap word changed at home and its parity not,
 *     the rebuilt page came back wrong at that word's offset, and parity disagreed with the
 *     column after the commit went on.
 *   - scrub: a commit's data record applied and its object's checksum record waiting. A
 *     scrub pass would find the object's bytes new and its checksum old, and report damage
 *     that is not there (or, in a chunk record, repair it back to its old bytes). The
 *     scrubber waits until no commit is out of the gate (log.h, kr_log_any_stepped_out):
 *     no pass completes while the commit waits, and passes go on after it.
 *   - stale: the same half-applied commit, its object's new checksum written with its first
 *     range and its second range waiting, while the stale-map cleaner runs over the
 *     object's page (the application persisted a store there itself). A checksum
 *     recomputed over the half-applied bytes was wrong once the commit went on, and the
 *     object then failed every read. The cleaner, like the scrubber and the online repair
 *     of one object, waits until no commit is out of the gate (kr_quiesce_hold_settled).
 *
 * The test holds the parity locks itself (pool internals), so each window is held open for
 * as long as the test needs. Full protection only: the windows are parity's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftutil.h"
#include "parity.h"
#include "pool_state.h"
#include "stale.h"
#include "testutil.h"

struct committer {
	kr_pool *pool;
	kr_oid oid;
	size_t off, len; /* len 0: free the object */
	size_t off2, len2; /* a second range, if len2 */
	int rc;
};

static void *commit_run(void *arg)
{
	struct committer *c = arg;
	kr_tx *tx;
	TU_OK(kr_tx_begin(c->pool, &tx));
	if (c->len == 0) {
		TU_OK(kr_tx_free(tx, c->oid));
	} else {
		uint8_t *p = kr_tx_add(tx, c->oid, c->off, c->len);
		TU_ASSERT(p, "kr_tx_add: %s", kr_errmsg());
		memset(p, 0x5a, c->len);
		if (c->len2) {
			p = kr_tx_add(tx, c->oid, c->off2, c->len2);
			TU_ASSERT(p, "kr_tx_add: %s", kr_errmsg());
			memset(p, 0x6b, c->len2);
		}
	}
	c->rc = kr_tx_commit(tx);
	return NULL;
}

static pthread_rwlock_t *lock_of(kr_pool *pool, uint64_t data_off)
{
	uint64_t poff = kr_parity_offset(&pool->redund.parity, data_off);
	return &pool->redund.parity.locks[poff / 4096 % KR_PARITY_LOCKS].rw;
}

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000}, NULL); }

static void await_stepped_out(kr_pool *pool)
{
	for (int ms = 0; !kr_log_any_stepped_out(&pool->log) && ms < 10000; ms++)
		sleep_ms(1);
	TU_ASSERT(kr_log_any_stepped_out(&pool->log), "the commit did not step out of the gate");
}

/* A free waits for the bitmap word's column lock; a page of row 1 of that column is lost
 * and read (rebuilt) meanwhile. */
static void bits(const char *path)
{
	kr_pool *pool;
	TU_OK(tu_create(path, 8 << 20, 8, 0, 0, &pool));
	kr_oid keep, gone;
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, 100, 1, &keep));
	TU_OK(kr_tx_alloc(tx, 100, 1, &gone));
	TU_OK(kr_tx_commit(tx));
	struct ft_geom g;
	ft_geom_load(&g, kr_pool_base(pool));
	uint32_t z, row, col;
	ft_page_pos(&g, gone, &z, &row, &col);
	uint64_t chunk = (gone - 16 - ft_page_off(&g, z, 0, 0) - (uint64_t)g.zone_meta_pages * 4096) / (32 << 10);
	TU_ASSERT(z == 0 && chunk == 0, "the object is not in zone 0's first chunk (zone %u, chunk %llu)",
		  z, (unsigned long long)chunk);
	/* Chunk 0's record, its bitmap and CRC, lie in page 0 of zone 0: column 0 of row 0. */
	uint64_t lost = ft_page_off(&g, 0, 1, 0);
	uint8_t *want = malloc(4096);
	memcpy(want, (uint8_t *)kr_pool_base(pool) + lost, 4096);
	pthread_rwlock_t *lock = lock_of(pool, ft_page_off(&g, 0, 0, 0));
	TU_ASSERT(pthread_rwlock_wrlock(lock) == 0, "parity lock");
	struct committer c = {.pool = pool, .oid = gone};
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, commit_run, &c) == 0, "pthread_create");
	sleep_ms(200); /* the free's apply reaches the lock */
	TU_ASSERT(pthread_tryjoin_np(t, NULL) == EBUSY, "the free did not wait for the parity lock");
	TU_OK(kr_inject_poison(pool, lost));
	const uint8_t *now = (const uint8_t *)kr_pool_base(pool) + lost;
	for (size_t i = 0; i < 4096; i++) /* the first read faults: the page is rebuilt */
		TU_ASSERT(now[i] == want[i], "bits: byte %zu of the page rebuilt while a free waited is %#x, "
			  "not %#x", i, now[i], want[i]);
	pthread_rwlock_unlock(lock);
	pthread_join(t, NULL);
	TU_OK(c.rc);
	free(want);
	TU_DEEP_CHECK(pool, "after a page rebuilt while a free waited for its parity lock");
	TU_OK(kr_pool_close(pool));
	printf("bits: a page rebuilt while a free's bitmap record waited came back right\n");
}

/* A commit's checksum record waits for its page's column lock, its data record applied, with
 * the scrubber running every 5 ms. */
static void scrub(const char *path)
{
	enum { SIZE = 8192, OFF = 5000, LEN = 64 };
	kr_oid x;
	kr_pool *pool = tu_pool_with_object(path, 8 << 20, 8, SIZE, &x);
	uint64_t crc_page = (x - 8) & ~4095ull, data_page = (x + OFF) & ~4095ull;
	TU_ASSERT(crc_page != data_page, "checksum and data in one page");
	pthread_rwlock_t *lock = lock_of(pool, crc_page);
	TU_ASSERT(lock != lock_of(pool, data_page), "one lock for both pages");
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_SCRUB, 0, 0.005));
	struct kr_pool_stat st;
	for (int ms = 0; ms < 10000; ms += 5) { /* the scrubber is running */
		TU_OK(kr_pool_stat(pool, &st));
		if (st.scrub_passes >= 2)
			break;
		sleep_ms(5);
	}
	TU_ASSERT(st.scrub_passes >= 2, "the scrubber ran no pass in 10 s");
	TU_ASSERT(pthread_rwlock_wrlock(lock) == 0, "parity lock");
	struct committer c = {.pool = pool, .oid = x, .off = OFF, .len = LEN};
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, commit_run, &c) == 0, "pthread_create");
	await_stepped_out(pool);
	const uint8_t *home = (const uint8_t *)kr_pool_base(pool) + x; /* its stores came before */
	TU_ASSERT(home[OFF] == 0x5a, "the commit's data record was not applied before its wait");
	sleep_ms(20); /* any pass under way when the commit stepped out ends */
	struct kr_pool_stat before;
	TU_OK(kr_pool_stat(pool, &before));
	sleep_ms(300);
	TU_ASSERT(pthread_tryjoin_np(t, NULL) == EBUSY, "the commit did not wait for the parity lock");
	TU_OK(kr_pool_stat(pool, &st));
	TU_ASSERT(st.scrub_passes == before.scrub_passes,
		  "scrub: %llu passes ran over a commit out of the gate, half applied",
		  (unsigned long long)(st.scrub_passes - before.scrub_passes));
	pthread_rwlock_unlock(lock);
	pthread_join(t, NULL);
	TU_OK(c.rc);
	for (int ms = 0; ms < 10000 && st.scrub_passes < before.scrub_passes + 2; ms += 5) {
		sleep_ms(5);
		TU_OK(kr_pool_stat(pool, &st));
	}
	TU_ASSERT(st.scrub_passes >= before.scrub_passes + 2, "no scrub pass after the commit went on");
	TU_OK(kr_pool_set_read_policy(pool, KR_READ_DEFAULT, 0, 0));
	TU_DEEP_CHECK(pool, "after scrub passes around a commit that waited");
	TU_OK(kr_pool_close(pool));
	printf("scrub: no pass while a commit was out of the gate half applied; passes after it\n");
}

static void *clean_run(void *arg)
{
	kr_pool *pool = arg;
	TU_OK(kr_stale_clean(pool));
	return NULL;
}

/* A commit of two ranges of an object: the first, at its start, carries the new checksum
 * (tx.c, crc_merged); the second waits for its page's column lock. The application has
 * persisted a store of its own into the object's first page, so the cleaner, run meanwhile
 * on another thread, recomputes the object's checksum. */
static void stale(const char *path)
{
	enum { SIZE = 8192, OFF2 = 5000, LEN = 64, STORED = 2000 };
	setenv("KERATIN_STALE_MS", "0", 1); /* no cleaner thread: the test runs each pass */
	kr_oid x;
	kr_pool *pool = tu_pool_with_object(path, 8 << 20, 8, SIZE, &x);
	uint8_t *home = (uint8_t *)kr_pool_base(pool) + x;
	uint64_t first_page = (x - 8) & ~4095ull, second_page = (x + OFF2) & ~4095ull;
	TU_ASSERT(first_page == ((x + STORED) & ~4095ull) && first_page != second_page,
		  "the object's pages are not as the case needs");
	home[STORED] = 0x22;
	TU_OK(kr_stored_persist(pool, home + STORED, 1));
	pthread_rwlock_t *lock = lock_of(pool, second_page);
	TU_ASSERT(lock != lock_of(pool, first_page), "one lock for both pages");
	TU_ASSERT(pthread_rwlock_wrlock(lock) == 0, "parity lock");
	struct committer c = {.pool = pool, .oid = x, .off = 0, .len = LEN, .off2 = OFF2, .len2 = LEN};
	pthread_t t, cleaner;
	TU_ASSERT(pthread_create(&t, NULL, commit_run, &c) == 0, "pthread_create");
	await_stepped_out(pool);
	TU_ASSERT(home[0] == 0x5a && home[OFF2] == 0x11, "the commit is not half applied");
	TU_ASSERT(pthread_create(&cleaner, NULL, clean_run, pool) == 0, "pthread_create");
	sleep_ms(100); /* the cleaner's pass, had it not waited */
	pthread_rwlock_unlock(lock);
	pthread_join(t, NULL);
	TU_OK(c.rc);
	pthread_join(cleaner, NULL);
	TU_OK(kr_stale_clean(pool));
	const uint8_t *p;
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	p = kr_tx_get(tx, x);
	TU_ASSERT(p, "stale: the object fails its read after a cleaner pass over its half-applied "
		  "commit: %s", kr_errmsg());
	TU_ASSERT(p[0] == 0x5a && p[OFF2] == 0x6b && p[STORED] == 0x22, "stale: the object's bytes "
		  "are %#x %#x %#x", p[0], p[OFF2], p[STORED]);
	kr_tx_abort(tx);
	TU_DEEP_CHECK(pool, "after a cleaner pass around a commit that waited");
	TU_OK(kr_pool_close(pool));
	unsetenv("KERATIN_STALE_MS");
	printf("stale: the cleaner waited for a commit out of the gate half applied\n");
}

/* Usage: test_stepped_out [bits|scrub|stale] (all without an argument). */
int main(int argc, char **argv)
{
	if (tu_protection() != KR_PROTECT_FULL) {
		printf("commits out of the gate: SKIP (no parity here)\n");
		return 0;
	}
	char path[128];
	if (argc < 2 || strcmp(argv[1], "bits") == 0) {
		tu_pool_path(path, sizeof(path), "stepped-bits");
		bits(path);
	}
	if (argc < 2 || strcmp(argv[1], "scrub") == 0) {
		tu_pool_path(path, sizeof(path), "stepped-scrub");
		scrub(path);
	}
	if (argc < 2 || strcmp(argv[1], "stale") == 0) {
		tu_pool_path(path, sizeof(path), "stepped-stale");
		stale(path);
	}
	return 0;
}
