/*
 * test_badblocks.c - pages the kernel reports as bad blocks are repaired when the pool opens.
 *
 * No persistent-memory device is available to a test, so the test plays the kernel: on a
 * pool in an ext4 (or any FIEMAP-capable) file system it finds the device sector of one page
 * of a live object with FIEMAP, destroys the page's content through the file, writes a
 * badblocks file in the kernel's sysfs format ("first_sector count") and points keratin at
 * it with KERATIN_SYSFS_BADBLOCKS. The open must find the page through FIEMAP, replace the
 * block and rebuild the page from parity: the object reads back intact and kr_pool_check
 * finds the pool sound. Where the file system cannot map blocks (tmpfs), the test says so
 * and exits 77, which ctest reports as skipped, not passed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keratin.h"
#include "testutil.h"

#define FAIL(...) (fprintf(stderr, "test_badblocks: " __VA_ARGS__), fprintf(stderr, "\n"), 1)

int main(void)
{
	char path[] = "/var/tmp/kr-badblocks-XXXXXX", list[64];
	int fd = mkstemp(path);
	if (fd < 0)
		return FAIL("mkstemp: cannot make a file in /var/tmp");
	close(fd);
	unlink(path);
	snprintf(list, sizeof(list), "%s.sysfs", path);

	kr_pool *pool;
	struct kr_create_opts o = {.struct_size = sizeof(o), .size = 16 << 20, .rows = 8,
				   .nlanes = 2};
	if (kr_pool_create(path, &o, &pool))
		return FAIL("create: %s", kr_errmsg());
	kr_oid objs[16];
	kr_tx *tx;
	if (kr_tx_begin(pool, &tx))
		return FAIL("begin: %s", kr_errmsg());
	for (int i = 0; i < 16; i++) {
		if (kr_tx_alloc(tx, 3000, 1, &objs[i]))
			return FAIL("alloc: %s", kr_errmsg());
		memset(kr_tx_open(tx, objs[i]), i + 1, 3000);
	}
	if (kr_tx_commit(tx) || kr_pool_close(pool))
		return FAIL("commit/close: %s", kr_errmsg());

	/* The device sector of the page holding object 7's payload. */
	uint64_t page = objs[7] & ~4095ull;
	uint64_t sector;
	if (tu_device_sector(path, page, &sector) != 0) {
		fprintf(stderr, "test_badblocks: no FIEMAP on /var/tmp: skipped\n");
		unlink(path);
		return 77;
	}
	fd = open(path, O_RDWR);
	if (fd < 0)
		return FAIL("open");
	char junk[4096];
	memset(junk, 0x77, sizeof(junk));
	if (pwrite(fd, junk, sizeof(junk), (off_t)page) != (ssize_t)sizeof(junk) || fsync(fd))
		return FAIL("pwrite");
	close(fd);
	FILE *f = fopen(list, "w");
	fprintf(f, "%llu 8\n", (unsigned long long)sector);
	fclose(f);
	setenv("KERATIN_SYSFS_BADBLOCKS", list, 1);

	if (kr_pool_open(path, 0, &pool))
		return FAIL("open: %s", kr_errmsg());
	struct kr_pool_stat st;
	kr_pool_stat(pool, &st);
	const unsigned char *b = kr_get(pool, objs[7]);
	struct kr_check_report rep = { 0 }; /* no progress or page callbacks */
	int check = kr_pool_check(pool, 0, &rep);
	int ok = st.media_repairs == 1 && b && b[0] == 8 && b[2999] == 8 && check == KR_OK;
	printf("test_badblocks: page 0x%llx (device sector %llu) listed by the \"kernel\": %llu page "
	       "repaired at open, object %s, check %s\n",
	       (unsigned long long)page, (unsigned long long)sector, (unsigned long long)st.media_repairs,
	       b && b[0] == 8 ? "intact" : "WRONG", check == KR_OK ? "sound" : kr_errmsg());
	kr_pool_close(pool);
	unlink(path);
	unlink(list);
	TU_END_CHECK_ALL("test_badblocks");
	return ok ? 0 : 1;
}
