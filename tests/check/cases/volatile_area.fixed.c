/*
 * volatile_area.fixed.c - the twin of volatile_area.bug.c: the persistent total is
 * persisted; the transient counter, declared through pmemobj_volatile, still never is.
 */
#include "case.h"

struct root {
	uint64_t total;
	PMEMvlt(uint64_t) hits; /* reset once per open of the pool */
};

static int zero_hits(void *ptr, void *arg)
{
	(void)arg;
	*(uint64_t *)ptr = 0;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
	if (r == NULL)
		case_die("pmemobj_root");

	for (int i = 0; i < 3; i++) {
		uint64_t *hits = pmemobj_volatile(pop, &r->hits.vlt, &r->hits.value,
						  sizeof(r->hits.value), zero_hits, NULL);
		if (hits == NULL)
			case_die("pmemobj_volatile");
		*hits += 1;
	}
	r->total += 3;
	pmemobj_persist(pop, &r->total, sizeof(r->total));
	pmemobj_close(pop);
	return 0;
}
