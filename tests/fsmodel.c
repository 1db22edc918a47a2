/*
 * fsmodel.c - the reference model of keratin-fs (see fsmodel.h): state, random operations,
 * expected results in the library's order of checks, running operations on a file system,
 * and the tree walk that compares the two.
 */
#define _GNU_SOURCE
#include "fsmodel.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LINK_MAX_COUNT 65000u

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		TU_FAIL("out of memory");
	return q;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		TU_FAIL("out of memory");
	return d;
}

void fm_params_default(struct fm_params *p)
{
	static const unsigned w[FM_NKINDS] = {
		[FM_CREATE] = 12, [FM_MKDIR] = 5, [FM_SYMLINK] = 3, [FM_WRITE] = 25, [FM_TRUNCATE] = 6,
		[FM_UNLINK] = 8,  [FM_RMDIR] = 4, [FM_RENAME] = 12, [FM_LINK] = 5,   [FM_SETATTR] = 4,
		[FM_READ] = 8,   [FM_FALLOCATE] = 3, [FM_PUNCH] = 3, [FM_SEEK] = 4,
		[FM_SETXATTR] = 4, [FM_REMOVEXATTR] = 2, [FM_SNAPSHOT] = 1, [FM_SNAPSHOT_DELETE] = 1,
	};
	memset(p, 0, sizeof(*p));
	p->names = 10;
	p->max_write = 20000;
	p->max_xattr = KR_FS_XATTR_SIZE_MAX;
	memcpy(p->weight, w, sizeof(w));
}

/* ---- state ------------------------------------------------------------------------------- */
static uint32_t new_inode(struct fm *m, uint32_t mode, uint32_t uid, uint32_t gid)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->v = xrealloc(m->v, m->cap * sizeof(*m->v));
	}
	struct fm_inode *ip = &m->v[m->n];
	memset(ip, 0, sizeof(*ip));
	ip->live = true;
	ip->mode = mode;
	ip->uid = uid;
	ip->gid = gid;
	ip->nlink = S_ISDIR(mode) ? 2 : 1;
	return m->n++;
}

uint32_t fm_unprotect_from_env(void)
{
	static const struct {
		const char *name;
		uint32_t bits;
	} levels[] = {
		{"full", 0},
		{"none", KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY},
		{"meta", KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY},
		{"data", KR_FS_NO_META_REPLICA},
		{"noparity", KR_FS_NO_DATA_PARITY},
		{"relaxed", KR_FS_RELAXED},
	};
	const char *e = getenv("KR_TEST_FS_PROTECTION");
	for (size_t i = 0; e && *e && i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(e, levels[i].name) == 0)
			return levels[i].bits;
	if (e && *e)
		TU_FAIL("KR_TEST_FS_PROTECTION=%s: expected full, none, meta, data, noparity or relaxed", e);
	return 0;
}

uint32_t fm_parity_from_env(void)
{
	const char *e = getenv("KR_TEST_FS_PARITY");
	if (!e || !*e || strcmp(e, "page") == 0)
		return KR_FS_PARITY_PAGE;
	if (strcmp(e, "zone") == 0)
		return KR_FS_PARITY_ZONE;
	TU_FAIL("KR_TEST_FS_PARITY=%s: expected page or zone", e);
	return 0;
}

void fm_init(struct fm *m, const struct kr_fs_statfs *st, uint64_t root_ino)
{
	memset(m, 0, sizeof(*m));
	new_inode(m, 0, 0, 0); /* id 0: never used */
	m->v[0].live = false;
	uint32_t root = new_inode(m, S_IFDIR | 0755, 0, 0);
	m->v[root].parent = root;
	m->v[root].fsino = root_ino;
	m->max_inodes = st->files;
	m->data_pages = st->blocks;
	m->root_parent = root_ino;
}

kr_fs *fm_mount_new(const char *path, struct fm *m)
{
	kr_fs *fs;
	struct kr_fs_statfs st;
	TU_OK(kr_fs_mount(path, KR_OPEN_FORCE_PMEM, &fs));
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs: %s", kr_errmsg());
	fm_init(m, &st, KR_FS_ROOT_INO);
	return fs;
}

void fm_random(kr_fs *fs, struct fm *m, const struct fm_params *p, struct tu_rng *r, unsigned n)
{
	char why[512];
	for (unsigned i = 0; i < n; i++) {
		struct fm_op op;
		fm_gen(r, m, p, &op);
		if (fm_step(fs, m, &op, NULL, why, sizeof(why)) != 0)
			TU_FAIL("random operation %u: %s", i, why);
	}
}

void fm_init_subtree(struct fm *m, uint64_t dir_ino, uint64_t parent_ino)
{
	struct kr_fs_statfs st = {.files = UINT64_MAX / 2, .blocks = UINT64_MAX / 2};
	fm_init(m, &st, dir_ino);
	m->v[1].mode = S_IFDIR | 0700;
	m->subtree = true;
	m->root_parent = parent_ino;
}

static void inode_clear(struct fm_inode *ip)
{
	for (unsigned i = 0; i < ip->npages; i++)
		free(ip->pages[i].data);
	for (unsigned i = 0; i < ip->ndents; i++)
		free(ip->dents[i].name);
	for (unsigned i = 0; i < ip->nxattrs; i++) {
		free(ip->xattrs[i].name);
		free(ip->xattrs[i].value);
	}
	free(ip->pages);
	free(ip->dents);
	free(ip->target);
	free(ip->xattrs);
	ip->pages = NULL;
	ip->dents = NULL;
	ip->target = NULL;
	ip->xattrs = NULL;
	ip->npages = ip->cappages = ip->ndents = ip->capdents = ip->nxattrs = 0;
}

static void snap_drop(struct fm_snap *s)
{
	fm_free(s->tree);
	free(s->tree);
}

