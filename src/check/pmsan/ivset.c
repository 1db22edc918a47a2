/*
 * ivset.c - sets of byte ranges and growable arrays for the pmsan runtime.
 *
 * An ivset keeps its ranges sorted by start, pairwise disjoint and not touching (adjacent
 * ranges are merged), so membership is one binary search. The runtime's sets are the bytes
 * a thread stored and has not flushed, the ranges a transaction added to its undo log or
 * changed, and the freed objects. They stay small in practice (stores and flushes come in
 * runs that coalesce), so insertion by memmove is cheaper than a tree.
 */
#include <stdlib.h>
#include <string.h>

#include "pmsan.h"

/* Index of the first range whose end is > x (that could contain or follow x). */
static size_t first_after(const struct ivset *s, uintptr_t x)
{
	size_t a = 0, b = s->n;
	while (a < b) {
		size_t m = (a + b) / 2;
		if (s->hi[m] <= x)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

static void reserve(struct ivset *s, size_t n)
{
	if (n <= s->cap)
		return;
	size_t cap = s->cap ? s->cap * 2 : 16;
	while (cap < n)
		cap *= 2;
	s->lo = pmsan_xrealloc(s->lo, cap * sizeof(*s->lo));
	s->hi = pmsan_xrealloc(s->hi, cap * sizeof(*s->hi));
	s->cap = cap;
}

void ivset_add(struct ivset *s, uintptr_t lo, uintptr_t hi)
{
	if (lo >= hi)
		return;
	/* Ranges i..j-1 touch or overlap [lo, hi): merge them into one. */
	size_t i = s->n && lo > 0 ? first_after(s, lo - 1) : first_after(s, lo);
	size_t j = i;
	while (j < s->n && s->lo[j] <= hi)
		j++;
	if (i == j) {
		reserve(s, s->n + 1);
		memmove(&s->lo[i + 1], &s->lo[i], (s->n - i) * sizeof(*s->lo));
		memmove(&s->hi[i + 1], &s->hi[i], (s->n - i) * sizeof(*s->hi));
		s->lo[i] = lo;
		s->hi[i] = hi;
		s->n++;
		return;
	}
	if (s->lo[i] < lo)
		lo = s->lo[i];
	if (s->hi[j - 1] > hi)
		hi = s->hi[j - 1];
	s->lo[i] = lo;
	s->hi[i] = hi;
	memmove(&s->lo[i + 1], &s->lo[j], (s->n - j) * sizeof(*s->lo));
	memmove(&s->hi[i + 1], &s->hi[j], (s->n - j) * sizeof(*s->hi));
	s->n -= j - i - 1;
}

void ivset_sub(struct ivset *s, uintptr_t lo, uintptr_t hi)
{
	if (lo >= hi)
		return;
	size_t i = first_after(s, lo);
	if (i == s->n || s->lo[i] >= hi)
		return;
	/* A range strictly containing [lo, hi) splits in two. */
	if (s->lo[i] < lo && s->hi[i] > hi) {
		reserve(s, s->n + 1);
		memmove(&s->lo[i + 1], &s->lo[i], (s->n - i) * sizeof(*s->lo));
		memmove(&s->hi[i + 1], &s->hi[i], (s->n - i) * sizeof(*s->hi));
		s->n++;
		s->hi[i] = lo;
		s->lo[i + 1] = hi;
		return;
	}
	if (s->lo[i] < lo) {
		s->hi[i] = lo;
		i++;
	}
	size_t j = i;
	while (j < s->n && s->hi[j] <= hi)
		j++;
	if (j < s->n && s->lo[j] < hi)
		s->lo[j] = hi;
	memmove(&s->lo[i], &s->lo[j], (s->n - j) * sizeof(*s->lo));
	memmove(&s->hi[i], &s->hi[j], (s->n - j) * sizeof(*s->hi));
	s->n -= j - i;
}

int ivset_covers(const struct ivset *s, uintptr_t lo, uintptr_t hi)
{
	if (lo >= hi)
		return 1;
	size_t i = first_after(s, lo);
	return i < s->n && s->lo[i] <= lo && s->hi[i] >= hi;
}

int ivset_overlaps(const struct ivset *s, uintptr_t lo, uintptr_t hi)
{
	size_t i = first_after(s, lo);
	return i < s->n && s->lo[i] < hi;
}

int ivset_first_overlap(const struct ivset *s, uintptr_t lo, uintptr_t hi, uintptr_t *olo,
			uintptr_t *ohi)
{
	size_t i = first_after(s, lo);
	if (i == s->n || s->lo[i] >= hi)
		return 0;
	*olo = s->lo[i] > lo ? s->lo[i] : lo;
	*ohi = s->hi[i] < hi ? s->hi[i] : hi;
	return 1;
}

void ivset_clear(struct ivset *s)
{
	s->n = 0;
}

void ivset_free(struct ivset *s)
{
	free(s->lo);
	free(s->hi);
	memset(s, 0, sizeof(*s));
}

void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 64;
		v->p = pmsan_xrealloc(v->p, v->cap * v->elem);
	}
	return (char *)v->p + v->elem * v->n++;
}

