/*
 * kv-files.c - durable key-value commits on an ordinary file system: keratin in page-cache
 * mode (its hash map or its B-tree, values in objects of their own) against LMDB and SQLite
 * in WAL mode, each durable at every commit. One engine per invocation, two CSV rows (an
 * insert phase, then an update phase); bench/kv-files.py runs the engines interleaved and
 * writes the table of docs/BENCHMARKS.md.
 *
 *     kv-files --engine E --size S --batch B [--commits N] [--dir DIR] [--header]
 *
 *   insert   N commits, each of B new keys (64-bit, the splitmix64 sequence from 42) with
 *            values of S random bytes
 *   update   N commits, each rewriting the values of B keys chosen at random among them
 *
 * What each engine does per commit, in its durable configuration:
 *   keratin-hashmap, keratin-btree  one transaction: per key a lookup, then either a new
 *            object of S bytes and a map insert, or the object's bytes rewritten in place
 *            (kr_tx_add); the pool is on DIR, so it runs in page-cache mode
 *   lmdb     one write transaction of B mdb_put (MDB_INTEGERKEY), default flags: synced at
 *            commit
 *   sqlite   BEGIN; B × INSERT OR REPLACE into (k INTEGER PRIMARY KEY, v BLOB); COMMIT;
 *            journal_mode=WAL, synchronous=FULL (NORMAL would not be durable per commit)
 *
 * Columns: engine,fs,size,batch,phase,commits,seconds,median_us,p99_us,commits_per_s,
 * syncs_per_commit,dirtied_per_byte. syncs_per_commit counts the fsync, fdatasync and msync
 * calls of whichever engine (this program interposes them); dirtied_per_byte is the bytes
 * the process dirtied for storage (/proc/self/io write_bytes, page-granular) over the
 * bytes of values committed: the write amplification of each engine, measured one way.
 * Every engine runs pinned to CPU 0, in a fresh directory under DIR that is removed after.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <lmdb.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "keratin.h"
#include "keratin_map.h"
#include "util.h"

#define PROG "kv-files"
#define KEY_SEED 42

/* ---------------------------------------------------------------------------------------
 * Sync calls, counted for every engine alike: these definitions interpose libc's for the
 * shared libraries (LMDB, SQLite) and for keratin's static code.
 * ------------------------------------------------------------------------------------- */
static uint64_t nsyncs;

#define INTERPOSE(ret, name, params, args)                                              \
	ret name params                                                                 \
	{                                                                               \
		static ret(*real) params;                                               \
		if (!real)                                                              \
			real = (ret(*) params)dlsym(RTLD_NEXT, #name);                  \
		__atomic_add_fetch(&nsyncs, 1, __ATOMIC_RELAXED);                       \
		return real args;                                                       \
	}
INTERPOSE(int, fsync, (int fd), (fd))
INTERPOSE(int, fdatasync, (int fd), (fd))
INTERPOSE(int, msync, (void *addr, size_t len, int flags), (addr, len, flags))

/* Bytes this process has dirtied for storage so far (0 if the kernel does not say). */
static uint64_t dirtied_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	uint64_t v = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "write_bytes: %lu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* ---------------------------------------------------------------------------------------
 * Engines: open, one commit of a batch, close. A commit's keys and values come in arrays.
 * ------------------------------------------------------------------------------------- */
struct batch {
	const uint64_t *keys;
	const uint8_t *vals; /* n × size bytes */
	unsigned n;
	size_t size;
};

struct engine {
	const char *name;
	int (*open)(void **h, const char *dir, uint64_t room);
	int (*commit)(void *h, const struct batch *b); /* 0 or -1 with a message printed */
	void (*close)(void *h);
};

/* keratin ---------------------------------------------------------------------------- */
struct kr_side {
	kr_pool *pool;
	kr_map *map;
};

static int kr_open_kind(void **h, const char *dir, uint64_t room, enum kr_map_kind kind)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/pool", dir);
	struct kr_side *s = calloc(1, sizeof(*s));
	struct kr_create_opts co = {.struct_size = sizeof(co), .size = (64ull << 20) + room,
				    .flags = KR_OPEN_PREFAULT, .protection = KR_PROTECT_FULL};
	kr_oid desc;
	int rc = s ? kr_pool_create(path, &co, &s->pool) : KR_E_NOMEM;
	if (!rc && (rc = kr_map_create(s->pool, NULL, kind, &desc)) == 0)
		rc = kr_map_open(s->pool, desc, &s->map);
	struct kr_pool_stat st;
	if (!rc && (rc = kr_pool_stat(s->pool, &st)) == KR_OK && st.mode != KR_MODE_PAGECACHE)
		rc = kr_error_set(KR_E_MISUSE_ARG, "%s maps as persistent memory: not an ordinary file system", dir);
	if (rc) {
		util_lib_error(PROG, "keratin", rc);
		if (s && s->pool)
			kr_pool_close(s->pool);
		free(s);
		return -1;
	}
	*h = s;
	return 0;
}

