/*
 * fsuring.c - the FUSE-over-io_uring transport: synchronous requests served on the CPU of
 * the process that made them (`keratin fs mount -o uring`).
 *
 * Why: over /dev/fuse, a request wakes a daemon thread asleep in read(2), mostly on another
 * CPU, and the reply wakes the caller back: two sleeps and two cross-CPU wakes per request,
 * which cost more than most requests' work (a `tar x` of small files spends about half of
 * the daemon's time switching tasks). With io_uring the kernel keeps one queue of requests
 * per CPU and hands a request to a daemon thread of its caller's CPU, so caller and server
 * take turns on one CPU.
 *
 * The kernel's protocol (Linux 6.14, FUSE 7.42; the facts fsuring.h's definitions and this
 * file rely on):
 *  - INIT goes over /dev/fuse. The kernel offers io_uring in the INIT request when its fuse
 *    module has enable_uring=Y; the daemon asks for it in its INIT reply (fsuring_init_reply).
 *    The ring is set up after that reply: the kernel refuses ring entries (EAGAIN) until it
 *    has taken the reply, which happens within the write of it.
 *  - One queue per possible CPU (qid below the kernel's count of CPUs); a request goes to
 *    the queue of the CPU its caller runs on, to any entry free there, else waits for one.
 *  - A ring entry is a header buffer (struct fsuring_req_header) and a payload buffer at least
 *    as large as the largest payload (the larger of 8 KiB, max_write and max_pages pages),
 *    registered with an IORING_OP_URING_CMD REGISTER on the /dev/fuse descriptor, from an
 *    io_uring with 128-byte SQEs (the command's struct lives in the SQE). The command
 *    completes when a request is in the buffers; the answer goes back in the same buffers
 *    with COMMIT_AND_FETCH, naming the request, which also waits for the next one.
 *  - Once the daemon asked for io_uring, the kernel holds new requests back until every
 *    queue has an entry; a REGISTER it refuses turns io_uring off for the connection (all
 *    goes over /dev/fuse). Over /dev/fuse still, whatever the ring: INIT, FORGET and
 *    BATCH_FORGET, INTERRUPT, requests queued before the ring was ready, and the daemon's
 *    notifications (the ring cannot carry them).
 *  - At unmount (the connection aborted) the kernel completes every entry's command with an
 *    error; closing an io_uring cancels the commands it has pending.
 *
 * Threads: per queue, THREADS_PER_QUEUE threads pinned to the queue's CPU, each with its
 * own io_uring and one entry, so that a request waiting for the file system's lock does not
 * hold up its CPU's next one. A thread blocks in io_uring_enter both to commit an answer and
 * to wait for the next request: one system call per request.
 *
 * Serving: the kernel splits a request in three (in_out, op_in, payload); libfuse wants it
 * whole. The payload buffer begins GAP bytes into a larger buffer, and the header and the
 * opcode's struct are written just before it, so a write's data is never copied here. The
 * request goes to ops->serve (fsfuse.c), which hands it to libfuse on this thread; libfuse
 * writes the reply through the session's transport (fsfuse.c io_writev), which gives it to
 * fsuring_take_reply: the reply of the request this thread serves (a thread-local) goes into
 * the entry, everything else to /dev/fuse. A read's data may be read straight into the
 * entry (fsuring_reply_space). No file-system rule lives here.
 *
 * Stopping: an eventfd that every ring polls; fsuring_stop writes it, and each thread ends
 * after the request it serves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "fsuring.h"

/* Two: one request may wait for the file system's lock while the other serves its CPU. */
enum { THREADS_PER_QUEUE = 2 };

/* Room before the payload for the request's header and the opcode's struct; a multiple of
 * 64, so the payload stays cache-line aligned. */
enum { GAP = 256 };
_Static_assert(GAP >= sizeof(struct fuse_in_header) + sizeof(((struct fsuring_req_header *)0)->op_in),
	       "the gap holds a request's header and the opcode's struct");

/* CQE tags: the ring entry's command, and the poll of the stop eventfd. */
enum { TAG_ENTRY = 1, TAG_STOP = 2 };

