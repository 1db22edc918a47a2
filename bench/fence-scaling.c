/*
 * fence-scaling.c - the machine's own ceiling for keratin's two-thread goal: how a loop
 * bound by fences scales from one thread to two when the threads share nothing.
 *
 *     fence-scaling [--steps N] [--lines L]
 *
 * Each step is what a keratin commit's log write ends with: non-temporal stores and one
 * sfence. Without --lines a step stores one 8-byte word; with --lines L it stores L whole
 * lines, the write-back volume of a commit (keratin-bench's flushed_lines column), so that
 * the ratio is the machine's own ceiling for commits of that size: memory bandwidth, not
 * the fence, bounds large ones. Each thread writes its own 1 MiB of DRAM (no line is
 * shared), pinned to CPU 0 or CPU 1. Prints, as CSV, the steps per second with one thread
 * and with two, and their ratio: where keratin scales below it, what stops two keratin
 * threads is state they share in software. (docs/BENCHMARKS.md, two threads.) x86-64
 * only; elsewhere it says so and exits 77.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define SPAN_WORDS (1u << 17) /* 1 MiB of 8-byte words per thread */

static long steps = 5000000;
static long lines; /* 0: one word per step */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
	long cpu = (long)arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((int)cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	long long *span = aligned_alloc(4096, SPAN_WORDS * sizeof(long long));
	if (!span)
		return (void *)1;
	memset(span, 0, SPAN_WORDS * sizeof(long long)); /* prefaulted */
	for (long i = 0; i < steps; i++) {
		/* new lines each step: a line is never written twice in a row */
		if (!lines)
			_mm_stream_si64(&span[((unsigned long)i * 8) & (SPAN_WORDS - 1)], i);
		for (long l = 0; l < lines; l++)
			for (unsigned w = 0; w < 8; w++)
				_mm_stream_si64(&span[(((unsigned long)(i * lines + l)) * 8 + w) & (SPAN_WORDS - 1)], i);
		_mm_sfence();
	}
	free(span);
	return NULL;
}

/* Steps per second with `threads` threads (on CPUs 0 .. threads-1); < 0 on failure. */
static double rate(int threads)
{
	pthread_t t[2];
	double start = now();
	int started = 0, bad = 0;
	for (long i = 0; i < threads; i++) {
		if (pthread_create(&t[started], NULL, run, (void *)i)) {
			bad = 1; /* join the ones started, then fail */
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		void *rc;
		pthread_join(t[i], &rc);
		bad |= rc != NULL;
	}
	return bad ? -1 : (double)threads * (double)steps / (now() - start);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc && atol(argv[i + 1]) > 0) {
			steps = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--lines") && i + 1 < argc && atol(argv[i + 1]) > 0) {
			lines = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: fence-scaling [--steps N] [--lines L]\n");
			return 2;
		}
	}
	double one = rate(1), two = rate(2);
	if (one <= 0 || two <= 0) {
		fprintf(stderr, "fence-scaling: cannot run two pinned threads here\n");
		return 1;
	}
	printf("threads_1_steps_per_s,threads_2_steps_per_s,ratio\n%.0f,%.0f,%.2f\n", one, two,
	       two / one);
	return 0;
}
#else
int main(void)
{
	puts("SKIP: fence-scaling measures x86-64's sfence");
	return 77;
}
#endif
