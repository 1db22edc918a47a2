#!/bin/bash
# abi_layout.sh OUTDIR [INCLUDE_DIR] - keratin-pmemobj's headers against libpmemobj 1.12's.
#
# 1. One C program, facts.c (written into OUTDIR), is compiled twice: against the system's
#    <libpmemobj.h> (plain cc) and against INCLUDE_DIR (default: include/keratin-pmemobj of
#    this tree). It prints one line per fact: sizes, alignments and field offsets of every
#    type a program embeds or passes, the value and C type of every constant, the type
#    numbers a layout gets, the C type of each macro's result, and, through a mock runtime
#    that it defines itself, the calls each macro makes with their arguments (the TX_BEGIN
#    stage loop and its setjmp, errno after it, the inline pmemobj_direct's pool cache).
#    The two outputs must be identical. Done again with -DPMEMOBJ_DIRECT_NON_INLINE, and
#    with -DPOBJ_TX_CRASH_ON_NO_ONABORT.
# 2. Every example program libpmemobj-dev ships must compile (-fsyntax-only) against
#    INCLUDE_DIR wherever it compiles against the system headers.
# Exits 0 when all agree, 1 with the differences otherwise, 77 (SKIP) without the system
# headers. The last line is "N passed, M failed, K skipped".
set -u

out=${1:?usage: abi_layout.sh OUTDIR [INCLUDE_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
inc=${2:-$here/../../include/keratin-pmemobj}
cc=${CC:-cc}
examples=${PMEMOBJ_EXAMPLES:-/usr/share/doc/libpmemobj-dev/examples}

mkdir -p "$out" || exit 1
if ! echo '#include <libpmemobj.h>' | "$cc" -x c -fsyntax-only - 2>/dev/null; then
	echo "SKIP: libpmemobj's own headers are not installed (libpmemobj-dev)"
	exit 77
fi
[ -f "$inc/libpmemobj.h" ] || { echo "no $inc/libpmemobj.h"; exit 1; }

passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }

cat >"$out/facts.c" <<'EOF'
/* facts.c - what a program sees of libpmemobj's headers; written by tests/compat/abi_layout.sh */
#include <libpmemobj.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <unistd.h>

#define SIZE(t)	printf("size %s %zu align %zu\n", #t, sizeof(t), (size_t)__alignof__(t))
#define OFF(t, f)	printf("offset %s.%s %zu\n", #t, #f, (size_t)offsetof(t, f))
#define IS(e, t)	__builtin_types_compatible_p(__typeof__(e), t)
#define KIND(e) (IS(e, void) ? "void" : IS(e, int) ? "int" : IS(e, unsigned) ? "unsigned" : \
	IS(e, long) ? "long" : IS(e, unsigned long) ? "unsigned long" : \
	IS(e, long long) ? "long long" : IS(e, unsigned long long) ? "unsigned long long" : \
	IS(e, PMEMoid) ? "PMEMoid" : IS(e, TOID(struct a)) ? "TOID(struct a)" : \
	IS(e, TOID(char)) ? "TOID(char)" : IS(e, struct a *) ? "struct a *" : \
	IS(e, const struct a *) ? "const struct a *" : IS(e, void *) ? "void *" : \
	IS(e, PMEMoid *) ? "PMEMoid *" : IS(e, char *) ? "char *" : "other")
#define VAL(x)	printf("value %s %llu %s\n", #x, (unsigned long long)(x), KIND(x))
#define TYPE(e)	printf("type %s: %s\n", #e, KIND(e))

/* A layout of three types and a root, and explicit declarations. */
POBJ_LAYOUT_BEGIN(lay);
POBJ_LAYOUT_TOID(lay, struct a);
POBJ_LAYOUT_ROOT(lay, struct r);
POBJ_LAYOUT_TOID(lay, struct b);
POBJ_LAYOUT_TOID(lay, char);
POBJ_LAYOUT_END(lay);
POBJ_LAYOUT_BEGIN(empty);
POBJ_LAYOUT_END(empty);
TOID_DECLARE(struct d, 77);
TOID_DECLARE_ROOT(struct e);

struct a {
	uint64_t x;
	POBJ_LIST_ENTRY(struct a) entry;
	POBJ_LIST_ENTRY(struct a) other;
	char y[5];
};
POBJ_LIST_HEAD(ahead, struct a);
struct r { struct ahead h1, h2; };
PMEMvlt(char) vlt;

/*
 * The mock runtime: a pool of 4 KiB in DRAM (uuid_lo 0x1234) holding objects at offsets
 * 64, 128, 192 and 256, and a transaction that only keeps its stage. Every call prints
 * itself; pointers print as names.
 */
static union { char c[4096]; uint64_t u; } pool;
#define POOL ((PMEMobjpool *)&pool)
#define BAD ((PMEMobjpool *)8)
static PMEMmutex mtx;
static PMEMrwlock rwl;
static struct r *root = (struct r *)&pool.c[512];
static int cbarg, constrarg;
static struct pobj_action act;
static PMEMoid oidv;

static int constr(PMEMobjpool *pop, void *ptr, void *arg) { return 0; }
static void cb(PMEMobjpool *pop, enum pobj_tx_stage stage, void *arg) { }

