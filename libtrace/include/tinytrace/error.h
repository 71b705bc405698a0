/* SPDX-License-Identifier: MIT */
/* tinytrace — error codes.
 *
 * Errors are values. Every code is listed once in TT_ERRORS; the enum, tt_strerror() and
 * tt_error_name() are generated from that list. 0 is TT_OK and every error is negative, with a
 * fixed number that never changes between versions.
 *
 * Details that a code cannot carry (a path, an offset, the variable that was refused) go into a
 * tt_error_info that the caller passes in. There is no global "last error".
 */
#ifndef TINYTRACE_ERROR_H
#define TINYTRACE_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(TT_API)
#define TT_API __attribute__((visibility("default")))
#elif !defined(TT_API)
#define TT_API
#endif

/* X(name, number, message) */
#define TT_ERRORS(X)                                                                               \
    X(OK, 0, "success")                                                                            \
    X(E_INVAL, -1, "invalid argument")                                                             \
    X(E_NOMEM, -2, "out of memory")                                                                \
    X(E_IO, -3, "input/output error")                                                              \
    X(E_MODE, -4, "call not allowed in this session mode")                                         \
    X(E_CONFIG, -5, "invalid configuration value")                                                 \
    X(E_LIMIT, -6, "a configured limit was exceeded")                                              \
    X(E_DIVERGED, -7, "replay diverged from the recording")                                        \
    X(E_END, -8, "end of the recording")                                                           \
    X(E_UNCONSUMED, -9, "replay closed before the recording was consumed")                         \
    X(E_FORMAT, -10, "not a tinytrace file or unsupported format")                                 \
    X(E_VERSION, -11, "unsupported format version")                                                \
    X(E_TRUNCATED, -12, "trace file is truncated")                                                 \
    X(E_CHECKSUM, -13, "checksum mismatch")                                                        \
    X(E_COUNTS, -14, "counts do not match the manifest")                                           \
    X(E_CORRUPT, -15, "trace file is corrupt")                                                     \
    X(E_CAPACITY, -16, "the file needs more than the reader limits allow")                         \
    X(E_STORAGE, -17, "the storage given is smaller than the capacity")                            \
    X(E_EXHAUSTED, -18, "a chunk claims more than the storage capacity")                           \
    X(E_INCOMPLETE, -19, "trace file is marked incomplete")                                        \
    X(E_STOPPED, -20, "recording stopped after a write error")                                     \
    X(E_THREADS, -21, "too many recording threads")                                                \
    X(E_CLOSED, -22, "session is closing")                                                     \
    X(E_RESTORE, -23, "a checkpoint provider could not stage the restore")

typedef enum tt_error {
#define TT_ERROR_ENUM_(name, num, msg) TT_##name = (num),
    TT_ERRORS(TT_ERROR_ENUM_)
#undef TT_ERROR_ENUM_
} tt_error;

/* A human-readable sentence for @code; never NULL. Thread-safe, async-signal-safe. */
TT_API const char *tt_strerror(int code);

/* The symbolic name ("TT_E_DIVERGED") for @code; never NULL. Thread-safe, async-signal-safe. */
TT_API const char *tt_error_name(int code);

/* Details of a failed call, filled by the calls that take one (may be NULL everywhere).
 * @message names what was wrong: the path, the environment variable, the offset. */
typedef struct tt_error_info {
    int code;           /* the tt_error returned */
    int sys_errno;      /* errno of the failing system call, or 0 */
    uint64_t offset;    /* file offset involved, or UINT64_MAX */
    char message[512];  /* NUL-terminated */
} tt_error_info;

#ifdef __cplusplus
}
#endif
#endif
