/*
 * hmap.c - the single-trip persistent hash map (STPS; Cohen, Friedman and Larus, OOPSLA'17):
 * every put, delete or small transaction is durable after one fence.
 *
 * The idea
 *
 *   The only durable state is a log of fixed-size entries (layout.h, "Single-trip
 *   persistent hash map"). An update writes a whole new entry into a free or dead slot,
 *   flushes its lines and fences once; nothing else is written durably. The index (key ->
 *   slot) is in DRAM. At open, the log is scanned and the newest complete version of each
 *   key wins, so an entry needs no link and no "live" flag: validity bits say whether an
 *   entry was written completely, versions say which entry of a key is newest, a tombstone
 *   entry says a key was deleted.
 *
 * Validity: every line starts with a word holding a busy bit and the entry's version. The
 *   writer sets every line's busy bit, writes the payload, then stores every line's final
 *   word (busy clear, new version; line 0's with the transaction count too), one 8-byte
 *   store each. Stores to one cache line persist in program order, so a line whose busy bit
 *   is clear holds the payload that its version names. An entry is whole iff every line is
 *   not busy and carries the same version: a line caught before its payload began still has
 *   the old version, one caught in the middle is busy. (The paper's two alternating bits per
 *   line cannot tell a line's state before a rewrite from its state after one when a slot
 *   was left torn, with lines of both polarities; versions are never reused, so they can.)
 *
 * What may be reused, and when (the paper's gaps, fixed)
 *
 *   - A dead entry (superseded, or a tombstone) stays valid until its slot is reused; at
 *     recovery it loses to the newer version. A tombstone's slot may be rewritten only once
 *     every entry it cancels (older versions of its key) is overwritten durably, or the
 *     key would come back. Dead entries are therefore reused in death order (the version
 *     of the operation that killed them), superseded ones before tombstones: a tombstone
 *     is taken only when no older dead entry is left anywhere (tomb_ready), and if this
 *     very operation took one, its entries are written in two steps with a fence between
 *     (counted in extra_fences). Death order is why all entries of a map have one size.
 *   - Transactions: all entries share one version and carry the entry count; recovery
 *     drops a version with fewer valid entries. Reuse would break that count for committed
 *     transactions, so a durable watermark W says "every version <= W is complete" (fix B
 *     of the reference): raised when a transaction publishes, made durable by the next
 *     fence of any operation (which flushes it first), and a member of a transaction is
 *     rewritten only once a durable W covers it. Entries of a dropped transaction are
 *     invalidated durably at open, so that a later, larger W never blesses them.
 *   - Never-used slots have txncount 0. The version counter restarts above the largest
 *     version found. The reuse queues are rebuilt in death order: entries sorted by
 *     version, each superseded one dying when its successor was written, a tombstone right
 *     after its victim.
 *
 * Threads (the paper has one)
 *
 *   - The index is cut into 256 shards by key hash. An operation holds the writer locks of
 *     its keys' shards from start to publish, so one key's changes get versions, reach the
 *     media and reach the index in one order; changes to other keys run in parallel, their
 *     fences included. Lookups take only a shard's read lock, which writers take just to
 *     publish.
 *   - Slots come from lanes: a thread keeps to its own lane (16 of them), which holds a
 *     stash of never-used slots and the entries its operations killed. A lane whose queues
 *     are empty takes over half of an idle lane's, oldest first, so death order holds per
 *     lane; each lane publishes the death version of its oldest entry not yet overwritten
 *     durably, and tomb_ready reads them all. Versions come from one atomic counter; the
 *     shared lock (kr_hmap.lock) is taken only by transactions (to raise W past the ones
 *     still in flight), to refill a stash, and to wait.
 *   - W is stored under that lock (so it only grows) but flushed by whichever operation
 *     fences next, on any thread: an sfence orders only its own thread's flushes, so a
 *     thread that reuses a member of a transaction whose W no fence of its own covered
 *     fences W first (extra_fences). The crash simulator models fences per thread.
 *
 * Protection (KR_HMAP_PROTECT): the map's own mapping is attached as a protected region
 *   (region.c, through the public API): CRCs and parity per page in a sidecar, kept by a
 *   background pass, with sealed segments so that a crash leaves no stale redundancy
 *   trusted. At open the region is attached before the map is read and every page is
 *   verified (entries have no checksums of their own); poison is repaired at the access.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csum.h"
#include "err.h"
#include "layout.h"
#include "pmem.h"

#define P KR_PAGE_SIZE
#define LINE 64u
#define MIN_SIZE (64u << 10)
#define HMAP_FLAGS (KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT | KR_HMAP_TWO_FENCES | KR_HMAP_PROTECT)
#define HMAP_SCRUB_KIB_PER_S (16u << 10) /* background verification of a protected map */

struct ixent {
	uint64_t hash;
	uint64_t slot1; /* slot + 1; 0 = empty */
};

/* A dead entry: its slot, its death version (that of the operation that superseded it,
 * or its own for a tombstone) and, for a member of a transaction of 2+ entries, its own
 * version (else 0): that slot may be rewritten only once a durable watermark covers it. */
struct dead {
	uint64_t slot, dver, txver;
};

/* Dead entries in death order (a growable circular queue). */
struct ring {
	struct dead *v;
	uint64_t head, len, cap;
};

/* A transaction of 2+ entries between taking its version and publishing (kr_hmap.lock):
 * the watermark stays below it. */
struct inflight {
	struct inflight *next;
	uint64_t version;
};

#define NSHARDS 256u
#define NLANES 16u
#define STASH 64u

/* A part of the index, by key hash. Its writer lock is held by an operation on its keys
 * from its start to its publish: a key's changes are then written and published in version
 * order, and only the holder changes this part of the index. Its read-write lock keeps
 * lookups out of the holder's publish. */
struct shard {
	pthread_mutex_t writer;
	pthread_rwlock_t ixlock;
	struct ixent *ix; /* open addressing, linear probing, power-of-two capacity */
	uint64_t ixcap, count;
} __attribute__((aligned(64)));

/* Where operations find slots. A thread holds a lane for a whole operation, and threads
 * keep to their own lanes, so that slots cost no shared lock: a stash of never-used slots
 * refilled from the map's pool, and the entries the lane's operations killed, in death
 * order. */
struct lane {
	pthread_mutex_t lock;
	uint64_t stash[STASH];
	unsigned nstash;
	struct ring dead;  /* superseded entries: reusable in any order, taken oldest first */
	struct ring tombs; /* tombstones: see tomb_ready */
	/* Death version of the oldest dead entry this lane has not overwritten durably (queued,
	 * or taken by its operation in flight); UINT64_MAX: none. Never above the truth. */
	_Atomic uint64_t oldest_dead;
	_Atomic int64_t live; /* keys its operations added, minus those they removed */
} __attribute__((aligned(64)));

struct kr_hmap {
	struct shard shards[NSHARDS];
	struct lane lanes[NLANES];
	char *path;
	struct kr_pm pm;
	uint8_t *entries;
	uint64_t nslots;
	uint32_t L;
	size_t esize, capacity; /* bytes of key + value an entry holds */
	unsigned reserve;       /* slots new keys may not take */
	bool two_fences;        /* KR_HMAP_TWO_FENCES */
	kr_region *region;      /* KR_HMAP_PROTECT */
	_Atomic uint64_t next_version;
	_Atomic uint64_t wm_stored;  /* the watermark word's value (stored under lock) */
	_Atomic uint64_t wm_durable; /* a value the watermark word is known to hold durably */
	_Atomic uint64_t npool_seen; /* npool, read without the lock */
	_Atomic unsigned waiting;    /* operations waiting in wait_for_slots */
	_Atomic uint64_t extra_fences, waits;
	_Atomic unsigned next_lane;
	_Atomic unsigned stealing; /* steals under way */
	_Atomic uint64_t steals;   /* steals done */