static const char *
name(const void *p)
{
	static char bufs[4][32];
	static int next;
	char *buf = bufs[next++ % 4];

	if (p == NULL) return "NULL";
	if (p == (void *)POOL) return "pool";
	if (p == (void *)BAD) return "badpool";
	if (p == (void *)&mtx) return "mutex";
	if (p == (void *)&rwl) return "rwlock";
	if (p == (void *)&cbarg) return "cbarg";
	if (p == (void *)&constrarg) return "constrarg";
	if (p == (void *)&act) return "act";
	if (p == (void *)&oidv) return "&oidv";
	if ((const char *)p > pool.c && (const char *)p < pool.c + sizeof(pool)) {
		snprintf(buf, sizeof(bufs[0]), "pool+%d", (int)((const char *)p - pool.c));
		return buf;
	}
	return "?";
}
#define FN(f)	((void *)(f) == (void *)cb ? "cb" : (void *)(f) == (void *)constr ? "constr" : \
		 (f) == NULL ? "NULL" : "?")
#define OID(o)	(unsigned long long)(o).pool_uuid_lo, (unsigned long long)(o).off
#define MKOID(off) ((PMEMoid){ 0x1234, (off) })

PMEMoid pmemobj_root(PMEMobjpool *pop, size_t size)
{ printf("  root %s %zu\n", name(pop), size); return MKOID(512); }
PMEMobjpool *pmemobj_pool_by_oid(PMEMoid oid)
{ printf("  pool_by_oid %llx:%llu\n", OID(oid)); return oid.pool_uuid_lo == 0x1234 ? POOL : NULL; }
#ifndef pmemobj_direct
void *pmemobj_direct(PMEMoid oid)
{ printf("  direct %llx:%llu\n", OID(oid)); return oid.off ? pool.c + oid.off : NULL; }
#endif
__thread struct _pobj_pcache _pobj_cached_pool;
int _pobj_cache_invalidate;
void _pobj_debug_notice(const char *func_name, const char *file, int line)
{ printf("  debug_notice %s %d\n", func_name, line); }

uint64_t pmemobj_type_num(PMEMoid oid)
{ return oid.off == 128 ? 2 : oid.off == 256 ? 3 : 1; }
PMEMoid pmemobj_first(PMEMobjpool *pop)
{ printf("  first %s\n", name(pop)); return MKOID(64); }
PMEMoid pmemobj_next(PMEMoid oid)
{ printf("  next %llu\n", (unsigned long long)oid.off); return oid.off < 256 ? MKOID(oid.off + 64) : OID_NULL; }

int pmemobj_alloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num,
	pmemobj_constr constructor, void *arg)
{ printf("  alloc %s %s %zu %llu %s %s\n", name(pop), name(oidp), size, (unsigned long long)type_num, FN(constructor), name(arg)); return 0; }
int pmemobj_zalloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{ printf("  zalloc %s %s %zu %llu\n", name(pop), name(oidp), size, (unsigned long long)type_num); return 0; }
int pmemobj_realloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{ printf("  realloc %s %s %zu %llu\n", name(pop), name(oidp), size, (unsigned long long)type_num); return 0; }
int pmemobj_zrealloc(PMEMobjpool *pop, PMEMoid *oidp, size_t size, uint64_t type_num)
{ printf("  zrealloc %s %s %zu %llu\n", name(pop), name(oidp), size, (unsigned long long)type_num); return 0; }
void pmemobj_free(PMEMoid *oidp)
{ printf("  free %s\n", name(oidp)); }
PMEMoid pmemobj_reserve(PMEMobjpool *pop, struct pobj_action *a, size_t size, uint64_t type_num)
{ printf("  reserve %s %s %zu %llu\n", name(pop), name(a), size, (unsigned long long)type_num); return MKOID(64); }
PMEMoid pmemobj_xreserve(PMEMobjpool *pop, struct pobj_action *a, size_t size, uint64_t type_num, uint64_t flags)
{ printf("  xreserve %s %s %zu %llu %llx\n", name(pop), name(a), size, (unsigned long long)type_num, (unsigned long long)flags); return MKOID(64); }

int pmemobj_list_insert(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid dest, int before, PMEMoid oid)
{ printf("  list_insert %s %zu %s %llu %d %llu\n", name(pop), pe_offset, name(head), (unsigned long long)dest.off, before, (unsigned long long)oid.off); return 0; }
PMEMoid pmemobj_list_insert_new(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid dest, int before,
	size_t size, uint64_t type_num, pmemobj_constr constructor, void *arg)
{ printf("  list_insert_new %s %zu %s %llu %d %zu %llu %s %s\n", name(pop), pe_offset, name(head), (unsigned long long)dest.off, before, size, (unsigned long long)type_num, FN(constructor), name(arg)); return MKOID(64); }
int pmemobj_list_remove(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid oid, int free)
{ printf("  list_remove %s %zu %s %llu %d\n", name(pop), pe_offset, name(head), (unsigned long long)oid.off, free); return 0; }
int pmemobj_list_move(PMEMobjpool *pop, size_t pe_old_offset, void *head_old, size_t pe_new_offset, void *head_new,
	PMEMoid dest, int before, PMEMoid oid)
{ printf("  list_move %s %zu %s %zu %s %llu %d %llu\n", name(pop), pe_old_offset, name(head_old), pe_new_offset, name(head_new), (unsigned long long)dest.off, before, (unsigned long long)oid.off); return 0; }

/* Transactions: a stack of (env) per nesting level, one stage, one error. */
static enum pobj_tx_stage stage;
static int txerr, depth, inner_aborted;
static jmp_buf *envs[8];

