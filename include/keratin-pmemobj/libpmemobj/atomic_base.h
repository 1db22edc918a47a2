/*
 * libpmemobj/atomic_base.h - part of keratin-pmemobj, the libpmemobj-compatible interface
 * of keratin (see docs/COMPAT.md): allocations atomic on their own, outside transactions.
 */
#ifndef LIBPMEMOBJ_ATOMIC_BASE_H
#define LIBPMEMOBJ_ATOMIC_BASE_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The flags pmemobj_xalloc accepts. */
#define POBJ_XALLOC_VALID_FLAGS	(POBJ_XALLOC_ZERO | POBJ_XALLOC_CLASS_MASK)

/*
 * Each call either completes or, after a crash, never happened. The new oid is stored
 * into *oidp (which may itself be in the pool) as part of the same atomic step.
 */
PMEMOBJ_API int pmemobj_alloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size,
		uint64_t type_num, pmemobj_constr constructor, void *arg);
PMEMOBJ_API int pmemobj_xalloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size,
		uint64_t type_num, uint64_t flags, pmemobj_constr constructor, void *arg);
PMEMOBJ_API int pmemobj_zalloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size,
		uint64_t type_num);
PMEMOBJ_API int pmemobj_realloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size,
		uint64_t type_num);
PMEMOBJ_API int pmemobj_zrealloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size,
		uint64_t type_num);
PMEMOBJ_API int pmemobj_strdup(PMEMobjpool *pop, PMEMoid *oidp, const char *s,
		uint64_t type_num);
PMEMOBJ_API int pmemobj_wcsdup(PMEMobjpool *pop, PMEMoid *oidp, const wchar_t *s,
		uint64_t type_num);
PMEMOBJ_API void pmemobj_free(PMEMoid *oidp);

/* What pmemobj_defrag looked at and what it moved. */
struct pobj_defrag_result {
	size_t total;
	size_t relocated;
};

PMEMOBJ_API int pmemobj_defrag(PMEMobjpool *pop, PMEMoid **oidv, size_t oidcnt,
		struct pobj_defrag_result *result);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_ATOMIC_BASE_H */
