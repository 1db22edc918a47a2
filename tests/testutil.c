/*
 * testutil.c - implementation of the helpers declared in testutil.h: failure reporting,
 * the PRNG, scaling of iteration counts, /dev/shm pool paths with cleanup at exit, raw
 * file I/O and CRC-32C. Nothing here calls into keratin except the thin create/open
 * wrappers, so tests can use it from forked children and signal-sensitive paths.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "keratin_fs.h"
#include "keratin_hmap.h"
#include "keratin_region.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif

noreturn void tu_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void tu_cmp_at(const char *file, int line, const char *what, long long a, long long b, int eq)
{
	if ((a == b) != eq)
		tu_fail_at(file, line, "%s: %lld vs %lld", what, a, b);
}

int tu_run_cases(const char *group, const struct tu_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		void *state = NULL;
		printf("%s: %s\n", group, cases[i].name);
		fflush(stdout);
		if (cases[i].setup && cases[i].setup(&state) != 0)
			tu_fail_at(__FILE__, __LINE__, "%s: %s: set-up failed", group, cases[i].name);
		cases[i].fn(&state);
		if (cases[i].teardown && cases[i].teardown(&state) != 0)
			tu_fail_at(__FILE__, __LINE__, "%s: %s: tear-down failed", group, cases[i].name);
		printf("%s: %s ok\n", group, cases[i].name);
	}
	printf("%s: %zu cases passed\n", group, n);
	return 0;
}

bool tu_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) ||                        \
	__has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
	return true;
#else
	return false;
#endif
}

unsigned tu_scaled(unsigned base, unsigned min)
{
	double scale = 1.0;
	const char *s = getenv("KR_TEST_SCALE");
	if (s && *s)
		scale = strtod(s, NULL);
	/* A sanitizer build is there for memory and thread errors along the code paths, which
	 * a sweep meets in its first part; the normal build runs every sweep whole, for the
	 * logic. So ASan and TSan run a quarter (their processes start slowly, and the crash
	 * and kill tests start one per image or round). */
	if (tu_sanitized())
		scale *= 0.25;
	double n = base * scale;
	if (!(n >= min)) /* also catches NaN from a garbage variable */
		n = min;
	if (n > 1e9)
		n = 1e9;
	return (unsigned)n;
}

uint64_t tu_seed(const char *test, uint64_t dflt)
{
	uint64_t seed = dflt;
	const char *s = getenv("KR_TEST_SEED");
	if (s && *s)
		seed = strtoull(s, NULL, 0);
	printf("%s: seed %llu (replay with KR_TEST_SEED=%llu)\n", test, (unsigned long long)seed,
	       (unsigned long long)seed);
	fflush(stdout);
	return seed;
}

/* ---- PRNG ------------------------------------------------------------------------------ */