/* The kernel's smallest payload (FUSE_MIN_READ_BUFFER) and its max_pages without
 * FUSE_MAX_PAGES (FUSE_DEFAULT_MAX_PAGES_PER_REQ). */
enum { KERNEL_MIN_PAYLOAD = 8192, KERNEL_DEFAULT_MAX_PAGES = 32 };

static const char enable_param[] = "/sys/module/fuse/parameters/enable_uring";

struct ring_thread {
	struct fsuring *r;
	unsigned qid;
	bool created; /* to be joined */
	pthread_t tid;
	bool ring_up;
	struct io_uring ring;
	struct fsuring_req_header hdr;
	char *buf; /* GAP bytes, then the payload; freed after the join (see fsuring_stop) */
	size_t buf_len;
	struct iovec iov[2];
	uint64_t unique; /* the request in service */
	bool replied;
};

struct fsuring {
	int fd; /* /dev/fuse */
	const struct fsuring_ops *ops;
	void *arg;
	bool asked;	/* the INIT reply asked for io_uring */
	size_t payload; /* the largest payload, from the INIT reply */
	int stop_fd;	/* eventfd, written once by fsuring_stop */
	unsigned nthreads;
	struct ring_thread *threads;
	pthread_mutex_t lock; /* the start's tally: */
	unsigned reported;
	char error[160];
};

/* The ring thread this thread is (NULL on libfuse's own threads). */
static _Thread_local struct ring_thread *serving;

int fsuring_kernel_check(char *why, size_t cap)
{
	FILE *p = fopen(enable_param, "r");
	if (!p) {
		snprintf(why, cap, "this kernel cannot serve FUSE over io_uring (no %s: Linux 6.14 or later "
				   "with CONFIG_FUSE_IO_URING)", enable_param);
		return -1;
	}
	int c = fgetc(p);
	fclose(p);
	if (c != 'Y') {
		snprintf(why, cap, "io_uring for FUSE is off in the kernel: echo 1 > %s", enable_param);
		return -1;
	}
	return 0;
}

struct fsuring *fsuring_new(int fd, const struct fsuring_ops *ops, void *arg)
{
	struct fsuring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (r->stop_fd < 0) {
		free(r);
		return NULL;
	}
	r->fd = fd;
	r->ops = ops;
	r->arg = arg;
	pthread_mutex_init(&r->lock, NULL);
	return r;
}

void fsuring_init_reply(struct fsuring *r, uint64_t kernel_flags, struct fuse_init_out *out, size_t len)
{
	if (!(kernel_flags & FSURING_INIT_FLAG) || len < offsetof(struct fuse_init_out, flags2) + sizeof(out->flags2))
		return;
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= (uint32_t)(FSURING_INIT_FLAG >> 32);
	r->asked = true;
	/* The kernel's rule for a payload buffer's least size; it caps max_pages, never raises
	 * it, so this is at least what it asks. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (out->flags & FUSE_MAX_PAGES) ? out->max_pages : KERNEL_DEFAULT_MAX_PAGES;
	size_t p = KERNEL_MIN_PAYLOAD;
	p = out->max_write > p ? out->max_write : p;
	r->payload = pages * page > p ? pages * page : p;
}

/* The kernel's count of CPUs (num_possible_cpus), from the list of possible CPUs. */
static unsigned possible_cpus(void)
{
	FILE *p = fopen("/sys/devices/system/cpu/possible", "r");
	unsigned n = 0, a, b;
	while (p && fscanf(p, "%u", &a) == 1) {
		int c = fgetc(p);
		b = a;
		if (c == '-' && fscanf(p, "%u", &b) == 1)
			c = fgetc(p);
		n += b >= a ? b - a + 1 : 0;
		if (c != ',')
			break;
	}
	if (p)
		fclose(p);
	return n ? n : (unsigned)get_nprocs_conf();
}

/* One thread's word on its start (error NULL: its entry is registered); the last one calls
 * ops->started, with the first error heard. */
static void report(struct fsuring *r, const char *error)
{
	pthread_mutex_lock(&r->lock);
	if (error && !r->error[0])
		snprintf(r->error, sizeof(r->error), "%s", error);
	bool last = ++r->reported == r->nthreads;
	pthread_mutex_unlock(&r->lock);
	if (last)
		r->ops->started(r->arg, r->error[0] ? r->error : NULL);
}

/* The entry's command into the next SQE: false if there is none, which cannot be (every
 * SQE is submitted before the next is made). */
static bool prep_cmd(struct ring_thread *t, uint32_t op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (!sqe)
		return false;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: the command's struct is in the second half */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->r->fd;
	sqe->cmd_op = op;
	if (op == FSURING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)t->iov;
		sqe->len = 2;
	}
	struct fsuring_cmd_req *req = (struct fsuring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)t->qid;
	req->commit_id = commit_id;
	io_uring_sqe_set_data64(sqe, TAG_ENTRY);
	return true;
}

