/*
 * log.c - the one-fence redo log (Cohen, Friedman, Larus, OOPSLA'17, used as the commit log
 * of a Pangolin-style object store).
 *
 * Design
 *
 *   Each thread commits through a lane: a circular array of 64-byte lines (layout.h). A
 *   transaction's redo image is cut into 56-byte payloads; each line's header word, which
 *   carries the line kind, its index in the transaction and the low 48 bits of the
 *   transaction's sequence number (its "stamp"), is stored LAST with one 8-byte store. Under
 *   whole-line persistence atomicity (the paper's Assumption 2), a line whose header holds
 *   the stamp of transaction s also holds s's payload; so a transaction is complete iff all
 *   its lines carry its stamp, and no fence is needed between payload and marker. The same
 *   lines go to the replica lane. The lines are written with non-temporal stores (header
 *   word still last), so they need no flush, and ONE sfence is the commit point. Applying the records home is flushed but not fenced: the next fence of the same
 *   thread covers it.
 *
 *   Sequence numbers come from one counter. durable_seq (in both control pages) says: every
 *   transaction with seq <= durable_seq is applied and durable. Recovery replays, in
 *   sequence order, every complete transaction above durable_seq. Replaying DATA records and
 *   SET/CLR bit records is idempotent, so replaying a transaction whose apply already
 *   reached the media is harmless.
 *
 *   Invariants
 *   1. A line is overwritten only if the transaction it belongs to has seq <= the PERSISTED
 *      durable_seq (d_durable). Hence every committed transaction above durable_seq is
 *      intact in its lane and recovery sees the complete suffix; a transaction is never
 *      replayed without the later ones that overwrote the same bytes.
 *   2. durable_seq is only advanced to D if every transaction with seq <= D has been
 *      applied and its apply fenced by the thread that flushed it. The lanes publish what
 *      they have in flight (inflight_seq) and what they applied but may not have fenced
 *      (pending_seq); D = min over lanes of those, minus one (log_compute_durable).
 *   3. A thread's fence makes only its own flushes durable. When a lane passes to another
 *      thread, or an idle lane blocks durable_seq, the new thread "adopts" the pending
 *      transaction: it re-flushes that transaction's home ranges (read back from the lane,
 *      which invariant 1 keeps intact) so that its own fence covers them.
 *   4. Stamps are unique: after recovery durable_seq is set at or above every stamp present
 *      in any lane, and new sequence numbers start above it, so stale or torn lines can
 *      never be taken for part of a new transaction.
 *   5. In steady state a commit costs exactly one fence: durable_seq is advanced by plain
 *      stores + flush before the commit's own fence, which persists them (d_publish).
 *      Extra fences happen only when a lane is full and durable_seq cannot otherwise move.
 *   6. An intent (the ranges a transaction writes directly, before its commit) stays
 *      pending on its lane, unadoptable, until its direct writes are fenced: by the
 *      transaction's own commit fence, by an extra fence when its commit must wait for log
 *      room (two threads each holding an intent would otherwise wait on each other), or
 *      at abort. durable_seq never passes an intent whose direct writes may still be in
 *      flight, so recovery always finds it and recomputes the parity of its ranges.
 *      (Adopting it early let another thread under log pressure trim an intent mid-write:
 *      stale parity after a SIGKILL.)
 *   7. An undo entry (the old bytes of a range about to be written in place) stays pending
 *      on its lane, unadoptable, until its transaction's final commit or abort (a heap
 *      commit on the lane meanwhile keeps the hold: kr_log_applied_inner): durable_seq
 *      never passes it while the in-place stores it covers may still change, so recovery
 *      replays it and the old bytes come back. Under log pressure it is not closed early
 *      (as an intent is): the undo continues in a spill segment (below), or in a pool
 *      without LOG_SPILL the transaction fails with KR_E_NOSPACE_LOG.
 *   8. An undo entry that a CANCEL record covers (the lane's entries from the record's
 *      sequence number up to its own: a home commit or an abort, tx.c; the heap's run
 *      creations committed on the lane meanwhile too, whose applies are therefore made
 *      durable before the CANCEL, kr_log_flush_applies) is never replayed,
 *      and no record of an older transaction is replayed over its ranges (the masks of
 *      kr_log_recover): the bytes there were made durable at home, after those older
 *      transactions, with no redo that would replay them last. A spill segment stays out of
 *      use until durable_seq passes its transaction's CANCEL, so that every segment a
 *      replayable SPILL record names still holds its lines.
 *
 *   9. Lazy homes (page-cache mode, where a fence is a trip to the storage device). A
 *      commit's fence syncs its log lines, not its apply: the apply's stores stay in the
 *      page cache (kr_pm_flush_list_lazy). A lane's pending_seq is then its OLDEST
 *      applied transaction whose home may not be durable, and only a checkpoint
 *      (log_checkpoint: one sync of the whole file, by any thread, since the page cache is
 *      shared) moves it up: past every transaction applied before the sync began. So
 *      invariant 2 holds with "its apply synced by a checkpoint" for "fenced by the thread
 *      that flushed it", and no adoption is needed. Checkpoints run when a lane is half
 *      full, so a commit costs one round trip and one lane's worth of commits one more.
 *
 *  10. The commit gate nests. The allocator's internal transactions (a new spill segment
 *      that first turns empty runs back into chunks) may commit inside a commit; a thread
 *      leaves the gate only at its outermost kr_log_exit, so the outer commit never runs
 *      outside it, where a repair could see half of it.
 *
 *   Spilled undo. An in-place transaction's undo entries go to a spill segment (a heap
 *   block named by a SPILL record in the lane, or in the segment before it) when they
 *   would leave less than a quarter of the lane free (kr_log_undo_fits): the rest is for
 *   the transaction's commit, which may go to the segment too (kr_log_commit_last). Segment
 *   lines are written as lane lines are, but through the patch hook, which keeps the
 *   heap's parity as they change; recovery reads the segments that replayable SPILL records
 *   name and takes their transactions for the lane's.
 *
 *   Lane states: free -> held (kr_log_lane_acquire) -> committing (inflight_seq set,
 *   kr_log_commit) -> applying (kr_log_apply) -> applied (kr_log_applied: pending_seq)
 *   -> free (kr_log_lane_release).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "invariant.h"
#include "log_int.h"

#define FIRST_SZ sizeof(struct kr_tx_first)

static _Atomic uint64_t tid_counter;
static _Thread_local uint64_t my_tid;
static _Thread_local struct {
	const struct kr_log *log;
	uint32_t idx;
} lane_hint;

static _Thread_local struct kr_lane *cur_lane; /* the lane this thread is inside, if any */
static _Thread_local int gate_depth;           /* kr_log_enters inside the outermost one */
static _Thread_local uint64_t fault_pages[8];  /* repaired during this thread's commit */
static _Thread_local int nfault_pages;

static uint64_t self_tid(void)
{
	if (!my_tid)
		my_tid = atomic_fetch_add(&tid_counter, 1) + 1;
	return my_tid;
}

/* ---------------------------------------------------------------------------------------
 * Images
 * ------------------------------------------------------------------------------------- */
void kr_img_init(struct kr_img *img) { memset(img, 0, sizeof(*img)); }

void kr_img_reset(struct kr_img *img)
{
	img->len = FIRST_SZ;
	img->nrecords = 0;
	img->crc_end = FIRST_SZ;
	img->crc_part = 0;
	if (img->buf)
		memset(img->buf, 0, FIRST_SZ);
}

void kr_img_free(struct kr_img *img)
{
	free(img->buf);
	kr_img_init(img);
}

