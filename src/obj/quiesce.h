/*
 * quiesce.h - holding the object store still while a page is repaired (quiesce.c).
 *
 * One object on the repairing thread's stack, moved through these states:
 *
 *   IDLE --begin--> OUT [--serial--> SERIAL] --stop--> STOPPED --restart--> OUT or SERIAL
 *   OUT/SERIAL --end--> IDLE           OUT/SERIAL --abandon--> IDLE (stays out of the gate)
 *
 *   OUT      this thread's own commit, if it was inside one, has stepped out of the commit
 *            gate (a fault may arrive in the middle of it);
 *   SERIAL   OUT, and the process-wide repair lock is held: one repair (or one poison
 *            injection) at a time;
 *   STOPPED  the gate is closed and every other commit has left it, so parity is settled;
 *            this thread's parity calls take no range locks (a thread stopped at the gate
 *            may hold them).
 */
#ifndef KR_QUIESCE_H
#define KR_QUIESCE_H

#include "log.h"

enum kr_quiesce_state { KR_QUIESCE_IDLE, KR_QUIESCE_OUT, KR_QUIESCE_SERIAL, KR_QUIESCE_STOPPED };

struct kr_quiesce {
	struct kr_log *log;
	enum kr_quiesce_state state;
	int serial; /* the repair lock is held (in SERIAL, and in STOPPED entered from it) */
	int token;  /* kr_log_suspend's: the thread had a commit in flight */
	int closed; /* this object closed the gate (not nested in a stop of the same pool) */
};

/* IDLE -> OUT, or SERIAL if serial (spins for the repair lock; signal-safe). */
void kr_quiesce_begin(struct kr_quiesce *q, struct kr_log *log, int serial);
/* OUT or SERIAL -> STOPPED. */
void kr_quiesce_stop(struct kr_quiesce *q);
/* STOPPED -> the state before kr_quiesce_stop. */
void kr_quiesce_restart(struct kr_quiesce *q);
/* OUT or SERIAL -> IDLE: the lock released, the thread's commit back inside the gate
 * (after any repair another thread started meanwhile). */
void kr_quiesce_end(struct kr_quiesce *q);
/* OUT or SERIAL -> IDLE without stepping back in: the fault is passed on, so the thread's
 * commit will not go on, and must not keep a repair waiting. */
void kr_quiesce_abandon(struct kr_quiesce *q);

/* BEGIN then STOP, and RESTART then END: a whole quiet section. */
void kr_quiesce_hold(struct kr_quiesce *q, struct kr_log *log, int serial);
void kr_quiesce_release(struct kr_quiesce *q);

#endif
