/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a replay session (replay.c) over a hostile but valid trace.
 *
 * Input: as fuzz-verify — a control byte, then a trace file whose checksums are recomputed
 * (fz_fixup, low four bits of the control byte). When tt_verify accepts the file, the target opens
 * a replay session over it and, from the calling thread, makes the recorded calls of one recorded
 * thread again with the recorded values: thread 0, which replay binds to the first thread that
 * calls, or — control bit 4 — thread (ctl >> 5) mod thread_count when it has a name of its own
 * (an object of kind THREAD no other row names),
 * which the calling thread claims with tt_thread_name first. Enter and exit go through
 * tt_event_fn_, every other kind through tt_event_full_, as the public calls and the crash handler
 * do. Properties:
 *  - every such call matches (TT_OK); an io-in call hands back the recorded bytes;
 *  - a call with a wrong function id (made before every fourth enter or exit) returns
 *    TT_E_DIVERGED with a report naming the function, and changes nothing: the right call then
 *    matches (replay.h);
 *  - the progress counts the calls that matched; close ends with TT_OK, or TT_E_UNCONSUMED when
 *    other threads' events are left.
 * A file replay refuses at open (duplicate names, limits) is fine; a refusal needs a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 4096

static bool structural(uint8_t kind)
{
    return kind == TT_EV_SESSION_START || kind == TT_EV_SESSION_END ||
           kind == TT_EV_THREAD_START || kind == TT_EV_THREAD_END;
}

