/*
 * debug.c - keratin's debug mode: the application's misuses of the object API that the API
 * cannot refuse by itself, caught where they happen and named with the object they hit.
 *
 * The mode is on for a pool opened or created with KR_OPEN_DEBUG or with
 * KERATIN_DEBUG_PROTECT=1 in the environment. It starts with the read-only view (pmem.c,
 * media.c: a store through a kr_get pointer faults) and adds, here:
 *
 *   1. Micro-buffers used after their transaction ended. Each micro-buffer gets pages of
 *      its own (mmap); when its transaction ends the pages become PROT_NONE instead of
 *      being freed, and stay so while the buffer is among the last KR_DEBUG_MBUF_QUARANTINE
 *      retired ones. A late read or write faults at the instruction that made it; the
 *      fault handler finds the buffer and names its object and the offset. A protection
 *      fault is exact where a check at the next transaction (a canary, a generation) would
 *      only see a late write that changed a checked byte, and only later, far from the
 *      store. A buffer pushed out of the quarantine is unmapped: an access after that
 *      still faults (unless the address was reused) but is no longer named.
 *   2. One object open for write in two live transactions. keratin does not isolate
 *      concurrent transactions (keratin.h), so two that change one object both log it and
 *      the later commit silently wins: the same bug as pmsan's rule 5. Every existing object
 *      a transaction opens for write or frees is claimed in a per-pool table; a claim of an
 *      object another live transaction holds fails with KR_E_MISUSE_SHARED and one line on
 *      stderr. Claims go when their transaction ends.
 *   3. Reads of freed objects. A free, once committed, is recorded (the last FREED_RING of
 *      them) and the view pages wholly inside the freed block stop being readable; the heap
 *      keeps the last KR_HEAP_QUARANTINE freed blocks from reuse (heap.c), so a stale oid
 *      keeps naming a freed object and a stale pointer keeps faulting for a while. An
 *      access by oid (kr_get, kr_tx_get, kr_tx_open, ...) fails with KR_E_MISUSE_FREED as
 *      always and is reported; a read through a kept pointer faults where the block has
 *      whole pages (objects of 4 KiB and more), and is reported by the fault handler.
 *      Smaller blocks share their pages with live objects, so a read of a small freed
 *      object through an old pointer is not seen.
 *
 *   Report lines, one per finding, on stderr (pmsan's format where one fits):
 *     keratin: debug (stale-buffer): write to the micro-buffer of object 0x... + N ...
 *     keratin: debug (write-conflict): object 0x... opened for write by two ...
 *     keratin: debug (use-after-free): read of object 0x... + N ... after it was freed
 *   The crash-state mode (the fourth check) lives in crashstate.c.
 *
 *   The fault-handler paths allocate nothing and call only write(2) and snprintf.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "debug.h"
#include "err.h"
#include "fault.h"
#include "grow.h"
#include "media.h"
#include "pool_state.h"

#define PAGE 4096u
#define FREED_RING 256

struct freed_obj {
	kr_oid oid;
	uint64_t size;          /* payload bytes */
	uint64_t off, bytes;    /* the block, header included */
};

struct claim {
	kr_oid oid;
	const void *tx;
	unsigned long thread;
};

struct kr_debug {
	pthread_mutex_t lock;
	struct claim *claims;
	uint32_t nclaims, cap;
	struct freed_obj freed[FREED_RING]; /* ring, written under lock, read by the handler */
	_Atomic uint32_t nfreed;            /* entries ever written */
};

static bool retired_fault(void *ctx, int sig, const siginfo_t *si, const void *ucontext);

int kr_debug_new(struct kr_debug **out)
{
	int rc = kr_media_watch_elsewhere(retired_fault, NULL);
	if (rc != KR_OK)
		return rc;
	struct kr_debug *d = kr_calloc(1, sizeof(*d));
	if (!d)
		return kr_err_set(KR_E_NOMEM, "debug state");
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return KR_OK;
}

void kr_debug_free(struct kr_debug *d)
{
	if (!d)
		return;
	pthread_mutex_destroy(&d->lock);
	free(d->claims);
	free(d);
}

static void say(const char *line)
{
	ssize_t w = write(2, line, strnlen(line, 512));
	(void)w; /* a report that cannot be written has nowhere else to go */
}

