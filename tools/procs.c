/* SPDX-License-Identifier: MIT */
/* tinytrace — the process tree of a recording (procs.h; the manifest's format is
 * docs/FORMAT.md §16). */
#include "procs.h"
#include "opts.h"
#include "protocol.h"
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TREE_HEADER "# tinytrace process tree 1"

int tool_procs_dir(const char *file, char *out, size_t cap)
{
    return snprintf(out, cap, "%s%s", file, TT_PROCS_SUFFIX) < (int)cap ? 0 : ENAMETOOLONG;
}

void tool_status_word(int status, char *out, size_t cap)
{
    if (status < 0)
        snprintf(out, cap, "?");
    else if (WIFEXITED(status))
        snprintf(out, cap, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "0x%x", (unsigned)status);
}

/* "root.2@1.tt" (or its .PID.partial) -> "root/2@1", path "root/2", gen 1. */
static int name_of_file(const char *base, tool_proc *p)
{
    const char *tt = strstr(base, ".tt");
    if (strncmp(base, "root", 4) != 0 || !tt || (size_t)(tt - base) >= sizeof p->name)
        return -1;
    size_t n = (size_t)(tt - base);
    for (size_t i = 0; i < n; i++)
        p->name[i] = base[i] == '.' ? '/' : base[i];
    p->name[n] = '\0';
    const char *at = strchr(p->name, '@');
    size_t pl = at ? (size_t)(at - p->name) : n;
    memcpy(p->path, p->name, pl);
    p->path[pl] = '\0';
    p->gen = at ? (unsigned)strtoul(at + 1, NULL, 10) : 0;
    return 0;
}

struct reaped {
    long pid;
    int status;
    size_t seq; /* the order noted: of one pid's, the last counts */
};

struct scan {
    tool_proc *v;
    size_t n, cap;
    struct reaped *r; /* statuses parents reaped ("proc.reaped=") */
    size_t nr, rcap;
    struct child {    /* children parents started ("proc.child=") */
        char path[208];
        long pid;
        char how[128];
        char parent_cmd[512];
    } *c;
    size_t nc, ccap;
};

static tool_proc *add_proc(struct scan *sc)
{
    if (sc->n == sc->cap) {
        size_t nc = sc->cap ? sc->cap * 2 : 16;
        tool_proc *nv = realloc(sc->v, nc * sizeof *nv);
        if (!nv)
            return NULL;
        sc->v = nv;
        sc->cap = nc;
    }
    tool_proc *p = &sc->v[sc->n++];
    memset(p, 0, sizeof *p);
    p->status = -1;
    return p;
}

static void add_reaped(struct scan *sc, long pid, int status)
{
    if (sc->nr == sc->rcap) {
        size_t nc = sc->rcap ? sc->rcap * 2 : 16;
        struct reaped *nr = realloc(sc->r, nc * sizeof *nr);
        if (!nr)
            return;
        sc->r = nr;
        sc->rcap = nc;
    }
    sc->r[sc->nr].pid = pid;
    sc->r[sc->nr].seq = sc->nr;
    sc->r[sc->nr++].status = status;
}

static void add_child(struct scan *sc, const char *v, const char *parent_cmd)
{
    char path[208], how[128] = "";
    long pid = 0;
    if (sscanf(v, "%207s pid=%ld %127[^\n]", path, &pid, how) < 2)
        return;
    if (sc->nc == sc->ccap) {
        size_t nc = sc->ccap ? sc->ccap * 2 : 16;
        struct child *ncv = realloc(sc->c, nc * sizeof *ncv);
        if (!ncv)
            return;
        sc->c = ncv;
        sc->ccap = nc;
    }
    struct child *c = &sc->c[sc->nc++];
    snprintf(c->path, sizeof c->path, "%s", path);
    c->pid = pid;
    snprintf(c->how, sizeof c->how, "%s", how);
    snprintf(c->parent_cmd, sizeof c->parent_cmd, "%s", parent_cmd);
}

/* Whether the META object @e is named @prefix... */
static bool meta_is(const tt_object_entry *e, const char *prefix)
{
    size_t n = strlen(prefix);
    return e->name_len >= n && memcmp(e->name, prefix, n) == 0;
}

/* The trace at @path into @p (its identity, build and command line), its notes into @sc. A
 * trace that does not open is listed as it is named ("unreadable"), not reported: false. */
