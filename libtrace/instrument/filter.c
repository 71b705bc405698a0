/* SPDX-License-Identifier: MIT */
/* Record-time filters of the hooks (filter.h says what they do and what they cost).
 *
 * A call's fate is decided by its function, and the function by its address: the first call of
 * a function on any thread names it (tt_symbolize, as replay's hooks do), matches the name
 * against the globs once, and stores the verdict in an open-addressing map of addresses, which
 * later calls read without a lock (the release store of the address publishes its verdict).
 * What a thread is inside of is three counters of its own:
 *   skipped  >0: inside a call that is not recorded (a --notrace function, a call below
 *            --depth): every enter and exit is skipped and counted, until the one that started
 *            it exits;
 *   inside   the recorded calls open inside --filter functions (0: outside all of them, where
 *            nothing is recorded);
 *   depth    the recorded calls open, for --depth.
 * The counters assume that calls nest (an exit per enter, innermost first), as the hooks see
 * them; a longjmp out of a skipped call leaves the rest of the thread skipped.
 */
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "runtime.h"

int tt_filter_on;

#define GLOBS_MAX 64
#define GLOB_BYTES 4096

enum { MATCH_FILTER = 1, MATCH_NOTRACE = 2, DECIDED = 4 };

struct globs {
    char text[GLOB_BYTES]; /* the list as given, commas replaced by NULs */
    const char *glob[GLOBS_MAX];
    unsigned n;
};

static struct globs filters TT_BIG_BSS, notraces TT_BIG_BSS;
static uint64_t max_depth; /* 0: no limit */

struct verdict {
    _Atomic uintptr_t addr; /* 0: empty */
    _Atomic uint8_t match;
};

#define MAP_BITS 16
#define MAP_CAP (1u << MAP_BITS)
static struct verdict map[MAP_CAP] TT_BIG_BSS;
static uint32_t map_used;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread uint64_t skipped __attribute__((tls_model("initial-exec")));
static __thread uint64_t inside __attribute__((tls_model("initial-exec")));
static __thread uint64_t depth __attribute__((tls_model("initial-exec")));

static int parse_globs(struct globs *g, const char *list, const char *what)
{
    size_t len = strlen(list);
    if (len >= sizeof g->text) {
        fprintf(stderr, "tinytrace: %s: the list is longer than %u bytes; not filtering\n", what,
                GLOB_BYTES - 1);
        return -1;
    }
    memcpy(g->text, list, len + 1);
    for (char *p = g->text, *next; p != NULL; p = next) {
        next = strchr(p, ',');
        if (next != NULL)
            *next++ = '\0';
        if (*p == '\0')
            continue;
        if (g->n == GLOBS_MAX) {
            fprintf(stderr, "tinytrace: %s: more than %d globs; not filtering\n", what,
                    GLOBS_MAX);
            return -1;
        }
        g->glob[g->n++] = p;
    }
    return 0;
}

static bool matches(const struct globs *g, const char *name)
{
    const char *bang = strchr(name, '!');
    for (unsigned i = 0; i < g->n; i++)
        if (fnmatch(g->glob[i], name, 0) == 0 || (bang && fnmatch(g->glob[i], bang + 1, 0) == 0))
            return true;
    return false;
}

static inline uint32_t slot_of(uintptr_t a)
{
    return (uint32_t)(((uint64_t)a >> 4) * 0x9E3779B97F4A7C15ull >> (64 - MAP_BITS));
}

/* The first call of @a: names it, decides, publishes. A full map decides every time. */
static uint8_t decide(uintptr_t a)
{
    char name[512];
    tt_symbolize(a, name, sizeof name);
    uint8_t m = DECIDED | (matches(&filters, name) ? MATCH_FILTER : 0) |
                (matches(&notraces, name) ? MATCH_NOTRACE : 0);
    pthread_mutex_lock(&map_lock);
    if (map_used < MAP_CAP / 2) {
        uint32_t h = slot_of(a);
        for (;; h = (h + 1) & (MAP_CAP - 1)) {
            uintptr_t k = atomic_load_explicit(&map[h].addr, memory_order_relaxed);
            if (k == a)
                break; /* another thread was first */
            if (k != 0)
                continue;
            atomic_store_explicit(&map[h].match, m, memory_order_relaxed);
            /* release: a thread that sees the address sees its verdict */
            atomic_store_explicit(&map[h].addr, a, memory_order_release);
            map_used++;
            break;
        }
    }
    pthread_mutex_unlock(&map_lock);
    return m;
}