void fm_free(struct fm *m)
{
	for (unsigned i = 0; i < m->n; i++)
		inode_clear(&m->v[i]);
	for (unsigned i = 0; i < m->nsnaps; i++)
		snap_drop(&m->snaps[i]);
	free(m->snaps);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* A copy of src's tree (without its snapshots) in dst. */
static void copy_tree(struct fm *dst, const struct fm *src)
{
	*dst = *src;
	dst->snaps = NULL;
	dst->nsnaps = 0;
	dst->v = xrealloc(NULL, src->cap * sizeof(*dst->v));
	memcpy(dst->v, src->v, src->n * sizeof(*dst->v));
	for (unsigned i = 0; i < src->n; i++) {
		struct fm_inode *d = &dst->v[i];
		const struct fm_inode *s = &src->v[i];
		d->pages = xrealloc(NULL, s->cappages * sizeof(*d->pages));
		for (unsigned k = 0; k < s->npages; k++) {
			d->pages[k].pg = s->pages[k].pg;
			d->pages[k].ver = s->pages[k].ver;
			d->pages[k].data = xrealloc(NULL, FM_PAGE);
			memcpy(d->pages[k].data, s->pages[k].data, FM_PAGE);
		}
		d->dents = xrealloc(NULL, s->capdents * sizeof(*d->dents));
		for (unsigned k = 0; k < s->ndents; k++) {
			d->dents[k].name = xstrdup(s->dents[k].name);
			d->dents[k].id = s->dents[k].id;
		}
		d->target = s->target ? xstrdup(s->target) : NULL;
		d->xattrs = xrealloc(NULL, s->nxattrs * sizeof(*d->xattrs));
		for (unsigned k = 0; k < s->nxattrs; k++) {
			d->xattrs[k].name = xstrdup(s->xattrs[k].name);
			d->xattrs[k].len = s->xattrs[k].len;
			d->xattrs[k].value = xrealloc(NULL, s->xattrs[k].len);
			memcpy(d->xattrs[k].value, s->xattrs[k].value, s->xattrs[k].len);
		}
	}
}

void fm_copy(struct fm *dst, const struct fm *src)
{
	copy_tree(dst, src);
	dst->snaps = xrealloc(NULL, src->nsnaps * sizeof(*dst->snaps));
	for (unsigned i = 0; i < src->nsnaps; i++) {
		dst->snaps[i] = src->snaps[i];
		dst->snaps[i].tree = xrealloc(NULL, sizeof(struct fm));
		copy_tree(dst->snaps[i].tree, src->snaps[i].tree);
	}
	dst->nsnaps = src->nsnaps;
}

static struct fm_xattr *xattr_find(const struct fm_inode *ip, const char *name)
{
	for (unsigned i = 0; i < ip->nxattrs; i++)
		if (strcmp(ip->xattrs[i].name, name) == 0)
			return &ip->xattrs[i];
	return NULL;
}

static struct fm_dent *dent_find(const struct fm_inode *dir, const char *name)
{
	for (unsigned i = 0; i < dir->ndents; i++)
		if (strcmp(dir->dents[i].name, name) == 0)
			return &dir->dents[i];
	return NULL;
}

static void dent_add(struct fm_inode *dir, const char *name, uint32_t id)
{
	if (dir->ndents == dir->capdents) {
		dir->capdents = dir->capdents ? dir->capdents * 2 : 8;
		dir->dents = xrealloc(dir->dents, dir->capdents * sizeof(*dir->dents));
	}
	dir->dents[dir->ndents].name = xstrdup(name);
	dir->dents[dir->ndents++].id = id;
}

static void dent_remove(struct fm_inode *dir, const char *name)
{
	struct fm_dent *d = dent_find(dir, name);
	free(d->name);
	*d = dir->dents[--dir->ndents];
}

static struct fm_page *page_find(const struct fm_inode *ip, uint64_t pg)
{
	unsigned lo = 0, hi = ip->npages;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (ip->pages[mid].pg < pg)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ip->npages && ip->pages[lo].pg == pg ? &ip->pages[lo] : NULL;
}

/* File page pg of ip (made, as a new data page of zeros, if it is a hole). */
static uint8_t *page_get(struct fm *m, struct fm_inode *ip, uint64_t pg)
{
	struct fm_page *p = page_find(ip, pg);
	if (p)
		return p->data;
	if (ip->npages == ip->cappages) {
		ip->cappages = ip->cappages ? ip->cappages * 2 : 8;
		ip->pages = xrealloc(ip->pages, ip->cappages * sizeof(*ip->pages));
	}
	unsigned at = 0;
	while (at < ip->npages && ip->pages[at].pg < pg)
		at++;
	memmove(&ip->pages[at + 1], &ip->pages[at], (ip->npages - at) * sizeof(*ip->pages));
	ip->pages[at].pg = pg;
	ip->pages[at].ver = ++m->next_ver;
	ip->pages[at].data = calloc(1, FM_PAGE);
	if (!ip->pages[at].data)
		TU_FAIL("out of memory");
	ip->npages++;
	return ip->pages[at].data;
}

static uint64_t live_inodes(const struct fm *m)
{
	uint64_t n = 0;
	for (unsigned i = 1; i < m->n; i++)
		n += m->v[i].live;
	return n;
}

/* File page pg of ip as the library writes it: into a new data page. */
static uint8_t *page_rewrite(struct fm *m, struct fm_inode *ip, uint64_t pg)
{
	uint8_t *data = page_get(m, ip, pg);
	page_find(ip, pg)->ver = ++m->next_ver;
	return data;
}

struct vers {
	uint64_t *v;
	size_t n, cap;
};

static void vers_add(struct vers *s, uint64_t ver)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = ver;
}

