/*
 * persist.c - keratin-pmemobj's persistence calls: pmemobj_persist, flush and drain after
 * the application's own stores, and memcpy/memset/memmove that persist what they write.
 *
 * A libpmemobj program that stores into an object outside a transaction and then persists
 * the range (hashmap_atomic, the constructors of the atomic API) changes checksummed,
 * parity-covered bytes behind keratin's back.
 *
 * On a pool with keratin's stale map (every pool made since it), pmemobj_persist is
 * kr_stored_persist: the range's page columns are marked stale (once per column and cleaner
 * pass), the range is flushed, one fence. keratin's cleaner brings checksums and parity up
 * to date within its period; recovery does after a crash. flush notes the range, and drain
 * marks and writes back every noted range, then fences once (so a mark's own fence never
 * falls between two flushes of one drain). Inside a transaction of the thread, persists
 * are noted and declared at its end, as on an older pool (below).
 *
 * On an older pool, pmemobj_persist declares the range to keratin (kr_tx_add_stored): one
 * transaction, one commit fence, after which checksum and parity agree with the new bytes.
 * flush only notes the range; drain declares every noted range of the pool in one
 * transaction. Inside a transaction of its own thread (which holds the thread's keratin
 * transaction) a persist is noted too and declared when that transaction ends.
 *
 * The window (docs/DESIGN.md measures it): from the application's first store to its
 * persist, the range is unprotected, as in libpmemobj; then, until the cleaner's pass (or
 * the declaration's commit), a media error in its columns cannot be repaired from parity.
 *
 * memcpy_persist and memset_persist write through a micro-buffer instead: keratin knows the
 * old bytes, and nothing is unprotected at any moment.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"

struct noted {
	struct kp_pool *pool;
	const char *addr;
	size_t len;
};

static _Thread_local struct noted *notes;
static _Thread_local size_t nnotes, cnotes;

static void note(struct kp_pool *p, const void *addr, size_t len)
{
	/* A range that touches the last one joins it (a loop of flushes over an array). */
	if (nnotes && notes[nnotes - 1].pool == p) {
		struct noted *n = &notes[nnotes - 1];
		const char *a = addr;
		if (a >= n->addr && a <= n->addr + n->len) {
			if (a + len > n->addr + n->len)
				n->len = (size_t)(a + len - n->addr);
			return;
		}
	}
	if (nnotes == cnotes) {
		size_t c = cnotes ? 2 * cnotes : 16;
		struct noted *m = realloc(notes, c * sizeof(*m));
		if (!m) { /* cannot remember it: declare it now, as a persist would */
			kp_declare_stored(p, addr, len);
			return;
		}
		notes = m;
		cnotes = c;
	}
	notes[nnotes++] = (struct noted){p, addr, len};
}

/* A declaration in progress: ranges go into one keratin transaction until it has a quarter
 * of a lane's bytes (kp_pool.declare_max), which then commits and a new one begins. A
 * transaction's log must fit one lane (with a line header per 56 bytes, a record header per
 * range, and room for other transactions' entries not yet trimmed), and a persist is not atomic in
 * libpmemobj either: a crash may leave any of its lines old or new, so declaring a large
 * range in pieces promises nothing less. (One transaction for everything was how a 1 MiB
 * persist of hashmap_rp's rebuilt table failed, and the next check took the table back to
 * what its checksum said: the keys were lost.) */
struct decl {
	struct kp_pool *p;
	kr_tx *tx;
	size_t bytes;
	int rc;
};

static void decl_flush(struct decl *d)
{
	if (d->tx) {
		int rc = d->rc ? (kr_tx_abort(d->tx), d->rc) : kr_tx_commit(d->tx);
		d->rc = d->rc ? d->rc : rc;
		d->tx = NULL;
	}
	d->bytes = 0;
}

static void decl_piece(struct decl *d, kr_oid oid, size_t off, size_t len)
{
	if (d->tx && d->bytes + len > d->p->declare_max)
		decl_flush(d);
	if (!d->rc && !d->tx)
		d->rc = kp_tx_begin(d->p, &d->tx);
	if (!d->rc)
		d->rc = kr_tx_add_stored(d->tx, oid, off, len, NULL);
	d->bytes += len;
}

/* Each object's piece of [addr, addr+len), at most declare_max bytes at a time. Bytes
 * outside live objects have no checksum to follow (and parity only in the library's own
 * writes): nothing to do. */
static void declare(struct decl *d, const char *a, size_t len)
{
	while (len && !d->rc) {
		kr_oid oid;
		size_t off, piece, osize;
		if (kp_locate(d->p, d->tx, a, 1, &oid, &off, &osize) != KR_OK) {
			piece = 1;
		} else {
			piece = osize - off;
			if (piece > len)
				piece = len;
			if (piece > d->p->declare_max)
				piece = d->p->declare_max;
			decl_piece(d, oid, off, piece);
		}
		a += piece;
		len -= piece;
	}
}

int kp_declare_stored(struct kp_pool *p, const void *addr, size_t len)
{
	struct decl d = {p, NULL, 0, 0};
	declare(&d, addr, len);
	decl_flush(&d);
	return d.rc ? kp_err_kr(d.rc, "pmemobj_persist") : 0;
}

/* The pool's noted ranges, on a pool with the stale map: all marked, then all written back,
 * one fence for them all. */
