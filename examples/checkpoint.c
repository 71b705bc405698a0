/* SPDX-License-Identifier: MIT
 *
 * checkpoint FILE — a checkpoint provider: the state of a small bank, saved into the recording
 * at each checkpoint and compared with the live state on replay.
 *
 * The bank is four accounts; run() makes eight transfers, taking a checkpoint (tt_checkpoint)
 * after each. A provider (tt_checkpoint_provider, checkpoint.h) says how big the state is and
 * writes it; tinytrace stores what it wrote in the checkpoint event (record) or compares it,
 * byte for byte, with the recorded state (replay). A checkpoint catches what no call shows: a
 * bug that changes state quietly.
 *
 *   1. record: FILE gets eight checkpoints.
 *   2. replay: the same transfers, the same states: every checkpoint matches.
 *   3. replay with a bug: transfer 5 loses a unit on the way. The next checkpoint diverges
 *      (TT_E_DIVERGED, reason "payload"), the report names the provider, and first_diff is
 *      the first byte of its state that differs: the account.
 *
 * Exits 0 when the three runs went as described, 1 otherwise. Build:
 *     cc checkpoint.c $(pkg-config --cflags --libs tinytrace) -o checkpoint
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

/* The state is saved as its bytes, so it has no padding: bytes that no field owns would differ
 * from run to run. */
struct bank {
    int64_t balance[4];
    int64_t transfers;
};

/* ---- the provider: four hooks over a struct bank ---- */

static size_t bank_size(void *ctx)
{
    (void)ctx;
    return sizeof(struct bank);
}

static int bank_save(void *ctx, void *dst, size_t len)
{
    if (len != sizeof(struct bank))
        return -1;
    memcpy(dst, ctx, len);
    return 0;
}

/* Restoring a checkpoint is not in this version of the library (checkpoint.h); the hooks are
 * part of the interface already. A provider that can restore stages into a copy here ... */
static struct bank staged;

static int bank_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx;
    if (len != sizeof staged)
        return -1;
    memcpy(&staged, src, len);
    return 0;
}

/* ... and makes it visible here, where it cannot fail. */
static void bank_commit(void *ctx)
{
    memcpy(ctx, &staged, sizeof staged);
}

static void bank_cancel(void *ctx)
{
    (void)ctx;
    memset(&staged, 0, sizeof staged);
}

/* ---- the program ---- */

static int transfer(struct bank *b, int from, int to, int64_t amount, int lossy)
{
    b->balance[from] -= amount;
    b->balance[to] += amount - (lossy ? 1 : 0);
    b->transfers++;
    return 0;
}

/* Eight transfers and a checkpoint after each; @bug_at: the transfer that loses a unit (-1:
 * none). Returns TT_OK or the first failed call's code; *@at: the transfer it failed after. */
static int run(tt_session *s, int bug_at, int *at)
{
    static const int moves[8][3] = {{0, 1, 50}, {1, 2, 20}, {2, 3, 5},  {3, 0, 1},
                                    {0, 2, 30}, {2, 1, 12}, {1, 3, 40}, {3, 2, 7}};
    struct bank bank = {{100, 100, 100, 100}, 0};
    tt_checkpoint_provider p = {
        .struct_size = sizeof p,
        .id = 1,
        .ctx = &bank,
        .size = bank_size,
        .save = bank_save,
        .stage = bank_stage,
        .commit = bank_commit,
        .cancel = bank_cancel,
    };
    uint32_t site;
    int rc;

    if ((rc = tt_checkpoint_register(s, &p)) != TT_OK ||
        (rc = tt_intern(s, TT_OBJ_SITE, "after a transfer", &site)) != TT_OK)
        return rc;
    for (int i = 0; i < 8; i++) {
        transfer(&bank, moves[i][0], moves[i][1], moves[i][2], i == bug_at);
        *at = i;
        if ((rc = tt_checkpoint(s, site)) != TT_OK)
            return rc;
    }
    return TT_OK;
}

static int open_session(tt_mode mode, const char *path, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    int rc;
    tt_config_init(&cfg);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, mode, err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, path, err)) != TT_OK)
        return rc;
    return tt_session_open(&cfg, s, err);
}

int main(int argc, char **argv)
{
    tt_error_info err;
    tt_session *s;
    int rc, at = -1;

    if (argc != 2) {
        fprintf(stderr, "usage: checkpoint FILE\n");
        return 2;
    }
    for (int pass = 0; pass < 3; pass++) {
        tt_mode mode = pass == 0 ? TT_MODE_RECORD : TT_MODE_REPLAY;
        if ((rc = open_session(mode, argv[1], &s, &err)) != TT_OK) {
            fprintf(stderr, "checkpoint: open: %s\n", err.message);
            return 1;
        }
        rc = run(s, pass == 2 ? 5 : -1, &at);
        if (pass < 2) {
            if (rc != TT_OK) {
                fprintf(stderr, "checkpoint: %s failed at transfer %d: %s\n",
                        pass ? "replay" : "record", at, tt_error_name(rc));
                tt_session_close(s, NULL);
                return 1;
            }
            if ((rc = tt_session_close(s, &err)) != TT_OK) {
                fprintf(stderr, "checkpoint: close: %s\n", err.message);
                return 1;
            }
            printf(pass ? "replay: the eight checkpoints matched\n"
                        : "recorded eight checkpoints into %s\n", argv[1]);
            continue;
        }
        tt_divergence d;
        if (rc != TT_E_DIVERGED || at != 5 || tt_replay_divergence(s, &d) != TT_OK ||
            d.reason != TT_DIV_PAYLOAD) {
            fprintf(stderr, "checkpoint: the bug at transfer 5 was not caught there (%s at %d)\n",
                    tt_error_name(rc), at);
            tt_session_close(s, NULL);
            return 1;
        }
        /* for a checkpoint, first_diff is the offset in the state of the provider the message
         * names */
        printf("replay with a bug: the checkpoint after transfer %d diverged (%s): account %llu\n",
               at, d.message, (unsigned long long)(d.first_diff / sizeof(int64_t)));
        tt_session_close(s, NULL); /* TT_E_UNCONSUMED: the replay stopped early */
    }
    return 0;
}
