/*
 * test_lock.c - the four-byte mutex (src/base/lock.h): mutual exclusion under contention,
 * and a waiter that sleeps in the kernel is woken by the release.
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "lock.h"
#include "testutil.h"

enum { THREADS = 4, ROUNDS = 200000 };

static kr_lock lock = KR_LOCK_INIT;
static unsigned long counter; /* plain: only the lock orders its updates */

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		kr_lock_take(&lock);
		unsigned long c = counter;
		if (i % 1024 == 0)
			sched_yield(); /* a holder off its CPU: waiters must sleep, not spin forever */
		counter = c + 1;
		kr_lock_drop(&lock);
	}
	return NULL;
}

static void test_exclusion(void **state)
{
	(void)state;
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		TU_CHECK(pthread_create(&t[i], NULL, adder, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	TU_ASSERT(counter == (unsigned long)THREADS * ROUNDS, "%lu increments of %lu survived",
		  counter, (unsigned long)THREADS * ROUNDS);
	TU_CHECK(atomic_load(&lock.v) == 0);
}

static _Atomic int waiter_has_it;

static void *waiter(void *arg)
{
	(void)arg;
	kr_lock_take(&lock);
	atomic_store(&waiter_has_it, 1);
	kr_lock_drop(&lock);
	return NULL;
}

/* The holder keeps the lock until the waiter has marked it (2: "someone may sleep"), long
 * past the waiter's spinning; the release must then wake it. */
static void test_sleeper_woken(void **state)
{
	(void)state;
	pthread_t t;
	kr_lock_take(&lock);
	TU_CHECK(pthread_create(&t, NULL, waiter, NULL) == 0);
	int marked = 0;
	for (int i = 0; i < 5000 && !marked; i++) {
		marked = atomic_load(&lock.v) == 2;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	TU_ASSERT(marked, "the waiter never marked the lock word (still %u after 5 s)",
		  (unsigned)atomic_load(&lock.v));
	TU_CHECK(!atomic_load(&waiter_has_it));
	kr_lock_drop(&lock);
	pthread_join(t, NULL); /* hangs (the test's timeout) if the release woke nobody */
	TU_CHECK(atomic_load(&waiter_has_it));
	TU_CHECK(atomic_load(&lock.v) == 0);
}

int main(void)
{
	const struct tu_case tests[] = {
		TU_CASE(test_exclusion, NULL, NULL),
		TU_CASE(test_sleeper_woken, NULL, NULL),
	};
	return TU_RUN_CASES("lock", tests);
}