enum pobj_tx_stage pmemobj_tx_stage(void) { printf("  tx_stage %d\n", stage); return stage; }
int pmemobj_tx_errno(void) { printf("  tx_errno %d\n", txerr); return txerr; }

int pmemobj_tx_begin(PMEMobjpool *pop, jmp_buf env, ...)
{
	va_list ap;
	int p;

	printf("  tx_begin %s env=%s params:", name(pop), env ? "set" : "NULL");
	va_start(ap, env);
	while ((p = va_arg(ap, int)) != TX_PARAM_NONE) {
		if (p == TX_PARAM_CB) {
			pmemobj_tx_callback f = va_arg(ap, pmemobj_tx_callback);
			printf(" cb(%s, %s)", FN(f), name(va_arg(ap, void *)));
		} else {
			printf(" %d(%s)", p, name(va_arg(ap, void *)));
		}
	}
	va_end(ap);
	printf("\n");
	envs[depth++] = (jmp_buf *)env;
	if (pop == BAD) {
		stage = TX_STAGE_ONABORT;
		return txerr = EINVAL;
	}
	txerr = 0;
	stage = TX_STAGE_WORK;
	return 0;
}

void pmemobj_tx_abort(int errnum)
{
	printf("  tx_abort %d\n", errnum);
	stage = TX_STAGE_ONABORT;
	txerr = errnum ? errnum : ECANCELED;
	longjmp(*envs[depth - 1], txerr);
}

void pmemobj_tx_process(void)
{
	printf("  tx_process %d\n", stage);
	stage = stage == TX_STAGE_WORK ? TX_STAGE_ONCOMMIT :
		stage == TX_STAGE_FINALLY || stage == TX_STAGE_NONE ? TX_STAGE_NONE : TX_STAGE_FINALLY;
}

/* An inner transaction that aborted aborts the outer one, from here. */
int pmemobj_tx_end(void)
{
	printf("  tx_end depth %d err %d\n", depth, txerr);
	if (--depth > 0) {
		stage = TX_STAGE_WORK;
		if (txerr) {
			inner_aborted = 1;
			stage = TX_STAGE_ONABORT;
			longjmp(*envs[depth - 1], txerr);
		}
		return 0;
	}
	stage = TX_STAGE_NONE;
	return txerr;
}

int pmemobj_tx_add_range(PMEMoid oid, uint64_t off, size_t size)
{ printf("  tx_add_range %llu %llu %zu\n", (unsigned long long)oid.off, (unsigned long long)off, size); return 0; }
int pmemobj_tx_xadd_range(PMEMoid oid, uint64_t off, size_t size, uint64_t flags)
{ printf("  tx_xadd_range %llu %llu %zu %llx\n", (unsigned long long)oid.off, (unsigned long long)off, size, (unsigned long long)flags); return 0; }
int pmemobj_tx_add_range_direct(const void *ptr, size_t size)
{ printf("  tx_add_range_direct %s %zu\n", name(ptr), size); return 0; }
int pmemobj_tx_xadd_range_direct(const void *ptr, size_t size, uint64_t flags)
{ printf("  tx_xadd_range_direct %s %zu %llx\n", name(ptr), size, (unsigned long long)flags); return 0; }
PMEMoid pmemobj_tx_alloc(size_t size, uint64_t type_num)
{ printf("  tx_alloc %zu %llu\n", size, (unsigned long long)type_num); return MKOID(64); }
PMEMoid pmemobj_tx_zalloc(size_t size, uint64_t type_num)
{ printf("  tx_zalloc %zu %llu\n", size, (unsigned long long)type_num); return MKOID(64); }
PMEMoid pmemobj_tx_xalloc(size_t size, uint64_t type_num, uint64_t flags)
{ printf("  tx_xalloc %zu %llu %llx\n", size, (unsigned long long)type_num, (unsigned long long)flags); return MKOID(64); }
PMEMoid pmemobj_tx_realloc(PMEMoid oid, size_t size, uint64_t type_num)
{ printf("  tx_realloc %llu %zu %llu\n", (unsigned long long)oid.off, size, (unsigned long long)type_num); return MKOID(192); }
PMEMoid pmemobj_tx_zrealloc(PMEMoid oid, size_t size, uint64_t type_num)
{ printf("  tx_zrealloc %llu %zu %llu\n", (unsigned long long)oid.off, size, (unsigned long long)type_num); return MKOID(192); }
PMEMoid pmemobj_tx_strdup(const char *s, uint64_t type_num)
{ printf("  tx_strdup %s %llu\n", s, (unsigned long long)type_num); return MKOID(256); }
PMEMoid pmemobj_tx_xstrdup(const char *s, uint64_t type_num, uint64_t flags)
{ printf("  tx_xstrdup %s %llu %llx\n", s, (unsigned long long)type_num, (unsigned long long)flags); return MKOID(256); }
PMEMoid pmemobj_tx_wcsdup(const wchar_t *s, uint64_t type_num)
{ printf("  tx_wcsdup %d %llu\n", (int)s[0], (unsigned long long)type_num); return MKOID(256); }
PMEMoid pmemobj_tx_xwcsdup(const wchar_t *s, uint64_t type_num, uint64_t flags)
{ printf("  tx_xwcsdup %d %llu %llx\n", (int)s[0], (unsigned long long)type_num, (unsigned long long)flags); return MKOID(256); }
int pmemobj_tx_free(PMEMoid oid)
{ printf("  tx_free %llu\n", (unsigned long long)oid.off); return 0; }
int pmemobj_tx_xfree(PMEMoid oid, uint64_t flags)
{ printf("  tx_xfree %llu %llx\n", (unsigned long long)oid.off, (unsigned long long)flags); return 0; }

