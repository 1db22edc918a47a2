/*
 * workload.h - the random transaction workload shared by test_crash, test_kill and
 * test_threads, with its DRAM reference model.
 *
 * A "directory" object in the pool holds nslots entries {oid, size}. Each transaction
 * touches 1..max_ops distinct slots: allocate an object (random log-uniform size, some
 * ranges filled with random bytes) into an empty slot, overwrite random sub-ranges of an
 * existing object through kr_tx_add, free it, or replace it (free + alloc). The model maps
 * slot -> (oid, size, bytes).
 *
 * Generation is split from execution so that a process that cannot see the pool can still
 * compute the model: wl_plan_gen() draws a plan from the PRNG and the model's occupancy and
 * sizes only (never from oids or contents), wl_model_apply() applies a plan to a model, and
 * wl_exec() runs a plan against a pool while building the model it should produce. Given
 * the same seed and starting model, a parent that only dry-runs plans and a child that
 * executes them arrive at the same model.
 */
#ifndef KR_WORKLOAD_H
#define KR_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keratin.h"
#include "testutil.h"

#define WL_MAX_OPS 4
#define WL_MAX_RANGES 3

/* In-pool layout of one directory slot. */
struct wl_dir_entry {
	uint64_t oid;
	uint64_t size;
};

struct wl_params {
	unsigned nslots;   /* directory entries */
	uint32_t min_size; /* object sizes are log-uniform in [min_size, max_size] */
	uint32_t max_size;
	unsigned max_ops;   /* slots touched per transaction: 1..max_ops (<= WL_MAX_OPS) */
	unsigned abort_pct; /* percentage of transactions that end in kr_tx_abort */
	uint32_t type_base; /* objects of slot i get type number type_base + i */
};

enum wl_kind { WL_ALLOC = 1, WL_WRITE, WL_FREE, WL_REPLACE };

struct wl_range {
	uint32_t off, len;
	uint64_t seed; /* the bytes written are tu_fill(len, seed) */
};

struct wl_op {
	enum wl_kind kind;
	unsigned slot;
	uint32_t size; /* ALLOC/REPLACE: size of the new object */
	bool whole;    /* use kr_tx_open (whole object) instead of kr_tx_add for range 0 */
	bool tx_get;   /* afterwards, compare kr_tx_get()'s view of the object with the model */
	unsigned nranges;
	struct wl_range r[WL_MAX_RANGES];
};

struct wl_plan {
	unsigned nops;
	bool abort;
	struct wl_op ops[WL_MAX_OPS];
};

struct wl_slot {
	kr_oid oid; /* 0 when unknown (a dry-run model) or empty */
	uint64_t size; /* 0 = empty slot */
	uint8_t *data;
};

struct wl_model {
	unsigned nslots;
	uint32_t type_base;
	struct wl_slot *slots;
};

void wl_model_init(struct wl_model *m, unsigned nslots, uint32_t type_base);
void wl_model_free(struct wl_model *m);
/* Deep copy; dst must be initialised (it is freed first) or zeroed. */
void wl_model_copy(struct wl_model *dst, const struct wl_model *src);
/* Applies a committing plan to the model in place (new objects get oid 0). */
void wl_model_apply(struct wl_model *m, const struct wl_plan *plan);
/* Number of occupied slots. */
unsigned wl_model_live(const struct wl_model *m);

void wl_plan_gen(struct tu_rng *rng, const struct wl_params *p, const struct wl_model *m,
		 struct wl_plan *plan);

/* Advances a dry-run by one committed transaction: draws plans (applying nothing for the
 * ones that abort) until one commits and applies it. */
void wl_dry_commit(struct tu_rng *rng, const struct wl_params *p, struct wl_model *m);

/* Execution state of one workload against one directory object. */
struct wl_ctx {
	kr_pool *pool;
	kr_oid dir;
	struct wl_params p;
	struct wl_model model;   /* the state after every transaction that committed */
	struct wl_model pending; /* during wl_exec: model + the transaction being run */
	volatile int in_commit;  /* 1 while kr_tx_commit() of `pending` runs */
	uint64_t commits;        /* kr_tx_commit() calls that returned KR_OK */
	uint64_t aborts;
};

/* Allocates the directory object in a transaction of its own, zero-filled, and sets up
 * ctx with an empty model. Returns the directory oid through ctx->dir. */
void wl_ctx_init(struct wl_ctx *c, kr_pool *pool, kr_oid dir, const struct wl_params *p);
void wl_ctx_free(struct wl_ctx *c);
/* Runs the plan against the pool. Every mismatch between what the library hands back and
 * the model (micro-buffer contents, kr_tx_get views) and every error fails the test. */
void wl_exec(struct wl_ctx *c, const struct wl_plan *plan);

/* Compares the pool's directory and objects with the model. check_oids: also require the
 * model's oids (a dry-run model has none). Returns 0 if equal, else 1 with a reason. */
int wl_verify(kr_pool *pool, kr_oid dir, const struct wl_model *m, bool check_oids, char *why,
	      size_t whylen);
/* Copies the directory's oids into the model (after a dry run matched the pool). */
void wl_load_oids(kr_pool *pool, kr_oid dir, struct wl_model *m);
/* Appends the non-null oids of the directory to out (capacity cap); returns the count. */
size_t wl_dir_oids(kr_pool *pool, kr_oid dir, unsigned nslots, kr_oid *out, size_t cap);
/* Checks that kr_first/kr_next visits exactly the oids in expected (any order given; the
 * iteration itself must be strictly increasing) and that kr_pool_stat's nobjects agrees.
 * Returns 0 if so, else 1 with a reason. */
int wl_check_live(kr_pool *pool, const kr_oid *expected, size_t n, char *why, size_t whylen);

#endif
