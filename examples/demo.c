/*
 * demo.c - keratin-demo: kill a writer in the middle of its work and show that recovery
 * keeps every insert it was told had committed.
 *
 * The parent creates a pool holding an empty kvmap in a fresh scratch directory, then forks
 * a writer that inserts keys 0, 1, 2, ... one transaction each and, after every successful
 * commit, writes the number of acknowledged inserts (and the fences spent so far) to a pipe.
 * At a random insert between 20% and 80% of the run the writer arms a timer of a random few
 * hundred microseconds whose handler sends the writer SIGKILL, so the kill lands at an
 * arbitrary instruction - often inside a commit. The parent then reopens the pool, which runs
 * recovery, and walks the map: every acknowledged key must be there with its value, the one
 * insert in flight at the kill may or may not be, and nothing after it may exist.
 *
 * Then the faults: with the pool open and a reader checking acknowledged entries in a loop
 * (conservative read policy: every read verifies the entry's checksum), the parent makes one
 * entry's page a media error (emulated poison: the page loses its content and faults on the
 * next access) and scribbles random bytes over another entry's value behind the library's
 * back (pwrite on the file). The poison is repaired online by the fault handler at the
 * reader's next access, the scribble by the checksum check of the next read; the reader
 * must never see a wrong value, and afterwards `kr_pool_check` must find the pool sound.
 *
 * On tmpfs the pool is opened with KR_OPEN_FORCE_PMEM: the page cache outlives the killed
 * process just as persistent memory outlives a crash, and no msync is needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keratin.h"
#include "kvmap.h"
#include "util.h"

#define PROG "keratin-demo"
#define DEFAULT_KEYS 100000u
#define DEFAULT_KEYS_PAGECACHE 10000u /* each commit msyncs off tmpfs: ~1 ms an insert */
#define BUCKETS 16384u
#define MIB (1ull << 20)
#define MIN_POOL_SIZE (64 * MIB)
#define POOL_BYTES_PER_KEY 256u
#define VALUE_MAX 128u

/* What the writer sends after each acknowledged insert; 16 bytes, so each write() to the
 * pipe is atomic and the reader never sees half a record from a killed writer. */
struct ack {
	uint64_t inserts;
	uint64_t fences;
};

struct demo {
	uint64_t keys;
	uint64_t seed;
	char dir[64];
	char path[96];
	unsigned flags; /* KR_OPEN_FORCE_PMEM on tmpfs */
	int tmpfs;
};

static int faults(const struct demo *d, uint64_t acked);

/* splitmix64: a tiny, seedable generator for the kill point and for the values. */
static uint64_t mix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The value stored under key: 8 to VALUE_MAX bytes, a function of the key alone, so the
 * parent can recompute what the writer stored. */
static size_t value_of(uint64_t key, unsigned char *buf)
{
	uint64_t state = key;
	size_t len = 8 + mix(&state) % (VALUE_MAX - 7);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = mix(&state);
		memcpy(buf + i, &w, len - i < 8 ? len - i : 8);
	}
	return len;
}

/* ---------------------------------------------------------------------------------------
 * The writer (child process)
 * ------------------------------------------------------------------------------------- */

static void die_now(int sig)
{
	(void)sig;
	raise(SIGKILL);
}

/* Never returns: killed by its own timer, or exits 0 if it somehow finished first, or 1
 * on an error. */
