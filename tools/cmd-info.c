/* SPDX-License-Identifier: MIT */
/* tinytrace info — the manifest and the thread table of a trace.
 *
 * Reads the manifest (probe) and the tables (tt_reader_open with one sequential cursor); no event
 * chunk is read, so this is cheap on any size of file. When the manifest reads but the tables do
 * not, the manifest is still printed and the error follows it.
 *
 * It also shows what `tinytrace replay` would run: the recorded command line, working directory
 * and environment (the META objects, meta.h), escaped, so that a trace from someone else can be
 * looked at before it is replayed. The text gives the environment's variable names, and the
 * values of the loader's (LD_*: they choose what code the program runs); --json gives all of it.
 * A trace from a runtime that records no environment says so.
 */
#include "meta.h"
#include "opts.h"
#include "procs.h"
#include "tool.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace info [--json] [--max-memory MB] [--process P] FILE\n"
    "\n"
    "Prints the manifest of trace FILE (format and library version, flags, build id, caller,\n"
    "counts, largest chunk and event, table offsets, clock, time origin, stalls, write error,\n"
    "pid), what `tinytrace replay FILE` runs: the recorded command line (each argument quoted\n"
    "as a shell needs it, control characters and invalid UTF-8 as \\xNN), its working directory\n"
    "and its environment (the number and names of the variables, and the values of the\n"
    "loader's, LD_*), the thread table (id, OS tid, name, events, chunks, first and last\n"
    "time in ns), and the checkpoints and restores of the recording, if it has any (number,\n"
    "thread, seq, epoch, time in ns, providers and bytes; the first and last 8 of a long\n"
    "list: `tinytrace dump --checkpoints` shows them all).\n"
    "\n"
    "Options:\n"
    "  -j, --json          print one JSON object: {\"file\", \"manifest\", \"command\",\n"
    "                      \"threads\", \"processes\"}; command is null when nothing was\n"
    "                      recorded, else {\"argv\", \"cwd\", \"environment\":\n"
    "                      [\"NAME=VALUE\", ...] or null, \"execfn\", \"untraced\", \"chaos\",\n"
    "                      \"sync_untracked\", \"sync_shared\", \"filter\", \"notrace\",\n"
    "                      \"depth\" (record's\n"
    "                      filters), \"damaged\"} (null where not recorded; chaos: the\n"
    "                      seed and parameters of record --chaos);\n"
    "                      processes: the recording's tree, [{\"process\", \"path\",\n"
    "                      \"generation\", \"pid\", \"ppid\", \"status\", \"file\",\n"
    "                      \"build_id\", \"command\", \"note\"}]; and \"checkpoints\",\n"
    "                      \"restores\": arrays of the checkpoint table\n"
    TOOL_MAX_MEMORY_HELP TOOL_PROCESS_HELP
    "  -h, --help          print this help\n"
    "\n"
    "Exits 0 when manifest and tables were read; 3 when the file is not a readable trace;\n"
    "7 when it is marked incomplete (a write error stopped the recording: the reader refuses\n"
    "it, and the message names the error); 6 when it cannot be opened.\n";

static void print_build_id(FILE *f, const tt_manifest *m)
{
    uint32_t n = m->build_id_len <= TT_BUILD_ID_MAX ? m->build_id_len : TT_BUILD_ID_MAX;
    if (n == 0)
        fputs("none", f);
    else
        tool_print_hex(f, m->build_id, n);
}

