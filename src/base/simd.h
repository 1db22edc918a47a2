/*
 * simd.h - leaving ISA-L's vector code cleanly.
 *
 * ISA-L's AVX-512 kernels (crc32_iscsi, xor_gen) return with the upper halves of the
 * vector registers dirty. Until a vzeroupper, every legacy-SSE instruction the calling
 * thread runs pays a state-transition penalty: glibc's pow() ran 14x slower right after
 * one crc32_iscsi or xor_gen call on this machine (and a Zipf benchmark loop 7x slower
 * after kr_region_open), in the application's code, long after keratin returned. So
 * every call into ISA-L is followed by kr_simd_done().
 */
#ifndef KR_SIMD_H
#define KR_SIMD_H

static inline void kr_simd_done(void)
{
	if (__builtin_cpu_supports("avx"))
		__asm__ volatile("vzeroupper" ::: "memory");
}

#endif
