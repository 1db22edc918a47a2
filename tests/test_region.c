/*
 * test_region.c - protected regions (lazy redundancy): tracking, corruption, media errors,
 * forks and bad input. The crash cases are in test_region_crash.c.
 *
 * Every verdict on the sidecar comes from the oracle in regionutil.c, which recomputes CRCs
 * and parity from the files; the library's own reports are compared with it.
 *
 *   track [uffd|mprotect|noseal]  random stores over many passes (kr_region_sync): each
 *       pass recomputes exactly the pages written, every page then verifies, the hot set
 *       follows the seal rule (two idle passes), unseals are counted, close is CLEAN.
 *   thread     two writer threads with the background thread at a 20 ms period.
 *   corrupt    bytes flipped with pwrite in cold pages (online, offline, by the scrubber)
 *       are found and repaired; in the window they are unverifiable, not passed; two bad
 *       pages in one stripe are reported and nothing is written; damaged sidecar checksums.
 *   poison     emulated poison on a covered page is repaired on access, so is a machine
 *       check (SIGBUS) on a page lost in the file; poison on a page in the window kills the
 *       process (in a child) instead of returning wrong data.
 *   fork       a forked child may read the region; its first store stops it.
 *   badinput   resized file, foreign sidecar, damaged or truncated sidecar, private
 *       mapping, wrong length, busy, bad options: clean errors.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "region_layout.h"
#include "regionutil.h"
#include "testutil.h"

#define P 4096u

struct rfix {
	char path[128];
	char side[160];
	kr_region *r;
	uint8_t *base;
	size_t len;
	uint64_t npages;
};

static void rfix_file(struct rfix *f, const char *tag, uint64_t npages, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	ru_make_file(f->path, sizeof(f->path), tag, npages, seed);
	snprintf(f->side, sizeof(f->side), "%s.krs", f->path);
	f->npages = npages;
}

static int rfix_open(struct rfix *f, struct kr_region_opts *o)
{
	void *b = NULL;
	int rc = kr_region_open(f->path, o, &f->r, &b, &f->len);
	f->base = b;
	return rc;
}

static struct kr_region_opts manual_opts(unsigned flags)
{
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.flags = KR_REGION_MANUAL | KR_REGION_FORCE_PMEM | flags;
	o.segment_pages = 64;
	o.batch_pages = 100;
	return o;
}

static void require_all_sound(kr_region *r, const char *what)
{
	struct kr_region_report rep;
	int rc = kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, &rep);
	TU_ASSERT(rc == KR_OK && rep.pages_bad == 0, "%s: check rc %d, %llu bad: %s", what, rc,
		  (unsigned long long)rep.pages_bad, kr_errmsg());
}

/* ---------------------------------------------------------------------------------------
 * track
 * ------------------------------------------------------------------------------------- */
