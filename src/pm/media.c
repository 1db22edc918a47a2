/*
 * media.c - media errors: the platform's bad-block list (and its emulation), emulated
 * poison, the SIGBUS/SIGSEGV handlers, and the page repair they all end in.
 *
 * Design
 *
 *   One routine repairs a lost page, whatever it holds (kr_media_repair_page): a data or
 *   allocator page is rebuilt from parity and the other rows, a parity page is recomputed,
 *   a header, control or lane page is copied from its twin. The result is written with plain
 *   stores and agrees with parity by construction, so writing it twice is harmless.
 *
 *   At open, the platform's list of lost pages is repaired: the kernel's bad blocks of the
 *   device (sysfs, mapped to file offsets with FIEMAP) and, in emulation, PATH.badblocks.
 *
 *   Online, a fault inside a pool arrives as SIGBUS (machine check: BUS_MCEERR_AR/AO) or, for
 *   emulated poison, as SIGSEGV on a page this module made inaccessible. The handler:
 *     1. records the page in the persistent bad-block list (PATH.badblocks), so that a crash
 *        during the repair leads to the same repair at the next open;
 *     2. steps its own thread out of the commit gate (it may have faulted inside a commit;
 *        at the faulting instruction its parity patches and writes are consistent for the
 *        page, see redund.c), takes the repair lock, closes the gate and waits until no
 *        other commit is in flight, so parity is settled;
 *     3. makes the page accessible again, rebuilds it, flushes, fences, reopens the gate;
 *     4. returns: the faulting access runs again and reads correct data.
 *   A fault outside every pool, or one keratin cannot repair, goes to the handler installed
 *   before keratin's (or the default action, which kills the process as it would have).
 *
 *   Protected regions (region.c) resolve their own faults: they watch their mapping here
 *   (kr_media_watch) and the handler hands them every fault inside it.
 *
 *   Debug protection (KERATIN_DEBUG_PROTECT=1): the application reads objects through a
 *   read-only alias of the pool (pmem.c), so a store through a kr_get pointer faults
 *   there. The handler names the object and offset on stderr and passes the fault on,
 *   which by default kills the process where the stray store was made.
 *
 *   Everything the handler calls is async-signal-safe in practice (system calls, atomics,
 *   memory copies); it allocates nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "media.h"
#include "pool.h"

#define P KR_PAGE_SIZE
#define MAX_POOLS 64
#define MAX_POISON 64

/* Open pools, for the handler. Slots are published with release stores. */
static kr_pool *_Atomic registry[MAX_POOLS];

/* Watched ranges (kr_media_watch). A slot is claimed by storing its fields, then published
 * by a release store of base. */
#define MAX_WATCH 64
static struct watch {
	const char *_Atomic base;
	size_t len;
	kr_fault_fn fn;
	void *ctx;
} watches[MAX_WATCH];
static struct sigaction prev_segv, prev_bus;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_flag repair_lock = ATOMIC_FLAG_INIT;

/* ---------------------------------------------------------------------------------------
 * The page repair
 * ------------------------------------------------------------------------------------- */
static void copy_twin(kr_pool *pool, uint64_t off, uint64_t twin)
{
	kr_pm_copy(&pool->pm, pool->pm.base + off, pool->pm.base + twin, P);
}

