/*
 * fsuring.h - the FUSE-over-io_uring transport (fsuring.c) as the mount (fsmount.c) and the
 * translation's transport (fsfuse.c) use it, and the part of the kernel's protocol for it
 * (FUSE 7.42, Linux 6.14) that Debian 12's <linux/fuse.h> (Linux 6.1) predates.
 */
#ifndef KR_TOOLS_FSURING_H
#define KR_TOOLS_FSURING_H

#include <errno.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

/* ---- the kernel's ABI (include/uapi/linux/fuse.h, protocol 7.42) ----------------------- */

/* INIT flag, bit 41 of the 64 flag bits (bit 9 of flags2, FUSE_INIT_EXT): offered by a
 * kernel whose fuse module has enable_uring=Y, and asked for by the daemon. */
#define FSURING_INIT_FLAG (1ull << 41)

/* What SQE128's 80-byte command area carries (IORING_OP_URING_CMD on the /dev/fuse fd). */
enum { FSURING_CMD_REGISTER = 1, FSURING_CMD_COMMIT_AND_FETCH = 2 };

struct fsuring_cmd_req {
	uint64_t flags;
	uint64_t commit_id; /* COMMIT_AND_FETCH: the request answered (its unique) */
	uint16_t qid;	    /* the queue: a CPU number below the kernel's count of CPUs */
	uint8_t padding[6];
};

/* The ring entry's header buffer (iov[0] of REGISTER). The kernel writes a request's
 * fuse_in_header into in_out, its first argument (the opcode's fixed struct, possibly
 * empty) into op_in, and the remaining arguments back to back into the payload buffer
 * (iov[1]), their length into ent.payload_sz. A reply goes back the same way: its
 * fuse_out_header in in_out, all of its arguments in the payload, their length in
 * ent.payload_sz. */
struct fsuring_req_header {
	char in_out[128];
	char op_in[128];
	struct fsuring_ent_in_out {
		uint64_t flags;
		uint64_t commit_id; /* the unique to name in COMMIT_AND_FETCH */
		uint32_t payload_sz;
		uint32_t padding;
		uint64_t reserved;
	} ent;
};

_Static_assert(sizeof(struct fsuring_cmd_req) == 24, "fuse_uring_cmd_req is 24 bytes");
_Static_assert(offsetof(struct fsuring_cmd_req, qid) == 16, "fuse_uring_cmd_req.qid at 16");
_Static_assert(sizeof(struct fsuring_ent_in_out) == 32, "fuse_uring_ent_in_out is 32 bytes");
_Static_assert(offsetof(struct fsuring_ent_in_out, payload_sz) == 16, "payload_sz at 16");
_Static_assert(offsetof(struct fsuring_req_header, op_in) == 128, "op_in at 128");
_Static_assert(offsetof(struct fsuring_req_header, ent) == 256, "ring_ent_in_out at 256");
_Static_assert(sizeof(struct fsuring_req_header) == 288, "fuse_uring_req_header is 288 bytes");
_Static_assert(sizeof(struct fuse_in_header) <= 128 && sizeof(struct fuse_out_header) <= 128,
	       "FUSE's headers fit in_out");

/* ---- the transport ----------------------------------------------------------------------- */

struct fsuring;

struct fsuring_ops {
	/* Serves one request, rebuilt as /dev/fuse delivers it (fuse_in_header, the opcode's
	 * struct, the rest), on the ring thread that received it. The reply must reach
	 * fsuring_take_reply on this thread before serve returns (else the request fails with
	 * EIO). */
	void (*serve)(void *arg, void *req, size_t len);
	/* Called once, on a daemon thread: error NULL when every queue has its ring entries and
	 * the kernel will send requests through them, else why not, one line. */
	void (*started)(void *arg, const char *error);
};

#ifdef KR_HAVE_LIBURING

/* Whether this kernel lets a daemon serve FUSE over io_uring (its fuse module's
 * enable_uring): 0, or -1 with the reason, one line, in why. */
int fsuring_kernel_check(char *why, size_t cap);

/* The transport for the /dev/fuse descriptor fd, started later (fsuring_start). NULL, errno
 * set, if out of memory. */
struct fsuring *fsuring_new(int fd, const struct fsuring_ops *ops, void *arg);

/* Edits libfuse's INIT reply (out, len bytes), before it is written: asks for io_uring when
 * the kernel offered it in kernel_flags (the INIT request's 64 flag bits), and learns the
 * largest payload a request or a reply may have. */
void fsuring_init_reply(struct fsuring *r, uint64_t kernel_flags, struct fuse_init_out *out, size_t len);

/* After the INIT reply was written: one queue per CPU, each served by threads of their own
 * (fsuring.c). Ends with ops->started. */
void fsuring_start(struct fsuring *r);

/* Where a reply's data of size bytes may be built in place, on a ring thread serving a
 * request (the entry's payload buffer; fsuring_take_reply then copies nothing): NULL
 * elsewhere, or if it would not fit. */
void *fsuring_reply_space(size_t size);

/* Takes a reply (iov[0] the fuse_out_header, as libfuse writes one) into the ring entry of
 * the request this thread serves, if it is that request's: true if taken, false if it goes
 * to /dev/fuse (a notification, or not on a ring thread). */
bool fsuring_take_reply(const struct iovec *iov, int count);

/* Stops the ring threads, joins them and frees r (NULL: nothing). After the unmount, the
 * kernel has ended their commands already. */
void fsuring_stop(struct fsuring *r);

#else /* built without liburing: -o uring is refused by the first check */

static inline int fsuring_kernel_check(char *why, size_t cap)
{
	snprintf(why, cap, "-o uring: this keratin was built without liburing");
	return -1;
}
static inline struct fsuring *fsuring_new(int fd, const struct fsuring_ops *ops, void *arg)
{
	(void)fd, (void)ops, (void)arg;
	errno = ENOSYS;
	return NULL;
}
static inline void fsuring_init_reply(struct fsuring *r, uint64_t kernel_flags, struct fuse_init_out *out,
				      size_t len)
{
	(void)r, (void)kernel_flags, (void)out, (void)len;
}
static inline void fsuring_start(struct fsuring *r)
{
	(void)r;
}
static inline void *fsuring_reply_space(size_t size)
{
	(void)size;
	return NULL;
}
static inline bool fsuring_take_reply(const struct iovec *iov, int count)
{
	(void)iov, (void)count;
	return false;
}
static inline void fsuring_stop(struct fsuring *r)
{
	(void)r;
}

#endif
#endif