static int kr_open_hashmap(void **h, const char *dir, uint64_t room)
{
	return kr_open_kind(h, dir, room, KR_MAP_HASHMAP);
}

static int kr_open_btree(void **h, const char *dir, uint64_t room)
{
	return kr_open_kind(h, dir, room, KR_MAP_BTREE);
}

static int kr_commit_batch(void *h, const struct batch *b)
{
	struct kr_side *s = h;
	kr_tx *tx;
	int rc = kr_tx_begin(s->pool, &tx);
	for (unsigned i = 0; i < b->n && !rc; i++) {
		const uint8_t *v = b->vals + (size_t)i * b->size;
		uint64_t oid;
		void *p;
		rc = kr_map_lookup(s->map, tx, b->keys[i], &oid);
		if (rc == 1) { /* present: its value's bytes rewritten */
			p = kr_tx_add(tx, oid, 0, b->size);
			rc = p ? (memcpy(p, v, b->size), KR_OK) : kr_errcode();
		} else if (rc == 0) { /* a new object for the value, then the key */
			rc = kr_tx_alloc(tx, b->size, 1, &oid);
			if (rc == KR_OK && !(p = kr_tx_open(tx, oid)))
				rc = kr_errcode();
			if (rc == KR_OK) {
				memcpy(p, v, b->size);
				rc = kr_map_insert(s->map, tx, b->keys[i], oid);
				rc = rc > 0 ? KR_OK : rc;
			}
		}
	}
	if (rc) {
		kr_tx_abort(tx);
		return util_lib_error(PROG, "keratin commit", rc), -1;
	}
	rc = kr_tx_commit(tx);
	return rc ? (util_lib_error(PROG, "keratin commit", rc), -1) : 0;
}

static void kr_close_side(void *h)
{
	struct kr_side *s = h;
	kr_map_close(s->map);
	int rc = kr_pool_close(s->pool);
	if (rc)
		util_lib_error(PROG, "keratin close", rc);
	free(s);
}

/* LMDB ------------------------------------------------------------------------------- */
struct lmdb_side {
	MDB_env *env;
	MDB_dbi dbi;
};

static int lmdb_fail(const char *what, int rc)
{
	fprintf(stderr, "%s: lmdb: %s: %s\n", PROG, what, mdb_strerror(rc));
	return -1;
}

static int lmdb_open(void **h, const char *dir, uint64_t room)
{
	struct lmdb_side *s = calloc(1, sizeof(*s));
	MDB_txn *txn;
	int rc;
	if (!s)
		return lmdb_fail("open", ENOMEM);
	if ((rc = mdb_env_create(&s->env)) ||
	    (rc = mdb_env_set_mapsize(s->env, (size_t)((256ull << 20) + 4 * room))) ||
	    (rc = mdb_env_open(s->env, dir, 0, 0644)) || (rc = mdb_txn_begin(s->env, NULL, 0, &txn))) {
		if (s->env)
			mdb_env_close(s->env);
		free(s);
		return lmdb_fail("open", rc);
	}
	if ((rc = mdb_dbi_open(txn, NULL, MDB_INTEGERKEY, &s->dbi)) || (rc = mdb_txn_commit(txn))) {
		mdb_env_close(s->env);
		free(s);
		return lmdb_fail("open", rc);
	}
	*h = s;
	return 0;
}

static int lmdb_commit(void *h, const struct batch *b)
{
	struct lmdb_side *s = h;
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc)
		return lmdb_fail("begin", rc);
	for (unsigned i = 0; i < b->n; i++) {
		MDB_val k = {sizeof(uint64_t), (void *)&b->keys[i]};
		MDB_val v = {b->size, (void *)(b->vals + (size_t)i * b->size)};
		if ((rc = mdb_put(txn, s->dbi, &k, &v, 0))) {
			mdb_txn_abort(txn);
			return lmdb_fail("put", rc);
		}
	}
	return (rc = mdb_txn_commit(txn)) ? lmdb_fail("commit", rc) : 0;
}

static void lmdb_close(void *h)
{
	struct lmdb_side *s = h;
	mdb_env_close(s->env);
	free(s);
}

/* SQLite ----------------------------------------------------------------------------- */
struct sqlite_side {
	sqlite3 *db;
	sqlite3_stmt *put;
};

