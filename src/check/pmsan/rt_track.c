/*
 * rt_track.c - the pmsan runtime's record of persistent mappings, of freed objects and of
 * each thread's stores, flushes and fences, and the flush rules checked on it (1, 1a, 1b,
 * and the redundant-flush and redundant-fence warnings). The hooks (rt_hooks.c) feed it;
 * the transaction model (rt_tx.c) and the crash images (rt_image.c) read it.
 *
 * Model
 *
 *   Each thread keeps, since its last fence: the stores it made to persistent memory
 *   outside transactions (address, size, time, site, statement group, old bytes when crash
 *   images are wanted), its flushes, and `dirty`, the bytes stored and not flushed since.
 *   A flush removes exactly the bytes it names (not whole cache lines: a flush that covers
 *   an object only by the luck of alignment is still reported), and a non-temporal store
 *   is never dirty. At a fence:
 *     - every dirty byte is a violation, attributed to the last store that wrote it;
 *       rule 1b (partial-flush) if a later flush reached some byte of that store's
 *       statement, rule 1 (missing-flush) if none did;
 *     - crash images are cut (rt_image.c, called by the fence hook just before) when a
 *       check command is set;
 *     - the thread's record starts afresh.
 *   The same check runs when a pool is unmapped or closed (its bytes only), when a thread
 *   exits, and at program exit (every thread).
 *
 *   Locking: a thread's record has its own mutex, taken by the thread for every event and
 *   by others only to check or forget it (unmap, exit). The table of mappings is read
 *   without a lock: slots are filled and emptied by single atomic stores and never move,
 *   and a slot's memory (its path, its freed-object bitmap) is never given back, so a
 *   reader racing with an unmap at worst checks one access against a dead mapping. Only
 *   crash images need every thread still: then the hooks (rt_hooks.c) also hold a global
 *   lock's shared side for stores and flushes, and its exclusive side for the fence that
 *   cuts images.
 *
 *   Invariants
 *   1. [__pmsan_lo, __pmsan_hi) contains every live mapping, so the pass's inline check
 *      never skips a persistent store (it may let a DRAM one through; pmsan_range_find
 *      decides).
 *   2. A thread's record changes only with its mutex held: its events by the thread itself,
 *      and by others only to check and forget it (unmap, exit).
 *   3. dirty is a subset of the union of the recorded stores' ranges.
 *   4. A freed-object bit is set only for an 8-byte granule that lies wholly inside an
 *      object freed and not allocated again, so a set bit never blames a live byte.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmsan.h"

#define MAX_RANGES 64
#define LINE 64u
#define GRANULE 8u /* bytes per freed-object bit */

struct pm_range pmsan_ranges[MAX_RANGES];
static int nslots; /* slots ever used; a dead slot has lo == hi == 0 */
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
uintptr_t __pmsan_lo = UINTPTR_MAX, __pmsan_hi = 0;
int pmsan_used; /* a persistent mapping was seen: print the summary at exit */
struct pm_thread *pmsan_threads;
_Atomic int __pmsan_watch_loads; /* set by the first free (here or in a transaction) */
pthread_mutex_t pmsan_registry_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread struct pm_thread *self;
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int next_tid;
extern char end; /* the end of the program's data: the brk heap starts after it */

static void check_end(struct pm_thread *t, uintptr_t lo, uintptr_t hi, const char *when,
		      const struct pmsan_loc *at);

static void thread_exit(void *p)
{
	struct pm_thread *t = p;
	if (!pmsan_active)
		return;
	pthread_mutex_lock(&t->lock);
	check_end(t, 0, UINTPTR_MAX, "when its thread exits", &pmsan_loc_exit);
	pmsan_forget_epoch(t);
	t->alive = 0;
	pthread_mutex_unlock(&t->lock);
	self = NULL;
}

static void make_key(void)
{
	pthread_key_create(&thread_key, thread_exit);
}

struct pm_thread *pmsan_self_if_any(void)
{
	return self;
}

