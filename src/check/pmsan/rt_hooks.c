/*
 * rt_hooks.c - the pmsan runtime's hooks for memory: the instruction hooks the pass inserts
 * (stores, loads, cache-line flushes, fences) and the library-call hooks (hooks.def) that
 * map and unmap pools, persist, and copy or write for the caller (libpmem, libpmemobj,
 * libc). Each becomes a store, flush or fence event, which this file hands to the rules
 * below it: the freed-object check and the transaction model (rt_tx.c), the crash images
 * (rt_image.c), then the thread's record (rt_track.c). libpmemobj's transaction and
 * allocation hooks are rt_tx.c's own, and keratin's hooks rt_kr.c's.
 *
 * The events live here, above every rule, rather than beside the records in rt_track.c:
 * a store must ask the transaction layer whether it is a transaction's before it becomes a
 * rule 1 record, and a fence must cut crash images before the record forgets its stores,
 * so the one place that knows the order of the rules is the one that sees them all.
 *
 * Locking: with a check command set, every store and flush holds the shared side of the
 * global lock, and a fence that cuts crash images its exclusive side, so that no thread
 * stores while a pool is copied (rt_image.c).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#include "pmsan.h"

#define MEM_NODRAIN (1u << 0) /* PMEM_F_MEM_NODRAIN, PMEMOBJ_F_MEM_NODRAIN */
#define MEM_NOFLUSH (1u << 5) /* PMEM_F_MEM_NOFLUSH, PMEMOBJ_F_MEM_NOFLUSH */
#define LINE 64u

typedef const struct pmsan_loc loc_t;

static pthread_rwlock_t big = PTHREAD_RWLOCK_INITIALIZER;

/* The exclusive side of the global lock is wanted only by crash images. */
static void hold(struct pm_thread *t)
{
	if (pmsan_opt.reorder != REORDER_NONE)
		pthread_rwlock_rdlock(&big);
	pthread_mutex_lock(&t->lock);
}

static void release(struct pm_thread *t)
{
	pthread_mutex_unlock(&t->lock);
	if (pmsan_opt.reorder != REORDER_NONE)
		pthread_rwlock_unlock(&big);
}

