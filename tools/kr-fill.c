/*
 * kr-fill.c - puts objects into a pool for the command-line tests: "kr-fill PATH COUNT
 * [--seed S] [--force-pmem]" allocates COUNT objects of mixed sizes (mostly small, some
 * spanning pages, a few spanning chunks) filled with seeded random bytes, then frees every
 * fifth one, so that `keratin check`, `keratin map` and `keratin inject` meet a heap with
 * live objects, holes and several size classes. Two objects have known sizes and their oids
 * are printed: the first, 256 KiB, is wider than a row of a small pool, so a test can damage
 * it in two rows of one page column, which parity cannot rebuild; the second, 100 bytes,
 * lies in one page. It uses only the public API, one object per transaction, because a
 * test pool's lanes are small. "kr-fill --region-crash FILE" leaves a crashed protected
 * region instead (see region_crash). Not installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keratin.h"
#include "util.h"

#define PROG "kr-fill"

/* Mostly small objects, as applications have; some larger than a page so that objects
 * cross page and row boundaries; a few larger than a 32 KiB chunk. */
#define BIG_OBJECT (256 * 1024)
#define SMALL_OBJECT 100

static size_t pick_size(uint64_t *rng)
{
	uint64_t r = util_rand_below(rng, 100);
	if (r < 70)
		return 16 + util_rand_below(rng, 500);
	if (r < 95)
		return 512 + util_rand_below(rng, 8 * 1024);
	return 32 * 1024 + util_rand_below(rng, 96 * 1024);
}

static int fill_one(kr_pool *pool, uint64_t *rng, size_t size, kr_oid *oid)
{
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	kr_tx_alloc(tx, size, (uint32_t)(size % 7) + 1, oid);
	void *p = kr_tx_open(tx, *oid); /* errors are sticky: the commit reports them */
	if (p)
		util_rand_bytes(rng, p, size);
	return kr_tx_commit(tx);
}

static int free_one(kr_pool *pool, kr_oid oid)
{
	kr_tx *tx;
	int rc = kr_tx_begin(pool, &tx);
	if (rc)
		return rc;
	kr_tx_free(tx, oid);
	return kr_tx_commit(tx);
}

/* "kr-fill --region-crash FILE": attaches FILE as a protected region (no background
 * thread), stores into its first segment, lets three passes seal every segment, stores into
 * the first page again (its segment is hot) and exits without closing, as a crashed program
 * would: the sidecar stays ACTIVE with cold segments whose redundancy is trusted. */
static int region_crash(const char *path)
{
	struct kr_region_opts o = {.struct_size = sizeof(o),
				   .flags = KR_REGION_MANUAL | KR_REGION_FORCE_PMEM};
	kr_region *r;
	void *base;
	size_t len;
	int rc = kr_region_open(path, &o, &r, &base, &len);
	if (rc)
		return util_lib_error(PROG, path, rc);
	for (size_t off = 0; off < len && off < (2u << 20); off += 4096)
		((volatile char *)base)[off] = 'k';
	for (int i = 0; i < 3 && rc == KR_OK; i++)
		rc = kr_region_sync(r);
	if (rc)
		return util_lib_error(PROG, path, rc);
	((volatile char *)base)[1] = 'c';
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"seed", required_argument, NULL, 's'},
		{"force-pmem", no_argument, NULL, 'f'},
		{"region-crash", no_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t seed = 1, count;
	unsigned flags = 0;
	int c, rc;

	while ((c = util_getopt(PROG, argc, argv, longopts)) != -1) {
		switch (c) {
		case 'r':
			if (argc - optind != 1)
				return util_usage_error(PROG, "--region-crash takes one FILE");
			return region_crash(argv[optind]);
		case 's':
			if (util_parse_uint(optarg, 0, UINT64_MAX, &seed))
				return util_usage_error(PROG, "invalid --seed '%s'", optarg);
			break;
		case 'f': flags |= KR_OPEN_FORCE_PMEM; break;
		case 'h':
			printf("usage: %s PATH COUNT [--seed S] [--force-pmem]\n", PROG);
			return 0;
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (argc - optind != 2)
		return util_usage_error(PROG, "expected PATH and COUNT");
	const char *path = argv[optind];
	if (util_parse_uint(argv[optind + 1], 1, 1000000, &count))
		return util_usage_error(PROG, "invalid COUNT '%s'", argv[optind + 1]);

	kr_pool *pool;
	if ((rc = kr_pool_open(path, flags, &pool)))
		return util_lib_error(PROG, path, rc);
	kr_oid *oids = calloc(count, sizeof(*oids));
	if (!oids) {
		kr_pool_close(pool);
		fprintf(stderr, "%s: out of memory\n", PROG);
		return 1;
	}
	uint64_t rng = seed, freed = 0;
	rc = KR_OK;
	for (uint64_t i = 0; i < count && rc == KR_OK; i++)
		rc = fill_one(pool, &rng, i == 0 ? BIG_OBJECT : i == 1 ? SMALL_OBJECT : pick_size(&rng),
			      &oids[i]);
	for (uint64_t i = 4; i < count && rc == KR_OK; i += 5, freed++)
		rc = free_one(pool, oids[i]);
	kr_oid big = oids[0], small = oids[1];
	free(oids);
	if (rc) {
		util_lib_error(PROG, path, rc);
		kr_pool_close(pool);
		return 1;
	}

	struct kr_pool_stat st;
	char h[UTIL_HUMAN_LEN];
	kr_pool_stat(pool, &st);
	if ((rc = kr_pool_close(pool)))
		return util_lib_error(PROG, path, rc);
	printf("%s: %llu objects allocated, %llu freed, %llu live, %s used\n"
	       "big object: 0x%llx %u\nsmall object: 0x%llx %u\n", path, (unsigned long long)count,
	       (unsigned long long)freed, (unsigned long long)st.nobjects, util_human(st.used_bytes, h),
	       (unsigned long long)big, BIG_OBJECT, (unsigned long long)small, SMALL_OBJECT);
	return 0;
}