	/* Lock order: shard writers (ascending), a lane, then lock or one shard's ixlock
	 * (never both). Only shard writers and a lane are held across a fence. */
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t moved; /* an operation published: waiting slot takers retry */
	uint64_t *pool, npool; /* never used, torn or dropped slots */
	struct inflight *txns;
	struct kr_hmap_stats st; /* the recovery counts */
};

/* Set while this thread runs a kr_hmap_foreach callback on that map. */
static _Thread_local const kr_hmap *iterating;

struct change {
	const void *key;
	size_t klen;
	const void *val; /* NULL: delete */
	size_t vlen;
	uint64_t hash;
	struct dead d; /* the slot the new entry goes to, and its record if it was dead */
	int from;      /* where the slot came from: FROM_* */
};

enum { FROM_STASH, FROM_DEAD, FROM_TOMBS };


struct kr_hmap_tx {
	kr_hmap *map;
	unsigned n;
	struct change c[KR_HMAP_MAX_TX];
	uint8_t *copies; /* keys and values, copied at tx_put */
	size_t used, cap;
	int err;
};

/* ---------------------------------------------------------------------------------------
 * Entries
 * ------------------------------------------------------------------------------------- */
static uint8_t *entry(const kr_hmap *m, uint64_t slot) { return m->entries + slot * m->esize; }
static uint64_t *word(const kr_hmap *m, uint64_t slot, unsigned line)
{
	return (uint64_t *)(entry(m, slot) + line * LINE);
}

/* Where payload byte off lives: line 0 has 48 bytes after its two words, later lines 56
 * after their one. */
static uint8_t *payload_at(const kr_hmap *m, uint64_t slot, size_t off, size_t *room)
{
	if (off < KR_HMAP_LINE0_PAYLOAD) {
		*room = KR_HMAP_LINE0_PAYLOAD - off;
		return entry(m, slot) + 16 + off;
	}
	off -= KR_HMAP_LINE0_PAYLOAD;
	*room = KR_HMAP_LINE_PAYLOAD - off % KR_HMAP_LINE_PAYLOAD;
	return entry(m, slot) + (1 + off / KR_HMAP_LINE_PAYLOAD) * LINE + 8 + off % KR_HMAP_LINE_PAYLOAD;
}

static void payload_read(const kr_hmap *m, uint64_t slot, size_t off, void *dst, size_t n)
{
	uint8_t *d = dst;
	while (n) {
		size_t room, k;
		const uint8_t *src = payload_at(m, slot, off, &room);
		k = n < room ? n : room;
		memcpy(d, src, k);
		d += k, off += k, n -= k;
	}
}

static void payload_write(kr_hmap *m, uint64_t slot, size_t off, const void *src, size_t n)
{
	const uint8_t *s = src;
	while (n) {
		size_t room, k;
		uint8_t *dst = payload_at(m, slot, off, &room);
		k = n < room ? n : room;
		kr_pm_copy(&m->pm, dst, s, k);
		s += k, off += k, n -= k;
	}
}

static bool payload_eq(const kr_hmap *m, uint64_t slot, const void *key, size_t n)
{
	const uint8_t *k = key;
	size_t off = 0;
	while (n) {
		size_t room, c;
		const uint8_t *src = payload_at(m, slot, off, &room);
		c = n < room ? n : room;
		if (memcmp(src, k, c))
			return false;
		k += c, off += c, n -= c;
	}
	return true;
}

static uint64_t meta_of(const kr_hmap *m, uint64_t slot) { return *word(m, slot, 0); }
static size_t klen_of(const kr_hmap *m, uint64_t slot) { return word(m, slot, 0)[1] & 0xffff; }
static size_t vlen_of(const kr_hmap *m, uint64_t slot) { return (word(m, slot, 0)[1] >> 16) & 0xffff; }
static unsigned txn_of(uint64_t meta) { return (unsigned)((meta & KR_HMAP_TXN_MASK) >> KR_HMAP_TXN_SHIFT); }
static uint64_t ver_of(uint64_t meta) { return meta >> KR_HMAP_VER_SHIFT; }

/* Whole: no line busy, every line's version that of line 0. */
static bool entry_whole(const kr_hmap *m, uint64_t slot)
{
	uint64_t v = ver_of(meta_of(m, slot));
	for (unsigned i = 0; i < m->L; i++) {
		uint64_t w = *word(m, slot, i);
		if ((w & KR_HMAP_BUSY) || ver_of(w) != v)
			return false;
	}
	return true;
}

/* Writes a whole entry into slot, whatever it held: busy bits and payload (entry_begin),
 * then the final words (entry_end); flushed, not fenced. */
static void entry_begin(kr_hmap *m, uint64_t slot, const struct change *c)
{
	/* 1. Every line busy before any of its payload changes. */
	for (unsigned i = 0; i < m->L; i++) {
		uint64_t *w = word(m, slot, i);
		kr_pm_store64(&m->pm, w, *w | KR_HMAP_BUSY);
	}
	/* 2. The payload (the calls order the stores, and x86 keeps their order). */
	uint64_t lens = (uint64_t)c->klen | (c->val ? (uint64_t)c->vlen << 16 : 0);
	kr_pm_store64(&m->pm, word(m, slot, 0) + 1, lens);
	payload_write(m, slot, 0, c->key, c->klen);
	if (c->val && c->vlen)
		payload_write(m, slot, c->klen, c->val, c->vlen);
}

static void entry_end(kr_hmap *m, uint64_t slot, uint64_t version, unsigned txncount,
		      const struct change *c)
{
	/* 3. Every line's final word: not busy, the new version (line 0: and the rest). */
	for (unsigned i = 1; i < m->L; i++)
		kr_pm_store64(&m->pm, word(m, slot, i), version << KR_HMAP_VER_SHIFT);
	uint64_t meta = ((uint64_t)txncount << KR_HMAP_TXN_SHIFT) | (c->val ? 0 : KR_HMAP_TOMB) |
			(version << KR_HMAP_VER_SHIFT);
	kr_pm_store64(&m->pm, word(m, slot, 0), meta);
	kr_pm_flush(&m->pm, entry(m, slot), m->esize);
}

/* Makes a whole entry torn for good (one store: line 0 busy), flushed. */
static void entry_invalidate(kr_hmap *m, uint64_t slot)
{
	uint64_t *w = word(m, slot, 0);
	kr_pm_store64(&m->pm, w, *w | KR_HMAP_BUSY);
	kr_pm_flush(&m->pm, w, 8);
}

/* ---------------------------------------------------------------------------------------
 * The DRAM index
 * ------------------------------------------------------------------------------------- */
static uint64_t key_hash(const void *key, size_t klen)
{
	uint64_t h = kr_crc64(key, klen);
	return h ? h : 1;
}

static struct shard *shard_of(kr_hmap *m, uint64_t h) { return &m->shards[h >> 56]; }

/* The position of key in its shard's index, or of the empty place where it would go. */
static uint64_t ix_find(const kr_hmap *m, const struct shard *sh, uint64_t h, const void *key,
			size_t klen)
{
	uint64_t mask = sh->ixcap - 1, i = h & mask;
	for (;; i = (i + 1) & mask) {
		const struct ixent *e = &sh->ix[i];
		if (!e->slot1)
			return i;
		if (e->hash == h && klen_of(m, e->slot1 - 1) == klen && payload_eq(m, e->slot1 - 1, key, klen))
			return i;
	}
}

/* A zeroed index table. Large ones are mapped already populated: pages of a fresh
 * allocation that are read before they are written map the shared zero page, and the
 * write that follows then costs every other CPU running the process a TLB shootdown (an
 * interrupt each, the cost that kept inserts from scaling with threads). */
