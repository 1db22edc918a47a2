/*
 * invariant.h - KR_INVARIANT: the numbered invariants that the core files state in their
 * opening comments, checked in code at the points where they must hold.
 *
 * Compiled in by -DKR_DEBUG_INVARIANTS=ON (the ASan build of `make check` turns it on) and
 * out otherwise: the checks are cheap, but they sit on the commit path. A broken invariant
 * is a bug in keratin, never a user's error or damaged media (damage is detected by
 * checksums and reported as an error code), so the only sound reaction is to stop before the
 * broken state reaches the media: the message names the file's invariant and the process
 * aborts.
 */
#ifndef KR_INVARIANT_H
#define KR_INVARIANT_H

#ifdef KR_DEBUG_INVARIANTS
/* Prints "keratin: invariant FILE N broken: COND (at SRC:LINE)" and aborts. Code linked
 * into other programs without the library (pmsan's runtime) defines KR_INVARIANT_FAILED as
 * its own function of the same signature before including this header. */
#ifndef KR_INVARIANT_FAILED
#define KR_INVARIANT_FAILED kr_invariant_failed
#endif
__attribute__((noreturn, cold)) void KR_INVARIANT_FAILED(const char *file, int n, const char *cond,
							  const char *src, int line);
#define KR_INVARIANT(file, n, cond) \
	((cond) ? (void)0 : KR_INVARIANT_FAILED((file), (n), #cond, __FILE__, __LINE__))
#else
#define KR_INVARIANT(file, n, cond) ((void)0)
#endif

#endif