int kr_media_repair_page(kr_pool *pool, uint64_t off)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	off &= ~(uint64_t)(P - 1);
	uint8_t buf[P];
	switch (kr_pool_page_kind(pool, off)) {
	case KR_PAGE_HEADER:
		copy_twin(pool, off, off == 0 ? h->pool_size - P : 0);
		break;
	case KR_PAGE_CONTROL:
		copy_twin(pool, off, off == h->ctl_off ? h->ctl_replica_off : h->ctl_off);
		break;
	case KR_PAGE_LANE:
		if (!(h->ro_compat & KR_FEAT_RO_LOG_REPLICA))
			return kr_err_set(KR_E_MEDIA, "log page 0x%llx lost and the pool keeps no log "
					  "replica", (unsigned long long)off);
		copy_twin(pool, off, off - h->lanes_off + h->lanes_replica_off);
		break;
	case KR_PAGE_LANE_REPLICA:
		copy_twin(pool, off, off - h->lanes_replica_off + h->lanes_off);
		break;
	case KR_PAGE_ZONE_META:
	case KR_PAGE_DATA:
		if (!(h->ro_compat & KR_FEAT_RO_PARITY))
			return kr_err_set(KR_E_MEDIA, "page 0x%llx lost and the pool keeps no parity",
					  (unsigned long long)off);
		kr_parity_rebuild(&pool->redund.parity, off, P, buf);
		kr_pm_copy(&pool->pm, pool->pm.base + off, buf, P);
		break;
	case KR_PAGE_PARITY:
		kr_parity_recompute(&pool->redund.parity,
				    off - (uint64_t)h->rows * h->row_pages * P, P);
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

/* ---------------------------------------------------------------------------------------
 * The bad-block list: PATH.badblocks, one pool offset per line (decimal or 0x hex)
 * ------------------------------------------------------------------------------------- */
static void badblocks_path(const char *pool_path, char *out, size_t n)
{
	/* No snprintf: this also runs in the signal handler. */
	size_t k = 0;
	for (; pool_path[k] && k + 11 < n; k++)
		out[k] = pool_path[k];
	memcpy(out + k, ".badblocks", 11);
}

/* Appends "0x<hex>\n" with system calls only (signal-safe). */
int kr_media_list_add(const char *pool_path, uint64_t off)
{
	char path[4096 + 16], line[24];
	badblocks_path(pool_path, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	int n = 0;
	line[n++] = '0';
	line[n++] = 'x';
	for (int shift = 60; shift >= 0; shift -= 4)
		line[n++] = "0123456789abcdef"[(off >> shift) & 15];
	line[n++] = '\n';
	int ok = kr_write(fd, line, (size_t)n) == n && kr_fsync(fd) == 0;
	close(fd);
	return ok ? 0 : -1;
}

int kr_badblocks_add(const char *pool_path, uint64_t off)
{
	if (!pool_path)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_badblocks_add: path is NULL");
	if (kr_media_list_add(pool_path, off & ~(uint64_t)(P - 1)) != 0)
		return kr_err_errno(KR_E_IO, "%s.badblocks", pool_path);
	return KR_OK;
}

/* Zone and column of a data-row page, for spotting two lost pages in one column. */
static int page_column(const kr_pool *pool, uint64_t off, uint64_t *col)
{
	const struct kr_pool_hdr *h = &pool->hdr;
	uint64_t row = (uint64_t)h->row_pages * P;
	if (off < h->heap_off || off >= h->heap_off + (uint64_t)h->nzones * h->zone_size)
		return 0;
	uint64_t rel = off - h->heap_off, zoff = rel % h->zone_size;
	if (zoff >= (uint64_t)h->rows * row)
		return 0;
	*col = rel / h->zone_size * h->row_pages + (zoff % row) / P;
	return 1;
}

/* The kernel's list: the badblocks file of the block device under the pool file (sysfs;
 * KERATIN_SYSFS_BADBLOCKS names another file, for tests), "first_sector count" per line in
 * 512-byte sectors of the device, mapped back to file offsets through FIEMAP. Adds the pool
 * offsets of the lost pages to pages[*np..max), advancing *np. A file system without FIEMAP, a
 * device without a badblocks file, or a list that names no block of the pool: nothing to
 * add. KR_E_NOMEM if the list cannot be walked (its pages would go unrepaired). */
static int kernel_badblocks(int fd, uint64_t size, uint64_t *pages, size_t *np, size_t max)
{
	size_t n = *np;
	char path[128];
	const char *fake = getenv("KERATIN_SYSFS_BADBLOCKS");
	struct stat st;
	if (fake && *fake) {
		snprintf(path, sizeof(path), "%s", fake);
	} else {
		if (fstat(fd, &st) != 0)
			return KR_OK;
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/badblocks", major(st.st_dev),
			 minor(st.st_dev));
	}
	FILE *f = fopen(path, "r");
	if (!f)
		return KR_OK;
	enum { NEXT = 256 };
	struct fiemap *fm = kr_calloc(1, sizeof(*fm) + NEXT * sizeof(struct fiemap_extent));
	if (!fm) {
		fclose(f);
		return kr_err_set(KR_E_NOMEM, "%s: no memory to map the bad blocks", path);
	}
	unsigned long long first, count;
	while (n < max && fscanf(f, "%llu %llu", &first, &count) == 2) {
		uint64_t lo = first * 512, hi = (first + count) * 512;
		/* Which file ranges live on device bytes [lo, hi)? Walk the file's extents. */
		for (uint64_t start = 0; start < size && n < max;) {
			memset(fm, 0, sizeof(*fm));
			fm->fm_start = start;
			fm->fm_length = size - start;
			fm->fm_extent_count = NEXT;
			if (ioctl(fd, FS_IOC_FIEMAP, fm) != 0 || fm->fm_mapped_extents == 0)
				break;
			for (uint32_t e = 0; e < fm->fm_mapped_extents && n < max; e++) {
				const struct fiemap_extent *x = &fm->fm_extents[e];
				uint64_t plo = x->fe_physical, phi = x->fe_physical + x->fe_length;
				for (uint64_t b = lo > plo ? lo : plo; b < hi && b < phi && n < max; b += 512)
					pages[n++] = (x->fe_logical + (b - plo)) & ~(uint64_t)(P - 1);
				start = x->fe_logical + x->fe_length;
				if (x->fe_flags & FIEMAP_EXTENT_LAST)
					start = size;
			}
		}
	}
	free(fm);
	fclose(f);
	*np = n;
	return KR_OK;
}

int kr_media_list(const char *path, int fd, uint64_t size, uint64_t *pages, size_t max,
		  size_t *n_out, size_t *from_kernel_out)
{
	char list[4096 + 16], line[128];
	badblocks_path(path, list, sizeof(list));
	*n_out = *from_kernel_out = 0;
	FILE *f = fopen(list, "r");
	if (!f && errno != ENOENT)
		return kr_err_errno(KR_E_IO, "%s", list);
	size_t n = 0;
	int rc = KR_OK;
	while (f && rc == KR_OK && fgets(line, sizeof(line), f)) {
		char *end;
		errno = 0;
		unsigned long long off = strtoull(line, &end, 0);
		if (end == line || errno)
			continue; /* not a number: ignore the line, as the kernel's list would */
		if (off >= size)
			rc = kr_err_set(KR_E_MEDIA, "%s: bad block at 0x%llx is beyond the pool", list, off);
		if (n < max)
			pages[n++] = off & ~(unsigned long long)(P - 1);
	}
	if (f)
		fclose(f);
	size_t from_kernel = n;
	int krc = kernel_badblocks(fd, size, pages, &n, max);
	if (rc == KR_OK)
		rc = krc;
	/* One lost page may be named many times (eight 512-byte sectors, or both lists). */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		int dup = 0;
		for (size_t j = 0; j < m && !dup; j++)
			dup = pages[j] == pages[i];
		if (dup)
			continue;
		if (i >= from_kernel && m < from_kernel)
			from_kernel = m; /* keep "index >= from_kernel: the kernel named it" true */
		pages[m++] = pages[i];
	}
	*n_out = m;
	*from_kernel_out = from_kernel;
	return rc;
}

