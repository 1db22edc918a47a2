/*
 * crashsim.h - the crash simulator: a persistence recorder (kr_set_recorder) that models
 * which bytes of a pool would be on the media if power failed at any store fence, and
 * checks recovery from many such crash images.
 *
 * Model (x86 with whole-cache-line persistence atomicity). For every pool mapping the
 * simulator keeps a durable image (the mapping's bytes when it was mapped) and, per
 * 64-byte line, the list of pending versions: a snapshot of the live line after each store
 * or non-temporal copy that touched it, plus a "flushed up to version k" mark set by a
 * flush (an nt is a store plus a flush). A fence makes version k of every flushed line
 * durable and drops versions <= k; lines stored but not flushed keep their versions (they
 * may still reach the media by eviction).
 *
 * Just BEFORE each fence takes effect, a crash image is the durable image plus, for each
 * line with pending versions, either none of them or one of them (stores to one line
 * persist in program order, so every version is a valid state of the line). For each fence
 * the simulator checks the image with nothing pending persisted, the one with everything
 * persisted, and R random choices (one that repeats an image already checked at this fence
 * is counted as a duplicate, not checked again); a sanitizer build does this at a third of
 * the fences (fence_every). Each image is checked in a fork()ed child, so the
 * library is never re-entered while it is in the middle of a commit: the child removes the
 * recorder, writes the image to a new file, kr_pool_open()s it (recovery runs), calls the
 * user's check callback and exits with its verdict. The parent counts images and failures.
 *
 * Threads: a flush and a fence act per thread, as on x86 (a fence orders only the flushes
 * of its own thread); images are taken before every thread's fences. The other threads
 * run on meanwhile, but the model knows only what the recorder's lock has let them report,
 * so no fence of theirs completes while an image is taken: a workload that updates its
 * model after each fence returns sees, in the child, no acknowledgement the image lacks.
 * A child forked from several running threads must not allocate (see exec_path below):
 * such workloads have the child hand the image to a fresh process.
 *
 * Use: crashsim_start() before opening the pool, run the workload, close the
 * pool, crashsim_stop(). The check callback runs in the child with the memory of the
 * parent as it was at the fence, so it can consult the workload's model directly; it must
 * report through stderr (stdout is not flushed by the child).
 */
#ifndef KR_CRASHSIM_H
#define KR_CRASHSIM_H

#include <stdbool.h>
#include <stdint.h>

#include "keratin.h"

enum crashsim_kind {
	CRASHSIM_NONE = 0, /* no pending line persisted */
	CRASHSIM_ALL = 1,  /* the last version of every pending line persisted */
	CRASHSIM_RANDOM = 2,
	/* every pending line whose last version was streamed (non-temporal stores, the log's
	 * way) persisted, and no other: a log entry durable before any write-back that the
	 * same fence covers (home applies, parity patches) */
	CRASHSIM_STREAMED = 3,
};

struct crashsim_image {
	uint64_t fence;         /* 1-based number of the fence the image was taken at */
	enum crashsim_kind kind;
	unsigned index;         /* which random image of this fence */
	uint64_t choice_seed;   /* seed of the random choices (RANDOM only) */
	uint64_t pending_lines; /* lines that had pending versions */
	const char *orig_path;  /* path of the pool the image was taken from */
	const char *path;       /* path of the image file */
	const char *ctx_path;   /* with exec_path: where exec_prepare leaves what the check needs */
};

/* Returns 0 if the recovered pool is acceptable, nonzero (after printing why to stderr)
 * otherwise. Runs in a forked child. */
typedef int (*crashsim_check_fn)(void *ctx, kr_pool *pool, const struct crashsim_image *img);

/* For files that are not pools (a single-trip hash map): the check opens the image itself
 * (img->path) and returns as crashsim_check_fn does. Runs in a forked child. */
typedef int (*crashsim_path_check_fn)(void *ctx, const struct crashsim_image *img);

