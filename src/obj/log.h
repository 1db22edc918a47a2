/*
 * log.h - the one-fence redo log: per-thread lanes, replicated, with lazy trimming.
 *
 * Users (tx.c) build a transaction's redo image in DRAM with kr_img_*, then:
 *
 *     kr_log_lane_acquire()           bind a lane to this thread
 *     kr_log_commit(lane, img)        log lines + replica, flush, ONE fence: durable
 *     kr_log_apply(lane, img)         write the records home; write-back deferred to the
 *                                     lane's next commit fence
 *     kr_log_applied(lane)            the lane's apply is complete (trimming may follow)
 *     kr_log_lane_release()
 *
 * and at open, kr_log_recover() replays what committed but may not have reached home.
 * The protocol and its invariants are described at the top of log.c.
 */
#ifndef KR_LOG_H
#define KR_LOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "layout.h"
#include "pmem.h"

/* A transaction's redo image: struct kr_tx_first followed by records, as they will sit in
 * the payload stream of the log lines. */
struct kr_img {
	uint8_t *buf;
	size_t len, cap;
	uint32_t nrecords;
	/* kr_crc32c of the records in [sizeof(struct kr_tx_first), crc_end): while every record
	 * came through kr_img_data_copy the image knows their checksum, so sealing it reads only
	 * the first line's prefix and what came otherwise. */
	size_t crc_end;
	uint32_t crc_part;
};

void kr_img_init(struct kr_img *img);
void kr_img_reset(struct kr_img *img);
void kr_img_free(struct kr_img *img);
/* Append a record; returns a pointer to its data area (len bytes) or NULL (KR_E_NOMEM). */
void *kr_img_data(struct kr_img *img, uint64_t off, uint32_t len);
/* Append a DATA record holding a copy of src, checksummed on the way: *crc is kr_crc32c of
 * the len bytes. KR_OK or KR_E_NOMEM. */
int kr_img_data_copy(struct kr_img *img, uint64_t off, const void *src, uint32_t len, uint32_t *crc);
/* The same record with hlen bytes of head in front of the copy (at off; the copy at
 * off + hlen): bytes that precede a range at home share its record. *crc covers src only. */
int kr_img_data_copy_after(struct kr_img *img, uint64_t off, const void *head, uint32_t hlen,
			   const void *src, uint32_t len, uint32_t *crc);
int kr_img_bits(struct kr_img *img, unsigned kind, uint64_t off, uint64_t mask);
/* Append an intent record for [off, off+len) (no data). */
int kr_img_intent(struct kr_img *img, uint64_t off, uint64_t len);
/* Number of log lines the image occupies. */
uint32_t kr_img_lines(const struct kr_img *img);

struct kr_log;

struct kr_lane {
	/* Each lane on lines of its own (the lane array is line-aligned, kr_log_init). */
	_Alignas(64) pthread_mutex_t lock; /* held by the transaction using the lane */
	uint32_t idx;
	struct kr_log *log;
	struct kr_log_cacheline *lines, *replica;

	/* Owned by the lock holder. The lane's live transactions, oldest first, as a ring of
	 * (seq, nlines); they occupy lines [head, tail) modulo lane size. */
	uint32_t head, tail, used;
	uint64_t *fifo_seq;
	uint32_t *fifo_nlines;
	uint32_t fifo_first, fifo_count;
	uint64_t d_publish; /* durable_seq written but not yet fenced by this holder */
	/* Lazy homes: this commit's fence is a checkpoint's sync (log_write), which then moves
	 * the lanes' pending_seq past what they had applied at ckpt_upto (one per lane). */
	uint8_t ckpt_armed;
	uint64_t *ckpt_upto;
	/* The last apply's write-backs, issued just before the lane's next commit fence
	 * (pmem.h, deferred write-back); adoption re-flushes from the lines instead. */
	struct kr_flush_list deferred;

	_Atomic int in_commit; /* the holder is between kr_log_enter and kr_log_exit */
	_Atomic int stepped_out; /* ... but out of the gate meanwhile, waiting (kr_log_suspend) */
	_Atomic int held;      /* bound to a transaction (set and cleared by the holder) */
	_Atomic uint64_t commits; /* commits through this lane (only the holder adds) */

