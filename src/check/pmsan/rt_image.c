/*
 * rt_image.c - rule 6 (missing-barrier): crash images cut at a fence, judged by the
 * user's check command. The fence hook (rt_hooks.c) calls it with the thread's record
 * (rt_track.c) of the stores since its previous fence, before the record forgets them.
 *
 * At a fence, the stores the thread made since its previous fence may have reached
 * persistent memory in any order (flushed or not: nothing is guaranteed before the fence
 * completes). For the pool of the last such store, each case of the chosen strategy keeps
 * some of those stores and reverts the others to their old bytes:
 *
 *   single        none kept; each store reverted alone; all kept          (n + 2 cases)
 *   accumulative  the oldest k reverted, k = 0..n                         (n + 1 cases)
 *   random        random_cases random subsets (seeded)
 *
 * Each image is a copy of the pool file as memory holds it now, with the epoch's bytes
 * rebuilt for the case, written to image_dir and handed to `sh -c 'CHECK "$0"' IMAGE` with
 * PMSAN_CHILD=1 in its environment (an instrumented checker stays quiet). Exit status 0
 * means consistent. The first failing image of a fence is reported at the last store
 * before that fence; the images that would repeat one already tried (same bytes) are
 * skipped, and at most max_cases are run per fence.
 *
 * Rebuilding: walking the stores from newest to oldest over a copy of the touched window,
 * each store's new bytes are what the window holds just before it is undone, and undoing
 * all of them leaves the window as it was at the previous fence. A case then starts from
 * that state and replays, oldest first, the new bytes of the stores it keeps, so a later
 * store's bytes win over an earlier one's wherever both are kept.
 *
 * Called with the exclusive lock held: no thread stores while the pool is copied.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmsan.h"

extern char **environ;

static uint64_t images_checked, fences_tested, images_failed, cases_capped, image_serial;

/* Sites already reported under rule 6: later fences after them are not tested again. */
static const struct pmsan_loc *reported[64];
static int nreported;

