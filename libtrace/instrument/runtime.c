/* SPDX-License-Identifier: MIT */
/* The in-process runtime: one session per process, opened from the environment.
 *
 * Life: a constructor opens the session when TINYTRACE_MODE is set and records the command line
 * and working directory as META objects; a destructor flushes stdio (so the program's last
 * output is still seen) and closes it, and in replay writes the report. A fork child never
 * writes into its parent's file: its copy of the session is dropped, and under the tool it
 * opens a session of its own at its first call (the process tree, rt-procs.c).
 *
 * Crashes while recording: a fatal signal appends a crash event (signal number, backtrace) on
 * the crashing thread, closes the session — every thread's buffer is flushed, the tables and the
 * manifest are written, the file is renamed — and re-raises the signal with its default action,
 * so the program dies exactly as it would have. Closing from a signal handler takes locks that
 * the crashing thread might hold; a crash inside tinytrace itself is therefore not finalized
 * (the guard tells), and its partial file is left for `tinytrace recover`.
 *
 * The runtime is four files sharing rt-int.h: this one (life, threads, the program's world,
 * the session's opening), rt-procs.c (children and execs), rt-report.c (the report) and
 * rt-crash.c (fatal signals).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event-int.h"
#include "filter.h"
#include "rt-int.h"
#include "runtime.h"

tt_session *_Atomic tt_rt_live;
tt_mode g_mode;
pid_t g_pid;
bool opt_alloc, opt_check_output, opt_keep_going;
/* the report channel (protocol.h): a socket, and the nonce every report line carries */
_Atomic int report_fd = -1;
int report_slot = -1;
char report_nonce[TT_REPORT_NONCE_LEN + 1];
/* 0: open; 1: closing at exit (g_closed once done); 2: a crash is being finalized, by the
 * thread g_crash_tid, which ends the process */
_Atomic int g_closing, g_closed;
_Atomic long g_crash_tid;
int g_crash_sig;
/* replay --gdb: the stops are calls of tt_divergence_break; --stop-at without it: a SIGTRAP
 * of ours (g_trap set while it is raised) that the crash handler lets go */
bool opt_gdb;
_Atomic int g_trap;

/* ---- the process tree (docs/FORMAT.md §16) ----
 * Under `tinytrace record|replay` every process the program starts is traced too, each into a
 * file of its own. A process is named by its creation path: "root", then "root/1" for the
 * first child root started (fork, vfork, clone, posix_spawn, system, popen), "root/1/2" for
 * the second child of that one; each exec starts a new image of the same process, generation
 * 1, 2, ... The path travels to a fork child in memory and to an exec'd program in TT_ENV_RT
 * ("<fd>:<path>:<gen>:<children so far>:<anchor ns>:<anchor ticks>", the last two twenty digits
 * each: the clock calibration's anchor, base.h, zeros in replay, which calibrates nothing), whose
 * length is the same in record and replay. */
bool g_tree;                 /* following children: settings from the tool */
bool g_alone;                /* replay --process: this process runs alone, no children */
char g_path[200] = "root";   /* this process's creation path */
unsigned g_gen;              /* its exec generation */
_Atomic unsigned g_nchild;   /* children it started (the next one is + 1) */
_Atomic int g_pending;       /* a fork child: its session opens at its first call */
tt_session *g_parent_session; /* ... whose names the recording starts with */
pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;
int g_exit_status = -1;      /* as _exit was given it, -1: not known */
_Atomic uint32_t g_children, g_untraceable; /* not followed, and untraceable execs */

/* The settings descriptor (the program's world, below) */
_Atomic int g_rt_fd = -1;
int g_rt_slot = -1;

/* The fd registry's move: the settings descriptor stays inherited (tt_rt_exec_env). */
int rt_fd_move(void *ctx, int fd)
{
    (void)ctx;
    if (g_rt_fd != fd)
        return 0;
    int hi = tt_fd_relocate(g_rt_slot, fd);
    if (hi >= 0)
        fcntl(hi, F_SETFD, 0);
    g_rt_fd = hi;
    return hi < 0 ? errno : 0;
}

/* "<path>:<gen>:<children>[:<anchor ns>:<anchor ticks>]" from TT_ENV_RT; false when it does
 * not parse. */
static bool proc_identity_parse(const char *v)
{
    const char *c1 = strchr(v, ':');
    if (!c1 || (size_t)(c1 - v) >= sizeof g_path || strncmp(v, "root", 4) != 0)
        return false;
    char *end;
    unsigned long gen = strtoul(c1 + 1, &end, 10);
    if (*end != ':')
        return false;
    unsigned long n = strtoul(end + 1, &end, 10);
    unsigned long long a_ns = 0, a_ticks = 0;
    if (*end == ':') {
        a_ns = strtoull(end + 1, &end, 10);
        if (*end != ':')
            return false;
        a_ticks = strtoull(end + 1, &end, 10);
    }
    if (*end || gen > 1000000 || n > UINT32_MAX)
        return false;
    if (a_ns && a_ticks) /* the root's point: this process's rate is measured from it */
        tt_calib_anchor_set(a_ns, a_ticks);
    memcpy(g_path, v, (size_t)(c1 - v));
    g_path[c1 - v] = '\0';
    g_gen = (unsigned)gen;
    atomic_store_explicit(&g_nchild, (unsigned)n, memory_order_relaxed);
    return true;
}

/* This image's trace: the root's first image writes TINYTRACE_FILE itself, every other image
 * FILE.procs/<path, '/' as '.'>[@gen].tt ("root.2@1.tt"). */