static bool read_trace(struct scan *sc, tool_proc *p, const char *path)
{
    tool_trace t;
    snprintf(p->file, sizeof p->file, "%s", path);
    bool was = tool_quiet;
    tool_quiet = true; /* an unreadable trace is listed as such, not reported */
    int rc = tool_trace_start(&t, path, NULL, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_OPEN);
    tool_quiet = was;
    if (rc != TOOL_EXIT_OK) {
        snprintf(p->note, sizeof p->note, "unreadable");
        tool_trace_close(&t);
        return false;
    }
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < t.m.build_id_len && i < 32; i++) {
        p->build_id[2 * i] = hex[t.m.build_id[i] >> 4];
        p->build_id[2 * i + 1] = hex[t.m.build_id[i] & 15];
        p->build_id[2 * i + 2] = '\0';
    }
    /* the command line first (children's notes name it), then the rest; the last of each
     * identity object wins (a fork child's table begins with its parent's). A fork child's
     * copy of its parent's table ends before its own "proc.path=": the notes of children and
     * reaps before it are its parent's, which the parent's trace has (skipping them keeps a
     * shell's loop of N children from reading N^2 notes). */
    char own_path[sizeof p->path + 16];
    size_t own_len = (size_t)snprintf(own_path, sizeof own_path, "proc.path=%s", p->path);
    uint32_t own = 0;
    size_t o = 0;
    for (uint32_t id = 1; id <= t.m.object_count; id++) {
        tt_object_entry e;
        if (tt_reader_object(t.r, id, &e) != TT_OK || e.kind != TT_OBJ_META)
            continue;
        if (e.name_len == own_len && !memcmp(e.name, own_path, own_len))
            own = id;
        if (!meta_is(&e, "argv["))
            continue;
        char v[1024];
        snprintf(v, sizeof v, "%.*s", (int)e.name_len, e.name);
        if (o + 2 < sizeof p->cmd) {
            const char *eq = strchr(v, '=');
            if (eq && atoi(v + 5) == 0)
                o = 0; /* a fork child's table may repeat its parent's */
            if (eq)
                o += (size_t)snprintf(p->cmd + o, sizeof p->cmd - o, "%s%s", o ? " " : "",
                                      eq + 1);
            if (o >= sizeof p->cmd)
                o = sizeof p->cmd - 1;
        }
    }
    for (uint32_t id = 1; id <= t.m.object_count; id++) {
        tt_object_entry e;
        if (tt_reader_object(t.r, id, &e) != TT_OK || e.kind != TT_OBJ_META ||
            !(meta_is(&e, "proc.") || meta_is(&e, "untraced=")) ||
            (id < own && (meta_is(&e, "proc.child=") || meta_is(&e, "proc.reaped="))))
            continue;
        char v[1024];
        snprintf(v, sizeof v, "%.*s", (int)e.name_len, e.name);
        if (!strncmp(v, "proc.pid=", 9))
            p->pid = atol(v + 9);
        else if (!strncmp(v, "proc.ppid=", 10))
            p->ppid = atol(v + 10);
        else if (!strncmp(v, "proc.exit=", 10))
            p->status = (atoi(v + 10) & 0xff) << 8;
        else if (!strncmp(v, "proc.child=", 11))
            add_child(sc, v + 11, p->cmd);
        else if (!strncmp(v, "proc.reaped=", 12)) {
            long pid = 0;
            int st = 0;
            if (sscanf(v + 12, "%ld status=%d", &pid, &st) == 2)
                add_reaped(sc, pid, st);
        } else if (!strncmp(v, "untraced=", 9)) {
            snprintf(p->note, sizeof p->note, "ran unrecorded: %.120s", v + 9);
        }
    }
    tool_trace_close(&t);
    return true;
}

/* Paths compare by their numbers: root/2 before root/10. */
static int cmp_path(const char *p, const char *q)
{
    while (*p && *q) {
        if (*p >= '0' && *p <= '9' && *q >= '0' && *q <= '9') {
            unsigned long u = strtoul(p, (char **)&p, 10), w = strtoul(q, (char **)&q, 10);
            if (u != w)
                return u < w ? -1 : 1;
            continue;
        }
        if (*p != *q)
            return (unsigned char)*p < (unsigned char)*q ? -1 : 1;
        p++;
        q++;
    }
    if (*p || *q)
        return *p ? 1 : -1;
    return 0;
}

