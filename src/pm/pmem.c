/*
 * pmem.c - mapping, stores, flushes and fences to persistent memory, with counters and the
 * crash recorder.
 *
 * Design
 *
 *   Every write to persistent memory passes through here, the file system's too, so that the
 *   counters, the crash simulator and a port to new hardware see all of it. The functions are small
 *   and do three things in a fixed order: perform the store, count it, and report it to the
 *   recorder if one is installed. The recorder check is one predictable branch on a global
 *   pointer, so the production path pays nothing measurable for it.
 *
 *   Invariants
 *   1. A store reported to the recorder has already happened (the recorder snapshots the
 *      live bytes); a fence is reported before it takes effect (the crash simulator builds
 *      its images "just before fence N").
 *   2. kr_pm_store64 compiles to exactly one aligned 8-byte store (an atomic store), so it
 *      can carry validity markers.
 *   3. In page-cache mode, the pages flushed by a thread since its last fence are synced by
 *      that fence before it returns, in one device round trip where the file system allows
 *      (sync_pending); a commit therefore never returns before its data is on stable
 *      storage. Pages left to lazy write-back wait for kr_pm_sync_all.
 *
 *   Flush instruction: clwb if the CPU has it, else clflushopt, else clflush (chosen once,
 *   by CPUID). clflush is ordered by itself but on some CPUs only by mfence, so that mode
 *   fences with mfence.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <emmintrin.h>
#include <immintrin.h>
#include <isa-l/raid.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "grow.h"
#include "invariant.h"
#include "pmem.h"
#include "simd.h"

#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif

#define LINE 64u
#define LINE_DOWN(a) ((uintptr_t)(a) & ~(uintptr_t)(LINE - 1))

enum flush_kind { FLUSH_CLWB, FLUSH_CLFLUSHOPT, FLUSH_CLFLUSH };

static enum flush_kind flush_kind;
static pthread_once_t flush_once = PTHREAD_ONCE_INIT;

static _Thread_local struct kr_counters counters;

/* The recorder: a copy of the caller's struct, published through one pointer. */
static struct kr_recorder recorder_copy;
static const struct kr_recorder *_Atomic recorder;

/* Page-cache mode: page ranges this thread flushed since its last fence. The ranges
 * themselves are on the heap, made at the thread's first page-cache flush and freed when it
 * exits: thread-locals stay small for the initial-exec model (err.c says why). Without
 * memory for them, the thread's next fence syncs the whole file (overflow). */
#define SYNC_RANGES 32
struct sync_pages {
	uintptr_t start[SYNC_RANGES], end[SYNC_RANGES];
};
static _Thread_local struct {
	struct kr_pm *pm;
	int n;
	int overflow;
	struct sync_pages *pg;
} sync_ranges;
static pthread_key_t sync_key;
static pthread_once_t sync_key_once = PTHREAD_ONCE_INIT;
static int sync_key_ok;

/* At the thread's exit; a page-cache flush after it makes them again. */
static void sync_pages_free(void *pg)
{
	sync_ranges.pg = NULL;
	if (sync_ranges.n) /* ranges not synced yet: the thread's next fence syncs the file */
		sync_ranges.overflow = 1;
	sync_ranges.n = 0;
	free(pg);
}

static void sync_key_init(void) { sync_key_ok = pthread_key_create(&sync_key, sync_pages_free) == 0; }

/* At unload (dlclose): a thread exiting later must not call into unmapped code. */
__attribute__((destructor)) static void sync_key_fini(void)
{
	if (sync_key_ok)
		pthread_key_delete(sync_key);
	sync_key_ok = 0;
}

static _Thread_local int in_signal; /* kr_pm_signal_enter: nesting depth */

static struct sync_pages *sync_pages_get(void)
{
	if (!sync_ranges.pg && !in_signal) {
		pthread_once(&sync_key_once, sync_key_init);
		struct sync_pages *pg = sync_key_ok ? malloc(sizeof(*pg)) : NULL;
		if (pg && pthread_setspecific(sync_key, pg) != 0) {
			free(pg);
			pg = NULL;
		}
		sync_ranges.pg = pg;
	}
	return sync_ranges.pg;
}