static int proc_file(char *out, size_t cap)
{
    const char *file = tt_setting_("TINYTRACE_FILE");
    if (!file)
        return -1;
    if (!strcmp(g_path, "root") && g_gen == 0)
        return snprintf(out, cap, "%s", file) < (int)cap ? 0 : -1;
    char name[sizeof g_path + 16];
    size_t k = 0;
    for (const char *p = g_path; *p && k + 1 < sizeof name; p++)
        name[k++] = *p == '/' ? '.' : *p;
    name[k] = '\0';
    int n = g_gen ? snprintf(out, cap, "%s.procs/%s@%u.tt", file, name, g_gen)
                  : snprintf(out, cap, "%s.procs/%s.tt", file, name);
    return n > 0 && n < (int)cap ? 0 : -1;
}

/* "root/2@1": this image, as reports and notes name it. */
void proc_name(char *out, size_t cap)
{
    if (g_gen)
        snprintf(out, cap, "%s@%u", g_path, g_gen);
    else
        snprintf(out, cap, "%s", g_path);
}


/* The runtime's own address space (base/region.c): reserved, not committed. */
#define RT_REGION (UINT64_C(64) << 30)


/* The calling thread's kernel tid. The guard is held around the call so that the preload
 * library's syscall(), which replays SYS_gettid for the program, passes it through: the crash
 * and exit paths ask without holding the guard. */
long os_tid(void)
{
    int was = guard;
    guard = 1;
    long t = syscall(SYS_gettid);
    guard = was;
    return t;
}

/* The calling process's pid, past the interposed getpid and syscall (the guard is held). */
pid_t os_pid(void)
{
    int was = guard;
    guard = 1;
    pid_t p = (pid_t)syscall(SYS_getpid);
    guard = was;
    return p;
}

/* The session as it stands, never starting the runtime (for the runtime's own use). */

static tt_session *rt_open_pending(void);
static void rt_init_(void);
/* main's arguments while the preload library's constructor runs (rt_init); else NULL */
static int boot_argc;
static char **boot_argv;
#ifndef TT_RT_PRELOAD
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static _Atomic int rt_started;
#endif

tt_session *tt_rt_session(void)
{
#ifndef TT_RT_PRELOAD
    /* Linked into the program (libtinytrace.so): the runtime starts at the first hook call, so
     * a program that never runs instrumented code gets no session from it. */
    if (TT_UNLIKELY(!atomic_load_explicit(&rt_started, memory_order_acquire))) {
        pthread_once(&rt_once, rt_init_);
        atomic_store_explicit(&rt_started, 1, memory_order_release);
    }
#endif
    /* acquire: pairs with the release store in rt_init, so the session is fully built */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    /* relaxed: a stale 0 only leaves this call unrecorded in a child that is being born;
     * rt_open_pending looks again under its lock */
    if (TT_UNLIKELY(!s && atomic_load_explicit(&g_pending, memory_order_relaxed) && guard))
        s = rt_open_pending();
    return s;
}

/* Whether the program installed a signal handler (a fork child inherits its parent's). */
static _Atomic bool g_handlers;

void tt_rt_handler_installed(void)
{
    atomic_store_explicit(&g_handlers, true, memory_order_relaxed);
    tt_session *s = cur();
    if (s)
        tt_session_swapper_(s, true);
}

bool tt_rt_record_allocs(void)
{
    return opt_alloc;
}

bool tt_rt_check_output(void)
{
    return opt_check_output;
}

bool tt_rt_real_sleep(void)
{
    tt_session *s = cur();
    return s && s->cfg.real_sleep != 0;
}

/* Ends the process at once, past the interposed _exit below. */
_Noreturn void exit_now(int status)
{
    for (;;)
        syscall(SYS_exit_group, status);
}