static int cmp_proc(const void *a, const void *b)
{
    const tool_proc *x = a, *y = b;
    int c = cmp_path(x->path, y->path);
    if (c)
        return c;
    return x->gen < y->gen ? -1 : x->gen > y->gen;
}

static int cmp_child(const void *a, const void *b)
{
    return cmp_path(((const struct child *)a)->path, ((const struct child *)b)->path);
}

static int cmp_reaped(const void *a, const void *b)
{
    const struct reaped *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The first of @n elements of @size bytes at @base, sorted by the path each holds at byte
 * @off, whose path is not before @path (images and children alike). */
static size_t first_at(const void *base, size_t n, size_t size, size_t off, const char *path)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_path((const char *)base + mid * size + off, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t first_proc(const tool_proc *v, size_t n, const char *path)
{
    return first_at(v, n, sizeof *v, offsetof(tool_proc, path), path);
}

static size_t first_child(const struct child *c, size_t n, const char *path)
{
    return first_at(c, n, sizeof *c, offsetof(struct child, path), path);
}

static bool forked(const struct child *c)
{
    return !strncmp(c->how, "fork", 4) || !strncmp(c->how, "clone", 5);
}

/* A scan made while the program runs (tool_scan_step, on the spare-file thread): the traces
 * the tree's processes have finished so far, signed and read, so that tool_procs_finish is
 * left with the last few. Every trace noted before the end is signed. A finished trace (its
 * final name, without ".partial") is never written again by its process. */
struct tool_scan {
    struct scan sc;     /* v[0]: the root's place, read at the end (it finishes last) */
    size_t *set;        /* the names read: 1 + their index in sc.v, by hash; 0 = empty */
    size_t set_cap;     /* a power of two, at least twice sc.n */
    tool_signer sg;
    int sg_state;       /* 0: not read (a scan that may not sign); 1: read (tool_scan_new, or
                         * the end's signing); -1: unusable (the end tries again) */
    char dir[PATH_MAX];
};

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The slot of file name @name in @e's set: where it is, or the empty slot it would take. */
static size_t *set_slot(struct tool_scan *e, const char *name)
{
    size_t m = e->set_cap - 1, i = (size_t)name_hash(name) & m;
    while (e->set[i] && strcmp(base_name(e->sc.v[e->set[i] - 1].file), name) != 0)
        i = (i + 1) & m;
    return &e->set[i];
}

static bool set_grow(struct tool_scan *e)
{
    if (e->set_cap >= 2 * (e->sc.n + 1))
        return true;
    size_t cap = e->set_cap ? e->set_cap * 2 : 256;
    while (cap < 2 * (e->sc.n + 1))
        cap *= 2;
    size_t *old = e->set, ocap = e->set_cap;
    if (!(e->set = calloc(cap, sizeof *e->set))) {
        e->set = old;
        return false;
    }
    e->set_cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i])
            *set_slot(e, base_name(e->sc.v[old[i] - 1].file)) = old[i];
    free(old);
    return true;
}

/* Adds the traces of @e's folder not read yet to @e->sc. Returns how many it read; *@oom is set
 * when memory ran out and some were left out. Before the end (@all false), only finished
 * traces, each signed first (the key is open): one that cannot be signed or read is left for
 * the end's pass. At the end, the unfinished ones (".partial": a process that died) are listed
 * too, as such, and a trace that does not read is listed as unreadable. */
static size_t scan_folder(struct tool_scan *e, bool all, bool *oom)
{
    size_t got = 0;
    DIR *d = opendir(e->dir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
        tool_proc tmp;
        memset(&tmp, 0, sizeof tmp);
        if (name_of_file(de->d_name, &tmp) != 0)
            continue;
        size_t l = strlen(de->d_name);
        int partial = l > 8 && !strcmp(de->d_name + l - 8, ".partial");
        if ((!partial && strcmp(de->d_name + l - 3, ".tt") != 0) || (partial && !all))
            continue;
        /* the set keeps at least half its slots empty, grown or not, so a look-up ends */
        bool grown = set_grow(e);
        if (!partial && e->set_cap && *set_slot(e, de->d_name))
            continue; /* read already */
        if (!partial && !grown && !all)
            continue; /* no room to note it: the end's pass reads it */
        char full[PATH_MAX + 256];
        snprintf(full, sizeof full, "%s/%s", e->dir, de->d_name);
        if (!all && tool_signer_sign(&e->sg, full) != TOOL_EXIT_OK)
            continue;
        tool_proc *p = add_proc(&e->sc);
        if (!p) {
            *oom = true;
            break;
        }
        memcpy(p->name, tmp.name, sizeof p->name);
        memcpy(p->path, tmp.path, sizeof p->path);
        p->gen = tmp.gen;
        if (partial) {
            p->partial = 1;
            snprintf(p->file, sizeof p->file, "%.*s", (int)sizeof p->file - 1, full);
            const char *dot = strstr(de->d_name, ".tt.");
            p->pid = dot ? atol(dot + 4) : 0;
            snprintf(p->note, sizeof p->note, "died before its trace was finished: "
                     "tinytrace recover saves what it wrote");
            continue;
        }
        if (!read_trace(&e->sc, p, full) && !all) {
            e->sc.n--; /* nothing of it was noted: the end's pass reads it again */
            continue;
        }
        if (grown)
            *set_slot(e, de->d_name) = e->sc.n;
        got++;
    }
    if (d)
        closedir(d);
    return got;
}