	/* Shared with other threads (durable-seq computation and adoption). */
	pthread_mutex_t st_lock;       /* guards the fields below for adoption */
	_Atomic uint64_t inflight_seq; /* seq being committed/applied, KR_SEQ_RESERVING, or 0 */
	_Atomic uint64_t pending_seq;  /* last applied txn, maybe not yet durable, or 0; with
					* lazy homes the oldest such (log_checkpoint) */
	_Atomic uint64_t applied_seq;  /* lazy homes: the last txn applied on this lane */
	uint64_t synced_upto;          /* lazy homes: its txns up to this one are synced home */
	uint64_t pending_tid;          /* thread whose next fence makes pending durable */
	/* Where the pending transaction's lines sit: the lane's ring, or a spill segment's. */
	const struct kr_log_cacheline *pending_lines;
	uint32_t pending_ring, pending_first, pending_nlines;
	/* pending_seq is an intent whose direct writes are still going on: nobody may adopt
	 * it (and so let durable_seq pass it) before its own transaction's fence. */
	uint8_t intent_open; /* 0, KR_HOLD_INTENT or KR_HOLD_UNDO */

	/* The holder's spill segment (kr_log_spill_attach), or seg NULL: undo entries that do
	 * not fit the lane go there, appended from seg_tail. */
	struct kr_log_cacheline *seg, *seg_replica;
	uint32_t seg_lines, seg_tail;
};
#define KR_HOLD_INTENT 1 /* an intent: closed early under log pressure (invariant 6) */
#define KR_HOLD_UNDO 2   /* undo entries of an in-place transaction (invariant 7) */

/* What the layer above adds to writing records home. The log calls these; it never knows
 * about parity or checksums itself. Any hook may be NULL.
 *   apply:   write one record home in the normal (online) apply, with whatever redundancy
 *            updates go with it; NULL means the plain write + flush
 *   flush:   flush whatever apply wrote besides the record's own bytes (adoption)
 *   touched: recovery replayed a record over [off, off+len), or found an intent for it;
 *            the redundancy of that range must be recomputed
 *   settle:  recovery is done replaying: recompute what was touched, flush it. Called
 *            before durable_seq moves past the replayed transactions, so a crash during it
 *            leads to it again. */
struct kr_log_hooks {
	void (*apply)(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data);
	void (*flush)(void *ctx, uint64_t off, uint64_t len);
	void (*touched)(void *ctx, uint64_t off, uint64_t len);
	int (*settle)(void *ctx);
	/* A page was repaired online while this thread was inside its own commit (its writes
	 * to the page's column may straddle the repair): called at kr_log_exit, when the
	 * commit's writes are final, to make that column's derived data consistent again. */
	void (*after_fault)(void *fault_ctx, uint64_t page);
	void *fault_ctx;
	/* Lines of a spill segment are about to change from old to new at off (outside any
	 * record, in the heap): keep the redundancy of those bytes. */
	void (*patch)(void *ctx, uint64_t off, const void *old, const void *new, size_t len);
	void *ctx;
};

struct kr_log {
	struct kr_pm *pm;
	struct kr_log_hooks hooks;
	struct kr_log_line *ctl[2]; /* log lines of the two control pages */
	uint32_t nlanes, lane_lines;
	struct kr_lane *lanes;

	/* Record targets recovery accepts: [lo, hi) ranges of the pool. */
	uint64_t valid_lo[3], valid_hi[3];
	int spill; /* the pool has LOG_SPILL: undo may continue in spill segments */
	/* Page-cache mode (kr_pm_lazy): applies write home lazily, made durable together by a
	 * checkpoint's sync of the whole file, not by the next commit's fence (invariant 9). */
	int lazy;

	pthread_mutex_t d_lock; /* serialises writes of durable_seq */
	uint64_t d_written;     /* last durable_seq stored (maybe not yet fenced) */

	/* Every commit reads these two and seldom sees them change: a line of their own. */
	_Alignas(64) _Atomic int repairing; /* the commit gate is closed (kr_log_quiesce) */
	_Atomic uint64_t d_durable; /* durable_seq known persisted: lines at or below are free */
	/* Every commit writes this one: alone on its line (the struct ends there), so that two
	 * threads' commits move only it between their caches. */
	_Alignas(64) _Atomic uint64_t next_seq;
};
_Static_assert(offsetof(struct kr_log, next_seq) % 64 == 0 && sizeof(struct kr_log) % 64 == 0 &&
		       offsetof(struct kr_log, d_durable) / 64 != offsetof(struct kr_log, next_seq) / 64,
	       "next_seq alone on its line, the gate and durable_seq on another");

#define KR_SEQ_RESERVING UINT64_MAX

struct kr_log_geom {
	char *lanes, *replica;
	uint32_t nlanes, lane_pages;
	struct kr_log_line *ctl[2];
	uint64_t valid_lo[3], valid_hi[3];
	int spill;
};