#define IX_MAP_BYTES (16u << 10)
static struct ixent *ix_alloc(uint64_t cap)
{
	size_t bytes = cap * sizeof(struct ixent);
	if (bytes < IX_MAP_BYTES)
		return calloc(cap, sizeof(struct ixent));
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void ix_free(struct ixent *ix, uint64_t cap)
{
	if (cap * sizeof(struct ixent) < IX_MAP_BYTES)
		free(ix);
	else
		munmap(ix, cap * sizeof(struct ixent));
}

/* Room for k more keys in the shard's index (kept under 70% full). */
static int ix_make_room(struct shard *sh, uint64_t k)
{
	if ((sh->count + k) * 10 < sh->ixcap * 7)
		return KR_OK;
	uint64_t cap = sh->ixcap ? sh->ixcap : 64;
	while ((sh->count + k) * 10 >= cap * 7)
		cap *= 2;
	struct ixent *n = ix_alloc(cap), *old = sh->ix;
	if (!n)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for the index");
	for (uint64_t i = 0; i < sh->ixcap; i++)
		if (old[i].slot1) {
			uint64_t j = old[i].hash & (cap - 1);
			while (n[j].slot1)
				j = (j + 1) & (cap - 1);
			n[j] = old[i];
		}
	ix_free(old, sh->ixcap);
	sh->ix = n;
	sh->ixcap = cap;
	return KR_OK;
}

/* Removes position i (backward-shift deletion keeps probe chains whole). */
static void ix_remove(struct shard *sh, uint64_t i)
{
	uint64_t mask = sh->ixcap - 1, j = i;
	sh->ix[i].slot1 = 0;
	for (;;) {
		j = (j + 1) & mask;
		if (!sh->ix[j].slot1)
			break;
		uint64_t home = sh->ix[j].hash & mask;
		/* Move j back to i if i lies on j's path from home. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			sh->ix[i] = sh->ix[j];
			sh->ix[j].slot1 = 0;
			i = j;
		}
	}
	sh->count--;
}

/* ---------------------------------------------------------------------------------------
 * Slots: lanes, the pool, reuse in death order
 * ------------------------------------------------------------------------------------- */
/* Room for k more records (grown before an operation's fence: nothing may fail after). */
static int ring_reserve(struct ring *r, uint64_t k)
{
	if (r->len + k <= r->cap)
		return KR_OK;
	uint64_t cap = r->cap ? r->cap : 64;
	while (cap < r->len + k)
		cap *= 2;
	struct dead *v = malloc(cap * sizeof(*v));
	if (!v)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for the reuse queues");
	for (uint64_t i = 0; i < r->len; i++)
		v[i] = r->v[(r->head + i) % r->cap];
	free(r->v);
	r->v = v;
	r->head = 0;
	r->cap = cap;
	return KR_OK;
}

/* Appends the entry in slot, which died at version dver (room reserved). */
static void ring_push(const kr_hmap *m, struct ring *r, uint64_t slot, uint64_t dver)
{
	uint64_t meta = meta_of(m, slot);
	r->v[(r->head + r->len) % r->cap] = (struct dead){slot, dver, txn_of(meta) > 1 ? ver_of(meta) : 0};
	r->len++;
}

static struct dead ring_pop(struct ring *r)
{
	struct dead d = r->v[r->head];
	r->head = (r->head + 1) % r->cap;
	r->len--;
	return d;
}

static void ring_unpop(struct ring *r, struct dead d)
{
	r->head = (r->head + r->cap - 1) % r->cap;
	r->v[r->head] = d;
	r->len++;
}

static void lane_refresh(struct lane *l)
{
	atomic_store(&l->oldest_dead, l->dead.len ? l->dead.v[l->dead.head].dver : UINT64_MAX);
}

/* The calling thread's lane, locked: its own if free, else any free one, else its own. */
static struct lane *lane_acquire(kr_hmap *m)
{
	static _Thread_local unsigned mine = UINT32_MAX;
	if (mine == UINT32_MAX)
		mine = atomic_fetch_add(&m->next_lane, 1) % NLANES;
	for (unsigned k = 0; k < NLANES; k++) {
		struct lane *l = &m->lanes[(mine + k) % NLANES];
		if (pthread_mutex_trylock(&l->lock) == 0)
			return l;
	}
	pthread_mutex_lock(&m->lanes[mine].lock);
	return &m->lanes[mine];
}

static void pool_refill(kr_hmap *m, struct lane *l)
{
	if (!atomic_load(&m->npool_seen))
		return;
	pthread_mutex_lock(&m->lock);
	while (l->nstash < STASH && m->npool)
		l->stash[l->nstash++] = m->pool[--m->npool];
	atomic_store(&m->npool_seen, m->npool);
	pthread_mutex_unlock(&m->lock);
}

enum steal_kind { STEAL_STASH, STEAL_DEAD, STEAL_TOMBS };

/* Takes slots over from another lane that is not in use (trylock; *busy says some were):
 * all of its never-used stash into l's (empty) stash, or the oldest half of its dead
 * entries or tombstones into l's (empty) queue, so death order holds. Dead entries count
 * for l before they stop counting for the other lane: oldest_dead never runs ahead of the
 * truth. */
static bool steal(kr_hmap *m, struct lane *l, enum steal_kind kind, bool *busy)
{
	for (unsigned k = 0; k < NLANES; k++) {
		struct lane *o = &m->lanes[k];
		if (o == l)
			continue;
		if (pthread_mutex_trylock(&o->lock) != 0) {
			*busy = true;
			continue;
		}
		bool got;
		atomic_fetch_add(&m->stealing, 1); /* see tomb_ready */
		if (kind == STEAL_STASH) {
			got = o->nstash != 0;
			while (o->nstash)
				l->stash[l->nstash++] = o->stash[--o->nstash];
		} else {
			struct ring *from = kind == STEAL_TOMBS ? &o->tombs : &o->dead;
			struct ring *to = kind == STEAL_TOMBS ? &l->tombs : &l->dead;
			uint64_t n = (from->len + 1) / 2;
			got = n && ring_reserve(to, n) == KR_OK;
			if (got && kind == STEAL_DEAD && from->v[from->head].dver < atomic_load(&l->oldest_dead))
				atomic_store(&l->oldest_dead, from->v[from->head].dver);
			for (uint64_t i = 0; got && i < n; i++)
				to->v[(to->head + to->len++) % to->cap] = ring_pop(from);
		}
		lane_refresh(o); /* also forgets what a failed operation of o left behind */
		atomic_fetch_add(&m->steals, 1);
		atomic_fetch_sub(&m->stealing, 1);
		pthread_mutex_unlock(&o->lock);
		if (got)
			return true;
	}
	return false;
}

/* A tombstone that died at dver may be rewritten once every entry it cancels is overwritten
 * durably. Those died at dver or before; l's own are all taken (its dead queue is empty:
 * by published operations, or by the one being built, see slot_take's split), and every
 * other lane's must be gone too. An entry being moved by a steal may be seen in neither
 * lane, so a steal during the reading makes the answer "not now". */
static bool tomb_ready(kr_hmap *m, const struct lane *l, uint64_t dver)
{
	uint64_t steals = atomic_load(&m->steals);
	if (atomic_load(&m->stealing))
		return false;
	for (unsigned k = 0; k < NLANES; k++)
		if (&m->lanes[k] != l && atomic_load(&m->lanes[k].oldest_dead) <= dver)
			return false;
	return !atomic_load(&m->stealing) && atomic_load(&m->steals) == steals;
}

enum { TAKEN, RETRY, NONE };

/* The slot for change i of an operation holding lane l: a never-used one (the lane's, the
 * pool's), else the oldest dead entry of the lane, else never-used slots or the oldest dead
 * entries taken over from an idle lane, else the oldest tombstone that is ready. *min_dead is the oldest death version the operation took; if a tombstone
 * is newer, *split says from which change on its entries wait for a fence of their own.
 * RETRY: nothing usable now, but operations in flight will change that. */
static int slot_take(kr_hmap *m, struct lane *l, struct change *c, unsigned i,
		     uint64_t *min_dead, unsigned *split)
{
	bool busy = false;
	if (!l->nstash)
		pool_refill(m, l);
	if (!l->nstash && !l->dead.len)
		steal(m, l, STEAL_STASH, &busy);
	if (l->nstash) {
		c->d = (struct dead){l->stash[--l->nstash], 0, 0};
		c->from = FROM_STASH;
		return TAKEN;
	}
	if (l->dead.len || steal(m, l, STEAL_DEAD, &busy)) {
		c->d = ring_pop(&l->dead);
		c->from = FROM_DEAD;
		if (c->d.dver < *min_dead)
			*min_dead = c->d.dver;
	} else if ((l->tombs.len || steal(m, l, STEAL_TOMBS, &busy)) &&
		   tomb_ready(m, l, l->tombs.v[l->tombs.head].dver)) {
		c->d = ring_pop(&l->tombs);
		c->from = FROM_TOMBS;
		if (*min_dead <= c->d.dver && i < *split)
			*split = i;
	} else {
		return busy || l->tombs.len || atomic_load(&m->npool_seen) ? RETRY : NONE;
	}
	/* A transaction's member: no watermark covers it while an older transaction is still
	 * in flight, and rewriting it then could break that transaction's count. */
	if (c->d.txver > atomic_load(&m->wm_stored)) {
		ring_unpop(c->from == FROM_DEAD ? &l->dead : &l->tombs, c->d);
		return RETRY;
	}
	return TAKEN;
}

/* Gives back the slots of changes c[0..n) to lane l, in reverse. */
static void slots_return(struct lane *l, struct change *c, unsigned n)
{
	for (unsigned i = n; i-- > 0;) {
		if (c[i].from == FROM_DEAD)
			ring_unpop(&l->dead, c[i].d);
		else if (c[i].from == FROM_TOMBS)
			ring_unpop(&l->tombs, c[i].d);
		else
			l->stash[l->nstash++] = c[i].d.slot;
	}
}

/* Sleeps until an operation publishes (or a millisecond: a wakeup may be missed). */
static void wait_for_slots(kr_hmap *m)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&m->lock);
	atomic_fetch_add(&m->waiting, 1);
	pthread_cond_timedwait(&m->moved, &m->lock, &t);
	atomic_fetch_sub(&m->waiting, 1);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->waits, 1);
}