/* A scan of @file's tree that has not read the key (sg_state 0). */
static struct tool_scan *scan_new(const char *file)
{
    struct tool_scan *e = calloc(1, sizeof *e);
    if (!e || tool_procs_dir(file, e->dir, sizeof e->dir) != 0 || !add_proc(&e->sc)) {
        tool_scan_free(e);
        return NULL;
    }
    return e;
}

tool_scan *tool_scan_new(const char *file)
{
    struct tool_scan *e = scan_new(file);
    /* the key now, before the program starts: made here on a first use, its folder would
     * change under a running program that looks at it (a replayed program sees no such
     * change, and python's import cache, keyed by a folder's mtime, lists it again) */
    if (e)
        e->sg_state = tool_signer_open(&e->sg) == TOOL_EXIT_OK ? 1 : -1;
    return e;
}

size_t tool_scan_step(tool_scan *e)
{
    if (!e || e->sg_state != 1)
        return 0; /* no key: everything waits for the end, which tries the key again */
    bool was = tool_quiet, oom = false;
    tool_quiet = true; /* what fails here is done again at the end, and said */
    size_t got = scan_folder(e, false, &oom);
    tool_quiet = was;
    return got;
}

void tool_scan_free(tool_scan *e)
{
    if (!e)
        return;
    if (e->sg_state == 1)
        tool_signer_close(&e->sg);
    free(e->sc.v);
    free(e->sc.r);
    free(e->sc.c);
    free(e->set);
    free(e);
}

/* The tree from the traces themselves, with @nreaped statuses the tool reaped: those @early
 * read while the program ran (NULL: none), then the root and the rest. With @sign, every
 * trace but the root (the caller signs that one) is signed, unless @early signed it already. */
