/*
 * pool.c - keratin-pmemobj's pools: create, open, close, check, the root object, object
 * queries, and the version calls. The registry of open pools is registry.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"

PMEMOBJ_API PMEMobjpool *pmemobj_pool_by_ptr(const void *addr)
{
	struct kp_pool *p = kp_pool_by_addr(addr);
	return p ? (PMEMobjpool *)p->base : NULL;
}

PMEMOBJ_API PMEMobjpool *pmemobj_pool_by_oid(PMEMoid oid)
{
	struct kp_pool *p = oid.off ? kp_pool_by_uuid(oid.pool_uuid_lo) : NULL;
	return p ? (PMEMobjpool *)p->base : NULL;
}

#undef pmemobj_direct
PMEMOBJ_API void *pmemobj_direct(PMEMoid oid)
{
	PMEMobjpool *pop = pmemobj_pool_by_oid(oid);
	return pop ? (char *)pop + oid.off : NULL;
}

PMEMOBJ_API PMEMoid pmemobj_oid(const void *addr)
{
	struct kp_pool *p = kp_pool_by_addr(addr);
	kr_oid oid;
	size_t off;
	if (!p || kp_locate(p, NULL, addr, 1, &oid, &off, NULL) != KR_OK || off != 0)
		return OID_NULL;
	return kp_oid(p, oid);
}

/* Size and type of an object, as the thread sees the pool: an object its open transaction
 * allocated counts (libpmemobj's programs test OID_INSTANCEOF on one before the commit). */
static int object_info(PMEMoid oid, size_t *size, uint32_t *type)
{
	struct kp_pool *p = oid.off ? kp_pool_by_uuid(oid.pool_uuid_lo) : NULL;
	if (!p)
		return 0;
	kr_tx *tx = kp_tx_current(p);
	if (tx)
		return kr_tx_owner(tx, oid.off, size, type) == oid.off;
	*size = kr_size(p->kr, oid.off);
	*type = kr_type(p->kr, oid.off);
	return *size != 0;
}

/* Exact: keratin keeps the size asked for (libpmemobj rounds up to its block size). */
PMEMOBJ_API size_t pmemobj_alloc_usable_size(PMEMoid oid)
{
	size_t size;
	uint32_t type;
	return object_info(oid, &size, &type) ? size : 0;
}

/* The root object is made with type POBJ_ROOT_TYPE_NUM (root_get), so its own type
 * answers: no look at the superblock on this path, which programs take at every node they
 * pass (OID_INSTANCEOF). */
PMEMOBJ_API uint64_t pmemobj_type_num(PMEMoid oid)
{
	size_t size;
	uint32_t type;
	return object_info(oid, &size, &type) ? type : 0;
}

/* ---------------------------------------------------------------------------------------
 * Create, open, close, check
 * ------------------------------------------------------------------------------------- */

/* A libpmemobj pool opened by mistake is told apart (kr_file_kind knows every magic). */
static int is_libpmemobj_pool(const char *path)
{
	enum kr_file_kind kind;
	return kr_file_kind(path, &kind) == KR_OK && kind == KR_FILE_LIBPMEMOBJ;
}

/* Open flags from the environment: libpmemobj's own switch for memory that is not pmem
 * (PMEM_IS_PMEM_FORCE=1) means keratin's emulated mode. */
static unsigned env_flags(void)
{
	const char *f = getenv("PMEM_IS_PMEM_FORCE");
	return f && *f == '1' ? KR_OPEN_FORCE_PMEM : 0;
}

static struct kp_pool *pool_attach(kr_pool *kr, const char *path)
{
	struct kp_pool *p = calloc(1, sizeof(*p));
	struct kr_pool_stat st;
	if (!p || kr_pool_stat(kr, &st) != KR_OK) {
		free(p);
		return NULL;
	}
	p->kr = kr;
	p->base = kr_pool_base(kr);
	p->size = kr_pool_mapped_size(kr);
	memcpy(&p->uuid_lo, st.uuid, sizeof(p->uuid_lo));
	p->declare_max = st.lane_size / 4;
	p->stale_map = st.stale_map;
	if (p->uuid_lo == 0) /* 0 means "no pool" in an oid */
		p->uuid_lo = 1;
	pthread_mutex_init(&p->root_lock, NULL);
	p->path = strdup(path);
	return p;
}

