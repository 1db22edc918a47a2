/*
 * grow.c - kr_grow (grow.h): the doubling array growth every DRAM table uses.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fault.h"
#include "grow.h"

int kr_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t min)
{
	if (need <= *cap && *arr)
		return 0;
	size_t c = *cap ? *cap : min;
	while (c < need)
		c *= 2;
	if (elem && c > SIZE_MAX / elem)
		return -1;
	void *p = kr_realloc(*arr, c * elem); /* a countdown choke point (fault.h) */
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}
