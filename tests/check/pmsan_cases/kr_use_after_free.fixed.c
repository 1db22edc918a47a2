/*
 * kr_use_after_free.fixed.c - kr_use_after_free.bug.c with each object's byte read
 * before the transaction that frees it, in the plain pool and in the debug-mode one.
 */
#include <keratin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OBJ_SIZE 100

static void die(const char *what)
{
	fprintf(stderr, "case: %s failed: %s\n", what, kr_errmsg());
	exit(2);
}

static kr_pool *make_pool(const char *path, unsigned flags)
{
	struct kr_create_opts o = KR_CREATE_OPTS_INIT;
	o.size = 16u << 20;
	o.flags = KR_OPEN_FORCE_PMEM | flags;
	kr_pool *pool;
	unlink(path);
	if (kr_pool_create(path, &o, &pool))
		die("kr_pool_create");
	return pool;
}

/* A committed object of OBJ_SIZE bytes of `fill`. */
static kr_oid make_obj(kr_pool *pool, char fill)
{
	kr_tx *tx;
	kr_oid oid;
	if (kr_tx_begin(pool, &tx) || kr_tx_alloc(tx, OBJ_SIZE, 1, &oid))
		die("kr_tx_alloc");
	memset(kr_tx_open(tx, oid), fill, OBJ_SIZE);
	if (kr_tx_commit(tx))
		die("kr_tx_commit");
	return oid;
}

/* Makes an object and frees it, returning its byte 5 read before the free (its oid in
 * *oid); *sum gathers the reads that are allowed: of the object after an aborted free, and
 * after a free whose commit failed (freeing it twice is the transaction's sticky error). */
static char stale(kr_pool *pool, kr_oid *oid, unsigned *sum)
{
	kr_tx *tx;
	kr_oid a = *oid = make_obj(pool, 'a');
	const char *p = kr_get(pool, a);
	char c = p[5]; /* read while the object lives */
	if (kr_tx_begin(pool, &tx) || kr_tx_free(tx, a))
		die("kr_tx_free");
	kr_tx_abort(tx);
	*sum += p[1];
	if (kr_tx_begin(pool, &tx) || kr_tx_free(tx, a))
		die("kr_tx_free");
	if (kr_tx_free(tx, a) == 0 || kr_tx_commit(tx) == 0)
		die("a double free's commit failing");
	*sum += p[2];
	if (kr_tx_begin(pool, &tx) || kr_tx_free(tx, a) || kr_tx_commit(tx))
		die("kr_tx_free");
	return c;
}

/* Allocates until a new object lies where the freed one `gone` lay (keratin reuses a block
 * once its free is durable; a pool not in debug mode holds none back), and reads it
 * through kr_tx_get, whose pointer is kr_get's: the object is live again. */
static void reuse(kr_pool *pool, kr_oid gone, unsigned *sum)
{
	kr_tx *tx;
	for (int i = 0; make_obj(pool, 'b') != gone; i++)
		if (i == 1000)
			die("reusing a freed block");
	if (kr_tx_begin(pool, &tx))
		die("kr_tx_begin");
	const char *q = kr_tx_get(tx, gone);
	*sum += q[3];
	kr_tx_abort(tx);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s POOLFILE\n", argv[0]);
		return 2;
	}
	char debug_path[4096];
	snprintf(debug_path, sizeof(debug_path), "%s.debug", argv[1]);
	kr_pool *plain = make_pool(argv[1], 0), *debug = make_pool(debug_path, KR_OPEN_DEBUG);
	unsigned sum = 0;
	kr_oid a, d_oid;
	char p = stale(plain, &a, &sum), d = stale(debug, &d_oid, &sum);
	sum += p;
	sum += d;
	reuse(plain, a, &sum);
	printf("%u\n", sum);
	kr_pool_close(plain);
	kr_pool_close(debug);
	unlink(debug_path);
	return 0;
}