static int sqlite_exec(struct sqlite_side *s, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &err) == SQLITE_OK)
		return 0;
	fprintf(stderr, "%s: sqlite: %s: %s\n", PROG, sql, err ? err : "error");
	sqlite3_free(err);
	return -1;
}

static void sqlite_close(void *h)
{
	struct sqlite_side *s = h;
	sqlite3_finalize(s->put);
	sqlite3_close(s->db);
	free(s);
}

static int sqlite_open(void **h, const char *dir, uint64_t room)
{
	(void)room;
	char path[4096];
	snprintf(path, sizeof(path), "%s/db.sqlite", dir);
	struct sqlite_side *s = calloc(1, sizeof(*s));
	if (!s || sqlite3_open(path, &s->db) != SQLITE_OK) {
		fprintf(stderr, "%s: sqlite: cannot open %s\n", PROG, path);
		if (s)
			sqlite_close(s);
		return -1;
	}
	/* WAL with FULL: the WAL is synced at every commit, which makes each one durable. */
	if (sqlite_exec(s, "PRAGMA journal_mode=WAL") || sqlite_exec(s, "PRAGMA synchronous=FULL") ||
	    sqlite_exec(s, "CREATE TABLE kv(k INTEGER PRIMARY KEY, v BLOB)") ||
	    sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO kv VALUES(?1, ?2)", -1, &s->put, NULL) !=
		    SQLITE_OK) {
		fprintf(stderr, "%s: sqlite: setup: %s\n", PROG, sqlite3_errmsg(s->db));
		sqlite_close(s);
		return -1;
	}
	*h = s;
	return 0;
}

static int sqlite_commit(void *h, const struct batch *b)
{
	struct sqlite_side *s = h;
	if (sqlite_exec(s, "BEGIN"))
		return -1;
	for (unsigned i = 0; i < b->n; i++) {
		sqlite3_bind_int64(s->put, 1, (sqlite3_int64)b->keys[i]);
		sqlite3_bind_blob(s->put, 2, b->vals + (size_t)i * b->size, (int)b->size, SQLITE_STATIC);
		int rc = sqlite3_step(s->put);
		sqlite3_reset(s->put);
		if (rc != SQLITE_DONE) {
			fprintf(stderr, "%s: sqlite: insert: %s\n", PROG, sqlite3_errmsg(s->db));
			sqlite_exec(s, "ROLLBACK");
			return -1;
		}
	}
	return sqlite_exec(s, "COMMIT");
}

static const struct engine engines[] = {
	{"keratin-hashmap", kr_open_hashmap, kr_commit_batch, kr_close_side},
	{"keratin-btree", kr_open_btree, kr_commit_batch, kr_close_side},
	{"lmdb", lmdb_open, lmdb_commit, lmdb_close},
	{"sqlite", sqlite_open, sqlite_commit, sqlite_close},
};

/* ---------------------------------------------------------------------------------------
 * The two phases
 * ------------------------------------------------------------------------------------- */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	return remove(path);
}

static const char *fs_name(const char *dir)
{
	struct statfs f;
	if (statfs(dir, &f) != 0)
		return "unknown";
	switch ((unsigned long)f.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case 0x2FC12FC1: return "zfs";
	default: return "other";
	}
}

/* Runs one phase: n commits of batch keys each, the keys of commit c from keys_of(c). */
static int phase(const struct engine *e, void *h, const char *fs, const char *name, uint64_t n,
		 unsigned batch, size_t size, const uint64_t *inserted, uint64_t ninserted,
		 uint64_t *next_key, uint64_t *rng)
{
	uint64_t *lat = malloc(n * sizeof(*lat)), keys[64];
	uint8_t *vals = malloc((size_t)batch * size);
	if (!lat || !vals) {
		free(lat);
		free(vals);
		fprintf(stderr, "%s: out of memory\n", PROG);
		return -1;
	}
	uint64_t syncs0 = nsyncs, dirtied0 = dirtied_bytes(), t0 = util_now_ns();
	int rc = 0;
	for (uint64_t c = 0; c < n && !rc; c++) {
		for (unsigned i = 0; i < batch; i++)
			keys[i] = inserted ? inserted[util_rand_below(rng, ninserted)] : util_rand64(next_key);
		util_rand_bytes(rng, vals, (size_t)batch * size);
		struct batch b = {keys, vals, batch, size};
		uint64_t s = util_now_ns();
		rc = e->commit(h, &b);
		lat[c] = util_now_ns() - s;
	}
	double secs = (double)(util_now_ns() - t0) / 1e9;
	if (!rc) {
		qsort(lat, n, sizeof(*lat), cmp_u64);
		double committed = (double)n * batch * (double)size;
		printf("%s,%s,%zu,%u,%s,%lu,%.6f,%.1f,%.1f,%.1f,%.2f,%.2f\n", e->name, fs, size, batch,
		       name, (unsigned long)n, secs, lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3, n / secs,
		       (double)(nsyncs - syncs0) / (double)n, (double)(dirtied_bytes() - dirtied0) / committed);
	}
	free(lat);
	free(vals);
	return rc;
}

