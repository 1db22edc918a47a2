/*
 * sidecar.c - the sidecar file of a protected region: geometry, superblock copies, areas,
 * the hot-segment bitmap (see sidecar.h; the format is in region_layout.h and docs/FORMAT.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "sidecar.h"

#define P KR_SIDE_PAGE

static uint64_t pages_for(uint64_t bytes) { return (bytes + P - 1) / P; }

/* Fills the derived fields of sb from data_size, stripe, batch and segment pages. */
static int geometry(struct kr_side_sb *sb)
{
	if (sb->page_size != P || sb->stripe_pages < 2 || sb->stripe_pages > KR_SIDE_MAX_STRIPE ||
	    sb->batch_pages == 0 || sb->batch_pages > (1u << 20) || sb->segment_pages == 0 ||
	    sb->segment_pages % sb->stripe_pages || sb->data_size == 0 || sb->data_size % P)
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "sidecar geometry is inconsistent "
				  "(stripe %u, batch %u, segment %u pages, file %" PRIu64 " bytes)",
				  sb->stripe_pages, sb->batch_pages, sb->segment_pages, sb->data_size);
	uint64_t n = sb->data_size / P;
	sb->npages = n;
	sb->nstripes = (n + sb->stripe_pages - 1) / sb->stripe_pages;
	sb->nsegments = (n + sb->segment_pages - 1) / sb->segment_pages;
	uint64_t intent_pages = pages_for((sb->nsegments + 7) / 8);
	uint64_t crc_pages = pages_for(n * 4);
	sb->intent_off = 3 * P;
	sb->crc_off = sb->intent_off + 2 * intent_pages * P;
	sb->meta_off = sb->crc_off + crc_pages * P;
	sb->parity_off = sb->meta_off + pages_for(crc_pages * 4) * P;
	sb->side_size = sb->parity_off + sb->nstripes * P;
	return KR_OK;
}

int kr_side_sb_new(struct kr_side_sb *sb, uint64_t data_size, uint64_t dev, uint64_t ino,
		   uint32_t stripe, uint32_t batch, uint32_t segment)
{
	memset(sb, 0, sizeof(*sb));
	sb->magic = KR_SIDE_MAGIC;
	sb->version = KR_SIDE_VERSION;
	sb->sb_size = sizeof(*sb);
	sb->data_size = data_size;
	sb->data_dev = dev;
	sb->data_ino = ino;
	sb->page_size = P;
	sb->stripe_pages = stripe ? stripe : KR_SIDE_DEFAULT_STRIPE;
	sb->batch_pages = batch ? batch : KR_SIDE_DEFAULT_BATCH;
	uint32_t g = segment ? segment : KR_SIDE_DEFAULT_SEGMENT / sb->stripe_pages * sb->stripe_pages;
	if (!g)
		g = sb->stripe_pages;
	while ((data_size / P + g - 1) / g > KR_SIDE_MAX_SEGMENTS)
		g *= 2;
	sb->segment_pages = g;
	sb->csum_kind = KR_SIDE_CSUM_CRC32C;
	sb->state = KR_SIDE_ACTIVE;
	sb->flags = KR_SIDE_F_SEAL; /* what a program's session does by default */
	return geometry(sb);
}

static uint32_t sb_crc(const struct kr_side_sb *sb)
{
	return kr_crc32c(sb, offsetof(struct kr_side_sb, crc));
}

static bool sb_valid(const struct kr_side_sb *sb)
{
	if (sb->magic != KR_SIDE_MAGIC || sb->crc != sb_crc(sb) || sb->sb_size != sizeof(*sb))
		return false;
	for (size_t i = 0; i < sizeof(sb->reserved); i++)
		if (sb->reserved[i])
			return false;
	return true;
}

/* The next superblock, sealed: its sequence number raised and its CRC set. */
static void sb_next(struct kr_sidecar *sc)
{
	sc->sb.seq++;
	sc->sb.crc = sb_crc(&sc->sb);
}

/* A new sidecar's first superblock, into copy 0 with its magic number last
 * (kr_pm_write_header): a crash while it is written leaves a file that is refused as "not
 * a keratin sidecar", never one whose superblock is torn with its magic and taken for
 * damage. Copy 1 is still zeros. */
static int sb_write_first(struct kr_sidecar *sc)
{
	sb_next(sc);
	void *const copy[1] = {sc->pm.base};
	int rc = kr_pm_write_header(&sc->pm, copy, 1, &sc->sb, sizeof(sc->sb));
	if (rc == KR_OK)
		sc->sb_copy = 0;
	return rc;
}

/* Writes the next superblock into the other copy and persists it; it is current only
 * once durable, so a crash midway leaves the previous one in force. */
int kr_side_sb_write(struct kr_sidecar *sc)
{
	sb_next(sc);
	int copy = sc->sb_copy ^ 1;
	void *dst = sc->pm.base + (size_t)copy * P;
	kr_pm_copy(&sc->pm, dst, &sc->sb, sizeof(sc->sb));
	int rc = kr_pm_persist(&sc->pm, dst, sizeof(sc->sb));
	if (rc == KR_OK)
		sc->sb_copy = copy;
	return rc;
}