static int scan_tree(const char *file, const long *pids, const int *statuses, size_t nreaped,
                     struct tool_scan *early, bool sign, struct scan *sc)
{
    memset(sc, 0, sizeof *sc);
    struct tool_scan *e = early ? early : scan_new(file); /* the key only if it signs */
    if (!e)
        return ENOMEM;
    tool_proc *root = &e->sc.v[0];
    snprintf(root->name, sizeof root->name, "root");
    snprintf(root->path, sizeof root->path, "root");
    read_trace(&e->sc, root, file);
    const size_t late = e->sc.n; /* the images before it were signed while the program ran */
    bool oom = false;
    scan_folder(e, true, &oom);
    if (oom) {
        if (!early)
            tool_scan_free(e);
        return ENOMEM;
    }
    /* the rest are signed here, where a failure is said; the key is read once for all (again,
     * if it could not be read while the program ran) */
    size_t unsigned_ = 0;
    for (size_t i = late; sign && i < e->sc.n; i++)
        unsigned_ += !e->sc.v[i].partial;
    if (unsigned_ && e->sg_state != 1)
        e->sg_state = tool_signer_open(&e->sg) == TOOL_EXIT_OK ? 1 : -1;
    if (unsigned_ && e->sg_state == 1) {
        for (size_t i = late; i < e->sc.n; i++)
            if (!e->sc.v[i].partial)
                tool_signer_sign(&e->sg, e->sc.v[i].file);
    } else if (unsigned_) {
        tool_signer_warn(&e->sg, unsigned_);
    }
    *sc = e->sc;
    memset(&e->sc, 0, sizeof e->sc);
    if (!early)
        tool_scan_free(e);
    /* from here on, images and children are looked up by path: sorted and searched, so a
     * tree of thousands of processes costs N log N, not N^2 */
    qsort(sc->v, sc->n, sizeof *sc->v, cmp_proc);
    qsort(sc->c, sc->nc, sizeof *sc->c, cmp_child);
    qsort(sc->r, sc->nr, sizeof *sc->r, cmp_reaped);
    size_t nv = sc->n; /* the images with a trace; those added below come after them */
    /* a fork that made no call left no trace: its parent names it */
    for (size_t i = 0; i < sc->nc; i++) {
        const struct child *c = &sc->c[i];
        if (i && !cmp_path(c->path, sc->c[i - 1].path))
            continue; /* noted twice */
        bool gen0 = false;
        for (size_t j = first_proc(sc->v, nv, c->path);
             j < nv && !cmp_path(sc->v[j].path, c->path); j++) {
            gen0 |= sc->v[j].gen == 0;
            if (!sc->v[j].pid)
                sc->v[j].pid = c->pid;
        }
        bool vforked = !strncmp(c->how, "vfork", 5);
        if (gen0 || (!forked(c) && !vforked))
            continue; /* a spawned child's first image is its program: known or not traced */
        tool_proc *p = add_proc(sc);
        if (!p)
            break;
        snprintf(p->name, sizeof p->name, "%s", c->path);
        snprintf(p->path, sizeof p->path, "%s", c->path);
        p->pid = c->pid;
        if (vforked) {
            /* its exec failed, or ran what the runtime cannot follow (its parent counts it) */
            snprintf(p->cmd, sizeof p->cmd, "%s", c->how[5] == ' ' ? c->how + 6 : "");
            snprintf(p->note, sizeof p->note, "a vfork child with no trace: its exec failed "
                     "or ran unrecorded");
        } else {
            snprintf(p->cmd, sizeof p->cmd, "%s", c->parent_cmd);
            snprintf(p->note, sizeof p->note, "a %.40s that made no call before it exec'd or "
                     "ended", c->how);
        }
    }
    for (size_t i = 0; i < nv; i++) {
        tool_proc *p = &sc->v[i];
        /* a fork's first image with a trace of its own: its parent's memory, said so */
        for (size_t j = first_child(sc->c, sc->nc, p->path);
             p->gen == 0 && !p->note[0] && j < sc->nc && !cmp_path(sc->c[j].path, p->path); j++)
            if (forked(&sc->c[j]))
                snprintf(p->note, sizeof p->note, "a %.40s of its parent", sc->c[j].how);
        /* pids across images of one process */
        for (size_t j = first_proc(sc->v, nv, p->path);
             !p->pid && j < nv && !cmp_path(sc->v[j].path, p->path); j++)
            p->pid = sc->v[j].pid;
    }
    for (size_t i = 0; i < sc->n; i++) {
        tool_proc *p = &sc->v[i];
        /* the status is the process's, the last image's: the wait of its parent (the last
         * noted), or the tool's */
        int st = -1;
        size_t lo = 0, hi = sc->nr;
        while (p->pid && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sc->r[mid].pid <= p->pid)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (p->pid && lo > 0 && sc->r[lo - 1].pid == p->pid)
            st = sc->r[lo - 1].status;
        for (size_t j = 0; j < nreaped && p->pid; j++)
            if (pids[j] == p->pid)
                st = statuses[j];
        if (st >= 0)
            p->status = st;
    }
    qsort(sc->v, sc->n, sizeof *sc->v, cmp_proc);
    /* an image that exec'd ended with its exec: only the last image has the process's status */
    for (size_t i = 0; i + 1 < sc->n; i++)
        if (!strcmp(sc->v[i].path, sc->v[i + 1].path) && sc->v[i].gen < sc->v[i + 1].gen)
            sc->v[i].status = -2;
    return 0;
}

static void scan_free(struct scan *sc)
{
    free(sc->r);
    free(sc->c);
}

