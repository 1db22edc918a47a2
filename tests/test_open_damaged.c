/*
 * test_open_damaged.c - kr_pool_open on thousands of damaged pools: it must return KR_OK
 * or a clean, documented negative code with a message, and never crash, hang or touch
 * memory outside the pool (run under ASan in CI). The deterministic, gcc-buildable cousin
 * of fuzz/fuzz_open.c.
 *
 * Two small valid base images are made: a cleanly closed pool with a root directory,
 * small and large objects and some history in the log, and the same pool after a process
 * ran more transactions and exited without closing it (so recovery has work to do). Each
 * iteration copies a base, applies one seeded mutation and opens the result:
 *   - random byte flips in a header copy, a control page, the lanes or their replica
 *     (mostly in lines in use), the zone metadata (chunk words, run bitmaps), object
 *     headers, or anywhere;
 *   - header fields of both copies set to boundary values, with the header CRC recomputed
 *     so that the geometry checks, not the checksum, are exercised ("checksum off");
 *   - a byte of a committed log transaction changed and its payload CRC recomputed (in the
 *     primary lane, or in both copies), sometimes with durable_seq and the clean flag reset
 *     so that recovery replays it;
 *   - durable_seq / clean flag words set to odd values, with or without valid check bits;
 *   - the file truncated.
 * When the open succeeds, the test reads kr_pool_stat, iterates all objects (bounded),
 * reads every byte of each (checking first that kr_size stays inside the mapping) and
 * closes. Replay one case with KR_DAMAGED_ONLY=<iteration> (and the same KR_TEST_SEED).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layout.h"
#include "testutil.h"

#define POOL_SIZE (8ull << 20)
#define NROOT 16

struct base {
	const char *name;
	uint8_t *img;
	size_t len;
	struct kr_pool_hdr h;
	kr_oid objs[64];
	size_t nobjs;
};

/* ---- base images ------------------------------------------------------------------------------ */

static void make_objects(kr_pool *pool, kr_oid root, struct tu_rng *rng)
{
	static const size_t sizes[] = { 8, 24, 100, 200, 1000, 3000, 5000, 16000, 40000, 70000 };
	kr_tx *tx;
	TU_OK(kr_tx_begin(pool, &tx));
	kr_oid *dir = kr_tx_open(tx, root);
	TU_ASSERT(dir, "kr_tx_open: %s", kr_errmsg());
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		TU_OK(kr_tx_alloc(tx, sizes[i], (uint32_t)i + 1, &dir[i]));
		uint8_t *p = kr_tx_open(tx, dir[i]);
		TU_ASSERT(p, "kr_tx_open: %s", kr_errmsg());
		tu_fill(p, sizes[i], i);
	}
	TU_OK(kr_tx_commit(tx));
	/* Some history: partial overwrites fill the lanes with committed transactions. */
	for (int i = 0; i < 40; i++) {
		const kr_oid *d = kr_get(pool, root);
		kr_oid o = d[tu_rng_below(rng, sizeof(sizes) / sizeof(sizes[0]))];
		size_t sz = kr_size(pool, o), len = tu_rng_logu(rng, 1, sz < 2000 ? sz : 2000);
		uint8_t buf[2000];
		tu_fill(buf, len, 1000 + i);
		TU_OK(kr_update(pool, o, tu_rng_below(rng, sz - len + 1), buf, len));
	}
}

/* More transactions, including an allocation and a free, by a process that then exits
 * without closing the pool. */