static void flush_detect(void)
{
	unsigned a, b, c, d;
	flush_kind = FLUSH_CLFLUSH;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		if (b & (1u << 24))
			flush_kind = FLUSH_CLWB;
		else if (b & (1u << 23))
			flush_kind = FLUSH_CLFLUSHOPT;
	}
	const char *forced = getenv("KERATIN_FLUSH");
	if (forced && strcmp(forced, "clflush") == 0)
		flush_kind = FLUSH_CLFLUSH;
	else if (forced && strcmp(forced, "clflushopt") == 0 && flush_kind == FLUSH_CLWB)
		flush_kind = FLUSH_CLFLUSHOPT;
}

const char *kr_pm_flush_name(void)
{
	pthread_once(&flush_once, flush_detect);
	static const char *names[] = {"clwb", "clflushopt", "clflush"};
	return names[flush_kind];
}

void kr_set_recorder(const struct kr_recorder *rec)
{
	if (rec) {
		recorder_copy = *rec;
		atomic_store(&recorder, &recorder_copy);
	} else {
		atomic_store(&recorder, NULL);
	}
}

#define RECORD(cb, ...)                                                                   \
	do {                                                                                \
		const struct kr_recorder *r_ = atomic_load_explicit(&recorder,              \
								    memory_order_relaxed);  \
		if (__builtin_expect(r_ != NULL, 0) && r_->cb)                              \
			r_->cb(r_->ctx, ##__VA_ARGS__);                                     \
	} while (0)

void kr_counters_get(struct kr_counters *c) { *c = counters; }
void kr_counters_reset(void) { memset(&counters, 0, sizeof(counters)); }
void kr_pm_count_logged(size_t n) { counters.bytes_logged += n; }
void kr_pm_count_commit(void) { counters.commits++; }

static int env_force_pmem(void)
{
	const char *v = getenv("KERATIN_FORCE_PMEM");
	return v && v[0] == '1';
}

/* Whether an msync of any range of the file makes earlier written ranges durable too:
 * it commits the file's metadata (the journal, or the log) and flushes the device. True of
 * ext4 and xfs, which write data in place; not of copy-on-write file systems (btrfs), whose
 * range sync persists the metadata of that range only. tmpfs keeps nothing anyway. */
static int msync_commits_file(int fd)
{
	struct statfs f;
	if (fstatfs(fd, &f) != 0)
		return 0;
	switch ((unsigned long)f.f_type) {
	case 0xEF53:     /* ext2/3/4 */
	case 0x58465342: /* xfs */
	case 0x01021994: /* tmpfs */
		return 1;
	default:
		return 0;
	}
}

/* Prefaults a shared writable mapping (KR_OPEN_PREFAULT), so that no store pays a
 * first-touch fault later: writable where the pool is memory (DAX, or tmpfs standing in for
 * it), readable in page-cache mode (write faults there dirty pages, which would make the
 * kernel write back the whole pool). MADV_POPULATE_* needs Linux 5.14; before it (EINVAL),
 * every page is read once, which maps it (a later store may still fault to make it writable). */
static void prefault(const struct kr_pm *pm)
{
	long page = sysconf(_SC_PAGESIZE);
	if (madvise(pm->base, pm->size, pm->mode == KR_MODE_PAGECACHE ? MADV_POPULATE_READ : MADV_POPULATE_WRITE) != 0) {
		if (errno != EINVAL)
			return; /* a poisoned page (EHWPOISON), say: the loop would take its SIGBUS */
		for (size_t off = 0; off < pm->size; off += (size_t)page)
			(void)*(volatile const char *)(pm->base + off);
		return;
	}
	/* Some hypervisors map a guest page for the process only at its first store from user
	 * space, populated or not: on one (Linux 6.18 guest, 2026-11-30) the first 4 KiB copy
	 * into each populated tmpfs page took 5.8 us, later ones 0.2 us, so every fresh block
	 * a transaction wrote paid it. libpmemobj's prefault stores into each page; so does this
	 * one, where the pool is memory standing in for pmem: an atomic add of zero, which
	 * changes no byte (and none that a concurrent opener could be writing). Not on DAX,
	 * where it would read every line of the media, poisoned ones too. */
	if (pm->mode != KR_MODE_EMULATED)
		return;
	for (size_t off = 0; off < pm->size; off += (size_t)page)
		__atomic_fetch_add((char *)pm->base + off, 0, __ATOMIC_RELAXED);
}

void kr_pm_populate(const struct kr_pm *pm, uint64_t off, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t lo = off / (uint64_t)page * (uint64_t)page;
	/* Writable where prefault() maps writable; a private copy is only read here. */
	int how = pm->mode == KR_MODE_PAGECACHE || pm->readonly ? MADV_POPULATE_READ : MADV_POPULATE_WRITE;
	(void)madvise(pm->base + lo, off + len - lo, how);
}

int kr_pm_map(struct kr_pm *pm, int fd, size_t size, unsigned open_flags, const char *path)
{
	pthread_once(&flush_once, flush_detect);
	if (open_flags & KR_OPEN_READONLY) {
		/* Copy-on-write: whatever the layers above write (recovery, repair in the view)
		 * stays in this process. Flushes and fences still run and count, harmlessly; the
		 * mode reported is the one a read-write open would get (msync of a private
		 * mapping writes nothing). Prefaulted for reading: MAP_POPULATE of a writable
		 * private mapping would copy every page. */
		void *v = kr_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (v == MAP_FAILED)
			return kr_err_errno(KR_E_IO_MAP, "%s: private mmap of %zu bytes", path, size);
		if (open_flags & KR_OPEN_PREFAULT)
			(void)madvise(v, size, MADV_POPULATE_READ); /* advice: slower without */
		void *dax = kr_mmap(NULL, size, PROT_READ, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
		if (dax != MAP_FAILED)
			munmap(dax, size);
		pm->mode = dax != MAP_FAILED ? KR_MODE_DAX
			   : ((open_flags & KR_OPEN_FORCE_PMEM) || env_force_pmem()) ? KR_MODE_EMULATED
										 : KR_MODE_PAGECACHE;
		pm->readonly = 1;
		pm->base = v;
		pm->view = v; /* the application's view: nothing to protect in a private copy */
		pm->size = size;
		pm->fd = fd;
		RECORD(map, pm->base, pm->size, path);
		return KR_OK;
	}
	void *p = kr_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
	if (p != MAP_FAILED) {
		pm->mode = KR_MODE_DAX;
	} else {
		p = kr_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return kr_err_errno(KR_E_IO_MAP, "%s: mmap of %zu bytes", path, size);
		pm->mode = ((open_flags & KR_OPEN_FORCE_PMEM) || env_force_pmem())
				   ? KR_MODE_EMULATED
				   : KR_MODE_PAGECACHE;
		/* The page cache may hold a file in large folios (ext4, xfs: up to 2 MiB), and a
		 * store dirties its whole folio, which the next sync then writes whole: 2-4 MB per
		 * small commit, measured. Without read-ahead a fault brings one page, in a folio
		 * of its own. Folios already cached (the file written by write(2) or cp, or by an
		 * earlier run) would stay large: they are written back and dropped first, so that
		 * they too come back a page at a time (the open then reads from storage). All of
		 * it advice: on failure the pool works as before, only slower. */
		if (pm->mode == KR_MODE_PAGECACHE) {
			(void)fdatasync(fd);
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			(void)madvise(p, size, MADV_RANDOM);
			pm->sync_one_trip = msync_commits_file(fd);
		}
	}
	pm->base = p;
	pm->view = p;
	pm->size = size;
	pm->fd = fd;
	if (open_flags & KR_OPEN_PREFAULT)
		prefault(pm);
	const char *protect = getenv("KERATIN_DEBUG_PROTECT");
	if ((open_flags & KR_OPEN_DEBUG) || (protect && protect[0] == '1')) {
		int rc = kr_pm_protect(pm, path, open_flags);
		if (rc != KR_OK) {
			munmap(p, size);
			pm->base = pm->view = NULL;
			return rc;
		}
	}
	RECORD(map, pm->base, pm->size, path);
	return KR_OK;
}

int kr_pm_protect(struct kr_pm *pm, const char *path, unsigned open_flags)
{
	if (pm->readonly || pm->view != pm->base)
		return KR_OK; /* a private copy reaches no file; already protected */
	int populate = (open_flags & KR_OPEN_PREFAULT) ? MAP_POPULATE : 0;
	void *v = kr_mmap(NULL, pm->size, PROT_READ, MAP_SHARED | populate, pm->fd, 0);
	if (v == MAP_FAILED)
		return kr_err_errno(KR_E_IO_MAP, "%s: read-only alias of %zu bytes", path, pm->size);
	pm->view = v;
	return KR_OK;
}

void kr_pm_unmap(struct kr_pm *pm)
{
	if (!pm->base)
		return;
	if (sync_ranges.pm == pm) {
		sync_ranges.pm = NULL;
		sync_ranges.n = 0;
		sync_ranges.overflow = 0;
	}
	RECORD(unmap, pm->base, pm->size);
	if (pm->view != pm->base)
		munmap(pm->view, pm->size);
	munmap(pm->base, pm->size);
	pm->base = pm->view = NULL;
}

/* Page-cache mode bookkeeping: the thread's ranges are pm's from now on. */
static void sync_owner(struct kr_pm *pm)
{
	if (sync_ranges.pm != pm) {
		/* A thread switching pools: make the old pool's pages durable now rather than
		 * lose track of them (earlier durability is always allowed). */
		if (sync_ranges.pm)
			kr_pm_fence(sync_ranges.pm);
		sync_ranges.pm = pm;
	}
}

/* Page-cache mode bookkeeping: remember [addr, addr+n) rounded to pages. */
static void sync_note(struct kr_pm *pm, const void *addr, size_t n)
{
	sync_owner(pm);
	uintptr_t ps = 4096;
	uintptr_t s = (uintptr_t)addr & ~(ps - 1);
	uintptr_t e = ((uintptr_t)addr + n + ps - 1) & ~(ps - 1);
	int k = sync_ranges.n;
	struct sync_pages *pg = sync_pages_get();
	if (!pg || k == SYNC_RANGES) {
		sync_ranges.overflow = 1;
		return;
	}
	if (k > 0 && s <= pg->end[k - 1] && e >= pg->start[k - 1]) {
		if (s < pg->start[k - 1])
			pg->start[k - 1] = s;
		if (e > pg->end[k - 1])
			pg->end[k - 1] = e;
		return;
	}
	pg->start[k] = s;
	pg->end[k] = e;
	sync_ranges.n = k + 1;
}

static int sync_pending(struct kr_pm *pm)
{
	int rc = KR_OK;
	const struct sync_pages *pg = sync_ranges.pg; /* not NULL where n > 0 */
	if (sync_ranges.pm != pm)
		return KR_OK;
	if (sync_ranges.overflow) {
		if (kr_fdatasync(pm->fd) != 0)
			rc = kr_err_errno(KR_E_IO_SYNC, "fdatasync of the pool");
		counters.msyncs++;
	} else if (sync_ranges.n > 0 && (sync_ranges.n == 1 || pm->sync_one_trip)) {
		/* Each msync is a round trip to the device (a cache flush on an SSD), and a
		 * commit writes two ranges at least (its lane, and the replica at the other end
		 * of the file). Where the file system's msync commits the file's metadata and
		 * flushes the device whatever range it is given (sync_one_trip), the other
		 * ranges are written and waited for first, without a flush, and the last msync's
		 * flush covers them all: one trip. Not fdatasync: that would also write every
		 * page the applies left to write back lazily (kr_pm_flush_list_lazy). */
		int last = sync_ranges.n - 1;
		/* Every write started first (the last's too), then each waited for: the device
		 * sees them at once. */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < (pass ? last : last + 1) && rc == KR_OK; i++)
				if (kr_sync_file_range(pm->fd, (off_t)(pg->start[i] - (uintptr_t)pm->base),
						       (off_t)(pg->end[i] - pg->start[i]), pass) != 0)
					rc = kr_err_errno(KR_E_IO_SYNC, "sync_file_range");
		if (rc == KR_OK && kr_msync((void *)pg->start[last],
					    pg->end[last] - pg->start[last], MS_SYNC) != 0)
			rc = kr_err_errno(KR_E_IO_SYNC, "msync");
		counters.msyncs++;
	} else {
		for (int i = 0; i < sync_ranges.n; i++) {
			if (kr_msync((void *)pg->start[i],
				     pg->end[i] - pg->start[i], MS_SYNC) != 0)
				rc = kr_err_errno(KR_E_IO_SYNC, "msync");
			counters.msyncs++;
		}
	}
	sync_ranges.n = 0;
	sync_ranges.overflow = 0;
	return rc;
}

/* The writable address of dst: a store aimed at the read-only view goes to the same byte of
 * base (the write path's private alias); any other address is its own. */
static inline void *writable(const struct kr_pm *pm, const void *dst)
{
	const char *d = dst;
	if (__builtin_expect(pm->view != pm->base, 0) && d >= pm->view && d < pm->view + pm->size)
		return pm->base + (d - pm->view);
	return (void *)dst;
}

void kr_pm_copy(struct kr_pm *pm, void *dst, const void *src, size_t n)
{
	dst = writable(pm, dst);
	memcpy(dst, src, n);
	counters.bytes_written += n;
	RECORD(store, dst, n);
}

void kr_pm_set(struct kr_pm *pm, void *dst, int c, size_t n)
{
	dst = writable(pm, dst);
	memset(dst, c, n);
	counters.bytes_written += n;
	RECORD(store, dst, n);
}

void kr_pm_store64(struct kr_pm *pm, uint64_t *dst, uint64_t v)
{
	KR_INVARIANT("pmem.c", 2, ((uintptr_t)dst & 7) == 0);
	dst = writable(pm, dst);
	__atomic_store_n(dst, v, __ATOMIC_RELAXED);
	counters.bytes_written += 8;
	RECORD(store, dst, 8);
}

uint64_t kr_pm_or64(struct kr_pm *pm, uint64_t *dst, uint64_t mask)
{
	dst = writable(pm, dst);
	uint64_t old = __atomic_fetch_or(dst, mask, __ATOMIC_RELAXED);
	counters.bytes_written += 8;
	RECORD(store, dst, 8);
	return old;
}

uint64_t kr_pm_andn64(struct kr_pm *pm, uint64_t *dst, uint64_t mask)
{
	dst = writable(pm, dst);
	uint64_t old = __atomic_fetch_and(dst, ~mask, __ATOMIC_RELAXED);
	counters.bytes_written += 8;
	RECORD(store, dst, 8);
	return old;
}

void kr_pm_xor64(struct kr_pm *pm, uint64_t *dst, uint64_t mask)
{
	dst = writable(pm, dst);
	__atomic_fetch_xor(dst, mask, __ATOMIC_RELAXED);
	counters.bytes_written += 8;
	RECORD(store, dst, 8);
}

/* 64 bytes a step, the tail under a byte mask, unaligned loads: dst ^= a ^ b in one
 * ternary-logic instruction per line. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static void xor2_avx512(char *d, const char *a,
								      const char *b, size_t n)
{
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m512i x = _mm512_ternarylogic_epi64(_mm512_loadu_si512(d + i), _mm512_loadu_si512(a + i),
						      _mm512_loadu_si512(b + i), 0x96);
		_mm512_storeu_si512(d + i, x);
	}
	if (i < n) {
		__mmask64 m = _bzhi_u64(~0ull, (unsigned)(n - i));
		__m512i x = _mm512_ternarylogic_epi64(_mm512_maskz_loadu_epi8(m, d + i),
						      _mm512_maskz_loadu_epi8(m, a + i),
						      _mm512_maskz_loadu_epi8(m, b + i), 0x96);
		_mm512_mask_storeu_epi8(d + i, m, x);
	}
}

/* ISA-L's xor_gen wants every vector 32-byte aligned, and has no form for dst ^= a ^ b
 * with unaligned sources; staging them in aligned scratch costs two copies, more than the
 * XOR (a fresh 16 KiB object's parity patch: 35 % of its commit). So AVX-512 machines XOR
 * in place here; others use xor_gen when everything is aligned, words otherwise. */
void kr_pm_xor2_portable(void *dst, const void *a, const void *b, size_t n)
{
	if (!(((uintptr_t)dst | (uintptr_t)a | (uintptr_t)b | n) & 31)) {
		void *v[4] = {(void *)a, (void *)b, dst, dst};
		xor_gen(4, (int)n, v);
		return;
	}
	/* Unaligned: a word at a time (memcpy keeps it defined), then the bytes left. */
	char *d = dst;
	size_t i = 0;
	for (uint64_t x, y, z; i + 8 <= n; i += 8) {
		memcpy(&x, d + i, 8);
		memcpy(&y, (const char *)a + i, 8);
		memcpy(&z, (const char *)b + i, 8);
		x ^= y ^ z;
		memcpy(d + i, &x, 8);
	}
	for (; i < n; i++)
		d[i] ^= ((const char *)a)[i] ^ ((const char *)b)[i];
}

void kr_pm_xor2(struct kr_pm *pm, void *dst, const void *a, const void *b, size_t n)
{
	dst = writable(pm, dst);
	if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("bmi2"))
		xor2_avx512(dst, a, b, n);
	else
		kr_pm_xor2_portable(dst, a, b, n);
	kr_simd_done();
	counters.bytes_written += n;
	RECORD(store, dst, n);
}

