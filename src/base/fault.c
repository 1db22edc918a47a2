/*
 * fault.c - the system-call choke points and their countdown (see fault.h).
 *
 * One process-wide countdown: `armed` holds the number of the call that must fail, `calls`
 * counts wrapped calls since arming. The call whose count equals `armed` fails and
 * disarms it (transient faults: the caller's retry or cleanup runs normally).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"

static _Atomic uint64_t armed, calls;
static _Atomic int fired;

void kr_fault_countdown(uint64_t n)
{
	atomic_store(&armed, 0);
	atomic_store(&calls, 0);
	atomic_store(&fired, 0);
	atomic_store(&armed, n);
}

uint64_t kr_fault_calls(void) { return atomic_load(&calls); }

int kr_fault_fired(void) { return atomic_load(&fired); }

/* True if this call is the one to fail (errno is then set to err). */
static int fault_now(int err)
{
	if (__builtin_expect(atomic_load_explicit(&armed, memory_order_relaxed) == 0, 1))
		return 0;
	uint64_t n = atomic_fetch_add(&calls, 1) + 1;
	uint64_t want = n;
	if (!atomic_compare_exchange_strong(&armed, &want, 0))
		return 0;
	atomic_store(&fired, 1);
	errno = err;
	return 1;
}

#ifdef KR_DEBUG_INVARIANTS
static _Thread_local uint64_t allocs;
uint64_t kr_alloc_count(void) { return allocs; }
#define COUNT_ALLOC() (allocs++)
#else
#define COUNT_ALLOC() ((void)0)
#endif

void *kr_malloc(size_t n) { return COUNT_ALLOC(), fault_now(ENOMEM) ? NULL : malloc(n); }

void *kr_calloc(size_t n, size_t size) { return COUNT_ALLOC(), fault_now(ENOMEM) ? NULL : calloc(n, size); }

void *kr_calloc_aligned(size_t align, size_t n, size_t size)
{
	COUNT_ALLOC();
	void *p = NULL;
	if (fault_now(ENOMEM) || (size && n > SIZE_MAX / size) ||
	    posix_memalign(&p, align, n * size != 0 ? n * size : align) != 0)
		return NULL;
	memset(p, 0, n * size);
	return p;
}

void *kr_realloc(void *p, size_t n) { return COUNT_ALLOC(), fault_now(ENOMEM) ? NULL : realloc(p, n); }

char *kr_strdup(const char *s) { return COUNT_ALLOC(), fault_now(ENOMEM) ? NULL : strdup(s); }

void *kr_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return fault_now(ENOMEM) ? MAP_FAILED : mmap(addr, len, prot, flags, fd, off);
}

int kr_msync(void *addr, size_t len, int flags)
{
	return fault_now(EIO) ? -1 : msync(addr, len, flags);
}

int kr_fdatasync(int fd)
{
	return fault_now(EIO) ? -1 : fdatasync(fd);
}

int kr_sync_file_range(int fd, off_t off, off_t n, int wait)
{
	unsigned flags = SYNC_FILE_RANGE_WRITE;
	if (wait)
		flags |= SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER;
	return fault_now(EIO) ? -1 : sync_file_range(fd, off, n, flags);
}

ssize_t kr_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return fault_now(EIO) ? -1 : pwrite(fd, buf, n, off);
}

int kr_fallocate(int fd, off_t off, off_t len)
{
	return fault_now(ENOSPC) ? ENOSPC : posix_fallocate(fd, off, len);
}

int kr_ftruncate(int fd, off_t len)
{
	return fault_now(ENOSPC) ? -1 : ftruncate(fd, len);
}

int kr_fallocate_mode(int fd, int mode, off_t off, off_t len)
{
	return fault_now(ENOSPC) ? -1 : fallocate(fd, mode, off, len);
}

ssize_t kr_write(int fd, const void *buf, size_t n)
{
	return fault_now(EIO) ? -1 : write(fd, buf, n);
}

int kr_fsync(int fd)
{
	return fault_now(EIO) ? -1 : fsync(fd);
}

int kr_mprotect(void *addr, size_t len, int prot)
{
	return fault_now(ENOMEM) ? -1 : mprotect(addr, len, prot);
}
