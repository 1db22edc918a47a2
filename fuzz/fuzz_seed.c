/*
 * fuzz_seed.c - writes the seed corpus of fuzz_open: small valid pools, encoded sparsely
 * (fuzz_format.h).
 *
 * Usage: fuzz_seed CORPUS_DIR
 *
 * Three 8 MiB pools with small lanes: freshly created; with a root directory, small and
 * large objects and a history of partial overwrites in the log, cleanly closed; and the
 * same after a process ran more transactions (an allocation and a free among them) and
 * exited without closing, so that recovery has committed transactions to replay. Each is
 * written twice: with no flags, and with every checksum fix-up flag set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_format.h"
#include "keratin.h"

#define POOL_SIZE (8u << 20)

static void die(const char *what, int rc)
{
	fprintf(stderr, "fuzz_seed: %s: %d %s: %s\n", what, rc, kr_strerror(rc), kr_errmsg());
	exit(1);
}

#define OK(expr)                                                                            \
	do {                                                                                \
		int rc_ = (expr);                                                           \
		if (rc_ != KR_OK)                                                           \
			die(#expr, rc_);                                                    \
	} while (0)

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die(path, -errno);
	uint8_t *buf = malloc(POOL_SIZE);
	*len = fread(buf, 1, POOL_SIZE, f);
	fclose(f);
	return buf;
}

/* Encodes the pool file at path as a sparse fuzz input and writes it to dir/name. */
static void emit(const char *path, const char *dir, const char *name, uint8_t flags)
{
	size_t len;
	uint8_t *img = read_all(path, &len);
	uint8_t *out = malloc(len + len / 8 + 64);
	size_t n = FF_HEAD;
	out[0] = flags;
	ff_put_u32(out + 1, (uint32_t)(len / 1024));
	for (size_t i = 0; i < len;) {
		if (!img[i]) {
			i++;
			continue;
		}
		/* a run of data, bridging zero gaps shorter than a segment header */
		size_t end = i + 1, last = i;
		while (end < len && end - last <= 2 * FF_SEG_HEAD && end - i < 65535) {
			if (img[end])
				last = end;
			end++;
		}
		size_t seg = last + 1 - i;
		ff_put_u32(out + n, (uint32_t)i);
		out[n + 4] = (uint8_t)seg;
		out[n + 5] = (uint8_t)(seg >> 8);
		memcpy(out + n + FF_SEG_HEAD, img + i, seg);
		n += FF_SEG_HEAD + seg;
		i = last + 1;
	}
	char file[512];
	snprintf(file, sizeof(file), "%s/%s", dir, name);
	FILE *f = fopen(file, "wb");
	if (!f || fwrite(out, 1, n, f) != n || fclose(f) != 0)
		die(file, -errno);
	printf("fuzz_seed: %s: %zu bytes\n", file, n);
	free(out);
	free(img);
}

static void emit_both(const char *path, const char *dir, const char *name)
{
	char n[128];
	snprintf(n, sizeof(n), "%s-raw", name);
	emit(path, dir, n, 0);
	snprintf(n, sizeof(n), "%s-fixcrc", name);
	emit(path, dir, n, FF_FIX_HDR_CRC | FF_FIX_LOG_CRC | FF_FIX_DURABLE);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die(dir, -errno);
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/kr-fuzz-seed-%d.pool", (int)getpid());
	unlink(path);
	struct kr_create_opts o = { .struct_size = sizeof(o), .size = POOL_SIZE, .rows = 4,
				    .nlanes = 2, .lane_kib = 16,
				    .flags = KR_OPEN_FORCE_PMEM };
	kr_pool *pool;
	kr_oid root, objs[10];
	kr_tx *tx;

	OK(kr_pool_create(path, &o, &pool));
	OK(kr_pool_close(pool));
	emit_both(path, dir, "fresh");

	OK(kr_pool_open(path, KR_OPEN_FORCE_PMEM, &pool));
	OK(kr_root(pool, sizeof(objs), &root));
	static const size_t sizes[10] = { 8, 24, 48, 100, 200, 500, 2000, 16369, 40000, 100 };
	OK(kr_tx_begin(pool, &tx));
	for (int i = 0; i < 10; i++) {
		OK(kr_tx_alloc(tx, sizes[i], (uint32_t)i + 1, &objs[i]));
		/* only a few bytes of content: the seed stays small */
		uint8_t *p = kr_tx_add(tx, objs[i], 0, sizes[i] < 16 ? sizes[i] : 16);
		if (!p)
			die("kr_tx_add", kr_errcode());
		memset(p, 0xa0 + i, sizes[i] < 16 ? sizes[i] : 16);
	}
	memcpy(kr_tx_open(tx, root), objs, sizeof(objs));
	OK(kr_tx_commit(tx));
	for (int i = 0; i < 20; i++) {
		uint32_t v = 0x1000u + (uint32_t)i;
		OK(kr_update(pool, objs[i % 7], 4, &v, sizeof(v)));
	}
	OK(kr_pool_close(pool));
	emit_both(path, dir, "objects");

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		kr_oid o2;
		OK(kr_pool_open(path, KR_OPEN_FORCE_PMEM, &pool));
		for (int i = 0; i < 5; i++) {
			uint64_t v = 0x2000u + (uint64_t)i;
			OK(kr_update(pool, objs[3], 8, &v, sizeof(v)));
		}
		OK(kr_tx_begin(pool, &tx));
		OK(kr_tx_alloc(tx, 60, 77, &o2));
		OK(kr_tx_free(tx, objs[9]));
		kr_oid *slot = kr_tx_add(tx, root, 9 * sizeof(kr_oid), sizeof(kr_oid));
		if (!slot)
			die("kr_tx_add", kr_errcode());
		*slot = o2;
		OK(kr_tx_commit(tx));
		_exit(0); /* no close: the pool is left for recovery */
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("unclean child", -1);
	emit_both(path, dir, "unclean");
	unlink(path);
	return 0;
}