/* 64 bytes a step, the tail under a byte mask: each line of dst, src and par is loaded once,
 * and par takes old ^ new ^ parity in one ternary-logic instruction. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static void copy_xor_avx512(char *d, const char *s,
									 char *p, size_t n)
{
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m512i o = _mm512_loadu_si512(d + i), v = _mm512_loadu_si512(s + i);
		__m512i x = _mm512_ternarylogic_epi64(_mm512_loadu_si512(p + i), o, v, 0x96);
		_mm512_storeu_si512(p + i, x);
		_mm512_storeu_si512(d + i, v);
	}
	if (i < n) {
		__mmask64 m = _bzhi_u64(~0ull, (unsigned)(n - i));
		__m512i o = _mm512_maskz_loadu_epi8(m, d + i), v = _mm512_maskz_loadu_epi8(m, s + i);
		__m512i x = _mm512_ternarylogic_epi64(_mm512_maskz_loadu_epi8(m, p + i), o, v, 0x96);
		_mm512_mask_storeu_epi8(p + i, m, x);
		_mm512_mask_storeu_epi8(d + i, m, v);
	}
}

void kr_pm_copy_xor(struct kr_pm *pm, void *dst, const void *src, void *par, size_t n)
{
	char *d = writable(pm, dst), *p = writable(pm, par);
	const char *s = src;
	if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("bmi2")) {
		copy_xor_avx512(d, s, p, n);
		kr_simd_done();
	} else {
		for (size_t i = 0; i < n; i++) {
			p[i] ^= d[i] ^ s[i];
			d[i] = s[i];
		}
	}
	counters.bytes_written += 2 * n;
	RECORD(store, p, n);
	RECORD(store, d, n);
}

void kr_pm_xor_gen(struct kr_pm *pm, int vects, size_t len, void **v)
{
	v[vects - 1] = writable(pm, v[vects - 1]);
	xor_gen(vects, (int)len, v);
	kr_simd_done();
	counters.bytes_written += len;
	RECORD(store, v[vects - 1], len);
}

__attribute__((target("clwb"))) static void flush_lines_clwb(uintptr_t p, uintptr_t end)
{
	for (; p < end; p += LINE)
		__builtin_ia32_clwb((void *)p);
}

__attribute__((target("clflushopt"))) static void flush_lines_clflushopt(uintptr_t p,
									  uintptr_t end)
{
	for (; p < end; p += LINE)
		__builtin_ia32_clflushopt((void *)p);
}

static void flush_lines_clflush(uintptr_t p, uintptr_t end)
{
	for (; p < end; p += LINE)
		_mm_clflush((void *)p);
}

static _Thread_local struct kr_flush_list *deferred;

void kr_pm_defer_flushes(struct kr_flush_list *fl) { deferred = fl; }

void kr_pm_signal_enter(struct kr_pm_signal_state *st)
{
	st->deferred = deferred;
	deferred = NULL;
	in_signal++;
}

void kr_pm_signal_leave(const struct kr_pm_signal_state *st)
{
	in_signal--;
	deferred = st->deferred;
}

static int defer_flush(struct kr_flush_list *fl, const void *addr, size_t n)
{
	if (KR_GROW(fl->v, fl->cap, fl->n + 1, 32))
		return 0;
	fl->v[fl->n++] = (struct kr_flush_range){addr, n};
	return 1;
}

void kr_pm_flush_list(struct kr_pm *pm, struct kr_flush_list *fl)
{
	struct kr_flush_list *saved = deferred;
	deferred = NULL;
	for (size_t i = 0; i < fl->n; i++)
		kr_pm_flush(pm, fl->v[i].addr, fl->v[i].len);
	fl->n = 0;
	deferred = saved;
}

int kr_pm_lazy(const struct kr_pm *pm) { return pm->mode == KR_MODE_PAGECACHE; }

void kr_pm_flush_list_lazy(struct kr_pm *pm, struct kr_flush_list *fl)
{
	if (!kr_pm_lazy(pm)) {
		kr_pm_flush_list(pm, fl);
		return;
	}
	/* The stores are in the page cache already, which is where the kernel writes back
	 * from: nothing to do until kr_pm_sync_all. */
	fl->n = 0;
}

