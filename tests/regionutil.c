/*
 * regionutil.c - the protected-region oracle (see regionutil.h).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region_layout.h"
#include "regionutil.h"
#include "testutil.h"

#define P 4096u

static bool sb_ok(const struct kr_side_sb *sb)
{
	return sb->magic == KR_SIDE_MAGIC &&
	       sb->crc == tu_crc32c(sb, offsetof(struct kr_side_sb, crc));
}

bool ru_sidecar_made(const char *sidecar)
{
	FILE *f = fopen(sidecar, "rb");
	if (!f)
		return false;
	struct kr_side_sb sb[2];
	bool made = false;
	for (int i = 0; i < 2 && !made; i++)
		made = fseek(f, (long)i * P, SEEK_SET) == 0 && fread(&sb[i], sizeof(sb[i]), 1, f) == 1 &&
		       sb_ok(&sb[i]);
	fclose(f);
	return made;
}

void ru_judge(const char *data, const char *sidecar, struct ru_verdict *v)
{
	ru_judge_pages(data, sidecar, v, NULL);
}

void ru_judge_pages(const char *data, const char *sidecar, struct ru_verdict *v, uint8_t *trusted_out)
{
	memset(v, 0, sizeof(*v));
	size_t dlen, slen;
	uint8_t *d = tu_read_file(data, &dlen), *s = tu_read_file(sidecar, &slen);
	TU_ASSERT(slen >= 3 * P, "sidecar %s too short (%zu)", sidecar, slen);
	const struct kr_side_sb *a = (const void *)s, *b = (const void *)(s + P), *sb;
	TU_ASSERT(sb_ok(a) || sb_ok(b), "no valid superblock in %s", sidecar);
	sb = sb_ok(a) && (!sb_ok(b) || a->seq >= b->seq) ? a : b;
	TU_ASSERT(sb->data_size == dlen, "sidecar says %llu bytes, file has %zu",
		  (unsigned long long)sb->data_size, dlen);
	TU_ASSERT(slen >= sb->side_size, "sidecar truncated");
	uint64_t n = dlen / P, W = sb->stripe_pages, G = sb->segment_pages;
	const uint64_t *in0 = (const void *)(s + sb->intent_off);
	const uint64_t *in1 = (const void *)(s + sb->intent_off + (sb->crc_off - sb->intent_off) / 2);
	const uint32_t *crcs = (const void *)(s + sb->crc_off), *meta = (const void *)(s + sb->meta_off);
	const uint8_t *par = s + sb->parity_off;
	v->state = sb->state;
	v->npages = n;
	v->first_bad = UINT64_MAX;
	bool clean = sb->state == KR_SIDE_CLEAN;
	uint8_t *trusted = calloc(n, 1);
	TU_ASSERT(trusted, "calloc");
	for (uint64_t g = 0; g < sb->nsegments; g++) {
		bool hot = ((in0[g / 64] | in1[g / 64]) >> (g % 64)) & 1;
		v->hot_segments += hot;
		for (uint64_t p = g * G; p < (g + 1) * G && p < n; p++)
			trusted[p] = clean || !hot;
	}
	for (uint64_t p = 0; p < n; p++) {
		if (!trusted[p])
			continue;
		v->trusted_pages++;
		if (tu_crc32c(d + p * P, P) != crcs[p]) {
			v->bad_crcs++;
			if (v->first_bad == UINT64_MAX)
				v->first_bad = p;
		}
	}
	uint8_t x[P];
	for (uint64_t st = 0; st < sb->nstripes; st++) {
		bool all = true;
		memset(x, 0, P);
		for (uint64_t p = st * W; p < (st + 1) * W && p < n; p++) {
			all = all && trusted[p];
			for (size_t i = 0; i < P; i++)
				x[i] ^= d[p * P + i];
		}
		if (!all)
			continue;
		v->trusted_stripes++;
		if (memcmp(x, par + st * P, P) != 0) {
			v->bad_parity++;
			if (v->first_bad == UINT64_MAX)
				v->first_bad = st;
		}
	}
	uint64_t ncp = (n * 4 + P - 1) / P;
	for (uint64_t cp = 0; cp < ncp; cp++) {
		bool all = true;
		for (uint64_t p = cp * 1024; p < (cp + 1) * 1024 && p < n; p++)
			all = all && trusted[p];
		if (all && tu_crc32c((const uint8_t *)crcs + cp * P, P) != meta[cp])
			v->bad_meta++;
	}
	if (clean)
		TU_ASSERT(tu_crc32c(meta, ncp * 4) == sb->meta_crc, "CLEAN sidecar's meta_crc fails");
	if (trusted_out)
		memcpy(trusted_out, trusted, n);
	free(trusted);
	free(d);
	free(s);
}

void ru_require_sound(const char *data, const char *sidecar, const char *what)
{
	struct ru_verdict v;
	ru_judge(data, sidecar, &v);
	TU_ASSERT(v.bad_crcs == 0 && v.bad_parity == 0 && v.bad_meta == 0,
		  "%s: %llu bad CRCs, %llu bad parity stripes, %llu bad meta (of %llu trusted pages, "
		  "%llu trusted stripes; first %llu; state %u, %llu hot segments)", what,
		  (unsigned long long)v.bad_crcs, (unsigned long long)v.bad_parity,
		  (unsigned long long)v.bad_meta, (unsigned long long)v.trusted_pages,
		  (unsigned long long)v.trusted_stripes, (unsigned long long)v.first_bad, v.state,
		  (unsigned long long)v.hot_segments);
}

void ru_make_file(char *path, size_t n, const char *tag, uint64_t npages, uint64_t seed)
{
	tu_pool_path(path, n, tag);
	uint8_t *buf = malloc(npages * P);
	TU_ASSERT(buf, "malloc");
	tu_fill(buf, npages * P, seed);
	tu_write_file(path, buf, npages * P);
	free(buf);
	char side[200];
	snprintf(side, sizeof(side), "%s.krs", path);
	remove(side);
}
