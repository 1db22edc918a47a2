/*
 * workload.c - the random transaction workload and its reference model (see workload.h).
 * Plans are drawn from the PRNG and the model's shape only, so dry runs reproduce them;
 * wl_exec() runs a plan through the public API and checks every buffer the library hands
 * back against the model on the way; wl_verify() and wl_check_live() compare a (possibly
 * recovered) pool with a model.
 */
#define _GNU_SOURCE
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- model ------------------------------------------------------------------------------ */

void wl_model_init(struct wl_model *m, unsigned nslots, uint32_t type_base)
{
	m->nslots = nslots;
	m->type_base = type_base;
	m->slots = calloc(nslots, sizeof(*m->slots));
	TU_ASSERT(m->slots, "out of memory");
}

void wl_model_free(struct wl_model *m)
{
	if (!m->slots)
		return;
	for (unsigned i = 0; i < m->nslots; i++)
		free(m->slots[i].data);
	free(m->slots);
	m->slots = NULL;
}

void wl_model_copy(struct wl_model *dst, const struct wl_model *src)
{
	wl_model_free(dst);
	wl_model_init(dst, src->nslots, src->type_base);
	for (unsigned i = 0; i < src->nslots; i++) {
		const struct wl_slot *s = &src->slots[i];
		dst->slots[i] = *s;
		if (s->size) {
			dst->slots[i].data = malloc(s->size);
			TU_ASSERT(dst->slots[i].data, "out of memory");
			memcpy(dst->slots[i].data, s->data, s->size);
		}
	}
}

unsigned wl_model_live(const struct wl_model *m)
{
	unsigned n = 0;
	for (unsigned i = 0; i < m->nslots; i++)
		n += m->slots[i].size != 0;
	return n;
}

static void slot_clear(struct wl_slot *s)
{
	free(s->data);
	*s = (struct wl_slot){ 0 };
}

static void slot_alloc(struct wl_slot *s, uint32_t size)
{
	s->oid = 0;
	s->size = size;
	s->data = calloc(1, size);
	TU_ASSERT(s->data, "out of memory");
}

static void range_apply(uint8_t *data, const struct wl_range *r)
{
	tu_fill(data + r->off, r->len, r->seed);
}

/* The model effect of one op (the pool effect is in exec_op). */
static void op_apply_model(struct wl_model *m, const struct wl_op *op)
{
	struct wl_slot *s = &m->slots[op->slot];
	switch (op->kind) {
	case WL_FREE:
		slot_clear(s);
		break;
	case WL_REPLACE:
		slot_clear(s);
		/* fall through */
	case WL_ALLOC:
		slot_alloc(s, op->size);
		/* fall through */
	case WL_WRITE:
		for (unsigned i = 0; i < op->nranges; i++)
			range_apply(s->data, &op->r[i]);
		break;
	}
}

void wl_model_apply(struct wl_model *m, const struct wl_plan *plan)
{
	if (plan->abort)
		return;
	for (unsigned i = 0; i < plan->nops; i++)
		op_apply_model(m, &plan->ops[i]);
}

/* ---- plans ------------------------------------------------------------------------------- */

/* A random range inside an object of `size` bytes: length log-uniform so that both tiny
 * field updates and large overwrites are common. */
static void gen_range(struct tu_rng *rng, uint64_t size, struct wl_range *r)
{
	r->len = (uint32_t)tu_rng_logu(rng, 1, size);
	r->off = (uint32_t)tu_rng_below(rng, size - r->len + 1);
	r->seed = tu_rng_next(rng);
}

static void gen_fill(struct tu_rng *rng, struct wl_op *op, uint64_t size, bool is_new)
{
	/* New objects are mostly filled entirely with random bytes; some keep zero-filled
	 * parts (the zero fill is checked too). Overwrites are mostly partial. */
	op->whole = tu_rng_chance(rng, is_new ? 3 : 1, is_new ? 4 : 8);
	if (op->whole) {
		op->nranges = 1;
		op->r[0] = (struct wl_range){ .off = 0, .len = (uint32_t)size,
					      .seed = tu_rng_next(rng) };
		return;
	}
	/* A new object may stay (partly) zero: zero-fill is part of what is checked. */
	op->nranges = (unsigned)tu_rng_range(rng, is_new ? 0 : 1, WL_MAX_RANGES);
	for (unsigned i = 0; i < op->nranges; i++)
		gen_range(rng, size, &op->r[i]);
}