void kr_pm_sync_all_next(struct kr_pm *pm)
{
	if (!kr_pm_lazy(pm))
		return;
	/* fdatasync writes back every dirty page of the file: to the recorder, a flush of
	 * the whole pool now (what is stored later is covered by the fence's own flushes, or
	 * by nothing, which is what the caller's snapshot assumes). */
	RECORD(flush, pm->base, pm->size);
	sync_owner(pm);
	sync_ranges.overflow = 1;
}

int kr_pm_sync_all(struct kr_pm *pm)
{
	kr_pm_sync_all_next(pm);
	return kr_pm_fence(pm);
}

void kr_pm_flush_list_free(struct kr_flush_list *fl)
{
	free(fl->v);
	memset(fl, 0, sizeof(*fl));
}

/* The write-back itself: the instructions, the counters, the recorder. */
static void flush_lines(const void *addr, size_t n)
{
	uintptr_t p = LINE_DOWN(addr);
	uintptr_t end = (uintptr_t)addr + n;
	switch (flush_kind) {
	case FLUSH_CLWB:
		flush_lines_clwb(p, end);
		break;
	case FLUSH_CLFLUSHOPT:
		flush_lines_clflushopt(p, end);
		break;
	case FLUSH_CLFLUSH:
		flush_lines_clflush(p, end);
		break;
	}
	counters.flushed_lines += (end - p + LINE - 1) / LINE;
	RECORD(flush, addr, n);
}

