/*
 * test_pmemobj_crash.c - power failure under keratin-pmemobj: a libpmemobj-style workload
 * (in-place TX_ADD writes, atomic allocation with a constructor, atomic lists, the action
 * API, direct stores made durable with pmemobj_persist and with flush + drain, memcpy_persist,
 * frees) run under the crash simulator, with an image at every fence.
 *
 * The workload runs twice on identical pools: first plainly, recording the application's
 * state after every operation (values, list keys both ways, each slot's item, the count of
 * items: offsets left out); then under the crash simulator. An image taken during operation
 * i must recover to state i-1 or state i, and pass keratin's deep check: no lost or garbled
 * data, no damage reported that was not there. The application's in-place stores inside
 * transactions are reported to the simulator as evictable (crashsim_note_store), as the
 * cache may write them back at any time; stores declared by pmemobj_persist are not (they
 * are unprotected until their declaration commits: the window, docs/DESIGN.md).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpmemobj.h>

#include "compat.h"
#include "crashsim.h"
#include "testutil.h"

#define NSLOTS 4
#define MAXOPS 64
#define STATE_MAX 2048

POBJ_LAYOUT_BEGIN(crash);
POBJ_LAYOUT_ROOT(crash, struct root);
POBJ_LAYOUT_TOID(crash, struct item);
POBJ_LAYOUT_END(crash);

struct item {
	uint64_t key;
	char name[40];
	POBJ_LIST_ENTRY(struct item) link;
};
POBJ_LIST_HEAD(item_list, struct item);

struct root {
	uint64_t values[8];
	TOID(struct item) slots[NSLOTS];
	struct item_list list;
};

static char g_states[MAXOPS + 1][STATE_MAX];
static int g_nstates;
static int g_op;          /* the operation running (1-based); its images may show g_op - 1 or g_op */
static int g_sim;
static const char *g_opname = "setup";

/* ---- the state, read through keratin alone (the check's pool is a kr_pool) -------------- */

static int item_str(kr_pool *kr, uint64_t off, char *out, size_t n)
{
	const struct item *it = off ? kr_get(kr, off) : NULL;
	if (!off)
		return snprintf(out, n, "-"), 0;
	if (!it || kr_size(kr, off) != sizeof(*it))
		return snprintf(out, n, "DEAD(%llx)", (unsigned long long)off), 1;
	return snprintf(out, n, "%llu:%.*s", (unsigned long long)it->key, (int)sizeof(it->name),
			it->name), 0;
}

/* The application's state as text; 1 if something is structurally wrong (a dangling oid, a
 * list whose links disagree). */
static int state_of(kr_pool *kr, char *out, size_t n)
{
	kr_oid super;
	if (kr_root(kr, 0, &super) || !super)
		return snprintf(out, n, "no superblock"), 1;
	const struct kp_super *s = kr_get(kr, super);
	if (!s->root_oid)
		return snprintf(out, n, "no root"), 0;
	const struct root *r = kr_get(kr, s->root_oid);
	size_t len = 0;
	int bad = 0;
	len += snprintf(out + len, n - len, "v");
	for (int i = 0; i < 8; i++)
		len += snprintf(out + len, n - len, " %llu", (unsigned long long)r->values[i]);
	for (int i = 0; i < NSLOTS; i++) {
		char buf[80];
		bad |= item_str(kr, r->slots[i].oid.off, buf, sizeof(buf));
		len += snprintf(out + len, n - len, " s%d=%s", i, buf);
	}
	len += snprintf(out + len, n - len, " list");
	uint64_t first = r->list.pe_first.oid.off, at = first, prev = 0;
	for (int guard = 0; at && guard < 100; guard++) {
		const struct item *it = kr_get(kr, at);
		if (!it)
			return snprintf(out + len, n - len, " DANGLING"), 1;
		if (prev && it->link.pe_prev.oid.off != prev)
			bad = 1, len += snprintf(out + len, n - len, " BADPREV");
		len += snprintf(out + len, n - len, " %llu", (unsigned long long)it->key);
		prev = at;
		at = it->link.pe_next.oid.off;
		if (at == first)
			break;
	}
	if (first && ((const struct item *)kr_get(kr, first))->link.pe_prev.oid.off != prev)
		bad = 1, len += snprintf(out + len, n - len, " BADWRAP");
	/* Items live, less reservations never published (freed at the next pmemobj_open). */
	uint64_t items = 0;
	for (kr_oid o = kr_first(kr); o; o = kr_next(kr, o))
		if (kr_type(kr, o) == TOID_TYPE_NUM(struct item))
			items++;
		else if (kr_type(kr, o) == KP_TYPE_RESERVED)
			items--;
	snprintf(out + len, n - len, " items %llu", (unsigned long long)items);
	return bad;
}

/* An operation whose stores land line by line (flush + drain, as in libpmemobj: no promise
 * that two ranges become durable together): each field of the state may be old or new. */
static int g_fieldwise;