uint64_t tu_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void tu_rng_seed(struct tu_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = tu_splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t tu_rng_next(struct tu_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t tu_rng_below(struct tu_rng *r, uint64_t n)
{
	/* Lemire's multiply-shift; the tiny bias is irrelevant for tests. */
	return (uint64_t)(((unsigned __int128)tu_rng_next(r) * n) >> 64);
}

uint64_t tu_rng_range(struct tu_rng *r, uint64_t lo, uint64_t hi)
{
	return lo + tu_rng_below(r, hi - lo + 1);
}

uint64_t tu_rng_logu(struct tu_rng *r, uint64_t lo, uint64_t hi)
{
	/* Integer-only so that every machine draws the same sequence: pick a power-of-two band
	 * uniformly, then a value uniformly inside it, rejecting values outside [lo, hi]. */
	unsigned blo = 63 - __builtin_clzll(lo), bhi = 63 - __builtin_clzll(hi);
	for (;;) {
		unsigned b = blo + (unsigned)tu_rng_below(r, bhi - blo + 1);
		uint64_t v = (1ull << b) + tu_rng_below(r, 1ull << b);
		if (v >= lo && v <= hi)
			return v;
	}
}

bool tu_rng_chance(struct tu_rng *r, unsigned num, unsigned den)
{
	return tu_rng_below(r, den) < num;
}

void tu_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t st = seed;
	while (len >= 8) {
		uint64_t v = tu_splitmix64(&st);
		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = tu_splitmix64(&st);
		memcpy(p, &v, len);
	}
}

/* ---- pool paths ------------------------------------------------------------------------ */

#define TU_MAX_PATHS 256
static char *tu_paths[TU_MAX_PATHS];
static pid_t tu_paths_pid[TU_MAX_PATHS];
static unsigned tu_npaths, tu_path_seq;
static pthread_mutex_t tu_paths_lock = PTHREAD_MUTEX_INITIALIZER;
static bool tu_atexit_done;

void tu_cleanup_paths(void)
{
	pthread_mutex_lock(&tu_paths_lock);
	for (unsigned i = 0; i < tu_npaths; i++) {
		/* A forked child that exits normally must not delete its parent's pools. */
		if (tu_paths[i] && tu_paths_pid[i] == getpid()) {
			unlink(tu_paths[i]);
			char side[300]; /* a protected region's default sidecar */
			snprintf(side, sizeof(side), "%s.krs", tu_paths[i]);
			unlink(side);
			free(tu_paths[i]);
			tu_paths[i] = NULL;
		}
	}
	pthread_mutex_unlock(&tu_paths_lock);
}

const char *tu_pool_dir(void)
{
	const char *d = getenv("KR_TEST_DIR");
	return d && *d ? d : "/dev/shm";
}

void tu_pool_path(char *buf, size_t n, const char *tag)
{
	pthread_mutex_lock(&tu_paths_lock);
	snprintf(buf, n, "%s/kr-%s-%d-%u.pool", tu_pool_dir(), tag, (int)getpid(), tu_path_seq++);
	unlink(buf);
	if (!tu_atexit_done) {
		atexit(tu_cleanup_paths);
		tu_atexit_done = true;
	}
	if (tu_npaths < TU_MAX_PATHS) {
		tu_paths[tu_npaths] = strdup(buf);
		tu_paths_pid[tu_npaths] = getpid();
		tu_npaths++;
	}
	pthread_mutex_unlock(&tu_paths_lock);
}

unsigned tu_protection(void)
{
	static const char *const names[] = {[KR_PROTECT_FULL] = "full", [KR_PROTECT_NONE] = "none",
					    [KR_PROTECT_ML] = "ml", [KR_PROTECT_MLP] = "mlp"};
	const char *e = getenv("KR_TEST_PROTECTION");
	for (unsigned i = 0; e && *e && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(e, names[i]) == 0)
			return i;
	if (e && *e)
		TU_FAIL("KR_TEST_PROTECTION=%s: expected none, ml, mlp or full", e);
	return KR_PROTECT_FULL;
}

unsigned tu_map_flags(void)
{
	const char *v = getenv("KR_TEST_PAGECACHE");
	return v && v[0] == '1' ? 0 : KR_OPEN_FORCE_PMEM;
}

int tu_create(const char *path, uint64_t size, uint32_t rows, uint32_t nlanes, uint32_t lane_kib,
	      kr_pool **pool)
{
	struct kr_create_opts o = {
		.struct_size = sizeof(o), .size = size,
		.rows = rows,
		.nlanes = nlanes,
		.lane_kib = lane_kib,
		.flags = tu_map_flags(),
		.protection = tu_protection(),
	};
	return kr_pool_create(path, &o, pool);
}

int tu_open(const char *path, kr_pool **pool)
{
	return kr_pool_open(path, tu_map_flags(), pool);
}

kr_pool *tu_pool_with_object(const char *path, uint64_t pool_size, uint32_t rows, size_t size, kr_oid *oid)
{
	kr_pool *pool;
	kr_tx *tx;
	TU_OK(tu_create(path, pool_size, rows, 0, 0, &pool));
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 1, oid));
	memset(kr_tx_open(tx, *oid), 0x11, size);
	TU_OK(kr_tx_commit(tx));
	return pool;
}

kr_oid tu_alloc_zeros(kr_pool *pool, size_t size)
{
	kr_tx *tx;
	kr_oid oid;
	TU_OK(kr_tx_begin(pool, &tx));
	TU_OK(kr_tx_alloc(tx, size, 7, &oid));
	TU_OK(kr_tx_commit(tx));
	const uint8_t *p = kr_get(pool, oid);
	TU_ASSERT(p, "kr_get: %s", kr_errmsg());
	for (size_t i = 0; i < size; i++)
		TU_ASSERT(p[i] == 0, "a new %zu-byte object has %#x at byte %zu", size, p[i], i);
	return oid;
}

/* ---- the deep check ---------------------------------------------------------------------- */

static _Atomic unsigned deep_checks;

