/*
 * fuzz_open.c - libFuzzer target: kr_pool_open on arbitrary pool files.
 *
 * Each input (format in fuzz_format.h) is decoded into a sparse pool file in /dev/shm;
 * the flag bits can recompute the header CRCs, the log transaction CRCs and the
 * durable_seq check bits after mutation, so that the fuzzer gets past the checksums into
 * the geometry, recovery and heap-metadata checks. Then kr_pool_open() runs; if it
 * succeeds, kr_pool_stat(), an iteration over every object reading all of its bytes, and
 * kr_pool_close(). A crash, a sanitizer report, a leak, an iteration that never ends, an
 * object reaching outside the mapping or an undocumented error code is a finding.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_format.h"
#include "keratin.h"
#include "layout.h"

static char g_path[128];

static uint32_t crc32c(const void *buf, size_t len)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, 0xffffffffu) ^ 0xffffffffu;
}

static void cleanup(void)
{
	unlink(g_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(g_path, sizeof(g_path), "/dev/shm/kr-fuzz-%d.pool", (int)getpid());
	atexit(cleanup);
	return 0;
}

static void fix_hdr(int fd, uint64_t off, uint64_t size)
{
	struct kr_pool_hdr h;
	if (off + sizeof(h) > size || pread(fd, &h, sizeof(h), (off_t)off) != sizeof(h))
		return;
	h.crc = crc32c(&h, offsetof(struct kr_pool_hdr, crc));
	if (pwrite(fd, &h, sizeof(h), (off_t)off) != sizeof(h))
		abort();
}

/* Header copy A, if it describes lanes and control pages inside the file. */
static int read_geometry(int fd, uint64_t size, struct kr_pool_hdr *h)
{
	if (size < sizeof(*h) || pread(fd, h, sizeof(*h), 0) != sizeof(*h))
		return -1;
	uint64_t lane = (uint64_t)h->lane_pages * KR_PAGE_SIZE;
	if (h->nlanes == 0 || h->nlanes > 64 || lane == 0 || lane > (1u << 20) ||
	    h->lanes_off > size || h->lanes_replica_off > size ||
	    h->lanes_off + h->nlanes * lane > size || h->lanes_replica_off + h->nlanes * lane > size)
		return -1;
	return 0;
}

/* Recomputes the payload CRC of every complete transaction in both lane copies. */
static void fix_log(int fd, uint64_t size)
{
	struct kr_pool_hdr h;
	if (read_geometry(fd, size, &h) != 0)
		return;
	uint64_t lane_bytes = (uint64_t)h.lane_pages * KR_PAGE_SIZE, nl = lane_bytes / KR_LINE_SIZE;
	struct kr_log_cacheline *lines = malloc(lane_bytes);
	uint8_t *stream = malloc(nl * KR_LINE_PAYLOAD);
	for (int copy = 0; copy < 2; copy++) {
		for (uint32_t lane = 0; lane < h.nlanes; lane++) {
			off_t off = (off_t)((copy ? h.lanes_replica_off : h.lanes_off) + lane * lane_bytes);
			if (pread(fd, lines, lane_bytes, off) != (ssize_t)lane_bytes)
				continue;
			for (uint64_t i = 0; i < nl; i++) {
				uint64_t hw = lines[i].header;
				struct kr_tx_first first;
				if ((hw & KR_LINE_KIND_MASK) != KR_LINE_FIRST)
					continue;
				memcpy(&first, lines[i].payload, sizeof(first));
				if (first.nlines == 0 || first.nlines > nl)
					continue;
				for (uint32_t k = 0; k < first.nlines; k++)
					memcpy(stream + k * KR_LINE_PAYLOAD, lines[(i + k) % nl].payload,
					       KR_LINE_PAYLOAD);
				memset(stream + offsetof(struct kr_tx_first, crc), 0, 4);
				first.crc = crc32c(stream, first.nlines * KR_LINE_PAYLOAD);
				memcpy(lines[i].payload, &first, sizeof(first));
			}
			if (pwrite(fd, lines, lane_bytes, off) != (ssize_t)lane_bytes)
				abort();
		}
	}
	free(stream);
	free(lines);
}