int kr_media_replace_block(int fd, uint64_t off, const char *path)
{
	if (kr_fallocate_mode(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, P) != 0 ||
	    kr_fallocate(fd, (off_t)off, P) != 0)
		return kr_err_errno(KR_E_MEDIA, "%s: cannot replace the bad block at 0x%llx", path,
				    (unsigned long long)off);
	return KR_OK;
}

int kr_media_clear_list(const char *path)
{
	char list[4096 + 16];
	badblocks_path(path, list, sizeof(list));
	if (unlink(list) != 0 && errno != ENOENT)
		return kr_err_errno(KR_E_IO, "%s: cannot clear the list", list);
	return KR_OK;
}

int kr_media_repair_listed(kr_pool *pool)
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
		rc = kr_media_repair_page(pool, pages[i]);
	}
	/* Every other listed page now holds correct data: the list is cleared, as writing a
	 * poisoned page clears the poison on real hardware (not by a read-only open, whose
	 * repairs live in its private view). */
	if (rc == KR_OK && !kept && n && !pool->pm.readonly)
		rc = kr_media_clear_list(pool->path);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Emulated poison and the handlers
 * ------------------------------------------------------------------------------------- */
static int poisoned_find(kr_pool *pool, uint64_t off)
{
	for (int i = 0; i < MAX_POISON; i++)
		if (atomic_load(&pool->poison[i]) == off + 1)
			return i;
	return -1;
}

