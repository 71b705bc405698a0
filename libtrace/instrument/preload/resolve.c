/* SPDX-License-Identifier: MIT */
/* Name resolution: getaddrinfo, getnameinfo, gethostbyname, gethostbyname2, gethostbyname_r,
 * gethostbyname2_r, gethostbyaddr and gethostbyaddr_r are inputs.
 *
 * glibc's resolver reaches /etc/hosts, the DNS servers and nscd through internal calls that no
 * interposer sees, so the API functions themselves are interposed and their results recorded,
 * serialized. While recording, the real function runs under the guard: whatever the NSS
 * modules call through public symbols (sockets, reads, clocks) is the resolver's, not the
 * program's, and is not recorded, since replay does not run it.
 *
 * Each call is two io events on TT_CH_RESOLVE, at the function's site: the query as an OUT
 * event, compared in replay (the name, service and hints, or the address), then the result as
 * an IN event: struct in_head (the return value, errno, h_errno in flags) and the serialized
 * answer as its data, in native byte order, at most RESOLVE_CAP bytes (a longer answer is
 * recorded cut to the entries that fit):
 *
 *   addrinfo list:  u32 count, then each entry: i32 flags, family, socktype, protocol;
 *                   u32 addrlen, u32 canonlen (with its NUL, 0 for none); address; name
 *   hostent:        i32 found; i32 addrtype, length; u32 aliases, addresses; u32 namelen;
 *                   name; each alias as u32 length and bytes; each address (length bytes)
 *   getnameinfo:    u32 hostlen, servlen (without the NUL); host; service
 *
 * In replay getaddrinfo's list is built as glibc builds it (each entry and its address in one
 * malloc, the canonical name in another), so the program's freeaddrinfo frees it; a hostent of
 * gethostbyname* is laid out in the caller's buffer (the _r functions) or in a static one, as
 * glibc's.
 */
#include "preload.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);
typedef int (*getnameinfo_fn)(const struct sockaddr *, socklen_t, char *, socklen_t, char *,
                              socklen_t, int);
typedef struct hostent *(*gethostbyname_fn)(const char *);
typedef struct hostent *(*gethostbyname2_fn)(const char *, int);
typedef struct hostent *(*gethostbyaddr_fn)(const void *, socklen_t, int);
typedef int (*gethostbyname_r_fn)(const char *, struct hostent *, char *, size_t,
                                  struct hostent **, int *);
typedef int (*gethostbyname2_r_fn)(const char *, int, struct hostent *, char *, size_t,
                                   struct hostent **, int *);
typedef int (*gethostbyaddr_r_fn)(const void *, socklen_t, int, struct hostent *, char *,
                                  size_t, struct hostent **, int *);

#define RESOLVE_CAP (64u * 1024)

/* ---------------------------------------------------------------- a byte writer and reader */

struct wr {
    unsigned char *p;
    size_t len, cap;
    bool full;
};

