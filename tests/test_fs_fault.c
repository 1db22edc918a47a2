/*
 * test_fs_fault.c - type-aware fault injection into keratin-fs, one case per structure kind
 * and fault, with an outcome table next to NOVA-Fortis's matrix.
 *
 * A pool is populated through the model (tests/fsmodel.c) plus a few known files: "f" (three
 * data pages and an extended attribute), "big" (enough small writes for a log of several
 * pages), a directory "d", and at the end a snapshot "snap".
 * For every case the pristine image is copied, the fault is injected into the copy's bytes
 * (found by parsing the format: src/fs/fs_layout.h), and the copy is mounted. The outcome is
 *   corrected - the mount or the read repaired it: the tree equals the model and
 *               kr_fs_check finds nothing (a repair was counted);
 *   detected  - the damaged inode or page fails cleanly (-EIO, or mount refuses with the
 *               documented code), everything else equals the model;
 *   WRONG     - any wrong byte or attribute returned: the test fails.
 * Each case states the outcome it requires; the table prints both. Then an inspection mount
 * (KR_FS_MOUNT_CHECK) of a damaged pool must report the damage without changing the file,
 * and kr_fs_scrub must repair damage made while mounted and name the file and offset of
 * what it cannot repair.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fs_layout.h"
#include "fsmodel.h"
#include "keratin_fs.h"
#include "testutil.h"

static char g_path[128], g_img[128];
static uint8_t *g_pristine;
static size_t g_len;
static struct krfs_super g_sb;
static struct fm g_model;
static uint64_t g_f, g_big, g_d; /* inode numbers of f, big, d */
static uint64_t g_snap_id;        /* snapshot "snap", made last */
static uint8_t g_fdata[3 * 4096];

/* ---- building the pool ------------------------------------------------------------------- */
static void step(kr_fs *fs, struct fm_op *op)
{
	char why[512];
	if (fm_step(fs, &g_model, op, NULL, why, sizeof(why)) != 0)
		TU_FAIL("populating: %s", why);
}

static uint32_t id_of(uint64_t dir_id, const char *name)
{
	const struct fm_inode *d = &g_model.v[dir_id];
	for (unsigned i = 0; i < d->ndents; i++)
		if (strcmp(d->dents[i].name, name) == 0)
			return d->dents[i].id;
	TU_FAIL("no model name %s", name);
}

static void populate(void)
{
	tu_pool_path(g_path, sizeof(g_path), "fs-fault");
	tu_pool_path(g_img, sizeof(g_img), "fs-fault-img");
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 4 << 20, .ninodes = 64,
				    .meta_bytes = 128 * 4096, .open_flags = KR_OPEN_FORCE_PMEM};
	TU_OK(kr_fs_mkfs(g_path, &o));
	kr_fs *fs = fm_mount_new(g_path, &g_model);
	struct fm_op op = {.kind = FM_CREATE, .a = 1, .mode = 0644};
	strcpy(op.name, "f");
	step(fs, &op);
	op = (struct fm_op){.kind = FM_WRITE, .a = id_of(1, "f"), .off = 0, .len = sizeof(g_fdata), .seed = 11};
	step(fs, &op);
	tu_fill(g_fdata, sizeof(g_fdata), 11);
	op = (struct fm_op){.kind = FM_SETXATTR, .a = id_of(1, "f"), .len = 100, .seed = 12};
	strcpy(op.name, "user.tag");
	step(fs, &op);
	op = (struct fm_op){.kind = FM_CREATE, .a = 1, .mode = 0600};
	strcpy(op.name, "big");
	step(fs, &op);
	for (unsigned i = 0; i < 150; i++) { /* 150 FILE_WRITE entries: a log of three pages */
		op = (struct fm_op){.kind = FM_WRITE, .a = id_of(1, "big"), .off = i * 4096, .len = 4096, .seed = i};
		step(fs, &op);
	}
	op = (struct fm_op){.kind = FM_MKDIR, .a = 1, .mode = 0755};
	strcpy(op.name, "d");
	step(fs, &op);
	struct fm_params p;
	fm_params_default(&p);
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("fs-fault", 3));
	for (unsigned i = 0; i < 150; i++) { /* the rest of the tree, not touching f/big/d */
		fm_gen(&r, &g_model, &p, &op);
		if (op.kind == FM_RENAME || op.kind == FM_UNLINK || op.kind == FM_RMDIR || op.kind == FM_TRUNCATE ||
		    op.kind == FM_WRITE || op.kind == FM_LINK || op.kind == FM_SETATTR)
			continue;
		step(fs, &op);
	}
	op = (struct fm_op){.kind = FM_SNAPSHOT};
	strcpy(op.name, "snap");
	step(fs, &op);
	struct kr_fs_snapshot_attr sa;
	TU_OK(kr_fs_snapshot_lookup(fs, "snap", &sa));
	g_snap_id = sa.id;
	g_f = g_model.v[id_of(1, "f")].fsino;
	g_big = g_model.v[id_of(1, "big")].fsino;
	g_d = g_model.v[id_of(1, "d")].fsino;
	TU_OK(kr_fs_unmount(fs));
	g_pristine = tu_read_file(g_path, &g_len);
	memcpy(&g_sb, g_pristine, sizeof(g_sb));
}

