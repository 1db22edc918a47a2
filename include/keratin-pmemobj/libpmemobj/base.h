/*
 * libpmemobj/base.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): object ids, shared flags, persistence, versions, errors.
 */
#ifndef LIBPMEMOBJ_BASE_H
#define LIBPMEMOBJ_BASE_H 1

/* Older C++ compilers hide UINT64_MAX and friends without it. */
#ifndef __STDC_LIMIT_MACROS
#define __STDC_LIMIT_MACROS
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The library is built with -fvisibility=hidden: what these headers mark with PMEMOBJ_API
 * is exactly what libpmemobj.so.1 of keratin exports.
 */
#ifndef PMEMOBJ_API
#if defined(__GNUC__)
#define PMEMOBJ_API __attribute__((visibility("default")))
#else
#define PMEMOBJ_API
#endif
#endif

/* The API version these headers describe: libpmemobj 1.12's. */
#define PMEMOBJ_MAJOR_VERSION 2
#define PMEMOBJ_MINOR_VERSION 4

/* The largest object an allocation may ask for. */
#define PMEMOBJ_MAX_ALLOC_SIZE ((size_t)0x3FFDFFFC0)

typedef struct pmemobjpool PMEMobjpool;

/*
 * An object's persistent name: the low 64 bits of its pool's UUID and its offset in the
 * pool. Offset 0 is never an object, so a zero offset means "no object" (OID_NULL).
 */
typedef struct pmemoid {
	uint64_t pool_uuid_lo;
	uint64_t off;
} PMEMoid;

static const PMEMoid OID_NULL = { 0, 0 };
#define OID_IS_NULL(o) ((o).off == 0)
#define OID_EQUALS(lhs, rhs) \
	((lhs).off == (rhs).off && (lhs).pool_uuid_lo == (rhs).pool_uuid_lo)

/*
 * Flags of the x-variants (pmemobj_xalloc, pmemobj_tx_xadd_range, ...). Each family has
 * its own names for them (POBJ_XALLOC_*, POBJ_XADD_*, ...); they all map onto these bits.
 * The allocation class and the arena ride in the top two 16-bit fields.
 */
#define POBJ_FLAG_ZERO			(((uint64_t)1) << 0)
#define POBJ_FLAG_NO_FLUSH		(((uint64_t)1) << 1)
#define POBJ_FLAG_NO_SNAPSHOT		(((uint64_t)1) << 2)
#define POBJ_FLAG_ASSUME_INITIALIZED	(((uint64_t)1) << 3)
#define POBJ_FLAG_TX_NO_ABORT		(((uint64_t)1) << 4)

#define POBJ_CLASS_ID(id)	(((uint64_t)(id)) << 48)
#define POBJ_ARENA_ID(id)	(((uint64_t)(id)) << 32)

#define POBJ_XALLOC_CLASS_MASK	((((uint64_t)1 << 16) - 1) << 48)
#define POBJ_XALLOC_ARENA_MASK	((((uint64_t)1 << 16) - 1) << 32)
#define POBJ_XALLOC_ZERO	POBJ_FLAG_ZERO
#define POBJ_XALLOC_NO_FLUSH	POBJ_FLAG_NO_FLUSH
#define POBJ_XALLOC_NO_ABORT	POBJ_FLAG_TX_NO_ABORT

/* Flags of pmemobj_memcpy/memmove/memset and pmemobj_xpersist/xflush. */
#define PMEMOBJ_F_MEM_NODRAIN		(1U << 0)
#define PMEMOBJ_F_MEM_NONTEMPORAL	(1U << 1)
#define PMEMOBJ_F_MEM_TEMPORAL		(1U << 2)
#define PMEMOBJ_F_MEM_WC		(1U << 3)
#define PMEMOBJ_F_MEM_WB		(1U << 4)
#define PMEMOBJ_F_MEM_NOFLUSH		(1U << 5)
#define PMEMOBJ_F_RELAXED		(1U << 31)

/* Object id <-> address, type number, owning pool. */
PMEMOBJ_API PMEMobjpool *pmemobj_pool_by_ptr(const void *addr);
PMEMOBJ_API PMEMobjpool *pmemobj_pool_by_oid(PMEMoid oid);
PMEMOBJ_API void *pmemobj_direct(PMEMoid oid);
PMEMOBJ_API PMEMoid pmemobj_oid(const void *addr);
PMEMOBJ_API size_t pmemobj_alloc_usable_size(PMEMoid oid);
PMEMOBJ_API uint64_t pmemobj_type_num(PMEMoid oid);

