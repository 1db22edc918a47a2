/*
 * grow.h - growing arrays: one rule for every table the library builds in DRAM (flush
 * lists, range sets, run lists, recovery tables, redo images, inode page lists...).
 *
 * Capacity doubles, from a floor, until it holds what is needed, so n appends cost O(n)
 * copies in all. On failure nothing changes: the array and its capacity stay valid, and
 * the caller reports KR_E_NOMEM (or -ENOMEM) as its layer does.
 */
#ifndef KR_GROW_H
#define KR_GROW_H

#include <stddef.h>

/* Makes *arr hold at least need elements of elem bytes (capacity *cap, at least min when it
 * grows): 0, or -1 when memory runs out (then *arr and *cap are unchanged). */
int kr_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t min);

/* kr_grow for an array of any element type and a capacity of any unsigned type:
 * KR_GROW(v, cap, need, min) is 0 or -1. The common case (room enough) is one compare
 * inline: it sits on the commit path. need is evaluated twice. */
#define KR_GROW(arr, capacity, need, min)                                                  \
	((size_t)(need) <= (size_t)(capacity) && (arr)                                      \
		 ? 0                                                                        \
		 : __extension__({                                                          \
			   void *grow_p_ = (arr);                                           \
			   size_t grow_c_ = (capacity);                                     \
			   int grow_r_ = kr_grow(&grow_p_, &grow_c_, (need), sizeof(*(arr)), (min)); \
			   (arr) = grow_p_;                                                 \
			   (capacity) = grow_c_;                                            \
			   grow_r_;                                                         \
		   }))

#endif
