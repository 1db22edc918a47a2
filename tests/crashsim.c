/*
 * crashsim.c - the crash simulator (model and use described in crashsim.h).
 *
 * Data structures: one `struct mapping` per mapped pool, holding the durable image, a
 * per-page "may be non-zero" byte (so image files can be written sparsely), and a table
 * indexed by line number of `struct line` records for lines with pending versions; those
 * lines are also kept in a dense `pending` list so a fence visits only them. All recorder
 * callbacks take one mutex. Several threads may write (up to MAX_THREADS): each line keeps
 * one "flushed up to" mark per thread, and a fence makes durable only its own thread's.
 *
 * Images are built in the child from its copy-on-write view of these tables, so the
 * parent spends only a fork() per image; up to `jobs` children check images while the
 * parent runs on.
 */
#define _GNU_SOURCE
#include "crashsim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define LINE 64u
#define PAGE 4096u
#define MAX_VERSIONS 512u /* per line; older unflushed versions are merged beyond this */
#define MAX_THREADS 16u   /* threads that may write during one simulation */

struct line {
	uint32_t nver, cap;
	/* Per thread: versions [0, flushed[t]) are written back by thread t, so version
	 * flushed[t]-1 is durable at t's next fence (a fence orders its own thread's flushes
	 * only; a later write-back always carries a later version of the line). */
	uint32_t flushed[MAX_THREADS];
	uint32_t pidx;    /* index in mapping.pending */
	uint8_t streamed; /* the last version came from non-temporal stores */
	uint32_t suspect; /* changed without a store hook (seen at a flush), not yet reported:
			   * 1 + the number of fences before */
	uint8_t (*ver)[LINE];
};

struct mapping {
	uint8_t *base;
	size_t len;
	char *path;
	uint8_t *durable;
	size_t nlines;
	struct line **lines;
	uint32_t *pending;
	size_t npending, cap_pending;
	uint8_t *page_nz; /* 1 = the durable page may hold non-zero bytes */
	size_t npages;
	uint32_t *suspects; /* lines with line.suspect set */
	size_t nsuspects, cap_suspects;
	uint8_t *app; /* 1 = the application stored into the line and will persist it itself */
	struct mapping *next;
};

struct kid {
	pid_t pid;
	struct crashsim_image img;
	char path[256], ctx_path[270];
	char fence_arg[24]; /* exec_path's arguments, made before the fork */
};

static struct {
	bool active;
	pid_t parent; /* the process that started the simulation */
	bool atexit_done;
	struct crashsim_opts o;
	crashsim_check_fn check;
	void *ctx;
	pthread_mutex_t lock;
	uint64_t gen;      /* simulations started: thread numbers are per simulation */
	unsigned nthreads; /* threads that wrote in this one */
	struct mapping *maps;
	struct crashsim_stats st;
	bool checks_on;
	struct kid *kids;
	unsigned nkids;
	unsigned reported;
	uint32_t **choices; /* per random image of the current fence: see choose() */
	size_t cap_choices;
} sim = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *kind_name(enum crashsim_kind k)
{
	return k == CRASHSIM_NONE ? "none" : k == CRASHSIM_ALL ? "all" : k == CRASHSIM_STREAMED ? "streamed" : "random";
}

void crashsim_opts_init(struct crashsim_opts *o)
{
	const char *keep = getenv("KR_CRASHSIM_KEEP");
	const char *every = getenv("KR_CRASHSIM_EVERY");
	*o = (struct crashsim_opts){
		.random_images = 2,
		.fence_every = every && *every ? (unsigned)strtoul(every, NULL, 0) : tu_sanitized() ? 3 : 1,
		.seed = 1,
		.jobs = 2,
		.open_flags = tu_map_flags(),
		.dir = tu_pool_dir(),
		.keep_failed = keep && *keep && *keep != '0',
		.child_timeout = 120,
		.max_reports = 20,
	};
}

