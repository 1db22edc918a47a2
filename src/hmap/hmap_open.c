/*
 * hmap_open.c - the single-trip map's life: create, open (protection, then recovery: the
 * log scanned, the newest version of each key kept, incomplete transactions dropped, the
 * index and the reuse queues rebuilt), close, stats.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csum.h"
#include "err.h"
#include "fault.h"
#include "stps.h"

#define MIN_SIZE (64u << 10)
#define HMAP_FLAGS (KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT | KR_HMAP_TWO_FENCES | KR_HMAP_PROTECT)
#define HMAP_OPEN_FLAGS (HMAP_FLAGS | KR_OPEN_READONLY)
#define HMAP_SCRUB_KIB_PER_S (16u << 10) /* background verification of a protected map */

static uint32_t hdr_crc(const struct kr_hmap_hdr *h)
{
	return kr_crc32c(h, offsetof(struct kr_hmap_hdr, crc));
}

static const struct kr_hmap_hdr *hdr_copy(const kr_hmap *m, int c)
{
	return (const struct kr_hmap_hdr *)(m->pm.base + (size_t)c * P);
}

/* The first sound header copy, or NULL. */
static const struct kr_hmap_hdr *hdr_valid(const kr_hmap *m)
{
	for (int c = 0; c < 2; c++)
		if (hdr_copy(m, c)->magic == KR_HMAP_MAGIC && hdr_copy(m, c)->crc == hdr_crc(hdr_copy(m, c)))
			return hdr_copy(m, c);
	return NULL;
}

static bool hdr_magic(const kr_hmap *m)
{
	return hdr_copy(m, 0)->magic == KR_HMAP_MAGIC || hdr_copy(m, 1)->magic == KR_HMAP_MAGIC;
}

/* A protected map opened without KR_HMAP_PROTECT would be written untracked, and its
 * sidecar would then take the new data for damage; an unprotected one has no sidecar. */
static int protection_matches(const kr_hmap *m, unsigned flags)
{
	const struct kr_hmap_hdr *h = hdr_valid(m);
	if (!h || !(h->flags & KR_HMAP_HDR_PROTECTED) == !(flags & KR_HMAP_PROTECT))
		return KR_OK;
	return kr_err_set(KR_E_MISUSE_ARG, h->flags & KR_HMAP_HDR_PROTECTED
			  ? "hmap: %s is protected: open it with KR_HMAP_PROTECT"
			  : "hmap: %s was created without KR_HMAP_PROTECT", m->path);
}

static int map_file(kr_hmap *m, int fd, size_t size, unsigned flags)
{
	int rc = kr_pm_map(&m->pm, fd, size, flags & (KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT | KR_OPEN_READONLY), m->path);
	if (rc == KR_OK)
		m->entries = (uint8_t *)m->pm.base + 2 * P;
	return rc;
}

/* With KR_HMAP_PROTECT, attaches the mapping as a protected region before the map is
 * read: damage in pages covered by sound redundancy is repaired, the segments that were
 * being written at a crash are rebuilt from the data. */