/* A field of the manifest: tab, newline and backslash escaped. */
static void put_field(FILE *f, const char *s)
{
    if (!*s) {
        fputc('-', f);
        return;
    }
    for (; *s; s++) {
        if (*s == '\t')
            fputs("\\t", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\\')
            fputs("\\\\", f);
        else
            fputc(*s, f);
    }
}

int tool_procs_prepare(const char *file)
{
    char dir[PATH_MAX];
    if (tool_procs_dir(file, dir, sizeof dir) != 0)
        return ENAMETOOLONG;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno != ENOENT || mkdir(dir, 0700) != 0) {
            tool_error("cannot make %s: %s", dir, strerror(errno));
            return errno ? errno : EIO;
        }
        return 0;
    }
    tool_spares_clear(dir);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        tool_proc tmp;
        if (strcmp(de->d_name, TT_TREE_NAME) != 0 && name_of_file(de->d_name, &tmp) != 0)
            continue; /* not ours: left alone */
        char full[PATH_MAX + 256];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        unlink(full);
    }
    closedir(d);
    return 0;
}

void tool_procs_remove(const char *file)
{
    char dir[PATH_MAX];
    struct stat st;
    if (tool_procs_dir(file, dir, sizeof dir) != 0 || stat(dir, &st) != 0)
        return;
    tool_procs_prepare(file);
    rmdir(dir);
}

int tool_procs_rename(const char *file, const char *to)
{
    char a[PATH_MAX], b[PATH_MAX];
    struct stat st;
    if (tool_procs_dir(file, a, sizeof a) != 0 || tool_procs_dir(to, b, sizeof b) != 0)
        return ENAMETOOLONG;
    if (stat(a, &st) != 0)
        return 0;
    tool_procs_remove(to);
    return rename(a, b) == 0 ? 0 : errno;
}

size_t tool_reap_orphans(long *pids, int *statuses, size_t cap)
{
    size_t n = 0;
    int st;
    for (;;) {
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break; /* ECHILD: every descendant has ended */
        if (n < cap) {
            pids[n] = p;
            statuses[n++] = st;
        }
    }
    return n;
}

/* Starts the writeback of @name in folder @dir (AT_FDCWD: @name is a path), or, @wait, waits
 * until it is on the disk. 0, or the errno of what failed; a file gone since the listing (a
 * partial file its process renamed) is nothing to sync. */
static int sync_at(int dir, const char *name, bool wait)
{
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : errno;
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!wait)
            sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* advisory: the wait says */
        else if (fdatasync(fd) != 0)
            e = errno;
    }
    close(fd);
    return e;
}

/* Keeps the first error in *@e, and says it. */
static void sync_failed(int *e, int r, const char *dir, const char *name)
{
    if (r && !*e) {
        *e = r;
        tool_error("cannot make %s%s%s durable: %s", dir, dir[0] ? "/" : "", name, strerror(r));
    }
}

/* Up to this many traces in FILE.procs, each is synced; more, the file system at once. */
#define SYNC_EACH_MAX 32

int tool_procs_sync(const char *file)
{
    char dir[PATH_MAX];
    DIR *d = tool_procs_dir(file, dir, sizeof dir) == 0 ? opendir(dir) : NULL; /* NULL: FILE alone */
    int e = 0;
    size_t n = 0;
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    struct stat a, b;
    if (n > SYNC_EACH_MAX && stat(file, &a) == 0 && fstat(dirfd(d), &b) == 0 &&
        a.st_dev == b.st_dev) {
        /* a big tree: one writeback of the file system, one flush of the disk, where a file at
         * a time flushed the disk once per file (1000 traces here: 90 to 110 ms against 18 to 20) */
        if (syncfs(dirfd(d)) != 0)
            sync_failed(&e, errno, "", dir);
        closedir(d);
        return e;
    }
    /* two passes: every file's writeback starts, then each is waited for */
    for (int wait = 0; wait < 2; wait++) {
        sync_failed(&e, sync_at(AT_FDCWD, file, wait), "", file);
        if (!d)
            continue;
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.')
                sync_failed(&e, sync_at(dirfd(d), de->d_name, wait), dir, de->d_name);
    }
    if (d) {
        if (fsync(dirfd(d)) != 0)
            sync_failed(&e, errno, "", dir);
        closedir(d);
    }
    return e;
}