struct kr_log_recovery {
	uint64_t replayed, discarded;
};

/* Writes the log lines of a new pool (durable_seq 0, clean, the given fresh_word) and
 * flushes; caller fences. */
void kr_log_format(struct kr_pm *pm, struct kr_log_line *ctl[2], uint64_t fresh_word);

int kr_log_init(struct kr_log *log, struct kr_pm *pm, const struct kr_log_geom *g);
void kr_log_fini(struct kr_log *log);

/* Reads durable_seq and the clean flag from the control pages (no scanning). */
int kr_log_is_clean(struct kr_log *log);
/* The fresh_word the last clean close left (layout.h), or 0 if the pool is not clean or
 * the two copies disagree. Read it before kr_log_mark_open, which clears it. */
uint64_t kr_log_fresh_word(struct kr_log *log);
/* Clean start: sequence numbers continue after durable_seq. */
int kr_log_start_clean(struct kr_log *log);
/* Crash start: replays every committed transaction above durable_seq in sequence order,
 * makes the result durable, then advances durable_seq past every stamp found. */
int kr_log_recover(struct kr_log *log, struct kr_log_recovery *st);
/* Marks the pool open (clean = 0, fresh_word = 0) or cleanly closed (clean = magic, with
 * the caller's fresh_word), durably. Closing first makes every lane's applied transactions
 * durable and moves durable_seq past all of them; the caller guarantees no transaction is
 * running. */
int kr_log_mark_open(struct kr_log *log);
int kr_log_mark_clean(struct kr_log *log, uint64_t fresh_word);

int kr_log_lane_acquire(struct kr_log *log, struct kr_lane **lane);
/* Number of lanes bound to a transaction right now (a snapshot; for misuse checks). */
uint32_t kr_log_lanes_held(struct kr_log *log);
void kr_log_lane_release(struct kr_log *log, struct kr_lane *lane);

/* Writes the image to the lane (and its replica) and fences once. On success the
 * transaction is durable and *seq is its sequence number. */
int kr_log_commit(struct kr_log *log, struct kr_lane *lane, struct kr_img *img, uint64_t *seq);
/* Makes room for nlines lines in the lane, waiting for durable_seq if it must (as a commit
 * would; KR_E_NOSPACE_LOG if the holder's own undo pins too much of it). */
int kr_log_wait_room(struct kr_log *log, struct kr_lane *lane, uint32_t nlines);
/* Commits an intent: an image of KR_REC_INTENT records naming ranges that are about to be
 * written outside the log. Recovery never applies an intent; it reports its ranges as
 * touched, whatever became of the transaction that followed it. Costs one fence. */
int kr_log_commit_intent(struct kr_log *log, struct kr_lane *lane, struct kr_img *img);
/* Commits an undo entry: DATA records holding the bytes a range has now, before they are
 * overwritten in place (recovery replays it like any commit), or with intent an intent
 * (INTENT records only). The lane stays pending at *first (set to this entry's seq if 0)
 * until kr_log_applied or the lane's release (invariant 7). */
int kr_log_commit_undo(struct kr_log *log, struct kr_lane *lane, struct kr_img *img, int intent,
		       uint64_t *first);
/* Whether nlines lines fit the lane now, leaving reserve lines free (older transactions
 * trimmed, durable_seq forced forward once if that helps). */
int kr_log_fits(struct kr_log *log, struct kr_lane *lane, uint32_t nlines, uint32_t reserve);
/* Whether an undo entry of nlines lines can be committed now (kr_log_commit_undo): in the
 * lane's spill segment, or in the lane itself leaving room for the transaction's commit.
 * When it cannot, in a pool with LOG_SPILL the caller attaches a (new) segment and asks
 * again; elsewhere kr_log_commit_undo fails with KR_E_NOSPACE_LOG as the lane fills. */
int kr_log_undo_fits(struct kr_log *log, struct kr_lane *lane, uint32_t nlines);
/* Attaches a spill segment of nlines lines at pool offset off (its replica's at
 * replica_off, or 0) to the lane, which is in an in-place transaction: commits an entry
 * holding an intent for [block_off, block_off + block_len) and the SPILL record (one fence,
 * part of the transaction's undo, *first as for kr_log_commit_undo) to the current segment,
 * or to the lane for the first, and from then on undo entries go to the new segment. The
 * block must stay out of use until durable_seq passes the transaction's CANCEL entry
 * (kr_img_cancel). KR_E_NOSPACE_LOG if the lane has no line left. */