void wl_plan_gen(struct tu_rng *rng, const struct wl_params *p, const struct wl_model *m,
		 struct wl_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	unsigned max_ops = p->max_ops < 1 ? 1 : p->max_ops > WL_MAX_OPS ? WL_MAX_OPS : p->max_ops;
	if (max_ops > m->nslots)
		max_ops = m->nslots;
	plan->nops = (unsigned)tu_rng_range(rng, 1, max_ops);
	for (unsigned i = 0; i < plan->nops; i++) {
		struct wl_op *op = &plan->ops[i];
		/* Distinct slots: the same object is never freed and then written in one tx. */
		unsigned slot;
		bool dup;
		do {
			slot = (unsigned)tu_rng_below(rng, m->nslots);
			dup = false;
			for (unsigned j = 0; j < i; j++)
				dup |= plan->ops[j].slot == slot;
		} while (dup);
		op->slot = slot;
		const struct wl_slot *s = &m->slots[slot];
		if (!s->size) {
			op->kind = WL_ALLOC;
		} else {
			unsigned d = (unsigned)tu_rng_below(rng, 100);
			op->kind = d < 50 ? WL_WRITE : d < 75 ? WL_FREE : WL_REPLACE;
		}
		if (op->kind == WL_ALLOC || op->kind == WL_REPLACE) {
			op->size = (uint32_t)tu_rng_logu(rng, p->min_size, p->max_size);
			gen_fill(rng, op, op->size, true);
		} else if (op->kind == WL_WRITE) {
			gen_fill(rng, op, s->size, false);
		}
		op->tx_get = op->kind != WL_FREE && tu_rng_chance(rng, 1, 6);
	}
	plan->abort = tu_rng_below(rng, 100) < p->abort_pct;
}

void wl_dry_commit(struct tu_rng *rng, const struct wl_params *p, struct wl_model *m)
{
	struct wl_plan plan;
	do
		wl_plan_gen(rng, p, m, &plan);
	while (plan.abort);
	wl_model_apply(m, &plan);
}

/* ---- execution ----------------------------------------------------------------------------- */

void wl_ctx_init(struct wl_ctx *c, kr_pool *pool, kr_oid dir, const struct wl_params *p)
{
	memset(c, 0, sizeof(*c));
	c->pool = pool;
	c->p = *p;
	if (!dir) {
		kr_tx *tx;
		TU_OK(kr_tx_begin(pool, &tx));
		TU_OK(kr_tx_alloc(tx, p->nslots * sizeof(struct wl_dir_entry), p->type_base - 1,
				  &dir));
		TU_OK(kr_tx_commit(tx));
	}
	TU_ASSERT(kr_size(pool, dir) >= p->nslots * sizeof(struct wl_dir_entry),
		  "directory object too small");
	c->dir = dir;
	wl_model_init(&c->model, p->nslots, p->type_base);
	wl_model_init(&c->pending, p->nslots, p->type_base);
}

void wl_ctx_free(struct wl_ctx *c)
{
	wl_model_free(&c->model);
	wl_model_free(&c->pending);
}

static void first_diff(const uint8_t *a, const uint8_t *b, size_t n, char *why, size_t whylen,
		       const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (a[i] != b[i]) {
			snprintf(why, whylen, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i,
				 n, a[i], b[i]);
			return;
		}
	}
	snprintf(why, whylen, "%s: equal", what);
}

