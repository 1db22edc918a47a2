/*
 * test_barrier.c - the asymmetric barriers (src/base/barrier.h) against the store-buffering
 * litmus test, the reordering they exist to forbid.
 *
 * Two threads meet at a start line many times. The frequent one stores x, passes
 * kr_barrier_light() and loads y; the rare one stores y, passes kr_barrier_heavy() and
 * loads x. Without store-load order on both sides x86 lets both loads see 0 (each store
 * still in its core's store buffer), which is how a pass of the stale map's cleaner would
 * miss a persist's bytes while the persist missed the cleared mark. With the barriers that
 * outcome must never happen. (With kr_barrier_heavy() reduced to a fence of its own thread,
 * this test sees it within a few thousand rounds on the machines it was written on.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "barrier.h"
#include "testutil.h"

enum { ROUNDS = 20000 };

static _Atomic int x, y, r1, r2;
static _Atomic unsigned start, finished;

/* Both threads leave round `round`'s start line together, as near as spinning gets. */
static void start_line(unsigned round)
{
	atomic_fetch_add(&start, 1);
	while (atomic_load(&start) < 2 * round)
		;
}

static void *frequent(void *arg)
{
	(void)arg;
	for (unsigned i = 1; i <= ROUNDS; i++) {
		start_line(i);
		atomic_store_explicit(&x, 1, memory_order_relaxed);
		kr_barrier_light();
		atomic_store_explicit(&r1, atomic_load_explicit(&y, memory_order_relaxed), memory_order_relaxed);
		atomic_fetch_add(&finished, 1);
		while (atomic_load(&finished) < 2 * i) /* the other side resets x and y */
			;
	}
	return NULL;
}

static void test_store_buffering(void **state)
{
	(void)state;
	kr_barrier_init();
	printf("test_barrier: %s\n", atomic_load(&kr_barrier_asymmetric)
					     ? "membarrier (light side: compiler barrier)"
					     : "no membarrier here: fences on both sides");
	pthread_t t;
	TU_EQ(pthread_create(&t, NULL, frequent, NULL), 0);
	unsigned both_zero = 0;
	for (unsigned i = 1; i <= ROUNDS; i++) {
		start_line(i);
		atomic_store_explicit(&y, 1, memory_order_relaxed);
		TU_EQ(kr_barrier_heavy(), 0);
		atomic_store_explicit(&r2, atomic_load_explicit(&x, memory_order_relaxed), memory_order_relaxed);
		while (atomic_load(&finished) < 2 * i - 1) /* the frequent side's r1 */
			;
		both_zero += !atomic_load(&r1) && !atomic_load(&r2);
		atomic_store(&x, 0);
		atomic_store(&y, 0);
		atomic_fetch_add(&finished, 1);
	}
	pthread_join(t, NULL);
	TU_ASSERT(both_zero == 0, "both loads saw 0 in %u of %d rounds", both_zero, ROUNDS);
}

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_store_buffering, NULL, NULL),
	};
	return TU_RUN_CASES("barrier", tests);
}