static void
layout_facts(void)
{
	SIZE(PMEMoid); OFF(PMEMoid, pool_uuid_lo); OFF(PMEMoid, off);
	SIZE(PMEMmutex); SIZE(PMEMrwlock); SIZE(PMEMcond);
	SIZE(struct pobj_action); OFF(struct pobj_action, type); OFF(struct pobj_action, data);
	OFF(struct pobj_action, heap); OFF(struct pobj_action, heap.offset);
	OFF(struct pobj_action, heap.usable_size); OFF(struct pobj_action, data2);
	SIZE(struct pobj_action_heap); SIZE(enum pobj_action_type);
	SIZE(struct pobj_alloc_class_desc); OFF(struct pobj_alloc_class_desc, unit_size);
	OFF(struct pobj_alloc_class_desc, alignment); OFF(struct pobj_alloc_class_desc, units_per_block);
	OFF(struct pobj_alloc_class_desc, header_type); OFF(struct pobj_alloc_class_desc, class_id);
	SIZE(struct pobj_defrag_result); OFF(struct pobj_defrag_result, total);
	OFF(struct pobj_defrag_result, relocated);
	SIZE(struct _pobj_pcache); OFF(struct _pobj_pcache, pop); OFF(struct _pobj_pcache, uuid_lo);
	OFF(struct _pobj_pcache, invalidate);
	SIZE(_pobj_cached_pool); SIZE(_pobj_cache_invalidate);
	SIZE(struct pmemvlt); SIZE(vlt); OFF(__typeof__(vlt), vlt); OFF(__typeof__(vlt), value);
	SIZE(enum pobj_tx_stage); SIZE(enum pobj_tx_param); SIZE(enum pobj_header_type);
	SIZE(TOID(struct a)); OFF(TOID(struct a), oid);
	SIZE(struct a); OFF(struct a, entry); OFF(struct a, entry.pe_next); OFF(struct a, entry.pe_prev);
	OFF(struct a, other); OFF(struct a, y);
	SIZE(struct ahead); OFF(struct ahead, pe_first); OFF(struct ahead, lock);
}

static void
constant_facts(void)
{
	VAL(PMEMOBJ_MAJOR_VERSION); VAL(PMEMOBJ_MINOR_VERSION);
	VAL(PMEMOBJ_MIN_POOL); VAL(PMEMOBJ_MIN_PART); VAL(PMEMOBJ_MAX_LAYOUT); VAL(PMEMOBJ_MAX_ALLOC_SIZE);
	VAL(POBJ_ROOT_TYPE_NUM); VAL(_POBJ_CL_SIZE);
	VAL(TX_STAGE_NONE); VAL(TX_STAGE_WORK); VAL(TX_STAGE_ONCOMMIT); VAL(TX_STAGE_ONABORT);
	VAL(TX_STAGE_FINALLY); VAL(MAX_TX_STAGE);
	VAL(TX_PARAM_NONE); VAL(TX_PARAM_MUTEX); VAL(TX_PARAM_RWLOCK); VAL(TX_PARAM_CB);
	VAL(TX_LOCK_NONE); VAL(TX_LOCK_MUTEX); VAL(TX_LOCK_RWLOCK);
	VAL(TX_LOG_TYPE_SNAPSHOT); VAL(TX_LOG_TYPE_INTENT);
	VAL(POBJ_TX_FAILURE_ABORT); VAL(POBJ_TX_FAILURE_RETURN);
	VAL(POBJ_FLAG_ZERO); VAL(POBJ_FLAG_NO_FLUSH); VAL(POBJ_FLAG_NO_SNAPSHOT);
	VAL(POBJ_FLAG_ASSUME_INITIALIZED); VAL(POBJ_FLAG_TX_NO_ABORT);
	VAL(POBJ_CLASS_ID(1)); VAL(POBJ_CLASS_ID(0xffff)); VAL(POBJ_ARENA_ID(1)); VAL(POBJ_ARENA_ID(0xffff));
	VAL(POBJ_XALLOC_ZERO); VAL(POBJ_XALLOC_NO_FLUSH); VAL(POBJ_XALLOC_NO_ABORT);
	VAL(POBJ_XALLOC_CLASS_MASK); VAL(POBJ_XALLOC_ARENA_MASK); VAL(POBJ_XALLOC_VALID_FLAGS);
	VAL(POBJ_TX_XALLOC_VALID_FLAGS); VAL(POBJ_ACTION_XRESERVE_VALID_FLAGS);
	VAL(POBJ_XADD_NO_FLUSH); VAL(POBJ_XADD_NO_SNAPSHOT); VAL(POBJ_XADD_ASSUME_INITIALIZED);
	VAL(POBJ_XADD_NO_ABORT); VAL(POBJ_XADD_VALID_FLAGS);
	VAL(POBJ_XLOCK_NO_ABORT); VAL(POBJ_XLOCK_VALID_FLAGS); VAL(POBJ_XFREE_NO_ABORT);
	VAL(POBJ_XFREE_VALID_FLAGS); VAL(POBJ_XPUBLISH_NO_ABORT); VAL(POBJ_XPUBLISH_VALID_FLAGS);
	VAL(POBJ_XLOG_APPEND_BUFFER_NO_ABORT); VAL(POBJ_XLOG_APPEND_BUFFER_VALID_FLAGS);
	VAL(PMEMOBJ_F_MEM_NODRAIN); VAL(PMEMOBJ_F_MEM_NONTEMPORAL); VAL(PMEMOBJ_F_MEM_TEMPORAL);
	VAL(PMEMOBJ_F_MEM_WC); VAL(PMEMOBJ_F_MEM_WB); VAL(PMEMOBJ_F_MEM_NOFLUSH); VAL(PMEMOBJ_F_RELAXED);
	VAL(POBJ_LIST_DEST_HEAD); VAL(POBJ_LIST_DEST_TAIL); VAL(POBJ_LIST_DEST_BEFORE);
	VAL(POBJ_LIST_DEST_AFTER);
	VAL(POBJ_HEADER_LEGACY); VAL(POBJ_HEADER_COMPACT); VAL(POBJ_HEADER_NONE);
	VAL(MAX_POBJ_HEADER_TYPES);
	VAL(POBJ_STATS_ENABLED_TRANSIENT); VAL(POBJ_STATS_ENABLED_BOTH);
	VAL(POBJ_STATS_ENABLED_PERSISTENT); VAL(POBJ_STATS_DISABLED);
	VAL(POBJ_ARENAS_ASSIGNMENT_THREAD_KEY); VAL(POBJ_ARENAS_ASSIGNMENT_GLOBAL);
	VAL(POBJ_ACTION_TYPE_HEAP); VAL(POBJ_ACTION_TYPE_MEM); VAL(POBJ_MAX_ACTION_TYPE);
	VAL(OID_NULL.pool_uuid_lo); VAL(OID_NULL.off);
	VAL(TOID_TYPE_NUM(struct a)); VAL(TOID_TYPE_NUM(struct b)); VAL(TOID_TYPE_NUM(char));
	VAL(TOID_TYPE_NUM(struct r)); VAL(POBJ_LAYOUT_TYPES_NUM(lay)); VAL(POBJ_LAYOUT_TYPES_NUM(empty));
	VAL(TOID_TYPE_NUM(struct d)); VAL(TOID_TYPE_NUM(struct e));
	printf("layout name %s %zu\n", POBJ_LAYOUT_NAME(lay), sizeof(POBJ_LAYOUT_NAME(lay)));
#ifdef pmemobj_direct
	printf("pmemobj_direct is the inline function\n");
#else
	printf("pmemobj_direct is the library's\n");
#endif
}

