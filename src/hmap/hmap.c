/*
 * hmap.c - the single-trip persistent hash map (STPS; Cohen, Friedman and Larus, OOPSLA'17):
 * every put, delete or small transaction is durable after one fence. This file: entries,
 * the DRAM index, the watermark, operations and transactions; hmap_slots.c finds slots,
 * hmap_open.c creates, opens (recovery) and closes; stps.h holds what they share.
 *
 * The idea
 *
 *   The only durable state is a log of fixed-size entries (hmap_layout.h). An update writes a whole new entry into a free or dead slot,
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
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "stps.h"

/* Set while this thread runs a kr_hmap_foreach callback on that map. */
static _Thread_local const kr_hmap *iterating;

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
void hmap_payload_read(const kr_hmap *m, uint64_t slot, size_t off, void *dst, size_t n)
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

/* Whole: no line busy, every line's version that of line 0. */
bool hmap_entry_whole(const kr_hmap *m, uint64_t slot)
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
void hmap_entry_invalidate(kr_hmap *m, uint64_t slot)
{
	uint64_t *w = word(m, slot, 0);
	kr_pm_store64(&m->pm, w, *w | KR_HMAP_BUSY);
	kr_pm_flush(&m->pm, w, 8);
}

/* ---------------------------------------------------------------------------------------
 * The DRAM index
 * ------------------------------------------------------------------------------------- */
uint64_t hmap_key_hash(const void *key, size_t klen)
{
	uint64_t h = kr_crc64(key, klen);
	return h ? h : 1;
}

/* The position of key in its shard's index, or of the empty place where it would go. */
uint64_t hmap_ix_find(const kr_hmap *m, const struct shard *sh, uint64_t h, const void *key,
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
		return kr_calloc(cap, sizeof(struct ixent));
	void *p = kr_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void hmap_ix_free(struct ixent *ix, uint64_t cap)
{
	if (cap * sizeof(struct ixent) < IX_MAP_BYTES)
		free(ix);
	else
		munmap(ix, cap * sizeof(struct ixent));
}

/* Room for k more keys in the shard's index (kept under 70% full). */
int hmap_ix_make_room(struct shard *sh, uint64_t k)
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
	hmap_ix_free(old, sh->ixcap);
	sh->ix = n;
	sh->ixcap = cap;
	return KR_OK;
}

/* Removes position i (backward-shift deletion keeps probe chains whole). */
void hmap_ix_remove(struct shard *sh, uint64_t i)
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
 * The watermark
 * ------------------------------------------------------------------------------------- */
/* The watermark word: W in bits 0-52, 11 check bits above, so that one 8-byte store
 * replaces it whole (a value and its complement in two words could be caught half
 * written in both copies at once). */
uint64_t hmap_watermark_word(uint64_t w)
{
	return w | (uint64_t)(kr_crc32c(&w, sizeof(w)) & 0x7ff) << 53;
}

uint64_t *hmap_watermark_at(const kr_hmap *m, int copy)
{
	return (uint64_t *)(m->pm.base + (size_t)copy * P + KR_HMAP_WM_OFF);
}

/* Stores W in both copies, not flushed (kr_hmap.lock held: the stores stay monotonic). */
void hmap_watermark_store(kr_hmap *m, uint64_t w)
{
	for (int c = 0; c < 2; c++)
		kr_pm_store64(&m->pm, hmap_watermark_at(m, c), hmap_watermark_word(w));
	atomic_store(&m->wm_stored, w);
}

/* Writes back both copies, whoever stored them: a write-back carries the line as it is,
 * so after this thread's next fence the word durably holds what was stored before. */
void hmap_watermark_flush(kr_hmap *m)
{
	for (int c = 0; c < 2; c++)
		kr_pm_flush(&m->pm, hmap_watermark_at(m, c), 8);
}

void hmap_watermark_durable(kr_hmap *m, uint64_t w)
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
/* KR_OPEN_READONLY: the map's view is private, so a change would be silently lost. */
static int writable(const kr_hmap *m)
{
	return m->pm.readonly ? kr_err_set(KR_E_MISUSE_STATE, "hmap: %s is open read-only (KR_OPEN_READONLY)", m->path)
			      : KR_OK;
}