/* The current superblock of a mapped sidecar, validated. */
static int sb_read(const uint8_t *side, size_t side_len, const char *path, struct kr_side_sb *out,
		   int *copy)
{
	const struct kr_side_sb *a = (const void *)side, *b = (const void *)(side + P);
	bool va = side_len >= 2 * P && sb_valid(a), vb = side_len >= 2 * P && sb_valid(b);
	if (!va && !vb) {
		bool magic = side_len >= 2 * P && (a->magic == KR_SIDE_MAGIC || b->magic == KR_SIDE_MAGIC);
		return magic ? kr_err_set(KR_E_CORRUPT_HEADER, "%s: both sidecar superblocks are damaged", path)
			     : kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin sidecar (one whose making a "
						 "crash cut short is not one either: remove it and open again)", path);
	}
	*copy = va && (!vb || a->seq >= b->seq) ? 0 : 1;
	*out = *copy ? *b : *a;
	if (out->version != KR_SIDE_VERSION || out->csum_kind != KR_SIDE_CSUM_CRC32C)
		return kr_err_set(KR_E_FORMAT_VERSION, "%s: sidecar version %u (checksum %u) unknown",
				  path, out->version, out->csum_kind);
	struct kr_side_sb g = *out;
	int rc = geometry(&g);
	if (rc != KR_OK)
		return rc;
	if (memcmp(&g, out, sizeof(g)) != 0 || (out->state != KR_SIDE_CLEAN && out->state != KR_SIDE_ACTIVE))
		return kr_err_set(KR_E_FORMAT_GEOMETRY, "%s: sidecar superblock fields disagree", path);
	if (side_len < out->side_size)
		return kr_err_set(KR_E_FORMAT_TRUNCATED, "%s: sidecar is %zu bytes, needs %" PRIu64,
				  path, side_len, out->side_size);
	return KR_OK;
}

static void bind(struct kr_sidecar *sc, uint8_t *side)
{
	const struct kr_side_sb *sb = &sc->sb;
	uint64_t intent_bytes = (sb->crc_off - sb->intent_off) / 2;
	sc->shadow = (void *)(side + 2 * P);
	sc->passrec = (void *)(side + 2 * P + sizeof(struct kr_side_shadow));
	sc->intent[0] = (void *)(side + sb->intent_off);
	sc->intent[1] = (void *)(side + sb->intent_off + intent_bytes);
	sc->crcs = (void *)(side + sb->crc_off);
	sc->meta = (void *)(side + sb->meta_off);
	sc->parity = side + sb->parity_off;
	sc->npages = sb->npages;
	sc->nstripes = sb->nstripes;
	sc->nsegs = sb->nsegments;
	sc->ncrcpages = pages_for(sb->npages * 4);
	sc->W = sb->stripe_pages;
	sc->G = sb->segment_pages;
	sc->B = sb->batch_pages;
}

int kr_side_load(struct kr_sidecar *sc, uint8_t *map, size_t len, const char *path)
{
	int rc = sb_read(map, len, path, &sc->sb, &sc->sb_copy);
	if (rc == KR_OK)
		bind(sc, map);
	return rc;
}

