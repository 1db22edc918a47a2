/*
 * track.c - a dirty-page tracker for a MAP_SHARED file mapping, in user space, on stock
 * Linux (6.7 or later).
 *
 * The job
 *
 *   Lazy redundancy (Vilamb) keeps parity and checksums out of the store path: a background
 *   pass asks every so often which pages were written since it last asked, and recomputes
 *   redundancy for those pages only. The paper read and cleared the hardware dirty bits
 *   with a kernel patch; this file gets the same answer from stock kernel interfaces.
 *
 * The design
 *
 *   - userfaultfd with UFFD_FEATURE_WP_ASYNC. The range is registered for write-protect
 *     and armed with UFFDIO_WRITEPROTECT. With the async feature, the first store to an
 *     armed page does not stop the thread and queues no message: the kernel just clears the
 *     page's uffd-wp bit and lets the store go on (one in-kernel minor fault, ~1 us on
 *     tmpfs). A cleared bit is our "dirty bit". No signal handler, no helper thread, and
 *     kernel-mode stores (read(2) into the range) are recorded too.
 *
 *   - PAGEMAP_SCAN with PM_SCAN_WP_MATCHING. One ioctl on /proc/self/pagemap walks the
 *     range, reports the pages whose uffd-wp bit is clear (category PAGE_IS_WRITTEN) and
 *     sets the bit again, for each page table under its page-table lock, with the TLB
 *     flushed before the lock is dropped. Report and re-arm are therefore one atomic step per
 *     page: a store that races with the harvest either happened before the page was looked
 *     at (it is reported now) or faults again afterwards (it is reported next time). The
 *     paper needed a persistent "shadow" of the dirty bits exactly because its read and its
 *     clear were two calls; here there is no window between them. PM_SCAN_CHECK_WPASYNC
 *     makes the call fail instead of silently reporting nothing if part of the range is not
 *     async-WP registered (for instance after someone closed the userfaultfd).
 *     We use exactly the category_mask = return_mask = PAGE_IS_WRITTEN form: it is the
 *     kernel's fast path, and the one that has always treated an empty PTE as written.
 *
 *   - UFFD_FEATURE_WP_UNPOPULATED (when offered) and the PTE-marker path. A page-table entry
 *     can disappear while the data stays: reclaim, MADV_DONTNEED on a shared mapping (the
 *     page stays in the page cache). Were that to forget "written", redundancy would go
 *     silently stale. The kernel keeps a uffd-wp PTE marker for armed pages and counts an
 *     empty entry as written; older kernels and the generic scan path got this wrong, so
 *     kr_track_attach proves it on this kernel with a self-test: write some pages (each
 *     one's first byte written back with its own value, so the user's data is unchanged),
 *     drop their PTEs with MADV_DONTNEED, and check that a harvest still reports exactly
 *     those pages. Consequence for callers: a page may also be reported after its PTE was
 *     dropped without a write (see the test); extra reports cost a recomputation, never
 *     correctness. A clean armed page whose PTE is dropped keeps its marker and stays clean.
 *
 *   - 4 KiB granularity: the range is set MADV_NOHUGEPAGE, because a write anywhere in a
 *     transparent huge page would report all 512 of its pages.
 *
 * What is NOT tracked (the redundancy would go silently stale; callers must not do these)
 *
 *   - stores through another mapping of the same file (this one or another process's);
 *   - write(2)/pwrite(2)/fallocate/truncate on the file;
 *   - stores by a forked child: the registration is not inherited (no EVENT_FORK);
 *   - anything after munmap/mremap of the range or after the userfaultfd is closed
 *     (kr_track_harvest then fails with KR_E_IO, thanks to PM_SCAN_CHECK_WPASYNC).
 *
 * Older kernels (no WP_ASYNC or PAGEMAP_SCAN): attach fails with KR_E_IO and a message
 * naming the missing feature; the caller may then attach again with KR_TRACK_FLAG_MPROTECT,
 * the classic fallback (see track_attach_mprotect), which needs its SIGSEGV handler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/fs.h>
#include <linux/userfaultfd.h>

#include "err.h"
#include "fault.h"
#include "track.h"

/* UAPI values that older userspace headers (Debian 12's among them) do not define. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1ULL << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1ULL << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif

#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING (1ULL << 0)
#define PM_SCAN_CHECK_WPASYNC (1ULL << 1)
#define PAGE_IS_WRITTEN (1ULL << 1)
#endif

/* Pages the attach self-test uses (the even ones are written); fewer if the range is
 * smaller. */