int kr_media_claim_slot(_Atomic uint64_t *slots, int n, uint64_t key)
{
	for (int i = 0; i < n; i++) {
		uint64_t expect = 0;
		if (atomic_compare_exchange_strong(&slots[i], &expect, key))
			return i;
	}
	return -1;
}

int kr_media_lose_range(int fd, void *page, uint64_t off, size_t from, size_t len, bool *hidden)
{
	*hidden = false;
	/* The page becomes inaccessible first, then [from, from + len) loses its content
	 * (through the file, since the mapping can no longer be written): no reader can ever see
	 * the lost bytes without faulting, as with real poison. This is fault injection, so it
	 * goes around pmem.c. */
	uint8_t junk[P];
	for (size_t i = 0; i < len; i++)
		junk[i] = (uint8_t)((from + i) * 131 + off / P);
	if (kr_mprotect(page, P, PROT_NONE) != 0)
		return kr_err_errno(KR_E_IO, "mprotect");
	*hidden = true;
	if (kr_pwrite(fd, junk, len, (off_t)(off + from)) != (ssize_t)len)
		return kr_err_errno(KR_E_IO, "pwrite");
	return KR_OK;
}

int kr_media_lose_page(int fd, void *page, uint64_t off, bool *hidden)
{
	return kr_media_lose_range(fd, page, off, 0, P, hidden);
}

size_t kr_media_read_salvage(int fd, void *buf, size_t len, uint64_t off, size_t grain)
{
	/* The kernel's read of a file on persistent memory copies with machine-check recovery
	 * and fails only the pieces that hold poison. */
	size_t lost = 0;
	for (size_t g = 0; g < len; g += grain) {
		size_t n = len - g < grain ? len - g : grain;
		if (pread(fd, (uint8_t *)buf + g, n, (off_t)(off + g)) != (ssize_t)n) {
			memset((uint8_t *)buf + g, 0, n);
			lost++;
		}
	}
	return lost;
}

bool kr_media_salvage_page(int fd, uint64_t off, size_t grain)
{
	/* The page cache's copy of a block the hole punch removes is dropped with its poison. */
	uint8_t buf[P];
	kr_media_read_salvage(fd, buf, P, off, grain);
	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, P) == 0 &&
	       fallocate(fd, 0, (off_t)off, P) == 0 && pwrite(fd, buf, P, (off_t)off) == (ssize_t)P;
}

int kr_inject_poison(kr_pool *pool, uint64_t off)
{
	if (!pool || off >= pool->hdr.pool_size)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_inject_poison: offset beyond the pool");
	int rc = kr_pool_writable(pool, "kr_inject_poison");
	if (rc)
		return rc;
	off &= ~(uint64_t)(P - 1);
	int slot = kr_media_claim_slot(pool->poison, MAX_POISON, off + 1);
	if (slot < 0)
		return kr_err_set(KR_E_MISUSE_STATE, "too many poisoned pages at once");
	/* The platform knows the page is bad before it is: if the pool closes first, open
	 * repairs it. (Listed the other way round, a list that cannot be written would leave
	 * a lost page nobody knows of; listed and then not lost, the page is rewritten with
	 * what it holds.) */
	rc = kr_badblocks_add(pool->path, off);
	if (rc != KR_OK) {
		atomic_store(&pool->poison[slot], 0);
		return rc;
	}
	/* Under the repair lock, so that a fault between the two steps waits for the loss to be
	 * complete instead of repairing a page that is about to lose its content. */
	while (atomic_flag_test_and_set(&repair_lock))
		;
	bool hidden;
	rc = kr_media_lose_page(pool->pm.fd, pool->pm.base + off, off, &hidden);
	atomic_flag_clear(&repair_lock);
	if (!hidden) /* nothing happened: the slot is free again */
		atomic_store(&pool->poison[slot], 0);
	return rc;
}

static kr_pool *pool_of(const void *addr)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		kr_pool *p = atomic_load_explicit(&registry[i], memory_order_acquire);
		if (p && (const char *)addr >= p->pm.base && (const char *)addr < p->pm.base + p->pm.size)
			return p;
	}
	return NULL;
}

