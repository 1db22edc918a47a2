/*
 * libpmemobj.h - part of keratin-pmemobj, the libpmemobj-compatible interface of keratin
 * (see docs/COMPAT.md): the whole API, one header per part as in libpmemobj.
 */
#ifndef LIBPMEMOBJ_H
#define LIBPMEMOBJ_H 1

#include <libpmemobj/action.h>
#include <libpmemobj/atomic.h>
#include <libpmemobj/ctl.h>
#include <libpmemobj/iterator.h>
#include <libpmemobj/lists_atomic.h>
#include <libpmemobj/pool.h>
#include <libpmemobj/thread.h>
#include <libpmemobj/tx.h>

#endif /* LIBPMEMOBJ_H */