bool env_flag(const char *name)
{
    const char *v = tt_setting_(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* ---------------------------------------------------------------- threads
 *
 * Replay must pair each live thread with the recorded thread that did the same work. The order
 * in which threads reach their first event is a race; the order in which one thread creates
 * others is program order. So every thread is named by its creation path — "main", "main/1"
 * for the first thread main created, "main/1/2" for the second thread that one created — and
 * replay binds threads by those names. */

__thread char thread_path[96];
__thread unsigned thread_children;

static void name_thread(const char *path)
{
    snprintf(thread_path, sizeof thread_path, "%s", path);
    thread_children = 0;
    tt_session *s = cur();
    if (s) {
        int rc = tt_thread_name(s, path);
        if (rc != TT_OK)
            tt_rt_failed(rc, "thread start");
    }
}

#ifdef TT_RT_PRELOAD
#define ALTSTACK_BYTES (64 * 1024)
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;

static void altstack_free(void *p)
{
    stack_t ss = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    munmap(p, ALTSTACK_BYTES);
}

static void altstack_key_make(void)
{
    pthread_key_create(&altstack_key, altstack_free);
}

/* Each thread its own alternate stack, so a stack overflow on it reaches the crash handler. */
static void altstack_thread(void)
{
    pthread_once(&altstack_once, altstack_key_make);
    void *st = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    if (st == MAP_FAILED)
        return;
    stack_t ss = { .ss_sp = st, .ss_size = ALTSTACK_BYTES };
    if (sigaltstack(&ss, NULL) != 0 || pthread_setspecific(altstack_key, st) != 0)
        munmap(st, ALTSTACK_BYTES);
}

void tt_rt_thread_child_path(char *out, size_t cap)
{
    snprintf(out, cap, "%.80s/%u", thread_path[0] ? thread_path : "main", ++thread_children);
}

void tt_rt_thread_begin(const char *path)
{
    altstack_thread();
    name_thread(path);
}

#endif /* TT_RT_PRELOAD */

/* ---------------------------------------------------------------- thread exit */

/* A recording thread holds a buffer of the budget until it hands it over. One that exits ends
 * its recording here (THREAD_END, its last buffer to the swapper), so the buffer serves later
 * threads at once; without this a program that runs more threads than the budget has buffers
 * leaves the later ones to take the buffers of idle threads, one at a time (tt_writer_refill). */
static pthread_key_t exit_key;
static bool exit_key_ok;

static void thread_exit(void *p)
{
    tt_session *s = cur();
    if (!s || s != p || !tt_rt_guard_enter())
        return;
    tt_session_thread_end(s); /* TT_E_CLOSED once close began: nothing left to hand over */
    tt_rt_guard_leave();
}

/* A thread registered in the session (the guard is held): end it when it exits. */
static void on_thread(tt_session *s)
{
    if (exit_key_ok)
        pthread_setspecific(exit_key, s);
}

/* ---------------------------------------------------------------- life */

/* ---------------------------------------------------------------- the program's world
 *
 * `tinytrace record|replay` hands the runtime its settings through a descriptor, not the
 * environment: TT_ENV_RT, one variable of fixed length (the descriptor's number in ten digits,
 * the identity and the clock point: protocol.h), the last of the environment, removed before
 * main. So the program sees the same environment,
 * argv and auxv in both modes, and with ASLR off (the tool's default) its stack, heap and
 * mappings are at the same addresses. The descriptor stays open, out of the way and inherited,
 * so that an exec in the traced process (a shell running its last command, a wrapper script)
 * hands the settings on. */

/* Reads the settings of TT_ENV_RT; false when there is none (then the environment is read, as
 * a program run with TINYTRACE_MODE set by hand has it). */
static bool rt_settings_load(void)
{
    const char *v = secure_getenv(TT_ENV_RT);
    if (!v)
        return false;
    char *end;
    long fd = strtol(v, &end, 10);
    if ((*end && *end != ':') || fd < 0 || fd > INT32_MAX)
        return false;
    if (*end == ':' && !proc_identity_parse(end + 1))
        return false;
    if (tt_settings_read_((int)fd) != TT_OK)
        return false;
    /* out of the program's way, so that its own descriptors are numbered as in the other mode;
     * still inherited, for an exec of this process (tt_rt_exec_env). A descendant finds it
     * there already. */
    int hi = fd >= RT_FD_LOW ? -1 : fcntl((int)fd, F_DUPFD, RT_FD_LOW);
    if (hi >= 0) {
        close((int)fd);
        fd = hi;
    }
    g_rt_fd = (int)fd;
    g_rt_slot = tt_fd_reserve((int)fd, rt_fd_move, NULL);
    unsetenv(TT_ENV_RT);
    return true;
}

/* The environment for an exec of the traced process: @envp with TT_ENV_RT again at its end, so
 * that the program the process becomes is traced too; @envp itself when there is no descriptor.
 * The array is malloc'd and never freed (the process is about to become another). */
/* @envp with TT_ENV_RT=@value last (any other TT_ENV_RT dropped), malloc'd; @envp itself
 * when memory is short. */
static char *const *env_with_rt(char *const envp[], const char *value)
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **e = malloc((n + 2) * sizeof *e);
    char *var = malloc(strlen(value) + sizeof TT_ENV_RT + 1);
    if (!e || !var) {
        free(e);
        free(var);
        return envp;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], TT_ENV_RT "=", sizeof TT_ENV_RT) != 0)
            e[k++] = envp[i];
    sprintf(var, TT_ENV_RT "=%s", value);
    e[k++] = var;
    e[k] = NULL;
    return e;
}

/* ":<ns>:<ticks>" of the calibration's anchor, fixed width (zeros when there is none) */
static void anchor_text(char *out, size_t cap)
{
    uint64_t ns, ticks;
    tt_calib_anchor_get(&ns, &ticks);
    snprintf(out, cap, ":%020" PRIu64 ":%020" PRIu64, ns, ticks);
}

char *const *tt_rt_exec_env(char *const envp[])
{
    if (g_rt_fd < 0 || (!g_tree && !tt_rt_is_traced_process()))
        return envp;
    char value[sizeof g_path + 112], anchor[48];
    anchor_text(anchor, sizeof anchor);
    if (g_tree)
        snprintf(value, sizeof value, "%010d:%s:%u:%u%s", g_rt_fd, g_path, g_gen + 1,
                 atomic_load_explicit(&g_nchild, memory_order_relaxed), anchor);
    else
        snprintf(value, sizeof value, "%010d", g_rt_fd);
    return env_with_rt(envp, value);
}

size_t tt_rt_inherited_fds(int out[2])
{
    size_t n = 0;
    int a = atomic_load_explicit(&g_rt_fd, memory_order_relaxed);
    int b = atomic_load_explicit(&report_fd, memory_order_relaxed);
    if (a >= 0)
        out[n++] = a;
    if (b >= 0 && b != a)
        out[n++] = b;
    if (n == 2 && out[1] < out[0]) {
        int t = out[0];
        out[0] = out[1];
        out[1] = t;
    }
    return n;
}

int tt_rt_spawn_rt_value(unsigned n, char *out, size_t cap, int *fd)
{
    if (g_rt_fd < 0 || !g_tree)
        return -1;
    *fd = g_rt_fd;
    char anchor[48];
    anchor_text(anchor, sizeof anchor);
    int k = snprintf(out, cap, "%010d:%s/%u:0:0%s", g_rt_fd, g_path, n, anchor);
    return k < 0 || (size_t)k >= cap ? -1 : 0;
}

char *const *tt_rt_spawn_env(char *const envp[], unsigned n)
{
    char value[sizeof g_path + 112];
    int fd;
    if (tt_rt_spawn_rt_value(n, value, sizeof value, &fd) != 0)
        return envp;
    return env_with_rt(envp, value);
}

