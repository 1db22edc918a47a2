/*
 * r1_clwb.bug.c - rule 1 (missing-flush) with the newer cache write-back instructions: a
 * record's four data lines are written back one each with the clwb and clflushopt
 * intrinsics and with clwb in inline assembly, as the mnemonic and as the bytes libpmem
 * once emitted for assemblers that lacked it (0x66 + xsaveopt); a fence orders them before
 * the valid flag. The flag itself is never written back before the final fence.
 * needs-cpu: clwb clflushopt
 */
#include "../cases/case.h"
#include <immintrin.h>

struct record {
	char line[4][64];
	uint64_t valid; /* a fifth line */
};

static void asm_clwb(const void *p)
{
	asm volatile("clwb %0" : "+m"(*(volatile char *)p));
}

static void asm_clwb_bytes(const void *p)
{
	asm volatile(".byte 0x66; xsaveopt %0" : "+m"(*(volatile char *)p));
}

static void asm_sfence(void)
{
	asm volatile("sfence" ::: "memory");
}

__attribute__((target("clwb,clflushopt"))) int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct record *r = case_map(argv[1], 4096);

	for (int i = 0; i < 4; i++)
		memset(r->line[i], 'a' + i, sizeof(r->line[i]));
	_mm_clwb(r->line[0]);
	_mm_clflushopt(r->line[1]);
	asm_clwb(r->line[2]);
	asm_clwb_bytes(r->line[3]);
	asm_sfence();
	r->valid = 1; /* expect: 1 missing-flush */
	asm_sfence();

	pmem_unmap(r, 4096);
	return 0;
}
