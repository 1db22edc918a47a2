/*
 * test_quiesce.c - the quiesce-for-repair object (src/obj/quiesce.c) on one open pool:
 * the states it moves through and what each holds, and the nesting of a stop inside a stop
 * (a fault resolved on a thread that is running a scrub pass).
 *
 * Steps: hold (OUT then STOPPED): the pool's commit gate is closed and this thread's
 * parity calls take no range locks; release: both undone. A hold inside a hold (the fault
 * resolver inside a scrub pass): after the inner release the gate is still closed and the
 * parity locks still bypassed, until the outer release. A begin takes the repair lock: a
 * second thread's begin waits until the first ends, and so does a second thread's hold,
 * whose release would otherwise reopen the gate under the first's section. A commit whose
 * fault is passed on (abandon) is over for the gate. Last, a transaction commits, so the
 * gate really opened again.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "parity.h"
#include "pool_state.h"
#include "quiesce.h"
#include "testutil.h"

static kr_pool *pool;
static _Atomic int second_in;

static void *second_begin(void *arg)
{
	(void)arg;
	struct kr_quiesce q;
	kr_quiesce_begin(&q, &pool->log);
	atomic_store(&second_in, 1);
	kr_quiesce_end(&q);
	return NULL;
}

static void *second_hold(void *arg)
{
	(void)arg;
	struct kr_quiesce q;
	kr_quiesce_hold(&q, &pool->log);
	kr_quiesce_release(&q);
	atomic_store(&second_in, 1);
	return NULL;
}

int main(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "quiesce");
	TU_OK(tu_create(path, 8 << 20, 4, 2, 0, &pool));

	struct kr_quiesce outer, inner;
	kr_quiesce_hold(&outer, &pool->log);
	TU_ASSERT(outer.state == KR_QUIESCE_STOPPED, "hold: state %d", outer.state);
	TU_ASSERT(atomic_load(&pool->log.repairing) && kr_parity_unlocked, "hold: gate open");

	kr_quiesce_begin(&inner, &pool->log);
	TU_ASSERT(inner.state == KR_QUIESCE_OUT, "inner begin: state %d", inner.state);
	kr_quiesce_stop(&inner);
	kr_quiesce_restart(&inner);
	TU_ASSERT(inner.state == KR_QUIESCE_OUT, "inner restart: state %d", inner.state);
	TU_ASSERT(atomic_load(&pool->log.repairing) && kr_parity_unlocked,
		  "the inner repair reopened the gate of the outer section");
	kr_quiesce_end(&inner);
	TU_ASSERT(inner.state == KR_QUIESCE_IDLE, "inner end: state %d", inner.state);

	kr_quiesce_release(&outer);
	TU_ASSERT(outer.state == KR_QUIESCE_IDLE, "release: state %d", outer.state);
	TU_ASSERT(!atomic_load(&pool->log.repairing) && !kr_parity_unlocked, "release: gate closed");

	/* The repair lock serialises: a second thread waits while this one holds it. */
	kr_quiesce_begin(&outer, &pool->log);
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, second_begin, NULL) == 0, "pthread_create");
	usleep(20000);
	TU_ASSERT(!atomic_load(&second_in), "a second thread's begin did not wait for the lock");
	kr_quiesce_end(&outer);
	pthread_join(t, NULL);
	TU_ASSERT(atomic_load(&second_in), "the second thread's begin never got the lock");

	/* Two threads' sections: the second waits until the first is over, so its release
	 * cannot reopen the gate under the first (a scrub pass or a stale clean on one thread
	 * and a fault repair on another). */
	kr_quiesce_hold(&outer, &pool->log);
	atomic_store(&second_in, 0);
	TU_ASSERT(pthread_create(&t, NULL, second_hold, NULL) == 0, "pthread_create");
	usleep(50000);
	TU_ASSERT(atomic_load(&pool->log.repairing),
		  "another thread's quiet section reopened the commit gate under this one's");
	TU_ASSERT(!atomic_load(&second_in), "a second thread's hold did not wait for the first");
	kr_quiesce_release(&outer);
	pthread_join(t, NULL);
	TU_ASSERT(atomic_load(&second_in) && !atomic_load(&pool->log.repairing),
		  "the second hold never ran, or left the gate closed");

	/* A fault passed on in the middle of a commit (repair.c: the page could not be rebuilt,
	 * the pool fails): abandoned, the thread is no longer in that commit nor stepped out of
	 * it, so no scrub pass or cleaner waits for it, and its next commit enters the gate. */
	struct kr_lane *lane = &pool->log.lanes[0];
	kr_log_enter(&pool->log, lane);
	kr_quiesce_begin(&outer, &pool->log);
	TU_ASSERT(outer.token && kr_log_any_stepped_out(&pool->log), "begin: the commit did not step out");
	kr_quiesce_abandon(&outer);
	TU_ASSERT(!kr_log_any_stepped_out(&pool->log), "an abandoned commit still counts as stepped out");
	kr_log_enter(&pool->log, lane);
	TU_ASSERT(atomic_load(&lane->in_commit), "the next commit after an abandoned one is not in the gate");
	kr_log_exit(&pool->log, lane);
	TU_ASSERT(!atomic_load(&lane->in_commit), "the next commit did not leave the gate");

	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, 100, 1, &oid));
	TU_OK(kr_tx_commit(tx));
	TU_DEEP_CHECK(pool, "after the quiesce sections");
	TU_OK(kr_pool_close(pool));
	printf("test_quiesce: states, nesting and the repair lock: PASS\n");
	TU_END_CHECK_ALL("test_quiesce");
	return 0;
}
