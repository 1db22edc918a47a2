/*
 * log_recover.c - recovery of the one-fence log (log.c): the scan of every lane and of the
 * spill segments that replayable SPILL records name, the masks that CANCEL records put
 * over older transactions' ranges (log.c, invariant 8), and the replay, in sequence
 * order, of every complete transaction above durable_seq.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "invariant.h"
#include "log_int.h"

struct found_tx {
	uint64_t seq;
	uint8_t *stream;
	uint32_t nlines, nrecords;
	uint32_t lane;
	uint32_t flags;
	int lane_tail;     /* the newest committed transaction of its lane */
	uint8_t cancelled; /* a later entry of its lane cancels it (a CANCEL record) */
};

/* Walk context: does any record of a transaction write inside [lo, hi)? */
struct overlap {
	uint64_t lo, hi;
};

static int rec_overlaps(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	const struct overlap *o = ctx;
	return kr_log_rec_names_bytes(h) && h->kind != KR_REC_INTENT && h->off < o->hi &&
	       h->off + kr_log_rec_home_len(h) > o->lo;
}

struct touched_ctx {
	struct kr_log *log;
	const struct found_tx *found;
	const uint8_t *discarded;
	size_t nfound, i;
	int spill; /* transaction i attaches a spill segment: its INTENT is the segment's */
};

/* Was the object whose payload an intent names made live by a later transaction that
 * recovery keeps? Then the intent's direct writes, and their parity, were fenced before
 * that commit (tx.c: the payload before the entry that makes it live), and nothing of
 * theirs needs recomputing. Recomputing would also take in any store the program made
 * after the commit and had not persisted: the committed checksum would then fail with
 * parity agreeing, damage beyond repair. The evidence is a record over the object's header
 * (every allocation's commit writes it) in a transaction after the intent that recovery
 * replays (not discarded, not cancelled). A spill segment's intent names a block, not an
 * object's payload, and its lines may be torn with their parity at any later entry of the
 * segment: it is never settled. */
static int intent_settled(const struct touched_ctx *c, uint64_t payload_off)
{
	if (c->spill)
		return 0;
	struct overlap o = {payload_off - sizeof(struct kr_obj_hdr), payload_off};
	for (size_t j = c->i + 1; j < c->nfound; j++)
		if (!(c->found[j].flags & KR_TXF_INTENT) && !c->discarded[j] && !c->found[j].cancelled &&
		    kr_log_stream_walk(c->found[j].stream, (size_t)c->found[j].nlines * KR_LINE_PAYLOAD,
				c->found[j].nrecords, rec_overlaps, &o))
			return 1;
	return 0;
}

/* Recovery walk: records (and fresh payloads) whose redundancy must be recomputed. */
static int rec_touched(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	const struct touched_ctx *c = ctx;
	struct kr_log *log = c->log;
	if (!log->hooks.touched || !kr_log_rec_names_bytes(h))
		return 0;
	if (h->kind == KR_REC_INTENT) {
		if (!intent_settled(c, h->off))
			log->hooks.touched(log->hooks.ctx, h->off, *(const uint64_t *)data);
	} else if (h->kind == KR_REC_FRESH) {
		const struct kr_rec_fresh *f = (const struct kr_rec_fresh *)data;
		log->hooks.touched(log->hooks.ctx, h->off, sizeof(f->hdr) + f->hdr.size);
	} else {
		log->hooks.touched(log->hooks.ctx, h->off, kr_log_rec_home_len(h));
	}
	return 0;
}

static int rec_is_spill(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	return h->kind == KR_REC_SPILL;
}

/* Intent entries hold only INTENT records (others may hold some beside a SPILL record). */
static int rec_not_intent(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	return h->kind != KR_REC_INTENT;
}


struct fresh_ctx {
	const struct kr_log *log;
	const struct found_tx *found;
	size_t nfound, i;
};

/* Is this FRESH record's payload proof that its transaction's fence never completed?
 * Only a lane's newest transaction can be torn (a lane commits one transaction after the
 * other, each after the previous one's fence). And if a later committed transaction wrote
 * into the object, the allocating commit had returned (the object was not live before),
 * so its payload may differ and nothing is torn. */
