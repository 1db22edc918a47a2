/*
 * test_verify.c - what opening a large object for writing verifies, once the object has
 * block checksums in DRAM (obj/vcache.c): the bytes the transaction reads, and only those.
 *
 * A 64 KiB object is opened once (verified whole), then one byte of it is scribbled in the
 * mapping (no parity patch, no checksum patch: a stray store). Then:
 *   - in_range: kr_tx_add of a range that holds the byte hands out the object's committed
 *     bytes, repaired from parity (csum_repairs + 1), never the scribbled one;
 *   - whole_read: kr_tx_add elsewhere, then kr_tx_get (which reads every byte) repairs it;
 *   - elsewhere: a transaction that adds and commits a range in another block does not look
 *     at the byte, and its checksum and parity patches leave the damage detectable and
 *     repairable: kr_pool_check reports the object, KR_CHECK_REPAIR gives back the byte,
 *     and the committed change survives.
 * And the same object with a media error instead (emulated poison on the page of that
 * byte: the page loses its content and faults when touched):
 *   - media_in_range: the range that holds the byte reads the committed bytes, the page
 *     rebuilt from parity by the fault (media_repairs + 1), and its blocks then verify
 *     against the DRAM checksums (no checksum repair);
 *   - media_elsewhere: a commit in another block leaves the page poisoned and untouched;
 *     kr_pool_check reads it, which rebuilds it, and finds nothing wrong.
 * Full protection only (object checksums and parity).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define SIZE (64u << 10)
#define AT 40000u /* the scribbled byte: block 39, far from offset 0 */

static kr_pool *g_pool;
static uint8_t g_want[SIZE];

static uint64_t csum_repairs(void)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(g_pool, &st));
	return st.csum_repairs;
}

static uint64_t media_repairs(void)
{
	struct kr_pool_stat st;
	TU_OK(kr_pool_stat(g_pool, &st));
	return st.media_repairs;
}

/* A fresh filled object, then opened once for writing (verified whole: block checksums). */
static kr_oid object(uint64_t seed)
{
	kr_tx *tx;
	kr_oid oid;
	tu_fill(g_want, SIZE, seed);
	TU_OK(kr_tx_begin(g_pool, &tx));
	TU_OK(kr_tx_alloc(tx, SIZE, 1, &oid));
	uint8_t *p = kr_tx_open(tx, oid);
	TU_ASSERT(p != NULL, "kr_tx_open of a fresh object: %s", kr_errmsg());
	memcpy(p, g_want, SIZE);
	TU_OK(kr_tx_commit(tx));
	TU_OK(kr_update(g_pool, oid, 0, "abcdefgh", 8));
	memcpy(g_want, "abcdefgh", 8);
	return oid;
}

static void scribble(kr_oid oid)
{
	((uint8_t *)kr_pool_base(g_pool))[oid + AT] ^= 0x5a;
}

static void expect_object(kr_oid oid, const char *when)
{
	const uint8_t *p = kr_get(g_pool, oid);
	TU_ASSERT(p != NULL, "%s: kr_get: %s", when, kr_errmsg());
	for (uint32_t i = 0; i < SIZE; i++)
		TU_ASSERT(p[i] == g_want[i], "%s: byte %u is 0x%02x, want 0x%02x", when, i, p[i],
			  g_want[i]);
}

static void expect_sound(const char *when)
{
	struct kr_check_report rep = {0};
	TU_ASSERT(kr_pool_check(g_pool, 0, &rep) == KR_OK, "%s: kr_pool_check finds %llu bad objects",
		  when, (unsigned long long)rep.bad_objects);
}

/* Adds [AT - 8, AT + 8): it must read the committed bytes, the damage repaired first. */
static void add_across(kr_oid oid, const char *when)
{
	uint64_t r0 = csum_repairs();
	kr_tx *tx;
	TU_OK(kr_tx_begin(g_pool, &tx));
	uint8_t *p = kr_tx_add(tx, oid, AT - 8, 16);
	TU_ASSERT(p != NULL, "%s: kr_tx_add: %s", when, kr_errmsg());
	TU_ASSERT(memcmp(p, g_want + AT - 8, 16) == 0, "%s: the range reads the scribbled byte", when);
	p[0] ^= 1;
	g_want[AT - 8] ^= 1;
	TU_OK(kr_tx_commit(tx));
	TU_ASSERT(csum_repairs() == r0 + 1, "%s: %llu repairs, want 1", when,
		  (unsigned long long)(csum_repairs() - r0));
	expect_object(oid, when);
	expect_sound(when);
}

static void in_range(void)
{
	kr_oid oid = object(1);
	scribble(oid);
	add_across(oid, "in_range");
}