/* Live keys: the lanes' counts summed. */
static uint64_t live_keys(kr_hmap *m)
{
	int64_t n = 0;
	for (unsigned k = 0; k < NLANES; k++)
		n += atomic_load(&m->lanes[k].live);
	return n > 0 ? (uint64_t)n : 0;
}

/* ---------------------------------------------------------------------------------------
 * The watermark
 * ------------------------------------------------------------------------------------- */
/* The watermark word: W in bits 0-52, 11 check bits above, so that one 8-byte store
 * replaces it whole (a value and its complement in two words could be caught half
 * written in both copies at once). */
static uint64_t watermark_word(uint64_t w)
{
	return w | (uint64_t)(kr_crc32c(&w, sizeof(w)) & 0x7ff) << 53;
}

static uint64_t *watermark_at(const kr_hmap *m, int copy)
{
	return (uint64_t *)(m->pm.base + (size_t)copy * P + KR_HMAP_WM_OFF);
}

/* Stores W in both copies, not flushed (kr_hmap.lock held: the stores stay monotonic). */
static void watermark_store(kr_hmap *m, uint64_t w)
{
	for (int c = 0; c < 2; c++)
		kr_pm_store64(&m->pm, watermark_at(m, c), watermark_word(w));
	atomic_store(&m->wm_stored, w);
}

/* Writes back both copies, whoever stored them: a write-back carries the line as it is,
 * so after this thread's next fence the word durably holds what was stored before. */
static void watermark_flush(kr_hmap *m)
{
	for (int c = 0; c < 2; c++)
		kr_pm_flush(&m->pm, watermark_at(m, c), 8);
}

static void watermark_durable(kr_hmap *m, uint64_t w)
{
	uint64_t d = atomic_load(&m->wm_durable);
	while (d < w && !atomic_compare_exchange_weak(&m->wm_durable, &d, w))
		;
}

/* ---------------------------------------------------------------------------------------
 * Operations
 *
 * One operation (a put, a delete, a transaction) in four steps:
 *   1. lock the shards of its keys (ascending), so that the changes of one key are written
 *      and published in version order; drop deletes of absent keys; make index room;
 *   2. reserve: a lane, slots from it, a version (a transaction also registers, under
 *      kr_hmap.lock);
 *   3. write the entries and fence, holding only the shards and the lane;
 *   4. publish: the index (each shard's ixlock), the deaths into the lane; a transaction
 *      raises the watermark (kr_hmap.lock); unlock.
 * The watermark W says "every version <= W is complete". A transaction's publish raises it
 * to just below the oldest transaction still in flight; a store of W becomes durable when
 * the next operation of any thread flushes it before its fence, so a member of a
 * transaction is reused only once W covers it durably (else that operation fences W first,
 * counted in extra_fences; a single thread never needs to).
 * ------------------------------------------------------------------------------------- */
static int check_kv(const kr_hmap *m, size_t klen, const void *val, size_t vlen)
{
	if (klen == 0 || klen > KR_HMAP_MAX_KEY)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: key length %zu (1..%u)", klen, KR_HMAP_MAX_KEY);
	if (klen + (val ? vlen : 0) > m->capacity)
		return kr_err_set(KR_E_TOO_BIG, "hmap: %zu bytes of key and value, an entry holds %zu",
				  klen + (val ? vlen : 0), m->capacity);
	return KR_OK;
}

static int by_shard(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* The distinct shards of c[0..n), ascending (the lock order). */
static unsigned shards_of(const struct change *c, unsigned n, uint16_t *s)
{
	for (unsigned i = 0; i < n; i++)
		s[i] = (uint16_t)(c[i].hash >> 56);
	if (n > 1)
		qsort(s, n, sizeof(*s), by_shard);
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++)
		if (k == 0 || s[i] != s[k - 1])
			s[k++] = s[i];
	return k;
}

/* An operation being applied. */
struct op {
	struct change *c;
	unsigned n, fresh; /* changes; new keys among them */
	struct lane *lane;
	uint64_t version;
	unsigned split;      /* from this change on, entries wait for an extra fence */
	bool wm_fence;       /* fence the watermark before any entry */
	uint64_t wm_flushed; /* the watermark value this operation's fence makes durable */
	struct inflight txn;
};

