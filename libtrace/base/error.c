/* SPDX-License-Identifier: MIT */
/* Error codes, messages and the error-info helper. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

const char *tt_strerror(int code)
{
    switch (code) {
#define TT_ERROR_MSG_(name, num, msg)                                                              \
    case num:                                                                                      \
        return msg;
        TT_ERRORS(TT_ERROR_MSG_)
#undef TT_ERROR_MSG_
    }
    return "unknown error";
}

const char *tt_error_name(int code)
{
    switch (code) {
#define TT_ERROR_NAME_(name, num, msg)                                                             \
    case num:                                                                                      \
        return "TT_" #name;
        TT_ERRORS(TT_ERROR_NAME_)
#undef TT_ERROR_NAME_
    }
    return "TT_E_UNKNOWN";
}

unsigned tt_version(void)
{
    return TT_VERSION_NUMBER;
}

int tt_fail(tt_error_info *err, int code, int sys_errno, uint64_t offset, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        err->sys_errno = sys_errno;
        err->offset = offset;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}
