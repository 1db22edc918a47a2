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
 *     recovery it loses to the newer version. Reuse goes through ONE queue in death order,
 *     so the entries a tombstone cancels are overwritten before the tombstone is. That is
 *     why all entries of a map have one size: per-size queues would lose the order.
 *   - The order only helps if those overwrites are durable before a tombstone's slot is
 *     rewritten. Superseded entries may be reused in any order (nothing older depends on
 *     them), so they and tombstones wait in two queues: a tombstone is taken only when no
 *     older superseded entry is left, and if this very operation took one of them, its
 *     entries are written in two steps with a fence between (counted in extra_fences;
 *     it needs a transaction that exhausts the dead queue).
 *   - Transactions: all entries share one version and carry the entry count; recovery
 *     drops a version with fewer valid entries. Reuse would break that count for committed
 *     transactions, so a durable watermark W says "every version <= W is complete" (fix B
 *     of the reference): stored right after a transaction's fence, durable with the next
 *     fence, which comes before any of its entries can be reused. Entries of a dropped
 *     transaction are invalidated durably at open, so that a later, larger W never blesses
 *     them.
 *   - Never-used slots have txncount 0. The version counter restarts above the largest
 *     version found. The reuse queue is rebuilt in death order: entries sorted by version,
 *     each superseded one dying when its successor was written, a tombstone right after its
 *     victim.
 *
 * Not yet: several threads on one map (a handle is single-threaded), redundancy for the
 * map's pages (a protected region over the file), benchmarks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

struct ixent {
	uint64_t hash;
	uint64_t slot1; /* slot + 1; 0 = empty */
};

/* Dead entries in death order, with their death numbers and, for a member of a
 * transaction of 2+ entries, its version (0 otherwise): its slot may be rewritten only once
 * a durable watermark covers that version. */
struct ring {
	struct dead {
		uint64_t slot, seq, txver;
	} *v;
	uint64_t head, len, cap;
};

/* An operation between taking its slots and publishing them (kr_hmap.lock). */
struct inflight {
	struct inflight *next;
	uint64_t min_dead; /* death number of the oldest dead entry it took; UINT64_MAX: none */
	uint64_t txver;    /* its version if it is a transaction of 2+ entries, else 0 */
	uint64_t wm_flushed; /* watermark it flushed before its fence (0: none) */
	unsigned n;
};

#define NSHARDS 256u

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

struct kr_hmap {
	struct shard shards[NSHARDS];
	char *path;
	struct kr_pm pm;
	uint8_t *entries;
	uint64_t nslots;
	uint32_t L;
	size_t esize, capacity; /* bytes of key + value an entry holds */
	unsigned reserve;       /* slots new keys may not take */
	bool two_fences;        /* KR_HMAP_TWO_FENCES */

	/* Lock order: shard writers (ascending), then lock or a shard's ixlock (never both).
	 * Only shard writers are held across a fence. */
	pthread_mutex_t lock; /* everything below: a few dozen instructions at a time */
	pthread_cond_t moved; /* an operation published: blocked slot takers retry */
	unsigned waiting;
	uint64_t *free; /* never used, torn or dropped: reusable in any order */
	uint64_t nfree;
	struct ring dead;  /* superseded entries: reusable in any order, taken oldest first */
	struct ring tombs; /* tombstones: reusable once every older dead entry is overwritten */
	uint64_t dseq;     /* next death number */
	struct inflight *inflight;
	_Atomic uint64_t count; /* live keys (written under lock) */
	uint64_t next_version;
	uint64_t wm_stored;  /* the watermark word's value (stores are ordered by lock) */
	uint64_t wm_durable; /* a value the watermark word is known to hold durably */
	struct kr_hmap_stats st;
};

/* Set while this thread runs a kr_hmap_foreach callback on that map. */
static _Thread_local const kr_hmap *iterating;

struct change {
	const void *key;
	size_t klen;
	const void *val; /* NULL: delete */
	size_t vlen;
	uint64_t hash, slot; /* the slot the new entry goes to */
	uint64_t seq, txver; /* its death record, if it came from a queue */
	int from;            /* where slot came from: FROM_* */
};

enum { FROM_FREE, FROM_DEAD, FROM_TOMBS };


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

