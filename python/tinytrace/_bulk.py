# SPDX-License-Identifier: MIT
"""Every event of a trace at once, as columns (Trace.arrays).

With numpy the event chunks are decoded as arrays, not event by event. An event's length
depends on its own bytes (a one-byte short tag, or a tag and varints, and for long kinds a
payload), so where the events of a chunk start is only known by walking them. Here every byte
of every chunk body is first taken as the start of an event, and the position of the next event
computed for all of them at once (`nxt`, a few array operations per field of §5.2). The events
are then the positions reachable from each chunk's first event by following `nxt`; those are
found by pointer doubling: with J = nxt^(2^k), the set of the first 2^(k+1) events of each chunk
is the set of the first 2^k and their images under J, and J^(2^(k+1)) = J[J]. That takes
log2(the most events in a chunk) passes over the bodies instead of one Python step per event.
The fields are then read at those positions, the functions of FSAME events filled forward and
the times summed, per chunk. Each chunk must yield its header's count of events ending at its
end (or in a split payload, §6), or the trace is refused as corrupt.

Without numpy the columns are array.array, filled from Trace.events.
"""
import array

from . import _format as F

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    np = None

PAD = 16  # zero bytes after each body: a varint read past its chunk's end stops in them
MAIN = ("seq", "thread", "time", "kind", "function")
LONG = ("dir", "site", "arg", "addr", "payload_len")
COLUMNS = MAIN + LONG