static void chain(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *prev = sig == SIGBUS ? &prev_bus : &prev_segv;
	if (prev->sa_flags & SA_SIGINFO) {
		prev->sa_sigaction(sig, si, uc);
	} else if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
		/* Returning re-executes the fault, which now gets the default action: the kernel
		 * does the same for a fault whose signal is ignored. */
		signal(sig, SIG_DFL);
	} else {
		prev->sa_handler(sig);
	}
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static const struct watch *watch_of(const void *addr)
{
	for (int i = 0; i < MAX_WATCH; i++) {
		const char *b = atomic_load_explicit(&watches[i].base, memory_order_acquire);
		if (b && (const char *)addr >= b && (const char *)addr < b + watches[i].len)
			return &watches[i];
	}
	return NULL;
}

/* The pool whose read-only view (debug protection) holds addr, or NULL. */
static kr_pool *pool_of_view(const void *addr)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		kr_pool *p = atomic_load_explicit(&registry[i], memory_order_acquire);
		if (p && p->pm.view != p->pm.base && (const char *)addr >= p->pm.view &&
		    (const char *)addr < p->pm.view + p->pm.size)
			return p;
	}
	return NULL;
}

/* A store through a kr_get pointer under debug protection: one line on stderr naming the
 * object (the last one starting at or before the address) and the offset in it. */
static void report_stray_store(kr_pool *pool, const void *addr)
{
	uint64_t off = (uint64_t)((const char *)addr - pool->pm.view), obj = 0;
	for (uint64_t o = kr_heap_next(&pool->heap, 0); o && o <= off; o = kr_heap_next(&pool->heap, o))
		obj = o;
	char line[512];
	int n;
	const struct kr_obj_hdr *hdr =
		obj ? (const struct kr_obj_hdr *)(pool->pm.base + obj - sizeof(*hdr)) : NULL;
	if (hdr && off < obj + hdr->size)
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
		(void)w; /* nothing better to do on the way to the fault's default action */
	}
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	const struct watch *w = watch_of(si->si_addr);
	if (w) {
		if (!w->fn(w->ctx, sig, si))
			chain(sig, si, uc);
		errno = saved_errno;
		return;
	}
	kr_pool *view_pool = sig == SIGSEGV ? pool_of_view(si->si_addr) : NULL;
	if (view_pool) {
		report_stray_store(view_pool, si->si_addr);
		errno = saved_errno;
		chain(sig, si, uc);
		return;
	}
	kr_pool *pool = pool_of(si->si_addr);
	uint64_t off = pool ? ((uint64_t)((char *)si->si_addr - pool->pm.base) & ~(uint64_t)(P - 1)) : 0;
	int ours = pool && (sig == SIGSEGV ? poisoned_find(pool, off) >= 0
					   : si->si_code == BUS_MCEERR_AR || si->si_code == BUS_MCEERR_AO);
	if (!ours) {
		errno = saved_errno;
		chain(sig, si, uc);
		return;
	}
	if (!pool->pm.readonly) /* a private view repairs only itself */
		kr_media_list_add(pool->path, off); /* step 1: a crash from here on repeats the repair */
	int token = kr_log_suspend();
	while (atomic_flag_test_and_set(&repair_lock))
		;
	int slot = poisoned_find(pool, off);
	if (sig == SIGBUS || slot >= 0) { /* not already repaired by another thread */
		uint64_t t0 = now_ns();
		kr_log_quiesce(&pool->log);
		kr_parity_unlocked = 1; /* the faulting thread may hold this column's lock */
		int ok = mprotect(pool->pm.base + off, P, PROT_READ | PROT_WRITE) == 0 &&
			 kr_media_repair_page(pool, off) == KR_OK;
		kr_parity_unlocked = 0;
		kr_log_resume(&pool->log);
		if (token)
			kr_log_note_fault(off); /* its own commit straddles the repair: fix at exit */
		if (slot >= 0)
			atomic_store(&pool->poison[slot], 0);
		pool->last_repair_ns = now_ns() - t0;
		if (!ok) {
			atomic_flag_clear(&repair_lock);
			kr_pool_fail(pool, KR_E_MEDIA);
			chain(sig, si, uc);
			return;
		}
	}
	atomic_flag_clear(&repair_lock);
	kr_log_unsuspend(token);
	errno = saved_errno;
}

/* The log's after_fault hook: with commits held back, the chunk-record CRCs in the repaired
 * page (patched by XOR, so not idempotent across the repair) and then the parity of its
 * column (a patch may have been counted before or after the rebuild) are recomputed from
 * the now final data. */
