/*
 * err.c - error codes, their static descriptions, and the thread's last error.
 *
 * The last error is the thread's own, so that concurrent threads never see each other's
 * messages; it is overwritten by the next failure, never cleared by success (like errno),
 * so callers read it only after a call reported failure.
 *
 * The message text is not in thread-local storage itself. The libraries reach their
 * thread-locals through the initial-exec model (one instruction, where the general model
 * calls __tls_get_addr: 10 % of a small transaction), which puts a library's whole TLS
 * block in the space glibc keeps for libraries loaded later by dlopen, about 1.7 KB for all
 * of them. So a thread's message buffer is one of MSG_SLOTS static ones, claimed at its
 * first message without a lock or malloc (errors are also set in the media fault handler,
 * a signal handler) and given back when the thread exits. A thread that finds none free
 * keeps its error code and reports the code's description.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "invariant.h"

#define KR_ERRMSG_MAX 512
#define MSG_SLOTS 256

static _Thread_local int last_code;
static _Thread_local char *last_msg; /* this thread's slot, NULL before its first message */

static char msg_slot[MSG_SLOTS][KR_ERRMSG_MAX];
static _Atomic uint64_t msg_used[MSG_SLOTS / 64];
static pthread_key_t msg_key; /* its destructor gives a thread's slot back */
static int msg_key_ok;

/* At the thread's exit. An error the thread still meets afterwards (in another key's
 * destructor) claims a slot again, and that one is given back in the next round. */
static void msg_release(void *slot)
{
	size_t i = (size_t)((char(*)[KR_ERRMSG_MAX])slot - msg_slot);
	last_msg = NULL;
	atomic_fetch_and(&msg_used[i / 64], ~(1ull << (i % 64)));
}

/* At load, before any thread can fail: pthread_key_create is no call for a signal handler
 * (and a key made early is below 32, whose values glibc keeps in the thread's descriptor:
 * pthread_setspecific then allocates nothing). */
__attribute__((constructor)) static void msg_key_init(void)
{
	msg_key_ok = pthread_key_create(&msg_key, msg_release) == 0;
}

/* At unload (dlclose): a thread exiting later must not call into unmapped code. */
__attribute__((destructor)) static void msg_key_fini(void)
{
	if (msg_key_ok)
		pthread_key_delete(msg_key);
	msg_key_ok = 0;
}

static char *msg_buf(void)
{
	if (last_msg || !msg_key_ok)
		return last_msg;
	for (size_t w = 0; w < MSG_SLOTS / 64; w++) {
		uint64_t used = atomic_load(&msg_used[w]);
		while (~used) {
			int b = __builtin_ctzll(~used);
			if (atomic_compare_exchange_weak(&msg_used[w], &used, used | 1ull << b)) {
				last_msg = msg_slot[w * 64 + (size_t)b];
				last_msg[0] = '\0';
				/* A key below 32 has its value in the thread's descriptor: no malloc. */
				pthread_setspecific(msg_key, last_msg);
				return last_msg;
			}
		}
	}
	return NULL;
}