int kr_side_open(struct kr_sidecar *sc, const char *path, bool readonly, bool may_create,
		 bool force_pmem, const struct kr_side_sb *fresh_sb, bool *fresh)
{
	memset(sc, 0, sizeof(*sc));
	sc->readonly = readonly;
	int fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (may_create ? O_CREAT : 0), 0644);
	sc->pm.fd = fd;
	if (fd < 0)
		return kr_err_errno(KR_E_IO_OPEN, "region: cannot open sidecar %s", path);
	if (flock(fd, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
		return kr_err_set(KR_E_IO_BUSY, "region: sidecar %s is attached by another process "
				  "or handle", path);
	struct stat st;
	if (fstat(fd, &st) != 0)
		return kr_err_errno(KR_E_IO, "region: fstat %s", path);
	*fresh = st.st_size == 0;
	if (*fresh && !may_create)
		return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: empty, not a keratin sidecar", path);
	if (*fresh) {
		sc->sb = *fresh_sb;
		if (kr_ftruncate(fd, (off_t)sc->sb.side_size) != 0)
			return kr_err_errno(KR_E_IO, "region: cannot size sidecar %s", path);
		st.st_size = (off_t)sc->sb.side_size;
	}
	size_t len = (size_t)st.st_size;
	if (len < 3 * P)
		return kr_err_set(KR_E_FORMAT_NOT_POOL, "%s: not a keratin sidecar (%zu bytes)", path, len);
	int rc;
	if (readonly) { /* nothing is written: no persistence layer needed */
		void *m = kr_mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return kr_err_errno(KR_E_IO_MAP, "region: mmap %s", path);
		sc->pm.base = m;
		sc->pm.size = len;
		sc->pm.mode = KR_MODE_PAGECACHE;
	} else if ((rc = kr_pm_map(&sc->pm, fd, len, force_pmem ? KR_OPEN_FORCE_PMEM : 0, path)) != KR_OK) {
		return rc;
	}
	if (!*fresh)
		return kr_side_load(sc, (uint8_t *)sc->pm.base, len, path);
	/* Everything hot until computed; the superblock goes last, ACTIVE, and only once every
	 * mark has persisted: after a crash, an unmarked segment of an ACTIVE sidecar would
	 * have its checksums, never computed, taken for damage. */
	bind(sc, (uint8_t *)sc->pm.base);
	rc = KR_OK;
	for (uint64_t g = 0; rc == KR_OK && g < sc->nsegs; g++)
		rc = kr_side_set_hot(sc, g, true, false);
	return rc == KR_OK ? sb_write_first(sc) : rc;
}

void kr_side_close(struct kr_sidecar *sc)
{
	if (sc->pm.base) {
		if (sc->readonly)
			munmap(sc->pm.base, sc->pm.size);
		else
			kr_pm_unmap(&sc->pm);
		sc->pm.base = NULL;
	}
	if (sc->pm.fd >= 0)
		close(sc->pm.fd); /* releases the flock */
	sc->pm.fd = -1;
}

bool kr_side_hot(const struct kr_sidecar *sc, uint64_t g)
{
	uint64_t a = __atomic_load_n(&sc->intent[0][g / 64], __ATOMIC_RELAXED);
	uint64_t b = __atomic_load_n(&sc->intent[1][g / 64], __ATOMIC_RELAXED);
	return ((a | b) >> (g % 64)) & 1;
}

int kr_side_set_hot(struct kr_sidecar *sc, uint64_t g, bool hot, bool from_handler)
{
	uint64_t bit = 1ull << (g % 64);
	for (int c = 0; c < 2; c++) {
		uint64_t *w = &sc->intent[c][g / 64];
		if (hot)
			kr_pm_or64(&sc->pm, w, bit);
		else
			kr_pm_andn64(&sc->pm, w, bit);
	}
	if (from_handler) {
		int rc = kr_pm_persist_now(&sc->pm, &sc->intent[0][g / 64], 8);
		int rc2 = kr_pm_persist_now(&sc->pm, &sc->intent[1][g / 64], 8);
		return rc != KR_OK ? rc : rc2;
	}
	kr_pm_flush(&sc->pm, &sc->intent[0][g / 64], 8);
	return kr_pm_persist(&sc->pm, &sc->intent[1][g / 64], 8);
}

static void store_u32(struct kr_sidecar *sc, uint32_t *dst, uint32_t v)
{
	kr_pm_copy(&sc->pm, dst, &v, sizeof(v));
	kr_pm_flush(&sc->pm, dst, sizeof(v));
}

void kr_side_set_crc(struct kr_sidecar *sc, uint64_t p, uint32_t crc)
{
	store_u32(sc, &sc->crcs[p], crc);
}

static const uint8_t zero_page[P] __attribute__((aligned(64)));

void kr_side_parity(struct kr_sidecar *sc, uint64_t s, const uint8_t *data)
{
	void *v[KR_SIDE_MAX_STRIPE + 1];
	uint64_t first = s * sc->W, n = kr_side_stripe_pages(sc, s);
	for (uint64_t i = 0; i < sc->W; i++)
		v[i] = i < n ? (void *)(data + (first + i) * P) : (void *)zero_page;
	v[sc->W] = sc->parity + s * P;
	kr_pm_xor_gen(&sc->pm, (int)sc->W + 1, P, v);
	kr_pm_flush(&sc->pm, v[sc->W], P);
}

void kr_side_meta(struct kr_sidecar *sc, uint64_t cp)
{
	store_u32(sc, &sc->meta[cp], kr_crc32c((const uint8_t *)sc->crcs + cp * P, P));
}

void kr_side_shadow(struct kr_sidecar *sc, uint64_t seq, uint64_t lo, uint64_t hi)
{
	struct kr_side_shadow sh = {.seq = seq, .lo = lo, .hi = hi};
	sh.crc = kr_crc32c(&sh, offsetof(struct kr_side_shadow, crc));
	kr_pm_copy(&sc->pm, sc->shadow, &sh, sizeof(sh));
	kr_pm_flush(&sc->pm, sc->shadow, sizeof(sh));
}

void kr_side_passrec(struct kr_sidecar *sc, struct kr_side_passrec *pr)
{
	pr->crc = kr_crc32c(pr, offsetof(struct kr_side_passrec, crc));
	kr_pm_copy(&sc->pm, sc->passrec, pr, sizeof(*pr));
	kr_pm_flush(&sc->pm, sc->passrec, sizeof(*pr));
}

bool kr_side_meta_ok(const struct kr_sidecar *sc, uint64_t cp)
{
	return kr_crc32c((const uint8_t *)sc->crcs + cp * P, P) == sc->meta[cp];
}

uint32_t kr_side_meta_crc(const struct kr_sidecar *sc)
{
	return kr_crc32c(sc->meta, sc->ncrcpages * 4);
}
