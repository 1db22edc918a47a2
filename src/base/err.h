/*
 * err.h - how keratin reports errors internally.
 *
 * Every failure is set once, where it is detected, with kr_err_set(code, fmt, ...), which
 * records the code and a detailed message in thread-local storage and returns the code, so
 * failing paths read "return kr_err_set(KR_E_..., "what happened")". Corruption goes through
 * KR_CORRUPT(), which also records the source location and the damaged pool offset, so that
 * a report of damage can always be traced to the check that found it and the bytes it
 * judged (kept distinct from I/O and media errors, which repair treats differently).
 */
#ifndef KR_ERR_H
#define KR_ERR_H

#include <stdint.h>

#include "keratin.h"

#if defined(__GNUC__)
#define KR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KR_PRINTF(a, b)
#endif

/* The public kr_error_set (keratin.h), under the name the library's own code uses. */
#define kr_err_set kr_error_set
/* kr_err_set with ": strerror(errno)" appended (errno captured on entry). */
int kr_err_errno(int code, const char *fmt, ...) KR_PRINTF(2, 3);
int kr_err_corrupt(int code, const char *file, int line, uint64_t off, const char *fmt, ...)
	KR_PRINTF(5, 6);
void kr_err_clear(void);
/* Changes the class of the thread's last error, keeping its message; returns code. */
int kr_err_recode(int code);

#define KR_CORRUPT(code, off, ...) kr_err_corrupt((code), __FILE__, __LINE__, (off), __VA_ARGS__)

/* An option struct's struct_size (keratin.h) against the sizeof this library was built
 * with: KR_OK, or KR_E_MISUSE_ARG naming the struct. When a struct grows, this is where
 * the sizes of its earlier versions become acceptable too (docs/ABI.md). */
int kr_opts_size_check(uint32_t given, size_t expected, const char *name);

#endif
