/*
 * clean_error_path.c - no report wanted: PmemConjurer's rebuild_err false positive. A
 * rebuild fills a new table in persistent memory and persists it only when every entry
 * was copied; when a copy fails it returns an error and leaves the new table unflushed,
 * which is harmless because nothing points to it yet. The checker prunes such paths (a
 * callee failed and the function fails) instead of reporting rule 1 at the return.
 */
#include "../../cases/case.h"

#define SLOTS 8

struct table {
	uint64_t n;
	uint64_t slot[SLOTS];
};

/* Fails (returns -1) on a value the table cannot hold. */
static int copy_entry(struct table *t, uint64_t v)
{
	if (v == 0)
		return -1;
	t->slot[t->n++] = v;
	return 0;
}

int rebuild(struct table *fresh, const uint64_t *vals, int count)
{
	fresh->n = 0;
	for (int i = 0; i < count && i < SLOTS; i++)
		if (copy_entry(fresh, vals[i]) != 0)
			goto rebuild_err;
	pmem_persist(fresh, sizeof(*fresh));
	return 0;
rebuild_err:
	fprintf(stderr, "rebuild failed\n");
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	struct table *t = case_map(argv[1], 4096);
	/* the new table is built from the old one, both in the mapping */
	int rc = rebuild(&t[1], t[0].slot, (int)t[0].n);
	pmem_unmap(t, 4096);
	return rc == 0 ? 0 : 1;
}