static void whole_read(void)
{
	kr_oid oid = object(3);
	scribble(oid);
	uint64_t r0 = csum_repairs();
	kr_tx *tx;
	TU_OK(kr_tx_begin(g_pool, &tx));
	uint8_t *p = kr_tx_add(tx, oid, 0, 8);
	TU_ASSERT(p != NULL, "whole_read: kr_tx_add: %s", kr_errmsg());
	TU_ASSERT(csum_repairs() == r0, "whole_read: the damage is outside the added range");
	const uint8_t *all = kr_tx_get(tx, oid);
	TU_ASSERT(all != NULL, "whole_read: kr_tx_get: %s", kr_errmsg());
	TU_ASSERT(all[AT] == g_want[AT], "whole_read: kr_tx_get reads the scribbled byte");
	TU_ASSERT(csum_repairs() == r0 + 1, "whole_read: kr_tx_get did not repair");
	kr_tx_abort(tx);
	expect_object(oid, "whole_read");
}

static void elsewhere(void)
{
	kr_oid oid = object(4);
	scribble(oid);
	TU_OK(kr_update(g_pool, oid, 100, "ABCDEFGH", 8));
	memcpy(g_want + 100, "ABCDEFGH", 8);
	struct kr_check_report rep = {0};
	TU_ASSERT(kr_pool_check(g_pool, 0, &rep) == KR_E_CORRUPT && rep.bad_objects == 1,
		  "elsewhere: kr_pool_check finds %llu bad objects, want 1",
		  (unsigned long long)rep.bad_objects);
	memset(&rep, 0, sizeof(rep));
	TU_ASSERT(kr_pool_check(g_pool, KR_CHECK_REPAIR, &rep) == KR_OK,
		  "elsewhere: repair left %llu unrepairable", (unsigned long long)rep.unrepairable);
	expect_object(oid, "elsewhere");
	expect_sound("elsewhere");
}

static void poison(kr_oid oid)
{
	TU_OK(kr_inject_poison(g_pool, (oid + AT) & ~(uint64_t)4095));
}

static void media_in_range(void)
{
	kr_oid oid = object(5);
	poison(oid);
	uint64_t m0 = media_repairs(), c0 = csum_repairs();
	kr_tx *tx;
	TU_OK(kr_tx_begin(g_pool, &tx));
	uint8_t *p = kr_tx_add(tx, oid, AT - 8, 16);
	TU_ASSERT(p != NULL, "media_in_range: kr_tx_add: %s", kr_errmsg());
	TU_ASSERT(memcmp(p, g_want + AT - 8, 16) == 0, "media_in_range: the range reads lost bytes");
	p[0] ^= 1;
	g_want[AT - 8] ^= 1;
	TU_OK(kr_tx_commit(tx));
	TU_ASSERT(media_repairs() == m0 + 1, "media_in_range: %llu pages repaired, want 1",
		  (unsigned long long)(media_repairs() - m0));
	TU_ASSERT(csum_repairs() == c0, "media_in_range: the rebuilt page failed its block "
		  "checksums (%llu checksum repairs)", (unsigned long long)(csum_repairs() - c0));
	expect_object(oid, "media_in_range");
	expect_sound("media_in_range");
}

static void media_elsewhere(void)
{
	kr_oid oid = object(6);
	poison(oid);
	uint64_t m0 = media_repairs();
	TU_OK(kr_update(g_pool, oid, 100, "ABCDEFGH", 8));
	memcpy(g_want + 100, "ABCDEFGH", 8);
	TU_ASSERT(media_repairs() == m0, "media_elsewhere: a commit in another block touched "
		  "the poisoned page");
	expect_sound("media_elsewhere");
	TU_ASSERT(media_repairs() == m0 + 1, "media_elsewhere: kr_pool_check repaired %llu pages, "
		  "want 1", (unsigned long long)(media_repairs() - m0));
	expect_object(oid, "media_elsewhere");
}

int main(void)
{
	if (tu_protection() != KR_PROTECT_FULL) {
		printf("SKIP: needs object checksums and parity (full protection)\n");
		return 77;
	}
	char path[128];
	tu_pool_path(path, sizeof(path), "verify");
	TU_OK(tu_create(path, 32ull << 20, 0, 0, 0, &g_pool));
	in_range();
	whole_read();
	elsewhere();
	media_in_range();
	media_elsewhere();
	TU_DEEP_CHECK(g_pool, "end");
	TU_OK(kr_pool_close(g_pool));
	printf("verify: 5 cases passed\n");
	TU_END_CHECK_ALL("test_verify");
	unlink(path);
	return 0;
}
