/*
 * test_fresh.c - the fresh frontier: allocations past it take their zeros on trust, so the
 * frontier must never claim a chunk that holds anything.
 *
 * The frontier F (layout.h, the log line's fresh_word = F + 1) is written by a clean close
 * and cleared when the pool is opened for writing. Cases:
 *   frontier: a new pool's word is 1 (F = 0); three 64 KiB objects (3 chunks each) close
 *             with F = 9, and after a reopen one more 64 KiB object and a small object (a
 *             new run) with F = 13; the word is 0 while the pool is open; every object
 *             reads as zeros.
 *   abort:    an allocation aborted, and one whose commit fails, leave the word as it was.
 *   crash:    a writer that never closes leaves the word 0; recovery trusts nothing, the
 *             next allocations read their blocks, and the next close stores 0 ("unknown").
 *   old:      a pool as builds without the feature made it (no FRESH bit, word 0) opens,
 *             allocates zeros and closes without gaining the bit or a word, so those
 *             builds can still write it.
 *   scribble: bytes past the frontier that are not zeros (a stray write into free space)
 *             are reported by the deep check, which reads all fresh space.
 *   images:   the crash simulator at every fence of a session that opens the pool (the
 *             word cleared), allocates and frees extents and runs, and closes it (the word
 *             written with clean): every image opens, passes the deep check (fresh space is
 *             zeros wherever the image trusts a frontier) and allocates 64 KiB of zeros.
 * Every pool left behind passes the deep check, which also checks that no chunk in use
 * lies past the frontier and that fresh space is zeros.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crashsim.h"
#include "layout.h"
#include "testutil.h"

#define BIG (64u << 10) /* 64 KiB + the header: an extent of 3 chunks */

static struct kr_pool_hdr header_of(const char *path)
{
	struct kr_pool_hdr h;
	tu_pread(path, &h, sizeof(h), 0);
	return h;
}

/* The file offset of the fresh_word in control page copy i (0 or 1). */
static uint64_t fresh_word_off(const struct kr_pool_hdr *h, int i)
{
	return (i ? h->ctl_replica_off : h->ctl_off) + KR_CTL_LOG_LINE * KR_LINE_SIZE +
	       offsetof(struct kr_log_line, fresh_word);
}

/* The fresh_word of both control pages; they must agree. */
static uint64_t fresh_word(const char *path)
{
	struct kr_pool_hdr h = header_of(path);
	uint64_t w[2];
	for (int i = 0; i < 2; i++)
		tu_pread(path, &w[i], 8, fresh_word_off(&h, i));
	TU_ASSERT(w[0] == w[1], "fresh_word copies differ: %llu and %llu", (unsigned long long)w[0],
		  (unsigned long long)w[1]);
	return w[0];
}

static void expect_word(const char *path, uint64_t want, const char *when)
{
	uint64_t got = fresh_word(path);
	TU_ASSERT(got == want, "%s: fresh_word %llu, expected %llu", when, (unsigned long long)got,
		  (unsigned long long)want);
}

/* A new 16 MiB pool at a fresh path named by tag (path: 128 bytes). */
static kr_pool *new_pool(char path[128], const char *tag)
{
	kr_pool *pool;
	tu_pool_path(path, 128, tag);
	TU_OK(tu_create(path, 16ull << 20, 0, 0, 0, &pool));
	return pool;
}

static void case_frontier(void)
{
	char path[128];
	kr_pool *pool = new_pool(path, "fresh-frontier");
	TU_ASSERT(header_of(path).ro_compat & KR_FEAT_RO_FRESH, "a new pool lacks the FRESH bit");
	expect_word(path, 0, "open after create");
	for (int i = 0; i < 3; i++)
		tu_alloc_zeros(pool, BIG);
	TU_OK(kr_pool_close(pool));
	expect_word(path, 10, "three 3-chunk extents, closed");
	TU_OK(tu_open(path, &pool));
	expect_word(path, 0, "reopened");
	tu_alloc_zeros(pool, BIG);
	tu_alloc_zeros(pool, 100); /* a new run: one more chunk */
	TU_DEEP_CHECK(pool, "frontier");
	TU_OK(kr_pool_close(pool));
	expect_word(path, 14, "one more extent and a run, closed");
	printf("frontier: fresh_word 10 then 14 after clean closes, 0 while open\n");
}