static void pool_free(struct kp_pool *p)
{
	pthread_mutex_destroy(&p->root_lock);
	free(p->path);
	free(p);
}

PMEMOBJ_API PMEMobjpool *pmemobj_create(const char *path, const char *layout, size_t poolsize,
					mode_t mode)
{
	if (!path)
		return kp_err(EINVAL, "pmemobj_create: path is NULL"), NULL;
	if (layout && strlen(layout) >= PMEMOBJ_MAX_LAYOUT)
		return kp_err(EINVAL, "layout name longer than %d bytes", (int)PMEMOBJ_MAX_LAYOUT - 1), NULL;
	struct stat sb;
	int exists = stat(path, &sb) == 0;
	if (poolsize == 0) {
		/* libpmemobj: 0 means "the existing file, whole". keratin makes the file itself,
		 * so an existing one of zeros (a freshly allocated file) is replaced. */
		if (!exists)
			return kp_err(ENOENT, "pool size 0 but \"%s\" does not exist", path), NULL;
		poolsize = (size_t)sb.st_size;
		if (is_libpmemobj_pool(path))
			return kp_err(EEXIST, "file %s already exists (a libpmemobj pool)", path), NULL;
		unlink(path);
	} else if (exists) {
		return kp_err(EEXIST, "file %s already exists", path), NULL;
	}
	if (poolsize < PMEMOBJ_MIN_POOL)
		return kp_err(EINVAL, "size %zu smaller than %zu", poolsize, (size_t)PMEMOBJ_MIN_POOL), NULL;
	struct kr_create_opts o = KR_CREATE_OPTS_INIT;
	o.size = poolsize;
	o.flags = env_flags() | (kp_prefault_at_create ? KR_OPEN_PREFAULT : 0);
	/* A libpmemobj transaction's undo and redo entries share one lane until it commits
	 * (in-place writes, log.c invariant 7), and libpmemobj programs make large ones (one
	 * transaction inserting hundreds of keys): fewer, larger lanes than keratin's default,
	 * a quarter of the pool in all (both copies), each 64 KiB to 1 MiB. */
	o.nlanes = KP_LANES;
	uint64_t kib = poolsize / 4 / (2 * KP_LANES) / 1024 / 4 * 4;
	o.lane_kib = (uint32_t)(kib < 64 ? 64 : kib > 1024 ? 1024 : kib);
	kr_pool *kr;
	int rc = kr_pool_create(path, &o, &kr);
	if (rc)
		return kp_err_kr(rc, path), NULL;
	chmod(path, mode);
	kr_oid super;
	rc = kr_root(kr, sizeof(struct kp_super), &super);
	if (rc == KR_OK) {
		kr_tx *tx;
		struct kp_super *s = NULL;
		if ((rc = kr_tx_begin(kr, &tx)) == KR_OK) {
			s = kr_tx_open(tx, super);
			if (s) {
				memcpy(s->magic, KP_MAGIC, sizeof(KP_MAGIC));
				snprintf(s->layout, sizeof(s->layout), "%s", layout ? layout : "");
			}
			rc = kr_tx_commit(tx);
		}
	}
	struct kp_pool *p = rc == KR_OK ? pool_attach(kr, path) : NULL;
	if (!p || kp_registry_add(p)) {
		int e = rc ? kp_errno_of(rc) : ENOMEM;
		kp_err(e, "%s: %s", path, rc ? kr_errmsg() : "too many pools open");
		kr_pool_close(kr);
		unlink(path);
		if (p)
			pool_free(p);
		errno = e;
		return NULL;
	}
	p->super = super;
	return (PMEMobjpool *)p->base;
}

/* A libpmemobj program reads objects through plain pointers, which keratin cannot verify
 * as they are read. So a pool is checked whole when it is opened, and what a stray write
 * or a lost page damaged is repaired before the program sees it (media errors the platform
 * listed were repaired by the open itself). Damage that cannot be repaired fails the open
 * with EIO rather than let the program read wrong bytes. KERATIN_PMEMOBJ_SCRUB=0 skips the
 * check (docs/COMPAT.md gives its cost). */
