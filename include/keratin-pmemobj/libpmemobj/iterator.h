/*
 * libpmemobj/iterator.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): walking the objects of a pool by type.
 */
#ifndef LIBPMEMOBJ_ITERATOR_H
#define LIBPMEMOBJ_ITERATOR_H 1

#include <libpmemobj/iterator_base.h>
#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first object of type number type_num at or after oid in the pool's order. */
static inline PMEMoid
_pobj_skip_to_type(PMEMoid oid, uint64_t type_num)
{
	while (oid.off != 0 && pmemobj_type_num(oid) != type_num)
		oid = pmemobj_next(oid);
	return oid;
}

static inline PMEMoid
POBJ_FIRST_TYPE_NUM(PMEMobjpool *pop, uint64_t type_num)
{
	return _pobj_skip_to_type(pmemobj_first(pop), type_num);
}

/* The next object with the same type number as o. */
static inline PMEMoid
POBJ_NEXT_TYPE_NUM(PMEMoid o)
{
	return _pobj_skip_to_type(pmemobj_next(o), pmemobj_type_num(o));
}

#define POBJ_FIRST(pop, t)	((TOID(t))POBJ_FIRST_TYPE_NUM((pop), TOID_TYPE_NUM(t)))
#define POBJ_NEXT(o)		((__typeof__(o))POBJ_NEXT_TYPE_NUM((o).oid))

/*
 * Loops over all objects, or over those of var's type. The _SAFE forms read the next
 * handle before the body runs, so the body may free the current object. Each loop first
 * reports itself to _pobj_debug_notice(), as the list loops do.
 */
#define POBJ_FOREACH(pop, varoid)					\
	for (_pobj_debug_notice("POBJ_FOREACH", __FILE__, __LINE__),	\
	     (varoid) = pmemobj_first(pop);				\
	     (varoid).off != 0;						\
	     (varoid) = pmemobj_next(varoid))

#define POBJ_FOREACH_SAFE(pop, varoid, nvaroid)				\
	for (_pobj_debug_notice("POBJ_FOREACH_SAFE", __FILE__, __LINE__),	\
	     (varoid) = pmemobj_first(pop);				\
	     (varoid).off != 0 && ((nvaroid) = pmemobj_next(varoid), 1);	\
	     (varoid) = (nvaroid))

#define POBJ_FOREACH_TYPE(pop, var)					\
	for (_pobj_debug_notice("POBJ_FOREACH", __FILE__, __LINE__),	\
	     (var) = (__typeof__(var))POBJ_FIRST_TYPE_NUM((pop), TOID_TYPE_NUM_OF(var)); \
	     !TOID_IS_NULL(var);					\
	     (var) = POBJ_NEXT(var))

#define POBJ_FOREACH_SAFE_TYPE(pop, var, nvar)				\
	for (_pobj_debug_notice("POBJ_FOREACH_SAFE", __FILE__, __LINE__),	\
	     (var) = (__typeof__(var))POBJ_FIRST_TYPE_NUM((pop), TOID_TYPE_NUM_OF(var)); \
	     !TOID_IS_NULL(var) && ((nvar) = POBJ_NEXT(var), 1);	\
	     (var) = (nvar))

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_ITERATOR_H */