static void crash_after_more(const char *path, struct tu_rng *rng)
{
	fflush(stdout);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		kr_pool *pool;
		kr_oid root, o;
		kr_tx *tx;
		TU_OK(tu_open(path, &pool));
		TU_OK(kr_root(pool, NROOT * sizeof(kr_oid), &root));
		for (int i = 0; i < 6; i++) {
			const kr_oid *d = kr_get(pool, root);
			uint8_t buf[300];
			tu_fill(buf, sizeof(buf), 77 + i);
			TU_OK(kr_update(pool, d[4], tu_rng_below(rng, 700), buf, sizeof(buf)));
		}
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, 333, 99, &o));
		kr_oid *slot = kr_tx_add(tx, root, 12 * sizeof(kr_oid), sizeof(kr_oid));
		TU_ASSERT(slot, "kr_tx_add: %s", kr_errmsg());
		*slot = o;
		const kr_oid *d = kr_get(pool, root);
		TU_OK(kr_tx_free(tx, d[1]));
		slot = kr_tx_add(tx, root, 1 * sizeof(kr_oid), sizeof(kr_oid));
		TU_ASSERT(slot, "kr_tx_add: %s", kr_errmsg());
		*slot = 0;
		TU_OK(kr_tx_commit(tx));
		_exit(0);
	}
	int st;
	TU_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "child making the unclean base failed");
}

static void load_base(struct base *b, const char *path, const char *name)
{
	b->name = name;
	b->img = tu_read_file(path, &b->len);
	memcpy(&b->h, b->img, sizeof(b->h));
	kr_pool *pool;
	TU_OK(tu_open(path, &pool)); /* recovers a copy; the image stays as it was */
	b->nobjs = 0;
	for (kr_oid o = kr_first(pool); o && b->nobjs < 64; o = kr_next(pool, o))
		b->objs[b->nobjs++] = o;
	TU_OK(kr_pool_close(pool));
	tu_write_file(path, b->img, b->len);
}

/* ---- mutations ---------------------------------------------------------------------------------- */

struct region {
	uint64_t off, len;
};

static uint64_t lane_bytes(const struct kr_pool_hdr *h)
{
	return (uint64_t)h->lane_pages * KR_PAGE_SIZE;
}

/* An offset inside a lane line that is in use (non-zero header), or anywhere in the lanes. */
static uint64_t pick_lane_byte(const struct base *b, struct tu_rng *rng, bool replica)
{
	const struct kr_pool_hdr *h = &b->h;
	uint64_t start = replica ? h->lanes_replica_off : h->lanes_off;
	uint64_t nlines = h->nlanes * lane_bytes(h) / KR_LINE_SIZE;
	for (int tries = 0; tries < 64; tries++) {
		uint64_t li = tu_rng_below(rng, nlines);
		uint64_t hw;
		memcpy(&hw, b->img + start + li * KR_LINE_SIZE, 8);
		if (hw)
			return start + li * KR_LINE_SIZE + tu_rng_below(rng, KR_LINE_SIZE);
	}
	return start + tu_rng_below(rng, nlines * KR_LINE_SIZE);
}

/* An offset of a non-zero byte of zone 0's metadata, or anywhere in it. */
static uint64_t pick_meta_byte(const struct base *b, struct tu_rng *rng)
{
	uint64_t start = b->h.heap_off, len = (uint64_t)b->h.zone_meta_pages * KR_PAGE_SIZE;
	for (int tries = 0; tries < 256; tries++) {
		uint64_t o = start + tu_rng_below(rng, len);
		if (b->img[o])
			return o;
	}
	return start + tu_rng_below(rng, len < 4096 ? len : 4096);
}

static uint64_t pick_region_byte(const struct base *b, struct tu_rng *rng, int *region)
{
	const struct kr_pool_hdr *h = &b->h;
	*region = (int)tu_rng_below(rng, 9);
	switch (*region) {
	case 0:
		return tu_rng_below(rng, sizeof(struct kr_pool_hdr));
	case 1:
		return h->pool_size - KR_PAGE_SIZE + tu_rng_below(rng, sizeof(struct kr_pool_hdr));
	case 2:
		return h->ctl_off + tu_rng_below(rng, 2 * KR_LINE_SIZE);
	case 3:
		return h->ctl_replica_off + tu_rng_below(rng, 2 * KR_LINE_SIZE);
	case 4:
		return pick_lane_byte(b, rng, false);
	case 5:
		return pick_lane_byte(b, rng, true);
	case 6:
		return pick_meta_byte(b, rng);
	case 7:
		return b->objs[tu_rng_below(rng, b->nobjs)] - sizeof(struct kr_obj_hdr) +
		       tu_rng_below(rng, sizeof(struct kr_obj_hdr));
	default:
		return tu_rng_below(rng, b->len);
	}
}

