/*
 * r1_clwb.fixed.c - the twin of r1_clwb.bug.c: the four data lines are written back with
 * the clwb and clflushopt intrinsics and clwb in inline assembly (mnemonic and bytes), and
 * the valid flag with clflushopt in inline assembly, each before the fence after it.
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

static void asm_clflushopt(const void *p)
{
	asm volatile("clflushopt %0" : "+m"(*(volatile char *)p));
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
	r->valid = 1;
	asm_clflushopt(&r->valid);
	asm_sfence();

	pmem_unmap(r, 4096);
	return 0;
}