static const struct {
	int code;
	const char *text;
} kr_err_texts[] = {
	{KR_OK, "success"},
	{KR_E_MISUSE, "API misuse"},
	{KR_E_MISUSE_ARG, "invalid argument"},
	{KR_E_MISUSE_STATE, "call not valid in the current transaction state"},
	{KR_E_MISUSE_OID, "object id is not a live object of this pool"},
	{KR_E_MISUSE_FREED, "object already freed"},
	{KR_E_MISUSE_RANGE, "range beyond the end of the object"},
	{KR_E_MISUSE_THREAD, "transaction used from another thread"},
	{KR_E_MISUSE_SHARED, "object is open for write in another live transaction"},
	{KR_E_NOSPACE, "out of space"},
	{KR_E_NOSPACE_HEAP, "no free space in the heap for this allocation"},
	{KR_E_NOSPACE_LOG, "transaction too large for a log lane"},
	{KR_E_TOO_BIG, "allocation larger than the pool can hold"},
	{KR_E_IO, "I/O error"},
	{KR_E_IO_OPEN, "cannot open or create the file"},
	{KR_E_IO_MAP, "cannot map the file"},
	{KR_E_IO_SYNC, "cannot make data durable (msync failed)"},
	{KR_E_IO_EXISTS, "file already exists"},
	{KR_E_IO_BUSY, "pool is already open"},
	{KR_E_FORMAT, "not a usable pool"},
	{KR_E_FORMAT_NOT_POOL, "not a keratin pool"},
	{KR_E_FORMAT_VERSION, "pool made by a newer keratin"},
	{KR_E_FORMAT_TRUNCATED, "pool file is truncated"},
	{KR_E_FORMAT_GEOMETRY, "pool header geometry is inconsistent"},
	{KR_E_FORMAT_MISMATCH, "sidecar does not describe this file (other file or size)"},
	{KR_E_CORRUPT, "corruption detected"},
	{KR_E_CORRUPT_HEADER, "both pool header copies are damaged"},
	{KR_E_CORRUPT_META, "heap metadata is damaged"},
	{KR_E_CORRUPT_LOG, "committed log entry is damaged"},
	{KR_E_CORRUPT_OBJECT, "object fails its checksum"},
	{KR_E_CORRUPT_REGION, "protected region has pages that fail their checksum"},
	{KR_E_MEDIA, "unrepairable media error"},
	{KR_E_NOMEM, "out of memory"},
	{KR_E_POOL_FAILED, "pool is in the error state; reopen it"},
	{KR_E_CANARY, "micro-buffer overrun detected; transaction aborted"},
};

const char *kr_strerror(int err)
{
	for (size_t i = 0; i < sizeof(kr_err_texts) / sizeof(kr_err_texts[0]); i++)
		if (kr_err_texts[i].code == err)
			return kr_err_texts[i].text;
	return "unknown error code";
}

int kr_errcode(void) { return last_code; }

const char *kr_errmsg(void) { return last_msg && last_msg[0] ? last_msg : kr_strerror(last_code); }

void kr_err_clear(void)
{
	last_code = KR_OK;
	if (last_msg)
		last_msg[0] = '\0';
}

int kr_err_recode(int code)
{
	last_code = code;
	return code;
}

static int err_vset(int code, const char *suffix, const char *fmt, va_list ap)
{
	char *m = msg_buf();
	int n = m ? vsnprintf(m, KR_ERRMSG_MAX, fmt, ap) : -1;
	if (suffix && n >= 0 && (size_t)n < KR_ERRMSG_MAX)
		snprintf(m + n, KR_ERRMSG_MAX - (size_t)n, ": %s", suffix);
	last_code = code;
	return code;
}

int kr_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(code, NULL, fmt, ap);
	va_end(ap);
	return code;
}

int kr_err_errno(int code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	err_vset(code, strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
	return code;
}

int kr_err_corrupt(int code, const char *file, int line, uint64_t off, const char *fmt, ...)
{
	char what[KR_ERRMSG_MAX / 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* Where in keratin the damage was noticed matters to keratin's developers, not to the
	 * user reading the message: only with KERATIN_DEBUG=1. */
	const char *dbg = getenv("KERATIN_DEBUG");
	if (!dbg || strcmp(dbg, "1") != 0)
		return kr_err_set(code, "%s at pool offset 0x%llx", what, (unsigned long long)off);
	const char *base = strrchr(file, '/'); /* the source file, not the build machine's path */
	return kr_err_set(code, "%s at pool offset 0x%llx (detected at %s:%d)", what,
			  (unsigned long long)off, base ? base + 1 : file, line);
}

#ifdef KR_DEBUG_INVARIANTS
void kr_invariant_failed(const char *file, int n, const char *cond, const char *src, int line)
{
	fprintf(stderr, "keratin: invariant %s %d broken: %s (at %s:%d)\n", file, n, cond, src, line);
	abort();
}
#endif

int kr_opts_size_check(uint32_t given, size_t expected, const char *name)
{
	if (given == expected)
		return KR_OK;
	return kr_err_set(KR_E_MISUSE_ARG, "%s.struct_size is %u, not %zu: set it to sizeof(struct "
			  "%s) (or start from its _OPTS_INIT macro)", name, given, expected, name);
}