struct pm_thread *pmsan_self(void)
{
	if (self)
		return self;
	pmsan_init();
	pthread_once(&key_once, make_key);
	struct pm_thread *t = pmsan_xalloc(sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->stores.elem = sizeof(struct pm_store);
	t->flushes.elem = sizeof(struct pm_flush);
	t->alive = 1;
	pthread_attr_t attr;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		void *lo;
		size_t n;
		if (pthread_attr_getstack(&attr, &lo, &n) == 0) {
			t->stack_lo = (uintptr_t)lo;
			t->stack_hi = (uintptr_t)lo + n;
		}
		pthread_attr_destroy(&attr);
	}
	pthread_mutex_lock(&pmsan_registry_lock);
	t->tid = next_tid++;
	t->next = pmsan_threads;
	pmsan_threads = t;
	pthread_mutex_unlock(&pmsan_registry_lock);
	pthread_setspecific(thread_key, t);
	self = t;
	return t;
}

/* ---- mappings */

#ifdef KR_DEBUG_INVARIANTS
/* dirty lies within the recorded stores (invariant 3). */
static int dirty_in_stores(const struct pm_thread *t)
{
	struct ivset u = {0};
	for (size_t i = 0; i < t->stores.n; i++) {
		const struct pm_store *s = &VEC_AT(&t->stores, struct pm_store, i);
		ivset_add(&u, s->addr, s->addr + s->size);
	}
	int ok = 1;
	for (size_t i = 0; i < t->dirty.n && ok; i++)
		ok = ivset_covers(&u, t->dirty.lo[i], t->dirty.hi[i]);
	ivset_free(&u);
	return ok;
}

static int bounds_cover(uintptr_t lo, uintptr_t hi)
{
	return __atomic_load_n(&__pmsan_lo, __ATOMIC_ACQUIRE) <= lo &&
	       hi <= __atomic_load_n(&__pmsan_hi, __ATOMIC_ACQUIRE);
}
#endif

static uintptr_t load(const uintptr_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void recompute_bounds(void)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < nslots; i++) {
		struct pm_range *r = &pmsan_ranges[i];
		if (r->lo == r->hi)
			continue;
		lo = r->lo < lo ? r->lo : lo;
		hi = r->hi > hi ? r->hi : hi;
	}
	__atomic_store_n(&__pmsan_lo, lo, __ATOMIC_RELEASE);
	__atomic_store_n(&__pmsan_hi, hi, __ATOMIC_RELEASE);
}

void pmsan_range_add(uintptr_t lo, uintptr_t hi, enum range_kind kind, const char *path)
{
	if (!pmsan_active || lo >= hi)
		return;
	pthread_mutex_lock(&ranges_lock);
	int i = 0;
	while (i < nslots && pmsan_ranges[i].lo != pmsan_ranges[i].hi)
		i++;
	if (i == MAX_RANGES) {
		pmsan_log("pmsan: more than %d persistent mappings; %s is not checked\n",
			  MAX_RANGES, path ? path : "a mapping");
	} else {
		struct pm_range *r = &pmsan_ranges[i];
		r->kind = kind;
		r->path = path ? strdup(path) : NULL; /* never freed: see the top of this file */
		r->freed = NULL;
		__atomic_store_n(&r->lo, lo, __ATOMIC_RELEASE);
		__atomic_store_n(&r->hi, hi, __ATOMIC_RELEASE);
		if (i == nslots)
			__atomic_store_n(&nslots, i + 1, __ATOMIC_RELEASE);
		recompute_bounds();
		KR_INVARIANT("rt_track.c", 1, bounds_cover(lo, hi));
		pmsan_used = 1;
	}
	pthread_mutex_unlock(&ranges_lock);
}