void kr_pm_flush(struct kr_pm *pm, const void *addr, size_t n)
{
	if (n == 0)
		return;
	addr = writable(pm, addr);
	if (deferred && defer_flush(deferred, addr, n))
		return;
	flush_lines(addr, n);
	if (pm->mode == KR_MODE_PAGECACHE)
		sync_note(pm, addr, n);
}

void kr_pm_copy_nt(struct kr_pm *pm, void *dst, const void *src, size_t n)
{
	char *d = writable(pm, dst);
	const char *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	if (head > n)
		head = n;
	/* Unaligned edges go through the cache (recorded as stores, then flushed); the
	 * aligned body streams past it and is recorded as one nt copy. */
	if (head) {
		kr_pm_copy(pm, d, s, head);
		kr_pm_flush(pm, d, head);
	}
	size_t body = (n - head) & ~(size_t)15;
	for (size_t i = 0; i < body; i += 16)
		_mm_stream_si128((__m128i *)(d + head + i), _mm_loadu_si128((const __m128i *)(s + head + i)));
	if (body) {
		counters.bytes_written += body;
		counters.flushed_lines += (body + LINE - 1) / LINE;
		if (pm->mode == KR_MODE_PAGECACHE)
			sync_note(pm, d + head, body);
		RECORD(nt, d + head, body);
	}
	size_t tail = n - head - body;
	if (tail) {
		kr_pm_copy(pm, d + head + body, s + head + body, tail);
		kr_pm_flush(pm, d + head + body, tail);
	}
}