/* The thread's io_uring and ring entry, registered: 0, or -1 with why. */
static int ring_register(struct ring_thread *t, char *why, size_t cap)
{
	struct fsuring *r = t->r;
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128};
	int rc = io_uring_queue_init_params(4, &t->ring, &p);
	if (rc < 0) {
		snprintf(why, cap, "cannot set up an io_uring: %s", strerror(-rc));
		return -1;
	}
	t->ring_up = true;
	t->buf_len = GAP + r->payload;
	t->buf = mmap(NULL, t->buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->buf == MAP_FAILED) {
		t->buf = NULL;
		snprintf(why, cap, "no memory for a ring entry of %zu bytes", t->buf_len);
		return -1;
	}
	t->iov[0] = (struct iovec){.iov_base = &t->hdr, .iov_len = sizeof(t->hdr)};
	t->iov[1] = (struct iovec){.iov_base = t->buf + GAP, .iov_len = r->payload};
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (sqe) {
		io_uring_prep_poll_add(sqe, r->stop_fd, POLLIN);
		io_uring_sqe_set_data64(sqe, TAG_STOP);
	}
	if (!sqe || !prep_cmd(t, FSURING_CMD_REGISTER, 0)) {
		snprintf(why, cap, "no room in a new io_uring");
		return -1;
	}
	rc = io_uring_submit(&t->ring);
	if (rc < 0) {
		snprintf(why, cap, "cannot submit to an io_uring: %s", strerror(-rc));
		return -1;
	}
	/* A REGISTER the kernel refuses completes before the submission returns; one it takes
	 * completes only with a request, which the serving loop then finds. */
	struct io_uring_cqe *cqe;
	if (io_uring_peek_cqe(&t->ring, &cqe) == 0 && io_uring_cqe_get_data64(cqe) == TAG_ENTRY && cqe->res < 0) {
		snprintf(why, cap, "the kernel refused a ring entry for CPU %u: %s", t->qid, strerror(-cqe->res));
		io_uring_cqe_seen(&t->ring, cqe);
		return -1;
	}
	return 0;
}

/* Serves the request in the entry and leaves the answer there: the reply libfuse wrote
 * (fsuring_take_reply), or EIO for a request that came malformed or got none. */
static void serve_one(struct ring_thread *t)
{
	struct fuse_in_header in;
	memcpy(&in, t->hdr.in_out, sizeof(in));
	size_t payload = t->hdr.ent.payload_sz, room = t->buf_len - GAP;
	t->unique = in.unique;
	t->replied = false;
	/* The header's len counts every argument, so the opcode's struct is what remains. */
	if (in.len >= sizeof(in) + payload && payload <= room && in.len - sizeof(in) - payload <= sizeof(t->hdr.op_in)) {
		size_t op = in.len - sizeof(in) - payload;
		char *req = t->buf + GAP - op - sizeof(in);
		memcpy(req, &in, sizeof(in));
		memcpy(req + sizeof(in), t->hdr.op_in, op);
		t->r->ops->serve(t->r->arg, req, in.len);
	}
	if (!t->replied) {
		struct fuse_out_header out = {.len = sizeof(out), .error = -EIO, .unique = in.unique};
		memcpy(t->hdr.in_out, &out, sizeof(out));
		t->hdr.ent.payload_sz = 0;
	}
}

void *fsuring_reply_space(size_t size)
{
	struct ring_thread *t = serving;
	return t && !t->replied && size <= t->buf_len - GAP ? t->buf + GAP : NULL;
}