static int fieldwise_mix(const char *got, const char *before, const char *after)
{
	char g[STATE_MAX], b[STATE_MAX], a[STATE_MAX];
	char *sg, *sb, *sa;
	snprintf(g, sizeof(g), "%s", got);
	snprintf(b, sizeof(b), "%s", before);
	snprintf(a, sizeof(a), "%s", after);
	char *tg = strtok_r(g, " ", &sg), *tb = strtok_r(b, " ", &sb), *ta = strtok_r(a, " ", &sa);
	for (; tg && tb && ta; tg = strtok_r(NULL, " ", &sg), tb = strtok_r(NULL, " ", &sb),
					      ta = strtok_r(NULL, " ", &sa))
		if (strcmp(tg, tb) != 0 && strcmp(tg, ta) != 0)
			return 0;
	return !tg && !tb && !ta;
}

static int check_image(void *ctx, kr_pool *pool, const struct crashsim_image *img)
{
	char got[STATE_MAX], why[256];
	int bad = state_of(pool, got, sizeof(got));
	if (bad || (strcmp(got, g_states[g_op - 1]) != 0 && strcmp(got, g_states[g_op]) != 0 &&
		    !(g_fieldwise && fieldwise_mix(got, g_states[g_op - 1], g_states[g_op])))) {
		fprintf(stderr, "[op %d %s] fence %llu image %d#%u:\n  got    %s\n  before %s\n  after  %s\n",
			g_op, g_opname, (unsigned long long)img->fence, (int)img->kind, img->index, got,
			g_states[g_op - 1], g_states[g_op]);
		return 1;
	}
	if (tu_deep_check(pool, why, sizeof(why))) {
		fprintf(stderr, "[op %d %s] fence %llu image %d#%u: %s\n", g_op, g_opname,
			(unsigned long long)img->fence, (int)img->kind, img->index, why);
		return 1;
	}
	return 0;
}

/* ---- the workload ---------------------------------------------------------------------------- */

static int item_constr(PMEMobjpool *pop, void *ptr, void *arg)
{
	struct item *it = ptr;
	it->key = *(uint64_t *)arg;
	snprintf(it->name, sizeof(it->name), "item number %llu", (unsigned long long)it->key);
	pmemobj_persist(pop, it, sizeof(*it));
	return 0;
}

/* A store into the pool by the application inside a transaction: the cache may write it
 * back before the commit. */
static void noted(void *p, size_t n)
{
	if (g_sim)
		crashsim_note_store(p, n);
}

/* A store outside transactions, made durable by the persist that follows (the window:
 * not evictable before it in this model, docs/DESIGN.md). */
static void persisted(void *p, size_t n)
{
	if (g_sim)
		crashsim_note_persisted_store(p, n);
}

static void workload(PMEMobjpool *pop, void (*after_op)(PMEMobjpool *))
{
	TOID(struct root) root = POBJ_ROOT(pop, struct root);
	struct root *r = D_RW(root);
	uint64_t k;

	g_opname = "TX_ADD in place";
	TX_BEGIN(pop) {
		TX_ADD_FIELD(root, values);
		for (int i = 0; i < 8; i++)
			r->values[i] = 100 + i;
		noted(r->values, sizeof(r->values));
	} TX_END
	after_op(pop);

	g_opname = "alloc with a constructor into a slot";
	k = 1;
	POBJ_NEW(pop, &r->slots[0], struct item, item_constr, &k);
	after_op(pop);

	g_opname = "list insert_new x3";
	for (k = 10; k < 13; k++) {
		POBJ_LIST_INSERT_NEW_TAIL(pop, &r->list, link, sizeof(struct item), item_constr, &k);
		after_op(pop);
	}

	g_opname = "TX: new item, link it, change values";
	TX_BEGIN(pop) {
		TOID(struct item) it = TX_NEW(struct item);
		D_RW(it)->key = 2;
		strcpy(D_RW(it)->name, "made in a transaction");
		noted(D_RW(it), sizeof(struct item));
		TX_ADD_FIELD(root, slots[1]);
		r->slots[1] = it;
		noted(&r->slots[1], sizeof(r->slots[1]));
		TX_ADD_FIELD(root, values[3]);
		r->values[3] = 333;
		noted(&r->values[3], 8);
	} TX_END
	after_op(pop);

	g_opname = "reserve, write, persist, set_value, publish";
	struct pobj_action act[2];
	PMEMoid res = pmemobj_reserve(pop, &act[0], sizeof(struct item), TOID_TYPE_NUM(struct item));
	struct item *ri = pmemobj_direct(res);
	ri->key = 3;
	strcpy(ri->name, "reserved then published");
	persisted(ri, sizeof(*ri));
	pmemobj_persist(pop, ri, sizeof(*ri));
	pmemobj_set_value(pop, &act[1], &r->slots[2].oid.off, res.off);
	r->slots[2].oid.pool_uuid_lo = res.pool_uuid_lo; /* the half set_value does not set */
	persisted(&r->slots[2].oid.pool_uuid_lo, 8);
	pmemobj_persist(pop, &r->slots[2].oid.pool_uuid_lo, 8);
	pmemobj_publish(pop, act, 2);
	after_op(pop);

	g_opname = "direct stores, persist";
	struct item *s0 = D_RW(r->slots[0]);
	snprintf(s0->name, sizeof(s0->name), "%s", "renamed in place");
	s0->key = 4;
	persisted(s0, offsetof(struct item, link));
	pmemobj_persist(pop, s0, offsetof(struct item, link));
	after_op(pop);

	g_opname = "direct stores, flush + drain";
	g_fieldwise = 1;
	r->values[0] = 7;
	r->values[7] = 77;
	persisted(&r->values[0], 8);
	persisted(&r->values[7], 8);
	pmemobj_flush(pop, &r->values[0], 8);
	pmemobj_flush(pop, &r->values[7], 8);
	pmemobj_drain(pop);
	after_op(pop);
	g_fieldwise = 0;

	g_opname = "memcpy_persist";
	pmemobj_memcpy_persist(pop, D_RW(r->slots[1])->name, "copied by the library", 22);
	after_op(pop);

	g_opname = "list move to the head, remove";
	TOID(struct item) last = POBJ_LIST_LAST(&r->list, link);
	POBJ_LIST_MOVE_ELEMENT_HEAD(pop, &r->list, &r->list, last, link, link);
	after_op(pop);
	POBJ_LIST_REMOVE_FREE(pop, &r->list, POBJ_LIST_NEXT(POBJ_LIST_FIRST(&r->list), link), link);
	after_op(pop);

	g_opname = "TX abort after in-place stores";
	TX_BEGIN(pop) {
		TX_ADD_FIELD(root, values);
		memset(r->values, 0xee, sizeof(r->values));
		noted(r->values, sizeof(r->values));
		pmemobj_tx_abort(0);
	} TX_END
	after_op(pop);

	g_opname = "free through a slot";
	POBJ_FREE(&r->slots[1]);
	after_op(pop);
}

