/*
 * fs_log.c - per-inode logs: log pages, their tails and links, entry checksums, and the
 * verified walk of a committed log.
 *
 * A log is a chain of 4 KiB pages from the meta area; entries are packed from the start of
 * each page, and an inode's self-checking tail word says where the committed part ends.
 * Appending (fs_op.c) writes beyond the tail, so a crash in the middle of an append leaves
 * bytes the walk never reads: a torn append is discarded by construction.
 *
 * Invariants
 *   1. Every byte before the tail, in every page of the chain up to the tail's page, was
 *      written by this log (entries, or an 8-byte NEXT_PAGE marker where an entry did not
 *      fit), in both copies, and made durable before the tail moved past it.
 *   2. A page's tail (self, owner, seq) is written once, when the page joins a log; only its
 *      next word changes later, as a self-checking word: when a later page joins, and when
 *      fast GC (fs_gc.c) points it past pages whose entries are all dead.
 *   3. The walk reads each item in both copies (invariant 3 of fs_meta.c): a good copy
 *      repairs a bad or differing one; if both are bad the log is damaged from there on.
 *   4. seq is 0 in the head page and increases strictly along the chain (by one but where
 *      fast GC took pages out), so a walk that follows links never goes round a cycle.
 */
#include <string.h>

#include "csum.h"
#include "fs.h"
#include "invariant.h"

uint32_t krfs_entry_csum(const struct krfs_entry_hdr *e)
{
	uint32_t c = kr_crc32c(e, 4);
	return kr_crc32c_extend(c, (const char *)e + 8, e->size - 8u);
}

static uint32_t page_tail_csum(const struct krfs_page_tail *t)
{
	return kr_crc32c((const char *)t + 8, offsetof(struct krfs_page_tail, csum) - 8);
}

bool krfs_log_page_ok(const struct kr_fs *fs, uint64_t page)
{
	return page >= fs->sb.meta_off && page < fs->sb.meta_off + fs->sb.meta_pages * P &&
	       page % P == 0;
}

void krfs_log_page_init(struct kr_fs *fs, uint64_t page, uint64_t ino, uint32_t seq)
{
	struct krfs_page_tail t = {.next = 0, .self = page, .ino = ino, .seq = seq};
	t.csum = page_tail_csum(&t);
	krfs_meta_write(fs, page + KRFS_LOG_TAIL_OFF, &t, sizeof(t));
}

#ifdef KR_DEBUG_INVARIANTS
/* Invariant 4 at a link from page to next: next's seq (its tail was just written) is above
 * page's, as every copy of page's tail that passes its own check says. A copy damaged while
 * mounted says nothing (the walk of the next mount repairs it from its twin). */
static bool seq_grows(const struct kr_fs *fs, uint64_t page, uint64_t next)
{
	const struct krfs_page_tail *n = krfs_ptr(fs, next + KRFS_LOG_TAIL_OFF);
	const struct krfs_page_tail *copies[2] = {krfs_ptr(fs, page + KRFS_LOG_TAIL_OFF),
						  fs->replica ? krfs_replica(fs, page + KRFS_LOG_TAIL_OFF) : NULL};
	for (int k = 0; k < 2; k++)
		if (copies[k] && copies[k]->csum == page_tail_csum(copies[k]) && copies[k]->seq >= n->seq)
			return false;
	return true;
}
#endif

void krfs_log_page_link(struct kr_fs *fs, uint64_t page, uint64_t next)
{
	KR_INVARIANT("fs_log.c", 4, seq_grows(fs, page, next));
#ifdef KR_DEBUG_INVARIANTS
	struct kr_counters before, after;
	kr_counters_get(&before);
#endif
	krfs_word_write(fs, page + KRFS_LOG_TAIL_OFF, krfs_word_make(next, page));
#ifdef KR_DEBUG_INVARIANTS
	/* Only the next word of the page's tail, in each copy: self, owner and seq stay. */
	kr_counters_get(&after);
	KR_INVARIANT("fs_log.c", 2, after.bytes_written - before.bytes_written == (fs->replica ? 16u : 8u));
#endif
}

/* ---- the walk ---------------------------------------------------------------------------- */
/* Whether t is page's tail in ino's log, following a page whose seq was prev (the head page:
 * prev == UINT32_MAX, and seq must be 0). */
static bool page_tail_ok(const struct krfs_page_tail *t, uint64_t page, uint64_t ino, uint32_t prev)
{
	bool seq_ok = prev == UINT32_MAX ? t->seq == 0 : t->seq > prev;
	return t->csum == page_tail_csum(t) && t->self == page && t->ino == ino && seq_ok;
}

/* Verifies the page tail of `page` in both copies (repairing one from the other); *seq gets
 * its seq, which must follow *seq (UINT32_MAX: the head page). */
