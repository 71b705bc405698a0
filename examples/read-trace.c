/* SPDX-License-Identifier: MIT
 *
 * read-trace FILE — walks a trace with the store API: the manifest, the thread table, every
 * event, and (when the file has them) the index tables' per-function summary.
 *
 * The reader never sizes anything from the file alone: tt_reader_probe reads the manifest and
 * says, from it and the limits, how much storage the reader needs; the caller allocates exactly
 * that and the reader lives in it (store.h). Prints, one item a line:
 *     events N
 *     threads N
 *     thread ID EVENTS NAME
 *     kind NAME COUNT           (every kind with events, in kind order)
 *     payload_bytes N
 *     function ID CALLS NAME    (from the index summary; none for a file without one)
 * Names are bytes as the program interned them: a byte a terminal should not see is printed as
 * \xHH.
 * and exits 0, or 1 with a message naming the file and the offset when the file is refused.
 * Build:
 *     cc read-trace.c $(pkg-config --cflags --libs tinytrace) -o read-trace
 */
#include <stdio.h>
#include <stdlib.h>

#include <tinytrace/tinytrace.h>

/* Prints object @id's name, or "-" for none. The name is not NUL-terminated (store.h). */
static void print_name(const tt_reader *r, uint32_t id)
{
    tt_object_entry o;
    if (id == 0 || tt_reader_object(r, id, &o) != TT_OK) {
        fputs("-", stdout);
        return;
    }
    for (uint32_t i = 0; i < o.name_len; i++) {
        unsigned char c = (unsigned char)o.name[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

int main(int argc, char **argv)
{
    tt_source src;
    tt_reader_limits lim;
    tt_manifest m;
    tt_reader_capacity cap;
    tt_error_info err;
    tt_reader *r;
    void *mem;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: read-trace FILE\n");
        return 2;
    }
    if (tt_source_file(&src, argv[1], &err) != TT_OK) {
        fprintf(stderr, "read-trace: %s\n", err.message);
        return 1;
    }
    tt_reader_limits_default(&lim);
    if (tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, &m, &cap, &err) != TT_OK) {
        fprintf(stderr, "read-trace: %s\n", err.message);
        tt_source_close(&src);
        return 1;
    }
    /* the reader's storage: 16-byte aligned, exactly the probed size */
    if ((mem = aligned_alloc(16, (cap.total + 15) / 16 * 16)) == NULL) {
        fprintf(stderr, "read-trace: out of memory\n");
        tt_source_close(&src);
        return 1;
    }
    if (tt_reader_open(&src, &lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err) != TT_OK) {
        fprintf(stderr, "read-trace: %s\n", err.message);
        free(mem);
        tt_source_close(&src);
        return 1;
    }

    printf("events %llu\nthreads %u\n", (unsigned long long)m.event_count, m.thread_count);
    for (uint32_t t = 0; t < m.thread_count; t++) {
        const tt_thread_entry *te = tt_reader_thread(r, t);
        printf("thread %u %llu ", te->id, (unsigned long long)te->event_count);
        print_name(r, te->name);
        putchar('\n');
    }

    /* every event, in file order (one cursor; TT_CURSORS_PER_THREAD gives one per thread) */
    uint64_t kinds[TT_EV_KIND_MAX + 1] = {0}, payload = 0, n = 0;
    tt_event ev;
    while ((rc = tt_reader_next(r, 0, &ev, &err)) == TT_OK) {
        kinds[ev.kind]++;
        payload += ev.payload_len;
        n++;
    }
    if (rc != TT_E_END) {
        fprintf(stderr, "read-trace: after %llu events: %s\n", (unsigned long long)n,
                err.message);
        tt_reader_close(r);
        free(mem);
        tt_source_close(&src);
        return 1;
    }
    for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
        if (kinds[k])
            printf("kind %s %llu\n", tt_event_kind_name(k), (unsigned long long)kinds[k]);
    printf("payload_bytes %llu\n", (unsigned long long)payload);

    /* the index tables: per-function totals without reading an event */
    tt_index *ix;
    if (m.index_offset != 0) {
        if (tt_index_open(r, NULL, &ix, &err) != TT_OK) {
            fprintf(stderr, "read-trace: %s\n", err.message);
            tt_reader_close(r);
            free(mem);
            tt_source_close(&src);
            return 1;
        }
        for (uint32_t i = 0; i < tt_index_summary_count(ix); i++) {
            const tt_summary_entry *e = tt_index_summary(ix, i);
            printf("function %u %llu ", e->function, (unsigned long long)e->calls);
            print_name(r, e->function);
            putchar('\n');
        }
        tt_index_close(ix);
    }

    tt_reader_close(r);
    free(mem);
    tt_source_close(&src);
    return 0;
}
