/*
 * test_errmsg.c - each thread's last error message (kr_errmsg), kept outside thread-local
 * storage in a slot the thread claims at its first error and gives back when it exits
 * (src/base/err.c says why).
 *
 *   - a thread's message is its own: threads failing at once each read the path they
 *     failed on, never another thread's;
 *   - slots come back: 1000 threads, one after the other, each fail and read their own
 *     message (without the give-back, the 257th would find none);
 *   - more threads than slots, alive at once: each still gets its error code, and a
 *     message (its own, or the code's description when no slot is left), never a crash.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define AT_ONCE 300

static pthread_barrier_t meet;

struct failer {
	int id;
	int wait;   /* meet the others before failing and after reading */
	int own;    /* the message named this thread's path */
	int code;
	char msg[64];
};

static void *fail_once(void *arg)
{
	struct failer *f = arg;
	char path[64];
	snprintf(path, sizeof(path), "/nonexistent/keratin-errmsg-%d", f->id);
	if (f->wait)
		pthread_barrier_wait(&meet);
	kr_pool *pool;
	f->code = kr_pool_open(path, 0, &pool);
	if (f->wait)
		pthread_barrier_wait(&meet); /* every thread has failed: messages could mix now */
	f->own = strstr(kr_errmsg(), path) != NULL;
	snprintf(f->msg, sizeof(f->msg), "%s", kr_errmsg());
	return NULL;
}

int main(void)
{
	static struct failer f[AT_ONCE];
	pthread_t t[AT_ONCE];
	for (int i = 0; i < 1000; i++) {
		struct failer one = {.id = i};
		TU_ASSERT(pthread_create(&t[0], NULL, fail_once, &one) == 0, "pthread_create");
		pthread_join(t[0], NULL);
		TU_ASSERT(one.code != KR_OK && one.own, "thread %d of 1000, one at a time: its message is "
			  "\"%s\" (slots not given back?)", i, one.msg);
	}
	printf("1000 threads one after another: each read its own message\n");

	pthread_barrier_init(&meet, NULL, AT_ONCE);
	for (int i = 0; i < AT_ONCE; i++) {
		f[i] = (struct failer){.id = i, .wait = 1};
		TU_ASSERT(pthread_create(&t[i], NULL, fail_once, &f[i]) == 0, "pthread_create %d", i);
	}
	int own = 0;
	for (int i = 0; i < AT_ONCE; i++) {
		pthread_join(t[i], NULL);
		TU_ASSERT(f[i].code != KR_OK && f[i].msg[0], "thread %d: code %d, message \"%s\"", i, f[i].code,
			  f[i].msg);
		if (f[i].own)
			own++;
		else
			TU_ASSERT(strcmp(f[i].msg, kr_strerror(f[i].code)) == 0,
				  "thread %d read another thread's message: \"%s\"", i, f[i].msg);
	}
	pthread_barrier_destroy(&meet);
	TU_ASSERT(own >= 255, "only %d of %d threads alive at once had a message of their own", own,
		  AT_ONCE);
	printf("%d threads at once: %d read their own message, the rest the code's description\n", AT_ONCE,
	       own);
	return 0;
}
