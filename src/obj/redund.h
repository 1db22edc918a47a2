/*
 * redund.h - keeping redundancy current: parity rows and chunk-record checksums follow
 * every write of a committed transaction; recovery recomputes them for what it replayed.
 *
 * The log calls in through struct kr_log_hooks (apply, flush, touched, settle), so the log
 * never knows about parity or chunk records. Which redundancy a pool keeps is the header's
 * ro_compat feature bits (KR_FEAT_RO_*).
 */
#ifndef KR_REDUND_H
#define KR_REDUND_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "log.h"
#include "parity.h"
#include "pmem.h"

struct kr_redund {
	struct kr_pm *pm;
	struct kr_parity parity;
	unsigned feats; /* KR_FEAT_RO_* in force */
	uint64_t meta_bytes; /* chunk records per zone; the geometry is parity.g */

	/* Recovery: ranges replayed or named by intents, to recompute before durable_seq
	 * moves past them. */
	struct kr_range {
		uint64_t off, len;
	} *touched;
	size_t ntouched, cap;
	int touched_oom;
};

/* An object's checksum: CRC-32C of its header's size and type (12 bytes) then its payload.
 * The fields are fixed at allocation, so kr_crc32c_delta patches it for payload changes
 * exactly as for a payload-only CRC (the delta position counts from the end). */
uint32_t kr_obj_crc(const struct kr_obj_hdr *hdr, const void *payload);
/* That checksum over the header fields alone: kr_crc32c_extend it with the payload. */
uint32_t kr_obj_crc_start(const struct kr_obj_hdr *hdr);
/* The object's checksum from kr_crc32c of its payload (taken while copying it), without
 * reading the payload again. */
uint32_t kr_obj_crc_combine(const struct kr_obj_hdr *hdr, uint32_t payload_crc);
/* The checksum of an object whose payload is hdr->size zero bytes, in time logarithmic in
 * the size (a fresh object the transaction never wrote). Equals kr_obj_crc of zeros. */
uint32_t kr_obj_crc_zeros(const struct kr_obj_hdr *hdr);

void kr_redund_init(struct kr_redund *r, struct kr_pm *pm, const struct kr_pool_hdr *h);
void kr_redund_fini(struct kr_redund *r);
/* Fills the log hooks with this module's functions. */
void kr_redund_hooks(struct kr_redund *r, struct kr_log_hooks *hooks);

/* Writes len bytes home at off outside the log (a large fresh object, after its intent
 * was committed), with the parity patch that goes with it; streamed, durable at the next
 * fence. */
void kr_redund_write_direct(struct kr_redund *r, uint64_t off, const void *src, size_t len);
/* Bytes of the heap at off change (changed, or are about to) from old to new outside the
 * log: patches their parity (flushed, not fenced). The caller writes the bytes. */
void kr_redund_patch(struct kr_redund *r, uint64_t off, const void *old, const void *new, size_t len);

/* Starts fetching the parity a later kr_redund_patch of [off, off+len) will write. */
void kr_redund_prefetch(const struct kr_redund *r, uint64_t off, size_t len);

/* CRC-32C of a chunk record's bytes 0..135. */
uint32_t kr_redund_chunk_crc(const struct kr_chunk_meta *m);
/* 1 if off lies in some zone's chunk records; *rec_off is that record's pool offset. */
int kr_redund_in_meta(const struct kr_redund *r, uint64_t off, uint64_t *rec_off);
/* Recomputes the CRC of the chunk record at rec_off and the parity of its column. */
void kr_redund_fix_chunk_crc(struct kr_redund *r, uint64_t rec_off);

#endif