void kr_pm_lines_nt(struct kr_pm *pm, void *lines, const uint64_t *words, const void *body,
		    size_t n)
{
	long long *d = writable(pm, lines);
	const char *s = body;
	const struct kr_recorder *r = atomic_load_explicit(&recorder, memory_order_relaxed);
	/* The body starts 8 bytes into its line: one 8-byte streaming store (movnti), then
	 * three aligned 16-byte ones; the word is a store of its own. */
	for (size_t k = 0; k < n; k++, d += 8, s += 56) {
		long long v;
		memcpy(&v, s, 8);
		_mm_stream_si64(d + 1, v);
		for (int q = 0; q < 3; q++)
			_mm_stream_si128((__m128i *)(d + 2 + 2 * q), _mm_loadu_si128((const __m128i *)(s + 8 + 16 * q)));
		/* The recorder snapshots the live line: the body's version before the word. */
		if (__builtin_expect(r != NULL, 0) && r->nt)
			r->nt(r->ctx, d + 1, 56);
		_mm_stream_si64(d, (long long)words[k]);
		if (__builtin_expect(r != NULL, 0) && r->nt)
			r->nt(r->ctx, d, 8);
	}
	counters.bytes_written += n * LINE;
	counters.flushed_lines += n;
	if (pm->mode == KR_MODE_PAGECACHE && n)
		sync_note(pm, writable(pm, lines), n * LINE);
}

