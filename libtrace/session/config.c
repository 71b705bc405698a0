/* SPDX-License-Identifier: MIT */
/* Configuration: defaults, checked setters and TINYTRACE_* environment variables.
 *
 * Every value is checked when it is set, so a bad setting fails here, naming the parameter or the
 * variable, and never in the middle of a run. */
#include <errno.h>
#include <sys/auxv.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session-int.h"

#define CFG_MAGIC 0x74746366u

static struct tt_config_impl *cfgw(tt_config *c)
{
    return (struct tt_config_impl *)(void *)c;
}

void tt_config_init(tt_config *cfg)
{
    struct tt_config_impl *c = cfgw(cfg);
    memset(cfg, 0, sizeof *cfg);
    c->magic = CFG_MAGIC;
    c->mode = TT_MODE_OFF;
    c->buffer_bytes = 256u << 10;
    c->memory_bytes = 8u << 20;
    c->block_bytes = 32u << 10;
    c->max_event = 64u << 20;
    c->max_threads = 1024;
    c->object_bytes = 16u << 20;
    c->divergence = 0;
    c->ordered = 0;
    c->order_timeout_ms = 10000;
    c->chaos_depth = 3;
    c->chaos_delay_us = 1000;
    c->sync = 1;
    c->index = 1;
}

static const char *param_name(tt_param p)
{
    switch (p) {
    case TT_PARAM_MODE: return "TT_PARAM_MODE";
    case TT_PARAM_BUFFER_BYTES: return "TT_PARAM_BUFFER_BYTES";
    case TT_PARAM_MEMORY_BYTES: return "TT_PARAM_MEMORY_BYTES";
    case TT_PARAM_BLOCK_BYTES: return "TT_PARAM_BLOCK_BYTES";
    case TT_PARAM_MAX_EVENT_BYTES: return "TT_PARAM_MAX_EVENT_BYTES";
    case TT_PARAM_MAX_THREADS: return "TT_PARAM_MAX_THREADS";
    case TT_PARAM_OBJECT_BYTES: return "TT_PARAM_OBJECT_BYTES";
    case TT_PARAM_DIVERGENCE: return "TT_PARAM_DIVERGENCE";
    case TT_PARAM_ORDERED: return "TT_PARAM_ORDERED";
    case TT_PARAM_ORDER_TIMEOUT_MS: return "TT_PARAM_ORDER_TIMEOUT_MS";
    case TT_PARAM_CHAOS: return "TT_PARAM_CHAOS";
    case TT_PARAM_CHAOS_SEED: return "TT_PARAM_CHAOS_SEED";
    case TT_PARAM_CHAOS_DEPTH: return "TT_PARAM_CHAOS_DEPTH";
    case TT_PARAM_CHAOS_DELAY_US: return "TT_PARAM_CHAOS_DELAY_US";
    case TT_PARAM_REAL_SLEEP: return "TT_PARAM_REAL_SLEEP";
    case TT_PARAM_SYNC: return "TT_PARAM_SYNC";
    case TT_PARAM_SPARES: return "TT_PARAM_SPARES";
    case TT_PARAM_INDEX: return "TT_PARAM_INDEX";
    default: return "unknown parameter";
    }
}

static int range(tt_error_info *err, const char *name, uint64_t v, uint64_t lo, uint64_t hi)
{
    if (v < lo || v > hi)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                       "%s: %llu is out of range [%llu, %llu]", name, (unsigned long long)v,
                       (unsigned long long)lo, (unsigned long long)hi);
    return TT_OK;
}