static uint64_t interesting(struct tu_rng *rng, uint64_t orig, unsigned size)
{
	static const uint64_t vals[] = { 0, 1, 2, 3, 4, 7, 8, 15, 16, 63, 64, 100, 255, 256, 1023,
					 1024, 4095, 4096, 4097, 65535, 65536, 0x7fffffff,
					 0x80000000u, 0xffffffffu, 1ull << 32, 1ull << 46,
					 1ull << 63, UINT64_MAX };
	uint64_t v;
	switch (tu_rng_below(rng, 5)) {
	case 0:
		v = vals[tu_rng_below(rng, sizeof(vals) / sizeof(vals[0]))];
		break;
	case 1:
		v = orig + tu_rng_range(rng, 1, 8);
		break;
	case 2:
		v = orig - tu_rng_range(rng, 1, 8);
		break;
	case 3:
		v = tu_rng_chance(rng, 1, 2) ? orig * 2 : orig / 2;
		break;
	default:
		v = tu_rng_next(rng);
		break;
	}
	return size == 4 ? (uint32_t)v : v;
}

static const struct {
	const char *name;
	unsigned off, size;
} hdr_fields[] = {
	{ "version", 8, 4 },	     { "hdr_size", 12, 4 },
	{ "compat", 16, 4 },	     { "incompat", 20, 4 },
	{ "ro_compat", 24, 4 },	     { "page_size", 28, 4 },
	{ "pool_size", 48, 8 },	     { "nlanes", 64, 4 },
	{ "lane_pages", 68, 4 },     { "lanes_off", 72, 8 },
	{ "lanes_replica_off", 80, 8 }, { "ctl_off", 88, 8 },
	{ "ctl_replica_off", 96, 8 }, { "heap_off", 104, 8 },
	{ "nzones", 112, 4 },	     { "rows", 116, 4 },
	{ "row_pages", 120, 4 },     { "zone_meta_pages", 124, 4 },
	{ "chunk_pages", 128, 4 },   { "chunks_per_zone", 132, 4 },
	{ "zone_size", 136, 8 },     { "reserved", 144, 8 },
};

static void put(uint8_t *img, uint64_t off, uint64_t v, unsigned size)
{
	memcpy(img + off, &v, size); /* little-endian host */
}

static uint64_t get(const uint8_t *img, uint64_t off, unsigned size)
{
	uint64_t v = 0;
	memcpy(&v, img + off, size);
	return v;
}

static uint64_t durable_word(uint64_t seq)
{
	uint8_t le[8];
	memcpy(le, &seq, 8);
	return seq | ((uint64_t)(tu_crc32c(le, 8) & 0xffff) << KR_DURABLE_CHECK_SHIFT);
}

/* Sets durable_seq (with valid check bits) and the clean flag in both control pages. */
static void set_ctl(uint8_t *img, const struct kr_pool_hdr *h, uint64_t seq, uint64_t clean)
{
	for (int c = 0; c < 2; c++) {
		uint64_t line = (c ? h->ctl_replica_off : h->ctl_off) + KR_CTL_LOG_LINE * KR_LINE_SIZE;
		put(img, line + offsetof(struct kr_log_line, durable_word), durable_word(seq), 8);
		put(img, line + offsetof(struct kr_log_line, clean), clean, 8);
	}
}

