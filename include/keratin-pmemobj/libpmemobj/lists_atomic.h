/*
 * libpmemobj/lists_atomic.h - part of keratin-pmemobj, the libpmemobj-compatible interface
 * of keratin (see docs/COMPAT.md): typed atomic lists, in the manner of queue(3).
 */
#ifndef LIBPMEMOBJ_LISTS_ATOMIC_H
#define LIBPMEMOBJ_LISTS_ATOMIC_H 1

#include <libpmemobj/lists_atomic_base.h>
#include <libpmemobj/thread.h>
#include <libpmemobj/types.h>

/* Values of the before argument. */
#define POBJ_LIST_DEST_HEAD	1
#define POBJ_LIST_DEST_TAIL	0
#define POBJ_LIST_DEST_BEFORE	1
#define POBJ_LIST_DEST_AFTER	0

/*
 * The two structures the runtime reads and writes through pe_offset and head: an entry is
 * two PMEMoids, a head is the first element's PMEMoid and the list's lock. Elements of one
 * list all have type t; field names the entry inside t.
 */
#define POBJ_LIST_ENTRY(t)		\
struct {				\
	TOID(t) pe_next;		\
	TOID(t) pe_prev;		\
}

#define POBJ_LIST_HEAD(name, t)		\
struct name {				\
	TOID(t) pe_first;		\
	PMEMmutex lock;			\
}

#define POBJ_LIST_FIRST(head)	((head)->pe_first)
#define POBJ_LIST_LAST(head, field)					\
	(TOID_IS_NULL((head)->pe_first) ? (head)->pe_first :		\
	 D_RO((head)->pe_first)->field.pe_prev)
#define POBJ_LIST_EMPTY(head)	(TOID_IS_NULL((head)->pe_first))
#define POBJ_LIST_NEXT(elm, field)	(D_RO(elm)->field.pe_next)
#define POBJ_LIST_PREV(elm, field)	(D_RO(elm)->field.pe_prev)

/* The list is circular: a walk ends when it comes back to where it started. */
#define POBJ_LIST_FOREACH(var, head, field)				\
	for (_pobj_debug_notice("POBJ_LIST_FOREACH", __FILE__, __LINE__),	\
	     (var) = POBJ_LIST_FIRST(head);					\
	     !TOID_IS_NULL(var);						\
	     TOID_EQUALS(POBJ_LIST_NEXT((var), field), POBJ_LIST_FIRST(head)) ?	\
	     TOID_ASSIGN((var), OID_NULL) :					\
	     ((var) = POBJ_LIST_NEXT((var), field)))

#define POBJ_LIST_FOREACH_REVERSE(var, head, field)			\
	for (_pobj_debug_notice("POBJ_LIST_FOREACH_REVERSE", __FILE__, __LINE__), \
	     (var) = POBJ_LIST_LAST((head), field);				\
	     !TOID_IS_NULL(var);						\
	     TOID_EQUALS(POBJ_LIST_PREV((var), field), POBJ_LIST_LAST((head), field)) ? \
	     TOID_ASSIGN((var), OID_NULL) :					\
	     ((var) = POBJ_LIST_PREV((var), field)))

/* Changes: each is one call into the runtime, atomic with respect to crashes. */
#define _POBJ_LIST_OFF(head, field)	TOID_OFFSETOF((head)->pe_first, field)

#define POBJ_LIST_INSERT_HEAD(pop, head, elm, field)			\
	pmemobj_list_insert((pop), _POBJ_LIST_OFF(head, field), (head),	\
		OID_NULL, POBJ_LIST_DEST_HEAD, (elm).oid)
#define POBJ_LIST_INSERT_TAIL(pop, head, elm, field)			\
	pmemobj_list_insert((pop), _POBJ_LIST_OFF(head, field), (head),	\
		OID_NULL, POBJ_LIST_DEST_TAIL, (elm).oid)
