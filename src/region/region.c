/*
 * region.c - protected regions: lazy redundancy (Vilamb) for a file that the application
 * maps and writes with plain stores.
 *
 * The job
 *
 *   Keep a CRC-32C of every 4 KiB page and an XOR parity page per stripe of W consecutive
 *   pages, in a sidecar file (sidecar.c writes it; region_layout.h says its bytes), up
 *   to date without touching the store path: the tracker (track.c) reports which pages
 *   were written, and a background pass recomputes redundancy for those once per period
 *   (Vilamb's Algorithm 1 with one harvest call per batch). Damage found in a page outside
 *   the window is repaired from its stripe. This file is the protocol: when each piece of
 *   the sidecar is written, and why that order is safe at every instant.
 *
 * The pass (region_pass), per batch of up to B written pages:
 *   1. seq becomes odd (DRAM): repairs from fault handlers stay away until it is even;
 *   2. harvest: report and re-arm, atomically per page (a store racing with it is either
 *      in this batch or in the next one);
 *   3. the shadow record (span + odd seq) is written: Vilamb's, kept for status (the hot
 *      bits below make it unnecessary for recovery);
 *   4. CRCs of the pages, parity of their stripes, meta-CRCs of their CRC pages; one fence;
 *   5. seq becomes even.
 *   Clearing the written state before recomputing is what makes concurrent stores safe: a
 *   store after step 2 marks the page again, so a CRC computed over a torn page is
 *   replaced in the next pass.
 *
 * Crash consistency (Vilamb port, section 6.5, "Level 2")
 *
 *   The page-table state the tracker relies on dies with the process, so the sidecar must
 *   say, durably and ahead of time, which redundancy may be stale. The region is cut into
 *   segments of G pages. A cold segment is sealed: mprotect(PROT_READ). The first store
 *   into it traps (SIGSEGV, region_fault) and, before the store can run, sets the
 *   segment's hot bit in the sidecar (both copies) and persists it, then unseals. The pass
 *   seals a hot segment again after two passes without writes: write-protect, harvest the
 *   segment, recompute, persist, and only then, if no store unsealed it meanwhile, clear
 *   the hot bit. So at every instant: redundancy of a cold segment matches its data, and
 *   after a crash (state ACTIVE) cold segments are verified and repaired while hot ones are
 *   rebuilt. With KR_REGION_NO_SEAL (level 1) every segment is hot for the whole session.
 *   A clean close seals everything, runs a final pass, clears every hot bit and writes
 *   state CLEAN with a CRC over all meta-CRCs.
 *
 * Locks
 *
 *   work (mutex): one of pass, check, sync, close at a time.
 *   lock (spinlock, owner recorded): seal/unseal transitions and the write-back of a
 *     repaired page; taken in the signal handler, so it is held only around system calls
 *     and never while touching the region's data through the mapping.
 *   Order: work, then lock, then the tracker's own lock (mprotect mode).
 *
 * Repair of a page p (rebuild_page) needs its whole stripe covered: no batch in flight,
 * none of its pages written since the last pass, every other page matching its CRC (read
 * through the file, so that a second bad page reports instead of faulting), and the rebuilt
 * page matching p's own CRC. Any doubt ends in "cannot repair", never in a write. The result
 * is written through the file (kr_pm_write_file), while the page is write-protected so no
 * store can slip in between.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "region_layout.h"
#include "media.h"
#include "pmem.h"
#include "region.h"
#include "sidecar.h"
#include "track.h"

#define P KR_SIDE_PAGE
#define MAX_POISON 16
#define SEAL_AFTER_IDLE 2 /* passes without writes before a hot segment is sealed again */

struct kr_region {
	char *path;
	char *side_path;
	int fd;             /* the data file */
	uint8_t *base;      /* its mapping */
	size_t len;
	bool own_map;       /* kr_region_open mapped it */
	unsigned flags;
	uint32_t period_ms, scrub_kib;
	void (*progress)(void *, uint64_t, uint64_t);
	void *progress_ctx;

	struct kr_sidecar sc; /* the sidecar: geometry, superblock, areas */
	bool seal;            /* this session seals cold segments */

	struct kr_track track;
	_Atomic uint8_t *sealed; /* per segment */
	uint8_t *idle;           /* passes without writes, per segment */
	uint8_t *seg_written;    /* this pass wrote into the segment */
	atomic_flag lock;
	_Atomic long lock_owner;
	_Atomic uint64_t seq;    /* batch sequence number: odd while a batch is applied */
	_Atomic int closing;
	_Atomic uint64_t unseals, poison_repairs; /* counted in the handler */
	_Atomic uint64_t poison[MAX_POISON]; /* page + 1 of emulated poison */
	uint8_t *rbuf, *tbuf;    /* repair buffers, used under lock */
	uint64_t *pages;         /* batch buffer (max(B, G) entries) */
	uint64_t *wbits;         /* query buffer (G bits) */
	uint64_t scrub_next;

	pthread_mutex_t work;
	pthread_mutex_t mu;      /* thread start/stop */
	pthread_cond_t cv;
	pthread_t thread;
	bool thread_on, stop;
	pid_t pid;               /* the attaching process; a forked child differs */
	bool watched;            /* the fault handler watches the mapping */
	int failed;
	uint64_t minflt_mark;
	struct kr_region_stats st;
	struct kr_region *next;  /* attached regions, for fork */
};

void (*kr_region_hook)(enum kr_region_point point, uint64_t page);

static void hook(enum kr_region_point point, uint64_t page)
{
	if (kr_region_hook)
		kr_region_hook(point, page);
}

/* ---------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------- */
static uint64_t now_ns(clockid_t clk)
{
	struct timespec t;
	clock_gettime(clk, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t minor_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_minflt;
}

static long my_tid(void) { return (long)syscall(SYS_gettid); }

/* The region spinlock. Returns false (and takes nothing) if this thread already holds it:
 * a fault inside our own critical section cannot be resolved by waiting for ourselves. */
static bool region_lock(struct kr_region *r)
{
	long me = my_tid();
	if (atomic_load_explicit(&r->lock_owner, memory_order_relaxed) == me)
		return false;
	while (atomic_flag_test_and_set_explicit(&r->lock, memory_order_acquire))
		;
	atomic_store_explicit(&r->lock_owner, me, memory_order_relaxed);
	return true;
}

static void region_unlock(struct kr_region *r)
{
	atomic_store_explicit(&r->lock_owner, 0, memory_order_relaxed);
	atomic_flag_clear_explicit(&r->lock, memory_order_release);
}

static bool tracking(const struct kr_region *r) { return r->track.mode != KR_TRACK_OFF; }

/* A session that keeps every segment hot (KR_REGION_NO_SEAL): crash level 1. */
static bool level1(const struct kr_region *r)
{
	return !(r->flags & KR_REGION_OFFLINE) && (r->flags & KR_REGION_NO_SEAL);
}

/* The protection a page of segment g should have when nothing special is going on. */
static int normal_prot(const struct kr_region *r, uint64_t g)
{
	if (atomic_load(&r->sealed[g]) || r->track.mode == KR_TRACK_MPROTECT)
		return PROT_READ;
	return PROT_READ | PROT_WRITE;
}

static void report_progress(struct kr_region *r, uint64_t done, uint64_t total)
{
	if (r->progress)
		r->progress(r->progress_ctx, done, total);
}

/* ---------------------------------------------------------------------------------------
 * Redundancy updates (sidecar writes, all through pmem.c)
 * ------------------------------------------------------------------------------------- */
/* Recomputes the CRCs of pages[0..n) (ascending), the parity of their stripes and the meta
 * CRCs of their CRC pages; flushed, not fenced. Returns how many CRCs changed. */
static uint64_t update_pages(struct kr_region *r, const uint64_t *pages, size_t n)
{
	uint64_t changed = 0, last_stripe = UINT64_MAX, last_cp = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t p = pages[i];
		uint32_t c = kr_crc32c(r->base + p * P, P);
		if (c != r->sc.crcs[p]) {
			kr_side_set_crc(&r->sc, p, c);
			changed++;
		}
		if (r->seg_written)
			r->seg_written[p / r->sc.G] = 1;
	}
	hook(KR_RPOINT_CRCS, pages[0]);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = pages[i] / r->sc.W;
		if (s != last_stripe) {
			kr_side_parity(&r->sc, s, r->base);
			hook(KR_RPOINT_PARITY, s * r->sc.W);
		}
		last_stripe = s;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t cp = pages[i] / KR_SIDE_CRCS_PER_PAGE;
		if (cp != last_cp)
			kr_side_meta(&r->sc, cp);
		last_cp = cp;
	}
	return changed;
}

