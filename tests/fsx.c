/*
 * fsx.c - a random-operation checker in the style of fsx: long random sequences of write,
 * read, truncate, fallocate and hole punching, mmap reads and writes with msync, and
 * copy_file_range on one file, every read compared with an in-memory model of the file.
 *
 * The file reaches past 4 GiB, so the model is sparse: a hash table of the 4 KiB pages that
 * hold something other than zeros; offsets are drawn near a few anchors (0, 1 MiB, 4 GiB)
 * so that the pages touched stay few.
 *
 * usage: fsx FILE OPS SEED      prints the operation count and exits 1 at the first
 *                               difference, naming the operation and the offset.
 * Reproducible: the same SEED gives the same sequence.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u
#define MAXLEN (256u << 10)

/* ---- the model: a sparse file ------------------------------------------------------- */

struct mpage {
	uint64_t index;
	unsigned char *data; /* NULL: empty slot */
};
static struct mpage *pages;
static size_t npages_cap = 1 << 12, npages_used;
static uint64_t msize;

static struct mpage *slot(uint64_t index, int create)
{
	size_t h = (size_t)(index * 0x9e3779b97f4a7c15ull) & (npages_cap - 1);
	for (;; h = (h + 1) & (npages_cap - 1)) {
		if (!pages[h].data) {
			if (!create)
				return NULL;
			if (++npages_used * 2 > npages_cap) {
				fprintf(stderr, "fsx: the model outgrew its table\n");
				exit(2);
			}
			pages[h].index = index;
			pages[h].data = calloc(1, PAGE);
			return &pages[h];
		}
		if (pages[h].index == index)
			return &pages[h];
	}
}

static void model_write(uint64_t off, const unsigned char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		uint64_t o = off + done;
		size_t in = o % PAGE, n = PAGE - in < len - done ? PAGE - in : len - done;
		memcpy(slot(o / PAGE, 1)->data + in, buf + done, n);
		done += n;
	}
	if (off + len > msize)
		msize = off + len;
}

static void model_read(uint64_t off, unsigned char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		uint64_t o = off + done;
		size_t in = o % PAGE, n = PAGE - in < len - done ? PAGE - in : len - done;
		struct mpage *p = o < msize ? slot(o / PAGE, 0) : NULL;
		if (p)
			memcpy(buf + done, p->data + in, n);
		else
			memset(buf + done, 0, n);
		done += n;
	}
}

/* Zeroes [off, off + len) in the model (punched holes, and what truncation cut off). */
static void model_zero(uint64_t off, uint64_t len)
{
	for (uint64_t o = off; o < off + len;) {
		uint64_t in = o % PAGE, n = PAGE - in < off + len - o ? PAGE - in : off + len - o;
		struct mpage *p = slot(o / PAGE, 0);
		if (p)
			memset(p->data + in, 0, n);
		o += n;
	}
}

static void model_truncate(uint64_t size)
{
	if (size < msize) {
		/* Only pages the model holds matter; zero what lies past the new size. */
		for (size_t i = 0; i < npages_cap; i++) {
			struct mpage *p = &pages[i];
			if (!p->data)
				continue;
			uint64_t start = p->index * PAGE;
			if (start >= size)
				memset(p->data, 0, PAGE);
			else if (start + PAGE > size)
				memset(p->data + (size - start), 0, PAGE - (size - start));
		}
	}
	msize = size;
}

/* ---- randomness -------------------------------------------------------------------- */

static uint64_t rng;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t pick_off(void)
{
	static const uint64_t anchors[] = {0, 1u << 20, (4ull << 30) - 8192};
	return anchors[rnd() % 3] + rnd() % (64u << 10);
}

static size_t pick_len(void)
{
	switch (rnd() % 4) {
	case 0: return 1 + rnd() % 16;
	case 1: return 1 + rnd() % PAGE;
	case 2: return PAGE * (1 + rnd() % 4);
	default: return 1 + rnd() % MAXLEN;
	}
}

/* ---- the run ------------------------------------------------------------------------ */

static unsigned long op_no;
static const char *path;

