/*
 * quiesce.c - the quiesce-for-repair protocol: the one place that stops commits and
 * bypasses parity locks so that a page can be rebuilt from a settled column. Used by the
 * fault resolver (repair.c), the chunk-record fix-up after a fault inside a commit, the
 * online repair of an object that failed its checksum and the background scrubber.
 *
 * Invariants (states and transitions in quiesce.h; checked with KR_INVARIANT):
 *   1. A transition starts from the state quiesce.h names for it.
 *   2. The repair lock is held by the thread with an object past begin, from its outermost
 *      begin to that one's end or abandon (a count per thread: nested sections take it
 *      once); it is taken before the gate is closed and released after it is opened, so
 *      two threads never close the gate over each other: the commit gate is a flag, and
 *      one thread's release would reopen it under another's section.
 *   3. kr_parity_unlocked is set on this thread exactly while one of its objects is
 *      STOPPED. Stops nest (a fault met inside a scrub pass is resolved on the scrubbing
 *      thread): only the outermost one of a pool closes and opens its gate, so the outer
 *      section stays quiet after the inner repair. (A fault inside a fault repair's own
 *      rebuild would wait for the repair lock forever; it cannot be repaired anyway: two
 *      lost pages of one column.)
 *
 * Everything here is async-signal-safe: atomics, sched_yield, nanosleep, thread-locals.
 */
#include <stdatomic.h>
#include <time.h>

#include "invariant.h"
#include "parity.h"
#include "quiesce.h"

static atomic_flag repair_lock = ATOMIC_FLAG_INIT;
static _Thread_local int locks;                 /* this thread's objects past begin */
static _Thread_local int stops;                 /* this thread's objects in STOPPED */
static _Thread_local struct kr_log *outer_log;  /* the log the outermost one stopped */

void kr_quiesce_begin(struct kr_quiesce *q, struct kr_log *log)
{
	q->log = log;
	q->token = kr_log_suspend();
	if (locks++ == 0)
		while (atomic_flag_test_and_set(&repair_lock))
			sched_yield();
	q->state = KR_QUIESCE_OUT;
}

void kr_quiesce_stop(struct kr_quiesce *q)
{
	KR_INVARIANT("quiesce.c", 1, q->state == KR_QUIESCE_OUT);
	KR_INVARIANT("quiesce.c", 2, locks > stops);
	KR_INVARIANT("quiesce.c", 3, kr_parity_unlocked == (stops > 0));
	q->closed = stops == 0 || q->log != outer_log;
	if (q->closed)
		kr_log_quiesce(q->log);
	if (stops++ == 0) {
		outer_log = q->log;
		kr_parity_unlocked = 1;
	}
	q->state = KR_QUIESCE_STOPPED;
}

void kr_quiesce_restart(struct kr_quiesce *q)
{
	KR_INVARIANT("quiesce.c", 1, q->state == KR_QUIESCE_STOPPED);
	KR_INVARIANT("quiesce.c", 3, kr_parity_unlocked && stops > 0);
	if (q->closed)
		kr_log_resume(q->log);
	if (--stops == 0) {
		outer_log = NULL;
		kr_parity_unlocked = 0;
	}
	q->state = KR_QUIESCE_OUT;
}

/* OUT -> IDLE, the lock released by the outermost section. */
static void unlock(struct kr_quiesce *q)
{
	KR_INVARIANT("quiesce.c", 1, q->state == KR_QUIESCE_OUT);
	KR_INVARIANT("quiesce.c", 2, locks > stops);
	if (--locks == 0)
		atomic_flag_clear(&repair_lock);
	q->state = KR_QUIESCE_IDLE;
}

void kr_quiesce_abandon(struct kr_quiesce *q)
{
	unlock(q);
	if (q->token)
		kr_log_abandon();
}

void kr_quiesce_end(struct kr_quiesce *q)
{
	unlock(q);
	kr_log_unsuspend(q->token);
}

void kr_quiesce_hold(struct kr_quiesce *q, struct kr_log *log)
{
	kr_quiesce_begin(q, log);
	kr_quiesce_stop(q);
}

void kr_quiesce_release(struct kr_quiesce *q)
{
	kr_quiesce_restart(q);
	kr_quiesce_end(q);
}

int kr_quiesce_hold_settled(struct kr_quiesce *q, struct kr_log *log, unsigned max_ms)
{
	int nested = locks > 0; /* inside a section of this thread: no commit can go on */
	kr_quiesce_hold(q, log);
	for (unsigned ms = 0; kr_log_any_stepped_out(log); ms++) {
		kr_quiesce_release(q);
		if (nested || (max_ms && ms >= max_ms))
			return 0;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		kr_quiesce_hold(q, log);
	}
	return 1;
}
