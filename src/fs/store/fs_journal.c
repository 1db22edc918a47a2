/*
 * fs_journal.c - the lite undo journal: how an operation that changes several inodes (their
 * log tails, or whole slots when an inode is born or dies) becomes atomic.
 *
 * Protocol (fs_op.c drives it): the undo records - the old bytes of every word and slot the
 * operation will overwrite - are written to the journal page with an active header, in
 * both copies; fence; the new values are written in place; fence; the header is made idle;
 * fence. At mount an active journal (state == seq and a good checksum) has its old bytes
 * written back to both copies of every target, which undoes an operation that had not
 * finished its last fence.
 *
 * Invariants
 *   1. No target is written in place while its journal is not durably active.
 *   2. The journal becomes idle only after every in-place write is durable.
 *   3. A journal whose both copies fail their checksum was torn before its fence, so no
 *      target was touched yet: it is treated as idle. One good active copy is enough to
 *      roll back (the other was scribbled or torn).
 *   4. Records name only primary offsets inside the inode table; recovery writes each to its
 *      twin as well and refuses records that point anywhere else. The exception, in relaxed
 *      pools only: KRFS_J_DATA records (an in-place intent, fs_inplace.c) name data pages,
 *      whose strip CRCs and parity recovery recomputes from their bytes.
 */
#include <string.h>

#include "csum.h"
#include "fs.h"
#include "invariant.h"

static uint64_t journal_off(unsigned jn) { return P + (uint64_t)jn * P; }

static uint32_t journal_csum(const struct krfs_journal_hdr *h, const void *recs)
{
	uint32_t c = kr_crc32c(&h->seq, 12);
	return kr_crc32c_extend(c, recs, h->nbytes);
}

int krfs_journal_add(struct krfs_jbuf *j, uint32_t kind, uint64_t target, const void *old,
		     uint32_t len)
{
	if (j->n + sizeof(struct krfs_journal_rec) + len > sizeof(j->bytes))
		return -E2BIG;
	struct krfs_journal_rec r = {.kind = kind, .len = len, .target = target};
	memcpy(j->bytes + j->n, &r, sizeof(r));
	memcpy(j->bytes + j->n + sizeof(r), old, len);
	j->n += (uint32_t)sizeof(r) + len;
	return 0;
}

/* The two places a record may name: a range of the primary inode table (undo records), a
 * byte of the data area (relaxed pools' in-place intents). Written once, for the records
 * made (invariant 4) and the records read back at recovery alike. */
static bool in_inode_table(const struct kr_fs *fs, uint64_t target, uint64_t len)
{
	uint64_t end = fs->sb.itab_off + (uint64_t)fs->sb.ninodes * KRFS_INODE_SIZE;
	return target >= fs->sb.itab_off && target <= end && len <= end - target;
}

static bool in_data_area(const struct kr_fs *fs, uint64_t target)
{
	return target >= fs->sb.data_off && target - fs->sb.data_off < fs->sb.data_pages * P;
}

#ifdef KR_DEBUG_INVARIANTS
/* Invariant 4: every record of j names a primary range of the inode table, or (relaxed
 * pools) is an in-place intent naming a data page. */
static bool records_in_place(const struct kr_fs *fs, const struct krfs_jbuf *j)
{
	for (uint32_t at = 0; at < j->n;) {
		struct krfs_journal_rec r;
		memcpy(&r, j->bytes + at, sizeof(r));
		bool ok = r.kind == KRFS_J_DATA ? fs->relaxed && in_data_area(fs, r.target)
						: in_inode_table(fs, r.target, r.len);
		if (!ok)
			return false;
		at += (uint32_t)sizeof(r) + r.len;
	}
	return true;
}
#endif

void krfs_journal_activate(struct kr_fs *fs, unsigned jn, const struct krfs_jbuf *j, uint64_t seq)
{
	KR_INVARIANT("fs_journal.c", 4, records_in_place(fs, j));
	struct krfs_journal_hdr h = {.state = seq, .seq = seq, .nbytes = j->n};
	h.csum = journal_csum(&h, j->bytes);
	krfs_meta_write(fs, journal_off(jn) + sizeof(h), j->bytes, j->n);
	krfs_meta_write(fs, journal_off(jn), &h, sizeof(h));
}

