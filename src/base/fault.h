/*
 * fault.h - the choke points where keratin asks the system for memory, mappings and
 * durable storage, with countdown fault injection for tests.
 *
 * Every call of the library's persistence layer and of the pool, region and map open and
 * create paths to malloc/calloc/realloc/strdup, mmap, msync, pwrite, posix_fallocate and
 * ftruncate, of the media layer's bad-block list and poison emulation (write, fsync,
 * fallocate with a mode, mprotect), of write tracking (its buffers and mprotect) and of
 * keratin-fs's mkfs, mount and operations goes through one wrapper here, so a test can make the Nth such call fail
 * (kr_fault_countdown) and see that every caller turns the failure into a clean error
 * code, leaks nothing and leaves its file either absent or sound. A failed call returns
 * what the system call returns on failure, with errno set (ENOMEM for memory and
 * mappings and mprotect, EIO for msync, pwrite, write and fsync, ENOSPC for fallocate and
 * ftruncate).
 *
 * Always compiled in: disarmed, a wrapper costs one relaxed atomic load and a branch that
 * is never taken. The hook is internal (no KR_API): only programs linked against the
 * static library, i.e. keratin's own tests, can arm it.
 */
#ifndef KR_FAULT_H
#define KR_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Arms the countdown: the nth wrapped call from now (n >= 1) fails, once; 0 disarms it.
 * Counts calls from every thread. */
void kr_fault_countdown(uint64_t n);
/* Calls counted since the last kr_fault_countdown, and whether the armed one has failed. */
uint64_t kr_fault_calls(void);
int kr_fault_fired(void);

void *kr_malloc(size_t n);
void *kr_calloc(size_t n, size_t size);
/* kr_calloc at an address that is a multiple of align (a power of two, at least a pointer). */
void *kr_calloc_aligned(size_t align, size_t n, size_t size);
void *kr_realloc(void *p, size_t n);
char *kr_strdup(const char *s);
#ifdef KR_DEBUG_INVARIANTS
/* The calls of the four above this thread has made: code that must not allocate (a signal
 * handler) compares the count before and after. */
uint64_t kr_alloc_count(void);
#endif
void *kr_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int kr_msync(void *addr, size_t len, int flags);
/* fdatasync(2) of a pool's file (page-cache mode's fence): EIO. */
int kr_fdatasync(int fd);
/* sync_file_range(2) of [off, off+n): starts its write-back, and with wait waits for all of
 * it to complete (no device flush either way): EIO. */
int kr_sync_file_range(int fd, off_t off, off_t n, int wait);
ssize_t kr_pwrite(int fd, const void *buf, size_t n, off_t off);
/* Returns an error number like posix_fallocate (0 on success). */
int kr_fallocate(int fd, off_t off, off_t len);
int kr_ftruncate(int fd, off_t len);
/* fallocate(2) with a mode (FALLOC_FL_PUNCH_HOLE ...): -1 with errno ENOSPC when failed. */
int kr_fallocate_mode(int fd, int mode, off_t off, off_t len);
/* write(2) and fsync(2) of small files beside a pool (the bad-block list): EIO. */
ssize_t kr_write(int fd, const void *buf, size_t n);
int kr_fsync(int fd);
/* mprotect(2) of a mapping's pages (poison emulation, write tracking): ENOMEM. */
int kr_mprotect(void *addr, size_t len, int prot);

#endif