static int scrub_at_open(kr_pool *kr, const char *path)
{
	const char *e = getenv("KERATIN_PMEMOBJ_SCRUB");
	if (e && strcmp(e, "0") == 0)
		return 0;
	struct kr_check_report rep = {0};
	int rc = kr_pool_check(kr, KR_CHECK_REPAIR, &rep);
	if (rc == KR_OK)
		return 0;
	if (KR_ERR_CLASS(rc) == KR_E_CORRUPT)
		return kp_err(EIO, "%s: damaged beyond repair (%llu items, first at pool offset 0x%llx); "
				   "`keratin check` says more", path,
			      (unsigned long long)rep.unrepairable, (unsigned long long)rep.first_bad_off);
	return kp_err_kr(rc, path);
}

PMEMOBJ_API PMEMobjpool *pmemobj_open(const char *path, const char *layout)
{
	if (!path)
		return kp_err(EINVAL, "pmemobj_open: path is NULL"), NULL;
	if (is_libpmemobj_pool(path))
		return kp_err(EINVAL, "%s is a libpmemobj pool (PMDK's format); keratin-pmemobj opens "
				      "pools made by keratin: copy its objects over with a program linked "
				      "against libpmemobj", path), NULL;
	kr_pool *kr;
	int rc = kr_pool_open(path, env_flags() | (kp_prefault_at_open ? KR_OPEN_PREFAULT : 0), &kr);
	if (rc)
		return kp_err_kr(rc, path), NULL;
	kr_oid super = 0;
	const struct kp_super *s = NULL;
	struct kr_pool_stat st;
	if (kr_pool_stat(kr, &st) == KR_OK && kr_root(kr, 0, &super) == KR_OK && super &&
	    kr_size(kr, super) >= sizeof(*s))
		s = kr_get(kr, super);
	if (!s || memcmp(s->magic, KP_MAGIC, sizeof(KP_MAGIC)) != 0) {
		kr_pool_close(kr);
		return kp_err(EINVAL, "%s is a keratin pool not made by pmemobj_create", path), NULL;
	}
	if (layout && strncmp(layout, s->layout, PMEMOBJ_MAX_LAYOUT) != 0) {
		kp_err(EINVAL, "wrong layout (\"%s\"), pool created with layout \"%s\"", layout,
		       s->layout);
		kr_pool_close(kr);
		errno = EINVAL;
		return NULL;
	}
	if (scrub_at_open(kr, path)) {
		int e = errno;
		kr_pool_close(kr);
		errno = e;
		return NULL;
	}
	struct kp_pool *p = pool_attach(kr, path);
	if (!p || kp_registry_add(p)) {
		kr_pool_close(kr);
		if (p)
			pool_free(p);
		return kp_err(ENOMEM, "%s: too many pools open", path), NULL;
	}
	p->super = super;
	if (kp_reservations_recover(p)) {
		int e = errno;
		pmemobj_close((PMEMobjpool *)p->base);
		errno = e;
		return NULL;
	}
	return (PMEMobjpool *)p->base;
}

PMEMOBJ_API void pmemobj_close(PMEMobjpool *pop)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p) {
		kp_err(EINVAL, "pmemobj_close: %p is not an open pool", (void *)pop);
		return;
	}
	kp_drain_pending(p);
	int was = __atomic_load_n(&_pobj_cache_invalidate, __ATOMIC_SEQ_CST);
	(void)was; /* read by the check of a debug build */
	kp_registry_remove(p);
	KP_INVARIANT(1, !kp_pool_of(pop) && _pobj_cache_invalidate != was);
	kp_locks_forget(p->base, p->size);
	kp_reservations_forget(p);
	int rc = kr_pool_close(p->kr);
	if (rc)
		fprintf(stderr, "keratin-pmemobj: closing %s: %s\n", p->path, kr_errmsg());
	pool_free(p);
}