static int attach_protection(kr_hmap *m, size_t size, unsigned flags, bool verify)
{
	int rc = KR_OK;
	if ((flags & KR_HMAP_PROTECT) && (flags & KR_OPEN_READONLY)) {
		/* Nothing may be written, not even the sidecar: the file as it is is verified
		 * against its redundancy, and damage is reported, not repaired. */
		struct kr_region_opts ro = {.struct_size = sizeof(ro),
					    .flags = KR_REGION_OFFLINE | KR_REGION_READONLY | KR_REGION_NO_CREATE |
						     (flags & KR_OPEN_FORCE_PMEM ? KR_REGION_FORCE_PMEM : 0)};
		kr_region *r;
		rc = kr_region_open(m->path, &ro, &r, NULL, NULL);
		if (rc == KR_OK) {
			if (verify)
				rc = kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, NULL);
			int crc = kr_region_close(r);
			rc = rc != KR_OK ? rc : crc;
		}
	} else if (flags & KR_HMAP_PROTECT) {
		struct kr_region_opts ro = {.struct_size = sizeof(ro),
					    .flags = flags & KR_OPEN_FORCE_PMEM ? KR_REGION_FORCE_PMEM : 0,
					    .scrub_kib_per_s = HMAP_SCRUB_KIB_PER_S};
		rc = kr_region_attach(m->path, m->pm.base, size, &ro, &m->region);
		/* Entries carry no checksums of their own: verify every page the redundancy
		 * covers before recovery reads them (about a tenth of recovery's own scan), and
		 * the sidecar's parity with them: damage there stays latent until a page needs
		 * it, and then turns a repairable loss into an unrepairable one. */
		if (rc == KR_OK && verify)
			rc = kr_region_check(m->region, 0, 0,
					     KR_REGION_CHECK_REPAIR | KR_REGION_CHECK_PARITY, NULL);
		if (rc == KR_E_CORRUPT_REGION) { /* attached anyway: a map is not opened so */
			char msg[256];
			snprintf(msg, sizeof(msg), "%s", kr_errmsg());
			kr_region_close(m->region);
			m->region = NULL;
			rc = kr_err_set(KR_E_CORRUPT_REGION, "hmap: %s", msg);
		}
	}
	return rc;
}

kr_region *kr_hmap_region(kr_hmap *m) { return m ? m->region : NULL; }

static void handle_free(kr_hmap *m)
{
	if (!m)
		return;
	if (m->region)
		kr_region_close(m->region);
	if (m->pm.base)
		kr_pm_unmap(&m->pm);
	if (m->pm.fd >= 0)
		close(m->pm.fd);
	for (unsigned i = 0; i < NSHARDS; i++) {
		hmap_ix_free(m->shards[i].ix, m->shards[i].ixcap);
		pthread_mutex_destroy(&m->shards[i].writer);
		pthread_rwlock_destroy(&m->shards[i].ixlock);
	}
	for (unsigned i = 0; i < NLANES; i++) {
		free(m->lanes[i].dead.v);
		free(m->lanes[i].tombs.v);
		pthread_mutex_destroy(&m->lanes[i].lock);
	}
	free(m->pool);
	free(m->path);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->moved);
	free(m);
}

static kr_hmap *handle_new(const char *path)
{
	kr_hmap *m = NULL;
	if (posix_memalign((void **)&m, 64, sizeof(*m)) != 0)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->pm.fd = -1;
	m->path = kr_strdup(path);
	for (unsigned i = 0; i < NSHARDS; i++) {
		pthread_mutex_init(&m->shards[i].writer, NULL);
		pthread_rwlock_init(&m->shards[i].ixlock, NULL);
	}
	for (unsigned i = 0; i < NLANES; i++) {
		pthread_mutex_init(&m->lanes[i].lock, NULL);
		m->lanes[i].oldest_dead = UINT64_MAX;
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->moved, NULL);
	if (!m->path) {
		handle_free(m);
		m = NULL;
	}
	return m;
}

static int handle_alloc(kr_hmap *m)
{
	m->esize = (size_t)m->L * LINE;
	m->capacity = KR_HMAP_LINE0_PAYLOAD + (size_t)(m->L - 1) * KR_HMAP_LINE_PAYLOAD;
	m->reserve = (unsigned)(m->nslots / 8 < KR_HMAP_MAX_TX + 1 ? m->nslots / 8 : KR_HMAP_MAX_TX + 1);
	m->pool = kr_malloc(m->nslots * sizeof(uint64_t));
	if (!m->pool)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory for %" PRIu64 " slots", m->nslots);
	int rc = KR_OK;
	for (unsigned i = 0; rc == KR_OK && i < NSHARDS; i++)
		rc = hmap_ix_make_room(&m->shards[i], 0);
	return rc;
}