void pmsan_range_remove(uintptr_t lo, const struct pmsan_loc *loc)
{
	if (!pmsan_active)
		return;
	pthread_mutex_lock(&ranges_lock);
	for (int i = 0; i < nslots; i++) {
		struct pm_range *r = &pmsan_ranges[i];
		if (r->lo != lo || r->lo == r->hi)
			continue;
		pthread_mutex_lock(&pmsan_registry_lock);
		for (struct pm_thread *t = pmsan_threads; t; t = t->next) {
			pthread_mutex_lock(&t->lock);
			if (t->alive) {
				check_end(t, r->lo, r->hi, "when the pool is unmapped", loc);
				pmsan_forget_epoch(t);
			}
			pthread_mutex_unlock(&t->lock);
		}
		pthread_mutex_unlock(&pmsan_registry_lock);
		pmsan_volatile_mark(r->lo, r->hi, 0);
		__atomic_store_n(&r->hi, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&r->lo, 0, __ATOMIC_RELEASE);
		recompute_bounds();
		break;
	}
	pthread_mutex_unlock(&ranges_lock);
}

const struct pm_range *pmsan_range_find(uintptr_t lo, uintptr_t hi)
{
	int n = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		const struct pm_range *r = &pmsan_ranges[i];
		uintptr_t rlo = load(&r->lo), rhi = load(&r->hi);
		if (rlo < rhi && lo < rhi && hi > rlo) {
			KR_INVARIANT("rt_track.c", 1, bounds_cover(rlo, rhi));
			return r;
		}
	}
	return NULL;
}

/* ---- volatile areas: ranges of persistent memory that the program keeps transient state
 * in, through an API that documents them so (pmemobj_volatile). No rule applies to them.
 * An area is forgotten when its object is freed or its mapping unmapped, so that the bytes
 * are checked again once they hold persistent data. The set is read on every store, so
 * the common case (no area at all) costs one relaxed load. */
static struct ivset volatile_areas;
static pthread_mutex_t volatile_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int have_volatile;

void pmsan_volatile_mark(uintptr_t lo, uintptr_t hi, int on)
{
	if (!on && !atomic_load_explicit(&have_volatile, memory_order_relaxed))
		return;
	pthread_mutex_lock(&volatile_lock);
	if (on)
		ivset_add(&volatile_areas, lo, hi);
	else
		ivset_sub(&volatile_areas, lo, hi);
	atomic_store(&have_volatile, volatile_areas.n != 0);
	pthread_mutex_unlock(&volatile_lock);
}

