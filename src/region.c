/*
 * region.c - protected regions: lazy redundancy (Vilamb) for a file that the application
 * maps and writes with plain stores.
 *
 * The job
 *
 *   Keep a CRC-32C of every 4 KiB page and an XOR parity page per stripe of W consecutive
 *   pages, in a sidecar file (layout.h, "Sidecar"), up to date without touching the store
 *   path: the tracker (track.c) reports which pages were written, and a background pass
 *   recomputes redundancy for those once per period (Vilamb's Algorithm 1 with one harvest
 *   call per batch). Damage found in a page outside the window is repaired from its stripe.
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
#include "layout.h"
#include "media.h"
#include "pmem.h"
#include "region.h"
#include "track.h"

#define P KR_PAGE_SIZE
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

	/* The sidecar. */
	struct kr_pm side;
	struct kr_side_sb sb; /* the current superblock */
	int sb_copy;          /* which copy holds it */
	uint32_t *crcs, *meta;
	uint8_t *parity;
	uint64_t *intent[2];
	struct kr_side_shadow *shadow;
	struct kr_side_passrec *passrec;
	uint64_t npages, nstripes, nsegs, ncrcpages;
	uint32_t W, G, B;
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

static uint64_t stripe_first(const struct kr_region *r, uint64_t s) { return s * r->W; }
static uint64_t stripe_count(const struct kr_region *r, uint64_t s)
{
	uint64_t first = s * r->W;
	return r->npages - first < r->W ? r->npages - first : r->W;
}
static uint64_t seg_count(const struct kr_region *r, uint64_t g)
{
	uint64_t first = g * r->G;
	return r->npages - first < r->G ? r->npages - first : r->G;
}

/* Atomic loads: the fault handler sets bits concurrently. */
static bool is_hot(const struct kr_region *r, uint64_t g)
{
	uint64_t a = __atomic_load_n(&r->intent[0][g / 64], __ATOMIC_RELAXED);
	uint64_t b = __atomic_load_n(&r->intent[1][g / 64], __ATOMIC_RELAXED);
	return ((a | b) >> (g % 64)) & 1;
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
 * Geometry and the superblock
 * ------------------------------------------------------------------------------------- */
static uint64_t pages_for(uint64_t bytes) { return (bytes + P - 1) / P; }

/* Fills the derived fields of sb from data_size, stripe, batch and segment pages. */
static int geometry(struct kr_side_sb *sb)
{
	if (sb->page_size != P || sb->stripe_pages < 2 || sb->stripe_pages > KR_SIDE_MAX_STRIPE ||
	    sb->batch_pages == 0 || sb->batch_pages > (1u << 20) || sb->segment_pages == 0 ||
	    sb->segment_pages % sb->stripe_pages || sb->data_size == 0 || sb->data_size % P)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "sidecar geometry is inconsistent "
				  "(stripe %u, batch %u, segment %u pages, file %" PRIu64 " bytes)",
				  sb->stripe_pages, sb->batch_pages, sb->segment_pages, sb->data_size);
	uint64_t n = sb->data_size / P;
	sb->npages = n;
	sb->nstripes = (n + sb->stripe_pages - 1) / sb->stripe_pages;
	sb->nsegments = (n + sb->segment_pages - 1) / sb->segment_pages;
	uint64_t intent_pages = pages_for((sb->nsegments + 7) / 8);
	uint64_t crc_pages = pages_for(n * 4);
	sb->intent_off = 3 * P;
	sb->crc_off = sb->intent_off + 2 * intent_pages * P;
	sb->meta_off = sb->crc_off + crc_pages * P;
	sb->parity_off = sb->meta_off + pages_for(crc_pages * 4) * P;
	sb->side_size = sb->parity_off + sb->nstripes * P;
	return KR_OK;
}

static uint32_t sb_crc(const struct kr_side_sb *sb)
{
	return kr_crc32c(sb, offsetof(struct kr_side_sb, crc));
}

static bool sb_valid(const struct kr_side_sb *sb)
{
	if (sb->magic != KR_SIDE_MAGIC || sb->crc != sb_crc(sb) || sb->sb_size != sizeof(*sb))
		return false;
	for (size_t i = 0; i < sizeof(sb->reserved); i++)
		if (sb->reserved[i])
			return false;
	return true;
}

/* Writes the next superblock into the other copy and persists it; it is current only
 * once durable, so a crash midway leaves the previous one in force. */
static int sb_write(struct kr_region *r)
{
	r->sb.seq++;
	r->sb.crc = sb_crc(&r->sb);
	int copy = r->sb_copy ^ 1;
	void *dst = r->side.base + (size_t)copy * P;
	kr_pm_copy(&r->side, dst, &r->sb, sizeof(r->sb));
	int rc = kr_pm_persist(&r->side, dst, sizeof(r->sb));
	if (rc == KR_OK)
		r->sb_copy = copy;
	return rc;
}