/* Whether the faulting access was a write (x86-64 page-fault error code bit 1). */
static int fault_is_write(const void *ucontext)
{
#if defined(__x86_64__)
	const ucontext_t *uc = ucontext;
	return uc && (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
	(void)ucontext;
	return 1;
#endif
}

/* ---------------------------------------------------------------------------------------
 * 1. Micro-buffers
 * ------------------------------------------------------------------------------------- */
static struct retired {
	char *_Atomic base; /* published last; NULL while the slot changes */
	size_t len;
	kr_oid oid;
	uint64_t size;
} retired[KR_DEBUG_MBUF_QUARANTINE];
static unsigned retired_next;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t pages_of(size_t bytes) { return (bytes + PAGE - 1) / PAGE * PAGE; }

void *kr_debug_mbuf_alloc(size_t bytes, int zero)
{
	(void)zero; /* fresh anonymous pages are zero */
	void *p = kr_mmap(NULL, pages_of(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void kr_debug_mbuf_retire(void *buf, size_t bytes, kr_oid oid, uint64_t size)
{
	size_t len = pages_of(bytes);
	/* The memory goes back to the system; the addresses stay reserved, as a trap. */
	if (madvise(buf, len, MADV_DONTNEED) != 0 || mprotect(buf, len, PROT_NONE) != 0) {
		munmap(buf, len);
		return;
	}
	pthread_mutex_lock(&retired_lock);
	struct retired *r = &retired[retired_next++ % KR_DEBUG_MBUF_QUARANTINE];
	char *old = atomic_exchange(&r->base, NULL);
	if (old)
		munmap(old, r->len);
	r->len = len;
	r->oid = oid;
	r->size = size;
	atomic_store_explicit(&r->base, buf, memory_order_release);
	pthread_mutex_unlock(&retired_lock);
}

static int report_retired(const char *a, int write)
{
	for (int i = 0; i < KR_DEBUG_MBUF_QUARANTINE; i++) {
		const char *b = atomic_load_explicit(&retired[i].base, memory_order_acquire);
		if (!b || a < b || a >= b + retired[i].len)
			continue;
		char line[512];
		uint64_t off = (uint64_t)(a - b);
		if (off < retired[i].size)
			snprintf(line, sizeof(line),
				 "keratin: debug (stale-buffer): %s the micro-buffer of object 0x%llx + %llu "
				 "(of %llu bytes) after its transaction ended, at %p: the pointer from "
				 "kr_tx_add/kr_tx_open/kr_tx_get is valid only until commit or abort\n",
				 write ? "write to" : "read of", (unsigned long long)retired[i].oid,
				 (unsigned long long)off, (unsigned long long)retired[i].size, (const void *)a);
		else
			snprintf(line, sizeof(line),
				 "keratin: debug (stale-buffer): %s byte %llu past the micro-buffer of "
				 "object 0x%llx (of %llu bytes) after its transaction ended, at %p\n",
				 write ? "write to" : "read of", (unsigned long long)(off - retired[i].size),
				 (unsigned long long)retired[i].oid, (unsigned long long)retired[i].size,
				 (const void *)a);
		say(line);
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * 2. Objects open for write
 * ------------------------------------------------------------------------------------- */
int kr_debug_claim(kr_pool *pool, kr_oid oid, const void *tx)
{
	struct kr_debug *d = pool->debug;
	unsigned long self = (unsigned long)pthread_self();
	pthread_mutex_lock(&d->lock);
	for (uint32_t i = 0; i < d->nclaims; i++) {
		const struct claim *c = &d->claims[i];
		if (c->oid != oid)
			continue;
		if (c->tx == tx) {
			pthread_mutex_unlock(&d->lock);
			return KR_OK;
		}
		unsigned long other = c->thread;
		pthread_mutex_unlock(&d->lock);
		char line[512];
		snprintf(line, sizeof(line),
			 "keratin: debug (write-conflict): object 0x%llx in %s opened for write by two "
			 "concurrent transactions (the other one began on thread %#lx): the later "
			 "commit would overwrite the earlier one's change\n",
			 (unsigned long long)oid, pool->path, other);
		say(line);
		return kr_err_set(KR_E_MISUSE_SHARED,
				  "object 0x%llx is open for write in another live transaction "
				  "(thread %#lx); serialise the two",
				  (unsigned long long)oid, other);
	}
	int rc = KR_OK;
	if (KR_GROW(d->claims, d->cap, d->nclaims + 1u, 16))
		rc = kr_err_set(KR_E_NOMEM, "debug claim table");
	else
		d->claims[d->nclaims++] = (struct claim){oid, tx, self};
	pthread_mutex_unlock(&d->lock);
	return rc;
}

void kr_debug_release_all(kr_pool *pool, const void *tx)
{
	struct kr_debug *d = pool->debug;
	pthread_mutex_lock(&d->lock);
	uint32_t k = 0;
	for (uint32_t i = 0; i < d->nclaims; i++)
		if (d->claims[i].tx != tx)
			d->claims[k++] = d->claims[i];
	d->nclaims = k;
	pthread_mutex_unlock(&d->lock);
}

/* ---------------------------------------------------------------------------------------
 * 3. Freed objects
 * ------------------------------------------------------------------------------------- */
/* The whole pages of [off, off + bytes): *lo, *hi (empty if *lo >= *hi). */
static void whole_pages(uint64_t off, uint64_t bytes, uint64_t *lo, uint64_t *hi)
{
	*lo = (off + PAGE - 1) / PAGE * PAGE;
	*hi = (off + bytes) / PAGE * PAGE;
}

void kr_debug_freed(kr_pool *pool, const struct kr_block *b, kr_oid oid, uint64_t size)
{
	struct kr_debug *d = pool->debug;
	pthread_mutex_lock(&d->lock);
	uint32_t n = atomic_load_explicit(&d->nfreed, memory_order_relaxed);
	d->freed[n % FREED_RING] = (struct freed_obj){oid, size, b->off, b->bytes};
	atomic_store_explicit(&d->nfreed, n + 1, memory_order_release);
	pthread_mutex_unlock(&d->lock);
	uint64_t lo, hi;
	whole_pages(b->off, b->bytes, &lo, &hi);
	if (lo < hi)
		mprotect(pool->pm.view + lo, hi - lo, PROT_NONE); /* best effort: debugging aid */
}

void kr_debug_unfreed(char *view, uint64_t off, uint64_t bytes)
{
	uint64_t lo, hi;
	whole_pages(off, bytes, &lo, &hi);
	if (lo < hi)
		mprotect(view + lo, hi - lo, PROT_READ);
}

/* The most recent freed entry whose block holds pool offset off, or NULL. */
static const struct freed_obj *freed_at(const struct kr_debug *d, uint64_t off)
{
	uint32_t n = atomic_load_explicit(&d->nfreed, memory_order_acquire);
	for (uint32_t k = 0; k < n && k < FREED_RING; k++) {
		const struct freed_obj *f = &d->freed[(n - 1 - k) % FREED_RING];
		if (off >= f->off && off < f->off + f->bytes)
			return f;
	}
	return NULL;
}

static void report_freed(kr_pool *pool, const struct freed_obj *f, uint64_t off, int write,
			 const void *addr)
{
	char line[512];
	if (off >= f->oid && off < f->oid + f->size)
		snprintf(line, sizeof(line),
			 "keratin: debug (use-after-free): %s object 0x%llx + %llu (of %llu bytes) in %s "
			 "after it was freed, at %p\n",
			 write ? "write to" : "read of", (unsigned long long)f->oid,
			 (unsigned long long)(off - f->oid), (unsigned long long)f->size, pool->path, addr);
	else
		snprintf(line, sizeof(line),
			 "keratin: debug (use-after-free): %s the header of object 0x%llx (of %llu "
			 "bytes) in %s after it was freed, at %p\n",
			 write ? "write to" : "read of", (unsigned long long)f->oid,
			 (unsigned long long)f->size, pool->path, addr);
	say(line);
}

void kr_debug_freed_access(kr_pool *pool, kr_oid oid)
{
	const struct freed_obj *f = freed_at(pool->debug, oid);
	if (!f || f->oid != oid)
		return; /* never allocated, or freed long ago: the error code says enough */
	char line[512];
	snprintf(line, sizeof(line),
		 "keratin: debug (use-after-free): access to object 0x%llx (of %llu bytes) in %s "
		 "by its oid after it was freed\n",
		 (unsigned long long)oid, (unsigned long long)f->size, pool->path);
	say(line);
}

/* media.c's resolver of faults outside every watched mapping: a retired micro-buffer's
 * pages are a mapping of their own. Reports, then passes the fault on. */
static bool retired_fault(void *ctx, int sig, const siginfo_t *si, const void *ucontext)
{
	(void)ctx;
	(void)sig;
	report_retired(si->si_addr, fault_is_write(ucontext));
	return false;
}

int kr_debug_fault(kr_pool *view_pool, const void *addr, const void *ucontext)
{
	int write = fault_is_write(ucontext);
	if (!view_pool->debug)
		return 0;
	uint64_t off = (uint64_t)((const char *)addr - view_pool->pm.view);
	const struct freed_obj *f = freed_at(view_pool->debug, off);
	uint64_t lo, hi;
	if (f)
		whole_pages(f->off, f->bytes, &lo, &hi);
	if (!f || off < lo || off >= hi)
		return 0; /* a page of a live object: a stray store */
	report_freed(view_pool, f, off, write, addr);
	return 1;
}
