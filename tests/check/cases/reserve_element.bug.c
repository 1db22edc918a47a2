/*
 * reserve_element.bug.c - a cancel of one element of an action array leaves the
 * reservations in its other elements alone. A record reserved in act[0] is published
 * unflushed (rule 1) after a draft reserved in act[1] was filled and cancelled alone: the
 * draft's store needs no flush, and draws no report.
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

	PMEMoid oid = pmemobj_reserve(pop, &act[0], sizeof(struct rec), 1);
	if (OID_IS_NULL(oid))
		case_die("pmemobj_reserve");
	struct rec *r = pmemobj_direct(oid);
	*r = (struct rec){42, 7}; /* expect: 1 missing-flush */

	/* A draft in the next element, filled and cancelled alone: act[0] stays reserved. */
	PMEMoid draft = pmemobj_reserve(pop, &act[1], sizeof(struct rec), 1);
	if (OID_IS_NULL(draft))
		case_die("pmemobj_reserve");
	struct rec *d = pmemobj_direct(draft);
	*d = (struct rec){1, 2};
	pmemobj_cancel(pop, &act[1], 1);

	pmemobj_set_value(pop, &act[1], &rt->rec.pool_uuid_lo, oid.pool_uuid_lo);
	pmemobj_set_value(pop, &act[2], &rt->rec.off, oid.off);
	if (pmemobj_publish(pop, act, 3) != 0)
		case_die("pmemobj_publish");

	pmemobj_close(pop);
	return 0;
}
