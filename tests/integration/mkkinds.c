/* SPDX-License-Identifier: MIT */
/* mkkinds FILE — records a trace with every event kind, for `tinytrace export`.
 *
 * Thread 0 "main" records, per iteration i of 40, nested calls outer > middle > inner (inner only
 * on odd i, so siblings and depths vary), and at the innermost level a safepoint, an alloc and
 * its free, an io in and an io out, a user event and a checkpoint (a provider whose state is
 * 12 bytes derived from i), then synchronization operations on two objects: a lock and an unlock
 * of A, on every third i a trylock of B that fails (EBUSY, a payload), a lock and an unlock of
 * B, and an operation on A that takes no turn (its addr 0 after A's seq: a step back), so that
 * sync events come in both encodings (FORMAT.md §5.2), with steps up and down. Every value
 * depends on i.
 * Thread 1, named with characters JSON must escape (a quote, a backslash, a newline, a control
 * byte, UTF-8 and an invalid byte), calls a function whose name needs the same escaping, then
 * records a crash event (signal 11, a backtrace-like text) inside two calls it never leaves: its
 * frames are unwound by a crash. (The crash handler of the runtime records the same event
 * through the same call, tt_event_full_, before it finalizes the file.)
 * Thread 2 "open" enters two calls and ends without leaving them: still open at the end.
 * Thread 3 "jumper" enters three calls and exits the outermost (as a longjmp past two
 * instrumented frames would): the two inner ones are left without an exit; then it exits a
 * function it never entered.
 *
 * On stdout, one JSON object with what an export must count: {"frames", "returned",
 * "open_at_end", "unwound_by_crash", "left_without_exit", "unmatched_exits",
 * "instants": {kind: count}}.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

#define ITERATIONS 40

static tt_session *session;
static uint32_t fn_outer, fn_middle, fn_inner, fn_weird, fn_doomed, fn_open1, fn_open2;
static uint32_t fn_j1, fn_j2, fn_j3, fn_never;
static uint32_t site_a, site_b;
static unsigned long frames, returned, open_at_end, unwound, left, unmatched;
static unsigned long n_safepoint, n_alloc, n_free, n_io, n_user, n_checkpoint, n_crash, n_sync;
static uint32_t site_lock, site_unlock, site_trylock, site_note;
static int obj_a, obj_b;
static unsigned state_i;

static const char weird_thread[] = "t\"q\\\n\x01\xc3\xa9\xff";
static const char weird_fn[] = "fn<\"\\\t\x7f>";

static void check(const char *what, int rc)
{
    if (rc != TT_OK) {
        fprintf(stderr, "mkkinds: %s: %s (%s)\n", what, tt_strerror(rc), tt_error_name(rc));
        exit(1);
    }
}

static void sync_op(tt_sync_kind kind, uint32_t site, const void *obj, int result, int took)
{
    tt_sync o;
    check("sync begin", tt_sync_begin(session, &o, kind, site, obj));
    check("sync end", tt_sync_end(session, &o, result, took));
    n_sync++;
}

static size_t cp_size(void *ctx)
{
    (void)ctx;
    return 12;
}

static int cp_save(void *ctx, void *dst, size_t len)
{
    unsigned char *p = dst;
    (void)ctx;
    for (size_t k = 0; k < len; k++)
        p[k] = (unsigned char)(state_i * 17 + k * 3);
    return 0;
}

static int cp_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx;
    (void)src;
    (void)len;
    return 0;
}

static void cp_commit(void *ctx) { (void)ctx; }
static void cp_cancel(void *ctx) { (void)ctx; }

static void *crasher(void *arg)
{
    static const char bt[] = "#0 0x1234 in doomed\n#1 0x5678 in \"weird\"\n";
    tt_event ev = {.kind = TT_EV_CRASH, .arg = 11, .payload = bt, .payload_len = sizeof bt - 1};
    (void)arg;
    check("name", tt_thread_name(session, weird_thread));
    check("enter", tt_enter(session, fn_weird));
    check("exit", tt_exit(session, fn_weird));
    check("enter", tt_enter(session, fn_weird));
    check("enter", tt_enter(session, fn_doomed));
    check("crash", tt_event_full_(session, &ev, NULL, 0, NULL));
    check("thread_end", tt_session_thread_end(session));
    return NULL;
}

static void *opener(void *arg)
{
    (void)arg;
    check("name", tt_thread_name(session, "open"));
    check("enter", tt_enter(session, fn_open1));
    check("enter", tt_enter(session, fn_open2));
    check("user", tt_user(session, 777, "open", 4));
    check("thread_end", tt_session_thread_end(session));
    return NULL;
}

static void *jumper(void *arg)
{
    (void)arg;
    check("name", tt_thread_name(session, "jumper"));
    check("enter", tt_enter(session, fn_j1));
    check("enter", tt_enter(session, fn_j2));
    check("enter", tt_enter(session, fn_j3));
    check("exit", tt_exit(session, fn_j1));
    check("exit", tt_exit(session, fn_never));
    check("thread_end", tt_session_thread_end(session));
    return NULL;
}

int main(int argc, char **argv)
{
    tt_checkpoint_provider cp = {
        .struct_size = sizeof cp, .id = 7, .size = cp_size, .save = cp_save,
        .stage = cp_stage, .commit = cp_commit, .cancel = cp_cancel,
    };
    tt_config cfg;
    tt_error_info err;
    pthread_t th;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: mkkinds FILE\n");
        return 2;
    }
    tt_config_init(&cfg);
    memset(&err, 0, sizeof err);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err)) != TT_OK ||
        (rc = tt_session_open(&cfg, &session, &err)) != TT_OK) {
        fprintf(stderr, "mkkinds: open: %s\n", err.message);
        return 1;
    }
    check("register", tt_checkpoint_register(session, &cp));
    check("name", tt_thread_name(session, "main"));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "outer", &fn_outer));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "middle", &fn_middle));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "inner", &fn_inner));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, weird_fn, &fn_weird));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "doomed", &fn_doomed));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "open1", &fn_open1));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "open2", &fn_open2));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "j1", &fn_j1));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "j2", &fn_j2));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "j3", &fn_j3));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "never", &fn_never));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.a", &site_a));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.b", &site_b));
    check("intern", tt_intern(session, TT_OBJ_SITE, "pthread_mutex_lock", &site_lock));
    check("intern", tt_intern(session, TT_OBJ_SITE, "pthread_mutex_unlock", &site_unlock));
    check("intern", tt_intern(session, TT_OBJ_SITE, "pthread_mutex_trylock", &site_trylock));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.note", &site_note));

    for (unsigned i = 0; i < ITERATIONS; i++) {
        char in[16], out[16];
        unsigned char user[8];
        size_t got = 0, len;
        void *p = malloc(32 + i);
        if (p == NULL)
            return 1;
        state_i = i;
        check("enter", tt_enter(session, fn_outer));
        check("enter", tt_enter(session, fn_middle));
        if (i % 2)
            check("enter", tt_enter(session, fn_inner));
        check("safepoint", tt_safepoint(session, fn_middle, site_a));
        check("alloc", tt_alloc(session, site_b, 32 + i, p));
        len = (size_t)snprintf(in, sizeof in, "in%u", i);
        check("io in", tt_io(session, TT_IO_IN, 3, in, len, &got));
        len = (size_t)snprintf(out, sizeof out, "out%u", i * 3);
        check("io out", tt_io(session, TT_IO_OUT, 4, out, len, NULL));
        for (size_t k = 0; k < sizeof user; k++)
            user[k] = (unsigned char)(i + k * 11);
        check("user", tt_user(session, 100 + i, user, sizeof user));
        check("checkpoint", tt_checkpoint(session, site_a));
        check("free", tt_free(session, site_b, p));
        free(p);
        sync_op(TT_SYNC_LOCK, site_lock, &obj_a, 0, 1);
        sync_op(TT_SYNC_UNLOCK, site_unlock, &obj_a, 0, 1);
        if (i % 3 == 0)
            sync_op(TT_SYNC_LOCK, site_trylock, &obj_b, EBUSY, 0);
        sync_op(TT_SYNC_LOCK, site_lock, &obj_b, 0, 1);
        sync_op(TT_SYNC_UNLOCK, site_unlock, &obj_b, 0, 1);
        sync_op(TT_SYNC_NOTE, site_note, &obj_a, 0, 0);
        if (i % 2) {
            check("exit", tt_exit(session, fn_inner));
            frames++;
        }
        check("exit", tt_exit(session, fn_middle));
        check("exit", tt_exit(session, fn_outer));
        frames += 2;
        n_safepoint++, n_alloc++, n_free++, n_io += 2, n_user++, n_checkpoint++;
    }
    returned = frames;

    if (pthread_create(&th, NULL, crasher, NULL) != 0)
        return 1;
    pthread_join(th, NULL);
    frames += 3; /* weird (returned), weird and doomed (unwound) */
    returned += 1;
    unwound += 2;
    n_crash++;
    if (pthread_create(&th, NULL, opener, NULL) != 0)
        return 1;
    pthread_join(th, NULL);
    frames += 2;
    open_at_end += 2;
    n_user++;
    if (pthread_create(&th, NULL, jumper, NULL) != 0)
        return 1;
    pthread_join(th, NULL);
    frames += 3;
    returned += 1;
    left += 2;
    unmatched += 1;

    if ((rc = tt_session_close(session, &err)) != TT_OK) {
        fprintf(stderr, "mkkinds: close: %s\n", err.message);
        return 1;
    }
    printf("{\"frames\": %lu, \"returned\": %lu, \"open_at_end\": %lu, \"unwound_by_crash\": %lu, "
           "\"left_without_exit\": %lu, \"unmatched_exits\": %lu, ",
           frames, returned, open_at_end, unwound, left, unmatched);
    printf("\"instants\": {\"safepoint\": %lu, \"alloc\": %lu, \"free\": %lu, \"io\": %lu, "
           "\"user\": %lu, \"checkpoint\": %lu, \"crash\": %lu, \"sync\": %lu}}\n",
           n_safepoint, n_alloc, n_free, n_io, n_user, n_checkpoint, n_crash, n_sync);
    return 0;
}