static int img_reserve(struct kr_img *img, size_t more)
{
	if (img->len < FIRST_SZ)
		img->len = FIRST_SZ;
	size_t need = img->len + more;
	if (need <= img->cap)
		return KR_OK;
	int fresh = !img->buf;
	if (KR_GROW(img->buf, img->cap, need, 1024))
		return kr_err_set(KR_E_NOMEM, "redo image of %zu bytes", need);
	if (fresh)
		memset(img->buf, 0, FIRST_SZ);
	return KR_OK;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

void *kr_img_data(struct kr_img *img, uint64_t off, uint32_t len)
{
	size_t total = sizeof(struct kr_rec_hdr) + pad8(len);
	if (img_reserve(img, total) != KR_OK)
		return NULL;
	struct kr_rec_hdr *h = (struct kr_rec_hdr *)(img->buf + img->len);
	h->kind = KR_REC_DATA;
	h->reserved = 0;
	h->len = len;
	h->off = off;
	uint8_t *data = (uint8_t *)(h + 1);
	memset(data + len, 0, pad8(len) - len);
	img->len += total;
	img->nrecords++;
	return data;
}

/* The stream offset the records' known checksum reaches (a fresh image: no record yet). */
static size_t img_crc_end(const struct kr_img *img)
{
	return img->crc_end < FIRST_SZ ? FIRST_SZ : img->crc_end;
}

int kr_img_data_copy_after(struct kr_img *img, uint64_t off, const void *head, uint32_t hlen,
			   const void *src, uint32_t len, uint32_t *crc)
{
	int known = img_crc_end(img) == (img->len < FIRST_SZ ? FIRST_SZ : img->len);
	uint8_t *d = kr_img_data(img, off, hlen + len);
	if (!d)
		return kr_errcode();
	if (hlen)
		memcpy(d, head, hlen);
	*crc = kr_crc32c_copy_extend(0, d + hlen, src, len);
	if (known) { /* the record's header, head, the bytes, their zero padding */
		uint32_t c = kr_crc32c_extend(img->crc_part, d - sizeof(struct kr_rec_hdr),
					      sizeof(struct kr_rec_hdr) + hlen);
		c = kr_crc32c_combine(c, *crc, len);
		uint32_t n = hlen + len;
		img->crc_part = n % 8 ? kr_crc32c_extend(c, d + n, pad8(n) - n) : c;
		img->crc_end = img->len;
	}
	return KR_OK;
}

int kr_img_data_copy(struct kr_img *img, uint64_t off, const void *src, uint32_t len, uint32_t *crc)
{
	return kr_img_data_copy_after(img, off, NULL, 0, src, len, crc);
}

int kr_img_bits(struct kr_img *img, unsigned kind, uint64_t off, uint64_t mask)
{
	uint64_t *d = kr_img_data(img, off, 8);
	if (!d)
		return kr_errcode();
	((struct kr_rec_hdr *)d - 1)->kind = (uint16_t)kind;
	*d = mask;
	return KR_OK;
}

int kr_img_intent(struct kr_img *img, uint64_t off, uint64_t len)
{
	return kr_img_bits(img, KR_REC_INTENT, off, len);
}

int kr_img_cancel(struct kr_img *img, uint64_t first)
{
	uint64_t *d = kr_img_data(img, first, 8);
	if (!d)
		return kr_errcode();
	((struct kr_rec_hdr *)d - 1)->kind = KR_REC_CANCEL;
	*d = 0;
	return KR_OK;
}

uint32_t kr_img_lines(const struct kr_img *img)
{
	size_t len = img->len < FIRST_SZ ? FIRST_SZ : img->len;
	return (uint32_t)((len + KR_LINE_PAYLOAD - 1) / KR_LINE_PAYLOAD);
}

/* Walks the records of a payload stream; calls fn for each. Returns KR_OK or the first
 * nonzero value fn returns. Used to apply, to validate and to adopt. */

int kr_log_stream_walk(const uint8_t *stream, size_t len, uint32_t nrecords, kr_rec_fn fn,
		       void *ctx)
{
	size_t pos = FIRST_SZ;
	for (uint32_t i = 0; i < nrecords; i++) {
		if (pos + sizeof(struct kr_rec_hdr) > len)
			return -1;
		const struct kr_rec_hdr *h = (const struct kr_rec_hdr *)(stream + pos);
		size_t total = sizeof(*h) + pad8(h->len);
		if (h->len > len || pos + total > len)
			return -1;
		int rc = fn(ctx, h, (const uint8_t *)(h + 1));
		if (rc)
			return rc;
		pos += total;
	}
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Applying records home
 * ------------------------------------------------------------------------------------- */
/* Bytes a record writes at its home offset. */
uint32_t kr_log_rec_home_len(const struct kr_rec_hdr *h)
{
	return h->kind == KR_REC_FRESH ? (uint32_t)sizeof(struct kr_obj_hdr) : h->len;
}

/* n bytes of a record home at off, flushed: a replay's plain write. */
void kr_log_put_home(struct kr_log *log, uint64_t off, const void *src, size_t n)
{
	kr_pm_copy(log->pm, log->pm->base + off, src, n);
	kr_pm_flush(log->pm, log->pm->base + off, n);
}

int kr_log_rec_apply(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct kr_log *log = ctx;
	char *dst = log->pm->base + h->off;
	switch (h->kind) {
	case KR_REC_DATA:
	case KR_REC_FRESH:
		kr_log_put_home(log, h->off, data, kr_log_rec_home_len(h));
		break;
	case KR_REC_SETBITS:
		kr_pm_or64(log->pm, (uint64_t *)dst, *(const uint64_t *)data);
		kr_pm_flush(log->pm, dst, 8);
		break;
	case KR_REC_CLRBITS:
		kr_pm_andn64(log->pm, (uint64_t *)dst, *(const uint64_t *)data);
		kr_pm_flush(log->pm, dst, 8);
		break;
	}
	return 0;
}

static int rec_apply_hooked(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct kr_log *log = ctx;
	log->hooks.apply(log->hooks.ctx, h, data);
	return 0;
}

void kr_log_apply(struct kr_log *log, struct kr_lane *l, const struct kr_img *img)
{
	kr_pm_defer_flushes(&l->deferred);
	kr_log_stream_walk(img->buf, img->len, img->nrecords, log->hooks.apply ? rec_apply_hooked : kr_log_rec_apply,
		    log);
	kr_pm_defer_flushes(NULL);
}

/* SPILL and CANCEL records name no bytes of their own at their offset. */
int kr_log_rec_names_bytes(const struct kr_rec_hdr *h)
{
	return h->kind != KR_REC_SPILL && h->kind != KR_REC_CANCEL;
}

static int rec_flush(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct kr_log *log = ctx;
	if (!kr_log_rec_names_bytes(h))
		return 0;
	/* An intent's range was written directly (with its parity) by the thread that
	 * logged it: adopting it means fencing those writes too. */
	uint64_t len = h->kind == KR_REC_INTENT ? *(const uint64_t *)data : kr_log_rec_home_len(h);
	kr_pm_flush(log->pm, log->pm->base + h->off, len);
	if (log->hooks.flush)
		log->hooks.flush(log->hooks.ctx, h->off, len);
	return 0;
}

static int in_valid_range(const struct kr_log *log, uint64_t off, uint64_t len)
{
	for (int i = 0; i < 3; i++)
		if (off >= log->valid_lo[i] && off <= log->valid_hi[i] && len <= log->valid_hi[i] - off)
			return 1;
	return 0;
}

/* Recovery only trusts records whose target lies in the heap or the root lines. */
int kr_log_rec_validate(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	const struct kr_log *log = ctx;
	if (h->reserved != 0)
		return 1;
	switch (h->kind) {
	case KR_REC_DATA:
		break;
	case KR_REC_SETBITS:
	case KR_REC_CLRBITS:
		if (h->len != 8 || (h->off & 7))
			return 1;
		break;
	case KR_REC_FRESH: {
		const struct kr_rec_fresh *f = (const struct kr_rec_fresh *)data;
		if (h->len != sizeof(*f) || f->hdr.size > UINT64_MAX / 2 ||
		    !in_valid_range(log, h->off, sizeof(f->hdr) + f->hdr.size))
			return 1;
		break;
	}
	case KR_REC_INTENT: {
		uint64_t n = *(const uint64_t *)data;
		return h->len != 8 || n > UINT64_MAX / 2 || !in_valid_range(log, h->off, n);
	}
	case KR_REC_SPILL: {
		const struct kr_rec_spill *sp = (const struct kr_rec_spill *)data;
		return !log->spill || h->len != sizeof(*sp) || (h->off & (KR_LINE_SIZE - 1)) ||
		       sp->nlines == 0 || sp->nlines > KR_SEG_MAX_LINES ||
		       !in_valid_range(log, h->off, sp->nlines * KR_LINE_SIZE) ||
		       (sp->replica_off && ((sp->replica_off & (KR_LINE_SIZE - 1)) ||
					    !in_valid_range(log, sp->replica_off, sp->nlines * KR_LINE_SIZE)));
	}
	case KR_REC_CANCEL:
		return !log->spill || h->len != 8 || *(const uint64_t *)data != 0;
	default:
		return 1;
	}
	return in_valid_range(log, h->off, h->len) ? 0 : 1;
}

/* A FRESH object's directly written payload must match the CRC-64 its record carries,
 * unless something later legitimately changed it; see kr_log_recover. */
int kr_log_rec_fresh_mismatch(const struct kr_log *log, const struct kr_rec_hdr *h,
			      const uint8_t *data)
{
	const struct kr_rec_fresh *f = (const struct kr_rec_fresh *)data;
	const char *payload = log->pm->base + h->off + sizeof(f->hdr);
	return kr_crc64(payload, f->hdr.size) != f->payload_crc64;
}

/* ---------------------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------------------- */
int kr_log_init(struct kr_log *log, struct kr_pm *pm, const struct kr_log_geom *g)
{
	memset(log, 0, sizeof(*log));
	log->pm = pm;
	log->ctl[0] = g->ctl[0];
	log->ctl[1] = g->ctl[1];
	log->nlanes = g->nlanes;
	log->lane_lines = g->lane_pages * KR_PAGE_SIZE / KR_LINE_SIZE;
	memcpy(log->valid_lo, g->valid_lo, sizeof(log->valid_lo));
	memcpy(log->valid_hi, g->valid_hi, sizeof(log->valid_hi));
	log->spill = g->spill;
	log->lazy = kr_pm_lazy(pm);
	pthread_mutex_init(&log->d_lock, NULL);
	log->lanes = kr_calloc_aligned(_Alignof(struct kr_lane), g->nlanes, sizeof(struct kr_lane));
	if (!log->lanes)
		return kr_err_set(KR_E_NOMEM, "%u lanes", g->nlanes);
	for (uint32_t i = 0; i < g->nlanes; i++) {
		struct kr_lane *l = &log->lanes[i];
		l->idx = i;
		l->log = log;
		l->lines = (struct kr_log_cacheline *)(g->lanes + (size_t)i * g->lane_pages * KR_PAGE_SIZE);
		l->replica = g->replica ? (struct kr_log_cacheline *)(g->replica + (size_t)i *
								      g->lane_pages * KR_PAGE_SIZE)
					: NULL;
		pthread_mutex_init(&l->lock, NULL);
		pthread_mutex_init(&l->st_lock, NULL);
		/* A transaction takes at least one line, so a lane holds at most lane_lines. */
		l->fifo_seq = kr_malloc(sizeof(uint64_t) * log->lane_lines);
		l->fifo_nlines = kr_malloc(sizeof(uint32_t) * log->lane_lines);
		if (log->lazy)
			l->ckpt_upto = kr_calloc(g->nlanes, sizeof(uint64_t));
		if (!l->fifo_seq || !l->fifo_nlines || (log->lazy && !l->ckpt_upto)) {
			kr_log_fini(log);
			return kr_err_set(KR_E_NOMEM, "lane tables");
		}
	}
	return KR_OK;
}

void kr_log_fini(struct kr_log *log)
{
	if (!log->lanes)
		return;
	for (uint32_t i = 0; i < log->nlanes; i++) {
		free(log->lanes[i].fifo_seq);
		free(log->lanes[i].fifo_nlines);
		free(log->lanes[i].ckpt_upto);
		kr_pm_flush_list_free(&log->lanes[i].deferred);
		pthread_mutex_destroy(&log->lanes[i].lock);
		pthread_mutex_destroy(&log->lanes[i].st_lock);
	}
	free(log->lanes);
	log->lanes = NULL;
	pthread_mutex_destroy(&log->d_lock);
}

static uint64_t durable_word(uint64_t d)
{
	return d | ((uint64_t)(kr_crc32c(&d, 8) & 0xffff) << KR_DURABLE_CHECK_SHIFT);
}

/* durable_seq from the control pages: the larger of the copies whose check matches (any
 * value that reached the media is valid: it is stored only after the transactions it
 * covers are durable). Fails if neither copy is intact, since replaying from a guess
 * could apply an old transaction over a newer one whose log lines were reused. */
int kr_log_ctl_durable(const struct kr_log *log, uint64_t *out)
{
	int found = 0;
	*out = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t w = log->ctl[i]->durable_word;
		uint64_t d = w & KR_DURABLE_SEQ_MASK;
		if (w != durable_word(d) || d >= KR_LINE_SEQ_MASK)
			continue;
		if (!found || d > *out)
			*out = d;
		found = 1;
	}
	if (!found)
		return KR_CORRUPT(KR_E_CORRUPT_LOG, (uint64_t)((char *)log->ctl[0] - log->pm->base),
				  "durable_seq is damaged in both control pages");
	return KR_OK;
}

int kr_log_is_clean(struct kr_log *log)
{
	return log->ctl[0]->clean == KR_CLEAN_MAGIC && log->ctl[1]->clean == KR_CLEAN_MAGIC;
}

uint64_t kr_log_fresh_word(struct kr_log *log)
{
	uint64_t w = log->ctl[0]->fresh_word;
	return kr_log_is_clean(log) && w == log->ctl[1]->fresh_word ? w : 0;
}

void kr_log_set_start(struct kr_log *log, uint64_t d)
{
	atomic_store(&log->d_durable, d);
	log->d_written = d;
	atomic_store(&log->next_seq, d + 1);
}

int kr_log_start_clean(struct kr_log *log)
{
	uint64_t d;
	int rc = kr_log_ctl_durable(log, &d);
	if (rc == KR_OK)
		kr_log_set_start(log, d);
	return rc;
}

/* Stores durable_seq, the clean word and the fresh word in both control pages and
 * flushes; the caller fences. A fresh word is only ever stored with the clean magic, so
 * whatever subset of these stores a crash keeps, a fresh word is never trusted without a
 * clean close behind it (kr_log_fresh_word). */
void kr_log_ctl_store(struct kr_log *log, uint64_t d, uint64_t clean, uint64_t fresh)
{
	for (int i = 0; i < 2; i++) {
		kr_pm_store64(log->pm, &log->ctl[i]->durable_word, durable_word(d));
		kr_pm_store64(log->pm, &log->ctl[i]->clean, clean);
		if (log->ctl[i]->fresh_word != fresh) /* open: already 0 after kr_log_mark_open */
			kr_pm_store64(log->pm, &log->ctl[i]->fresh_word, fresh);
		kr_pm_flush(log->pm, log->ctl[i], sizeof(struct kr_log_line));
	}
}

/* ---------------------------------------------------------------------------------------
 * Durable sequence number (invariants 2, 3, 5)
 * ------------------------------------------------------------------------------------- */
static uint64_t log_compute_durable(struct kr_log *log)
{
	/* next_seq first: any sequence number handed out after this read is larger, so a lane
	 * that is still reserving can only make the bound conservative. */
	uint64_t w = atomic_load(&log->next_seq);
	for (uint32_t i = 0; i < log->nlanes; i++) {
		struct kr_lane *l = &log->lanes[i];
		uint64_t inf;
		while ((inf = atomic_load(&l->inflight_seq)) == KR_SEQ_RESERVING)
			sched_yield();
		if (inf && inf < w)
			w = inf;
		uint64_t p = atomic_load(&l->pending_seq);
		if (p && p < w)
			w = p;
	}
	return w - 1;
}

/* Stores a larger durable_seq if there is one; it becomes valid after the caller's next
 * fence. Returns the value stored, or 0 if nothing changed. */
static uint64_t log_advance_durable(struct kr_log *log)
{
	uint64_t d = log_compute_durable(log);
	KR_INVARIANT("log.c", 2, d < atomic_load(&log->next_seq));
	uint64_t stored = 0;
	pthread_mutex_lock(&log->d_lock);
	if (d > log->d_written) {
		kr_log_ctl_store(log, d, 0, 0);
		log->d_written = d;
		stored = d;
	}
	pthread_mutex_unlock(&log->d_lock);
	return stored;
}

static void log_publish_durable(struct kr_log *log, uint64_t d)
{
	uint64_t cur = atomic_load(&log->d_durable);
	while (cur < d && !atomic_compare_exchange_weak(&log->d_durable, &cur, d))
		;
}

/* Reads a transaction's payload stream out of its lane lines into a malloc'd buffer. */
uint8_t *kr_log_lane_read_stream(const struct kr_log_cacheline *lines, uint32_t ring,
				 uint32_t first, uint32_t nlines)
{
	uint8_t *s = kr_malloc((size_t)nlines * KR_LINE_PAYLOAD);
	if (!s)
		return NULL;
	for (uint32_t k = 0; k < nlines; k++)
		memcpy(s + (size_t)k * KR_LINE_PAYLOAD, lines[(first + k) % ring].payload,
		       KR_LINE_PAYLOAD);
	return s;
}

/* Re-flushes the home ranges of a lane's pending transaction so that the calling thread's
 * next fence makes them durable (invariant 3). Caller holds l->st_lock. */
static int lane_adopt_locked(struct kr_log *log, struct kr_lane *l)
{
	if (log->lazy) { /* a checkpoint's sync covers every thread's applies (invariant 9) */
		l->pending_tid = self_tid();
		return KR_OK;
	}
	uint8_t *s = kr_log_lane_read_stream(l->pending_lines, l->pending_ring, l->pending_first, l->pending_nlines);
	if (!s)
		return kr_err_set(KR_E_NOMEM, "adopting lane %u", l->idx);
	const struct kr_tx_first *f = (const struct kr_tx_first *)s;
	kr_log_stream_walk(s, (size_t)l->pending_nlines * KR_LINE_PAYLOAD, f->nrecords, rec_flush, log);
	free(s);
	l->pending_tid = self_tid();
	return KR_OK;
}

/* What each lane had applied before a checkpoint's sync begins. */
static void ckpt_snapshot(struct kr_log *log, uint64_t *upto)
{
	for (uint32_t i = 0; i < log->nlanes; i++)
		upto[i] = atomic_load(&log->lanes[i].applied_seq);
}

/* After a sync of the whole file that began after ckpt_snapshot(upto). */
static void ckpt_advance(struct kr_log *log, const uint64_t *upto)
{
	for (uint32_t i = 0; i < log->nlanes; i++) {
		struct kr_lane *l = &log->lanes[i];
		pthread_mutex_lock(&l->st_lock);
		if (upto[i] > l->synced_upto)
			l->synced_upto = upto[i];
		uint64_t p = atomic_load(&l->pending_seq);
		if (p && !l->intent_open) {
			/* Sequence numbers grow along a lane: whatever it applied after the
			 * snapshot is above upto[i]. */
			uint64_t np = 0;
			if (atomic_load(&l->applied_seq) > upto[i])
				np = p > upto[i] + 1 ? p : upto[i] + 1;
			atomic_store(&l->pending_seq, np);
		}
		pthread_mutex_unlock(&l->st_lock);
	}
}

/* Lazy homes (invariant 9): one sync of the whole file makes every apply that ended before
 * it durable; each lane's pending_seq then moves past the transactions it applied before
 * the sync began (to 0 if none came after). A lane holding an intent or undo keeps its
 * hold (invariants 6, 7). lane_make_room does the same with a commit's own fence. */
static int log_checkpoint(struct kr_log *log)
{
	uint64_t upto[log->nlanes];
	ckpt_snapshot(log, upto);
	int rc = kr_pm_sync_all(log->pm);
	if (rc == KR_OK)
		ckpt_advance(log, upto);
	return rc;
}

/* Makes every lane's applied transactions durable through this thread, then moves
 * durable_seq as far as it can go. Costs two fences; used only under log pressure, by
 * kr_log_sync and at close. Lanes that are mid-commit are left alone (they advance by
 * themselves). */
static int log_force_durable(struct kr_log *log)
{
	if (log->lazy) {
		int rc = log_checkpoint(log);
		uint64_t d = rc ? 0 : log_advance_durable(log);
		if (rc == KR_OK && (rc = kr_pm_fence(log->pm)) == KR_OK && d)
			log_publish_durable(log, d);
		return rc;
	}
	uint64_t adopted[log->nlanes];
	for (uint32_t i = 0; i < log->nlanes; i++) {
		struct kr_lane *l = &log->lanes[i];
		adopted[i] = 0;
		pthread_mutex_lock(&l->st_lock);
		uint64_t p = atomic_load(&l->pending_seq);
		if (p && atomic_load(&l->inflight_seq) == 0 && !l->intent_open) {
			/* Even a lane this thread applied on: its write-backs may still be
			 * deferred in the lane's list, which only the lane's holder touches. */
			if (lane_adopt_locked(log, l) != KR_OK) {
				pthread_mutex_unlock(&l->st_lock);
				return kr_errcode();
			}
			adopted[i] = p;
		}
		pthread_mutex_unlock(&l->st_lock);
	}
	int rc = kr_pm_fence(log->pm); /* orders: all adopted applies durable before D moves */
	if (rc)
		return rc;
	for (uint32_t i = 0; i < log->nlanes; i++) {
		struct kr_lane *l = &log->lanes[i];
		if (!adopted[i])
			continue;
		pthread_mutex_lock(&l->st_lock);
		uint64_t expect = adopted[i];
		atomic_compare_exchange_strong(&l->pending_seq, &expect, 0);
		pthread_mutex_unlock(&l->st_lock);
	}
	uint64_t d = log_advance_durable(log);
	rc = kr_pm_fence(log->pm); /* orders: durable_seq persisted before its lines are reused */
	if (rc)
		return rc;
	if (d)
		log_publish_durable(log, d);
	return KR_OK;
}

int kr_log_sync(struct kr_log *log, struct kr_lane *lane)
{
	int rc = log_force_durable(log);
	if (rc == KR_OK && lane)
		lane->d_publish = 0;
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Lanes
 * ------------------------------------------------------------------------------------- */

/* Asks for next_seq's line, for writing, well before the commit's fetch-and-add (log_write):
 * with two threads committing, the other thread's last commit took the line, and the locked
 * add would otherwise stall the commit for the whole transfer. Called when a transaction
 * takes its lane and again when its commit enters the gate, where the transfer overlaps
 * building the redo image. (2-thread overwrites of 64 bytes, AMD EPYC guest, 4
 * interleaved pairs: 1.57-1.64M -> 1.63-1.69M/s; the stripe lines, taken just before,
 * still cost more. One thread unchanged.) */
static void seq_line_prefetch(struct kr_log *log) { __builtin_prefetch(&log->next_seq, 1, 3); }

int kr_log_lane_acquire(struct kr_log *log, struct kr_lane **out)
{
	struct kr_lane *l = NULL;
	uint32_t start = lane_hint.log == log ? lane_hint.idx : (uint32_t)(self_tid() % log->nlanes);
	for (uint32_t k = 0; k < log->nlanes && !l; k++) {
		struct kr_lane *c = &log->lanes[(start + k) % log->nlanes];
		if (pthread_mutex_trylock(&c->lock) == 0)
			l = c;
	}
	if (!l) {
		l = &log->lanes[start];
		pthread_mutex_lock(&l->lock);
	}
	lane_hint.log = log;
	lane_hint.idx = l->idx;
	atomic_store_explicit(&l->held, 1, memory_order_relaxed);
	/* Invariant 3: the previous holder's unfenced apply becomes ours to fence. */
	pthread_mutex_lock(&l->st_lock);
	int rc = KR_OK;
	if (atomic_load(&l->pending_seq) && l->pending_tid != self_tid())
		rc = lane_adopt_locked(log, l);
	pthread_mutex_unlock(&l->st_lock);
	if (rc) {
		pthread_mutex_unlock(&l->lock);
		return rc;
	}
	seq_line_prefetch(log);
	*out = l;
	return KR_OK;
}

void kr_log_lane_release(struct kr_log *log, struct kr_lane *lane)
{
	/* An aborted transaction's intent: its direct writes are over, flushed, not fenced;
	 * now adoption may take them (rec_flush re-flushes intent ranges). */
	if (lane->intent_open) {
		pthread_mutex_lock(&lane->st_lock);
		lane->intent_open = 0;
		pthread_mutex_unlock(&lane->st_lock);
	}
	atomic_store_explicit(&lane->held, 0, memory_order_relaxed);
	pthread_mutex_unlock(&lane->lock);
}

uint32_t kr_log_lanes_held(struct kr_log *log)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < log->nlanes; i++)
		n += (uint32_t)atomic_load_explicit(&log->lanes[i].held, memory_order_relaxed);
	return n;
}