struct crashsim_opts {
	crashsim_path_check_fn check_path; /* set: images are not pools; check is not called */
	unsigned random_images; /* R: random images per fence (default 2) */
	/* Images at one fence in N, which fences picked pseudo-randomly from the seed (so a
	 * workload's repeating cycle of fences is still met at every position). Default 1; 3
	 * in a sanitizer build, which is there for memory and thread errors along the recovery
	 * paths, met as well at a third of the fences; KR_CRASHSIM_EVERY overrides both. */
	unsigned fence_every;
	uint64_t seed;          /* seed of the random images */
	unsigned jobs;          /* checking children alive at once (default 2) */
	unsigned open_flags;    /* flags for kr_pool_open of images (default tu_map_flags()) */
	const char *dir;        /* where image files go (default tu_pool_dir()) */
	bool keep_failed;       /* keep failing images (and their pre-recovery copy) */
	unsigned child_timeout; /* seconds before a hung child is killed (default 120) */
	unsigned max_reports;   /* failures described on stderr (default 20) */
	bool verbose;           /* print every unmap anomaly, not just counts */
	/* Several writing threads: a child forked from them must not allocate, since another
	 * thread may have held an allocator lock at the fork (glibc's malloc handles this;
	 * ASan's allocator does only from LLVM 18, and Debian 12's GCC is older). With
	 * exec_path set, the child writes the image, calls exec_prepare (async-signal-safe
	 * calls only: write(2) what the check needs to img->ctx_path), then executes
	 * exec_path with the arguments exec_arg, img->path, img->ctx_path, the fence number
	 * and the image kind; that program's exit status is the verdict (0: good). */
	const char *exec_path;
	const char *exec_arg;
	int (*exec_prepare)(void *ctx, const struct crashsim_image *img);
};
/* Fills in the defaults; KR_CRASHSIM_KEEP=1 in the environment sets keep_failed,
 * KR_CRASHSIM_EVERY=N fence_every. */
void crashsim_opts_init(struct crashsim_opts *o);

struct crashsim_stats {
	uint64_t maps, unmaps;
	uint64_t stores, flushes, nts, fences;
	uint64_t images;             /* crash images checked */
	uint64_t fences_imaged;      /* fences at which images were taken (fence_every) */
	uint64_t failures;           /* images whose check failed (or whose child died) */
	uint64_t open_failures;      /* of those, images kr_pool_open refused */
	uint64_t duplicates;         /* random images identical to one checked at the same
				      * fence: counted here, not checked again */
	uint64_t max_pending_lines;  /* most lines pending at one fence */
	uint64_t max_versions;       /* most versions one line had pending */
	uint64_t unrecorded_lines;   /* flushed lines whose bytes changed without a store hook */
	uint64_t dirty_at_unmap;     /* lines whose live bytes were not durable at unmap */
};

/* Installs the recorder. Returns 0, or -1 if a simulation is already running. */
int crashsim_start(const struct crashsim_opts *opts, crashsim_check_fn check, void *ctx);
/* Temporarily stops (false) or resumes (true) taking crash images; tracking continues. */
void crashsim_enable_checks(bool on);
/* The application (not the library) stored len bytes at addr, straight into a pool
 * mapping (in-place writes, libpmemobj's model): from now on the new bytes may reach the
 * media by eviction, so random images persist them or not. Call after the stores. */
void crashsim_note_store(const void *addr, size_t len);
/* The application stored len bytes at addr and makes them durable itself, with a persist
 * (libpmemobj's pmemobj_persist, keratin's kr_stored_persist): the new bytes reach the media
 * when the library's flush takes them, and that flush is not a change the library made
 * without its store hook. Call after the stores. */
void crashsim_note_persisted_store(const void *addr, size_t len);
/* Waits for every checking child. */
void crashsim_drain(void);
void crashsim_get_stats(struct crashsim_stats *st);
/* Removes the recorder, waits for the children, prints a summary, frees everything. */
void crashsim_stop(struct crashsim_stats *st);

#endif
