/*
 * fs_inplace.c - relaxed mode: overwrites made in place in pools made with KR_FS_RELAXED.
 *
 * A copy-on-write overwrite of 512 bytes reads the whole old page, writes a whole new one
 * with all its CRCs and parity, and later frees the old page. In a relaxed pool a write that
 * changes neither the file's size nor any hole, covers no page whole, and touches only pages
 * no snapshot holds, is instead made in the pages themselves (a page written whole gains
 * nothing in place - it costs the same bytes plus the intent - so such writes stay
 * copy-on-write and atomic): only the bytes written, the touched strips' two CRC copies and
 * the page parity (by delta) are stored. The write gives up atomicity - a crash may leave
 * any mix of old and new bytes in the range written - but never consistency:
 *
 *   1. the touched strips are verified first (a failing strip is repaired through the
 *      verified read, or the write fails with -EIO before anything is stored);
 *   2. a SET_ATTR entry carrying the new mtime is appended, and the in-place intent written:
 *      lite journal 0 made active with one KRFS_J_DATA record per page naming the strips to
 *      be touched; all flushed;
 *   3. the commit's first fence makes both durable; then the tail store and, in the same
 *      window, the bytes, CRCs and parity deltas (krfs_data_patch); the commit's second
 *      fence. So the write costs the two fences of any one-inode operation: its mtime may
 *      become durable before its bytes, which a write that is not atomic allows;
 *   4. the intent cleared, flushed but not fenced: the next fence of any operation makes
 *      that durable, and until then a crash merely reseals pages whose checksums match.
 *
 * At mount, an active journal with KRFS_J_DATA records (fs_journal.c) has the named strips'
 * CRCs and the pages' parity recomputed from the bytes as they landed, before anything reads
 * them, so a torn in-place write is never reported as damage nor read as -EIO.
 *
 * Invariants
 *   1. No in-place store precedes a durable intent naming its page and strip.
 *   2. A page that a snapshot holds is never written in place (its bytes are the snapshot's).
 *   3. Journal 0 holds the intent from step 2 to step 4; the operation in between touches one
 *      inode and no slot, so its commit is one tail store and never uses the journal.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "invariant.h"

/* The strips of a page that bytes [lo, hi) touch, as a mask (bit s = strip s). */
static unsigned strip_mask(unsigned lo, unsigned hi)
{
	unsigned first = lo / KRFS_STRIP, last = (hi - 1) / KRFS_STRIP;
	return ((1u << (last + 1)) - 1) & ~((1u << first) - 1);
}

bool krfs_inplace_fits(const struct kr_fs *fs, const struct krfs_inode *ip, uint64_t off, uint64_t len)
{
	if (!fs->relaxed || len == 0 || off + len > ip->size)
		return false;
	/* No page covered whole: at most two pages, the first not from its start to its end
	 * and the last not either (so the intent has at most two records). */
	uint64_t first = off / P, last = (off + len - 1) / P, end = off + len;
	bool first_whole = off % P == 0 && end >= (first + 1) * P;
	bool last_whole = end % P == 0 && (last > first || off % P == 0);
	if (last - first > 1 || first_whole || last_whole)
		return false;
	for (uint64_t pg = first; pg <= last; pg++) {
		uint32_t dp = krfs_radix_get(&ip->map, pg);
		if (!dp || (fs->snap_refs && fs->snap_refs[dp - 1]))
			return false;
	}
	return true;
}

/* Bytes [*lo, *hi) of file page pg that the write [off, off + len) covers. */
static void page_range(uint64_t pg, uint64_t off, uint64_t len, unsigned *lo, unsigned *hi)
{
	uint64_t start = pg * P, end = off + len;
	*lo = (unsigned)(off > start ? off - start : 0);
	*hi = (unsigned)(end < start + P ? end - start : P);
}

struct inplace {
	struct krfs_inode *ip;
	const uint8_t *buf;
	uint64_t off, len;
};

/* Between the commit's fences: the intent is durable, so the pages may change in place. */
static void patch_pages(struct krfs_op *op, void *ctx)
{
	const struct inplace *w = ctx;
	for (uint64_t pg = w->off / P; pg <= (w->off + w->len - 1) / P; pg++) {
		unsigned lo, hi;
		page_range(pg, w->off, w->len, &lo, &hi);
		krfs_data_patch(op->fs, krfs_radix_get(&w->ip->map, pg) - 1, lo, hi, w->buf + (pg * P + lo - w->off));
	}
}

int krfs_write_inplace(struct kr_fs *fs, struct krfs_inode *ip, const void *buf, uint64_t off, uint64_t len)
{
	KR_INVARIANT("fs_enter.c", 3, krfs_exclusive(fs)); /* a shared holder writes nothing in place */
	struct krfs_jbuf *j = kr_malloc(sizeof(*j)); /* a page: too big for the stack */
	if (!j)
		return KRFS_ERR(-ENOMEM, KR_E_NOMEM, "in-place write: no memory for the intent");
	j->n = 0;
	for (uint64_t pg = off / P; pg <= (off + len - 1) / P; pg++) {
		uint64_t dp = krfs_radix_get(&ip->map, pg) - 1;
		unsigned lo, hi;
		page_range(pg, off, len, &lo, &hi);
		uint64_t mask = strip_mask(lo, hi);
		if (!krfs_data_strips_ok(fs, dp, (unsigned)mask)) {
			int rc = krfs_data_read(fs, dp, fs->buf); /* repairs, or -EIO */
			if (rc) {
				free(j);
				return rc;
			}
		}
		krfs_journal_add(j, KRFS_J_DATA, krfs_data_off(fs, dp), &mask, KRFS_J_DATA_LEN);
	}
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	uint64_t now = krfs_now();
	struct krfs_e_attr a = {.h = {.type = KRFS_E_SET_ATTR, .size = sizeof(a)},
				.mask = KRFS_A_MTIME, .mtime = now, .ctime = now};
	struct inplace w = {.ip = ip, .buf = buf, .off = off, .len = len};
	int rc = krfs_op_append(&op, ip, &a.h);
	if (rc == 0) {
		krfs_journal_activate(fs, 0, j, ++fs->journal_seq); /* durable at the commit's first fence */
		op.in_commit = patch_pages;
		op.in_commit_ctx = &w;
		rc = krfs_op_commit(&op);
	}
	free(j);
	if (rc == 0)
		krfs_journal_clear(fs, 0);
	krfs_op_finish(&op);
	return rc;
}
