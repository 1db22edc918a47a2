#include <stdio.h>
#include <keratin.h>

struct account { uint64_t balance; char owner[56]; };
struct bank { kr_oid accounts[2]; };                     /* the root object */

static int fail(const char *what)
{
	fprintf(stderr, "bank: %s: %s\n", what, kr_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "bank.pool";
	struct kr_create_opts opts = KR_CREATE_OPTS_INIT;
	opts.size = 64 << 20;
	kr_pool *pool;
	int rc = kr_pool_create(path, &opts, &pool);         /* a new pool ... */
	if (rc == KR_E_IO_EXISTS)
		rc = kr_pool_open(path, 0, &pool);           /* ... or the existing one, recovered */
	if (rc)
		return fail(path);

	kr_oid root;                                         /* the pool's entry point */
	if (kr_root(pool, sizeof(struct bank), &root))
		return fail("root");
	const struct bank *bank = KR_GET(pool, root, struct bank);   /* direct, read-only */

	kr_tx *tx;
	if (bank->accounts[0] == KR_OID_NULL) {              /* first run: two accounts */
		if (kr_tx_begin(pool, &tx))
			return fail("begin");
		struct bank *b = KR_TX_OPEN(tx, root, struct bank);
		for (int i = 0; b && i < 2; i++)
			KR_TX_NEW(tx, struct account, 1, &b->accounts[i]);
		if (b) {
			struct account *a = KR_TX_OPEN(tx, b->accounts[0], struct account);
			if (a)
				a->balance = 1000;
		}
		if (kr_tx_commit(tx))                        /* an error above is kept for it */
			return fail("opening the accounts");
	}

	if (kr_tx_begin(pool, &tx))
		return fail("begin");
	uint64_t *from = KR_TX_FIELD(tx, bank->accounts[0], struct account, balance);
	uint64_t *to   = KR_TX_FIELD(tx, bank->accounts[1], struct account, balance);
	if (from && to && *from >= 100) {                    /* NULL after an error */
		*from -= 100;                                /* edits a DRAM micro-buffer */
		*to   += 100;
	}
	if (kr_tx_commit(tx))                                /* both or neither, durable on return */
		return fail("transfer");

	printf("balances: %llu %llu\n",
	       (unsigned long long)KR_GET(pool, bank->accounts[0], struct account)->balance,
	       (unsigned long long)KR_GET(pool, bank->accounts[1], struct account)->balance);
	return kr_pool_close(pool) ? fail("close") : 0;
}