/* One batch: pages[0..n) were just harvested. Steps 3-5 of the pass. */
static int apply_batch(struct kr_region *r, const uint64_t *pages, size_t n)
{
	/* The shadow is for status and diagnosis (recover() explains why recovery needs no
	 * more than the hot bits), so it shares the batch's one fence. */
	kr_side_shadow(&r->sc, atomic_load(&r->seq), pages[0], pages[n - 1] + 1);
	update_pages(r, pages, n);
	return kr_pm_fence(&r->sc.pm);
}

static void batch_begin(struct kr_region *r) { atomic_fetch_add(&r->seq, 1); }
static void batch_end(struct kr_region *r)
{
	uint64_t seq = atomic_fetch_add(&r->seq, 1) + 1;
	kr_side_shadow(&r->sc, seq, 0, 0); /* durable with the next fence; a stale odd one only makes
				   * recovery rebuild pages it would rebuild anyway */
}

/* ---------------------------------------------------------------------------------------
 * Repair
 * ------------------------------------------------------------------------------------- */
static bool read_page(struct kr_region *r, uint64_t p, uint8_t *buf)
{
	return pread(r->fd, buf, P, (off_t)(p * P)) == (ssize_t)P;
}

static void xor_into(uint8_t *dst, const uint8_t *src)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	for (size_t i = 0; i < P / 8; i++)
		d[i] ^= s[i];
}

/* Rebuilds page p into r->rbuf from its stripe, if the stripe is covered; see the top of
 * the file. Called with lock held. Async-signal-safe (it may run in the handler). */
static bool rebuild_page(struct kr_region *r, uint64_t p)
{
	uint64_t seq0 = atomic_load(&r->seq);
	if (seq0 & 1)
		return false; /* a batch is being applied: the stripe may be mid-update */
	uint64_t s = p / r->sc.W, first = s * r->sc.W, n = kr_side_stripe_pages(&r->sc, s);
	uint64_t bits[(KR_SIDE_MAX_STRIPE + 63) / 64];
	if (tracking(r) && (kr_track_query(&r->track, first, n, bits) != KR_OK || bits[0]))
		return false; /* part of the stripe is in the window */
	if (kr_side_hot(&r->sc, p / r->sc.G) && !tracking(r))
		return false; /* offline: a hot segment's redundancy is unknown */
	memcpy(r->rbuf, r->sc.parity + s * P, P);
	for (uint64_t q = first; q < first + n; q++) {
		if (q == p)
			continue;
		if (!read_page(r, q, r->tbuf) || kr_crc32c(r->tbuf, P) != r->sc.crcs[q])
			return false; /* a second bad page in the stripe */
		xor_into(r->rbuf, r->tbuf);
	}
	return kr_crc32c(r->rbuf, P) == r->sc.crcs[p] && atomic_load(&r->seq) == seq0;
}

/* Repairs page p (not from a handler): write-protects it so no store can land between the
 * coverage check and the write-back, rebuilds, writes through the file, restores. */
static bool repair_page(struct kr_region *r, uint64_t p)
{
	uint8_t *page = r->base + p * P;
	bool online = tracking(r);
	if (!region_lock(r))
		return false;
	if (online && mprotect(page, P, PROT_READ) != 0) {
		region_unlock(r);
		return false;
	}
	bool ok = rebuild_page(r, p) && kr_pm_write_file(r->fd, r->rbuf, P, p * P) == KR_OK;
	if (ok && r->sc.pm.mode == KR_MODE_PAGECACHE)
		ok = fdatasync(r->fd) == 0;
	if (online)
		mprotect(page, P, normal_prot(r, p / r->sc.G));
	region_unlock(r);
	return ok;
}

/* ---------------------------------------------------------------------------------------
 * The fault handler: unseal, the mprotect tracker, emulated poison, forked children
 * ------------------------------------------------------------------------------------- */
static void say(const char *a, const char *b, const char *c)
{
	(void)!write(2, a, strlen(a));
	(void)!write(2, b, strlen(b));
	(void)!write(2, c, strlen(c));
}

static int poison_slot(struct kr_region *r, uint64_t p)
{
	for (int i = 0; i < MAX_POISON; i++)
		if (atomic_load(&r->poison[i]) == p + 1)
			return i;
	return -1;
}

/* A lost page: emulated poison (a slot, the page made inaccessible) or a machine check
 * (SIGBUS; writing the page through the file is what clears real poison). */
static bool repair_poison(struct kr_region *r, uint64_t p, bool machine_check)
{
	if (!region_lock(r))
		return false;
	int slot = poison_slot(r, p);
	bool ok = true;
	if (machine_check || slot >= 0) { /* emulated: not repaired meanwhile by another thread */
		ok = rebuild_page(r, p) && kr_pm_write_file(r->fd, r->rbuf, P, p * P) == KR_OK &&
		     (slot < 0 || mprotect(r->base + p * P, P, normal_prot(r, p / r->sc.G)) == 0);
		if (ok && slot >= 0)
			atomic_store(&r->poison[slot], 0);
		if (ok)
			atomic_fetch_add(&r->poison_repairs, 1);
	}
	region_unlock(r);
	if (!ok)
		say("keratin: media error in protected region ", r->path,
		    ": the page is in the window (written since the last pass) or its stripe is "
		    "damaged too; cannot repair\n");
	return ok;
}

static bool region_fault(void *ctx, int sig, const siginfo_t *si, const void *ucontext)
{
	(void)ucontext;
	struct kr_region *r = ctx;
	if (getpid() != r->pid) {
		say("keratin: a forked child stored into protected region ", r->path,
		    "; only the attaching process is tracked, so the child may read it but not "
		    "write it\n");
		return false;
	}
	uint64_t p = (uint64_t)((uint8_t *)si->si_addr - r->base) / P, g = p / r->sc.G;
	if (sig == SIGBUS) {
		if (si->si_code != BUS_MCEERR_AR && si->si_code != BUS_MCEERR_AO)
			return false; /* beyond the end of a shrunken file, for instance */
		return repair_poison(r, p, true);
	}
	if (si->si_code == SEGV_MAPERR)
		return false;
	if (poison_slot(r, p) >= 0)
		return repair_poison(r, p, false);
	if (atomic_load(&r->closing)) {
		say("keratin: store into protected region ", r->path, " while it is being closed\n");
		return false;
	}
	if (!region_lock(r))
		return false;
	bool ok = true;
	if (atomic_load(&r->sealed[g])) {
		/* The segment becomes hot durably before the store can run (invariant I3). */
		hook(KR_RPOINT_UNSEAL, p);
		ok = kr_side_set_hot(&r->sc, g, true, true) == KR_OK;
		hook(KR_RPOINT_UNSEALED, p);
		if (ok && r->track.mode == KR_TRACK_UFFD)
			ok = mprotect(r->base + g * r->sc.G * P, kr_side_seg_pages(&r->sc, g) * P, PROT_READ | PROT_WRITE) == 0;
		if (ok) {
			atomic_store(&r->sealed[g], 0);
			atomic_fetch_add(&r->unseals, 1);
		}
	}
	if (ok && r->track.mode == KR_TRACK_MPROTECT)
		ok = kr_track_fault(&r->track, si->si_addr);
	else if (ok) /* lost a race with an unseal or the end of a repair: the page is writable */
		ok = mprotect(r->base + p * P, P, PROT_READ | PROT_WRITE) == 0;
	region_unlock(r);
	if (!ok)
		say("keratin: cannot unprotect a page of protected region ", r->path,
		    " (mprotect failed: vm.max_map_count?)\n");
	return ok;
}