static void case_track(const char *mode)
{
	unsigned flags = strcmp(mode, "mprotect") == 0 ? KR_REGION_MPROTECT
			 : strcmp(mode, "noseal") == 0 ? KR_REGION_NO_SEAL
						       : KR_REGION_NO_FALLBACK;
	bool seal = !(flags & KR_REGION_NO_SEAL);
	struct tu_rng rng;
	tu_rng_seed(&rng, tu_seed("region-track", 11));
	struct rfix f;
	rfix_file(&f, "rtrack", 2048, 1);
	struct kr_region_opts o = manual_opts(flags);
	TU_OK(rfix_open(&f, &o));
	struct kr_region_stats st;
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.tracking == ((flags & KR_REGION_MPROTECT) ? 2 : 1), "tracking mode %d", st.tracking);
	TU_ASSERT(st.recovered_pages == f.npages, "a new sidecar computes every page (%llu)",
		  (unsigned long long)st.recovered_pages);
	ru_require_sound(f.path, f.side, "after create");

	uint64_t nseg = st.nsegments, G = st.segment_pages;
	uint8_t *hot = calloc(nseg, 1), *idle = calloc(nseg, 1), *wrote = malloc(f.npages);
	uint8_t *segw = malloc(nseg);
	uint64_t unseals = 0;
	for (uint64_t g = 0; g < nseg; g++)
		hot[g] = !seal;
	unsigned rounds = tu_scaled(60, 20);
	for (unsigned round = 0; round < rounds; round++) {
		memset(wrote, 0, f.npages);
		memset(segw, 0, nseg);
		uint64_t k = tu_rng_chance(&rng, 1, 6) ? 0 : tu_rng_logu(&rng, 1, 400), distinct = 0;
		/* Stores cluster in a few hot areas, as real programs' do, so segments cool. */
		uint64_t area = tu_rng_below(&rng, f.npages);
		for (uint64_t i = 0; i < k; i++) {
			uint64_t p = tu_rng_chance(&rng, 3, 4) ? (area + tu_rng_below(&rng, 200)) % f.npages
							       : tu_rng_below(&rng, f.npages);
			size_t off = tu_rng_below(&rng, P - 8);
			uint64_t v = tu_rng_next(&rng);
			memcpy(f.base + p * P + off, &v, 8);
			distinct += !wrote[p];
			wrote[p] = 1;
			segw[p / G] = 1;
		}
		TU_OK(kr_region_sync(f.r));
		TU_OK(kr_region_stats(f.r, &st));
		TU_ASSERT(st.last_dirty_pages == distinct, "round %u: pass recomputed %llu pages, %llu "
			  "were written", round, (unsigned long long)st.last_dirty_pages,
			  (unsigned long long)distinct);
		TU_ASSERT(st.window_pages == 0, "round %u: %llu pages still in the window", round,
			  (unsigned long long)st.window_pages);
		/* The model of the seal rule. */
		uint64_t nhot = 0;
		for (uint64_t g = 0; g < nseg; g++) {
			if (segw[g]) {
				unseals += seal && !hot[g];
				hot[g] = 1;
				idle[g] = 0;
			} else if (seal && hot[g] && ++idle[g] >= 2) {
				hot[g] = 0;
				idle[g] = 0;
			}
			nhot += hot[g];
		}
		struct ru_verdict v;
		ru_judge(f.path, f.side, &v);
		TU_ASSERT(v.hot_segments == nhot && st.hot_segments == nhot,
			  "round %u: %llu hot segments in the sidecar, %llu reported, model %llu", round,
			  (unsigned long long)v.hot_segments, (unsigned long long)st.hot_segments,
			  (unsigned long long)nhot);
		TU_ASSERT(st.unseals == unseals, "round %u: %llu unseals, model %llu", round,
			  (unsigned long long)st.unseals, (unsigned long long)unseals);
		ru_require_sound(f.path, f.side, "after a pass");
		if (round % 10 == 0)
			require_all_sound(f.r, "after a pass");
	}
	/* A store straight after a pass is in the window until the next one. */
	f.base[5 * P + 7] ^= 1;
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.window_pages == 1, "one page in the window, got %llu",
		  (unsigned long long)st.window_pages);
	TU_OK(kr_region_close(f.r));
	struct ru_verdict v;
	ru_judge(f.path, f.side, &v);
	TU_ASSERT(v.state == KR_SIDE_CLEAN && v.trusted_pages == f.npages && v.hot_segments == 0,
		  "close leaves CLEAN, all covered (state %u, %llu trusted)", v.state,
		  (unsigned long long)v.trusted_pages);
	ru_require_sound(f.path, f.side, "after close");

	/* A clean reopen recomputes nothing. */
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.recovered_pages == 0, "clean reopen rebuilt %llu pages",
		  (unsigned long long)st.recovered_pages);
	require_all_sound(f.r, "after reopen");
	TU_OK(kr_region_close(f.r));
	free(hot);
	free(idle);
	free(wrote);
	free(segw);
	printf("region track %s: %u passes, %llu unseals, sound\n", mode, rounds,
	       (unsigned long long)unseals);
}

/* ---------------------------------------------------------------------------------------
 * thread: the background thread with concurrent writers
 * ------------------------------------------------------------------------------------- */
struct writer {
	uint8_t *base;
	uint64_t npages, seed;
	atomic_int *stop;
	uint64_t stores;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct tu_rng rng;
	tu_rng_seed(&rng, w->seed);
	while (!atomic_load(w->stop)) {
		uint64_t p = tu_rng_below(&rng, w->npages / 4) + (w->seed & 1) * (w->npages / 2);
		uint64_t v = tu_rng_next(&rng);
		memcpy(w->base + p * P + tu_rng_below(&rng, P / 8) * 8, &v, 8);
		w->stores++;
	}
	return NULL;
}

