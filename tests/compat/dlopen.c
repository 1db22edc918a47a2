/*
 * dlopen.c - keratin's libraries load with dlopen(3), after the program has started.
 *
 * Bindings of other languages (a Python extension, a plugin) load a library late, and
 * glibc then has only a small reserve of static TLS for it: a library whose thread-local
 * variables use the initial-exec model, or whose TLS block outgrows the reserve, fails to
 * load ("cannot allocate memory in static TLS block"). Such a change looks harmless from a
 * program linked at startup, so this test loads each library late and uses it: libkeratin
 * (an error message through its thread-local buffer) and libkeratin-pmemobj (a pool
 * created, its error message read, closed).
 *
 * Usage: dlopen LIBKERATIN LIBKERATIN_PMEMOBJ POOL_PATH
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("FAIL: dlopen %s: %s\n", path, dlerror());
		exit(1);
	}
	return h;
}

static void *sym(void *h, const char *name)
{
	void *f = dlsym(h, name);
	if (!f) {
		printf("FAIL: dlsym %s: %s\n", name, dlerror());
		exit(1);
	}
	return f;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s LIBKERATIN LIBKERATIN_PMEMOBJ POOL_PATH\n", argv[0]);
		return 2;
	}
	void *kr = load(argv[1]);
	int (*pool_open)(const char *, unsigned, void **) =
		(int (*)(const char *, unsigned, void **))sym(kr, "kr_pool_open");
	const char *(*kr_errmsg)(void) = (const char *(*)(void))sym(kr, "kr_errmsg");
	void *pool;
	if (pool_open("/nonexistent/keratin-dlopen", 0, &pool) == 0 || !kr_errmsg()[0]) {
		printf("FAIL: libkeratin: opening a missing pool gave no error message\n");
		return 1;
	}
	printf("ok: libkeratin loaded late; a missing pool: %s\n", kr_errmsg());

	void *po = load(argv[2]);
	void *(*create)(const char *, const char *, size_t, unsigned) =
		(void *(*)(const char *, const char *, size_t, unsigned))sym(po, "pmemobj_create");
	void (*close_pool)(void *) = (void (*)(void *))sym(po, "pmemobj_close");
	const char *(*errormsg)(void) = (const char *(*)(void))sym(po, "pmemobj_errormsg");
	unlink(argv[3]);
	void *pop = create(argv[3], "dlopen", 16 << 20, 0600);
	if (!pop) {
		printf("FAIL: pmemobj_create %s: %s\n", argv[3], errormsg());
		return 1;
	}
	close_pool(pop);
	if (create(argv[3], "dlopen", 16 << 20, 0600) || !errormsg()[0]) {
		printf("FAIL: creating over an existing pool gave no error message\n");
		return 1;
	}
	printf("ok: libkeratin-pmemobj loaded late; a pool made; creating it again: %s\n", errormsg());
	unlink(argv[3]);
	return 0;
}