/* ---- line versions --------------------------------------------------------------------- */

static struct mapping *find_mapping(const void *addr)
{
	for (struct mapping *m = sim.maps; m; m = m->next)
		if ((const uint8_t *)addr >= m->base && (const uint8_t *)addr < m->base + m->len)
			return m;
	return NULL;
}

/* Bytes of line li inside the mapping (the last line of an odd-sized mapping is short). */
static size_t line_bytes(const struct mapping *m, size_t li)
{
	size_t off = li * LINE;
	return m->len - off < LINE ? m->len - off : LINE;
}

static const uint8_t *last_version(const struct mapping *m, size_t li)
{
	const struct line *l = m->lines[li];
	return l && l->nver ? l->ver[l->nver - 1] : m->durable + li * LINE;
}

static void pending_add(struct mapping *m, size_t li, struct line *l)
{
	if (m->npending == m->cap_pending) {
		m->cap_pending = m->cap_pending ? 2 * m->cap_pending : 1024;
		m->pending = realloc(m->pending, m->cap_pending * sizeof(*m->pending));
		TU_ASSERT(m->pending, "out of memory");
	}
	l->pidx = (uint32_t)m->npending;
	m->pending[m->npending++] = (uint32_t)li;
}

static void pending_remove(struct mapping *m, struct line *l)
{
	uint32_t last = m->pending[--m->npending];
	if (l->pidx != m->npending) {
		m->pending[l->pidx] = last;
		m->lines[last]->pidx = l->pidx;
	}
}

static bool flushed_by_any(const struct line *l, uint32_t mark)
{
	for (unsigned t = 0; t < MAX_THREADS; t++)
		if (l->flushed[t] == mark)
			return true;
	return false;
}

/* Appends a snapshot of the live line as a new pending version. */
static void push_version(struct mapping *m, size_t li)
{
	struct line *l = m->lines[li];
	if (!l) {
		l = calloc(1, sizeof(*l));
		TU_ASSERT(l, "out of memory");
		m->lines[li] = l;
	}
	if (l->nver == 0)
		pending_add(m, li, l);
	if (l->nver == MAX_VERSIONS) {
		/* Forget one old version that no thread flushed: the images then explore fewer
		 * intermediate states of this line, all of which stay valid. */
		uint32_t drop = 0;
		while (flushed_by_any(l, drop + 1))
			drop++;
		memmove(l->ver[drop], l->ver[drop + 1], (l->nver - drop - 1) * LINE);
		l->nver--;
		for (unsigned t = 0; t < MAX_THREADS; t++)
			if (l->flushed[t] > drop + 1)
				l->flushed[t]--;
	}
	if (l->nver == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 2;
		l->ver = realloc(l->ver, l->cap * sizeof(*l->ver));
		TU_ASSERT(l->ver, "out of memory");
	}
	memset(l->ver[l->nver], 0, LINE);
	memcpy(l->ver[l->nver], m->base + li * LINE, line_bytes(m, li));
	l->nver++;
	if (l->nver > sim.st.max_versions)
		sim.st.max_versions = l->nver;
}

/* A store touched line li: record a version unless the bytes did not actually change
 * (a store of identical bytes adds no new crash state). A store hook that arrives late,
 * after the line's flush but before any fence, clears the line's suspicion. */
static void record_store(struct mapping *m, size_t li)
{
	if (memcmp(last_version(m, li), m->base + li * LINE, line_bytes(m, li)) != 0) {
		push_version(m, li);
		m->lines[li]->streamed = 0;
	}
	if (m->lines[li])
		m->lines[li]->suspect = 0;
}

/* The calling thread's number in this simulation. */
static unsigned my_thread(void)
{
	static _Thread_local struct {
		uint64_t gen;
		unsigned t;
	} me;
	if (me.gen != sim.gen) {
		TU_ASSERT(sim.nthreads < MAX_THREADS, "crashsim: more than %u writing threads",
			  MAX_THREADS);
		me.gen = sim.gen;
		me.t = sim.nthreads++;
	}
	return me.t;
}

