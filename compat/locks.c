/*
 * locks.c - keratin-pmemobj's persistent locks (PMEMmutex, PMEMrwlock, PMEMcond) and the
 * TX_PARAM_MUTEX / TX_PARAM_RWLOCK locks of transactions.
 *
 * libpmemobj keeps a pthread lock inside the 64 bytes of pool memory and re-initialises it
 * on its first use after each open. keratin does not write those bytes at all: each lock
 * is a DRAM pthread object found by the lock's address in a table. So a lock never changes
 * a checksummed byte of its object (no false damage, no parity traffic), and every lock is
 * unlocked after every open, since the table starts empty. The table's own mutex is held
 * only to find or make an entry, never while waiting for a lock. Entries of a pool go at
 * its close (kp_locks_forget); an entry whose object was freed stays until then, harmless.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "compat.h"

enum kind { MUTEX, RWLOCK, COND };

struct entry {
	const void *addr;
	enum kind kind;
	union {
		pthread_mutex_t mutex;
		pthread_rwlock_t rwlock;
		pthread_cond_t cond;
	} u;
	struct entry *next;
};

/* Chained by address; the table doubles when it holds more entries than chains (PMDK's
 * hashmap_atomic has a lock in each of its 100000 list heads: with a fixed 4096 chains the
 * search was a quarter of its insert time). */
static struct entry **table;
static unsigned table_bits; /* 1 << table_bits chains, 0 before the first lock */
static size_t nentries;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t bucket(const void *addr, unsigned bits)
{
	return (size_t)(((uintptr_t)addr >> 6) * 0x9e3779b97f4a7c15ull >> (64 - bits));
}

/* Caller holds table_lock. Out of memory: the chains just grow longer. */
static void grow(void)
{
	unsigned bits = table_bits ? table_bits + 1 : 12;
	struct entry **t = calloc((size_t)1 << bits, sizeof(*t));
	if (!t)
		return;
	for (size_t b = 0; table_bits && b < (size_t)1 << table_bits; b++)
		while (table[b]) {
			struct entry *e = table[b];
			table[b] = e->next;
			e->next = t[bucket(e->addr, bits)];
			t[bucket(e->addr, bits)] = e;
		}
	free(table);
	table = t;
	table_bits = bits;
}

