/*
 * r1_raw_flush.fixed.c - the twin of r1_raw_flush.bug.c: both cache lines of the record
 * are flushed before the fence.
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
	rec->checksum = sum(rec->payload, sizeof(rec->payload));
	_mm_clflush(rec->payload);
	_mm_clflush(&rec->checksum);
	_mm_sfence();

	pmem_unmap(rec, 4096);
	return 0;
}