int tool_procs_finish(const char *file, const long *pids, const int *statuses, size_t nreaped,
                      tool_scan *early)
{
    struct scan sc;
    char dir[PATH_MAX], tree[PATH_MAX + 16], tmp[PATH_MAX + 32];
    int e = scan_tree(file, pids, statuses, nreaped, early, true, &sc);
    if (e == 0 && tool_procs_dir(file, dir, sizeof dir) != 0)
        e = ENAMETOOLONG;
    if (e != 0) {
        tool_error("cannot list the process tree of %s (its traces are there, not all "
                   "signed): %s", file, strerror(e));
        free(sc.v);
        scan_free(&sc);
        return e;
    }
    if (sc.n <= 1) {
        rmdir(dir); /* one process: the recording is FILE alone, as it always was */
        free(sc.v);
        scan_free(&sc);
        return 0;
    }
    snprintf(tree, sizeof tree, "%s/%s", dir, TT_TREE_NAME);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", tree, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        e = errno;
        tool_error("cannot write %s: %s", tree, strerror(e));
    } else {
        fprintf(f, TREE_HEADER "\n# name\tpid\tppid\tstatus\tbuild-id\tfile\tcommand\tnote\n");
        for (size_t i = 0; i < sc.n; i++) {
            tool_proc *p = &sc.v[i];
            char st[32];
            if (p->status == -2)
                snprintf(st, sizeof st, "exec");
            else
                tool_status_word(p->status, st, sizeof st);
            fprintf(f, "%s\t%ld\t%ld\t%s\t", p->name, p->pid, p->ppid, st);
            put_field(f, p->build_id);
            fputc('\t', f);
            put_field(f, i == 0 ? "" : base_name(p->file));
            fputc('\t', f);
            put_field(f, p->cmd);
            fputc('\t', f);
            put_field(f, p->note);
            fputc('\n', f);
        }
        if (fclose(f) != 0 || rename(tmp, tree) != 0) {
            e = errno;
            tool_error("cannot write %s: %s", tree, strerror(e));
            unlink(tmp);
        }
    }
    free(sc.v);
    scan_free(&sc);
    return e;
}

/* One field of a manifest line, unescaped in place; NULL at the end. */
static char *take_field(char **line)
{
    char *s = *line, *o = s;
    if (!s)
        return NULL;
    char *start = s;
    for (; *s && *s != '\t' && *s != '\n'; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
        } else {
            *o++ = *s;
        }
    }
    char end = *s;
    *o = '\0';
    *line = end == '\t' ? s + 1 : NULL;
    return strcmp(start, "-") == 0 ? start + 1 : start;
}

static int parse_status(const char *w)
{
    if (!strncmp(w, "exit ", 5))
        return (atoi(w + 5) & 0xff) << 8;
    if (!strncmp(w, "signal ", 7))
        return atoi(w + 7) & 0x7f;
    if (!strcmp(w, "exec"))
        return -2;
    return -1;
}

int tool_procs_read(const char *file, tool_proc **out, size_t *n)
{
    char dir[PATH_MAX], tree[PATH_MAX + 16];
    *out = NULL;
    *n = 0;
    if (tool_procs_dir(file, dir, sizeof dir) != 0)
        return ENAMETOOLONG;
    snprintf(tree, sizeof tree, "%s/%s", dir, TT_TREE_NAME);
    FILE *f = fopen(tree, "r");
    struct stat st;
    if (!f) {
        struct scan sc;
        if (stat(dir, &st) != 0) {
            /* a single process */
            tool_proc *p = calloc(1, sizeof *p);
            if (!p)
                return ENOMEM;
            snprintf(p->name, sizeof p->name, "root");
            snprintf(p->path, sizeof p->path, "root");
            snprintf(p->file, sizeof p->file, "%s", file);
            p->status = -1;
            *out = p;
            *n = 1;
            return 0;
        }
        int e = scan_tree(file, NULL, NULL, 0, NULL, false, &sc);
        scan_free(&sc);
        if (e != 0) {
            free(sc.v);
            return e;
        }
        *out = sc.v;
        *n = sc.n;
        return 0;
    }
    char line[4096];
    size_t cap = 0;
    tool_proc *v = NULL;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            tool_proc *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                fclose(f);
                return ENOMEM;
            }
            v = nv;
        }
        tool_proc *p = &v[(*n)++];
        memset(p, 0, sizeof *p);
        char *l = line;
        const char *name = take_field(&l), *pid = take_field(&l), *ppid = take_field(&l);
        const char *stw = take_field(&l), *bid = take_field(&l), *fn = take_field(&l);
        const char *cmd = take_field(&l), *note = take_field(&l);
        tool_proc tmp;
        snprintf(tmp.name, sizeof tmp.name, "%s", name ? name : "");
        snprintf(p->name, sizeof p->name, "%s", tmp.name);
        const char *at = strchr(p->name, '@');
        snprintf(p->path, sizeof p->path, "%.*s", (int)(at ? (size_t)(at - p->name)
                                                            : strlen(p->name)), p->name);
        p->gen = at ? (unsigned)strtoul(at + 1, NULL, 10) : 0;
        p->pid = pid ? atol(pid) : 0;
        p->ppid = ppid ? atol(ppid) : 0;
        p->status = stw ? parse_status(stw) : -1;
        snprintf(p->build_id, sizeof p->build_id, "%s", bid ? bid : "");
        if (!strcmp(p->name, "root"))
            snprintf(p->file, sizeof p->file, "%s", file);
        else if (fn && *fn)
            snprintf(p->file, sizeof p->file, "%.3800s/%.250s", dir, fn);
        p->partial = fn && strstr(fn, ".partial") != NULL;
        snprintf(p->cmd, sizeof p->cmd, "%s", cmd ? cmd : "");
        snprintf(p->note, sizeof p->note, "%s", note ? note : "");
    }
    fclose(f);
    *out = v;
    return 0;
}

