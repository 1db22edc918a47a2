/*
 * libpmemobj/pool.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): the pool calls and the typed root.
 */
#ifndef LIBPMEMOBJ_POOL_H
#define LIBPMEMOBJ_POOL_H 1

#include <libpmemobj/pool_base.h>
#include <libpmemobj/types.h>

/* The root object as a TOID(t), sized for t. */
#define POBJ_ROOT(pop, t) ((TOID(t))pmemobj_root((pop), sizeof(t)))

#endif /* LIBPMEMOBJ_POOL_H */