/* Checks @v for @p; @name is what the message calls the setting. */
static int check(tt_param p, uint64_t v, const char *name, tt_error_info *err)
{
    int rc;
    switch (p) {
    case TT_PARAM_MODE:
        return range(err, name, v, TT_MODE_OFF, TT_MODE_REPLAY);
    case TT_PARAM_BUFFER_BYTES:
        if ((rc = range(err, name, v, 4u << 10, 64u << 20)) != TT_OK)
            return rc;
        if (v % 4096)
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "%s: %llu is not a multiple of 4096", name, (unsigned long long)v);
        return TT_OK;
    case TT_PARAM_MEMORY_BYTES:
        return range(err, name, v, 8u << 10, 64ull << 30);
    case TT_PARAM_BLOCK_BYTES:
        if ((rc = range(err, name, v, 4u << 10, 16u << 20)) != TT_OK)
            return rc;
        if (v & (v - 1))
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "%s: %llu is not a power of two",
                           name, (unsigned long long)v);
        return TT_OK;
    case TT_PARAM_MAX_EVENT_BYTES:
        return range(err, name, v, 1u << 10, 4ull << 30);
    case TT_PARAM_MAX_THREADS:
        return range(err, name, v, 1, 65536);
    case TT_PARAM_OBJECT_BYTES:
        return range(err, name, v, 64u << 10, 1u << 30);
    case TT_PARAM_DIVERGENCE:
        return range(err, name, v, 0, 1);
    case TT_PARAM_ORDERED:
        return range(err, name, v, 0, 1);
    case TT_PARAM_ORDER_TIMEOUT_MS:
        return range(err, name, v, 1, 3600u * 1000u);
    case TT_PARAM_CHAOS:
    case TT_PARAM_REAL_SLEEP:
    case TT_PARAM_SYNC:
    case TT_PARAM_SPARES:
    case TT_PARAM_INDEX:
        return range(err, name, v, 0, 1);
    case TT_PARAM_CHAOS_SEED:
        return TT_OK;
    case TT_PARAM_CHAOS_DEPTH:
        return range(err, name, v, 1, 16);
    case TT_PARAM_CHAOS_DELAY_US:
        return range(err, name, v, 1, 1000000);
    default:
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "unknown parameter %d", (int)p);
    }
}

static uint64_t *slot(struct tt_config_impl *c, tt_param p)
{
    switch (p) {
    case TT_PARAM_BUFFER_BYTES: return &c->buffer_bytes;
    case TT_PARAM_MEMORY_BYTES: return &c->memory_bytes;
    case TT_PARAM_BLOCK_BYTES: return &c->block_bytes;
    case TT_PARAM_MAX_EVENT_BYTES: return &c->max_event;
    case TT_PARAM_MAX_THREADS: return &c->max_threads;
    case TT_PARAM_OBJECT_BYTES: return &c->object_bytes;
    case TT_PARAM_DIVERGENCE: return &c->divergence;
    case TT_PARAM_ORDERED: return &c->ordered;
    case TT_PARAM_ORDER_TIMEOUT_MS: return &c->order_timeout_ms;
    case TT_PARAM_CHAOS: return &c->chaos;
    case TT_PARAM_CHAOS_SEED: return &c->chaos_seed;
    case TT_PARAM_CHAOS_DEPTH: return &c->chaos_depth;
    case TT_PARAM_CHAOS_DELAY_US: return &c->chaos_delay_us;
    case TT_PARAM_REAL_SLEEP: return &c->real_sleep;
    case TT_PARAM_SYNC: return &c->sync;
    case TT_PARAM_SPARES: return &c->spares;
    case TT_PARAM_INDEX: return &c->index;
    default: return NULL;
    }
}

static int set_named(tt_config *cfg, tt_param p, uint64_t v, const char *name, tt_error_info *err)
{
    struct tt_config_impl *c = cfgw(cfg);
    int rc = check(p, v, name, err);
    if (rc != TT_OK)
        return rc;
    if (p == TT_PARAM_MODE) {
        c->mode = (uint32_t)v;
        return TT_OK;
    }
    *slot(c, p) = v;
    return TT_OK;
}

int tt_config_set(tt_config *cfg, tt_param p, uint64_t value, tt_error_info *err)
{
    if (!cfg)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_config_set: NULL config");
    return set_named(cfg, p, value, param_name(p), err);
}

int tt_config_get(const tt_config *cfg, tt_param p, uint64_t *value)
{
    struct tt_config_impl *c = cfgw((tt_config *)(uintptr_t)cfg);
    if (p == TT_PARAM_MODE) {
        *value = c->mode;
        return TT_OK;
    }
    uint64_t *v = slot(c, p);
    if (!v)
        return TT_E_INVAL;
    *value = *v;
    return TT_OK;
}

