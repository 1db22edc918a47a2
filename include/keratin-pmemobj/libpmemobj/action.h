/*
 * libpmemobj/action.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): typed reservations.
 */
#ifndef LIBPMEMOBJ_ACTION_H
#define LIBPMEMOBJ_ACTION_H 1

#include <libpmemobj/action_base.h>
#include <libpmemobj/types.h>

/* Reserve an object of type t (of sizeof(t), or of size bytes) as a TOID(t). */
#define POBJ_RESERVE_NEW(pop, t, act) \
	((TOID(t))pmemobj_reserve((pop), (act), sizeof(t), TOID_TYPE_NUM(t)))
#define POBJ_RESERVE_ALLOC(pop, t, size, act) \
	((TOID(t))pmemobj_reserve((pop), (act), (size), TOID_TYPE_NUM(t)))
#define POBJ_XRESERVE_NEW(pop, t, act, flags) \
	((TOID(t))pmemobj_xreserve((pop), (act), sizeof(t), TOID_TYPE_NUM(t), (flags)))
#define POBJ_XRESERVE_ALLOC(pop, t, size, act, flags) \
	((TOID(t))pmemobj_xreserve((pop), (act), (size), TOID_TYPE_NUM(t), (flags)))

#endif /* LIBPMEMOBJ_ACTION_H */
