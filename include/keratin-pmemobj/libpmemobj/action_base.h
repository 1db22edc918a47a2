/*
 * libpmemobj/action_base.h - part of keratin-pmemobj, the libpmemobj-compatible interface
 * of keratin (see docs/COMPAT.md): reservations and deferred actions, published together.
 */
#ifndef LIBPMEMOBJ_ACTION_BASE_H
#define LIBPMEMOBJ_ACTION_BASE_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pobj_action_type {
	POBJ_ACTION_TYPE_HEAP,	/* a reservation or a deferred free */
	POBJ_ACTION_TYPE_MEM,	/* a deferred 8-byte store (pmemobj_set_value) */

	POBJ_MAX_ACTION_TYPE
};

struct pobj_action_heap {
	uint64_t offset;	/* of the reserved object */
	uint64_t usable_size;
};

/*
 * One pending action, filled in by the runtime and opaque to the application beyond what
 * is named here. 128 bytes: the caller owns the storage (often an array on its stack), so
 * the size is ABI.
 */
struct pobj_action {
	enum pobj_action_type type;
	uint32_t data[3];
	__extension__ union {
		struct pobj_action_heap heap;
		uint64_t data2[14];
	};
};

/* The flags pmemobj_xreserve accepts. */
#define POBJ_ACTION_XRESERVE_VALID_FLAGS \
	(POBJ_XALLOC_CLASS_MASK | POBJ_XALLOC_ARENA_MASK | POBJ_XALLOC_ZERO)

PMEMOBJ_API PMEMoid pmemobj_reserve(PMEMobjpool *pop, struct pobj_action *act,
		size_t size, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_xreserve(PMEMobjpool *pop, struct pobj_action *act,
		size_t size, uint64_t type_num, uint64_t flags);
PMEMOBJ_API void pmemobj_set_value(PMEMobjpool *pop, struct pobj_action *act,
		uint64_t *ptr, uint64_t value);
PMEMOBJ_API void pmemobj_defer_free(PMEMobjpool *pop, PMEMoid oid, struct pobj_action *act);

/* Make all actv[] durable at once; or hand them to the thread's transaction. */
PMEMOBJ_API int pmemobj_publish(PMEMobjpool *pop, struct pobj_action *actv,
		size_t actvcnt);
PMEMOBJ_API int pmemobj_tx_publish(struct pobj_action *actv, size_t actvcnt);
PMEMOBJ_API int pmemobj_tx_xpublish(struct pobj_action *actv, size_t actvcnt,
		uint64_t flags);

/* Drop actions never published, returning what they reserved. */
PMEMOBJ_API void pmemobj_cancel(PMEMobjpool *pop, struct pobj_action *actv, size_t actvcnt);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_ACTION_BASE_H */