static void mark_flushed(struct mapping *m, size_t li)
{
	struct line *l = m->lines[li];
	if (l && l->nver)
		l->flushed[my_thread()] = l->nver;
}

static void mark_streamed(struct mapping *m, size_t li)
{
	mark_flushed(m, li);
	if (m->lines[li])
		m->lines[li]->streamed = 1;
}

/* A write-back of line li. If the live bytes differ from the last version we know of, the
 * library changed the line without calling the store hook first: take the snapshot the
 * hardware would write back, and suspect the line. If no store or nt hook covers it before
 * the next fence (see report_suspects), the library writes without telling the recorder,
 * and any crash state in between was invisible to the simulation. */
static void record_flush(struct mapping *m, size_t li)
{
	int app = m->app && m->app[li];
	if (app)
		m->app[li] = 0;
	if (memcmp(last_version(m, li), m->base + li * LINE, line_bytes(m, li)) != 0) {
		push_version(m, li);
		struct line *l = m->lines[li];
		l->streamed = 0;
		if (!l->suspect && !app) {
			l->suspect = (uint32_t)sim.st.fences + 1;
			if (m->nsuspects == m->cap_suspects) {
				m->cap_suspects = m->cap_suspects ? 2 * m->cap_suspects : 64;
				m->suspects = realloc(m->suspects,
						      m->cap_suspects * sizeof(*m->suspects));
				TU_ASSERT(m->suspects, "out of memory");
			}
			m->suspects[m->nsuspects++] = (uint32_t)li;
		}
	}
	mark_flushed(m, li);
}

/* At a fence: lines still suspect were changed without any store hook. With several
 * threads, another thread's store hook may still be waiting for the lock when this fence
 * comes, so a suspect gets a few fences of grace before it is reported. */
static void report_suspects(struct mapping *m)
{
	size_t kept = 0;
	for (size_t i = 0; i < m->nsuspects; i++) {
		struct line *l = m->lines[m->suspects[i]];
		if (!l || !l->suspect)
			continue;
		if (sim.nthreads > 1 && sim.st.fences < l->suspect + 8) {
			m->suspects[kept++] = m->suspects[i];
			continue;
		}
		l->suspect = 0;
		if (sim.o.verbose || sim.st.unrecorded_lines < 8)
			fprintf(stderr,
				"crashsim: line at offset %#zx of %s changed without a store hook "
				"before fence %llu\n",
				(size_t)m->suspects[i] * LINE, m->path,
				(unsigned long long)sim.st.fences);
		sim.st.unrecorded_lines++;
	}
	m->nsuspects = kept;
}

typedef void (*line_fn)(struct mapping *m, size_t li);

static void for_lines(const void *addr, size_t len, line_fn fn1, line_fn fn2)
{
	if (!len)
		return;
	struct mapping *m = find_mapping(addr);
	if (!m)
		return; /* not persistent memory we know: DRAM, another tool's mapping */
	size_t start = (size_t)((const uint8_t *)addr - m->base);
	size_t end = start + len > m->len ? m->len : start + len;
	for (size_t li = start / LINE; li * LINE < end; li++) {
		fn1(m, li);
		if (fn2)
			fn2(m, li);
	}
}

/* ---- fences: applying them and checking images before them -------------------------------- */