/* 1: consistent, 0: not, -1: could not be checked. Reads only. */
PMEMOBJ_API int pmemobj_check(const char *path, const char *layout)
{
	if (!path)
		return kp_err(EINVAL, "pmemobj_check: path is NULL");
	if (is_libpmemobj_pool(path))
		return kp_err(EINVAL, "%s is a libpmemobj pool (PMDK's format)", path);
	kr_pool *kr;
	int rc = kr_pool_open(path, KR_OPEN_READONLY | env_flags(), &kr);
	if (rc)
		return kp_err_kr(rc, path);
	kr_oid super = 0;
	int ok = kr_root(kr, 0, &super) == KR_OK && super;
	const struct kp_super *s = ok ? kr_get(kr, super) : NULL;
	if (!s || memcmp(s->magic, KP_MAGIC, sizeof(KP_MAGIC)) != 0) {
		kr_pool_close(kr);
		return kp_err(EINVAL, "%s is a keratin pool not made by pmemobj_create", path);
	}
	if (layout && strncmp(layout, s->layout, PMEMOBJ_MAX_LAYOUT) != 0) {
		kp_err(EINVAL, "wrong layout (\"%s\"), pool created with layout \"%s\"", layout,
		       s->layout);
		kr_pool_close(kr);
		return -1;
	}
	struct kr_deep_report rep = KR_DEEP_REPORT_INIT;
	rc = kr_pool_check_deep(kr, &rep);
	kr_pool_close(kr);
	if (rc == KR_OK)
		return 1;
	if (KR_ERR_CLASS(rc) == KR_E_CORRUPT)
		return kp_err(EINVAL, "%s: %s", path, rep.first_problem[0] ? rep.first_problem
							 : "damage found"), 0;
	return kp_err_kr(rc, path);
}

/* ---------------------------------------------------------------------------------------
 * Root
 * ------------------------------------------------------------------------------------- */

/* The root object of at least size bytes, made (zeroed, then constructed) or grown (the
 * new bytes zeroed; it may move) in one transaction, with the superblock's note of it. */
static PMEMoid root_get(struct kp_pool *p, size_t size, pmemobj_constr constr, void *arg)
{
	pthread_mutex_lock(&p->root_lock);
	const struct kp_super *s = kr_get(p->kr, p->super);
	kr_oid root = s->root_oid;
	if (size == 0 && !root) {
		pthread_mutex_unlock(&p->root_lock);
		return kp_err(EINVAL, "the root object does not exist and size is 0"), OID_NULL;
	}
	if (size > PMEMOBJ_MAX_ALLOC_SIZE) {
		pthread_mutex_unlock(&p->root_lock);
		return kp_err(EINVAL, "root size %zu too large", size), OID_NULL;
	}
	if (size <= s->root_size && root) {
		pthread_mutex_unlock(&p->root_lock);
		return kp_oid(p, root);
	}
	/* One transaction: the thread's open one if it has one on the pool (the root is made
	 * in place there), else one of its own. */
	kr_tx *tx = NULL;
	int own;
	int rc = kp_atomic_begin(p, &tx, &own);
	if (rc)
		tx = NULL;
	kr_oid n = 0;
	if (rc == KR_OK)
		rc = kp_new_object(p, tx, own, size, POBJ_ROOT_TYPE_NUM, NULL, NULL, &n);
	if (rc == KR_OK) {
		uint64_t old_size = s->root_size;
		uint8_t *buf = own ? kr_tx_open(tx, n) : kr_tx_add_in_place(tx, n, 0, size);
		if (!buf)
			rc = kr_errcode();
		else if (root && own)
			memcpy(buf, kr_get(p->kr, root), old_size);
		else if (root)
			rc = kr_tx_write_in_place(tx, n, 0, kr_get(p->kr, root), old_size);
		if (rc == KR_OK && root)
			rc = kr_tx_free(tx, root);
		uint64_t note[2] = {n, size};
		if (rc == KR_OK)
			rc = kp_write(p, tx, own, p->base + p->super + offsetof(struct kp_super, root_oid),
				      note, sizeof(note));
		if (rc == KR_OK && constr && constr((PMEMobjpool *)p->base, buf, arg) != 0)
			rc = kr_error_set(KR_E_MISUSE, "the root constructor failed");
	}
	if (tx) /* begun */
		rc = kp_atomic_end(tx, own, rc);
	pthread_mutex_unlock(&p->root_lock);
	if (rc)
		return kp_err(rc == KR_E_MISUSE ? ECANCELED : kp_errno_of(rc), "root: %s",
			      kr_errmsg()), OID_NULL;
	return kp_oid(p, n);
}