static void fail(const char *what, uint64_t off, size_t len)
{
	fprintf(stderr, "fsx: %s: operation %lu (%s at %" PRIu64 ", %zu bytes) disagrees with the model%s%s\n", path, op_no,
		what, off, len, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(1);
}

static void check_read(int fd, uint64_t off, size_t len, const char *what)
{
	static unsigned char got[MAXLEN], want[MAXLEN];
	errno = 0;
	ssize_t n = pread(fd, got, len, (off_t)off);
	size_t expect = off >= msize ? 0 : (msize - off < len ? (size_t)(msize - off) : len);
	if (n != (ssize_t)expect)
		fail(what, off, len);
	model_read(off, want, expect);
	if (memcmp(got, want, expect) != 0) {
		size_t i = 0;
		while (got[i] == want[i])
			i++;
		fprintf(stderr, "fsx: first difference at %" PRIu64 ": 0x%02x, model 0x%02x\n", off + i, got[i], want[i]);
		fail(what, off, len);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: fsx FILE OPS SEED\n");
		return 2;
	}
	path = argv[1];
	unsigned long ops = strtoul(argv[2], NULL, 10);
	rng = strtoull(argv[3], NULL, 10) * 2654435761u + 1;
	pages = calloc(npages_cap, sizeof(*pages));
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	static unsigned char buf[MAXLEN];
	unsigned long counts[8] = {0};
	for (op_no = 1; op_no <= ops; op_no++) {
		uint64_t off = pick_off();
		size_t len = pick_len();
		unsigned op = (unsigned)(rnd() % 8);
		counts[op]++;
		errno = 0;
		switch (op) {
		case 0: /* write */
		case 1:
			for (size_t i = 0; i < len; i++)
				buf[i] = (unsigned char)(rnd() | 1);
			if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
				fail("write", off, len);
			model_write(off, buf, len);
			break;
		case 2: /* read */
			check_read(fd, off, len, "read");
			break;
		case 3: { /* truncate, to around one of the anchors */
			uint64_t size = pick_off();
			if (ftruncate(fd, (off_t)size) != 0)
				fail("truncate", size, 0);
			model_truncate(size);
			break;
		}
		case 4: /* punch a hole */
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) != 0)
				fail("punch", off, len);
			if (off < msize)
				model_zero(off, msize - off < len ? msize - off : len);
			break;
		case 5: /* allocate, growing the file */
			if (fallocate(fd, 0, (off_t)off, (off_t)len) != 0)
				fail("fallocate", off, len);
			if (off + len > msize)
				msize = off + len;
			break;
		case 6: { /* mmap: write a range through the mapping, msync, read it back by pread */
			if (off >= msize)
				break;
			if (off + len > msize)
				len = (size_t)(msize - off);
			uint64_t base = off / PAGE * PAGE;
			size_t maplen = (size_t)(off + len - base);
			unsigned char *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
			if (m == MAP_FAILED)
				fail("mmap", off, len);
			static unsigned char want[MAXLEN];
			model_read(off, want, len);
			if (memcmp(m + (off - base), want, len) != 0)
				fail("mmap read", off, len);
			for (size_t i = 0; i < len; i++)
				buf[i] = (unsigned char)(rnd() | 2);
			memcpy(m + (off - base), buf, len);
			if (msync(m, maplen, MS_SYNC) != 0)
				fail("msync", off, len);
			munmap(m, maplen);
			model_write(off, buf, len);
			check_read(fd, off, len, "read after msync");
			break;
		}
		case 7: { /* copy_file_range within the file, between two non-overlapping ranges */
			loff_t src = (loff_t)pick_off(), dst = (loff_t)pick_off();
			if ((uint64_t)src >= msize || (src < dst + (loff_t)len && dst < src + (loff_t)len))
				break;
			if ((uint64_t)src + len > msize)
				len = (size_t)(msize - (uint64_t)src);
			loff_t s = src, d = dst;
			size_t done = 0;
			while (done < len) {
				ssize_t n = copy_file_range(fd, &s, fd, &d, len - done, 0);
				if (n <= 0)
					fail("copy_file_range", (uint64_t)dst, len);
				done += (size_t)n;
			}
			model_read((uint64_t)src, buf, len);
			model_write((uint64_t)dst, buf, len);
			break;
		}
		}
	}
	/* A last full comparison of everything the model holds. */
	for (size_t i = 0; i < npages_cap; i++)
		if (pages[i].data && pages[i].index * PAGE < msize)
			check_read(fd, pages[i].index * PAGE, PAGE, "final read");
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != msize)
		fail("final size", msize, 0);
	close(fd);
	printf("fsx: %lu operations (write %lu, read %lu, truncate %lu, punch %lu, fallocate %lu, mmap %lu, "
	       "copy_file_range %lu), final size %" PRIu64 ", %zu model pages: all reads matched\n",
	       ops, counts[0] + counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7], msize,
	       npages_used);
	return 0;
}
