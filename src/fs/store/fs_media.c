/*
 * fs_media.c - media errors in a keratin-fs pool: the fault resolver that keeps a read of a
 * poisoned page from killing the process, emulated poison for tests, and the repair of the
 * platform's bad-block list at mount and after a scrub.
 *
 * A read of a lost page faults: SIGBUS with a machine-check code on persistent memory, or
 * SIGSEGV on a page emulated poison made inaccessible. The file system's mapping is watched
 * (kr_media_watch, src/pm/media.c), and the resolver, in the signal handler:
 *   1. records the page in PATH.badblocks, so that the next mount repairs it whatever
 *      happens meanwhile (not for an inspection mount, whose copy is private);
 *   2. gives the page back: a machine-checked page moves to a new block holding what the
 *      kernel can still read of it, strip by strip (a strip that fails reads as zeros);
 *      an emulated one becomes accessible again, its lost bytes already junk;
 *   3. returns, and the faulting load runs again on bytes that are now merely wrong.
 * Wrong bytes are what the rest of keratin-fs already handles: every metadata structure
 * carries a CRC and a replica (fs_meta.c, fs_log.c, fs_journal.c, the superblock), every
 * data strip two CRCs and a parity strip (fs_data.c). So a lost copy of metadata is
 * rewritten from the other, a lost data strip is rebuilt from parity and written back
 * through kr_pm_*, and what cannot be rebuilt fails its read with -EIO: no reader ever sees
 * the junk, and the process never dies of a media error inside the pool.
 *
 * What is verified only when read (data pages, their CRCs and parity) is also repaired
 * eagerly for the pages the list names: at mount, and at the end of a scrub, every data
 * page in use whose bytes, CRCs or parity sit in a listed page is scrubbed
 * (krfs_data_scrub); a lost CRC page is then completed from its other copy. With zone
 * parity (fs_zone.c), whose rows cover free pages too, a listed free data page is rebuilt
 * from its row and a listed parity page's row is rechecked. The list is cleared when all of
 * that succeeded, kept otherwise (the next mount tries again).
 *
 * Invariants
 *   1. The resolver only changes bytes that were lost already (it never writes a page that
 *      did not fault) and allocates nothing.
 *   2. Every repair goes through the structures' own verify-and-repair code, so it writes
 *      only bytes a CRC proved (fs_data.c invariant 2, fs_meta.c).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "fault.h"
#include "fs.h"
#include "invariant.h"
#include "media.h"

static int poison_slot(struct kr_fs *fs, uint64_t page)
{
	for (int i = 0; i < KRFS_POISON; i++)
		if (atomic_load(&fs->poison[i]) == page + 1)
			return i;
	return -1;
}

/* With write protection (KR_FS_MOUNT_WPROTECT) the pool has two mappings: the read-only view
 * every read goes through, and the writable alias the write path uses. Both are watched, and
 * a lost page is lost in both. */
static bool two_maps(const struct kr_fs *fs)
{
	return fs->pm.view && fs->pm.view != fs->pm.base;
}

static bool fs_fault(void *ctx, int sig, const siginfo_t *si, const void *ucontext)
{
	(void)ucontext;
	struct kr_fs *fs = ctx;
	const char *addr = si->si_addr;
	const char *map = two_maps(fs) && addr >= fs->pm.view && addr < fs->pm.view + fs->pm.size ? fs->pm.view
													: fs->pm.base;
	uint64_t page = (uint64_t)(addr - map) & ~(uint64_t)(P - 1);
	int slot = -1;
	if (sig == SIGBUS ? si->si_code != BUS_MCEERR_AR && si->si_code != BUS_MCEERR_AO
			  : si->si_code == SEGV_MAPERR || (slot = poison_slot(fs, page)) < 0)
		return false; /* not a media error: a bug, passed on */
#ifdef KR_DEBUG_INVARIANTS
	uint64_t allocs = kr_alloc_count();
#endif
	if (!fs->check_mount)
		kr_media_list_add(fs->path, page);
	bool ok = sig == SIGBUS ? kr_media_salvage_page(fs->pm.fd, page, KRFS_STRIP)
				: mprotect(fs->pm.base + page, P, PROT_READ | PROT_WRITE) == 0 &&
					  (!two_maps(fs) || mprotect(fs->pm.view + page, P, PROT_READ) == 0);
	if (slot >= 0)
		atomic_store(&fs->poison[slot], 0);
	/* Only the faulting page was rewritten or opened again, and nothing was allocated. */
	KR_INVARIANT("fs_media.c", 1, kr_alloc_count() == allocs && page < fs->pm.size);
	return ok;
}

