/*
 * fs_xattr.c - extended attributes: each inode's DRAM list of (name, value) pairs, the XATTR
 * log entry that changes one pair, and kr_fs_setxattr/getxattr/listxattr/removexattr.
 *
 * An attribute lives in the inode's own log, like every other piece of its metadata: a set
 * or a remove is one XATTR entry committed by one tail store, so it is atomic and durable at
 * return, replicated and checksummed with the log, rebuilt at mount by the same apply code
 * (fs_inode.c dispatches here), and carried over by log compaction (one set per live pair).
 * Values are small (KRFS_XATTR_VALUE_MAX), which keeps an entry within one log page.
 *
 * Invariants
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

/* ---- the DRAM list ------------------------------------------------------------------------- */
static struct krfs_xattr **find(struct krfs_inode *ip, const char *name, size_t len)
{
	struct krfs_xattr **pp = &ip->xattrs;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->name_len == len && memcmp((*pp)->bytes, name, len) == 0)
			return pp;
	return pp;
}

static int list_set(struct krfs_inode *ip, const char *name, size_t len, const void *value, size_t vlen)
{
	struct krfs_xattr **pp = find(ip, name, len), *old = *pp;
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
	return 0;
}

static int list_remove(struct krfs_inode *ip, const char *name, size_t len)
{
	struct krfs_xattr **pp = find(ip, name, len), *x = *pp;
	if (!x)
		return -ENODATA;
	*pp = x->next;
	ip->xattr_bytes -= krfs_xattr_size(x->name_len, x->value_len);
	free(x);
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

/* Appends an XATTR entry (op, name, value) to ip's log in op. */
static int append(struct krfs_op *op, struct krfs_inode *ip, uint8_t xop, const char *name, size_t len,
		  const void *value, size_t vlen, uint64_t ctime)
{
	union {
		struct krfs_e_xattr x;
		uint8_t bytes[KRFS_XATTR_ENTRY_MAX];
	} b;
	uint32_t size = krfs_xattr_size(len, vlen);
	memset(&b, 0, size);
	b.x.h.type = KRFS_E_XATTR;
	b.x.h.size = (uint16_t)size;
	b.x.value_len = (uint16_t)vlen;
	b.x.name_len = (uint8_t)len;
	b.x.op = xop;
	b.x.ctime = ctime;
	memcpy(b.x.data, name, len);
	if (vlen)
		memcpy(b.x.data + len, value, vlen);
	return krfs_op_append(op, ip, &b.x.h);
}

int krfs_xattr_append_all(struct krfs_op *op, struct krfs_inode *tmp, const struct krfs_inode *ip)
{
	int rc = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x && rc == 0; x = x->next)
		rc = append(op, tmp, KRFS_X_SET, x->bytes, x->name_len, x->bytes + x->name_len, x->value_len, ip->ctime);
	return rc;
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

/* ---- the operations ------------------------------------------------------------------------- */
static int xattr_name(const char *name, size_t *len)
{
	size_t n = name ? strnlen(name, KR_FS_XATTR_NAME_MAX + 1) : 0;
	if (n == 0 || n > KR_FS_XATTR_NAME_MAX)
		return KRFS_ERR(-ERANGE, KR_E_MISUSE_ARG, "extended attribute name: 1..%u bytes", KR_FS_XATTR_NAME_MAX);
	*len = n;
	return 0;
}

/* One XATTR entry committed to ip's log. */
static int change(struct kr_fs *fs, struct krfs_inode *ip, uint8_t xop, const char *name, size_t len,
		  const void *value, size_t vlen)
{
	int rc = krfs_mark_incompat(fs, KRFS_INCOMPAT_XATTR);
	if (rc)
		return rc;
	struct krfs_op op;
	krfs_op_begin(&op, fs);
	rc = append(&op, ip, xop, name, len, value, vlen, krfs_now());
	if (rc == 0)
		rc = krfs_op_commit(&op);
	krfs_op_end(&op);
	return rc;
}

int kr_fs_setxattr(kr_fs *fs, uint64_t ino, const char *name, const void *value, size_t size, int flags)
{
	size_t len;
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	if (flags & ~(KR_FS_XATTR_CREATE | KR_FS_XATTR_REPLACE) ||
	    flags == (KR_FS_XATTR_CREATE | KR_FS_XATTR_REPLACE))
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "setxattr: flags %#x", (unsigned)flags);
	int rc = xattr_name(name, &len);
	if (rc)
		return rc;
	if (size > KR_FS_XATTR_SIZE_MAX)
		return KRFS_ERR(-E2BIG, KR_E_MISUSE_ARG, "setxattr: a value of %zu bytes (at most %u)", size,
				KR_FS_XATTR_SIZE_MAX);
	if (size && !value)
		return KRFS_ERR(-EINVAL, KR_E_MISUSE_ARG, "setxattr: NULL value");
	struct krfs_inode *ip;
	if ((rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	bool exists = *find(ip, name, len) != NULL;
	if (exists && (flags & KR_FS_XATTR_CREATE))
		rc = -EEXIST;
	else if (!exists && (flags & KR_FS_XATTR_REPLACE))
		rc = -ENODATA;
	else
		rc = change(fs, ip, KRFS_X_SET, name, len, value, size);
	krfs_leave(fs);
	return rc;
}

/* Copies n bytes to out, or only reports n (size 0), or -ERANGE if size is too small. */
static ssize_t copy_out(void *out, size_t size, const void *src, size_t n)
{
	if (size == 0)
		return (ssize_t)n;
	if (size < n || !out)
		return -ERANGE;
	memcpy(out, src, n);
	return (ssize_t)n;
}

ssize_t kr_fs_getxattr(kr_fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	size_t len;
	int rc = xattr_name(name, &len);
	struct krfs_inode *ip;
	if (rc || (rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	const struct krfs_xattr *x = *find(ip, name, len);
	ssize_t n = x ? copy_out(value, size, x->bytes + x->name_len, x->value_len) : -ENODATA;
	krfs_leave(fs);
	return n;
}

ssize_t kr_fs_listxattr(kr_fs *fs, uint64_t ino, char *list, size_t size)
{
	struct krfs_inode *ip;
	int rc = krfs_enter_get(fs, ino, &ip);
	if (rc)
		return rc;
	size_t total = 0;
	for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next)
		total += x->name_len + 1u;
	ssize_t n = size == 0 ? (ssize_t)total : size < total || !list ? -ERANGE : (ssize_t)total;
	if (n > 0 && size) {
		char *at = list;
		for (const struct krfs_xattr *x = ip->xattrs; x; x = x->next) {
			memcpy(at, x->bytes, x->name_len);
			at[x->name_len] = '\0';
			at += x->name_len + 1u;
		}
	}
	krfs_leave(fs);
	return n;
}

int kr_fs_removexattr(kr_fs *fs, uint64_t ino, const char *name)
{
	if (krfs_is_snap_ino(ino))
		return -EROFS;
	size_t len;
	int rc = xattr_name(name, &len);
	struct krfs_inode *ip;
	if (rc || (rc = krfs_enter_get(fs, ino, &ip)) != 0)
		return rc;
	rc = *find(ip, name, len) ? change(fs, ip, KRFS_X_REMOVE, name, len, NULL, 0) : -ENODATA;
	krfs_leave(fs);
	return rc;
}