/* Attached regions, for the fork handlers: a child gets the whole range write-protected,
 * so a store from it stops with a message instead of silently going untracked. */
static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kr_region *regions;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&regions_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&regions_lock); }
static void fork_child(void)
{
	for (struct kr_region *r = regions; r; r = r->next)
		if (tracking(r))
			mprotect(r->base, r->len, PROT_READ);
	pthread_mutex_unlock(&regions_lock);
}
static void atfork_install(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void list_add(struct kr_region *r)
{
	pthread_once(&atfork_once, atfork_install);
	pthread_mutex_lock(&regions_lock);
	r->next = regions;
	regions = r;
	pthread_mutex_unlock(&regions_lock);
}

static void list_remove(struct kr_region *r)
{
	pthread_mutex_lock(&regions_lock);
	for (struct kr_region **pp = &regions; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	pthread_mutex_unlock(&regions_lock);
}

/* ---------------------------------------------------------------------------------------
 * Sealing and the pass
 * ------------------------------------------------------------------------------------- */
/* Harvests pages [first, first + count) and applies them as one batch or more. */
static int harvest_span_apply(struct kr_region *r, uint64_t first, uint64_t count)
{
	size_t n;
	batch_begin(r);
	int rc = kr_track_harvest_span(&r->track, first, count, r->pages, &n);
	if (rc == KR_OK && n)
		rc = apply_batch(r, r->pages, n);
	batch_end(r);
	if (rc == KR_OK) {
		r->st.dirty_pages += n;
		r->st.last_dirty_pages += n;
	}
	return rc;
}

static int seal_segment(struct kr_region *r, uint64_t g)
{
	uint8_t *start = r->base + g * r->sc.G * P;
	hook(KR_RPOINT_SEALING, g * r->sc.G);
	if (!region_lock(r))
		return KR_E_MISUSE_STATE;
	int rc = mprotect(start, kr_side_seg_pages(&r->sc, g) * P, PROT_READ) == 0 ? KR_OK : KR_E_IO;
	if (rc == KR_OK)
		atomic_store(&r->sealed[g], 1);
	region_unlock(r);
	if (rc != KR_OK)
		return kr_err_errno(KR_E_IO, "region: mprotect (seal) failed");
	/* Stores that landed before the seal are caught here; later ones unseal first. */
	if ((rc = harvest_span_apply(r, g * r->sc.G, kr_side_seg_pages(&r->sc, g))) != KR_OK)
		return rc;
	hook(KR_RPOINT_SEALED, g * r->sc.G);
	if (!region_lock(r))
		return KR_E_MISUSE_STATE;
	if (atomic_load(&r->sealed[g]))
		rc = kr_side_set_hot(&r->sc, g, false, false);
	region_unlock(r);
	r->idle[g] = 0;
	r->st.seals++;
	return rc;
}

static int check_size(struct kr_region *r)
{
	struct stat st;
	if (fstat(r->fd, &st) != 0)
		return kr_err_errno(KR_E_IO, "region: fstat %s", r->path);
	if ((uint64_t)st.st_size == r->sc.sb.data_size)
		return KR_OK;
	if (!r->failed)
		fprintf(stderr, "keratin: protected region %s changed size (%" PRIu64 " -> %lld "
			"bytes); redundancy is no longer maintained\n", r->path, r->sc.sb.data_size,
			(long long)st.st_size);
	r->failed = KR_E_FORMAT_MISMATCH;
	return kr_err_set(KR_E_FORMAT_MISMATCH, "region: %s changed size while attached", r->path);
}

static int scrub_step(struct kr_region *r);

/* One full pass (the work mutex held); seal: also seal segments that stayed idle. */
static int region_pass(struct kr_region *r, bool seal)
{
	if (r->failed)
		return kr_err_set(r->failed, "region: %s stopped (%s)", r->path, kr_strerror(r->failed));
	int rc = check_size(r);
	if (rc != KR_OK)
		return rc;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t faults = minor_faults(), harvest_ns = 0, stripes = 0;
	r->st.last_dirty_pages = 0;
	memset(r->seg_written, 0, r->sc.nsegs);
	for (;;) {
		size_t n;
		batch_begin(r);
		uint64_t h0 = now_ns(CLOCK_MONOTONIC);
		int more = kr_track_harvest(&r->track, r->pages, r->sc.B, &n);
		harvest_ns += now_ns(CLOCK_MONOTONIC) - h0;
		if (more >= 0 && n) {
			hook(KR_RPOINT_HARVESTED, r->pages[0]);
			rc = apply_batch(r, r->pages, n);
			for (size_t i = 0; i < n; i++)
				stripes += i == 0 || r->pages[i] / r->sc.W != r->pages[i - 1] / r->sc.W;
		}
		batch_end(r);
		if (more < 0)
			return more;
		r->st.last_dirty_pages += n;
		if (rc != KR_OK || more == KR_OK)
			break;
	}
	for (uint64_t g = 0; seal && r->seal && rc == KR_OK && g < r->sc.nsegs; g++) {
		if (r->seg_written[g] || atomic_load(&r->sealed[g]))
			r->idle[g] = 0;
		else if (++r->idle[g] >= SEAL_AFTER_IDLE)
			rc = seal_segment(r, g);
	}
	uint64_t hot = 0;
	for (uint64_t g = 0; g < r->sc.nsegs; g++)
		hot += kr_side_hot(&r->sc, g);

	struct kr_region_stats *st = &r->st;
	st->passes++;
	st->hot_segments = hot;
	st->last_stripes = stripes;
	st->last_pass_ns = now_ns(CLOCK_MONOTONIC) - t0;
	st->last_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	st->last_harvest_ns = harvest_ns;
	st->last_wp_faults = faults - r->minflt_mark;
	r->minflt_mark = faults;
	st->last_pass_end_ns = now_ns(CLOCK_MONOTONIC);
	st->dirty_pages += st->last_dirty_pages;
	st->stripes += stripes;
	st->pass_ns += st->last_pass_ns;
	if (st->last_pass_ns > st->max_pass_ns)
		st->max_pass_ns = st->last_pass_ns;
	st->cpu_ns += st->last_cpu_ns;
	st->harvest_ns += harvest_ns;

	struct kr_side_passrec pr = {
		.passes = st->passes,
		.pass_end_ns = now_ns(CLOCK_REALTIME),
		.pass_ns = st->last_pass_ns,
		.dirty_pages = st->last_dirty_pages,
		.hot_segments = hot,
		.pid = (uint32_t)r->pid,
		.period_ms = r->period_ms,
	};
	kr_side_passrec(&r->sc, &pr);
	if (rc == KR_OK && r->scrub_kib)
		rc = scrub_step(r);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Verification
 * ------------------------------------------------------------------------------------- */
/* Pages [first, first + count) of the window (written since the last pass) as bits. */
static int window_bits(struct kr_region *r, uint64_t first, uint64_t count, uint64_t *bits)
{
	if (!tracking(r)) {
		memset(bits, 0, (count + 63) / 64 * 8);
		return KR_OK;
	}
	int rc = kr_track_query(&r->track, first, count, bits);
	return rc == KR_OK ? KR_OK : kr_err_set(rc, "region: PAGEMAP_SCAN query failed");
}

/* The first damage a check leaves unrepaired, for the report. */
static void note_bad(struct kr_region_report *rep, int kind, uint64_t index, uint64_t off)
{
	if (rep->first_bad_kind == KR_REGION_BAD_NONE) {
		rep->first_bad_kind = kind;
		rep->first_bad_index = index;
		rep->first_bad_off = off;
	}
}

static uint64_t side_off(const struct kr_region *r, const void *p)
{
	return (uint64_t)((const char *)p - r->sc.pm.base);
}

/* Stripe s judged by its parity alone, for a page of stored checksums that failed its own
 * CRC: the data is sound if it agrees with its parity. Then (repair) the checksums of its
 * pages in [lo, lo + n), the failing page's share, are recomputed from it. Whether the
 * stripe was sound. */
static bool stripe_by_parity(struct kr_region *r, uint64_t s, uint64_t lo, uint64_t n,
			     bool repair, struct kr_region_report *rep)
{
	uint64_t sf = s * r->sc.W, sn = kr_side_stripe_pages(&r->sc, s);
	memset(r->tbuf, 0, P);
	for (uint64_t p = sf; p < sf + sn; p++)
		xor_into(r->tbuf, r->base + p * P);
	rep->stripes_checked++;
	uint64_t again[1];
	if (memcmp(r->tbuf, r->sc.parity + s * P, P) != 0 &&
	    window_bits(r, sf, sn, again) == KR_OK && again[0]) {
		rep->pages_unverifiable += sn; /* a store raced with the check */
		return false;
	}
	if (memcmp(r->tbuf, r->sc.parity + s * P, P) != 0) {
		/* Data or parity: nothing says which. */
		rep->pages_bad++;
		if (rep->pages_bad - rep->pages_repaired == 1)
			rep->first_bad_page = sf;
		note_bad(rep, KR_REGION_BAD_DATA, sf, sf * P);
		return false;
	}
	if (!repair || (r->flags & KR_REGION_READONLY))
		return true;
	for (uint64_t p = sf > lo ? sf : lo; p < sf + sn && p < lo + n; p++) {
		uint32_t crc = kr_crc32c(r->base + p * P, P);
		if (crc != r->sc.crcs[p]) {
			kr_side_set_crc(&r->sc, p, crc);
			rep->crcs_rebuilt++;
		}
	}
	return true;
}

/* Page cp of stored checksums failed its own CRC (the meta array). It is judged whole,
 * every stripe it covers by parity, even those outside the check's range [first, first +
 * count): recomputing the checksums of some stripes and then the page's CRC would bless
 * the damaged checksums of the rest, and their sound data would read as damaged beyond
 * repair from then on. The page's CRC is recomputed only when every stripe was sound.
 * Counted once, as the CLI sums checks of consecutive ranges: by the check whose range
 * holds the page's first covered page; stripes outside the range go uncounted. */
static void judge_crc_page(struct kr_region *r, uint64_t cp, uint64_t first, uint64_t count,
			   bool repair, struct kr_region_report *rep)
{
	uint64_t lo = cp * KR_SIDE_CRCS_PER_PAGE;
	uint64_t n = r->sc.npages - lo < KR_SIDE_CRCS_PER_PAGE ? r->sc.npages - lo
								: KR_SIDE_CRCS_PER_PAGE;
	bool owner = lo >= first && lo < first + count, sound = true;
	struct kr_region_report outside = {0};
	if (owner)
		rep->crc_pages_bad++;
	for (uint64_t s = lo / r->sc.W; s <= (lo + n - 1) / r->sc.W; s++) {
		uint64_t sf = s * r->sc.W, sn = kr_side_stripe_pages(&r->sc, s);
		bool in_range = sf < first + count && sf + sn > first;
		if (!stripe_by_parity(r, s, lo, n, repair, in_range ? rep : &outside))
			sound = false;
	}
	rep->crcs_rebuilt += outside.crcs_rebuilt;
	if (repair && !(r->flags & KR_REGION_READONLY)) {
		if (sound)
			kr_side_meta(&r->sc, cp);
	} else if (owner) {
		note_bad(rep, KR_REGION_BAD_CRCS, cp, side_off(r, r->sc.crcs + lo));
	}
}

/* Whether the stored checksums of pages [sf, sf + sn) can be trusted: every page of
 * checksums they sit in passes its own CRC. Judged only where that CRC is kept current:
 * for pages of checksums all of whose pages are in cold segments. A failing one is judged
 * whole (judge_crc_page) the first time the check meets it; *judged is the last one the
 * check judged (pages of checksums are met in increasing order). */
static bool crcs_trusted(struct kr_region *r, uint64_t sf, uint64_t sn, uint64_t first,
			 uint64_t count, bool repair, uint64_t *judged, struct kr_region_report *rep)
{
	const uint64_t per = KR_SIDE_CRCS_PER_PAGE;
	bool ok = true;
	for (uint64_t cp = sf / per; cp <= (sf + sn - 1) / per; cp++) {
		uint64_t lo = cp * per, n = r->sc.npages - lo < per ? r->sc.npages - lo : per;
		bool cold = true;
		for (uint64_t g = lo / r->sc.G; g <= (lo + n - 1) / r->sc.G && cold; g++)
			cold = !kr_side_hot(&r->sc, g);
		if (!cold || kr_side_meta_ok(&r->sc, cp))
			continue;
		if (*judged == UINT64_MAX || cp > *judged) {
			*judged = cp;
			judge_crc_page(r, cp, first, count, repair, rep);
			if (kr_side_meta_ok(&r->sc, cp))
				continue;
		}
		ok = false;
	}
	return ok;
}

static int check_range(struct kr_region *r, uint64_t first, uint64_t count, unsigned flags,
		       struct kr_region_report *rep)
{
	int rc = KR_OK;
	bool repair = flags & KR_REGION_CHECK_REPAIR;
	uint64_t judged = UINT64_MAX;
	/* Stripe by stripe: a stripe's pages, their checksums and its parity are judged
	 * together, and each damaged thing is counted once, as what it is. */
	uint64_t s0 = first / r->sc.W, s1 = (first + count - 1) / r->sc.W;
	for (uint64_t s = s0; s <= s1 && rc == KR_OK; s++) {
		uint64_t sf = s * r->sc.W, sn = kr_side_stripe_pages(&r->sc, s), bits[1];
		if ((rc = window_bits(r, sf, sn, bits)) != KR_OK)
			break;
		bool hot_offline = !tracking(r) && kr_side_hot(&r->sc, sf / r->sc.G);
		if (!bits[0] && !hot_offline &&
		    !crcs_trusted(r, sf, sn, first, count, repair, &judged, rep)) {
			/* Judged by parity with its page of checksums; counted there. */
			if (repair)
				rc = kr_pm_fence(&r->sc.pm);
			continue;
		}
		bool stripe_sound = !bits[0] && !hot_offline;
		for (uint64_t p = sf; p < sf + sn; p++) {
			if (p < first || p >= first + count)
				continue;
			if ((bits[0] >> (p - sf) & 1) || hot_offline) {
				rep->pages_unverifiable++;
				continue;
			}
			rep->pages_checked++;
			if (kr_crc32c(r->base + p * P, P) == r->sc.crcs[p])
				continue;
			uint64_t again[1];
			if (window_bits(r, p, 1, again) == KR_OK && again[0]) {
				rep->pages_unverifiable++; /* a store raced with the check */
				rep->pages_checked--;
				stripe_sound = false;
				continue;
			}
			rep->pages_bad++;
			r->st.bad_pages++;
			if (repair && repair_page(r, p)) {
				rep->pages_repaired++;
				r->st.repaired_pages++;
			} else {
				if (rep->pages_bad - rep->pages_repaired == 1)
					rep->first_bad_page = p;
				note_bad(rep, KR_REGION_BAD_DATA, p, p * P);
				stripe_sound = false;
			}
		}
		if (!(flags & KR_REGION_CHECK_PARITY) || !stripe_sound)
			continue;
		/* Every page of the stripe matches its CRC: the parity must be their XOR. */
		memset(r->tbuf, 0, P);
		for (uint64_t p = sf; p < sf + sn; p++)
			xor_into(r->tbuf, r->base + p * P);
		rep->stripes_checked++;
		if (memcmp(r->tbuf, r->sc.parity + s * P, P) == 0)
			continue;
		rep->parity_bad++;
		if (repair && !(r->flags & KR_REGION_READONLY)) {
			kr_side_parity(&r->sc, s, r->base);
			rc = kr_pm_fence(&r->sc.pm);
			rep->parity_rebuilt++;
		} else {
			note_bad(rep, KR_REGION_BAD_PARITY, s, side_off(r, r->sc.parity + s * P));
		}
	}
	return rc;
}

static int scrub_step(struct kr_region *r)
{
	uint64_t budget = (uint64_t)r->scrub_kib * r->period_ms / 1000 / 4;
	if (budget == 0)
		budget = 1;
	if (budget > r->sc.npages)
		budget = r->sc.npages;
	struct kr_region_report rep = {0};
	if (r->scrub_next >= r->sc.npages)
		r->scrub_next = 0;
	uint64_t n = r->sc.npages - r->scrub_next < budget ? r->sc.npages - r->scrub_next : budget;
	/* Parity and the checksum array too: damage there stays latent until it is needed,
	 * when it would turn a repairable loss into an unrepairable one. */
	int rc = check_range(r, r->scrub_next, n, KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY,
			     &rep);
	r->scrub_next += n;
	r->st.scrubbed_pages += rep.pages_checked;
	if (rep.pages_bad || rep.parity_bad || rep.crc_pages_bad || rep.crcs_rebuilt)
		fprintf(stderr, "keratin: scrub of %s: %" PRIu64 " damaged page(s), %" PRIu64
			" repaired; %" PRIu64 " damaged parity page(s), %" PRIu64 " rebuilt; %" PRIu64
			" damaged checksum page(s), %" PRIu64 " checksums rebuilt\n", r->path,
			rep.pages_bad, rep.pages_repaired, rep.parity_bad, rep.parity_rebuilt,
			rep.crc_pages_bad, rep.crcs_rebuilt);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Attach: recovery
 * ------------------------------------------------------------------------------------- */
/* Recomputes everything of segment g from the data. */
static uint64_t rebuild_segment(struct kr_region *r, uint64_t g)
{
	uint64_t first = g * r->sc.G, n = kr_side_seg_pages(&r->sc, g);
	for (uint64_t i = 0; i < n; i++)
		r->pages[i] = first + i;
	return update_pages(r, r->pages, n);
}

/* The meta-CRC of CRC page cp is trustworthy only if every segment it covers is cold. */
static bool crc_page_cold(struct kr_region *r, uint64_t cp)
{
	uint64_t p0 = cp * KR_SIDE_CRCS_PER_PAGE, p1 = p0 + KR_SIDE_CRCS_PER_PAGE;
	if (p1 > r->sc.npages)
		p1 = r->sc.npages;
	for (uint64_t g = p0 / r->sc.G; g <= (p1 - 1) / r->sc.G; g++)
		if (kr_side_hot(&r->sc, g))
			return false;
	return true;
}

/* After a crash (ACTIVE), a new sidecar (all hot), or a damaged CLEAN one. Hot segments are
 * rebuilt; cold ones are verified and their damage repaired. Runs with every segment
 * sealed (online), so a store cannot land in a segment without making it hot first. */
static int recover(struct kr_region *r, bool fresh, struct kr_region_report *rep)
{
	bool ro = r->flags & KR_REGION_READONLY;
	/* The shadow record needs no handling here: the pages of a batch in flight are all in
	 * hot segments (a page is written only after its segment became hot, and a segment
	 * goes cold only after the batches covering it are durable). Widening the rebuild to
	 * the shadow's span would instead rebuild cold pages between its ends, and rebuilding
	 * a page unverified is how damage is lost. */
	/* A cold CRC page whose meta-CRC fails was itself damaged: its pages cannot be judged. */
	for (uint64_t cp = 0; !fresh && cp < r->sc.ncrcpages; cp++) {
		if (!crc_page_cold(r, cp) ||
		    kr_side_meta_ok(&r->sc, cp))
			continue;
		uint64_t p0 = cp * KR_SIDE_CRCS_PER_PAGE;
		uint64_t n = r->sc.npages - p0 < KR_SIDE_CRCS_PER_PAGE ? r->sc.npages - p0 : KR_SIDE_CRCS_PER_PAGE;
		fprintf(stderr, "keratin: %s: checksums of pages %" PRIu64 "..%" PRIu64
			" are damaged in the sidecar; rebuilt from the data, unverified\n",
			r->path, p0, p0 + n - 1);
		rep->pages_unverifiable += n;
		/* Hot (durably) before the rebuild below rewrites their checksums. */
		for (uint64_t g = p0 / r->sc.G; !ro && g <= (p0 + n - 1) / r->sc.G; g++) {
			int rc = kr_side_set_hot(&r->sc, g, true, false);
			if (rc != KR_OK)
				return rc;
		}
	}
	int rc = KR_OK;
	for (uint64_t g = 0; g < r->sc.nsegs && rc == KR_OK; g++) {
		report_progress(r, g, r->sc.nsegs);
		uint64_t n = kr_side_seg_pages(&r->sc, g);
		if (!kr_side_hot(&r->sc, g)) {
			rc = check_range(r, g * r->sc.G, n, ro ? 0 : KR_REGION_CHECK_REPAIR, rep);
			continue;
		}
		if (ro) {
			rep->pages_unverifiable += n;
			continue;
		}
		uint64_t changed = rebuild_segment(r, g);
		r->st.recovered_pages += n;
		if (!fresh)
			r->st.stale_at_recovery += changed;
		rc = kr_pm_fence(&r->sc.pm);
		/* Cold again only if no store unsealed it meanwhile (online) and the session
		 * seals at all; a level-1 session keeps everything hot. */
		if (rc == KR_OK && !level1(r) && region_lock(r)) {
			if (!tracking(r) || atomic_load(&r->sealed[g]))
				rc = kr_side_set_hot(&r->sc, g, false, false);
			region_unlock(r);
		}
	}
	report_progress(r, r->sc.nsegs, r->sc.nsegs);
	if (rc == KR_OK && rep->pages_bad > rep->pages_repaired)
		rc = kr_err_set(KR_E_CORRUPT_REGION, "%s: %" PRIu64 " page(s) fail their checksum and "
				"cannot be repaired (first: page %" PRIu64 ")", r->path,
				rep->pages_bad - rep->pages_repaired, rep->first_bad_page);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Attach and close
 * ------------------------------------------------------------------------------------- */
/* [base, base + len) must be read/write MAP_SHARED mappings of (dev, ino) from offset 0. */
static int check_mapping(uintptr_t base, size_t len, dev_t dev, ino_t ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return kr_err_errno(KR_E_IO, "region: cannot read /proc/self/maps");
	uintptr_t covered = base, end = base + len;
	char line[4096];
	int rc = KR_OK;
	while (rc == KR_OK && covered < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off, maj, min, inode;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s %lx %lx:%lx %lu", &lo, &hi, perms, &off, &maj, &min,
			   &inode) != 7 || hi <= covered || lo >= end)
			continue;
		if (lo > covered)
			rc = kr_err_set(KR_E_MISUSE_ARG, "region: the range has an unmapped hole");
		else if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 's')
			rc = kr_err_set(KR_E_MISUSE_ARG, "region: the range is not a read/write "
					"MAP_SHARED mapping (%s)", perms);
		else if (inode != ino || makedev(maj, min) != dev || off + (covered - lo) != covered - base)
			rc = kr_err_set(KR_E_MISUSE_ARG, "region: the range is not a mapping of this "
					"file from its start");
		covered = hi;
	}
	fclose(f);
	if (rc == KR_OK && covered < end)
		rc = kr_err_set(KR_E_MISUSE_ARG, "region: the range is not fully mapped");
	return rc;
}

static int opts_check(const struct kr_region_opts *o)
{
	unsigned known = KR_REGION_MPROTECT | KR_REGION_NO_FALLBACK | KR_REGION_MANUAL |
			 KR_REGION_NO_SEAL | KR_REGION_FORCE_PMEM | KR_REGION_OFFLINE |
			 KR_REGION_READONLY | KR_REGION_NO_CREATE;
	if (o->flags & ~known)
		return kr_err_set(KR_E_MISUSE_ARG, "region: unknown flags %#x", o->flags & ~known);
	if ((o->flags & KR_REGION_READONLY) && !(o->flags & KR_REGION_OFFLINE))
		return kr_err_set(KR_E_MISUSE_ARG, "region: READONLY needs OFFLINE");
	if (o->period_ms > 3600000u)
		return kr_err_set(KR_E_MISUSE_ARG, "region: period over an hour");
	if (o->stripe_pages && (o->stripe_pages < 2 || o->stripe_pages > KR_SIDE_MAX_STRIPE))
		return kr_err_set(KR_E_MISUSE_ARG, "region: stripe_pages must be 2..%u",
				  KR_SIDE_MAX_STRIPE);
	if (o->batch_pages > (1u << 20))
		return kr_err_set(KR_E_MISUSE_ARG, "region: batch_pages over 2^20");
	uint32_t w = o->stripe_pages ? o->stripe_pages : KR_SIDE_DEFAULT_STRIPE;
	if (o->segment_pages && o->segment_pages % w)
		return kr_err_set(KR_E_MISUSE_ARG, "region: segment_pages must be a multiple of "
				  "stripe_pages (%u)", w);
	return KR_OK;
}

/* Opens or creates the sidecar and checks that it describes this file. */
static int sidecar_open(struct kr_region *r, const struct kr_region_opts *o, const struct stat *st,
			bool *fresh)
{
	struct kr_side_sb sb;
	bool ro = r->flags & KR_REGION_READONLY;
	int rc = kr_side_sb_new(&sb, (uint64_t)st->st_size, (uint64_t)st->st_dev, (uint64_t)st->st_ino,
				o->stripe_pages, o->batch_pages, o->segment_pages);
	if (rc == KR_OK)
		rc = kr_side_open(&r->sc, r->side_path, ro, !(r->flags & (KR_REGION_NO_CREATE | KR_REGION_READONLY)),
				  r->flags & KR_REGION_FORCE_PMEM, &sb, fresh);
	if (rc != KR_OK || *fresh)
		return rc;
	const struct kr_side_sb *cur = &r->sc.sb;
	if (cur->data_size != (uint64_t)st->st_size)
		return kr_err_set(KR_E_FORMAT_MISMATCH, "%s is %lld bytes but its sidecar describes "
				  "%" PRIu64 " bytes: the file changed size (delete the sidecar to "
				  "protect it anew)", r->path, (long long)st->st_size, cur->data_size);
	if (cur->data_ino != (uint64_t)st->st_ino || cur->data_dev != (uint64_t)st->st_dev)
		return kr_err_set(KR_E_FORMAT_MISMATCH, "sidecar %s was made for another file "
				  "(inode %" PRIu64 ", %s is inode %llu)", r->side_path,
				  cur->data_ino, r->path, (unsigned long long)st->st_ino);
	if ((o->stripe_pages && o->stripe_pages != cur->stripe_pages) ||
	    (o->segment_pages && o->segment_pages != cur->segment_pages) ||
	    (o->batch_pages && o->batch_pages != cur->batch_pages))
		return kr_err_set(KR_E_FORMAT_MISMATCH, "sidecar %s has another geometry (stripe %u, "
				  "segment %u, batch %u pages)", r->side_path, cur->stripe_pages,
				  cur->segment_pages, cur->batch_pages);
	return KR_OK;
}

/* A CLEAN sidecar's meta-CRCs must verify (reading the CRC array once: 1/1024 of the
 * data); any mismatch sends it through recovery, which says what it rebuilds. */
static bool clean_damaged(struct kr_region *r)
{
	bool bad = kr_side_meta_crc(&r->sc) != r->sc.sb.meta_crc;
	for (uint64_t cp = 0; !bad && cp < r->sc.ncrcpages; cp++)
		bad = !kr_side_meta_ok(&r->sc, cp);
	if (bad)
		fprintf(stderr, "keratin: %s: sidecar checksum area damaged; verifying\n", r->side_path);
	return bad;
}

static void *region_thread(void *arg);

static void region_free(struct kr_region *r)
{
	kr_side_close(&r->sc);
	if (r->own_map && r->base)
		munmap(r->base, r->len);
	if (r->fd >= 0)
		close(r->fd);
	free((void *)r->sealed);
	free(r->idle);
	free(r->seg_written);
	free(r->rbuf);
	free(r->tbuf);
	free(r->pages);
	free(r->wbits);
	free(r->path);
	free(r->side_path);
	pthread_mutex_destroy(&r->work);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
}

/* Undoes a partly done attach. */
static void region_abort(struct kr_region *r)
{
	if (tracking(r))
		kr_track_detach(&r->track);
	if (r->watched) {
		if (r->seal && !r->own_map)
			mprotect(r->base, r->len, PROT_READ | PROT_WRITE);
		kr_media_unwatch(r->base);
	}
	region_free(r);
}

/* A handle with its options and paths, nothing opened yet. */
static struct kr_region *region_new(const char *path, const struct kr_region_opts *o)
{
	struct kr_region *r = kr_calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = -1;
	r->sc.pm.fd = -1;
	r->flags = o->flags;
	r->period_ms = o->period_ms ? o->period_ms : 1000;
	r->scrub_kib = o->scrub_kib_per_s;
	r->progress = o->progress;
	r->progress_ctx = o->progress_ctx;
	r->pid = getpid();
	atomic_flag_clear(&r->lock);
	pthread_mutex_init(&r->work, NULL);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	r->track.mode = KR_TRACK_OFF;
	r->path = kr_strdup(path);
	size_t sl = strlen(path) + 5;
	r->side_path = o->sidecar ? kr_strdup(o->sidecar) : kr_malloc(sl);
	if (!r->path || !r->side_path) {
		region_free(r);
		return NULL;
	}
	if (!o->sidecar)
		snprintf(r->side_path, sl, "%s.krs", path);
	return r;
}

/* Opens the data file and maps it (own) or checks the caller's mapping (attach). */
static int open_data(struct kr_region *r, void *base, size_t len, bool own, struct stat *st)
{
	bool offline = r->flags & KR_REGION_OFFLINE, ro = r->flags & KR_REGION_READONLY;
	/* Offline repairs write through the file; only a read-only check opens it read-only. */
	r->fd = open(r->path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, st) != 0)
		return kr_err_errno(KR_E_IO_OPEN, "region: cannot open %s", r->path);
	if (!S_ISREG(st->st_mode) || st->st_size <= 0 || st->st_size % P)
		return kr_err_set(KR_E_MISUSE_ARG, "region: %s is not a regular file whose size is a "
				  "nonzero multiple of 4096 (%lld bytes)", r->path, (long long)st->st_size);
	r->len = (size_t)st->st_size;
	if (!own && !offline) {
		int rc = KR_OK;
		if (!base || len != r->len ||
		    (rc = check_mapping((uintptr_t)base, len, st->st_dev, st->st_ino)) != KR_OK)
			return rc != KR_OK ? rc : kr_err_set(KR_E_MISUSE_ARG, "region: attach needs the "
							     "mapping of the whole file (%zu bytes, got %zu)",
							     r->len, len);
		r->base = base;
		return KR_OK;
	}
	void *m = kr_mmap(NULL, r->len, offline ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (m == MAP_FAILED)
		return kr_err_errno(KR_E_IO_MAP, "region: mmap %s", r->path);
	r->base = m;
	r->own_map = true;
	return KR_OK;
}

/* The per-segment state and the work buffers, once the geometry is known. */
static int alloc_state(struct kr_region *r)
{
	size_t batch = r->sc.B > r->sc.G ? r->sc.B : r->sc.G;
	r->sealed = kr_calloc(r->sc.nsegs, 1);
	r->idle = kr_calloc(r->sc.nsegs, 1);
	r->seg_written = kr_calloc(r->sc.nsegs, 1);
	r->pages = kr_malloc(batch * sizeof(uint64_t));
	r->wbits = kr_malloc((r->sc.G + 63) / 64 * 8);
	r->rbuf = aligned_alloc(64, P);
	r->tbuf = aligned_alloc(64, P);
	if (!r->sealed || !r->idle || !r->seg_written || !r->pages || !r->wbits || !r->rbuf || !r->tbuf)
		return kr_err_set(KR_E_NOMEM, "region: no memory");
	return KR_OK;
}

/* The session starts: ACTIVE, durably, before anything can make redundancy stale. */
static int session_begin(struct kr_region *r)
{
	if (r->flags & KR_REGION_READONLY)
		return KR_OK;
	r->sc.sb.state = KR_SIDE_ACTIVE;
	r->sc.sb.epoch++;
	if (!(r->flags & KR_REGION_OFFLINE)) /* tools' offline sessions keep the program's setting */
		r->sc.sb.flags = r->seal ? KR_SIDE_F_SEAL : 0;
	return kr_side_sb_write(&r->sc);
}

/* Online: the fault handler, the tracker (userfaultfd, or mprotect where it is missing),
 * and every segment sealed. */
static int arm(struct kr_region *r)
{
	int rc = kr_media_watch(r->base, r->len, region_fault, r);
	if (rc != KR_OK)
		return rc;
	r->watched = true;
	unsigned tf = (r->flags & KR_REGION_MPROTECT) ? KR_TRACK_FLAG_MPROTECT : 0;
	rc = kr_track_attach(&r->track, r->base, r->len, tf);
	if (rc == KR_E_IO && !tf && !(r->flags & KR_REGION_NO_FALLBACK)) {
		fprintf(stderr, "keratin: %s; tracking %s with mprotect instead\n", kr_errmsg(), r->path);
		rc = kr_track_attach(&r->track, r->base, r->len, KR_TRACK_FLAG_MPROTECT);
	}
	if (rc != KR_OK || !r->seal)
		return rc;
	for (uint64_t g = 0; g < r->sc.nsegs; g++)
		atomic_store(&r->sealed[g], 1);
	if (mprotect(r->base, r->len, PROT_READ) != 0)
		return kr_err_errno(KR_E_IO, "region: mprotect (seal) failed");
	/* Stores between arming and sealing were tracked: rebuild, not judge, their segments
	 * (only the caller's other threads can have made any). */
	for (uint64_t g = 0; rc == KR_OK && g < r->sc.nsegs; g++) {
		size_t n;
		rc = kr_track_harvest_span(&r->track, g * r->sc.G, kr_side_seg_pages(&r->sc, g), r->pages, &n);
		if (rc == KR_OK && n)
			rc = kr_side_set_hot(&r->sc, g, true, false);
	}
	return rc;
}

static int region_setup(const char *path, void *base, size_t len, const struct kr_region_opts *opts,
			kr_region **out, bool own)
{
	static const struct kr_region_opts defaults = KR_REGION_OPTS_INIT;
	const struct kr_region_opts *o = opts ? opts : &defaults;
	if (!path || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "region: NULL path or output");
	*out = NULL;
	if (kr_opts_size_check(o->struct_size, sizeof(*o), "kr_region_opts"))
		return KR_E_MISUSE_ARG;
	int rc = opts_check(o);
	if (rc != KR_OK)
		return rc;
	struct kr_region *r = region_new(path, o);
	if (!r)
		return kr_err_set(KR_E_NOMEM, "region: no memory");
	bool offline = r->flags & KR_REGION_OFFLINE, fresh = false;
	r->seal = !offline && !(r->flags & KR_REGION_NO_SEAL);
	struct stat st;
	if ((rc = open_data(r, base, len, own, &st)) != KR_OK ||
	    (rc = sidecar_open(r, o, &st, &fresh)) != KR_OK || (rc = alloc_state(r)) != KR_OK) {
		/* A sidecar this open created but did not finish (no valid superblock yet, or
		 * no state to run it) goes: left behind, it would fail every later open as
		 * "not a keratin sidecar". (We hold its lock, and it was empty when taken.) */
		if (fresh)
			unlink(r->side_path);
		region_free(r);
		return rc;
	}
	bool was_clean = !fresh && r->sc.sb.state == KR_SIDE_CLEAN;
	if ((rc = session_begin(r)) != KR_OK || (!offline && (rc = arm(r)) != KR_OK)) {
		region_abort(r);
		return rc;
	}

	struct kr_region_report rep = {0};
	if (!was_clean || (!(r->flags & KR_REGION_READONLY) && clean_damaged(r)))
		rc = recover(r, fresh, &rep);
	if (rc != KR_OK && rc != KR_E_CORRUPT_REGION) {
		region_abort(r);
		return rc;
	}
	if (r->st.stale_at_recovery)
		fprintf(stderr, "keratin: %s was not closed cleanly: %" PRIu64 " page(s) in segments "
			"that were hot at the crash changed since their last checksum (late writes "
			"or damage, which cannot be told apart); their redundancy was rebuilt\n",
			path, r->st.stale_at_recovery);
	int corrupt = rc;
	/* Everything hot for the whole session, durably before the application writes: a
	 * page written in a segment the media still calls cold would read as damage after a
	 * crash. */
	if (level1(r)) {
		rc = KR_OK;
		for (uint64_t g = 0; g < r->sc.nsegs && rc == KR_OK; g++)
			rc = kr_side_set_hot(&r->sc, g, true, false);
		if (rc != KR_OK) {
			region_abort(r);
			return rc;
		}
	}
	r->minflt_mark = minor_faults();
	if (!offline) {
		list_add(r);
		if (!(r->flags & KR_REGION_MANUAL)) {
			r->thread_on = pthread_create(&r->thread, NULL, region_thread, r) == 0;
			if (!r->thread_on) {
				list_remove(r);
				region_abort(r);
				return kr_err_set(KR_E_NOMEM, "region: cannot start the background thread");
			}
		}
	}
	*out = r;
	return corrupt == KR_OK ? KR_OK : kr_err_set(corrupt, "%s: damaged pages remain after "
						      "recovery (kr_region_check lists them)", path);
}

static void *region_thread(void *arg)
{
	struct kr_region *r = arg;
	uint64_t next = now_ns(CLOCK_MONOTONIC) + (uint64_t)r->period_ms * 1000000ull;
	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
		if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&r->mu);
		pthread_mutex_lock(&r->work);
		if (!r->failed && region_pass(r, true) != KR_OK && !r->failed)
			fprintf(stderr, "keratin: background pass of %s failed: %s\n", r->path, kr_errmsg());
		pthread_mutex_unlock(&r->work);
		/* Start-to-start: a pass that overran its period starts the next one at once. */
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		next += (uint64_t)r->period_ms * 1000000ull;
		if (next < now)
			next = now;
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int kr_region_open(const char *path, const struct kr_region_opts *opts, kr_region **region,
		   void **base, size_t *len)
{
	int rc = region_setup(path, NULL, 0, opts, region, true);
	if (region && *region) {
		if (base)
			*base = (*region)->base;
		if (len)
			*len = (*region)->len;
	}
	return rc;
}

int kr_region_attach(const char *path, void *base, size_t len, const struct kr_region_opts *opts,
		     kr_region **region)
{
	if (opts && (opts->flags & KR_REGION_OFFLINE))
		return kr_err_set(KR_E_MISUSE_ARG, "region: OFFLINE is for kr_region_open");
	return region_setup(path, base, len, opts, region, false);
}

int kr_region_close(kr_region *r)
{
	if (!r)
		return kr_err_set(KR_E_MISUSE_ARG, "region: NULL region");
	if (getpid() != r->pid) { /* a forked child: the parent owns the sidecar */
		if (r->own_map)
			munmap(r->base, r->len);
		r->base = NULL;
		free(r);
		return KR_OK;
	}
	if (r->thread_on) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thread, NULL);
	}
	int rc = KR_OK;
	bool offline = !tracking(r);
	pthread_mutex_lock(&r->work);
	if (!offline) {
		/* Late stores now fault (and stop with a message) instead of going stale. */
		atomic_store(&r->closing, 1);
		if (region_lock(r)) {
			mprotect(r->base, r->len, PROT_READ);
			region_unlock(r);
		}
		if (!r->failed) /* no sealing: every hot bit is cleared below anyway */
			rc = region_pass(r, false);
		if (rc == KR_OK && r->sc.pm.mode == KR_MODE_PAGECACHE && fdatasync(r->fd) != 0)
			rc = kr_err_errno(KR_E_IO_SYNC, "region: fdatasync %s", r->path);
	}
	if (rc == KR_OK && !r->failed && !(r->flags & KR_REGION_READONLY)) {
		for (uint64_t g = 0; g < r->sc.nsegs && rc == KR_OK; g++)
			if (kr_side_hot(&r->sc, g))
				rc = kr_side_set_hot(&r->sc, g, false, false);
		if (rc == KR_OK) {
			r->sc.sb.meta_crc = kr_side_meta_crc(&r->sc);
			r->sc.sb.state = KR_SIDE_CLEAN;
			rc = kr_side_sb_write(&r->sc);
		}
	}
	pthread_mutex_unlock(&r->work);
	if (!offline) {
		list_remove(r);
		kr_track_detach(&r->track);
		if (!r->own_map)
			mprotect(r->base, r->len, PROT_READ | PROT_WRITE);
		kr_media_unwatch(r->base);
	}
	if (r->failed && rc == KR_OK)
		rc = kr_err_set(r->failed, "region: %s was stopped (%s); sidecar left ACTIVE", r->path,
				kr_strerror(r->failed));
	region_free(r);
	return rc;
}

