/*
 * rt_main.c - the top of the pmsan runtime: its start before main and its end at exit.
 *
 * The runtime's files stand on floors, each calling only down:
 *
 *   rt_main.c    start (options, the summary's crash-image line) and the exit check
 *   rt_hooks.c   the hooks for stores, loads, flushes, fences, mappings and copies
 *   rt_tx.c      transactions and allocations, rules 2-5    rt_image.c  crash images, rule 6
 *                rt_kr.c  keratin's pools, debug views, frees and allocations (rule 4)
 *   rt_track.c   mappings, freed objects, per-thread records, rule 1
 *   ivset.c      range sets and growable arrays
 *   rt_common.c  options, allocation, reports
 *
 * At exit every live thread's unflushed stores are checked, the summary line is printed (if
 * a persistent mapping was seen, anything was reported, or verbose is set), and any
 * violation turns the exit status into `exitcode`.
 */
#include <stdlib.h>
#include <unistd.h>

#include "pmsan.h"

/* Named for the runtime, so that the stack of a report at exit starts at the exit call. */
static void pmsan_fini(void)
{
	if (!pmsan_active)
		return;
	pmsan_check_exit();
	if (pmsan_report_summary(pmsan_used || pmsan_opt.verbose))
		_exit(pmsan_opt.exitcode);
}

__attribute__((constructor(101))) static void pmsan_ctor(void)
{
	pmsan_init();
	if (!pmsan_active)
		return;
	pmsan_on_summary(pmsan_image_summary);
	atexit(pmsan_fini);
}
