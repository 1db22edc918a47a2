/*
 * fs_zone.c - zone parity: one parity page per row of data pages across the columns of the
 * data area, kept right under copy-on-write writes and crashes.
 *
 * A zone-parity pool (KRFS_RO_ZONE_PARITY, fs_layout.h) cuts the data area into
 * zone_columns columns of R consecutive pages; row r is data pages r, r + R, r + 2R, ... and
 * its parity page (parity_off + r * P) is their XOR, free pages included: a free page's
 * bytes are whatever the last write left there, and the parity covers them as they are, so
 * freeing a page changes nothing and no page is ever zeroed. Strip s of a data page is
 * rebuilt from strip s of the other pages of its row and of the parity page. That arithmetic
 * is fs_zone_row.c's, below fs_data.c; this file keeps the rows right across crashes and
 * repairs them through the verified read of their pages.
 *
 * A copy-on-write write fills a free page, so its row's parity must change with it: parity
 * ^= old bytes ^ new bytes (krfs_zone_update, before the data page is overwritten). The
 * parity page is shared by the other pages of the row, so a crash between the data and the
 * parity store, or with some of their lines durable, would leave the row's committed pages
 * unprotected. The zone intent prevents that: before the first parity byte of a run of data
 * pages changes, a self-checking word naming a window of data pages that holds the run is
 * durable in both superblock pages; mount after a crash recomputes the parity of the
 * window's rows from the data bytes as they are (whatever mix of old and new landed in the
 * free pages, the parity then matches it). The window is at least KRFS_ZONE_WINDOW pages (or all rows), so
 * the runs the next-fit allocator hands out one after another mostly fall inside the window
 * already durable and cost no store and no fence; moving the window costs two fences.
 *
 * Invariants
 *   1. Outside the window the durable intent names, every row's parity page is the XOR of
 *      the row's data pages. krfs_zone_intent moves the window only when no other
 *      operation holds it and after a fence (every delta stored so far is then durable: the
 *      mover's own by that fence, every other operation's by its own thread's fence before
 *      it let go of the window), and fences the new window before any delta in it.
 *   2. A window is at most R pages long, so its rows are distinct and each row is
 *      recomputed once.
 *   3. Writers of different files run at once (fs_enter.c rule 5) and no delta is lost,
 *      though a delta is a read-modify-write of a parity page shared by other files' pages:
 *      a delta is only made to a page of a run inside the window, by an operation holding
 *      the window (zone_users) from that run's taking until krfs_op_end (after its commit's
 *      fences or, uncommitted, a fence of its own); the window and the intent word change
 *      under zone_lock, and only while no other operation holds it. So the deltas made at
 *      once are to different pages of one window, whose rows are distinct (invariant 2):
 *      never two to one parity page. Rebuilds from a row, in-place patches, scrub and
 *      recovery run under the exclusive lock.
 */
#include "fs.h"
#include "invariant.h"

/* ---- the intent ----------------------------------------------------------------------- */
static uint64_t intent_off(const struct kr_fs *fs, int copy)
{
	return (copy ? fs->sb.pool_size - P : 0) + KRFS_ZONE_INTENT_OFF;
}

static void intent_store(struct kr_fs *fs, uint64_t word)
{
	for (int copy = 0; copy < 2; copy++) {
		uint64_t *w = krfs_ptr(fs, intent_off(fs, copy));
		kr_pm_store64(&fs->pm, w, word);
		kr_pm_flush(&fs->pm, w, sizeof(*w));
	}
}

static uint64_t intent_word(const struct kr_fs *fs, int copy)
{
	return *(const uint64_t *)krfs_ptr(fs, intent_off(fs, copy));
}

uint64_t krfs_zone_run_max(const struct kr_fs *fs)
{
	return fs->zone_rows < KRFS_ZONE_INTENT_MAX ? fs->zone_rows : KRFS_ZONE_INTENT_MAX;
}

/* Counts op among the window's holders (zone_lock held). */
static void hold(struct krfs_op *op)
{
	if (!op->zone_held)
		op->fs->zone_users++;
	op->zone_held = true;
}