static int check_page_tail(struct kr_fs *fs, uint64_t page, uint64_t ino, uint32_t *seq)
{
	uint64_t pa = page + KRFS_LOG_TAIL_OFF + 8, pb = krfs_copy_b(fs, pa);
	const size_t n = sizeof(struct krfs_page_tail) - 8;
	const struct krfs_page_tail *ta = krfs_ptr(fs, pa - 8), *tb = krfs_ptr(fs, pb - 8);
	bool a = page_tail_ok(ta, page, ino, *seq);
	bool b = page_tail_ok(tb, page, ino, *seq);
	if (a && memcmp(krfs_ptr(fs, pa), krfs_ptr(fs, pb), n) != 0)
		krfs_meta_repair(fs, "log page tail", pb, pa, n);
	else if (!a && b)
		krfs_meta_repair(fs, "log page tail", pa, pb, n);
	else if (!a)
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META,
				"inode %llu: log page %#llx (after seq %d) has a bad tail in both copies",
				(unsigned long long)ino, (unsigned long long)page, (int)*seq);
	*seq = (a ? ta : tb)->seq;
	return 0;
}

/* The next page after `page`, from its self-checking word in either copy, or 0. */
static uint64_t read_next(struct kr_fs *fs, uint64_t page)
{
	uint64_t pa = page + KRFS_LOG_TAIL_OFF, pb = krfs_copy_b(fs, pa);
	uint64_t wa = *(uint64_t *)krfs_ptr(fs, pa), wb = *(uint64_t *)krfs_ptr(fs, pb);
	uint64_t va = krfs_word_value(wa, page), vb = krfs_word_value(wb, page);
	uint64_t v = va ? va : vb, w = va ? wa : wb;
	if (v && wa != w)
		krfs_word_repair(fs, "log page link", pa, w);
	if (v && wb != w)
		krfs_word_repair(fs, "log page link", pb, w);
	return v;
}

enum item { ITEM_BAD, ITEM_MARKER, ITEM_ENTRY };

static const uint16_t max_size[] = {
	[KRFS_E_FILE_WRITE] = sizeof(struct krfs_e_write),
	[KRFS_E_DENTRY] = KRFS_ENTRY_MAX,
	[KRFS_E_SET_ATTR] = sizeof(struct krfs_e_attr),
	[KRFS_E_LINK_CHANGE] = sizeof(struct krfs_e_link),
	[KRFS_E_XATTR] = KRFS_XATTR_ENTRY_MAX,
	[KRFS_E_SNAPSHOT_INFO] = KRFS_ENTRY_MAX,
	[KRFS_E_SNAP_INODE] = sizeof(struct krfs_e_snap_inode),
};

/* What one copy holds at p, with room bytes left in its page. */
static enum item parse(const char *p, size_t room)
{
	static const char zero[KRFS_MARKER_SIZE];
	if ((uint8_t)p[0] == KRFS_E_NEXT_PAGE && memcmp(p + 1, zero, KRFS_MARKER_SIZE - 1) == 0)
		return ITEM_MARKER;
	const struct krfs_entry_hdr *e = (const void *)p;
	if (e->type >= sizeof(max_size) / sizeof(max_size[0]) || !max_size[e->type] || e->flags ||
	    e->reserved || e->size < sizeof(*e) || e->size % 8 || e->size > max_size[e->type] ||
	    e->size > room)
		return ITEM_BAD;
	return krfs_entry_csum(e) == e->csum ? ITEM_ENTRY : ITEM_BAD;
}

static size_t item_size(const char *p, enum item k)
{
	return k == ITEM_MARKER ? KRFS_MARKER_SIZE : ((const struct krfs_entry_hdr *)(const void *)p)->size;
}

/* The item at pool offset pos, verified in both copies and repaired. */
static enum item read_item(struct kr_fs *fs, uint64_t pos, size_t room)
{
	const char *a = krfs_ptr(fs, pos), *b = krfs_replica(fs, pos);
	enum item ka = parse(a, room);
	if (ka != ITEM_BAD) {
		size_t n = item_size(a, ka);
		if (memcmp(a, b, n) != 0) /* replica bad or behind: the primary wins */
			krfs_meta_repair(fs, "log entry", krfs_copy_b(fs, pos), pos, n);
		return ka;
	}
	enum item kb = parse(b, room);
	if (kb != ITEM_BAD)
		krfs_meta_repair(fs, "log entry", pos, krfs_copy_b(fs, pos), item_size(b, kb));
	return kb;
}

static int corrupt(uint64_t ino, uint64_t pos, const char *what)
{
	kr_err_set(KR_E_CORRUPT_META, "inode %llu: log at %#llx: %s", (unsigned long long)ino,
		   (unsigned long long)pos, what);
	return -EUCLEAN;
}