static void print_text(const tool_trace *t)
{
    const tt_manifest *m = &t->m;
    char flags[128], origin[64];
    size_t caller_len = strnlen(m->caller, sizeof m->caller);

    tool_format_flags(m->flags, ",", flags, sizeof flags);
    tool_format_time(m->realtime_origin_ns, origin, sizeof origin);

    printf("file:             ");
    tool_print_text(stdout, t->path, strlen(t->path));
    printf("\n");
    printf("format version:   %" PRIu32 "\n", m->version);
    printf("flags:            0x%" PRIx32 " (%s)\n", m->flags, flags);
    printf("library version:  %" PRIu32 ".%" PRIu32 ".%" PRIu32 "\n", (m->lib_version >> 16) & 0xff,
           (m->lib_version >> 8) & 0xff, m->lib_version & 0xff);
    printf("build id:         ");
    print_build_id(stdout, m);
    printf("\ncaller:           ");
    if (caller_len == 0)
        printf("-");
    else
        tool_print_text(stdout, m->caller, caller_len);
    printf("\n");
    printf("pid:              %" PRIu32 "\n", m->pid);
    printf("events:           %" PRIu64 "\n", m->event_count);
    printf("payload bytes:    %" PRIu64 "\n", m->payload_bytes);
    printf("chunks:           %" PRIu64 "\n", m->chunk_count);
    printf("blocks:           %" PRIu64 " of %" PRIu32 " bytes\n", m->block_count, m->block_size);
    printf("largest chunk:    %" PRIu64 " bytes\n", m->largest_chunk);
    printf("largest event:    %" PRIu64 " bytes\n", m->largest_event);
    printf("largest split:    %" PRIu64 " bytes\n", m->largest_split);
    printf("threads:          %" PRIu32 "\n", m->thread_count);
    printf("objects:          %" PRIu32 "\n", m->object_count);
    printf("data:             offset %" PRIu64 ", end %" PRIu64 "\n", m->data_offset, m->data_end);
    printf("thread table:     offset %" PRIu64 ", length %" PRIu64 "\n", m->threads_offset,
           m->threads_length);
    printf("object table:     offset %" PRIu64 ", length %" PRIu64 "\n", m->objects_offset,
           m->objects_length);
    if (m->version >= 2 && m->index_offset != 0)
        printf("index tables:     offset %" PRIu64 ", length %" PRIu64 "\n", m->index_offset,
               m->index_length);
    else /* stats, tree and report refuse the file; the rest read it */
        printf("index tables:     none (%s)\n",
               m->version < 2 ? "format version 1"
               : (m->flags & TT_MF_RECOVERED) ? "recovered" : "recorded without them");
    printf("file size:        %" PRIu64 "\n", m->file_size);
    printf("ticks per second: %" PRIu64 "%s\n", m->ticks_per_sec,
           (m->flags & TT_MF_TSC) ? " (TSC)" : "");
    printf("tick origin:      %" PRIu64 "\n", m->tick_origin);
    printf("time origin:      %s\n", origin);
    printf("events checksum:  %016" PRIx64 "\n", m->events_checksum);
    printf("stalls:           %" PRIu64 " (%" PRIu64 " ns)\n", m->stall_count, m->stall_ns);
    printf("threads refused:  %" PRIu32 "%s\n", m->threads_refused,
           m->threads_refused ? " (past max_threads: their events are not recorded)" : "");
    if (m->checkpoints_offset)
        printf("checkpoints:      %" PRIu32 ", restores %" PRIu32 " (epochs 0 to %" PRIu32
               "; table at offset %" PRIu64 ", length %" PRIu64 ")\n", m->checkpoint_count,
               m->restore_count, m->restore_count, m->checkpoints_offset, m->checkpoints_length);
    else
        printf("checkpoints:      %s\n", m->version < 4 ? "no table (format before version 4)"
                                                       : "none");
    if (m->write_errno != 0)
        printf("write errno:      %" PRId32 " (%s)\n", m->write_errno, strerror(m->write_errno));
    else
        printf("write errno:      0\n");
}

/* One argument as a shell would need it to be the same word: as it is when it holds only
 * characters no shell treats specially, else in single quotes ('\'' for a quote); escaped in
 * both cases (tool_print_text), so a control character shows as \xNN and does nothing. */
static void print_word(FILE *f, const char *s)
{
    size_t n = strlen(s);
    int plain = n > 0 && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789_./=:,+@%-") == n;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = s, *q; *p != '\0'; p = q) {
        q = strchr(p, '\'');
        if (q == NULL)
            q = p + strlen(p);
        tool_print_text(f, p, (size_t)(q - p));
        if (*q == '\'') {
            fputs("'\\''", f);
            q++;
        }
    }
    fputc('\'', f);
}

/* The recorded environment: how many variables, their names, and the loader's in full. */
static void print_environment_text(const tool_meta *mt)
{
    printf("environment:      ");
    if (mt->env == NULL) {
        printf("not recorded\n");
        return;
    }
    printf("%" PRIu64 " variable%s", mt->envc, mt->envc == 1 ? "" : "s");
    for (uint64_t i = 0; i < mt->envc; i++) {
        const char *eq = strchr(mt->env[i], '=');
        fputs(i == 0 ? ": " : " ", stdout);
        tool_print_text(stdout, mt->env[i], eq ? (size_t)(eq - mt->env[i]) : strlen(mt->env[i]));
    }
    fputc('\n', stdout);
    for (uint64_t i = 0; i < mt->envc; i++) {
        if (strncmp(mt->env[i], "LD_", 3) != 0)
            continue;
        printf("                  ");
        tool_print_text(stdout, mt->env[i], strlen(mt->env[i]));
        fputc('\n', stdout);
    }
}