static void tree_vers(const struct fm *m, struct vers *s)
{
	for (unsigned i = 1; i < m->n; i++) {
		const struct fm_inode *ip = &m->v[i];
		for (unsigned k = 0; ip->live && k < ip->npages; k++)
			vers_add(s, ip->pages[k].ver);
		if (ip->live && S_ISLNK(ip->mode))
			vers_add(s, ip->target_ver);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Data pages in use: those of the live tree and of every snapshot, each counted once. */
static uint64_t used_pages(const struct fm *m)
{
	struct vers s = {0};
	tree_vers(m, &s);
	for (unsigned i = 0; i < m->nsnaps; i++)
		tree_vers(m->snaps[i].tree, &s);
	if (s.n)
		qsort(s.v, s.n, sizeof(*s.v), cmp_u64);
	uint64_t n = 0;
	for (size_t i = 0; i < s.n; i++)
		n += i == 0 || s.v[i] != s.v[i - 1];
	free(s.v);
	return n;
}

static void kill(struct fm *m, uint32_t id)
{
	inode_clear(&m->v[id]);
	m->v[id].live = false;
}

static bool is_dir(const struct fm *m, uint32_t id) { return S_ISDIR(m->v[id].mode); }

/* ---- generating ---------------------------------------------------------------------------- */
/* A live inode of file type `type` (0: any type). */
static uint32_t pick(struct tu_rng *r, const struct fm *m, uint32_t type)
{
	uint32_t c[64];
	unsigned n = 0, seen = 0;
	for (unsigned i = 1; i < m->n; i++) /* reservoir sample of up to 64 candidates */
		if (m->v[i].live && (!type || (m->v[i].mode & S_IFMT) == type)) {
			seen++;
			if (n < 64)
				c[n++] = i;
			else if (tu_rng_below(r, seen) < 64)
				c[tu_rng_below(r, 64)] = i;
		}
	return n ? c[tu_rng_below(r, n)] : type == S_IFREG ? pick(r, m, 0) : 1;
}

static uint32_t pick_dir(struct tu_rng *r, const struct fm *m)
{
	return tu_rng_chance(r, 1, 20) ? pick(r, m, 0) : pick(r, m, S_IFDIR);
}

static void gen_name(struct tu_rng *r, const struct fm_params *p, char *out)
{
	unsigned k = (unsigned)tu_rng_below(r, 100);
	if (k == 0) { /* too long */
		memset(out, 'L', 256);
		out[256] = '\0';
	} else if (k < 3) { /* long but valid: a few fixed ones so they collide */
		size_t len = 200 + 25 * tu_rng_below(r, 3);
		memset(out, 'a' + (char)tu_rng_below(r, 3), len);
		out[len] = '\0';
	} else {
		sprintf(out, "n%u", (unsigned)tu_rng_below(r, p->names));
	}
}

/* An existing name in dir (most of the time), else a generated one. */
static void gen_existing(struct tu_rng *r, const struct fm *m, uint32_t dir, const struct fm_params *p,
			 char *out)
{
	const struct fm_inode *d = &m->v[dir];
	if (S_ISDIR(d->mode) && d->ndents && tu_rng_chance(r, 4, 5))
		strcpy(out, d->dents[tu_rng_below(r, d->ndents)].name);
	else
		gen_name(r, p, out);
}

/* An attribute name of ip (most of the time), else one of a few, now and then a bad one. */
static void gen_xattr(struct tu_rng *r, const struct fm_inode *ip, struct fm_op *op)
{
	unsigned k = (unsigned)tu_rng_below(r, 100);
	if (ip->nxattrs && k < 50)
		strcpy(op->name, ip->xattrs[tu_rng_below(r, ip->nxattrs)].name);
	else if (k == 98) /* empty */
		op->name[0] = '\0';
	else if (k == 99) { /* too long */
		memset(op->name, 'X', KR_FS_XATTR_NAME_MAX + 1);
		op->name[KR_FS_XATTR_NAME_MAX + 1] = '\0';
	} else if (k == 97) { /* the longest */
		memset(op->name, 'Y', KR_FS_XATTR_NAME_MAX);
		op->name[KR_FS_XATTR_NAME_MAX] = '\0';
	} else
		sprintf(op->name, "user.x%u", (unsigned)tu_rng_below(r, 5));
}

void fm_gen(struct tu_rng *r, const struct fm *m, const struct fm_params *p, struct fm_op *op)
{
	unsigned total = 0;
	for (unsigned k = 0; k < FM_NKINDS; k++)
		total += p->weight[k];
	unsigned x = (unsigned)tu_rng_below(r, total), k = 0;
	while (x >= p->weight[k])
		x -= p->weight[k++];
	memset(op, 0, sizeof(*op));
	op->kind = (enum fm_kind)k;
	op->seed = tu_rng_next(r);
	op->mode = (uint32_t)tu_rng_below(r, 01000);
	op->uid = (uint32_t)tu_rng_below(r, 4);
	op->gid = (uint32_t)tu_rng_below(r, 4);
	uint32_t file = tu_rng_chance(r, 1, 8) ? pick(r, m, 0) : pick(r, m, S_IFREG);
	const struct fm_inode *f = &m->v[file];
	switch (op->kind) {
	case FM_CREATE:
	case FM_MKDIR:
	case FM_SYMLINK:
		op->a = pick_dir(r, m);
		gen_name(r, p, op->name);
		op->len = tu_rng_range(r, 1, 120); /* symlink target length */
		break;
	case FM_FALLOCATE:
	case FM_PUNCH:
	case FM_SEEK:
		op->flags = op->kind == FM_FALLOCATE ? (tu_rng_chance(r, 1, 2) ? KR_FS_FALLOC_KEEP_SIZE : 0)
			    : tu_rng_chance(r, 1, 2) ? KR_FS_SEEK_DATA : KR_FS_SEEK_HOLE;
		/* fall through */
	case FM_WRITE:
	case FM_READ:
		op->a = file;
		op->len = tu_rng_logu(r, 1, p->max_write);
		if (p->far_off && tu_rng_chance(r, 1, 10))
			op->off = tu_rng_below(r, p->far_off);
		else
			op->off = tu_rng_below(r, f->size + 8192);
		break;
	case FM_TRUNCATE:
		op->a = file;
		op->off = p->far_off && tu_rng_chance(r, 1, 20) ? tu_rng_below(r, p->far_off)
								: tu_rng_below(r, f->size + f->size / 2 + 4096);
		break;
	case FM_UNLINK:
	case FM_RMDIR:
		op->a = pick_dir(r, m);
		gen_existing(r, m, op->a, p, op->name);
		break;
	case FM_RENAME:
		op->a = pick_dir(r, m);
		gen_existing(r, m, op->a, p, op->name);
		op->b = pick_dir(r, m);
		if (tu_rng_chance(r, 1, 2))
			gen_existing(r, m, op->b, p, op->name2);
		else
			gen_name(r, p, op->name2);
		x = (unsigned)tu_rng_below(r, 10);
		op->flags = x == 0 ? KR_FS_RENAME_NOREPLACE : x == 1 ? KR_FS_RENAME_EXCHANGE : 0;
		break;
	case FM_LINK:
		op->a = tu_rng_chance(r, 9, 10) ? file : pick(r, m, S_IFDIR);
		op->b = pick_dir(r, m);
		gen_name(r, p, op->name2);
		break;
	case FM_SETATTR:
		op->a = file;
		op->mask = 1 + (uint32_t)tu_rng_below(r, 7); /* some of MODE, UID, GID */
		break;
	case FM_SNAPSHOT:
	case FM_SNAPSHOT_DELETE:
		if (tu_rng_chance(r, 1, 30))
			strcpy(op->name, tu_rng_chance(r, 1, 2) ? ".." : "a/b");
		else
			sprintf(op->name, "s%u", (unsigned)tu_rng_below(r, 3));
		break;
	case FM_SETXATTR:
	case FM_REMOVEXATTR:
		op->a = tu_rng_chance(r, 1, 2) ? file : pick(r, m, 0);
		gen_xattr(r, &m->v[op->a], op);
		x = (unsigned)tu_rng_below(r, 40);
		op->flags = x < 8 ? KR_FS_XATTR_CREATE : x < 16 ? KR_FS_XATTR_REPLACE : x == 16 ? 3 : 0;
		op->len = tu_rng_chance(r, 1, 10) ? 0 : tu_rng_logu(r, 1, p->max_xattr);
		if (tu_rng_chance(r, 1, 100))
			op->len = KR_FS_XATTR_SIZE_MAX + 1;
		break;
	case FM_NKINDS:
		break;
	}
}

static void symlink_target(const struct fm_op *op, char *out)
{
	uint64_t s = op->seed;
	for (uint64_t i = 0; i < op->len; i++)
		out[i] = (char)('a' + tu_splitmix64(&s) % 26);
	out[op->len] = '\0';
}

/* ---- expected results ------------------------------------------------------------------------ */
static int name_err(const char *name)
{
	size_t n = strlen(name);
	return n > KR_FS_NAME_MAX ? -ENAMETOOLONG : n == 0 || strchr(name, '/') ? -EINVAL : 0;
}

static bool dot(const char *name) { return strcmp(name, ".") == 0 || strcmp(name, "..") == 0; }

static uint64_t free_pages(const struct fm *m) { return m->data_pages - used_pages(m); }

static bool inside(const struct fm *m, uint32_t dir, uint32_t id)
{
	for (;;) {
		if (dir == id)
			return true;
		if (dir == 1)
			return false;
		dir = m->v[dir].parent;
	}
}

/* The checks mknod/mkdir/symlink share (fs_ops.c make()). */
static int64_t make_check(const struct fm *m, const struct fm_op *op, bool isdir)
{
	const struct fm_inode *d = &m->v[op->a];
	int e = name_err(op->name);
	if (!S_ISDIR(d->mode))
		return -ENOTDIR;
	if (e)
		return e;
	if (dot(op->name) || dent_find(d, op->name))
		return -EEXIST;
	if (isdir && d->nlink >= LINK_MAX_COUNT)
		return -EMLINK;
	if (live_inodes(m) >= m->max_inodes)
		return -ENOSPC;
	return 0;
}

static void truncate_model(struct fm *m, struct fm_inode *ip, uint64_t size)
{
	if (size < ip->size) {
		uint64_t keep = (size + FM_PAGE - 1) / FM_PAGE;
		while (ip->npages && ip->pages[ip->npages - 1].pg >= keep)
			free(ip->pages[--ip->npages].data);
		struct fm_page *p = size % FM_PAGE ? page_find(ip, size / FM_PAGE) : NULL;
		if (p) { /* a zero-tailed copy */
			memset(p->data + size % FM_PAGE, 0, FM_PAGE - size % FM_PAGE);
			p->ver = ++m->next_ver;
		}
	}
	ip->size = size;
}

/* One link of id goes (its name is already removed). */
static void drop(struct fm *m, uint32_t id)
{
	if (is_dir(m, id) || --m->v[id].nlink == 0)
		kill(m, id);
}

static int64_t apply_rename(struct fm *m, const struct fm_op *op)
{
	if (op->flags & ~(KR_FS_RENAME_NOREPLACE | KR_FS_RENAME_EXCHANGE) ||
	    op->flags == (KR_FS_RENAME_NOREPLACE | KR_FS_RENAME_EXCHANGE))
		return -EINVAL;
	struct fm_inode *od = &m->v[op->a], *nd = &m->v[op->b];
	if (!S_ISDIR(od->mode) || !S_ISDIR(nd->mode))
		return -ENOTDIR;
	int e = name_err(op->name);
	if (!e)
		e = name_err(op->name2);
	if (e)
		return e;
	if (dot(op->name) || dot(op->name2))
		return -EBUSY;
	struct fm_dent *sd = dent_find(od, op->name), *dd = dent_find(nd, op->name2);
	if (!sd)
		return -ENOENT;
	uint32_t src = sd->id, dst = dd ? dd->id : 0;
	bool exch = op->flags & KR_FS_RENAME_EXCHANGE;
	if (dst && (op->flags & KR_FS_RENAME_NOREPLACE))
		return -EEXIST;
	if (dst == src)
		return 0;
	bool sdir = is_dir(m, src), ddir = dst && is_dir(m, dst);
	if (sdir && inside(m, op->b, src))
		return -EINVAL;
	if (!dst && exch)
		return -ENOENT;
	if (!dst && sdir && nd->nlink >= LINK_MAX_COUNT)
		return -EMLINK;
	if (dst && exch && ddir && inside(m, op->a, dst))
		return -EINVAL;
	if (dst && !exch) {
		if (sdir && !ddir)
			return -ENOTDIR;
		if (!sdir && ddir)
			return -EISDIR;
		if (ddir && m->v[dst].ndents)
			return -ENOTEMPTY;
	}
	if (exch) {
		dd->id = src;
		sd->id = dst;
		if (op->a != op->b) {
			od->nlink += (uint32_t)ddir - (uint32_t)sdir;
			nd->nlink += (uint32_t)sdir - (uint32_t)ddir;
		}
		m->v[src].parent = op->b;
		m->v[dst].parent = op->a;
		return 0;
	}
	if (dst) {
		dent_remove(nd, op->name2);
		if (ddir)
			nd->nlink--;
		drop(m, dst);
	}
	dent_remove(od, op->name);
	dent_add(nd, op->name2, src);
	m->v[src].parent = op->b;
	if (sdir && op->a != op->b) {
		od->nlink--;
		nd->nlink++;
	}
	return 0;
}

/* fallocate, hole punching and SEEK_DATA/SEEK_HOLE (fs_file.c). */
static int64_t apply_holes(struct fm *m, const struct fm_op *op)
{
	struct fm_inode *a = &m->v[op->a];
	if (op->kind != FM_SEEK && op->len == 0)
		return -EINVAL;
	if (S_ISDIR(a->mode))
		return -EISDIR;
	if (!S_ISREG(a->mode))
		return -EINVAL;
	uint64_t end = op->off + op->len;
	if (op->kind == FM_SEEK) {
		if (op->off >= a->size)
			return -ENXIO;
		uint64_t pg = op->off / FM_PAGE;
		if (op->flags == KR_FS_SEEK_DATA) {
			unsigned k = 0;
			while (k < a->npages && a->pages[k].pg < pg)
				k++;
			if (k == a->npages || a->pages[k].pg * FM_PAGE >= a->size)
				return -ENXIO;
			return (int64_t)(a->pages[k].pg == pg ? op->off : a->pages[k].pg * FM_PAGE);
		}
		while (page_find(a, pg))
			pg++;
		uint64_t hole = pg * FM_PAGE > op->off ? pg * FM_PAGE : op->off;
		return (int64_t)(hole < a->size ? hole : a->size);
	}
	if (op->kind == FM_FALLOCATE) {
		uint64_t size = op->flags ? a->size : end > a->size ? end : a->size;
		uint64_t stop = end < size ? end : size, need = 0;
		for (uint64_t pg = op->off / FM_PAGE; op->off < stop && pg * FM_PAGE < stop; pg++)
			need += !page_find(a, pg);
		if (need > free_pages(m))
			return -ENOSPC;
		for (uint64_t pg = op->off / FM_PAGE; op->off < stop && pg * FM_PAGE < stop; pg++)
			page_get(m, a, pg);
		a->size = size;
		return 0;
	}
	if (op->off >= a->size)
		return 0;
	if (end > a->size)
		end = a->size;
	uint64_t first = (op->off + FM_PAGE - 1) / FM_PAGE, last = end / FM_PAGE, need = 0;
	for (uint64_t pg = op->off / FM_PAGE; pg * FM_PAGE < end; pg++)
		need += (pg < first || pg >= last) && page_find(a, pg);
	if (need > free_pages(m))
		return -ENOSPC;
	for (uint64_t pos = op->off; pos < end;) {
		uint64_t pg = pos / FM_PAGE, next = (pg + 1) * FM_PAGE < end ? (pg + 1) * FM_PAGE : end;
		struct fm_page *p = page_find(a, pg);
		if (p && pg >= first && pg < last) {
			free(p->data);
			memmove(p, p + 1, (size_t)(a->pages + a->npages - p - 1) * sizeof(*p));
			a->npages--;
		} else if (p) { /* a zeroed copy */
			memset(p->data + pos % FM_PAGE, 0, next - pos);
			p->ver = ++m->next_ver;
		}
		pos = next;
	}
	return 0;
}

static void xattr_value(const struct fm_op *op, uint8_t *out) { tu_fill(out, op->len, op->seed); }

/* setxattr and removexattr, in the library's order of checks (fs_file.c). */
static int64_t apply_xattr(struct fm_inode *ip, const struct fm_op *op)
{
	bool set = op->kind == FM_SETXATTR;
	if (set && op->flags == (KR_FS_XATTR_CREATE | KR_FS_XATTR_REPLACE))
		return -EINVAL;
	size_t n = strlen(op->name);
	if (n == 0 || n > KR_FS_XATTR_NAME_MAX)
		return -ERANGE;
	if (set && op->len > KR_FS_XATTR_SIZE_MAX)
		return -E2BIG;
	struct fm_xattr *x = xattr_find(ip, op->name);
	if (!set) {
		if (!x)
			return -ENODATA;
		free(x->name);
		free(x->value);
		unsigned at = (unsigned)(x - ip->xattrs);
		memmove(x, x + 1, (ip->nxattrs - at - 1) * sizeof(*x));
		ip->nxattrs--;
		return 0;
	}
	if (x && (op->flags & KR_FS_XATTR_CREATE))
		return -EEXIST;
	if (!x && (op->flags & KR_FS_XATTR_REPLACE))
		return -ENODATA;
	if (!x) {
		ip->xattrs = xrealloc(ip->xattrs, (ip->nxattrs + 1) * sizeof(*ip->xattrs));
		x = &ip->xattrs[ip->nxattrs++];
		x->name = xstrdup(op->name);
		x->value = NULL;
	}
	x->value = xrealloc(x->value, op->len);
	x->len = op->len;
	xattr_value(op, x->value);
	return 0;
}

static struct fm_snap *snap_find(const struct fm *m, const char *name)
{
	for (unsigned i = 0; i < m->nsnaps; i++)
		if (strcmp(m->snaps[i].name, name) == 0)
			return &m->snaps[i];
	return NULL;
}

/* Snapshot create and delete (fs_snap.c's checks). */
static int64_t apply_snapshot(struct fm *m, const struct fm_op *op)
{
	if (strchr(op->name, '/') || dot(op->name))
		return -EINVAL;
	struct fm_snap *s = snap_find(m, op->name);
	if (op->kind == FM_SNAPSHOT_DELETE) {
		if (!s)
			return -ENOENT;
		snap_drop(s);
		memmove(s, s + 1, (size_t)(m->snaps + m->nsnaps - s - 1) * sizeof(*s));
		m->nsnaps--;
		return 0;
	}
	if (s)
		return -EEXIST;
	m->snaps = xrealloc(m->snaps, (m->nsnaps + 1) * sizeof(*m->snaps));
	s = &m->snaps[m->nsnaps++];
	snprintf(s->name, sizeof(s->name), "%s", op->name);
	s->tree = xrealloc(NULL, sizeof(struct fm));
	copy_tree(s->tree, m);
	return 0;
}

int64_t fm_apply(struct fm *m, const struct fm_op *op, uint32_t *new_id)
{
	*new_id = 0;
	struct fm_inode *a = &m->v[op->a];
	int64_t rc;
	switch (op->kind) {
	case FM_CREATE:
	case FM_MKDIR:
	case FM_SYMLINK: {
		bool isdir = op->kind == FM_MKDIR, sl = op->kind == FM_SYMLINK;
		if ((rc = make_check(m, op, isdir)) != 0)
			return rc;
		if (sl && free_pages(m) == 0)
			return -ENOSPC;
		uint32_t mode = isdir ? S_IFDIR | (op->mode & 07777) : sl ? S_IFLNK | 0777 : S_IFREG | (op->mode & 07777);
		uint32_t id = new_inode(m, mode, op->uid, op->gid);
		a = &m->v[op->a]; /* new_inode may move the array */
		m->v[id].parent = op->a;
		if (sl) {
			m->v[id].target = xrealloc(NULL, op->len + 1);
			symlink_target(op, m->v[id].target);
			m->v[id].size = op->len;
			m->v[id].target_ver = ++m->next_ver;
		}
		dent_add(a, op->name, id);
		a->nlink += isdir;
		*new_id = id;
		return 0;
	}
	case FM_WRITE: {
		if (op->len == 0)
			return 0;
		if (S_ISDIR(a->mode))
			return -EISDIR;
		if (!S_ISREG(a->mode))
			return -EINVAL;
		uint64_t first = op->off / FM_PAGE, last = (op->off + op->len - 1) / FM_PAGE;
		if (last - first + 1 > free_pages(m))
			return -ENOSPC;
		uint8_t *buf = xrealloc(NULL, op->len);
		tu_fill(buf, op->len, op->seed);
		for (uint64_t pg = first; pg <= last; pg++) {
			uint64_t lo = pg * FM_PAGE > op->off ? pg * FM_PAGE : op->off;
			uint64_t hi = (pg + 1) * FM_PAGE < op->off + op->len ? (pg + 1) * FM_PAGE : op->off + op->len;
			memcpy(page_rewrite(m, a, pg) + (lo - pg * FM_PAGE), buf + (lo - op->off), hi - lo);
		}
		free(buf);
		if (op->off + op->len > a->size)
			a->size = op->off + op->len;
		return (int64_t)op->len;
	}
	case FM_READ:
		if (S_ISDIR(a->mode))
			return -EISDIR;
		if (!S_ISREG(a->mode))
			return -EINVAL;
		return op->off >= a->size ? 0 : (int64_t)(op->len < a->size - op->off ? op->len : a->size - op->off);
	case FM_TRUNCATE:
		if (S_ISDIR(a->mode))
			return -EISDIR;
		if (!S_ISREG(a->mode))
			return -EINVAL;
		if (op->off < a->size && op->off % FM_PAGE && page_find(a, op->off / FM_PAGE) && free_pages(m) == 0)
			return -ENOSPC;
		truncate_model(m, a, op->off);
		return 0;
	case FM_UNLINK:
	case FM_RMDIR: {
		bool want_dir = op->kind == FM_RMDIR;
		if (!S_ISDIR(a->mode))
			return -ENOTDIR;
		if ((rc = name_err(op->name)) != 0)
			return rc;
		if (dot(op->name))
			return !want_dir ? -EISDIR : strcmp(op->name, ".") == 0 ? -EINVAL : -ENOTEMPTY;
		struct fm_dent *d = dent_find(a, op->name);
		if (!d)
			return -ENOENT;
		uint32_t id = d->id;
		if (want_dir && !is_dir(m, id))
			return -ENOTDIR;
		if (!want_dir && is_dir(m, id))
			return -EISDIR;
		if (want_dir && m->v[id].ndents)
			return -ENOTEMPTY;
		dent_remove(a, op->name);
		a->nlink -= want_dir;
		drop(m, id);
		return 0;
	}
	case FM_RENAME:
		return apply_rename(m, op);
	case FM_FALLOCATE:
	case FM_PUNCH:
	case FM_SEEK:
		return apply_holes(m, op);
	case FM_LINK: {
		struct fm_inode *d = &m->v[op->b];
		if (!S_ISDIR(d->mode))
			return -ENOTDIR;
		if ((rc = name_err(op->name2)) != 0)
			return rc;
		if (dot(op->name2))
			return -EEXIST;
		if (S_ISDIR(a->mode))
			return -EPERM;
		if (a->nlink >= LINK_MAX_COUNT)
			return -EMLINK;
		if (dent_find(d, op->name2))
			return -EEXIST;
		dent_add(d, op->name2, op->a);
		a->nlink++;
		return 0;
	}
	case FM_SETATTR:
		if (op->mask & KR_FS_SET_MODE)
			a->mode = (a->mode & S_IFMT) | (op->mode & 07777);
		if (op->mask & KR_FS_SET_UID)
			a->uid = op->uid;
		if (op->mask & KR_FS_SET_GID)
			a->gid = op->gid;
		return 0;
	case FM_SETXATTR:
	case FM_REMOVEXATTR:
		return apply_xattr(a, op);
	case FM_SNAPSHOT:
	case FM_SNAPSHOT_DELETE:
		return apply_snapshot(m, op);
	case FM_NKINDS:
		break;
	}
	return -EINVAL;
}

/* ---- running ---------------------------------------------------------------------------------- */
static int64_t read_check(kr_fs *fs, const struct fm *m, const struct fm_op *op, uint64_t ino)
{
	uint8_t *buf = xrealloc(NULL, op->len);
	int64_t n = kr_fs_read(fs, ino, buf, op->len, op->off);
	const struct fm_inode *ip = &m->v[op->a];
	for (int64_t i = 0; i < n; i++) {
		uint64_t pos = op->off + (uint64_t)i;
		const struct fm_page *p = page_find(ip, pos / FM_PAGE);
		uint8_t want = p ? p->data[pos % FM_PAGE] : 0;
		if (buf[i] != want) {
			fprintf(stderr, "read of model inode %u at %" PRIu64 ": byte %" PRIu64 " is %#x, expected %#x\n",
				op->a, op->off, pos, buf[i], want);
			n = INT64_MIN;
			break;
		}
	}
	free(buf);
	return n;
}

int64_t fm_run(kr_fs *fs, const struct fm *m, const struct fm_op *op, uint64_t *new_ino)
{
	uint64_t a = m->v[op->a].fsino, b = op->b ? m->v[op->b].fsino : 0;
	struct kr_fs_attr attr;
	int64_t rc = -EINVAL;
	*new_ino = 0;
	switch (op->kind) {
	case FM_CREATE:
		rc = kr_fs_create(fs, a, op->name, op->mode, op->uid, op->gid, &attr);
		break;
	case FM_MKDIR:
		rc = kr_fs_mkdir(fs, a, op->name, op->mode, op->uid, op->gid, &attr);
		break;
	case FM_SYMLINK: {
		char target[200];
		symlink_target(op, target);
		rc = kr_fs_symlink(fs, a, op->name, target, op->uid, op->gid, &attr);
		break;
	}
	case FM_WRITE: {
		uint8_t *buf = xrealloc(NULL, op->len);
		tu_fill(buf, op->len, op->seed);
		rc = kr_fs_write(fs, a, buf, op->len, op->off);
		free(buf);
		break;
	}
	case FM_READ:
		rc = read_check(fs, m, op, a);
		break;
	case FM_TRUNCATE:
		rc = kr_fs_truncate(fs, a, op->off);
		break;
	case FM_UNLINK:
		rc = kr_fs_unlink(fs, a, op->name);
		break;
	case FM_RMDIR:
		rc = kr_fs_rmdir(fs, a, op->name);
		break;
	case FM_RENAME:
		rc = kr_fs_rename(fs, a, op->name, b, op->name2, op->flags);
		break;
	case FM_LINK:
		rc = kr_fs_link(fs, a, b, op->name2, NULL);
		break;
	case FM_FALLOCATE:
		rc = kr_fs_fallocate(fs, a, (int)op->flags, op->off, op->len);
		break;
	case FM_PUNCH:
		rc = kr_fs_fallocate(fs, a, KR_FS_FALLOC_PUNCH_HOLE | KR_FS_FALLOC_KEEP_SIZE, op->off, op->len);
		break;
	case FM_SEEK:
		rc = kr_fs_lseek(fs, a, op->off, (int)op->flags);
		break;
	case FM_SETATTR:
		attr.mode = op->mode;
		attr.uid = op->uid;
		attr.gid = op->gid;
		rc = kr_fs_setattr(fs, a, op->mask, &attr, NULL);
		break;
	case FM_SETXATTR: {
		uint8_t *v = xrealloc(NULL, op->len);
		xattr_value(op, v);
		rc = kr_fs_setxattr(fs, a, op->name, v, op->len, (int)op->flags);
		free(v);
		break;
	}
	case FM_REMOVEXATTR:
		rc = kr_fs_removexattr(fs, a, op->name);
		break;
	case FM_SNAPSHOT:
		rc = kr_fs_snapshot_create(fs, op->name, NULL);
		break;
	case FM_SNAPSHOT_DELETE:
		rc = kr_fs_snapshot_delete(fs, op->name);
		break;
	case FM_NKINDS:
		break;
	}
	if (rc == 0 && (op->kind == FM_CREATE || op->kind == FM_MKDIR || op->kind == FM_SYMLINK))
		*new_ino = attr.ino;
	return rc;
}

const char *fm_kind_name(enum fm_kind k)
{
	static const char *n[FM_NKINDS] = {"create", "mkdir", "symlink", "write", "truncate", "unlink",
					   "rmdir", "rename", "link", "setattr", "read", "fallocate",
					   "punch", "seek", "setxattr", "removexattr", "snapshot", "snapshot-delete"};
	return k < FM_NKINDS ? n[k] : "?";
}

void fm_describe(const struct fm_op *op, char *buf, size_t n)
{
	snprintf(buf, n, "%s(a=%u b=%u '%.40s' '%.40s' off=%" PRIu64 " len=%" PRIu64 " flags=%#x mask=%#x)",
		 fm_kind_name(op->kind), op->a, op->b, op->name, op->name2, op->off, op->len, op->flags, op->mask);
}

int fm_step(kr_fs *fs, struct fm *m, const struct fm_op *op, int64_t *result, char *why, size_t whylen)
{
	uint64_t ino;
	uint32_t id;
	int64_t got = fm_run(fs, m, op, &ino);
	int64_t want = fm_apply(m, op, &id);
	if (result)
		*result = want;
	if (id)
		m->v[id].fsino = ino;
	if (got != want) {
		char d[200];
		fm_describe(op, d, sizeof(d));
		snprintf(why, whylen, "%s returned %" PRId64 ", the model says %" PRId64 " (%s)", d, got, want,
			 got < 0 ? kr_errmsg() : "");
		return -1;
	}
	return 0;
}

/* ---- comparing ---------------------------------------------------------------------------------- */
struct listing {
	struct {
		char name[256];
		uint64_t ino;
		uint32_t dtype;
	} *v;
	unsigned n, cap;
	uint64_t dotdot;
};

static int collect(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t dtype, uint64_t cookie)
{
	struct listing *l = ctx;
	(void)cookie;
	if (len == 1 && name[0] == '.')
		return 0;
	if (len == 2 && name[0] == '.' && name[1] == '.') {
		l->dotdot = ino;
		return 0;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	memcpy(l->v[l->n].name, name, len);
	l->v[l->n].name[len] = '\0';
	l->v[l->n].ino = ino;
	l->v[l->n++].dtype = dtype;
	return 0;
}

struct walk {
	kr_fs *fs;
	const struct fm *m;
	uint32_t *id_of;  /* fs ino -> model id */
	uint64_t *ino_of; /* model id -> fs ino */
	uint64_t nino;
	uint64_t base;    /* inode numbers of the tree walked: base | number in the tree */
	bool meta_only;   /* the top model's: snapshots are judged like the live tree */
	const struct fm *alt; /* file bytes may be, byte by byte, m's or alt's (same ids) */
	char *why;
	size_t whylen;
};

#define BAD(w, ...) (snprintf((w)->why, (w)->whylen, __VA_ARGS__), -1)

/* With an alternative model: whether every byte of page pg of model inode id is the one
 * either model has (a write torn by a crash). */
static bool torn_ok(const struct walk *w, uint32_t id, uint64_t pg, const uint8_t *buf, uint64_t n)
{
	static const uint8_t zero[FM_PAGE];
	if (!w->alt || id >= w->alt->n)
		return false;
	const struct fm_page *p = page_find(&w->m->v[id], pg), *q = page_find(&w->alt->v[id], pg);
	const uint8_t *a = p ? p->data : zero, *b = q ? q->data : zero;
	for (uint64_t i = 0; i < n; i++)
		if (buf[i] != a[i] && buf[i] != b[i])
			return false;
	return true;
}

static int compare_content(struct walk *w, uint32_t id, uint64_t ino)
{
	const struct fm_inode *ip = &w->m->v[id];
	if (S_ISLNK(ip->mode) && !w->meta_only) {
		char t[KR_FS_SYMLINK_MAX + 1];
		ssize_t n = kr_fs_readlink(w->fs, ino, t, sizeof(t));
		if (n != (ssize_t)ip->size || memcmp(t, ip->target, ip->size) != 0)
			return BAD(w, "symlink %" PRIu64 ": readlink gave %zd bytes, expected '%s'", ino, n, ip->target);
		return 0;
	}
	if (!S_ISREG(ip->mode) || w->meta_only)
		return 0;
	/* Every page the model has, plus the page after each (a hole or the end). */
	uint8_t *buf = xrealloc(NULL, 2 * FM_PAGE), zero[FM_PAGE] = {0};
	int rc = 0;
	for (unsigned k = 0; k <= ip->npages && rc == 0; k++) {
		uint64_t pg = k < ip->npages ? ip->pages[k].pg : 0;
		for (int step = 0; step < 2 && rc == 0; step++, pg++) {
			uint64_t off = pg * FM_PAGE;
			if (off >= ip->size)
				break;
			uint64_t want = ip->size - off < FM_PAGE ? ip->size - off : FM_PAGE;
			ssize_t n = kr_fs_read(w->fs, ino, buf, FM_PAGE, off);
			const struct fm_page *p = page_find(ip, pg);
			if (n != (ssize_t)want)
				rc = BAD(w, "inode %" PRIu64 ": read of page %" PRIu64 " gave %zd, expected %" PRIu64 " (%s)",
					 ino, pg, n, want, n < 0 ? kr_errmsg() : "");
			else if (memcmp(buf, p ? p->data : zero, want) != 0 && !torn_ok(w, id, pg, buf, want))
				rc = BAD(w, "inode %" PRIu64 ": page %" PRIu64 " differs from the model", ino, pg);
		}
	}
	free(buf);
	return rc;
}

/* The names listed in the model's order, and every value. */
static int compare_xattrs(struct walk *w, uint32_t id, uint64_t ino)
{
	const struct fm_inode *ip = &w->m->v[id];
	size_t want = 0;
	for (unsigned i = 0; i < ip->nxattrs; i++)
		want += strlen(ip->xattrs[i].name) + 1;
	char *list = xrealloc(NULL, want + 1), *at = list;
	uint8_t *v = xrealloc(NULL, KR_FS_XATTR_SIZE_MAX);
	ssize_t n = kr_fs_listxattr(w->fs, ino, list, want + 1);
	int rc = n == (ssize_t)want ? 0
				    : BAD(w, "inode %" PRIu64 ": listxattr gave %zd, the model has %zu bytes of names", ino,
					  n, want);
	for (unsigned i = 0; rc == 0 && i < ip->nxattrs; i++) {
		const struct fm_xattr *x = &ip->xattrs[i];
		ssize_t got = kr_fs_getxattr(w->fs, ino, x->name, v, KR_FS_XATTR_SIZE_MAX);
		if (strcmp(at, x->name) != 0)
			rc = BAD(w, "inode %" PRIu64 ": attribute %u is '%.40s', the model has '%.40s'", ino, i, at, x->name);
		else if (got != (ssize_t)x->len || memcmp(v, x->value, x->len) != 0)
			rc = BAD(w, "inode %" PRIu64 ": attribute '%.40s': %zd bytes, not the model's %zu", ino, x->name,
				 got, x->len);
		at += strlen(at) + 1;
	}
	free(list);
	free(v);
	return rc;
}

static int compare_inode(struct walk *w, uint32_t id, uint64_t ino, uint64_t parent_ino);

static int compare_dir(struct walk *w, uint32_t id, uint64_t ino, uint64_t parent_ino)
{
	const struct fm_inode *d = &w->m->v[id];
	struct listing l = {0};
	int n = kr_fs_readdir(w->fs, ino, 0, collect, &l);
	int rc = 0;
	if (n < 0)
		rc = BAD(w, "readdir of %" PRIu64 ": %d (%s)", ino, n, kr_errmsg());
	else if (l.dotdot != parent_ino)
		rc = BAD(w, "directory %" PRIu64 ": '..' is %" PRIu64 ", expected %" PRIu64, ino, l.dotdot, parent_ino);
	else if (l.n != d->ndents)
		rc = BAD(w, "directory %" PRIu64 ": %u names, the model has %u", ino, l.n, d->ndents);
	for (unsigned i = 0; rc == 0 && i < l.n; i++) {
		const struct fm_dent *e = dent_find(d, l.v[i].name);
		if (!e) {
			rc = BAD(w, "directory %" PRIu64 ": unexpected name '%.60s'", ino, l.v[i].name);
			break;
		}
		struct kr_fs_attr a;
		int lr = kr_fs_lookup(w->fs, ino, l.v[i].name, &a);
		if (lr != 0 || a.ino != l.v[i].ino)
			rc = BAD(w, "directory %" PRIu64 ": lookup of '%.60s' gave %d ino %" PRIu64 ", readdir %" PRIu64,
				 ino, l.v[i].name, lr, a.ino, l.v[i].ino);
		else if (l.v[i].dtype != (uint32_t)(S_ISDIR(w->m->v[e->id].mode) ? 4 : S_ISLNK(w->m->v[e->id].mode) ? 10 : 8))
			rc = BAD(w, "directory %" PRIu64 ": '%.60s' has type %u", ino, l.v[i].name, l.v[i].dtype);
		else
			rc = compare_inode(w, e->id, l.v[i].ino, ino);
	}
	free(l.v);
	return rc;
}

static int compare_inode(struct walk *w, uint32_t id, uint64_t ino, uint64_t parent_ino)
{
	uint64_t raw = KR_FS_INO_IN_TREE(ino);
	if (raw == 0 || raw >= w->nino || ino - raw != w->base)
		return BAD(w, "inode number %" PRIu64 " out of range", ino);
	if (w->ino_of[id] || w->id_of[raw]) {
		if (w->ino_of[id] != ino || w->id_of[raw] != id)
			return BAD(w, "model inode %u / fs inode %" PRIu64 ": names disagree on identity (%" PRIu64 ", %u)",
				   id, ino, w->ino_of[id], w->id_of[raw]);
		return 0; /* a hard link to an inode already compared */
	}
	w->ino_of[id] = ino;
	w->id_of[raw] = id;
	const struct fm_inode *ip = &w->m->v[id];
	struct kr_fs_attr a;
	int rc = kr_fs_getattr(w->fs, ino, &a);
	if (rc)
		return BAD(w, "getattr %" PRIu64 ": %d (%s)", ino, rc, kr_errmsg());
	if (a.mode != ip->mode || a.nlink != ip->nlink || a.uid != ip->uid || a.gid != ip->gid || a.size != ip->size)
		return BAD(w, "inode %" PRIu64 ": mode %o nlink %u uid %u gid %u size %" PRIu64
			   "; model: mode %o nlink %u uid %u gid %u size %" PRIu64,
			   ino, a.mode, a.nlink, a.uid, a.gid, a.size, ip->mode, ip->nlink, ip->uid, ip->gid, ip->size);
	uint64_t pages = ip->npages + (S_ISLNK(ip->mode) ? 1 : 0);
	if (a.blocks != pages * (FM_PAGE / 512))
		return BAD(w, "inode %" PRIu64 ": %" PRIu64 " blocks, the model has %" PRIu64 " pages", ino, a.blocks, pages);
	if ((rc = compare_xattrs(w, id, ino)) != 0)
		return rc;
	if (S_ISDIR(ip->mode))
		return compare_dir(w, id, ino, parent_ino);
	return compare_content(w, id, ino);
}

/* Fills why; -1. */
static int why_set(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Walks the tree of m from root (whose ".." is root_parent) in fs. */
static int compare_tree(kr_fs *fs, const struct fm *m, const struct fm *alt, bool meta_only, uint64_t nino,
			uint64_t root, uint64_t root_parent, char *why, size_t whylen)
{
	struct walk w = {.fs = fs, .m = m, .nino = nino, .base = root - KR_FS_INO_IN_TREE(root),
			 .meta_only = meta_only, .alt = alt, .why = why, .whylen = whylen};
	w.id_of = calloc(w.nino, sizeof(*w.id_of));
	w.ino_of = calloc(m->n, sizeof(*w.ino_of));
	if (!w.id_of || !w.ino_of)
		TU_FAIL("out of memory");
	int rc = compare_inode(&w, 1, root, root_parent);
	for (unsigned i = 1; rc == 0 && i < m->n; i++)
		if (m->v[i].live && !w.ino_of[i])
			rc = BAD(&w, "model inode %u is not reachable in the file system", i);
	free(w.id_of);
	free(w.ino_of);
	return rc;
}

int fm_compare(kr_fs *fs, const struct fm *m, char *why, size_t whylen)
{
	return fm_compare_torn(fs, m, NULL, why, whylen);
}

int fm_compare_torn(kr_fs *fs, const struct fm *m, const struct fm *alt, char *why, size_t whylen)
{
	struct kr_fs_statfs st;
	if (kr_fs_statfs(fs, &st) != 0)
		return snprintf(why, whylen, "statfs failed: %s", kr_errmsg()), -1;
	int rc = compare_tree(fs, m, alt, m->meta_only, st.files + 1, m->v[1].fsino, m->root_parent, why, whylen);
	if (rc == 0 && !m->subtree && st.files - st.ffree != live_inodes(m))
		rc = why_set(why, whylen, "statfs: %" PRIu64 " inodes in use, the model has %" PRIu64, st.files - st.ffree,
			     live_inodes(m));
	if (rc == 0 && !m->subtree && st.blocks - st.bfree != used_pages(m))
		rc = why_set(why, whylen, "statfs: %" PRIu64 " data pages in use, the model has %" PRIu64,
			     st.blocks - st.bfree, used_pages(m));
	int n = m->subtree ? 0 : kr_fs_snapshot_list(fs, NULL, 0);
	if (rc == 0 && n != (int)m->nsnaps)
		rc = why_set(why, whylen, "%d snapshots, the model has %u", n, m->nsnaps);
	for (unsigned i = 0; rc == 0 && i < m->nsnaps; i++) {
		struct kr_fs_snapshot_attr sa;
		char sub[400];
		if (kr_fs_snapshot_lookup(fs, m->snaps[i].name, &sa) != 0)
			rc = why_set(why, whylen, "snapshot '%s' is missing", m->snaps[i].name);
		else if (compare_tree(fs, m->snaps[i].tree, NULL, m->meta_only, st.files + 1, sa.root, sa.root, sub, sizeof(sub)) != 0)
			rc = why_set(why, whylen, "snapshot '%s': %.300s", m->snaps[i].name, sub);
	}
	return rc;
}