/* Interns the @kind object named @a then @b (@alen and @blen bytes), its id into *@id;
 * tt_intern's code. The name is built on the stack when it fits in NAME_ON_STACK bytes, else in
 * a block of its own: a 64 KiB buffer on the stack put every call under it 64 KiB deeper, on
 * pages of their own (some of a short traced process's page faults; docs/PERFORMANCE.md, issue
 * 17). */
#define NAME_ON_STACK 512
static int intern_joined(tt_session *s, tt_object_kind kind, const char *a, size_t alen,
                         const char *b, size_t blen, uint32_t *id)
{
    char small[NAME_ON_STACK], *buf = small;
    if (alen + blen + 1 > sizeof small && !(buf = malloc(alen + blen + 1)))
        return TT_E_NOMEM;
    memcpy(buf, a, alen);
    memcpy(buf + alen, b, blen);
    buf[alen + blen] = '\0';
    int rc = tt_intern(s, kind, buf, id);
    if (buf != small)
        free(buf);
    return rc;
}

/* Record: what the program sees of its world besides its arguments, as META objects: its
 * environment (in order), the execve path and the 16 random bytes of the auxiliary vector. */
static void record_world(tt_session *s)
{
    extern char **environ;
    char buf[64];
    uint32_t id, n = 0;
    for (char **e = environ; e && *e; e++) {
        if (strlen(*e) > ARG_META_MAX)
            continue;
        snprintf(buf, sizeof buf, "env[%u]=", n++);
        intern_joined(s, TT_OBJ_META, buf, strlen(buf), *e, strlen(*e), &id);
    }
    snprintf(buf, sizeof buf, "envc=%u", n);
    tt_intern(s, TT_OBJ_META, buf, &id);
    const char *fn = (const char *)getauxval(AT_EXECFN);
    if (fn && strlen(fn) < 4096)
        intern_joined(s, TT_OBJ_META, "execfn=", 7, fn, strlen(fn), &id);
    const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
    if (r) {
        static const char hex[] = "0123456789abcdef";
        char h[33];
        for (int i = 0; i < 16; i++) {
            h[2 * i] = hex[r[i] >> 4];
            h[2 * i + 1] = hex[r[i] & 15];
        }
        h[32] = '\0';
        snprintf(buf, sizeof buf, "auxv.random=%s", h);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
}

/* Replay: the recorded AT_RANDOM bytes where the program will read them. glibc took its stack
 * guard and pointer guard from the live ones before this ran; what the program reads is the
 * recording's. */
static void replay_world(tt_session *s)
{
    unsigned char *r = (unsigned char *)getauxval(AT_RANDOM);
    char name[64];
    const char prefix[] = "auxv.random=";
    for (uint32_t id = 1; r; id++) {
        int len = tt_names_copy(s, id, name, sizeof name);
        if (len < 0)
            break;
        if (len != (int)sizeof prefix - 1 + 32 || strncmp(name, prefix, sizeof prefix - 1) != 0)
            continue;
        for (int i = 0; i < 16; i++) {
            unsigned hi, lo;
            char c1 = name[sizeof prefix - 1 + 2 * i], c2 = name[sizeof prefix + 2 * i];
            hi = c1 <= '9' ? (unsigned)(c1 - '0') : (unsigned)(c1 - 'a' + 10);
            lo = c2 <= '9' ? (unsigned)(c2 - '0') : (unsigned)(c2 - 'a' + 10);
            r[i] = (unsigned char)(hi << 4 | lo);
        }
        break;
    }
}

/* ---------------------------------------------------------------- --stop-at
 * The replay reached the recorded event `replay --stop-at` named (TT_ENV_STOP_AT): the call
 * that matched it has not returned. Under gdb, tt_divergence_break is where its breakpoint is;
 * otherwise a SIGTRAP tells whatever debugger is attached, and without one the crash handler
 * lets it go and the replay goes on. */
static void rt_stop(tt_session *s, const tt_event *ev)
{
    char fn[256], site[256], text[768];
    if (!ev->sp.function || tt_names_copy(s, ev->sp.function, fn, sizeof fn) < 0)
        snprintf(fn, sizeof fn, "%u", ev->sp.function);
    if (!ev->sp.site || tt_names_copy(s, ev->sp.site, site, sizeof site) < 0)
        snprintf(site, sizeof site, "%u", ev->sp.site);
    snprintf(text, sizeof text, "tinytrace: stopped at thread %u seq %" PRIu64 " (replay "
             "--stop-at): %s function=%s site=%s, before the call returns\n", ev->tp.thread,
             ev->tp.seq, tt_event_kind_name(ev->kind), fn, site);
    fputs(text, stderr);
    fflush(stderr);
    if (opt_gdb) {
        tt_divergence_break(text);
        return;
    }
    atomic_store(&g_trap, 1);
    raise(SIGTRAP);
    atomic_store(&g_trap, 0);
}

#ifdef TT_RT_PRELOAD
void tt_rt_deliver_next(void)
{
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    if (s && g_mode == TT_MODE_REPLAY)
        tt_replay_deliver_left_(s, true);
}

bool tt_rt_thread_known(void)
{
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    return s && tt_thread_cached_(s, s->uid) != NULL;
}

bool tt_rt_deliver_waiting(void)
{
    tt_session *s = cur();
    return s && g_mode == TT_MODE_REPLAY && tt_replay_deliver_left_(s, false) > 0;
}

/* Replay: how deep the thread is in recorded deliveries' handlers. A delivery recorded at a
 * call's return that a handler's call meets is made by the loop that made the handler's
 * (tt_replay_deliver_left_, tt_rp_peek_), once the handler returned, as it was recorded. */
static __thread unsigned delivering;

/* The replayer met a recorded signal delivery: the program's handler runs (preload/signal.c) */
static void rt_deliver(tt_session *s, const tt_event *ev)
{
    (void)s;
    delivering++;
    tt_pl_signal_deliver_(ev->payload, ev->payload_len);
    delivering--;
}

/* Replay: the thread's next recorded event is a delivery made at the return of the call just
 * met; the guard's release makes it (tt_rt_held_run_). */
static void rt_held(tt_session *s)
{
    (void)s;
    tt_rt_held = 1;
}
#endif

__thread int tt_rt_held;
__thread uint32_t tt_rt_io_count;
__thread uint32_t tt_rt_span_base;

int tt_rt_guard_leave_live(void)
{
    int held = 0;
    if (g_mode == TT_MODE_REPLAY) { /* a recording's held signals are given back here */
        held = tt_rt_held;
        tt_rt_held = 0;
    }
    tt_rt_guard_leave();
    return held;
}

void tt_rt_guard_enter_live(int held)
{
    (void)tt_rt_guard_enter();
    if (held)
        tt_rt_held = 1;
}

void tt_rt_held_run_(bool at_return)
{
    tt_rt_held = 0;
    atomic_signal_fence(memory_order_seq_cst);
#ifdef TT_RT_PRELOAD
    if (g_mode != TT_MODE_REPLAY) {
        tt_pl_signal_release_(at_return);
        return;
    }
    /* the lookup without a lock: this may be a handler's release (the thread is known, it
     * just met an event) */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    if (s && !delivering && tt_rt_guard_enter()) {
        tt_replay_deliver_left_(s, true);
        atomic_signal_fence(memory_order_seq_cst);
        tt_in_tracer = 0;
    }
#else
    (void)at_return;
#endif
}

static void stop_at_setup(tt_session *s)
{
    const char *v = tt_setting_(TT_ENV_STOP_AT);
    unsigned long long th, seq;
    char tail;
    if (!v)
        return;
    if (sscanf(v, "%llu:%llu%c", &th, &seq, &tail) != 2 || th > UINT32_MAX) {
        fprintf(stderr, "tinytrace: %s=%s is not THREAD:SEQ; not stopping\n", TT_ENV_STOP_AT, v);
        return;
    }
    tt_replay_stop_at_(s, (uint32_t)th, seq, rt_stop);
}

/* Opens this image's session from the settings (@cfg_file: the file, NULL for
 * TINYTRACE_FILE as it is); @copy: a fork child's recording, which begins with the names its
 * parent had interned (so every id the image holds, cached by the families and the hooks,
 * stays valid). Returns the tt_error code; *@sp the session. The guard is held. */
static int rt_open(const char *cfg_file, tt_session *copy, tt_config *base,
                   tt_session **sp, tt_error_info *err)
{
    /* @base: the settings as the constructor read them, not read again, and completed here in
     * place (no second 4.7 KiB copy on the stack: two more pages a process touched); NULL:
     * read them now (a fork child's first call, after the program may have set TINYTRACE_*
     * itself) */
    tt_config own;
    tt_config *cfg = base ? base : &own;
    int rc = TT_OK;
    if (!base) {
        tt_config_init(cfg);
        rc = tt_config_from_env(cfg, err);
    }
    if (rc == TT_OK && env_flag(TT_ENV_KEEP_GOING))
        rc = tt_config_set(cfg, TT_PARAM_DIVERGENCE, TT_DIVERGE_COUNT, err);
    if (rc == TT_OK && cfg_file)
        rc = tt_config_set_str(cfg, TT_PARAM_FILE, cfg_file, err);
#ifdef TT_RT_PRELOAD
    /* Most of a tree's processes end before they fill a buffer: the swapper starts at the
     * first buffer a thread hands over, unless the program has a signal handler, inside
     * which one could fill, and where no thread may be started (tt_rt_handler_installed) */
    if (!atomic_load_explicit(&g_handlers, memory_order_relaxed))
        ((struct tt_config_impl *)(void *)cfg)->lazy_swapper = 1;
#endif
    if (rc == TT_OK)
        rc = tt_session_open(cfg, sp, err);
    if (rc == TT_OK && copy && tt_session_mode(*sp) == TT_MODE_RECORD) {
        /* one thread, and the parent's table as the fork left it (its lock is not taken: the
         * thread that held it, if any, is not in this process) */
        uint32_t id;
        for (uint32_t i = 1; i <= copy->names.count; i++) {
            uint8_t kind;
            const char *nm;
            uint32_t len;
            if (tt_names_get(&copy->names, i, &kind, &nm, &len) != TT_OK ||
                len >= ARG_META_MAX + 32 ||
                intern_joined(*sp, (tt_object_kind)kind, nm, len, "", 0, &id) != TT_OK || id != i)
                break;
        }
    }
    return rc;
}

/* Record: who this process is, as META objects (docs/FORMAT.md §16); the last of each wins (a
 * fork child's table begins with its parent's). */
static void record_identity(tt_session *s)
{
    char buf[sizeof g_path + 64];
    uint32_t id;
    int was = guard;
    guard = 1;
    long pid = (long)getpid(), ppid = (long)getppid();
    guard = was;
    snprintf(buf, sizeof buf, "proc.path=%s", g_path);
    tt_intern(s, TT_OBJ_META, buf, &id);
    snprintf(buf, sizeof buf, "proc.gen=%u", g_gen);
    tt_intern(s, TT_OBJ_META, buf, &id);
    snprintf(buf, sizeof buf, "proc.pid=%ld", pid);
    tt_intern(s, TT_OBJ_META, buf, &id);
    snprintf(buf, sizeof buf, "proc.ppid=%ld", ppid);
    tt_intern(s, TT_OBJ_META, buf, &id);
}

/* After a session opened: what every mode and image sets up. */
static void rt_publish(tt_session *s, bool first)
{
    g_mode = tt_session_mode(s);
    if (g_mode == TT_MODE_REPLAY && !opt_check_output) {
        /* `replay --no-check-output`: the recorded output is stepped over, not compared */
        tt_replay_skip_out_channel_(s, TT_CH_STDOUT);
        tt_replay_skip_out_channel_(s, TT_CH_STDERR);
    }
    if (g_mode == TT_MODE_REPLAY) {
        tt_replay_stop_at_exit_(s);
#ifdef TT_RT_PRELOAD
        tt_replay_signals_(s, TT_RT_SIGNAL_SITE, TT_RT_SIGNAL_RETURN_SITE, rt_deliver, rt_held);
#endif
    }
#ifdef TT_RT_PRELOAD
    if (g_mode == TT_MODE_RECORD && !first)
        tt_pl_signal_sites_(s); /* a fork child forgot its parent's, and may get a delivery */
#endif
    if (g_mode == TT_MODE_RECORD && first) {
        record_meta(s, boot_argc, boot_argv);
        record_world(s);
    } else if (first) {
        replay_world(s);
    }
    if (g_mode == TT_MODE_RECORD && g_tree)
        record_identity(s);
    if (first)
        tt_filter_start(s); /* a fork child has its parent's filter */
    tt_hooks_attach(s);
    if (g_mode == TT_MODE_RECORD && exit_key_ok)
        tt_session_set_thread_hook_(s, on_thread);
    atomic_store_explicit(&tt_rt_live, s, memory_order_release);
    name_thread("main");
}

/* A fork child's session, at its first call (or at its end): the guard is held. */
static tt_session *rt_open_pending(void)
{
    pthread_mutex_lock(&g_open_lock);
    tt_session *s = cur();
    if (!s && atomic_load_explicit(&g_pending, memory_order_acquire)) {
        char file[4200];
        tt_error_info err;
        int rc = proc_file(file, sizeof file) == 0
                     ? rt_open(file, g_parent_session, NULL, &s, &err)
                     : tt_fail(&err, TT_E_CONFIG, 0, UINT64_MAX, "no TINYTRACE_FILE");
        /* release: pairs with the acquire above, on another thread that saw it pending */
        atomic_store_explicit(&g_pending, 0, memory_order_release);
        if (rc == TT_OK) {
            rt_publish(s, false);
        } else {
            char name[sizeof g_path + 16];
            proc_name(name, sizeof name);
            fprintf(stderr, "tinytrace: process %s: %s\n", name, err.message);
            if (g_mode == TT_MODE_REPLAY) {
                write_report(NULL, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED, err.message, NULL,
                             NULL, 1);
                fflush(stderr);
                exit_now(TT_RT_EXIT_DIVERGED);
            }
            s = NULL;
        }
    }
    pthread_mutex_unlock(&g_open_lock);
    return s;
}

/* Removes the unfinished file of this process's image before an exec (pid @me); true when it
 * was there. Apart from rt_init: its path buffer would deepen the constructor's frame, under
 * which every call of the session's open runs. */
static __attribute__((noinline)) bool drop_unfinished(const char *me)
{
    char partial[4200];
    snprintf(partial, sizeof partial, "%s.%s.partial", tt_setting_("TINYTRACE_FILE"), me);
    return unlink(partial) == 0;
}

#ifdef TT_RT_PRELOAD
/* Whether @argv is still the command line the kernel laid out, the bytes /proc/self/cmdline
 * returns: its strings one right after the other and the environment's first right after the
 * last (execve's layout), and the program started by the kernel itself (AT_BASE is 0 when the
 * loader was run as the program: argv no longer holds the loader's own arguments). An earlier
 * constructor (a library of the program's, a later preload) that took arguments out, moved or
 * lengthened one fails this, and the file is read instead. */
static bool argv_as_exec(int argc, char **argv, char **envp)
{
#ifdef __GLIBC__
    if (argc <= 0 || !argv || argv[argc] || !envp || !envp[0] || getauxval(AT_BASE) == 0)
        return false;
    for (int i = 0; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : envp[0];
        if (!argv[i] || !next || argv[i] + strlen(argv[i]) + 1 != next)
            return false;
    }
    return true;
#else
    (void)argc, (void)argv, (void)envp; /* constructors get no arguments elsewhere */
    return false;
#endif
}

/* glibc calls a library's constructors with (argc, argv, envp): the command line before main
 * can permute argv (getopt) or rewrite it. Read from here while the constructor runs, when it
 * is still the kernel's, it spares the session's open a read of /proc/self/cmdline. */
__attribute__((constructor(102)))
static void rt_init(int argc, char **argv, char **envp)
{
    if (argv_as_exec(argc, argv, envp)) {
        boot_argc = argc;
        boot_argv = argv;
    }
    rt_init_();
    boot_argv = NULL;
}
#endif

static void rt_init_(void)
{
    /* valgrind's launcher is not the program: it execs its tool (a static binary), which loads
     * the program with this library again. Left alone, its settings and environment untouched,
     * the program valgrind runs is the one traced (`tinytrace record -- valgrind PROG` records
     * PROG, and so does the valgrind step of tests/all.sh). */
    if (strcmp(program_invocation_short_name, "valgrind.bin") == 0)
        return;
    /* setuid and setgid programs read no TINYTRACE_* (config.c): said once, here */
    if (tt_env_secure_() && tt_env_has_settings_()) {
        static const char msg[] = "tinytrace: TINYTRACE_* ignored in a setuid or setgid "
                                  "process\n";
        (void)!write(2, msg, sizeof msg - 1);
        return;
    }
    bool from_tool = rt_settings_load();
    const char *mode = tt_setting_("TINYTRACE_MODE");
    if (!mode || !*mode || !strcmp(mode, "off"))
        return;
    /* before anything of ours is allocated or mapped, in record and replay alike: the same
     * reservation, so the program's heap and mappings are at the same addresses in both */
    tt_region_init(RT_REGION);
    /* Only the process that was started for tracing traces: a program it execs inherits the
     * environment, and would otherwise finish its own file under the same final name. Under
     * the tool every process of the tree traces, each into its own file. */
    char me[32];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    const char *owner = from_tool ? NULL : secure_getenv(TT_ENV_PID);
    if (owner && strcmp(owner, me) != 0)
        return;
    g_tree = from_tool && env_flag(TT_ENV_TREE);
    const char *alone = g_tree ? tt_setting_(TT_ENV_PROCESS) : NULL;
    if (alone && *alone) {
        /* replay --process: this image is the one named, and runs alone */
        char want[sizeof g_path + 16];
        snprintf(want, sizeof want, "%s", alone);
        char *at = strchr(want, '@');
        if (at) {
            *at = '\0';
            g_gen = (unsigned)strtoul(at + 1, NULL, 10);
        }
        snprintf(g_path, sizeof g_path, "%.*s", (int)sizeof g_path - 1, want);
        g_alone = true;
    }
    guard = 1;
    tt_error_info err;
    tt_session *s;
    char file[4200];
    tt_config probe;
    tt_config_init(&probe);
    /* read once: rt_open starts from it, unless it was refused (then rt_open reads the
     * settings again, to say why) */
    tt_config *base = tt_config_from_env(&probe, NULL) == TT_OK ? &probe : NULL;
    int rc = g_tree && proc_file(file, sizeof file) != 0
                 ? tt_fail(&err, TT_E_CONFIG, 0, UINT64_MAX, "no TINYTRACE_FILE")
                 : rt_open(g_tree ? file : NULL, NULL, base, &s, &err);
    if (rc == TT_E_IO && err.sys_errno == EEXIST && (owner || from_tool) && !g_tree &&
        tt_session_mode_of_(&probe) == TT_MODE_RECORD) {
        /* This process was traced before an exec (a shell running its last command, a wrapper
         * script): the earlier image's file is ours and unfinished. The recording is of the
         * program the process became, so drop it and start again. */
        if (drop_unfinished(me))
            rc = rt_open(NULL, NULL, base, &s, &err);
    }
    if (rc != TT_OK && tt_session_mode_of_(&probe) == TT_MODE_REPLAY) {
        g_mode = TT_MODE_REPLAY;
        report_channel_open();
        if (g_tree && !g_alone && access(file, F_OK) != 0) {
            /* a program the recording did not exec: a divergence of the tree, said by this
             * process; it runs live, as whatever made it expects */
            char name[sizeof g_path + 16], msg[sizeof name + 96];
            proc_name(name, sizeof name);
            snprintf(msg, sizeof msg, "process %s is not in the recording (it runs live)", name);
            fprintf(stderr, "tinytrace: %s\n", msg);
            write_report(NULL, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED, msg, NULL, NULL, 1);
            guard = 0;
            return;
        }
    }
    if (rc == TT_E_CONFIG || (rc != TT_OK && report_fd >= 0)) {
        /* a bad setting, or a replay that cannot start, is refused before the program runs */
        fprintf(stderr, "tinytrace: %s\n", err.message);
        write_report(NULL, TT_REPORT_STATUS_ERROR, rc, err.message, NULL, NULL, 0);
        fflush(stderr);
        exit_now(2);
    }
    if (rc != TT_OK) {
        /* tracing must not break the program: say why and run it untraced */
        fprintf(stderr, "tinytrace: not tracing this process: %s\n", err.message);
        guard = 0;
        return;
    }
    g_pid = getpid();
    opt_alloc = env_flag(TT_ENV_ALLOC);
    opt_check_output = env_flag(TT_ENV_CHECK_OUTPUT);
    opt_keep_going = env_flag(TT_ENV_KEEP_GOING);
    if (tt_session_mode(s) == TT_MODE_REPLAY) {
        report_channel_open();
        opt_gdb = env_flag(TT_ENV_GDB);
        stop_at_setup(s);
    }
    /* after every getenv: a program with its own environment code (bash) may not find
     * variables set before it has loaded the environment. Settings from the tool need no mark
     * (no child inherits them), and the environment stays as the program would have it. */
    if (!from_tool)
        setenv(TT_ENV_PID, me, 1);
    child_page_map();
    install_crash_handlers();
    pthread_atfork(NULL, NULL, fork_child);
    if (tt_session_mode(s) == TT_MODE_RECORD && pthread_key_create(&exit_key, thread_exit) == 0)
        exit_key_ok = true;
    rt_publish(s, true);
    guard = 0;
}

/* The verdict at the end of a replay. A recording with output left over that the program never
 * wrote is a divergence of its output, not an early end: the program ran to its end and said
 * less (or else) than it did when recorded. */
static void close_report(tt_session *s, int rc, const tt_error_info *err,
                         const tt_divergence *last, uint64_t divergences)
{
    tt_divergence left;
    memset(&left, 0, sizeof left);
    if (rc == TT_E_UNCONSUMED && divergences == 0 && tt_replay_first_left_(s, &left.expected) == TT_OK &&
        output_event(&left.expected)) {
        left.has_expected = 1;
        left.tp = left.expected.ev.tp;
        left.actual.ev.kind = TT_EV_SESSION_END;
        output_reason(&left);
        snprintf(left.message, sizeof left.message, "the program's output ended before the "
                 "recorded one: %.*s", 180, err->message);
        char e[TT_REPORT_PREVIEW * 4 + 16];
        quote_line(e, sizeof e, &left.expected);
        fprintf(stderr, "tinytrace: the program's output differs on %s: it ended where the "
                "recording goes on with %s\n",
                left.expected.ev.arg == TT_CH_STDOUT ? "stdout" : "stderr", e);
        write_report(s, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED, left.message, &left, NULL, 1);
        return;
    }
    if (rc == TT_OK && divergences == 0)
        write_report(s, TT_REPORT_STATUS_MATCHED, rc, "replay matched the recording", NULL, NULL, 0);
    else if (rc == TT_OK)
        write_report(s, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED,
                     "divergences were counted; the last one is shown", last, NULL, divergences);
    else if (rc == TT_E_UNCONSUMED)
        write_report(s, TT_REPORT_STATUS_UNCONSUMED, rc, err->message, last, NULL, divergences);
    else
        write_report(s, TT_REPORT_STATUS_ERROR, rc, err->message, last, NULL, divergences);
}

__attribute__((destructor(101))) static void rt_fini(void)
{
#ifdef TT_RT_PRELOAD
    rt_close(true, true); /* the preload library is never unloaded (-z nodelete): an exit */
#else
    rt_close(true, false); /* libtinytrace may be unloaded by dlclose, the program going on */
#endif
}

void rt_close(bool flush_stdio, bool exiting)
{
    /* A crash on another thread may be finalizing the session: it has taken it out of
     * tt_rt_live already, so that is looked at first. This thread waits for that crash to end
     * the process; were it to go on and exit, the process would end with status 0 and the
     * recording half written. */
    if (atomic_load(&g_closing) == 2 && atomic_load(&g_crash_tid) != os_tid())
        wait_forever();
    tt_session *s = cur();
    if (!s && !guard && atomic_load_explicit(&g_pending, memory_order_acquire) &&
        os_pid() == g_pid) {
        /* A fork child that made no call: in the recording it left no file, unless it noted
         * an untraceable exec; a replay checks that its recording holds nothing more. */
        char file[4200];
        if (g_mode == TT_MODE_REPLAY && (proc_file(file, sizeof file) != 0 ||
                                         access(file, F_OK) != 0)) {
            atomic_store(&g_pending, 0);
            write_report(NULL, TT_REPORT_STATUS_MATCHED, TT_OK, "replay matched the recording "
                         "(the process made no call)", NULL, NULL, 0);
            return;
        }
        if (g_mode == TT_MODE_REPLAY ||
            atomic_load_explicit(&g_untraceable, memory_order_relaxed)) {
            guard = 1;
            s = rt_open_pending();
            guard = 0;
        }
    }
    if (!s)
        return;
    /* the real pid: with the guard held, getpid is not recorded or replayed */
    int was = guard;
    guard = 1;
    pid_t me = getpid();
    guard = was;
    int zero = 0;
    if (me != g_pid)
        return;
    if (!atomic_compare_exchange_strong(&g_closing, &zero, 1)) {
        if (zero == 2 && atomic_load(&g_crash_tid) != os_tid())
            wait_forever(); /* another thread's crash is being finalized; it ends the process */
        return;
    }
    /* the program's buffered output is still part of the run (not after _exit, which
     * discards it) */
    if (flush_stdio)
        fflush(NULL);
    guard = 1;
    /* a signal the recording delivered after this thread's last call: its handler runs now */
    if (g_mode == TT_MODE_REPLAY)
        tt_replay_deliver_left_(s, false);
    /* in the recording, every thread's events came before the close: let the others make
     * theirs before they stop being replayed */
    if (g_mode == TT_MODE_REPLAY)
        tt_replay_drain_(s);
#ifdef TT_RT_PRELOAD
    /* the bytes this process's replayed reads owe their pipes: its writers wait for them */
    if (g_mode == TT_MODE_REPLAY)
        tt_pl_pipes_settle(-1);
#endif
    atomic_store_explicit(&tt_rt_live, NULL, memory_order_release);
    tt_error_info err;
    tt_replay_progress p = { 0 };
    tt_divergence d;
    const tt_divergence *last = NULL;
    if (g_mode == TT_MODE_REPLAY) {
        tt_replay_progress_get(s, &p);
        /* --keep-going: the report shows the last divergence counted */
        if (p.divergences && tt_replay_divergence(s, &d) == TT_OK) {
            output_reason(&d);
            last = &d;
        }
    }
    if (g_mode == TT_MODE_RECORD)
        note_processes(s);
    if (g_mode == TT_MODE_RECORD && g_tree && g_exit_status >= 0) {
        char meta[32];
        uint32_t id;
        snprintf(meta, sizeof meta, "proc.exit=%d", g_exit_status);
        tt_intern(s, TT_OBJ_META, meta, &id);
    }
    /* finish first, close (free) after the report: its events name the session's objects.
     * The runtime finishes the process's session even when the program holds it too. */
    int rc = tt_session_finish_(s, &err);
    if (g_mode == TT_MODE_REPLAY)
        close_report(s, rc, &err, last, p.divergences);
    if (!exiting)
        tt_session_close(s, NULL);
    if (rc != TT_OK)
        fprintf(stderr, "tinytrace: %s\n", err.message);
    atomic_store(&g_closed, 1);
}

#ifdef TT_RT_PRELOAD
/* Programs that end with _exit (shells do) skip destructors: close the session first. exit()
 * reaches the kernel through glibc's internal alias, not through here. */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    /* held: the runtime's own exit, or a vfork child's, whose memory is not its; or a handler's
     * exit in the middle of a hook's append, which the close would wait for */
    if (!tt_rt_guard_held()) {
        g_exit_status = status & 0xff;
        rt_close(false, true);
    }
    exit_now(status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    /* held: the runtime's own exit, or a vfork child's, whose memory is not its; or a handler's
     * exit in the middle of a hook's append, which the close would wait for */
    if (!tt_rt_guard_held()) {
        g_exit_status = status & 0xff;
        rt_close(false, true);
    }
    exit_now(status);
}
#endif /* TT_RT_PRELOAD */