class EventArrays:
    """The events of a trace as columns, all of one length: seq, thread, time (ticks since the
    session opened), kind, dir (io: 0 in, 1 out), function, site, arg, addr, payload_len;
    numpy arrays when numpy is installed (else array.array). payload(i) gives the payload of
    event i; time_ns() the times in nanoseconds; kind_name(k) names a kind. epoch, made on first
    use, holds each event's epoch (§15.4: the restores at or before it; all 0 without any).

    Only the events of the long kinds (§5.3: all but enter and exit) have a direction, a site,
    an arg, an addr or a payload; with numpy those five columns are made on first use from the
    long events' own values (long_rows, the rows of the long events, and long_values), so that
    a trace of 10^7 calls does not hold 10^7 zeros five times over unless asked to. The other
    columns are as wide as the file needs (seq in 32 bits, thread in 16, when they fit)."""

    def __init__(self, trace, cols, long_rows=None, long_values=None, payloads=None,
                 split=None):
        self._trace = trace
        self.ticks_per_sec = trace.ticks_per_sec
        for name in MAIN:
            setattr(self, name, cols[name])
        self._payloads = payloads
        self._split = split or {}
        self.long_rows = long_rows
        self.long_values = long_values
        if long_rows is None:  # array.array columns: all there
            for name in LONG:
                setattr(self, name, cols[name])

    def __getattr__(self, name):
        if name == "epoch":
            col = self._epochs()
            self.epoch = col
            return col
        # the long-kind columns, made on first use (numpy only)
        if name in LONG and self.__dict__.get("long_rows") is not None:
            v = self.long_values[name]
            col = np.zeros(len(self.seq), dtype=v.dtype)
            col[self.long_rows] = v
            setattr(self, name, col)
            return col
        raise AttributeError(name)

    def __len__(self):
        return len(self.seq)

    def _epochs(self):
        # one pass per restore (a trace has few): the events after it in (time, thread, seq)
        keys = self._trace._restore_keys
        if np is None or not isinstance(self.time, np.ndarray):
            import bisect
            return array.array("I", (bisect.bisect_right(keys, k) for k in
                                     zip(self.time, self.thread, self.seq)))
        e = np.zeros(len(self.seq), dtype=np.uint32)
        for tm, th, sq in keys:
            tm, th, sq = np.uint64(tm), np.uint64(th), np.uint64(sq)
            e += ((self.time > tm) | ((self.time == tm) & (
                (self.thread > th) | ((self.thread == th) & (self.seq >= sq))))).astype(np.uint32)
        return e

    def payload(self, i):
        """The payload bytes of event @i."""
        if self._payloads is not None:
            return self._payloads[i]
        i = int(i)
        if i in self._split:
            return self._split[i]
        k = int(np.searchsorted(self.long_rows, i))
        if k == len(self.long_rows) or self.long_rows[k] != i:
            return b""
        off, n = int(self.long_values["payload_offset"][k]), \
            int(self.long_values["payload_len"][k])
        return bytes(self._trace._mv[off:off + n])

    def time_ns(self):
        """The times in nanoseconds since the session opened (exact: the division of ticks by
        the tick rate in two parts, each within 64 bits)."""
        tps = self.ticks_per_sec
        if np is None or not isinstance(self.time, np.ndarray):
            return array.array("Q", (t * 1000000000 // tps for t in self.time))
        t = self.time
        q, r = t // np.uint64(tps), t % np.uint64(tps)
        return q * np.uint64(1000000000) + (r * np.uint64(1000000000)) // np.uint64(tps)

    @staticmethod
    def kind_name(k):
        return F.KIND_NAMES[int(k)]


def event_arrays(trace, order="thread"):
    if order not in ("thread", "recorded", "file"):
        raise ValueError("order is 'thread', 'recorded' or 'file', not %r" % (order,))
    if np is None:
        return _pure(trace, order)
    return _numpy(trace, order)


def _pure(trace, order):
    cols = {"seq": array.array("Q"), "thread": array.array("I"), "time": array.array("Q"),
            "kind": array.array("B"), "dir": array.array("B"), "function": array.array("I"),
            "site": array.array("I"), "arg": array.array("Q"), "addr": array.array("Q"),
            "payload_len": array.array("Q")}
    payloads = []
    it = trace.events(order="recorded" if order == "recorded" else "thread")
    for e in it:
        cols["seq"].append(e.seq)
        cols["thread"].append(e.thread)
        cols["time"].append(e.time)
        cols["kind"].append(e.kind)
        cols["dir"].append(e.dir)
        cols["function"].append(e.function)
        cols["site"].append(e.site)
        cols["arg"].append(e.arg)
        cols["addr"].append(e.addr)
        cols["payload_len"].append(len(e.payload))
        payloads.append(e.payload)
    return EventArrays(trace, cols, payloads=payloads)


def _varint_at(b, p, count=10):
    """The varints starting at positions @p of @b (uint8, padded): their values (uint64) and
    lengths (bytes). A value that needs more than 64 bits wraps; the lengths are capped at
    @count bytes. Each step looks only at the varints that go on (most are one byte)."""
    c = b[p]
    val = (c & np.uint8(0x7F)).astype(np.uint64)
    n = np.ones(len(p), dtype=np.int32)
    live = np.flatnonzero(c >= 0x80)
    for i in range(1, count):
        if len(live) == 0:
            break
        c = b[p[live] + i]
        val[live] |= (c & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * i)
        n[live] += 1
        live = live[c >= 0x80]
    return val, n


BATCH = 1 << 20  # chunk bodies decoded together: the arrays of a batch stay in the caches


def _numpy(trace, order):
    chunks = [h for t in range(len(trace.threads)) for h in trace._chunks[t]]
    chunks.sort(key=lambda h: h.offset)  # file order
    batches, cur, size = [], [], 0
    for h in chunks:
        if cur and size + h.body_len > BATCH:
            batches.append(cur)
            cur, size = [], 0
        cur.append(h)
        size += h.body_len + PAD
    if cur:
        batches.append(cur)
    # the columns are filled in place, each event at its row in thread order (the threads one
    # after the other, each in sequence order: every sequence number is there once, §5.4), or
    # in file order; sequence numbers in 32 bits when they fit (they nearly always do)
    total = sum(t.event_count for t in trace.threads)
    dtypes = {"seq": "u8", "thread": "u4", "time": "u8", "kind": "u1", "function": "u4"}
    if max([t.event_count for t in trace.threads] + [0]) < 2 ** 32:
        dtypes["seq"] = "u4"
    if len(trace.threads) <= 2 ** 16:
        dtypes["thread"] = "u2"
    cols = {k: np.empty(total, dtype=dtypes[k]) for k in MAIN}
    first_row = np.zeros(len(trace.threads), dtype=np.uint64)
    if len(trace.threads) > 1:
        first_row[1:] = np.cumsum([t.event_count for t in trace.threads], dtype=np.uint64)[:-1]
    per = np.zeros(len(trace.threads), dtype=np.int64)
    split, done = {}, 0
    long_rows, long_parts = [], []
    for bt in batches:
        c, li, lv, sp = _decode(trace, bt)
        n = len(c["seq"])
        if n == 0:
            continue
        per += np.bincount(c["thread"], minlength=len(trace.threads))
        if order == "file":
            rows = slice(done, done + n)
        elif len({h.thread for h in bt}) == 1:
            # one thread's consecutive chunks: consecutive sequence numbers (checked when the
            # trace was opened), so one run of rows
            r0 = int(first_row[bt[0].thread]) + int(c["seq"][0])
            rows = slice(r0, r0 + n)
        else:
            rows = (first_row[c["thread"]] + c["seq"]).astype(np.int64)
        for k in MAIN:
            cols[k][rows] = c[k]
        if isinstance(rows, slice):
            lr = li + rows.start
        else:
            lr = rows[li]
        long_rows.append(lr)
        long_parts.append(lv)
        for j, pl in sp.items():
            split[int(rows.start + j if isinstance(rows, slice) else rows[j])] = pl
        done += n
    for t, row in enumerate(trace.threads):
        if per[t] != row.event_count:
            trace._fail(F.CountsError, "thread %d: %d events decoded, the row says %d"
                        % (t, per[t], row.event_count))
    names = LONG + ("payload_offset",)
    if long_rows:
        lrows = np.concatenate(long_rows).astype(np.int64)
        lvals = {k: np.concatenate([p[k] for p in long_parts]) for k in names}
    else:
        lrows = np.zeros(0, dtype=np.int64)
        lvals = {k: np.zeros(0, dtype=np.uint64) for k in names}
    if order == "recorded":
        perm = np.lexsort((cols["seq"], cols["thread"], cols["time"]))
        cols = {k: v[perm] for k, v in cols.items()}
        inv = np.empty_like(perm)
        inv[perm] = np.arange(len(perm))
        lrows = inv[lrows]
        split = {int(inv[j]): p for j, p in split.items()}
    o = np.argsort(lrows, kind="stable")
    lrows = lrows[o]
    lvals = {k: v[o] for k, v in lvals.items()}
    return EventArrays(trace, cols, long_rows=lrows, long_values=lvals, split=split)


def _sync_again(kinds, chunk, again, arg, addr, b, step_at):
    """Fills in the object (arg) and addr of the "sync again" events (kind 16, §5.2) among
    long events of @kinds in event order, whose chunks are @chunk: each takes the object of
    its chunk's previous sync event (0 if none) and adds its step to that event's addr."""
    si = np.flatnonzero((kinds == F.SYNC) | again)      # the sync events, in order
    ag = again[si]
    step = np.zeros(len(si), dtype=np.uint64)
    v, _ = _varint_at(b, step_at[si[ag]])
    step[ag] = (v >> np.uint64(1)) ^ (np.uint64(0) - (v & np.uint64(1)))
    ch = chunk[si]
    first = np.r_[True, ch[1:] != ch[:-1]]
    src = np.maximum.accumulate(np.where(~ag | first, np.arange(len(si)), 0))
    with np.errstate(over="ignore"):
        cs = np.cumsum(step, dtype=np.uint64)
        base = np.where(ag[src], np.uint64(0), addr[si[src]])
        obj = np.where(ag[src], np.uint64(0), arg[si[src]])
        val = base + (cs - (cs[src] - step[src]))
    w = si[ag]
    arg[w] = obj[ag]
    addr[w] = val[ag]


def _decode(trace, chunks):
    """The events of @chunks (a batch, in file order): (columns, payload offsets, split
    payloads by index)."""
    def corrupt(msg, off=None):
        trace._fail(F.CorruptError, msg, off)

    C = len(chunks)
    mv = trace._mv
    pad = bytes(PAD)
    parts = []
    for h in chunks:
        parts.append(mv[h.offset + F.HEADER_SIZE:h.offset + F.HEADER_SIZE + h.body_len])
        parts.append(pad)
    b = np.frombuffer(b"".join(parts), dtype=np.uint8)
    N = len(b)
    i32 = np.int32
    lens = np.array([h.body_len for h in chunks], dtype=np.int64)
    starts = np.zeros(C, dtype=np.int64)
    starts[1:] = np.cumsum(lens + PAD)[:-1]
    ends = starts + lens
    counts = np.array([h.count for h in chunks], dtype=np.int64)
    conts = np.array([h.cont_len for h in chunks], dtype=np.int64)
    cont_out = np.array([bool(h.flags & F.CONT_OUT) for h in chunks])
    end_of = np.repeat(ends.astype(i32), lens + PAD)  # the end of each byte's chunk

    # the position after the varint that starts at each position (it ends at a byte < 0x80;
    # the padding's zeros end every varint that runs off its chunk)
    ar = np.arange(N, dtype=i32)
    term = b < 0x80
    after = np.minimum.accumulate(np.where(term, ar, i32(N - 1))[::-1])[::-1] + i32(1)
    np.minimum(after, i32(N - 1), out=after)

    # each byte taken as a tag (§5.2): where the next event would start
    kind = b & np.uint8(0x1F)
    fsame = (b & np.uint8(0x20)) != 0
    p2 = np.empty_like(after)                         # after dt: after[p + 1]
    p2[:-1] = after[1:]
    p2[-1] = N - 1
    p3 = np.where(fsame, p2, after[p2])               # after the function
    nxt = np.where(term, p3, ar + i32(1))
    kmax = F.tag_kind_max(trace._m["version"])
    cand = np.flatnonzero(term & (kind >= 1) & (kind <= kmax) & (kind != 5) &
                          (kind != 6) & (kind != F.SYNC_AGAIN))
    if kmax >= F.SYNC_AGAIN:                          # site and step, no payload (§5.2)
        ag = np.flatnonzero(term & (kind == F.SYNC_AGAIN))
        nxt[ag] = after[after[p3[ag]]]
        del ag
    q = after[after[after[p3[cand]]]]                 # site, arg, addr: at the length
    ln, lnlen = _varint_at(b, q)
    raw = q.astype(np.int64) + lnlen + np.minimum(ln, np.uint64(N)).astype(np.int64)
    nxt[cand] = np.minimum(raw, N + 1).astype(i32)
    del q, ln, lnlen, raw, cand
    raw_next = nxt                                    # a split payload runs past its end
    sentinel = i32(N)
    nxt_s = np.append(np.where(nxt >= end_of, sentinel, nxt), sentinel)

    # the events reachable from each chunk's first one: every m-th of them (m = 2^j) by
    # walking J = nxt^m from the first, all chunks at once (J by j doublings), then the m - 1
    # events after each of those by nxt; j is the smallest that keeps the walk to 512 steps
    first = (starts + conts)[counts > 0].astype(i32)
    most = int(counts.max())
    j = 0
    while (most >> j) > 512:
        j += 1
    J = nxt_s
    for _ in range(j):
        J = J[J]
    m = 1 << j
    anchors = [first]
    cur = first
    for _ in range((most + m - 1) // m):
        cur = J[cur]
        cur = cur[cur != sentinel]
        if len(cur) == 0:
            break
        anchors.append(cur)
    del J
    cur = np.concatenate(anchors)
    have = [cur]
    for _ in range(m - 1):
        cur = nxt_s[cur]
        cur = cur[cur != sentinel]
        if len(cur) == 0:
            break
        have.append(cur)
    mask = np.zeros(N + 1, dtype=bool)
    for h_ in have:
        mask[h_] = True
    E = np.flatnonzero(mask[:N])
    got = np.add.reduceat(mask[:N].view(np.uint8), starts, dtype=np.int64)
    ec = np.repeat(np.arange(C), got)                  # the chunk of each event
    bad = np.flatnonzero(got != counts)
    if len(bad):
        h = chunks[bad[0]]
        corrupt("a chunk of thread %d decodes to %d events, its header says %d"
                % (h.thread, got[bad[0]], h.count), h.offset)
    nE = len(E)
    if nE == 0:
        z = np.zeros(0, dtype=np.uint64)
        return ({k: z for k in MAIN}, np.zeros(0, dtype=np.int64),
                {k: z for k in LONG + ("payload_offset",)}, {})
    # the last event of each chunk ends at its end, or (CONT_OUT) in a split payload (§6)
    chunk_first = np.r_[True, ec[1:] != ec[:-1]]
    lastE = np.flatnonzero(np.r_[ec[1:] != ec[:-1], True])
    lc = ec[lastE]
    lend = raw_next[E[lastE]].astype(np.int64)
    wrong = np.where(cont_out[lc], lend <= ends[lc], lend != ends[lc])
    if wrong.any():
        corrupt("the events do not end at the chunk's end", chunks[lc[np.flatnonzero(wrong)[0]]]
                .offset)

    # the fields
    tag = b[E]
    short = tag >= 0x80
    fullE = ~short
    kindE = np.where(short, 5 + ((tag >> 6) & 1), tag & 0x1F).astype(np.uint8)
    outE = (tag & 0x40) != 0
    if (fullE & ((kindE < 1) | (kindE > kmax) |
                  (outE & (kindE != F.IO) & (kindE != F.SYNC) &
                   (kindE != F.SYNC_AGAIN)))).any():
        corrupt("a bad event tag")
    dirE = (fullE & outE).astype(np.uint8)
    dt = (tag & np.uint8(0x3F)).astype(np.uint64)
    fi = np.flatnonzero(fullE)
    dt[fi] = _varint_at(b, E[fi] + 1)[0]
    # functions: decoded where FSAME is clear, else the previous event's (0 at a chunk's start)
    has_fn = fullE & ((tag & 0x20) == 0)
    fnv = np.zeros(nE, dtype=np.uint64)
    hf = np.flatnonzero(has_fn)
    fnv[hf] = _varint_at(b, p2[E[hf]])[0]
    if (fnv > np.uint64(0xFFFFFFFF)).any():
        corrupt("a function id beyond 32 bits")
    src = np.maximum.accumulate(np.where(has_fn | chunk_first, np.arange(nE), 0))
    function = fnv[src].astype(np.uint32)
    # times: the chunk's base time plus the running sum of dt within the chunk
    live_c = np.flatnonzero(got)            # the chunks with events, in order
    cnt = got[live_c]
    fpos = np.flatnonzero(chunk_first)      # their first events
    base = np.array([h.base_time for h in chunks], dtype=np.uint64)
    with np.errstate(over="ignore"):
        cs = np.cumsum(dt, dtype=np.uint64)
        time = cs + np.repeat(base[live_c] - (cs[fpos] - dt[fpos]), cnt)
    # long kinds: site, arg, addr, payload length and where the payload begins; a "sync again"
    # (kind 16) has site and a step of addr from the chunk's previous sync event, whose object
    # it shares, and no payload
    li = np.flatnonzero(fullE & (kindE != 5) & (kindE != 6))
    at = p3[E[li]].astype(np.int64)
    site, n1 = _varint_at(b, at)
    again = kindE[li] == F.SYNC_AGAIN
    arg = np.zeros(len(li), dtype=np.uint64)
    addr = np.zeros(len(li), dtype=np.uint64)
    plen = np.zeros(len(li), dtype=np.uint64)
    pstart = at + n1
    nl = np.flatnonzero(~again)
    q = at[nl] + n1[nl]
    arg[nl], n2 = _varint_at(b, q)
    addr[nl], n3 = _varint_at(b, q + n2)
    plen[nl], n4 = _varint_at(b, q + n2 + n3)
    pstart[nl] = q + n2 + n3 + n4
    if again.any():
        _sync_again(kindE[li], ec[li], again, arg, addr, b, at + n1)
        kindE[li[again]] = F.SYNC
    del nl, q
    body_off = np.array([h.offset + F.HEADER_SIZE for h in chunks], dtype=np.int64)
    poff = body_off[ec[li]] + (pstart - starts[ec[li]])
    if (site > np.uint64(0xFFFFFFFF)).any() or \
            (plen > np.uint64(trace._m["largest_event"])).any():
        corrupt("a site id or payload length out of range")
    seqs = np.array([h.first_seq for h in chunks], dtype=np.uint64)
    with np.errstate(over="ignore"):
        seq = np.arange(nE, dtype=np.uint64) + np.repeat(seqs[live_c] - fpos.astype(np.uint64),
                                                         cnt)
    thread = np.repeat(np.array([h.thread for h in chunks], dtype=np.uint32)[live_c], cnt)
    # split payloads (§6): the rest is the continuation of the thread's next chunks
    split = {}
    for k in np.flatnonzero(raw_next[E[li]] > end_of[E[li]]).tolist():
        j = int(li[k])
        h = chunks[int(ec[j])]
        mine = trace._chunks[h.thread]
        ci = next(i for i, c in enumerate(mine) if c.offset == h.offset)
        body_end = h.offset + F.HEADER_SIZE + h.body_len
        pieces = [bytes(mv[int(poff[k]):body_end])]
        rest = int(plen[k]) - len(pieces[0])
        for h2 in mine[ci + 1:]:
            take = min(rest, h2.body_len)
            if h2.cont_len != take:
                corrupt("a continuation of %d bytes where %d are due" % (h2.cont_len, take),
                        h2.offset)
            pieces.append(bytes(mv[h2.offset + F.HEADER_SIZE:h2.offset + F.HEADER_SIZE + take]))
            rest -= take
            if rest == 0:
                break
        if rest:
            trace._fail(F.TruncatedError, "thread %d ends inside a split payload" % h.thread)
        split[j] = b"".join(pieces)
    cols = {"seq": seq, "thread": thread, "time": time, "kind": kindE, "function": function}
    lv = {"dir": dirE[li], "site": site.astype(np.uint32), "arg": arg, "addr": addr,
          "payload_len": plen, "payload_offset": poff}
    return cols, li, lv, split