static void case_thread(void)
{
	struct rfix f;
	rfix_file(&f, "rthread", 4096, 2);
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.flags = KR_REGION_FORCE_PMEM;
	o.period_ms = 20;
	o.segment_pages = 128;
	TU_OK(rfix_open(&f, &o));
	atomic_int stop = 0;
	struct writer w[2] = {{f.base, f.npages, 100, &stop, 0}, {f.base, f.npages, 201, &stop, 0}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		TU_ASSERT(pthread_create(&t[i], NULL, writer_main, &w[i]) == 0, "pthread_create");
	usleep(tu_sanitized() ? 300000 : 500000);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	struct kr_region_stats st;
	TU_OK(kr_region_stats(f.r, &st));
	uint64_t passes = st.passes;
	TU_ASSERT(passes >= 3, "the thread ran only %llu passes", (unsigned long long)passes);
	/* Two more passes after the last store: everything covered, by the thread alone. */
	for (int i = 0; i < 400 && st.passes < passes + 2; i++) {
		usleep(10000);
		TU_OK(kr_region_stats(f.r, &st));
	}
	TU_ASSERT(st.passes >= passes + 2 && st.window_pages == 0, "window %llu after 2 passes",
		  (unsigned long long)st.window_pages);
	require_all_sound(f.r, "after the writers stopped");
	ru_require_sound(f.path, f.side, "after the writers stopped");
	TU_OK(kr_region_close(f.r));
	ru_require_sound(f.path, f.side, "after close");
	printf("region thread: %llu + %llu stores, %llu passes, %llu pages recomputed, "
	       "last pass %.2f ms\n", (unsigned long long)w[0].stores, (unsigned long long)w[1].stores,
	       (unsigned long long)st.passes, (unsigned long long)st.dirty_pages,
	       st.last_pass_ns / 1e6);
}

/* ---------------------------------------------------------------------------------------
 * corrupt
 * ------------------------------------------------------------------------------------- */
static void case_corrupt(void)
{
	struct rfix f;
	rfix_file(&f, "rcorrupt", 1024, 3);
	size_t len;
	uint8_t *orig = tu_read_file(f.path, &len);
	struct kr_region_opts o = manual_opts(0);
	TU_OK(rfix_open(&f, &o));
	struct kr_region_report rep;

	/* A cold page: found and repaired online. */
	tu_flip_byte(f.path, 100 * P + 17);
	TU_ASSERT(kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, &rep) == KR_OK,
		  "repair: %s", kr_errmsg());
	TU_ASSERT(rep.pages_bad == 1 && rep.pages_repaired == 1 && rep.pages_checked == f.npages,
		  "cold: %llu bad, %llu repaired, %llu checked", (unsigned long long)rep.pages_bad,
		  (unsigned long long)rep.pages_repaired, (unsigned long long)rep.pages_checked);
	TU_ASSERT(memcmp(f.base + 100 * P, orig + 100 * P, P) == 0, "page 100 restored");

	/* In the window: a store, then the page damaged behind the tracker's back. */
	f.base[200 * P] ^= 1;
	orig[200 * P] ^= 1;
	tu_flip_byte(f.path, 200 * P + 9);
	orig[200 * P + 9] ^= 0x5a; /* in the window, damage cannot be told from a store */
	tu_flip_byte(f.path, 201 * P + 9); /* its stripe-mate: bad, but its stripe is not covered */
	int rc = kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR, &rep);
	TU_ASSERT(rc == KR_E_CORRUPT_REGION && rep.pages_unverifiable == 1 && rep.pages_bad == 1 &&
		  rep.pages_repaired == 0 && rep.first_bad_page == 201,
		  "window: rc %d, %llu unverifiable, %llu bad, %llu repaired, first %llu", rc,
		  (unsigned long long)rep.pages_unverifiable, (unsigned long long)rep.pages_bad,
		  (unsigned long long)rep.pages_repaired, (unsigned long long)rep.first_bad_page);
	TU_ASSERT(f.base[201 * P + 9] == (orig[201 * P + 9] ^ 0x5a), "refused repair wrote nothing");
	/* Put 201 back by hand and cover 200: then all is sound again. */
	tu_flip_byte(f.path, 201 * P + 9);
	TU_OK(kr_region_sync(f.r));
	require_all_sound(f.r, "after the window closed");

	/* Two bad pages in one stripe: reported, nothing written. */
	tu_flip_byte(f.path, 300 * P + 1);
	tu_flip_byte(f.path, 301 * P + 2);
	rc = kr_region_check(f.r, 296, 8, KR_REGION_CHECK_REPAIR, &rep);
	TU_ASSERT(rc == KR_E_CORRUPT_REGION && rep.pages_bad == 2 && rep.pages_repaired == 0,
		  "two in a stripe: rc %d, %llu bad", rc, (unsigned long long)rep.pages_bad);
	tu_flip_byte(f.path, 300 * P + 1);
	tu_flip_byte(f.path, 301 * P + 2);
	TU_OK(kr_region_close(f.r));

	/* Offline (the CLI's path): read-only check reports, repair repairs. */
	tu_flip_byte(f.path, 500 * P + 4000);
	o.flags = KR_REGION_OFFLINE | KR_REGION_READONLY;
	TU_OK(rfix_open(&f, &o));
	rc = kr_region_check(f.r, 0, 0, KR_REGION_CHECK_PARITY, &rep);
	TU_ASSERT(rc == KR_E_CORRUPT_REGION && rep.pages_bad == 1 && rep.first_bad_page == 500,
		  "offline check: rc %d, %llu bad", rc, (unsigned long long)rep.pages_bad);
	TU_ASSERT(kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR, &rep) == KR_E_MISUSE_ARG,
		  "no repair when read-only");
	TU_OK(kr_region_close(f.r));
	o.flags = KR_REGION_OFFLINE;
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, &rep));
	TU_ASSERT(rep.pages_repaired == 1, "offline repair: %llu bad %llu checked %llu unverifiable", (unsigned long long)rep.pages_bad, (unsigned long long)rep.pages_checked, (unsigned long long)rep.pages_unverifiable);
	TU_OK(kr_region_close(f.r));
	uint8_t *now = tu_read_file(f.path, &len);
	for (size_t i = 0; i < len; i++)
		TU_ASSERT(now[i] == orig[i], "file restored byte for byte: byte %zu (page %zu) is %#x, was %#x", i, i / P, now[i], orig[i]);
	free(now);
	ru_require_sound(f.path, f.side, "after offline repair");

	/* Damaged parity (the sidecar's): rebuilt from sound data by a parity check. */
	struct kr_side_sb sb;
	tu_pread(f.side, &sb, sizeof(sb), 0);
	tu_flip_byte(f.side, sb.parity_off + 3 * P + 100);
	o.flags = KR_REGION_OFFLINE;
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, &rep));
	TU_ASSERT(rep.parity_bad == 1 && rep.parity_rebuilt == 1 && rep.pages_bad == 0,
		  "parity: %llu bad, %llu rebuilt", (unsigned long long)rep.parity_bad,
		  (unsigned long long)rep.parity_rebuilt);
	TU_OK(kr_region_close(f.r));
	ru_require_sound(f.path, f.side, "after parity rebuild");

	/* Damaged checksums in a CLEAN sidecar: seen at open, rebuilt, said. */
	tu_flip_byte(f.side, sb.crc_off + 4 * 700);
	o = manual_opts(0);
	TU_OK(rfix_open(&f, &o));
	struct kr_region_stats st;
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.recovered_pages == 1024, "the damaged CRC page's pages rebuilt (%llu)",
		  (unsigned long long)st.recovered_pages);
	require_all_sound(f.r, "after CRC rebuild");

	/* The background scrubber finds and repairs a cold page by itself. */
	TU_OK(kr_region_close(f.r));
	o.flags = KR_REGION_FORCE_PMEM;
	o.period_ms = 10;
	o.scrub_kib_per_s = 1u << 20;
	TU_OK(rfix_open(&f, &o));
	tu_flip_byte(f.path, 700 * P + 1234);
	for (int i = 0; i < 300; i++) {
		TU_OK(kr_region_stats(f.r, &st));
		if (st.repaired_pages)
			break;
		usleep(10000);
	}
	TU_ASSERT(st.repaired_pages == 1 && st.bad_pages == 1, "scrubber repaired %llu",
		  (unsigned long long)st.repaired_pages);
	TU_ASSERT(memcmp(f.base + 700 * P, orig + 700 * P, P) == 0, "scrubbed page restored");

	/* ... and damage in the sidecar's own redundancy: a parity page and a page of stored
	 * checksums, which no read would ever notice. */
	uint8_t par[P], crcs[P];
	tu_pread(f.side, par, P, sb.parity_off + 9 * P);
	tu_pread(f.side, crcs, P, sb.crc_off);
	tu_flip_byte(f.side, sb.parity_off + 9 * P + 77);
	tu_flip_byte(f.side, sb.crc_off + 4 * 3);
	uint64_t from = st.scrubbed_pages;
	for (int i = 0; i < 500 && st.scrubbed_pages < from + 2 * f.npages; i++) {
		usleep(10000);
		TU_OK(kr_region_stats(f.r, &st));
	}
	TU_ASSERT(st.scrubbed_pages >= from + 2 * f.npages, "the scrubber did not go round twice");
	uint8_t back[P];
	tu_pread(f.side, back, P, sb.parity_off + 9 * P);
	TU_ASSERT(memcmp(back, par, P) == 0, "the scrubber left a damaged parity page");
	tu_pread(f.side, back, P, sb.crc_off);
	TU_ASSERT(memcmp(back, crcs, P) == 0, "the scrubber left a damaged checksum page");
	TU_OK(kr_region_close(f.r));
	free(orig);
	printf("region corrupt: ok\n");
}

