/* SPDX-License-Identifier: MIT */
/* mkcheckpoints FILE — records a trace with checkpoints and restores, for `tinytrace info` and
 * `tinytrace dump --checkpoints` (docs/FORMAT.md §15).
 *
 * Thread 0 "main" has two providers (ids 7 and 8, states of 8 and 16 bytes, each from the step
 * it is taken at), and takes a checkpoint at site "step" after each of its 6 steps of calls;
 * after steps 2 and 5 it restores the last checkpoint (site "undo"). Between steps 3 and 4 a
 * thread "worker", started and joined, takes one checkpoint of its own. Every checkpoint and
 * restore therefore has its own number, thread, seq and epoch.
 *
 * On stdout, one JSON object with what the table must say: {"checkpoints": [{"number",
 * "thread", "epoch", "providers": [[id, len], ...]}, ...], "restores": [{"epoch",
 * "checkpoint"}, ...]}.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

static tt_session *session;
static uint8_t a[8], b[16];
static uint32_t fn, site_step, site_undo, site_worker;

static size_t size_a(void *ctx) { (void)ctx; return sizeof a; }
static size_t size_b(void *ctx) { (void)ctx; return sizeof b; }
static int save_a(void *ctx, void *d, size_t n) { (void)ctx; memcpy(d, a, n); return 0; }
static int save_b(void *ctx, void *d, size_t n) { (void)ctx; memcpy(d, b, n); return 0; }
static int stage_any(void *ctx, const void *s, size_t n) { (void)ctx; (void)s; (void)n; return 0; }
static void nop(void *ctx) { (void)ctx; }

static int check(int rc, const char *what)
{
    if (rc != TT_OK) {
        fprintf(stderr, "mkcheckpoints: %s: %s\n", what, tt_error_name(rc));
        return 1;
    }
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    tt_thread_name(session, "worker");
    tt_enter(session, fn);
    tt_checkpoint(session, site_worker);
    tt_exit(session, fn);
    return NULL;
}

int main(int argc, char **argv)
{
    tt_config cfg;
    tt_error_info err;
    if (argc != 2 && !(argc == 3 && strcmp(argv[2], "--no-index") == 0))
        return 2;
    tt_config_init(&cfg);
    if (tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err) != TT_OK ||
        (argc == 3 && tt_config_set(&cfg, TT_PARAM_INDEX, 0, &err) != TT_OK) ||
        tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err) != TT_OK ||
        tt_session_open(&cfg, &session, &err) != TT_OK) {
        fprintf(stderr, "mkcheckpoints: %s\n", err.message);
        return 1;
    }
    tt_checkpoint_provider pa = { .struct_size = sizeof pa, .id = 7, .size = size_a,
                                  .save = save_a, .stage = stage_any, .commit = nop,
                                  .cancel = nop };
    tt_checkpoint_provider pb = pa;
    pb.id = 8;
    pb.size = size_b;
    pb.save = save_b;
    int bad = check(tt_checkpoint_register(session, &pa), "register") ||
              check(tt_checkpoint_register(session, &pb), "register");
    tt_thread_name(session, "main");
    tt_intern(session, TT_OBJ_FUNCTION, "work", &fn);
    tt_intern(session, TT_OBJ_SITE, "step", &site_step);
    tt_intern(session, TT_OBJ_SITE, "undo", &site_undo);
    tt_intern(session, TT_OBJ_SITE, "worker", &site_worker);
    /* the expected table: checkpoints in number order, restores in epoch order */
    printf("{\"checkpoints\": [");
    unsigned number = 0, epoch = 0, restores = 0;
    char rs[256] = "";
    for (unsigned step = 0; step < 6 && !bad; step++) {
        for (int k = 0; k < 3; k++) {
            tt_enter(session, fn);
            tt_exit(session, fn);
        }
        memset(a, (int)step, sizeof a);
        memset(b, (int)(0x40 + step), sizeof b);
        bad |= check(tt_checkpoint(session, site_step), "checkpoint");
        printf("%s{\"number\": %u, \"thread\": 0, \"epoch\": %u, \"providers\": [[7, 8], "
               "[8, 16]]}", number ? ", " : "", number, epoch);
        unsigned last = number++;
        if (step == 2 || step == 5) {
            bad |= check(tt_checkpoint_restore(session, NULL, site_undo, &err), "restore");
            epoch++;
            snprintf(rs + strlen(rs), sizeof rs - strlen(rs), "%s{\"epoch\": %u, "
                     "\"checkpoint\": %u}", restores++ ? ", " : "", epoch, last);
        }
        if (step == 3) {
            pthread_t th;
            pthread_create(&th, NULL, worker, NULL);
            pthread_join(th, NULL);
            printf(", {\"number\": %u, \"thread\": 1, \"epoch\": %u, \"providers\": [[7, 8], "
                   "[8, 16]]}", number++, epoch);
        }
    }
    printf("], \"restores\": [%s]}\n", rs);
    if (tt_session_close(session, &err) != TT_OK) {
        fprintf(stderr, "mkcheckpoints: %s\n", err.message);
        return 1;
    }
    return bad;
}
