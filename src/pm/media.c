/*
 * media.c - the media-error front end: the platform's bad-block list (and its emulation),
 * emulated poison, salvage of a machine-checked page, and the SIGBUS/SIGSEGV dispatcher
 * that hands each fault to the layer above that owns the faulting address.
 *
 * Nothing here knows what a page holds. The layers above (an object pool: obj/repair.c;
 * a protected region: region.c; keratin-fs: fs_media.c) register a resolver for each
 * mapping they own with kr_media_watch(base, len, fn, ctx) and remove it with
 * kr_media_unwatch(base) before they unmap it.
 *
 * A registration slot moves through these states (install_lock serialises the writers;
 * the handler only reads):
 *
 *   FREE --kr_media_watch--> FILLED --release store of base--> LIVE --kr_media_unwatch--> FREE
 *
 *   FREE    base is NULL: the handler never looks at len, fn, ctx.
 *   FILLED  len, fn, ctx written under install_lock, base still NULL.
 *   LIVE    base published with a release store: a fault at an address inside
 *           [base, base + len), on any thread, calls fn(ctx, sig, siginfo), which returns
 *           true if the access may run again and false to pass the fault on.
 *   The owner unwatches only when no access to the range can still be in flight (it is
 *   about to unmap it), so no resolver runs on a FREE slot's old context.
 *
 * A SIGSEGV in no LIVE range goes to the one resolver set with kr_media_watch_elsewhere, if
 * any (the debug mode's retired micro-buffers).
 * A fault in no LIVE range, or one its resolver passes on, goes to the handler installed
 * before keratin's (or the default action, which kills the process as it would have).
 * The handlers are installed at the first registration, and again whenever the application
 * has installed its own since (which then becomes the one chained to).
 *
 * Everything the handler calls is async-signal-safe in practice (system calls, atomics,
 * memory copies); it allocates nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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
#include "keratin.h"

#define P KR_MEDIA_PAGE

/* Watched ranges (kr_media_watch): enough for 64 pools with their read-only views and 64
 * regions or file systems besides. */
#define MAX_WATCH 192
static struct watch {
	const char *_Atomic base;
	size_t len;
	kr_fault_fn fn;
	void *ctx;
} watches[MAX_WATCH];
static struct sigaction prev_segv, prev_bus;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
/* The resolver of SIGSEGVs outside every watched range (kr_media_watch_elsewhere): ctx is
 * written before fn is published. */
static void *elsewhere_ctx;
static _Atomic kr_fault_fn elsewhere_fn;

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

/* ---------------------------------------------------------------------------------------
 * Emulated poison and the handlers
 * ------------------------------------------------------------------------------------- */
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

static const struct watch *watch_of(const void *addr)
{
	for (int i = 0; i < MAX_WATCH; i++) {
		const char *b = atomic_load_explicit(&watches[i].base, memory_order_acquire);
		if (b && (const char *)addr >= b && (const char *)addr < b + watches[i].len)
			return &watches[i];
	}
	return NULL;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	const struct watch *w = watch_of(si->si_addr);
	kr_fault_fn fn = w ? w->fn : sig == SIGSEGV ? atomic_load(&elsewhere_fn) : NULL;
	if (!fn || !fn(w ? w->ctx : elsewhere_ctx, sig, si, uc))
		chain(sig, si, uc);
	errno = saved_errno;
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

int kr_media_watch(const void *base, size_t len, kr_fault_fn fn, void *ctx)
{
	pthread_mutex_lock(&install_lock);
	int rc = install_handlers();
	int slot = -1;
	for (int i = 0; rc == KR_OK && i < MAX_WATCH && slot < 0; i++)
		if (!atomic_load(&watches[i].base))
			slot = i;
	if (rc == KR_OK && slot < 0)
		rc = kr_err_set(KR_E_MISUSE_STATE, "more than %d mappings watched for media errors", MAX_WATCH);
	if (rc == KR_OK) {
		watches[slot].len = len;
		watches[slot].fn = fn;
		watches[slot].ctx = ctx;
		atomic_store_explicit(&watches[slot].base, base, memory_order_release);
	}
	pthread_mutex_unlock(&install_lock);
	return rc;
}

int kr_media_watch_elsewhere(kr_fault_fn fn, void *ctx)
{
	pthread_mutex_lock(&install_lock);
	int rc = install_handlers();
	if (rc == KR_OK && !atomic_load(&elsewhere_fn)) {
		elsewhere_ctx = ctx;
		atomic_store(&elsewhere_fn, fn);
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
