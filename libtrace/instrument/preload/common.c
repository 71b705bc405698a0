/* SPDX-License-Identifier: MIT */
/* What the families share: the interned sites, and the record and replay of an input call
 * (struct in_head, then the address area, then the data in pieces; preload.h describes the
 * layout).
 */
#include "preload.h"

#include <stdlib.h>
#include <string.h>

const char *const tt_pl_site_names[S_COUNT_] = {
#define X(n) #n,
#define Y(n, name) name,
    SITES(X) CLOCK_SITES(Y) CLOCK_RES_SITES(Y)
#undef X
#undef Y
};

_Atomic uint32_t tt_pl_site_ids[S_COUNT_];

void tt_pl_sites_forget_(void)
{
    for (size_t k = 0; k < S_COUNT_; k++)
        atomic_store_explicit(&tt_pl_site_ids[k], 0, memory_order_relaxed);
}

/* tt_pl_site_id's first use of @k */
uint32_t tt_pl_site_intern_(tt_session *s, enum site k)
{
    uint32_t id = 0;
    if (tt_intern(s, TT_OBJ_SITE, tt_pl_site_names[k], &id) != TT_OK)
        return 0;
    atomic_store_explicit(&tt_pl_site_ids[k], id, memory_order_relaxed);
    return id;
}

/* A walk over an iovec, for gathering (record) and scattering (replay). */
struct cursor {
    const struct iovec *iov;
    int cnt, i;
    size_t off;
};

/* Copies @n bytes between the cursor's buffers and @p; @to_iov says which way. */
static void cursor_copy(struct cursor *c, char *p, size_t n, bool to_iov)
{
    while (n && c->i < c->cnt) {
        size_t room = c->iov[c->i].iov_len - c->off;
        size_t k = n < room ? n : room;
        char *q = (char *)c->iov[c->i].iov_base + c->off;
        if (k) {
            if (to_iov)
                memcpy(q, p, k);
            else
                memcpy(p, q, k);
        }
        p += k;
        n -= k;
        c->off += k;
        if (c->off == c->iov[c->i].iov_len) {
            c->i++;
            c->off = 0;
        }
    }
}

/* A scratch buffer: on the stack when small, else from the real malloc (the guard is held). */
struct scratch {
    char *p;
    char small[1024];
};

static char *scratch_get(struct scratch *b, size_t n)
{
    b->p = n <= sizeof b->small ? b->small : malloc(n);
    return b->p;
}

static void scratch_put(struct scratch *b)
{
    if (b->p && b->p != b->small)
        free(b->p);
}

int tt_pl_in_record(tt_session *s, uint32_t ch, enum site k, const struct in_head *h,
                    bool name_area, const void *name, const struct iovec *iov, int cnt)
{
    size_t area = name_area ? NAME_CAP : 0;
    size_t first = h->len < PIECE ? (size_t)h->len : PIECE;
    size_t need = sizeof *h + area + first;
    struct scratch sb;
    char *buf = scratch_get(&sb, need);
    if (!buf)
        return TT_E_NOMEM;
    memcpy(buf, h, sizeof *h);
    if (area) {
        memset(buf + sizeof *h, 0, area);
        if (h->namebytes)
            memcpy(buf + sizeof *h, name, h->namebytes);
    }
    struct cursor c = { iov, cnt, 0, 0 };
    cursor_copy(&c, buf + sizeof *h + area, first, false);
    int rc = tt_pl_io_event(s, TT_IO_IN, ch, k, buf, need, NULL);
    for (uint64_t done = first; rc == TT_OK && done < h->len;) {
        size_t n = h->len - done < PIECE ? (size_t)(h->len - done) : PIECE;
        cursor_copy(&c, buf, n, false);
        rc = tt_pl_io_event(s, TT_IO_IN, ch, k, buf, n, NULL);
        done += n;
    }
    scratch_put(&sb);
    return rc;
}

int tt_pl_in_replay(tt_session *s, uint32_t ch, enum site k, struct in_head *h, bool name_area,
                    void *name, const struct iovec *iov, int cnt)
{
    size_t area = name_area ? NAME_CAP : 0;
    size_t room = tt_pl_iov_total(iov, cnt);
    size_t first_cap = room < PIECE ? room : PIECE;
    size_t cap = sizeof *h + area + first_cap;
    struct scratch sb;
    char *buf = scratch_get(&sb, cap);
    if (!buf)
        return TT_E_NOMEM;
    size_t got = 0;
    int rc = tt_pl_io_event(s, TT_IO_IN, ch, k, buf, cap, &got);
    if (rc != TT_OK)
        goto out;
    if (got < sizeof *h) {
        rc = TT_E_CORRUPT;
        goto out;
    }
    memcpy(h, buf, sizeof *h);
    size_t first = h->len < PIECE ? (size_t)h->len : PIECE;
    if (h->namebytes > area || got != sizeof *h + area + first) {
        rc = TT_E_CORRUPT;
        goto out;
    }
    if (area)
        memcpy(name, buf + sizeof *h, area);
    struct cursor c = { iov, cnt, 0, 0 };
    cursor_copy(&c, buf + sizeof *h + area, first, true);
    for (uint64_t done = first; done < h->len;) {
        size_t want = h->len - done < PIECE ? (size_t)(h->len - done) : PIECE;
        size_t left = done < room ? room - (size_t)done : 0;
        size_t ask = want < left ? want : left;
        rc = tt_pl_io_event(s, TT_IO_IN, ch, k, buf, ask, &got);
        if (rc != TT_OK)
            goto out;
        if (got != want) {
            rc = TT_E_CORRUPT;
            goto out;
        }
        cursor_copy(&c, buf, want, true);
        done += want;
    }
out:
    scratch_put(&sb);
    return rc;
}

bool tt_pl_in_simple(tt_session *s, uint32_t ch, enum site k, struct in_head *h,
                     const struct iovec *iov, int cnt)
{
    int rc = tt_pl_recording(s) ? tt_pl_in_record(s, ch, k, h, false, NULL, iov, cnt)
                                : tt_pl_in_replay(s, ch, k, h, false, NULL, iov, cnt);
    if (rc == TT_OK)
        return true;
    tt_rt_failed(rc, tt_pl_site_names[k]);
    return tt_pl_recording(s);
}