int kr_hmap_create(const char *path, const struct kr_hmap_opts *o, kr_hmap **out)
{
	if (!path || !o || !out)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	*out = NULL;
	if (kr_opts_size_check(o->struct_size, sizeof(*o), "kr_hmap_opts"))
		return KR_E_MISUSE_ARG;
	uint32_t L = o->entry_lines ? o->entry_lines : 4;
	uint64_t size = o->size & ~(uint64_t)(P - 1);
	if (L > KR_HMAP_MAX_LINES || size < MIN_SIZE || (o->flags & ~HMAP_FLAGS))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: entry_lines 1..%u, size >= %u, flags "
				  "FORCE_PMEM, PREFAULT, TWO_FENCES and PROTECT only", KR_HMAP_MAX_LINES, MIN_SIZE);
	kr_hmap *m = handle_new(path);
	if (!m)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory");
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	m->pm.fd = fd;
	int rc;
	if (fd < 0) {
		rc = kr_err_errno(errno == EEXIST ? KR_E_IO_EXISTS : KR_E_IO_OPEN, "hmap: create %s", path);
		handle_free(m);
		return rc;
	}
	m->L = L;
	m->two_fences = o->flags & KR_HMAP_TWO_FENCES;
	m->nslots = (size - 2 * P) / ((uint64_t)L * LINE);
	char sidecar[4096];
	snprintf(sidecar, sizeof(sidecar), "%s.krs", path);
	if (o->flags & KR_HMAP_PROTECT) /* the map is new: a sidecar left there is an old map's */
		unlink(sidecar);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || kr_ftruncate(fd, (off_t)size) != 0) {
		rc = kr_err_errno(KR_E_IO, "hmap: size %s", path);
	} else if ((rc = map_file(m, fd, size, o->flags)) == KR_OK &&
		   (rc = attach_protection(m, size, o->flags, false)) == KR_OK && (rc = handle_alloc(m)) == KR_OK) {
		struct kr_hmap_hdr h = {.magic = KR_HMAP_MAGIC, .version = KR_HMAP_VERSION,
					.hdr_size = sizeof(h), .file_size = size, .nslots = m->nslots,
					.entry_lines = L,
					.flags = o->flags & KR_HMAP_PROTECT ? KR_HMAP_HDR_PROTECTED : 0};
		h.crc = hdr_crc(&h);
		/* The watermark (a zeroed file: every slot never used), then the header, its
		 * magic number last (the first fence makes both durable). */
		hmap_watermark_store(m, 0);
		hmap_watermark_flush(m);
		void *copy[2] = {m->pm.base, m->pm.base + P};
		rc = kr_pm_write_header(&m->pm, copy, 2, &h, sizeof(h));
		for (uint64_t s = m->nslots; s-- > 0;)
			m->pool[m->npool++] = s;
		m->npool_seen = m->npool;
		m->next_version = 1;
	}
	if (rc != KR_OK) {
		handle_free(m);
		unlink(path);
		if (o->flags & KR_HMAP_PROTECT)
			unlink(sidecar);
		return rc;
	}
	*out = m;
	return KR_OK;
}

struct found {
	uint64_t version, slot;
};

static int by_version(const void *a, const void *b)
{
	const struct found *x = a, *y = b;
	return x->version < y->version ? -1 : x->version > y->version ? 1 : (x->slot > y->slot) - (x->slot < y->slot);
}

static uint64_t watermark_read(const kr_hmap *m)
{
	uint64_t w = 0;
	for (int c = 0; c < 2; c++) {
		uint64_t word = *hmap_watermark_at(m, c);
		uint64_t v = word & KR_HMAP_VER_MAX;
		if (word == hmap_watermark_word(v) && v > w)
			w = v;
	}
	return w;
}