static size_t file_size(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* ---- events, shared by the instruction hooks and the library-call hooks */

static void pmsan_store_event(uintptr_t a, uint64_t size, uint64_t value, loc_t *loc,
			      unsigned flags)
{
	if (!pmsan_active || size == 0)
		return;
	const struct pm_range *r = pmsan_range_find(a, a + size);
	if (r == NULL)
		return;
	struct pm_thread *t = pmsan_self();
	if (a < r->lo) {
		size -= r->lo - a;
		a = r->lo;
	}
	if (a + size > r->hi)
		size = r->hi - a;
	if (atomic_load_explicit(&__pmsan_watch_loads, memory_order_relaxed) && !t->in_alloc)
		pmsan_check_freed(t, r, a, size, loc, "store to");
	/* Transient state by the program's own declaration: pointers to DRAM are its point. */
	if (pmsan_volatile_covers(a, a + size))
		return;
	if ((flags & PMSAN_F_HASVAL) && size == 8) {
		const char *what = pmsan_volatile_place(t, value);
		if (what == NULL && pmsan_range_find(value, value + 1))
			what = "a persistent mapping (a raw address, invalid once remapped)";
		if (what)
			pmsan_report(PMSAN_W_VPTR, loc, 1, "stores %p, a pointer into %s, in persistent memory",
				     (void *)value, what);
	}
	if (r->kind == RANGE_KERATIN) {
		pmsan_report(PMSAN_R2, loc, 1,
			     "store of %llu bytes straight into a keratin pool; objects change only through "
			     "kr_tx_add/kr_tx_open buffers or kr_update",
			     (unsigned long long)size);
		return;
	}
	if (!(flags & PMSAN_F_DIRECT) && pmsan_tx_store(t, a, size, loc))
		return;
	hold(t);
	pmsan_record_store(t, a, size, loc, flags);
	release(t);
}

static void pmsan_flush_event(uintptr_t lo, uintptr_t hi, loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	hold(t);
	pmsan_record_flush(t, lo, hi, loc);
	release(t);
}

static void pmsan_fence_event(loc_t *loc)
{
	if (!pmsan_active)
		return;
	struct pm_thread *t = pmsan_self();
	/* Inside an atomic allocation's constructor the new object is unreachable until the
	 * allocator publishes it (with its own fence, pmsan_alloc_published), so the order of
	 * its stores against fences in the constructor does not matter yet. */
	if (t->in_alloc)
		return;
	if (pmsan_opt.reorder != REORDER_NONE && t->stores.n) {
		/* Crash images read the pool: no thread may store meanwhile. */
		pthread_rwlock_wrlock(&big);
		pthread_mutex_lock(&t->lock);
		pmsan_reorder_at_fence(t, loc);
		pmsan_record_fence(t, loc);
		pthread_mutex_unlock(&t->lock);
		pthread_rwlock_unlock(&big);
		return;
	}
	pthread_mutex_lock(&t->lock);
	pmsan_record_fence(t, loc);
	pthread_mutex_unlock(&t->lock);
}

/* ---- the hooks the pass inserts */

void __pmsan_store(void *addr, uint64_t size, uint64_t value, const struct pmsan_loc *loc,
		   uint32_t flags)
{
	pmsan_store_event((uintptr_t)addr, size, value, loc, flags);
}

/* Loads matter for use after free only. The common case - nothing freed where the load
 * reads, no free pending in the thread's transaction - takes no lock, and makes no record
 * for a thread that has none. */
void __pmsan_load(const void *addr, uint64_t size, const struct pmsan_loc *loc)
{
	if (!pmsan_active)
		return;
	uintptr_t a = (uintptr_t)addr;
	const struct pm_range *r = pmsan_range_find(a, a + size);
	if (r == NULL)
		return;
	struct pm_thread *t = pmsan_self_if_any();
	if (!pmsan_freed_test(r, a, a + size) && !(t && t->tx && pmsan_tx_pending(t, a, a + size)))
		return;
	t = pmsan_self();
	if (!t->in_alloc)
		pmsan_check_freed(t, r, a, size, loc, "load from");
}

void __pmsan_flush_line(const void *addr, const struct pmsan_loc *loc)
{
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(LINE - 1);
	pmsan_flush_event(lo, lo + LINE, loc);
}

void __pmsan_fence(const struct pmsan_loc *loc)
{
	pmsan_fence_event(loc);
}

/* ---- mappings */

void __pmsan_post_pmem_map_file(void *ret, const char *path, size_t len, int flags, unsigned mode,
				size_t *mapped_lenp, int *is_pmemp, loc_t *loc)
{
	if (ret == NULL)
		return;
	size_t n = mapped_lenp ? *mapped_lenp : len ? len : file_size(path);
	pmsan_range_add((uintptr_t)ret, (uintptr_t)ret + n, RANGE_PMEM, path);
}

void __pmsan_pre_pmem_unmap(void *addr, size_t len, loc_t *loc)
{
	pmsan_range_remove((uintptr_t)addr, loc);
}

void __pmsan_post_pmemobj_create(void *pop, const char *path, const char *layout, size_t poolsize,
				 unsigned mode, loc_t *loc)
{
	if (pop == NULL)
		return;
	size_t n = file_size(path);
	pmsan_range_add((uintptr_t)pop, (uintptr_t)pop + (n ? n : poolsize), RANGE_PMEMOBJ, path);
}

void __pmsan_post_pmemobj_open(void *pop, const char *path, const char *layout, loc_t *loc)
{
	if (pop)
		pmsan_range_add((uintptr_t)pop, (uintptr_t)pop + file_size(path), RANGE_PMEMOBJ, path);
}

void __pmsan_pre_pmemobj_close(void *pop, loc_t *loc)
{
	if (!pmsan_active)
		return;
	const struct pm_range *r = pmsan_range_find((uintptr_t)pop, (uintptr_t)pop + 1);
	if (r)
		pmsan_range_remove(r->lo, loc);
}

/* pmemobj_volatile: [ptr, ptr + size) holds transient state, documented as such. It is
 * marked before the call, since the constructor the call may run stores into it, and
 * stays marked if the constructor fails: the program declared it transient all the same. */
void __pmsan_pre_pmemobj_volatile(void *pop, void *vlt, void *ptr, size_t size, void *constr,
				  void *arg, loc_t *loc)
{
	(void)pop, (void)vlt, (void)constr, (void)arg, (void)loc;
	if (pmsan_active && ptr && size)
		pmsan_volatile_mark((uintptr_t)ptr, (uintptr_t)ptr + size, 1);
}

/* ---- flushes, fences and copies done by the libraries */

/* A persist call: its flush, then its fence. A persist of memory that is not persistent
 * (rule 1a) orders nothing the checker follows, so it is no fence here. */
static void flush_fence(const void *addr, size_t len, loc_t *loc)
{
	uintptr_t a = (uintptr_t)addr;
	pmsan_flush_event(a, a + len, loc);
	if (pmsan_range_find(a, a + len))
		pmsan_fence_event(loc);
}

void __pmsan_pre_pmem_persist(const void *addr, size_t len, loc_t *loc)
{
	flush_fence(addr, len, loc);
}

void __pmsan_pre_pmem_deep_persist(const void *addr, size_t len, loc_t *loc)
{
	flush_fence(addr, len, loc);
}

void __pmsan_pre_pmem_msync(const void *addr, size_t len, loc_t *loc)
{
	flush_fence(addr, len, loc);
}

void __pmsan_pre_pmem_flush(const void *addr, size_t len, loc_t *loc)
{
	pmsan_flush_event((uintptr_t)addr, (uintptr_t)addr + len, loc);
}

void __pmsan_pre_pmem_deep_flush(const void *addr, size_t len, loc_t *loc)
{
	pmsan_flush_event((uintptr_t)addr, (uintptr_t)addr + len, loc);
}

void __pmsan_pre_pmem_drain(loc_t *loc)
{
	pmsan_fence_event(loc);
}

void __pmsan_pre_pmem_deep_drain(const void *addr, size_t len, loc_t *loc)
{
	pmsan_fence_event(loc);
}

void __pmsan_pre_pmemobj_persist(void *pop, const void *addr, size_t len, loc_t *loc)
{
	flush_fence(addr, len, loc);
}

void __pmsan_pre_pmemobj_xpersist(void *pop, const void *addr, size_t len, unsigned flags,
				  loc_t *loc)
{
	flush_fence(addr, len, loc);
}

void __pmsan_pre_pmemobj_flush(void *pop, const void *addr, size_t len, loc_t *loc)
{
	pmsan_flush_event((uintptr_t)addr, (uintptr_t)addr + len, loc);
}

void __pmsan_pre_pmemobj_xflush(void *pop, const void *addr, size_t len, unsigned flags,
				loc_t *loc)
{
	pmsan_flush_event((uintptr_t)addr, (uintptr_t)addr + len, loc);
}

void __pmsan_pre_pmemobj_drain(void *pop, loc_t *loc)
{
	pmsan_fence_event(loc);
}

/* A library copy: the source is read, the destination stored (old bytes recorded now).
 * Inside a transaction it is a deliberate write around the undo log (an append past the
 * end of a log, say): it persists itself and no rollback is meant to undo it, so it is
 * held to the flush rules, not to rule 2. */
static void copy_begin(void *dst, const void *src, size_t len, loc_t *loc)
{
	if (src)
		__pmsan_load(src, len, loc);
	pmsan_store_event((uintptr_t)dst, len, 0, loc, PMSAN_F_DIRECT);
}

/* ... and after it, the flush and fence that the call's flags ask for. */
static void copy_end(void *dst, size_t len, unsigned flags, loc_t *loc)
{
	if (flags & MEM_NOFLUSH)
		return;
	pmsan_flush_event((uintptr_t)dst, (uintptr_t)dst + len, loc);
	if (!(flags & MEM_NODRAIN))
		pmsan_fence_event(loc);
}

#define COPY_HOOKS(name, flags)                                                                   \
	void __pmsan_pre_##name(void *dst, const void *src, size_t len, loc_t *loc)               \
	{                                                                                         \
		copy_begin(dst, src, len, loc);                                                   \
	}                                                                                         \
	void __pmsan_post_##name(void *ret, void *dst, const void *src, size_t len, loc_t *loc)   \
	{                                                                                         \
		copy_end(dst, len, flags, loc);                                                   \
	}
COPY_HOOKS(pmem_memcpy_persist, 0)
COPY_HOOKS(pmem_memmove_persist, 0)
COPY_HOOKS(pmem_memcpy_nodrain, MEM_NODRAIN)
COPY_HOOKS(pmem_memmove_nodrain, MEM_NODRAIN)

#define SET_HOOKS(name, flags)                                                                    \
	void __pmsan_pre_##name(void *dst, int c, size_t len, loc_t *loc)                         \
	{                                                                                         \
		copy_begin(dst, NULL, len, loc);                                                  \
	}                                                                                         \
	void __pmsan_post_##name(void *ret, void *dst, int c, size_t len, loc_t *loc)             \
	{                                                                                         \
		copy_end(dst, len, flags, loc);                                                   \
	}
SET_HOOKS(pmem_memset_persist, 0)
SET_HOOKS(pmem_memset_nodrain, MEM_NODRAIN)

void __pmsan_pre_pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags, loc_t *loc)
{
	copy_begin(dst, src, len, loc);
}

