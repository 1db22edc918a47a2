/*
 * libpmemobj/thread.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): locks that live in the pool.
 */
#ifndef LIBPMEMOBJ_THREAD_H
#define LIBPMEMOBJ_THREAD_H 1

#include <time.h>
#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A lock is a cache line of pool memory that zero initializes; the runtime treats a lock
 * as unlocked the first time it is used after each open, whatever the line held. Only the
 * size is padded to 64 bytes: the alignment stays 8 (that of long long), as in libpmemobj,
 * because structures in existing pools (a POBJ_LIST_HEAD's lock at offset 16, say) were laid
 * out with it.
 */
#define _POBJ_CL_SIZE 64

typedef union {
	long long align;
	char padding[_POBJ_CL_SIZE];
} PMEMmutex;

typedef union {
	long long align;
	char padding[_POBJ_CL_SIZE];
} PMEMrwlock;

typedef union {
	long long align;
	char padding[_POBJ_CL_SIZE];
} PMEMcond;

/* Strict ISO modes leave struct timespec out of <time.h>: name it for the prototypes. */
struct timespec;

/* The pthread calls of the same names, on locks in pool pop. */
PMEMOBJ_API void pmemobj_mutex_zero(PMEMobjpool *pop, PMEMmutex *mutexp);
PMEMOBJ_API int pmemobj_mutex_lock(PMEMobjpool *pop, PMEMmutex *mutexp);
PMEMOBJ_API int pmemobj_mutex_timedlock(PMEMobjpool *pop, PMEMmutex *__restrict mutexp,
		const struct timespec *__restrict abs_timeout);
PMEMOBJ_API int pmemobj_mutex_trylock(PMEMobjpool *pop, PMEMmutex *mutexp);
PMEMOBJ_API int pmemobj_mutex_unlock(PMEMobjpool *pop, PMEMmutex *mutexp);

PMEMOBJ_API void pmemobj_rwlock_zero(PMEMobjpool *pop, PMEMrwlock *rwlockp);
PMEMOBJ_API int pmemobj_rwlock_rdlock(PMEMobjpool *pop, PMEMrwlock *rwlockp);
PMEMOBJ_API int pmemobj_rwlock_wrlock(PMEMobjpool *pop, PMEMrwlock *rwlockp);
PMEMOBJ_API int pmemobj_rwlock_timedrdlock(PMEMobjpool *pop, PMEMrwlock *__restrict rwlockp,
		const struct timespec *__restrict abs_timeout);
PMEMOBJ_API int pmemobj_rwlock_timedwrlock(PMEMobjpool *pop, PMEMrwlock *__restrict rwlockp,
		const struct timespec *__restrict abs_timeout);
PMEMOBJ_API int pmemobj_rwlock_tryrdlock(PMEMobjpool *pop, PMEMrwlock *rwlockp);
PMEMOBJ_API int pmemobj_rwlock_trywrlock(PMEMobjpool *pop, PMEMrwlock *rwlockp);
PMEMOBJ_API int pmemobj_rwlock_unlock(PMEMobjpool *pop, PMEMrwlock *rwlockp);

PMEMOBJ_API void pmemobj_cond_zero(PMEMobjpool *pop, PMEMcond *condp);
PMEMOBJ_API int pmemobj_cond_broadcast(PMEMobjpool *pop, PMEMcond *condp);
PMEMOBJ_API int pmemobj_cond_signal(PMEMobjpool *pop, PMEMcond *condp);
PMEMOBJ_API int pmemobj_cond_timedwait(PMEMobjpool *pop, PMEMcond *__restrict condp,
		PMEMmutex *__restrict mutexp, const struct timespec *__restrict abs_timeout);
PMEMOBJ_API int pmemobj_cond_wait(PMEMobjpool *pop, PMEMcond *__restrict condp,
		PMEMmutex *__restrict mutexp);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_THREAD_H */
