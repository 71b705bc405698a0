/* SPDX-License-Identifier: MIT
 *
 * record-replay FILE — a program that records its own inputs and outputs with libtinytrace,
 * then replays them.
 *
 * roll() is the program: it reads the clock and 16 random bytes, turns them into three dice,
 * and prints them. Every byte it takes in goes through tt_io(TT_IO_IN) and every line it prints
 * through tt_io(TT_IO_OUT), inside tt_enter/tt_exit of its own function id. Run three times:
 *
 *   1. record: a session in TT_MODE_RECORD writes FILE. tt_io(IN) stores what the clock and
 *      getrandom gave.
 *   2. replay: a session in TT_MODE_REPLAY reads FILE. The same roll() runs; tt_io(IN) now
 *      overwrites the fresh clock and random bytes with the recorded ones, so the dice come out
 *      as recorded, and tt_io(OUT) compares each printed line with the recording. Closing
 *      checks that every recorded event was matched.
 *   3. replay with a cheat: roll() adds one to the first die before printing. The printed line
 *      differs from the recording: tt_io(OUT) returns TT_E_DIVERGED, and the report says where
 *      and how (tt_replay_divergence, tt_divergence_format).
 *
 * Exits 0 when the three runs went as described, 1 otherwise. Build:
 *     cc record-replay.c $(pkg-config --cflags --libs tinytrace) -o record-replay
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

/* io channels: any stable number (or an interned id) that both runs use */
enum { CH_CLOCK = 1, CH_RANDOM = 2, CH_STDOUT = 3 };

static int fail(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "record-replay: %s: %s (%s)\n", what, err && err->message[0] ? err->message
                                                                              : tt_strerror(rc),
            tt_error_name(rc));
    return 1;
}

/* The program. In @s's mode the inputs are recorded or handed back, the output recorded or
 * compared. @cheat changes the output (run 3). Writes the dice into @dice. Returns the first
 * failed call's code, or TT_OK. */
static int roll(tt_session *s, int cheat, int dice[3], char *line, size_t cap)
{
    uint32_t fn;
    int rc;
    struct timespec now;
    unsigned char rnd[16];

    if ((rc = tt_intern(s, TT_OBJ_FUNCTION, "roll", &fn)) != TT_OK)
        return rc;
    if ((rc = tt_enter(s, fn)) != TT_OK)
        return rc;

    clock_gettime(CLOCK_REALTIME, &now);
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0, sizeof rnd);
    /* record: stored; replay: replaced by what the recording got */
    size_t got;
    if ((rc = tt_io(s, TT_IO_IN, CH_CLOCK, &now, sizeof now, &got)) != TT_OK)
        return rc;
    if ((rc = tt_io(s, TT_IO_IN, CH_RANDOM, rnd, sizeof rnd, &got)) != TT_OK)
        return rc;

    for (int i = 0; i < 3; i++)
        dice[i] = 1 + (rnd[i] ^ (unsigned char)(now.tv_nsec >> (8 * i))) % 6;
    snprintf(line, cap, "dice: %d %d %d (at %lld.%09ld)\n", dice[0] + (cheat ? 1 : 0), dice[1],
             dice[2], (long long)now.tv_sec, now.tv_nsec);
    fputs(line, stdout);
    /* record: stored; replay: compared with what the recording printed */
    if ((rc = tt_io(s, TT_IO_OUT, CH_STDOUT, line, strlen(line), NULL)) != TT_OK)
        return rc;
    return tt_exit(s, fn);
}

static int open_session(tt_mode mode, const char *path, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    int rc;
    tt_config_init(&cfg);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, mode, err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, path, err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_CALLER, "examples/record-replay", err)) != TT_OK)
        return rc;
    return tt_session_open(&cfg, s, err);
}

int main(int argc, char **argv)
{
    tt_error_info err;
    tt_session *s;
    int rc, recorded[3], replayed[3], cheated[3];
    char line[128];

    if (argc != 2) {
        fprintf(stderr, "usage: record-replay FILE\n");
        return 2;
    }

    /* 1. record */
    if ((rc = open_session(TT_MODE_RECORD, argv[1], &s, &err)) != TT_OK)
        return fail("open for recording", rc, &err);
    if ((rc = roll(s, 0, recorded, line, sizeof line)) != TT_OK)
        return fail("record", rc, NULL);
    if ((rc = tt_session_close(s, &err)) != TT_OK)
        return fail("close the recording", rc, &err);
    printf("recorded %s\n", argv[1]);

    /* 2. replay: the recorded clock and random bytes come back, so the same dice */
    if ((rc = open_session(TT_MODE_REPLAY, argv[1], &s, &err)) != TT_OK)
        return fail("open for replay", rc, &err);
    if ((rc = roll(s, 0, replayed, line, sizeof line)) != TT_OK)
        return fail("replay", rc, NULL);
    if ((rc = tt_session_close(s, &err)) != TT_OK)
        return fail("close the replay", rc, &err);
    if (memcmp(recorded, replayed, sizeof recorded) != 0) {
        fprintf(stderr, "record-replay: the replay rolled other dice\n");
        return 1;
    }
    printf("replay matched the recording\n");

    /* 3. replay with a changed output: a divergence, with a report */
    if ((rc = open_session(TT_MODE_REPLAY, argv[1], &s, &err)) != TT_OK)
        return fail("open for the second replay", rc, &err);
    rc = roll(s, 1, cheated, line, sizeof line);
    if (rc != TT_E_DIVERGED) {
        fprintf(stderr, "record-replay: a changed output gave %s, not TT_E_DIVERGED\n",
                tt_error_name(rc));
        tt_session_close(s, NULL);
        return 1;
    }
    tt_divergence d;
    char report[2048];
    if (tt_replay_divergence(s, &d) != TT_OK || d.reason != TT_DIV_PAYLOAD) {
        fprintf(stderr, "record-replay: no payload divergence was reported\n");
        tt_session_close(s, NULL);
        return 1;
    }
    tt_divergence_format(s, &d, report, sizeof report);
    printf("a changed output diverged, as it should:\n%s\n", report);
    /* the replay stopped before its end: close says so (TT_E_UNCONSUMED) */
    rc = tt_session_close(s, &err);
    if (rc != TT_E_UNCONSUMED)
        return fail("close after the divergence", rc, &err);
    return 0;
}