int kr_region_sync(kr_region *r)
{
	if (!r || !tracking(r))
		return kr_err_set(KR_E_MISUSE_ARG, "region: sync needs an attached region");
	pthread_mutex_lock(&r->work);
	int rc = region_pass(r, true);
	if (rc == KR_OK)
		rc = kr_pm_fence(&r->sc.pm);
	pthread_mutex_unlock(&r->work);
	return rc;
}

int kr_region_check(kr_region *r, uint64_t first, uint64_t count, unsigned flags,
		    struct kr_region_report *rep)
{
	struct kr_region_report local;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (!r || first >= r->sc.npages || first + count > r->sc.npages ||
	    (flags & ~(KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY)))
		return kr_err_set(KR_E_MISUSE_ARG, "region: bad check range or flags");
	if ((flags & KR_REGION_CHECK_REPAIR) && (r->flags & KR_REGION_READONLY))
		return kr_err_set(KR_E_MISUSE_ARG, "region: opened READONLY, cannot repair");
	if (count == 0)
		count = r->sc.npages - first;
	pthread_mutex_lock(&r->work);
	int rc = KR_OK;
	/* In slices, for progress reports. */
	for (uint64_t at = first; at < first + count && rc == KR_OK;) {
		report_progress(r, at - first, count);
		uint64_t n = first + count - at < 4096 ? first + count - at : 4096;
		rc = check_range(r, at, n, flags, rep);
		at += n;
	}
	report_progress(r, count, count);
	pthread_mutex_unlock(&r->work);
	if (rc == KR_OK && rep->first_bad_kind != KR_REGION_BAD_NONE)
		rc = kr_err_set(KR_E_CORRUPT_REGION, "%s: damage not repaired: %" PRIu64 " data "
				"page(s), %" PRIu64 " parity page(s), %" PRIu64 " checksum page(s)",
				r->path, rep->pages_bad - rep->pages_repaired,
				rep->parity_bad - rep->parity_rebuilt,
				rep->crcs_rebuilt ? 0 : rep->crc_pages_bad);
	return rc;
}