/* ---- finding structures in the pristine image ---------------------------------------------- */
static uint64_t twin(uint64_t off) { return off + g_sb.replica_off - 4096; }
static uint64_t slot_off(uint64_t ino) { return g_sb.itab_off + ino * 128; }
static const struct krfs_pinode *slot(uint64_t ino) { return (const void *)(g_pristine + slot_off(ino)); }
static uint64_t log_head(uint64_t ino) { return slot(ino)->log_head; }

/* The data page (pool offset) holding file page pg of f: its FILE_WRITE follows SET_ATTR
 * and LINK_CHANGE in f's log. */
static uint64_t f_page(unsigned pg)
{
	const struct krfs_e_write *w = (const void *)(g_pristine + log_head(g_f) + 72 + 48);
	TU_ASSERT(w->h.type == KRFS_E_FILE_WRITE && w->npages == 3, "f's log is not as expected");
	return w->block + pg * 4096ull;
}

static uint64_t data_index(uint64_t off) { return (off - g_sb.data_off) / 4096; }

/* f's XATTR entry: after SET_ATTR, LINK_CHANGE and the FILE_WRITE of its three pages. */
static uint64_t f_xattr(void)
{
	uint64_t off = log_head(g_f) + 72 + 48 + 64;
	TU_ASSERT(g_pristine[off] == KRFS_E_XATTR, "f's log is not as expected");
	return off;
}

/* The first page of snapshot "snap"'s image (its page tail names the owner). */
static uint64_t snap_page(void)
{
	for (uint64_t pg = g_sb.meta_off; pg < g_sb.csum_a_off; pg += 4096) {
		const struct krfs_page_tail *t = (const void *)(g_pristine + pg + KRFS_LOG_TAIL_OFF);
		if (t->self == pg && t->ino == (KRFS_SNAP_OWNER | g_snap_id) && t->seq == 0)
			return pg;
	}
	TU_FAIL("no image page of the snapshot");
}

/* ---- injecting and judging --------------------------------------------------------------------- */
enum outcome { CORRECTED, DETECTED };
static const char *outcome_name[] = {"corrected", "detected (clean EIO / refused)"};

struct result {
	const char *structure, *fault, *seed;
	enum outcome want, got;
};
static struct result g_results[64];
static unsigned g_nresults;

static void fresh(void) { tu_write_file(g_img, g_pristine, g_len); }

static void scribble(uint64_t off, size_t n, uint64_t seed)
{
	uint8_t buf[4096];
	tu_pread(g_img, buf, n, off);
	uint8_t x[4096];
	tu_fill(x, n, seed);
	for (size_t i = 0; i < n; i++)
		buf[i] ^= x[i] | 1; /* every byte changes */
	tu_pwrite(g_img, buf, n, off);
}