/* The calling thread's fence: what it flushed becomes durable. */
static void apply_fence(struct mapping *m)
{
	unsigned t = my_thread();
	for (size_t i = 0; i < m->npending;) {
		size_t li = m->pending[i];
		struct line *l = m->lines[li];
		uint32_t k = l->flushed[t];
		if (!k) {
			i++;
			continue;
		}
		memcpy(m->durable + li * LINE, l->ver[k - 1], line_bytes(m, li));
		m->page_nz[li * LINE / PAGE] = 1;
		memmove(l->ver[0], l->ver[k], (l->nver - k) * LINE);
		l->nver -= k;
		for (unsigned u = 0; u < MAX_THREADS; u++)
			l->flushed[u] = l->flushed[u] > k ? l->flushed[u] - k : 0;
		if (l->nver == 0) {
			/* swap-remove puts another line at index i: visit it next */
			pending_remove(m, l);
			free(l->ver);
			free(l);
			m->lines[li] = NULL;
		} else {
			i++;
		}
	}
}

static int write_all_at(int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = pwrite(fd, p, len, off);
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Writes the crash image: durable pages (sparsely), then the chosen version of each line. */
static int write_image(const struct mapping *m, const struct crashsim_image *img, const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)m->len) != 0)
		goto fail;
	for (size_t p = 0; p < m->npages;) {
		if (!m->page_nz[p]) {
			p++;
			continue;
		}
		size_t q = p;
		while (q < m->npages && m->page_nz[q])
			q++;
		size_t off = p * PAGE, end = q * PAGE > m->len ? m->len : q * PAGE;
		if (write_all_at(fd, m->durable + off, end - off, (off_t)off) != 0)
			goto fail;
		p = q;
	}
	for (size_t i = 0; i < m->npending; i++) {
		size_t li = m->pending[i];
		const struct line *l = m->lines[li];
		uint32_t c = img->kind == CRASHSIM_NONE ? 0
			     : img->kind == CRASHSIM_ALL ? l->nver
			     : img->kind == CRASHSIM_STREAMED ? (l->streamed ? l->nver : 0)
							 : sim.choices[img->index][i];
		if (c && write_all_at(fd, l->ver[c - 1], line_bytes(m, li), (off_t)(li * LINE)) != 0)
			goto fail;
	}
	return close(fd);
fail:
	close(fd);
	return -1;
}

/* The checking child's end: it removes its own image (the parent does too, but may be gone
 * by now), unless a failing one is to be kept, and exits with the verdict. */
static _Noreturn void child_exit(const struct crashsim_image *img, int bad)
{
	if (!bad || !sim.o.keep_failed) {
		char orig[300];
		snprintf(orig, sizeof(orig), "%s.orig", img->path);
		unlink(img->path);
		unlink(orig);
	}
	_exit(bad ? 1 : 0);
}

static noreturn void child_main(const struct mapping *m, const struct kid *k)
{
	const struct crashsim_image *img = &k->img;
	/* From here on the library must not call back into the simulator: the parent's copy of
	 * it is in the middle of a fence. */
	kr_set_recorder(NULL);
	alarm(sim.o.child_timeout);

	if (write_image(m, img, img->path) != 0) {
		fprintf(stderr, "crashsim: cannot write image %s: %s\n", img->path, strerror(errno));
		unlink(img->path);
		_exit(3);
	}
	if (sim.o.keep_failed) {
		/* recovery rewrites the image: keep the crash state itself next to it */
		char orig[300];
		snprintf(orig, sizeof(orig), "%s.orig", img->path);
		if (write_image(m, img, orig) != 0)
			_exit(3);
	}
	if (sim.o.exec_path) {
		if (sim.o.exec_prepare && sim.o.exec_prepare(sim.ctx, img) != 0)
			_exit(3);
		char *const argv[] = {(char *)sim.o.exec_path, (char *)sim.o.exec_arg, (char *)img->path,
				      (char *)img->ctx_path, (char *)k->fence_arg,
				      (char *)kind_name(img->kind), NULL};
		execv(sim.o.exec_path, argv);
		_exit(3);
	}
	if (sim.o.check_path)
		child_exit(img, sim.o.check_path(sim.ctx, img));
	kr_pool *pool = NULL;
	int rc = kr_pool_open(img->path, sim.o.open_flags, &pool);
	if (rc != KR_OK) {
		fprintf(stderr,
			"crashsim: fence %llu image %s#%u: kr_pool_open (recovery) failed: %d (%s): "
			"%s\n",
			(unsigned long long)img->fence, kind_name(img->kind), img->index, rc,
			kr_strerror(rc), kr_errmsg());
		_exit(2);
	}
	/* No kr_pool_close: the pool is thrown away, and a close would only add work. */
	child_exit(img, sim.check(sim.ctx, pool, img));
}