int krfs_media_attach(struct kr_fs *fs)
{
	int rc = kr_media_watch(fs->pm.base, fs->pm.size, fs_fault, fs);
	if (rc == KR_OK && two_maps(fs) && (rc = kr_media_watch(fs->pm.view, fs->pm.size, fs_fault, fs)) != KR_OK)
		kr_media_unwatch(fs->pm.base);
	fs->watched = rc == KR_OK;
	return rc;
}

void krfs_media_detach(struct kr_fs *fs)
{
	if (fs->watched) {
		kr_media_unwatch(fs->pm.base);
		if (two_maps(fs))
			kr_media_unwatch(fs->pm.view);
	}
	fs->watched = false;
}

int kr_fs_inject_poison(kr_fs *fs, uint64_t off, uint64_t len)
{
	if (krfs_enter(fs) != 0)
		return fs ? KR_E_POOL_FAILED : kr_err_set(KR_E_MISUSE_ARG, "kr_fs_inject_poison: NULL");
	uint64_t page = off & ~(uint64_t)(P - 1), from = off - page;
	int rc = KR_OK;
	if (len == 0)
		from = 0, len = P;
	if (fs->check_mount || !fs->watched || off >= fs->sb.pool_size || from + len > P)
		rc = kr_err_set(KR_E_MISUSE_ARG, "kr_fs_inject_poison: a range inside one page of a "
				"mounted pool (not an inspection mount)");
	if (rc == KR_OK && poison_slot(fs, page) >= 0)
		rc = kr_err_set(KR_E_MISUSE_STATE, "kr_fs_inject_poison: page %#llx is poisoned already",
				(unsigned long long)page);
	int slot = rc == KR_OK ? kr_media_claim_slot(fs->poison, KRFS_POISON, page + 1) : -1;
	if (rc == KR_OK && slot < 0)
		rc = kr_err_set(KR_E_MISUSE_STATE, "too many poisoned pages at once");
	/* The platform knows the page is bad before it is: if the pool is unmounted first,
	 * mount repairs it. (The other way round, a list that cannot be written would leave a
	 * lost page nobody knows of; listed and not lost, the page is rewritten as it is.) */
	if (rc == KR_OK && (rc = kr_badblocks_add(fs->path, page)) != KR_OK)
		atomic_store(&fs->poison[slot], 0);
	if (rc == KR_OK) {
		bool hidden = false, view_hidden = false;
		if (two_maps(fs) && kr_mprotect(fs->pm.view + page, P, PROT_NONE) != 0) {
			rc = kr_err_errno(KR_E_IO, "mprotect");
		} else {
			view_hidden = two_maps(fs);
			rc = kr_media_lose_range(fs->pm.fd, fs->pm.base + page, page, from, len, &hidden);
		}
		if (!hidden) { /* nothing was lost: the view reads again, the slot is free */
			if (view_hidden)
				(void)mprotect(fs->pm.view + page, P, PROT_READ);
			atomic_store(&fs->poison[slot], 0);
		}
	}
	krfs_leave(fs);
	return rc;
}