/* Mounts the damaged copy and classifies what happened. */
static enum outcome judge(const char *what, int want_mount_rc)
{
	kr_fs *fs;
	int rc = kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs);
	if (rc != KR_OK) {
		TU_ASSERT(rc == want_mount_rc, "%s: mount gave %d (%s), expected %d", what, rc, kr_errmsg(), want_mount_rc);
		return DETECTED;
	}
	TU_ASSERT(want_mount_rc == KR_OK, "%s: mount worked, expected code %d", what, want_mount_rc);
	char why[512];
	enum outcome o = CORRECTED;
	/* Every file compared with the model: either equal, or failing with -EIO only. */
	if (fm_compare(fs, &g_model, why, sizeof(why)) != 0) {
		o = DETECTED;
		TU_ASSERT(strstr(why, " -5") != NULL, "%s: the file system differs from the model in a way that is not -EIO: %s",
			  what, why);
		/* The damage must be reported, not silent: the read of f or the getattr fails. */
		uint8_t buf[sizeof(g_fdata)];
		ssize_t n = kr_fs_read(fs, g_f, buf, sizeof(buf), 0);
		TU_ASSERT(n == -EIO || n < 0 || (n == (ssize_t)sizeof(buf) && memcmp(buf, g_fdata, sizeof(buf)) == 0),
			  "%s: f read %zd bytes that are wrong", what, n);
	} else {
		struct kr_fs_statfs st;
		struct kr_fs_check_report rep;
		TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
		TU_ASSERT(st.repairs > 0, "%s: corrected, but no repair was counted", what);
		TU_ASSERT(kr_fs_check(fs, stderr, &rep) == KR_OK, "%s: after repair kr_fs_check finds %llu problems", what,
			  (unsigned long long)rep.problems);
	}
	TU_OK(kr_fs_unmount(fs));
	return o;
}

static void record(const char *structure, const char *fault, const char *seed, enum outcome want, enum outcome got)
{
	TU_ASSERT(got == want, "%s / %s: %s, expected %s", structure, fault, outcome_name[got], outcome_name[want]);
	g_results[g_nresults++] = (struct result){structure, fault, seed, want, got};
}

/* One copy of a metadata structure scribbled (n bytes at off), then the other copy: each
 * copy is judged by its own check and the bad one rewritten from the good (both bad: the
 * cases below), log entries and page tails included; this
 * checks invariants fs_meta.c 2, fs_meta.c 3, fs_log.c 3 */
static void meta_case(const char *structure, uint64_t off, size_t n)
{
	fresh();
	scribble(off, n, off);
	record(structure, "scribble, primary", "corrected from replica", CORRECTED, judge(structure, KR_OK));
	fresh();
	scribble(twin(off), n, off + 1);
	record(structure, "scribble, replica", "corrected from primary", CORRECTED, judge(structure, KR_OK));
}

/* Reads f while mounted and requires its bytes or -EIO. */
static enum outcome read_f(const char *what)
{
	kr_fs *fs;
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs));
	uint8_t buf[sizeof(g_fdata)];
	ssize_t n = kr_fs_read(fs, g_f, buf, sizeof(buf), 0);
	enum outcome o;
	if (n == -EIO) {
		o = DETECTED;
	} else {
		TU_ASSERT(n == (ssize_t)sizeof(buf) && memcmp(buf, g_fdata, sizeof(buf)) == 0, "%s: read of f gave wrong bytes (%zd)",
			  what, n);
		o = CORRECTED;
		struct kr_fs_check_report rep;
		TU_ASSERT(kr_fs_check(fs, NULL, &rep) == KR_OK, "%s: kr_fs_check after the read's repair: %llu problems",
			  what, (unsigned long long)rep.problems);
	}
	TU_OK(kr_fs_unmount(fs));
	return o;
}

static void data_case(const char *fault, const char *seed, enum outcome want, void (*inject)(void))
{
	fresh();
	inject();
	record("data page", fault, seed, want, read_f(fault));
}

static void inj_strip(void) { scribble(f_page(1) + 3 * 512 + 17, 1, 1); }
static void inj_poison(void) { scribble(f_page(1) + 5 * 512, 512, 2); }
static void inj_csum_a(void) { scribble(g_sb.csum_a_off + data_index(f_page(2)) * 32 + 8, 4, 3); }
static void inj_csum_b(void) { scribble(g_sb.csum_b_off + data_index(f_page(2)) * 32 + 8, 4, 4); }
static void inj_straddle(void) { scribble(f_page(0) + 2 * 512 + 300, 400, 5); }
static void inj_two_strips(void)
{
	scribble(f_page(0) + 1 * 512, 8, 6);
	scribble(f_page(0) + 6 * 512, 8, 7);
}
static void inj_strip_and_parity(void)
{
	scribble(f_page(2) + 4 * 512, 8, 8);
	scribble(g_sb.parity_off + data_index(f_page(2)) * 512 + 100, 8, 9);
}