int tool_process_file(const char *prog, const char *file, const char *want, char *out,
                      size_t cap)
{
    if (!want) {
        snprintf(out, cap, "%s", file);
        return TOOL_EXIT_OK;
    }
    tool_proc *v;
    size_t n;
    if (tool_procs_read(file, &v, &n) != 0)
        return tool_usage_error(prog, "cannot read the process tree of %s", file);
    char norm[224];
    snprintf(norm, sizeof norm, "%s", want);
    if (!strncmp(norm, "root.", 5))
        for (char *c = norm; *c; c++)
            if (*c == '.')
                *c = '/';
    const tool_proc *hit = NULL;
    int hits = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, norm))
            hit = &v[i], hits = 1;
    /* a pid or a program's name: the last image of that process, or the one that runs it */
    char *end;
    long pid = strtol(want, &end, 10);
    for (size_t i = 0; !hit && !*end && i < n; i++)
        if (v[i].pid == pid && v[i].file[0] &&
            (i + 1 == n || strcmp(v[i + 1].path, v[i].path) != 0))
            hit = &v[i], hits = 1;
    bool by_name = hits == 0;
    for (size_t i = 0; by_name && i < n; i++) {
        char first[512];
        snprintf(first, sizeof first, "%s", v[i].cmd);
        char *sp = strchr(first, ' ');
        if (sp)
            *sp = '\0';
        /* a fork's first image runs its parent's program: not the one named */
        bool forked = !strncmp(v[i].note, "a fork", 6) || !strncmp(v[i].note, "a clone", 7);
        if (v[i].file[0] && !forked && !strcmp(base_name(first), want)) {
            hits += hit == NULL || strcmp(hit->name, v[i].name) != 0;
            hit = &v[i];
        }
    }
    int rc = TOOL_EXIT_OK;
    if (!hit)
        rc = tool_usage_error(prog, "%s has no process '%s' (tinytrace info lists them)", file,
                              want);
    else if (hits > 1)
        rc = tool_usage_error(prog, "more than one process of %s runs '%s': name one by its "
                              "path (tinytrace info lists them)", file, want);
    else if (!hit->file[0])
        rc = tool_usage_error(prog, "process %s of %s recorded nothing (%s)", hit->name, file,
                              hit->note[0] ? hit->note : "no trace");
    else
        snprintf(out, cap, "%s", hit->file);
    free(v);
    return rc;
}

void tool_procs_print(FILE *f, const char *file)
{
    tool_proc *v;
    size_t n;
    if (tool_procs_read(file, &v, &n) != 0 || n <= 1) {
        free(v);
        return;
    }
    fprintf(f, "\nprocesses:        %zu images\n", n);
    fprintf(f, "%-16s %8s %8s %-9s %-22s %s\n", "process", "pid", "ppid", "status", "file",
            "command");
    for (size_t i = 0; i < n; i++) {
        char st[32];
        if (v[i].status == -2)
            snprintf(st, sizeof st, "exec");
        else
            tool_status_word(v[i].status, st, sizeof st);
        fprintf(f, "%-16s %8ld %8ld %-9s %-22s ", v[i].name, v[i].pid, v[i].ppid, st,
                v[i].file[0] ? base_name(v[i].file) : "-");
        tool_print_text(f, v[i].cmd, strlen(v[i].cmd));
        if (v[i].note[0]) {
            fputs("  (", f);
            tool_print_text(f, v[i].note, strlen(v[i].note));
            fputc(')', f);
        }
        fputc('\n', f);
    }
    free(v);
}