static int rec_fresh_torn(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	const struct fresh_ctx *c = ctx;
	if (h->kind != KR_REC_FRESH || !c->found[c->i].lane_tail)
		return 0;
	const struct kr_rec_fresh *f = (const struct kr_rec_fresh *)data;
	struct overlap o = {h->off + sizeof(f->hdr), h->off + sizeof(f->hdr) + f->hdr.size};
	for (size_t j = c->i + 1; j < c->nfound; j++)
		if (kr_log_stream_walk(c->found[j].stream, (size_t)c->found[j].nlines * KR_LINE_PAYLOAD,
				c->found[j].nrecords, rec_overlaps, &o))
			return 0;
	return kr_log_rec_fresh_mismatch(c->log, h, data);
}

/* Log lines recovery reads: a lane, or a spill segment that a SPILL record of a lane's
 * entry names (layout.h). */
struct scan_src {
	const struct kr_log_cacheline *lines, *replica;
	uint32_t ring, lane;
};

/* The largest stamp in the lines of src that exceeds m and does not exceed bound, or m. */
static uint64_t src_max_stamp(const struct scan_src *src, uint64_t m, uint64_t bound)
{
	for (uint32_t i = 0; i < src->ring; i++)
		for (int c = 0; c < (src->replica ? 2 : 1); c++) {
			uint64_t h = (c ? src->replica : src->lines)[i].header;
			uint64_t stamp = h >> KR_LINE_SEQ_SHIFT;
			if ((h & KR_LINE_KIND_MASK) && stamp > m && stamp <= bound)
				m = stamp;
		}
	return m;
}

