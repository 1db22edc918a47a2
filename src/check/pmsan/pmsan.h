/*
 * pmsan.h - the pmsan runtime's internal interface: the shared types and the functions
 * each of its files offers to the files above it, bottom up (rt_main.c draws the floors):
 * rt_common.c options, allocation and reports; ivset.c range sets; rt_track.c mappings,
 * freed objects, per-thread records and rule 1; rt_tx.c transactions and rules 2-5;
 * rt_image.c crash images and rule 6. rt_kr.c (keratin's pools and transactions),
 * rt_hooks.c and rt_main.c offer nothing to the others.
 *
 * The hooks the instrumented program calls (__pmsan_*) are declared where they are
 * defined; their signatures follow the pass (pass.cpp) and hooks.def.
 *
 * Locking (details at the top of rt_track.c, rt_tx.c and rt_hooks.c): each thread's record of stores
 * and flushes, and each transaction, has its own mutex, so threads record at once without
 * sharing a cache line; the table of mappings and the freed-object bitmaps are read
 * without locks. The thesis's global reader/writer lock survives only for crash images:
 * with a check command set, every store and flush holds its shared side, and the fence
 * that cuts images its exclusive side, so that no thread stores while a pool is copied.
 */
#ifndef PMSAN_H
#define PMSAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The runtime's numbered invariants (rt_track.c, rt_tx.c) are checked in the runtime the
 * test cases link (libpmsan_rt_checked.a, built with KR_DEBUG_INVARIANTS); a broken one
 * prints "pmsan: invariant ..." and aborts. */
#define KR_INVARIANT_FAILED pmsan_invariant_failed
#include "invariant.h"
#ifdef KR_DEBUG_INVARIANTS
#include <errno.h>
/* Whether m is held (by the caller: no check runs while another thread may hold it). */
static inline int pmsan_held(pthread_mutex_t *m)
{
	return pthread_mutex_trylock(m) == EBUSY;
}
#endif

/* A source position, emitted as a constant by the pass for each instrumented site. */
struct pmsan_loc {
	const char *file;
	const char *func;
	uint32_t line;
	uint32_t col;
};

/* __pmsan_store flags (the pass has the same values). */
enum {
	PMSAN_F_CONT = 1,   /* another piece of the previous store's statement */
	PMSAN_F_NT = 2,     /* non-temporal store */
	PMSAN_F_ATOMIC = 4, /* atomic read-modify-write */
	PMSAN_F_HASVAL = 8, /* the value argument is the 8 bytes stored */
	PMSAN_F_DIRECT = 16, /* (runtime only) a library's persisting copy: outside any
			      * transaction even inside one, it is made durable at once */
	PMSAN_F_MERGED = 32, /* (runtime only) a record holding a run of a loop's stores */
};

/* What a report is about: the rules, then the warnings. */
enum pmsan_kind {
	PMSAN_R1,  /* missing-flush */
	PMSAN_R1A, /* flush-not-pm */
	PMSAN_R1B, /* partial-flush */
	PMSAN_R1C, /* missing-fence */
	PMSAN_R2,  /* unlogged-write */
	PMSAN_R3,  /* uninitialized-alloc */
	PMSAN_R4,  /* use-after-free */
	PMSAN_R5,  /* logging-race */
	PMSAN_R6,  /* missing-barrier */
	PMSAN_W_FLUSH, /* redundant-flush */
	PMSAN_W_FENCE, /* redundant-fence */
	PMSAN_W_VPTR,  /* volatile-pointer */
	PMSAN_NKINDS
};
#define PMSAN_NRULES PMSAN_W_FLUSH

enum pmsan_reorder { REORDER_NONE, REORDER_SINGLE, REORDER_ACCUMULATIVE, REORDER_RANDOM };

/* The options, filled from PMSAN_OPTIONS through the table in rt_common.c (the one place
 * that names them, gives their defaults and describes them). */
struct pmsan_options {
	int exitcode;
	int reorder;          /* enum pmsan_reorder */
	const char *check;    /* check command, or NULL */
	const char *log_path; /* NULL: stderr */
	int halt_on_error;
	const char *suppressions;
	int warnings;         /* report the redundant-flush/fence and volatile-pointer warnings */
	int stack;            /* print a stack under reports */
	int random_cases;     /* images per fence for reorder=random */
	int max_cases;        /* images per fence at most */
	uint64_t seed;        /* reorder=random */
	const char *image_dir;
	int keep_images;      /* keep the failing images */
	int verbose;
	int help;             /* list the options at start-up */
};

