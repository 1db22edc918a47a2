/*
 * barrier.h - asymmetric memory barriers, for a handshake whose one side runs millions of
 * times a second and whose other side runs a few times a second.
 *
 * The handshake (Dekker's): the frequent side stores data, then loads a flag; the rare
 * side clears the flag, then loads the data. Either the frequent side sees the flag clear
 * or the rare side sees the data: that needs store-load order on both sides, which on x86
 * only a locked instruction or mfence gives. On the frequent side that fence waits for
 * every store before it to leave the store buffer, cache misses included: it was 60-130 ns
 * of a 64-byte pmemobj_persist, about libpmemobj's whole cost of one.
 *
 * kr_barrier_light() on the frequent side is then only a compiler barrier, and
 * kr_barrier_heavy() on the rare side makes the kernel run a full barrier on every CPU that
 * runs a thread of this process (membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, about 1 us).
 * Every thread thus passes a full fence at some point during the heavy barrier: its stores
 * before that point are seen by the rare side's loads after kr_barrier_heavy() returns, and
 * its loads after it see the rare side's stores before kr_barrier_heavy(). That is the
 * order two fences would give.
 *
 * Without membarrier (an old kernel, a seccomp filter) both are full fences. The choice is
 * made once, by kr_barrier_init(), and only ever from fences to membarrier, with the
 * registration done before the light side can see it (a light barrier that still fences
 * is only slower). The registration is inherited by fork.
 */
#ifndef KR_BARRIER_H
#define KR_BARRIER_H

#include <stdatomic.h>

extern _Atomic int kr_barrier_asymmetric; /* 1: membarrier registered (kr_barrier_init) */

/* Chooses membarrier when the kernel offers it. Any number of calls, from any thread. */
void kr_barrier_init(void);

/* The frequent side: between its stores and its loads of the handshake's flags. */
static inline void kr_barrier_light(void)
{
	if (atomic_load_explicit(&kr_barrier_asymmetric, memory_order_relaxed))
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
}

/* The rare side: between its stores to the flags and its loads of the data. 0, or -1 when
 * the kernel refuses after all (then the light side's loads may have run early: the caller
 * must not rely on the handshake, and fails as for a media error). */
int kr_barrier_heavy(void);

#endif