int tu_deep_check(kr_pool *pool, char *why, size_t whylen)
{
	struct kr_deep_report rep = KR_DEEP_REPORT_INIT;
	int rc = kr_pool_check_deep(pool, &rep);
	deep_checks++;
	if (rc == KR_OK)
		return 0;
	const struct kr_check_report *c = &rep.check;
	snprintf(why, whylen,
		 "deep check: %d %s (objects %llu/%llu bad, chunk records %llu/%llu bad, parity "
		 "columns %llu/%llu disagree, copies %llu/%llu bad; %llu invariant violations)",
		 rc, kr_errmsg(), (unsigned long long)c->bad_objects, (unsigned long long)c->objects,
		 (unsigned long long)c->bad_chunks, (unsigned long long)c->chunks,
		 (unsigned long long)c->bad_columns, (unsigned long long)c->columns,
		 (unsigned long long)c->bad_copies, (unsigned long long)c->copies,
		 (unsigned long long)rep.problems);
	return 1;
}

void tu_deep_check_at(const char *file, int line, kr_pool *pool, const char *when)
{
	char why[512];
	if (tu_deep_check(pool, why, sizeof(why)) != 0)
		tu_fail_at(file, line, "%s: %s", when, why);
}

void tu_deep_check_file_at(const char *file, int line, const char *path, const char *when)
{
	kr_pool *pool;
	int rc = kr_pool_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &pool);
	if (rc != KR_OK)
		tu_fail_at(file, line, "%s: %s does not open read-only for the deep check: %s", when,
			   path, kr_errmsg());
	tu_deep_check_at(file, line, pool, when);
	TU_OK(kr_pool_close(pool));
}

unsigned tu_deep_checks(void)
{
	return deep_checks;
}

/* The region check of a data file and its sidecar, opened offline and read-only (a crashed
 * session is judged, not recovered): every page CRC and stripe parity. */
static int region_end_check(const char *path, const char *side, char *why, size_t whylen)
{
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.sidecar = side;
	o.flags = KR_REGION_OFFLINE | KR_REGION_NO_CREATE | KR_REGION_READONLY;
	kr_region *r;
	int rc = kr_region_open(path, &o, &r, NULL, NULL);
	if (rc != KR_OK) {
		snprintf(why, whylen, "region open (offline, read-only): %d %s", rc, kr_errmsg());
		return 1;
	}
	struct kr_region_report rep;
	rc = kr_region_check(r, 0, 0, KR_REGION_CHECK_PARITY, &rep);
	if (rc != KR_OK)
		snprintf(why, whylen, "region check: %d %s (%llu of %llu pages bad, %llu stripes checked)",
			 rc, kr_errmsg(), (unsigned long long)rep.pages_bad,
			 (unsigned long long)rep.pages_checked, (unsigned long long)rep.stripes_checked);
	int crc = kr_region_close(r);
	if (rc == KR_OK && crc != KR_OK)
		snprintf(why, whylen, "region close: %d %s", crc, kr_errmsg());
	return rc != KR_OK || crc != KR_OK;
}

/* kr_fs_check on an inspection mount (a private copy: nothing reaches the file); the repairs
 * that mount had to make count as problems. */
static int fs_end_check(const char *path, char *why, size_t whylen)
{
	kr_fs *fs;
	int rc = kr_fs_mount(path, KR_OPEN_FORCE_PMEM | KR_FS_MOUNT_CHECK, &fs);
	if (rc != KR_OK) {
		snprintf(why, whylen, "inspection mount: %d %s", rc, kr_errmsg());
		return 1;
	}
	struct kr_fs_check_report rep;
	rc = kr_fs_check(fs, stderr, &rep);
	if (rc != KR_OK)
		snprintf(why, whylen, "kr_fs_check: %d %s (%llu problems; %llu inodes, %llu data pages)", rc,
			 kr_errmsg(), (unsigned long long)rep.problems, (unsigned long long)rep.inodes,
			 (unsigned long long)rep.data_pages);
	int urc = kr_fs_unmount(fs);
	if (rc == KR_OK && urc != KR_OK)
		snprintf(why, whylen, "unmount of the inspection mount: %d %s", urc, kr_errmsg());
	return rc != KR_OK || urc != KR_OK;
}

/* A map opens read-only (recovering in a private view) and, if it keeps a sidecar, passes
 * the region check of its pages. */
static int hmap_end_check(const char *path, const char *side, char *why, size_t whylen)
{
	bool protected_map = access(side, F_OK) == 0;
	kr_hmap *m;
	int rc = kr_hmap_open(path, KR_OPEN_READONLY | KR_OPEN_FORCE_PMEM | (protected_map ? KR_HMAP_PROTECT : 0), &m);
	if (rc != KR_OK) {
		snprintf(why, whylen, "read-only map open: %d %s", rc, kr_errmsg());
		return 1;
	}
	TU_OK(kr_hmap_close(m));
	return protected_map ? region_end_check(path, side, why, whylen) : 0;
}