static void lane_trim(struct kr_log *log, struct kr_lane *l)
{
	uint64_t d = kr_log_durable_seq(log);
	while (l->fifo_count && l->fifo_seq[l->fifo_first] <= d) {
		uint32_t n = l->fifo_nlines[l->fifo_first];
		l->head = (l->head + n) % log->lane_lines;
		l->used -= n;
		l->fifo_first = (l->fifo_first + 1) % log->lane_lines;
		l->fifo_count--;
	}
}

/* Ensures need lines are free behind the persisted durable_seq (invariant 1). */
static int lane_make_room(struct kr_log *log, struct kr_lane *l, uint32_t need)
{
	lane_trim(log, l);
	if (l->used + need > log->lane_lines / 2 && !l->d_publish) {
		l->d_publish = log_advance_durable(log); /* persisted by this commit's fence */
		if (log->lazy && !l->d_publish && !l->ckpt_armed) {
			/* Invariant 9: durable_seq cannot move until the applies are synced. This
			 * commit's fence is that sync; a later commit of the lane moves it. */
			ckpt_snapshot(log, l->ckpt_upto);
			kr_pm_sync_all_next(log->pm);
			l->ckpt_armed = 1;
		}
	}
	for (int spins = 0; l->used + need > log->lane_lines; spins++) {
		/* Our own open intent holds durable_seq below it, for every lane, and another
		 * thread's lane may be waiting on it while we wait on that thread's intent. By
		 * now our direct writes are done (they precede the commit): fence them and close
		 * the intent, one extra fence under log pressure (invariant 6). */
		if (l->intent_open == KR_HOLD_INTENT) {
			int frc = kr_pm_fence(log->pm);
			if (frc)
				return frc;
			pthread_mutex_lock(&l->st_lock);
			l->intent_open = 0;
			pthread_mutex_unlock(&l->st_lock);
		}
		int rc = log_force_durable(log);
		if (rc)
			return rc;
		l->d_publish = 0;
		lane_trim(log, l);
		if (l->used + need <= log->lane_lines)
			break;
		/* Our own undo holds durable_seq below it until our transaction ends, so what
		 * does not fit now never will: the transaction is too large for a lane. */
		if (l->intent_open == KR_HOLD_UNDO)
			return kr_err_set(KR_E_NOSPACE_LOG,
					  "in-place transaction needs more than lane %u holds", l->idx);
		if (spins > 1000000)
			return kr_err_set(KR_E_NOSPACE_LOG, "lane %u cannot be trimmed", l->idx);
		sched_yield(); /* another lane is mid-commit below us; it finishes on its own */
	}
	return KR_OK;
}

