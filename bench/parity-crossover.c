/*
 * parity-crossover.c - measures the two ways keratin patches parity, to choose the size at
 * which it switches from one to the other (KR_PARITY_CROSSOVER_DEFAULT in src/obj/parity.h).
 *
 * A small patch is a run of atomic 64-bit XORs (lock xor) under a shared range lock; a large
 * one is ISA-L's SIMD XOR under the exclusive lock, with the old and new bytes staged in
 * aligned scratch. For each patch size, both paths patch the same parity bytes many times,
 * with one thread and with two threads patching rows of the same columns (the contended
 * case: commits on different objects whose parity overlaps). The table gives nanoseconds
 * per patch (median of runs) and the crossover: the smallest size from which the SIMD path
 * is at least as fast in both cases. It prints numbers; it asserts nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool_state.h"

#define RUNS 5
#define ITERS 20000

struct job {
	struct kr_parity *par;
	uint64_t off;
	size_t len;
	const uint8_t *a, *b;
	uint64_t ns;
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *patch_loop(void *arg)
{
	struct job *j = arg;
	uint64_t t0 = now_ns();
	for (int i = 0; i < ITERS; i++)
		kr_parity_patch(j->par, j->off, (i & 1) ? j->a : j->b, (i & 1) ? j->b : j->a, j->len);
	j->ns = now_ns() - t0;
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* ns per patch, median of RUNS, with nthreads patching rows 0 and 1 of the same columns. */
static double measure(kr_pool *pool, size_t crossover, size_t len, int nthreads,
		      const uint8_t *a, const uint8_t *b)
{
	struct kr_parity *par = &pool->redund.parity;
	par->crossover = crossover;
	uint64_t row = (uint64_t)pool->hdr.row_pages * KR_PAGE_SIZE;
	uint64_t base = pool->hdr.heap_off + (uint64_t)pool->hdr.zone_meta_pages * KR_PAGE_SIZE;
	uint64_t med[RUNS];
	for (int r = 0; r < RUNS; r++) {
		struct job jobs[2];
		pthread_t th[2];
		for (int t = 0; t < nthreads; t++) {
			jobs[t] = (struct job){par, base + (uint64_t)t * row, len, a, b, 0};
			pthread_create(&th[t], NULL, patch_loop, &jobs[t]);
		}
		uint64_t worst = 0;
		for (int t = 0; t < nthreads; t++) {
			pthread_join(th[t], NULL);
			if (jobs[t].ns > worst)
				worst = jobs[t].ns;
		}
		med[r] = worst;
	}
	qsort(med, RUNS, sizeof(med[0]), cmp_u64);
	return (double)med[RUNS / 2] / ITERS;
}

int main(int argc, char **argv)
{
	char path[] = "/dev/shm/kr-parity-crossover-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return perror("mkstemp"), 1;
	close(fd);
	unlink(path);
	struct kr_create_opts opts = {.struct_size = sizeof(opts), .size = 64ull << 20, .rows = 8,
				      .flags = KR_OPEN_FORCE_PMEM | KR_OPEN_PREFAULT};
	kr_pool *pool;
	if (kr_pool_create(path, &opts, &pool) != KR_OK) {
		fprintf(stderr, "parity-crossover: %s\n", kr_errmsg());
		return 1;
	}
	static const size_t sizes[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
	size_t maxlen = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	if (maxlen > (uint64_t)pool->hdr.row_pages * KR_PAGE_SIZE)
		maxlen = (uint64_t)pool->hdr.row_pages * KR_PAGE_SIZE;
	uint8_t *a = malloc(maxlen), *b = malloc(maxlen);
	for (size_t i = 0; i < maxlen; i++) {
		a[i] = (uint8_t)rand();
		b[i] = (uint8_t)rand();
	}
	printf("parity patch, ns per patch (median of %d runs of %d patches)\n\n", RUNS, ITERS);
	printf("%8s %14s %14s %14s %14s\n", "bytes", "atomic 1 thr", "simd 1 thr", "atomic 2 thr",
	       "simd 2 thr");
	size_t crossover = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		if (len > maxlen)
			break;
		double a1 = measure(pool, SIZE_MAX, len, 1, a, b), s1 = measure(pool, 0, len, 1, a, b);
		double a2 = measure(pool, SIZE_MAX, len, 2, a, b), s2 = measure(pool, 0, len, 2, a, b);
		printf("%8zu %14.0f %14.0f %14.0f %14.0f\n", len, a1, s1, a2, s2);
		if (!crossover && s1 <= a1 && s2 <= a2)
			crossover = len;
	}
	if (crossover)
		printf("\ncrossover: SIMD is at least as fast from %zu bytes (default in use: %d)\n",
		       crossover, KR_PARITY_CROSSOVER_DEFAULT);
	else
		printf("\ncrossover: atomic words were faster at every size measured\n");
	(void)argc;
	(void)argv;
	kr_pool_close(pool);
	unlink(path);
	free(a);
	free(b);
	return 0;
}