/* Scans the log and rebuilds everything in DRAM; invalidates dropped transactions. */
static int recover(kr_hmap *m)
{
	struct timespec ts0, ts1;
	clock_gettime(CLOCK_MONOTONIC, &ts0);
	struct found *f = kr_malloc(m->nslots * sizeof(*f));
	if (!f)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory to recover");
	uint64_t nf = 0, maxv = 0;
	m->wm_stored = m->wm_durable = watermark_read(m);
	for (uint64_t s = 0; s < m->nslots; s++) {
		uint64_t meta = meta_of(m, s);
		if (!hmap_entry_whole(m, s)) {
			m->st.recovered_torn++;
			m->pool[m->npool++] = s;
		} else if (txn_of(meta) == 0) {
			m->pool[m->npool++] = s; /* never used */
		} else {
			f[nf++] = (struct found){ver_of(meta), s};
			if (ver_of(meta) > maxv)
				maxv = ver_of(meta);
		}
	}
	qsort(f, nf, sizeof(*f), by_version);
	/* Transactions above the watermark must be whole; the rest is dropped for good. */
	uint64_t kept = 0;
	int rc = KR_OK;
	for (uint64_t i = 0; i < nf;) {
		uint64_t j = i;
		while (j < nf && f[j].version == f[i].version)
			j++;
		unsigned want = txn_of(meta_of(m, f[i].slot));
		bool whole = f[i].version <= m->wm_stored || j - i == want;
		for (uint64_t k = i; k < j; k++) {
			if (whole) {
				f[kept++] = f[k];
			} else {
				hmap_entry_invalidate(m, f[k].slot);
				m->pool[m->npool++] = f[k].slot;
				m->st.recovered_dropped++;
			}
		}
		i = j;
	}
	if (m->st.recovered_dropped)
		rc = kr_pm_fence(&m->pm);
	nf = kept;
	/* Newest version wins; everything it supersedes dies in this (version) order, all
	 * into the first lane. */
	struct lane *l = &m->lanes[0];
	uint8_t key[KR_HMAP_MAX_KEY];
	int64_t live = 0;
	if (rc == KR_OK && (rc = hmap_ring_reserve(&l->dead, nf)) == KR_OK)
		rc = hmap_ring_reserve(&l->tombs, nf);
	for (uint64_t i = 0; rc == KR_OK && i < nf; i++) {
		uint64_t s = f[i].slot;
		size_t kl = klen_of(m, s);
		if (kl == 0 || kl > KR_HMAP_MAX_KEY || kl + vlen_of(m, s) > m->capacity) {
			rc = KR_CORRUPT(KR_E_CORRUPT, (uint64_t)(entry(m, s) - (uint8_t *)m->pm.base),
					"hmap: entry %" PRIu64 " has impossible lengths", s);
			break;
		}
		hmap_payload_read(m, s, 0, key, kl);
		uint64_t h = hmap_key_hash(key, kl);
		struct shard *sh = shard_of(m, h);
		if ((rc = hmap_ix_make_room(sh, 1)) != KR_OK)
			break;
		uint64_t pos = hmap_ix_find(m, sh, h, key, kl);
		bool tomb = meta_of(m, s) & KR_HMAP_TOMB;
		if (sh->ix[pos].slot1) {
			hmap_ring_push(m, &l->dead, sh->ix[pos].slot1 - 1, f[i].version);
			if (tomb) {
				hmap_ix_remove(sh, pos);
				live--;
			} else
				sh->ix[pos].slot1 = s + 1;
		} else if (!tomb) {
			sh->ix[pos] = (struct ixent){h, s + 1};
			sh->count++;
			live++;
		}
		if (tomb)
			hmap_ring_push(m, &l->tombs, s, f[i].version);
	}
	free(f);
	l->live = live;
	hmap_lane_refresh(l);
	m->npool_seen = m->npool;
	m->next_version = maxv + 1;
	/* Every version up to maxv is now whole or gone: say so, durably. */
	if (rc == KR_OK && maxv > m->wm_stored) {
		hmap_watermark_store(m, maxv);
		hmap_watermark_flush(m);
		rc = kr_pm_fence(&m->pm);
		m->wm_durable = maxv;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	m->st.recovery_ns = (uint64_t)(ts1.tv_sec - ts0.tv_sec) * 1000000000ull +
			    (uint64_t)(ts1.tv_nsec - ts0.tv_nsec);
	return rc;
}

int kr_hmap_open(const char *path, unsigned flags, kr_hmap **out)
{
	if (!path || !out || (flags & ~HMAP_OPEN_FLAGS))
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument or unknown flags");
	*out = NULL;
	bool ro = flags & KR_OPEN_READONLY;
	kr_hmap *m = handle_new(path);
	if (!m)
		return kr_err_set(KR_E_NOMEM, "hmap: no memory");
	m->two_fences = flags & KR_HMAP_TWO_FENCES;
	int rc = KR_OK;
	struct stat st;
	m->pm.fd = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (m->pm.fd < 0 || fstat(m->pm.fd, &st) != 0)
		rc = kr_err_errno(KR_E_IO_OPEN, "hmap: open %s", path);
	else if (flock(m->pm.fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
		rc = kr_err_set(KR_E_IO_BUSY, "hmap: %s is open elsewhere", path);
	else if ((uint64_t)st.st_size < 2 * P)
		rc = kr_err_set(KR_E_FORMAT_NOT_POOL, "hmap: %s is too short to be a map", path);
	else
		rc = map_file(m, m->pm.fd, (size_t)st.st_size, flags);
	/* Protection is a property of the map, checked before the region is attached (which
	 * would create a sidecar) and again after (a header repaired by it). */
	if (rc == KR_OK && (rc = protection_matches(m, flags)) == KR_OK)
		rc = attach_protection(m, (size_t)st.st_size, flags, true);
	if (rc == KR_OK && (rc = protection_matches(m, flags)) == KR_OK) {
		const struct kr_hmap_hdr *h = hdr_valid(m);
		if (!h)
			rc = hdr_magic(m) ? kr_err_set(KR_E_CORRUPT_HEADER, "hmap: both headers of %s damaged", path)
					  : kr_err_set(KR_E_FORMAT_NOT_POOL, "hmap: %s is not a keratin map", path);
		else if (h->version != KR_HMAP_VERSION)
			rc = kr_err_set(KR_E_FORMAT_VERSION, "hmap: %s has map format %u", path, h->version);
		else if (h->entry_lines == 0 || h->entry_lines > KR_HMAP_MAX_LINES ||
			 h->file_size != (uint64_t)st.st_size ||
			 h->nslots != (h->file_size - 2 * P) / ((uint64_t)h->entry_lines * LINE))
			rc = kr_err_set(KR_E_FORMAT_GEOMETRY, "hmap: %s: header disagrees with the file", path);
		if (rc == KR_OK) {
			m->L = h->entry_lines;
			m->nslots = h->nslots;
			if ((rc = handle_alloc(m)) == KR_OK)
				rc = recover(m);
		}
	}
	if (rc != KR_OK) {
		handle_free(m);
		return rc;
	}
	*out = m;
	return KR_OK;
}

int kr_hmap_close(kr_hmap *m)
{
	int rc = KR_OK;
	if (m && m->wm_stored > m->wm_durable) { /* leave nothing unflushed behind */
		hmap_watermark_flush(m);
		rc = kr_pm_fence(&m->pm);
	}
	if (m && m->region) { /* its final pass covers everything: CLEAN */
		int rc2 = kr_region_close(m->region);
		m->region = NULL;
		rc = rc != KR_OK ? rc : rc2;
	}
	handle_free(m);
	return rc;
}

int kr_hmap_stats(kr_hmap *m, struct kr_hmap_stats *st)
{
	if (!m || !st)
		return kr_err_set(KR_E_MISUSE_ARG, "hmap: NULL argument");
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->free_slots = m->npool;
	pthread_mutex_unlock(&m->lock);
	st->dead_slots = 0;
	for (unsigned k = 0; k < NLANES; k++) {
		struct lane *l = &m->lanes[k];
		pthread_mutex_lock(&l->lock);
		st->free_slots += l->nstash;
		st->dead_slots += l->dead.len + l->tombs.len;
		pthread_mutex_unlock(&l->lock);
	}
	st->nslots = m->nslots;
	st->entry_lines = m->L;
	st->live = hmap_live_keys(m);
	st->next_version = atomic_load(&m->next_version);
	st->extra_fences = atomic_load(&m->extra_fences);
	st->waits = atomic_load(&m->waits);
	return KR_OK;
}