/* The entry of the lock at addr, made (unlocked) on first use. NULL: out of memory. */
static struct entry *lookup(const void *addr, enum kind kind)
{
	pthread_mutex_lock(&table_lock);
	if (!table_bits || nentries >= (size_t)1 << table_bits)
		grow();
	struct entry *e = NULL;
	if (table_bits) {
		size_t b = bucket(addr, table_bits);
		e = table[b];
		while (e && !(e->addr == addr && e->kind == kind))
			e = e->next;
		if (!e && (e = calloc(1, sizeof(*e)))) {
			e->addr = addr;
			e->kind = kind;
			if (kind == MUTEX)
				pthread_mutex_init(&e->u.mutex, NULL);
			else if (kind == RWLOCK)
				pthread_rwlock_init(&e->u.rwlock, NULL);
			else
				pthread_cond_init(&e->u.cond, NULL);
			e->next = table[b];
			table[b] = e;
			nentries++;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return e;
}

void kp_locks_forget(const char *base, size_t size)
{
	pthread_mutex_lock(&table_lock);
	for (size_t b = 0; table_bits && b < (size_t)1 << table_bits; b++) {
		struct entry **pp = &table[b];
		while (*pp) {
			struct entry *e = *pp;
			if ((const char *)e->addr >= base && (const char *)e->addr < base + size) {
				*pp = e->next;
				nentries--;
				free(e);
			} else {
				pp = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&table_lock);
}

/* A lock must be in an open pool (pop's, when it is given). */
static int check(PMEMobjpool *pop, const void *lock)
{
	struct kp_pool *p = kp_pool_by_addr(lock);
	if (!lock || !p || (pop && (char *)pop != p->base))
		return kp_err(EINVAL, "lock %p is not in the pool", lock), EINVAL;
	return 0;
}

#define ENTRY_OR_FAIL(e, pop, lock, kind)                                                   \
	struct entry *e;                                                                    \
	do {                                                                                \
		int rc_ = check((pop), (lock));                                             \
		if (rc_)                                                                    \
			return rc_;                                                         \
		if (!(e = lookup((lock), (kind))))                                          \
			return ENOMEM;                                                      \
	} while (0)

int kp_lock_mutex(struct kp_pool *p, PMEMmutex *m)
{
	return pmemobj_mutex_lock((PMEMobjpool *)p->base, m);
}

int kp_unlock_mutex(struct kp_pool *p, PMEMmutex *m)
{
	return pmemobj_mutex_unlock((PMEMobjpool *)p->base, m);
}

int kp_lock_rwlock_write(struct kp_pool *p, PMEMrwlock *l)
{
	return pmemobj_rwlock_wrlock((PMEMobjpool *)p->base, l);
}

int kp_unlock_rwlock(struct kp_pool *p, PMEMrwlock *l)
{
	return pmemobj_rwlock_unlock((PMEMobjpool *)p->base, l);
}

/* The zero calls reset a lock nobody holds: its entry goes, the next use makes a new one. */
static void zero(const void *addr, enum kind kind)
{
	pthread_mutex_lock(&table_lock);
	for (struct entry **pp = table_bits ? &table[bucket(addr, table_bits)] : NULL; pp && *pp;
	     pp = &(*pp)->next)
		if ((*pp)->addr == addr && (*pp)->kind == kind) {
			struct entry *e = *pp;
			*pp = e->next;
			nentries--;
			free(e);
			break;
		}
	pthread_mutex_unlock(&table_lock);
}

PMEMOBJ_API void pmemobj_mutex_zero(PMEMobjpool *pop, PMEMmutex *mutexp)
{
	if (check(pop, mutexp) == 0)
		zero(mutexp, MUTEX);
}

PMEMOBJ_API int pmemobj_mutex_lock(PMEMobjpool *pop, PMEMmutex *mutexp)
{
	ENTRY_OR_FAIL(e, pop, mutexp, MUTEX);
	return pthread_mutex_lock(&e->u.mutex);
}

PMEMOBJ_API int pmemobj_mutex_timedlock(PMEMobjpool *pop, PMEMmutex *__restrict mutexp,
					const struct timespec *__restrict abs_timeout)
{
	ENTRY_OR_FAIL(e, pop, mutexp, MUTEX);
	return pthread_mutex_timedlock(&e->u.mutex, abs_timeout);
}

PMEMOBJ_API int pmemobj_mutex_trylock(PMEMobjpool *pop, PMEMmutex *mutexp)
{
	ENTRY_OR_FAIL(e, pop, mutexp, MUTEX);
	return pthread_mutex_trylock(&e->u.mutex);
}

PMEMOBJ_API int pmemobj_mutex_unlock(PMEMobjpool *pop, PMEMmutex *mutexp)
{
	ENTRY_OR_FAIL(e, pop, mutexp, MUTEX);
	return pthread_mutex_unlock(&e->u.mutex);
}

PMEMOBJ_API void pmemobj_rwlock_zero(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	if (check(pop, rwlockp) == 0)
		zero(rwlockp, RWLOCK);
}

PMEMOBJ_API int pmemobj_rwlock_rdlock(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_rdlock(&e->u.rwlock);
}

PMEMOBJ_API int pmemobj_rwlock_wrlock(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_wrlock(&e->u.rwlock);
}

PMEMOBJ_API int pmemobj_rwlock_timedrdlock(PMEMobjpool *pop, PMEMrwlock *__restrict rwlockp,
					   const struct timespec *__restrict abs_timeout)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_timedrdlock(&e->u.rwlock, abs_timeout);
}

PMEMOBJ_API int pmemobj_rwlock_timedwrlock(PMEMobjpool *pop, PMEMrwlock *__restrict rwlockp,
					   const struct timespec *__restrict abs_timeout)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_timedwrlock(&e->u.rwlock, abs_timeout);
}

PMEMOBJ_API int pmemobj_rwlock_tryrdlock(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_tryrdlock(&e->u.rwlock);
}

PMEMOBJ_API int pmemobj_rwlock_trywrlock(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_trywrlock(&e->u.rwlock);
}

PMEMOBJ_API int pmemobj_rwlock_unlock(PMEMobjpool *pop, PMEMrwlock *rwlockp)
{
	ENTRY_OR_FAIL(e, pop, rwlockp, RWLOCK);
	return pthread_rwlock_unlock(&e->u.rwlock);
}

PMEMOBJ_API void pmemobj_cond_zero(PMEMobjpool *pop, PMEMcond *condp)
{
	if (check(pop, condp) == 0)
		zero(condp, COND);
}

PMEMOBJ_API int pmemobj_cond_broadcast(PMEMobjpool *pop, PMEMcond *condp)
{
	ENTRY_OR_FAIL(e, pop, condp, COND);
	return pthread_cond_broadcast(&e->u.cond);
}

PMEMOBJ_API int pmemobj_cond_signal(PMEMobjpool *pop, PMEMcond *condp)
{
	ENTRY_OR_FAIL(e, pop, condp, COND);
	return pthread_cond_signal(&e->u.cond);
}

PMEMOBJ_API int pmemobj_cond_timedwait(PMEMobjpool *pop, PMEMcond *__restrict condp,
				       PMEMmutex *__restrict mutexp,
				       const struct timespec *__restrict abs_timeout)
{
	ENTRY_OR_FAIL(e, pop, condp, COND);
	ENTRY_OR_FAIL(m, pop, mutexp, MUTEX);
	return pthread_cond_timedwait(&e->u.cond, &m->u.mutex, abs_timeout);
}

PMEMOBJ_API int pmemobj_cond_wait(PMEMobjpool *pop, PMEMcond *condp, PMEMmutex *__restrict mutexp)
{
	ENTRY_OR_FAIL(e, pop, condp, COND);
	ENTRY_OR_FAIL(m, pop, mutexp, MUTEX);
	return pthread_cond_wait(&e->u.cond, &m->u.mutex);
}
