/*
 * r1_reserve_cancel.bug.c - a record built in a reservation (the action API) is published
 * without being flushed: pmemobj_publish makes the object live, and its bytes may still sit
 * in the cache. Before it, a draft reservation is filled and cancelled, which needs no
 * flush: a cancelled reservation's bytes are nobody's.
 */
#include "case.h"

struct rec {
	uint64_t key;
	uint64_t val;
};

struct root {
	PMEMoid rec;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	PMEMoid root = pmemobj_root(pop, sizeof(struct root));
	if (OID_IS_NULL(root))
		case_die("pmemobj_root");
	struct root *rt = pmemobj_direct(root);
	struct pobj_action act[3];

	PMEMoid draft = pmemobj_reserve(pop, &act[0], sizeof(struct rec), 1);
	if (OID_IS_NULL(draft))
		case_die("pmemobj_reserve");
	struct rec *d = pmemobj_direct(draft);
	*d = (struct rec){1, 2};
	pmemobj_cancel(pop, &act[0], 1);

	PMEMoid oid = pmemobj_reserve(pop, &act[0], sizeof(struct rec), 1);
	if (OID_IS_NULL(oid))
		case_die("pmemobj_reserve");
	struct rec *r = pmemobj_direct(oid);
	*r = (struct rec){42, 7}; /* expect: 1 missing-flush */
	pmemobj_set_value(pop, &act[1], &rt->rec.pool_uuid_lo, oid.pool_uuid_lo);
	pmemobj_set_value(pop, &act[2], &rt->rec.off, oid.off);
	if (pmemobj_publish(pop, act, 3) != 0)
		case_die("pmemobj_publish");

	pmemobj_close(pop);
	return 0;
}
