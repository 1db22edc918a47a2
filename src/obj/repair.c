/*
 * repair.c - media errors in an object pool: the page repair every path ends in, the
 * repair of the platform's bad-block list at open, emulated poison (kr_inject_poison) and
 * the fault resolver the pool registers with the media front end (src/pm/media.c).
 *
 * Design
 *
 *   One routine repairs a lost page, whatever it holds (kr_pool_repair_page): a data or
 *   allocator page is rebuilt from parity and the other rows, a parity page is recomputed,
 *   a header, control or lane page is copied from its twin. The result is written with plain
 *   stores and agrees with parity by construction, so writing it twice is harmless.
 *
 *   At open, the platform's list of lost pages is repaired: the kernel's bad blocks of the
 *   device and, in emulation, PATH.badblocks (kr_media_list reads both).
 *
 *   Online, a fault inside the pool's mapping reaches pool_fault through the media
 *   front end: SIGBUS (machine check: BUS_MCEERR_AR/AO) or, for emulated poison, SIGSEGV on
 *   a page kr_inject_poison made inaccessible. The resolver:
 *     1. records the page in the persistent bad-block list (PATH.badblocks), so that a crash
 *        during the repair leads to the same repair at the next open;
 *     2. quiesces (quiesce.h): steps its own thread out of the commit gate (it may have
 *        faulted inside a commit; at the faulting instruction its parity patches and writes
 *        are consistent for the page, see redund.c), takes the repair lock, closes the gate
 *        and waits until no other commit is in flight, so parity is settled;
 *     3. makes the page accessible again, rebuilds it, flushes, fences, reopens the gate;
 *     4. returns true: the faulting access runs again and reads correct data.
 *   A fault keratin cannot repair returns false, and the front end passes it on.
 *
 *   Debug protection (KERATIN_DEBUG_PROTECT=1): the application reads objects through a
 *   read-only alias of the pool (pmem.c), so a store through a kr_get pointer faults
 *   there. The view's resolver names the object and offset on stderr and passes the fault
 *   on, which by default kills the process where the stray store was made.
 *
 *   Everything the resolvers call is async-signal-safe in practice (system calls, atomics,
 *   memory copies); they allocate nothing.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "err.h"
#include "fault.h"
#include "geom.h"
#include "media.h"
#include "query.h"
#include "quiesce.h"
#include "repair.h"
#include "stale.h"
#include "tx.h"

#define P KR_PAGE_SIZE
#define MAX_POISON 64
_Static_assert(P == KR_MEDIA_PAGE, "pages are lost and repaired whole");

/* ---------------------------------------------------------------------------------------
 * The page repair
 * ------------------------------------------------------------------------------------- */
/* The parity page at poff recomputed from its column's rows, with the bytes parity reflects
 * for the uncommitted stores of in-place transactions in them (tx.h), flushed. Without the
 * in-flight list (tx.h) parity may have taken such stores: the pool fails (a reopen
 * recomputes it after the undo). */
static int recompute_parity_page(kr_pool *pool, uint64_t poff)
{
	uint8_t buf[P];
	uint8_t *page = (uint8_t *)pool->pm.base + poff;
	kr_parity_recompute_column(&pool->redund.parity, poff);
	memcpy(buf, page, P);
	int rc = kr_tx_inflight_rebuilt(pool, poff, P, buf);
	if (rc == KR_OK && memcmp(buf, page, P)) {
		kr_pm_copy(&pool->pm, page, buf, P);
		kr_pm_flush(&pool->pm, page, P);
	}
	return rc;
}

static void copy_twin(kr_pool *pool, uint64_t off)
{
	kr_pm_copy(&pool->pm, pool->pm.base + off, pool->pm.base + kr_geom_twin(&pool->g, off), P);
}

