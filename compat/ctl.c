/*
 * ctl.c - keratin-pmemobj's CTL namespace (pmemobj_ctl_get, _set, _exec): prefault.at_create
 * and prefault.at_open map the pool at create or open with every page touched
 * (KR_OPEN_PREFAULT); other knobs that programs commonly set are accepted; the statistics
 * read keratin's; any other name is refused with EINVAL and a message naming it
 * (docs/COMPAT.md lists each).
 *
 * Allocation classes: keratin's allocator has its own size classes, so a class an
 * application registers (heap.alloc_class.new.desc) is given an id and otherwise ignored;
 * allocations that name it are served by keratin's classes.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "compat.h"

static unsigned next_class = 128; /* the ids libpmemobj hands out for new classes */
static int stats_enabled;
int kp_prefault_at_create, kp_prefault_at_open; /* KR_OPEN_PREFAULT for create / open */

/* Knobs keratin acts on: an int each. */
static int *knob(const char *name)
{
	if (strcmp(name, "prefault.at_create") == 0)
		return &kp_prefault_at_create;
	if (strcmp(name, "prefault.at_open") == 0)
		return &kp_prefault_at_open;
	return NULL;
}

/* Knobs whose value keratin has no use for: set takes any value, get reads 0. */
static const char *const accepted[] = {
	"sds.at_create",
	"tx.debug.skip_expensive_checks",
	"tx.debug.verify_user_buffers",
	"tx.cache.size",
	"tx.cache.threshold",
	"tx.post_commit.queue_depth",
	"tx.post_commit.worker",
	"heap.arenas_assignment_type",
	"copy_on_write.at_open",
};

static int is_accepted(const char *name)
{
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
		if (strcmp(name, accepted[i]) == 0)
			return 1;
	return 0;
}

static int unsupported(const char *how, const char *name)
{
	return kp_err(EINVAL, "pmemobj_ctl_%s: \"%s\" is not supported by keratin-pmemobj", how,
		      name ? name : "(null)");
}

PMEMOBJ_API int pmemobj_ctl_get(PMEMobjpool *pop, const char *name, void *arg)
{
	if (!name || !arg)
		return unsupported("get", name);
	if (knob(name)) {
		*(int *)arg = *knob(name);
		return 0;
	}
	if (is_accepted(name)) {
		*(int *)arg = 0;
		return 0;
	}
	if (strcmp(name, "stats.enabled") == 0) {
		*(enum pobj_stats_enabled *)arg =
			stats_enabled ? POBJ_STATS_ENABLED_TRANSIENT : POBJ_STATS_DISABLED;
		return 0;
	}
	struct kp_pool *p = kp_pool_of(pop);
	struct kr_pool_stat st;
	if (p && kr_pool_stat(p->kr, &st) == KR_OK) {
		if (strcmp(name, "stats.heap.curr_allocated") == 0) {
			*(uint64_t *)arg = st.used_bytes;
			return 0;
		}
		if (strcmp(name, "heap.size.granularity") == 0) {
			*(uint64_t *)arg = 0;
			return 0;
		}
	}
	return unsupported("get", name);
}

PMEMOBJ_API int pmemobj_ctl_set(PMEMobjpool *pop, const char *name, void *arg)
{
	(void)pop;
	if (!name)
		return unsupported("set", name);
	if (knob(name) && arg) {
		*knob(name) = *(int *)arg != 0;
		return 0;
	}
	if (is_accepted(name))
		return 0;
	if (strcmp(name, "stats.enabled") == 0 && arg) {
		stats_enabled = *(enum pobj_stats_enabled *)arg != POBJ_STATS_DISABLED;
		return 0;
	}
	if (strcmp(name, "heap.alloc_class.new.desc") == 0 && arg) {
		struct pobj_alloc_class_desc *d = arg;
		if (d->unit_size == 0)
			return kp_err(EINVAL, "allocation class with unit size 0");
		if (next_class > 254)
			return kp_err(EINVAL, "no allocation class ids left");
		d->class_id = __atomic_fetch_add(&next_class, 1, __ATOMIC_RELAXED);
		return 0;
	}
	return unsupported("set", name);
}

PMEMOBJ_API int pmemobj_ctl_exec(PMEMobjpool *pop, const char *name, void *arg)
{
	(void)pop, (void)arg;
	return unsupported("exec", name);
}