static void reap_kid(unsigned i)
{
	struct kid *k = &sim.kids[i];
	int status;
	while (waitpid(k->pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = -1;
			break;
		}
	}
	bool ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	sim.st.images++;
	if (!ok) {
		sim.st.failures++;
		if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2)
			sim.st.open_failures++;
		if (sim.reported++ < sim.o.max_reports) {
			char how[64];
			if (status == -1)
				snprintf(how, sizeof(how), "waitpid failed");
			else if (WIFSIGNALED(status))
				snprintf(how, sizeof(how), "child killed by signal %d%s",
					 WTERMSIG(status),
					 WTERMSIG(status) == SIGALRM ? " (timeout: hung?)" : "");
			else
				snprintf(how, sizeof(how), "child exit status %d",
					 WEXITSTATUS(status));
			fprintf(stderr,
				"crashsim: FAILED image at fence %llu kind %s#%u (choice seed %llu, "
				"%llu pending lines): %s%s%s\n",
				(unsigned long long)k->img.fence, kind_name(k->img.kind), k->img.index,
				(unsigned long long)k->img.choice_seed,
				(unsigned long long)k->img.pending_lines, how,
				sim.o.keep_failed ? "; image kept at " : "",
				sim.o.keep_failed ? k->path : "");
		}
	}
	if (ok || !sim.o.keep_failed) {
		char orig[300];
		unlink(k->path);
		unlink(k->ctx_path);
		snprintf(orig, sizeof(orig), "%s.orig", k->path);
		unlink(orig);
	}
	memmove(&sim.kids[i], &sim.kids[i + 1], (sim.nkids - i - 1) * sizeof(*sim.kids));
	sim.nkids--;
}

static void spawn_image(const struct mapping *m, enum crashsim_kind kind, unsigned index,
			uint64_t choice_seed)
{
	while (sim.nkids >= sim.o.jobs)
		reap_kid(0);
	struct kid *k = &sim.kids[sim.nkids];
	k->img = (struct crashsim_image){
		.fence = sim.st.fences,
		.kind = kind,
		.index = index,
		.choice_seed = choice_seed,
		.pending_lines = m->npending,
		.orig_path = m->path,
		.path = k->path,
		.ctx_path = k->ctx_path,
	};
	snprintf(k->path, sizeof(k->path), "%s/crashsim-%d-f%llu-%s%u.pool", sim.o.dir, (int)getpid(),
		 (unsigned long long)sim.st.fences, kind_name(kind), index);
	snprintf(k->ctx_path, sizeof(k->ctx_path), "%s.ctx", k->path);
	snprintf(k->fence_arg, sizeof(k->fence_arg), "%llu", (unsigned long long)sim.st.fences);
	unlink(k->path);
	/* Flush stdio so the child cannot inherit (and a careless child re-emit) our buffers. */
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		TU_FAIL("crashsim: fork: %s", strerror(errno));
	if (pid == 0)
		child_main(m, k);
	k->pid = pid;
	sim.nkids++;
}

/* Random image i's choice for each pending line (in m->pending order): how many of the
 * line's versions persisted, 0..nver. Returns whether the same choices made an image this
 * fence has already checked: none persisted (NONE), all of them (ALL), or an earlier random
 * image's. */