static void case_abort(void)
{
	char path[128];
	kr_tx *tx;
	kr_oid oid;
	kr_pool *pool = new_pool(path, "fresh-abort");
	tu_alloc_zeros(pool, BIG);
	TU_OK(kr_pool_close(pool));
	expect_word(path, 4, "one extent");
	TU_OK(tu_open(path, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, BIG, 7, &oid));
	TU_OK(kr_tx_alloc(tx, 3 * BIG, 7, &oid));
	kr_tx_abort(tx);
	/* A commit that fails before it writes: an overrun of a fresh object's buffer. */
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, BIG, 7, &oid));
	uint8_t *buf = kr_tx_open(tx, oid);
	TU_ASSERT(buf, "kr_tx_open: %s", kr_errmsg());
	buf[BIG] ^= 1;
	TU_ASSERT(kr_tx_commit(tx) == KR_E_CANARY, "the overrun commit did not fail");
	TU_OK(kr_pool_close(pool));
	expect_word(path, 4, "aborted and failed allocations");
	printf("abort: fresh_word unchanged by an abort and a failed commit\n");
}

static void case_crash(void)
{
	char path[128];
	kr_pool *pool = new_pool(path, "fresh-crash");
	TU_OK(kr_pool_close(pool));
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		TU_OK(tu_open(path, &pool));
		tu_alloc_zeros(pool, BIG);
		_exit(0); /* no close: a crash as far as the file can tell */
	}
	int status;
	TU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "writer child failed");
	expect_word(path, 0, "after the crash");
	TU_OK(tu_open(path, &pool));
	for (int i = 0; i < 3; i++)
		tu_alloc_zeros(pool, BIG);
	TU_DEEP_CHECK(pool, "crash");
	TU_OK(kr_pool_close(pool));
	expect_word(path, 0, "the close after a recovery");
	printf("crash: nothing trusted after a crash, fresh_word stays 0\n");
}

static void case_old(void)
{
	char path[128];
	kr_pool *pool = new_pool(path, "fresh-old");
	TU_OK(kr_pool_close(pool));
	/* What builds before the feature wrote: the bit clear, the word zero. */
	struct kr_pool_hdr h = header_of(path);
	h.ro_compat &= ~KR_FEAT_RO_FRESH;
	tu_hdr_fix_crc(&h);
	tu_pwrite(path, &h, sizeof(h), 0);
	tu_pwrite(path, &h, sizeof(h), h.pool_size - KR_PAGE_SIZE);
	static const uint64_t zero;
	for (int i = 0; i < 2; i++)
		tu_pwrite(path, &zero, 8, fresh_word_off(&h, i));
	for (int round = 0; round < 2; round++) {
		TU_OK(tu_open(path, &pool));
		struct kr_pool_stat st;
		TU_OK(kr_pool_stat(pool, &st));
		TU_ASSERT(st.features == 0xf, "features %#x", st.features);
		for (int i = 0; i < 3; i++)
			tu_alloc_zeros(pool, BIG);
		tu_alloc_zeros(pool, 100);
		TU_DEEP_CHECK(pool, "old pool");
		TU_OK(kr_pool_close(pool));
		TU_ASSERT(!(header_of(path).ro_compat & KR_FEAT_RO_FRESH), "the old pool gained the bit");
		expect_word(path, 0, "an old pool, closed");
	}
	printf("old: a pool without the feature works and stays without it\n");
}

