/*
 * scrub.h - verification and repair of a whole pool (scrub.c): the passes open runs on the
 * header copies, root lines and chunk records, the online repair of one object, and the
 * background scrubber with the read policy (struct kr_scrubber, pool->scrubber).
 */
#ifndef KR_SCRUB_H
#define KR_SCRUB_H

#include "pool_state.h"

/* Makes pool->scrubber: policy KR_READ_DEFAULT, no thread. */
int kr_scrubber_new(kr_pool *pool);
/* Stops the background scrubber if it runs, then frees pool->scrubber. NULL-safe. */
void kr_scrubber_free(kr_pool *pool);
/* Stops the background scrubber if it runs. */
void kr_scrub_stop(kr_pool *pool);

/* Open-time repair: chunk records failing their CRC are rebuilt from parity before the heap
 * is loaded; KR_E_CORRUPT_META if one cannot be. */
int kr_scrub_chunk_records(kr_pool *pool);
/* The header copies and the root lines of both control pages against each other: counted
 * in rep->copies / bad_copies, rewritten from the sound twin if repair (repaired_copies).
 * Open runs the two halves at its own moments, with its own tally. */
int kr_pool_check_copies(kr_pool *pool, int repair, struct kr_check_report *rep);
struct kr_copies_tally {
	uint64_t bad, repaired, first_bad_off;
};
/* Open chose a valid header copy; a copy that differs from it is rewritten (page and all)
 * if repair. */
int kr_scrub_header_copies(kr_pool *pool, int repair, struct kr_copies_tally *t);
/* Both root lines are written by the same transactions, so after recovery they agree; a
 * copy that fails its check is rewritten from the other (if repair). */
int kr_scrub_root_lines(kr_pool *pool, int repair, struct kr_copies_tally *t);
/* Online repair of one object that failed its checksum (commits held back meanwhile). */
int kr_scrub_object(kr_pool *pool, const struct kr_block *b);

#endif