/* The recorded command line, directory and environment (meta.h), after the manifest. */
static void print_command_text(const tool_trace *t)
{
    tool_meta mt;
    char why[128];
    int rc = tool_meta_parse(t->r, &mt, why, sizeof why);

    printf("command:          ");
    if (rc == TT_E_NOMEM)
        printf("(out of memory)");
    else if (rc != TT_OK)
        printf("damaged (%s): replay refuses it", why);
    else if (mt.argv == NULL)
        printf("not recorded (replay needs -- PROG ARGS)");
    for (uint64_t i = 0; rc == TT_OK && mt.argv != NULL && i < mt.argc; i++) {
        if (i > 0)
            fputc(' ', stdout);
        print_word(stdout, mt.argv[i]);
    }
    printf("\ncwd:              ");
    if (rc == TT_OK && mt.cwd != NULL)
        tool_print_text(stdout, mt.cwd, strlen(mt.cwd));
    else
        printf("not recorded");
    fputc('\n', stdout);
    if (rc == TT_OK)
        print_environment_text(&mt);
    else
        printf("environment:      not read\n");
    if (rc == TT_OK && (mt.filter || mt.notrace || mt.depth)) {
        printf("filters:         ");
        const char *what[] = {" --filter ", " --notrace ", " --depth "};
        const char *val[] = {mt.filter, mt.notrace, mt.depth};
        for (int i = 0; i < 3; i++)
            if (val[i] != NULL) {
                fputs(what[i], stdout);
                tool_print_text(stdout, val[i], strlen(val[i]));
            }
        fputc('\n', stdout);
    }
    if (rc == TT_OK && mt.untraced != NULL) {
        printf("untraced child:   ");
        tool_print_text(stdout, mt.untraced, strlen(mt.untraced));
        fputc('\n', stdout);
    }
    if (rc == TT_OK && mt.chaos != NULL) {
        printf("schedule chaos:   ");
        tool_print_text(stdout, mt.chaos, strlen(mt.chaos));
        fputc('\n', stdout);
    }
    if (rc == TT_OK && mt.sync_untracked)
        printf("sync untracked:   %" PRIu64 " operations on no object (their order is not "
               "replayed)\n", mt.sync_untracked);
    if (rc == TT_OK && mt.sync_shared)
        printf("sync shared:      %" PRIu64 " operations on process-shared objects (ordered "
               "within each process only: their order between processes is not replayed)\n",
               mt.sync_shared);
    tool_meta_free(&mt);
}

/* A string member, or null. */
static void json_str_or_null(tool_json *j, const char *key, const char *s)
{
    if (s != NULL)
        tj_str(j, key, s);
    else
        tj_null(j, key);
}

/* An array of the @n strings of @v, or null when @v is NULL. */
static void json_strings_or_null(tool_json *j, const char *key, char *const *v, uint64_t n)
{
    if (v == NULL) {
        tj_null(j, key);
        return;
    }
    tj_array_begin(j, key);
    for (uint64_t i = 0; i < n; i++)
        tj_str(j, NULL, v[i]);
    tj_array_end(j);
}

static void print_command_json(tool_json *j, const tool_trace *t)
{
    tool_meta mt;
    char why[128];
    int rc = tool_meta_parse(t->r, &mt, why, sizeof why);

    if (rc == TT_OK && !mt.found) {
        tj_null(j, "command");
        tool_meta_free(&mt);
        return;
    }
    tj_object_begin(j, "command");
    json_strings_or_null(j, "argv", rc == TT_OK ? mt.argv : NULL, mt.argc);
    json_str_or_null(j, "cwd", rc == TT_OK ? mt.cwd : NULL);
    json_strings_or_null(j, "environment", rc == TT_OK ? mt.env : NULL, mt.envc);
    json_str_or_null(j, "execfn", rc == TT_OK ? mt.execfn : NULL);
    json_str_or_null(j, "untraced", rc == TT_OK ? mt.untraced : NULL);
    json_str_or_null(j, "chaos", rc == TT_OK ? mt.chaos : NULL);
    tj_u64(j, "sync_untracked", rc == TT_OK ? mt.sync_untracked : 0);
    tj_u64(j, "sync_shared", rc == TT_OK ? mt.sync_shared : 0);
    json_str_or_null(j, "filter", rc == TT_OK ? mt.filter : NULL);
    json_str_or_null(j, "notrace", rc == TT_OK ? mt.notrace : NULL);
    json_str_or_null(j, "depth", rc == TT_OK ? mt.depth : NULL);
    if (rc == TT_OK)
        tj_null(j, "damaged");
    else
        tj_str(j, "damaged", rc == TT_E_NOMEM ? "out of memory" : why);
    tj_object_end(j);
    tool_meta_free(&mt);
}