static bool parse_u64(const char *s, uint64_t *out);

int tt_config_set_str(tt_config *cfg, tt_param_str p, const char *value, tt_error_info *err)
{
    struct tt_config_impl *c = cfgw(cfg);
    if (!value)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "string parameter %d: NULL value", (int)p);
    size_t n = strlen(value);
    switch (p) {
    case TT_PARAM_FILE:
        if (n == 0 || n >= sizeof c->file)
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TT_PARAM_FILE: path length %zu is not in [1, %zu]", n,
                           sizeof c->file - 1);
        memcpy(c->file, value, n + 1);
        return TT_OK;
    case TT_PARAM_CALLER:
        if (n >= sizeof c->caller)
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TT_PARAM_CALLER: %zu bytes, at most %zu allowed", n,
                           sizeof c->caller - 1);
        memcpy(c->caller, value, n + 1);
        return TT_OK;
    case TT_PARAM_REPLAY_FROM: {
        /* "checkpoint:N"; "" unsets it */
        static const char pre[] = "checkpoint:";
        uint64_t v;
        if (n == 0) {
            c->replay_from = 0;
            return TT_OK;
        }
        if (strncmp(value, pre, sizeof pre - 1) != 0 || !parse_u64(value + sizeof pre - 1, &v) ||
            v == UINT64_MAX)
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TT_PARAM_REPLAY_FROM: '%s' is not checkpoint:N (N a checkpoint's "
                           "number, from 0)", value);
        c->replay_from = v + 1;
        return TT_OK;
    }
    default:
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "unknown string parameter %d", (int)p);
    }
}

void tt_config_set_memory_sink(tt_config *cfg, tt_memory_sink *sink)
{
    cfgw(cfg)->memory_sink = sink;
    cfgw(cfg)->cb_fn = NULL;
}

void tt_config_set_callback_sink(tt_config *cfg, tt_sink_write_fn fn, void *ctx)
{
    cfgw(cfg)->cb_fn = fn;
    cfgw(cfg)->cb_ctx = ctx;
    cfgw(cfg)->memory_sink = NULL;
}

void tt_config_set_source(tt_config *cfg, const tt_source *src)
{
    cfgw(cfg)->source = src;
}

int tt_config_set_writer_storage(tt_config *cfg, void *storage, size_t len, tt_error_info *err)
{
    if (storage && ((uintptr_t)storage & 63))
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "writer storage is not 64-byte aligned");
    cfgw(cfg)->storage = storage;
    cfgw(cfg)->storage_len = len;
    return TT_OK;
}

/* ---------------------------------------------------------------- settings
 *
 * A TINYTRACE_* setting comes from the environment, or from the settings the runtime was handed
 * by `tinytrace record|replay` through a descriptor (tt_settings_read_): then the program's
 * environment holds none of them, and a program that opens its own session from the environment
 * still finds the runtime's. Neither counts in a setuid or setgid process. */

#define SETTINGS_MAX 32
static char settings_text[16384] TT_BIG_BSS;
static const char *settings_key[SETTINGS_MAX], *settings_val[SETTINGS_MAX];
static unsigned nsettings;