#ifndef _WIN32
/*
 * pmemobj_direct() without a call: each thread remembers the last pool it resolved
 * (pool, uuid_lo) and the value of _pobj_cache_invalidate then. The runtime bumps that
 * counter whenever a pool closes, so a remembered pool is trusted only while the counter
 * is unchanged. A pool's base address plus oid.off is the object's address.
 *
 * Both variables belong to the runtime and are part of its ABI: binaries built against
 * libpmemobj's headers read them too.
 */
struct _pobj_pcache {
	PMEMobjpool *pop;
	uint64_t uuid_lo;
	int invalidate;
};

extern __thread struct _pobj_pcache _pobj_cached_pool;
extern int _pobj_cache_invalidate;

static inline void *
pmemobj_direct_inline(PMEMoid oid)
{
	struct _pobj_pcache *cache;

	if (oid.off == 0 || oid.pool_uuid_lo == 0)
		return NULL;

	cache = &_pobj_cached_pool;
	/* Another thread's pmemobj_close changes the counter: read it as an atomic (relaxed:
	 * a close racing with a use of the same pool is the program's error anyway). */
	int invalidate = __atomic_load_n(&_pobj_cache_invalidate, __ATOMIC_RELAXED);
	if (cache->invalidate != invalidate || cache->uuid_lo != oid.pool_uuid_lo) {
		cache->invalidate = invalidate;
		cache->pop = pmemobj_pool_by_oid(oid);
		if (cache->pop == NULL) {
			cache->uuid_lo = 0;
			return NULL;
		}
		cache->uuid_lo = oid.pool_uuid_lo;
	}
	return (void *)((uintptr_t)cache->pop + (uintptr_t)oid.off);
}

/* Inline by default, as libpmemobj does on Linux and FreeBSD. */
#ifndef PMEMOBJ_DIRECT_NON_INLINE
#define pmemobj_direct pmemobj_direct_inline
#endif
#endif /* _WIN32 */

/*
 * Transient state kept inside a persistent object (EXPERIMENTAL): a zeroed struct pmemvlt
 * next to the data; pmemobj_volatile() runs the constructor once per pool open. ptr comes
 * before size, as in the library (the manual's SYNOPSIS has them the other way round).
 */
struct pmemvlt {
	uint64_t runid;
};

#define PMEMvlt(T)			\
struct {				\
	struct pmemvlt vlt;		\
	T value;			\
}

PMEMOBJ_API void *pmemobj_volatile(PMEMobjpool *pop, struct pmemvlt *vlt, void *ptr,
		size_t size, int (*constr)(void *ptr, void *arg), void *arg);

/* Persistence of ranges the application wrote itself. */
PMEMOBJ_API void *pmemobj_memcpy_persist(PMEMobjpool *pop, void *dest, const void *src,
		size_t len);
PMEMOBJ_API void *pmemobj_memset_persist(PMEMobjpool *pop, void *dest, int c, size_t len);
PMEMOBJ_API void *pmemobj_memcpy(PMEMobjpool *pop, void *dest, const void *src, size_t len,
		unsigned flags);
PMEMOBJ_API void *pmemobj_memmove(PMEMobjpool *pop, void *dest, const void *src, size_t len,
		unsigned flags);
PMEMOBJ_API void *pmemobj_memset(PMEMobjpool *pop, void *dest, int c, size_t len,
		unsigned flags);
PMEMOBJ_API void pmemobj_persist(PMEMobjpool *pop, const void *addr, size_t len);
PMEMOBJ_API int pmemobj_xpersist(PMEMobjpool *pop, const void *addr, size_t len,
		unsigned flags);
PMEMOBJ_API void pmemobj_flush(PMEMobjpool *pop, const void *addr, size_t len);
PMEMOBJ_API int pmemobj_xflush(PMEMobjpool *pop, const void *addr, size_t len,
		unsigned flags);
PMEMOBJ_API void pmemobj_drain(PMEMobjpool *pop);

/* NULL if the library provides API major_required.minor_required, else the reason. */
PMEMOBJ_API const char *pmemobj_check_version(unsigned major_required,
		unsigned minor_required);

/* Replace the allocator the library uses for its DRAM (NULL keeps the default). */
PMEMOBJ_API void pmemobj_set_funcs(void *(*malloc_func)(size_t size),
		void (*free_func)(void *ptr),
		void *(*realloc_func)(void *ptr, size_t size),
		char *(*strdup_func)(const char *s));

typedef int (*pmemobj_constr)(PMEMobjpool *pop, void *ptr, void *arg);

/*
 * The iteration macros (POBJ_FOREACH*, POBJ_LIST_FOREACH*) call it first with their own
 * name, so that a runtime may report loops where they are unsafe; libpmemobj's release
 * build ignores it.
 */
PMEMOBJ_API void _pobj_debug_notice(const char *func_name, const char *file, int line);

/* The calling thread's last error message. */
PMEMOBJ_API const char *pmemobj_errormsg(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_BASE_H */
