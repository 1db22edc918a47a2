/*
 * test_quiesce.c - the quiesce-for-repair object (src/obj/quiesce.c) on one open pool:
 * the states it moves through and what each holds, and the nesting of a stop inside a stop
 * (a fault resolved on a thread that is running a scrub pass).
 *
 * Steps: hold (OUT then STOPPED): the pool's commit gate is closed and this thread's
 * parity calls take no range locks; release: both undone. A serial hold inside a plain one
 * (the fault resolver inside a scrub pass): after the inner release the gate is still
 * closed and the parity locks still bypassed, until the outer release. A serial begin
 * takes the repair lock: a second thread's serial begin waits until the first ends. Last,
 * a transaction commits, so the gate really opened again.
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

static void *second_serial(void *arg)
{
	(void)arg;
	struct kr_quiesce q;
	kr_quiesce_begin(&q, &pool->log, 1);
	atomic_store(&second_in, 1);
	kr_quiesce_end(&q);
	return NULL;
}

int main(void)
{
	char path[128];
	tu_pool_path(path, sizeof(path), "quiesce");
	TU_OK(tu_create(path, 8 << 20, 4, 2, 0, &pool));

	struct kr_quiesce outer, inner;
	kr_quiesce_hold(&outer, &pool->log, 0);
	TU_ASSERT(outer.state == KR_QUIESCE_STOPPED, "hold: state %d", outer.state);
	TU_ASSERT(atomic_load(&pool->log.repairing) && kr_parity_unlocked, "hold: gate open");

	kr_quiesce_begin(&inner, &pool->log, 1);
	TU_ASSERT(inner.state == KR_QUIESCE_SERIAL, "inner begin: state %d", inner.state);
	kr_quiesce_stop(&inner);
	kr_quiesce_restart(&inner);
	TU_ASSERT(inner.state == KR_QUIESCE_SERIAL, "inner restart: state %d", inner.state);
	TU_ASSERT(atomic_load(&pool->log.repairing) && kr_parity_unlocked,
		  "the inner repair reopened the gate of the outer section");
	kr_quiesce_end(&inner);
	TU_ASSERT(inner.state == KR_QUIESCE_IDLE, "inner end: state %d", inner.state);

	kr_quiesce_release(&outer);
	TU_ASSERT(outer.state == KR_QUIESCE_IDLE, "release: state %d", outer.state);
	TU_ASSERT(!atomic_load(&pool->log.repairing) && !kr_parity_unlocked, "release: gate closed");

	/* The repair lock serialises: a second thread waits while this one holds it. */
	kr_quiesce_begin(&outer, &pool->log, 1);
	pthread_t t;
	TU_ASSERT(pthread_create(&t, NULL, second_serial, NULL) == 0, "pthread_create");
	usleep(20000);
	TU_ASSERT(!atomic_load(&second_in), "a second serial begin did not wait for the lock");
	kr_quiesce_end(&outer);
	pthread_join(t, NULL);
	TU_ASSERT(atomic_load(&second_in), "the second serial begin never got the lock");

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
