/*
 * stale-window.c - the window of kr_stored_persist, measured: how many page columns wait
 * for the cleaner while a program persists its own stores at full speed, and what a
 * persist costs beside a transaction doing the same write.
 *
 * One thread stores SIZE bytes into a random one of N objects and persists them
 * (kr_stored_persist), for SECONDS; a sampler reads kr_pool_stat every millisecond. Then
 * the same stores as transactions (kr_update), the redundancy written at once. One CSV line
 * per mode:
 *   mode,size,objects,period_ms,ops,ops_per_s,median_ns,stale_mean,stale_max,
 *   column_bytes,exposed_mean_bytes,exposed_max_bytes,cleaned_per_s
 * where exposed = marked columns x column bytes: the bytes a media error could not be
 * repaired in, at a sampled instant (docs/DESIGN.md, "the window"). Compare ops_per_s:
 * median_ns comes from an unserialised clock read, which does not wait for a fence's
 * write-backs to drain (BENCHMARKS.md).
 *
 * Usage: stale-window [--objects N] [--size S] [--seconds T] [--period MS] [--dir DIR]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keratin.h"

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct sampler {
	kr_pool *pool;
	atomic_int stop;
	uint64_t samples, sum, max;
};

static void *sample(void *arg)
{
	struct sampler *s = arg;
	while (!atomic_load(&s->stop)) {
		struct kr_pool_stat st;
		if (kr_pool_stat(s->pool, &st) == KR_OK) {
			s->samples++;
			s->sum += st.stale_columns;
			if (st.stale_columns > s->max)
				s->max = st.stale_columns;
		}
		usleep(1000);
	}
	return NULL;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "stale-window: %s: %s: %s\n", what, kr_strerror(rc), kr_errmsg());
	exit(1);
}

int main(int argc, char **argv)
{
	unsigned objects = 20000, size = 64, seconds = 2, period = 100;
	const char *dir = "/dev/shm";
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--objects"))
			objects = (unsigned)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--size"))
			size = (unsigned)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
			seconds = (unsigned)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--period"))
			period = (unsigned)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--dir"))
			dir = argv[++i];
		else {
			fprintf(stderr, "usage: stale-window [--objects N] [--size S] [--seconds T] "
					"[--period MS] [--dir DIR]\n");
			return 2;
		}
	}
	if (!objects || !size || size > 65536 || !seconds) {
		fprintf(stderr, "stale-window: objects, size (at most 65536) and seconds must be > 0\n");
		return 2;
	}
	char env[32], path[512];
	snprintf(env, sizeof(env), "%u", period);
	setenv("KERATIN_STALE_MS", env, 1);
	snprintf(path, sizeof(path), "%s/stale-window-%d.pool", dir, (int)getpid());
	struct kr_create_opts o = KR_CREATE_OPTS_INIT;
	o.size = (uint64_t)objects * (size + 64) * 2 + (256ull << 20);
	o.flags = KR_OPEN_FORCE_PMEM;
	kr_pool *pool;
	int rc = kr_pool_create(path, &o, &pool);
	if (rc)
		die("create", rc);
	kr_oid *oid = malloc(objects * sizeof(*oid));
	uint8_t *src = calloc(1, size);
	size_t cap = 1u << 24;
	uint64_t *lat = malloc(cap * sizeof(*lat));
	if (!oid || !src || !lat)
		return 1;
	for (unsigned i = 0; i < objects; i++) {
		kr_tx *tx;
		if ((rc = kr_tx_begin(pool, &tx)) || (rc = kr_tx_alloc(tx, size, 1, &oid[i])) ||
		    (rc = kr_tx_commit(tx)))
			die("alloc", rc);
	}
	struct kr_pool_stat st;
	kr_pool_stat(pool, &st);
	uint64_t column_bytes = ((uint64_t)st.rows + 1) * 4096;
	uint8_t *base = kr_pool_base(pool);
	for (int mode = 0; mode < 2; mode++) {
		struct sampler s = {.pool = pool};
		pthread_t t;
		pthread_create(&t, NULL, sample, &s);
		kr_pool_stat(pool, &st);
		uint64_t cleaned0 = st.stale_cleaned, rng = 7, n = 0;
		uint64_t t0 = now_ns(), end = t0 + (uint64_t)seconds * 1000000000ull;
		while (now_ns() < end) {
			kr_oid x = oid[splitmix(&rng) % objects];
			memset(src, (int)(n + 1), size);
			uint64_t a = now_ns();
			if (mode == 0) {
				memcpy(base + x, src, size);
				rc = kr_stored_persist(pool, base + x, size);
			} else {
				rc = kr_update(pool, x, 0, src, size);
			}
			if (rc)
				die(mode ? "kr_update" : "kr_stored_persist", rc);
			if (n < cap)
				lat[n] = now_ns() - a;
			n++;
		}
		double secs = (double)(now_ns() - t0) / 1e9;
		atomic_store(&s.stop, 1);
		pthread_join(t, NULL);
		kr_pool_stat(pool, &st);
		size_t m = n < cap ? n : cap;
		qsort(lat, m, sizeof(*lat), cmp_u64);
		double mean = s.samples ? (double)s.sum / (double)s.samples : 0;
		printf("%s,%u,%u,%u,%llu,%.0f,%llu,%.1f,%llu,%llu,%.0f,%llu,%.0f\n",
		       mode ? "transaction" : "persist", size, objects, period, (unsigned long long)n,
		       (double)n / secs, (unsigned long long)lat[m / 2], mean,
		       (unsigned long long)s.max, (unsigned long long)column_bytes, mean * (double)column_bytes,
		       (unsigned long long)(s.max * column_bytes),
		       (double)(st.stale_cleaned - cleaned0) / secs);
		if (mode == 0 && (rc = kr_pool_check(pool, 0, &(struct kr_check_report){0})))
			die("check after the persists", rc);
	}
	rc = kr_pool_close(pool);
	unlink(path);
	free(oid);
	free(src);
	free(lat);
	return rc ? 1 : 0;
}