static void record(PMEMobjpool *pop)
{
	TU_ASSERT(g_nstates < MAXOPS, "too many operations");
	state_of(kp_pool_of(pop)->kr, g_states[++g_nstates], STATE_MAX);
}

static void advance(PMEMobjpool *pop)
{
	char now[STATE_MAX];
	state_of(kp_pool_of(pop)->kr, now, sizeof(now));
	TU_ASSERT(strcmp(now, g_states[g_op]) == 0, "op %d (%s) went another way:\n  %s\n  %s", g_op,
		  g_opname, now, g_states[g_op]);
	g_op++;
}

static PMEMobjpool *make_pool(const char *path)
{
	PMEMobjpool *pop = pmemobj_create(path, "crash", PMEMOBJ_MIN_POOL, 0600);
	TU_ASSERT(pop, "create: %s", pmemobj_errormsg());
	TU_ASSERT(!TOID_IS_NULL(POBJ_ROOT(pop, struct root)), "root: %s", pmemobj_errormsg());
	return pop;
}

int main(void)
{
	setenv("PMEM_IS_PMEM_FORCE", "1", 1);
	char a[128], b[128];
	tu_pool_path(a, sizeof(a), "kp-crash-a");
	tu_pool_path(b, sizeof(b), "kp-crash-b");

	/* Pass 1: the states. */
	PMEMobjpool *pop = make_pool(a);
	state_of(kp_pool_of(pop)->kr, g_states[0], STATE_MAX);
	workload(pop, record);
	pmemobj_close(pop);
	for (int i = 0; i <= g_nstates; i++)
		printf("state %d: %s\n", i, g_states[i]);

	/* Pass 2: the same under the crash simulator. */
	pop = make_pool(b);
	pmemobj_close(pop);
	struct crashsim_opts o;
	crashsim_opts_init(&o);
	o.random_images = tu_scaled(4, 1);
	o.seed = tu_seed("pmemobj_crash", 11);
	TU_ASSERT(crashsim_start(&o, check_image, NULL) == 0, "crashsim busy");
	crashsim_enable_checks(false); /* the open's fences: state 0 is not yet the model's */
	pop = pmemobj_open(b, "crash");
	TU_ASSERT(pop, "open: %s", pmemobj_errormsg());
	crashsim_enable_checks(true);
	g_sim = 1;
	g_op = 1;
	workload(pop, advance);
	g_op = g_nstates; /* the close: the last state only */
	g_states[g_op - 1][0] = 0;
	g_opname = "close";
	pmemobj_close(pop);
	struct crashsim_stats st;
	crashsim_stop(&st);
	TU_ASSERT(st.failures == 0, "%llu of %llu crash images failed", (unsigned long long)st.failures,
		  (unsigned long long)st.images);
	TU_ASSERT(st.images > 0, "no crash image was checked");
	/* checks invariant compat.h 2: every line the library changed, it changed through keratin */
	TU_ASSERT(st.unrecorded_lines == 0, "%llu lines changed without a store the simulator saw",
		  (unsigned long long)st.unrecorded_lines);
	printf("pass 2: %llu crash images at %llu fences over %d operations: every one recovered to "
	       "the state before or after its operation and passed the deep check\n",
	       (unsigned long long)st.images, (unsigned long long)st.fences, g_nstates);
	TU_END_CHECK_ALL("end");
	return 0;
}