static void
type_facts(void)
{
	TOID(struct a) t = TOID_NULL(struct a);
	TOID(char) s;
	PMEMoid o = OID_NULL;
	char *p = pool.c;
	wchar_t w[2] = { 'w', 0 };

	TYPE(TOID_NULL(struct a)); TYPE(TOID_ASSIGN(t, o)); TYPE(TOID_IS_NULL(t));
	TYPE(TOID_EQUALS(t, t)); TYPE(TOID_VALID(t)); TYPE(OID_INSTANCEOF(o, struct a));
	TYPE(TOID_TYPE_NUM(struct a)); TYPE(TOID_TYPE_NUM_OF(t)); TYPE(TOID_OFFSETOF(t, y));
	TYPE(POBJ_LAYOUT_TYPES_NUM(lay)); TYPE(OID_IS_NULL(o)); TYPE(OID_EQUALS(o, o));
	TYPE(D_RW(t)); TYPE(D_RO(t)); TYPE(DIRECT_RW(t)); TYPE(DIRECT_RO(t)); TYPE(pmemobj_direct(o));
	TYPE(POBJ_ROOT(POOL, struct a)); TYPE(POBJ_FIRST(POOL, struct a)); TYPE(POBJ_NEXT(t));
	TYPE(POBJ_FIRST_TYPE_NUM(POOL, 1)); TYPE(POBJ_NEXT_TYPE_NUM(o));
	TYPE(POBJ_NEW(POOL, &t, struct a, constr, NULL)); TYPE(POBJ_ZNEW(POOL, &t, struct a));
	TYPE(POBJ_REALLOC(POOL, &t, struct a, 8)); TYPE(POBJ_FREE(&t));
	TYPE(POBJ_RESERVE_NEW(POOL, struct a, &act)); TYPE(POBJ_XRESERVE_ALLOC(POOL, char, 9, &act, 0));
	TYPE(TX_NEW(struct a)); TYPE(TX_ZALLOC(char, 3)); TYPE(TX_XALLOC(struct a, 8, 0));
	TYPE(TX_REALLOC(t, 8)); TYPE(TX_STRDUP("s", 1)); TYPE(TX_XWCSDUP(w, 1, 0));
	TYPE(TX_FREE(t)); TYPE(TX_XFREE(t, 0)); TYPE(TX_ADD(t)); TYPE(TX_XADD_FIELD(t, x, 0));
	TYPE(TX_ADD_DIRECT(p)); TYPE(TX_SET(t, x, 1)); TYPE(TX_SET_DIRECT(D_RW(t), x, 1));
	TYPE(TX_MEMCPY(p, p, 1)); TYPE(TX_MEMSET(p, 0, 1));
	TYPE(POBJ_LIST_FIRST(&root->h1)); TYPE(POBJ_LIST_LAST(&root->h1, entry));
	TYPE(POBJ_LIST_EMPTY(&root->h1)); TYPE(POBJ_LIST_NEXT(t, entry));
	TYPE(POBJ_LIST_INSERT_HEAD(POOL, &root->h1, t, entry));
	TYPE(POBJ_LIST_INSERT_NEW_TAIL(POOL, &root->h1, entry, 8, constr, NULL));
	TYPE(POBJ_LIST_REMOVE_FREE(POOL, &root->h1, t, entry));
	TYPE(POBJ_LIST_MOVE_ELEMENT_AFTER(POOL, &root->h1, &root->h2, t, t, entry, other));
	(void)s;
}