void krfs_journal_clear(struct kr_fs *fs, unsigned jn)
{
	krfs_word_write(fs, journal_off(jn), 0);
}

/* The header and its records check (the state word is outside the CRC: clearing it is
 * one store). */
static bool journal_sound(const struct krfs_journal_hdr *h)
{
	return h->nbytes <= KRFS_JOURNAL_CAP && h->csum == journal_csum(h, h + 1);
}

static bool journal_active(const struct krfs_journal_hdr *h)
{
	return h->state != 0 && h->state == h->seq && journal_sound(h);
}

/* A KRFS_J_DATA record (relaxed pools): 1 if it names a data page and strips, resealed. */
static bool reseal(struct kr_fs *fs, const struct krfs_journal_rec *r, const uint8_t *payload)
{
	uint64_t mask;
	memcpy(&mask, payload, sizeof(mask));
	if (!fs->relaxed || r->len != KRFS_J_DATA_LEN || !in_data_area(fs, r->target) ||
	    (r->target - fs->sb.data_off) % P != 0 || mask == 0 || mask >> KRFS_STRIPS)
		return false;
	krfs_data_reseal(fs, (r->target - fs->sb.data_off) / P, (unsigned)mask);
	return true;
}

/* Applies the records of an active journal copy: undo records, or an in-place intent. */
static int roll_back(struct kr_fs *fs, const struct krfs_journal_hdr *h)
{
	const uint8_t *p = (const uint8_t *)(h + 1), *end = p + h->nbytes;
	while (p < end) {
		struct krfs_journal_rec r;
		memcpy(&r, p, sizeof(r));
		if (r.kind == KRFS_J_DATA && (size_t)(end - p) >= sizeof(r) + r.len && reseal(fs, &r, p + sizeof(r))) {
			p += sizeof(r) + r.len;
			continue;
		}
		bool ok = (size_t)(end - p) >= sizeof(r) + r.len && in_inode_table(fs, r.target, r.len) &&
			  ((r.kind == KRFS_J_WORD && r.len == 8 && r.target % 8 == 0) ||
			   (r.kind == KRFS_J_INODE && r.len == KRFS_INODE_SIZE &&
			    (r.target - fs->sb.itab_off) % KRFS_INODE_SIZE == 0));
		if (!ok) {
			kr_err_set(KR_E_CORRUPT_META, "journal record at %#llx names an impossible target",
				   (unsigned long long)(p - (const uint8_t *)h));
			return -EUCLEAN;
		}
		krfs_meta_write(fs, r.target, p + sizeof(r), r.len);
		p += sizeof(r) + r.len;
	}
	return krfs_fence(fs);
}

int krfs_journal_recover(struct kr_fs *fs, unsigned jn)
{
	uint64_t off = journal_off(jn);
	const struct krfs_journal_hdr *a = krfs_ptr(fs, off), *b = krfs_replica(fs, off);
	const struct krfs_journal_hdr *use = journal_active(a) ? a
					     : a->state == 0   ? NULL
					     : journal_active(b) ? b
								 : NULL;
	/* Only a header that checks (idle or not) tells the sequence: a lost page reads junk. */
	if (journal_sound(a) && a->seq > fs->journal_seq)
		fs->journal_seq = a->seq;
	if (journal_sound(b) && b->seq > fs->journal_seq)
		fs->journal_seq = b->seq;
	int rolled = 0;
	if (use) {
		int rc = roll_back(fs, use);
		if (rc)
			return rc;
		rolled = 1;
	}
	/* Both copies become the same idle header, whatever state they were in. */
	struct krfs_journal_hdr idle = {.state = 0, .seq = fs->journal_seq, .nbytes = 0};
	idle.csum = journal_csum(&idle, NULL);
	if (rolled || memcmp(a, &idle, sizeof(idle)) != 0 || memcmp(b, &idle, sizeof(idle)) != 0) {
		if (!rolled && memcmp(a, b, sizeof(idle)) != 0) /* idle, yet the copies differ */
			krfs_note_repair(fs, "journal header", off);
		krfs_meta_write(fs, off, &idle, sizeof(idle));
		int rc = krfs_fence(fs);
		if (rc)
			return rc;
	}
	return rolled;
}