static void put(struct wr *w, const void *d, size_t n)
{
    if (w->full || n > w->cap - w->len) {
        w->full = true;
        return;
    }
    memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void put32(struct wr *w, uint32_t v)
{
    put(w, &v, sizeof v);
}

struct rd {
    const unsigned char *p;
    size_t len, off;
    bool bad;
};

static const void *take(struct rd *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const void *q = r->p + r->off;
    r->off += n;
    return q;
}

static uint32_t take32(struct rd *r)
{
    uint32_t v = 0;
    const void *q = take(r, sizeof v);
    if (q)
        memcpy(&v, q, sizeof v);
    return v;
}

/* A string of @n bytes that must end with its NUL; NULL when it does not. */
static const char *take_str(struct rd *r, size_t n)
{
    const char *q = take(r, n);
    return q && n && q[n - 1] == '\0' ? q : (r->bad = true, NULL);
}

/* ---------------------------------------------------------------- the events */

/* The query, compared in replay; false when the replay diverged and the runtime let the
 * program go on. */
static bool query(tt_session *s, enum site k, const struct wr *q)
{
    int rc = tt_pl_io_event(s, TT_IO_OUT, TT_CH_RESOLVE, k, q->p, q->len, NULL);
    if (rc == TT_OK)
        return true;
    tt_rt_failed(rc, tt_pl_site_names[k]);
    return tt_pl_recording(s);
}

/* Records the result (@h and @ans), or replays it into @h and @ans (ans->cap bytes at most,
 * ans->len set). False when the replay failed and the program goes on. */
static bool answer(tt_session *s, enum site k, struct in_head *h, struct wr *ans)
{
    int rc;
    if (tt_pl_recording(s)) {
        h->len = ans->len;
        struct iovec v = { ans->p, ans->len };
        rc = tt_pl_in_record(s, TT_CH_RESOLVE, k, h, false, NULL, &v, 1);
        if (rc != TT_OK)
            tt_rt_failed(rc, tt_pl_site_names[k]);
        return true;
    }
    struct iovec v = { ans->p, ans->cap };
    rc = tt_pl_in_replay(s, TT_CH_RESOLVE, k, h, false, NULL, &v, 1);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        return false;
    }
    ans->len = (size_t)h->len;
    return true;
}

static void put_cstr(struct wr *w, const char *str)
{
    uint8_t given = str != NULL;
    put(w, &given, 1);
    if (str)
        put(w, str, strlen(str) + 1);
}

/* ---------------------------------------------------------------- getaddrinfo */

static void ai_put(struct wr *w, const struct addrinfo *res)
{
    uint32_t count = 0;
    size_t at = w->len;
    put32(w, 0);
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        size_t before = w->len;
        int32_t v[4] = { ai->ai_flags, ai->ai_family, ai->ai_socktype, ai->ai_protocol };
        uint32_t alen = ai->ai_addr ? ai->ai_addrlen : 0;
        uint32_t clen = ai->ai_canonname ? (uint32_t)strlen(ai->ai_canonname) + 1 : 0;
        put(w, v, sizeof v);
        put32(w, alen);
        put32(w, clen);
        put(w, ai->ai_addr, alen);
        put(w, ai->ai_canonname, clen);
        if (w->full) { /* the entries that fit */
            w->len = before;
            w->full = false;
            break;
        }
        count++;
    }
    memcpy(w->p + at, &count, sizeof count);
}

static void ai_free(struct addrinfo *ai)
{
    while (ai) {
        struct addrinfo *next = ai->ai_next;
        free(ai->ai_canonname);
        free(ai);
        ai = next;
    }
}

/* The list as glibc builds it; NULL with *@ok false when the answer is malformed or memory
 * ran out. */
static struct addrinfo *ai_get(const struct wr *w, bool *ok)
{
    struct rd r = { w->p, w->len, 0, false };
    uint32_t count = take32(&r);
    struct addrinfo *head = NULL, **tail = &head;
    for (uint32_t i = 0; i < count && !r.bad; i++) {
        const int32_t *v = take(&r, 4 * sizeof(int32_t));
        uint32_t alen = take32(&r), clen = take32(&r);
        const void *addr = take(&r, alen);
        const char *canon = clen ? take_str(&r, clen) : NULL;
        if (r.bad || alen > NAME_CAP)
            break;
        int32_t f[4];
        memcpy(f, v, sizeof f);
        struct addrinfo *ai = calloc(1, sizeof *ai + alen);
        if (!ai) {
            r.bad = true;
            break;
        }
        *ai = (struct addrinfo){ .ai_flags = f[0], .ai_family = f[1], .ai_socktype = f[2],
                                 .ai_protocol = f[3], .ai_addrlen = alen };
        if (alen) {
            ai->ai_addr = (struct sockaddr *)(ai + 1);
            memcpy(ai->ai_addr, addr, alen);
        }
        *tail = ai;
        tail = &ai->ai_next;
        if (canon && !(ai->ai_canonname = strdup(canon))) {
            r.bad = true;
            break;
        }
    }
    *ok = !r.bad;
    if (r.bad) {
        ai_free(head);
        return NULL;
    }
    return head;
}

