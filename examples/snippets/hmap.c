#include <stdio.h>
#include <keratin_hmap.h>

static int fail(const char *what)
{
	fprintf(stderr, "hmap: %s: %s\n", what, kr_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "sessions.map";
	struct kr_hmap_opts o = KR_HMAP_OPTS_INIT;
	o.size = 16 << 20;
	o.entry_lines = 4;                                   /* 200 bytes of key + value */
	o.flags = KR_HMAP_PROTECT;                           /* CRCs + parity, lazily */
	kr_hmap *h;
	int rc = kr_hmap_create(path, &o, &h);
	if (rc == KR_E_IO_EXISTS)
		rc = kr_hmap_open(path, KR_HMAP_PROTECT, &h);  /* recovers */
	if (rc)
		return fail(path);

	if (kr_hmap_put(h, "alice", 5, "token-1", 7))        /* durable on return */
		return fail("put");
	char v[200];
	size_t n;
	if (kr_hmap_get(h, "alice", 5, v, sizeof(v), &n) != 1)
		return fail("get");

	kr_hmap_tx *tx;                                      /* up to 255 changes */
	if (kr_hmap_tx_begin(h, &tx))
		return fail("begin");
	if (kr_hmap_tx_del(tx, "alice", 5) || kr_hmap_tx_put(tx, "bob", 3, "token-2", 7)) {
		kr_hmap_tx_abort(tx);
		return fail("transaction");
	}
	if (kr_hmap_tx_commit(tx))                           /* all or nothing, one fence */
		return fail("commit");
	printf("%llu key(s)\n", (unsigned long long)kr_hmap_count(h));
	return kr_hmap_close(h) ? fail("close") : 0;
}