int kr_pm_fence(struct kr_pm *pm)
{
	RECORD(fence);
	if (flush_kind == FLUSH_CLFLUSH)
		_mm_mfence();
	else
		_mm_sfence();
	counters.fences++;
	if (pm->mode == KR_MODE_PAGECACHE)
		return sync_pending(pm);
	return KR_OK;
}

int kr_pm_persist(struct kr_pm *pm, const void *addr, size_t n)
{
	kr_pm_flush(pm, addr, n);
	return kr_pm_fence(pm);
}

int kr_pm_write_header(struct kr_pm *pm, void *const *copies, int n, const void *hdr, size_t len)
{
	uint64_t magic, zero = 0;
	memcpy(&magic, hdr, sizeof(magic));
	for (int i = 0; i < n; i++) {
		kr_pm_copy(pm, copies[i], &zero, sizeof(zero));
		kr_pm_copy(pm, (char *)copies[i] + sizeof(zero), (const char *)hdr + sizeof(zero),
			   len - sizeof(zero));
		kr_pm_flush(pm, copies[i], len);
	}
	int rc = kr_pm_fence(pm);
	for (int i = 0; i < n && rc == KR_OK; i++) {
		kr_pm_store64(pm, copies[i], magic);
		rc = kr_pm_persist(pm, copies[i], sizeof(magic));
	}
	return rc;
}

int kr_pm_persist_now(struct kr_pm *pm, const void *addr, size_t n)
{
	/* Neither the deferred list nor the msync list: the interrupted code may be updating
	 * either. */
	flush_lines(addr, n);
	RECORD(fence);
	_mm_mfence();
	counters.fences++;
	if (pm->mode != KR_MODE_PAGECACHE)
		return KR_OK;
	uintptr_t s = (uintptr_t)addr & ~(uintptr_t)4095, e = ((uintptr_t)addr + n + 4095) & ~(uintptr_t)4095;
	counters.msyncs++;
	return kr_msync((void *)s, e - s, MS_SYNC) == 0 ? KR_OK : KR_E_IO_SYNC;
}

int kr_pm_write_file(int fd, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;
	while (n) {
		ssize_t w = kr_pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return KR_E_IO;
		counters.bytes_written += (uint64_t)w;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return KR_OK;
}
