/*
 * libpmemobj/iterator_base.h - part of keratin-pmemobj, the libpmemobj-compatible interface
 * of keratin (see docs/COMPAT.md): walking every object of a pool.
 */
#ifndef LIBPMEMOBJ_ITERATOR_BASE_H
#define LIBPMEMOBJ_ITERATOR_BASE_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In no promised order; OID_NULL after the last object. */
PMEMOBJ_API PMEMoid pmemobj_first(PMEMobjpool *pop);
PMEMOBJ_API PMEMoid pmemobj_next(PMEMoid oid);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_ITERATOR_BASE_H */