static inline uint8_t verdict_of(void *fn)
{
    uintptr_t a = (uintptr_t)fn;
    for (uint32_t h = slot_of(a);; h = (h + 1) & (MAP_CAP - 1)) {
        /* acquire: pairs with the release in decide */
        uintptr_t k = atomic_load_explicit(&map[h].addr, memory_order_acquire);
        if (TT_LIKELY(k == a))
            return atomic_load_explicit(&map[h].match, memory_order_relaxed);
        if (k == 0)
            return decide(a);
    }
}

bool tt_filter_skip_(uint32_t kind, void *fn)
{
    if (kind == TT_EV_EXIT) {
        if (skipped) {
            skipped--;
            return true;
        }
        if (filters.n) {
            if (inside == 0)
                return true; /* outside every --filter function */
            inside--;
        }
        if (depth)
            depth--;
        return false;
    }
    if (skipped) {
        skipped++;
        return true;
    }
    uint8_t m = notraces.n || (filters.n && inside == 0) ? verdict_of(fn) : 0;
    if (m & MATCH_NOTRACE) {
        skipped = 1;
        return true;
    }
    if (filters.n && inside == 0 && !(m & MATCH_FILTER))
        return true; /* not inside a --filter function, and not one */
    if (max_depth && depth >= max_depth) {
        skipped = 1;
        return true;
    }
    if (filters.n)
        inside++;
    depth++;
    return false;
}

/* The recording's META object "@key=..." (replay), or NULL. */
static const char *recorded(tt_session *s, const char *key, char *buf, size_t cap)
{
    size_t k = strlen(key);
    for (uint32_t id = 1;; id++) {
        int len = tt_names_copy(s, id, buf, cap);
        if (len < 0)
            return NULL;
        if ((size_t)len > k && strncmp(buf, key, k) == 0 && buf[k] == '=')
            return buf + k + 1;
    }
}

void tt_filter_start(tt_session *s)
{
    char fbuf[GLOB_BYTES + 16], nbuf[GLOB_BYTES + 16], dbuf[64], meta[GLOB_BYTES + 16];
    const char *f, *n, *d;
    int record = tt_session_mode(s) == TT_MODE_RECORD;

    if (record) {
        f = tt_setting_("TINYTRACE_FILTER");
        n = tt_setting_("TINYTRACE_NOTRACE");
        d = tt_setting_("TINYTRACE_DEPTH");
    } else {
        f = recorded(s, "filter", fbuf, sizeof fbuf);
        n = recorded(s, "notrace", nbuf, sizeof nbuf);
        d = recorded(s, "depth", dbuf, sizeof dbuf);
    }
    if ((f && parse_globs(&filters, f, "TINYTRACE_FILTER") != 0) ||
        (n && parse_globs(&notraces, n, "TINYTRACE_NOTRACE") != 0)) {
        filters.n = notraces.n = 0;
        return;
    }
    if (d && *d) {
        char *end;
        max_depth = strtoull(d, &end, 10);
        if (*end != '\0' || max_depth == 0) {
            fprintf(stderr, "tinytrace: TINYTRACE_DEPTH=%s is not a positive number; not "
                    "filtering\n", d);
            filters.n = notraces.n = 0;
            max_depth = 0;
            return;
        }
    }
    if (!filters.n && !notraces.n && !max_depth)
        return;
    if (record) {
        /* as given, so that replay reads back the same lists */
        uint32_t id;
        if (filters.n && snprintf(meta, sizeof meta, "filter=%s", f) < (int)sizeof meta)
            tt_intern(s, TT_OBJ_META, meta, &id);
        if (notraces.n && snprintf(meta, sizeof meta, "notrace=%s", n) < (int)sizeof meta)
            tt_intern(s, TT_OBJ_META, meta, &id);
        if (max_depth && snprintf(meta, sizeof meta, "depth=%llu",
                                  (unsigned long long)max_depth) < (int)sizeof meta)
            tt_intern(s, TT_OBJ_META, meta, &id);
    }
    tt_filter_on = 1;
}
