/*
 * test_protect.c - debug protection (KERATIN_DEBUG_PROTECT=1, or with the argument "flag"
 * KR_OPEN_DEBUG in the flags of create and open): kr_get hands out a read-only view of the
 * pool, keratin keeps working through its own mapping, and a stray store through a kr_get
 * pointer is stopped and named (object, offset) on stderr.
 *
 * Steps: protected, create a pool, commit a 100-byte object, read it through
 * kr_get (a different address than the library's own mapping), change it with kr_update
 * and see the change through the view. A forked child then stores into byte 42 through
 * the kr_get pointer: it must die of the fault (under a sanitizer, of the sanitizer's
 * report of it), its stderr must name the object and offset 42, and the byte must be
 * unchanged (the pool is MAP_SHARED: a store that landed would show in the parent). The
 * control, without the variable or the flag: the same store from a child lands, so the
 * check above can fail. Last, the pool reopens protected with the committed bytes intact.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define OBJ_SIZE 100
#define STRAY_OFF 42

static void stray_store(void *p) { ((volatile char *)p)[STRAY_OFF] = 'x'; }

/* Runs a child that stores 'x' at p[STRAY_OFF]; returns its wait status, its stderr in
 * err (NUL-terminated). */
static int stray_store_child(const char *p, char *err, size_t cap)
{
	return tu_run_child(stray_store, (void *)p, err, cap);
}

static int status_probe; /* an address in no pool */
static int by_flag; /* the mode from KR_OPEN_DEBUG, not from the environment */

/* Creates (create) or opens the pool at path protected. */
static int protected_pool(const char *path, int create, kr_pool **pool)
{
	if (!by_flag) {
		setenv("KERATIN_DEBUG_PROTECT", "1", 1);
		return create ? tu_create(path, 16u << 20, 0, 0, 0, pool) : tu_open(path, pool);
	}
	if (!create)
		return kr_pool_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_DEBUG, pool);
	struct kr_create_opts o = KR_CREATE_OPTS_INIT;
	o.size = 16u << 20;
	o.flags = KR_OPEN_FORCE_PMEM | KR_OPEN_DEBUG;
	o.protection = tu_protection();
	return kr_pool_create(path, &o, pool);
}

int main(int argc, char **argv)
{
	char path[128], err[4096], want[128];
	kr_pool *pool;
	kr_tx *tx;
	kr_oid oid;

	by_flag = argc > 1 && strcmp(argv[1], "flag") == 0;
	unsetenv("KERATIN_DEBUG_PROTECT");
	tu_pool_path(path, sizeof(path), "protect");
	TU_OK(protected_pool(path, 1, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, OBJ_SIZE, 7, &oid));
	char *buf = kr_tx_open(tx, oid);
	TU_ASSERT(buf != NULL, "kr_tx_open: %s", kr_errmsg());
	memset(buf, 'a', OBJ_SIZE);
	TU_OK(kr_tx_commit(tx));

	const char *p = kr_get(pool, oid);
	TU_ASSERT(p != NULL && p[0] == 'a' && p[OBJ_SIZE - 1] == 'a', "kr_get reads the object");
	TU_ASSERT(p != (const char *)kr_pool_base(pool) + oid, "kr_get points into a separate view");
	TU_ASSERT(kr_pool_offset(pool, p + 5) == oid + 5 &&
		  kr_pool_offset(pool, (const char *)kr_pool_base(pool) + oid) == oid,
		  "kr_pool_offset of a pointer into either mapping");
	TU_ASSERT(kr_pool_offset(pool, &status_probe) == UINT64_MAX &&
		  kr_errcode() == KR_E_MISUSE_ARG, "kr_pool_offset of a pointer outside the pool");
	TU_OK(kr_update(pool, oid, 10, "zz", 2));
	TU_ASSERT(p[10] == 'z' && p[11] == 'z', "an update shows through the view");

	int status = stray_store_child(p, err, sizeof(err));
	if (tu_sanitized())
		TU_ASSERT(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0),
			  "the stray store must stop the child (status %#x)", status);
	else
		TU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
			  "the stray store must kill the child with SIGSEGV (status %#x)", status);
	snprintf(want, sizeof(want), "stray store to object 0x%llx + %d (of %d bytes)",
		 (unsigned long long)oid, STRAY_OFF, OBJ_SIZE);
	TU_ASSERT(strstr(err, want) != NULL, "stderr names the object: want '%s', got '%s'", want,
		  err);
	TU_ASSERT(p[STRAY_OFF] == 'a', "the stray store did not land");
	printf("ok   protected: a store through kr_get stopped and named: %s", strstr(err, "keratin:"));
	TU_OK(kr_pool_close(pool));

	/* Control: unprotected, the same store lands. */
	unsetenv("KERATIN_DEBUG_PROTECT");
	TU_OK(tu_open(path, &pool));
	p = kr_get(pool, oid);
	TU_ASSERT(p == (const char *)kr_pool_base(pool) + oid, "unprotected, kr_get is the mapping");
	TU_ASSERT(kr_pool_offset(pool, p) == oid, "kr_pool_offset, unprotected");
	status = stray_store_child(p, err, sizeof(err));
	TU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprotected, the child lives");
	TU_ASSERT(p[STRAY_OFF] == 'x', "unprotected, the store lands");
	printf("ok   unprotected: the same store lands (the check above can fail)\n");
	TU_OK(kr_update(pool, oid, STRAY_OFF, "a", 1)); /* put the byte back, checksum too */
	TU_OK(kr_pool_close(pool));

	TU_OK(protected_pool(path, 0, &pool));
	p = kr_get(pool, oid);
	TU_ASSERT(p != NULL && p[0] == 'a' && p[10] == 'z' && p[STRAY_OFF] == 'a' &&
			  p[OBJ_SIZE - 1] == 'a',
		  "reopened protected, the object is intact");
	TU_OK(kr_pool_close(pool));
	printf("ok   reopened protected: the committed bytes are intact\n");
	TU_END_CHECK_ALL("test_protect");
	return 0;
}