/* Step 2. Fails (changing nothing, the lane released) or fills in every slot and op. */
static int reserve(kr_hmap *m, struct op *op)
{
	struct change *c = op->c;
	unsigned n = op->n;
	/* New keys may not take the last few slots: updates and deletes need one each
	 * (before they free the old one), and must never be refused for lack of room. The
	 * count is exact with one thread, and may overshoot by the changes in flight. */
	if (op->fresh && atomic_load(&m->npool_seen) < (uint64_t)n + m->reserve &&
	    live_keys(m) + op->fresh + m->reserve > m->nslots)
		return kr_err_set(KR_E_NOSPACE, "hmap: full (%" PRIu64 " live of %" PRIu64
				  " entries; the last %u are kept for updates and deletes)",
				  live_keys(m), m->nslots, m->reserve);
	for (;;) {
		op->lane = lane_acquire(m);
		struct lane *l = op->lane;
		int rc = ring_reserve(&l->dead, 2 * (uint64_t)n);
		if (rc == KR_OK)
			rc = ring_reserve(&l->tombs, n);
		uint64_t min_dead = UINT64_MAX;
		int got = TAKEN;
		unsigned i;
		op->split = n;
		for (i = 0; rc == KR_OK && got == TAKEN && i < n; i++)
			got = slot_take(m, l, &c[i], i, &min_dead, &op->split);
		if (rc == KR_OK && got == TAKEN)
			break;
		slots_return(l, c, got == TAKEN ? i : i - 1);
		pthread_mutex_unlock(&l->lock);
		if (rc != KR_OK)
			return rc;
		if (got == NONE)
			return kr_err_set(KR_E_NOSPACE, "hmap: no free entry (%" PRIu64 " live of %"
					  PRIu64 ")", live_keys(m), m->nslots);
		wait_for_slots(m); /* without the lane: others may take from it */
	}
	op->wm_fence = false;
	uint64_t durable = atomic_load(&m->wm_durable), stored = atomic_load(&m->wm_stored);
	for (unsigned i = 0; i < n; i++)
		op->wm_fence |= c[i].d.txver > durable;
	op->wm_flushed = stored > durable ? stored : 0; /* wm_fence implies it */
	if (n == 1) {
		op->version = atomic_fetch_add(&m->next_version, 1);
	} else { /* with its registration, so that no watermark passes it meanwhile */
		pthread_mutex_lock(&m->lock);
		op->version = atomic_fetch_add(&m->next_version, 1);
		op->txn = (struct inflight){m->txns, op->version};
		m->txns = &op->txn;
		pthread_mutex_unlock(&m->lock);
	}
	if (op->version > KR_HMAP_VER_MAX) { /* 2^53: not in this universe, but refused */
		slots_return(op->lane, c, n);
		pthread_mutex_unlock(&op->lane->lock);
		return kr_err_set(KR_E_NOSPACE, "hmap: versions exhausted");
	}
	return KR_OK;
}

/* Step 3: the entries, one fence (two for KR_HMAP_TWO_FENCES, and in the rare cases of
 * split and wm_fence). Returns the number of extra fences, or an error. */
static int write_entries(kr_hmap *m, const struct op *op)
{
	const struct change *c = op->c;
	unsigned n = op->n, split = op->split;
	int rc = KR_OK, extra = 0;
	if (op->wm_flushed)
		watermark_flush(m);
	if (op->wm_fence) {
		rc = kr_pm_fence(&m->pm);
		extra++;
	}
	if (m->two_fences) { /* the classic commit, for comparison: data, fence, marks */
		for (unsigned i = 0; i < n; i++) {
			entry_begin(m, c[i].d.slot, &c[i]);
			kr_pm_flush(&m->pm, entry(m, c[i].d.slot), m->esize);
		}
		int rc2 = kr_pm_fence(&m->pm);
		rc = rc != KR_OK ? rc : rc2;
		split = 0;
	}
	for (unsigned i = 0; i < n; i++) {
		if (i == split && !m->two_fences) { /* see slot_take; a crash between the two
						     * fences drops the whole transaction */
			int rc2 = kr_pm_fence(&m->pm);
			rc = rc != KR_OK ? rc : rc2;
			extra++;
		}
		if (!m->two_fences)
			entry_begin(m, c[i].d.slot, &c[i]);
		entry_end(m, c[i].d.slot, op->version, n, &c[i]);
	}
	int rc2 = kr_pm_fence(&m->pm); /* the one round trip */
	rc = rc != KR_OK ? rc : rc2;
	return rc != KR_OK ? rc : extra;
}

