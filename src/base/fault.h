/*
 * fault.h - the choke points where keratin asks the system for memory, mappings and
 * durable storage, with countdown fault injection for tests.
 *
 * Every call of the library's persistence layer and of the pool, region and map open and
 * create paths to malloc/calloc/realloc/strdup, mmap, msync, pwrite, posix_fallocate and
 * ftruncate goes through one wrapper here, so a test can make the Nth such call fail
 * (kr_fault_countdown) and see that every caller turns the failure into a clean error
 * code, leaks nothing and leaves its file either absent or sound. A failed call returns
 * what the system call returns on failure, with errno set (ENOMEM for memory and
 * mappings, EIO for msync and pwrite, ENOSPC for posix_fallocate and ftruncate).
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
void *kr_realloc(void *p, size_t n);
char *kr_strdup(const char *s);
void *kr_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int kr_msync(void *addr, size_t len, int flags);
ssize_t kr_pwrite(int fd, const void *buf, size_t n, off_t off);
/* Returns an error number like posix_fallocate (0 on success). */
int kr_fallocate(int fd, off_t off, off_t len);
int kr_ftruncate(int fd, off_t len);

#endif