/* Splits settings_text, @len bytes long, into its lines. */
static void settings_parse(size_t len)
{
    settings_text[len] = '\0';
    nsettings = 0;
    for (char *line = settings_text; *line && nsettings < SETTINGS_MAX;) {
        char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
        if (nl)
            *nl = '\0';
        if (eq && (!nl || eq < nl)) {
            *eq = '\0';
            settings_key[nsettings] = line;
            settings_val[nsettings++] = eq + 1;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

int tt_settings_read_(int fd)
{
    /* straight into the static buffer: no copy on the constructor's stack, whose pages a short
     * process would fault in for it */
    ssize_t n = pread(fd, settings_text, sizeof settings_text - 1, 0);
    if (n < 0)
        return TT_E_IO;
    settings_parse((size_t)n);
    return TT_OK;
}

const char *tt_setting_(const char *name)
{
    const char *v = secure_getenv(name);
    if (v || strncmp(name, "TINYTRACE_", 10) != 0 || tt_env_secure_())
        return v;
    for (unsigned i = 0; i < nsettings; i++)
        if (strcmp(settings_key[i], name + 10) == 0)
            return settings_val[i];
    return NULL;
}

/* Parses a whole decimal number; no sign, no suffix, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

static int env_num(tt_config *cfg, const char *var, tt_param p, uint64_t unit, tt_error_info *err)
{
    const char *s = tt_setting_(var);
    uint64_t v;
    if (!s)
        return TT_OK;
    if (!parse_u64(s, &v) || (unit > 1 && v > UINT64_MAX / unit))
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "%s: '%s' is not a valid number", var, s);
    return set_named(cfg, p, v * unit, var, err);
}

extern char **environ;

/* Every TINYTRACE_* name the library or the tool reads: any other is a typo, refused. */
static const char *const known_vars[] = {
    "MODE", "FILE", "CALLER", "BUFFER_KB", "MEMORY_MB", "BLOCK_KB", "MAX_EVENT_MB",
    "MAX_THREADS", "ORDERED", "ORDER_TIMEOUT_MS", "DIVERGENCE", "ALLOC", "CHECK_OUTPUT",
    "KEEP_GOING", "PID", "PRELOAD", "PROGRESS_MS", "REPORT_FD", "RT", "CHAOS", "CHAOS_DEPTH",
    "CHAOS_DELAY_US", "REAL_SLEEP", "REPLAY_FROM", "STOP_AT", "GDB", "TREE", "PROCESS",
    "REPORT_NONCE", "OUTSIDE_FIFO", "FILTER", "NOTRACE", "DEPTH", "DEBUGINFO_PATH", "SYNC",
    "SPARES", "INDEX",
};

static int check_names(tt_error_info *err)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "TINYTRACE_", 10) != 0)
            continue;
        const char *name = *e + 10, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        bool ok = false;
        for (size_t i = 0; i < sizeof known_vars / sizeof known_vars[0] && !ok; i++)
            ok = strlen(known_vars[i]) == n && memcmp(known_vars[i], name, n) == 0;
        if (!ok)
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TINYTRACE_%.*s: unknown setting (a typo?)", (int)n, name);
    }
    return TT_OK;
}

bool tt_env_secure_(void)
{
    return getauxval(AT_SECURE) != 0;
}


bool tt_env_has_settings_(void)
{
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "TINYTRACE_", 10) == 0)
            return true;
    return false;
}

