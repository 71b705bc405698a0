/* SPDX-License-Identifier: MIT */
/* ledger — a program whose whole state is in one checkpoint provider, to replay from a
 * checkpoint (docs/REPLAY.md, "Replay from a checkpoint").
 *
 * A ledger of 64 accounts makes LEDGER_STEPS transfers (10^6), each in apply_tx(): the transfer
 * comes from a pseudo-random generator whose state is part of the ledger, is recorded as a
 * user event (its step, the two accounts and the amount), and moves the amount. After every
 * LEDGER_EVERY steps (10^4) the program takes a checkpoint: checkpoint N is the state after step
 * (N + 1) * LEDGER_EVERY. The step, the generator and the balances are the provider's state, so
 * a replay can start at any checkpoint: tt_replay_resume() restores the ledger there, and the
 * loop goes on from the restored step.
 *
 * The session comes from the environment:
 *     TINYTRACE_MODE=record TINYTRACE_FILE=ledger.tt ./ledger
 *     TINYTRACE_MODE=replay TINYTRACE_FILE=ledger.tt ./ledger                # every step
 *     TINYTRACE_MODE=replay TINYTRACE_FILE=ledger.tt \
 *         TINYTRACE_REPLAY_FROM=checkpoint:90 ./ledger                        # the last 9%
 * LEDGER_CHANGE_AT=STEP adds 1 to that step's amount: a replay then diverges there, and the
 * program says at which step and in which function. Exit status: 0 when the run (and the
 * replay) went through, 1 when the replay diverged, 2 for a setting it could not take.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

#define ACCOUNTS 64

struct ledger {
    uint64_t step;
    uint64_t rng;
    int64_t balance[ACCOUNTS];
};

static struct ledger live, staged;
static tt_session *session;
static uint32_t fn_apply, site_every, tag_tx;
static const char *failed_in = "main"; /* the function whose call failed, for the report */

/* ---- the provider: the whole ledger ---- */

static size_t ledger_size(void *ctx)
{
    (void)ctx;
    return sizeof live;
}

static int ledger_save(void *ctx, void *dst, size_t len)
{
    (void)ctx;
    memcpy(dst, &live, len);
    return 0;
}

static int ledger_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx;
    if (len != sizeof staged)
        return -1; /* not a ledger of this build */
    memcpy(&staged, src, len);
    return 0;
}

static void ledger_commit(void *ctx)
{
    (void)ctx;
    live = staged;
}

static void ledger_cancel(void *ctx)
{
    (void)ctx;
}

/* ---- the work ---- */

static uint64_t next_random(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

struct tx {
    uint32_t step;
    uint16_t from, to;
    int64_t amount;
};

/* One transfer. Returns what the session said of its events (in replay: whether they matched). */
static __attribute__((noinline)) int apply_tx(uint64_t change_at)
{
    int rc = tt_enter(session, fn_apply);
    uint64_t r = next_random(&live.rng);
    struct tx tx = { .step = (uint32_t)live.step, .from = (uint16_t)(r % ACCOUNTS),
                     .to = (uint16_t)((r >> 8) % ACCOUNTS), .amount = (int64_t)(r >> 40) % 1000 };
    if (live.step == change_at)
        tx.amount += 1; /* the injected change */
    if (rc == TT_OK)
        rc = tt_user(session, tag_tx, &tx, sizeof tx);
    live.balance[tx.from] -= tx.amount;
    live.balance[tx.to] += tx.amount;
    live.step++;
    if (rc == TT_OK)
        rc = tt_exit(session, fn_apply);
    if (rc != TT_OK)
        failed_in = "apply_tx";
    return rc;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return dflt;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) {
        fprintf(stderr, "ledger: %s=%s is not a number\n", name, v);
        exit(2);
    }
    return x;
}

static int diverged(uint64_t step)
{
    tt_divergence d;
    char text[4096];
    fprintf(stderr, "ledger: the replay diverged at step %" PRIu64 " in %s\n", step, failed_in);
    if (tt_replay_divergence(session, &d) == TT_OK) {
        size_t n = tt_divergence_format(session, &d, text, sizeof text);
        fprintf(stderr, "%.*s", (int)n, text);
    }
    tt_session_close(session, NULL);
    return 1;
}

int main(void)
{
    uint64_t steps = env_u64("LEDGER_STEPS", 1000000), every = env_u64("LEDGER_EVERY", 10000);
    uint64_t change_at = env_u64("LEDGER_CHANGE_AT", UINT64_MAX);
    tt_config cfg;
    tt_error_info err;
    if (every == 0) {
        fprintf(stderr, "ledger: LEDGER_EVERY must be at least 1\n");
        return 2;
    }
    tt_config_init(&cfg);
    if (tt_config_from_env(&cfg, &err) != TT_OK || tt_session_open(&cfg, &session, &err) != TT_OK) {
        fprintf(stderr, "ledger: %s\n", err.message);
        return 2;
    }
    tt_checkpoint_provider p = { .struct_size = sizeof p, .id = 1, .size = ledger_size,
                                 .save = ledger_save, .stage = ledger_stage,
                                 .commit = ledger_commit, .cancel = ledger_cancel };
    tt_checkpoint_register(session, &p);
    tt_intern(session, TT_OBJ_FUNCTION, "apply_tx", &fn_apply);
    tt_intern(session, TT_OBJ_SITE, "every LEDGER_EVERY steps", &site_every);
    tt_intern(session, TT_OBJ_TAG, "tx", &tag_tx);
    live.rng = 42;
    for (int i = 0; i < ACCOUNTS; i++)
        live.balance[i] = 1000000;
    /* from the configured checkpoint, or (record, or no TINYTRACE_REPLAY_FROM) from step 0 */
    uint64_t from;
    if (tt_replay_resume(session, &from, &err) != TT_OK) {
        fprintf(stderr, "ledger: %s\n", err.message);
        tt_session_close(session, NULL);
        return 2;
    }
    if (from != UINT64_MAX)
        fprintf(stderr, "ledger: replaying from checkpoint %" PRIu64 ", after step %" PRIu64 "\n",
                from, live.step);
    while (live.step < steps) {
        uint64_t step = live.step;
        int rc = apply_tx(change_at);
        if (rc == TT_OK && live.step % every == 0)
            rc = tt_checkpoint(session, site_every);
        if (rc == TT_E_DIVERGED)
            return diverged(step);
        if (rc != TT_OK) {
            fprintf(stderr, "ledger: step %" PRIu64 ": %s\n", step, tt_strerror(rc));
            tt_session_close(session, NULL);
            return 2;
        }
    }
    uint64_t sum = 0;
    for (int i = 0; i < ACCOUNTS; i++)
        sum = sum * 31 + (uint64_t)live.balance[i];
    if (tt_session_close(session, &err) != TT_OK) {
        fprintf(stderr, "ledger: %s\n", err.message);
        return 1;
    }
    printf("ledger: %" PRIu64 " steps, balances %016" PRIx64 "\n", live.step, sum);
    return 0;
}