/* Step 4. The old entries die now (a tombstone right after its victim). */
static void publish(kr_hmap *m, struct op *op, int extra)
{
	struct lane *l = op->lane;
	int64_t delta = 0;
	for (unsigned i = 0; i < op->n; i++) {
		const struct change *c = &op->c[i];
		struct shard *sh = shard_of(m, c->hash);
		/* Only the holder of the shard's writer lock changes its index: finding the
		 * place needs no lock, changing it excludes the lookups. */
		uint64_t pos = ix_find(m, sh, c->hash, c->key, c->klen);
		uint64_t old1 = sh->ix[pos].slot1;
		if (old1)
			ring_push(m, &l->dead, old1 - 1, op->version);
		if (!c->val)
			ring_push(m, &l->tombs, c->d.slot, op->version);
		pthread_rwlock_wrlock(&sh->ixlock);
		if (old1 && c->val) {
			sh->ix[pos].slot1 = c->d.slot + 1;
		} else if (old1) {
			ix_remove(sh, pos);
			delta--;
		} else { /* the shard's writer lock kept the key's presence since step 1 */
			sh->ix[pos] = (struct ixent){c->hash, c->d.slot + 1};
			sh->count++;
			delta++;
		}
		pthread_rwlock_unlock(&sh->ixlock);
	}
	if (delta)
		atomic_fetch_add(&l->live, delta);
	lane_refresh(l);
	if (op->wm_flushed)
		watermark_durable(m, op->wm_flushed);
	if (extra)
		atomic_fetch_add(&m->extra_fences, (uint64_t)extra);
	if (op->n > 1 || atomic_load(&m->waiting)) {
		pthread_mutex_lock(&m->lock);
		if (op->n > 1) {
			struct inflight **p = &m->txns;
			while (*p != &op->txn)
				p = &(*p)->next;
			*p = op->txn.next;
			uint64_t w = atomic_load(&m->next_version) - 1;
			for (const struct inflight *o = m->txns; o; o = o->next)
				if (o->version - 1 < w)
					w = o->version - 1;
			if (w > atomic_load(&m->wm_stored))
				watermark_store(m, w);
		}
		pthread_cond_broadcast(&m->moved);
		pthread_mutex_unlock(&m->lock);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Step 1 after the locks: drops deletes of absent keys (from c), counts new keys, and makes
 * room for them in the index. Returns the changes left, or an error. */
static int prepare(kr_hmap *m, struct change *c, unsigned n, unsigned *fresh)
{
	unsigned k = 0;
	*fresh = 0;
	for (unsigned i = 0; i < n; i++) {
		struct shard *sh = shard_of(m, c[i].hash);
		bool there = sh->ix[ix_find(m, sh, c[i].hash, c[i].key, c[i].klen)].slot1 != 0;
		if (!c[i].val && !there)
			continue;
		if (c[i].val && !there) {
			++*fresh;
			uint64_t here = 1; /* new keys of this operation in this shard */
			for (unsigned j = 0; j < k; j++)
				here += c[j].hash >> 56 == c[i].hash >> 56 && c[j].val;
			if ((sh->count + here) * 10 >= sh->ixcap * 7) { /* only the writer changes them */
				pthread_rwlock_wrlock(&sh->ixlock);
				int rc = ix_make_room(sh, here);
				pthread_rwlock_unlock(&sh->ixlock);
				if (rc != KR_OK)
					return rc;
			}
		}
		c[k++] = c[i];
	}
	return (int)k;
}

/* Applies c[0..n) as one operation; deletes of absent keys are dropped first (from c).
 * Returns the number of changes written, or an error (then nothing changed). */
static int apply(kr_hmap *m, struct change *c, unsigned n)
{
	if (iterating == m)
		return kr_err_set(KR_E_MISUSE_STATE, "hmap: a change from inside kr_hmap_foreach");
	uint16_t s[KR_HMAP_MAX_TX];
	unsigned ns = shards_of(c, n, s);
	for (unsigned i = 0; i < ns; i++)
		pthread_mutex_lock(&m->shards[s[i]].writer);
	struct op op = {.c = c};
	int rc = prepare(m, c, n, &op.fresh);
	if (rc > 0) {
		op.n = (unsigned)rc;
		rc = reserve(m, &op);
		if (rc == KR_OK) {
			rc = write_entries(m, &op);
			publish(m, &op, rc > 0 ? rc : 0);
			rc = rc < 0 ? rc : (int)op.n;
		}
	}
	for (unsigned i = ns; i-- > 0;)
		pthread_mutex_unlock(&m->shards[s[i]].writer);
	return rc;
}

int kr_hmap_put(kr_hmap *m, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!m || !key || (!val && vlen))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	int rc = check_kv(m, klen, val ? val : "", vlen);
	if (rc != KR_OK)
		return rc;
	struct change c = {.key = key, .klen = klen, .val = val ? val : "", .vlen = vlen,
			   .hash = key_hash(key, klen)};
	rc = apply(m, &c, 1);
	return rc < 0 ? rc : KR_OK;
}

int kr_hmap_del(kr_hmap *m, const void *key, size_t klen)
{
	if (!m || !key)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	int rc = check_kv(m, klen, NULL, 0);
	if (rc != KR_OK)
		return rc;
	struct change c = {.key = key, .klen = klen, .hash = key_hash(key, klen)};
	return apply(m, &c, 1);
}

int kr_hmap_get(kr_hmap *m, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	if (!m || !key || klen == 0 || klen > KR_HMAP_MAX_KEY || (!val && cap))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: bad get arguments");
	/* Under the read lock no entry of the shard's index can die, so none can be rewritten. */
	uint64_t h = key_hash(key, klen);
	struct shard *sh = shard_of(m, h);
	pthread_rwlock_rdlock(&sh->ixlock);
	uint64_t s1 = sh->ix[ix_find(m, sh, h, key, klen)].slot1;
	if (s1) {
		size_t n = vlen_of(m, s1 - 1);
		if (vlen)
			*vlen = n;
		payload_read(m, s1 - 1, klen, val, n < cap ? n : cap);
	}
	pthread_rwlock_unlock(&sh->ixlock);
	return s1 != 0;
}

uint64_t kr_hmap_count(kr_hmap *m) { return m ? live_keys(m) : 0; }

int kr_hmap_foreach(kr_hmap *m,
		    int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen),
		    void *ctx)
{
	if (!m || !fn)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	if (iterating)
		return kr_err_set(KR_E_MISUSE_STATE, "hmap: kr_hmap_foreach inside kr_hmap_foreach");
	uint8_t buf[KR_HMAP_MAX_LINES * LINE];
	int rc = KR_OK;
	iterating = m;
	for (unsigned k = 0; rc == KR_OK && k < NSHARDS; k++) {
		struct shard *sh = &m->shards[k];
		pthread_rwlock_rdlock(&sh->ixlock);
		for (uint64_t i = 0; rc == KR_OK && i < sh->ixcap; i++) {
			if (!sh->ix[i].slot1)
				continue;
			uint64_t s = sh->ix[i].slot1 - 1;
			size_t kl = klen_of(m, s), vl = vlen_of(m, s);
			payload_read(m, s, 0, buf, kl + vl);
			rc = fn(ctx, buf, kl, buf + kl, vl);
		}
		pthread_rwlock_unlock(&sh->ixlock);
	}
	iterating = NULL;
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Transactions
 * ------------------------------------------------------------------------------------- */
int kr_hmap_tx_begin(kr_hmap *m, kr_hmap_tx **tx)
{
	if (!m || !tx)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	*tx = calloc(1, sizeof(**tx));
	if (!*tx)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for a transaction");
	(*tx)->map = m;
	return KR_OK;
}

static int tx_add(kr_hmap_tx *tx, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!tx || !key || (!val && vlen))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	if (tx->err)
		return tx->err;
	int rc = check_kv(tx->map, klen, val, vlen);
	if (rc == KR_OK && tx->n == KR_HMAP_MAX_TX)
		rc = kr_err_set(KR_E_MISUSE_ARG, "hmap: more than %u changes in a transaction", KR_HMAP_MAX_TX);
	uint64_t h = key_hash(key, klen);
	for (unsigned i = 0; rc == KR_OK && i < tx->n; i++)
		if (tx->c[i].hash == h && tx->c[i].klen == klen && !memcmp(tx->c[i].key, key, klen))
			rc = kr_err_set(KR_E_MISUSE_ARG, "hmap: a key changed twice in one transaction");
	size_t need = klen + (val ? vlen : 0);
	if (rc == KR_OK && tx->used + need > tx->cap) {
		/* Keys and values are copied; pointers into the old buffer move with it. */
		size_t cap = (tx->cap + need) * 2;
		uint8_t *b = realloc(tx->copies, cap);
		if (!b) {
			rc = kr_err_set(KR_E_NOMEM, "hmap: no memory for a transaction");
		} else {
			for (unsigned i = 0; i < tx->n; i++) {
				tx->c[i].key = b + ((const uint8_t *)tx->c[i].key - tx->copies);
				if (tx->c[i].val)
					tx->c[i].val = b + ((const uint8_t *)tx->c[i].val - tx->copies);
			}
			tx->copies = b;
			tx->cap = cap;
		}
	}
	if (rc != KR_OK)
		return tx->err = rc;
	struct change *c = &tx->c[tx->n++];
	memcpy(tx->copies + tx->used, key, klen);
	*c = (struct change){.key = tx->copies + tx->used, .klen = klen, .hash = h};
	tx->used += klen;
	if (val) {
		memcpy(tx->copies + tx->used, val, vlen);
		c->val = tx->copies + tx->used;
		c->vlen = vlen;
		tx->used += vlen;
	}
	return KR_OK;
}

int kr_hmap_tx_put(kr_hmap_tx *tx, const void *key, size_t klen, const void *val, size_t vlen)
{
	return tx_add(tx, key, klen, val ? val : "", vlen);
}

int kr_hmap_tx_del(kr_hmap_tx *tx, const void *key, size_t klen)
{
	return tx_add(tx, key, klen, NULL, 0);
}

void kr_hmap_tx_abort(kr_hmap_tx *tx)
{
	if (tx)
		free(tx->copies);
	free(tx);
}

int kr_hmap_tx_commit(kr_hmap_tx *tx)
{
	if (!tx)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL transaction");
	int rc = tx->err;
	if (rc == KR_OK && tx->n)
		rc = apply(tx->map, tx->c, tx->n); /* deletes of absent keys are left out */
	kr_hmap_tx_abort(tx);
	return rc < 0 ? rc : KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Create, open (recovery), close
 * ------------------------------------------------------------------------------------- */
static uint32_t hdr_crc(const struct kr_hmap_hdr *h)
{
	return kr_crc32c(h, offsetof(struct kr_hmap_hdr, crc));
}

static const struct kr_hmap_hdr *hdr_copy(const kr_hmap *m, int c)
{
	return (const struct kr_hmap_hdr *)(m->pm.base + (size_t)c * P);
}

/* The first sound header copy, or NULL. */
static const struct kr_hmap_hdr *hdr_valid(const kr_hmap *m)
{
	for (int c = 0; c < 2; c++)
		if (hdr_copy(m, c)->magic == KR_HMAP_MAGIC && hdr_copy(m, c)->crc == hdr_crc(hdr_copy(m, c)))
			return hdr_copy(m, c);
	return NULL;
}

static bool hdr_magic(const kr_hmap *m)
{
	return hdr_copy(m, 0)->magic == KR_HMAP_MAGIC || hdr_copy(m, 1)->magic == KR_HMAP_MAGIC;
}

/* A protected map opened without KR_HMAP_PROTECT would be written untracked, and its
 * sidecar would then take the new data for damage; an unprotected one has no sidecar. */
static int protection_matches(const kr_hmap *m, unsigned flags)
{
	const struct kr_hmap_hdr *h = hdr_valid(m);
	if (!h || !(h->flags & KR_HMAP_HDR_PROTECTED) == !(flags & KR_HMAP_PROTECT))
		return KR_OK;
	return kr_err_set(KR_E_MISUSE_ARG, h->flags & KR_HMAP_HDR_PROTECTED
			  ? "hmap: %s is protected: open it with KR_HMAP_PROTECT"
			  : "hmap: %s was created without KR_HMAP_PROTECT", m->path);
}

static int hmap_map(kr_hmap *m, int fd, size_t size, unsigned flags)
{
	int rc = kr_pm_map(&m->pm, fd, size, flags & (KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT), m->path);
	if (rc == KR_OK)
		m->entries = (uint8_t *)m->pm.base + 2 * P;
	return rc;
}

/* With KR_HMAP_PROTECT, attaches the mapping as a protected region before the map is
 * read: damage in pages covered by sound redundancy is repaired, the segments that were
 * being written at a crash are rebuilt from the data. */
static int hmap_protect(kr_hmap *m, size_t size, unsigned flags, bool verify)
{
	int rc = KR_OK;
	if (flags & KR_HMAP_PROTECT) {
		struct kr_region_opts ro = {.flags = flags & KR_OPEN_FORCE_PMEM ? KR_REGION_FORCE_PMEM : 0,
					    .scrub_kib_per_s = HMAP_SCRUB_KIB_PER_S};
		rc = kr_region_attach(m->path, m->pm.base, size, &ro, &m->region);
		/* Entries carry no checksums of their own: verify every page the redundancy
		 * covers before recovery reads them (about a tenth of recovery's own scan). */
		if (rc == KR_OK && verify)
			rc = kr_region_check(m->region, 0, 0, KR_REGION_CHECK_REPAIR, NULL);
		if (rc == KR_E_CORRUPT_REGION) { /* attached anyway: a map is not opened so */
			char msg[256];
			snprintf(msg, sizeof(msg), "%s", kr_errmsg());
			kr_region_close(m->region);
			m->region = NULL;
			rc = kr_err_set(KR_E_CORRUPT_REGION, "hmap: %s", msg);
		}
	}
	return rc;
}

kr_region *kr_hmap_region(kr_hmap *m) { return m ? m->region : NULL; }

static void hmap_free(kr_hmap *m)
{
	if (!m)
		return;
	if (m->region)
		kr_region_close(m->region);
	if (m->pm.base)
		kr_pm_unmap(&m->pm);
	if (m->pm.fd >= 0)
		close(m->pm.fd);
	for (unsigned i = 0; i < NSHARDS; i++) {
		ix_free(m->shards[i].ix, m->shards[i].ixcap);
		pthread_mutex_destroy(&m->shards[i].writer);
		pthread_rwlock_destroy(&m->shards[i].ixlock);
	}
	for (unsigned i = 0; i < NLANES; i++) {
		free(m->lanes[i].dead.v);
		free(m->lanes[i].tombs.v);
		pthread_mutex_destroy(&m->lanes[i].lock);
	}
	free(m->pool);
	free(m->path);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->moved);
	free(m);
}

