/* SPDX-License-Identifier: MIT */
/* mkshape SHAPE FILE [N] — records a trace of a hostile shape with the C API, for the tests of
 * the tools on such traces (test-hostile.py).
 *
 *   deep FILE N      one thread that nests N calls (enter d0, enter d1, ... then every exit,
 *                    innermost first): a call tree N levels deep, 2N + 2 events, and a trace
 *                    that verifies. The functions cycle through 16 names ("f0" .. "f15"), so
 *                    a folded stack has distinct paths and the names stay short.
 *   threads FILE N   N threads (started one after another, each ending before the next
 *                    starts, so that only one runs at a time), each recording a call, a user
 *                    event and a safepoint: N x 6 events with thread-start and thread-end.
 *                    With N up to 65536 (TT_PARAM_MAX_THREADS).
 *   hostile FILE     a small trace whose recorded command line, working directory,
 *                    environment, thread name and function name hold terminal escapes
 *                    ("\x1b]0;" sets a window title, "\x1b[2J" clears the screen), as a trace
 *                    from a stranger could: META objects "argc=3", "argv[0]=...",
 *                    "argv[1]=...", "argv[2]=...", "cwd=...", "envc=3", "env[0]=..." to
 *                    "env[2]=...", "execfn=..." and "untraced=..." made the way the runtime
 *                    makes them (libtrace/instrument/runtime.c, record_meta).
 *   damaged FILE     the same, with one more argument than argc says ("argv[3]=..."): a
 *                    command line that replay refuses as damaged.
 *
 * Exit status 0 on success, 1 on a failure (with a message on stderr), 2 on a bad command line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

static tt_session *session;
static uint32_t fn_names[16], fn_work, site_sp;

static void die(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "mkshape: %s: %s (%s)%s%s\n", what, tt_strerror(rc), tt_error_name(rc),
            err != NULL && err->message[0] ? ": " : "", err != NULL ? err->message : "");
    exit(1);
}

static void check(const char *what, int rc)
{
    if (rc != TT_OK)
        die(what, rc, NULL);
}

static void open_session(const char *file, uint64_t max_threads)
{
    tt_config cfg;
    tt_error_info err;
    int rc;

    tt_config_init(&cfg);
    memset(&err, 0, sizeof err);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err)) != TT_OK ||
        (rc = tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 64 * 1024, &err)) != TT_OK ||
        (rc = tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 8u << 20, &err)) != TT_OK ||
        (rc = tt_config_set(&cfg, TT_PARAM_MAX_THREADS, max_threads, &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, file, &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_CALLER, "mkshape integration test", &err)) !=
            TT_OK)
        die("config", rc, &err);
    if ((rc = tt_session_open(&cfg, &session, &err)) != TT_OK)
        die("tt_session_open", rc, &err);
}

static void close_session(void)
{
    tt_error_info err;
    int rc;
    memset(&err, 0, sizeof err);
    if ((rc = tt_session_close(session, &err)) != TT_OK)
        die("tt_session_close", rc, &err);
}

static void intern_names(void)
{
    char name[16];
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "f%d", i);
        check("intern", tt_intern(session, TT_OBJ_FUNCTION, name, &fn_names[i]));
    }
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "work", &fn_work));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.sp", &site_sp));
}

static void record_deep(unsigned long n)
{
    check("tt_thread_name", tt_thread_name(session, "main"));
    for (unsigned long d = 0; d < n; d++)
        check("enter", TT_ENTER(session, fn_names[d % 16]));
    for (unsigned long d = n; d-- > 0;)
        check("exit", TT_EXIT(session, fn_names[d % 16]));
}

static void *one_thread(void *arg)
{
    unsigned long t = (unsigned long)(uintptr_t)arg;
    unsigned char data[8];
    memcpy(data, &t, sizeof data < sizeof t ? sizeof data : sizeof t);
    check("enter", TT_ENTER(session, fn_work));
    check("user", TT_USER(session, t, data, sizeof data));
    check("safepoint", TT_SAFEPOINT(session, fn_work, site_sp));
    check("exit", TT_EXIT(session, fn_work));
    check("tt_session_thread_end", tt_session_thread_end(session));
    return NULL;
}

static void record_threads(unsigned long n)
{
    /* the main thread is one of the n */
    for (unsigned long t = 1; t < n; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, one_thread, (void *)(uintptr_t)t) != 0 ||
            pthread_join(th, NULL) != 0) {
            fprintf(stderr, "mkshape: cannot run thread %lu\n", t);
            exit(1);
        }
    }
    check("enter", TT_ENTER(session, fn_work));
    check("exit", TT_EXIT(session, fn_work));
}

static void record_hostile(int damaged)
{
    static const char *const meta[] = {
        "argc=3",
        "argv[0]=/bin/\x1b]0;owned\x07prog",
        "argv[1]=--title=\x1b]0;pwned\x1b\\",
        "argv[2]=\x1b[2J\x1b[Hcleared \xc2\x9b" "31m",
        "cwd=/tmp/\x1b[2J\x1b]0;cwd\x07" "dir",
        "envc=3",
        "env[0]=PATH=/bin",
        "env[1]=LD_PRELOAD=/tmp/\x1b]0;evil\x07.so",
        "env[2]=\x1b[2JTERM=xterm",
        "execfn=/bin/\x1b]0;x\x07prog",
        "untraced=/bin/sh -c \x1b[2J",
    };
    uint32_t id, fn;
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        check("intern meta", tt_intern(session, TT_OBJ_META, meta[i], &id));
    if (damaged)
        check("intern meta", tt_intern(session, TT_OBJ_META, "argv[3]=\x1b[2Jextra", &id));
    check("tt_thread_name", tt_thread_name(session, "\x1b]0;thread\x07\x1b[2J"));
    check("intern",
          tt_intern(session, TT_OBJ_FUNCTION, "fn\x1b[2J\x1b]0;fn\x07\xc2\x9b" "1m", &fn));
    check("enter", TT_ENTER(session, fn));
    check("safepoint", TT_SAFEPOINT(session, fn, site_sp));
    check("exit", TT_EXIT(session, fn));
}

int main(int argc, char **argv)
{
    unsigned long n = 0;
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: mkshape deep|threads|hostile|damaged FILE [N]\n");
        return 2;
    }
    if (argc == 4)
        n = strtoul(argv[3], NULL, 10);
    if (strcmp(argv[1], "deep") == 0 && n >= 1) {
        open_session(argv[2], 16);
        intern_names();
        record_deep(n);
    } else if (strcmp(argv[1], "threads") == 0 && n >= 1 && n <= 65536) {
        open_session(argv[2], n);
        intern_names();
        record_threads(n);
    } else if ((strcmp(argv[1], "hostile") == 0 || strcmp(argv[1], "damaged") == 0) &&
               argc == 3) {
        open_session(argv[2], 16);
        intern_names();
        record_hostile(strcmp(argv[1], "damaged") == 0);
    } else {
        fprintf(stderr, "mkshape: bad SHAPE or N\n");
        return 2;
    }
    close_session();
    return 0;
}
