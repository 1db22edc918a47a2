/*
 * shadow.h - the bytes that checksum and parity were last computed over, for objects the
 * application writes in place outside transactions, kept in DRAM.
 *
 * kr_tx_add_stored needs the old bytes of a range the application has already overwritten:
 * parity can tell (a read of every row of the zone, with commits held still), but a
 * program like a hash map that persists a few bytes of the same bucket array a million
 * times should not pay that each time. After a declaration commits, the object's bytes are
 * kept here; the next declaration on it takes its old bytes from the copy. A copy is
 * trusted only while the CRC it was taken with equals the object's header CRC, which any
 * other change of the object changes (a transaction, a free and reuse): no other code has
 * to remember to drop it. Nothing here is persistent.
 */
#ifndef KR_SHADOW_H
#define KR_SHADOW_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define KR_SHADOW_SLOTS 1024u                /* direct-mapped by oid */
#define KR_SHADOW_MAX ((size_t)1 << 20)      /* larger objects are not copied */
#define KR_SHADOW_BUDGET ((size_t)64 << 20)  /* bytes of copies, all entries */

struct kr_shadow {
	pthread_mutex_t lock;
	struct kr_shadow_ent {
		uint64_t oid, size; /* oid 0: empty */
		uint32_t crc;       /* the object's CRC when bytes were its consistent bytes */
		uint8_t *bytes;
	} ent[KR_SHADOW_SLOTS];
	size_t bytes; /* of all copies */
};

void kr_shadow_init(struct kr_shadow *s);
void kr_shadow_fini(struct kr_shadow *s);
/* Copies bytes [off, off+len) of the object's consistent image to out and returns 1, if
 * there is a copy taken at header CRC crc; else 0. */
int kr_shadow_old(struct kr_shadow *s, uint64_t oid, uint64_t size, uint32_t crc, uint64_t off,
		  size_t len, uint8_t *out);
/* A commit wrote the nranges ranges [ranges[2i], ranges[2i+1]) of the object (their new
 * bytes at the same offsets of new), and its CRC went from was_crc to crc. A copy taken at
 * was_crc follows; else, when payload (the object's bytes at home) checksums to crc as a
 * whole (no store of the application's is still undeclared), a copy is taken of it.
 * crc_of(ctx, bytes) is the object's CRC were its payload bytes, computed only when needed
 * (and, in a debug build, to check the copy: invariant 1). */
void kr_shadow_follow(struct kr_shadow *s, uint64_t oid, uint64_t size, uint32_t was_crc,
		      uint32_t crc, const uint8_t *new, const uint64_t *ranges, uint32_t nranges,
		      const uint8_t *payload, uint32_t (*crc_of)(void *ctx, const uint8_t *bytes),
		      void *ctx);
/* Forget the object (freed). */
void kr_shadow_drop(struct kr_shadow *s, uint64_t oid);

#endif
