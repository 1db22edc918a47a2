/*
 * libpmemobj/tx.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): the TX_BEGIN ... TX_END blocks and the typed tx calls.
 */
#ifndef LIBPMEMOBJ_TX_H
#define LIBPMEMOBJ_TX_H 1

#include <errno.h>
#include <string.h>
#include <libpmemobj/tx_base.h>
#include <libpmemobj/types.h>

#ifdef POBJ_TX_CRASH_ON_NO_ONABORT
#include <stdlib.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * TX_BEGIN(pop) { work } TX_ONCOMMIT { } TX_ONABORT { } TX_FINALLY { } TX_END
 *
 * expands to a loop over the thread's transaction stage with one case per block:
 *
 *	setjmp(env) == 0 ? pmemobj_tx_begin(pop, env, params..., TX_PARAM_NONE) : (aborted)
 *	while ((stage = pmemobj_tx_stage()) != TX_STAGE_NONE)
 *		switch (stage) { case WORK: ...; pmemobj_tx_process(); break; ... }
 *	pmemobj_tx_end()
 *
 * Each block ends with pmemobj_tx_process(), which moves to the next stage (after WORK:
 * commits); a stage with no block of its own goes through default, which only moves on.
 * An abort in the work block longjmps back to the setjmp, which then takes the ONABORT
 * stage. errno is set from pmemobj_tx_begin's or pmemobj_tx_end's error, and from
 * pmemobj_tx_errno() after a longjmp. Locals changed in the work block and read after an
 * abort must be volatile (setjmp(3)).
 *
 * Binaries built against libpmemobj's macros make the same calls in the same order, so
 * both kinds can run against one runtime. A nested block's locals hide the outer one's on
 * purpose, so -Wshadow is kept quiet about them.
 */
#if defined(__GNUC__)
#define _POBJ_TX_SHADOW_OFF \
	_Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wshadow\"")
#define _POBJ_TX_SHADOW_ON _Pragma("GCC diagnostic pop")
#else
#define _POBJ_TX_SHADOW_OFF
#define _POBJ_TX_SHADOW_ON
#endif