/* ---------------------------------------------------------------------------------------
 * crcpage: a damaged page of stored checksums, judged by a check of part of its range
 *
 * A page of checksums covers many stripes. A check (or a scrub step) whose range holds
 * only some of them must not re-bless the page's own CRC after recomputing just its
 * stripes: the damaged checksum of a stripe outside the range would pass as sound, and its
 * healthy data page would read as damaged beyond repair from then on.
 * ------------------------------------------------------------------------------------- */
static void case_crcpage(void)
{
	struct rfix f;
	rfix_file(&f, "rcrcpage", 1024, 7);
	struct kr_region_opts o = manual_opts(0);
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_close(f.r));
	struct kr_side_sb sb;
	tu_pread(f.side, &sb, sizeof(sb), 0);
	uint32_t crcs[P / 4];
	tu_pread(f.side, crcs, P, sb.crc_off);

	/* Page 3's stored checksum damaged while the region is open (damage found at open is
	 * rebuilt there, whole); then a check of the second stripe only. */
	TU_OK(rfix_open(&f, &o));
	tu_flip_byte(f.side, sb.crc_off + 4 * 3);
	struct kr_region_report rep;
	uint64_t W = sb.stripe_pages;
	int rc = kr_region_check(f.r, W, W, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, &rep);
	TU_ASSERT(rc == KR_OK && rep.pages_bad == 0 && rep.crcs_rebuilt == 1,
		  "part of the range: rc %d, %llu bad pages, %llu checksums rebuilt", rc,
		  (unsigned long long)rep.pages_bad, (unsigned long long)rep.crcs_rebuilt);

	/* The whole range: page 3's data was sound, and its checksum is right again. */
	rc = kr_region_check(f.r, 0, 0, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, &rep);
	TU_ASSERT(rc == KR_OK && rep.pages_bad == 0,
		  "whole range after: rc %d, %llu bad pages (first %llu), %llu checksums rebuilt", rc,
		  (unsigned long long)rep.pages_bad, (unsigned long long)rep.first_bad_page,
		  (unsigned long long)rep.crcs_rebuilt);
	TU_OK(kr_region_close(f.r));
	uint32_t back[P / 4];
	tu_pread(f.side, back, P, sb.crc_off);
	TU_ASSERT(memcmp(back, crcs, P) == 0, "the stored checksums restored");
	ru_require_sound(f.path, f.side, "after the checksum page's repair");

	/* Damaged while closed: the open finds the page's own check failing, makes its
	 * segments hot (durably, before it rewrites a checksum) and rebuilds the checksums of
	 * its pages from the data, unverified. The data file is not touched, the checksums come
	 * back as they were, and the next open finds nothing to do. */
	size_t len;
	uint8_t *data = tu_read_file(f.path, &len);
	tu_flip_byte(f.side, sb.crc_off + 4 * 5);
	TU_OK(rfix_open(&f, &o));
	struct kr_region_stats st;
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.recovered_pages == f.npages, "a damaged checksum page at open: %llu pages rebuilt, want %llu",
		  (unsigned long long)st.recovered_pages, (unsigned long long)f.npages);
	TU_OK(kr_region_check(f.r, 0, 0, KR_REGION_CHECK_PARITY, &rep));
	TU_ASSERT(rep.pages_bad == 0, "after the rebuild: %llu bad pages", (unsigned long long)rep.pages_bad);
	TU_OK(kr_region_close(f.r));
	tu_pread(f.side, back, P, sb.crc_off);
	TU_ASSERT(memcmp(back, crcs, P) == 0, "the rebuilt checksums differ from the data's");
	uint8_t *now = tu_read_file(f.path, &len);
	TU_ASSERT(memcmp(now, data, len) == 0, "the rebuild changed the data file");
	free(now);
	free(data);
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.recovered_pages == 0, "the open after: %llu pages rebuilt", (unsigned long long)st.recovered_pages);
	TU_OK(kr_region_close(f.r));
	ru_require_sound(f.path, f.side, "after the checksum page rebuilt at open");
	printf("region crcpage: ok\n");
}

