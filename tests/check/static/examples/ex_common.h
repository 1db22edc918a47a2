/*
 * ex_common.h - a stand-in for the helper header PMDK's example programs include, which
 * libpmemobj-dev does not install. It declares the two names the installed examples use,
 * so that keratin-pmscan can analyse them where the package put them. Written for keratin.
 */
#ifndef KR_PMSCAN_EX_COMMON_H
#define KR_PMSCAN_EX_COMMON_H

#include <sys/stat.h>
#include <unistd.h>

#define CREATE_MODE_RW (S_IWUSR | S_IRUSR)

static inline int file_exists(const char *path)
{
	return access(path, F_OK);
}

#endif