static void replay(const uint8_t *f, size_t n, const tt_reader_limits *lim, unsigned pick)
{
    /* thread 0's events, read the documented way */
    tt_source src;
    tt_reader_capacity cap;
    tt_error_info err;
    tt_manifest m;
    tt_source_memory(&src, f, n);
    if (tt_reader_probe(&src, lim, TT_CURSORS_PER_THREAD, &m, &cap, &err) != TT_OK ||
        m.thread_count == 0)
        return;
    void *mem = NULL;
    if (posix_memalign(&mem, 16, cap.total) != 0)
        abort();
    tt_reader *r;
    FZ_ASSERT(tt_reader_open(&src, lim, TT_CURSORS_PER_THREAD, mem, cap.total, &r, &err) == TT_OK,
              "a verified file does not open: %s", err.message);
    /* the thread to drive: 0, or a named thread bound by its name */
    uint32_t rec = 0;
    char name[256] = "";
    if (pick & 1) {
        uint32_t k = (pick >> 1) % m.thread_count;
        tt_object_entry o;
        const tt_thread_entry *te = tt_reader_thread(r, k);
        /* FORMAT.md 7.1 does not require the row's name to be of kind THREAD; replay looks the
         * name up as one */
        if (te && te->name && tt_reader_object(r, te->name, &o) == TT_OK &&
            o.kind == TT_OBJ_THREAD && o.name_len &&
            o.name_len < sizeof name && !memchr(o.name, 0, o.name_len)) {
            memcpy(name, o.name, o.name_len);
            name[o.name_len] = '\0';
            /* replay binds by name only when the name is the thread's alone */
            for (uint32_t j = 0; j < m.thread_count; j++)
                if (j != k && tt_reader_thread(r, j)->name == te->name)
                    name[0] = '\0';
            if (name[0])
                rec = k;
        }
    }
    static tt_event evs[MAX_EVENTS];
    size_t nev = 0;
    int rc;
    while (nev < MAX_EVENTS && (rc = tt_reader_next(r, rec, &evs[nev], &err)) == TT_OK) {
        if (evs[nev].payload_len) {
            void *copy = malloc(evs[nev].payload_len);
            if (!copy)
                abort();
            memcpy(copy, evs[nev].payload, evs[nev].payload_len);
            evs[nev].payload = copy;
        }
        nev++;
    }
    tt_reader_close(r);
    free(mem);

    tt_config cfg;
    tt_session *s;
    tt_config_init(&cfg);
    FZ_ASSERT(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err) == TT_OK, "%s", err.message);
    tt_config_set_source(&cfg, &src);
    rc = tt_session_open(&cfg, &s, &err);
    if (rc != TT_OK) {
        FZ_ASSERT(err.message[0] != '\0', "replay open failed (%d) without a message", rc);
        if (getenv("TT_FUZZ_VERBOSE"))
            fprintf(stderr, "replay: open refused: %s\n", err.message);
        goto out;
    }
    uint64_t calls = 0;
    if (name[0]) {
        rc = tt_thread_name(s, name);
        FZ_ASSERT(rc == TT_OK, "binding to recorded thread %u by its name \"%s\": %d", rec, name,
                  rc);
    }
    for (size_t i = 0; i < nev; i++) {
        const tt_event *ev = &evs[i];
        if (structural(ev->kind))
            continue;
        /* a restore is made through tt_checkpoint_restore by the providers' owner, and a sync
         * operation through tt_sync_begin/end on its object, not met as events: the harness,
         * which has neither, replays up to the first of them (the close then finds the rest
         * unconsumed) */
        if (ev->kind == TT_EV_RESTORE || ev->kind == TT_EV_SYNC)
            break;
        if (ev->kind == TT_EV_ENTER || ev->kind == TT_EV_EXIT) {
            if (calls % 4 == 0) {
                rc = tt_event_fn_(s, ev->kind, ev->sp.function ^ 1u);
                tt_divergence d;
                FZ_ASSERT(rc == TT_E_DIVERGED && tt_replay_divergence(s, &d) == TT_OK &&
                              d.reason == TT_DIV_FUNCTION && d.message[0] != '\0',
                          "a wrong function at seq %llu gave %d",
                          (unsigned long long)ev->tp.seq, rc);
            }
            rc = tt_event_fn_(s, ev->kind, ev->sp.function);
        } else {
            static uint8_t in[1u << 20];
            size_t in_len = 0;
            rc = tt_event_full_(s, ev, in, ev->payload_len, &in_len);
            if (rc == TT_OK && ev->kind == TT_EV_IO && ev->dir == TT_IO_IN)
                FZ_ASSERT(in_len == ev->payload_len &&
                              (in_len == 0 || memcmp(in, ev->payload, in_len) == 0),
                          "io-in at seq %llu handed back other bytes",
                          (unsigned long long)ev->tp.seq);
        }
        if (rc != TT_OK) {
            tt_divergence d;
            memset(&d, 0, sizeof d);
            tt_replay_divergence(s, &d);
            fz_fail(__FILE__, __LINE__, "rc == TT_OK", "the recorded %s at seq %llu did not "
                    "replay: %d: %s", tt_event_kind_name(ev->kind),
                    (unsigned long long)ev->tp.seq, rc, d.message);
        }
        calls++;
    }
    tt_replay_progress pr;
    FZ_ASSERT(tt_replay_progress_get(s, &pr) == TT_OK && pr.matched == calls,
              "progress: %llu matched, %llu calls", (unsigned long long)pr.matched,
              (unsigned long long)calls);
    if (getenv("TT_FUZZ_VERBOSE"))
        fprintf(stderr, "replay: %llu calls matched of %zu events of thread %u\n",
                (unsigned long long)calls, nev, rec);
    rc = tt_session_close(s, &err);
    FZ_ASSERT(rc == TT_OK || rc == TT_E_UNCONSUMED, "replay close: %d: %s", rc, err.message);
out:
    for (size_t i = 0; i < nev; i++)
        if (evs[i].payload_len)
            free((void *)evs[i].payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned ctl = data[0];
    data++;
    size--;
    uint8_t *f = fz_copy(data, size);
    fz_fixup(f, size, ctl & 0x0Fu);
    fz_dump(f, size);
    tt_reader_limits lim;
    fz_limits(&lim);
    tt_source src;
    tt_verify_result vr;
    tt_source_memory(&src, f, size);
    if (tt_verify(&src, &lim, &vr) == TT_OK)
        replay(f, size, &lim, ctl >> 4);
    free(f);
    return 0;
}
