/*
 * r1_raw_flush.bug.c - rule 1 (missing-flush) with raw instructions instead of libpmem: a
 * log record spans two cache lines; the writer flushes the first line with clflush and
 * fences with sfence, but never flushes the second line, where the record's checksum is.
 */
#include "../cases/case.h"
#include <emmintrin.h>

struct record {
	char payload[64];  /* the first cache line */
	uint64_t checksum; /* the second */
};

static uint64_t sum(const char *p, size_t n)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + (unsigned char)p[i];
	return s;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct record *rec = case_map(argv[1], 4096);

	memset(rec->payload, 'x', sizeof(rec->payload));
	rec->checksum = sum(rec->payload, sizeof(rec->payload)); /* expect: 1 missing-flush */
	_mm_clflush(rec->payload);
	_mm_sfence();

	pmem_unmap(rec, 4096);
	return 0;
}