#define EXEC_FAIL(c, op, fmt, ...)                                                              \
	TU_FAIL("workload (type_base %u, commit #%llu, slot %u, op kind %d): " fmt,             \
		(c)->p.type_base, (unsigned long long)(c)->commits + 1, (op)->slot, (int)(op)->kind, \
		##__VA_ARGS__)

/* Sets directory entry `slot` inside the transaction, checking that the micro-buffer holds
 * the entry the model says is committed (or was set earlier in this transaction). */
static void exec_dir_set(struct wl_ctx *c, kr_tx *tx, const struct wl_op *op,
			 const struct wl_slot *old, kr_oid oid, uint64_t size)
{
	struct wl_dir_entry *e = kr_tx_add(tx, c->dir, op->slot * sizeof(*e), sizeof(*e));
	if (!e)
		EXEC_FAIL(c, op, "kr_tx_add(directory) failed: %s", kr_errmsg());
	if (e->oid != old->oid || e->size != old->size)
		EXEC_FAIL(c, op, "directory micro-buffer holds {%#llx, %llu}, model {%#llx, %llu}",
			  (unsigned long long)e->oid, (unsigned long long)e->size,
			  (unsigned long long)old->oid, (unsigned long long)old->size);
	e->oid = oid;
	e->size = size;
}

/* Writes the op's ranges into object `oid` through micro-buffers, checking each buffer's
 * initial bytes against the model first (so the copy-in and the transaction's own earlier
 * writes are verified), then applies them to the model slot. */
static void exec_ranges(struct wl_ctx *c, kr_tx *tx, const struct wl_op *op, kr_oid oid,
			struct wl_slot *s)
{
	for (unsigned i = 0; i < op->nranges; i++) {
		const struct wl_range *r = &op->r[i];
		uint8_t *buf = (i == 0 && op->whole) ? kr_tx_open(tx, oid)
						     : kr_tx_add(tx, oid, r->off, r->len);
		if (!buf)
			EXEC_FAIL(c, op, "kr_tx_%s(%#llx, %u, %u) failed: %s",
				  (i == 0 && op->whole) ? "open" : "add", (unsigned long long)oid,
				  r->off, r->len, kr_errmsg());
		if (memcmp(buf, s->data + r->off, r->len) != 0) {
			char why[160];
			first_diff(buf, s->data + r->off, r->len, why, sizeof(why), "micro-buffer");
			EXEC_FAIL(c, op, "range %u [%u, +%u) of %#llx: %s", i, r->off, r->len,
				  (unsigned long long)oid, why);
		}
		tu_fill(buf, r->len, r->seed);
		range_apply(s->data, r);
	}
	if (op->tx_get) {
		const uint8_t *view = kr_tx_get(tx, oid);
		if (!view)
			EXEC_FAIL(c, op, "kr_tx_get(%#llx) failed: %s", (unsigned long long)oid,
				  kr_errmsg());
		if (memcmp(view, s->data, s->size) != 0) {
			char why[160];
			first_diff(view, s->data, s->size, why, sizeof(why), "kr_tx_get view");
			EXEC_FAIL(c, op, "%s", why);
		}
	}
}

static void exec_op(struct wl_ctx *c, kr_tx *tx, const struct wl_op *op)
{
	struct wl_slot *s = &c->pending.slots[op->slot];
	struct wl_slot old = *s;
	int rc;

	if (op->kind == WL_FREE || op->kind == WL_REPLACE) {
		if ((rc = kr_tx_free(tx, s->oid)) != KR_OK)
			EXEC_FAIL(c, op, "kr_tx_free(%#llx) = %d: %s", (unsigned long long)s->oid,
				  rc, kr_errmsg());
		slot_clear(s);
	}
	if (op->kind == WL_ALLOC || op->kind == WL_REPLACE) {
		kr_oid oid;
		rc = kr_tx_alloc(tx, op->size, c->p.type_base + op->slot, &oid);
		if (rc != KR_OK)
			EXEC_FAIL(c, op, "kr_tx_alloc(%u) = %d: %s", op->size, rc, kr_errmsg());
		slot_alloc(s, op->size);
		s->oid = oid;
	}
	if (op->kind != WL_FREE)
		exec_ranges(c, tx, op, s->oid, s);
	if (op->kind != WL_WRITE)
		exec_dir_set(c, tx, op, &old, s->oid, s->size);
}

void wl_exec(struct wl_ctx *c, const struct wl_plan *plan)
{
	kr_tx *tx;
	int rc;

	wl_model_copy(&c->pending, &c->model);
	if ((rc = kr_tx_begin(c->pool, &tx)) != KR_OK)
		TU_FAIL("kr_tx_begin = %d: %s", rc, kr_errmsg());
	for (unsigned i = 0; i < plan->nops; i++)
		exec_op(c, tx, &plan->ops[i]);
	if (plan->abort) {
		kr_tx_abort(tx);
		c->aborts++;
		return;
	}
	c->in_commit = 1;
	rc = kr_tx_commit(tx);
	c->in_commit = 0;
	if (rc != KR_OK)
		TU_FAIL("kr_tx_commit (type_base %u, commit #%llu) = %d (%s): %s", c->p.type_base,
			(unsigned long long)c->commits + 1, rc, kr_strerror(rc), kr_errmsg());
	/* The pending model becomes the committed one; the old one is recycled as scratch. */
	struct wl_model t = c->model;
	c->model = c->pending;
	c->pending = t;
	c->commits++;
}

/* ---- verification ---------------------------------------------------------------------------- */

int wl_verify(kr_pool *pool, kr_oid dir, const struct wl_model *m, bool check_oids, char *why,
	      size_t whylen)
{
	const struct wl_dir_entry *d = kr_get(pool, dir);
	if (!d || kr_size(pool, dir) < m->nslots * sizeof(*d)) {
		snprintf(why, whylen, "directory %#llx unreadable or short (size %zu): %s",
			 (unsigned long long)dir, kr_size(pool, dir), kr_errmsg());
		return 1;
	}
	for (unsigned i = 0; i < m->nslots; i++) {
		const struct wl_slot *s = &m->slots[i];
		const struct wl_dir_entry *e = &d[i];
		if (!s->size) {
			if (e->oid || e->size) {
				snprintf(why, whylen, "slot %u: holds {%#llx, %llu}, model: empty", i,
					 (unsigned long long)e->oid, (unsigned long long)e->size);
				return 1;
			}
			continue;
		}
		if (e->size != s->size || (check_oids && e->oid != s->oid) || !e->oid) {
			snprintf(why, whylen, "slot %u: holds {%#llx, %llu}, model {%#llx, %llu}", i,
				 (unsigned long long)e->oid, (unsigned long long)e->size,
				 (unsigned long long)s->oid, (unsigned long long)s->size);
			return 1;
		}
		size_t sz = kr_size(pool, e->oid);
		uint32_t type = kr_type(pool, e->oid);
		const uint8_t *data = kr_get(pool, e->oid);
		if (!data || sz != s->size || type != m->type_base + i) {
			snprintf(why, whylen,
				 "slot %u: object %#llx: kr_get %p, kr_size %zu (model %llu), "
				 "kr_type %u (expected %u): %s",
				 i, (unsigned long long)e->oid, (const void *)data, sz,
				 (unsigned long long)s->size, type, m->type_base + i, kr_errmsg());
			return 1;
		}
		if (memcmp(data, s->data, s->size) != 0) {
			char what[64];
			snprintf(what, sizeof(what), "slot %u object %#llx", i,
				 (unsigned long long)e->oid);
			first_diff(data, s->data, s->size, why, whylen, what);
			return 1;
		}
	}
	return 0;
}

void wl_load_oids(kr_pool *pool, kr_oid dir, struct wl_model *m)
{
	const struct wl_dir_entry *d = kr_get(pool, dir);
	TU_ASSERT(d, "directory unreadable: %s", kr_errmsg());
	for (unsigned i = 0; i < m->nslots; i++)
		m->slots[i].oid = d[i].oid;
}

size_t wl_dir_oids(kr_pool *pool, kr_oid dir, unsigned nslots, kr_oid *out, size_t cap)
{
	const struct wl_dir_entry *d = kr_get(pool, dir);
	size_t n = 0;
	if (!d)
		return 0;
	for (unsigned i = 0; i < nslots; i++)
		if (d[i].oid && n < cap)
			out[n++] = d[i].oid;
	return n;
}

static int cmp_oid(const void *a, const void *b)
{
	kr_oid x = *(const kr_oid *)a, y = *(const kr_oid *)b;
	return x < y ? -1 : x > y;
}

int wl_check_live(kr_pool *pool, const kr_oid *expected, size_t n, char *why, size_t whylen)
{
	kr_oid *exp = malloc((n + 1) * sizeof(*exp));
	/* A broken iterator may loop: cap the walk well above the expected count. */
	size_t cap = n + 64, seen = 0;
	kr_oid *got = malloc(cap * sizeof(*got));
	int bad = 1;
	TU_ASSERT(exp && got, "out of memory");
	memcpy(exp, expected, n * sizeof(*exp));
	qsort(exp, n, sizeof(*exp), cmp_oid);
	for (size_t i = 1; i < n; i++) {
		if (exp[i] == exp[i - 1]) {
			snprintf(why, whylen, "oid %#llx is referenced twice",
				 (unsigned long long)exp[i]);
			goto out;
		}
	}
	for (kr_oid o = kr_first(pool); o != KR_OID_NULL; o = kr_next(pool, o)) {
		if (seen == cap) {
			snprintf(why, whylen, "iteration visits more than %zu objects (expected %zu)",
				 cap, n);
			goto out;
		}
		if (seen && o <= got[seen - 1]) {
			snprintf(why, whylen, "iteration not in pool order: %#llx after %#llx",
				 (unsigned long long)o, (unsigned long long)got[seen - 1]);
			goto out;
		}
		got[seen++] = o;
	}
	for (size_t i = 0, j = 0; i < n || j < seen;) {
		if (j == seen || (i < n && exp[i] < got[j])) {
			snprintf(why, whylen, "live object %#llx is not visited by kr_first/kr_next",
				 (unsigned long long)exp[i]);
			goto out;
		}
		if (i == n || got[j] < exp[i]) {
			snprintf(why, whylen,
				 "kr_first/kr_next visits %#llx (size %zu) that nothing references: "
				 "leaked object",
				 (unsigned long long)got[j], kr_size(pool, got[j]));
			goto out;
		}
		i++, j++;
	}
	struct kr_pool_stat st;
	int rc = kr_pool_stat(pool, &st);
	if (rc != KR_OK) {
		snprintf(why, whylen, "kr_pool_stat = %d: %s", rc, kr_errmsg());
		goto out;
	}
	if (st.nobjects != n) {
		snprintf(why, whylen, "kr_pool_stat nobjects %llu, expected %zu",
			 (unsigned long long)st.nobjects, n);
		goto out;
	}
	bad = 0;
out:
	free(exp);
	free(got);
	return bad;
}
