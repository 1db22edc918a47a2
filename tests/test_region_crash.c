/*
 * test_region_crash.c - protected regions killed at the worst moments.
 *
 * Each round forks a child that attaches the region (recovering it from the previous
 * round's crash), runs the background thread at a 5 ms period and stores into a moving hot
 * area, so segments keep being unsealed and sealed again. The child dies by SIGKILL at a
 * chosen crash point (region.h): after a harvest and before any redundancy is written,
 * between a batch's CRCs and its parity, between two stripes' parity, before a seal (where
 * the child also stores into the segment being sealed, every time), between a seal and
 * the hot bit's clearing, inside the unseal handler before and after the hot bit is
 * persisted; or at a random time. Crash points also fire during the child's own recovery.
 *
 * After each death, before anything else touches the files, the oracle (regionutil.c)
 * checks the invariant the sidecar promises: every page of a cold segment matches its CRC
 * and every stripe of cold segments matches its parity. Then, in some rounds, a byte is
 * flipped with pwrite in a cold page (recovery must find and repair it, exactly one) or
 * in a hot page (recovery must rebuild it without calling it corruption). Then the parent
 * recovers: no damage may be reported that was not injected; after close the sidecar is
 * CLEAN and fully sound.
 *
 *   test_region_crash [rounds]     (default 60, fewer under sanitizers)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region_layout.h"
#include "region.h"
#include "regionutil.h"
#include "testutil.h"

#define P 4096u
#define NPAGES 1024u
#define POINT_TIME KR_RPOINT_COUNT /* no crash point: killed by the parent at a random time */

static const char *const point_names[] = {
	[KR_RPOINT_HARVESTED] = "harvested", [KR_RPOINT_CRCS] = "crcs",
	[KR_RPOINT_PARITY] = "parity",       [KR_RPOINT_SEALING] = "sealing",
	[KR_RPOINT_SEALED] = "sealed",
	[KR_RPOINT_UNSEAL] = "unseal",       [KR_RPOINT_UNSEALED] = "unsealed",
	[POINT_TIME] = "time",
};

static volatile int crash_point;
static volatile long crash_countdown;
static uint8_t *volatile crash_base;

/* At the start of every seal, a store into the segment races with it (the narrowest
 * window of the seal protocol, made certain); then the countdown. */
static void crash_hook(enum kr_region_point pt, uint64_t page)
{
	if (pt == KR_RPOINT_SEALING && crash_base)
		crash_base[page * P + 100] ^= 1;
	if ((int)pt == crash_point && --crash_countdown == 0)
		kill(getpid(), SIGKILL);
}

static struct kr_region_opts opts(unsigned flags)
{
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.flags = KR_REGION_FORCE_PMEM | flags;
	o.segment_pages = 64;
	o.batch_pages = 50;
	o.period_ms = 5;
	return o;
}