static kr_hmap *hmap_new(const char *path)
{
	kr_hmap *m = NULL;
	if (posix_memalign((void **)&m, 64, sizeof(*m)) != 0)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->pm.fd = -1;
	m->path = strdup(path);
	for (unsigned i = 0; i < NSHARDS; i++) {
		pthread_mutex_init(&m->shards[i].writer, NULL);
		pthread_rwlock_init(&m->shards[i].ixlock, NULL);
	}
	for (unsigned i = 0; i < NLANES; i++) {
		pthread_mutex_init(&m->lanes[i].lock, NULL);
		m->lanes[i].oldest_dead = UINT64_MAX;
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->moved, NULL);
	if (!m->path) {
		hmap_free(m);
		m = NULL;
	}
	return m;
}

static int hmap_alloc(kr_hmap *m)
{
	m->esize = (size_t)m->L * LINE;
	m->capacity = KR_HMAP_LINE0_PAYLOAD + (size_t)(m->L - 1) * KR_HMAP_LINE_PAYLOAD;
	m->reserve = (unsigned)(m->nslots / 8 < KR_HMAP_MAX_TX + 1 ? m->nslots / 8 : KR_HMAP_MAX_TX + 1);
	m->pool = malloc(m->nslots * sizeof(uint64_t));
	if (!m->pool)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for %" PRIu64 " slots", m->nslots);
	int rc = KR_OK;
	for (unsigned i = 0; rc == KR_OK && i < NSHARDS; i++)
		rc = ix_make_room(&m->shards[i], 0);
	return rc;
}

int kr_hmap_create(const char *path, const struct kr_hmap_opts *o, kr_hmap **out)
{
	if (!path || !o || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	*out = NULL;
	uint32_t L = o->entry_lines ? o->entry_lines : 4;
	uint64_t size = o->size & ~(uint64_t)(P - 1);
	if (L > KR_HMAP_MAX_LINES || size < MIN_SIZE || (o->flags & ~HMAP_FLAGS))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: entry_lines 1..%u, size >= %u, flags "
				  "FORCE_PMEM, TWO_FENCES and PROTECT only", KR_HMAP_MAX_LINES, MIN_SIZE);
	kr_hmap *m = hmap_new(path);
	if (!m)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory");
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	m->pm.fd = fd;
	int rc;
	if (fd < 0) {
		rc = kr_err_errno(errno == EEXIST ? KR_E_IO_EXISTS : KR_E_IO_OPEN, "hmap: create %s", path);
		hmap_free(m);
		return rc;
	}
	m->L = L;
	m->two_fences = o->flags & KR_HMAP_TWO_FENCES;
	m->nslots = (size - 2 * P) / ((uint64_t)L * LINE);
	char sidecar[4096];
	snprintf(sidecar, sizeof(sidecar), "%s.krs", path);
	if (o->flags & KR_HMAP_PROTECT) /* the map is new: a sidecar left there is an old map's */
		unlink(sidecar);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || ftruncate(fd, (off_t)size) != 0) {
		rc = kr_err_errno(KR_E_IO, "hmap: size %s", path);
	} else if ((rc = hmap_map(m, fd, size, o->flags)) == KR_OK &&
		   (rc = hmap_protect(m, size, o->flags, false)) == KR_OK && (rc = hmap_alloc(m)) == KR_OK) {
		struct kr_hmap_hdr h = {.magic = KR_HMAP_MAGIC, .version = KR_HMAP_VERSION,
					.hdr_size = sizeof(h), .file_size = size, .nslots = m->nslots,
					.entry_lines = L,
					.flags = o->flags & KR_HMAP_PROTECT ? KR_HMAP_HDR_PROTECTED : 0};
		h.crc = hdr_crc(&h);
		for (int c = 0; c < 2; c++) {
			kr_pm_copy(&m->pm, m->pm.base + (size_t)c * P, &h, sizeof(h));
			kr_pm_flush(&m->pm, m->pm.base + (size_t)c * P, sizeof(h));
		}
		watermark_store(m, 0);
		watermark_flush(m);
		rc = kr_pm_fence(&m->pm); /* a zeroed file: every slot never used */
		for (uint64_t s = m->nslots; s-- > 0;)
			m->pool[m->npool++] = s;
		m->npool_seen = m->npool;
		m->next_version = 1;
	}
	if (rc != KR_OK) {
		hmap_free(m);
		unlink(path);
		if (o->flags & KR_HMAP_PROTECT)
			unlink(sidecar);
		return rc;
	}
	*out = m;
	return KR_OK;
}

struct found {
	uint64_t version, slot;
};

static int by_version(const void *a, const void *b)
{
	const struct found *x = a, *y = b;
	return x->version < y->version ? -1 : x->version > y->version ? 1 : (x->slot > y->slot) - (x->slot < y->slot);
}

static uint64_t watermark_read(const kr_hmap *m)
{
	uint64_t w = 0;
	for (int c = 0; c < 2; c++) {
		uint64_t word = *watermark_at(m, c);
		uint64_t v = word & KR_HMAP_VER_MAX;
		if (word == watermark_word(v) && v > w)
			w = v;
	}
	return w;
}

