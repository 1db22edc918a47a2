/*
 * fs_index.c - the DRAM indexes of keratin-fs: a radix tree from file page number to data
 * page for regular files and symlinks, and a hash table of names for each directory.
 *
 * Both are caches of what the inode's committed log says (fs_apply.c applies entries to
 * them); they are rebuilt at every mount and never written to the pool.
 *
 * Radix tree: 64-way nodes; a tree of height h holds keys below 64^h and grows upward by
 * putting the old root under a new one. Leaves hold uint32_t values (data page + 1, 0 for a
 * hole). Cleared slots are not pruned; the tree is freed with its inode. Sparse files cost
 * one path of nodes per populated 64-page group, whatever their size.
 *
 * Directory: chained hash on CRC-32C of the name, doubling when the load passes 1, plus a
 * doubly linked list in cookie order (each entry's cookie is the transaction id of the log
 * entry that added it; later adds have larger ids, so appending keeps the order). readdir
 * resumes after a cookie by walking that list.
 */
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "fs.h"

#define FAN 64u
#define FAN_BITS 6u

struct radix_node {
	void *slot[FAN]; /* inner nodes */
};
struct radix_leaf {
	uint32_t v[FAN];
};

static uint64_t radix_capacity(unsigned height)
{
	return FAN_BITS * height >= 64 ? UINT64_MAX : 1ull << (FAN_BITS * height);
}

uint32_t krfs_radix_get(const struct krfs_radix *r, uint64_t key)
{
	if (!r->root || key >= radix_capacity(r->height))
		return 0;
	const void *n = r->root;
	for (unsigned lvl = r->height; lvl > 1; lvl--) {
		n = ((const struct radix_node *)n)->slot[(key >> (FAN_BITS * (lvl - 1))) % FAN];
		if (!n)
			return 0;
	}
	return ((const struct radix_leaf *)n)->v[key % FAN];
}

int krfs_radix_set(struct krfs_radix *r, uint64_t key, uint32_t val, uint32_t *old)
{
	if (old)
		*old = 0;
	if (val == 0 && (!r->root || key >= radix_capacity(r->height)))
		return 0;
	if (!r->root) {
		r->root = kr_calloc(1, sizeof(struct radix_leaf));
		if (!r->root)
			return -ENOMEM;
		r->height = 1;
	}
	while (key >= radix_capacity(r->height)) {
		struct radix_node *top = kr_calloc(1, sizeof(*top));
		if (!top)
			return -ENOMEM;
		top->slot[0] = r->root;
		r->root = top;
		r->height++;
	}
	void *n = r->root;
	for (unsigned lvl = r->height; lvl > 1; lvl--) {
		void **slot = &((struct radix_node *)n)->slot[(key >> (FAN_BITS * (lvl - 1))) % FAN];
		if (!*slot) {
			if (val == 0)
				return 0;
			*slot = kr_calloc(1, lvl == 2 ? sizeof(struct radix_leaf) : sizeof(struct radix_node));
			if (!*slot)
				return -ENOMEM;
		}
		n = *slot;
	}
	uint32_t *v = &((struct radix_leaf *)n)->v[key % FAN];
	if (old)
		*old = *v;
	*v = val;
	return 0;
}

/* First populated key >= from under node n of level lvl covering keys from base. */
static int radix_next_in(const void *n, unsigned lvl, uint64_t base, uint64_t from, uint64_t *key,
			 uint32_t *val)
{
	if (lvl == 1) {
		const struct radix_leaf *l = n;
		for (uint64_t i = from > base ? from - base : 0; i < FAN; i++)
			if (l->v[i]) {
				*key = base + i;
				*val = l->v[i];
				return 1;
			}
		return 0;
	}
	uint64_t span = 1ull << (FAN_BITS * (lvl - 1));
	uint64_t i = from > base ? (from - base) / span : 0;
	for (; i < FAN; i++) {
		const void *c = ((const struct radix_node *)n)->slot[i];
		if (c && radix_next_in(c, lvl - 1, base + i * span, from, key, val))
			return 1;
	}
	return 0;
}