/* Reads the current superblock of a mapped sidecar. */
static int sb_read(const uint8_t *side, size_t side_len, const char *path, struct kr_side_sb *out,
		   int *copy)
{
	const struct kr_side_sb *a = (const void *)side, *b = (const void *)(side + P);
	bool va = side_len >= 2 * P && sb_valid(a), vb = side_len >= 2 * P && sb_valid(b);
	if (!va && !vb) {
		bool magic = side_len >= 2 * P && (a->magic == KR_SIDE_MAGIC || b->magic == KR_SIDE_MAGIC);
		return magic ? kr_err_set(KR_E_CORRUPT_HEADER, "%s: both sidecar superblocks are damaged", path)
			     : kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin sidecar", path);
	}
	*copy = va && (!vb || a->seq >= b->seq) ? 0 : 1;
	*out = *copy ? *b : *a;
	if (out->version != KR_SIDE_VERSION || out->csum_kind != KR_SIDE_CSUM_CRC32C)
		return kr_err_set(KR_E_FORMAT_VERSION, "%s: sidecar version %u (checksum %u) unknown",
				  path, out->version, out->csum_kind);
	struct kr_side_sb g = *out;
	int rc = geometry(&g);
	if (rc != KR_OK)
		return rc;
	if (memcmp(&g, out, sizeof(g)) != 0 || (out->state != KR_SIDE_CLEAN && out->state != KR_SIDE_ACTIVE))
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: sidecar superblock fields disagree", path);
	if (side_len < out->side_size)
		return kr_err_set(KR_E_FORMAT_TRUNCATED, "%s: sidecar is %zu bytes, needs %" PRIu64,
				  path, side_len, out->side_size);
	return KR_OK;
}

static void side_pointers(struct kr_region *r, uint8_t *side)
{
	const struct kr_side_sb *sb = &r->sb;
	uint64_t intent_bytes = (sb->crc_off - sb->intent_off) / 2;
	r->shadow = (void *)(side + 2 * P);
	r->passrec = (void *)(side + 2 * P + sizeof(struct kr_side_shadow));
	r->intent[0] = (void *)(side + sb->intent_off);
	r->intent[1] = (void *)(side + sb->intent_off + intent_bytes);
	r->crcs = (void *)(side + sb->crc_off);
	r->meta = (void *)(side + sb->meta_off);
	r->parity = side + sb->parity_off;
	r->npages = sb->npages;
	r->nstripes = sb->nstripes;
	r->nsegs = sb->nsegments;
	r->ncrcpages = pages_for(sb->npages * 4);
	r->W = sb->stripe_pages;
	r->G = sb->segment_pages;
	r->B = sb->batch_pages;
}

/* ---------------------------------------------------------------------------------------
 * Redundancy updates (sidecar writes, all through pmem.c)
 * ------------------------------------------------------------------------------------- */
static const uint8_t zero_page[P] __attribute__((aligned(64)));

static void store_u32(struct kr_region *r, uint32_t *dst, uint32_t v)
{
	kr_pm_copy(&r->side, dst, &v, sizeof(v));
	kr_pm_flush(&r->side, dst, sizeof(v));
}

static void parity_compute(struct kr_region *r, uint64_t s)
{
	void *v[KR_SIDE_MAX_STRIPE + 1];
	uint64_t first = stripe_first(r, s), n = stripe_count(r, s);
	for (uint64_t i = 0; i < r->W; i++)
		v[i] = i < n ? (void *)(r->base + (first + i) * P) : (void *)zero_page;
	v[r->W] = r->parity + s * P;
	kr_pm_xor_gen(&r->side, (int)r->W + 1, P, v);
	kr_pm_flush(&r->side, v[r->W], P);
}

static void meta_compute(struct kr_region *r, uint64_t cp)
{
	store_u32(r, &r->meta[cp], kr_crc32c((const uint8_t *)r->crcs + cp * P, P));
}

/* Recomputes the CRCs of pages[0..n) (ascending), the parity of their stripes and the meta
 * CRCs of their CRC pages; flushed, not fenced. Returns how many CRCs changed. */
static uint64_t update_pages(struct kr_region *r, const uint64_t *pages, size_t n)
{
	uint64_t changed = 0, last_stripe = UINT64_MAX, last_cp = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t p = pages[i];
		uint32_t c = kr_crc32c(r->base + p * P, P);
		if (c != r->crcs[p]) {
			store_u32(r, &r->crcs[p], c);
			changed++;
		}
		if (r->seg_written)
			r->seg_written[p / r->G] = 1;
	}
	hook(KR_RPOINT_CRCS, pages[0]);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = pages[i] / r->W;
		if (s != last_stripe) {
			parity_compute(r, s);
			hook(KR_RPOINT_PARITY, s * r->W);
		}
		last_stripe = s;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t cp = pages[i] / KR_SIDE_CRCS_PER_PAGE;
		if (cp != last_cp)
			meta_compute(r, cp);
		last_cp = cp;
	}
	return changed;
}

static void shadow_set(struct kr_region *r, uint64_t seq, uint64_t lo, uint64_t hi)
{
	struct kr_side_shadow sh = {.seq = seq, .lo = lo, .hi = hi};
	sh.crc = kr_crc32c(&sh, offsetof(struct kr_side_shadow, crc));
	kr_pm_copy(&r->side, r->shadow, &sh, sizeof(sh));
	kr_pm_flush(&r->side, r->shadow, sizeof(sh));
}