static void case_scribble(void)
{
	char path[128], why[512];
	kr_pool *pool = new_pool(path, "fresh-scribble");
	tu_alloc_zeros(pool, BIG);
	TU_OK(kr_pool_close(pool));
	struct kr_pool_hdr h = header_of(path);
	/* Chunk 5 of zone 0, past the frontier (4), in the middle. */
	uint64_t off = h.heap_off + (uint64_t)h.zone_meta_pages * KR_PAGE_SIZE + 5 * KR_CHUNK_SIZE + 1000;
	static const uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	tu_pwrite(path, junk, sizeof(junk), off);
	TU_OK(tu_open(path, &pool));
	/* checks invariant heap.c 5: bytes past the frontier are found */
	TU_ASSERT(tu_deep_check(pool, why, sizeof(why)) == 1, "the deep check missed bytes in fresh space");
	TU_ASSERT(strstr(why, "fresh"), "the deep check's finding does not name fresh space: %s", why);
	TU_OK(kr_pool_close(pool));
	static const uint8_t zeros[8];
	tu_pwrite(path, zeros, sizeof(zeros), off); /* as it was: the end check must pass */
	printf("scribble: the deep check reports bytes in fresh space (%.60s...)\n", why);
}

/* In the image's child: the deep check, then an allocation that may trust the frontier. */
static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	(void)ctx;
	char why[512];
	if (tu_deep_check(pool, why, sizeof(why)) != 0) {
		fprintf(stderr, "fence %llu image %d#%u: %s\n", (unsigned long long)img->fence,
			(int)img->kind, img->index, why);
		return 1;
	}
	kr_tx *tx;
	kr_oid oid;
	if (kr_tx_begin(pool, &tx) || kr_tx_alloc(tx, BIG, 7, &oid) || kr_tx_commit(tx)) {
		fprintf(stderr, "fence %llu: allocation failed: %s\n", (unsigned long long)img->fence,
			kr_errmsg());
		return 1;
	}
	const uint8_t *p = kr_get(pool, oid);
	for (size_t i = 0; p && i < BIG; i++)
		if (p[i]) {
			fprintf(stderr, "fence %llu: a new object has %#x at byte %zu\n",
				(unsigned long long)img->fence, p[i], i);
			return 1;
		}
	return p ? 0 : 1;
}

static void case_images(void)
{
	char path[128];
	kr_oid a, b;
	kr_pool *pool = new_pool(path, "fresh-images");
	a = tu_alloc_zeros(pool, BIG);
	TU_OK(kr_pool_close(pool));
	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.random_images = 8;
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim busy");
	TU_OK(tu_open(path, &pool));
	b = tu_alloc_zeros(pool, BIG);
	tu_alloc_zeros(pool, 100);
	kr_tx *tx;
	uint8_t *buf;
	/* a's chunks hold data when freed: a frontier that claimed them would be caught. */
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT((buf = kr_tx_add(tx, a, 0, 4000)), "kr_tx_add: %s", kr_errmsg());
	memset(buf, 0xa5, 4000);
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_free(tx, a));
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_ASSERT((buf = kr_tx_add(tx, b, 0, 4000)), "kr_tx_add: %s", kr_errmsg());
	memset(buf, 0x5a, 4000);
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_pool_close(pool));
	struct crashsim_stats st;
	crashsim_stop(&st);
	TU_ASSERT(st.images > 0, "no crash image checked");
	TU_ASSERT(st.failures == 0, "%llu of %llu crash images failed", (unsigned long long)st.failures,
		  (unsigned long long)st.images);
	expect_word(path, 8, "the session's close"); /* F = 7: the extent [3, 6) and the run at 6 */
	printf("images: %llu crash images, each deep-checked and allocating zeros\n",
	       (unsigned long long)st.images);
}

int main(void)
{
	tu_seed("test_fresh", 0); /* deterministic; printed for uniformity */
	case_frontier();
	case_abort();
	case_crash();
	case_old();
	case_scribble();
	case_images();
	TU_END_CHECK_ALL("test_fresh");
	return 0;
}