static void parity_case(void)
{
	fresh();
	scribble(g_sb.parity_off + data_index(f_page(1)) * 512, 16, 10);
	kr_fs *fs;
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs));
	uint8_t buf[sizeof(g_fdata)];
	TU_ASSERT(kr_fs_read(fs, g_f, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) && memcmp(buf, g_fdata, sizeof(buf)) == 0,
		  "a damaged parity strip must not disturb reads");
	struct kr_fs_check_report rep;
	TU_ASSERT(kr_fs_check(fs, NULL, &rep) == KR_E_CORRUPT && rep.problems == 1, "kr_fs_check reports the parity strip");
	TU_OK(kr_fs_unmount(fs));
	record("parity strip", "scribble", "not checked (silent)", DETECTED, DETECTED);
}

/* An inspection mount of a damaged pool reports the damage and writes nothing. */
static void check_mount_case(void)
{
	fresh();
	scribble(slot_off(g_f) + 40, 8, 21);
	scribble(f_page(0) + 100, 4, 22);
	size_t len;
	uint8_t *before = tu_read_file(g_img, &len);
	kr_fs *fs;
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM | KR_FS_MOUNT_CHECK, &fs));
	struct kr_fs_check_report rep;
	FILE *devnull = fopen("/dev/null", "w");
	TU_ASSERT(kr_fs_check(fs, devnull, &rep) == KR_E_CORRUPT && rep.problems == 2,
		  "check mount: %llu problems (want the slot, repaired by the mount, and the data strip)",
		  (unsigned long long)rep.problems);
	fclose(devnull);
	TU_OK(kr_fs_unmount(fs));
	uint8_t *after = tu_read_file(g_img, &len);
	TU_ASSERT(memcmp(before, after, len) == 0, "an inspection mount changed the pool file");
	free(before);
	free(after);
	record("(inspection mount)", "slot + strip damaged", "-", DETECTED, DETECTED);
}

/* Damage made while mounted (metadata is not read again until a scrub): the scrubber
 * repairs one bad copy of anything and reports by path what it cannot repair. */
static void scrub_case(void)
{
	fresh();
	kr_fs *fs;
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs));
	scribble(slot_off(g_big) + 40, 8, 31);                 /* one copy of a slot */
	scribble(twin(log_head(g_f)) + 30, 4, 32);             /* the replica of a log entry */
	scribble(g_sb.parity_off + data_index(f_page(1)) * 512, 8, 33); /* a parity strip */
	scribble(f_page(2) + 700, 8, 34);                     /* a data strip */
	struct kr_fs_scrub_report rep;
	TU_OK(kr_fs_scrub(fs, stderr, &rep));
	TU_ASSERT(rep.repaired == 4 && rep.unrepairable == 0, "scrub: %llu repaired, %llu lost",
		  (unsigned long long)rep.repaired, (unsigned long long)rep.unrepairable);
	struct kr_fs_check_report crep;
	TU_OK(kr_fs_check(fs, stderr, &crep));
	char why[512];
	TU_ASSERT(fm_compare(fs, &g_model, why, sizeof(why)) == 0, "after scrub: %s", why);
	/* Now damage that cannot be repaired: two strips of f's first page. */
	scribble(f_page(0) + 10, 8, 35);
	scribble(f_page(0) + 3000, 8, 36);
	char *text = NULL;
	size_t textlen = 0;
	FILE *mem = open_memstream(&text, &textlen);
	TU_ASSERT(kr_fs_scrub(fs, mem, &rep) == KR_E_CORRUPT && rep.unrepairable == 1, "scrub of a lost page");
	fclose(mem);
	TU_ASSERT(strstr(text, "/f (inode") && strstr(text, "offset 0:"), "the report names the file and offset: %s", text);
	free(text);
	TU_OK(kr_fs_unmount(fs));
	record("(scrub while mounted)", "slot, log entry, parity, strip", "no scrubbing", CORRECTED, CORRECTED);
	record("(scrub while mounted)", "two strips of one page", "no scrubbing", DETECTED, DETECTED);
}

/* One copy of the tail of big's last log page damaged while mounted (a scribble of its
 * seq), then appends to big until its log takes new pages: each link is made, the appends
 * read back after a remount, whose walk repairs the copy, and nothing else is lost. (A
 * debug build compared a new page's seq with that copy and aborted.) */