int kr_pool_repair_page(kr_pool *pool, uint64_t off)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	off &= ~(uint64_t)(P - 1);
	uint8_t buf[P];
	switch (kr_pool_page_kind(pool, off)) {
	case KR_PAGE_LANE:
		if (!(h->ro_compat & KR_FEAT_RO_LOG_REPLICA))
			return kr_err_set(KR_E_MEDIA, "log page 0x%llx lost and the pool keeps no log "
					  "replica", (unsigned long long)off);
		copy_twin(pool, off);
		break;
	case KR_PAGE_HEADER:
	case KR_PAGE_CONTROL:
	case KR_PAGE_LANE_REPLICA:
		copy_twin(pool, off);
		break;
	case KR_PAGE_ZONE_META:
	case KR_PAGE_DATA:
		if (!(h->ro_compat & KR_FEAT_RO_PARITY))
			return kr_err_set(KR_E_MEDIA, "page 0x%llx lost and the pool keeps no parity",
					  (unsigned long long)off);
		if (kr_stale_covers(pool, off, P))
			return kr_err_set(KR_E_MEDIA, "page 0x%llx lost in a column whose parity does not "
					  "follow persisted stores yet (stale map)", (unsigned long long)off);
		kr_parity_rebuild(&pool->redund.parity, off, P, buf);
		if (kr_tx_inflight_rebuilt(pool, off, P, buf) != KR_OK)
			return kr_errcode();
		kr_pm_copy(&pool->pm, pool->pm.base + off, buf, P);
		break;
	case KR_PAGE_PARITY:
		if (recompute_parity_page(pool, off) != KR_OK)
			return kr_errcode();
		break;
	case KR_PAGE_UNUSED:
		kr_pm_set(&pool->pm, pool->pm.base + off, 0, P);
		break;
	default:
		return kr_errcode();
	}
	kr_pm_flush(&pool->pm, pool->pm.base + off, P);
	pool->media_repairs++;
	return kr_pm_fence(&pool->pm);
}

/* The column of a data-row page, for spotting two lost pages in one column. */
static int page_column(const kr_pool *pool, uint64_t off, uint64_t *col)
{
	if (!kr_geom_in_data(&pool->g, off))
		return 0;
	*col = kr_geom_column(&pool->g, off);
	return 1;
}

/* ---------------------------------------------------------------------------------------
 * The platform's list, at open
 * ------------------------------------------------------------------------------------- */