/* The data pages whose bytes, CRCs or parity live in the pool page at off: [*first, *end). */
static void data_pages_of(const struct kr_fs *fs, uint64_t off, uint64_t *first, uint64_t *end)
{
	const struct krfs_super *sb = &fs->sb;
	uint64_t per = 1, base = 0;
	*first = *end = 0;
	if (off >= sb->data_off && off < sb->data_off + sb->data_pages * P)
		per = P, base = sb->data_off;
	else if (!fs->zone_rows && off >= sb->parity_off && off < sb->parity_off + sb->data_pages * KRFS_STRIP)
		per = KRFS_STRIP, base = sb->parity_off;
	else if (off >= sb->csum_a_off && off < sb->csum_a_off + sb->data_pages * KRFS_CSUM_PER_PAGE)
		per = KRFS_CSUM_PER_PAGE, base = sb->csum_a_off;
	else if (off >= sb->csum_b_off && off < sb->csum_b_off + sb->data_pages * KRFS_CSUM_PER_PAGE)
		per = KRFS_CSUM_PER_PAGE, base = sb->csum_b_off;
	else
		return;
	*first = (off - base) / per;
	*end = (off + P - base) / per;
	if (*end > sb->data_pages)
		*end = sb->data_pages;
}

/* A page of one CRC copy: *twin, its page in the other copy, and the number of its bytes
 * that hold CRCs; 0 if off is not in a CRC copy. */
static uint64_t csum_twin(const struct kr_fs *fs, uint64_t off, uint64_t *twin)
{
	const struct krfs_super *sb = &fs->sb;
	uint64_t area = sb->data_pages * KRFS_CSUM_PER_PAGE, a = sb->csum_a_off, b = sb->csum_b_off;
	uint64_t base = off >= a && off < a + area ? a : off >= b && off < b + area ? b : 0;
	if (!base)
		return 0;
	*twin = off - base + (base == a ? b : a);
	return area - (off - base) < P ? area - (off - base) : P;
}

static int repair_page(struct kr_fs *fs, uint64_t off)
{
	uint64_t pg, end, twin;
	int rc = 0;
	data_pages_of(fs, off, &pg, &end);
	for (; pg < end; pg++)
		if (krfs_bm_test(&fs->data_bm, pg) && krfs_data_scrub(fs, pg, fs->buf) != 0)
			rc = -EIO; /* its file's read fails; the scrub names the file and offset */
	/* Zone parity covers free pages too: a lost free data page is rebuilt from its row, and
	 * the row of a listed parity page rechecked (recomputed once its pages in use verify). */
	const struct krfs_super *sb = &fs->sb;
	if (fs->parity && fs->zone_rows && off >= sb->data_off && off < sb->data_off + sb->data_pages * P &&
	    !krfs_bm_test(&fs->data_bm, (off - sb->data_off) / P) &&
	    krfs_zone_rebuild_free(fs, (off - sb->data_off) / P) != 0)
		rc = -EIO;
	if (fs->parity && fs->zone_rows && off >= sb->parity_off && off < sb->parity_off + fs->zone_rows * P &&
	    krfs_zone_scrub_row(fs, (off - sb->parity_off) / P) != 0)
		rc = -EIO;
	uint64_t n = csum_twin(fs, off, &twin);
	if (rc == 0 && n && fs->csum && memcmp(krfs_ptr(fs, off), krfs_ptr(fs, twin), n) != 0) {
		/* Entries of pages in use are equal in both copies now; the rest comes along. */
		kr_pm_copy(&fs->pm, krfs_ptr(fs, off), krfs_ptr(fs, twin), n);
		kr_pm_flush(&fs->pm, krfs_ptr(fs, off), n);
		krfs_note_repair(fs, "data CRC page from its other copy", off);
		rc = krfs_fence(fs);
	}
	return rc;
}

int krfs_media_repair_listed(struct kr_fs *fs)
{
	if (fs->check_mount)
		return KR_OK; /* its private copy has no list of its own; the structures' checks report */
	uint64_t pages[256];
	size_t n, from_kernel;
	int rc = kr_media_list(fs->path, fs->pm.fd, fs->sb.pool_size, pages,
			       sizeof(pages) / sizeof(pages[0]), &n, &from_kernel);
	bool all = rc == KR_OK;
	for (size_t i = 0; i < n && !fs->failed; i++) {
		if (i >= from_kernel && !kr_media_salvage_page(fs->pm.fd, pages[i], KRFS_STRIP))
			all = false;
		if (repair_page(fs, pages[i]) != 0)
			all = false;
	}
	if (fs->failed)
		return KR_E_IO_SYNC;
	return all && n ? kr_media_clear_list(fs->path) : KR_OK;
}
