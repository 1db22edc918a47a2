/*
 * test_scrub_copies.c - the pool check and scrubber cover the metadata copies too: a
 * header copy or a root line damaged while the pool is open is found by kr_pool_check,
 * left alone without KR_CHECK_REPAIR, and rewritten from its sound twin with it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "testutil.h"

#define P 4096u

static void damage_found_and_repaired(const char *tag, uint64_t (*where)(const struct kr_pool_hdr *))
{
	char path[128];
	tu_pool_path(path, sizeof(path), tag);
	struct kr_create_opts o = {.struct_size = sizeof(o), .size = 16u << 20};
	kr_pool *pool;
	TU_OK(kr_pool_create(path, &o, &pool));
	struct kr_pool_hdr h;
	tu_pread(path, &h, sizeof(h), 0);
	uint64_t off = where(&h);
	tu_flip_byte(path, off); /* through the file, behind the open pool's back */

	struct kr_check_report rep = {0};
	int rc = kr_pool_check(pool, 0, &rep);
	TU_ASSERT(rc == KR_E_CORRUPT && rep.bad_copies == 1 && rep.first_bad_off == off / P * P,
		  "%s at %#llx: check rc %d, %llu bad copies, first bad %#llx", tag,
		  (unsigned long long)off, rc, (unsigned long long)rep.bad_copies,
		  (unsigned long long)rep.first_bad_off);
	struct kr_check_report rep2 = {0};
	TU_OK(kr_pool_check(pool, KR_CHECK_REPAIR, &rep2));
	TU_ASSERT(rep2.bad_copies == 1 && rep2.repaired_copies == 1, "%s: repair: %llu bad, %llu "
		  "repaired", tag, (unsigned long long)rep2.bad_copies,
		  (unsigned long long)rep2.repaired_copies);
	struct kr_check_report rep3 = {0};
	TU_OK(kr_pool_check(pool, 0, &rep3));
	TU_ASSERT(rep3.bad_copies == 0, "%s: sound after repair", tag);
	TU_OK(kr_pool_close(pool));
	unlink(path);
	printf("scrub copies %s: found at %#llx and repaired\n", tag, (unsigned long long)off);
}

static uint64_t header_b(const struct kr_pool_hdr *h) { return h->pool_size - P + 16; }
static uint64_t root_line_1(const struct kr_pool_hdr *h) { return h->ctl_replica_off + 8; }

int main(void)
{
	damage_found_and_repaired("copies-hdr-branch-region", header_b);
	damage_found_and_repaired("copies-root-branch-region", root_line_1);
	printf("test_scrub_copies: ok\n");
	TU_END_CHECK_ALL("test_scrub_copies");
	return 0;
}
