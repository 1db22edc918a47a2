/*
 * ex_common.h - the few helpers PMDK's libpmemobj examples take from PMDK's own
 * src/examples/ex_common.h, which libpmemobj-dev does not ship: what pmdk_examples.sh
 * needs to compile the examples where the package installs them.
 */
#ifndef KR_EX_COMMON_H
#define KR_EX_COMMON_H

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MIN
#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#endif
#define CREATE_MODE_RW (S_IWUSR | S_IRUSR)

/* 0 if the file exists (the examples' convention), -1 if not. */
static inline int file_exists(const char *path)
{
	return access(path, F_OK);
}

/* Index of the most significant set bit of val (val != 0). */
static inline int find_last_set_64(uint64_t val)
{
	return 63 - __builtin_clzll(val);
}

#endif