static void child(const char *path, int point, long countdown, uint64_t seed)
{
	crash_point = point;
	crash_countdown = countdown;
	kr_region_hook = crash_hook;
	struct kr_region_opts o = opts(0);
	kr_region *r;
	void *b;
	size_t len;
	if (kr_region_open(path, &o, &r, &b, &len) != KR_OK) {
		fprintf(stderr, "child: open: %s\n", kr_errmsg());
		_exit(2);
	}
	uint8_t *base = b;
	crash_base = base;
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	double end = tu_now() + 1.5, move = 0;
	uint64_t area = 0;
	while (tu_now() < end) {
		if (tu_now() > move) { /* the hot area moves every 20 ms: segments cool down */
			area = tu_rng_below(&rng, NPAGES);
			move = tu_now() + 0.02;
		}
		for (int i = 0; i < 64; i++) {
			uint64_t p = (area + tu_rng_below(&rng, 96)) % NPAGES, v = tu_rng_next(&rng);
			memcpy(base + p * P + tu_rng_below(&rng, P / 8) * 8, &v, 8);
		}
		usleep(200);
	}
	kr_region_close(r);
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : tu_scaled(60, 20);
	struct tu_rng rng;
	tu_rng_seed(&rng, tu_seed("region-crash", 5));
	char path[128], side[160];
	ru_make_file(path, sizeof(path), "rcrash", NPAGES, 9);
	snprintf(side, sizeof(side), "%s.krs", path);
	uint8_t trusted[NPAGES];
	unsigned killed[POINT_TIME + 1] = {0}, exited = 0, cold_fixed = 0, hot_absorbed = 0;
	unsigned unmade = 0; /* kills before the first sidecar had a superblock */
	bool made = false;   /* a sidecar has been made (and closed sound) */
	uint64_t stale = 0;

	for (unsigned round = 0; round < rounds; round++) {
		int point = 1 + (int)tu_rng_below(&rng, POINT_TIME);
		long countdown = (long)tu_rng_logu(&rng, 1, 200);
		uint64_t seed = tu_rng_next(&rng);
		fflush(NULL);
		pid_t pid = fork();
		TU_ASSERT(pid >= 0, "fork");
		if (pid == 0)
			child(path, point, countdown, seed);
		if (point == POINT_TIME) {
			usleep((useconds_t)tu_rng_range(&rng, 1000, 400000));
			kill(pid, SIGKILL);
		}
		int status;
		TU_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
		bool died = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		TU_ASSERT(died || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
			  "round %u (%s): child status %#x", round, point_names[point], status);
		if (died)
			killed[point]++;
		else
			exited++;

		/* The promise, judged before anyone recovers. Until a sidecar has been made
		 * once, the child may die while making it (a kill at a random time comes early
		 * on a loaded machine): a sidecar without a valid superblock promises nothing,
		 * and the open below must make it again. */
		struct ru_verdict v;
		bool judged = made || ru_sidecar_made(side);
		if (judged) {
			ru_judge_pages(path, side, &v, trusted);
			TU_ASSERT(v.bad_crcs == 0 && v.bad_parity == 0 && v.bad_meta == 0,
				  "round %u, crash at %s #%ld: %llu cold pages fail their CRC, %llu "
				  "stripes their parity, %llu meta (first %llu)", round,
				  point_names[point], countdown, (unsigned long long)v.bad_crcs,
				  (unsigned long long)v.bad_parity, (unsigned long long)v.bad_meta,
				  (unsigned long long)v.first_bad);
		} else {
			TU_ASSERT(died, "round %u: the child exited without making the sidecar", round);
			unmade++;
		}

		/* Damage behind the tracker's back, sometimes. */
		int inject = died && judged ? (int)tu_rng_below(&rng, 3) : 0; /* 0 none, 1 cold, 2 hot */
		uint64_t page = 0, off = 0;
		uint8_t before = 0;
		if (inject) {
			uint64_t want = inject == 1, tries = 0;
			do
				page = tu_rng_below(&rng, NPAGES);
			while (trusted[page] != want && ++tries < 100000);
			if (trusted[page] != want)
				inject = 0; /* no page of that kind this time */
		}
		if (inject) {
			off = page * P + tu_rng_below(&rng, P);
			tu_pread(path, &before, 1, off);
			uint8_t b = before ^ 0x81;
			tu_pwrite(path, &b, 1, off);
		}

		struct kr_region_opts o = opts(KR_REGION_MANUAL);
		kr_region *r;
		void *b;
		size_t len;
		int rc = kr_region_open(path, &o, &r, &b, &len);
		TU_ASSERT(rc == KR_OK, "round %u: recovery after %s: %d %s", round, point_names[point], rc,
			  kr_errmsg());
		struct kr_region_stats st;
		TU_OK(kr_region_stats(r, &st));
		stale += st.stale_at_recovery;
		if (inject == 1) {
			uint8_t after;
			tu_pread(path, &after, 1, off);
			TU_ASSERT(st.bad_pages == 1 && st.repaired_pages == 1 && after == before,
				  "round %u: cold damage at page %llu: %llu bad, %llu repaired, byte %#x "
				  "(was %#x)", round, (unsigned long long)page,
				  (unsigned long long)st.bad_pages, (unsigned long long)st.repaired_pages,
				  after, before);
			cold_fixed++;
		} else {
			TU_ASSERT(st.bad_pages == 0, "round %u (%s): %llu pages reported damaged, none "
				  "was", round, point_names[point], (unsigned long long)st.bad_pages);
			if (inject == 2) {
				TU_ASSERT(st.stale_at_recovery >= 1, "round %u: hot damage not counted",
					  round);
				hot_absorbed++;
			}
		}
		TU_OK(kr_region_close(r));
		ru_require_sound(path, side, "after recovery and close");
		made = true;
		ru_judge(path, side, &v);
		TU_ASSERT(v.state == KR_SIDE_CLEAN && v.trusted_pages == NPAGES, "round %u: CLEAN", round);
	}
	printf("region crash: %u rounds:", rounds);
	for (int p = 1; p <= POINT_TIME; p++)
		printf(" %s %u,", point_names[p], killed[p]);
	printf(" not reached %u; %u killed while making the sidecar; cold damage repaired %u, "
	       "hot damage rebuilt %u; %llu pages changed since their last checksum in hot "
	       "segments\n", exited, unmade, cold_fixed, hot_absorbed, (unsigned long long)stale);
	printf("test_region_crash: ok\n");
	TU_END_CHECK_ALL("test_region_crash");
	return 0;
}
