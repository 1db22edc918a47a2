/*
 * case.h - the set-up every persistence-checker test program shares: a fresh pool at the
 * path the test gives, a usage line, and the one-line failure exit.
 *
 * The programs in this directory are small on purpose. Each bug sits in one file, in main()
 * or a function main() calls, so that a static checker sees it within one translation unit
 * and a dynamic checker sees it on the one path the program runs. README.md describes the
 * conventions (argument, expectation markers, the check mode of the ordering cases).
 */
#ifndef KR_CHECK_CASE_H
#define KR_CHECK_CASE_H

#include <libpmem.h>
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The smallest pool libpmemobj accepts; every case fits in it many times over. */
#define CASE_POOL_SIZE PMEMOBJ_MIN_POOL

static inline void case_die(const char *what)
{
	fprintf(stderr, "case: %s failed: %s\n", what, pmemobj_errormsg());
	exit(2);
}

static inline int case_usage(const char *prog)
{
	fprintf(stderr, "usage: %s POOLFILE\n", prog);
	return 2;
}

/* A fresh, zeroed libpmem mapping of `size` bytes at `path`. */
static inline void *case_map(const char *path, size_t size)
{
	size_t mapped;
	int is_pmem;

	unlink(path);
	void *base = pmem_map_file(path, size, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, &mapped,
				   &is_pmem);
	if (base == NULL)
		case_die("pmem_map_file");
	return base;
}

/* A fresh libpmemobj pool at `path`. */
static inline PMEMobjpool *case_create(const char *path)
{
	unlink(path);
	PMEMobjpool *pop = pmemobj_create(path, "keratin-check-case", CASE_POOL_SIZE, 0600);
	if (pop == NULL)
		case_die("pmemobj_create");
	return pop;
}

#endif