/* Finds a complete transaction in the primary lanes: lane, first line index, line count. */
static bool find_tx(const uint8_t *img, const struct kr_pool_hdr *h, struct tu_rng *rng,
		    uint32_t *lane_out, uint64_t *first_out, uint32_t *nlines_out, uint64_t *seq_out)
{
	uint64_t nl = lane_bytes(h) / KR_LINE_SIZE;
	uint32_t lane0 = (uint32_t)tu_rng_below(rng, h->nlanes);
	for (uint32_t k = 0; k < h->nlanes; k++) {
		uint32_t lane = (lane0 + k) % h->nlanes;
		const struct kr_log_cacheline *lines =
			(const void *)(img + h->lanes_off + lane * lane_bytes(h));
		uint64_t start = tu_rng_below(rng, nl);
		for (uint64_t j = 0; j < nl; j++) {
			uint64_t i = (start + j) % nl, hw = lines[i].header;
			if ((hw & KR_LINE_KIND_MASK) != KR_LINE_FIRST)
				continue;
			struct kr_tx_first first;
			memcpy(&first, lines[i].payload, sizeof(first));
			if (first.nlines == 0 || first.nlines > nl)
				continue;
			bool whole = true;
			for (uint32_t x = 1; x < first.nlines && whole; x++)
				whole = (lines[(i + x) % nl].header >> KR_LINE_SEQ_SHIFT) ==
					(hw >> KR_LINE_SEQ_SHIFT);
			if (!whole)
				continue;
			*lane_out = lane;
			*first_out = i;
			*nlines_out = first.nlines;
			*seq_out = first.seq;
			return true;
		}
	}
	return false;
}

/* Changes one byte of a committed transaction's payload and recomputes its CRC, in the
 * primary lane and, if both, in the replica too. */
static bool mutate_log(uint8_t *img, const struct kr_pool_hdr *h, struct tu_rng *rng, bool both,
		       char *desc, size_t dlen)
{
	uint32_t lane, nlines;
	uint64_t first, seq, nl = lane_bytes(h) / KR_LINE_SIZE;
	if (!find_tx(img, h, rng, &lane, &first, &nlines, &seq))
		return false;
	size_t slen = (size_t)nlines * KR_LINE_PAYLOAD;
	uint8_t *stream = malloc(slen);
	uint64_t lane_off = h->lanes_off + lane * lane_bytes(h);
	for (uint32_t k = 0; k < nlines; k++)
		memcpy(stream + k * KR_LINE_PAYLOAD,
		       img + lane_off + ((first + k) % nl) * KR_LINE_SIZE + 8, KR_LINE_PAYLOAD);
	size_t pos;
	do
		pos = tu_rng_below(rng, slen);
	while (pos >= offsetof(struct kr_tx_first, crc) && pos < offsetof(struct kr_tx_first, crc) + 4);
	/* record headers (kind, len, off) are where replay can be misled: favour them */
	if (tu_rng_chance(rng, 1, 2) && slen > sizeof(struct kr_tx_first) + 16)
		pos = sizeof(struct kr_tx_first) + tu_rng_below(rng, 16);
	stream[pos] ^= (uint8_t)tu_rng_range(rng, 1, 255);
	memset(stream + offsetof(struct kr_tx_first, crc), 0, 4);
	uint32_t crc = tu_crc32c(stream, slen);
	memcpy(stream + offsetof(struct kr_tx_first, crc), &crc, 4);
	for (int copy = 0; copy < (both ? 2 : 1); copy++) {
		uint64_t base = (copy ? h->lanes_replica_off : h->lanes_off) + lane * lane_bytes(h);
		for (uint32_t k = 0; k < nlines; k++)
			memcpy(img + base + ((first + k) % nl) * KR_LINE_SIZE + 8,
			       stream + k * KR_LINE_PAYLOAD, KR_LINE_PAYLOAD);
	}
	free(stream);
	snprintf(desc, dlen, "log tx seq %llu (lane %u, %u lines): payload byte %zu changed, crc "
		 "fixed in %s",
		 (unsigned long long)seq, lane, nlines, pos, both ? "both copies" : "the primary");
	/* Make recovery replay it: pool marked unclean, durable_seq below it. */
	if (tu_rng_chance(rng, 2, 3)) {
		set_ctl(img, h, seq ? seq - 1 : 0, 0);
		strncat(desc, ", durable_seq lowered, clean flag cleared", dlen - strlen(desc) - 1);
	}
	return true;
}