/* One batch: pages[0..n) were just harvested. Steps 3-5 of the pass. */
static int apply_batch(struct kr_region *r, const uint64_t *pages, size_t n)
{
	/* The shadow is for status and diagnosis (recover() explains why recovery needs no
	 * more than the hot bits), so it shares the batch's one fence. */
	shadow_set(r, atomic_load(&r->seq), pages[0], pages[n - 1] + 1);
	update_pages(r, pages, n);
	return kr_pm_fence(&r->side);
}

static void batch_begin(struct kr_region *r) { atomic_fetch_add(&r->seq, 1); }
static void batch_end(struct kr_region *r)
{
	uint64_t seq = atomic_fetch_add(&r->seq, 1) + 1;
	shadow_set(r, seq, 0, 0); /* durable with the next fence; a stale odd one only makes
				   * recovery rebuild pages it would rebuild anyway */
}

static int set_hot_bits(struct kr_region *r, uint64_t g, bool hot, bool from_handler)
{
	uint64_t bit = 1ull << (g % 64);
	for (int c = 0; c < 2; c++) {
		uint64_t *w = &r->intent[c][g / 64];
		if (hot)
			kr_pm_or64(&r->side, w, bit);
		else
			kr_pm_andn64(&r->side, w, bit);
	}
	if (from_handler) {
		int rc = kr_pm_persist_now(&r->side, &r->intent[0][g / 64], 8);
		int rc2 = kr_pm_persist_now(&r->side, &r->intent[1][g / 64], 8);
		return rc != KR_OK ? rc : rc2;
	}
	kr_pm_flush(&r->side, &r->intent[0][g / 64], 8);
	return kr_pm_persist(&r->side, &r->intent[1][g / 64], 8);
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
	uint64_t s = p / r->W, first = stripe_first(r, s), n = stripe_count(r, s);
	uint64_t bits[(KR_SIDE_MAX_STRIPE + 63) / 64];
	if (tracking(r) && (kr_track_query(&r->track, first, n, bits) != KR_OK || bits[0]))
		return false; /* part of the stripe is in the window */
	if (is_hot(r, p / r->G) && !tracking(r))
		return false; /* offline: a hot segment's redundancy is unknown */
	memcpy(r->rbuf, r->parity + s * P, P);
	for (uint64_t q = first; q < first + n; q++) {
		if (q == p)
			continue;
		if (!read_page(r, q, r->tbuf) || kr_crc32c(r->tbuf, P) != r->crcs[q])
			return false; /* a second bad page in the stripe */
		xor_into(r->rbuf, r->tbuf);
	}
	return kr_crc32c(r->rbuf, P) == r->crcs[p] && atomic_load(&r->seq) == seq0;
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
	if (ok && r->side.mode == KR_MODE_PAGECACHE)
		ok = fdatasync(r->fd) == 0;
	if (online)
		mprotect(page, P, normal_prot(r, p / r->G));
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
		     (slot < 0 || mprotect(r->base + p * P, P, normal_prot(r, p / r->G)) == 0);
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

static bool region_fault(void *ctx, int sig, const siginfo_t *si)
{
	struct kr_region *r = ctx;
	if (getpid() != r->pid) {
		say("keratin: a forked child stored into protected region ", r->path,
		    "; only the attaching process is tracked, so the child may read it but not "
		    "write it\n");
		return false;
	}
	uint64_t p = (uint64_t)((uint8_t *)si->si_addr - r->base) / P, g = p / r->G;
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
		ok = set_hot_bits(r, g, true, true) == KR_OK;
		hook(KR_RPOINT_UNSEALED, p);
		if (ok && r->track.mode == KR_TRACK_UFFD)
			ok = mprotect(r->base + g * r->G * P, seg_count(r, g) * P, PROT_READ | PROT_WRITE) == 0;
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
	uint8_t *start = r->base + g * r->G * P;
	hook(KR_RPOINT_SEALING, g * r->G);
	if (!region_lock(r))
		return KR_E_MISUSE_STATE;
	int rc = mprotect(start, seg_count(r, g) * P, PROT_READ) == 0 ? KR_OK : KR_E_IO;
	if (rc == KR_OK)
		atomic_store(&r->sealed[g], 1);
	region_unlock(r);
	if (rc != KR_OK)
		return kr_err_errno(KR_E_IO, "region: mprotect (seal) failed");
	/* Stores that landed before the seal are caught here; later ones unseal first. */
	if ((rc = harvest_span_apply(r, g * r->G, seg_count(r, g))) != KR_OK)
		return rc;
	hook(KR_RPOINT_SEALED, g * r->G);
	if (!region_lock(r))
		return KR_E_MISUSE_STATE;
	if (atomic_load(&r->sealed[g]))
		rc = set_hot_bits(r, g, false, false);
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
	if ((uint64_t)st.st_size == r->sb.data_size)
		return KR_OK;
	if (!r->failed)
		fprintf(stderr, "keratin: protected region %s changed size (%" PRIu64 " -> %lld "
			"bytes); redundancy is no longer maintained\n", r->path, r->sb.data_size,
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
	memset(r->seg_written, 0, r->nsegs);
	for (;;) {
		size_t n;
		batch_begin(r);
		uint64_t h0 = now_ns(CLOCK_MONOTONIC);
		int more = kr_track_harvest(&r->track, r->pages, r->B, &n);
		harvest_ns += now_ns(CLOCK_MONOTONIC) - h0;
		if (more >= 0 && n) {
			hook(KR_RPOINT_HARVESTED, r->pages[0]);
			rc = apply_batch(r, r->pages, n);
			for (size_t i = 0; i < n; i++)
				stripes += i == 0 || r->pages[i] / r->W != r->pages[i - 1] / r->W;
		}
		batch_end(r);
		if (more < 0)
			return more;
		r->st.last_dirty_pages += n;
		if (rc != KR_OK || more == KR_OK)
			break;
	}
	for (uint64_t g = 0; seal && r->seal && rc == KR_OK && g < r->nsegs; g++) {
		if (r->seg_written[g] || atomic_load(&r->sealed[g]))
			r->idle[g] = 0;
		else if (++r->idle[g] >= SEAL_AFTER_IDLE)
			rc = seal_segment(r, g);
	}
	uint64_t hot = 0;
	for (uint64_t g = 0; g < r->nsegs; g++)
		hot += is_hot(r, g);

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
	pr.crc = kr_crc32c(&pr, offsetof(struct kr_side_passrec, crc));
	kr_pm_copy(&r->side, r->passrec, &pr, sizeof(pr));
	kr_pm_flush(&r->side, r->passrec, sizeof(pr));
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

static int check_range(struct kr_region *r, uint64_t first, uint64_t count, unsigned flags,
		       struct kr_region_report *rep)
{
	int rc = KR_OK;
	bool repair = flags & KR_REGION_CHECK_REPAIR;
	/* Stripe by stripe: a stripe's pages and its parity are judged together. */
	uint64_t s0 = first / r->W, s1 = (first + count - 1) / r->W;
	for (uint64_t s = s0; s <= s1 && rc == KR_OK; s++) {
		uint64_t sf = stripe_first(r, s), sn = stripe_count(r, s), bits[1];
		if ((rc = window_bits(r, sf, sn, bits)) != KR_OK)
			break;
		bool hot_offline = !tracking(r) && is_hot(r, sf / r->G);
		bool stripe_sound = !bits[0] && !hot_offline;
		for (uint64_t p = sf; p < sf + sn; p++) {
			if (p < first || p >= first + count)
				continue;
			if ((bits[0] >> (p - sf) & 1) || hot_offline) {
				rep->pages_unverifiable++;
				continue;
			}
			rep->pages_checked++;
			if (kr_crc32c(r->base + p * P, P) == r->crcs[p])
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
		if (memcmp(r->tbuf, r->parity + s * P, P) == 0)
			continue;
		if (repair && !(r->flags & KR_REGION_READONLY)) {
			parity_compute(r, s);
			rc = kr_pm_fence(&r->side);
			rep->parity_rebuilt++;
		} else {
			rep->pages_bad++;
		}
	}
	return rc;
}

static int scrub_step(struct kr_region *r)
{
	uint64_t budget = (uint64_t)r->scrub_kib * r->period_ms / 1000 / 4;
	if (budget == 0)
		budget = 1;
	if (budget > r->npages)
		budget = r->npages;
	struct kr_region_report rep = {0};
	if (r->scrub_next >= r->npages)
		r->scrub_next = 0;
	uint64_t n = r->npages - r->scrub_next < budget ? r->npages - r->scrub_next : budget;
	int rc = check_range(r, r->scrub_next, n, KR_REGION_CHECK_REPAIR, &rep);
	r->scrub_next += n;
	r->st.scrubbed_pages += rep.pages_checked;
	if (rep.pages_bad)
		fprintf(stderr, "keratin: scrub of %s: %" PRIu64 " damaged page(s), %" PRIu64
			" repaired\n", r->path, rep.pages_bad, rep.pages_repaired);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Attach: recovery
 * ------------------------------------------------------------------------------------- */
/* Recomputes everything of segment g from the data. */
static uint64_t rebuild_segment(struct kr_region *r, uint64_t g)
{
	uint64_t first = g * r->G, n = seg_count(r, g);
	for (uint64_t i = 0; i < n; i++)
		r->pages[i] = first + i;
	return update_pages(r, r->pages, n);
}

/* The meta-CRC of CRC page cp is trustworthy only if every segment it covers is cold. */
static bool crc_page_cold(struct kr_region *r, uint64_t cp)
{
	uint64_t p0 = cp * KR_SIDE_CRCS_PER_PAGE, p1 = p0 + KR_SIDE_CRCS_PER_PAGE;
	if (p1 > r->npages)
		p1 = r->npages;
	for (uint64_t g = p0 / r->G; g <= (p1 - 1) / r->G; g++)
		if (is_hot(r, g))
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
	for (uint64_t cp = 0; !fresh && cp < r->ncrcpages; cp++) {
		if (!crc_page_cold(r, cp) ||
		    kr_crc32c((const uint8_t *)r->crcs + cp * P, P) == r->meta[cp])
			continue;
		uint64_t p0 = cp * KR_SIDE_CRCS_PER_PAGE;
		uint64_t n = r->npages - p0 < KR_SIDE_CRCS_PER_PAGE ? r->npages - p0 : KR_SIDE_CRCS_PER_PAGE;
		fprintf(stderr, "keratin: %s: checksums of pages %" PRIu64 "..%" PRIu64
			" are damaged in the sidecar; rebuilt from the data, unverified\n",
			r->path, p0, p0 + n - 1);
		rep->pages_unverifiable += n;
		if (!ro)
			for (uint64_t g = p0 / r->G; g <= (p0 + n - 1) / r->G; g++)
				set_hot_bits(r, g, true, false);
	}
	int rc = KR_OK;
	for (uint64_t g = 0; g < r->nsegs && rc == KR_OK; g++) {
		report_progress(r, g, r->nsegs);
		uint64_t n = seg_count(r, g);
		if (!is_hot(r, g)) {
			rc = check_range(r, g * r->G, n, ro ? 0 : KR_REGION_CHECK_REPAIR, rep);
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
		rc = kr_pm_fence(&r->side);
		/* Cold again only if no store unsealed it meanwhile (online) and the session
		 * seals at all; a level-1 session keeps everything hot. */
		if (rc == KR_OK && !level1(r) && region_lock(r)) {
			if (!tracking(r) || atomic_load(&r->sealed[g]))
				rc = set_hot_bits(r, g, false, false);
			region_unlock(r);
		}
	}
	report_progress(r, r->nsegs, r->nsegs);
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

/* Creates the sidecar's superblock in memory for a new sidecar. */
static int sb_new(struct kr_region *r, const struct kr_region_opts *o, const struct stat *st)
{
	struct kr_side_sb *sb = &r->sb;
	memset(sb, 0, sizeof(*sb));
	sb->magic = KR_SIDE_MAGIC;
	sb->version = KR_SIDE_VERSION;
	sb->sb_size = sizeof(*sb);
	sb->data_size = (uint64_t)st->st_size;
	sb->data_dev = (uint64_t)st->st_dev;
	sb->data_ino = (uint64_t)st->st_ino;
	sb->page_size = P;
	sb->stripe_pages = o->stripe_pages ? o->stripe_pages : KR_SIDE_DEFAULT_STRIPE;
	sb->batch_pages = o->batch_pages ? o->batch_pages : KR_SIDE_DEFAULT_BATCH;
	uint32_t g = o->segment_pages ? o->segment_pages
				      : KR_SIDE_DEFAULT_SEGMENT / sb->stripe_pages * sb->stripe_pages;
	if (!g)
		g = sb->stripe_pages;
	while ((sb->data_size / P + g - 1) / g > KR_SIDE_MAX_SEGMENTS)
		g *= 2;
	sb->segment_pages = g;
	sb->csum_kind = KR_SIDE_CSUM_CRC32C;
	sb->state = KR_SIDE_ACTIVE;
	sb->flags = KR_SIDE_F_SEAL; /* what a program's session does by default */
	return geometry(sb);
}

static int side_open(struct kr_region *r, const struct kr_region_opts *o, const struct stat *st,
		     bool *fresh)
{
	bool ro = r->flags & KR_REGION_READONLY;
	bool may_create = !(r->flags & (KR_REGION_NO_CREATE | KR_REGION_READONLY));
	int fd = open(r->side_path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC | (may_create ? O_CREAT : 0), 0644);
	if (fd < 0)
		return kr_err_errno(KR_E_IO_OPEN, "region: cannot open sidecar %s", r->side_path);
	r->side.fd = fd;
	if (flock(fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
		return kr_err_set(KR_E_IO_BUSY, "region: %s is attached by another process or handle",
				  r->path);
	struct stat sst;
	if (fstat(fd, &sst) != 0)
		return kr_err_errno(KR_E_IO, "region: fstat %s", r->side_path);
	*fresh = sst.st_size == 0;
	int rc;
	if (*fresh && !may_create)
		return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: empty, not a keratin sidecar", r->side_path);
	if (*fresh) {
		if ((rc = sb_new(r, o, st)) != KR_OK)
			return rc;
		if (ftruncate(fd, (off_t)r->sb.side_size) != 0)
			return kr_err_errno(KR_E_IO, "region: cannot size sidecar %s", r->side_path);
		sst.st_size = (off_t)r->sb.side_size;
	}
	size_t slen = (size_t)sst.st_size;
	if (slen < 3 * P)
		return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin sidecar (%zu bytes)",
				  r->side_path, slen);
	if (ro) {
		void *m = mmap(NULL, slen, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return kr_err_errno(KR_E_IO_MAP, "region: mmap %s", r->side_path);
		r->side.base = m;
		r->side.size = slen;
		r->side.mode = KR_MODE_PAGECACHE;
	} else {
		unsigned mf = (r->flags & KR_REGION_FORCE_PMEM) ? KR_OPEN_FORCE_PMEM : 0;
		if ((rc = kr_pm_map(&r->side, fd, slen, mf, r->side_path)) != KR_OK)
			return rc;
	}
	if (*fresh) {
		/* Everything hot until computed; the superblock goes last, ACTIVE. */
		side_pointers(r, (uint8_t *)r->side.base);
		for (uint64_t g = 0; g < r->nsegs; g++)
			set_hot_bits(r, g, true, false);
		r->sb_copy = 1;
		return sb_write(r);
	}
	if ((rc = sb_read((uint8_t *)r->side.base, slen, r->side_path, &r->sb, &r->sb_copy)) != KR_OK)
		return rc;
	if (r->sb.data_size != (uint64_t)st->st_size)
		return kr_err_set(KR_E_FORMAT_MISMATCH, "%s is %lld bytes but its sidecar describes "
				  "%" PRIu64 " bytes: the file changed size (delete the sidecar to "
				  "protect it anew)", r->path, (long long)st->st_size, r->sb.data_size);
	if (r->sb.data_ino != (uint64_t)st->st_ino || r->sb.data_dev != (uint64_t)st->st_dev)
		return kr_err_set(KR_E_FORMAT_MISMATCH, "sidecar %s was made for another file "
				  "(inode %" PRIu64 ", %s is inode %llu)", r->side_path,
				  r->sb.data_ino, r->path, (unsigned long long)st->st_ino);
	if ((o->stripe_pages && o->stripe_pages != r->sb.stripe_pages) ||
	    (o->segment_pages && o->segment_pages != r->sb.segment_pages) ||
	    (o->batch_pages && o->batch_pages != r->sb.batch_pages))
		return kr_err_set(KR_E_FORMAT_MISMATCH, "sidecar %s has another geometry (stripe %u, "
				  "segment %u, batch %u pages)", r->side_path, r->sb.stripe_pages,
				  r->sb.segment_pages, r->sb.batch_pages);
	side_pointers(r, (uint8_t *)r->side.base);
	return KR_OK;
}

/* A CLEAN sidecar's meta-CRCs must verify (reading the CRC array once: 1/1024 of the
 * data); any mismatch sends it through recovery, which says what it rebuilds. */
static bool clean_damaged(struct kr_region *r)
{
	bool bad = kr_crc32c(r->meta, r->ncrcpages * 4) != r->sb.meta_crc;
	for (uint64_t cp = 0; !bad && cp < r->ncrcpages; cp++)
		bad = kr_crc32c((const uint8_t *)r->crcs + cp * P, P) != r->meta[cp];
	if (bad)
		fprintf(stderr, "keratin: %s: sidecar checksum area damaged; verifying\n", r->side_path);
	return bad;
}

static void *region_thread(void *arg);

static void region_free(struct kr_region *r)
{
	if (r->side.base) {
		if (r->flags & KR_REGION_READONLY)
			munmap(r->side.base, r->side.size);
		else
			kr_pm_unmap(&r->side);
	}
	if (r->side.fd >= 0)
		close(r->side.fd);
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
static void region_abort(struct kr_region *r, bool watched)
{
	if (tracking(r))
		kr_track_detach(&r->track);
	if (watched) {
		if (r->seal && !r->own_map)
			mprotect(r->base, r->len, PROT_READ | PROT_WRITE);
		kr_media_unwatch(r->base);
	}
	region_free(r);
}

static int region_setup(const char *path, void *base, size_t len, const struct kr_region_opts *opts,
			kr_region **out, bool own)
{
	static const struct kr_region_opts defaults;
	const struct kr_region_opts *o = opts ? opts : &defaults;
	if (!path || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "region: NULL path or output");
	*out = NULL;
	int rc = opts_check(o);
	if (rc != KR_OK)
		return rc;
	struct kr_region *r = calloc(1, sizeof(*r));
	if (!r)
		return kr_err_set(KR_E_NOMEM, "region: no memory");
	r->fd = -1;
	r->side.fd = -1;
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
	r->path = strdup(path);
	size_t sl = strlen(path) + 5;
	r->side_path = o->sidecar ? strdup(o->sidecar) : malloc(sl);
	if (!r->path || !r->side_path) {
		region_free(r);
		return kr_err_set(KR_E_NOMEM, "region: no memory");
	}
	if (!o->sidecar)
		snprintf(r->side_path, sl, "%s.krs", path);
	bool offline = r->flags & KR_REGION_OFFLINE, ro = r->flags & KR_REGION_READONLY;

	r->fd = open(path, (offline ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (offline && !ro && r->fd >= 0) { /* repairs write through the file */
		close(r->fd);
		r->fd = open(path, O_RDWR | O_CLOEXEC);
	}
	struct stat st;
	if (r->fd < 0 || fstat(r->fd, &st) != 0) {
		rc = kr_err_errno(KR_E_IO_OPEN, "region: cannot open %s", path);
		region_free(r);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size % P) {
		region_free(r);
		return kr_err_set(KR_E_MISUSE_ARG, "region: %s is not a regular file whose size is a "
				  "nonzero multiple of 4096 (%lld bytes)", path, (long long)st.st_size);
	}
	r->len = (size_t)st.st_size;
	if (own || offline) {
		r->base = mmap(NULL, r->len, offline ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
			       r->fd, 0);
		if (r->base == MAP_FAILED) {
			r->base = NULL;
			rc = kr_err_errno(KR_E_IO_MAP, "region: mmap %s", path);
			region_free(r);
			return rc;
		}
		r->own_map = true;
	} else {
		if (!base || len != r->len ||
		    (rc = check_mapping((uintptr_t)base, len, st.st_dev, st.st_ino)) != KR_OK) {
			if (rc == KR_OK)
				rc = kr_err_set(KR_E_MISUSE_ARG, "region: attach needs the mapping of the "
						"whole file (%zu bytes, got %zu)", r->len, len);
			region_free(r);
			return rc;
		}
		r->base = base;
	}

	bool fresh = false;
	if ((rc = side_open(r, o, &st, &fresh)) != KR_OK) {
		region_free(r);
		return rc;
	}
	size_t batch = r->B > r->G ? r->B : r->G;
	r->sealed = calloc(r->nsegs, 1);
	r->idle = calloc(r->nsegs, 1);
	r->seg_written = calloc(r->nsegs, 1);
	r->pages = malloc(batch * sizeof(uint64_t));
	r->wbits = malloc((r->G + 63) / 64 * 8);
	r->rbuf = aligned_alloc(64, P);
	r->tbuf = aligned_alloc(64, P);
	if (!r->sealed || !r->idle || !r->seg_written || !r->pages || !r->wbits || !r->rbuf || !r->tbuf) {
		region_free(r);
		return kr_err_set(KR_E_NOMEM, "region: no memory");
	}
	bool was_clean = !fresh && r->sb.state == KR_SIDE_CLEAN;
	r->seal = !offline && !(r->flags & KR_REGION_NO_SEAL);

	/* The session starts: ACTIVE, durably, before anything can make redundancy stale. */
	if (!ro) {
		r->sb.state = KR_SIDE_ACTIVE;
		r->sb.epoch++;
		if (!offline) /* tools' offline sessions keep the program's setting on show */
			r->sb.flags = r->seal ? KR_SIDE_F_SEAL : 0;
		if ((rc = sb_write(r)) != KR_OK) {
			region_free(r);
			return rc;
		}
	}

	bool watched = false;
	if (!offline) {
		if ((rc = kr_media_watch(r->base, r->len, region_fault, r)) != KR_OK) {
			region_free(r);
			return rc;
		}
		watched = true;
		unsigned tf = (r->flags & KR_REGION_MPROTECT) ? KR_TRACK_FLAG_MPROTECT : 0;
		rc = kr_track_attach(&r->track, r->base, r->len, tf);
		if (rc == KR_E_IO && !tf && !(r->flags & KR_REGION_NO_FALLBACK)) {
			fprintf(stderr, "keratin: %s; tracking %s with mprotect instead\n", kr_errmsg(), path);
			rc = kr_track_attach(&r->track, r->base, r->len, KR_TRACK_FLAG_MPROTECT);
		}
		if (rc == KR_OK && r->seal) { /* every segment starts sealed */
			for (uint64_t g = 0; g < r->nsegs; g++)
				atomic_store(&r->sealed[g], 1);
			if (mprotect(r->base, r->len, PROT_READ) != 0)
				rc = kr_err_errno(KR_E_IO, "region: mprotect (seal) failed");
		}
		/* Stores between arming and sealing were tracked: rebuild, not judge, their
		 * segments (only the caller's other threads can have made any). */
		for (uint64_t g = 0; rc == KR_OK && r->seal && g < r->nsegs; g++) {
			size_t n;
			rc = kr_track_harvest_span(&r->track, g * r->G, seg_count(r, g), r->pages, &n);
			if (rc == KR_OK && n)
				rc = set_hot_bits(r, g, true, false);
		}
		if (rc != KR_OK) {
			region_abort(r, watched);
			return rc;
		}
	}

	struct kr_region_report rep = {0};
	if (!was_clean || (!ro && clean_damaged(r)))
		rc = recover(r, fresh, &rep);
	if (rc != KR_OK && rc != KR_E_CORRUPT_REGION) {
		region_abort(r, watched);
		return rc;
	}
	if (r->st.stale_at_recovery)
		fprintf(stderr, "keratin: %s was not closed cleanly: %" PRIu64 " page(s) in segments "
			"that were hot at the crash changed since their last checksum (late writes "
			"or damage, which cannot be told apart); their redundancy was rebuilt\n",
			path, r->st.stale_at_recovery);
	int corrupt = rc;
	if (level1(r)) /* everything hot for the whole session */
		for (uint64_t g = 0; g < r->nsegs; g++)
			set_hot_bits(r, g, true, false);
	r->minflt_mark = minor_faults();
	if (!offline) {
		list_add(r);
		if (!(r->flags & KR_REGION_MANUAL)) {
			r->thread_on = pthread_create(&r->thread, NULL, region_thread, r) == 0;
			if (!r->thread_on) {
				list_remove(r);
				region_abort(r, watched);
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
		if (rc == KR_OK && r->side.mode == KR_MODE_PAGECACHE && fdatasync(r->fd) != 0)
			rc = kr_err_errno(KR_E_IO_SYNC, "region: fdatasync %s", r->path);
	}
	if (rc == KR_OK && !r->failed && !(r->flags & KR_REGION_READONLY)) {
		for (uint64_t g = 0; g < r->nsegs && rc == KR_OK; g++)
			if (is_hot(r, g))
				rc = set_hot_bits(r, g, false, false);
		if (rc == KR_OK) {
			r->sb.meta_crc = kr_crc32c(r->meta, r->ncrcpages * 4);
			r->sb.state = KR_SIDE_CLEAN;
			rc = sb_write(r);
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
		rc = kr_pm_fence(&r->side);
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
	if (!r || first >= r->npages || first + count > r->npages ||
	    (flags & ~(KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY)))
		return kr_err_set(KR_E_MISUSE_ARG, "region: bad check range or flags");
	if ((flags & KR_REGION_CHECK_REPAIR) && (r->flags & KR_REGION_READONLY))
		return kr_err_set(KR_E_MISUSE_ARG, "region: opened READONLY, cannot repair");
	if (count == 0)
		count = r->npages - first;
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
	if (rc == KR_OK && rep->pages_bad > rep->pages_repaired + rep->parity_rebuilt)
		rc = kr_err_set(KR_E_CORRUPT_REGION, "%s: %" PRIu64 " damaged page(s) not repaired "
				"(first: page %" PRIu64 ")", r->path,
				rep->pages_bad - rep->pages_repaired, rep->first_bad_page);
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
	st->npages = r->npages;
	st->nstripes = r->nstripes;
	st->nsegments = r->nsegs;
	st->stripe_pages = r->W;
	st->segment_pages = r->G;
	st->batch_pages = r->B;
	st->period_ms = r->period_ms;
	st->tracking = r->track.mode;
	st->failed = r->failed;
	st->hot_segments = 0;
	for (uint64_t g = 0; g < r->nsegs; g++)
		st->hot_segments += is_hot(r, g);
	st->window_pages = 0;
	for (uint64_t at = 0; tracking(r) && at < r->npages; at += r->G) {
		uint64_t n = r->npages - at < r->G ? r->npages - at : r->G;
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
	int slot = -1;
	for (int i = 0; i < MAX_POISON && slot < 0; i++) {
		uint64_t expect = 0;
		if (atomic_compare_exchange_strong(&r->poison[i], &expect, p + 1))
			slot = i;
	}
	if (slot < 0)
		return kr_err_set(KR_E_MISUSE_STATE, "region: too many poisoned pages at once");
	/* As for pools (media.c): inaccessible first, then the content is lost through the
	 * file, under the lock so a fault in between waits for the loss. Fault injection goes
	 * around pmem.c on purpose. */
	uint8_t junk[P];
	for (size_t i = 0; i < P; i++)
		junk[i] = (uint8_t)(i * 131 + p);
	if (!region_lock(r))
		return kr_err_set(KR_E_MISUSE_STATE, "region: busy");
	int ok = mprotect(r->base + p * P, P, PROT_NONE) == 0;
	int wrote = ok && pwrite(r->fd, junk, P, (off_t)(p * P)) == (ssize_t)P;
	region_unlock(r);
	if (!ok || !wrote) {
		atomic_store(&r->poison[slot], 0);
		return kr_err_errno(KR_E_IO, "region: poison injection failed");
	}
	return KR_OK;
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
	else if ((m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
		rc = kr_err_errno(KR_E_IO_MAP, "region: mmap %s", sidecar);
	struct kr_region r = {0};
	if (rc == KR_OK && (rc = sb_read(m, (size_t)st.st_size, sidecar, &r.sb, &r.sb_copy)) == KR_OK) {
		side_pointers(&r, m);
		info->state = r.sb.state;
		info->sealed = !!(r.sb.flags & KR_SIDE_F_SEAL);
		info->data_size = r.sb.data_size;
		info->npages = r.npages;
		info->nstripes = r.nstripes;
		info->nsegments = r.nsegs;
		info->epoch = r.sb.epoch;
		info->stripe_pages = r.W;
		info->segment_pages = r.G;
		info->batch_pages = r.B;
		for (uint64_t g = 0; g < r.nsegs; g++)
			if (is_hot(&r, g))
				info->hot_segments++;
			else
				info->covered_pages += seg_count(&r, g);
		if (r.sb.state == KR_SIDE_CLEAN)
			info->covered_pages = r.npages;
		const struct kr_side_passrec *pr = r.passrec;
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