TT_EXPORT int getaddrinfo(const char *restrict node, const char *restrict service,
                          const struct addrinfo *restrict hints, struct addrinfo **restrict res)
{
    getaddrinfo_fn f = REAL(getaddrinfo, getaddrinfo_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(node, service, hints, res);
    int e0 = errno;
    unsigned char *mem = malloc(RESOLVE_CAP + 1024);
    if (!mem) {
        tt_rt_guard_leave();
        return f(node, service, hints, res);
    }
    struct wr q = { mem + RESOLVE_CAP, 0, 1024, false };
    int32_t hv[5] = { hints != NULL, hints ? hints->ai_flags : 0, hints ? hints->ai_family : 0,
                      hints ? hints->ai_socktype : 0, hints ? hints->ai_protocol : 0 };
    put(&q, hv, sizeof hv);
    put_cstr(&q, node);
    put_cstr(&q, service);
    struct wr ans = { mem, 0, RESOLVE_CAP, false };
    struct in_head h = { 0 };
    bool live = true;
    if (query(s, S_getaddrinfo, &q)) {
        if (tt_pl_recording(s)) {
            int r = f(node, service, hints, res);
            h.ret = r;
            h.err = errno;
            if (r == 0 && res)
                ai_put(&ans, *res);
            answer(s, S_getaddrinfo, &h, &ans);
            live = false;
        } else if (answer(s, S_getaddrinfo, &h, &ans)) {
            bool ok = true;
            struct addrinfo *list = h.ret == 0 ? ai_get(&ans, &ok) : NULL;
            if (!ok) {
                h.ret = EAI_MEMORY;
                h.err = ENOMEM;
            }
            if (h.ret == 0)
                *res = list;
            live = false;
        }
    }
    free(mem);
    tt_rt_guard_leave();
    if (live)
        return f(node, service, hints, res);
    errno = h.ret ? h.err : e0;
    return (int)h.ret;
}

/* ---------------------------------------------------------------- getnameinfo */

/* @n recorded bytes into a caller's buffer of @cap, cut and NUL-terminated. */
static void copy_str(char *dst, socklen_t cap, const char *src, uint32_t n)
{
    if (!dst || !cap)
        return;
    size_t k = n < cap - 1 ? n : cap - 1;
    if (k)
        memcpy(dst, src, k);
    dst[k] = '\0';
}

TT_EXPORT int getnameinfo(const struct sockaddr *restrict sa, socklen_t salen,
                          char *restrict host, socklen_t hostlen, char *restrict serv,
                          socklen_t servlen, int flags)
{
    getnameinfo_fn f = REAL(getnameinfo, getnameinfo_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(sa, salen, host, hostlen, serv, servlen, flags);
    int e0 = errno;
    unsigned char qbuf[8 + NAME_CAP], abuf[2 * NI_MAXHOST + 8];
    struct wr q = { qbuf, 0, sizeof qbuf, false };
    int32_t qv[2] = { flags, (int32_t)salen };
    put(&q, qv, sizeof qv);
    if (sa)
        put(&q, sa, salen < NAME_CAP ? salen : NAME_CAP);
    struct wr ans = { abuf, 0, sizeof abuf, false };
    struct in_head h = { 0 };
    bool live = true;
    if (query(s, S_getnameinfo, &q)) {
        if (tt_pl_recording(s)) {
            int r = f(sa, salen, host, hostlen, serv, servlen, flags);
            h.ret = r;
            h.err = errno;
            uint32_t hl = r == 0 && host && hostlen ? (uint32_t)strnlen(host, hostlen) : 0;
            uint32_t sl = r == 0 && serv && servlen ? (uint32_t)strnlen(serv, servlen) : 0;
            put32(&ans, hl < NI_MAXHOST ? hl : 0);
            put32(&ans, sl < NI_MAXHOST ? sl : 0);
            put(&ans, host, hl < NI_MAXHOST ? hl : 0);
            put(&ans, serv, sl < NI_MAXHOST ? sl : 0);
            answer(s, S_getnameinfo, &h, &ans);
            live = false;
        } else if (answer(s, S_getnameinfo, &h, &ans)) {
            struct rd r = { ans.p, ans.len, 0, false };
            uint32_t hl = take32(&r), sl = take32(&r);
            const char *hp = take(&r, hl), *sp = take(&r, sl);
            if (h.ret == 0 && !r.bad) {
                copy_str(host, hostlen, hp, hl);
                copy_str(serv, servlen, sp, sl);
            }
            live = false;
        }
    }
    tt_rt_guard_leave();
    if (live)
        return f(sa, salen, host, hostlen, serv, servlen, flags);
    errno = h.ret ? h.err : e0;
    return (int)h.ret;
}

/* ---------------------------------------------------------------- gethostby* */

static void he_put(struct wr *w, const struct hostent *he)
{
    int32_t head[3] = { he != NULL, he ? he->h_addrtype : 0, he ? he->h_length : 0 };
    uint32_t na = 0, nd = 0;
    if (he) {
        while (he->h_aliases && he->h_aliases[na])
            na++;
        while (he->h_addr_list && he->h_addr_list[nd])
            nd++;
    }
    put(w, head, sizeof head);
    put32(w, na);
    put32(w, nd);
    if (!he)
        return;
    const char *name = he->h_name ? he->h_name : "";
    put32(w, (uint32_t)strlen(name) + 1);
    put(w, name, strlen(name) + 1);
    for (uint32_t i = 0; i < na; i++) {
        put32(w, (uint32_t)strlen(he->h_aliases[i]) + 1);
        put(w, he->h_aliases[i], strlen(he->h_aliases[i]) + 1);
    }
    for (uint32_t i = 0; i < nd; i++)
        put(w, he->h_addr_list[i], (size_t)he->h_length);
    if (w->full) { /* too long to record: recorded as not found */
        w->len = 0;
        w->full = false;
        int32_t none[3] = { 0, 0, 0 };
        put(w, none, sizeof none);
        put32(w, 0);
        put32(w, 0);
    }
}

/* Lays the recorded hostent out in @buf (pointer arrays, addresses, names) as glibc does.
 * Returns 0, ERANGE when @buflen is too small, or EINVAL for a malformed answer; *@found says
 * whether there was an entry. */
static int he_get(const struct wr *w, struct hostent *he, char *buf, size_t buflen,
                  bool *found)
{
    struct rd r = { w->p, w->len, 0, false };
    const int32_t *hp = take(&r, 3 * sizeof(int32_t));
    uint32_t na = take32(&r), nd = take32(&r);
    if (r.bad)
        return EINVAL;
    int32_t head[3];
    memcpy(head, hp, sizeof head);
    *found = head[0] != 0;
    if (!*found)
        return 0;
    if (head[2] < 0 || head[2] > 64 || na > RESOLVE_CAP || nd > RESOLVE_CAP)
        return EINVAL;
    size_t alen = (size_t)head[2];
    uint32_t nl = take32(&r);
    const char *name = take_str(&r, nl);
    size_t start = r.off;
    for (uint32_t i = 0; i < na && !r.bad; i++)
        take_str(&r, take32(&r));
    take(&r, nd * alen);
    if (r.bad)
        return EINVAL;
    uintptr_t p0 = ((uintptr_t)buf + 7) & ~(uintptr_t)7;
    size_t need = (p0 - (uintptr_t)buf) + (na + 1 + nd + 1) * sizeof(char *) + nd * alen +
                  nl + (r.off - start - nd * alen - na * 4);
    if (need > buflen)
        return ERANGE;
    char **aliases = (char **)p0, **addrs = aliases + na + 1;
    char *o = (char *)(addrs + nd + 1);
    r.off = start;
    for (uint32_t i = 0; i < na; i++) {
        uint32_t l = take32(&r);
        aliases[i] = memcpy(o, take(&r, l), l);
        o += l;
    }
    aliases[na] = NULL;
    const char *ad = take(&r, nd * alen);
    for (uint32_t i = 0; i < nd; i++) {
        addrs[i] = memcpy(o, ad + i * alen, alen);
        o += alen;
    }
    addrs[nd] = NULL;
    *he = (struct hostent){ .h_name = memcpy(o, name, nl), .h_aliases = aliases,
                            .h_addrtype = head[1], .h_length = head[2], .h_addr_list = addrs };
    return 0;
}

enum host_kind { HK_NAME, HK_NAME2, HK_ADDR, HK_NAME_R, HK_NAME2_R, HK_ADDR_R };

static const enum site host_sites[] = { S_gethostbyname, S_gethostbyname2, S_gethostbyaddr,
                                        S_gethostbyname_r, S_gethostbyname2_r,
                                        S_gethostbyaddr_r };

struct host_args {
    enum host_kind kind;
    const char *name;
    int af;                    /* gethostbyname2*, gethostbyaddr*: the type */
    const void *addr;          /* gethostbyaddr* */
    socklen_t alen;
    struct hostent *ret;       /* the _r functions */
    char *buf;
    size_t buflen;
    struct hostent **result;
    int *h_errnop;
};

/* The real call: returns what the function returns (the _r ones) or 0/-1 (the others), with
 * the entry in *@he and h_errno in *@herr. */
static int host_real(const struct host_args *a, struct hostent **he, int *herr)
{
    switch (a->kind) {
    case HK_NAME:
        *he = REAL(gethostbyname, gethostbyname_fn)(a->name);
        break;
    case HK_NAME2:
        *he = REAL(gethostbyname2, gethostbyname2_fn)(a->name, a->af);
        break;
    case HK_ADDR:
        *he = REAL(gethostbyaddr, gethostbyaddr_fn)(a->addr, a->alen, a->af);
        break;
    case HK_NAME_R: {
        int r = REAL(gethostbyname_r, gethostbyname_r_fn)(a->name, a->ret, a->buf, a->buflen,
                                                          a->result, a->h_errnop);
        *he = *a->result;
        *herr = *a->h_errnop;
        return r;
    }
    case HK_NAME2_R: {
        int r = REAL(gethostbyname2_r, gethostbyname2_r_fn)(a->name, a->af, a->ret, a->buf,
                                                            a->buflen, a->result, a->h_errnop);
        *he = *a->result;
        *herr = *a->h_errnop;
        return r;
    }
    case HK_ADDR_R: {
        int r = REAL(gethostbyaddr_r, gethostbyaddr_r_fn)(a->addr, a->alen, a->af, a->ret,
                                                          a->buf, a->buflen, a->result,
                                                          a->h_errnop);
        *he = *a->result;
        *herr = *a->h_errnop;
        return r;
    }
    }
    *herr = h_errno;
    return *he ? 0 : -1;
}

/* glibc's gethostbyname & co. return a static entry; so do their replays. */
static struct hostent static_he;
static char *static_buf;
static size_t static_cap;

static int host_call(const struct host_args *a, struct hostent **out, int *herr)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return host_real(a, out, herr);
    bool reentrant = a->kind >= HK_NAME_R;
    enum site k = host_sites[a->kind];
    unsigned char *mem = malloc(RESOLVE_CAP + 1024);
    if (!mem) {
        tt_rt_guard_leave();
        return host_real(a, out, herr);
    }
    struct wr q = { mem + RESOLVE_CAP, 0, 1024, false };
    int32_t qv[3] = { a->af, (int32_t)a->alen, (int32_t)a->buflen };
    put(&q, qv, sizeof qv);
    if (a->kind == HK_ADDR || a->kind == HK_ADDR_R)
        put(&q, a->addr, a->alen < NAME_CAP ? a->alen : NAME_CAP);
    else
        put_cstr(&q, a->name);
    struct wr ans = { mem, 0, RESOLVE_CAP, false };
    struct in_head h = { 0 };
    bool live = true;
    int ret = -1;
    if (query(s, k, &q)) {
        if (tt_pl_recording(s)) {
            ret = host_real(a, out, herr);
            h.ret = ret;
            h.err = errno;
            h.flags = (uint32_t)*herr;
            he_put(&ans, ret == 0 ? *out : NULL);
            answer(s, k, &h, &ans);
            live = false;
        } else if (answer(s, k, &h, &ans)) {
            ret = (int)h.ret;
            *herr = (int)h.flags;
            errno = h.err;
            bool found = false;
            *out = NULL;
            struct hostent *he = reentrant ? a->ret : &static_he;
            char *buf = reentrant ? a->buf : static_buf;
            size_t cap = reentrant ? a->buflen : static_cap;
            int lr = ret == 0 ? he_get(&ans, he, buf, cap, &found) : 0;
            if (lr == ERANGE && !reentrant && ans.len < SIZE_MAX / 2) {
                /* the static buffer grows to what the entry needs */
                char *nb = realloc(static_buf, 2 * ans.len + 64);
                if (nb) {
                    static_buf = nb;
                    static_cap = 2 * ans.len + 64;
                    lr = he_get(&ans, he, static_buf, static_cap, &found);
                }
            }
            if (lr == 0 && found)
                *out = he;
            else if (lr) {
                ret = reentrant ? lr : -1;
                *herr = NETDB_INTERNAL;
            }
            live = false;
        }
    }
    int e = errno;
    free(mem);
    tt_rt_guard_leave();
    if (live)
        return host_real(a, out, herr);
    errno = e;
    return ret;
}

static struct hostent *host_plain(const struct host_args *a)
{
    struct hostent *he = NULL;
    int herr = 0;
    host_call(a, &he, &herr);
    h_errno = herr;
    return he;
}

static int host_r(const struct host_args *a)
{
    struct hostent *he = NULL;
    int herr = 0;
    int r = host_call(a, &he, &herr);
    *a->result = he;
    *a->h_errnop = herr;
    return r;
}

TT_EXPORT struct hostent *gethostbyname(const char *name)
{
    struct host_args a = { .kind = HK_NAME, .name = name };
    return host_plain(&a);
}

TT_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
    struct host_args a = { .kind = HK_NAME2, .name = name, .af = af };
    return host_plain(&a);
}

