/*
 * libpmemobj/tx_base.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): the transaction calls, their stages, parameters and flags.
 */
#ifndef LIBPMEMOBJ_TX_BASE_H
#define LIBPMEMOBJ_TX_BASE_H 1

#include <setjmp.h>
#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A thread's transaction moves NONE -> WORK -> ONCOMMIT or ONABORT -> FINALLY -> NONE;
 * pmemobj_tx_process() takes each step after WORK, an abort jumps to ONABORT.
 */
enum pobj_tx_stage {
	TX_STAGE_NONE,		/* no transaction open in this thread */
	TX_STAGE_WORK,		/* in progress */
	TX_STAGE_ONCOMMIT,	/* committed */
	TX_STAGE_ONABORT,	/* did not begin, or aborted */
	TX_STAGE_FINALLY,	/* either way, about to end */

	MAX_TX_STAGE
};

/*
 * pmemobj_tx_begin's arguments after env: a list of (parameter, values...) ended by
 * TX_PARAM_NONE. MUTEX and RWLOCK take a lock in the pool (held until the outermost
 * transaction ends, taken left to right, the rwlock for writing); CB takes a
 * pmemobj_tx_callback and its void * argument.
 */
enum pobj_tx_param {
	TX_PARAM_NONE,
	TX_PARAM_MUTEX,
	TX_PARAM_RWLOCK,
	TX_PARAM_CB,
};

enum pobj_log_type {
	TX_LOG_TYPE_SNAPSHOT,	/* undo log: ranges added to the transaction */
	TX_LOG_TYPE_INTENT,	/* redo log: allocations, frees, publications */
};

/* What an x-call does on failure when its flags do not say (see POBJ_XADD_NO_ABORT). */
enum pobj_tx_failure_behavior {
	POBJ_TX_FAILURE_ABORT,
	POBJ_TX_FAILURE_RETURN,
};

/*
 * The older names of the lock parameters, for pmemobj_tx_lock(). They still work but warn
 * on use: the lock calls take an enum pobj_tx_param.
 */
#if defined(__GNUC__) && (__GNUC__ >= 6 || defined(__clang__))
#define _POBJ_TX_LOCK_DEPRECATED \
	__attribute__((deprecated("enum pobj_tx_lock is deprecated; use enum pobj_tx_param")))
#else
#define _POBJ_TX_LOCK_DEPRECATED
#endif

enum _POBJ_TX_LOCK_DEPRECATED pobj_tx_lock {
	TX_LOCK_NONE _POBJ_TX_LOCK_DEPRECATED = TX_PARAM_NONE,
	TX_LOCK_MUTEX _POBJ_TX_LOCK_DEPRECATED = TX_PARAM_MUTEX,
	TX_LOCK_RWLOCK _POBJ_TX_LOCK_DEPRECATED = TX_PARAM_RWLOCK,
};

/* Called at each stage of the outermost transaction (TX_PARAM_CB), and with NONE after. */
typedef void (*pmemobj_tx_callback)(PMEMobjpool *pop, enum pobj_tx_stage stage, void *arg);

/*
 * Flags of the x-calls. NO_ABORT makes a failing call return its error instead of
 * aborting the transaction. Each family accepts only its *_VALID_FLAGS.
 */
#define POBJ_TX_XALLOC_VALID_FLAGS (POBJ_XALLOC_ZERO |\
	POBJ_XALLOC_NO_FLUSH |\
	POBJ_XALLOC_ARENA_MASK |\
	POBJ_XALLOC_CLASS_MASK |\
	POBJ_XALLOC_NO_ABORT)

#define POBJ_XADD_NO_FLUSH		POBJ_FLAG_NO_FLUSH
#define POBJ_XADD_NO_SNAPSHOT		POBJ_FLAG_NO_SNAPSHOT
#define POBJ_XADD_ASSUME_INITIALIZED	POBJ_FLAG_ASSUME_INITIALIZED
#define POBJ_XADD_NO_ABORT		POBJ_FLAG_TX_NO_ABORT
#define POBJ_XADD_VALID_FLAGS (POBJ_XADD_NO_FLUSH |\
	POBJ_XADD_NO_SNAPSHOT |\
	POBJ_XADD_ASSUME_INITIALIZED |\
	POBJ_XADD_NO_ABORT)

