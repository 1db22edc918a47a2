/*
 * audit.h - where the deep check (deep.c) collects the invariant violations it finds.
 *
 * The allocator (heap.c) and the log (log.c) each audit their own DRAM state against the
 * bytes on media, since only they know their private structures; both report into one
 * struct kr_audit, which keeps a count, the offset and message of the first violation, and
 * never stops at the first one. Auditing only reads: nothing here writes the pool.
 */
#ifndef KR_AUDIT_H
#define KR_AUDIT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

struct kr_audit {
	uint64_t problems;
	uint64_t first_off; /* pool offset of the first violation (0 if none or not placed) */
	char first[200];    /* its description */
};

static inline void kr_audit_note(struct kr_audit *a, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void kr_audit_note(struct kr_audit *a, uint64_t off, const char *fmt, ...)
{
	if (a->problems++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(a->first, sizeof(a->first), fmt, ap);
		va_end(ap);
		a->first_off = off;
	}
}

#endif
