/*
 * hmap_slots.c - where the single-trip map's operations find slots: lanes (a stash of
 * never-used slots, dead entries and tombstones in death order), the shared pool, taking
 * over an idle lane's slots, and the rule that keeps a tombstone until the entries it
 * cancels are overwritten durably. Why these rules: hmap.c, "What may be reused" and
 * "Threads".
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "err.h"
#include "fault.h"
#include "stps.h"

/* Room for k more records (grown before an operation's fence: nothing may fail after). */
int hmap_ring_reserve(struct ring *r, uint64_t k)
{
	if (r->len + k <= r->cap)
		return KR_OK;
	uint64_t cap = r->cap ? r->cap : 64;
	while (cap < r->len + k)
		cap *= 2;
	struct dead *v = kr_malloc(cap * sizeof(*v));
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
void hmap_ring_push(const kr_hmap *m, struct ring *r, uint64_t slot, uint64_t dver)
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

void hmap_lane_refresh(struct lane *l)
{
	atomic_store(&l->oldest_dead, l->dead.len ? l->dead.v[l->dead.head].dver : UINT64_MAX);
}

/* The calling thread's lane, locked: its own if free, else any free one, else its own. */
struct lane *hmap_lane_acquire(kr_hmap *m)
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
			got = n && hmap_ring_reserve(to, n) == KR_OK;
			if (got && kind == STEAL_DEAD && from->v[from->head].dver < atomic_load(&l->oldest_dead))
				atomic_store(&l->oldest_dead, from->v[from->head].dver);
			for (uint64_t i = 0; got && i < n; i++)
				to->v[(to->head + to->len++) % to->cap] = ring_pop(from);
		}
		hmap_lane_refresh(o); /* also forgets what a failed operation of o left behind */
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

/* The slot for change i of an operation holding lane l: a never-used one (the lane's, the
 * pool's), else the oldest dead entry of the lane, else never-used slots or the oldest dead
 * entries taken over from an idle lane, else the oldest tombstone that is ready. *min_dead is the oldest death version the operation took; if a tombstone
 * is newer, *split says from which change on its entries wait for a fence of their own.
 * RETRY: nothing usable now, but operations in flight will change that. */
int hmap_slot_take(kr_hmap *m, struct lane *l, struct change *c, unsigned i,
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
void hmap_slots_return(struct lane *l, struct change *c, unsigned n)
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
void hmap_wait_for_slots(kr_hmap *m)
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
uint64_t hmap_live_keys(kr_hmap *m)
{
	int64_t n = 0;
	for (unsigned k = 0; k < NLANES; k++)
		n += atomic_load(&m->lanes[k].live);
	return n > 0 ? (uint64_t)n : 0;
}