int tt_config_from_env(tt_config *cfg, tt_error_info *err)
{
    tt_config tmp;
    int rc;
    /* A setuid or setgid program runs with its owner's rights on behalf of whoever started it:
     * TINYTRACE_FILE would let any user have such a program replace a file it may write, so
     * no TINYTRACE_* setting counts there (secure_getenv below, for every variable). */
    if (tt_env_secure_()) {
        if (err && tt_env_has_settings_()) {
            tt_fail(err, TT_OK, 0, UINT64_MAX, "TINYTRACE_* ignored: a setuid or setgid process "
                    "(AT_SECURE)");
        }
        return TT_OK;
    }
    if ((rc = check_names(err)) != TT_OK)
        return rc;
    /* build into a copy, so a refused variable leaves @cfg as it was */
    memcpy(&tmp, cfg, sizeof tmp);
    if (cfgw(&tmp)->magic != CFG_MAGIC)
        tt_config_init(&tmp);
    const char *mode = tt_setting_("TINYTRACE_MODE");
    if (mode) {
        uint64_t m;
        if (!strcmp(mode, "off") || !strcmp(mode, "0") || !*mode)
            m = TT_MODE_OFF;
        else if (!strcmp(mode, "record"))
            m = TT_MODE_RECORD;
        else if (!strcmp(mode, "replay"))
            m = TT_MODE_REPLAY;
        else
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TINYTRACE_MODE: '%s' is not one of off, record, replay", mode);
        cfgw(&tmp)->mode = (uint32_t)m;
    }
    const char *file = tt_setting_("TINYTRACE_FILE");
    if (file) {
        if ((rc = tt_config_set_str(&tmp, TT_PARAM_FILE, file, err)) != TT_OK)
            return tt_fail(err, rc, 0, UINT64_MAX, "TINYTRACE_FILE: %s", err ? err->message : "");
    }
    const char *caller = tt_setting_("TINYTRACE_CALLER");
    if (caller) {
        if ((rc = tt_config_set_str(&tmp, TT_PARAM_CALLER, caller, err)) != TT_OK)
            return tt_fail(err, rc, 0, UINT64_MAX, "TINYTRACE_CALLER: %s", err ? err->message : "");
    }
    const char *from = tt_setting_("TINYTRACE_REPLAY_FROM");
    if (from && tt_config_set_str(&tmp, TT_PARAM_REPLAY_FROM, from, NULL) != TT_OK)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "TINYTRACE_REPLAY_FROM: '%s' is not "
                       "checkpoint:N (N a checkpoint's number, from 0)", from);
    if ((rc = env_num(&tmp, "TINYTRACE_BUFFER_KB", TT_PARAM_BUFFER_BYTES, 1024, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_MEMORY_MB", TT_PARAM_MEMORY_BYTES, 1u << 20, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_BLOCK_KB", TT_PARAM_BLOCK_BYTES, 1024, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_MAX_EVENT_MB", TT_PARAM_MAX_EVENT_BYTES, 1u << 20, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_MAX_THREADS", TT_PARAM_MAX_THREADS, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_ORDERED", TT_PARAM_ORDERED, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_ORDER_TIMEOUT_MS", TT_PARAM_ORDER_TIMEOUT_MS, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_CHAOS_DEPTH", TT_PARAM_CHAOS_DEPTH, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_CHAOS_DELAY_US", TT_PARAM_CHAOS_DELAY_US, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_REAL_SLEEP", TT_PARAM_REAL_SLEEP, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_SYNC", TT_PARAM_SYNC, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_SPARES", TT_PARAM_SPARES, 1, err)) ||
        (rc = env_num(&tmp, "TINYTRACE_INDEX", TT_PARAM_INDEX, 1, err)))
        return rc;
    /* TINYTRACE_CHAOS=SEED: chaos on, with that seed */
    if (tt_setting_("TINYTRACE_CHAOS")) {
        if ((rc = env_num(&tmp, "TINYTRACE_CHAOS", TT_PARAM_CHAOS_SEED, 1, err)) != TT_OK)
            return rc;
        cfgw(&tmp)->chaos = 1;
    }
    const char *div = tt_setting_("TINYTRACE_DIVERGENCE");
    if (div) {
        if (!strcmp(div, "abort") || !strcmp(div, "return"))
            cfgw(&tmp)->divergence = TT_DIVERGE_RETURN;
        else if (!strcmp(div, "count"))
            cfgw(&tmp)->divergence = TT_DIVERGE_COUNT;
        else
            return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                           "TINYTRACE_DIVERGENCE: '%s' is not one of abort, count", div);
    }
    const struct tt_config_impl *c = cfgw(&tmp);
    if (c->memory_bytes < 2 * c->buffer_bytes)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                       "TINYTRACE_MEMORY_MB: the budget (%llu bytes) must hold at least two "
                       "buffers of TINYTRACE_BUFFER_KB (%llu bytes)",
                       (unsigned long long)c->memory_bytes, (unsigned long long)c->buffer_bytes);
    if (c->mode != TT_MODE_OFF && !c->file[0])
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                       "TINYTRACE_FILE: must be set when TINYTRACE_MODE is record or replay");
    /* the process's session from the environment may be shared (tt_session_create_) */
    cfgw(&tmp)->from_env = 1;
    memcpy(cfg, &tmp, sizeof tmp);
    return TT_OK;
}

tt_mode tt_session_mode_of_(const tt_config *cfg)
{
    return (tt_mode)tt_cfg(cfg)->mode;
}