void vec_clear(struct vec *v)
{
	v->n = 0;
}

void vec_free(struct vec *v)
{
	free(v->p);
	v->p = NULL;
	v->n = v->cap = 0;
}

/* ---- byteset: bytes, kept as a hash of 64-byte lines with a mask of their bytes, plus an
 * ivset for the ranges of more than BIG_RANGE bytes. Adding many small scattered ranges
 * (an undo log that snapshots one field of every entry of a hash map) costs O(1) each
 * here, where the sorted ivset would move half its array every time. */

#define BIG_RANGE 4096u

static size_t line_slot(const struct byteset *s, uintptr_t line)
{
	uint64_t h = (uint64_t)line * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (s->cap - 1);
}

static uint64_t *line_mask(struct byteset *s, uintptr_t line, int create)
{
	if (s->cap == 0) {
		if (!create)
			return NULL;
		s->cap = 64;
		s->keys = pmsan_xalloc(s->cap * sizeof(*s->keys));
		s->masks = pmsan_xalloc(s->cap * sizeof(*s->masks));
	}
	size_t i = line_slot(s, line);
	while (s->keys[i]) {
		if (s->keys[i] == line + 1)
			return &s->masks[i];
		i = (i + 1) & (s->cap - 1);
	}
	if (!create)
		return NULL;
	if (2 * (s->n + 1) > s->cap) {
		struct byteset old = *s;
		s->cap *= 2;
		s->n = 0;
		s->keys = pmsan_xalloc(s->cap * sizeof(*s->keys));
		s->masks = pmsan_xalloc(s->cap * sizeof(*s->masks));
		for (size_t k = 0; k < old.cap; k++)
			if (old.keys[k])
				*line_mask(s, old.keys[k] - 1, 1) = old.masks[k];
		free(old.keys);
		free(old.masks);
		return line_mask(s, line, 1);
	}
	s->keys[i] = line + 1;
	s->masks[i] = 0;
	s->n++;
	return &s->masks[i];
}

/* The mask of the bytes of line (64-byte aligned address / 64) within [lo, hi). */
static uint64_t span_mask(uintptr_t line, uintptr_t lo, uintptr_t hi)
{
	uintptr_t base = line * 64;
	unsigned a = lo > base ? (unsigned)(lo - base) : 0;
	unsigned b = hi < base + 64 ? (unsigned)(hi - base) : 64;
	uint64_t upto = b == 64 ? ~0ull : (1ull << b) - 1;
	return upto & ~((1ull << a) - 1);
}

void byteset_add(struct byteset *s, uintptr_t lo, uintptr_t hi)
{
	if (hi - lo > BIG_RANGE) {
		ivset_add(&s->big, lo, hi);
		return;
	}
	for (uintptr_t line = lo / 64; line * 64 < hi; line++)
		*line_mask(s, line, 1) |= span_mask(line, lo, hi);
}

/* The bytes of [lo, hi) in neither the lines nor the big ranges of s; stops counting at
 * the first such byte if `first` is set. */
static uint64_t missing(struct byteset *s, uintptr_t lo, uintptr_t hi, int first)
{
	uint64_t count = 0;
	for (uintptr_t line = lo / 64; line * 64 < hi; line++) {
		uint64_t need = span_mask(line, lo, hi);
		uint64_t *m = s->n ? line_mask(s, line, 0) : NULL;
		uint64_t miss = need & ~(m ? *m : 0);
		/* Bytes the lines lack may lie in big ranges: count each run's remainder. */
		while (miss) {
			unsigned a = (unsigned)__builtin_ctzll(miss);
			uint64_t run = miss >> a;
			unsigned n = ~run ? (unsigned)__builtin_ctzll(~run) : 64 - a;
			uintptr_t p = line * 64 + a, e = p + n;
			while (p < e) {
				uintptr_t blo, bhi;
				if (!ivset_first_overlap(&s->big, p, e, &blo, &bhi)) {
					count += e - p;
					break;
				}
				count += blo - p;
				p = bhi;
			}
			if (count && first)
				return count;
			miss &= ~(n == 64 ? ~0ull : ((1ull << n) - 1) << a);
		}
	}
	return count;
}

int byteset_covers(struct byteset *s, uintptr_t lo, uintptr_t hi)
{
	return missing(s, lo, hi, 1) == 0;
}

uint64_t byteset_count_missing(struct byteset *s, uintptr_t lo, uintptr_t hi)
{
	return missing(s, lo, hi, 0);
}

int byteset_overlaps(struct byteset *s, uintptr_t lo, uintptr_t hi)
{
	if (ivset_overlaps(&s->big, lo, hi))
		return 1;
	if (s->n == 0)
		return 0;
	for (uintptr_t line = lo / 64; line * 64 < hi; line++) {
		uint64_t *m = line_mask(s, line, 0);
		if (m && (*m & span_mask(line, lo, hi)))
			return 1;
	}
	return 0;
}

void byteset_free(struct byteset *s)
{
	ivset_free(&s->big);
	free(s->keys);
	free(s->masks);
	memset(s, 0, sizeof(*s));
}
