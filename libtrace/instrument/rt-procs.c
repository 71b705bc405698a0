/* SPDX-License-Identifier: MIT */
/* The runtime's processes: the children a program starts and the execs it makes, the process
 * tree's calls of the preload library (runtime.h: tt_rt_fork_child, tt_rt_child_next, ...),
 * and the META objects that say who the process is and what ran live. Split from runtime.c,
 * whose state it shares (rt-int.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event-int.h"
#include "rt-int.h"
#include "runtime.h"

/* ---- processes
 *
 * What ran unrecorded (preload/process.c): children are counted by the traced process itself;
 * the first child's command line comes from posix_spawn, system or popen, or, for a fork, from
 * the child when it execs. The child writes it into a page shared with the parent (mapped at
 * start outside the tree, inherited by fork), once: the first to move `named` from 0 to 1
 * copies its line and then publishes 2. */
struct child_page {
    _Atomic uint32_t named;    /* 0 empty, 1 being written, 2 cmd holds the first child's line */
    char cmd[512];
};
static struct child_page *g_child_page;
static pthread_mutex_t g_child_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_first_cmd[512];     /* the first child's or untraceable exec's line (child_lock) */
static bool g_first_is_fork;      /* ... to be read from the page (child_lock) */

void child_page_map(void)
{
    /* in the tree every child is traced and says its exec itself: only a process traced on
     * its own (TINYTRACE_MODE by hand) has untraced fork children that write here. Not made,
     * it spares a short process a shared mapping, its file and their end (about 6 µs). */
    if (g_tree)
        return;
    void *p = mmap(NULL, sizeof *g_child_page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    g_child_page = p == MAP_FAILED ? NULL : p;
}

bool tt_rt_is_traced_process(void)
{
    return cur() != NULL && os_pid() == g_pid;
}

static void first_child(const char *cmd, bool fork)
{
    pthread_mutex_lock(&g_child_lock);
    if (!g_first_cmd[0] && !g_first_is_fork) {
        if (cmd)
            snprintf(g_first_cmd, sizeof g_first_cmd, "%s", cmd);
        else
            g_first_is_fork = fork;
    }
    pthread_mutex_unlock(&g_child_lock);
}

void tt_rt_child_untraced(const char *cmd)
{
    if (!tt_rt_is_traced_process())
        return;
    /* relaxed: a count, read at close after every thread that made a child has finished its
     * call (close waits for them through the session) */
    atomic_fetch_add_explicit(&g_children, 1, memory_order_relaxed);
    first_child(cmd, cmd == NULL);
}

void tt_rt_child_exec(const char *cmd)
{
    struct child_page *pg = g_child_page;
    uint32_t empty = 0;
    if (!pg || g_pid == 0 || os_pid() == g_pid)
        return;
    /* the page is shared with other processes: the CAS makes one writer, the release store of
     * 2 publishes its bytes to the parent's acquire load at close */
    if (atomic_compare_exchange_strong_explicit(&pg->named, &empty, 1, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        snprintf(pg->cmd, sizeof pg->cmd, "%s", cmd);
        atomic_store_explicit(&pg->named, 2, memory_order_release);
    }
}

/* The first child's line, for the manifest and the report ("" when there was no child). */
void first_child_cmd(char *out, size_t cap)
{
    pthread_mutex_lock(&g_child_lock);
    if (g_first_cmd[0])
        snprintf(out, cap, "%s", g_first_cmd);
    else if (g_first_is_fork && g_child_page &&
             atomic_load_explicit(&g_child_page->named, memory_order_acquire) == 2)
        snprintf(out, cap, "%s", g_child_page->cmd);
    else if (g_first_is_fork)
        snprintf(out, cap, "a fork of this program, which execed nothing");
    else
        out[0] = '\0';
    pthread_mutex_unlock(&g_child_lock);
}

/* The notes of the children this image started and reaped ("proc.child=", "proc.reaped="),
 * kept here and interned at close (note_processes). A fork child's recording begins with a
 * copy of its parent's names (rt_open): notes interned as they came would be copied into every
 * later child, and a shell's N children would write N^2 of them. Names reach the file only at
 * close anyway (a dead run's are lost, store/recover.c), so waiting loses nothing. The buffer
 * is the tracer's memory (the guard is held); a fork child starts with none. */
static pthread_mutex_t g_note_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_notes; /* NUL-terminated notes, one after the other (g_note_lock) */
static size_t g_notes_len, g_notes_cap;

static void notes_intern(tt_session *s);

/* Record: the notes kept (tt_rt_note), the counts into the manifest and the first line as a
 * META object, before close. */
void note_processes(tt_session *s)
{
    notes_intern(s);
    uint32_t n = atomic_load_explicit(&g_children, memory_order_relaxed);
    uint32_t u = atomic_load_explicit(&g_untraceable, memory_order_relaxed);
    if (!n && !u)
        return;
    char cmd[512], meta[600];
    first_child_cmd(cmd, sizeof cmd);
    snprintf(meta, sizeof meta, "untraced=%s", cmd);
    uint32_t id;
    tt_intern(s, TT_OBJ_META, meta, &id);
    tt_session_note_processes_(s, n, u);
}


void tt_rt_vfork_untraceable(const char *cmd)
{
    atomic_fetch_add_explicit(&g_untraceable, 1, memory_order_relaxed);
    first_child(cmd, false);
}

void tt_rt_exec_untraceable(const char *cmd)
{
    tt_rt_vfork_untraceable(cmd);
    /* the exec leaves nothing of this image: the file is finished now, under the guard the
     * caller holds (the close must not record its own calls) */
    int was = guard;
    guard = 0;
    rt_close(false, false);
    guard = was;
}

void fork_child(void)
{
    /* The child's copy of the session shares the parent's file descriptor and would write into
     * the parent's trace: drop it without closing anything. In the process tree the child
     * traces on its own (tt_rt_fork_child). */
    atomic_store_explicit(&tt_rt_live, NULL, memory_order_relaxed);
}

bool tt_rt_tree(void)
{
    return g_tree;
}

bool tt_rt_alone(void)
{
    return g_alone;
}

unsigned tt_rt_child_next(void)
{
    /* relaxed: the number orders nothing; two threads that fork at once get distinct ones */
    return atomic_fetch_add_explicit(&g_nchild, 1, memory_order_relaxed) + 1;
}

void tt_rt_fork_child(tt_session *parent, unsigned n)
{
    if (!g_tree || !parent)
        return;
    int was = guard;
    guard = 1;
    g_pid = getpid();
    /* the parent's trace file (and, replaying, its recording) are the parent's: this copy
     * would keep the parent's lock alive past its death */
    int keep[2] = { g_rt_fd, report_fd };
    tt_fd_drop_inherited(keep, 2);
    g_rt_slot = tt_fd_reserve(g_rt_fd, rt_fd_move, NULL);
    if (report_fd >= 0)
        report_slot = tt_fd_reserve(report_fd, report_fd_move, NULL);
    char path[sizeof g_path + 16];
    snprintf(path, sizeof path, "%s/%u", g_path, n);
    if (strlen(path) < sizeof g_path) /* else too deep to name: it shares its parent's name */
        memcpy(g_path, path, strlen(path) + 1);
    g_gen = 0;
    atomic_store_explicit(&g_nchild, 0, memory_order_relaxed);
    atomic_store(&g_closing, 0);
    atomic_store(&g_closed, 0);
    atomic_store_explicit(&g_children, 0, memory_order_relaxed);
    atomic_store_explicit(&g_untraceable, 0, memory_order_relaxed);
    pthread_mutex_init(&g_child_lock, NULL);
    pthread_mutex_init(&g_open_lock, NULL);
    /* the parent's notes are the parent's (its copy here is left: the tracer's memory) */
    pthread_mutex_init(&g_note_lock, NULL);
    g_notes = NULL;
    g_notes_len = g_notes_cap = 0;
    g_first_cmd[0] = '\0';
    g_first_is_fork = false;
    g_exit_status = -1;
    child_page_map();
#ifdef TT_RT_PRELOAD
    tt_pl_child_reset();
    tt_pl_pipes_forget();
#endif
    snprintf(thread_path, sizeof thread_path, "main");
    thread_children = 0;
    g_parent_session = parent;
    atomic_store_explicit(&g_pending, 1, memory_order_release);
    guard = was;
}

const char *tt_rt_setting(const char *name)
{
    return tt_setting_(name);
}

long tt_rt_wait_ms(void)
{
    tt_session *s = cur();
    return s ? (long)s->cfg.order_timeout_ms : 10000;
}

void tt_rt_note(const char *meta)
{
    tt_session *s = cur();
    if (!s || g_mode != TT_MODE_RECORD)
        return;
    size_t n = strlen(meta) + 1;
    pthread_mutex_lock(&g_note_lock);
    if (g_notes_cap - g_notes_len < n) {
        size_t cap = g_notes_cap ? g_notes_cap : 4096;
        while (cap - g_notes_len < n)
            cap *= 2;
        char *p = realloc(g_notes, cap);
        if (!p) {
            pthread_mutex_unlock(&g_note_lock);
            uint32_t id; /* no room to keep it: interned now, as it was before */
            tt_intern(s, TT_OBJ_META, meta, &id);
            return;
        }
        g_notes = p;
        g_notes_cap = cap;
    }
    memcpy(g_notes + g_notes_len, meta, n);
    g_notes_len += n;
    pthread_mutex_unlock(&g_note_lock);
}

/* The notes kept so far into @s's names, in the order they came. */
static void notes_intern(tt_session *s)
{
    uint32_t id;
    pthread_mutex_lock(&g_note_lock);
    for (size_t o = 0; o < g_notes_len; o += strlen(g_notes + o) + 1)
        tt_intern(s, TT_OBJ_META, g_notes + o, &id);
    g_notes_len = 0;
    pthread_mutex_unlock(&g_note_lock);
}

void tt_rt_note_child(unsigned n, long pid, const char *how)
{
    char meta[sizeof g_path + 640];
    snprintf(meta, sizeof meta, "proc.child=%s/%u pid=%ld %s", g_path, n, pid, how);
    tt_rt_note(meta);
}

void tt_rt_exit_status(int status)
{
    g_exit_status = status;
}

void tt_rt_exec_begin(void)
{
    if (!g_tree)
        return;
    /* the image ends here: its recording (or its replay's verdict) is finished, and the program
     * it becomes opens its own */
    int was = guard;
    guard = 0;
    rt_close(false, false);
    guard = was;
}

/* The longest command line recorded (Linux's own limit on arguments is a quarter of the stack
 * limit, 2 MiB by default), and the longest argument: a name holds at most 65535 bytes. */
#define CMDLINE_MAX (16u << 20)

/* The command line from /proc/self/cmdline, NUL-separated, into a block of *@n bytes (a NUL
 * after them); NULL when there is none, or it is longer than CMDLINE_MAX. */
static char *cmdline_read(size_t *n)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    /* most command lines are short: a small block first (a block of 64 KiB or more is a run of
     * its own in the region, mapped and given back with three system calls), doubled as needed */
    size_t cap = 4096;
    char *cmd = malloc(cap);
    *n = 0;
    for (ssize_t r = 1; cmd && r > 0;) {
        if (*n + 1 == cap) {
            char *more = cap < CMDLINE_MAX ? realloc(cmd, cap * 2) : NULL;
            if (!more) {
                free(cmd);
                cmd = NULL;
                break;
            }
            cmd = more;
            cap *= 2;
        }
        while ((r = read(fd, cmd + *n, cap - 1 - *n)) < 0 && errno == EINTR)
            ;
        if (r > 0)
            *n += (size_t)r;
    }
    close(fd);
    if (cmd)
        cmd[*n] = '\0';
    return cmd;
}

/* @cmd's @n NUL-separated arguments as an array (pointers into @cmd, NULL after the last), and
 * their count into *@argc; NULL when out of memory. */
static char **cmdline_split(char *cmd, size_t n, int *argc)
{
    *argc = 0;
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1)
        ++*argc;
    char **v = malloc(((size_t)*argc + 1) * sizeof *v);
    if (!v)
        return NULL;
    int k = 0;
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1)
        v[k++] = cmd + i;
    v[k] = NULL;
    return v;
}