int tu_end_check(const char *path, char *why, size_t whylen)
{
	enum kr_file_kind kind;
	int rc = kr_file_kind(path, &kind);
	if (rc != KR_OK) {
		snprintf(why, whylen, "kr_file_kind: %d %s", rc, kr_errmsg());
		return 1;
	}
	char side[4200];
	snprintf(side, sizeof(side), "%s.krs", path);
	kr_pool *pool;
	int bad = 0;
	switch (kind) {
	case KR_FILE_POOL:
		rc = kr_pool_open(path, KR_OPEN_FORCE_PMEM | KR_OPEN_READONLY, &pool);
		if (rc != KR_OK) {
			snprintf(why, whylen, "read-only pool open: %d %s", rc, kr_errmsg());
			return 1;
		}
		bad = tu_deep_check(pool, why, whylen);
		TU_OK(kr_pool_close(pool));
		return bad;
	case KR_FILE_FS:
		bad = fs_end_check(path, why, whylen);
		break;
	case KR_FILE_HMAP:
		bad = hmap_end_check(path, side, why, whylen);
		break;
	case KR_FILE_REGION:
		bad = region_end_check(path, side, why, whylen);
		break;
	default: /* a plain file or a directory: nothing of keratin's to check */
		return -1;
	}
	deep_checks++;
	return bad;
}

void tu_end_check_at(const char *file, int line, const char *path, const char *when)
{
	char why[600];
	if (tu_end_check(path, why, sizeof(why)) > 0)
		tu_fail_at(file, line, "%s: %s: %s", when, path, why);
}

unsigned tu_end_check_all_at(const char *file, int line, const char *when)
{
	unsigned checked = 0;
	char why[600];
	pthread_mutex_lock(&tu_paths_lock);
	for (unsigned i = 0; i < tu_npaths; i++) {
		if (!tu_paths[i] || tu_paths_pid[i] != getpid() || access(tu_paths[i], F_OK) != 0)
			continue;
		int bad = tu_end_check(tu_paths[i], why, sizeof(why));
		if (bad > 0) {
			pthread_mutex_unlock(&tu_paths_lock);
			tu_fail_at(file, line, "%s: %s: %s", when, tu_paths[i], why);
		}
		checked += bad == 0;
	}
	pthread_mutex_unlock(&tu_paths_lock);
	printf("%s: deep check of %u file%s left behind: clean\n", when, checked, checked == 1 ? "" : "s");
	return checked;
}

/* ---- raw files --------------------------------------------------------------------------- */

uint32_t tu_crc32c(const void *buf, size_t len)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, 0xffffffffu) ^ 0xffffffffu;
}

void tu_hdr_fix_crc(void *hdr)
{
	uint32_t crc = tu_crc32c(hdr, 252);
	memcpy((uint8_t *)hdr + 252, &crc, 4);
}

bool tu_fully_allocated(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && (uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size;
}

void *tu_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		TU_FAIL("open %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0)
		TU_FAIL("fstat %s: %s", path, strerror(errno));
	size_t n = (size_t)st.st_size;
	uint8_t *buf = malloc(n ? n : 1);
	TU_ASSERT(buf, "out of memory");
	size_t done = 0;
	while (done < n) {
		ssize_t r = read(fd, buf + done, n - done);
		if (r <= 0)
			TU_FAIL("read %s: %s", path, r ? strerror(errno) : "short file");
		done += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
}

void tu_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		TU_FAIL("open %s: %s", path, strerror(errno));
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w <= 0)
			TU_FAIL("write %s: %s", path, strerror(errno));
		p += w;
		len -= (size_t)w;
	}
	close(fd);
}

void tu_pread(const char *path, void *buf, size_t len, uint64_t off)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		TU_FAIL("open %s: %s", path, strerror(errno));
	ssize_t r = pread(fd, buf, len, (off_t)off);
	if (r != (ssize_t)len)
		TU_FAIL("pread %s at %llu: %s", path, (unsigned long long)off,
			r < 0 ? strerror(errno) : "short read");
	close(fd);
}

void tu_pwrite(const char *path, const void *buf, size_t len, uint64_t off)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		TU_FAIL("open %s: %s", path, strerror(errno));
	ssize_t w = pwrite(fd, buf, len, (off_t)off);
	if (w != (ssize_t)len)
		TU_FAIL("pwrite %s at %llu: %s", path, (unsigned long long)off,
			w < 0 ? strerror(errno) : "short write");
	close(fd);
}