/* ---- rt_common.c: options, allocation, reports. */
extern struct pmsan_options pmsan_opt;
extern int pmsan_active; /* 0 in a check command's process: every hook returns */

/* Reads the options, once; the first hook to run may call it before the constructor. */
void pmsan_init(void);
/* One report: printed once per (kind, file, line), with the process and thread. here: it
 * was found at the offending instruction, whose stack is printed under it; otherwise it
 * was found later, at a check point (a fence, a commit, an unmap, exit), and the caller
 * names that point with pmsan_note and then prints its stack with pmsan_note_stack. */
void pmsan_report(enum pmsan_kind kind, const struct pmsan_loc *loc, int here,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The stack of the check point, under the last report if it was printed. */
void pmsan_note_stack(void);
/* A continuation line under the last report (indented), if it was printed. */
void pmsan_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pmsan_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *pmsan_xalloc(size_t n);
void *pmsan_xrealloc(void *p, size_t n);
extern const struct pmsan_loc pmsan_loc_exit, pmsan_loc_unknown;
/* A function that prints further summary lines under the counts (one at most). */
void pmsan_on_summary(void (*tail)(FILE *out));
/* Prints the summary if always or a violation was reported; returns the violations. */
unsigned pmsan_report_summary(int always);

/* ---- ivset.c: a set of byte ranges [lo, hi), kept sorted, disjoint and coalesced. */
struct ivset {
	uintptr_t *lo, *hi;
	size_t n, cap;
};
void ivset_add(struct ivset *s, uintptr_t lo, uintptr_t hi);
void ivset_sub(struct ivset *s, uintptr_t lo, uintptr_t hi);
int ivset_covers(const struct ivset *s, uintptr_t lo, uintptr_t hi);
int ivset_overlaps(const struct ivset *s, uintptr_t lo, uintptr_t hi);
/* The first range of s that overlaps [lo, hi), clipped to it; 0 if none. */
int ivset_first_overlap(const struct ivset *s, uintptr_t lo, uintptr_t hi, uintptr_t *olo,
			uintptr_t *ohi);
void ivset_clear(struct ivset *s);
void ivset_free(struct ivset *s);

/* A set of bytes for many small scattered ranges (ivset.c). */
struct byteset {
	struct ivset big;   /* ranges of more than 4 KiB */
	uintptr_t *keys;    /* line index + 1, 0 = empty slot */
	uint64_t *masks;    /* bytes of the line in the set */
	size_t n, cap;
};
void byteset_add(struct byteset *s, uintptr_t lo, uintptr_t hi);
int byteset_covers(struct byteset *s, uintptr_t lo, uintptr_t hi);
int byteset_overlaps(struct byteset *s, uintptr_t lo, uintptr_t hi);
/* The number of bytes of [lo, hi) not in s. */
uint64_t byteset_count_missing(struct byteset *s, uintptr_t lo, uintptr_t hi);
void byteset_free(struct byteset *s);

/* A growable array of fixed-size elements. */
struct vec {
	void *p;
	size_t n, cap, elem;
};
void *vec_push(struct vec *v);
void vec_clear(struct vec *v);
void vec_free(struct vec *v);
#define VEC_AT(v, type, i) (((type *)(v)->p)[i])

/* ---- rt_track.c: mappings, per-thread records, rule 1. */
enum range_kind { RANGE_PMEM, RANGE_PMEMOBJ, RANGE_KERATIN };
struct pm_range {
	uintptr_t lo, hi; /* atomically written; lo == hi: a dead slot */
	enum range_kind kind;
	char *path; /* the file behind it (crash images copy it) */
	_Atomic unsigned char *freed; /* freed-object bitmap (rt_track.c), or NULL */
};

/* A store since the thread's last fence. */
struct pm_store {
	uintptr_t addr;
	uint64_t size;
	uint64_t seq;
	const struct pmsan_loc *loc;
	size_t group;   /* index of the first piece of its statement */
	size_t old_off; /* its old bytes in the thread's arena (crash images), or SIZE_MAX */
	unsigned flags;
};

struct pm_flush {
	uintptr_t lo, hi;
	uint64_t seq;
	const struct pmsan_loc *loc;
};

struct pm_tx;

struct pm_thread {
	struct pm_thread *next; /* registry */
	pthread_mutex_t lock;   /* guards the record below (rt_track.c) */
	uint64_t clock;         /* orders this thread's stores and flushes */
	int tid;                /* small number, for reports */
	int alive;
	/* Since the last fence of this thread (outside transactions). */
	struct vec stores;   /* struct pm_store */
	struct vec flushes;  /* struct pm_flush */
	struct ivset dirty;  /* stored and not flushed since */
	unsigned char *arena; /* old bytes of the stores */
	size_t arena_n, arena_cap;
	int nt_pending;      /* a non-temporal store waits for the fence */
	/* libpmemobj transactions */
	int depth;
	struct pm_tx *tx;
	int in_alloc; /* inside an atomic allocation call: its constructor may touch memory
		       * still in `freed`, and its fences do not count (rt_hooks.c) */
	/* for the volatile-pointer warning */
	uintptr_t stack_lo, stack_hi;
};

extern struct pm_range pmsan_ranges[];
extern uintptr_t __pmsan_lo, __pmsan_hi;
extern int pmsan_used;
/* Volatile areas (pmemobj_volatile): mark [lo, hi) transient (on) or persistent again
 * (off); covers: every byte of [lo, hi) is transient, so no rule applies to a store. */
void pmsan_volatile_mark(uintptr_t lo, uintptr_t hi, int on);
int pmsan_volatile_covers(uintptr_t lo, uintptr_t hi);
/* Freed objects (rule 4): mark [lo, hi) freed (on) or live again (off); test a range. */
void pmsan_freed_mark(uintptr_t lo, uintptr_t hi, int on);
int pmsan_freed_test(const struct pm_range *r, uintptr_t lo, uintptr_t hi);

/* The calling thread's record, made on its first call. */
struct pm_thread *pmsan_self(void);
/* The calling thread's record, or NULL if it has none yet. */
struct pm_thread *pmsan_self_if_any(void);
/* "the stack" or "the heap" if a lies in t's stack or the brk heap, for a report; or NULL. */
const char *pmsan_volatile_place(const struct pm_thread *t, uintptr_t a);
void pmsan_range_add(uintptr_t lo, uintptr_t hi, enum range_kind kind, const char *path);
void pmsan_range_remove(uintptr_t lo, const struct pmsan_loc *loc);
const struct pm_range *pmsan_range_find(uintptr_t lo, uintptr_t hi);
/* Records a store into persistent memory (the caller knows it is one). */
void pmsan_record_store(struct pm_thread *t, uintptr_t addr, uint64_t size,
			const struct pmsan_loc *loc, unsigned flags);
void pmsan_record_flush(struct pm_thread *t, uintptr_t lo, uintptr_t hi,
			const struct pmsan_loc *loc);
void pmsan_record_fence(struct pm_thread *t, const struct pmsan_loc *loc);
/* Rule 1 over a thread's unflushed stores within [lo, hi); forgets them. */
void pmsan_check_unflushed(struct pm_thread *t, uintptr_t lo, uintptr_t hi, const char *when,
			   const struct pmsan_loc *at);
void pmsan_forget_epoch(struct pm_thread *t);
/* Every thread's unflushed bytes in [lo, hi) are nobody's now (a cancelled reservation):
 * no rule 1 report for them. */
void pmsan_forget_unflushed(uintptr_t lo, uintptr_t hi);
void pmsan_check_exit(void);
/* The end of an atomic allocation: the allocator's own fence, after the constructor. */
void pmsan_alloc_published(struct pm_thread *t, const struct pmsan_loc *loc);
extern struct pm_thread *pmsan_threads;
extern pthread_mutex_t pmsan_registry_lock;
/* Some object was freed (or is pending free): loads need checking from now on. The pass
 * tests it inline before calling __pmsan_load. */
extern _Atomic int __pmsan_watch_loads;

/* ---- rt_tx.c: transactions and allocations (rules 2-5). */
/* Store/load checks of the object model; return 1 if the store belongs to a transaction
 * (it then takes no part in rule 1 and crash images). */
int pmsan_tx_store(struct pm_thread *t, uintptr_t addr, uint64_t size,
		   const struct pmsan_loc *loc);
void pmsan_check_freed(struct pm_thread *t, const struct pm_range *r, uintptr_t a,
		       uint64_t size, const struct pmsan_loc *loc, const char *access);
/* Whether t's transaction (t->tx != NULL) has a free pending in [lo, hi). */
int pmsan_tx_pending(const struct pm_thread *t, uintptr_t lo, uintptr_t hi);

/* ---- rt_image.c: crash images and rule 6. */
void pmsan_reorder_at_fence(struct pm_thread *t, const struct pmsan_loc *fence);
/* The summary's crash-image line (rt_main.c hands it to pmsan_on_summary). */
void pmsan_image_summary(FILE *out);

#endif
