/*
 * kind.c - kr_file_kind: which of keratin's file kinds a file is, from its first bytes
 * alone, without opening it as any of them (so nothing is recovered, locked or changed).
 *
 * This is the one place that knows every product's magic number, which is why it sits on
 * the top floor: tools ask it before choosing how to open a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "fs_layout.h"
#include "hmap_layout.h"
#include "keratin.h"
#include "layout.h"
#include "region_layout.h"

/* The first 8 bytes of path into *magic: 1 if the file has them, 0 if it is shorter,
 * or an error code. */
static int read_magic(const char *path, uint64_t *magic)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kr_err_errno(KR_E_IO_OPEN, "%s", path);
	ssize_t n = pread(fd, magic, sizeof(*magic), 0);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return kr_err_errno(KR_E_IO, "%s: read", path);
	}
	return n == (ssize_t)sizeof(*magic);
}

int kr_file_kind(const char *path, enum kr_file_kind *kind)
{
	if (!path || !kind)
		return kr_err_set(KR_E_MISUSE_ARG, "kr_file_kind: path and kind are required");
	*kind = KR_FILE_UNKNOWN;
	struct stat st;
	if (stat(path, &st) != 0)
		return kr_err_errno(KR_E_IO_OPEN, "%s", path);
	if (S_ISDIR(st.st_mode))
		return KR_OK;
	uint64_t magic = 0;
	int rc = read_magic(path, &magic);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (memcmp(&magic, KR_MAGIC, sizeof(magic)) == 0)
			*kind = KR_FILE_POOL;
		else if (magic == KRFS_MAGIC)
			*kind = KR_FILE_FS;
		else if (magic == KR_HMAP_MAGIC)
			*kind = KR_FILE_HMAP;
		else if (magic == KR_SIDE_MAGIC)
			*kind = KR_FILE_SIDECAR;
		else if (memcmp(&magic, "PMEMOBJ", 8) == 0) /* PMDK's pool header signature */
			*kind = KR_FILE_LIBPMEMOBJ;
	}
	if (*kind != KR_FILE_UNKNOWN)
		return KR_OK;
	/* Any other file is a region if its default sidecar (path + ".krs") is one. */
	char side[4096];
	if (snprintf(side, sizeof(side), "%s.krs", path) < (int)sizeof(side) && read_magic(side, &magic) == 1 &&
	    magic == KR_SIDE_MAGIC)
		*kind = KR_FILE_REGION;
	return KR_OK;
}