/* Applies mutation `i` to img (a copy of the base). Returns the new file length. */
static size_t mutate(const struct base *b, uint8_t *img, struct tu_rng *rng, char *desc, size_t dlen)
{
	const struct kr_pool_hdr *h = &b->h;
	size_t len = b->len;
	unsigned kind = (unsigned)tu_rng_below(rng, 100);
	int region;
	if (kind < 40) {
		/* byte flips in one region, no checksum fixed */
		unsigned n = (unsigned)tu_rng_range(rng, 1, 4);
		uint64_t off = pick_region_byte(b, rng, &region);
		for (unsigned k = 0; k < n; k++) {
			uint64_t o = k ? off + tu_rng_below(rng, 64) : off;
			if (o >= len)
				o = off;
			img[o] ^= (uint8_t)tu_rng_range(rng, 1, 255);
		}
		snprintf(desc, dlen, "%u byte flips from offset %#llx (region %d)", n,
			 (unsigned long long)off, region);
	} else if (kind < 48) {
		/* an aligned word in a region set to a boundary value, no checksum fixed */
		unsigned size = tu_rng_chance(rng, 1, 2) ? 8 : 4;
		uint64_t off = pick_region_byte(b, rng, &region) & ~(uint64_t)(size - 1);
		put(img, off, interesting(rng, get(img, off, size), size), size);
		snprintf(desc, dlen, "%u-byte word at %#llx (region %d) := %#llx", size,
			 (unsigned long long)off, region, (unsigned long long)get(img, off, size));
	} else if (kind < 70) {
		/* header fields in both copies, CRCs fixed: the field checks must catch it */
		unsigned nf = (unsigned)tu_rng_range(rng, 1, 3);
		int n = snprintf(desc, dlen, "header fields (both copies, crc fixed):");
		uint8_t a[256], bb[256];
		memcpy(a, img, 256);
		memcpy(bb, img + h->pool_size - KR_PAGE_SIZE, 256);
		for (unsigned k = 0; k < nf; k++) {
			unsigned fi = (unsigned)tu_rng_below(rng, sizeof(hdr_fields) / sizeof(hdr_fields[0]));
			unsigned off = hdr_fields[fi].off, size = hdr_fields[fi].size;
			uint64_t v = interesting(rng, get(a, off, size), size);
			put(a, off, v, size);
			put(bb, off, v, size);
			if (n > 0 && (size_t)n < dlen)
				n += snprintf(desc + n, dlen - (size_t)n, " %s=%#llx", hdr_fields[fi].name,
					      (unsigned long long)v);
		}
		tu_hdr_fix_crc(a);
		tu_hdr_fix_crc(bb);
		memcpy(img, a, 256);
		/* copy B stays where the ORIGINAL pool_size says: a reader that trusts the
		 * mutated pool_size looks for it elsewhere, which is part of the test */
		if (tu_rng_chance(rng, 4, 5))
			memcpy(img + h->pool_size - KR_PAGE_SIZE, bb, 256);
	} else if (kind < 76) {
		/* one header copy changed with a valid CRC: two valid copies that disagree */
		int copy = (int)tu_rng_below(rng, 2);
		uint8_t *hp = img + (copy ? h->pool_size - KR_PAGE_SIZE : 0);
		unsigned fi = (unsigned)tu_rng_below(rng, sizeof(hdr_fields) / sizeof(hdr_fields[0]));
		uint64_t v = interesting(rng, get(hp, hdr_fields[fi].off, hdr_fields[fi].size),
					 hdr_fields[fi].size);
		put(hp, hdr_fields[fi].off, v, hdr_fields[fi].size);
		tu_hdr_fix_crc(hp);
		snprintf(desc, dlen, "header copy %c: %s=%#llx, crc fixed", copy ? 'B' : 'A',
			 hdr_fields[fi].name, (unsigned long long)v);
	} else if (kind < 90) {
		if (!mutate_log(img, h, rng, tu_rng_chance(rng, 1, 2), desc, dlen)) {
			img[pick_lane_byte(b, rng, false)] ^= 0x10;
			snprintf(desc, dlen, "lane byte flip (no complete transaction found)");
		}
	} else if (kind < 96) {
		/* control words */
		uint64_t seq = interesting(rng, 1, 8) & KR_DURABLE_SEQ_MASK;
		uint64_t clean = tu_rng_chance(rng, 1, 2) ? 0 : interesting(rng, KR_CLEAN_MAGIC, 8);
		set_ctl(img, h, seq, clean);
		bool bad_check = tu_rng_chance(rng, 1, 3);
		if (bad_check) /* damage the check bits of copy A */
			img[h->ctl_off + KR_CTL_LOG_LINE * KR_LINE_SIZE + 7] ^= 0x5a;
		snprintf(desc, dlen, "durable_seq := %llu%s, clean := %#llx",
			 (unsigned long long)seq, bad_check ? " (copy A check bits bad)" : "",
			 (unsigned long long)clean);
	} else {
		len = (size_t)tu_rng_below(rng, b->len);
		if (tu_rng_chance(rng, 1, 2))
			len &= ~(size_t)(KR_PAGE_SIZE - 1);
		snprintf(desc, dlen, "truncated to %zu bytes", len);
	}
	return len;
}

