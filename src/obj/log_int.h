/*
 * log_int.h - what log.c shares with log_recover.c, and nothing else includes: the record
 * walk and the replay's plain writes, the control pages' durable_seq, and a lane's stream
 * read back. log.h is the log's interface to the rest of the object store.
 */
#ifndef KR_LOG_INT_H
#define KR_LOG_INT_H

#include "log.h"

/* Called for each record of a payload stream (kr_log_stream_walk). */
typedef int (*kr_rec_fn)(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data);

/* Walks the records of a payload stream; calls fn for each. Returns KR_OK or the first
 * nonzero value fn returns. */
int kr_log_stream_walk(const uint8_t *stream, size_t len, uint32_t nrecords, kr_rec_fn fn,
		       void *ctx);
/* The bytes a record puts home (a FRESH record: the object header only). */
uint32_t kr_log_rec_home_len(const struct kr_rec_hdr *h);
/* n bytes of a record home at off, flushed: a replay's plain write. */
void kr_log_put_home(struct kr_log *log, uint64_t off, const void *src, size_t n);
/* kr_rec_fn: one record home (ctx: the log). */
int kr_log_rec_apply(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data);
/* Whether a record names bytes at its offset (SPILL and CANCEL records do not). */
int kr_log_rec_names_bytes(const struct kr_rec_hdr *h);
/* kr_rec_fn: KR_OK if a record's target lies in the heap or the root lines (ctx: the log). */
int kr_log_rec_validate(void *ctx, const struct kr_rec_hdr *h, const uint8_t *data);
/* Whether a FRESH object's directly written payload fails the CRC-64 its record carries. */
int kr_log_rec_fresh_mismatch(const struct kr_log *log, const struct kr_rec_hdr *h,
			      const uint8_t *data);
/* durable_seq from the control pages (the larger intact copy); fails if neither is. */
int kr_log_ctl_durable(const struct kr_log *log, uint64_t *out);
/* Sets the log's DRAM durable_seq and next sequence number after d. */
void kr_log_set_start(struct kr_log *log, uint64_t d);
/* Stores durable_seq, the clean word and the fresh word in both control pages, flushed;
 * the caller fences. */
void kr_log_ctl_store(struct kr_log *log, uint64_t d, uint64_t clean, uint64_t fresh);
/* A transaction's payload stream read out of its lane lines into a malloc'd buffer. */
uint8_t *kr_log_lane_read_stream(const struct kr_log_cacheline *lines, uint32_t ring,
				 uint32_t first, uint32_t nlines);
/* Whether lines[first..] hold a complete transaction with stamp s48: its line count, or 0. */
uint32_t kr_log_lane_complete(const struct kr_log_cacheline *lines, uint32_t ring, uint32_t first,
			      uint64_t s48);
/* The stream of a complete transaction, its CRC checked; NULL if it fails. */
uint8_t *kr_log_lane_checked_stream(const struct kr_log_cacheline *lines, uint32_t ring,
				    uint32_t first, uint32_t nlines);

#endif