void record_meta(tt_session *s, int argc, char *const *argv)
{
    uint32_t id;
    /* one block for the working directory, then for each argument: a short process's
     * constructor runs on few stack pages, and every page it touches is a fault */
    size_t cap = PATH_MAX + 32;
    char *buf = malloc(cap);
    if (!buf)
        return;
    memcpy(buf, "cwd=", 4);
    if (getcwd(buf + 4, cap - 4))
        tt_intern(s, TT_OBJ_META, buf, &id);
    /* the command line, whole or not at all: replay runs what is recorded here */
    char *cmd = NULL, **split = NULL;
    if (!argv) {
        size_t n = 0;
        cmd = cmdline_read(&n);
        if (!cmd || n == 0 || !(split = cmdline_split(cmd, n, &argc)))
            goto out;
        argv = split;
    }
    if (argc <= 0)
        goto out;
    size_t longest = 0, total = 0;
    for (int i = 0; i < argc; i++) {
        size_t len = argv[i] ? strlen(argv[i]) : 0;
        if (!argv[i] || len > ARG_META_MAX || len >= CMDLINE_MAX - total)
            goto out; /* too long for a name: record no command line */
        longest = len > longest ? len : longest;
        total += len + 1;
    }
    if (longest + 32 > cap) { /* "argv[N]=" and the argument */
        char *more = realloc(buf, longest + 32);
        if (!more)
            goto out;
        buf = more;
        cap = longest + 32;
    }
    for (int i = 0; i < argc; i++) {
        snprintf(buf, cap, "argv[%d]=%s", i, argv[i]);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
    snprintf(buf, cap, "argc=%d", argc);
    tt_intern(s, TT_OBJ_META, buf, &id);
out:
    free(buf);
    free(split);
    free(cmd);
}
