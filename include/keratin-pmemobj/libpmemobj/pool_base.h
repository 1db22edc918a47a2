/*
 * libpmemobj/pool_base.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): creating, opening, checking and closing pools; the root.
 */
#ifndef LIBPMEMOBJ_POOL_BASE_H
#define LIBPMEMOBJ_POOL_BASE_H 1

#include <stddef.h>
#include <sys/types.h>
#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Smallest pool pmemobj_create accepts, and smallest part of a pool set. */
#define PMEMOBJ_MIN_POOL ((size_t)(1024 * 1024 * 8))
#define PMEMOBJ_MIN_PART ((size_t)(1024 * 1024 * 2))

PMEMOBJ_API PMEMobjpool *pmemobj_open(const char *path, const char *layout);
PMEMOBJ_API PMEMobjpool *pmemobj_create(const char *path, const char *layout,
		size_t poolsize, mode_t mode);
/* 1 if consistent, 0 if not, -1 (errno set) if it could not tell. */
PMEMOBJ_API int pmemobj_check(const char *path, const char *layout);
PMEMOBJ_API void pmemobj_close(PMEMobjpool *pop);

/* The root object, allocated (zeroed, or by constructor) or grown to size on demand. */
PMEMOBJ_API PMEMoid pmemobj_root(PMEMobjpool *pop, size_t size);
PMEMOBJ_API PMEMoid pmemobj_root_construct(PMEMobjpool *pop, size_t size,
		pmemobj_constr constructor, void *arg);
PMEMOBJ_API size_t pmemobj_root_size(PMEMobjpool *pop);

/* One pointer of volatile state per open pool, for the application. */
PMEMOBJ_API void pmemobj_set_user_data(PMEMobjpool *pop, void *data);
PMEMOBJ_API void *pmemobj_get_user_data(PMEMobjpool *pop);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_POOL_BASE_H */