static void print_threads_text(const tool_trace *t)
{
    const tt_manifest *m = &t->m;
    printf("\n%6s %10s %12s %10s %20s %20s  %s\n", "thread", "os-tid", "events", "chunks",
           "first-ns", "last-ns", "name");
    for (uint32_t i = 0; i < m->thread_count; i++) {
        const tt_thread_entry *e = tt_reader_thread(t->r, i);
        if (e == NULL) {
            printf("%6" PRIu32 " (no entry in the thread table)\n", i);
            continue;
        }
        printf("%6" PRIu32 " %10" PRIu32 " %12" PRIu64 " %10" PRIu64 " %20" PRIu64 " %20" PRIu64
               "  ",
               e->id, e->os_tid, e->event_count, e->chunk_count,
               tool_ticks_to_ns(e->first_time, m->ticks_per_sec),
               tool_ticks_to_ns(e->last_time, m->ticks_per_sec));
        tool_print_object(stdout, t->r, e->name);
        printf("\n");
    }
}

/* The checkpoint table: every checkpoint and restore, the first and last 8 of each when there
 * are more than 16. */
static void print_checkpoints_text(const tool_trace *t)
{
    uint64_t n = tt_reader_checkpoint_count(t->r);
    uint32_t m = tt_reader_restore_count(t->r);
    if (n == 0)
        return;
    printf("\n%10s %6s %12s %6s %20s %10s  %s\n", "checkpoint", "thread", "seq", "epoch",
           "time-ns", "bytes", "providers (id:bytes)");
    for (uint64_t i = 0; i < n; i++) {
        tt_checkpoint_entry e;
        if (n > 16 && i == 8) {
            printf("%10s (%" PRIu64 " more)\n", "...", n - 16);
            i = n - 8;
        }
        if (tt_reader_checkpoint(t->r, i, &e) != TT_OK)
            continue;
        printf("%10" PRIu64 " %6" PRIu32 " %12" PRIu64 " %6" PRIu32 " %20" PRIu64 " %10" PRIu64
               "  ", e.number, e.tp.thread, e.tp.seq, e.tp.epoch,
               tool_ticks_to_ns(e.time, t->m.ticks_per_sec), e.length);
        for (uint32_t k = 0; k < e.providers; k++) {
            uint32_t id = 0;
            uint64_t len = 0;
            tt_reader_checkpoint_provider(t->r, i, k, &id, &len);
            printf("%s%" PRIu32 ":%" PRIu64, k ? " " : "", id, len);
        }
        printf("\n");
    }
    if (m == 0)
        return;
    printf("\n%10s %6s %12s %20s  %s\n", "restore", "thread", "seq", "time-ns",
           "checkpoint restored (the restore begins its epoch)");
    for (uint32_t ep = 1; ep <= m; ep++) {
        tt_restore_entry e;
        if (m > 16 && ep == 9) {
            printf("%10s (%" PRIu32 " more)\n", "...", m - 16);
            ep = m - 7;
        }
        if (tt_reader_restore(t->r, ep, &e) != TT_OK)
            continue;
        printf("%10" PRIu32 " %6" PRIu32 " %12" PRIu64 " %20" PRIu64 "  %" PRIu64 "\n", e.epoch,
               e.tp.thread, e.tp.seq, tool_ticks_to_ns(e.time, t->m.ticks_per_sec),
               e.checkpoint);
    }
}