int krfs_log_walk(struct kr_fs *fs, struct krfs_inode *ip, const struct krfs_pinode *pi,
		  krfs_entry_fn fn, void *ctx)
{
	uint64_t ino = pi->ino, tail = krfs_word_value(pi->tail, ino), page = pi->log_head;
	uint32_t seq = UINT32_MAX;
	_Alignas(8) char ebuf[KRFS_XATTR_ENTRY_MAX];
	if (!krfs_log_page_ok(fs, page))
		return corrupt(ino, page, "log head outside the log area");
	int rc = check_page_tail(fs, page, ino, &seq);
	if (rc == 0)
		rc = krfs_inode_push_page(ip, page);
	uint64_t pos = page;
	while (rc == 0 && pos != tail) {
		bool tail_here = tail >= page && tail <= page + KRFS_LOG_USABLE;
		size_t room = page + KRFS_LOG_USABLE - pos;
		enum item k = room ? read_item(fs, pos, room) : ITEM_MARKER;
		if (k == ITEM_BAD)
			return corrupt(ino, pos, "entry fails its checks in both copies");
		if (k == ITEM_MARKER) {
			if (tail_here)
				return corrupt(ino, pos, "page ends before the log tail");
			uint64_t next = read_next(fs, page);
			if (!krfs_log_page_ok(fs, next) || ip->npages >= fs->sb.meta_pages)
				return corrupt(ino, page, "bad link to the next log page");
			rc = check_page_tail(fs, next, ino, &seq);
			if (rc == 0)
				rc = krfs_inode_push_page(ip, next);
			page = pos = next;
			continue;
		}
		const struct krfs_entry_hdr *e = krfs_ptr(fs, pos);
		if (tail_here && pos + e->size > tail)
			return corrupt(ino, pos, "entry crosses the log tail");
		size_t size = e->size;
		memcpy(ebuf, e, size); /* a stable copy: fn may repair or write the pool */
		if (((struct krfs_entry_hdr *)ebuf)->trans > ip->max_trans)
			ip->max_trans = ((struct krfs_entry_hdr *)ebuf)->trans;
		rc = fn(fs, ip, (const struct krfs_entry_hdr *)ebuf, ctx);
		pos += size;
	}
	ip->tail = tail;
	ip->unlinked = seq + 1 - ip->npages;
	return rc;
}

/* ---- read-only verification (the checker) ---------------------------------------------------- */
int krfs_log_verify(struct kr_fs *fs, const struct krfs_inode *ip, krfs_problem_fn report, void *ctx)
{
	int problems = 0;
	uint32_t seq = UINT32_MAX;
	for (uint32_t i = 0; i < ip->npages; i++) {
		uint64_t page = ip->pages[i], rpage = krfs_copy_b(fs, page);
		bool last = i + 1 == ip->npages;
		uint64_t used = last ? ip->tail - page : KRFS_LOG_USABLE;
		const struct krfs_page_tail *ta = krfs_ptr(fs, page + KRFS_LOG_TAIL_OFF);
		const struct krfs_page_tail *tb = krfs_ptr(fs, rpage + KRFS_LOG_TAIL_OFF);
		if (!page_tail_ok(ta, page, ip->ino, seq) || !page_tail_ok(tb, page, ip->ino, seq))
			problems += report(ctx, "inode %llu: log page %#llx: bad page tail", (unsigned long long)ip->ino,
					   (unsigned long long)page);
		else if (last && ta->seq != i + ip->unlinked) /* DRAM's count, which the next page's seq comes from */
			problems += report(ctx, "inode %llu: log page %#llx: seq %u, but %u pages were unlinked",
					   (unsigned long long)ip->ino, (unsigned long long)page, ta->seq, ip->unlinked);
		seq = ta->seq;
		if (!last && (krfs_word_value(ta->next, page) != ip->pages[i + 1] || ta->next != tb->next))
			problems += report(ctx, "inode %llu: log page %#llx: bad link to the next page",
					   (unsigned long long)ip->ino, (unsigned long long)page);
		if (used > KRFS_LOG_USABLE || memcmp(krfs_ptr(fs, page), krfs_ptr(fs, rpage), used) != 0 ||
		    memcmp((const char *)ta + 8, (const char *)tb + 8, sizeof(*ta) - 8) != 0)
			problems += report(ctx, "inode %llu: log page %#llx: primary and replica differ",
					   (unsigned long long)ip->ino, (unsigned long long)page);
		for (uint64_t pos = page; used <= KRFS_LOG_USABLE && pos < page + used;) {
			enum item k = parse(krfs_ptr(fs, pos), page + KRFS_LOG_USABLE - pos);
			if (k == ITEM_BAD) {
				problems += report(ctx, "inode %llu: log entry at %#llx fails its checks",
						   (unsigned long long)ip->ino, (unsigned long long)pos);
				break;
			}
			if (k == ITEM_MARKER && last) {
				problems += report(ctx, "inode %llu: NEXT_PAGE marker before the tail at %#llx",
						   (unsigned long long)ip->ino, (unsigned long long)pos);
				break;
			}
			if (k == ITEM_MARKER)
				break;
			pos += item_size(krfs_ptr(fs, pos), k);
		}
	}
	return problems;
}
