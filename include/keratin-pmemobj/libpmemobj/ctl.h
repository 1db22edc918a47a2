/*
 * libpmemobj/ctl.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): the CTL namespace and the types its entry points take.
 */
#ifndef LIBPMEMOBJ_CTL_H
#define LIBPMEMOBJ_CTL_H 1

#include <stddef.h>
#include <sys/types.h>
#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-object header of an allocation class (heap.alloc_class.[id].desc). */
enum pobj_header_type {
	POBJ_HEADER_LEGACY,	/* 64 bytes, as before version 1.3 */
	POBJ_HEADER_COMPACT,	/* 16 bytes: size and type number; the default */
	POBJ_HEADER_NONE,	/* none: type number 0, one unit per object */

	MAX_POBJ_HEADER_TYPES
};

/* An allocation class as heap.alloc_class.[id].desc reads and writes it. */
struct pobj_alloc_class_desc {
	size_t unit_size;		/* bytes per unit */
	size_t alignment;		/* of user data; 0 for the default */
	unsigned units_per_block;	/* at least; rounded up by the runtime */
	enum pobj_header_type header_type;
	unsigned class_id;		/* filled in by the runtime */
};

/* stats.enabled */
enum pobj_stats_enabled {
	POBJ_STATS_ENABLED_TRANSIENT,
	POBJ_STATS_ENABLED_BOTH,
	POBJ_STATS_ENABLED_PERSISTENT,
	POBJ_STATS_DISABLED,
};

/* heap.arenas_assignment_type */
enum pobj_arenas_assignment_type {
	POBJ_ARENAS_ASSIGNMENT_THREAD_KEY,	/* an arena per thread */
	POBJ_ARENAS_ASSIGNMENT_GLOBAL,		/* one arena for all threads */
};

/* name is a dotted CTL path ("heap.alloc_class.new.desc"); arg its typed argument. */
PMEMOBJ_API int pmemobj_ctl_get(PMEMobjpool *pop, const char *name, void *arg);
PMEMOBJ_API int pmemobj_ctl_set(PMEMobjpool *pop, const char *name, void *arg);
PMEMOBJ_API int pmemobj_ctl_exec(PMEMobjpool *pop, const char *name, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_CTL_H */
