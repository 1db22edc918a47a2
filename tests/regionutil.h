/*
 * regionutil.h - an independent oracle for protected regions: reads a data file and its
 * sidecar (through the files, with the layout of layout.h, not through the library) and
 * recomputes what the sidecar claims, so tests judge keratin's redundancy by arithmetic
 * rather than by keratin's own word.
 */
#ifndef KR_REGIONUTIL_H
#define KR_REGIONUTIL_H

#include <stdbool.h>
#include <stdint.h>

struct ru_verdict {
	uint32_t state;           /* the sidecar's session state (1 CLEAN, 2 ACTIVE) */
	uint64_t npages, hot_segments;
	uint64_t trusted_pages;   /* pages the sidecar vouches for (all if CLEAN, else cold) */
	uint64_t bad_crcs;        /* trusted pages whose data fails the stored CRC */
	uint64_t trusted_stripes; /* stripes whose pages are all trusted */
	uint64_t bad_parity;      /* of those, stripes whose parity is not the XOR of the data */
	uint64_t bad_meta;        /* CRC pages fully trusted whose meta-CRC fails */
	uint64_t first_bad;       /* first failing page (or stripe) */
};

/* Judges data file + sidecar; fails the test if the sidecar is unreadable. If trusted is
 * not NULL it receives one byte per page: 1 if the sidecar vouches for the page. */
void ru_judge_pages(const char *data, const char *sidecar, struct ru_verdict *v, uint8_t *trusted);
void ru_judge(const char *data, const char *sidecar, struct ru_verdict *v);
/* Whether the sidecar exists with a valid superblock: a sidecar whose making was cut short
 * has none, and promises nothing (the next open makes it again). */
bool ru_sidecar_made(const char *sidecar);
/* ru_judge and require zero failures; `what` names the moment in the message. */
void ru_require_sound(const char *data, const char *sidecar, const char *what);
/* Creates a file of npages pages of seeded bytes (tu_pool_path naming, removed at exit). */
void ru_make_file(char *path, size_t n, const char *tag, uint64_t npages, uint64_t seed);

#endif