int kr_log_spill_attach(struct kr_log *log, struct kr_lane *lane, uint64_t off, uint64_t replica_off,
			uint32_t nlines, uint64_t block_off, uint64_t block_len, uint64_t *first);
/* Whether the final entry of a transaction that spilled, nlines lines, can be committed
 * now by kr_log_commit_last: in the lane, or else in its segment. */
int kr_log_last_fits(struct kr_log *log, struct kr_lane *lane, uint32_t nlines);
/* kr_log_commit for that entry: in the lane if it fits, else in the segment (a lane full of
 * older transactions that another thread's open undo keeps from trimming cannot hold up a
 * transaction that holds undo itself). */
int kr_log_commit_last(struct kr_log *log, struct kr_lane *lane, struct kr_img *img, uint64_t *seq);
/* The transaction is over: no segment (its block may be released once the CANCEL entry is
 * durable). */
void kr_log_spill_detach(struct kr_lane *lane);
/* Appends a CANCEL record (layout.h): the lane's entries from sequence number first up to
 * the image's own are not replayed. */
int kr_img_cancel(struct kr_img *img, uint64_t first);

/* Applies every record of the image to its home location and flushes; no fence. */
void kr_log_apply(struct kr_log *log, struct kr_lane *l, const struct kr_img *img);
/* Marks the lane's just-committed transaction applied. */
void kr_log_applied(struct kr_log *log, struct kr_lane *lane, uint64_t seq);
/* The same for a transaction committed on a lane that an open transaction holds (the
 * heap's run creation during it): that one's hold on durable_seq, for its undo or its
 * intent (invariants 6 and 7), stays. */
void kr_log_applied_inner(struct kr_log *log, struct kr_lane *lane, uint64_t seq);
/* Writes back (flushes, for the caller's next fence) the applies of the lane's earlier
 * transactions that log_commit would otherwise write back at the next commit's own fence.
 * Before a CANCEL record: it covers every entry of the lane from the transaction's first
 * undo, the heap's run creations committed meanwhile included, and those are then not
 * replayed, so their applies must be durable before the CANCEL is. */
void kr_log_flush_applies(struct kr_log *log, struct kr_lane *lane);

/* The commit gate. Everything that changes home bytes or parity (building, committing and
 * applying a transaction) runs between kr_log_enter and kr_log_exit on its lane. Entering
 * is a store to the lane's own flag and a load of the gate: no shared read-modify-write.
 * kr_log_quiesce closes the gate and waits until every other lane has left, so parity is
 * settled for a repair; kr_log_resume opens it. kr_log_suspend/unsuspend let a thread that
 * is itself inside (a fault in the middle of its own commit) step out while it waits. */
void kr_log_enter(struct kr_log *log, struct kr_lane *lane);
void kr_log_exit(struct kr_log *log, struct kr_lane *lane);
void kr_log_quiesce(struct kr_log *log);
void kr_log_resume(struct kr_log *log);
int kr_log_suspend(void);
void kr_log_unsuspend(int token);
/* Instead of kr_log_unsuspend: the stepped-out commit will not go on (a fault passed on;
 * the pool fails). The thread is no longer in a commit, and no longer counts as stepped
 * out, so no repair or pass waits for it. */
void kr_log_abandon(void);
/* 1 if a lane's holder stepped out of the gate in the middle of a commit (kr_log_suspend):
 * with the gate closed, its commit may be half applied (an object's bytes new, its
 * checksum not yet), which a pass judging checksums would take for damage. */
int kr_log_any_stepped_out(struct kr_log *log);
/* Notes a page repaired during this thread's own commit (see hooks.after_fault). */
void kr_log_note_fault(uint64_t page);

/* Highest sequence number whose effects are known durable (for deferred frees). */
static inline uint64_t kr_log_durable_seq(struct kr_log *log)
{
	return atomic_load_explicit(&log->d_durable, memory_order_acquire);
}

/* Forces the durable sequence number forward to cover every applied transaction: adopts
 * idle lanes, fences, publishes. Used when deferred frees must be released (heap full). */
int kr_log_sync(struct kr_log *log, struct kr_lane *lane);

/* The deep check's audit of a quiet, synced log (no lane held): both control copies carry
 * the durable_seq DRAM believes persisted, every sequence number handed out is durable,
 * each lane's ring [head, tail) holds whole transactions with good CRCs in both copies,
 * byte-equal, and no line anywhere carries a stamp above durable_seq (invariant 4).
 * Only reads; counts the lines looked at in *lines_checked. */
void kr_log_audit(struct kr_log *log, uint64_t *lines_checked, struct kr_audit *a);

#endif