#define TRACK_SELFTEST_PAGES 8

static void track_reset(struct kr_track *t)
{
	memset(t, 0, sizeof(*t));
	t->uffd = -1;
	t->pagemap_fd = -1;
	atomic_flag_clear(&t->lock);
}

/* Opens a userfaultfd and does the API handshake asking for `want` (the features this
 * kernel offers among them). UFFD_USER_MODE_ONLY lets an unprivileged process use it with
 * vm.unprivileged_userfaultfd=0; kernel-mode stores are still recorded by async WP. */
static int track_uffd_open(uint64_t want, uint64_t *got)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0 && errno == EINVAL) /* kernels before 5.11 know no USER_MODE_ONLY */
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return kr_err_errno(KR_E_IO, "track: userfaultfd() unavailable");

	struct uffdio_api api = {.api = UFFD_API, .features = want};
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int rc = kr_err_errno(KR_E_IO, "track: UFFDIO_API refused features 0x%" PRIx64,
				      (uint64_t)want);
		close(fd);
		return rc;
	}
	*got = api.features;
	return fd;
}

/* The range must be one or more read/write MAP_SHARED mappings without gaps: the
 * self-test's MADV_DONTNEED would throw away data in a private mapping. */
static int track_check_shared(uintptr_t start, uintptr_t end)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return kr_err_errno(KR_E_IO, "track: cannot read /proc/self/maps");

	uintptr_t covered = start;
	char line[512];
	int rc = KR_OK;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= covered || lo >= end)
			continue;
		if (lo > covered) {
			rc = kr_err_set(KR_E_MISUSE_ARG, "track: range has an unmapped hole at %#lx",
					(unsigned long)covered);
			break;
		}
		if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 's') {
			rc = kr_err_set(KR_E_MISUSE_ARG,
					"track: range is not a read/write MAP_SHARED mapping (%s at %#lx)",
					perms, lo);
			break;
		}
		covered = hi;
		if (covered >= end)
			break;
	}
	fclose(f);
	if (rc == KR_OK && covered < end)
		rc = kr_err_set(KR_E_MISUSE_ARG, "track: range is not fully mapped");
	return rc;
}