/* ---------------------------------------------------------------------------------------
 * poison
 * ------------------------------------------------------------------------------------- */
static void case_poison(void)
{
	struct rfix f;
	rfix_file(&f, "rpoison", 512, 4);
	size_t len;
	uint8_t *orig = tu_read_file(f.path, &len);
	struct kr_region_opts o = manual_opts(0);
	TU_OK(rfix_open(&f, &o));
	TU_OK(kr_region_inject_poison(f.r, 77 * P));
	uint8_t junk[P];
	tu_pread(f.path, junk, P, 77 * P);
	TU_ASSERT(memcmp(junk, orig + 77 * P, P) != 0, "the injection lost the page");
	TU_ASSERT(memcmp(f.base + 77 * P, orig + 77 * P, P) == 0, "read after poison is correct");
	struct kr_region_stats st;
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.repaired_pages == 1, "one repair (%llu)", (unsigned long long)st.repaired_pages);
	/* A store into a poisoned covered page also gets the repaired page first. */
	TU_OK(kr_region_inject_poison(f.r, 130 * P));
	f.base[130 * P + 5] = 0xab;
	orig[130 * P + 5] = 0xab;
	TU_OK(kr_region_sync(f.r));
	TU_ASSERT(memcmp(f.base + 130 * P, orig + 130 * P, P) == 0, "store after repair");

	/* A machine check (SIGBUS, BUS_MCEERR_AR, the page's address) on a page whose content
	 * was lost in the file: the handler rebuilds it. Sent to this thread with the siginfo
	 * the kernel would give, since a real one needs the hardware. */
	tu_pwrite(f.path, junk, P, 250 * P);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGBUS;
	si.si_code = BUS_MCEERR_AR;
	si.si_addr = f.base + 250 * P + 64;
	TU_ASSERT(syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGBUS, &si) == 0,
		  "rt_tgsigqueueinfo");
	TU_ASSERT(memcmp(f.base + 250 * P, orig + 250 * P, P) == 0, "machine check repaired");
	TU_OK(kr_region_stats(f.r, &st));
	TU_ASSERT(st.repaired_pages == 3, "three repairs (%llu)", (unsigned long long)st.repaired_pages);
	TU_OK(kr_region_close(f.r));
	ru_require_sound(f.path, f.side, "after poison");

	/* Poison on a page in the window: there is nothing to rebuild it from. */
	fflush(NULL);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		/* The default action, not a sanitizer's handler, is what keratin chains to. */
		signal(SIGSEGV, SIG_DFL);
		o = manual_opts(0);
		if (rfix_open(&f, &o) != KR_OK)
			_exit(10);
		f.base[10 * P] ^= 1;
		if (kr_region_inject_poison(f.r, 10 * P) != KR_OK)
			_exit(11);
		volatile uint8_t x = f.base[10 * P + 1];
		(void)x;
		_exit(12); /* must not get here */
	}
	int status;
	waitpid(pid, &status, 0);
	TU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
		  "poison in the window must kill (status %#x)", status);
	free(orig);
	printf("region poison: ok\n");
}