static void tail_case(void)
{
	fresh();
	uint64_t last = log_head(g_big);
	for (;;) {
		const struct krfs_page_tail *t = (const void *)(g_pristine + last + KRFS_LOG_TAIL_OFF);
		uint64_t next = t->next & KRFS_WORD_VALUE_MASK;
		if (!next)
			break;
		last = next;
	}
	kr_fs *fs;
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs));
	scribble(last + KRFS_LOG_TAIL_OFF + offsetof(struct krfs_page_tail, seq), 4, 37);
	uint8_t b[16];
	for (unsigned i = 0; i < 300; i++) {
		tu_fill(b, sizeof(b), 100 + i);
		TU_ASSERT(kr_fs_write(fs, g_big, b, sizeof(b), 16 * (i % 8)) == sizeof(b), "append %u: %s", i,
			  kr_errmsg());
	}
	TU_OK(kr_fs_unmount(fs));
	TU_OK(kr_fs_mount(g_img, KR_OPEN_FORCE_PMEM, &fs));
	uint8_t got[16];
	for (unsigned i = 292; i < 300; i++) {
		tu_fill(b, sizeof(b), 100 + i);
		TU_ASSERT(kr_fs_read(fs, g_big, got, sizeof(got), 16 * (i % 8)) == sizeof(got) &&
				  memcmp(got, b, sizeof(b)) == 0,
			  "big's bytes at %u after the remount", 16 * (i % 8));
	}
	TU_OK(kr_fs_check(fs, stderr, NULL));
	TU_OK(kr_fs_unmount(fs));
}

/* ---- scribble sweep ---------------------------------------------------------------------------
 * Scribbles of 8 bytes to 3 MiB at random places of a filled 4 MiB pool whose dead zone is
 * just over 1 MiB; each damaged copy is mounted and its metadata (every name and attribute)
 * compared with the model. Metadata is lost only if one scribble covers the same byte of
 * both copies, which needs at least the dead zone (the copies are the meta zone plus the
 * dead zone apart, so here the first losses appear at 3 MiB): below the dead zone, no
 * scribble may lose any. */