static void after_fault(void *ctx, uint64_t page)
{
	kr_pool *pool = ctx;
	struct kr_redund *r = &pool->redund;
	const struct kr_pool_hdr *h = &pool->hdr;
	kr_log_quiesce(&pool->log);
	kr_parity_unlocked = 1;
	uint64_t rec;
	if (kr_redund_in_meta(r, page, &rec))
		for (; rec < page + P && kr_redund_in_meta(r, rec, &rec); rec += sizeof(struct kr_chunk_meta))
			kr_redund_fix_chunk_crc(r, rec);
	uint64_t rel = page - h->heap_off, zoff = rel % h->zone_size, row = (uint64_t)h->row_pages * P;
	if (page >= h->heap_off && rel / h->zone_size < h->nzones && zoff < (uint64_t)(h->rows + 1) * row)
		kr_parity_recompute(&r->parity, page - rel % h->zone_size + zoff % row, P);
	kr_pm_fence(&pool->pm);
	kr_parity_unlocked = 0;
	kr_log_resume(&pool->log);
}

/* (Re)installs the handlers when keratin's is not the current one: first use, or the
 * application installed its own since; what is there now becomes the one to chain to.
 * Called with install_lock held. */
static int install_handlers(void)
{
	int rc = KR_OK;
	struct sigaction sa, cur_segv, cur_bus;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, NULL, &cur_segv) != 0 || sigaction(SIGBUS, NULL, &cur_bus) != 0) {
		rc = kr_err_errno(KR_E_IO, "sigaction");
	} else {
		if (!(cur_segv.sa_flags & SA_SIGINFO) || cur_segv.sa_sigaction != on_fault) {
			prev_segv = cur_segv;
			if (sigaction(SIGSEGV, &sa, NULL) != 0)
				rc = kr_err_errno(KR_E_IO, "sigaction");
		}
		if (!(cur_bus.sa_flags & SA_SIGINFO) || cur_bus.sa_sigaction != on_fault) {
			prev_bus = cur_bus;
			if (sigaction(SIGBUS, &sa, NULL) != 0)
				rc = kr_err_errno(KR_E_IO, "sigaction");
		}
	}
	return rc;
}

int kr_media_register(kr_pool *pool)
{
	pool->log.hooks.after_fault = after_fault;
	pool->log.hooks.fault_ctx = pool;
	pthread_mutex_lock(&install_lock);
	int rc = install_handlers();
	int slot = -1;
	for (int i = 0; rc == KR_OK && i < MAX_POOLS && slot < 0; i++) {
		kr_pool *expect = NULL;
		if (atomic_compare_exchange_strong(&registry[i], &expect, pool))
			slot = i;
	}
	if (rc == KR_OK && slot < 0)
		rc = kr_err_set(KR_E_MISUSE_STATE, "more than %d pools open", MAX_POOLS);
	pthread_mutex_unlock(&install_lock);
	return rc;
}

void kr_media_unregister(kr_pool *pool)
{
	pthread_mutex_lock(&install_lock);
	for (int i = 0; i < MAX_POOLS; i++) {
		kr_pool *expect = pool;
		atomic_compare_exchange_strong(&registry[i], &expect, NULL);
	}
	pthread_mutex_unlock(&install_lock);
}

int kr_media_watch(const void *base, size_t len, kr_fault_fn fn, void *ctx)
{
	pthread_mutex_lock(&install_lock);
	int rc = install_handlers();
	int slot = -1;
	for (int i = 0; rc == KR_OK && i < MAX_WATCH && slot < 0; i++)
		if (!atomic_load(&watches[i].base))
			slot = i;
	if (rc == KR_OK && slot < 0)
		rc = kr_err_set(KR_E_MISUSE_STATE, "more than %d protected regions attached", MAX_WATCH);
	if (rc == KR_OK) {
		watches[slot].len = len;
		watches[slot].fn = fn;
		watches[slot].ctx = ctx;
		atomic_store_explicit(&watches[slot].base, base, memory_order_release);
	}
	pthread_mutex_unlock(&install_lock);
	return rc;
}

void kr_media_unwatch(const void *base)
{
	pthread_mutex_lock(&install_lock);
	for (int i = 0; i < MAX_WATCH; i++)
		if (atomic_load(&watches[i].base) == base)
			atomic_store(&watches[i].base, NULL);
	pthread_mutex_unlock(&install_lock);
}