static void fix_durable(int fd, uint64_t size)
{
	struct kr_pool_hdr h;
	if (read_geometry(fd, size, &h) != 0)
		return;
	for (int copy = 0; copy < 2; copy++) {
		uint64_t off = (copy ? h.ctl_replica_off : h.ctl_off) + KR_CTL_LOG_LINE * KR_LINE_SIZE;
		uint64_t w;
		if (off + 8 > size || pread(fd, &w, 8, (off_t)off) != 8)
			continue;
		uint64_t seq = w & KR_DURABLE_SEQ_MASK;
		w = seq | ((uint64_t)(crc32c(&seq, 8) & 0xffff) << KR_DURABLE_CHECK_SHIFT);
		if (pwrite(fd, &w, 8, (off_t)off) != 8)
			abort();
	}
}

static int write_pool(const uint8_t *data, size_t size)
{
	uint64_t kib = ff_u32(data + 1);
	uint64_t fsize = (kib > FF_MAX_KIB ? FF_MAX_KIB : kib) * 1024;
	int fd = open(g_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)fsize) != 0)
		abort();
	size_t pos = FF_HEAD;
	struct ff_seg s;
	while (ff_next_seg(data, size, &pos, &s)) {
		if (s.off >= fsize)
			continue;
		size_t n = s.len < fsize - s.off ? s.len : fsize - s.off;
		if (pwrite(fd, s.data, n, s.off) != (ssize_t)n)
			abort();
	}
	if (data[0] & FF_FIX_LOG_CRC)
		fix_log(fd, fsize);
	if (data[0] & FF_FIX_DURABLE)
		fix_durable(fd, fsize);
	if (data[0] & FF_FIX_HDR_CRC) {
		fix_hdr(fd, 0, fsize);
		if (fsize >= 2 * KR_PAGE_SIZE)
			fix_hdr(fd, fsize - KR_PAGE_SIZE, fsize);
		struct kr_pool_hdr h;
		if (pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.pool_size >= 2 * KR_PAGE_SIZE &&
		    h.pool_size <= fsize && h.pool_size != fsize)
			fix_hdr(fd, h.pool_size - KR_PAGE_SIZE, fsize);
	}
	close(fd);
	return 0;
}

static int known_error(int rc)
{
	switch (rc) {
	case KR_E_IO_OPEN: case KR_E_IO_MAP: case KR_E_IO_BUSY: case KR_E_IO_SYNC:
	case KR_E_FORMAT_NOT_POOL: case KR_E_FORMAT_VERSION: case KR_E_FORMAT_TRUNCATED:
	case KR_E_FORMAT_GEOMETRY: case KR_E_CORRUPT_HEADER: case KR_E_CORRUPT_META:
	case KR_E_CORRUPT_LOG: case KR_E_MEDIA: case KR_E_NOMEM:
		return 1;
	default:
		return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FF_HEAD)
		return 0;
	write_pool(data, size);

	kr_pool *pool = NULL;
	int rc = kr_pool_open(g_path, KR_OPEN_FORCE_PMEM, &pool);
	if (rc != KR_OK) {
		/* a refusal must be a documented open error with a message */
		if (!known_error(rc) || pool || !kr_errmsg() || !*kr_errmsg()) {
			fprintf(stderr, "kr_pool_open returned %d (%s), pool %p, message \"%s\"\n", rc,
				kr_strerror(rc), (void *)pool, kr_errmsg() ? kr_errmsg() : "(null)");
			__builtin_trap();
		}
		return 0;
	}
	struct kr_pool_stat st;
	if (kr_pool_stat(pool, &st) != KR_OK)
		__builtin_trap();
	const uint8_t *base = kr_pool_base(pool);
	size_t mapped = kr_pool_mapped_size(pool);
	volatile unsigned sum = 0;
	uint64_t n = 0;
	for (kr_oid o = kr_first(pool); o; o = kr_next(pool, o)) {
		if (++n > (1u << 20)) {
			fprintf(stderr, "kr_first/kr_next does not terminate\n");
			__builtin_trap();
		}
		const uint8_t *p = kr_get(pool, o);
		size_t sz = kr_size(pool, o);
		if (!p) {
			/* damage found lazily must be reported as damage */
			if (KR_ERR_CLASS(kr_errcode()) != KR_E_CORRUPT && kr_errcode() != KR_E_MEDIA)
				__builtin_trap();
			continue;
		}
		if (p < base || sz > mapped || p + sz > base + mapped) {
			fprintf(stderr, "object %#llx of %zu bytes reaches outside the mapping\n",
				(unsigned long long)o, sz);
			__builtin_trap();
		}
		for (size_t i = 0; i < sz; i++)
			sum += p[i];
	}
	kr_pool_close(pool);
	return 0;
}