static void bar_sweep(void)
{
	char path[128], img[128], why[512];
	tu_pool_path(path, sizeof(path), "fs-bar");
	tu_pool_path(img, sizeof(img), "fs-bar-img");
	struct kr_fs_mkfs_opts o = {.struct_size = sizeof(o), .size = 4 << 20, .ninodes = 64,
				    .meta_bytes = 370 * 4096, .open_flags = KR_OPEN_FORCE_PMEM};
	TU_OK(kr_fs_mkfs(path, &o));
	struct fm m;
	kr_fs *fs = fm_mount_new(path, &m);
	struct fm_params p;
	fm_params_default(&p);
	p.names = 30;
	struct tu_rng r;
	tu_rng_seed(&r, tu_seed("fs-bar", 17));
	fm_random(fs, &m, &p, &r, 400);
	struct kr_fs_statfs st;
	TU_ASSERT(kr_fs_statfs(fs, &st) == 0, "statfs");
	uint64_t dead = st.dead_zone;
	TU_OK(kr_fs_unmount(fs));
	m.meta_only = true;
	size_t len;
	uint8_t *pristine = tu_read_file(path, &len);
	static const uint64_t sizes[] = {8, 64, 512, 4096, 65536, 512 << 10, 1000 << 10, 2 << 20, 3 << 20};
	unsigned rounds = tu_scaled(24, 8);
	printf("scribble sweep (dead zone %llu bytes, %u scribbles per size):\n%10s %18s %14s\n",
	       (unsigned long long)dead, rounds, "bytes", "metadata lost", "mounts refused");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned lost = 0, refused = 0;
		for (unsigned i = 0; i < rounds; i++) {
			uint64_t n = sizes[k], off = tu_rng_below(&r, len - n);
			uint8_t *bad = malloc(len);
			memcpy(bad, pristine, len);
			tu_fill(bad + off, n, tu_rng_next(&r));
			tu_write_file(img, bad, len);
			free(bad);
			int rc = kr_fs_mount(img, KR_OPEN_FORCE_PMEM, &fs);
			if (rc != KR_OK) {
				TU_ASSERT(tu_known_err(rc), "unknown mount error %d", rc);
				refused++;
				lost++;
				continue;
			}
			lost += fm_compare(fs, &m, why, sizeof(why)) != 0;
			TU_OK(kr_fs_unmount(fs));
		}
		printf("%10llu %18u %14u\n", (unsigned long long)sizes[k], lost, refused);
		TU_ASSERT(sizes[k] >= dead || lost == 0, "a %llu-byte scribble (below the dead zone) lost metadata",
			  (unsigned long long)sizes[k]);
	}
	free(pristine);
	fm_free(&m);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "bar") == 0) {
		bar_sweep();
		return 0;
	}
	populate();
	const struct krfs_pinode *fi = slot(g_f);
	uint64_t big_head = log_head(g_big);
	const struct krfs_page_tail *bt = (const void *)(g_pristine + big_head + KRFS_LOG_TAIL_OFF);
	TU_ASSERT(bt->next != 0, "big's log has one page only");

	fresh();
	scribble(200, 8, 1);
	record("superblock", "scribble, primary", "corrected from replica", CORRECTED, judge("sb primary", KR_OK));
	fresh();
	scribble(g_len - 4096 + 16, 8, 1);
	record("superblock", "scribble, replica", "corrected from primary", CORRECTED, judge("sb replica", KR_OK));
	fresh();
	scribble(16, 64, 1); /* the magic survives: damage, not a foreign file */
	scribble(g_len - 4096 + 16, 64, 2);
	record("superblock", "both copies", "lost", DETECTED, judge("both superblocks", KR_E_CORRUPT_HEADER));
	meta_case("journal header (idle)", 4096 + 8, 8);
	meta_case("inode slot", slot_off(g_f) + 40, 8);
	meta_case("inode log tail word", slot_off(g_f), 8);
	meta_case("log entry", log_head(g_f) + 30, 4);
	meta_case("log page tail", big_head + KRFS_LOG_TAIL_OFF + 12, 4);
	meta_case("log page next link", big_head + KRFS_LOG_TAIL_OFF, 8);
	meta_case("directory entry", log_head(1) + 120 + 50, 2);
	meta_case("extended attribute entry", f_xattr() + 44, 4);
	meta_case("snapshot image", snap_page() + 30, 4);

	fresh();
	scribble(slot_off(g_f) + 40, 8, 1);
	scribble(twin(slot_off(g_f)) + 40, 8, 2);
	record("inode slot", "both copies", "lost (EIO)", DETECTED, judge("both inode copies", KR_OK));
	fresh();
	scribble(log_head(g_big) + 200, 4, 3);
	scribble(twin(log_head(g_big)) + 200, 4, 4);
	record("log entry", "both copies", "lost (EIO)", DETECTED, judge("both log copies", KR_OK));
	fresh();
	scribble(snap_page() + 30, 4, 5);
	scribble(twin(snap_page()) + 30, 4, 6);
	record("snapshot image", "both copies", "lost (EIO)", DETECTED, judge("both image copies", KR_OK));

	data_case("one strip, one byte", "corrected by parity", CORRECTED, inj_strip);
	data_case("one strip lost whole (poison)", "corrected by parity", CORRECTED, inj_poison);
	data_case("CRC copy A", "corrected (CRC rewritten)", CORRECTED, inj_csum_a);
	data_case("CRC copy B", "corrected (CRC rewritten)", CORRECTED, inj_csum_b);
	data_case("400-byte scribble across two strips", "corrected (split point)", CORRECTED, inj_straddle);
	data_case("two strips apart", "EIO", DETECTED, inj_two_strips);
	data_case("strip and parity", "EIO", DETECTED, inj_strip_and_parity);
	parity_case();
	check_mount_case();
	scrub_case();
	tail_case();
	(void)fi;

	printf("%-24s %-38s %-26s %s\n", "structure", "fault", "NOVA-Fortis", "keratin-fs");
	for (unsigned i = 0; i < g_nresults; i++)
		printf("%-24s %-38s %-26s %s\n", g_results[i].structure, g_results[i].fault, g_results[i].seed,
		       g_results[i].structure[0] == 'p' ? "detected by kr_fs_check, reads unaffected"
							 : outcome_name[g_results[i].got]);
	printf("test_fs_fault: %u cases, every outcome as required\n", g_nresults);
	fm_free(&g_model);
	free(g_pristine);
	unlink(g_img); /* holds the last case's damage, by design; the populated pool stays */
	TU_END_CHECK_ALL("test_fs_fault");
	return 0;
}
