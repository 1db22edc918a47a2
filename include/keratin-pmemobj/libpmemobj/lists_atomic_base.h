/*
 * libpmemobj/lists_atomic_base.h - part of keratin-pmemobj, the libpmemobj-compatible
 * interface of keratin (see docs/COMPAT.md): persistent lists, each change atomic.
 */
#ifndef LIBPMEMOBJ_LISTS_ATOMIC_BASE_H
#define LIBPMEMOBJ_LISTS_ATOMIC_BASE_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * head points to the list's head (a PMEMoid of the first element followed by a PMEMmutex,
 * see POBJ_LIST_HEAD); pe_offset is where the element's (next, prev) pair of PMEMoids sits
 * in it. dest and before choose the place: before or after dest, or with dest OID_NULL at
 * the head (before = 1) or tail (before = 0).
 */
PMEMOBJ_API int pmemobj_list_insert(PMEMobjpool *pop, size_t pe_offset, void *head,
		PMEMoid dest, int before, PMEMoid oid);
PMEMOBJ_API PMEMoid pmemobj_list_insert_new(PMEMobjpool *pop, size_t pe_offset,
		void *head, PMEMoid dest, int before, size_t size, uint64_t type_num,
		pmemobj_constr constructor, void *arg);
PMEMOBJ_API int pmemobj_list_remove(PMEMobjpool *pop, size_t pe_offset, void *head,
		PMEMoid oid, int free);
PMEMOBJ_API int pmemobj_list_move(PMEMobjpool *pop, size_t pe_old_offset, void *head_old,
		size_t pe_new_offset, void *head_new, PMEMoid dest, int before, PMEMoid oid);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_LISTS_ATOMIC_BASE_H */
