/*
 * r4_list_remove_free.fixed.c - the twin of r4_list_remove_free.bug.c: the value is read
 * before POBJ_LIST_REMOVE_FREE frees the entry.
 */
#include "case.h"

TOID_DECLARE(struct entry, 1);

struct entry {
	uint64_t key;
	uint64_t value;
	POBJ_LIST_ENTRY(struct entry) list;
};

POBJ_LIST_HEAD(entries, struct entry);

struct table {
	PMEMoid hint; /* the entry last found */
	struct entries head;
};

static int entry_init(PMEMobjpool *pop, void *ptr, void *arg)
{
	struct entry *e = ptr;
	e->key = *(uint64_t *)arg;
	e->value = e->key * 10;
	pmemobj_persist(pop, e, sizeof(e->key) + sizeof(e->value));
	return 0;
}

/* The entry holding key (remembered as the hint), or a null one. */
static TOID(struct entry) find(PMEMobjpool *pop, struct table *t, uint64_t key)
{
	TOID(struct entry) var;
	POBJ_LIST_FOREACH(var, &t->head, list) {
		if (D_RO(var)->key == key) {
			t->hint = var.oid;
			pmemobj_persist(pop, &t->hint, sizeof(t->hint));
			break;
		}
	}
	return var;
}

/* Removes key from t; returns its value, or 0 if absent. */
static uint64_t remove_key(PMEMobjpool *pop, struct table *t, uint64_t key)
{
	TOID(struct entry) var = find(pop, t, key);
	if (TOID_IS_NULL(var))
		return 0;
	uint64_t value = D_RO(var)->value;
	if (POBJ_LIST_REMOVE_FREE(pop, &t->head, var, list) != 0)
		case_die("POBJ_LIST_REMOVE_FREE");
	t->hint = OID_NULL;
	pmemobj_persist(pop, &t->hint, sizeof(t->hint));
	return value;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	struct table *t = pmemobj_direct(pmemobj_root(pop, sizeof(struct table)));
	for (uint64_t k = 1; k <= 3; k++)
		if (OID_IS_NULL(POBJ_LIST_INSERT_NEW_HEAD(pop, &t->head, list, sizeof(struct entry),
							  entry_init, &k)))
			case_die("POBJ_LIST_INSERT_NEW_HEAD");
	if (remove_key(pop, t, 2) != 20)
		return 1;
	pmemobj_close(pop);
	return 0;
}