int krfs_zone_intent(struct krfs_op *op, uint64_t start, uint64_t n)
{
	struct kr_fs *fs = op->fs;
	pthread_mutex_lock(&fs->zone_lock);
	for (;;) {
		if (start >= fs->zone_first && start + n <= fs->zone_first + fs->zone_len) {
			hold(op); /* inside the durable window */
			pthread_mutex_unlock(&fs->zone_lock);
			return 0;
		}
		if (fs->zone_users == (op->zone_held ? 1u : 0u))
			break;
		if (op->zone_held) {
			/* Two holders each waiting for the other would wait forever: this one's deltas
			 * so far (whole runs) are made durable, and it stops holding. */
			if (krfs_fence(fs) != 0) {
				pthread_mutex_unlock(&fs->zone_lock);
				return -EIO;
			}
			fs->zone_users--;
			op->zone_held = false;
			pthread_cond_broadcast(&fs->zone_cond);
		}
		pthread_cond_wait(&fs->zone_cond, &fs->zone_lock); /* others' deltas not durable yet */
	}
	int rc;
	/* Fence: the deltas this thread stored under the window named now are durable before it
	 * stops naming them (no other operation holds it: theirs are fenced already). */
	if ((rc = krfs_fence(fs)) != 0) {
		pthread_mutex_unlock(&fs->zone_lock);
		return rc;
	}
	uint64_t len = n > KRFS_ZONE_WINDOW ? n : KRFS_ZONE_WINDOW;
	if (len > krfs_zone_run_max(fs))
		len = krfs_zone_run_max(fs);
	if (len > fs->sb.data_pages - start)
		len = fs->sb.data_pages - start;
	intent_store(fs, krfs_word_make(start << KRFS_ZONE_INTENT_NBITS | len, KRFS_ZONE_INTENT_OWNER));
	/* Fence: the window is durable before any parity byte in it changes. */
	if ((rc = krfs_fence(fs)) == 0) {
		KR_INVARIANT("fs_zone.c", 2, len <= fs->zone_rows);
		/* The window moves only when no other operation holds it. */
		KR_INVARIANT("fs_enter.c", 5, fs->zone_users == (op->zone_held ? 1u : 0u));
		fs->zone_first = start;
		fs->zone_len = len;
		hold(op);
	}
	pthread_mutex_unlock(&fs->zone_lock);
	return rc;
}

void krfs_zone_release(struct krfs_op *op)
{
	struct kr_fs *fs = op->fs;
	if (!op->zone_held)
		return;
	if (!op->committed) /* deltas in the window that no commit fenced */
		krfs_fence(fs);
	pthread_mutex_lock(&fs->zone_lock);
	fs->zone_users--;
	op->zone_held = false;
	pthread_cond_broadcast(&fs->zone_cond);
	pthread_mutex_unlock(&fs->zone_lock);
}

/* The run a word names: true and [*start, *start + *n) if it checks and fits the pool. */
static bool intent_run(const struct kr_fs *fs, uint64_t word, uint64_t *start, uint64_t *n)
{
	uint64_t v = krfs_word_value(word, KRFS_ZONE_INTENT_OWNER);
	*start = v >> KRFS_ZONE_INTENT_NBITS;
	*n = v & KRFS_ZONE_INTENT_MAX;
	return v && *n >= 1 && *n <= fs->zone_rows && *start < fs->sb.data_pages && *n <= fs->sb.data_pages - *start;
}

/* The word naming the DRAM window (0: none). */
static uint64_t window_word(const struct kr_fs *fs)
{
	return fs->zone_len ? krfs_word_make(fs->zone_first << KRFS_ZONE_INTENT_NBITS | fs->zone_len, KRFS_ZONE_INTENT_OWNER)
			    : 0;
}

/* Rewrites the intent's copies that differ from the DRAM window (a damaged copy); noted. */
static void intent_settle(struct kr_fs *fs)
{
	uint64_t w = window_word(fs);
	if (intent_word(fs, 0) == w && intent_word(fs, 1) == w)
		return;
	intent_store(fs, w);
	krfs_note_repair(fs, "zone intent word", intent_off(fs, intent_word(fs, 0) != w ? 0 : 1));
}

/* Row r after a crash: its pages in use that fail their CRCs are repaired first where the
 * row still can (a damaged page would otherwise be sealed into the parity), then the parity
 * is recomputed from the pages as they are. */
