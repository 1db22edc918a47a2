/*
 * pmem-count.h - what bench/pmem-count.c (an LD_PRELOAD counter of libpmem's write-back
 * calls) counts, per thread; pmdk-bench reads it through dlsym("pmem_count_get").
 */
#ifndef PMEM_COUNT_H
#define PMEM_COUNT_H
#include <stdint.h>

struct pmem_count {
	uint64_t fences;        /* drains */
	uint64_t flushed_lines; /* 64-byte lines written back */
	uint64_t written_bytes; /* bytes written back or copied */
};

typedef void (*pmem_count_get_fn)(struct pmem_count *out);

#endif