/* ---------------------------------------------------------------------------------------
 * Commit (the durability protocol, top to bottom)
 * ------------------------------------------------------------------------------------- */
#ifdef KR_DEBUG_INVARIANTS
static uint64_t line_seq(uint64_t header)
{
	return (header >> KR_LINE_SEQ_SHIFT) & KR_LINE_SEQ_MASK;
}
#endif

/* Where an entry's lines go: a lane, a ring of ring lines, or a spill segment, which never
 * wraps and lies in the heap, so that its writes keep the heap's redundancy (the patch
 * hook) and its old lines are whatever the heap held there. */
struct target {
	struct kr_log_cacheline *lines, *replica;
	uint32_t ring;
	int seg;
};

static void lane_write_lines(struct kr_log *log, const struct target *t, struct kr_log_cacheline *lines,
			     uint32_t first, const uint8_t *stream, uint32_t nlines, uint64_t seq)
{
	/* The lines stream past the cache (kr_pm_lines_nt), each header word stored after its
	 * payload: nobody reads them back unless there is a crash or an adoption, and cached
	 * stores cost a read-for-ownership of every line and a write-back that doubled the
	 * commit time of a 16 KiB overwrite. Headers are built a batch at a time; a batch ends
	 * at the ring's wrap (first < ring always: it is a tail). */
	enum { BATCH = 64 };
	uint64_t words[BATCH];
	struct kr_log_cacheline img[BATCH];
	uint32_t idx = first;
	for (uint32_t k = 0; k < nlines;) {
		uint32_t n = nlines - k;
		if (n > BATCH)
			n = BATCH;
		if (n > t->ring - idx)
			n = t->ring - idx;
		for (uint32_t j = 0; j < n; j++) {
			/* A stamp at or beyond next_seq was never written by this log: damage,
			 * which the line's CRC reports where it matters; only real stamps are
			 * judged. (A segment's old lines are the heap's bytes.) */
			KR_INVARIANT("log.c", 1,
				     t->seg || line_seq(lines[idx + j].header) <= atomic_load(&log->d_durable) ||
					     line_seq(lines[idx + j].header) >= atomic_load(&log->next_seq));
			words[j] = (k + j == 0 ? KR_LINE_FIRST : KR_LINE_CONT) |
				   ((uint64_t)(k + j) << KR_LINE_INDEX_SHIFT) |
				   ((seq & KR_LINE_SEQ_MASK) << KR_LINE_SEQ_SHIFT);
		}
		const uint8_t *payload = stream + (size_t)k * KR_LINE_PAYLOAD;
		if (t->seg && log->hooks.patch) {
			for (uint32_t j = 0; j < n; j++) {
				img[j].header = words[j];
				memcpy(img[j].payload, payload + (size_t)j * KR_LINE_PAYLOAD, KR_LINE_PAYLOAD);
			}
			log->hooks.patch(log->hooks.ctx, (uint64_t)((char *)&lines[idx] - log->pm->base),
					 &lines[idx], img, (size_t)n * KR_LINE_SIZE);
		}
		kr_pm_lines_nt(log->pm, &lines[idx], words, payload, n);
		k += n;
		idx = idx + n == t->ring ? 0 : idx + n;
	}
}

