/*
 * vcache.h - block checksums of large objects, kept in DRAM, so that a transaction that
 * opens a large object for writing verifies the bytes it reads instead of the whole object.
 *
 * The object's CRC on media is the authority. Each time a whole large object passes it
 * (kr_vcache_object_crc, the same single pass that computes it), the running CRC at every
 * KR_VCACHE_BLOCK boundary is kept: block k is sound if extending the CRC before it (in)
 * over its bytes gives the CRC after it (out). A block's pair stays checkable on its own
 * after others change, so a commit that wrote a block recomputes only that block's out.
 * Nothing here is persistent: a mismatch only sends the caller back to the whole-object
 * check, which decides (and, when it passes, rebuilds the entry).
 */
#ifndef KR_VCACHE_H
#define KR_VCACHE_H

#include <pthread.h>
#include <stdint.h>

#include "layout.h"

#define KR_VCACHE_BLOCK 1024u
/* Below 8 blocks the whole CRC costs about what a lookup and a block check do. */
#define KR_VCACHE_MIN (8u * KR_VCACHE_BLOCK)
#define KR_VCACHE_SLOTS 256u                /* direct-mapped by oid */
#define KR_VCACHE_BUDGET ((size_t)8 << 20) /* bytes of block pairs, all entries (1 GiB of objects) */

struct kr_vcache_blk {
	uint32_t in, out;
};

struct kr_vcache {
	pthread_mutex_t lock;
	struct kr_vcache_ent {
		uint64_t oid, size; /* oid 0: empty */
		struct kr_vcache_blk *blk;
	} ent[KR_VCACHE_SLOTS];
	size_t bytes; /* of all blk arrays */
};

void kr_vcache_init(struct kr_vcache *c);
void kr_vcache_fini(struct kr_vcache *c);

/* The object's checksum (kr_obj_crc) from its header and payload, which is also copied to
 * copy (hdr->size bytes of DRAM) in the same pass unless copy is NULL. For an object of at
 * least KR_VCACHE_MIN bytes, a result equal to hdr->crc also (re)builds its entry, and any
 * other result drops it. */
uint32_t kr_vcache_object_crc(struct kr_vcache *c, uint64_t oid, const struct kr_obj_hdr *hdr,
			      const uint8_t *payload, uint8_t *copy);
/* 1 if the object of this oid and size has an entry. */
int kr_vcache_has(struct kr_vcache *c, uint64_t oid, uint64_t size);
/* 1 if every block overlapping payload bytes [s, e) matches its pair; 0 on a mismatch or
 * without an entry. */
int kr_vcache_verify(struct kr_vcache *c, uint64_t oid, uint64_t size, const uint8_t *payload,
		     uint64_t s, uint64_t e);
/* A commit wrote payload bytes [s, e) home: the pairs of their blocks follow them. */
void kr_vcache_update(struct kr_vcache *c, uint64_t oid, uint64_t size, const uint8_t *payload,
		      uint64_t s, uint64_t e);
/* The object is freed or rewritten in bulk: forget it. */
void kr_vcache_drop(struct kr_vcache *c, uint64_t oid, uint64_t size);

#endif