static void print_checkpoints_json(tool_json *j, const tool_trace *t)
{
    tj_array_begin(j, "checkpoints");
    for (uint64_t i = 0; i < tt_reader_checkpoint_count(t->r); i++) {
        tt_checkpoint_entry e;
        if (tt_reader_checkpoint(t->r, i, &e) != TT_OK)
            continue;
        tj_object_begin(j, NULL);
        tj_u64(j, "number", e.number);
        tj_u64(j, "thread", e.tp.thread);
        tj_u64(j, "seq", e.tp.seq);
        tj_u64(j, "epoch", e.tp.epoch);
        tj_u64(j, "time_ns", tool_ticks_to_ns(e.time, t->m.ticks_per_sec));
        tj_u64(j, "site_id", e.site);
        tj_object_name(j, "site", t->r, e.site);
        tj_u64(j, "len", e.length);
        tj_array_begin(j, "providers");
        for (uint32_t k = 0; k < e.providers; k++) {
            uint32_t id = 0;
            uint64_t len = 0;
            tt_reader_checkpoint_provider(t->r, i, k, &id, &len);
            tj_object_begin(j, NULL);
            tj_u64(j, "id", id);
            tj_u64(j, "len", len);
            tj_object_end(j);
        }
        tj_array_end(j);
        tj_object_end(j);
    }
    tj_array_end(j);
    tj_array_begin(j, "restores");
    for (uint32_t ep = 1; ep <= tt_reader_restore_count(t->r); ep++) {
        tt_restore_entry e;
        if (tt_reader_restore(t->r, ep, &e) != TT_OK)
            continue;
        tj_object_begin(j, NULL);
        tj_u64(j, "epoch", e.epoch);
        tj_u64(j, "thread", e.tp.thread);
        tj_u64(j, "seq", e.tp.seq);
        tj_u64(j, "time_ns", tool_ticks_to_ns(e.time, t->m.ticks_per_sec));
        tj_u64(j, "site_id", e.site);
        tj_object_name(j, "site", t->r, e.site);
        tj_u64(j, "checkpoint", e.checkpoint);
        tj_object_end(j);
    }
    tj_array_end(j);
}

static void print_manifest_json(tool_json *j, const tool_trace *t)
{
    const tt_manifest *m = &t->m;
    char buf[128];
    uint32_t n = m->build_id_len <= TT_BUILD_ID_MAX ? m->build_id_len : TT_BUILD_ID_MAX;

    tj_object_begin(j, "manifest");
    tj_u64(j, "version", m->version);
    tj_u64(j, "flags", m->flags);
    tj_array_begin(j, "flag_names");
    {
        /* the same names as the text output, one array element each */
        char *save = NULL, *tok;
        tool_format_flags(m->flags, ",", buf, sizeof buf);
        if (strcmp(buf, "-") != 0)
            for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
                tj_str(j, NULL, tok);
    }
    tj_array_end(j);
    snprintf(buf, sizeof buf, "%" PRIu32 ".%" PRIu32 ".%" PRIu32, (m->lib_version >> 16) & 0xff,
             (m->lib_version >> 8) & 0xff, m->lib_version & 0xff);
    tj_str(j, "lib_version", buf);
    tj_u64(j, "lib_version_number", m->lib_version);
    tj_u64(j, "block_size", m->block_size);
    tj_hex(j, "build_id", m->build_id, n);
    tj_strn(j, "caller", m->caller, strnlen(m->caller, sizeof m->caller));
    tj_u64(j, "event_count", m->event_count);
    tj_u64(j, "payload_bytes", m->payload_bytes);
    tj_u64(j, "chunk_count", m->chunk_count);
    tj_u64(j, "block_count", m->block_count);
    tj_u64(j, "largest_chunk", m->largest_chunk);
    tj_u64(j, "largest_event", m->largest_event);
    tj_u64(j, "largest_split", m->largest_split);
    tj_u64(j, "thread_count", m->thread_count);
    tj_u64(j, "object_count", m->object_count);
    tj_u64(j, "data_offset", m->data_offset);
    tj_u64(j, "data_end", m->data_end);
    tj_u64(j, "threads_offset", m->threads_offset);
    tj_u64(j, "threads_length", m->threads_length);
    tj_u64(j, "objects_offset", m->objects_offset);
    tj_u64(j, "objects_length", m->objects_length);
    tj_u64(j, "index_offset", m->index_offset);
    tj_u64(j, "index_length", m->index_length);
    tj_u64(j, "file_size", m->file_size);
    tj_u64(j, "ticks_per_sec", m->ticks_per_sec);
    tj_u64(j, "tick_origin", m->tick_origin);
    tj_i64(j, "realtime_origin_ns", m->realtime_origin_ns);
    tool_format_time(m->realtime_origin_ns, buf, sizeof buf);
    tj_str(j, "time_origin", buf);
    snprintf(buf, sizeof buf, "%016" PRIx64, m->events_checksum);
    tj_str(j, "events_checksum", buf);
    tj_u64(j, "stall_count", m->stall_count);
    tj_u64(j, "stall_ns", m->stall_ns);
    tj_u64(j, "threads_refused", m->threads_refused);
    tj_u64(j, "checkpoints_offset", m->checkpoints_offset);
    tj_u64(j, "checkpoints_length", m->checkpoints_length);
    tj_u64(j, "checkpoint_count", m->checkpoint_count);
    tj_u64(j, "restore_count", m->restore_count);
    tj_i64(j, "write_errno", m->write_errno);
    tj_u64(j, "pid", m->pid);
    tj_object_end(j);
}

