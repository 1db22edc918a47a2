/*
 * quiesce.h - holding the object store still while a page is repaired (quiesce.c).
 *
 * One object on the repairing thread's stack, moved through these states:
 *
 *   IDLE --begin--> OUT --stop--> STOPPED --restart--> OUT
 *   OUT --end--> IDLE                 OUT --abandon--> IDLE (stays out of the gate)
 *
 *   OUT      this thread's own commit, if it was inside one, has stepped out of the commit
 *            gate (a fault may arrive in the middle of it), and the process-wide repair
 *            lock is held: one quiet section (a repair, a scrub pass, a stale clean, a
 *            poison injection) at a time, its nested ones on the same thread included;
 *   STOPPED  the gate is closed and every other commit has left it, so parity is settled;
 *            this thread's parity calls take no range locks (a thread stopped at the gate
 *            may hold them).
 */
#ifndef KR_QUIESCE_H
#define KR_QUIESCE_H

#include "log.h"

enum kr_quiesce_state { KR_QUIESCE_IDLE, KR_QUIESCE_OUT, KR_QUIESCE_STOPPED };

struct kr_quiesce {
	struct kr_log *log;
	enum kr_quiesce_state state;
	int token;  /* kr_log_suspend's: the thread had a commit in flight */
	int closed; /* this object closed the gate (not nested in a stop of the same pool) */
};

/* IDLE -> OUT (waits for the repair lock unless this thread holds it; signal-safe). */
void kr_quiesce_begin(struct kr_quiesce *q, struct kr_log *log);
/* OUT -> STOPPED. */
void kr_quiesce_stop(struct kr_quiesce *q);
/* STOPPED -> OUT. */
void kr_quiesce_restart(struct kr_quiesce *q);
/* OUT -> IDLE: the lock released (by the thread's outermost section), the thread's commit
 * back inside the gate (after any repair another thread started meanwhile). */
void kr_quiesce_end(struct kr_quiesce *q);
/* OUT -> IDLE without stepping back in: the fault is passed on, so the thread's commit will
 * not go on (log.h, kr_log_abandon), and must not keep a repair waiting. */
void kr_quiesce_abandon(struct kr_quiesce *q);

/* BEGIN then STOP, and RESTART then END: a whole quiet section. */
void kr_quiesce_hold(struct kr_quiesce *q, struct kr_log *log);
void kr_quiesce_release(struct kr_quiesce *q);
/* A hold in which no commit of the log is out of the gate half applied (log.h,
 * kr_log_any_stepped_out): one that waits for a parity lock has applied some records of
 * its transaction and not the rest, an object's bytes new and its checksum old. Between
 * tries the section is released for 1 ms, so that the commit can go on; up to max_ms
 * (0: until it is so, which comes: a parity lock is held only inside a commit's apply or
 * by a repair). Returns 1 when held so, 0 when not (nothing held). Not from inside a
 * commit. */
int kr_quiesce_hold_settled(struct kr_quiesce *q, struct kr_log *log, unsigned max_ms);

#endif
