/*
 * dlopen.c - keratin's libraries load with dlopen(3), after the program has started.
 *
 * Bindings of other languages (a Python extension, a plugin) load a library late, and
 * glibc then has only a small reserve of static TLS for it, about 1.7 KB shared by every
 * library loaded so. keratin's libraries reach their thread-locals through the
 * initial-exec model (one instruction instead of a call), so their whole TLS block must
 * fit that reserve: a block that outgrows it fails to load ("cannot allocate memory in
 * static TLS block"), which looks harmless from a program linked at startup. So this test
 * loads each library late and uses it: libkeratin (an error message, in a buffer outside
 * TLS) and libkeratin-pmemobj (a pool created, its error message read, closed); and it
 * holds each library's TLS block to TLS_BUDGET bytes, well inside the reserve so that
 * other such libraries fit beside them.
 *
 * Usage: dlopen LIBKERATIN LIBKERATIN_PMEMOBJ POOL_PATH
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#define TLS_BUDGET 1024

/* The size of the TLS block (PT_TLS) of the loaded library whose path ends as `name`. */
struct tls_find {
	const char *name;
	long size; /* -1: not loaded */
};

static int tls_of(struct dl_phdr_info *info, size_t n, void *ctx)
{
	struct tls_find *f = ctx;
	const char *slash = strrchr(info->dlpi_name, '/');
	if (strcmp(slash ? slash + 1 : info->dlpi_name, f->name) != 0)
		return 0;
	f->size = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			f->size = (long)info->dlpi_phdr[i].p_memsz;
	return 1;
}

static void tls_budget(const char *path)
{
	const char *slash = strrchr(path, '/');
	struct tls_find f = {slash ? slash + 1 : path, -1};
	dl_iterate_phdr(tls_of, &f);
	if (f.size < 0 || f.size > TLS_BUDGET) {
		printf("FAIL: %s: TLS block of %ld bytes (budget %d): move large thread-local "
		       "buffers out of TLS (src/base/err.c)\n", f.name, f.size, TLS_BUDGET);
		exit(1);
	}
	printf("ok: %s: TLS block of %ld bytes (budget %d)\n", f.name, f.size, TLS_BUDGET);
}

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
	tls_budget(argv[1]);

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
	tls_budget(argv[2]);
	unlink(argv[3]);
	return 0;
}
