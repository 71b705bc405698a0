/* SPDX-License-Identifier: MIT */
/* mkfull FILE N — records N user events through the C API into FILE, for a test that runs it
 * where FILE cannot grow (RLIMIT_FSIZE, a small tmpfs).
 *
 * Event i has tag i and a payload of 1000 + (i * 7919) % 3000 bytes, byte j = (i * 131 + j) % 251,
 * so a reader of what was salvaged can check each event's own value. Calls refused with
 * TT_E_STOPPED (the disk was full and the memory budget spent) are counted; any other failure is
 * fatal. On stdout: "accepted A refused R errno E offset O". Exit status 0 when every result was
 * as documented: TT_OK then only TT_E_STOPPED, close returned TT_E_IO naming the file and the
 * errno (ENOSPC or EFBIG), stats.refused = R; 1 otherwise; 3 when the run never hit a write
 * error (the test then has nothing to check). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

static void fail(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "mkfull: %s: %s%s%s\n", what, tt_error_name(rc), err ? ": " : "",
            err ? err->message : "");
    exit(1);
}

int main(int argc, char **argv)
{
    static unsigned char buf[4096];
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    if (argc != 3) {
        fprintf(stderr, "usage: mkfull FILE N\n");
        return 2;
    }
    unsigned long n = strtoul(argv[2], NULL, 10);
    tt_config_init(&cfg);
    if (tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err) != TT_OK ||
        tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 64 * 1024, &err) != TT_OK ||
        tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 1024 * 1024, &err) != TT_OK ||
        tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err) != TT_OK)
        fail("config", err.code, &err);
    int rc = tt_session_open(&cfg, &s, &err);
    if (rc != TT_OK)
        fail("open", rc, &err);
    unsigned long accepted = 0, refused = 0;
    for (unsigned long i = 0; i < n; i++) {
        size_t len = 1000 + (i * 7919) % 3000;
        for (size_t j = 0; j < len; j++)
            buf[j] = (unsigned char)((i * 131 + j) % 251);
        rc = tt_user(s, (uint32_t)i, buf, len);
        if (rc == TT_OK && refused == 0)
            accepted++;
        else if (rc == TT_E_STOPPED)
            refused++;
        else
            fail("tt_user after refusals", rc, NULL);
    }
    tt_session_stats st;
    tt_session_stats_get(s, &st);
    if (st.refused != refused) {
        fprintf(stderr, "mkfull: stats.refused %llu, %lu refused\n",
                (unsigned long long)st.refused, refused);
        return 1;
    }
    rc = tt_session_close(s, &err);
    printf("accepted %lu refused %lu errno %d offset %llu\n", accepted, refused, err.sys_errno,
           (unsigned long long)err.offset);
    if (rc == TT_OK)
        return 3;
    if (rc != TT_E_IO || (err.sys_errno != ENOSPC && err.sys_errno != EFBIG) ||
        !strstr(err.message, argv[1]) || !strstr(err.message, strerror(err.sys_errno))) {
        fprintf(stderr, "mkfull: close: %s: %s\n", tt_error_name(rc), err.message);
        return 1;
    }
    fprintf(stderr, "mkfull: close: %s\n", err.message);
    return 0;
}
