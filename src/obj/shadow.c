/*
 * shadow.c - DRAM copies of objects written in place outside transactions (shadow.h).
 *
 * Invariants
 *   1. An entry's bytes are the object's bytes as they were when its header CRC was crc:
 *      taken whole only from a payload that checksums to crc, and changed afterwards only
 *      by kr_shadow_follow with the bytes a commit wrote and the CRC it wrote.
 *   2. The copies' total stays within KR_SHADOW_BUDGET.
 */
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "invariant.h"
#include "shadow.h"

void kr_shadow_init(struct kr_shadow *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
}

static void ent_clear(struct kr_shadow *s, struct kr_shadow_ent *e)
{
	if (e->bytes)
		s->bytes -= e->size;
	free(e->bytes);
	*e = (struct kr_shadow_ent){0};
}

void kr_shadow_fini(struct kr_shadow *s)
{
	for (unsigned i = 0; i < KR_SHADOW_SLOTS; i++)
		ent_clear(s, &s->ent[i]);
	pthread_mutex_destroy(&s->lock);
}

static struct kr_shadow_ent *slot(struct kr_shadow *s, uint64_t oid)
{
	return &s->ent[(oid >> 4) * 0x9e3779b97f4a7c15ull >> 54 & (KR_SHADOW_SLOTS - 1)];
}

int kr_shadow_old(struct kr_shadow *s, uint64_t oid, uint64_t size, uint32_t crc, uint64_t off,
		  size_t len, uint8_t *out)
{
	int hit = 0;
	pthread_mutex_lock(&s->lock);
	struct kr_shadow_ent *e = slot(s, oid);
	if (e->oid == oid && e->size == size && e->crc == crc && off + len <= size) {
		memcpy(out, e->bytes + off, len);
		hit = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return hit;
}

void kr_shadow_follow(struct kr_shadow *s, uint64_t oid, uint64_t size, uint32_t was_crc,
		      uint32_t crc, const uint8_t *new, const uint64_t *ranges, uint32_t nranges,
		      const uint8_t *payload, uint32_t (*crc_of)(void *ctx, const uint8_t *bytes),
		      void *ctx)
{
	if (size > KR_SHADOW_MAX)
		return;
	pthread_mutex_lock(&s->lock);
	struct kr_shadow_ent *e = slot(s, oid);
	if (e->oid == oid && e->size == size && e->crc == was_crc) {
		for (uint32_t i = 0; i < nranges; i++)
			memcpy(e->bytes + ranges[2 * i], new + ranges[2 * i],
			       ranges[2 * i + 1] - ranges[2 * i]);
		e->crc = crc;
	} else if (crc_of(ctx, payload) == crc) {
		ent_clear(s, e);
		if (s->bytes + size <= KR_SHADOW_BUDGET && (e->bytes = kr_malloc(size))) {
			memcpy(e->bytes, payload, size);
			*e = (struct kr_shadow_ent){oid, size, crc, e->bytes};
			s->bytes += size;
		}
	}
	/* A copy kr_shadow_old would trust for this object now is right. */
	KR_INVARIANT("shadow.c", 1, e->oid != oid || e->size != size || e->crc != crc ||
					    crc_of(ctx, e->bytes) == e->crc);
	KR_INVARIANT("shadow.c", 2, s->bytes <= KR_SHADOW_BUDGET);
	pthread_mutex_unlock(&s->lock);
}

void kr_shadow_drop(struct kr_shadow *s, uint64_t oid)
{
	pthread_mutex_lock(&s->lock);
	struct kr_shadow_ent *e = slot(s, oid);
	if (e->oid == oid)
		ent_clear(s, e);
	pthread_mutex_unlock(&s->lock);
}