PMEMOBJ_API PMEMoid pmemobj_root(PMEMobjpool *pop, size_t size)
{
	return pmemobj_root_construct(pop, size, NULL, NULL);
}

PMEMOBJ_API PMEMoid pmemobj_root_construct(PMEMobjpool *pop, size_t size, pmemobj_constr constr,
					   void *arg)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p)
		return kp_err(EINVAL, "%p is not an open pool", (void *)pop), OID_NULL;
	return root_get(p, size, constr, arg);
}

PMEMOBJ_API size_t pmemobj_root_size(PMEMobjpool *pop)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (!p)
		return 0;
	const struct kp_super *s = kr_get(p->kr, p->super);
	return s->root_oid ? s->root_size : 0;
}

/* ---------------------------------------------------------------------------------------
 * Odds and ends
 * ------------------------------------------------------------------------------------- */
PMEMOBJ_API void pmemobj_set_user_data(PMEMobjpool *pop, void *data)
{
	struct kp_pool *p = kp_pool_of(pop);
	if (p)
		p->user_data = data;
}

PMEMOBJ_API void *pmemobj_get_user_data(PMEMobjpool *pop)
{
	struct kp_pool *p = kp_pool_of(pop);
	return p ? p->user_data : NULL;
}

PMEMOBJ_API const char *pmemobj_check_version(unsigned major_required, unsigned minor_required)
{
	/* The message is the thread's error message; errno stays as it was. */
	if (major_required != PMEMOBJ_MAJOR_VERSION) {
		kp_err(errno, "libpmemobj major version mismatch (need %u, found %u)", major_required,
		       PMEMOBJ_MAJOR_VERSION);
		return pmemobj_errormsg();
	}
	if (minor_required > PMEMOBJ_MINOR_VERSION) {
		kp_err(errno, "libpmemobj minor version mismatch (need %u, found %u)", minor_required,
		       PMEMOBJ_MINOR_VERSION);
		return pmemobj_errormsg();
	}
	return NULL;
}

/* keratin allocates its DRAM itself; the hooks are accepted and not used. */
PMEMOBJ_API void pmemobj_set_funcs(void *(*malloc_func)(size_t size), void (*free_func)(void *ptr),
				   void *(*realloc_func)(void *ptr, size_t size),
				   char *(*strdup_func)(const char *s))
{
	(void)malloc_func, (void)free_func, (void)realloc_func, (void)strdup_func;
}

PMEMOBJ_API void _pobj_debug_notice(const char *func_name, const char *file, int line)
{
	(void)func_name, (void)file, (void)line;
}

/* Defragmentation moves objects; keratin's oids are offsets that do not move. Nothing is
 * relocated, which pmemobj_defrag's contract allows (result says so). */
PMEMOBJ_API int pmemobj_defrag(PMEMobjpool *pop, PMEMoid **oidv, size_t oidcnt,
			       struct pobj_defrag_result *result)
{
	(void)oidv;
	if (!kp_pool_of(pop))
		return kp_err(EINVAL, "%p is not an open pool", (void *)pop);
	if (result) {
		result->total = oidcnt;
		result->relocated = 0;
	}
	return 0;
}

/* Volatile state inside persistent objects would change checksummed bytes without a
 * transaction: not supported (docs/COMPAT.md). */
PMEMOBJ_API void *pmemobj_volatile(PMEMobjpool *pop, struct pmemvlt *vlt, void *ptr, size_t size,
				   int (*constr)(void *ptr, void *arg), void *arg)
{
	(void)pop, (void)vlt, (void)ptr, (void)size, (void)constr, (void)arg;
	kp_err(ENOTSUP, "pmemobj_volatile is not supported by keratin-pmemobj");
	return NULL;
}