static bool choose(const struct mapping *m, unsigned i, uint64_t seed)
{
	if (m->npending > sim.cap_choices) {
		sim.cap_choices = m->npending;
		for (unsigned j = 0; j < sim.o.random_images; j++) {
			sim.choices[j] = realloc(sim.choices[j], sim.cap_choices * sizeof(uint32_t));
			TU_ASSERT(sim.choices[j], "out of memory");
		}
	}
	uint32_t *c = sim.choices[i];
	bool none = true, all = true;
	struct tu_rng rng;
	tu_rng_seed(&rng, seed);
	for (size_t k = 0; k < m->npending; k++) {
		uint32_t nver = m->lines[m->pending[k]]->nver;
		c[k] = (uint32_t)tu_rng_below(&rng, nver + 1);
		none &= c[k] == 0;
		all &= c[k] == nver;
	}
	if (none || all)
		return true;
	for (unsigned j = 0; j < i; j++)
		if (memcmp(sim.choices[j], c, m->npending * sizeof(*c)) == 0)
			return true;
	return false;
}

/* An image identical to one already checked at this fence is checked against the same
 * model (the parent holds the recorder's lock, so no fence completes in between), so it is
 * counted as a duplicate instead: with few pending lines most random choices repeat. */
static void check_images(const struct mapping *m)
{
	spawn_image(m, CRASHSIM_NONE, 0, 0);
	if (m->npending == 0)
		return; /* every other choice would produce the very same image */
	spawn_image(m, CRASHSIM_ALL, 0, 0);
	size_t streamed = 0;
	for (size_t k = 0; k < m->npending; k++)
		streamed += m->lines[m->pending[k]]->streamed;
	if (streamed && streamed < m->npending) /* else it is the NONE or the ALL image */
		spawn_image(m, CRASHSIM_STREAMED, 0, 0);
	for (unsigned i = 0; i < sim.o.random_images; i++) {
		uint64_t s = sim.o.seed ^ (sim.st.fences * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)i << 56);
		uint64_t seed = tu_splitmix64(&s);
		if (choose(m, i, seed))
			sim.st.duplicates++;
		else
			spawn_image(m, CRASHSIM_RANDOM, i, seed);
	}
}

/* ---- recorder callbacks ----------------------------------------------------------------- */

static bool page_is_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zero[PAGE];
	return memcmp(p, zero, n) == 0;
}

static void cb_map(void *ctx, void *base, size_t len, const char *path)
{
	pthread_mutex_lock(&sim.lock);
	struct mapping *m = calloc(1, sizeof(*m));
	TU_ASSERT(m, "out of memory");
	m->base = base;
	m->len = len;
	m->path = strdup(path ? path : "?");
	m->durable = malloc(len);
	m->nlines = (len + LINE - 1) / LINE;
	m->lines = calloc(m->nlines, sizeof(*m->lines));
	m->app = calloc(m->nlines, 1);
	m->npages = (len + PAGE - 1) / PAGE;
	m->page_nz = calloc(m->npages, 1);
	TU_ASSERT(m->path && m->durable && m->lines && m->page_nz, "out of memory");
	memcpy(m->durable, base, len);
	for (size_t p = 0; p < m->npages; p++) {
		size_t n = (p + 1) * PAGE > len ? len - p * PAGE : PAGE;
		m->page_nz[p] = !page_is_zero(m->durable + p * PAGE, n);
	}
	m->next = sim.maps;
	sim.maps = m;
	sim.st.maps++;
	pthread_mutex_unlock(&sim.lock);
}

static void free_mapping(struct mapping *m)
{
	for (size_t i = 0; i < m->npending; i++) {
		struct line *l = m->lines[m->pending[i]];
		free(l->ver);
		free(l);
	}
	free(m->pending);
	free(m->suspects);
	free(m->lines);
	free(m->app);
	free(m->page_nz);
	free(m->durable);
	free(m->path);
	free(m);
}