int pmsan_volatile_covers(uintptr_t lo, uintptr_t hi)
{
	if (!atomic_load_explicit(&have_volatile, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&volatile_lock);
	int in = ivset_covers(&volatile_areas, lo, hi);
	pthread_mutex_unlock(&volatile_lock);
	return in;
}

/* ---- freed objects (rule 4): one bit per granule of each mapping, set while the granule
 * lies inside a freed object. The bitmap is made on the mapping's first free. */

static _Atomic unsigned char *freed_map(struct pm_range *r)
{
	_Atomic unsigned char *m = __atomic_load_n(&r->freed, __ATOMIC_ACQUIRE);
	if (m)
		return m;
	size_t n = (r->hi - r->lo) / GRANULE / 8 + 1;
	_Atomic unsigned char *fresh = pmsan_xalloc(n);
	if (__atomic_compare_exchange_n(&r->freed, &m, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return fresh;
	free((void *)fresh);
	return m;
}

/* Sets (on) the bits of granules [g0, g1) of bitmap m, or clears them: whole bytes at a
 * time where it can. */
static void bits_apply(_Atomic unsigned char *m, uintptr_t g0, uintptr_t g1, int on)
{
	while (g0 < g1) {
		if (g0 % 8 == 0 && g1 - g0 >= 8) {
			if (on)
				atomic_store_explicit(&m[g0 / 8], 0xff, memory_order_relaxed);
			else
				atomic_store_explicit(&m[g0 / 8], 0, memory_order_relaxed);
			g0 += 8;
			continue;
		}
		unsigned char bit = (unsigned char)(1u << (g0 % 8));
		if (on)
			atomic_fetch_or_explicit(&m[g0 / 8], bit, memory_order_relaxed);
		else
			atomic_fetch_and_explicit(&m[g0 / 8], (unsigned char)~bit, memory_order_relaxed);
		g0++;
	}
}

/* Sets (on) the bits of the granules wholly inside [lo, hi), or clears those of every
 * granule [lo, hi) touches. */
void pmsan_freed_mark(uintptr_t lo, uintptr_t hi, int on)
{
	if (on)
		pmsan_volatile_mark(lo, hi, 0);
	struct pm_range *r = (struct pm_range *)pmsan_range_find(lo, hi);
	if (r == NULL)
		return;
	lo = lo < r->lo ? r->lo : lo;
	hi = hi > r->hi ? r->hi : hi;
	if (!on && __atomic_load_n(&r->freed, __ATOMIC_ACQUIRE) == NULL)
		return;
	_Atomic unsigned char *m = freed_map(r);
	if (on) {
		atomic_store(&__pmsan_watch_loads, 1);
		uintptr_t g0 = (lo - r->lo + GRANULE - 1) / GRANULE, g1 = (hi - r->lo) / GRANULE;
		KR_INVARIANT("rt_track.c", 4, g0 >= g1 || (r->lo + g0 * GRANULE >= lo && r->lo + g1 * GRANULE <= hi));
		bits_apply(m, g0, g1, 1);
	} else {
		bits_apply(m, (lo - r->lo) / GRANULE, (hi - r->lo + GRANULE - 1) / GRANULE, 0);
	}
}

int pmsan_freed_test(const struct pm_range *r, uintptr_t lo, uintptr_t hi)
{
	_Atomic unsigned char *m = __atomic_load_n(&r->freed, __ATOMIC_ACQUIRE);
	if (m == NULL)
		return 0;
	lo = lo < r->lo ? r->lo : lo;
	hi = hi > r->hi ? r->hi : hi;
	uintptr_t g0 = (lo - r->lo) / GRANULE, g1 = (hi - r->lo + GRANULE - 1) / GRANULE;
	while (g0 < g1) {
		unsigned char b = atomic_load_explicit(&m[g0 / 8], memory_order_relaxed);
		unsigned first = g0 % 8, last = g1 - g0 + first < 8 ? (unsigned)(g1 - g0 + first) : 8;
		if (b & (unsigned char)((0xffu << first) & (0xffu >> (8 - last))))
			return 1;
		g0 += last - first;
	}
	return 0;
}

/* ---- records */

void pmsan_forget_epoch(struct pm_thread *t)
{
	KR_INVARIANT("rt_track.c", 2, pmsan_held(&t->lock));
	vec_clear(&t->stores);
	vec_clear(&t->flushes);
	ivset_clear(&t->dirty);
	t->arena_n = 0;
	t->nt_pending = 0;
}

/* Appends size old bytes at addr to the thread's arena; returns their offset. */
static size_t keep_old_bytes(struct pm_thread *t, uintptr_t addr, uint64_t size)
{
	if (t->arena_n + size > t->arena_cap) {
		size_t cap = t->arena_cap ? t->arena_cap * 2 : 4096;
		while (cap < t->arena_n + size)
			cap *= 2;
		t->arena = pmsan_xrealloc(t->arena, cap);
		t->arena_cap = cap;
	}
	memcpy(t->arena + t->arena_n, (const void *)addr, size);
	t->arena_n += size;
	return t->arena_n - size;
}

/* Past this many stores since a fence, a store that continues the previous one (same
 * site, next address, nothing recorded between) extends it instead of taking a record:
 * a loop filling a large array then costs one record, not one per element. */
#define MERGE_AFTER 4096

void pmsan_record_store(struct pm_thread *t, uintptr_t addr, uint64_t size,
			const struct pmsan_loc *loc, unsigned flags)
{
	KR_INVARIANT("rt_track.c", 2, t == pmsan_self_if_any() && pmsan_held(&t->lock));
	size_t i = t->stores.n;
	int want_old = pmsan_opt.reorder != REORDER_NONE;
	if (i >= MERGE_AFTER) {
		struct pm_store *prev = &VEC_AT(&t->stores, struct pm_store, i - 1);
		if (prev->loc == loc && prev->addr + prev->size == addr && prev->seq == t->clock &&
		    (prev->flags & PMSAN_F_NT) == (flags & PMSAN_F_NT) &&
		    (!want_old || prev->old_off + prev->size == t->arena_n)) {
			if (want_old)
				keep_old_bytes(t, addr, size);
			prev->size += size;
			prev->flags |= PMSAN_F_MERGED;
			if (!(flags & PMSAN_F_NT))
				ivset_add(&t->dirty, addr, addr + size);
			return;
		}
	}
	struct pm_store *s = vec_push(&t->stores);
	s->addr = addr;
	s->size = size;
	s->seq = ++t->clock;
	s->loc = loc;
	s->flags = flags;
	s->group = i;
	if ((flags & PMSAN_F_CONT) && i > 0) {
		struct pm_store *prev = &VEC_AT(&t->stores, struct pm_store, i - 1);
		if (prev->loc == loc)
			s->group = prev->group;
	}
	s->old_off = want_old ? keep_old_bytes(t, addr, size) : SIZE_MAX;
	if (flags & PMSAN_F_NT)
		t->nt_pending = 1;
	else
		ivset_add(&t->dirty, addr, addr + size);
}

const char *pmsan_volatile_place(const struct pm_thread *t, uintptr_t a)
{
	if (a >= t->stack_lo && a < t->stack_hi)
		return "the stack";
	if (a >= (uintptr_t)&end && a < (uintptr_t)sbrk(0))
		return "the heap";
	return NULL;
}

/* Where the bytes of a store are, for a report: the pool-relative offset. */
static void place(uintptr_t a, char *buf, size_t n)
{
	const struct pm_range *r = pmsan_range_find(a, a + 1);
	if (r && r->path) {
		const char *base = strrchr(r->path, '/');
		snprintf(buf, n, "%s+0x%lx", base ? base + 1 : r->path, (unsigned long)(a - r->lo));
	} else {
		snprintf(buf, n, "%p", (void *)a);
	}
}

void pmsan_check_unflushed(struct pm_thread *t, uintptr_t lo, uintptr_t hi, const char *when,
			   const struct pmsan_loc *at)
{
	KR_INVARIANT("rt_track.c", 3, dirty_in_stores(t));
	if (!ivset_overlaps(&t->dirty, lo, hi))
		return;
	size_t n = t->stores.n;
	struct pm_store *st = t->stores.p;
	struct pm_flush *fl = t->flushes.p;
	/* Newest to oldest: a dirty byte belongs to the last store that wrote it. */
	struct byteset claimed = {0};
	uint64_t *unflushed = pmsan_xalloc((n ? n : 1) * sizeof(*unflushed));
	for (size_t i = n; i-- > 0;) {
		struct pm_store *s = &st[i];
		uintptr_t a = s->addr, e = s->addr + s->size;
		if (e <= lo || a >= hi)
			continue;
		for (uintptr_t p = a; p < e;) {
			uintptr_t olo, ohi;
			if (!ivset_first_overlap(&t->dirty, p, e, &olo, &ohi))
				break;
			/* [olo, ohi) is dirty; count what no newer store has claimed. */
			unflushed[s->group] += byteset_count_missing(&claimed, olo, ohi);
			p = ohi;
		}
		byteset_add(&claimed, a, e);
	}
	byteset_free(&claimed);
	/* One report per site: a loop's iterations share it, and it is printed once anyway. */
	const struct pmsan_loc *done[16];
	size_t ndone = 0;
	for (size_t g = 0; g < n; g++) {
		if (!unflushed[g])
			continue;
		int again = 0;
		for (size_t d = 0; d < ndone && !again; d++)
			again = done[d] == st[g].loc;
		if (again)
			continue;
		done[ndone < 16 ? ndone++ : g % 16] = st[g].loc;
		/* The statement's bytes (its pieces follow it) and whether a later flush reached
		 * any of them. */
		uint64_t total = 0;
		int touched = 0;
		for (size_t i = g; i < n && st[i].group == g; i++) {
			total += st[i].size;
			/* A merged run of a loop's stores is no one statement's range. */
			for (size_t f = 0; f < t->flushes.n && !touched && !(st[i].flags & PMSAN_F_MERGED); f++)
				touched = fl[f].seq > st[i].seq && fl[f].lo < st[i].addr + st[i].size &&
					  fl[f].hi > st[i].addr;
		}
		char where[256];
		place(st[g].addr, where, sizeof(where));
		if (touched)
			pmsan_report(PMSAN_R1B, st[g].loc, 0,
				     "only %llu of the %llu bytes stored to %s are flushed %s",
				     (unsigned long long)(total - unflushed[g]),
				     (unsigned long long)total, where, when);
		else
			pmsan_report(PMSAN_R1, st[g].loc, 0, "%llu bytes stored to %s are not flushed %s",
				     (unsigned long long)unflushed[g], where, when);
		if (at && at->line)
			pmsan_note("checked at %s:%u (%s)", at->file, at->line, at->func);
		pmsan_note_stack();
	}
	free(unflushed);
	ivset_sub(&t->dirty, lo, hi);
}

void pmsan_forget_unflushed(uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&pmsan_registry_lock);
	for (struct pm_thread *t = pmsan_threads; t; t = t->next) {
		pthread_mutex_lock(&t->lock);
		ivset_sub(&t->dirty, lo, hi);
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&pmsan_registry_lock);
}

/* Rule 1c: bytes in [lo, hi) that this thread stored and then flushed (or stored with
 * non-temporal stores) since its last fence, at a point where no later fence can come for
 * them: exit, thread exit, unmap. A flush only starts the write-back; without the fence,
 * a power failure may still lose them. Reported at the last such flush (or non-temporal
 * store), which is where the fence belongs. */
static void check_unfenced(struct pm_thread *t, uintptr_t lo, uintptr_t hi, const char *when,
			   const struct pmsan_loc *at)
{
	if (t->flushes.n == 0 && !t->nt_pending)
		return; /* nothing was put on its way since the last fence */
	struct ivset stored = {0}, pending = {0};
	const struct pmsan_loc *last = NULL;
	uint64_t last_seq = 0;
	int last_nt = 0;          /* the last is a non-temporal store, not a flush */
	int nt = 0, flushed = 0; /* what put bytes on their way */
	for (size_t i = 0; i < t->stores.n; i++) {
		const struct pm_store *s = &VEC_AT(&t->stores, struct pm_store, i);
		uintptr_t a = s->addr > lo ? s->addr : lo;
		uintptr_t e = s->addr + s->size < hi ? s->addr + s->size : hi;
		if (a >= e)
			continue;
		if (!(s->flags & PMSAN_F_NT)) {
			ivset_add(&stored, a, e);
			continue;
		}
		ivset_add(&pending, a, e);
		nt = 1;
		if (s->seq > last_seq) {
			last_seq = s->seq;
			last = s->loc;
			last_nt = 1;
		}
	}
	for (size_t i = 0; i < t->flushes.n; i++) {
		const struct pm_flush *f = &VEC_AT(&t->flushes, struct pm_flush, i);
		int reached = 0;
		for (uintptr_t p = f->lo, olo, ohi; p < f->hi &&
		     ivset_first_overlap(&stored, p, f->hi, &olo, &ohi); p = ohi) {
			ivset_add(&pending, olo, ohi);
			reached = flushed = 1;
		}
		if (reached && f->seq > last_seq) {
			last_seq = f->seq;
			last = f->loc;
			last_nt = 0;
		}
	}
	if (last) {
		uint64_t bytes = 0;
		for (size_t i = 0; i < pending.n; i++)
			bytes += pending.hi[i] - pending.lo[i];
		char where[256];
		place(pending.lo[0], where, sizeof(where));
		pmsan_report(PMSAN_R1C, last, 0, "%llu bytes stored to %s are %s but not fenced %s; "
			     "the last %s is", (unsigned long long)bytes, where,
			     !nt ? "flushed" : !flushed ? "written non-temporally"
						: "flushed or written non-temporally",
			     when, last_nt ? "non-temporal store" : "flush");
		if (at && at->line)
			pmsan_note("checked at %s:%u (%s)", at->file, at->line, at->func);
		pmsan_note_stack();
	}
	ivset_free(&stored);
	ivset_free(&pending);
}

/* The checks of a point after which this thread's stores into [lo, hi) get no fence. */
static void check_end(struct pm_thread *t, uintptr_t lo, uintptr_t hi, const char *when,
		      const struct pmsan_loc *at)
{
	pmsan_check_unflushed(t, lo, hi, when, at);
	check_unfenced(t, lo, hi, when, at);
}

void pmsan_record_flush(struct pm_thread *t, uintptr_t lo, uintptr_t hi,
			const struct pmsan_loc *loc)
{
	KR_INVARIANT("rt_track.c", 2, t == pmsan_self_if_any() && pmsan_held(&t->lock));
	if (lo >= hi)
		return;
	if (!pmsan_range_find(lo, hi)) {
		const char *what = pmsan_volatile_place(t, lo);
		pmsan_report(PMSAN_R1A, loc, 1, "flush of %lu bytes at %p, in %s",
			     (unsigned long)(hi - lo), (void *)lo,
			     what ? what : "memory that is not persistent");
		return;
	}
	if (t->depth == 0 &&
	    !ivset_overlaps(&t->dirty, lo & ~(uintptr_t)(LINE - 1), (hi + LINE - 1) & ~(uintptr_t)(LINE - 1)))
		pmsan_report(PMSAN_W_FLUSH, loc, 1,
			     "flush of %lu bytes whose cache lines hold no unflushed store",
			     (unsigned long)(hi - lo));
	ivset_sub(&t->dirty, lo, hi);
	struct pm_flush *f = vec_push(&t->flushes);
	f->lo = lo;
	f->hi = hi;
	f->seq = ++t->clock;
	f->loc = loc;
}

void pmsan_record_fence(struct pm_thread *t, const struct pmsan_loc *loc)
{
	KR_INVARIANT("rt_track.c", 2, t == pmsan_self_if_any() && pmsan_held(&t->lock));
	if (t->depth == 0 && t->flushes.n == 0 && !t->nt_pending && t->stores.n == 0)
		pmsan_report(PMSAN_W_FENCE, loc, 1, "fence with nothing flushed since the last one");
	pmsan_check_unflushed(t, 0, UINTPTR_MAX, "before the fence", loc);
	pmsan_forget_epoch(t);
}

void pmsan_alloc_published(struct pm_thread *t, const struct pmsan_loc *loc)
{
	pthread_mutex_lock(&t->lock);
	pmsan_check_unflushed(t, 0, UINTPTR_MAX, "when the allocation returns", loc);
	pmsan_forget_epoch(t);
	pthread_mutex_unlock(&t->lock);
}

void pmsan_check_exit(void)
{
	pthread_mutex_lock(&pmsan_registry_lock);
	for (struct pm_thread *t = pmsan_threads; t; t = t->next) {
		pthread_mutex_lock(&t->lock);
		if (t->alive) {
			check_end(t, 0, UINTPTR_MAX, "at exit", &pmsan_loc_exit);
			pmsan_forget_epoch(t);
		}
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&pmsan_registry_lock);
}