void __pmsan_post_pmem_memcpy(void *ret, void *dst, const void *src, size_t len, unsigned flags,
			      loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

void __pmsan_pre_pmem_memmove(void *dst, const void *src, size_t len, unsigned flags, loc_t *loc)
{
	copy_begin(dst, src, len, loc);
}

void __pmsan_post_pmem_memmove(void *ret, void *dst, const void *src, size_t len, unsigned flags,
			       loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

void __pmsan_pre_pmem_memset(void *dst, int c, size_t len, unsigned flags, loc_t *loc)
{
	copy_begin(dst, NULL, len, loc);
}

void __pmsan_post_pmem_memset(void *ret, void *dst, int c, size_t len, unsigned flags, loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

void __pmsan_pre_pmemobj_memcpy_persist(void *pop, void *dst, const void *src, size_t len,
					loc_t *loc)
{
	copy_begin(dst, src, len, loc);
}

void __pmsan_post_pmemobj_memcpy_persist(void *ret, void *pop, void *dst, const void *src,
					 size_t len, loc_t *loc)
{
	copy_end(dst, len, 0, loc);
}

void __pmsan_pre_pmemobj_memset_persist(void *pop, void *dst, int c, size_t len, loc_t *loc)
{
	copy_begin(dst, NULL, len, loc);
}

void __pmsan_post_pmemobj_memset_persist(void *ret, void *pop, void *dst, int c, size_t len,
					 loc_t *loc)
{
	copy_end(dst, len, 0, loc);
}

void __pmsan_pre_pmemobj_memcpy(void *pop, void *dst, const void *src, size_t len, unsigned flags,
				loc_t *loc)
{
	copy_begin(dst, src, len, loc);
}

void __pmsan_post_pmemobj_memcpy(void *ret, void *pop, void *dst, const void *src, size_t len,
				 unsigned flags, loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

void __pmsan_pre_pmemobj_memmove(void *pop, void *dst, const void *src, size_t len,
				 unsigned flags, loc_t *loc)
{
	copy_begin(dst, src, len, loc);
}

void __pmsan_post_pmemobj_memmove(void *ret, void *pop, void *dst, const void *src, size_t len,
				  unsigned flags, loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

void __pmsan_pre_pmemobj_memset(void *pop, void *dst, int c, size_t len, unsigned flags,
				loc_t *loc)
{
	copy_begin(dst, NULL, len, loc);
}

void __pmsan_post_pmemobj_memset(void *ret, void *pop, void *dst, int c, size_t len,
				 unsigned flags, loc_t *loc)
{
	copy_end(dst, len, flags, loc);
}

/* ---- libc writers */

void __pmsan_pre_strcpy(char *dst, const char *src, loc_t *loc)
{
	pmsan_store_event((uintptr_t)dst, strlen(src) + 1, 0, loc, 0);
}

void __pmsan_pre_strncpy(char *dst, const char *src, size_t n, loc_t *loc)
{
	pmsan_store_event((uintptr_t)dst, n, 0, loc, 0);
}

void __pmsan_pre_strcat(char *dst, const char *src, loc_t *loc)
{
	pmsan_store_event((uintptr_t)dst + strlen(dst), strlen(src) + 1, 0, loc, 0);
}

void __pmsan_pre_strncat(char *dst, const char *src, size_t n, loc_t *loc)
{
	size_t k = strnlen(src, n);
	pmsan_store_event((uintptr_t)dst + strlen(dst), k + 1, 0, loc, 0);
}

/* read and fread: recorded after the call, for the bytes actually read (no old bytes). */
static void stored_after(void *buf, long n, loc_t *loc)
{
	if (n > 0)
		pmsan_store_event((uintptr_t)buf, (uint64_t)n, 0, loc, 0);
}

void __pmsan_post_read(long ret, int fd, void *buf, size_t count, loc_t *loc)
{
	stored_after(buf, ret, loc);
}

void __pmsan_post_pread(long ret, int fd, void *buf, size_t count, long off, loc_t *loc)
{
	stored_after(buf, ret, loc);
}

void __pmsan_post_fread(size_t ret, void *ptr, size_t size, size_t nmemb, void *stream,
			loc_t *loc)
{
	stored_after(ptr, (long)(ret * size), loc);
}