bool fsuring_take_reply(const struct iovec *iov, int count)
{
	struct ring_thread *t = serving;
	if (!t || t->replied || count < 1 || iov[0].iov_len != sizeof(struct fuse_out_header))
		return false;
	struct fuse_out_header out;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	if (out.unique != t->unique)
		return false;
	char *payload = t->buf + GAP;
	size_t room = t->buf_len - GAP, n = 0;
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > room - n) {
			/* Larger than the kernel's own limit on what it asked for: cannot be. */
			out.error = -EIO;
			n = 0;
			break;
		}
		if (iov[i].iov_base != payload + n) /* else built in place (fsuring_reply_space) */
			memcpy(payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	out.len = (uint32_t)(sizeof(out) + n);
	memcpy(t->hdr.in_out, &out, sizeof(out));
	t->hdr.ent.payload_sz = (uint32_t)n;
	t->replied = true;
	return true;
}

/* Requests until the kernel ends the entry's command (unmount) or fsuring_stop. */
static void serve_loop(struct ring_thread *t)
{
	serving = t;
	for (;;) {
		int rc = io_uring_submit_and_wait(&t->ring, 1);
		if (rc < 0 && rc != -EINTR)
			break;
		struct io_uring_cqe *cqe;
		if (io_uring_peek_cqe(&t->ring, &cqe) != 0)
			continue;
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (tag != TAG_ENTRY || res < 0)
			break;
		uint64_t commit_id = t->hdr.ent.commit_id;
		serve_one(t);
		if (!prep_cmd(t, FSURING_CMD_COMMIT_AND_FETCH, commit_id))
			break;
	}
	serving = NULL;
}

static void *ring_main(void *arg)
{
	struct ring_thread *t = arg;
	/* On the queue's CPU, where its requests' callers run. A CPU that is offline cannot be
	 * pinned to and has no callers; its threads run anywhere. */
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	CPU_SET(t->qid, &cpus);
	pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	char why[160];
	bool up = ring_register(t, why, sizeof(why)) == 0;
	report(t->r, up ? NULL : why);
	if (up)
		serve_loop(t);
	/* Cancels the entry's command if the kernel still holds it. */
	if (t->ring_up)
		io_uring_queue_exit(&t->ring);
	return NULL;
}

void fsuring_start(struct fsuring *r)
{
	if (!r->asked) {
		r->ops->started(r->arg, "the kernel did not offer io_uring at INIT (its fuse module's "
					"enable_uring was off, or it is older than Linux 6.14)");
		return;
	}
	unsigned n = possible_cpus() * THREADS_PER_QUEUE;
	r->threads = calloc(n, sizeof(*r->threads));
	if (!r->threads) {
		r->ops->started(r->arg, "out of memory for the ring threads");
		return;
	}
	r->nthreads = n;
	for (unsigned i = 0; i < n; i++) {
		struct ring_thread *t = &r->threads[i];
		t->r = r;
		t->qid = i / THREADS_PER_QUEUE;
		/* Created from a libfuse thread, which blocks every signal: so do these. */
		int rc = pthread_create(&t->tid, NULL, ring_main, t);
		t->created = rc == 0;
		if (rc) {
			char why[96];
			snprintf(why, sizeof(why), "cannot start a ring thread: %s", strerror(rc));
			report(r, why);
		}
	}
}

void fsuring_stop(struct fsuring *r)
{
	if (!r)
		return;
	uint64_t one = 1;
	if (write(r->stop_fd, &one, sizeof(one)) != sizeof(one)) {
		/* an eventfd takes 1 until its counter would overflow: cannot fail here */
	}
	for (unsigned i = 0; i < r->nthreads; i++)
		if (r->threads[i].created)
			pthread_join(r->threads[i].tid, NULL);
	/* The buffers outlive their threads: the kernel may write a request into an entry until
	 * its command ends, and after the thread is gone it no longer does. */
	for (unsigned i = 0; i < r->nthreads; i++)
		if (r->threads[i].buf)
			munmap(r->threads[i].buf, r->threads[i].buf_len);
	free(r->threads);
	close(r->stop_fd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