static int check_kv(const kr_hmap *m, size_t klen, const void *val, size_t vlen)
{
	int rc = writable(m);
	if (rc != KR_OK)
		return rc;
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
	    hmap_live_keys(m) + op->fresh + m->reserve > m->nslots)
		return kr_err_set(KR_E_NOSPACE, "hmap: full (%" PRIu64 " live of %" PRIu64
				  " entries; the last %u are kept for updates and deletes)",
				  hmap_live_keys(m), m->nslots, m->reserve);
	for (;;) {
		op->lane = hmap_lane_acquire(m);
		struct lane *l = op->lane;
		int rc = hmap_ring_reserve(&l->dead, 2 * (uint64_t)n);
		if (rc == KR_OK)
			rc = hmap_ring_reserve(&l->tombs, n);
		uint64_t min_dead = UINT64_MAX;
		int got = TAKEN;
		unsigned i;
		op->split = n;
		for (i = 0; rc == KR_OK && got == TAKEN && i < n; i++)
			got = hmap_slot_take(m, l, &c[i], i, &min_dead, &op->split);
		if (rc == KR_OK && got == TAKEN)
			break;
		hmap_slots_return(l, c, got == TAKEN ? i : i - 1);
		pthread_mutex_unlock(&l->lock);
		if (rc != KR_OK)
			return rc;
		if (got == NONE)
			return kr_err_set(KR_E_NOSPACE, "hmap: no free entry (%" PRIu64 " live of %"
					  PRIu64 ")", hmap_live_keys(m), m->nslots);
		hmap_wait_for_slots(m); /* without the lane: others may take from it */
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
		hmap_slots_return(op->lane, c, n);
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
		hmap_watermark_flush(m);
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
		uint64_t pos = hmap_ix_find(m, sh, c->hash, c->key, c->klen);
		uint64_t old1 = sh->ix[pos].slot1;
		if (old1)
			hmap_ring_push(m, &l->dead, old1 - 1, op->version);
		if (!c->val)
			hmap_ring_push(m, &l->tombs, c->d.slot, op->version);
		pthread_rwlock_wrlock(&sh->ixlock);
		if (old1 && c->val) {
			sh->ix[pos].slot1 = c->d.slot + 1;
		} else if (old1) {
			hmap_ix_remove(sh, pos);
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
	hmap_lane_refresh(l);
	if (op->wm_flushed)
		hmap_watermark_durable(m, op->wm_flushed);
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
				hmap_watermark_store(m, w);
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
		bool there = sh->ix[hmap_ix_find(m, sh, c[i].hash, c[i].key, c[i].klen)].slot1 != 0;
		if (!c[i].val && !there)
			continue;
		if (c[i].val && !there) {
			++*fresh;
			uint64_t here = 1; /* new keys of this operation in this shard */
			for (unsigned j = 0; j < k; j++)
				here += c[j].hash >> 56 == c[i].hash >> 56 && c[j].val;
			if ((sh->count + here) * 10 >= sh->ixcap * 7) { /* only the writer changes them */
				pthread_rwlock_wrlock(&sh->ixlock);
				int rc = hmap_ix_make_room(sh, here);
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
			   .hash = hmap_key_hash(key, klen)};
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
	struct change c = {.key = key, .klen = klen, .hash = hmap_key_hash(key, klen)};
	return apply(m, &c, 1);
}

int kr_hmap_get(kr_hmap *m, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	if (!m || !key || klen == 0 || klen > KR_HMAP_MAX_KEY || (!val && cap))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: bad get arguments");
	/* Under the read lock no entry of the shard's index can die, so none can be rewritten. */
	uint64_t h = hmap_key_hash(key, klen);
	struct shard *sh = shard_of(m, h);
	pthread_rwlock_rdlock(&sh->ixlock);
	uint64_t s1 = sh->ix[hmap_ix_find(m, sh, h, key, klen)].slot1;
	if (s1) {
		size_t n = vlen_of(m, s1 - 1);
		if (vlen)
			*vlen = n;
		hmap_payload_read(m, s1 - 1, klen, val, n < cap ? n : cap);
	}
	pthread_rwlock_unlock(&sh->ixlock);
	return s1 != 0;
}

uint64_t kr_hmap_count(kr_hmap *m) { return m ? hmap_live_keys(m) : 0; }

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
			hmap_payload_read(m, s, 0, buf, kl + vl);
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
	if (writable(m) != KR_OK)
		return KR_E_MISUSE_STATE;
	*tx = kr_calloc(1, sizeof(**tx));
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
	uint64_t h = hmap_key_hash(key, klen);
	for (unsigned i = 0; rc == KR_OK && i < tx->n; i++)
		if (tx->c[i].hash == h && tx->c[i].klen == klen && !memcmp(tx->c[i].key, key, klen))
			rc = kr_err_set(KR_E_MISUSE_ARG, "hmap: a key changed twice in one transaction");
	size_t need = klen + (val ? vlen : 0);
	if (rc == KR_OK && tx->used + need > tx->cap) {
		/* Keys and values are copied; pointers into the old buffer move with it. */
		size_t cap = (tx->cap + need) * 2;
		uint8_t *b = kr_realloc(tx->copies, cap);
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