static void drain_stale(struct kp_pool *p)
{
	if (!nnotes)
		return; /* nothing noted: a transaction's end, most often */
	struct kr_stored_range *r = malloc(nnotes * sizeof(*r));
	size_t kept = 0, n = 0;
	int rc = KR_OK;
	for (size_t i = 0; i < nnotes; i++) {
		if (notes[i].pool != p) {
			notes[kept++] = notes[i];
			continue;
		}
		if (r)
			r[n] = (struct kr_stored_range){notes[i].addr, notes[i].len};
		else if (rc == KR_OK) /* no room to gather them: one at a time */
			rc = kr_stored_flush(p->kr, notes[i].addr, notes[i].len);
		n++;
	}
	nnotes = kept;
	if (r && rc == KR_OK)
		rc = kr_stored_flush_ranges(p->kr, r, n);
	free(r);
	if (rc == KR_OK && n)
		rc = kr_stored_drain(p->kr);
	if (rc)
		kp_err_kr(rc, "pmemobj_drain");
}

void kp_drain_pending(struct kp_pool *p)
{
	if (kp_tx_current(p))
		return;
	if (p->stale_map) {
		drain_stale(p);
		return;
	}
	struct decl d = {p, NULL, 0, 0};
	size_t kept = 0;
	for (size_t i = 0; i < nnotes; i++) {
		if (notes[i].pool == p)
			declare(&d, notes[i].addr, notes[i].len);
		else
			notes[kept++] = notes[i];
	}
	nnotes = kept;
	decl_flush(&d);
	if (d.rc)
		kp_err_kr(d.rc, "pmemobj_drain");
}

/* The pool that addr is in, if it is pop's; NULL for DRAM (a constructor's buffer). */
static struct kp_pool *target(PMEMobjpool *pop, const void *addr)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p || (const char *)addr < p->base || (const char *)addr >= p->base + p->size)
		return NULL;
	return p;
}

PMEMOBJ_API void pmemobj_persist(PMEMobjpool *pop, const void *addr, size_t len)
{
	struct kp_pool *p = target(pop, addr);
	if (!p || !len)
		return;
	if (kp_tx_current(p)) {
		note(p, addr, len);
	} else if (p->stale_map) {
		int rc = kr_stored_persist(p->kr, addr, len);
		if (rc)
			kp_err_kr(rc, "pmemobj_persist");
	} else {
		kp_declare_stored(p, addr, len);
	}
}

PMEMOBJ_API int pmemobj_xpersist(PMEMobjpool *pop, const void *addr, size_t len, unsigned flags)
{
	if (flags & ~PMEMOBJ_F_RELAXED)
		return kp_err(EINVAL, "pmemobj_xpersist: unknown flags 0x%x", flags);
	pmemobj_persist(pop, addr, len);
	return 0;
}

PMEMOBJ_API void pmemobj_flush(PMEMobjpool *pop, const void *addr, size_t len)
{
	struct kp_pool *p = target(pop, addr);
	if (p && len)
		note(p, addr, len);
}

PMEMOBJ_API int pmemobj_xflush(PMEMobjpool *pop, const void *addr, size_t len, unsigned flags)
{
	if (flags & ~PMEMOBJ_F_RELAXED)
		return kp_err(EINVAL, "pmemobj_xflush: unknown flags 0x%x", flags);
	pmemobj_flush(pop, addr, len);
	return 0;
}

PMEMOBJ_API void pmemobj_drain(PMEMobjpool *pop)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (p)
		kp_drain_pending(p);
}

/* len bytes of src (zeros if NULL) at dest, durable on return. A destination outside the
 * pool (or outside its live objects) is plain memory to keratin. */
static void *write_persist(PMEMobjpool *pop, void *dest, const void *src, int c, size_t len)
{
	struct kp_pool *p = target(pop, dest);
	kr_oid oid;
	size_t off;
	if (!p || !len || kp_locate(p, NULL, dest, len, &oid, &off, NULL) != KR_OK) {
		if (src)
			memmove(dest, src, len);
		else
			memset(dest, c, len);
		if (p && len) /* inside the pool, not one object: declare what it touched */
			pmemobj_persist(pop, dest, len);
		return dest;
	}
	kr_tx *tx;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc == KR_OK) {
		uint8_t *fill = NULL;
		if (!src && c && !(fill = malloc(len)))
			rc = kr_error_set(KR_E_NOMEM, "memset of %zu bytes", len);
		else if (fill)
			memset(fill, c, len);
		if (rc == KR_OK)
			rc = kp_write(p, tx, own, dest, src ? src : fill, len);
		free(fill);
		rc = kp_atomic_end(tx, own, rc);
	}
	if (rc)
		kp_err_kr(rc, "pmemobj_memcpy_persist");
	return dest;
}

PMEMOBJ_API void *pmemobj_memcpy_persist(PMEMobjpool *pop, void *dest, const void *src, size_t len)
{
	return write_persist(pop, dest, src, 0, len);
}

PMEMOBJ_API void *pmemobj_memset_persist(PMEMobjpool *pop, void *dest, int c, size_t len)
{
	return write_persist(pop, dest, NULL, c, len);
}

/* The flags choose how libpmemobj writes (temporal or not, drain or not); keratin's writes
 * are durable on return whatever they say. */
PMEMOBJ_API void *pmemobj_memcpy(PMEMobjpool *pop, void *dest, const void *src, size_t len,
				 unsigned flags)
{
	(void)flags;
	return write_persist(pop, dest, src, 0, len);
}

PMEMOBJ_API void *pmemobj_memmove(PMEMobjpool *pop, void *dest, const void *src, size_t len,
				  unsigned flags)
{
	(void)flags;
	return write_persist(pop, dest, src, 0, len);
}

PMEMOBJ_API void *pmemobj_memset(PMEMobjpool *pop, void *dest, int c, size_t len, unsigned flags)
{
	(void)flags;
	return write_persist(pop, dest, NULL, c, len);
}