static void print_threads_json(tool_json *j, const tool_trace *t)
{
    tj_array_begin(j, "threads");
    for (uint32_t i = 0; i < t->m.thread_count; i++) {
        const tt_thread_entry *e = tt_reader_thread(t->r, i);
        if (e == NULL)
            continue;
        tj_object_begin(j, NULL);
        tj_u64(j, "id", e->id);
        tj_u64(j, "os_tid", e->os_tid);
        tj_u64(j, "name_id", e->name);
        tj_object_name(j, "name", t->r, e->name);
        tj_u64(j, "flags", e->flags);
        tj_u64(j, "events", e->event_count);
        tj_u64(j, "chunks", e->chunk_count);
        tj_u64(j, "first_time", e->first_time);
        tj_u64(j, "last_time", e->last_time);
        tj_u64(j, "first_ns", tool_ticks_to_ns(e->first_time, t->m.ticks_per_sec));
        tj_u64(j, "last_ns", tool_ticks_to_ns(e->last_time, t->m.ticks_per_sec));
        tj_object_end(j);
    }
    tj_array_end(j);
}

/* "processes": the tree of the recording (one row for a recording of one process). */
static void print_processes_json(tool_json *j, const char *file)
{
    tool_proc *v = NULL;
    size_t n = 0;
    if (tool_procs_read(file, &v, &n) != 0) {
        tj_null(j, "processes");
        return;
    }
    tj_array_begin(j, "processes");
    for (size_t i = 0; i < n; i++) {
        tj_object_begin(j, NULL);
        tj_str(j, "process", v[i].name);
        tj_str(j, "path", v[i].path);
        tj_u64(j, "generation", v[i].gen);
        tj_i64(j, "pid", v[i].pid);
        tj_i64(j, "ppid", v[i].ppid);
        char st[32];
        if (v[i].status == -2)
            snprintf(st, sizeof st, "exec");
        else
            tool_status_word(v[i].status, st, sizeof st);
        tj_str(j, "status", st);
        if (v[i].file[0])
            tj_str(j, "file", v[i].file);
        else
            tj_null(j, "file");
        tj_str(j, "build_id", v[i].build_id);
        tj_str(j, "command", v[i].cmd);
        tj_str(j, "note", v[i].note);
        tj_object_end(j);
    }
    tj_array_end(j);
    free(v);
}

int cmd_info(int argc, char **argv)
{
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY | TOOL_OPT_PROCESS};
    tool_opts o;
    tool_trace t;
    tool_json j;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, NULL, argc, argv)) != TOOL_GO_ON)
        return rc;
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_PROBE);
    if (rc == TOOL_EXIT_OK) {
        /* The manifest read: show it even if the tables then fail to. */
        if (!o.json)
            print_text(&t);
        rc = tool_trace_open(&t);
        if (o.json) {
            tj_init(&j, stdout);
            tj_object_begin(&j, NULL);
            tj_str(&j, "file", t.path);
            print_manifest_json(&j, &t);
            if (rc == TOOL_EXIT_OK) {
                print_command_json(&j, &t);
                print_threads_json(&j, &t);
                print_checkpoints_json(&j, &t);
                print_processes_json(&j, o.tree);
            } else {
                tj_null(&j, "command");
                tj_null(&j, "threads");
                tj_null(&j, "checkpoints");
                tj_null(&j, "restores");
            }
            tj_object_end(&j);
            tj_newline(&j);
        } else if (rc == TOOL_EXIT_OK) {
            print_command_text(&t);
            print_threads_text(&t);
            print_checkpoints_text(&t);
            if (o.process == NULL)
                tool_procs_print(stdout, o.file);
        }
    }
    tool_trace_close(&t);
    return tool_finish_stdout(rc);
}
