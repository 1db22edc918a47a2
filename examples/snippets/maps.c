#include <stdio.h>
#include <keratin_map.h>

static int fail(const char *what)
{
	fprintf(stderr, "maps: %s: %s\n", what, kr_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "maps.pool";
	struct kr_create_opts opts = KR_CREATE_OPTS_INIT;
	opts.size = 64 << 20;
	kr_pool *pool;
	int rc = kr_pool_create(path, &opts, &pool);
	if (rc == KR_E_IO_EXISTS)
		rc = kr_pool_open(path, 0, &pool);
	kr_oid root;
	if (rc || kr_root(pool, sizeof(kr_oid), &root))
		return fail(path);

	kr_oid desc = *KR_GET(pool, root, kr_oid);           /* the map, kept in the root object */
	if (desc == KR_OID_NULL &&
	    (kr_map_create(pool, NULL, KR_MAP_BTREE, &desc) ||
	     kr_update(pool, root, 0, &desc, sizeof(desc))))
		return fail("create the map");
	kr_map *m;
	if (kr_map_open(pool, desc, &m))
		return fail("open the map");
	if (kr_map_insert(m, NULL, 42, 4200) < 0)            /* one transaction, one fence */
		return fail("insert");

	kr_tx *tx;                                           /* or several changes, all or none */
	if (kr_tx_begin(pool, &tx))
		return fail("begin");
	if (kr_map_remove(m, tx, 42, NULL) < 0 || kr_map_insert(m, tx, 43, 4300) < 0) {
		kr_tx_abort(tx);                             /* a failed change: abort it all */
		return fail("change");
	}
	if (kr_tx_commit(tx))
		return fail("commit");

	uint64_t v;
	if (kr_map_lookup(m, NULL, 43, &v) != 1 || kr_map_lookup(m, NULL, 42, NULL) != 0)
		return fail("lookup");
	printf("43 -> %llu, %llu keys\n", (unsigned long long)v, (unsigned long long)kr_map_count(m));
	kr_map_close(m);
	return kr_pool_close(pool) ? fail("close") : 0;
}