/* Macros at work against the mock. Each line names the macro, the calls follow it. */
#define RUN(what)	printf("%s\n", #what), (void)(what)

static void
link3(void)
{
	/* objects 64 -> 128 -> 192 -> back to 64 through entry, in h1 */
	TOID(struct a) e[3];
	int i;

	for (i = 0; i < 3; i++)
		e[i].oid = MKOID(64 + 64 * i);
	for (i = 0; i < 3; i++) {
		D_RW(e[i])->entry.pe_next = e[(i + 1) % 3];
		D_RW(e[i])->entry.pe_prev = e[(i + 2) % 3];
	}
	root->h1.pe_first = e[0];
	root->h2.pe_first = TOID_NULL(struct a);
}

static void
run_macros(void)
{
	TOID(struct a) t, u;
	TOID(char) c, nc;
	PMEMoid o, no;
	wchar_t w[2] = { 'w', 0 };

	printf("direct:\n");
	t.oid = MKOID(64);
	printf(" %s\n", name(D_RW(t)));
	printf(" %s\n", name(D_RO(t)));
	u.oid = MKOID(128);
	printf(" %s\n", name(D_RW(u)));
	_pobj_cache_invalidate++;
	printf(" %s\n", name(D_RW(u)));
	u.oid = (PMEMoid){ 999, 64 };
	printf(" %s\n", name(D_RW(u)));
	printf(" %s\n", name(D_RW(t)));
	printf(" %s\n", name(D_RW(TOID_NULL(struct a))));
	o = (PMEMoid){ 0, 64 };
	printf(" %s\n", name(pmemobj_direct(o)));
	o = (PMEMoid){ 0x1234, 0 };
	printf(" %s\n", name(pmemobj_direct(o)));
	printf("null tests: %d %d %d %d\n", OID_IS_NULL(o), TOID_IS_NULL(t),
	       OID_EQUALS(o, MKOID(0)), TOID_EQUALS(t, u));

	RUN(POBJ_ROOT(POOL, struct r));
	RUN(POBJ_NEW(POOL, &t, struct a, constr, &constrarg));
	RUN(POBJ_ALLOC(POOL, &oidv, struct a, 100, NULL, NULL));
	RUN(POBJ_ZNEW(POOL, NULL, char));
	RUN(POBJ_ZALLOC(POOL, &oidv, struct b, 7));
	RUN(POBJ_REALLOC(POOL, &oidv, struct a, 300));
	RUN(POBJ_ZREALLOC(POOL, &oidv, char, 30));
	RUN(POBJ_FREE(&oidv));
	RUN(POBJ_RESERVE_NEW(POOL, struct a, &act));
	RUN(POBJ_RESERVE_ALLOC(POOL, char, 11, &act));
	RUN(POBJ_XRESERVE_NEW(POOL, struct a, &act, POBJ_CLASS_ID(3)));
	RUN(POBJ_XRESERVE_ALLOC(POOL, struct a, 12, &act, POBJ_XALLOC_ZERO));

	printf("iteration:\n");
	POBJ_FOREACH(POOL, o)
		printf(" at %llu\n", (unsigned long long)o.off);
	POBJ_FOREACH_SAFE(POOL, o, no)
		printf(" at %llu next %llu\n", (unsigned long long)o.off, (unsigned long long)no.off);
	POBJ_FOREACH_TYPE(POOL, t)
		printf(" a at %llu\n", (unsigned long long)t.oid.off);
	POBJ_FOREACH_SAFE_TYPE(POOL, c, nc)
		printf(" char at %llu\n", (unsigned long long)c.oid.off);
	t = POBJ_FIRST(POOL, struct a);
	t = POBJ_NEXT(t);
	printf(" first a, next a: %llu\n", (unsigned long long)t.oid.off);
	o = POBJ_FIRST_TYPE_NUM(POOL, 3);
	o = POBJ_NEXT_TYPE_NUM(o);
	printf(" first 3, next 3: %llu\n", (unsigned long long)o.off);

	printf("lists:\n");
	link3();
	POBJ_LIST_FOREACH(t, &root->h1, entry)
		printf(" fwd %llu\n", (unsigned long long)t.oid.off);
	POBJ_LIST_FOREACH_REVERSE(t, &root->h1, entry)
		printf(" rev %llu\n", (unsigned long long)t.oid.off);
	POBJ_LIST_FOREACH(t, &root->h2, entry)
		printf(" never %llu\n", (unsigned long long)t.oid.off);
	printf(" first %llu last %llu empty %d %d next %llu prev %llu\n",
	       (unsigned long long)POBJ_LIST_FIRST(&root->h1).oid.off,
	       (unsigned long long)POBJ_LIST_LAST(&root->h1, entry).oid.off,
	       POBJ_LIST_EMPTY(&root->h1), POBJ_LIST_EMPTY(&root->h2),
	       (unsigned long long)POBJ_LIST_NEXT(root->h1.pe_first, entry).oid.off,
	       (unsigned long long)POBJ_LIST_PREV(root->h1.pe_first, entry).oid.off);
	printf(" last of empty %llu\n", (unsigned long long)POBJ_LIST_LAST(&root->h2, entry).oid.off);
	t.oid = MKOID(128);
	u.oid = MKOID(192);
	RUN(POBJ_LIST_INSERT_HEAD(POOL, &root->h1, t, entry));
	RUN(POBJ_LIST_INSERT_TAIL(POOL, &root->h2, t, other));
	RUN(POBJ_LIST_INSERT_AFTER(POOL, &root->h1, u, t, entry));
	RUN(POBJ_LIST_INSERT_BEFORE(POOL, &root->h1, u, t, other));
	RUN(POBJ_LIST_INSERT_NEW_HEAD(POOL, &root->h1, entry, 40, constr, &constrarg));
	RUN(POBJ_LIST_INSERT_NEW_TAIL(POOL, &root->h2, other, 41, NULL, NULL));
	RUN(POBJ_LIST_INSERT_NEW_AFTER(POOL, &root->h1, u, entry, 42, constr, NULL));
	RUN(POBJ_LIST_INSERT_NEW_BEFORE(POOL, &root->h1, u, entry, 43, NULL, &constrarg));
	RUN(POBJ_LIST_REMOVE(POOL, &root->h1, t, entry));
	RUN(POBJ_LIST_REMOVE_FREE(POOL, &root->h2, t, other));
	RUN(POBJ_LIST_MOVE_ELEMENT_HEAD(POOL, &root->h1, &root->h2, t, entry, other));
	RUN(POBJ_LIST_MOVE_ELEMENT_TAIL(POOL, &root->h2, &root->h1, t, other, entry));
	RUN(POBJ_LIST_MOVE_ELEMENT_AFTER(POOL, &root->h1, &root->h2, u, t, entry, other));
	RUN(POBJ_LIST_MOVE_ELEMENT_BEFORE(POOL, &root->h1, &root->h2, u, t, entry, other));

	printf("tx calls:\n");
	t.oid = MKOID(64);
	RUN(TX_ADD(t));
	RUN(TX_XADD(t, POBJ_XADD_NO_FLUSH));
	RUN(TX_ADD_FIELD(t, y));
	RUN(TX_XADD_FIELD(t, entry, POBJ_XADD_NO_SNAPSHOT));
	RUN(TX_ADD_DIRECT(D_RW(t)));
	RUN(TX_XADD_DIRECT(&D_RW(t)->x, POBJ_XADD_NO_ABORT));
	RUN(TX_ADD_FIELD_DIRECT(D_RW(t), other));
	RUN(TX_XADD_FIELD_DIRECT(D_RW(t), y, 0));
	RUN(TX_SET(t, x, 77));
	RUN(TX_SET_DIRECT(D_RW(t), x, 78));
	printf(" x %llu\n", (unsigned long long)D_RO(t)->x);
	RUN(TX_MEMCPY(D_RW(t)->y, "abcd", 5));
	RUN(TX_MEMSET(D_RW(t)->y, 'z', 2));
	printf(" y %s\n", D_RO(t)->y);
	RUN(TX_NEW(struct a));
	RUN(TX_ALLOC(struct b, 10));
	RUN(TX_ZNEW(char));
	RUN(TX_ZALLOC(struct a, 11));
	RUN(TX_XALLOC(struct a, 12, POBJ_XALLOC_ZERO | POBJ_CLASS_ID(2)));
	RUN(TX_REALLOC(t, 13));
	RUN(TX_ZREALLOC(t, 14));
	RUN(TX_STRDUP("str", 3));
	RUN(TX_XSTRDUP("xstr", 3, POBJ_XALLOC_NO_ABORT));
	RUN(TX_WCSDUP(w, 4));
	RUN(TX_XWCSDUP(w, 4, 0));
	RUN(TX_FREE(t));
	RUN(TX_XFREE(t, POBJ_XFREE_NO_ABORT));
}