void tu_flip_byte(const char *path, uint64_t off)
{
	uint8_t b;
	tu_pread(path, &b, 1, off);
	b ^= 0x5a;
	tu_pwrite(path, &b, 1, off);
}

uint64_t tu_file_size(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		TU_FAIL("stat %s: %s", path, strerror(errno));
	return (uint64_t)st.st_size;
}

int tu_device_sector(const char *path, uint64_t off, uint64_t *sector)
{
	struct {
		struct fiemap f;
		struct fiemap_extent e[8];
	} m;
	memset(&m, 0, sizeof(m));
	m.f.fm_start = off;
	m.f.fm_length = 4096;
	m.f.fm_extent_count = 8;
	m.f.fm_flags = FIEMAP_FLAG_SYNC;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ok = fd >= 0 && ioctl(fd, FS_IOC_FIEMAP, &m.f) == 0 && m.f.fm_mapped_extents > 0;
	if (fd >= 0)
		close(fd);
	if (!ok)
		return -1;
	*sector = (m.e[0].fe_physical + (off - m.e[0].fe_logical)) / 512;
	return 0;
}

double tu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const int tu_all_errs[] = {
	KR_E_MISUSE,	       KR_E_MISUSE_ARG,	     KR_E_MISUSE_STATE,	    KR_E_MISUSE_OID,
	KR_E_MISUSE_FREED,     KR_E_MISUSE_RANGE,    KR_E_MISUSE_THREAD,    KR_E_NOSPACE,
	KR_E_NOSPACE_HEAP,     KR_E_NOSPACE_LOG,     KR_E_TOO_BIG,	    KR_E_IO,
	KR_E_IO_OPEN,	       KR_E_IO_MAP,	     KR_E_IO_SYNC,	    KR_E_IO_EXISTS,
	KR_E_IO_BUSY,
	KR_E_FORMAT,	       KR_E_FORMAT_NOT_POOL, KR_E_FORMAT_VERSION,   KR_E_FORMAT_TRUNCATED,
	KR_E_FORMAT_GEOMETRY,  KR_E_CORRUPT,	     KR_E_CORRUPT_HEADER,   KR_E_CORRUPT_META,
	KR_E_CORRUPT_LOG,      KR_E_MEDIA,	     KR_E_NOMEM,	    KR_E_POOL_FAILED,
	KR_E_CANARY,
};
const size_t tu_n_errs = sizeof(tu_all_errs) / sizeof(tu_all_errs[0]);

bool tu_known_err(int err)
{
	for (size_t i = 0; i < tu_n_errs; i++)
		if (tu_all_errs[i] == err)
			return true;
	return false;
}

/* ---- a watchdog for tests that run many cases ------------------------------------------- */

static const char *case_prefix = "";
static char case_name[512];
static volatile sig_atomic_t case_running;

/* Async-signal-safe: runs from signal handlers and sanitizer death callbacks. */
static void case_print(void)
{
	if (!case_running)
		return;
	if (write(2, case_prefix, strlen(case_prefix)) < 0 ||
	    write(2, case_name, strlen(case_name)) < 0 || write(2, "\n", 1) < 0)
		_exit(4);
}

static void case_on_alarm(int sig)
{
	(void)sig;
	case_print();
	_exit(3);
}

static void case_on_fatal(int sig)
{
	case_print();
	signal(sig, SIG_DFL);
	raise(sig);
}

void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

void tu_case_watch(const char *prefix, bool fatal)
{
	case_prefix = prefix;
	signal(SIGALRM, case_on_alarm);
	if (!fatal)
		return;
	if (__sanitizer_set_death_callback) {
		__sanitizer_set_death_callback(case_print);
	} else {
		signal(SIGSEGV, case_on_fatal);
		signal(SIGBUS, case_on_fatal);
		signal(SIGFPE, case_on_fatal);
		signal(SIGABRT, case_on_fatal);
	}
	atexit(case_print); /* a TU_FAIL inside a case exits: say where */
}

void tu_case_begin(unsigned timeout, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(case_name, sizeof(case_name), fmt, ap);
	va_end(ap);
	case_running = 1;
	alarm(timeout);
}

void tu_case_end(void)
{
	alarm(0);
	case_running = 0;
}

const char *tu_case_name(void) { return case_name; }

int tu_run_child(void (*fn)(void *), void *arg, char *err, size_t cap)
{
	int fds[2];
	TU_ASSERT(pipe(fds) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	TU_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fds[0], err + n, cap - n - 1)) > 0)
		n += (size_t)r;
	err[n] = 0;
	close(fds[0]);
	int status;
	TU_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
	return status;
}