/* Room for k more keys in the shard's index (kept under 70% full). */
static int ix_make_room(struct shard *sh, uint64_t k)
{
	if ((sh->count + k) * 10 < sh->ixcap * 7)
		return KR_OK;
	uint64_t cap = sh->ixcap ? sh->ixcap : 64;
	while ((sh->count + k) * 10 >= cap * 7)
		cap *= 2;
	struct ixent *n = calloc(cap, sizeof(*n)), *old = sh->ix;
	if (!n)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for the index");
	for (uint64_t i = 0; i < sh->ixcap; i++)
		if (old[i].slot1) {
			uint64_t j = old[i].hash & (cap - 1);
			while (n[j].slot1)
				j = (j + 1) & (cap - 1);
			n[j] = old[i];
		}
	sh->ix = n;
	sh->ixcap = cap;
	free(old);
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
 * Slots: free stack and the reuse queues (kr_hmap.lock held)
 * ------------------------------------------------------------------------------------- */
/* The death record of the entry in slot: a member of a transaction carries its version. */
static void ring_push(kr_hmap *m, struct ring *r, uint64_t slot)
{
	uint64_t meta = meta_of(m, slot);
	uint64_t txver = txn_of(meta) > 1 ? ver_of(meta) : 0;
	r->v[(r->head + r->len) % r->cap] = (struct dead){slot, m->dseq++, txver};
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

/* The oldest dead entry any operation other than me has taken and not yet published. */
static uint64_t others_min_dead(const kr_hmap *m, const struct inflight *me)
{
	uint64_t min = UINT64_MAX;
	for (const struct inflight *o = m->inflight; o; o = o->next)
		if (o != me && o->min_dead < min)
			min = o->min_dead;
	return min;
}

/* The slot for change i of operation me: a free one, else the oldest dead entry, else the
 * oldest tombstone. A tombstone's slot is safe to rewrite only once the entries it cancels
 * are overwritten durably. All of them are older dead entries, already taken (the dead
 * queue is empty): by a published operation (durable), by another one still in flight
 * (then *wait: its fence is not ours), or by me (then *split says from which change on my
 * entries must wait for a fence of their own). */
static int slot_take(kr_hmap *m, struct inflight *me, struct change *c, unsigned i,
		     unsigned *split, bool *wait)
{
	struct dead d;
	if (m->nfree) {
		c->slot = m->free[--m->nfree];
		c->from = FROM_FREE;
		c->txver = 0;
		return KR_OK;
	}
	if (m->dead.len) {
		d = ring_pop(&m->dead);
		c->from = FROM_DEAD;
		if (d.seq < me->min_dead)
			me->min_dead = d.seq;
	} else if (m->tombs.len) {
		d = ring_pop(&m->tombs);
		c->from = FROM_TOMBS;
		if (others_min_dead(m, me) < d.seq)
			*wait = true;
		if (me->min_dead < d.seq && i < *split)
			*split = i;
	} else {
		return kr_err_set(KR_E_NOSPACE, "hmap: no free entry (%" PRIu64 " live of %" PRIu64 ")",
				  atomic_load(&m->count), m->nslots);
	}
	/* A transaction's member: no watermark covers it while an older transaction is still
	 * in flight, and rewriting it then could break that transaction's count. */
	if (d.txver > m->wm_stored)
		*wait = true;
	c->slot = d.slot;
	c->seq = d.seq;
	c->txver = d.txver;
	return KR_OK;
}

/* Gives back the slots of changes c[0..n), taken by an operation that failed or must wait
 * before writing anything, to where they came from, in reverse. */
static void slots_return(kr_hmap *m, struct change *c, unsigned n)
{
	for (unsigned i = n; i-- > 0;) {
		struct dead d = {c[i].slot, c[i].seq, c[i].txver};
		if (c[i].from == FROM_DEAD)
			ring_unpop(&m->dead, d);
		else if (c[i].from == FROM_TOMBS)
			ring_unpop(&m->tombs, d);
		else
			m->free[m->nfree++] = c[i].slot;
	}
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
	m->wm_stored = w;
}

/* Writes back both copies, whoever stored them: a write-back carries the line as it is,
 * so after this thread's next fence the word durably holds what was stored before. */
static void watermark_flush(kr_hmap *m)
{
	for (int c = 0; c < 2; c++)
		kr_pm_flush(&m->pm, watermark_at(m, c), 8);
}

/* ---------------------------------------------------------------------------------------
 * Operations
 *
 * One operation (a put, a delete, a transaction) in four steps:
 *   1. lock the stripes of its keys (ascending), so that the changes of one key are
 *      written and published in version order;
 *   2. reserve (kr_hmap.lock): index room, slots, a version, an in-flight record;
 *   3. write the entries and fence, holding only the stripes;
 *   4. publish: the index (ixlock), then the deaths, the watermark and the in-flight
 *      record (kr_hmap.lock); unlock the stripes.
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

/* Step 2. Fails (changing nothing) or fills in every c[i].slot, the version and me. */
static int reserve(kr_hmap *m, struct change *c, unsigned n, unsigned fresh,
		   struct inflight *me, uint64_t *version, unsigned *split, bool *wm_fence)
{
	int rc = KR_OK;
	pthread_mutex_lock(&m->lock);
	for (;;) {
		if (m->next_version > KR_HMAP_VER_MAX) {
			rc = kr_err_set(KR_E_NOSPACE, "hmap: versions exhausted");
			break;
		}
		/* New keys may not take the last few slots: updates and deletes need one each
		 * (before they free the old one), and must never be refused for lack of room. */
		if (fresh && m->nfree + m->dead.len + m->tombs.len < (uint64_t)n + m->reserve) {
			rc = kr_err_set(KR_E_NOSPACE, "hmap: full (%" PRIu64 " live of %" PRIu64
					" entries; the last %u are kept for updates and deletes)",
					atomic_load(&m->count), m->nslots, m->reserve);
			break;
		}
		*me = (struct inflight){.min_dead = UINT64_MAX, .n = n};
		*split = n;
		bool wait = false;
		unsigned i;
		for (i = 0; rc == KR_OK && i < n; i++)
			rc = slot_take(m, me, &c[i], i, split, &wait);
		if (rc == KR_OK && !wait)
			break;
		slots_return(m, c, rc == KR_OK ? n : i - 1);
		if (rc != KR_OK)
			break;
		m->waiting++;
		m->st.waits++;
		pthread_cond_wait(&m->moved, &m->lock);
		m->waiting--;
	}
	if (rc == KR_OK) {
		*wm_fence = false;
		for (unsigned i = 0; i < n; i++)
			*wm_fence |= c[i].txver > m->wm_durable;
		if (m->wm_stored > m->wm_durable)
			me->wm_flushed = m->wm_stored;
		*version = m->next_version++;
		me->txver = n > 1 ? *version : 0;
		me->next = m->inflight;
		m->inflight = me;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* Step 3: the entries, one fence (two for KR_HMAP_TWO_FENCES, and in the rare cases of
 * reserve's split and wm_fence). Returns the number of extra fences, or an error. */
static int write_entries(kr_hmap *m, struct change *c, unsigned n, uint64_t version,
			 unsigned split, bool wm_fence, struct inflight *me)
{
	int rc = KR_OK, extra = 0;
	if (me->wm_flushed)
		watermark_flush(m);
	if (wm_fence) {
		rc = kr_pm_fence(&m->pm);
		extra++;
	}
	if (m->two_fences) { /* the classic commit, for comparison: data, fence, marks */
		for (unsigned i = 0; i < n; i++) {
			entry_begin(m, c[i].slot, &c[i]);
			kr_pm_flush(&m->pm, entry(m, c[i].slot), m->esize);
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
			entry_begin(m, c[i].slot, &c[i]);
		entry_end(m, c[i].slot, version, n, &c[i]);
	}
	int rc2 = kr_pm_fence(&m->pm); /* the one round trip */
	rc = rc != KR_OK ? rc : rc2;
	return rc != KR_OK ? rc : extra;
}

/* Step 4. The old entries die now (a tombstone right after its victim). */
static void publish(kr_hmap *m, struct change *c, unsigned n, struct inflight *me, int extra)
{
	uint64_t died[2 * KR_HMAP_MAX_TX]; /* slot + 1, negated for a tombstone */
	unsigned nd = 0;
	int64_t delta = 0;
	for (unsigned i = 0; i < n; i++) {
		struct shard *sh = shard_of(m, c[i].hash);
		pthread_rwlock_wrlock(&sh->ixlock);
		uint64_t pos = ix_find(m, sh, c[i].hash, c[i].key, c[i].klen);
		if (sh->ix[pos].slot1) {
			died[nd++] = sh->ix[pos].slot1;
			if (c[i].val) {
				sh->ix[pos].slot1 = c[i].slot + 1;
			} else {
				ix_remove(sh, pos);
				delta--;
				died[nd++] = -(c[i].slot + 1);
			}
		} else {
			/* the shard's writer lock kept the key's presence since step 1 */
			sh->ix[pos] = (struct ixent){c[i].hash, c[i].slot + 1};
			sh->count++;
			delta++;
		}
		pthread_rwlock_unlock(&sh->ixlock);
	}

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < nd; i++) {
		bool tomb = died[i] > UINT64_MAX / 2;
		ring_push(m, tomb ? &m->tombs : &m->dead, (tomb ? -died[i] : died[i]) - 1);
	}
	atomic_store(&m->count, atomic_load(&m->count) + (uint64_t)delta);
	struct inflight **p = &m->inflight;
	while (*p != me)
		p = &(*p)->next;
	*p = me->next;
	if (me->wm_flushed > m->wm_durable)
		m->wm_durable = me->wm_flushed;
	if (n > 1) {
		uint64_t w = m->next_version - 1;
		for (const struct inflight *o = m->inflight; o; o = o->next)
			if (o->txver && o->txver - 1 < w)
				w = o->txver - 1;
		if (w > m->wm_stored)
			watermark_store(m, w);
	}
	m->st.extra_fences += (uint64_t)extra;
	if (m->waiting)
		pthread_cond_broadcast(&m->moved);
	pthread_mutex_unlock(&m->lock);
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
		if (c[i].val || there) {
			if (c[i].val && !there) {
				++*fresh;
				uint64_t here = 1; /* new keys of this operation in this shard */
				for (unsigned j = 0; j < k; j++)
					here += c[j].hash >> 56 == c[i].hash >> 56 && c[j].val;
				pthread_rwlock_wrlock(&sh->ixlock);
				int rc = ix_make_room(sh, here);
				pthread_rwlock_unlock(&sh->ixlock);
				if (rc != KR_OK)
					return rc;
			}
			c[k++] = c[i];
		}
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
	unsigned fresh;
	int rc = prepare(m, c, n, &fresh);
	if (rc > 0) {
		n = (unsigned)rc;
		struct inflight me;
		uint64_t version;
		unsigned split = n;
		bool wm_fence = false;
		rc = reserve(m, c, n, fresh, &me, &version, &split, &wm_fence);
		if (rc == KR_OK) {
			rc = write_entries(m, c, n, version, split, wm_fence, &me);
			publish(m, c, n, &me, rc > 0 ? rc : 0);
			rc = rc < 0 ? rc : (int)n;
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

uint64_t kr_hmap_count(kr_hmap *m) { return m ? atomic_load(&m->count) : 0; }

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

static int hmap_map(kr_hmap *m, int fd, size_t size, unsigned flags)
{
	int rc = kr_pm_map(&m->pm, fd, size, flags & KR_OPEN_FORCE_PMEM, m->path);
	if (rc == KR_OK)
		m->entries = (uint8_t *)m->pm.base + 2 * P;
	return rc;
}

static void hmap_free(kr_hmap *m)
{
	if (!m)
		return;
	if (m->pm.base)
		kr_pm_unmap(&m->pm);
	if (m->pm.fd >= 0)
		close(m->pm.fd);
	for (unsigned i = 0; i < NSHARDS; i++) {
		free(m->shards[i].ix);
		pthread_mutex_destroy(&m->shards[i].writer);
		pthread_rwlock_destroy(&m->shards[i].ixlock);
	}
	free(m->free);
	free(m->dead.v);
	free(m->tombs.v);
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
	/* Held for a few dozen instructions at a time: spin a little before sleeping. */
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&m->lock, &a);
	pthread_mutexattr_destroy(&a);
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
	m->free = malloc(m->nslots * sizeof(uint64_t));
	m->dead.v = malloc(m->nslots * sizeof(struct dead));
	m->tombs.v = malloc(m->nslots * sizeof(struct dead));
	m->dead.cap = m->tombs.cap = m->nslots;
	if (!m->free || !m->dead.v || !m->tombs.v)
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
	if (L > KR_HMAP_MAX_LINES || size < MIN_SIZE || (o->flags & ~(KR_OPEN_FORCE_PMEM | KR_HMAP_TWO_FENCES)))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: entry_lines 1..%u, size >= %u, flags "
				  "FORCE_PMEM and TWO_FENCES only", KR_HMAP_MAX_LINES, MIN_SIZE);
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
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || ftruncate(fd, (off_t)size) != 0) {
		rc = kr_err_errno(KR_E_IO, "hmap: size %s", path);
	} else if ((rc = hmap_map(m, fd, size, o->flags)) == KR_OK && (rc = hmap_alloc(m)) == KR_OK) {
		struct kr_hmap_hdr h = {.magic = KR_HMAP_MAGIC, .version = KR_HMAP_VERSION,
					.hdr_size = sizeof(h), .file_size = size, .nslots = m->nslots,
					.entry_lines = L};
		h.crc = hdr_crc(&h);
		for (int c = 0; c < 2; c++) {
			kr_pm_copy(&m->pm, m->pm.base + (size_t)c * P, &h, sizeof(h));
			kr_pm_flush(&m->pm, m->pm.base + (size_t)c * P, sizeof(h));
		}
		watermark_store(m, 0);
		watermark_flush(m);
		rc = kr_pm_fence(&m->pm); /* a zeroed file: every slot never used */
		for (uint64_t s = m->nslots; s-- > 0;)
			m->free[m->nfree++] = s;
		m->next_version = 1;
	}
	if (rc != KR_OK) {
		unlink(path);
		hmap_free(m);
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
			m->free[m->nfree++] = s;
		} else if (txn_of(meta) == 0) {
			m->free[m->nfree++] = s; /* never used */
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
				m->free[m->nfree++] = f[k].slot;
				m->st.recovered_dropped++;
			}
		}
		i = j;
	}
	if (m->st.recovered_dropped)
		rc = kr_pm_fence(&m->pm);
	nf = kept;
	/* Newest version wins; everything it supersedes dies in this (version) order. */
	uint8_t key[KR_HMAP_MAX_KEY];
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
			ring_push(m, &m->dead, sh->ix[pos].slot1 - 1);
			if (tomb) {
				ix_remove(sh, pos);
				m->count--;
			} else
				sh->ix[pos].slot1 = s + 1;
		} else if (!tomb) {
			sh->ix[pos] = (struct ixent){h, s + 1};
			sh->count++;
			m->count++;
		}
		if (tomb)
			ring_push(m, &m->tombs, s);
	}
	free(f);
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
	if (!path || !out || (flags & ~(KR_OPEN_FORCE_PMEM | KR_HMAP_TWO_FENCES)))
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
	if (rc == KR_OK) {
		const struct kr_hmap_hdr *a = (const void *)m->pm.base, *b = (const void *)(m->pm.base + P);
		bool va = a->magic == KR_HMAP_MAGIC && a->crc == hdr_crc(a);
		bool vb = b->magic == KR_HMAP_MAGIC && b->crc == hdr_crc(b);
		const struct kr_hmap_hdr *h = va ? a : b;
		if (!va && !vb)
			rc = a->magic == KR_HMAP_MAGIC || b->magic == KR_HMAP_MAGIC
				     ? kr_err_set(KR_E_CORRUPT_HEADER, "hmap: both headers of %s damaged", path)
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
	hmap_free(m);
	return rc;
}

int kr_hmap_stats(kr_hmap *m, struct kr_hmap_stats *st)
{
	if (!m || !st)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->nslots = m->nslots;
	st->entry_lines = m->L;
	st->live = atomic_load(&m->count);
	st->free_slots = m->nfree;
	st->dead_slots = m->dead.len + m->tombs.len;
	st->next_version = m->next_version;
	pthread_mutex_unlock(&m->lock);
	return KR_OK;
}