/* ---------------------------------------------------------------------------------------
 * fork
 * ------------------------------------------------------------------------------------- */
static void case_fork(void)
{
	struct rfix f;
	rfix_file(&f, "rfork", 256, 5);
	struct kr_region_opts o = manual_opts(0);
	TU_OK(rfix_open(&f, &o));
	f.base[3 * P] = 42;
	for (int store = 0; store < 2; store++) {
		fflush(NULL);
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork");
		if (pid == 0) {
			if (f.base[3 * P] != 42)
				_exit(20);
			if (store)
				f.base[9 * P] = 1;
			kr_region_close(f.r); /* the child's handle: frees, touches nothing */
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		/* Stopped by SIGSEGV; under a sanitizer, whose handler keratin chains to, by its
		 * report of the deadly signal and a nonzero exit. */
		if (store)
			TU_ASSERT((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
				  (tu_sanitized() && WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
				   WEXITSTATUS(status) != 20),
				  "a child's store must be stopped (status %#x)", status);
		else
			TU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
				  "a child may read (status %#x)", status);
	}
	TU_ASSERT(f.base[9 * P] != 1, "the child's store did not land");
	TU_OK(kr_region_sync(f.r));
	require_all_sound(f.r, "after the children");
	TU_OK(kr_region_close(f.r));
	ru_require_sound(f.path, f.side, "after fork");
	printf("region fork: ok\n");
}

/* ---------------------------------------------------------------------------------------
 * bad input
 * ------------------------------------------------------------------------------------- */
static void expect_err(int rc, int want, const char *what)
{
	TU_ASSERT(rc == want, "%s: got %d (%s), want %d: %s", what, rc, kr_strerror(rc), want,
		  kr_errmsg());
	TU_ASSERT(strlen(kr_errmsg()) > 0, "%s: a message", what);
}

static void case_badinput(void)
{
	struct rfix f, g;
	rfix_file(&f, "rbad", 256, 6);
	rfix_file(&g, "rbad2", 256, 7);
	struct kr_region_opts o = manual_opts(0);
	kr_region *r2;

	/* Options. */
	struct kr_region_opts bad = o;
	bad.stripe_pages = 1;
	expect_err(rfix_open(&f, &bad), KR_E_MISUSE_ARG, "stripe 1");
	bad = o;
	bad.segment_pages = 6;
	expect_err(rfix_open(&f, &bad), KR_E_MISUSE_ARG, "segment not a multiple of the stripe");
	bad = o;
	bad.flags |= 0x8000;
	expect_err(rfix_open(&f, &bad), KR_E_MISUSE_ARG, "unknown flag");
	expect_err(kr_region_open(NULL, &o, &r2, NULL, NULL), KR_E_MISUSE_ARG, "NULL path");
	expect_err(kr_region_open("/dev/shm/kr-no-such-file", &o, &r2, NULL, NULL), KR_E_IO_OPEN,
		   "missing file");
	o.flags |= KR_REGION_NO_CREATE;
	expect_err(rfix_open(&f, &o), KR_E_IO_OPEN, "NO_CREATE without a sidecar");
	o.flags &= ~KR_REGION_NO_CREATE;

	/* A file whose size is not a multiple of the page. */
	char odd[128];
	tu_pool_path(odd, sizeof(odd), "rodd");
	tu_write_file(odd, "abc", 3);
	expect_err(kr_region_open(odd, &o, &r2, NULL, NULL), KR_E_MISUSE_ARG, "odd size");

	/* Attach: a private mapping, a wrong length, another file's mapping. */
	int fd = open(f.path, O_RDWR);
	void *priv = mmap(NULL, 256 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	expect_err(kr_region_attach(f.path, priv, 256 * P, &o, &r2), KR_E_MISUSE_ARG, "MAP_PRIVATE");
	munmap(priv, 256 * P);
	void *sh = mmap(NULL, 256 * P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	expect_err(kr_region_attach(f.path, sh, 128 * P, &o, &r2), KR_E_MISUSE_ARG, "half the file");
	expect_err(kr_region_attach(g.path, sh, 256 * P, &o, &r2), KR_E_MISUSE_ARG, "another file");
	void *ro = mmap(NULL, 256 * P, PROT_READ, MAP_SHARED, fd, 0);
	expect_err(kr_region_attach(f.path, ro, 256 * P, &o, &r2), KR_E_MISUSE_ARG, "read-only map");
	munmap(ro, 256 * P);
	/* The right one works, and the data stays the application's. */
	TU_OK(kr_region_attach(f.path, sh, 256 * P, &o, &r2));
	expect_err(rfix_open(&f, &o), KR_E_IO_BUSY, "attached twice");
	((uint8_t *)sh)[5] = 9;
	TU_OK(kr_region_sync(r2));
	TU_OK(kr_region_close(r2));
	/* Writable again after detach; the byte is put back, since the closed sidecar no
	 * longer sees stores (the end check judges the file against it). */
	uint8_t was = ((volatile uint8_t *)sh)[6];
	((volatile uint8_t *)sh)[6] = (uint8_t)(was + 1);
	((volatile uint8_t *)sh)[6] = was;
	munmap(sh, 256 * P);
	close(fd);
	/* A sidecar from another file. */
	TU_OK(rfix_open(&g, &o));
	TU_OK(kr_region_close(g.r));
	struct kr_region_opts other = o;
	other.sidecar = g.side;
	expect_err(rfix_open(&f, &other), KR_E_FORMAT_MISMATCH, "another file's sidecar");

	/* A file that changed size while closed, and while attached. */
	TU_ASSERT(truncate(g.path, 512 * P) == 0, "truncate");
	expect_err(rfix_open(&g, &o), KR_E_FORMAT_MISMATCH, "resized while closed");
	TU_ASSERT(truncate(g.path, 256 * P) == 0, "truncate back");
	TU_OK(rfix_open(&g, &o));
	TU_ASSERT(truncate(g.path, 300 * P) == 0, "grow while attached");
	fprintf(stderr, "(a warning about %s changing size is expected)\n", g.path);
	expect_err(kr_region_sync(g.r), KR_E_FORMAT_MISMATCH, "resized while attached");
	expect_err(kr_region_close(g.r), KR_E_FORMAT_MISMATCH, "close of a resized region");
	struct kr_region_info info;
	TU_OK(kr_region_info(g.path, NULL, &info));
	TU_ASSERT(info.state == KR_SIDE_ACTIVE, "a resized region's sidecar stays ACTIVE");

	/* Damaged sidecars. */
	size_t slen;
	uint8_t *side = tu_read_file(g.side, &slen);
	uint8_t *mangled = malloc(slen);
	memcpy(mangled, side, slen);
	mangled[P + 40] ^= 1; /* one superblock copy: the other serves */
	TU_ASSERT(truncate(g.path, 256 * P) == 0, "truncate back");
	tu_write_file(g.side, mangled, slen);
	TU_OK(rfix_open(&g, &o));
	TU_OK(kr_region_close(g.r));
	memcpy(mangled, side, slen);
	mangled[40] ^= 1;
	mangled[P + 40] ^= 1;
	tu_write_file(g.side, mangled, slen);
	expect_err(rfix_open(&g, &o), KR_E_CORRUPT_HEADER, "both superblocks");
	tu_write_file(g.side, side, slen / 2);
	int rc = rfix_open(&g, &o);
	TU_ASSERT(rc == KR_E_FORMAT_TRUNCATED || rc == KR_E_CORRUPT_HEADER, "truncated: %d", rc);
	memset(mangled, 0x33, slen);
	tu_write_file(g.side, mangled, slen);
	expect_err(rfix_open(&g, &o), KR_E_FORMAT_NOT_POOL, "garbage sidecar");
	free(mangled);
	free(side);
	printf("region badinput: ok\n");
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	bool all = strcmp(what, "all") == 0;
	if (all || strcmp(what, "track") == 0) {
		if (argc > 2) {
			case_track(argv[2]);
		} else {
			case_track("uffd");
			case_track("mprotect");
			case_track("noseal");
		}
	}
	if (all || strcmp(what, "thread") == 0)
		case_thread();
	if (all || strcmp(what, "corrupt") == 0)
		case_corrupt();
	if (all || strcmp(what, "crcpage") == 0)
		case_crcpage();
	if (all || strcmp(what, "poison") == 0)
		case_poison();
	if (all || strcmp(what, "fork") == 0)
		case_fork();
	if (all || strcmp(what, "badinput") == 0)
		case_badinput();
	printf("test_region: ok\n");
	TU_END_CHECK_ALL("test_region");
	return 0;
}