int kr_pool_repair_listed(kr_pool *pool)
{
	uint64_t pages[256];
	size_t n, from_kernel;
	int rc = kr_media_list(pool->path, pool->pm.fd, pool->hdr.pool_size, pages,
			       sizeof(pages) / sizeof(pages[0]), &n, &from_kernel);
	/* Two lost data pages in one column cannot be rebuilt from each other: leave them (their
	 * objects fail their checksums) and keep the list, rather than write guesses. */
	int kept = 0;
	for (size_t i = 0; rc == KR_OK && i < n; i++) {
		uint64_t ci, cj;
		int clash = 0;
		for (size_t j = 0; j < n && page_column(pool, pages[i], &ci); j++)
			clash |= j != i && page_column(pool, pages[j], &cj) && ci == cj;
		if (clash) {
			kept = 1;
			continue;
		}
		/* A block the kernel reports stays poisoned: give the file a new one before
		 * writing the repaired content. */
		if (i >= from_kernel && !pool->pm.readonly &&
		    (rc = kr_media_replace_block(pool->pm.fd, pages[i], pool->path)) != KR_OK)
			break;
		rc = kr_pool_repair_page(pool, pages[i]);
	}
	/* Every other listed page now holds correct data: the list is cleared, as writing a
	 * poisoned page clears the poison on real hardware (not by a read-only open, whose
	 * repairs live in its private view). */
	if (rc == KR_OK && !kept && n && !pool->pm.readonly)
		rc = kr_media_clear_list(pool->path);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Emulated poison and the resolvers
 * ------------------------------------------------------------------------------------- */
/* pool->poison: the pages kr_inject_poison has lost, offset + 1 each (0 = free slot). */
struct kr_poison {
	_Atomic uint64_t slot[MAX_POISON];
};

int kr_poison_new(kr_pool *pool)
{
	if (!(pool->poison = kr_calloc(1, sizeof(*pool->poison))))
		return kr_err_set(KR_E_NOMEM, "poison list");
	return KR_OK;
}

void kr_poison_free(kr_pool *pool)
{
	free(pool->poison);
	pool->poison = NULL;
}

static int poisoned_find(kr_pool *pool, uint64_t off)
{
	for (int i = 0; i < MAX_POISON; i++)
		if (atomic_load(&pool->poison->slot[i]) == off + 1)
			return i;
	return -1;
}

int kr_inject_poison(kr_pool *pool, uint64_t off)
{
	if (!pool || off >= pool->hdr.pool_size)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_inject_poison: offset beyond the pool");
	int rc = kr_pool_writable(pool, "kr_inject_poison");
	if (rc)
		return rc;
	off &= ~(uint64_t)(P - 1);
	int slot = kr_media_claim_slot(pool->poison->slot, MAX_POISON, off + 1);
	if (slot < 0)
		return kr_err_set(KR_E_MISUSE_STATE, "too many poisoned pages at once");
	/* The platform knows the page is bad before it is: if the pool closes first, open
	 * repairs it. (Listed the other way round, a list that cannot be written would leave
	 * a lost page nobody knows of; listed and then not lost, the page is rewritten with
	 * what it holds.) */
	rc = kr_badblocks_add(pool->path, off);
	if (rc != KR_OK) {
		atomic_store(&pool->poison->slot[slot], 0);
		return rc;
	}
	/* Under the repair lock, so that a fault between the two steps waits for the loss to be
	 * complete instead of repairing a page that is about to lose its content. */
	struct kr_quiesce q;
	kr_quiesce_begin(&q, &pool->log);
	bool hidden;
	rc = kr_media_lose_page(pool->pm.fd, pool->pm.base + off, off, &hidden);
	kr_quiesce_end(&q);
	if (!hidden) /* nothing happened: the slot is free again */
		atomic_store(&pool->poison->slot[slot], 0);
	return rc;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A store through a kr_get pointer under debug protection: one line on stderr naming the
 * object whose block holds the address and the offset in it. (A read or write of a freed
 * object's pages, which the debug mode also makes fault, is named by debug.c instead.) */
static bool stray_store(void *ctx, int sig, const siginfo_t *si, const void *ucontext)
{
	kr_pool *pool = ctx;
	const void *addr = si->si_addr;
	if (sig != SIGSEGV || kr_debug_fault(pool, addr, ucontext))
		return false;
	uint64_t off = (uint64_t)((const char *)addr - pool->pm.view), obj = 0;
	struct kr_block b;
	if (kr_heap_owner(&pool->heap, off, &b))
		obj = b.off + sizeof(struct kr_obj_hdr);
	char line[512];
	int n;
	const struct kr_obj_hdr *hdr =
		obj ? (const struct kr_obj_hdr *)(pool->pm.base + obj - sizeof(*hdr)) : NULL;
	if (hdr && off >= obj && off < obj + hdr->size)
		n = snprintf(line, sizeof(line),
			     "keratin: stray store to object 0x%llx + %llu (of %llu bytes) in %s at %p: "
			     "objects change only through kr_tx_add/kr_tx_open or kr_update\n",
			     (unsigned long long)obj, (unsigned long long)(off - obj),
			     (unsigned long long)hdr->size, pool->path, addr);
	else
		n = snprintf(line, sizeof(line),
			     "keratin: stray store to %s + 0x%llx (no object there) at %p\n", pool->path,
			     (unsigned long long)off, addr);
	if (n > 0) {
		ssize_t w = write(2, line, strnlen(line, sizeof(line)));
		(void)w; /* nothing better to do on the way to the default action */
	}
	return false; /* on to the fault's default action, where the store was made */
}

static bool pool_fault(void *ctx, int sig, const siginfo_t *si, const void *ucontext)
{
	(void)ucontext;
	kr_pool *pool = ctx;
	uint64_t off = (uint64_t)((char *)si->si_addr - pool->pm.base) & ~(uint64_t)(P - 1);
	int ours = sig == SIGSEGV ? poisoned_find(pool, off) >= 0
				  : si->si_code == BUS_MCEERR_AR || si->si_code == BUS_MCEERR_AO;
	if (!ours)
		return false;
	if (!pool->pm.readonly) /* a private view repairs only itself */
		kr_media_list_add(pool->path, off); /* step 1: a crash from here on repeats the repair */
	struct kr_quiesce q;
	kr_quiesce_begin(&q, &pool->log);
	int slot = poisoned_find(pool, off);
	if (sig == SIGBUS || slot >= 0) { /* not already repaired by another thread */
		uint64_t t0 = now_ns();
		struct kr_pm_signal_state sig_pm;
		kr_pm_signal_enter(&sig_pm); /* the faulting code may be inside a flush list */
		kr_quiesce_stop(&q); /* the faulting thread may hold this column's lock */
		int ok = mprotect(pool->pm.base + off, P, PROT_READ | PROT_WRITE) == 0 &&
			 kr_pool_repair_page(pool, off) == KR_OK;
		kr_quiesce_restart(&q);
		kr_pm_signal_leave(&sig_pm);
		if (q.token)
			kr_log_note_fault(off); /* its own commit straddles the repair: fix at exit */
		if (slot >= 0)
			atomic_store(&pool->poison->slot[slot], 0);
		pool->last_repair_ns = now_ns() - t0;
		if (!ok) {
			kr_quiesce_abandon(&q);
			kr_pool_fail(pool, KR_E_MEDIA);
			return false;
		}
	}
	kr_quiesce_end(&q);
	return true;
}

/* The log's after_fault hook: with commits held back, the chunk-record CRCs in the repaired
 * page (patched by XOR, so not idempotent across the repair) and then the parity of its
 * column (a patch may have been counted before or after the rebuild) are recomputed from
 * the now final data. */
static void after_fault(void *ctx, uint64_t page)
{
	kr_pool *pool = ctx;
	struct kr_redund *r = &pool->redund;
	struct kr_quiesce q;
	kr_quiesce_hold(&q, &pool->log);
	uint64_t rec;
	if (kr_redund_in_meta(r, page, &rec))
		for (; rec < page + P && kr_redund_in_meta(r, rec, &rec); rec += sizeof(struct kr_chunk_meta))
			kr_redund_fix_chunk_crc(r, rec);
	if (kr_geom_in_heap(&pool->g, page) &&
	    recompute_parity_page(pool, kr_geom_parity_of(&pool->g, page)) != KR_OK)
		kr_pool_fail(pool, KR_E_MEDIA);
	kr_pm_fence(&pool->pm);
	kr_quiesce_release(&q);
}

int kr_pool_media_attach(kr_pool *pool)
{
	pool->log.hooks.after_fault = after_fault;
	pool->log.hooks.fault_ctx = pool;
	int rc = kr_media_watch(pool->pm.base, pool->pm.size, pool_fault, pool);
	if (rc == KR_OK && pool->pm.view != pool->pm.base &&
	    (rc = kr_media_watch(pool->pm.view, pool->pm.size, stray_store, pool)) != KR_OK)
		kr_media_unwatch(pool->pm.base);
	return rc;
}

void kr_pool_media_detach(kr_pool *pool)
{
	kr_media_unwatch(pool->pm.base);
	if (pool->pm.view != pool->pm.base)
		kr_media_unwatch(pool->pm.view);
}