static uint64_t fnv_bytes(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Writes the image: the pool as memory holds it, with [wlo, whi) taken from window. */
static int write_image(const char *path, const struct pm_range *r, uintptr_t wlo, uintptr_t whi,
		       const unsigned char *window)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return -1;
	int rc = write_all(fd, (const void *)r->lo, wlo - r->lo);
	if (rc == 0)
		rc = write_all(fd, window, whi - wlo);
	if (rc == 0)
		rc = write_all(fd, (const void *)whi, r->hi - whi);
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

/* Runs the check command on an image; returns its exit status (128+signal if killed). */
static int run_check(const char *image)
{
	size_t n = strlen(pmsan_opt.check) + 16;
	char *cmd = pmsan_xalloc(n);
	snprintf(cmd, n, "%s \"$0\"", pmsan_opt.check);
	char *argv[] = {"sh", "-c", cmd, (char *)image, NULL};

	size_t ne = 0;
	while (environ[ne])
		ne++;
	char **env = pmsan_xalloc((ne + 2) * sizeof(*env));
	memcpy(env, environ, ne * sizeof(*env));
	env[ne] = "PMSAN_CHILD=1";

	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (pmsan_opt.verbose < 2) {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	}
	pid_t pid;
	int rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	free(cmd);
	if (rc != 0) {
		pmsan_log("pmsan: cannot run the check command: %s\n", strerror(rc));
		return -1;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The cases of the strategy, as rows of n keep-flags; returns the number of rows. */
static size_t make_cases(size_t n, unsigned char **rows)
{
	size_t max = pmsan_opt.max_cases, k = 0;
	size_t want = pmsan_opt.reorder == REORDER_SINGLE		? n + 2
		      : pmsan_opt.reorder == REORDER_ACCUMULATIVE ? n + 1
								  : (size_t)pmsan_opt.random_cases;
	if (want > max) {
		cases_capped += want - max;
		want = max;
	}
	unsigned char *m = pmsan_xalloc(want * n + 1);
	static uint64_t rng;
	if (rng == 0)
		rng = pmsan_opt.seed * 0x9e3779b97f4a7c15ull + 1;
	for (k = 0; k < want; k++) {
		unsigned char *row = m + k * n;
		switch (pmsan_opt.reorder) {
		case REORDER_SINGLE: /* none kept, each one reverted alone, all kept */
			for (size_t i = 0; i < n; i++)
				row[i] = k == 0 ? 0 : k == n + 1 ? 1 : i != k - 1;
			break;
		case REORDER_ACCUMULATIVE: /* the oldest k reverted */
			for (size_t i = 0; i < n; i++)
				row[i] = i >= k;
			break;
		default:
			for (size_t i = 0; i < n; i++)
				row[i] = xorshift(&rng) >> 63;
			break;
		}
	}
	*rows = m;
	return want;
}

static void describe_reverted(const struct pm_store **s, const unsigned char *row, size_t n,
			      char *buf, size_t cap)
{
	size_t len = 0, shown = 0, reverted = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n; i++) {
		if (row[i])
			continue;
		reverted++;
		if (shown < 3 && len < cap) {
			const char *f = strrchr(s[i]->loc->file, '/');
			len += (size_t)snprintf(buf + len, cap - len, "%s%s:%u", shown ? ", " : "",
						f ? f + 1 : s[i]->loc->file, s[i]->loc->line);
			shown++;
		}
	}
	if (reverted > shown && len < cap)
		snprintf(buf + len, cap - len, " and %zu more", reverted - shown);
}

void pmsan_reorder_at_fence(struct pm_thread *t, const struct pmsan_loc *fence)
{
	struct pm_store *all = t->stores.p;
	size_t total = t->stores.n;
	if (!pmsan_opt.check || total == 0)
		return;
	const struct pm_range *r = NULL;
	for (size_t i = total; i-- > 0 && !r;)
		if (all[i].old_off != SIZE_MAX)
			r = pmsan_range_find(all[i].addr, all[i].addr + all[i].size);
	if (r == NULL || r->kind == RANGE_KERATIN || r->path == NULL)
		return;

	/* The epoch's stores into this pool, oldest first, and their window. */
	const struct pm_store **s = pmsan_xalloc(total * sizeof(*s));
	size_t n = 0;
	uintptr_t wlo = UINTPTR_MAX, whi = 0;
	for (size_t i = 0; i < total; i++) {
		struct pm_store *x = &all[i];
		if (x->old_off == SIZE_MAX || x->addr < r->lo || x->addr + x->size > r->hi)
			continue;
		s[n++] = x;
		wlo = x->addr < wlo ? x->addr : wlo;
		whi = x->addr + x->size > whi ? x->addr + x->size : whi;
	}
	const struct pmsan_loc *site = n ? s[n - 1]->loc : NULL;
	for (int i = 0; i < nreported && site; i++)
		if (reported[i] == site)
			site = NULL;
	if (site == NULL) {
		free(s);
		return;
	}
	fences_tested++;

	/* New bytes of each store, and the window as it was at the previous fence. */
	size_t wn = whi - wlo;
	unsigned char *base = pmsan_xalloc(wn), *window = pmsan_xalloc(wn);
	size_t *new_off = pmsan_xalloc(n * sizeof(*new_off));
	size_t new_total = 0;
	for (size_t i = 0; i < n; i++)
		new_total += s[i]->size;
	unsigned char *newb = pmsan_xalloc(new_total ? new_total : 1);
	memcpy(base, (const void *)wlo, wn);
	size_t off = new_total;
	for (size_t i = n; i-- > 0;) {
		off -= s[i]->size;
		new_off[i] = off;
		memcpy(newb + off, base + (s[i]->addr - wlo), s[i]->size);
		memcpy(base + (s[i]->addr - wlo), t->arena + s[i]->old_off, s[i]->size);
	}

	unsigned char *rows;
	size_t ncases = make_cases(n, &rows);
	uint64_t *hashes = pmsan_xalloc((ncases ? ncases : 1) * sizeof(*hashes));
	size_t nh = 0;
	const char *dir = pmsan_opt.image_dir ? pmsan_opt.image_dir
			  : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
							  : "/tmp";
	for (size_t c = 0; c < ncases; c++) {
		const unsigned char *row = rows + c * n;
		memcpy(window, base, wn);
		for (size_t i = 0; i < n; i++)
			if (row[i])
				memcpy(window + (s[i]->addr - wlo), newb + new_off[i], s[i]->size);
		uint64_t h = fnv_bytes(window, wn);
		int dup = 0;
		for (size_t k = 0; k < nh && !dup; k++)
			dup = hashes[k] == h;
		if (dup)
			continue;
		hashes[nh++] = h;

		char path[4096];
		snprintf(path, sizeof(path), "%s/pmsan-%d-%llu.img", dir, (int)getpid(),
			 (unsigned long long)++image_serial);
		if (write_image(path, r, wlo, whi, window) != 0) {
			pmsan_log("pmsan: cannot write crash image %s: %s\n", path, strerror(errno));
			unlink(path);
			break;
		}
		int status = run_check(path);
		images_checked++;
		if (status == 0) {
			unlink(path);
			continue;
		}
		images_failed++;
		char rev[512];
		describe_reverted(s, row, n, rev, sizeof(rev));
		size_t kept = 0;
		for (size_t i = 0; i < n; i++)
			kept += row[i];
		const char *ff = strrchr(fence->file, '/');
		pmsan_report(PMSAN_R6, site, 0,
			     "the crash image cut at the fence on %s:%u fails the check (exit %d); "
			     "it keeps %zu of the %zu stores since the previous fence and reverts %s;"
			     " the last store before that fence is",
			     ff ? ff + 1 : fence->file, fence->line, status, kept, n,
			     rev[0] ? rev : "none");
		if (pmsan_opt.keep_images)
			pmsan_note("image kept: %s", path);
		else
			unlink(path);
		pmsan_note_stack();
		if (nreported < 64)
			reported[nreported++] = site;
		break;
	}
	free(hashes);
	free(rows);
	free(newb);
	free(new_off);
	free(window);
	free(base);
	free(s);
}

void pmsan_image_summary(FILE *out)
{
	if (!pmsan_opt.check)
		return;
	fprintf(out, "pmsan: crash images: %llu checked at %llu fences, %llu failed%s\n",
		  (unsigned long long)images_checked, (unsigned long long)fences_tested,
		  (unsigned long long)images_failed, cases_capped ? " (some fences capped by max_cases)" : "");
}
