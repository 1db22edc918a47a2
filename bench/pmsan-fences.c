/*
 * pmsan-fences.c - a fence-bound libpmem program for pricing pmsan's crash images
 * (bench/pmsan-bench.sh): the map benchmarks fence inside libpmemobj and keratin, where
 * the pass does not see it, so reordering has nothing to do there; here every fence is the
 * program's own.
 *
 *   pmsan-fences FILE FENCES THREADS
 * maps FILE (1 MiB, created) with pmem_map_file, and has each of THREADS threads append
 * FENCES / THREADS 64-byte records to a log of its own: the record (sequence number, thread,
 * a checksum-like word) is stored, flushed and fenced (pmem_persist), then the log's head
 * word is stored and persisted, as a recoverable log would: two fences per record. Built
 * plain and through keratin-pmsan-cc; the script divides the extra time of a run with
 * PMSAN_OPTIONS=reorder=... by the fences and crash images pmsan's summary reports.
 * Prints one line: fences, seconds.
 */
#include <libpmem.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define FILE_SIZE (1u << 20)
#define MAX_THREADS 8

struct record {
	uint64_t seq, thread, word;
	uint8_t pad[40];
};

struct args {
	char *log;      /* this thread's area: head word, then records */
	size_t slots;
	uint64_t n, thread;
};

static void *append(void *p)
{
	struct args *a = p;
	uint64_t *head = (uint64_t *)a->log;
	struct record *recs = (struct record *)(a->log + 64);
	for (uint64_t i = 0; i < a->n; i++) {
		struct record *r = &recs[i % a->slots];
		r->seq = i;
		r->thread = a->thread;
		r->word = i * 0x9e3779b97f4a7c15ull ^ a->thread;
		pmem_persist(r, sizeof(*r));
		*head = i + 1;
		pmem_persist(head, sizeof(*head));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: pmsan-fences FILE FENCES THREADS\n");
		return 2;
	}
	uint64_t fences = strtoull(argv[2], NULL, 10);
	unsigned threads = (unsigned)atoi(argv[3]);
	if (threads < 1 || threads > MAX_THREADS || fences < 2 * threads) {
		fprintf(stderr, "pmsan-fences: THREADS 1..%d, FENCES >= 2 per thread\n", MAX_THREADS);
		return 2;
	}
	size_t len;
	int is_pmem;
	unlink(argv[1]);
	char *base = pmem_map_file(argv[1], FILE_SIZE, PMEM_FILE_CREATE, 0600, &len, &is_pmem);
	if (!base) {
		fprintf(stderr, "pmsan-fences: %s: %s\n", argv[1], pmem_errormsg());
		return 1;
	}
	size_t area = FILE_SIZE / threads / 64 * 64;
	struct args a[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < threads; i++) {
		a[i] = (struct args){base + i * area, area / 64 - 1, fences / 2 / threads, i};
		if (pthread_create(&t[i], NULL, append, &a[i]) != 0)
			return 1;
	}
	for (unsigned i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%llu,%.6f\n", (unsigned long long)(fences / 2 / threads * 2 * threads),
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	pmem_unmap(base, len);
	unlink(argv[1]);
	return 0;
}