static int usage(void)
{
	printf("usage: kv-files --engine E --size S --batch B [--commits N] [--dir DIR] [--header]\n\n"
	       "Durable key-value commits on an ordinary file system, one engine per run, as CSV:\n"
	       "an insert phase of N commits of B new keys, then an update phase of N commits of\n"
	       "B existing keys, values of S bytes.\n\n"
	       "  --engine E   keratin-hashmap, keratin-btree, lmdb or sqlite\n"
	       "  --size S     value bytes, 8 to 65536\n"
	       "  --batch B    keys per commit, 1 to 64\n"
	       "  --commits N  commits per phase (default 500)\n"
	       "  --dir DIR    where the engine's files go, in a fresh directory (default /var/tmp);\n"
	       "               an ordinary file system, not tmpfs\n"
	       "  --header     print the column names first\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"engine", required_argument, NULL, 'e'}, {"size", required_argument, NULL, 's'},
		{"batch", required_argument, NULL, 'b'},  {"commits", required_argument, NULL, 'n'},
		{"dir", required_argument, NULL, 'd'},    {"header", no_argument, NULL, 'H'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	const struct engine *e = NULL;
	const char *dir = "/var/tmp";
	uint64_t size = 0, batch = 0, n = 500;
	int c, header = 0;
	while ((c = util_getopt(PROG, argc, argv, longopts)) != -1) {
		switch (c) {
		case 'e':
			for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++)
				if (!strcmp(optarg, engines[i].name))
					e = &engines[i];
			if (!e)
				return util_usage_error(PROG, "unknown --engine '%s' (keratin-hashmap, "
							      "keratin-btree, lmdb, sqlite)", optarg);
			break;
		case 's':
			if (util_parse_uint(optarg, 8, 65536, &size))
				return util_usage_error(PROG, "invalid --size '%s' (8 to 65536)", optarg);
			break;
		case 'b':
			if (util_parse_uint(optarg, 1, 64, &batch))
				return util_usage_error(PROG, "invalid --batch '%s' (1 to 64)", optarg);
			break;
		case 'n':
			if (util_parse_uint(optarg, 1, 10000000, &n))
				return util_usage_error(PROG, "invalid --commits '%s' (1 to 10000000)", optarg);
			break;
		case 'd': dir = optarg; break;
		case 'H': header = 1; break;
		case 'h': return usage();
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return util_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
	if (!e || !size || !batch)
		return util_usage_error(PROG, "--engine, --size and --batch are required");
	const char *fs = fs_name(dir);
	if (!strcmp(fs, "tmpfs")) {
		fprintf(stderr, "%s: %s is tmpfs: nothing there reaches storage, so no engine syncs "
				"anything; give an ordinary file system with --dir\n", PROG, dir);
		return 2;
	}
	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/kv-files.XXXXXX", dir);
	if (!mkdtemp(sub)) {
		fprintf(stderr, "%s: cannot make a directory in %s: %s\n", PROG, dir, strerror(errno));
		return 1;
	}
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus); /* best effort: every engine alike */

	/* Room for the values and the structure: objects, map nodes, and pages freed by
	 * copy-on-write engines before they are reused. */
	uint64_t room = 2 * n * batch * (size + 512);
	uint64_t *inserted = malloc(n * batch * sizeof(*inserted)), next_key = KEY_SEED, rng = 7;
	void *h = NULL;
	int rc = inserted ? e->open(&h, sub, room) : -1;
	if (!rc) {
		if (header)
			printf("engine,fs,size,batch,phase,commits,seconds,median_us,p99_us,commits_per_s,"
			       "syncs_per_commit,dirtied_per_byte\n");
		uint64_t k = next_key;
		for (uint64_t i = 0; i < n * batch; i++) /* the keys the insert phase will draw */
			inserted[i] = util_rand64(&k);
		rc = phase(e, h, fs, "insert", n, (unsigned)batch, size, NULL, 0, &next_key, &rng);
		if (!rc)
			rc = phase(e, h, fs, "update", n, (unsigned)batch, size, inserted, n * batch,
				   &next_key, &rng);
		e->close(h);
	}
	free(inserted);
	if (nftw(sub, remove_one, 8, FTW_DEPTH | FTW_PHYS) != 0)
		fprintf(stderr, "%s: could not remove %s\n", PROG, sub);
	return rc ? 1 : 0;
}