#define POBJ_LIST_INSERT_AFTER(pop, head, listelm, elm, field)		\
	pmemobj_list_insert((pop), _POBJ_LIST_OFF(head, field), (head),	\
		(listelm).oid, POBJ_LIST_DEST_AFTER, (elm).oid)
#define POBJ_LIST_INSERT_BEFORE(pop, head, listelm, elm, field)		\
	pmemobj_list_insert((pop), _POBJ_LIST_OFF(head, field), (head),	\
		(listelm).oid, POBJ_LIST_DEST_BEFORE, (elm).oid)

/* Allocate and link in one atomic step; the type number is the list's. */
#define _POBJ_LIST_INSERT_NEW(pop, head, dest, before, field, size, constr, arg) \
	pmemobj_list_insert_new((pop), _POBJ_LIST_OFF(head, field), (head),	\
		(dest), (before), (size), TOID_TYPE_NUM_OF((head)->pe_first),	\
		(constr), (arg))
#define POBJ_LIST_INSERT_NEW_HEAD(pop, head, field, size, constr, arg)	\
	_POBJ_LIST_INSERT_NEW(pop, head, OID_NULL, POBJ_LIST_DEST_HEAD,	\
		field, size, constr, arg)
#define POBJ_LIST_INSERT_NEW_TAIL(pop, head, field, size, constr, arg)	\
	_POBJ_LIST_INSERT_NEW(pop, head, OID_NULL, POBJ_LIST_DEST_TAIL,	\
		field, size, constr, arg)
#define POBJ_LIST_INSERT_NEW_AFTER(pop, head, listelm, field, size, constr, arg) \
	_POBJ_LIST_INSERT_NEW(pop, head, (listelm).oid, POBJ_LIST_DEST_AFTER,	\
		field, size, constr, arg)
#define POBJ_LIST_INSERT_NEW_BEFORE(pop, head, listelm, field, size, constr, arg) \
	_POBJ_LIST_INSERT_NEW(pop, head, (listelm).oid, POBJ_LIST_DEST_BEFORE,	\
		field, size, constr, arg)

#define POBJ_LIST_REMOVE(pop, head, elm, field)				\
	pmemobj_list_remove((pop), _POBJ_LIST_OFF(head, field), (head),	\
		(elm).oid, 0)
#define POBJ_LIST_REMOVE_FREE(pop, head, elm, field)			\
	pmemobj_list_remove((pop), _POBJ_LIST_OFF(head, field), (head),	\
		(elm).oid, 1)

/* From list head (linked through field) to list head_new (through field_new). */
#define _POBJ_LIST_MOVE(pop, head, head_new, dest, before, elm, field, field_new) \
	pmemobj_list_move((pop), _POBJ_LIST_OFF(head, field), (head),		\
		_POBJ_LIST_OFF(head_new, field_new), (head_new),		\
		(dest), (before), (elm).oid)
#define POBJ_LIST_MOVE_ELEMENT_HEAD(pop, head, head_new, elm, field, field_new) \
	_POBJ_LIST_MOVE(pop, head, head_new, OID_NULL, POBJ_LIST_DEST_HEAD,	\
		elm, field, field_new)
#define POBJ_LIST_MOVE_ELEMENT_TAIL(pop, head, head_new, elm, field, field_new) \
	_POBJ_LIST_MOVE(pop, head, head_new, OID_NULL, POBJ_LIST_DEST_TAIL,	\
		elm, field, field_new)
#define POBJ_LIST_MOVE_ELEMENT_AFTER(pop, head, head_new, listelm, elm, field, field_new) \
	_POBJ_LIST_MOVE(pop, head, head_new, (listelm).oid, POBJ_LIST_DEST_AFTER, \
		elm, field, field_new)
#define POBJ_LIST_MOVE_ELEMENT_BEFORE(pop, head, head_new, listelm, elm, field, field_new) \
	_POBJ_LIST_MOVE(pop, head, head_new, (listelm).oid, POBJ_LIST_DEST_BEFORE, \
		elm, field, field_new)

#endif /* LIBPMEMOBJ_LISTS_ATOMIC_H */