int kr_region_stats(kr_region *r, struct kr_region_stats *st)
{
	if (!r || !st)
		return kr_err_set(KR_E_MISUSE_ARG, "region: NULL argument");
	pthread_mutex_lock(&r->work);
	*st = r->st;
	st->unseals = atomic_load(&r->unseals);
	st->repaired_pages += atomic_load(&r->poison_repairs);
	st->npages = r->sc.npages;
	st->nstripes = r->sc.nstripes;
	st->nsegments = r->sc.nsegs;
	st->stripe_pages = r->sc.W;
	st->segment_pages = r->sc.G;
	st->batch_pages = r->sc.B;
	st->period_ms = r->period_ms;
	st->tracking = r->track.mode;
	st->failed = r->failed;
	st->hot_segments = 0;
	for (uint64_t g = 0; g < r->sc.nsegs; g++)
		st->hot_segments += kr_side_hot(&r->sc, g);
	st->window_pages = 0;
	for (uint64_t at = 0; tracking(r) && at < r->sc.npages; at += r->sc.G) {
		uint64_t n = r->sc.npages - at < r->sc.G ? r->sc.npages - at : r->sc.G;
		if (window_bits(r, at, n, r->wbits) != KR_OK)
			break;
		for (uint64_t w = 0; w < (n + 63) / 64; w++)
			st->window_pages += (uint64_t)__builtin_popcountll(r->wbits[w]);
	}
	pthread_mutex_unlock(&r->work);
	return KR_OK;
}

