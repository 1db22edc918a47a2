/*
 * fs_xattr.c - extended attributes: each inode's DRAM list of (name, value) pairs and the
 * XATTR log entry that changes one pair (the four operations on them are fs_file.c's).
 *
 * An attribute lives in the inode's own log, like every other piece of its metadata: a set
 * or a remove is one XATTR entry committed by one tail store, so it is atomic and durable at
 * return, replicated and checksummed with the log, rebuilt at mount by the same apply code
 * (fs_apply.c dispatches here), and carried over by log compaction (one set per live pair).
 * Values are small (KRFS_XATTR_VALUE_MAX), which keeps an entry within one log page.
 *
 * Invariants (the third is kept by the operations, fs_file.c)
 *   1. The DRAM list is the fold of the committed XATTR entries: one pair per name, in the
 *      order names were first set (a replace keeps its place; a remove and a later set
 *      put the name last).
 *   2. xattr_bytes is the sum of krfs_xattr_size over the live pairs: the log bytes that a
 *      compaction writes for them.
 *   3. The pool's superblock carries KRFS_INCOMPAT_XATTR before the first XATTR entry is
 *      written, so a build that does not know the entry refuses the pool instead of taking
 *      the entry for damage.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "invariant.h"

/* ---- the DRAM list ------------------------------------------------------------------------- */
struct krfs_xattr **krfs_xattr_find(struct krfs_inode *ip, const char *name, size_t len)
{
	struct krfs_xattr **pp = &ip->xattrs;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->name_len == len && memcmp((*pp)->bytes, name, len) == 0)
			return pp;
	return pp;
}

#ifdef KR_DEBUG_INVARIANTS
/* Invariant 2: the log bytes the live pairs take, counted afresh. */
static uint64_t xattr_bytes_counted(const struct krfs_inode *ip)
{
	uint64_t n = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next)
		n += krfs_xattr_size(x->name_len, x->value_len);
	return n;
}
#endif

static int list_set(struct krfs_inode *ip, const char *name, size_t len, const void *value, size_t vlen)
{
	struct krfs_xattr **pp = krfs_xattr_find(ip, name, len), *old = *pp;
	struct krfs_xattr *x = kr_malloc(sizeof(*x) + len + vlen);
	if (!x)
		return -ENOMEM;
	x->next = old ? old->next : NULL;
	x->name_len = (uint8_t)len;
	x->value_len = (uint16_t)vlen;
	memcpy(x->bytes, name, len);
	memcpy(x->bytes + len, value, vlen);
	if (old) {
		ip->xattr_bytes -= krfs_xattr_size(old->name_len, old->value_len);
		free(old);
	}
	*pp = x;
	ip->xattr_bytes += krfs_xattr_size(len, vlen);
	KR_INVARIANT("fs_xattr.c", 2, ip->xattr_bytes == xattr_bytes_counted(ip));
	return 0;
}

static int list_remove(struct krfs_inode *ip, const char *name, size_t len)
{
	struct krfs_xattr **pp = krfs_xattr_find(ip, name, len), *x = *pp;
	if (!x)
		return -ENODATA;
	*pp = x->next;
	ip->xattr_bytes -= krfs_xattr_size(x->name_len, x->value_len);
	free(x);
	KR_INVARIANT("fs_xattr.c", 2, ip->xattr_bytes == xattr_bytes_counted(ip));
	return 0;
}

void krfs_xattr_free(struct krfs_inode *ip)
{
	for (struct krfs_xattr *x = ip->xattrs, *n; x; x = n) {
		n = x->next;
		free(x);
	}
	ip->xattrs = NULL;
	ip->xattr_bytes = 0;
}

uint32_t krfs_xattr_entry_max(const struct krfs_inode *ip)
{
	uint32_t m = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next)
		if (krfs_xattr_size(x->name_len, x->value_len) > m)
			m = krfs_xattr_size(x->name_len, x->value_len);
	return m;
}

/* ---- the entry ------------------------------------------------------------------------------ */
int krfs_xattr_apply(struct krfs_inode *ip, const struct krfs_e_xattr *x)
{
	bool set = x->op == KRFS_X_SET;
	if (x->h.size != krfs_xattr_size(x->name_len, x->value_len) || x->reserved || x->name_len == 0 ||
	    x->value_len > KRFS_XATTR_VALUE_MAX || (!set && (x->op != KRFS_X_REMOVE || x->value_len)) ||
	    memchr(x->data, '\0', x->name_len))
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META, "inode %llu: entry of transaction %llu: XATTR malformed",
				(unsigned long long)ip->ino, (unsigned long long)x->h.trans);
	int rc = set ? list_set(ip, x->data, x->name_len, x->data + x->name_len, x->value_len)
		     : list_remove(ip, x->data, x->name_len);
	if (rc == -ENODATA)
		return KRFS_ERR(-EUCLEAN, KR_E_CORRUPT_META,
				"inode %llu: entry of transaction %llu removes an attribute that is not there",
				(unsigned long long)ip->ino, (unsigned long long)x->h.trans);
	if (rc == 0)
		ip->ctime = x->ctime;
	return rc;
}

struct krfs_entry_hdr *krfs_xattr_entry(union krfs_xattr_buf *b, uint8_t xop, const char *name, size_t len,
				       const void *value, size_t vlen, uint64_t ctime)
{
	uint32_t size = krfs_xattr_size(len, vlen);
	memset(b, 0, size);
	b->x.h.type = KRFS_E_XATTR;
	b->x.h.size = (uint16_t)size;
	b->x.value_len = (uint16_t)vlen;
	b->x.name_len = (uint8_t)len;
	b->x.op = xop;
	b->x.ctime = ctime;
	memcpy(b->x.data, name, len);
	if (vlen)
		memcpy(b->x.data + len, value, vlen);
	return &b->x.h;
}

int krfs_xattr_verify(const struct krfs_inode *ip, krfs_problem_fn report, void *ctx)
{
	int problems = 0;
	uint64_t bytes = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next) {
		bytes += krfs_xattr_size(x->name_len, x->value_len);
		if (x->name_len == 0 || x->value_len > KRFS_XATTR_VALUE_MAX || memchr(x->bytes, '\0', x->name_len))
			problems += report(ctx, "inode %llu: a malformed extended attribute", (unsigned long long)ip->ino);
		for (const struct krfs_xattr *y = x->next; y; y = y->next)
			if (y->name_len == x->name_len && memcmp(x->bytes, y->bytes, x->name_len) == 0)
				problems += report(ctx, "inode %llu: extended attribute '%.*s' twice",
						   (unsigned long long)ip->ino, (int)x->name_len, x->bytes);
	}
	if (bytes != ip->xattr_bytes)
		problems += report(ctx, "inode %llu: extended attributes take %llu log bytes, counted %llu",
				   (unsigned long long)ip->ino, (unsigned long long)bytes,
				   (unsigned long long)ip->xattr_bytes);
	return problems;
}
