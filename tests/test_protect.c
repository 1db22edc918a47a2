/*
 * test_protect.c - debug protection (KERATIN_DEBUG_PROTECT=1): kr_get hands out a
 * read-only view of the pool, keratin keeps working through its own mapping, and a stray
 * store through a kr_get pointer is stopped and named (object, offset) on stderr.
 *
 * Steps: with the variable set, create a pool, commit a 100-byte object, read it through
 * kr_get (a different address than the library's own mapping), change it with kr_update
 * and see the change through the view. A forked child then stores into byte 42 through
 * the kr_get pointer: it must die of the fault (under a sanitizer, of the sanitizer's
 * report of it), its stderr must name the object and offset 42, and the byte must be
 * unchanged (the pool is MAP_SHARED: a store that landed would show in the parent). The
 * control, without the variable: the same store from a child lands, so the check above
 * can fail. Last, the pool reopens protected with the committed bytes intact.
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

/* Runs a child that stores 'x' at p[STRAY_OFF]; returns its wait status, its stderr in
 * err (NUL-terminated). */
static int stray_store_child(const char *p, char *err, size_t cap)
{
	int fds[2];
	TU_ASSERT(pipe(fds) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		((volatile char *)p)[STRAY_OFF] = 'x';
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fds[0], err + n, cap - n - 1)) > 0)
		n += (size_t)r;
	err[n] = 0;
	close(fds[0]);
	int status;
	TU_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
	return status;
}

int main(void)
{
	char path[128], err[4096], want[128];
	kr_pool *pool;
	kr_tx *tx;
	kr_oid oid;

	setenv("KERATIN_DEBUG_PROTECT", "1", 1);
	tu_pool_path(path, sizeof(path), "protect");
	TU_OK(tu_create(path, 16u << 20, 0, 0, 0, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, OBJ_SIZE, 7, &oid));
	char *buf = kr_tx_open(tx, oid);
	TU_ASSERT(buf != NULL, "kr_tx_open: %s", kr_errmsg());
	memset(buf, 'a', OBJ_SIZE);
	TU_OK(kr_tx_commit(tx));

	const char *p = kr_get(pool, oid);
	TU_ASSERT(p != NULL && p[0] == 'a' && p[OBJ_SIZE - 1] == 'a', "kr_get reads the object");
	TU_ASSERT(p != (const char *)kr_pool_base(pool) + oid, "kr_get points into a separate view");
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
	status = stray_store_child(p, err, sizeof(err));
	TU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprotected, the child lives");
	TU_ASSERT(p[STRAY_OFF] == 'x', "unprotected, the store lands");
	printf("ok   unprotected: the same store lands (the check above can fail)\n");
	TU_OK(kr_update(pool, oid, STRAY_OFF, "a", 1)); /* put the byte back, checksum too */
	TU_OK(kr_pool_close(pool));

	setenv("KERATIN_DEBUG_PROTECT", "1", 1);
	TU_OK(tu_open(path, &pool));
	p = kr_get(pool, oid);
	TU_ASSERT(p != NULL && p[0] == 'a' && p[10] == 'z' && p[STRAY_OFF] == 'a' &&
			  p[OBJ_SIZE - 1] == 'a',
		  "reopened protected, the object is intact");
	TU_OK(kr_pool_close(pool));
	printf("ok   reopened protected: the committed bytes are intact\n");
	TU_END_CHECK_ALL("test_protect");
	return 0;
}