static void settle_row(struct kr_fs *fs, uint64_t r)
{
	if (krfs_zone_row_ok(fs, r))
		return;
	for (uint64_t pg = r; pg < fs->sb.data_pages; pg += fs->zone_rows)
		if (krfs_bm_test(&fs->data_bm, pg) && !krfs_data_strips_ok(fs, pg, 0xff))
			krfs_data_read(fs, pg, fs->buf); /* repairs, or the page stays lost: -EIO later */
	krfs_zone_reseal(fs, r); /* a write in flight: not damage */
}

int krfs_zone_recover(struct kr_fs *fs)
{
	if (!fs->zone_rows)
		return 0;
	uint64_t w[2] = {intent_word(fs, 0), intent_word(fs, 1)}, start, n;
	bool ok = intent_run(fs, w[0], &start, &n) || intent_run(fs, w[1], &start, &n);
	fs->zone_first = ok ? start : 0;
	fs->zone_len = ok ? n : 0;
	/* After a clean unmount every row holds: one that does not is damage, for reads and the
	 * scrubber to repair, not a write in flight. */
	for (uint64_t i = 0; ok && !fs->was_clean && i < n; i++)
		settle_row(fs, krfs_zone_row(fs, start + i));
	if (!ok && !fs->was_clean && (w[0] || w[1])) /* both copies damaged: any row may have been changing */
		for (uint64_t r = 0; r < fs->zone_rows; r++)
			settle_row(fs, r);
	intent_settle(fs);
	return krfs_fence(fs);
}

/* ---- checking and scrubbing ------------------------------------------------------------ */
int krfs_zone_verify(struct kr_fs *fs, krfs_problem_fn report, void *ctx)
{
	int problems = 0;
	uint64_t w0 = intent_word(fs, 0), w1 = intent_word(fs, 1), start, n;
	if (w0 != w1 || (w0 && !intent_run(fs, w0, &start, &n)))
		problems += report(ctx, "zone intent word: copies %#llx and %#llx (equal and valid or zero expected)",
				   (unsigned long long)w0, (unsigned long long)w1);
	for (uint64_t r = 0; r < fs->zone_rows; r++)
		if (!krfs_zone_row_ok(fs, r))
			problems += report(ctx, "parity row %llu (parity page at %#llx) disagrees with its data pages",
					   (unsigned long long)r, (unsigned long long)(fs->sb.parity_off + r * P));
	return problems;
}

int krfs_zone_rebuild_free(struct kr_fs *fs, uint64_t pg)
{
	uint8_t *page = fs->buf;
	for (unsigned s = 0; s < KRFS_STRIPS; s++)
		krfs_zone_rebuild_strip(fs, pg, s, page + s * KRFS_STRIP);
	void *dst = krfs_ptr(fs, krfs_data_off(fs, pg));
	kr_pm_copy(&fs->pm, dst, page, P);
	kr_pm_flush(&fs->pm, dst, P);
	krfs_note_repair(fs, "free data page rebuilt from its zone parity row", krfs_data_off(fs, pg));
	return krfs_fence(fs);
}

int krfs_zone_scrub_intent(struct kr_fs *fs)
{
	if (!fs->zone_rows)
		return 0;
	intent_settle(fs); /* between operations every row holds: only the copies matter */
	return krfs_fence(fs);
}

int krfs_zone_scrub_row(struct kr_fs *fs, uint64_t r)
{
	if (krfs_zone_row_ok(fs, r))
		return 0;
	/* Pages in use that still fail their CRCs were reported by the data pass (or are
	 * repaired now); a parity recomputed over them would carry their damage. */
	for (uint64_t pg = r; pg < fs->sb.data_pages; pg += fs->zone_rows)
		if (krfs_bm_test(&fs->data_bm, pg) && !krfs_data_strips_ok(fs, pg, 0xff) &&
		    krfs_data_read(fs, pg, fs->buf) != 0)
			return -EIO;
	krfs_zone_reseal(fs, r);
	krfs_note_repair(fs, "parity page of a zone row recomputed", fs->sb.parity_off + r * P);
	return krfs_fence(fs);
}
