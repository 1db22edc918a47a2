#include <stdio.h>
#include <unistd.h>
#include <libpmemobj.h>                              /* keratin-pmemobj's, unchanged code */

POBJ_LAYOUT_BEGIN(counter);
POBJ_LAYOUT_ROOT(counter, struct root);
POBJ_LAYOUT_TOID(counter, struct note);
POBJ_LAYOUT_END(counter);

struct note { unsigned long long run; char text[48]; };
struct root { unsigned long long runs; TOID(struct note) last; };

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "counter.pool";
	PMEMobjpool *pop = access(path, F_OK) == 0
		? pmemobj_open(path, POBJ_LAYOUT_NAME(counter))
		: pmemobj_create(path, POBJ_LAYOUT_NAME(counter), PMEMOBJ_MIN_POOL, 0600);
	if (!pop) {
		fprintf(stderr, "counter: %s\n", pmemobj_errormsg());
		return 1;
	}
	TOID(struct root) root = POBJ_ROOT(pop, struct root);
	TX_BEGIN(pop) {
		TX_ADD(root);                            /* the old bytes are logged ... */
		D_RW(root)->runs++;                      /* ... then stored in place */
		TOID(struct note) n = TX_NEW(struct note);
		D_RW(n)->run = D_RO(root)->runs;
		snprintf(D_RW(n)->text, sizeof(D_RW(n)->text), "written by run %llu", D_RO(root)->runs);
		TX_FREE(D_RO(root)->last);
		D_RW(root)->last = n;
	} TX_ONABORT {                                   /* nothing of it reached the pool */
		fprintf(stderr, "counter: %s\n", pmemobj_errormsg());
	} TX_END                                         /* committed: checksums and parity follow */
	printf("runs: %llu, last note: %s\n", D_RO(root)->runs, D_RO(D_RO(root)->last)->text);
	pmemobj_close(pop);
	return 0;
}
