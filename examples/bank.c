/* bank.c - the README's first example, whole: two accounts, one atomic transfer.
 * Build: cc bank.c $(pkg-config --cflags --libs keratin) -o bank; run: ./bank [POOL] */
#include <stdio.h>
#include <unistd.h>
#include <keratin.h>

struct account { uint64_t balance; char owner[56]; };
struct bank { kr_oid acct[2]; };

static int fail(const char *what)
{
	fprintf(stderr, "bank: %s: %s\n", what, kr_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/shm/bank.pool";
	kr_pool *pool;
	struct kr_create_opts o = {.size = 16 << 20};
	int rc = access(path, F_OK) == 0 ? kr_pool_open(path, 0, &pool) /* recovers after a crash */
					 : kr_pool_create(path, &o, &pool);
	if (rc)
		return fail(path);

	kr_oid root;                                     /* the pool's entry point */
	if ((rc = kr_root(pool, sizeof(struct bank), &root)))
		return fail("root");
	kr_tx *tx;
	const struct bank *b = kr_get(pool, root);      /* direct, read-only pointer */
	if (!b)
		return fail("root");
	if (b->acct[0] == KR_OID_NULL) {                 /* first run: open two accounts */
		if ((rc = kr_tx_begin(pool, &tx)))
			return fail("begin");
		struct bank *nb = KR_TX_OPEN(tx, root, struct bank);
		for (int i = 0; nb && i < 2; i++) {
			uint64_t *balance = NULL;
			if (KR_TX_NEW(tx, struct account, 1, &nb->acct[i]) == KR_OK)
				balance = KR_TX_FIELD(tx, nb->acct[i], struct account, balance);
			if (balance)
				*balance = 1000;
		}
		if ((rc = kr_tx_commit(tx)))             /* errors are sticky: one check */
			return fail("open accounts");
	}

	if ((rc = kr_tx_begin(pool, &tx)))
		return fail("begin");
	uint64_t *from = KR_TX_FIELD(tx, b->acct[0], struct account, balance);
	uint64_t *to = KR_TX_FIELD(tx, b->acct[1], struct account, balance);
	if (from && to) {                                /* edits of DRAM micro-buffers */
		*from -= 100;
		*to += 100;
	}
	if ((rc = kr_tx_commit(tx)))                     /* both or neither, durable on return */
		return fail("transfer");

	const struct account *a0 = kr_get(pool, b->acct[0]), *a1 = kr_get(pool, b->acct[1]);
	if (!a0 || !a1)
		return fail("accounts");
	printf("balances: %llu %llu\n", (unsigned long long)a0->balance,
	       (unsigned long long)a1->balance);
	return kr_pool_close(pool) ? fail("close") : 0;
}
