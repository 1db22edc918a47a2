/*
 * libpmemobj/types.h - part of keratin-pmemobj, the libpmemobj-compatible interface of
 * keratin (see docs/COMPAT.md): typed object ids (TOID) and layout declarations.
 */
#ifndef LIBPMEMOBJ_TYPES_H
#define LIBPMEMOBJ_TYPES_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest layout name, with its terminating NUL. */
#define PMEMOBJ_MAX_LAYOUT ((size_t)1024)

/* The type number the root object is given. */
#define POBJ_ROOT_TYPE_NUM 0

/*
 * TOID(TYPE) is a union over the PMEMoid that never uses its other two members as values:
 * _type points to TYPE, and _type_num to an array one longer than TYPE's type number, so
 * both are known at compile time from a handle alone (TOID_TYPEOF, TOID_TYPE_NUM_OF).
 * The union is named after TYPE with its struct/union/enum keyword dropped:
 * TOID(struct foo) is union foo_toid, TOID(char) is union _toid_char_toid.
 */
#define _toid_struct
#define _toid_union
#define _toid_enum

#define TOID(t) union _toid_##t##_toid

#ifdef __cplusplus
/* C++ has no cast to union: give the handle a converting constructor instead. */
#define _POBJ_TOID_CTORS(t)					\
	_toid_##t##_toid() {}						\
	_toid_##t##_toid(PMEMoid _oid) : oid(_oid) {}
#else
#define _POBJ_TOID_CTORS(t)
#endif

#define TOID_DECLARE(t, i)					\
TOID(t) {							\
	_POBJ_TOID_CTORS(t)					\
	PMEMoid oid;						\
	t *_type;						\
	char (*_type_num)[(i) + 1];				\
}

#define TOID_DECLARE_ROOT(t) TOID_DECLARE(t, POBJ_ROOT_TYPE_NUM)

#define TOID_TYPE_NUM(t)	(sizeof(*(*(TOID(t) *)0)._type_num) - 1)
#define TOID_TYPE_NUM_OF(o)	(sizeof(*(o)._type_num) - 1)
#define TOID_TYPEOF(o)		__typeof__(*(o)._type)
#define TOID_OFFSETOF(o, field)	offsetof(TOID_TYPEOF(o), field)

/* Does the object's stored type number agree with the handle's (or with TYPE's)? */
#define TOID_VALID(o)		(TOID_TYPE_NUM_OF(o) == pmemobj_type_num((o).oid))
#define OID_INSTANCEOF(o, t)	(TOID_TYPE_NUM(t) == pmemobj_type_num(o))

#define TOID_ASSIGN(o, value) ({					\
	(o).oid = (value);					\
	(o);							\
})

#define TOID_NULL(t)		((TOID(t))OID_NULL)
#define TOID_IS_NULL(o)		((o).oid.off == 0)
#define TOID_EQUALS(lhs, rhs)	\
	((lhs).oid.off == (rhs).oid.off && (lhs).oid.pool_uuid_lo == (rhs).oid.pool_uuid_lo)

/* Typed pointers to an object; NULL for a null handle. */
#define DIRECT_RW(o)	((__typeof__(*(o)._type) *)pmemobj_direct((o).oid))
#define DIRECT_RO(o)	((const __typeof__(*(o)._type) *)pmemobj_direct((o).oid))
#define D_RW	DIRECT_RW
#define D_RO	DIRECT_RO

/*
 * Layouts: the types of a pool, numbered 1, 2, 3, ... in declaration order (the root keeps
 * POBJ_ROOT_TYPE_NUM), as libpmemobj numbers them. The numbers come from __COUNTER__:
 * BEGIN records where the layout starts (as the length of an array type, which sizeof
 * reads back), each TOID takes the next value, END records how many were taken. Appending
 * types keeps the old numbers; reordering changes them.
 */
#define _POBJ_LAYOUT_BASE(name)	(sizeof(_pobj_layout_##name##_ref))

#define POBJ_LAYOUT_BEGIN(name) \
	typedef char _pobj_layout_##name##_ref[__COUNTER__ + 1] __attribute__((unused))

/* These three end in a semicolon of their own: programs may leave theirs out. */
#define POBJ_LAYOUT_TOID(name, t) \
	TOID_DECLARE(t, (__COUNTER__ + 1 - _POBJ_LAYOUT_BASE(name)));

#define POBJ_LAYOUT_ROOT(name, t) TOID_DECLARE_ROOT(t);

#define POBJ_LAYOUT_END(name) \
	typedef char _pobj_layout_##name##_cnt[__COUNTER__ + 1 - _POBJ_LAYOUT_BASE(name)] \
		__attribute__((unused));

#define POBJ_LAYOUT_NAME(name)		#name
#define POBJ_LAYOUT_TYPES_NUM(name)	(sizeof(_pobj_layout_##name##_cnt) - 1)

#ifdef __cplusplus
}
#endif

#endif /* LIBPMEMOBJ_TYPES_H */