static void
run_transactions(void)
{
	volatile int n = 0;

	printf("tx commit:\n");
	errno = 0;
	TX_BEGIN(POOL) {
		printf(" work\n");
		n++;
	} TX_ONCOMMIT {
		printf(" oncommit\n");
	} TX_ONABORT {
		printf(" onabort\n");
	} TX_FINALLY {
		printf(" finally\n");
	} TX_END
	printf(" after: n %d errno %d\n", n, errno);

	printf("tx abort:\n");
	errno = 0;
	TX_BEGIN(POOL) {
		n++;
		pmemobj_tx_abort(EPERM);
		printf(" not reached\n");
	} TX_ONCOMMIT {
		printf(" oncommit\n");
	} TX_ONABORT {
		printf(" onabort n %d\n", n);
	} TX_FINALLY {
		printf(" finally\n");
	} TX_END
	printf(" after: errno %d\n", errno);

	printf("tx abort(0), no onabort block:\n");
	errno = 0;
	TX_BEGIN(POOL) {
		pmemobj_tx_abort(0);
	} TX_FINALLY {
		printf(" finally\n");
	} TX_END
	printf(" after: errno %d\n", errno);

	printf("tx params:\n");
	TX_BEGIN_PARAM(POOL, TX_PARAM_MUTEX, &mtx, TX_PARAM_RWLOCK, &rwl, TX_PARAM_NONE) {
		printf(" work\n");
	} TX_END
	TX_BEGIN_LOCK(POOL, TX_PARAM_RWLOCK, &rwl) {
		printf(" work\n");
	} TX_END
	TX_BEGIN_CB(POOL, cb, &cbarg) {
		printf(" work\n");
	} TX_END
	TX_BEGIN_CB(POOL, cb, &cbarg, TX_PARAM_MUTEX, &mtx, TX_PARAM_NONE) {
		printf(" work\n");
	} TX_ONABORT {
		printf(" onabort\n");
	} TX_END

	printf("tx begin fails:\n");
	errno = 0;
	TX_BEGIN(BAD) {
		printf(" work\n");
	} TX_ONABORT {
		printf(" onabort errno %d\n", errno);
	} TX_FINALLY {
		printf(" finally\n");
	} TX_END
	printf(" after: errno %d\n", errno);

	printf("tx nested, inner aborts:\n");
	errno = 0;
	TX_BEGIN(POOL) {
		TX_BEGIN(POOL) {
			pmemobj_tx_abort(ENOMEM);
		} TX_ONABORT {
			printf(" inner onabort\n");
		} TX_END
		printf(" outer work goes on\n");
	} TX_ONCOMMIT {
		printf(" outer oncommit\n");
	} TX_ONABORT {
		printf(" outer onabort\n");
	} TX_END
	printf(" after: errno %d inner_aborted %d\n", errno, inner_aborted);
}