/* Seals the image as transaction seq's and writes it at first of the target, primary then
 * replica, then THE fence. Steps 2 to 5 of a commit (log_commit). */
static int log_write(struct kr_log *log, struct kr_lane *l, struct kr_img *img, uint32_t flags,
		     const struct target *t, uint32_t first, uint64_t *seq_out)
{
	uint32_t nlines = kr_img_lines(img);
	/* 2. Sequence number, published before it exists (invariant 2). Stamps are 48 bits;
	 * at 10^7 commits per second the space lasts 890 years, so running out means a damaged
	 * durable_seq, and committing past it would make every later transaction unrecoverable. */
	if (atomic_load(&log->next_seq) >= KR_LINE_SEQ_MASK)
		return kr_err_set(KR_E_CORRUPT_LOG, "sequence numbers exhausted (durable_seq damaged?)");
	atomic_store(&l->inflight_seq, KR_SEQ_RESERVING);
	uint64_t seq = atomic_fetch_add(&log->next_seq, 1);
	atomic_store(&l->inflight_seq, seq);
	KR_INVARIANT("log.c", 4, seq > atomic_load(&log->d_durable));

	/* 3. Seal the image: first-line prefix and CRC-32C of the whole payload stream (the
	 * records' part known from kr_img_data_copy is not read again). */
	struct kr_tx_first *f = (struct kr_tx_first *)img->buf;
	f->nlines = nlines;
	f->nrecords = img->nrecords;
	f->crc = 0;
	f->flags = flags;
	f->seq = seq;
	size_t known = img_crc_end(img);
	uint32_t crc = kr_crc32c_combine(kr_crc32c(img->buf, FIRST_SZ), img->crc_part, known - FIRST_SZ);
	f->crc = kr_crc32c_extend(crc, img->buf + known, (size_t)nlines * KR_LINE_PAYLOAD - known);

	/* 4. Lines, primary then replica, each header last, streamed (no flush needed). */
	lane_write_lines(log, t, t->lines, first, img->buf, nlines, seq);
	if (t->replica)
		lane_write_lines(log, t, t->replica, first, img->buf, nlines, seq);
	/* The previous apply on this lane, so that this fence makes it durable too; with lazy
	 * homes, left for the next checkpoint (invariant 9). */
	kr_pm_flush_list_lazy(log->pm, &l->deferred);
	kr_pm_count_logged((size_t)nlines * KR_LINE_SIZE * (t->replica ? 2 : 1));

	/* 5. THE fence: orders the log lines (and this thread's earlier applies, the durable_seq
	 * advance of step 1, and fresh-object writes made by the caller) before the commit is
	 * acknowledged. The transaction is durable when it returns. */
	int rc = kr_pm_fence(log->pm);
	if (l->d_publish) {
		log_publish_durable(log, l->d_publish);
		l->d_publish = 0;
	}
	if (l->ckpt_armed) { /* that fence was a checkpoint's sync (lane_make_room) */
		if (rc == KR_OK)
			ckpt_advance(log, l->ckpt_upto);
		l->ckpt_armed = 0;
	}
	*seq_out = seq;
	kr_pm_count_commit();
	atomic_store_explicit(&l->commits, atomic_load_explicit(&l->commits, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	return rc;
}

/* The image's lines, zero-padded to whole lines; KR_E_NOSPACE_LOG beyond one transaction's
 * limit or ring lines. */
static int img_pad(struct kr_log *log, struct kr_img *img, uint32_t ring)
{
	uint32_t nlines = kr_img_lines(img);
	if (nlines > ring || nlines > KR_TX_MAX_LINES)
		return kr_err_set(KR_E_NOSPACE_LOG, "transaction needs %u log lines; %u is the most it may take here",
				  nlines, (unsigned)(ring < KR_TX_MAX_LINES ? ring : KR_TX_MAX_LINES));
	if (img_reserve(img, (size_t)nlines * KR_LINE_PAYLOAD - img->len) != KR_OK)
		return kr_errcode();
	memset(img->buf + img->len, 0, (size_t)nlines * KR_LINE_PAYLOAD - img->len);
	return KR_OK;
}

/* Kept for adoption: where the lane's last transaction's records sit (its ring, or its
 * spill segment's). */
static void pending_at(struct kr_lane *l, const struct kr_log_cacheline *lines, uint32_t ring,
		       uint32_t first, uint32_t nlines)
{
	pthread_mutex_lock(&l->st_lock);
	l->pending_lines = lines;
	l->pending_ring = ring;
	l->pending_first = first;
	l->pending_nlines = nlines;
	pthread_mutex_unlock(&l->st_lock);
}

static int log_commit(struct kr_log *log, struct kr_lane *l, struct kr_img *img, uint32_t flags,
		      uint64_t *seq_out)
{
	/* A session's transactions write only after the clean flag is durably cleared. */
	KR_INVARIANT("pool.c", 1, log->ctl[0]->clean != KR_CLEAN_MAGIC);
	int rc = img_pad(log, img, log->lane_lines);
	if (rc)
		return rc;
	uint32_t nlines = kr_img_lines(img);

	/* 1. Room in the lane, behind the persisted durable_seq. */
	if ((rc = lane_make_room(log, l, nlines)))
		return rc;

	uint32_t first = l->tail;
	struct target t = {l->lines, l->replica, log->lane_lines, 0};
	uint64_t seq = 0;
	rc = log_write(log, l, img, flags, &t, first, &seq);
	if (!seq)
		return rc;
	l->tail = (first + nlines) % log->lane_lines;
	l->used += nlines;
	uint32_t slot = (l->fifo_first + l->fifo_count) % log->lane_lines;
	l->fifo_seq[slot] = seq;
	l->fifo_nlines[slot] = nlines;
	l->fifo_count++;
	pending_at(l, l->lines, log->lane_lines, first, nlines);
	*seq_out = seq;
	return rc;
}

/* An entry appended to the lane's spill segment (the caller checked the room). Not in the
 * lane's ring: nothing to trim there. */
static int seg_commit(struct kr_log *log, struct kr_lane *l, struct kr_img *img, uint32_t flags,
		      uint64_t *seq_out)
{
	KR_INVARIANT("pool.c", 1, log->ctl[0]->clean != KR_CLEAN_MAGIC);
	int rc = img_pad(log, img, l->seg_lines);
	if (rc)
		return rc;
	uint32_t nlines = kr_img_lines(img);
	if (nlines > l->seg_lines - l->seg_tail)
		return kr_err_set(KR_E_NOSPACE_LOG, "spill segment of lane %u is full", l->idx);
	struct target t = {l->seg, l->seg_replica, l->seg_lines, 1};
	uint64_t seq = 0;
	uint32_t first = l->seg_tail;
	rc = log_write(log, l, img, flags, &t, first, &seq);
	if (!seq)
		return rc;
	l->seg_tail += nlines;
	pending_at(l, l->seg, l->seg_lines, first, nlines);
	*seq_out = seq;
	return rc;
}

int kr_log_wait_room(struct kr_log *log, struct kr_lane *l, uint32_t nlines)
{
	return lane_make_room(log, l, nlines);
}

int kr_log_commit(struct kr_log *log, struct kr_lane *l, struct kr_img *img, uint64_t *seq_out)
{
	return log_commit(log, l, img, 0, seq_out);
}

static void lane_set_pending(struct kr_lane *l, uint64_t seq, uint8_t intent_open)
{
	pthread_mutex_lock(&l->st_lock);
	uint64_t old = atomic_load(&l->pending_seq);
	if (l->log->lazy && old && old < seq) /* the oldest not yet synced (invariant 9) */
		seq = old;
	atomic_store(&l->pending_seq, seq);
	l->pending_tid = self_tid();
	l->intent_open = intent_open;
	atomic_store(&l->inflight_seq, 0);
	pthread_mutex_unlock(&l->st_lock);
}

/* An intent has nothing to apply: its "apply" is the direct writes the caller makes next,
 * which only its transaction's commit fence makes durable. Until then (kr_log_applied, or
 * the lane's release on abort) the intent stays pending and unadoptable, so durable_seq
 * cannot pass it: a crash in the middle of the direct writes finds it and recomputes
 * parity there (invariant 6). */
int kr_log_commit_intent(struct kr_log *log, struct kr_lane *l, struct kr_img *img)
{
	uint64_t seq = 0;
	int rc = log_commit(log, l, img, KR_TXF_INTENT, &seq);
	if (seq && l->intent_open == KR_HOLD_UNDO) /* the older hold stays (invariant 7) */
		lane_set_pending(l, atomic_load(&l->pending_seq), KR_HOLD_UNDO);
	else if (seq)
		lane_set_pending(l, seq, KR_HOLD_INTENT);
	return rc;
}

/* Invariant 9, checked by the holder after an apply: pending_seq is at or below every
 * transaction of the lane applied since its last checkpoint (the lane's fifo holds them). */
static inline int lazy_pending_ok(struct kr_log *log, struct kr_lane *l, uint64_t seq)
{
	pthread_mutex_lock(&l->st_lock);
	uint64_t p = atomic_load(&l->pending_seq), floor = l->synced_upto;
	pthread_mutex_unlock(&l->st_lock);
	for (uint32_t k = 0; k < l->fifo_count; k++) {
		uint64_t s = l->fifo_seq[(l->fifo_first + k) % log->lane_lines];
		if (s > floor && s <= seq && (p == 0 || p > s))
			return 0;
	}
	return 1;
}

void kr_log_applied(struct kr_log *log, struct kr_lane *l, uint64_t seq)
{
	/* Set before pending_seq: a checkpoint that reads it finds the apply's stores done. */
	atomic_store(&l->applied_seq, seq);
	lane_set_pending(l, seq, 0);
	KR_INVARIANT("log.c", 9, !log->lazy || lazy_pending_ok(log, l, seq));
}

void kr_log_flush_applies(struct kr_log *log, struct kr_lane *l)
{
	kr_pm_flush_list(log->pm, &l->deferred);
	/* With lazy homes an earlier commit's own fence already took its applies off the list,
	 * left for the next checkpoint (invariant 9): the caller's fence syncs the whole file. */
	if (log->lazy)
		kr_pm_sync_all_next(log->pm);
}

void kr_log_applied_inner(struct kr_log *log, struct kr_lane *l, uint64_t seq)
{
	if (!l->intent_open) {
		kr_log_applied(log, l, seq);
		return;
	}
	atomic_store(&l->applied_seq, seq);
	lane_set_pending(l, atomic_load(&l->pending_seq), l->intent_open);
}

/* An undo entry is an ordinary transaction (recovery replays it: the old bytes come back),
 * committed before the application stores over those bytes in place. Its transaction's
 * final commit replays after it and puts the new bytes back; an abort restores the old
 * bytes itself. Until one of the two, the lane stays pending at the FIRST undo of the
 * transaction, unadoptable, so durable_seq cannot pass any of them (invariant 7). With
 * intent, the entry is an intent instead (new objects written in place: free space until
 * the commit, so nothing to restore, only parity to recompute), held the same way. */
/* Entry seq (0: none was committed) is part of the lane's open undo, which begins at
 * *first (set to seq if 0): the lane stays pending there (invariant 7). */
static void undo_hold(struct kr_lane *l, uint64_t seq, uint64_t *first)
{
	if (!seq)
		return;
	if (!*first)
		*first = seq;
	lane_set_pending(l, *first, KR_HOLD_UNDO);
}

int kr_log_commit_undo(struct kr_log *log, struct kr_lane *l, struct kr_img *img, int intent,
		       uint64_t *first)
{
	uint64_t seq = 0;
	uint32_t flags = intent ? KR_TXF_INTENT : 0;
	int rc = l->seg ? seg_commit(log, l, img, flags, &seq) : log_commit(log, l, img, flags, &seq);
	undo_hold(l, seq, first);
	return rc;
}

/* The lines of an entry that attaches a segment: the first line's prefix, an INTENT
 * record and a SPILL record. */
#define SPILL_ENTRY_LINES                                                                      \
	((FIRST_SZ + 2 * sizeof(struct kr_rec_hdr) + 8 + sizeof(struct kr_rec_spill) +          \
	  KR_LINE_PAYLOAD - 1) / KR_LINE_PAYLOAD)

/* Lines of a lane that a transaction's undo leaves free while it spills: its intents, the
 * segments' SPILL entries and its commit go there. */
static uint32_t spill_reserve(const struct kr_log *log) { return log->lane_lines / 4; }

/* Whether nlines fit the lane with reserve lines to spare, once what durable_seq has passed
 * is trimmed; with force, durable_seq is pushed forward once first if that is short. */
static int lane_fits(struct kr_log *log, struct kr_lane *l, uint32_t nlines, uint32_t reserve,
		     int force)
{
	if ((uint64_t)nlines + reserve > log->lane_lines)
		return 0;
	/* Older transactions go once durable_seq passes them; an open in-place transaction
	 * (ours, or another thread's) may hold it back for long. */
	for (int tries = 0; tries < 2; tries++) {
		lane_trim(log, l);
		if (l->used + nlines + reserve <= log->lane_lines)
			return 1;
		if (!force || tries > 0 || log_force_durable(log) != KR_OK)
			break;
	}
	return 0;
}

int kr_log_fits(struct kr_log *log, struct kr_lane *l, uint32_t nlines, uint32_t reserve)
{
	return lane_fits(log, l, nlines, reserve, 1);
}

int kr_log_undo_fits(struct kr_log *log, struct kr_lane *l, uint32_t nlines)
{
	if (l->seg) /* room stays for the next segment's SPILL entry */
		return (uint64_t)nlines + SPILL_ENTRY_LINES <= l->seg_lines - l->seg_tail;
	return !log->spill || kr_log_fits(log, l, nlines, spill_reserve(log));
}

int kr_log_last_fits(struct kr_log *log, struct kr_lane *l, uint32_t nlines)
{
	return kr_log_fits(log, l, nlines, 0) || (l->seg && nlines <= l->seg_lines - l->seg_tail);
}

int kr_log_commit_last(struct kr_log *log, struct kr_lane *l, struct kr_img *img, uint64_t *seq)
{
	/* kr_log_last_fits has pushed durable_seq already where that helped: room in the lane
	 * has only grown since. */
	if (l->seg && !lane_fits(log, l, kr_img_lines(img), 0, 0))
		return seg_commit(log, l, img, 0, seq);
	return log_commit(log, l, img, 0, seq);
}

int kr_log_spill_attach(struct kr_log *log, struct kr_lane *l, uint64_t off, uint64_t replica_off,
			uint32_t nlines, uint64_t block_off, uint64_t block_len, uint64_t *first)
{
	struct kr_img img;
	kr_img_init(&img);
	kr_img_reset(&img);
	int rc = kr_img_intent(&img, block_off, block_len);
	struct kr_rec_spill *sp = rc == KR_OK ? kr_img_data(&img, off, sizeof(*sp)) : NULL;
	uint64_t seq = 0;
	if (!sp) {
		rc = kr_errcode();
	} else {
		((struct kr_rec_hdr *)sp - 1)->kind = KR_REC_SPILL;
		sp->nlines = nlines;
		sp->replica_off = replica_off;
		/* In the current segment's last line (kr_log_undo_fits keeps it), or the lane's
		 * room for the first one. */
		rc = l->seg ? seg_commit(log, l, &img, 0, &seq) : log_commit(log, l, &img, 0, &seq);
	}
	kr_img_free(&img);
	undo_hold(l, seq, first);
	if (rc == KR_OK) {
		l->seg = (struct kr_log_cacheline *)(log->pm->base + off);
		l->seg_replica = replica_off ? (struct kr_log_cacheline *)(log->pm->base + replica_off) : NULL;
		l->seg_lines = nlines;
		l->seg_tail = 0;
	}
	return rc;
}

void kr_log_spill_detach(struct kr_lane *l)
{
	l->seg = l->seg_replica = NULL;
	l->seg_lines = l->seg_tail = 0;
}

/* ---------------------------------------------------------------------------------------
 * The commit gate (Dekker style: each side stores its own flag, then reads the other's;
 * sequentially consistent atomics order the store before the load)
 * ------------------------------------------------------------------------------------- */
void kr_log_enter(struct kr_log *log, struct kr_lane *l)
{
	if (cur_lane == l) { /* an internal commit inside a commit (invariant 10) */
		gate_depth++;
		return;
	}
	seq_line_prefetch(log);
	for (;;) {
		atomic_store(&l->in_commit, 1);
		if (!atomic_load(&log->repairing))
			break;
		atomic_store(&l->in_commit, 0);
		while (atomic_load(&log->repairing))
			sched_yield();
	}
	cur_lane = l;
}

void kr_log_exit(struct kr_log *log, struct kr_lane *l)
{
	KR_INVARIANT("log.c", 10, cur_lane == l && atomic_load(&l->in_commit));
	if (gate_depth) {
		gate_depth--;
		return;
	}
	cur_lane = NULL;
	atomic_store_explicit(&l->in_commit, 0, memory_order_release);
	for (; nfault_pages > 0; nfault_pages--)
		if (log->hooks.after_fault)
			log->hooks.after_fault(log->hooks.fault_ctx, fault_pages[nfault_pages - 1]);
}

void kr_log_note_fault(uint64_t page)
{
	if (cur_lane && nfault_pages < (int)(sizeof(fault_pages) / sizeof(fault_pages[0])))
		fault_pages[nfault_pages++] = page;
}

void kr_log_quiesce(struct kr_log *log)
{
	atomic_store(&log->repairing, 1);
	for (uint32_t i = 0; i < log->nlanes; i++)
		while (atomic_load(&log->lanes[i].in_commit))
			sched_yield();
}

void kr_log_resume(struct kr_log *log) { atomic_store(&log->repairing, 0); }

int kr_log_suspend(void)
{
	if (!cur_lane)
		return 0;
	atomic_store(&cur_lane->stepped_out, 1); /* before it leaves: kr_log_any_stepped_out */
	atomic_store(&cur_lane->in_commit, 0);
	return 1;
}

void kr_log_unsuspend(int token)
{
	if (!token || !cur_lane)
		return;
	/* Back inside the gate, by the same protocol as kr_log_enter: a repair that started
	 * while this thread was out finishes first. */
	for (;;) {
		atomic_store(&cur_lane->in_commit, 1);
		if (!atomic_load(&cur_lane->log->repairing))
			break;
		atomic_store(&cur_lane->in_commit, 0);
		while (atomic_load(&cur_lane->log->repairing))
			sched_yield();
	}
	atomic_store(&cur_lane->stepped_out, 0);
}

void kr_log_abandon(void)
{
	if (!cur_lane)
		return;
	atomic_store(&cur_lane->stepped_out, 0);
	cur_lane = NULL;
	gate_depth = 0;
}

int kr_log_any_stepped_out(struct kr_log *log)
{
	for (uint32_t i = 0; i < log->nlanes; i++)
		if (atomic_load(&log->lanes[i].stepped_out))
			return 1;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Open and close (recovery: log_recover.c)
 * ------------------------------------------------------------------------------------- */
void kr_log_format(struct kr_pm *pm, struct kr_log_line *ctl[2], uint64_t fresh_word)
{
	for (int i = 0; i < 2; i++) {
		kr_pm_store64(pm, &ctl[i]->durable_word, durable_word(0));
		kr_pm_store64(pm, &ctl[i]->clean, KR_CLEAN_MAGIC);
		kr_pm_store64(pm, &ctl[i]->fresh_word, fresh_word);
		kr_pm_flush(pm, ctl[i], sizeof(struct kr_log_line));
	}
}

int kr_log_mark_open(struct kr_log *log)
{
	kr_log_ctl_store(log, atomic_load(&log->d_durable), 0, 0);
	return kr_pm_fence(log->pm);
}

int kr_log_mark_clean(struct kr_log *log, uint64_t fresh_word)
{
	int rc = log_force_durable(log);
	if (rc)
		return rc;
	uint64_t d = atomic_load(&log->next_seq) - 1;
	/* Every transaction is durable: no lane holds one in flight or pending. */
	KR_INVARIANT("pool.c", 1, log_compute_durable(log) == d);
	kr_log_ctl_store(log, d, KR_CLEAN_MAGIC, fresh_word);
	log->d_written = d;
	return kr_pm_fence(log->pm);
}

/* Checks whether lines[first..] hold a complete transaction with stamp s48. Returns the
 * line count, or 0 if incomplete. */
uint32_t kr_log_lane_complete(const struct kr_log_cacheline *lines, uint32_t ring, uint32_t first,
			      uint64_t s48)
{
	const struct kr_log_cacheline *fl = &lines[first];
	if (fl->header != (KR_LINE_FIRST | (s48 << KR_LINE_SEQ_SHIFT)))
		return 0;
	const struct kr_tx_first *f = (const struct kr_tx_first *)fl->payload;
	if (f->nlines == 0 || f->nlines > ring || f->nlines > KR_TX_MAX_LINES ||
	    (f->seq & KR_LINE_SEQ_MASK) != s48 || f->seq >> 48)
		return 0;
	for (uint32_t k = 1; k < f->nlines; k++) {
		uint64_t want = KR_LINE_CONT | ((uint64_t)k << KR_LINE_INDEX_SHIFT) |
				(s48 << KR_LINE_SEQ_SHIFT);
		if (lines[(first + k) % ring].header != want)
			return 0;
	}
	return f->nlines;
}

/* Reads the stream of a complete transaction and checks its CRC; NULL if it fails. */
uint8_t *kr_log_lane_checked_stream(const struct kr_log_cacheline *lines, uint32_t ring,
				    uint32_t first, uint32_t nlines)
{
	uint8_t *s = kr_log_lane_read_stream(lines, ring, first, nlines);
	if (!s)
		return NULL;
	struct kr_tx_first *f = (struct kr_tx_first *)s;
	uint32_t want = f->crc;
	f->crc = 0;
	uint32_t got = kr_crc32c(s, (size_t)nlines * KR_LINE_PAYLOAD);
	f->crc = want;
	if (got != want) {
		free(s);
		return NULL;
	}
	return s;
}

/* ---------------------------------------------------------------------------------------
 * Audit (the deep check, deep.c): the log's DRAM state against its lines, read-only
 * ------------------------------------------------------------------------------------- */
static uint64_t line_off(const struct kr_log *log, const struct kr_log_cacheline *ln)
{
	return (uint64_t)((const char *)ln - log->pm->base);
}

/* One lane's live transactions [head, tail): each complete in both copies, with a good
 * CRC, the sequence numbers the lane's ring recorded, and the two copies byte-equal. */
static void audit_lane(const struct kr_log *log, const struct kr_lane *l, uint64_t d,
		       struct kr_audit *a)
{
	uint32_t pos = l->head, sum = 0;
	uint64_t prev = 0;
	for (uint32_t k = 0; k < l->fifo_count; k++) {
		uint32_t slot = (l->fifo_first + k) % log->lane_lines;
		uint64_t seq = l->fifo_seq[slot];
		uint32_t n = l->fifo_nlines[slot];
		const struct kr_log_cacheline *first = &l->lines[pos];
		if (seq <= prev || seq > d)
			kr_audit_note(a, line_off(log, first),
				      "lane %u: transaction %llu out of order or above durable_seq %llu",
				      l->idx, (unsigned long long)seq, (unsigned long long)d);
		prev = seq;
		uint64_t s48 = seq & KR_LINE_SEQ_MASK;
		for (int c = 0; c < (l->replica ? 2 : 1); c++) {
			const struct kr_log_cacheline *lines = c ? l->replica : l->lines;
			uint8_t *s = kr_log_lane_complete(lines, log->lane_lines, pos, s48) == n
					     ? kr_log_lane_checked_stream(lines, log->lane_lines, pos, n)
					     : NULL;
			if (!s)
				kr_audit_note(a, line_off(log, &lines[pos]),
					      "lane %u%s: transaction %llu (%u lines) is not whole or "
					      "fails its CRC", l->idx, c ? " replica" : "",
					      (unsigned long long)seq, n);
			free(s);
		}
		for (uint32_t j = 0; l->replica && j < n; j++) {
			uint32_t i = (pos + j) % log->lane_lines;
			if (memcmp(&l->lines[i], &l->replica[i], KR_LINE_SIZE) != 0) {
				kr_audit_note(a, line_off(log, &l->replica[i]),
					      "lane %u: line %u differs from its replica", l->idx, i);
				break;
			}
		}
		pos = (pos + n) % log->lane_lines;
		sum += n;
	}
	if (pos != l->tail || sum != l->used || l->used > log->lane_lines)
		kr_audit_note(a, line_off(log, &l->lines[l->head]),
			      "lane %u: head %u + %u lines of %u transactions != tail %u (used %u)",
			      l->idx, l->head, sum, l->fifo_count, l->tail, l->used);
}

void kr_log_audit(struct kr_log *log, uint64_t *lines_checked, struct kr_audit *a)
{
	uint64_t d = kr_log_durable_seq(log);
	uint64_t next = atomic_load(&log->next_seq);
	/* Both control copies intact, equal, and what DRAM believes was persisted. */
	for (int i = 0; i < 2; i++) {
		uint64_t w = log->ctl[i]->durable_word;
		if (w != durable_word(d))
			kr_audit_note(a, (uint64_t)((char *)log->ctl[i] - log->pm->base),
				      "control copy %c: durable word 0x%llx, expected durable_seq %llu",
				      'A' + i, (unsigned long long)w, (unsigned long long)d);
	}
	/* A quiet pool has every committed transaction durable. */
	if (d + 1 != next || log->d_written != d)
		kr_audit_note(a, 0, "durable_seq %llu (written %llu) but next sequence number %llu",
			      (unsigned long long)d, (unsigned long long)log->d_written,
			      (unsigned long long)next);
	for (uint32_t li = 0; li < log->nlanes; li++) {
		const struct kr_lane *l = &log->lanes[li];
		if (atomic_load(&l->held) || atomic_load(&l->inflight_seq))
			kr_audit_note(a, line_off(log, l->lines), "lane %u is busy in a quiet pool", li);
		audit_lane(log, l, d, a);
		/* Invariant 4: no stamp anywhere above durable_seq once everything is durable. */
		for (uint32_t i = 0; i < log->lane_lines; i++)
			for (int c = 0; c < (l->replica ? 2 : 1); c++) {
				const struct kr_log_cacheline *ln = &(c ? l->replica : l->lines)[i];
				(*lines_checked)++;
				if ((ln->header & KR_LINE_KIND_MASK) && ln->header >> KR_LINE_SEQ_SHIFT > d)
					kr_audit_note(a, line_off(log, ln),
						      "lane %u%s line %u: stamp %llu above durable_seq %llu",
						      li, c ? " replica" : "", i,
						      (unsigned long long)(ln->header >> KR_LINE_SEQ_SHIFT),
						      (unsigned long long)d);
			}
	}
}
