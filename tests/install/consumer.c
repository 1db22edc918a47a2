/*
 * consumer.c - a program built against an installed keratin (tests/install/run.sh builds it
 * once with pkg-config and once with find_package(keratin)): it creates a pool, commits a
 * map insert and reads it back after a reopen, using only the installed headers and the
 * shared libraries. Exit 0 and "ok" when all of that worked.
 */
#include <stdio.h>
#include <unistd.h>

#include <keratin.h>
#include <keratin_map.h>

static int fail(const char *what)
{
	fprintf(stderr, "consumer: %s: %s\n", what, kr_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: consumer POOL\n");
		return 2;
	}
	const char *path = argv[1];
	struct kr_create_opts co = {.struct_size = sizeof(co), .size = 8 << 20,
				    .flags = KR_OPEN_FORCE_PMEM};
	kr_pool *pool;
	kr_oid root, desc;
	kr_map *m;
	uint64_t v = 0;

	unlink(path);
	if (kr_pool_create(path, &co, &pool))
		return fail("create");
	if (kr_root(pool, sizeof(kr_oid), &root) || kr_map_create(pool, NULL, KR_MAP_BTREE, &desc) ||
	    kr_update(pool, root, 0, &desc, sizeof(desc)))
		return fail("root and map");
	if (kr_map_open(pool, desc, &m) || kr_map_insert(m, NULL, 7, 49) < 0)
		return fail("insert");
	kr_map_close(m);
	if (kr_pool_close(pool) || kr_pool_open(path, KR_OPEN_FORCE_PMEM, &pool))
		return fail("reopen");
	desc = *KR_GET(pool, root, kr_oid);
	if (kr_map_open(pool, desc, &m) || kr_map_lookup(m, NULL, 7, &v) != 1 || v != 49)
		return fail("lookup after reopen");
	kr_map_close(m);
	if (kr_pool_close(pool))
		return fail("close");
	unlink(path);
	printf("ok\n");
	return 0;
}