/* With POBJ_TX_CRASH_ON_NO_ONABORT, the abort without a TX_ONABORT block ends the run. */
static void
aborted(int sig)
{
	printf("abort() called\n");
	fflush(stdout);
	_exit(0);
}

int
main(void)
{
	signal(SIGABRT, aborted);
	layout_facts();
	constant_facts();
	type_facts();
	run_macros();
	run_transactions();
	return 0;
}
EOF

# Compile facts.c against one set of headers and run it: compare NAME [CFLAGS...]
facts() {
	local tag=$1
	shift
	if ! "$cc" -std=gnu99 -w "$@" -o "$out/facts-$tag" "$out/facts.c" 2>"$out/facts-$tag.err"; then
		sed 's/^/    /' "$out/facts-$tag.err" | head -30
		return 1
	fi
	"$out/facts-$tag" >"$out/facts-$tag.txt"
}

for variant in default nonline crash; do
	flags=()
	[ $variant = nonline ] && flags=(-DPMEMOBJ_DIRECT_NON_INLINE)
	[ $variant = crash ] && flags=(-DPOBJ_TX_CRASH_ON_NO_ONABORT)
	if ! facts "pmdk-$variant" "${flags[@]}"; then
		fail "facts.c ($variant) does not build against the system headers"
	elif ! facts "ours-$variant" -I"$inc" "${flags[@]}"; then
		fail "facts.c ($variant) does not build against $inc"
	elif ! diff -u "$out/facts-pmdk-$variant.txt" "$out/facts-ours-$variant.txt" \
			>"$out/facts-$variant.diff"; then
		cat "$out/facts-$variant.diff"
		fail "facts ($variant): the headers differ (- libpmemobj, + ours)"
	else
		echo "ok: $(wc -l <"$out/facts-pmdk-$variant.txt") facts agree ($variant)"
		pass
	fi
done

# The examples. ex_common.h is PMDK's helper that Debian does not ship: declare what the
# examples take from it.
if [ ! -d "$examples" ]; then
	skip "no examples in $examples"
else
	mkdir -p "$out/stub"
	cat >"$out/stub/ex_common.h" <<'EOF'
/* Stand-in for the helper header of PMDK's examples, which is not installed. */
#include <stdint.h>
#include <sys/stat.h>
#define CREATE_MODE_RW (S_IWUSR | S_IRUSR)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
int file_exists(const char *path);
unsigned find_last_set_64(uint64_t val);
EOF
	exinc=(-I"$out/stub" -I"$examples")
	for d in map tree_map hashmap list_map linkedlist libart string_store string_store_tx \
			string_store_tx_type slab_allocator; do
		exinc+=(-I"$examples/$d")
	done
	have_curses=0 have_fuse=0
	echo '#include <curses.h>' | "$cc" -x c -fsyntax-only - 2>/dev/null && have_curses=1
	fuse_cflags=$(pkg-config --cflags fuse 2>/dev/null) && have_fuse=1
	while IFS= read -r f; do
		rel=${f#"$examples"/}
		extra=()
		case $rel in
		pmemblk/* | pmemlog/*)
			continue ;;	# libpmemblk's and libpmemlog's APIs, not ours
		pminvaders/*)
			if [ $have_curses = 0 ]; then
				skip "$rel: needs ncurses (curses.h is missing)"
				continue
			fi ;;
		pmemobjfs/*)
			if [ $have_fuse = 0 ]; then
				skip "$rel: needs FUSE 2 (pkg-config fuse finds none)"
				continue
			fi
			read -ra extra <<<"$fuse_cflags -DFUSE_USE_VERSION=28 -DUSE_CTREE" ;;
		esac
		if ! "$cc" -fsyntax-only -w "${exinc[@]}" "${extra[@]}" "$f" 2>/dev/null; then
			skip "$rel: does not compile against the system headers either"
		elif "$cc" -fsyntax-only -w -I"$inc" "${exinc[@]}" "${extra[@]}" "$f" \
				2>"$out/example.err"; then
			pass
		else
			sed 's/^/    /' "$out/example.err" | head -20
			fail "$rel does not compile against $inc"
		fi
	done < <(find "$examples" -name '*.c' | sort)
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