static int found_cmp(const void *a, const void *b)
{
	const struct found_tx *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct found_set {
	struct found_tx *v;
	size_t n, cap;
};

/* Adds every transaction of src above d that is complete, with a good CRC, in at least
 * one copy. */
static int scan_src(struct kr_log *log, const struct scan_src *src, uint64_t d, struct found_set *fs,
		    struct kr_log_recovery *st)
{
	for (uint32_t i = 0; i < src->ring; i++) {
		uint64_t h = src->lines[i].header, hr = src->replica ? src->replica[i].header : 0;
		uint64_t s48 = 0;
		if ((h & KR_LINE_KIND_MASK) == KR_LINE_FIRST)
			s48 = h >> KR_LINE_SEQ_SHIFT;
		else if ((hr & KR_LINE_KIND_MASK) == KR_LINE_FIRST)
			s48 = hr >> KR_LINE_SEQ_SHIFT;
		if (s48 <= d)
			continue;
		/* A transaction is committed iff at least one copy is complete with a good
		 * CRC; validity decides atomicity, the CRC integrity. */
		uint8_t *stream = NULL;
		uint32_t n = kr_log_lane_complete(src->lines, src->ring, i, s48);
		if (n)
			stream = kr_log_lane_checked_stream(src->lines, src->ring, i, n);
		uint32_t nr = src->replica ? kr_log_lane_complete(src->replica, src->ring, i, s48) : 0;
		if (!stream && nr) {
			n = nr;
			stream = kr_log_lane_checked_stream(src->replica, src->ring, i, n);
		}
		if (!stream) {
			if (n || nr)
				return KR_CORRUPT(KR_E_CORRUPT_LOG,
						  (uint64_t)((const char *)&src->lines[i] - log->pm->base),
						  "transaction %llu is complete but fails its CRC in both "
						  "copies", (unsigned long long)s48);
			st->discarded++;
			continue;
		}
		if (KR_GROW(fs->v, fs->cap, fs->n + 1, 64)) {
			free(stream);
			return kr_err_set(KR_E_NOMEM, "recovery table");
		}
		const struct kr_tx_first *f = (const struct kr_tx_first *)stream;
		fs->v[fs->n++] = (struct found_tx){f->seq, stream, n, f->nrecords, src->lane, f->flags,
						   0, 0};
	}
	return KR_OK;
}

/* Walk context: the SPILL records of one lane entry, validated first (kr_log_rec_validate). */
struct spill_walk {
	struct kr_log *log;
	uint32_t lane;
	struct scan_src *segs;
	size_t n, cap;
};

static int rec_spill(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct spill_walk *w = ctx;
	if (h->kind != KR_REC_SPILL)
		return 0;
	if (kr_log_rec_validate(w->log, h, data))
		return 1;
	char *base = w->log->pm->base;
	for (size_t k = 0; k < w->n; k++)
		if ((const char *)w->segs[k].lines == base + h->off)
			return 0; /* read already (a damaged log could name one twice) */
	if (KR_GROW(w->segs, w->cap, w->n + 1, 8))
		return 2;
	const struct kr_rec_spill *sp = (const struct kr_rec_spill *)data;
	w->segs[w->n++] = (struct scan_src){
		(const struct kr_log_cacheline *)(base + h->off),
		sp->replica_off ? (const struct kr_log_cacheline *)(base + sp->replica_off) : NULL,
		(uint32_t)sp->nlines, w->lane};
	return 0;
}

/* Walk context: the first sequence number a CANCEL record names, or 0. */
static int rec_cancel(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	if (h->kind == KR_REC_CANCEL)
		*(uint64_t *)ctx = h->off;
	return 0;
}

/* Ranges that a home commit (or an abort) left final at home: the DATA records of its
 * cancelled undo entries, each with the entry's sequence number. A transaction older than
 * such an entry is not replayed over its range: the bytes there were made durable after it
 * without a record that would replay them (a transaction that committed normally writes
 * its redo, which replays after the older ones; a home commit does not). */
struct mask {
	uint64_t lo, hi, seq;
};

struct masks {
	struct kr_log *log;
	struct mask *v;
	uint64_t *max_hi; /* max_hi[i]: the largest hi of v[0..i], for the search */
	size_t n, cap;
	uint64_t seq; /* the transaction being replayed */
	int oom;
};

static int rec_mask(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct masks *mk = ctx;
	if (h->kind != KR_REC_DATA)
		return 0;
	if (KR_GROW(mk->v, mk->cap, mk->n + 1, 64))
		return 1;
	mk->v[mk->n++] = (struct mask){h->off, h->off + h->len, mk->seq};
	return 0;
}

static int mask_cmp(const void *a, const void *b)
{
	const struct mask *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int masks_build(struct masks *mk, const struct found_tx *found, size_t nfound)
{
	for (size_t i = 0; i < nfound; i++) {
		if (!found[i].cancelled || (found[i].flags & KR_TXF_INTENT))
			continue;
		mk->seq = found[i].seq;
		if (kr_log_stream_walk(found[i].stream, (size_t)found[i].nlines * KR_LINE_PAYLOAD,
				found[i].nrecords, rec_mask, mk))
			return kr_err_set(KR_E_NOMEM, "recovery mask table");
	}
	if (!mk->n)
		return KR_OK;
	qsort(mk->v, mk->n, sizeof(*mk->v), mask_cmp);
	if (!(mk->max_hi = kr_malloc(mk->n * sizeof(*mk->max_hi))))
		return kr_err_set(KR_E_NOMEM, "recovery mask table");
	for (size_t i = 0; i < mk->n; i++)
		mk->max_hi[i] = i && mk->max_hi[i - 1] > mk->v[i].hi ? mk->max_hi[i - 1] : mk->v[i].hi;
	return KR_OK;
}

static int piece_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* kr_log_rec_apply, but the bytes of DATA and FRESH records that a newer mask covers stay as they
 * are at home. Bit records never meet a mask (masks lie in objects, bits in chunk records). */
static int rec_apply_masked(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data)
{
	struct masks *mk = ctx;
	if (h->kind != KR_REC_DATA && h->kind != KR_REC_FRESH)
		return kr_log_rec_apply(mk->log, h, data);
	uint64_t lo = h->off, hi = h->off + kr_log_rec_home_len(h);
	/* The masks that may overlap [lo, hi): those starting below hi, back while some
	 * earlier one still reaches past lo. */
	size_t a = 0, b = mk->n;
	while (a < b) {
		size_t m = (a + b) / 2;
		if (mk->v[m].lo < hi)
			a = m + 1;
		else
			b = m;
	}
	size_t ncov = 0, cap = 0;
	uint64_t(*cov)[2] = NULL;
	for (size_t i = a; i-- > 0 && mk->max_hi[i] > lo;) {
		const struct mask *m = &mk->v[i];
		if (m->seq <= mk->seq || m->hi <= lo)
			continue;
		if (KR_GROW(cov, cap, ncov + 1, 8)) {
			free(cov);
			mk->oom = 1; /* nothing written: the recovery fails and runs again */
			return 1;
		}
		cov[ncov][0] = m->lo > lo ? m->lo : lo;
		cov[ncov][1] = m->hi < hi ? m->hi : hi;
		ncov++;
	}
	if (ncov)
		qsort(cov, ncov, sizeof(*cov), piece_cmp);
	uint64_t at = lo;
	for (size_t i = 0; i <= ncov; i++) {
		uint64_t end = i < ncov ? cov[i][0] : hi;
		if (end > at)
			kr_log_put_home(mk->log, at, data + (at - lo), end - at);
		if (i < ncov && cov[i][1] > at)
			at = cov[i][1];
	}
	free(cov);
	return 0;
}

int kr_log_recover(struct kr_log *log, struct kr_log_recovery *st)
{
	uint64_t d;
	int rc = kr_log_ctl_durable(log, &d);
	if (rc)
		return rc;
	uint64_t max_stamp = d;
	struct found_set fs = {0};
	struct spill_walk sw = {log, 0, NULL, 0, 0};
	memset(st, 0, sizeof(*st));

	/* The lanes, then the spill segments their entries name (whose transactions are the
	 * lane's: an in-place transaction's undo continued there). Either copy's stamps count
	 * toward invariant 4, a segment's too. */
	for (uint32_t li = 0; li < log->nlanes && rc == KR_OK; li++) {
		struct kr_lane *l = &log->lanes[li];
		struct scan_src src = {l->lines, l->replica, log->lane_lines, li};
		max_stamp = src_max_stamp(&src, max_stamp, UINT64_MAX);
		rc = scan_src(log, &src, d, &fs, st);
	}
	/* Segments name the next ones (a transaction's later segments are attached from its
	 * earlier ones): a worklist, each segment read once. */
	for (size_t i = 0, k = 0; rc == KR_OK && (i < fs.n || k < sw.n);) {
		if (k < sw.n) {
			max_stamp = src_max_stamp(&sw.segs[k], max_stamp, UINT64_MAX);
			rc = scan_src(log, &sw.segs[k++], d, &fs, st);
			continue;
		}
		sw.lane = fs.v[i].lane;
		int w = kr_log_stream_walk(fs.v[i].stream, (size_t)fs.v[i].nlines * KR_LINE_PAYLOAD,
				    fs.v[i].nrecords, rec_spill, &sw);
		if (w == 2)
			rc = kr_err_set(KR_E_NOMEM, "recovery table");
		else if (w)
			rc = KR_CORRUPT(KR_E_CORRUPT_LOG, 0, "transaction %llu has an invalid record",
					(unsigned long long)fs.v[i].seq);
		i++;
	}
	struct found_tx *found = fs.v;
	size_t nfound = fs.n;

	if (rc == KR_OK) {
		/* Invariant 4 needs every real stamp; a scribbled line can carry any stamp. Real
		 * ones are bounded: every transaction above the newest complete one (or above
		 * durable_seq) was in flight at the crash, at most one per lane. */
		uint64_t bound = d;
		for (size_t i = 0; i < nfound; i++)
			if (found[i].seq > bound)
				bound = found[i].seq;
		bound += log->nlanes;
		if (max_stamp > bound) {
			max_stamp = d;
			for (uint32_t li = 0; li < log->nlanes; li++) {
				struct scan_src src = {log->lanes[li].lines, log->lanes[li].replica,
						       log->lane_lines, li};
				max_stamp = src_max_stamp(&src, max_stamp, bound);
			}
			for (size_t k = 0; k < sw.n; k++)
				max_stamp = src_max_stamp(&sw.segs[k], max_stamp, bound);
		}
		if (nfound)
			qsort(found, nfound, sizeof(*found), found_cmp);
		for (size_t i = 0; i < nfound; i++) {
			found[i].lane_tail = 1;
			for (size_t j = i + 1; j < nfound && found[i].lane_tail; j++)
				if (found[j].lane == found[i].lane)
					found[i].lane_tail = 0;
		}
		/* Home commits and aborts cancel their transaction's undo (CANCEL records). */
		for (size_t i = 0; i < nfound; i++) {
			uint64_t from = 0;
			kr_log_stream_walk(found[i].stream, (size_t)found[i].nlines * KR_LINE_PAYLOAD,
				    found[i].nrecords, rec_cancel, &from);
			for (size_t j = 0; from && j < i; j++)
				if (found[j].lane == found[i].lane && found[j].seq >= from)
					found[j].cancelled = 1;
		}
		/* Validate everything before touching the pool: a damaged log must not scribble. */
		for (size_t i = 0; i < nfound && rc == KR_OK; i++) {
			size_t len = (size_t)found[i].nlines * KR_LINE_PAYLOAD;
			int intent = found[i].flags == KR_TXF_INTENT;
			if ((i > 0 && found[i].seq == found[i - 1].seq) ||
			    (found[i].flags & ~KR_TXF_INTENT) ||
			    kr_log_stream_walk(found[i].stream, len, found[i].nrecords, kr_log_rec_validate, log) != 0 ||
			    (intent && kr_log_stream_walk(found[i].stream, len, found[i].nrecords, rec_not_intent,
						   NULL) != 0))
				rc = KR_CORRUPT(KR_E_CORRUPT_LOG, 0,
						"transaction %llu has an invalid record",
						(unsigned long long)found[i].seq);
		}
	}
	struct masks mk = {.log = log};
	uint8_t *discarded = NULL;
	if (rc == KR_OK)
		rc = masks_build(&mk, found, nfound);
	if (rc == KR_OK && nfound && !(discarded = kr_calloc(nfound, 1)))
		rc = kr_err_set(KR_E_NOMEM, "recovery table");
	if (rc == KR_OK) {
		for (size_t i = 0; i < nfound; i++) {
			size_t len = (size_t)found[i].nlines * KR_LINE_PAYLOAD;
			if ((found[i].flags & KR_TXF_INTENT) || found[i].cancelled)
				continue;
			struct fresh_ctx fc = {log, found, nfound, i};
			if (kr_log_stream_walk(found[i].stream, len, found[i].nrecords, rec_fresh_torn, &fc)) {
				discarded[i] = 1;
				st->discarded++; /* its fence never completed: not committed */
				continue;
			}
			mk.seq = found[i].seq;
			kr_log_stream_walk(found[i].stream, len, found[i].nrecords, mk.n ? rec_apply_masked : kr_log_rec_apply,
				    mk.n ? (void *)&mk : (void *)log);
			st->replayed++;
		}
		/* Whatever happened to a transaction, its ranges may have changed, except where
		 * a cancelled undo entry's are: a home commit or an abort made them durable at
		 * home with their parity before the entry that cancels them, and recovery writes
		 * nothing there (the masks). A segment's attach entry is cancelled with them, but
		 * the segment's lines are written through the patch hook up to the cancelling
		 * entry itself (which may be in the segment): always recomputed. */
		for (size_t i = 0; i < nfound; i++) {
			size_t len = (size_t)found[i].nlines * KR_LINE_PAYLOAD;
			struct touched_ctx tc = {log, found, discarded, nfound, i,
						 kr_log_stream_walk(found[i].stream, len, found[i].nrecords,
								    rec_is_spill, NULL) != 0};
			if (!found[i].cancelled || tc.spill)
				kr_log_stream_walk(found[i].stream, len, found[i].nrecords, rec_touched, &tc);
		}
		if (mk.oom)
			rc = kr_err_set(KR_E_NOMEM, "recovery mask pieces");
		/* Redundancy of what was replayed recomputed, and all of it durable, before
		 * durable_seq moves past it. */
		if (rc == KR_OK && log->hooks.settle)
			rc = log->hooks.settle(log->hooks.ctx);
		if (rc == KR_OK)
			rc = kr_pm_fence(log->pm);
	}
	for (size_t i = 0; i < nfound; i++)
		free(found[i].stream);
	free(found);
	free(sw.segs);
	free(mk.v);
	free(mk.max_hi);
	free(discarded);
	if (rc)
		return rc;
	kr_log_set_start(log, max_stamp);
	kr_log_ctl_store(log, max_stamp, 0, 0);
	return kr_pm_fence(log->pm);
}

