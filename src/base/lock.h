/*
 * lock.h - a mutex in four bytes, for lock tables packed sixteen to a cache line.
 *
 * A table of pthread mutexes (40 bytes each, one per line so that neighbours do not share
 * a line) spreads a thread's locks over many lines, which then move between the CPUs of
 * threads that use the same table: a transaction's checksum stripe was 150 ns of an 820 ns
 * commit with two threads. Four-byte locks let a table keep the locks of one page of
 * objects in one line, so a thread working in its own pages keeps its lines, while objects
 * of the same page still get different locks.
 *
 * The word is 0 (free), 1 (held) or 2 (held, a waiter may sleep on it): the three-state
 * futex mutex of Drepper's "Futexes Are Tricky". Taking a free lock is one compare-and-swap
 * (acquire), releasing one exchange (release) and, only if someone waits, a wake. A waiter
 * spins briefly (holders keep these locks for a commit, about a microsecond) and then
 * sleeps in the kernel, so a holder that is preempted costs its waiters no CPU. Not
 * recursive, no owner, no robustness: the caller's lock order prevents deadlock.
 */
#ifndef KR_LOCK_H
#define KR_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
	_Atomic uint32_t v;
} kr_lock;

#define KR_LOCK_INIT {0}

void kr_lock_wait(kr_lock *l); /* the slow path of kr_lock_take */
void kr_lock_wake(kr_lock *l); /* the slow path of kr_lock_drop */

static inline void kr_lock_take(kr_lock *l)
{
	uint32_t free_ = 0;
	if (!atomic_compare_exchange_strong_explicit(&l->v, &free_, 1, memory_order_acquire,
						     memory_order_relaxed))
		kr_lock_wait(l);
}

static inline void kr_lock_drop(kr_lock *l)
{
	if (atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2)
		kr_lock_wake(l);
}

#endif