#define POBJ_XLOCK_NO_ABORT		POBJ_FLAG_TX_NO_ABORT
#define POBJ_XLOCK_VALID_FLAGS		(POBJ_XLOCK_NO_ABORT)

#define POBJ_XFREE_NO_ABORT		POBJ_FLAG_TX_NO_ABORT
#define POBJ_XFREE_VALID_FLAGS		(POBJ_XFREE_NO_ABORT)

#define POBJ_XPUBLISH_NO_ABORT		POBJ_FLAG_TX_NO_ABORT
#define POBJ_XPUBLISH_VALID_FLAGS	(POBJ_XPUBLISH_NO_ABORT)

#define POBJ_XLOG_APPEND_BUFFER_NO_ABORT	POBJ_FLAG_TX_NO_ABORT
#define POBJ_XLOG_APPEND_BUFFER_VALID_FLAGS	(POBJ_XLOG_APPEND_BUFFER_NO_ABORT)

/* Flow. An abort longjmps to env (set up by TX_BEGIN, or by the caller). */
PMEMOBJ_API enum pobj_tx_stage pmemobj_tx_stage(void);
PMEMOBJ_API int pmemobj_tx_begin(PMEMobjpool *pop, jmp_buf env, ...);
PMEMOBJ_API int pmemobj_tx_xlock(enum pobj_tx_param type, void *lockp, uint64_t flags);
PMEMOBJ_API int pmemobj_tx_lock(enum pobj_tx_param type, void *lockp);
PMEMOBJ_API void pmemobj_tx_abort(int errnum);
PMEMOBJ_API void pmemobj_tx_commit(void);
PMEMOBJ_API int pmemobj_tx_end(void);
PMEMOBJ_API void pmemobj_tx_process(void);
PMEMOBJ_API int pmemobj_tx_errno(void);

/* Snapshots: ranges whose old contents an abort restores. */
PMEMOBJ_API int pmemobj_tx_add_range(PMEMoid oid, uint64_t off, size_t size);
PMEMOBJ_API int pmemobj_tx_add_range_direct(const void *ptr, size_t size);
PMEMOBJ_API int pmemobj_tx_xadd_range(PMEMoid oid, uint64_t off, size_t size,
		uint64_t flags);
PMEMOBJ_API int pmemobj_tx_xadd_range_direct(const void *ptr, size_t size, uint64_t flags);

/* Allocations and frees that take effect only if the transaction commits. */
PMEMOBJ_API PMEMoid pmemobj_tx_alloc(size_t size, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_xalloc(size_t size, uint64_t type_num, uint64_t flags);
PMEMOBJ_API PMEMoid pmemobj_tx_zalloc(size_t size, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_realloc(PMEMoid oid, size_t size, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_zrealloc(PMEMoid oid, size_t size, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_strdup(const char *s, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_xstrdup(const char *s, uint64_t type_num, uint64_t flags);
PMEMOBJ_API PMEMoid pmemobj_tx_wcsdup(const wchar_t *s, uint64_t type_num);
PMEMOBJ_API PMEMoid pmemobj_tx_xwcsdup(const wchar_t *s, uint64_t type_num,
		uint64_t flags);
PMEMOBJ_API int pmemobj_tx_free(PMEMoid oid);
PMEMOBJ_API int pmemobj_tx_xfree(PMEMoid oid, uint64_t flags);

/* Log space supplied by the application, and how much it needs. */
PMEMOBJ_API int pmemobj_tx_log_append_buffer(enum pobj_log_type type, void *addr,
		size_t size);
PMEMOBJ_API int pmemobj_tx_xlog_append_buffer(enum pobj_log_type type, void *addr,
		size_t size, uint64_t flags);
PMEMOBJ_API int pmemobj_tx_log_auto_alloc(enum pobj_log_type type, int on_off);
PMEMOBJ_API size_t pmemobj_tx_log_snapshots_max_size(size_t *sizes, size_t nsizes);
PMEMOBJ_API size_t pmemobj_tx_log_intents_max_size(size_t nintents);

/* One pointer of volatile state per transaction, for the application. */
PMEMOBJ_API void pmemobj_tx_set_user_data(void *data);
PMEMOBJ_API void *pmemobj_tx_get_user_data(void);

PMEMOBJ_API void pmemobj_tx_set_failure_behavior(enum pobj_tx_failure_behavior behavior);
PMEMOBJ_API enum pobj_tx_failure_behavior pmemobj_tx_get_failure_behavior(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_TX_BASE_H */