int krfs_radix_next(const struct krfs_radix *r, uint64_t from, uint64_t *key, uint32_t *val)
{
	if (!r->root || from >= radix_capacity(r->height))
		return 0;
	return radix_next_in(r->root, r->height, 0, from, key, val);
}

static void radix_free_in(void *n, unsigned lvl)
{
	if (lvl > 1)
		for (unsigned i = 0; i < FAN; i++)
			if (((struct radix_node *)n)->slot[i])
				radix_free_in(((struct radix_node *)n)->slot[i], lvl - 1);
	free(n);
}

void krfs_radix_free(struct krfs_radix *r)
{
	if (r->root)
		radix_free_in(r->root, r->height);
	r->root = NULL;
	r->height = 0;
}

/* ---- directories ------------------------------------------------------------------------ */
static uint32_t name_hash(const char *name, size_t len) { return kr_crc32c(name, len); }

struct krfs_dentry *krfs_dir_find(const struct krfs_dir *d, const char *name, size_t len)
{
	if (!d->nbuckets)
		return NULL;
	uint32_t h = name_hash(name, len);
	for (struct krfs_dentry *e = d->tab[h % d->nbuckets]; e; e = e->hnext)
		if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

static int dir_grow(struct krfs_dir *d)
{
	uint32_t nb = d->nbuckets ? d->nbuckets * 2 : 16;
	struct krfs_dentry **tab = kr_calloc(nb, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (struct krfs_dentry *e = d->first; e; e = e->next) {
		e->hnext = tab[e->hash % nb];
		tab[e->hash % nb] = e;
	}
	free(d->tab);
	d->tab = tab;
	d->nbuckets = nb;
	return 0;
}

static void list_unlink(struct krfs_dir *d, struct krfs_dentry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		d->first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->last = e->prev;
	e->prev = e->next = NULL;
}

static void list_append(struct krfs_dir *d, struct krfs_dentry *e)
{
	e->prev = d->last;
	e->next = NULL;
	if (d->last)
		d->last->next = e;
	else
		d->first = e;
	d->last = e;
}

int krfs_dir_add(struct krfs_dir *d, const char *name, size_t len, uint64_t ino, uint8_t dtype,
		 uint64_t cookie)
{
	struct krfs_dentry *e = krfs_dir_find(d, name, len);
	if (e) {
		e->ino = ino;
		e->dtype = dtype;
		e->cookie = cookie;
		list_unlink(d, e);
		list_append(d, e);
		return 0;
	}
	if (d->count >= d->nbuckets && dir_grow(d) != 0)
		return -ENOMEM;
	e = kr_malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	e->hash = name_hash(name, len);
	e->len = (uint8_t)len;
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	e->ino = ino;
	e->dtype = dtype;
	e->cookie = cookie;
	e->src = 0; /* no entry owns it yet: fs_apply.c names the one that does */
	e->hnext = d->tab[e->hash % d->nbuckets];
	d->tab[e->hash % d->nbuckets] = e;
	list_append(d, e);
	d->count++;
	d->bytes += krfs_dentry_size(len);
	return 0;
}

int krfs_dir_remove(struct krfs_dir *d, const char *name, size_t len)
{
	struct krfs_dentry *e = krfs_dir_find(d, name, len);
	if (!e)
		return -ENOENT;
	struct krfs_dentry **pp = &d->tab[e->hash % d->nbuckets];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	list_unlink(d, e);
	d->count--;
	d->bytes -= krfs_dentry_size(e->len);
	free(e);
	return 0;
}

void krfs_dir_free(struct krfs_dir *d)
{
	for (struct krfs_dentry *e = d->first, *n; e; e = n) {
		n = e->next;
		free(e);
	}
	free(d->tab);
	memset(d, 0, sizeof(*d));
}
