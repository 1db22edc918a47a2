#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <keratin_region.h>

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "store.dat";
	int fd = open(path, O_RDWR | O_CREAT, 0644);         /* any file, a multiple of 4 KiB */
	if (fd < 0 || ftruncate(fd, 1 << 20) || close(fd)) {
		perror(path);
		return 1;
	}

	kr_region *r;
	void *base;
	size_t len;
	if (kr_region_open(path, NULL, &r, &base, &len)) {   /* maps it; period 1 s */
		fprintf(stderr, "region: %s: %s\n", path, kr_errmsg());
		return 1;
	}
	const char record[64] = "plain stores, protected";
	memcpy((char *)base + 4096, record, sizeof(record));  /* plain stores */
	if (kr_region_close(r)) {                            /* final pass, clean */
		fprintf(stderr, "region: close: %s\n", kr_errmsg());
		return 1;
	}
	return 0;
}
