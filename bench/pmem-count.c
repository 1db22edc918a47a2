/*
 * pmem-count.c - an LD_PRELOAD counter of libpmem's write-back calls, so that the
 * libpmemobj baseline reports the same persistence costs keratin counts in pm/pmem.c
 * (fences, cache lines written back, bytes written).
 *
 * libpmemobj writes persistent memory through libpmem: it takes pmem_flush, pmem_drain,
 * pmem_persist and pmem_memcpy/memmove/memset as its flush, drain and copy operations, and
 * those names resolve to the first definition in the process, this library's when it is
 * preloaded. Each wrapper counts and forwards to libpmem's own function (RTLD_NEXT), so
 * what libpmemobj does is unchanged; pmdk-bench finds pmem_count_get() with dlsym and
 * reports per-operation deltas over its timed loop. Timing runs do not preload it.
 *
 * Counted as keratin counts them:
 *   fences         pmem_drain, and the drain in pmem_persist and in a copy without
 *                  PMEM_F_MEM_NODRAIN;
 *   flushed lines  64-byte lines touched by a flushed range (pmem_flush, pmem_persist, and
 *                  a copy or fill without PMEM_F_MEM_NOFLUSH, non-temporal ones included:
 *                  those lines go to the media as well);
 *   written bytes  bytes of those ranges: a flush stands for the plain stores it writes
 *                  back, a copy for its own bytes. A copy with PMEM_F_MEM_NOFLUSH is
 *                  counted by the flush that must follow it, not twice.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pmem-count.h"

#define NOFLUSH (1u << 5) /* PMEM_F_MEM_NOFLUSH */
#define NODRAIN (1u << 0) /* PMEM_F_MEM_NODRAIN */

static _Thread_local struct pmem_count count;

static void *real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "pmem-count: libpmem has no %s\n", name);
		abort();
	}
	return f;
}

/* fn: libpmem's own definition of the wrapper it is used in (same signature). */
#define REAL(name)                                                                         \
	static __typeof__(&name) fn;                                                       \
	if (!fn)                                                                           \
		fn = (__typeof__(&name))real(#name)

static void count_range(const void *addr, size_t len)
{
	if (!len)
		return;
	uintptr_t s = (uintptr_t)addr & ~(uintptr_t)63, e = (uintptr_t)addr + len;
	count.flushed_lines += (e - s + 63) / 64;
	count.written_bytes += len;
}

static void count_copy(void *dst, size_t len, unsigned flags)
{
	if (!(flags & NOFLUSH))
		count_range(dst, len);
	if (!(flags & (NODRAIN | NOFLUSH)))
		count.fences++;
}

void pmem_count_get(struct pmem_count *out) { *out = count; }

void pmem_flush(const void *addr, size_t len)
{
	REAL(pmem_flush);
	count_range(addr, len);
	fn(addr, len);
}

void pmem_drain(void)
{
	REAL(pmem_drain);
	count.fences++;
	fn();
}

void pmem_persist(const void *addr, size_t len)
{
	REAL(pmem_persist);
	count_range(addr, len);
	count.fences++;
	fn(addr, len);
}

int pmem_deep_flush(const void *addr, size_t len)
{
	REAL(pmem_deep_flush);
	count_range(addr, len);
	return fn(addr, len);
}

void *pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
	REAL(pmem_memcpy);
	count_copy(dst, len, flags);
	return fn(dst, src, len, flags);
}

void *pmem_memmove(void *dst, const void *src, size_t len, unsigned flags)
{
	REAL(pmem_memmove);
	count_copy(dst, len, flags);
	return fn(dst, src, len, flags);
}

void *pmem_memset(void *dst, int c, size_t len, unsigned flags)
{
	REAL(pmem_memset);
	count_copy(dst, len, flags);
	return fn(dst, c, len, flags);
}
