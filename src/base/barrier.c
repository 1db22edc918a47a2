/*
 * barrier.c - asymmetric memory barriers (barrier.h): membarrier when the kernel has it,
 * fences when it does not.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "barrier.h"

_Atomic int kr_barrier_asymmetric;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void choose(void)
{
	int cmds = membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
		return; /* fences on both sides */
	atomic_store(&kr_barrier_asymmetric, 1);
}

void kr_barrier_init(void)
{
	pthread_once(&once, choose);
}

int kr_barrier_heavy(void)
{
	kr_barrier_init();
	atomic_thread_fence(memory_order_seq_cst); /* this side's own order */
	if (!atomic_load(&kr_barrier_asymmetric))
		return 0; /* the light side fences itself */
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	/* Registered, and refused anyway (no known kernel does this; fork keeps the
	 * registration): the global command needs none and is as strong, only slower. */
	return membarrier(MEMBARRIER_CMD_GLOBAL) == 0 ? 0 : -1;
}