int kr_region_inject_poison(kr_region *r, uint64_t off)
{
	if (!r || off >= r->len || !tracking(r))
		return kr_err_set(KR_E_MISUSE_ARG, "region: poison needs an attached region and an "
				  "offset inside it");
	uint64_t p = off / P;
	int slot = kr_media_claim_slot(r->poison, MAX_POISON, p + 1);
	if (slot < 0)
		return kr_err_set(KR_E_MISUSE_STATE, "region: too many poisoned pages at once");
	/* Under the lock, so that a fault in between waits for the loss to be complete. */
	if (!region_lock(r)) {
		atomic_store(&r->poison[slot], 0);
		return kr_err_set(KR_E_MISUSE_STATE, "region: busy");
	}
	bool hidden;
	int rc = kr_media_lose_page(r->fd, r->base + p * P, p * P, &hidden);
	region_unlock(r);
	if (!hidden)
		atomic_store(&r->poison[slot], 0);
	return rc;
}

int kr_region_info(const char *path, const char *sidecar, struct kr_region_info *info)
{
	if (!path || !info)
		return kr_err_set(KR_E_MISUSE_ARG, "region: NULL argument");
	memset(info, 0, sizeof(*info));
	char buf[4096];
	if (!sidecar) {
		snprintf(buf, sizeof(buf), "%s.krs", path);
		sidecar = buf;
	}
	int fd = open(sidecar, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kr_err_errno(KR_E_IO_OPEN, "region: no sidecar %s", sidecar);
	struct stat st;
	int rc = KR_OK;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) != 0 || st.st_size < 3 * P)
		rc = kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin sidecar", sidecar);
	else if ((m = kr_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
		rc = kr_err_errno(KR_E_IO_MAP, "region: mmap %s", sidecar);
	struct kr_sidecar sc = {0};
	if (rc == KR_OK && (rc = kr_side_load(&sc, m, (size_t)st.st_size, sidecar)) == KR_OK) {
		info->state = sc.sb.state;
		info->sealed = !!(sc.sb.flags & KR_SIDE_F_SEAL);
		info->data_size = sc.sb.data_size;
		info->npages = sc.npages;
		info->nstripes = sc.nstripes;
		info->nsegments = sc.nsegs;
		info->epoch = sc.sb.epoch;
		info->stripe_pages = sc.W;
		info->segment_pages = sc.G;
		info->batch_pages = sc.B;
		for (uint64_t g = 0; g < sc.nsegs; g++)
			if (kr_side_hot(&sc, g))
				info->hot_segments++;
			else
				info->covered_pages += kr_side_seg_pages(&sc, g);
		if (sc.sb.state == KR_SIDE_CLEAN)
			info->covered_pages = sc.npages;
		const struct kr_side_passrec *pr = sc.passrec;
		if (pr->crc == kr_crc32c(pr, offsetof(struct kr_side_passrec, crc))) {
			info->passes = pr->passes;
			info->last_pass_end_ns = pr->pass_end_ns;
			info->last_pass_ns = pr->pass_ns;
			info->last_dirty_pages = pr->dirty_pages;
			info->pid = (int32_t)pr->pid;
			info->period_ms = pr->period_ms;
		}
		info->attached = flock(fd, LOCK_SH | LOCK_NB) != 0;
	}
	if (m != MAP_FAILED)
		munmap(m, (size_t)st.st_size);
	close(fd);
	return rc;
}
