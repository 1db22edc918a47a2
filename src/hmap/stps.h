/*
 * stps.h - the single-trip hash map's insides, shared by its three files: hmap.c (entries,
 * the index, the watermark, operations), hmap_slots.c (where an operation's slots come
 * from: lanes and reuse in death order) and hmap_open.c (create, open and recovery,
 * protection, close). The design is told at the top of hmap.c.
 */
#ifndef KR_STPS_H
#define KR_STPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"
#include "hmap_layout.h"
#include "pmem.h"

#define P 4096u /* the map file's page: headers sit at 0 and P, entries from 2P (hmap_layout.h) */
#define LINE 64u

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

/* ---- entries (hmap.c) --------------------------------------------------------------- */
static inline uint8_t *entry(const kr_hmap *m, uint64_t slot) { return m->entries + slot * m->esize; }
static inline uint64_t *word(const kr_hmap *m, uint64_t slot, unsigned line)
{
	return (uint64_t *)(entry(m, slot) + line * LINE);
}

/* Where payload byte off lives: line 0 has 48 bytes after its two words, later lines 56
 * after their one. */
static inline uint8_t *payload_at(const kr_hmap *m, uint64_t slot, size_t off, size_t *room)
{
	if (off < KR_HMAP_LINE0_PAYLOAD) {
		*room = KR_HMAP_LINE0_PAYLOAD - off;
		return entry(m, slot) + 16 + off;
	}
	off -= KR_HMAP_LINE0_PAYLOAD;
	*room = KR_HMAP_LINE_PAYLOAD - off % KR_HMAP_LINE_PAYLOAD;
	return entry(m, slot) + (1 + off / KR_HMAP_LINE_PAYLOAD) * LINE + 8 + off % KR_HMAP_LINE_PAYLOAD;
}

static inline uint64_t meta_of(const kr_hmap *m, uint64_t slot) { return *word(m, slot, 0); }
static inline size_t klen_of(const kr_hmap *m, uint64_t slot) { return word(m, slot, 0)[1] & 0xffff; }
static inline size_t vlen_of(const kr_hmap *m, uint64_t slot) { return (word(m, slot, 0)[1] >> 16) & 0xffff; }
static inline unsigned txn_of(uint64_t meta) { return (unsigned)((meta & KR_HMAP_TXN_MASK) >> KR_HMAP_TXN_SHIFT); }
static inline uint64_t ver_of(uint64_t meta) { return meta >> KR_HMAP_VER_SHIFT; }

void hmap_payload_read(const kr_hmap *m, uint64_t slot, size_t off, void *dst, size_t n);
bool hmap_entry_whole(const kr_hmap *m, uint64_t slot);
void hmap_entry_invalidate(kr_hmap *m, uint64_t slot);

/* ---- the DRAM index (hmap.c) -------------------------------------------------------- */
static inline struct shard *shard_of(kr_hmap *m, uint64_t h) { return &m->shards[h >> 56]; }

uint64_t hmap_key_hash(const void *key, size_t klen);
uint64_t hmap_ix_find(const kr_hmap *m, const struct shard *sh, uint64_t h, const void *key,
		      size_t klen);
int hmap_ix_make_room(struct shard *sh, uint64_t k);
void hmap_ix_free(struct ixent *ix, uint64_t cap);
void hmap_ix_remove(struct shard *sh, uint64_t i);

/* ---- the watermark (hmap.c) --------------------------------------------------------- */
uint64_t hmap_watermark_word(uint64_t w);
uint64_t *hmap_watermark_at(const kr_hmap *m, int copy);
void hmap_watermark_store(kr_hmap *m, uint64_t w);
void hmap_watermark_flush(kr_hmap *m);
void hmap_watermark_durable(kr_hmap *m, uint64_t w);

/* ---- slots (hmap_slots.c) ----------------------------------------------------------- */
enum { TAKEN, RETRY, NONE };
int hmap_ring_reserve(struct ring *r, uint64_t k);
void hmap_ring_push(const kr_hmap *m, struct ring *r, uint64_t slot, uint64_t dver);
void hmap_lane_refresh(struct lane *l);
struct lane *hmap_lane_acquire(kr_hmap *m);
int hmap_slot_take(kr_hmap *m, struct lane *l, struct change *c, unsigned i, uint64_t *min_dead,
		   unsigned *split);
void hmap_slots_return(struct lane *l, struct change *c, unsigned n);
void hmap_wait_for_slots(kr_hmap *m);
uint64_t hmap_live_keys(kr_hmap *m);

#endif