static void cb_unmap(void *ctx, void *base, size_t len)
{
	pthread_mutex_lock(&sim.lock);
	struct mapping **pp = &sim.maps;
	while (*pp && (*pp)->base != base)
		pp = &(*pp)->next;
	struct mapping *m = *pp;
	if (m) {
		/* A pool that is being unmapped must be entirely durable (kr_pool_close makes
		 * everything durable): any line whose live bytes differ from the durable image
		 * was lost at a power failure right after the close. */
		uint64_t dirty = 0;
		for (size_t li = 0; li < m->nlines; li++) {
			if (memcmp(m->durable + li * LINE, m->base + li * LINE, line_bytes(m, li))) {
				if (sim.o.verbose || dirty < 8)
					fprintf(stderr,
						"crashsim: line at offset %#zx of %s not durable at "
						"unmap (%u pending versions)\n",
						li * LINE, m->path,
						m->lines[li] ? m->lines[li]->nver : 0);
				dirty++;
			}
		}
		sim.st.dirty_at_unmap += dirty;
		*pp = m->next;
		free_mapping(m);
		sim.st.unmaps++;
	}
	pthread_mutex_unlock(&sim.lock);
}

static void cb_store(void *ctx, const void *addr, size_t len)
{
	pthread_mutex_lock(&sim.lock);
	sim.st.stores++;
	for_lines(addr, len, record_store, NULL);
	pthread_mutex_unlock(&sim.lock);
}

void crashsim_note_store(const void *addr, size_t len) { cb_store(NULL, addr, len); }

static void mark_app(struct mapping *m, size_t li)
{
	if (m->app)
		m->app[li] = 1;
}

void crashsim_note_persisted_store(const void *addr, size_t len)
{
	pthread_mutex_lock(&sim.lock);
	for_lines(addr, len, mark_app, NULL);
	pthread_mutex_unlock(&sim.lock);
}

static void cb_flush(void *ctx, const void *addr, size_t len)
{
	pthread_mutex_lock(&sim.lock);
	sim.st.flushes++;
	for_lines(addr, len, record_flush, NULL);
	pthread_mutex_unlock(&sim.lock);
}


static void cb_nt(void *ctx, const void *addr, size_t len)
{
	pthread_mutex_lock(&sim.lock);
	sim.st.nts++;
	for_lines(addr, len, record_store, mark_streamed);
	pthread_mutex_unlock(&sim.lock);
}

/* Whether this fence gets images (crashsim_opts.fence_every). */
static bool fence_picked(void)
{
	if (sim.o.fence_every <= 1)
		return true;
	uint64_t s = sim.o.seed ^ (sim.st.fences * 0xd1b54a32d192ed03ull);
	return tu_splitmix64(&s) % sim.o.fence_every == 0;
}

static void cb_fence(void *ctx)
{
	pthread_mutex_lock(&sim.lock);
	sim.st.fences++;
	bool imaged = sim.checks_on && (sim.check || sim.o.check_path || sim.o.exec_path) && fence_picked();
	sim.st.fences_imaged += imaged;
	for (struct mapping *m = sim.maps; m; m = m->next) {
		report_suspects(m);
		if (m->npending > sim.st.max_pending_lines)
			sim.st.max_pending_lines = m->npending;
		if (imaged)
			check_images(m);
		apply_fence(m);
	}
	pthread_mutex_unlock(&sim.lock);
}

static const struct kr_recorder recorder = {
	.map = cb_map,
	.unmap = cb_unmap,
	.store = cb_store,
	.flush = cb_flush,
	.fence = cb_fence,
	.nt = cb_nt,
};

/* ---- public API ------------------------------------------------------------------------------ */

/* If the test exits (a failed assertion, say) while children are still checking images,
 * wait for them so that their image files are removed. */
static void at_exit(void)
{
	if (sim.active && getpid() == sim.parent) {
		kr_set_recorder(NULL);
		while (sim.nkids)
			reap_kid(0);
	}
}