/* ---- opening the damaged pool ---------------------------------------------------------------- */

struct tally {
	unsigned ok, refused, lazy, by_code[64];
	int codes[64];
	unsigned ncodes;
	unsigned failures;
};

static void count_code(struct tally *t, int rc)
{
	for (unsigned i = 0; i < t->ncodes; i++)
		if (t->codes[i] == rc) {
			t->by_code[i]++;
			return;
		}
	if (t->ncodes < 64) {
		t->codes[t->ncodes] = rc;
		t->by_code[t->ncodes++] = 1;
	}
}

static void fail_case(struct tally *t, const char *fmt, const char *detail)
{
	t->failures++;
	if (t->failures <= 20)
		fprintf(stderr, "FAIL case %s: %s %s\n", tu_case_name(), fmt, detail ? detail : "");
}

static void open_and_use(const char *path, struct tally *t)
{
	kr_pool *pool = NULL;
	int rc = tu_open(path, &pool);
	if (rc != KR_OK) {
		t->refused++;
		count_code(t, rc);
		if (!tu_known_err(rc) || rc >= 0)
			fail_case(t, "kr_pool_open returned an undocumented code", kr_strerror(rc));
		if (kr_errcode() != rc)
			fail_case(t, "kr_errcode() disagrees with the returned code", NULL);
		if (!kr_errmsg() || !*kr_errmsg())
			fail_case(t, "empty kr_errmsg()", NULL);
		if (pool)
			fail_case(t, "pool handle set although open failed", NULL);
		return;
	}
	t->ok++;
	struct kr_pool_stat st;
	if (kr_pool_stat(pool, &st) != KR_OK)
		fail_case(t, "kr_pool_stat failed on an open pool", kr_errmsg());
	const uint8_t *base = kr_pool_base(pool);
	size_t mapped = kr_pool_mapped_size(pool);
	unsigned long sum = 0, n = 0;
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o)) {
		if (++n > 100000) {
			fail_case(t, "kr_first/kr_next does not terminate", NULL);
			break;
		}
		const uint8_t *p = kr_get(pool, o);
		size_t sz = kr_size(pool, o);
		if (!p) {
			/* Damage found lazily (a block whose header disagrees with it) is fine, if
			 * it is reported as damage. */
			if (KR_ERR_CLASS(kr_errcode()) == KR_E_CORRUPT || kr_errcode() == KR_E_MEDIA)
				t->lazy++;
			else
				fail_case(t, "iteration returned an oid that kr_get refuses without "
					     "reporting damage:", kr_errmsg());
			continue;
		}
		if (p < base || p + sz > base + mapped || p + sz < p) {
			char d[96];
			snprintf(d, sizeof(d), "oid %#llx size %zu, mapping %zu bytes",
				 (unsigned long long)o, sz, mapped);
			fail_case(t, "live object reaches outside the pool mapping:", d);
			continue;
		}
		for (size_t i = 0; i < sz; i++)
			sum += p[i];
	}
	if (n != st.nobjects)
		fail_case(t, "iteration count disagrees with kr_pool_stat nobjects", NULL);
	(void)sum;
	rc = kr_pool_close(pool);
	if (rc != KR_OK && !tu_known_err(rc))
		fail_case(t, "kr_pool_close returned an undocumented code", NULL);
}