#define _POBJ_TX_BEGIN(pop, ...)					\
{									\
	_POBJ_TX_SHADOW_OFF						\
	jmp_buf _pobj_tx_env;						\
	enum pobj_tx_stage _pobj_tx_stage;				\
	int _pobj_tx_ret;						\
	_POBJ_TX_SHADOW_ON						\
									\
	if (setjmp(_pobj_tx_env)) {					\
		errno = pmemobj_tx_errno();				\
	} else {							\
		_pobj_tx_ret = pmemobj_tx_begin((pop), _pobj_tx_env,	\
				##__VA_ARGS__, TX_PARAM_NONE);		\
		if (_pobj_tx_ret)					\
			errno = _pobj_tx_ret;				\
	}								\
	while ((_pobj_tx_stage = pmemobj_tx_stage()) != TX_STAGE_NONE) {	\
		switch (_pobj_tx_stage) {				\
		case TX_STAGE_WORK:

/* Parameters are pairs or triples as in pmemobj_tx_begin(); TX_PARAM_NONE is appended. */
#define TX_BEGIN_PARAM(pop, ...)	_POBJ_TX_BEGIN(pop, ##__VA_ARGS__)
#define TX_BEGIN_LOCK			TX_BEGIN_PARAM
#define TX_BEGIN(pop)			_POBJ_TX_BEGIN(pop, TX_PARAM_NONE)

/* cb goes through a function typed pmemobj_tx_callback, so a wrong signature warns. */
static inline pmemobj_tx_callback
_pobj_validate_cb_sig(pmemobj_tx_callback cb)
{
	return cb;
}

#define TX_BEGIN_CB(pop, cb, arg, ...) \
	_POBJ_TX_BEGIN(pop, TX_PARAM_CB, _pobj_validate_cb_sig(cb), arg, ##__VA_ARGS__)

#define TX_ONCOMMIT							\
			pmemobj_tx_process();				\
			break;						\
		case TX_STAGE_ONCOMMIT:

#define TX_ONABORT							\
			pmemobj_tx_process();				\
			break;						\
		case TX_STAGE_ONABORT:

#define TX_FINALLY							\
			pmemobj_tx_process();				\
			break;						\
		case TX_STAGE_FINALLY:

/*
 * With POBJ_TX_CRASH_ON_NO_ONABORT defined, an abort with no TX_ONABORT block to take it
 * reaches the default case, which then calls abort(3).
 */
#ifdef POBJ_TX_CRASH_ON_NO_ONABORT
#define TX_ONABORT_CHECK do {						\
		if (_pobj_tx_stage == TX_STAGE_ONABORT)			\
			abort();					\
	} while (0)
#else
#define TX_ONABORT_CHECK do {} while (0)
#endif

#define TX_END								\
			pmemobj_tx_process();				\
			break;						\
		default:						\
			TX_ONABORT_CHECK;				\
			pmemobj_tx_process();				\
			break;						\
		}							\
	}								\
	_pobj_tx_ret = pmemobj_tx_end();				\
	if (_pobj_tx_ret)						\
		errno = _pobj_tx_ret;					\
}

/*
 * Snapshots of a whole object (its size from the handle's type), of one field, or of what
 * a plain pointer into the pool points to. The X forms pass flags (POBJ_XADD_*). A field
 * is added by its address, like the _DIRECT forms.
 */
#define TX_ADD(o) \
	pmemobj_tx_add_range((o).oid, 0, sizeof(*(o)._type))
#define TX_XADD(o, flags) \
	pmemobj_tx_xadd_range((o).oid, 0, sizeof(*(o)._type), (flags))
#define TX_ADD_FIELD(o, field) \
	TX_ADD_FIELD_DIRECT(D_RW(o), field)
#define TX_XADD_FIELD(o, field, flags) \
	TX_XADD_FIELD_DIRECT(D_RW(o), field, (flags))
#define TX_ADD_DIRECT(p) \
	pmemobj_tx_add_range_direct((p), sizeof(*(p)))
#define TX_XADD_DIRECT(p, flags) \
	pmemobj_tx_xadd_range_direct((p), sizeof(*(p)), (flags))
#define TX_ADD_FIELD_DIRECT(p, field) \
	pmemobj_tx_add_range_direct(&(p)->field, sizeof((p)->field))
#define TX_XADD_FIELD_DIRECT(p, field, flags) \
	pmemobj_tx_xadd_range_direct(&(p)->field, sizeof((p)->field), (flags))

/* Typed allocations: a TOID(t) of sizeof(t) (NEW) or size bytes (ALLOC). */
#define TX_NEW(t) \
	((TOID(t))pmemobj_tx_alloc(sizeof(t), TOID_TYPE_NUM(t)))
#define TX_ALLOC(t, size) \
	((TOID(t))pmemobj_tx_alloc((size), TOID_TYPE_NUM(t)))
#define TX_ZNEW(t) \
	((TOID(t))pmemobj_tx_zalloc(sizeof(t), TOID_TYPE_NUM(t)))
#define TX_ZALLOC(t, size) \
	((TOID(t))pmemobj_tx_zalloc((size), TOID_TYPE_NUM(t)))
#define TX_XALLOC(t, size, flags) \
	((TOID(t))pmemobj_tx_xalloc((size), TOID_TYPE_NUM(t), (flags)))

/* Resizing keeps the handle's type; the result may be another object. */
#define TX_REALLOC(o, size) \
	((__typeof__(o))pmemobj_tx_realloc((o).oid, (size), TOID_TYPE_NUM_OF(o)))
#define TX_ZREALLOC(o, size) \
	((__typeof__(o))pmemobj_tx_zrealloc((o).oid, (size), TOID_TYPE_NUM_OF(o)))

/* Strings get an explicit type number and come back as a PMEMoid. */
#define TX_STRDUP(s, type_num)		pmemobj_tx_strdup((s), (type_num))
#define TX_XSTRDUP(s, type_num, flags)	pmemobj_tx_xstrdup((s), (type_num), (flags))
#define TX_WCSDUP(s, type_num)		pmemobj_tx_wcsdup((s), (type_num))
#define TX_XWCSDUP(s, type_num, flags)	pmemobj_tx_xwcsdup((s), (type_num), (flags))

#define TX_FREE(o)		pmemobj_tx_free((o).oid)
#define TX_XFREE(o, flags)	pmemobj_tx_xfree((o).oid, (flags))

/* Snapshot, then store (TX_SET*) or copy or fill (TX_MEMCPY, TX_MEMSET). */
#define TX_SET(o, field, value) \
	(TX_ADD_FIELD(o, field), D_RW(o)->field = (value))
#define TX_SET_DIRECT(p, field, value) \
	(TX_ADD_FIELD_DIRECT(p, field), (p)->field = (value))

static inline void *
TX_MEMCPY(void *dest, const void *src, size_t num)
{
	pmemobj_tx_add_range_direct(dest, num);
	return memcpy(dest, src, num);
}

static inline void *
TX_MEMSET(void *dest, int c, size_t num)
{
	pmemobj_tx_add_range_direct(dest, num);
	return memset(dest, c, num);
}

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_TX_H */
