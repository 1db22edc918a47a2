/*
 * r6_missing_barrier.bug.c - rule 6 (missing-barrier): a message and its valid flag are
 * both flushed, but one fence after both flushes orders nothing between them. The flag
 * may reach persistent memory before the text, and a crash then leaves a valid message
 * with missing text. Rules 1-5 see nothing wrong (every store is flushed before the
 * fence); only a crash image that keeps the flag and drops the text shows the bug.
 *
 * `PROG --check IMAGE` is the consistency check: exit 0 if the image is consistent.
 */
#include "case.h"

struct msg {
	char text[56];
	uint64_t valid;
};

static const char greeting[] = "hello, persistent world";

static int check(const char *image)
{
	size_t len;
	struct msg *m = pmem_map_file(image, 0, 0, 0, &len, NULL);
	if (m == NULL || len < sizeof(*m))
		return 2;
	int bad = m->valid && strcmp(m->text, greeting) != 0;
	pmem_unmap(m, len);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--check") == 0)
		return check(argv[2]);
	if (argc < 2)
		return case_usage(argv[0]);
	struct msg *m = case_map(argv[1], 4096);

	memcpy(m->text, greeting, sizeof(greeting));
	pmem_flush(m->text, sizeof(greeting));
	m->valid = 1; /* expect: 6 missing-barrier */
	pmem_flush(&m->valid, sizeof(m->valid));
	pmem_drain();

	pmem_unmap(m, 4096);
	return 0;
}