int main(void)
{
	uint64_t seed = tu_seed("test_open_damaged", 31337);
	unsigned iters = tu_scaled(4000, 2000);
	const char *only = getenv("KR_DAMAGED_ONLY");
	double t0 = tu_now();

	tu_case_watch("test_open_damaged: crashed/hung in case: ", true);

	/* Base images. */
	char path[128], work[128];
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	tu_pool_path(path, sizeof(path), "damaged-base");
	tu_pool_path(work, sizeof(work), "damaged");
	kr_pool *pool;
	kr_oid root;
	struct base bases[2];
	TU_OK(tu_create(path, POOL_SIZE, 4, 2, 16, &pool));
	TU_OK(kr_root(pool, NROOT * sizeof(kr_oid), &root));
	make_objects(pool, root, &rng);
	TU_OK(kr_pool_close(pool));
	load_base(&bases[0], path, "clean");
	crash_after_more(path, &rng);
	load_base(&bases[1], path, "unclean");

	/* The work file is mapped here too, so that restoring the base between cases only
	 * copies the pages that the previous case changed. */
	tu_write_file(work, bases[0].img, bases[0].len);
	int fd = open(work, O_RDWR);
	TU_ASSERT(fd >= 0, "open %s: %s", work, strerror(errno));
	uint8_t *map = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	TU_ASSERT(map != MAP_FAILED, "mmap: %s", strerror(errno));
	uint8_t *img = malloc(POOL_SIZE);
	TU_ASSERT(img, "out of memory");

	struct tally t = { 0 };
	unsigned first = 0, last = iters;
	if (only && *only) {
		first = (unsigned)strtoul(only, NULL, 0);
		last = first + 1;
	}
	for (unsigned i = first; i < last; i++) {
		struct tu_rng r;
		tu_rng_seed(&r, seed * 1000003 + i);
		const struct base *b = &bases[tu_rng_below(&r, 2)];
		char desc[400];
		memcpy(img, b->img, b->len);
		size_t len = mutate(b, img, &r, desc, sizeof(desc));
		tu_case_begin(tu_sanitized() ? 120 : 30, "seed %llu iteration %u (%s base): %s",
			      (unsigned long long)seed, i, b->name, desc);
		/* restore + apply: page by page, only where the file differs */
		TU_ASSERT(ftruncate(fd, POOL_SIZE) == 0, "ftruncate: %s", strerror(errno));
		for (size_t p = 0; p < POOL_SIZE; p += KR_PAGE_SIZE)
			if (memcmp(map + p, img + p, KR_PAGE_SIZE) != 0)
				memcpy(map + p, img + p, KR_PAGE_SIZE);
		if (len != POOL_SIZE)
			TU_ASSERT(ftruncate(fd, (off_t)len) == 0, "ftruncate: %s", strerror(errno));
		if (only)
			printf("%s\n", tu_case_name());
		open_and_use(work, &t);
		tu_case_end();
	}

	printf("test_open_damaged: %u damaged pools opened: %u accepted (%u damaged objects then "
	       "refused by kr_get), %u refused (%.1fs)\n",
	       last - first, t.ok, t.lazy, t.refused, tu_now() - t0);
	for (unsigned k = 0; k < t.ncodes; k++)
		printf("  %6u x %d %s\n", t.by_code[k], t.codes[k], kr_strerror(t.codes[k]));
	TU_ASSERT(t.failures == 0, "%u cases misbehaved (see above)", t.failures);
	if (!only) {
		/* If nothing were refused (or nothing accepted) the mutations would be toothless. */
		TU_ASSERT(t.refused > iters / 10 && t.ok > iters / 10,
			  "mutations ineffective: %u accepted, %u refused", t.ok, t.refused);
	}
	munmap(map, POOL_SIZE);
	close(fd);
	free(img);
	free(bases[0].img);
	free(bases[1].img);
	unlink(work); /* the last mutation, damaged by design; the base pool stays */
	TU_END_CHECK_ALL("test_open_damaged");
	return 0;
}