TT_EXPORT struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type)
{
    struct host_args a = { .kind = HK_ADDR, .addr = addr, .alen = len, .af = type };
    return host_plain(&a);
}

TT_EXPORT int gethostbyname_r(const char *restrict name, struct hostent *restrict ret,
                              char *restrict buf, size_t buflen,
                              struct hostent **restrict result, int *restrict h_errnop)
{
    struct host_args a = { .kind = HK_NAME_R, .name = name, .ret = ret, .buf = buf,
                           .buflen = buflen, .result = result, .h_errnop = h_errnop };
    return host_r(&a);
}

TT_EXPORT int gethostbyname2_r(const char *restrict name, int af, struct hostent *restrict ret,
                               char *restrict buf, size_t buflen,
                               struct hostent **restrict result, int *restrict h_errnop)
{
    struct host_args a = { .kind = HK_NAME2_R, .name = name, .af = af, .ret = ret, .buf = buf,
                           .buflen = buflen, .result = result, .h_errnop = h_errnop };
    return host_r(&a);
}

TT_EXPORT int gethostbyaddr_r(const void *restrict addr, socklen_t len, int type,
                              struct hostent *restrict ret, char *restrict buf, size_t buflen,
                              struct hostent **restrict result, int *restrict h_errnop)
{
    struct host_args a = { .kind = HK_ADDR_R, .addr = addr, .alen = len, .af = type,
                           .ret = ret, .buf = buf, .buflen = buflen, .result = result,
                           .h_errnop = h_errnop };
    return host_r(&a);
}