/* Write-protects (arms) the whole range: every page becomes clean. */
static int track_arm(struct kr_track *t)
{
	struct uffdio_writeprotect wp = {
		.range = {.start = (uintptr_t)t->base, .len = t->len},
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	if (ioctl(t->uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
		return kr_err_errno(KR_E_IO, "track: UFFDIO_WRITEPROTECT failed");
	return KR_OK;
}

/* One PAGEMAP_SCAN over [start, end): reports written pages into t->vec and re-arms them.
 * Returns the number of regions filled (or a negative error); *walk_end is where the
 * kernel stopped (== end unless the output filled or max_pages was reached). */
static int track_scan(struct kr_track *t, uint64_t start, uint64_t end, uint64_t max_pages,
		      uint64_t *walk_end)
{
	struct pm_scan_arg arg = {
		.size = sizeof(arg),
		.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
		.start = start,
		.end = end,
		.vec = (uintptr_t)t->vec,
		.vec_len = t->vec_len,
		.max_pages = max_pages,
		.category_mask = PAGE_IS_WRITTEN,
		.return_mask = PAGE_IS_WRITTEN,
	};
	int r = ioctl(t->pagemap_fd, PAGEMAP_SCAN, &arg);
	if (r < 0)
		return kr_err_errno(KR_E_IO, "track: PAGEMAP_SCAN failed%s",
				    errno == ENOTTY ? " (kernel older than 6.7?)"
				    : errno == EPERM ? " (range no longer async-WP registered)"
						     : "");
	*walk_end = arg.walk_end;
	return r;
}

/* Makes room for `regions` output regions (a harvest of max pages needs at most max). */
static int track_vec_reserve(struct kr_track *t, size_t regions)
{
	if (regions <= t->vec_len)
		return KR_OK;
	void *v = kr_realloc(t->vec, regions * sizeof(struct page_region));
	if (!v)
		return kr_err_set(KR_E_NOMEM, "track: no memory for %zu scan regions", regions);
	t->vec = v;
	t->vec_len = regions;
	return KR_OK;
}

/* Proves the PTE-marker path on this kernel (see the top of the file). Runs after arming;
 * the caller re-arms the whole range afterwards. */
static int track_selftest(struct kr_track *t)
{
	size_t npages = t->len / t->page_size;
	size_t ntest = npages < TRACK_SELFTEST_PAGES ? npages : TRACK_SELFTEST_PAGES;
	uint64_t written = 0; /* bit i: test page i was written */

	/* A store of the byte already there is still a store: it clears the uffd-wp bit. */
	for (size_t i = 0; i < ntest; i += 2) {
		volatile uint8_t *p = t->base + i * t->page_size;
		*p = *p;
		written |= 1ULL << i;
	}
	if (madvise(t->base, ntest * t->page_size, MADV_DONTNEED) < 0)
		return kr_err_errno(KR_E_IO, "track: self-test MADV_DONTNEED failed");

	uint64_t end = (uintptr_t)t->base + ntest * t->page_size, walk_end;
	int rc = track_vec_reserve(t, ntest);
	if (rc != KR_OK)
		return rc;
	int nr = track_scan(t, (uintptr_t)t->base, end, 0, &walk_end);
	if (nr < 0)
		return nr;

	uint64_t seen = 0;
	const struct page_region *v = t->vec;
	for (int r = 0; r < nr; r++)
		for (uint64_t a = v[r].start; a < v[r].end; a += t->page_size)
			seen |= 1ULL << ((a - (uintptr_t)t->base) / t->page_size);
	if (walk_end != end || seen != written)
		return kr_err_set(KR_E_IO,
				  "track: self-test failed: written pages whose PTE was dropped "
				  "are not reported correctly (expected mask %#" PRIx64 ", got %#" PRIx64
				  "); this kernel lacks working uffd-wp PTE markers "
				  "(CONFIG_PTE_MARKER_UFFD_WP) or PAGE_IS_WRITTEN for unpopulated PTEs",
				  written, seen);
	return KR_OK;
}

/* The fallback for kernels without async write-protect: every page starts read-only, the
 * first store to each faults into the caller's handler (kr_track_fault), and a harvest
 * makes the span read-only again. About 5-8 us per first store per page instead of 1, a
 * VMA split per isolated written page, and kernel-mode writes into the range fail with
 * EFAULT; but it works on any Linux. */
static int track_attach_mprotect(struct kr_track *t)
{
	size_t words = (t->len / t->page_size + 63) / 64;
	t->written = kr_calloc(words, sizeof(uint64_t));
	if (!t->written) {
		track_reset(t);
		return kr_err_set(KR_E_NOMEM, "track: no memory for the written bitmap");
	}
	if (madvise(t->base, t->len, MADV_NOHUGEPAGE) < 0 ||
	    kr_mprotect(t->base, t->len, PROT_READ) < 0) {
		int rc = kr_err_errno(KR_E_IO, "track: cannot write-protect the range");
		free(t->written);
		track_reset(t);
		return rc;
	}
	t->next = (uintptr_t)t->base;
	t->mode = KR_TRACK_MPROTECT;
	return KR_OK;
}

int kr_track_attach(struct kr_track *t, void *base, size_t len, unsigned flags)
{
	if (!t)
		return kr_err_set(KR_E_MISUSE_ARG, "track: NULL tracker");
	track_reset(t);
	long ps = sysconf(_SC_PAGESIZE);
	if (!base || len == 0 || (flags & ~KR_TRACK_FLAG_MPROTECT) || ps <= 0 ||
	    (uintptr_t)base % (size_t)ps || len % (size_t)ps)
		return kr_err_set(KR_E_MISUSE_ARG,
				  "track: base %p / len %zu not page aligned, zero, or flags %#x set",
				  base, len, flags);
	int rc = track_check_shared((uintptr_t)base, (uintptr_t)base + len);
	if (rc != KR_OK)
		return rc;

	t->base = base;
	t->len = len;
	t->page_size = (size_t)ps;
	if (flags & KR_TRACK_FLAG_MPROTECT)
		return track_attach_mprotect(t);

	/* Two handshakes: the first learns what the kernel offers (a handshake can only be
	 * done once per descriptor), the second asks for what we need. */
	uint64_t offered;
	int fd = track_uffd_open(0, &offered);
	if (fd < 0)
		return fd;
	close(fd);
	if (!(offered & UFFD_FEATURE_WP_ASYNC))
		return kr_err_set(KR_E_IO, "track: kernel lacks UFFD_FEATURE_WP_ASYNC (Linux 6.7+)");
	uint64_t want = UFFD_FEATURE_WP_ASYNC |
			(offered & (UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_WP_HUGETLBFS_SHMEM));
	uint64_t got;
	fd = track_uffd_open(want, &got);
	if (fd < 0)
		return fd;
	t->uffd = fd;

	/* One huge page would turn one store into 512 reported pages. */
	if (madvise(base, len, MADV_NOHUGEPAGE) < 0) {
		rc = kr_err_errno(KR_E_IO, "track: MADV_NOHUGEPAGE failed");
		goto fail;
	}

	struct uffdio_register reg = {
		.range = {.start = (uintptr_t)base, .len = len},
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	if (ioctl(t->uffd, UFFDIO_REGISTER, &reg) < 0) {
		rc = kr_err_errno(KR_E_IO, "track: UFFDIO_REGISTER (write-protect mode) failed");
		goto fail;
	}

	t->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (t->pagemap_fd < 0) {
		rc = kr_err_errno(KR_E_IO, "track: cannot open /proc/self/pagemap");
		goto fail;
	}

	if ((rc = track_arm(t)) != KR_OK || (rc = track_selftest(t)) != KR_OK)
		goto fail;
	/* The self-test re-armed its own pages; arm everything again so that whatever was
	 * stored into the range while attach ran (callers should not) counts as clean, the
	 * same for every page. */
	if ((rc = track_arm(t)) != KR_OK)
		goto fail;
	t->next = (uintptr_t)base;
	t->mode = KR_TRACK_UFFD;
	return KR_OK;

fail:
	kr_track_detach(t);
	return rc;
}

/* The mprotect fallback's half of a harvest over [start, end): write-protect the span, then
 * take the written bits, both under the lock that kr_track_fault holds while it sets a bit
 * and unprotects a page. A store is therefore either already in a bit we take (its page
 * was made writable before we write-protected it again, so the data is there when the
 * caller reads it, or the store faults anew and sets the bit for the next harvest) or
 * faults after we release the lock and is reported next time. */
static int track_collect_mprotect(struct kr_track *t, uint64_t start, uint64_t end,
				  uint64_t *pages, size_t max, size_t *got, uint64_t *walk_end)
{
	uint64_t base = (uintptr_t)t->base, ps = t->page_size;
	while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire))
		;
	if (kr_mprotect((void *)(uintptr_t)start, end - start, PROT_READ) != 0) {
		atomic_flag_clear_explicit(&t->lock, memory_order_release);
		return kr_err_errno(KR_E_IO, "track: mprotect (read-only) failed");
	}
	uint64_t p = (start - base) / ps, pend = (end - base) / ps;
	*walk_end = end;
	while (p < pend) {
		uint64_t w = p / 64, lo = p % 64;
		uint64_t hi = pend - w * 64 < 64 ? pend - w * 64 : 64;
		uint64_t mask = (hi == 64 ? ~0ull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
		uint64_t bits = atomic_load_explicit(&t->written[w], memory_order_relaxed) & mask;
		while (bits && *got < max) {
			uint64_t b = (uint64_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			atomic_fetch_and_explicit(&t->written[w], ~(1ull << b), memory_order_relaxed);
			pages[(*got)++] = w * 64 + b;
		}
		if (bits) { /* output full: the rest keep their bits for the next call */
			*walk_end = base + (w * 64 + (uint64_t)__builtin_ctzll(bits)) * ps;
			break;
		}
		p = w * 64 + hi;
	}
	atomic_flag_clear_explicit(&t->lock, memory_order_release);
	return KR_OK;
}

/* Collects up to max - *got written pages of [start, end) into pages[], re-arming them;
 * *walk_end is where it stopped (end when the span is done). */
static int track_collect(struct kr_track *t, uint64_t start, uint64_t end, uint64_t *pages,
			 size_t max, size_t *got, uint64_t *walk_end)
{
	if (t->mode == KR_TRACK_MPROTECT)
		return track_collect_mprotect(t, start, end, pages, max, got, walk_end);
	uint64_t base = (uintptr_t)t->base;
	int nr = track_scan(t, start, end, max - *got, walk_end);
	if (nr < 0)
		return nr;
	const struct page_region *v = t->vec;
	for (int r = 0; r < nr; r++)
		for (uint64_t a = v[r].start; a < v[r].end && *got < max; a += t->page_size)
			pages[(*got)++] = (a - base) / t->page_size;
	return KR_OK;
}

int kr_track_harvest(struct kr_track *t, uint64_t *pages, size_t max, size_t *n)
{
	if (n)
		*n = 0;
	if (!t || t->mode == KR_TRACK_OFF || !pages || max == 0 || !n)
		return kr_err_set(KR_E_MISUSE_ARG, "track: harvest on a detached tracker, "
						   "NULL output or max 0");

	uint64_t base = (uintptr_t)t->base, end = base + t->len;
	/* Written pages come in runs; max pages make at most max runs, and the range at most
	 * (npages + 1) / 2 of them. Sizing the output for that makes one ioctl enough. */
	size_t npages = t->len / t->page_size;
	size_t want = max < (npages + 1) / 2 ? max : (npages + 1) / 2;
	int rc = track_vec_reserve(t, want);
	if (rc != KR_OK)
		return rc;

	size_t got = 0;
	while (got < max) {
		uint64_t walk_end;
		if ((rc = track_collect(t, t->next, end, pages, max, &got, &walk_end)) != KR_OK)
			return rc;
		if (walk_end >= end) { /* the pass is complete: the next one starts over */
			t->next = base;
			*n = got;
			return KR_OK;
		}
		/* Stopped early (output full or max reached): pages from walk_end on were
		 * neither reported nor re-armed, so continuing there loses nothing. Pages come
		 * in address order, so everything up to the last one reported was scanned: never
		 * continue before it. (Seen once in 150 runs of test_track on a loaded machine,
		 * kernel 6.18: a scan that reported the range's last page returned a walk_end
		 * 1,650 pages earlier, and the next call reported a page again, out of order.) */
		uint64_t after_last = got ? base + (pages[got - 1] + 1) * t->page_size : base;
		t->next = walk_end > after_last ? walk_end : after_last;
		if (t->next >= end) {
			t->next = base;
			*n = got;
			return KR_OK;
		}
	}
	*n = got;
	return 1;
}

int kr_track_harvest_span(struct kr_track *t, uint64_t first, uint64_t count, uint64_t *pages,
			  size_t *n)
{
	if (n)
		*n = 0;
	if (!t || t->mode == KR_TRACK_OFF || !pages || !n || count == 0 ||
	    first + count > t->len / t->page_size)
		return kr_err_set(KR_E_MISUSE_ARG, "track: bad span to harvest");
	int rc = track_vec_reserve(t, (count + 1) / 2);
	if (rc != KR_OK)
		return rc;
	uint64_t at = (uintptr_t)t->base + first * t->page_size, end = at + count * t->page_size;
	size_t got = 0;
	while (at < end) {
		uint64_t walk_end;
		if ((rc = track_collect(t, at, end, pages, count, &got, &walk_end)) != KR_OK)
			return rc;
		at = walk_end;
	}
	*n = got;
	return KR_OK;
}

int kr_track_query(struct kr_track *t, uint64_t first, uint64_t count, uint64_t *bits)
{
	if (!t || t->mode == KR_TRACK_OFF || !bits || first + count > t->len / t->page_size)
		return KR_E_MISUSE_ARG; /* no message: may run in a signal handler */
	memset(bits, 0, (count + 63) / 64 * 8);
	if (t->mode == KR_TRACK_MPROTECT) {
		for (uint64_t i = 0; i < count; i++) {
			uint64_t p = first + i;
			if (atomic_load_explicit(&t->written[p / 64], memory_order_relaxed) >> (p % 64) & 1)
				bits[i / 64] |= 1ull << (i % 64);
		}
		return KR_OK;
	}
	/* Without PM_SCAN_WP_MATCHING nothing is re-armed; the category and return masks are
	 * the fast path's, like the harvest's. Own output buffer: this may run in a handler
	 * while the harvester uses t->vec. */
	struct page_region vec[16];
	uint64_t base = (uintptr_t)t->base, at = base + first * t->page_size;
	uint64_t end = at + count * t->page_size;
	while (at < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			.start = at,
			.end = end,
			.vec = (uintptr_t)vec,
			.vec_len = 16,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		int nr = ioctl(t->pagemap_fd, PAGEMAP_SCAN, &arg);
		if (nr < 0)
			return KR_E_IO;
		for (int r = 0; r < nr; r++)
			for (uint64_t a = vec[r].start; a < vec[r].end; a += t->page_size) {
				uint64_t i = (a - base) / t->page_size - first;
				bits[i / 64] |= 1ull << (i % 64);
			}
		if (arg.walk_end <= at)
			return KR_E_IO;
		at = arg.walk_end;
	}
	return KR_OK;
}

bool kr_track_fault(struct kr_track *t, const void *addr)
{
	uintptr_t a = (uintptr_t)addr, base = (uintptr_t)t->base;
	if (t->mode != KR_TRACK_MPROTECT || a < base || a >= base + t->len)
		return false;
	uint64_t p = (a - base) / t->page_size;
	while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire))
		;
	atomic_fetch_or_explicit(&t->written[p / 64], 1ull << (p % 64), memory_order_relaxed);
	bool ok = mprotect(t->base + p * t->page_size, t->page_size, PROT_READ | PROT_WRITE) == 0;
	if (!ok) {
		/* Out of VMAs (vm.max_map_count: each isolated writable page splits the mapping
		 * in three). Unprotect the whole aligned 64-page block instead, counting all of
		 * it as written: coarser, never wrong, and it merges with its neighbours. */
		uint64_t first = p & ~63ull, n = t->len / t->page_size - first;
		n = n < 64 ? n : 64;
		atomic_fetch_or_explicit(&t->written[p / 64], n == 64 ? ~0ull : (1ull << n) - 1,
					 memory_order_relaxed);
		ok = mprotect(t->base + first * t->page_size, n * t->page_size,
			      PROT_READ | PROT_WRITE) == 0;
	}
	atomic_flag_clear_explicit(&t->lock, memory_order_release);
	return ok;
}

void kr_track_detach(struct kr_track *t)
{
	if (!t)
		return;
	if (t->mode == KR_TRACK_MPROTECT)
		(void)mprotect(t->base, t->len, PROT_READ | PROT_WRITE);
	free(t->written);
	if (t->uffd >= 0) {
		/* Unregistering also clears the range's write-protection, so the pages are
		 * left as plain writable memory. Closing the fd alone would do the same; the
		 * explicit call keeps it independent of who else holds the descriptor. */
		struct uffdio_range range = {.start = (uintptr_t)t->base, .len = t->len};
		if (t->len)
			(void)ioctl(t->uffd, UFFDIO_UNREGISTER, &range);
		close(t->uffd);
	}
	if (t->pagemap_fd >= 0)
		close(t->pagemap_fd);
	free(t->vec);
	track_reset(t);
}

bool kr_track_probe(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/kr-track-probe-%ld", (long)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		kr_err_errno(KR_E_IO, "track: probe cannot create %s", path);
		return false;
	}
	unlink(path);

	bool ok = false;
	long ps = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)ps * TRACK_SELFTEST_PAGES * 2;
	if (ftruncate(fd, (off_t)len) < 0) {
		kr_err_errno(KR_E_IO, "track: probe ftruncate failed");
	} else {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			kr_err_errno(KR_E_IO, "track: probe mmap failed");
		} else {
			struct kr_track t;
			ok = kr_track_attach(&t, p, len, 0) == KR_OK;
			kr_track_detach(&t);
			munmap(p, len);
		}
	}
	close(fd);
	return ok;
}