/* Scans the log and rebuilds everything in DRAM; invalidates dropped transactions. */
static int recover(kr_hmap *m)
{
	struct timespec ts0, ts1;
	clock_gettime(CLOCK_MONOTONIC, &ts0);
	struct found *f = malloc(m->nslots * sizeof(*f));
	if (!f)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory to recover");
	uint64_t nf = 0, maxv = 0;
	m->wm_stored = m->wm_durable = watermark_read(m);
	for (uint64_t s = 0; s < m->nslots; s++) {
		uint64_t meta = meta_of(m, s);
		if (!entry_whole(m, s)) {
			m->st.recovered_torn++;
			m->pool[m->npool++] = s;
		} else if (txn_of(meta) == 0) {
			m->pool[m->npool++] = s; /* never used */
		} else {
			f[nf++] = (struct found){ver_of(meta), s};
			if (ver_of(meta) > maxv)
				maxv = ver_of(meta);
		}
	}
	qsort(f, nf, sizeof(*f), by_version);
	/* Transactions above the watermark must be whole; the rest is dropped for good. */
	uint64_t kept = 0;
	int rc = KR_OK;
	for (uint64_t i = 0; i < nf;) {
		uint64_t j = i;
		while (j < nf && f[j].version == f[i].version)
			j++;
		unsigned want = txn_of(meta_of(m, f[i].slot));
		bool whole = f[i].version <= m->wm_stored || j - i == want;
		for (uint64_t k = i; k < j; k++) {
			if (whole) {
				f[kept++] = f[k];
			} else {
				entry_invalidate(m, f[k].slot);
				m->pool[m->npool++] = f[k].slot;
				m->st.recovered_dropped++;
			}
		}
		i = j;
	}
	if (m->st.recovered_dropped)
		rc = kr_pm_fence(&m->pm);
	nf = kept;
	/* Newest version wins; everything it supersedes dies in this (version) order, all
	 * into the first lane. */
	struct lane *l = &m->lanes[0];
	uint8_t key[KR_HMAP_MAX_KEY];
	int64_t live = 0;
	if (rc == KR_OK && (rc = ring_reserve(&l->dead, nf)) == KR_OK)
		rc = ring_reserve(&l->tombs, nf);
	for (uint64_t i = 0; rc == KR_OK && i < nf; i++) {
		uint64_t s = f[i].slot;
		size_t kl = klen_of(m, s);
		if (kl == 0 || kl > KR_HMAP_MAX_KEY || kl + vlen_of(m, s) > m->capacity) {
			rc = KR_CORRUPT(KR_E_CORRUPT, (uint64_t)(entry(m, s) - (uint8_t *)m->pm.base),
					"hmap: entry %" PRIu64 " has impossible lengths", s);
			break;
		}
		payload_read(m, s, 0, key, kl);
		uint64_t h = key_hash(key, kl);
		struct shard *sh = shard_of(m, h);
		if ((rc = ix_make_room(sh, 1)) != KR_OK)
			break;
		uint64_t pos = ix_find(m, sh, h, key, kl);
		bool tomb = meta_of(m, s) & KR_HMAP_TOMB;
		if (sh->ix[pos].slot1) {
			ring_push(m, &l->dead, sh->ix[pos].slot1 - 1, f[i].version);
			if (tomb) {
				ix_remove(sh, pos);
				live--;
			} else
				sh->ix[pos].slot1 = s + 1;
		} else if (!tomb) {
			sh->ix[pos] = (struct ixent){h, s + 1};
			sh->count++;
			live++;
		}
		if (tomb)
			ring_push(m, &l->tombs, s, f[i].version);
	}
	free(f);
	l->live = live;
	lane_refresh(l);
	m->npool_seen = m->npool;
	m->next_version = maxv + 1;
	/* Every version up to maxv is now whole or gone: say so, durably. */
	if (rc == KR_OK && maxv > m->wm_stored) {
		watermark_store(m, maxv);
		watermark_flush(m);
		rc = kr_pm_fence(&m->pm);
		m->wm_durable = maxv;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	m->st.recovery_ns = (uint64_t)(ts1.tv_sec - ts0.tv_sec) * 1000000000ull +
			    (uint64_t)(ts1.tv_nsec - ts0.tv_nsec);
	return rc;
}

int kr_hmap_open(const char *path, unsigned flags, kr_hmap **out)
{
	if (!path || !out || (flags & ~HMAP_FLAGS))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument or unknown flags");
	*out = NULL;
	kr_hmap *m = hmap_new(path);
	if (!m)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory");
	m->two_fences = flags & KR_HMAP_TWO_FENCES;
	int rc = KR_OK;
	struct stat st;
	m->pm.fd = open(path, O_RDWR | O_CLOEXEC);
	if (m->pm.fd < 0 || fstat(m->pm.fd, &st) != 0)
		rc = kr_err_errno(KR_E_IO_OPEN, "hmap: open %s", path);
	else if (flock(m->pm.fd, LOCK_EX | LOCK_NB) != 0)
		rc = kr_err_set(KR_E_IO_BUSY, "hmap: %s is open elsewhere", path);
	else if ((uint64_t)st.st_size < 2 * P)
		rc = kr_err_set(KR_E_FORMAT_NOT_POOL, "hmap: %s is too short to be a map", path);
	else
		rc = hmap_map(m, m->pm.fd, (size_t)st.st_size, flags);
	/* Protection is a property of the map, checked before the region is attached (which
	 * would create a sidecar) and again after (a header repaired by it). */
	if (rc == KR_OK && (rc = protection_matches(m, flags)) == KR_OK)
		rc = hmap_protect(m, (size_t)st.st_size, flags, true);
	if (rc == KR_OK && (rc = protection_matches(m, flags)) == KR_OK) {
		const struct kr_hmap_hdr *h = hdr_valid(m);
		if (!h)
			rc = hdr_magic(m) ? kr_err_set(KR_E_CORRUPT_HEADER, "hmap: both headers of %s damaged", path)
					  : kr_err_set(KR_E_FORMAT_NOT_POOL, "hmap: %s is not a keratin map", path);
		else if (h->version != KR_HMAP_VERSION)
			rc = kr_err_set(KR_E_FORMAT_VERSION, "hmap: %s has map format %u", path, h->version);
		else if (h->entry_lines == 0 || h->entry_lines > KR_HMAP_MAX_LINES ||
			 h->file_size != (uint64_t)st.st_size ||
			 h->nslots != (h->file_size - 2 * P) / ((uint64_t)h->entry_lines * LINE))
			rc = kr_err_set(KR_E_FORMAT_GEOMETRY, "hmap: %s: header disagrees with the file", path);
		if (rc == KR_OK) {
			m->L = h->entry_lines;
			m->nslots = h->nslots;
			if ((rc = hmap_alloc(m)) == KR_OK)
				rc = recover(m);
		}
	}
	if (rc != KR_OK) {
		hmap_free(m);
		return rc;
	}
	*out = m;
	return KR_OK;
}

int kr_hmap_close(kr_hmap *m)
{
	int rc = KR_OK;
	if (m && m->wm_stored > m->wm_durable) { /* leave nothing unflushed behind */
		watermark_flush(m);
		rc = kr_pm_fence(&m->pm);
	}
	if (m && m->region) { /* its final pass covers everything: CLEAN */
		int rc2 = kr_region_close(m->region);
		m->region = NULL;
		rc = rc != KR_OK ? rc : rc2;
	}
	hmap_free(m);
	return rc;
}

int kr_hmap_stats(kr_hmap *m, struct kr_hmap_stats *st)
{
	if (!m || !st)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->free_slots = m->npool;
	pthread_mutex_unlock(&m->lock);
	st->dead_slots = 0;
	for (unsigned k = 0; k < NLANES; k++) {
		struct lane *l = &m->lanes[k];
		pthread_mutex_lock(&l->lock);
		st->free_slots += l->nstash;
		st->dead_slots += l->dead.len + l->tombs.len;
		pthread_mutex_unlock(&l->lock);
	}
	st->nslots = m->nslots;
	st->entry_lines = m->L;
	st->live = live_keys(m);
	st->next_version = atomic_load(&m->next_version);
	st->extra_fences = atomic_load(&m->extra_fences);
	st->waits = atomic_load(&m->waits);
	return KR_OK;
}
