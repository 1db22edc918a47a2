/*
 * lock.c - the slow paths of the four-byte mutex (lock.h): spin a little, then sleep on
 * the word with a futex; wake one sleeper on release.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"

/* Reads of the word between attempts: a few hundred nanoseconds, less than a commit holds
 * a lock, more than a system call's round trip would save. */
#define SPINS 100

void kr_lock_wait(kr_lock *l)
{
	for (int i = 0; i < SPINS; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		uint32_t free_ = 0;
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&l->v, &free_, 1, memory_order_acquire,
							    memory_order_relaxed))
			return;
	}
	/* From here the word says 2 whenever this thread may sleep: whoever releases it then
	 * wakes someone. Taking it with 2 is conservative (a wake that finds no sleeper). */
	while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0)
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void kr_lock_wake(kr_lock *l)
{
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