int crashsim_start(const struct crashsim_opts *opts, crashsim_check_fn check, void *ctx)
{
	/* Fences at the workload's own points only: a stale-map cleaner thread waking in the
	 * middle would make the images a race (pools clean at close and in kr_pool_check). */
	setenv("KERATIN_STALE_MS", "0", 1);
	pthread_mutex_lock(&sim.lock);
	if (sim.active) {
		pthread_mutex_unlock(&sim.lock);
		return -1;
	}
	sim.active = true;
	sim.parent = getpid();
	sim.gen++;
	sim.nthreads = 0;
	if (!sim.atexit_done) {
		atexit(at_exit);
		sim.atexit_done = true;
	}
	crashsim_opts_init(&sim.o);
	if (opts)
		sim.o = *opts;
	if (!sim.o.jobs)
		sim.o.jobs = 1;
	if (!sim.o.dir)
		sim.o.dir = tu_pool_dir();
	if (!sim.o.child_timeout)
		sim.o.child_timeout = 120;
	sim.check = check;
	sim.ctx = ctx;
	memset(&sim.st, 0, sizeof(sim.st));
	sim.checks_on = true;
	sim.reported = 0;
	sim.kids = calloc(sim.o.jobs, sizeof(*sim.kids));
	sim.choices = calloc(sim.o.random_images + 1, sizeof(*sim.choices));
	TU_ASSERT(sim.kids && sim.choices, "out of memory");
	sim.cap_choices = 0;
	sim.nkids = 0;
	pthread_mutex_unlock(&sim.lock);
	kr_set_recorder(&recorder);
	return 0;
}

void crashsim_enable_checks(bool on)
{
	pthread_mutex_lock(&sim.lock);
	sim.checks_on = on;
	pthread_mutex_unlock(&sim.lock);
}

void crashsim_drain(void)
{
	pthread_mutex_lock(&sim.lock);
	while (sim.nkids)
		reap_kid(0);
	pthread_mutex_unlock(&sim.lock);
}

void crashsim_get_stats(struct crashsim_stats *st)
{
	pthread_mutex_lock(&sim.lock);
	*st = sim.st;
	pthread_mutex_unlock(&sim.lock);
}

void crashsim_stop(struct crashsim_stats *st)
{
	kr_set_recorder(NULL);
	crashsim_drain();
	pthread_mutex_lock(&sim.lock);
	while (sim.maps) {
		struct mapping *m = sim.maps;
		sim.maps = m->next;
		free_mapping(m);
	}
	free(sim.kids);
	sim.kids = NULL;
	for (unsigned j = 0; j < sim.o.random_images; j++)
		free(sim.choices[j]);
	free(sim.choices);
	sim.choices = NULL;
	sim.active = false;
	const struct crashsim_stats *s = &sim.st;
	printf("crashsim: %llu fences (images at %llu of them), %llu crash images checked, %llu failed (%llu not openable), "
	       "%llu identical to one checked at the same fence; "
	       "%llu stores, %llu flushes, %llu nt copies; max %llu pending lines at a fence, max "
	       "%llu versions of a line; %llu unrecorded line changes, %llu lines not durable at "
	       "unmap\n",
	       (unsigned long long)s->fences, (unsigned long long)s->fences_imaged, (unsigned long long)s->images,
	       (unsigned long long)s->failures, (unsigned long long)s->open_failures,
	       (unsigned long long)s->duplicates, (unsigned long long)s->stores, (unsigned long long)s->flushes,
	       (unsigned long long)s->nts, (unsigned long long)s->max_pending_lines,
	       (unsigned long long)s->max_versions, (unsigned long long)s->unrecorded_lines,
	       (unsigned long long)s->dirty_at_unmap);
	fflush(stdout);
	if (st)
		*st = sim.st;
	pthread_mutex_unlock(&sim.lock);
}