static void writer(const struct demo *d, uint64_t arm_at, unsigned delay_us, int fd)
{
	kr_pool *pool;
	struct kvmap *map;
	unsigned char val[VALUE_MAX];
	int rc;

	if ((rc = kr_pool_open(d->path, d->flags, &pool)))
		_exit(util_lib_error(PROG, d->path, rc));
	if ((rc = kvmap_open(pool, 0, &map)))
		_exit(util_lib_error(PROG, d->path, rc));
	signal(SIGALRM, die_now);
	kr_counters_reset(); /* count the inserts' fences only, not the open's */

	for (uint64_t k = 0; k < d->keys; k++) {
		if (k == arm_at) {
			struct itimerval t = {.it_value = {.tv_sec = 0, .tv_usec = delay_us}};
			setitimer(ITIMER_REAL, &t, NULL);
		}
		size_t len = value_of(k, val);
		if ((rc = kvmap_put(map, k, val, len)))
			_exit(util_lib_error(PROG, d->path, rc));

		struct kr_counters c;
		kr_counters_get(&c);
		struct ack a = {.inserts = k + 1, .fences = c.fences};
		if (write(fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
	}
	kvmap_close(map);
	_exit(kr_pool_close(pool) ? 1 : 0);
}

/* The last acknowledgement the writer sent before the pipe closed. */
static struct ack read_acks(int fd)
{
	struct ack buf[256], last = {0, 0};
	size_t have = 0; /* bytes in buf */

	for (;;) {
		ssize_t n = read(fd, (char *)buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t whole = have / sizeof(struct ack);
		if (whole)
			last = buf[whole - 1];
		have -= whole * sizeof(struct ack);
		memmove(buf, (char *)buf + whole * sizeof(struct ack), have);
	}
	return last;
}

/* ---------------------------------------------------------------------------------------
 * Verification (parent)
 * ------------------------------------------------------------------------------------- */

struct tally {
	uint64_t acked;    /* keys 0 .. acked-1 were acknowledged; key acked was in flight */
	uint64_t seen;     /* entries walked */
	uint64_t good;     /* acknowledged keys found with the right value */
	uint64_t bad;      /* entries with a wrong value */
	uint64_t beyond;   /* keys after the in-flight one: must not exist */
	int inflight;      /* the in-flight insert was committed */
};

static int tally_entry(uint64_t key, const void *val, size_t len, void *ctx)
{
	struct tally *t = ctx;
	unsigned char want[VALUE_MAX];
	size_t want_len = value_of(key, want);

	t->seen++;
	if (key > t->acked)
		t->beyond++;
	else if (len != want_len || memcmp(val, want, len) != 0)
		t->bad++;
	else if (key == t->acked)
		t->inflight = 1;
	else
		t->good++;
	return 0;
}

/* Reopens the pool (recovery runs here), prints what recovery did and what the map holds.
 * Returns 1 if every acknowledged insert survived and nothing else appeared. */
static int verify(const struct demo *d, uint64_t acked)
{
	kr_pool *pool;
	struct kvmap *map;
	struct kr_pool_stat st;
	struct tally t = {.acked = acked};
	int rc;

	if ((rc = kr_pool_open(d->path, d->flags, &pool))) {
		util_lib_error(PROG, d->path, rc);
		return 0;
	}
	if ((rc = kr_pool_stat(pool, &st)) || (rc = kvmap_open(pool, 0, &map))) {
		util_lib_error(PROG, d->path, rc);
		kr_pool_close(pool);
		return 0;
	}
	if (st.recovered)
		printf("recovery:      replayed %llu transaction%s, discarded %llu torn one%s\n",
		       (unsigned long long)st.replayed_txs, st.replayed_txs == 1 ? "" : "s",
		       (unsigned long long)st.discarded_txs, st.discarded_txs == 1 ? "" : "s");
	else
		printf("recovery:      nothing to replay or discard\n");

	int walk = kvmap_foreach(map, tally_entry, &t);
	uint64_t count = kvmap_count(map);
	kvmap_close(map);
	if (walk < 0)
		util_lib_error(PROG, d->path, walk);
	if ((rc = kr_pool_close(pool)))
		util_lib_error(PROG, d->path, rc);

	int ok = walk == 0 && rc == 0 && t.good == acked && t.bad == 0 && t.beyond == 0 && count == t.seen;
	const char *inflight = acked == d->keys ? "no insert was in flight"
			       : t.inflight           ? "the in-flight insert committed too"
						      : "the in-flight insert did not commit";
	printf("verification:  %llu of %llu acknowledged inserts present with the right value;\n"
	       "               %s; %llu wrong value%s, %llu key%s beyond it, count %s\n",
	       (unsigned long long)t.good, (unsigned long long)acked, inflight, (unsigned long long)t.bad,
	       t.bad == 1 ? "" : "s", (unsigned long long)t.beyond, t.beyond == 1 ? "" : "s",
	       count == t.seen ? "consistent" : "INCONSISTENT");
	return ok;
}

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

static int create_pool(struct demo *d)
{
	struct kr_create_opts opts = {.struct_size = sizeof(opts), .flags = d->flags};
	char h[UTIL_HUMAN_LEN];
	kr_pool *pool;
	struct kvmap *map;
	int rc;

	/* Room for the entries with plenty to spare, in whole MiB. */
	opts.size = d->keys * POOL_BYTES_PER_KEY;
	if (opts.size < MIN_POOL_SIZE)
		opts.size = MIN_POOL_SIZE;
	opts.size = (opts.size + MIB - 1) & ~(MIB - 1);
	if ((rc = kr_pool_create(d->path, &opts, &pool)))
		return util_lib_error(PROG, d->path, rc);
	/* Lay out the empty map now, so the writer's first insert is an ordinary one. */
	if ((rc = kvmap_open(pool, BUCKETS, &map))) {
		util_lib_error(PROG, d->path, rc);
		kr_pool_close(pool);
		return 1;
	}
	kvmap_close(map);
	if ((rc = kr_pool_close(pool)))
		return util_lib_error(PROG, d->path, rc);
	printf("pool created:  %s at %s (%s)\n", util_human(opts.size, h), d->path,
	       d->tmpfs ? "tmpfs, opened as emulated persistent memory" : "not tmpfs, page-cache mode");
	return 0;
}

static int run(struct demo *d)
{
	uint64_t rng = d->seed;
	uint64_t arm_at = d->keys * (20 + mix(&rng) % 61) / 100;
	unsigned delay_us = 1 + (unsigned)(mix(&rng) % 500);
	int fds[2], status;

	if (create_pool(d))
		return 0;
	printf("writer:        %llu inserts, one transaction each; SIGKILL timer (%u us) armed at "
	       "insert %llu (--seed %llu)\n",
	       (unsigned long long)d->keys, delay_us, (unsigned long long)arm_at,
	       (unsigned long long)d->seed);
	fflush(stdout); /* or the child's copy of the buffer could be written twice */

	if (pipe(fds)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		return 0;
	}
	uint64_t t0 = util_now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		return 0;
	}
	if (pid == 0) {
		close(fds[0]);
		writer(d, arm_at, delay_us, fds[1]);
	}
	close(fds[1]);
	struct ack last = read_acks(fds[0]);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	double secs = (double)(util_now_ns() - t0) / 1e9;

	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		printf("acknowledged:  %llu inserts before the SIGKILL (%.2f s)\n",
		       (unsigned long long)last.inserts, secs);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		printf("acknowledged:  all %llu inserts; the writer finished before its timer fired\n",
		       (unsigned long long)last.inserts);
	else {
		fprintf(stderr, PROG ": the writer failed (status 0x%x) after %llu inserts\n", status,
			(unsigned long long)last.inserts);
		return 0;
	}

	int ok = verify(d, last.inserts);
	if (last.inserts)
		printf("cost:          %.2f fences per insert (kr_counters of the writer)\n",
		       (double)last.fences / (double)last.inserts);
	/* A SIGKILL loses the process, not the stores it made: the page cache or the DIMM
	 * still holds them. What a power failure loses is shown by the crash simulator. */
	printf("note:          a SIGKILL is a process crash: every store the writer made stays in\n"
	       "               memory. A power failure also loses stores not yet written back;\n"
	       "               the crash simulator shows that case at every fence (in build/:\n"
	       "               ctest -R '^crash' --verbose)\n");
	return ok && faults(d, last.inserts);
}

/* ---------------------------------------------------------------------------------------
 * The faults phase
 * ------------------------------------------------------------------------------------- */

struct reader {
	struct kvmap *map;
	uint64_t keys;         /* acknowledged keys to read */
	uint64_t hot[2];       /* the damaged entries, read every 64 reads as well */
	uint64_t reads, wrong; /* reads done, reads that returned a wrong value */
	_Atomic int stop;
};

static void *reader_loop(void *arg)
{
	struct reader *r = arg;
	unsigned char want[VALUE_MAX];
	for (uint64_t i = 0; !r->stop; i++) {
		uint64_t key = i % 64 < 2 ? r->hot[i % 64] : (i * 7919) % r->keys;
		size_t len, want_len = value_of(key, want);
		const void *val = kvmap_get(r->map, key, &len);
		if (!val || len != want_len || memcmp(val, want, len) != 0)
			r->wrong++;
		r->reads++;
	}
	return NULL;
}

/* Pool offset of the value of an acknowledged key. */
static uint64_t value_off(kr_pool *pool, struct kvmap *map, uint64_t key, size_t *len)
{
	const char *v = kvmap_get(map, key, len);
	return v ? kr_pool_offset(pool, v) : 0;
}

static int faults(const struct demo *d, uint64_t acked)
{
	kr_pool *pool;
	struct kvmap *map;
	int rc;
	if (acked < 1000)
		return 1; /* too few entries to aim at; nothing to show */
	if ((rc = kr_pool_open(d->path, d->flags, &pool)))
		return !util_lib_error(PROG, d->path, rc);
	if ((rc = kvmap_open(pool, 0, &map)) ||
	    (rc = kr_pool_set_read_policy(pool, KR_READ_CONSERVATIVE, 0, 0))) {
		util_lib_error(PROG, d->path, rc);
		kr_pool_close(pool);
		return 0;
	}
	/* Two entries on different pages, close enough to lie in different page columns. */
	size_t slen, plen;
	uint64_t skey = acked / 3, pkey = skey + 1;
	uint64_t soff = value_off(pool, map, skey, &slen), poff = 0;
	for (; pkey < acked; pkey++)
		if (((poff = value_off(pool, map, pkey, &plen)) >> 12) != (soff >> 12))
			break;

	struct reader r = {.map = map, .keys = acked, .hot = {skey, pkey}};
	pthread_t th;
	pthread_create(&th, NULL, reader_loop, &r);
	usleep(20000);

	int fd = open(d->path, O_WRONLY);
	unsigned char junk[VALUE_MAX];
	uint64_t rng = d->seed;
	for (size_t i = 0; i < slen; i++)
		junk[i] = (unsigned char)mix(&rng);
	int scribbled = fd >= 0 && pwrite(fd, junk, slen, (off_t)soff) == (ssize_t)slen;
	if (fd >= 0)
		close(fd);
	rc = kr_inject_poison(pool, poff);
	printf("faults:        media error on page 0x%llx (entry %llu), %zu-byte scribble at 0x%llx "
	       "(entry %llu),\n               while a reader checks entries\n",
	       (unsigned long long)(poff & ~4095ull), (unsigned long long)pkey, slen,
	       (unsigned long long)soff, (unsigned long long)skey);
	usleep(200000);
	r.stop = 1;
	pthread_join(th, NULL);

	/* Every entry read once more (each read verifies its checksum): all must be right. */
	struct tally t = {.acked = acked - 1};
	int walk = kvmap_foreach(map, tally_entry, &t);
	struct kr_pool_stat st;
	struct kr_check_report rep = {0};
	kr_pool_stat(pool, &st);
	int check = kr_pool_check(pool, 0, &rep);
	printf("repairs:       %llu page%s rebuilt online after the media error (last in %.1f us), "
	       "%llu object%s\n               repaired after a checksum mismatch; the reader saw %llu "
	       "wrong value%s in %llu reads\n",
	       (unsigned long long)st.media_repairs, st.media_repairs == 1 ? "" : "s",
	       (double)st.last_repair_ns / 1e3, (unsigned long long)st.csum_repairs,
	       st.csum_repairs == 1 ? "" : "s", (unsigned long long)r.wrong,
	       r.wrong == 1 ? "" : "s", (unsigned long long)r.reads);
	printf("verification:  %llu of %llu entries read back right after the repairs\n",
	       (unsigned long long)(t.good + t.inflight), (unsigned long long)acked);
	printf("check:         %s (%llu objects, %llu parity columns, %.1f GB/s)\n",
	       check == KR_OK ? "sound" : kr_errmsg(), (unsigned long long)rep.objects,
	       (unsigned long long)rep.columns,
	       rep.seconds > 0 ? (double)rep.bytes_scanned / rep.seconds / 1e9 : 0.0);
	kvmap_close(map);
	if ((rc = kr_pool_close(pool)))
		util_lib_error(PROG, d->path, rc);
	return rc == KR_OK && walk == 0 && scribbled && r.wrong == 0 && t.bad == 0 &&
	       t.good + t.inflight == acked && check == KR_OK && st.media_repairs >= 1 &&
	       st.csum_repairs >= 1;
}

static int usage(void)
{
	printf("usage: " PROG " [--keys N] [--seed N]\n\n"
	       "Inserts N keys into a fresh pool from a child process, kills the child with\n"
	       "SIGKILL at a random point, recovers the pool and checks that every acknowledged\n"
	       "insert survived. Exit status 0 only if the check passes.\n\n"
	       "  --keys N   inserts the writer attempts (default %u; %u if there is no tmpfs,\n"
	       "             where every commit waits for msync)\n"
	       "  --seed N   seed of the random kill point, to replay a run\n",
	       DEFAULT_KEYS, DEFAULT_KEYS_PAGECACHE);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"keys", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct demo d = {.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32)};
	int c;

	while ((c = util_getopt(PROG, argc, argv, longopts)) != -1) {
		switch (c) {
		case 'k':
			if (util_parse_uint(optarg, 10, 10000000, &d.keys))
				return util_usage_error(PROG, "invalid --keys '%s' (10 to 10000000)", optarg);
			break;
		case 's':
			if (util_parse_uint(optarg, 0, UINT64_MAX, &d.seed))
				return util_usage_error(PROG, "invalid --seed '%s'", optarg);
			break;
		case 'h': return usage();
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return util_usage_error(PROG, "unexpected argument '%s'", argv[optind]);

	if (util_scratch_dir(PROG, d.dir, sizeof(d.dir), &d.tmpfs)) {
		fprintf(stderr, PROG ": cannot make a scratch directory: %s\n", strerror(errno));
		return 1;
	}
	d.flags = d.tmpfs ? KR_OPEN_FORCE_PMEM : 0;
	if (d.keys == 0)
		d.keys = d.tmpfs ? DEFAULT_KEYS : DEFAULT_KEYS_PAGECACHE;
	snprintf(d.path, sizeof(d.path), "%s/demo.pool", d.dir);

	int ok = run(&d);
	char bb[sizeof(d.path) + 16];
	snprintf(bb, sizeof(bb), "%s.badblocks", d.path); /* the emulated poison's list */
	unlink(d.path);
	unlink(bb);
	rmdir(d.dir);
	printf("pool removed:  %s\n%s\n", d.dir, ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}
