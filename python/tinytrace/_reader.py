# SPDX-License-Identifier: MIT
"""Reading a trace file: the manifest, the chunk walk, the tables, the index, and the events and
frames decoded one at a time (docs/FORMAT.md; the section numbers below are its own).

Opening a trace reads and checks everything but the event and frame bodies: the manifest (§3,
§10.2), every chunk header of the data area and its checksum (§4, §10.3-10.4), the events
checksum (§9), the thread and object tables (§7), the index directory and summary (§14), and the
checkpoint table (version 4, §15), from which every event has its epoch. The
events are decoded when they are asked for, with the checks of §10.4 (sequence, continuation,
sizes, the end of every chunk) and the thread rows' counts at the end of each thread (§10.5).
"""
import bisect
import collections
import heapq
import mmap
import os

from . import _format as F
from ._xxh3 import hash64

Event = collections.namedtuple(
    "Event", "seq thread time kind dir function site arg addr payload epoch", defaults=(0,))
Event.__doc__ = """One event: its thread's sequence number, the thread, the time in ticks since
the session opened (Trace.ns converts), the kind number (KIND_NAMES), the io direction (0 in,
1 out; 0 for other kinds), the function and site ids, arg, addr, the payload bytes, and its
epoch (§15.4: the restores at or before it in the recorded order; 0 in a file without any)."""
Event.kind_name = property(lambda e: F.KIND_NAMES[e.kind])

Frame = collections.namedtuple(
    "Frame", "thread index function depth outcome desc kids start duration chunk_offset")
Frame.__doc__ = """One call (§14.3): frame number @index of @thread in post-order (its subtree is
[index - desc, index]), function id, depth (0 for a top-level call), outcome (0 returned,
1 crashed, 2 open, 3 abandoned), descendants, direct children, start and duration in ticks, and
the offset of the event chunk that holds its enter event."""
Frame.end = property(lambda f: f.start + f.duration)
Frame.outcome_name = property(lambda f: F.OUTCOMES[f.outcome])

Thread = collections.namedtuple(
    "Thread", "id os_tid name name_id flags event_count chunk_count first_time last_time")

Checkpoint = collections.namedtuple(
    "Checkpoint", "number thread seq time chunk_offset index site length providers epoch")
Checkpoint.__doc__ = """A row of the checkpoint table (§15.2): checkpoint @number, its event
(thread, seq, time, the event chunk at chunk_offset and its index there), its site id, its
payload length, the providers as (id, state length) pairs, and the epoch of its event."""

Restore = collections.namedtuple(
    "Restore", "epoch thread seq time chunk_offset index site checkpoint")
Restore.__doc__ = """A restore row of the checkpoint table (§15.2): the @epoch it begins, its
event (thread, seq, time, chunk, index), its site id and the number of the checkpoint
restored."""

Chunk = collections.namedtuple(
    "Chunk", "offset type flags body_len thread first_seq count cont_len base_time checksum")


class Manifest(dict):
    """The manifest's fields (§3.1) by name, also as attributes: build_id and auth as hex,
    caller as text, and flag_names."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _open_bytes(path):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class Trace:
    """A trace file, opened and checked (tinytrace.open)."""

    def __init__(self, path, verify=True):
        self.path = os.fspath(path)
        self.verify = verify
        self._buf = _open_bytes(self.path)
        self._mv = memoryview(self._buf)
        self._read_manifest()
        self.kind_max = F.kind_max(self._m["version"])
        self._walk()
        self._read_tables()
        self._index = None
        if self._m["index_offset"]:
            self._read_index()
        self.checkpoints, self.restores = [], []
        self._restore_keys = []  # (time, thread, seq) of each restore, in order
        if self._m["checkpoints_offset"]:
            self._read_checkpoints()

    # ---- errors ----
    def _fail(self, cls, msg, offset=None):
        raise cls(self.path, msg, offset)

    # ---- §3 manifest, checked in the order of §10.2 ----
    def _read_manifest(self):
        b, size = self._buf, len(self._buf)
        if size < F.MANIFEST_SIZE:
            if size >= 12 and bytes(b[:8]) != F.MAGIC:
                self._fail(F.FormatError, "not a tinytrace file", 0)
            self._fail(F.TruncatedError, "the file is shorter than a manifest (%d bytes)" % size,
                       0)
        m = dict(zip(F.MANIFEST_FIELDS, F.MANIFEST.unpack_from(b, 0)))
        if m["magic"] != F.MAGIC:
            self._fail(F.FormatError, "not a tinytrace file", 0)
        if not F.VERSION_MIN <= m["version"] <= F.VERSION_MAX:
            self._fail(F.VersionError, "file format version %d is not supported: this reader "
                       "supports versions %d to %d" % (m["version"], F.VERSION_MIN,
                                                       F.VERSION_MAX), 8)
        if m["manifest_size"] != F.MANIFEST_SIZE:
            self._fail(F.CorruptError, "manifest_size is %d, not 512" % m["manifest_size"], 12)
        if self.verify and hash64(self._mv[:504], 0) != m["checksum"]:
            self._fail(F.ChecksumError, "the manifest checksum does not match", 504)
        v = m["version"]
        reserved = bytes(b[368:504]) if v == 1 else bytes(b[396:400]) + bytes(
            b[432 if v < 4 else 456:504])
        if any(reserved):
            self._fail(F.CorruptError, "reserved manifest bytes are not zero", 368)
        if m["flags"] & ~0x1F:
            self._fail(F.CorruptError, "unknown manifest flags 0x%x" % m["flags"], 16)
        if m["write_errno"] and not m["flags"] & F.MF_INCOMPLETE:
            self._fail(F.CorruptError, "write_errno is set in a complete file", 360)
        if m["build_id_len"] > 32:
            self._fail(F.CorruptError, "build_id_len %d > 32" % m["build_id_len"], 28)
        if b"\0" not in m["caller"]:
            self._fail(F.CorruptError, "the caller string has no NUL", 64)
        if m["flags"] & F.MF_INCOMPLETE:
            self._fail(F.IncompleteError, "a write error stopped the recording (errno %d)"
                       % m["write_errno"], 360)
        if not m["flags"] & F.MF_FINALIZED:
            self._fail(F.TruncatedError, "the recording was never closed", 16)
        bs = m["block_size"]
        if bs < 4096 or bs & (bs - 1):
            self._fail(F.CorruptError, "block_size %d" % bs, 24)
        if m["data_offset"] != F.MANIFEST_SIZE:
            self._fail(F.CorruptError, "data_offset %d, not 512" % m["data_offset"], 256)
        fs = m["file_size"]
        ok = (m["data_offset"] <= m["data_end"] <= fs and m["threads_offset"] == m["data_end"]
              and 48 <= m["threads_length"] <= fs
              and m["objects_offset"] == m["threads_offset"] + m["threads_length"]
              and 48 <= m["objects_length"] <= fs
              and m["objects_offset"] + m["objects_length"] <= fs)
        if ok and m["index_offset"] == 0:
            ok = m["index_length"] == 0 and m["objects_offset"] + m["objects_length"] == fs
        elif ok:
            ok = (m["index_offset"] >= m["objects_offset"] + m["objects_length"]
                  and m["index_length"] >= 48 and m["index_offset"] + m["index_length"] == fs)
        if not ok:
            self._fail(F.CorruptError, "the file's areas do not tile it", 256)
        # version 4 (§10.2 step 12a): the checkpoint table, a chunk of the data area
        co, cl, rows = m["checkpoints_offset"], m["checkpoints_length"], \
            m["checkpoint_count"] + m["restore_count"]
        if (cl or rows) if co == 0 else (co < m["data_offset"] or cl < 48 or
                                         co > m["data_end"] or cl > m["data_end"] - co or
                                         rows == 0 or rows > (cl - 48) // 8):
            self._fail(F.CorruptError, "the checkpoint table (offset %d, %d bytes, %d rows) is "
                       "not a chunk of the data area" % (co, cl, rows), 432)
        if m["threads_length"] - 48 != 48 * m["thread_count"]:
            self._fail(F.CorruptError, "threads_length does not hold thread_count rows", 280)
        if fs != len(b):
            self._fail(F.TruncatedError, "file_size is %d, the file has %d bytes" % (fs, len(b)),
                       304)
        if m["block_count"] != (fs - F.MANIFEST_SIZE + bs - 1) // bs:
            self._fail(F.CountsError, "block_count does not match the file size", 216)
        if m["ticks_per_sec"] == 0:
            self._fail(F.CorruptError, "ticks_per_sec is 0", 312)
        if not m["largest_split"] <= m["largest_event"] <= m["payload_bytes"]:
            self._fail(F.CorruptError, "largest_split, largest_event and payload_bytes disagree",
                       232)
        self._m = m
        man = Manifest((k, v) for k, v in m.items()
                       if k not in ("magic", "reserved1", "reserved2", "build_id", "caller",
                                    "auth"))
        man["build_id"] = m["build_id"][:m["build_id_len"]].hex()
        man["caller"] = m["caller"].split(b"\0", 1)[0].decode("utf-8", "replace")
        man["auth"] = m["auth"].hex() if any(m["auth"]) else None
        man["flag_names"] = F.flag_names(m["flags"])
        lv = m["lib_version"]
        man["lib_version_string"] = "%d.%d.%d" % (lv >> 16 & 0xFF, lv >> 8 & 0xFF, lv & 0xFF)
        self.manifest = man
        self.ticks_per_sec = m["ticks_per_sec"]

    # ---- §4 chunks ----
    def _header(self, off, end, want=None):
        if off + F.HEADER_SIZE > end:
            self._fail(F.CorruptError, "a chunk header runs past its area", off)
        h = Chunk(off, *F.CHUNK.unpack_from(self._buf, off)[1:])
        magic = F.CHUNK.unpack_from(self._buf, off)[0]
        if magic != F.CHUNK_MAGIC:
            self._fail(F.CorruptError, "bad chunk magic", off)
        if not 1 <= h.type <= F.chunk_type_max(self._m["version"]) or h.flags & ~3 or \
                h.cont_len > h.body_len or \
                bool(h.flags & F.CONT_IN) != (h.cont_len != 0):
            self._fail(F.CorruptError, "a bad chunk header", off)
        if h.type != F.T_EVENTS and (h.flags or h.cont_len):
            self._fail(F.CorruptError, "flags on a chunk of type %d" % h.type, off)
        if want is not None and h.type not in want:
            self._fail(F.CorruptError, "a chunk of type %d where %s belongs" % (h.type, want),
                       off)
        if h.body_len > end - off - F.HEADER_SIZE:
            self._fail(F.CorruptError, "a chunk body runs past its area", off)
        if self.verify:
            seed = hash64(self._mv[off:off + 40], 0)
            body = self._mv[off + F.HEADER_SIZE:off + F.HEADER_SIZE + h.body_len]
            if hash64(body, seed) != h.checksum:
                self._fail(F.ChecksumError, "the checksum of a chunk of type %d does not match"
                           % h.type, off)
        return h

    def _body(self, h):
        start = h.offset + F.HEADER_SIZE
        return self._mv[start:start + h.body_len]

    # ---- §10.4 the data area, header by header ----
    def _walk(self):
        m = self._m
        n = m["thread_count"]
        self._chunks = [[] for _ in range(n)]  # event chunks of each thread, in order
        self._frame_blocks = [[] for _ in range(n)]
        self._seek_batches = 0
        self._block_lists = 0
        chain = 0
        event_chunks = 0
        largest = 0
        next_seq = [0] * n
        last_time = [0] * n
        off, end = m["data_offset"], m["data_end"]
        want = (F.T_EVENTS,) if m["version"] == 1 else (F.T_EVENTS, F.T_FRAMES, F.T_SEEK,
                                                        F.T_BLOCKLIST)
        if m["version"] >= 4:
            want += (F.T_CHECKPOINTS,)
        tables = []
        while off < end:
            h = self._header(off, end, want)
            largest = max(largest, h.body_len)
            if h.type == F.T_EVENTS:
                if h.thread >= n:
                    self._fail(F.CorruptError, "an event chunk of thread %d of %d"
                               % (h.thread, n), off)
                if h.count > h.body_len:
                    self._fail(F.CorruptError, "a chunk claims more events than bytes", off)
                if h.first_seq != next_seq[h.thread]:
                    self._fail(F.CorruptError, "thread %d's chunk starts at sequence %d, not %d"
                               % (h.thread, h.first_seq, next_seq[h.thread]), off)
                if h.count and h.base_time < last_time[h.thread]:
                    self._fail(F.CorruptError, "a chunk's base time goes back in time", off)
                if h.count:
                    last_time[h.thread] = h.base_time
                next_seq[h.thread] += h.count
                self._chunks[h.thread].append(h)
                event_chunks += 1
                if self.verify:
                    chain = hash64(h.checksum.to_bytes(8, "little"), chain)
            elif h.type == F.T_FRAMES:
                if h.thread >= n:
                    self._fail(F.CorruptError, "a frame block of thread %d" % h.thread, off)
                self._frame_blocks[h.thread].append(h)
            elif h.type == F.T_SEEK:
                self._seek_batches += 1
            elif h.type == F.T_CHECKPOINTS:
                tables.append(off)
            else:
                self._block_lists += 1
            off += F.HEADER_SIZE + h.body_len
        if off != end:
            self._fail(F.CorruptError, "the chunks do not end at data_end", off)
        if tables != ([m["checkpoints_offset"]] if m["checkpoints_offset"] else []):
            self._fail(F.CountsError, "%d checkpoint tables in the data area, where the manifest "
                       "has %s" % (len(tables), "one" if m["checkpoints_offset"] else "none"),
                       432)
        if event_chunks != m["chunk_count"]:
            self._fail(F.CountsError, "%d event chunks, the manifest says %d"
                       % (event_chunks, m["chunk_count"]), 208)
        if self.verify and chain != m["events_checksum"]:
            self._fail(F.ChecksumError, "the events checksum does not match", 336)
        self._next_seq = next_seq
        self._largest_data = largest

    # ---- §7 tables ----
    def _read_tables(self):
        m = self._m
        th = self._header(m["threads_offset"], m["threads_offset"] + m["threads_length"],
                          (F.T_THREADS,))
        if th.count != m["thread_count"] or th.body_len != m["threads_length"] - 48:
            self._fail(F.CorruptError, "the thread table's header disagrees with the manifest",
                       th.offset)
        ob = self._header(m["objects_offset"], m["objects_offset"] + m["objects_length"],
                          (F.T_OBJECTS,))
        if ob.count != m["object_count"] or ob.body_len != m["objects_length"] - 48:
            self._fail(F.CorruptError, "the object table's header disagrees with the manifest",
                       ob.offset)
        largest = max(self._largest_data, th.body_len, ob.body_len)
        if largest != m["largest_chunk"]:
            self._fail(F.CountsError, "largest_chunk is %d, the largest chunk has %d bytes"
                       % (m["largest_chunk"], largest), 224)
        # objects (§7.2): ids from 1
        self.objects = {}
        body, pos, end = self._body(ob), 0, ob.body_len
        for i in range(ob.count):
            if pos >= end:
                self._fail(F.CorruptError, "the object table ends early", ob.offset + 48 + pos)
            kind = body[pos]
            r = F.varint(body, pos + 1, end)
            if not 1 <= kind <= 6 or r is None or r[0] > 65535 or r[1] + r[0] > end:
                self._fail(F.CorruptError, "a bad object entry", ob.offset + 48 + pos)
            name = bytes(body[r[1]:r[1] + r[0]])
            self.objects[i + 1] = (kind, name.decode("utf-8", "surrogateescape"))
            pos = r[1] + r[0]
        if pos != end:
            self._fail(F.CorruptError, "bytes after the last object", ob.offset + 48 + pos)
        # threads (§7.1)
        self.threads = []
        body = self._body(th)
        ev = ch = 0
        for i in range(th.count):
            row = F.THREAD_ROW.unpack_from(body, 48 * i)
            tid, os_tid, name_id, flags, events, chunks, first, last = row
            if tid != i or name_id > ob.count or flags or first > last:
                self._fail(F.CorruptError, "thread row %d" % i, th.offset + 48 + 48 * i)
            if events != self._next_seq[i] or chunks != len(self._chunks[i]):
                self._fail(F.CountsError, "thread %d: the row says %d events in %d chunks, the "
                           "file has %d in %d" % (i, events, chunks, self._next_seq[i],
                                                  len(self._chunks[i])), th.offset + 48 + 48 * i)
            ev += events
            ch += chunks
            self.threads.append(Thread(tid, os_tid, self.name(name_id), name_id, flags, events,
                                       chunks, first, last))
        if ev != m["event_count"]:
            self._fail(F.CountsError, "the threads have %d events, the manifest %d"
                       % (ev, m["event_count"]), 192)

    def name(self, object_id):
        """The name of object @object_id, or None (0, or an id the table does not have)."""
        o = self.objects.get(object_id)
        return o[1] if o else None

    # ---- §14 index: directory and summary ----
    def _read_index(self):
        m = self._m
        d = self._header(m["index_offset"], m["file_size"], (F.T_DIRECTORY,))
        if d.count != m["thread_count"] or d.body_len != m["index_length"] - 48:
            self._fail(F.CorruptError, "the index directory's header disagrees with the "
                       "manifest", d.offset)
        body, end = self._body(d), d.body_len
        pos = 0

        def v():
            nonlocal pos
            r = F.varint(body, pos, end)
            if r is None:
                self._fail(F.CorruptError, "a bad varint in the index directory",
                           d.offset + 48 + pos)
            pos = r[1]
            return r[0]

        ix = {"B": v(), "K": v(), "summary_offset": v(), "summary_length": v()}
        if v() != m["thread_count"]:
            self._fail(F.CorruptError, "the directory's thread count", d.offset)
        threads = []
        for t in range(m["thread_count"]):
            row = {"frames": v(), "children": v(), "max_depth": v(), "crashed": v(),
                   "blocks": v()}
            row["kinds"] = [0] + [v() for _ in range(self.kind_max)]
            lists = v()
            for _ in range(lists):
                v(), v()
            row["lists"] = lists
            if sum(row["kinds"]) != self.threads[t].event_count:
                self._fail(F.CorruptError, "thread %d: the kind counts do not add up to its "
                           "events" % t, d.offset)
            if len(self._frame_blocks[t]) != row["blocks"]:
                self._fail(F.CountsError, "thread %d: %d frame blocks, the directory says %d"
                           % (t, len(self._frame_blocks[t]), row["blocks"]), d.offset)
            threads.append(row)
        ix["seek_entries"] = v()
        batches = v()
        for _ in range(batches):
            v(), v()
        if pos != end:
            self._fail(F.CorruptError, "bytes after the index directory", d.offset + 48 + pos)
        if batches != self._seek_batches or sum(r["lists"] for r in threads) != self._block_lists:
            self._fail(F.CountsError, "the data area's seek batches or block lists are not the "
                       "directory's", d.offset)
        if ix["summary_offset"] != m["objects_offset"] + m["objects_length"] or \
                ix["summary_offset"] + ix["summary_length"] != m["index_offset"]:
            self._fail(F.CorruptError, "the summary is not where the directory says", d.offset)
        s = self._header(ix["summary_offset"], m["index_offset"], (F.T_SUMMARY,))
        body, end, pos = self._body(s), s.body_len, 0
        summary = []
        fn = 0
        for i in range(s.count):
            r = []
            for _ in range(8):
                x = F.varint(body, pos, end)
                if x is None:
                    self._fail(F.CorruptError, "a bad summary row", s.offset + 48 + pos)
                r.append(x[0])
                pos = x[1]
            fn = r[0] if i == 0 else fn + r[0]
            summary.append({"function_id": fn, "function": self.name(fn), "calls": r[1],
                            "total": r[2], "self": r[3], "max_depth": r[4], "longest": r[5],
                            "longest_thread": r[6], "longest_frame": r[7]})
        if pos != end:
            self._fail(F.CorruptError, "bytes after the summary", s.offset + 48 + pos)
        ix["threads"] = threads
        ix["summary"] = summary
        self._index = ix

    # ---- §15 the checkpoint table ----
    def _read_checkpoints(self):
        m = self._m
        off = m["checkpoints_offset"]
        h = self._header(off, off + m["checkpoints_length"], (F.T_CHECKPOINTS,))
        ncp, nrest = m["checkpoint_count"], m["restore_count"]
        if h.thread != 0xFFFFFFFF or h.first_seq or h.base_time or \
                h.body_len != m["checkpoints_length"] - 48 or h.count != ncp + nrest:
            self._fail(F.CorruptError, "the checkpoint table at offset %d does not match the "
                       "manifest" % off, off)
        body, end, pos = self._body(h), h.body_len, 0
        base = off + 48

        def v():
            nonlocal pos
            r = F.varint(body, pos, end)
            if r is None:
                raise ValueError
            pos = r[1]
            return r[0]

        cps, rows = [], []
        for i in range(ncp + nrest):
            at = pos
            cp = i < ncp
            try:
                th, seq, time, coff, idx, site = (v() for _ in range(6))
                ok = (th < m["thread_count"] and seq < self.threads[th].event_count and
                      m["data_offset"] <= coff < m["data_end"] and idx <= seq and
                      idx <= 0xFFFFFFFF and site <= 0xFFFFFFFF)
                if ok and cp:
                    length, n = v(), v()
                    ok = length <= m["largest_event"] and n <= (end - pos) // 2
                    provs, total = [], 0
                    for _ in range(n if ok else 0):
                        pid, sl = v(), v()
                        total += 12 + sl
                        ok = ok and pid <= 0xFFFFFFFF and total <= length
                        provs.append((pid, sl))
                    ok = ok and total == length
                    cps.append([i, th, seq, time, coff, idx, site, length, provs])
                elif ok:
                    k = v()
                    ok = k < ncp and (not rows or (time, th, seq) > rows[-1][:3])
                    rows.append((time, th, seq, coff, idx, site, k))
            except ValueError:
                ok = False
            if not ok:
                self._fail(F.CorruptError, "%s row %d of the checkpoint table is invalid"
                           % ("checkpoint" if cp else "restore", i if cp else i - ncp),
                           base + at)
        if pos != end:
            self._fail(F.CorruptError, "the checkpoint table has trailing bytes", base + pos)
        self._restore_keys = [r[:3] for r in rows]
        self.restores = [Restore(e + 1, th, seq, time, coff, idx, site, k)
                         for e, (time, th, seq, coff, idx, site, k) in enumerate(rows)]
        self.checkpoints = [Checkpoint(*c[:9], self.epoch_at(c[3], c[1], c[2])) for c in cps]

    def epoch_at(self, time, thread, seq):
        """The epoch of the event at (@time, @thread, @seq) (§15.4): the restores at or before
        it in the recorded order."""
        return bisect.bisect_right(self._restore_keys, (time, thread, seq))

    @property
    def has_index(self):
        """Whether the file has index tables (§14): frames, summary, kind counts."""
        return self._index is not None

    # ---- time ----
    def ns(self, ticks):
        """Ticks since the session opened, as nanoseconds (exact integer arithmetic)."""
        return ticks * 1000000000 // self.ticks_per_sec

    # ---- §5, §6 events, decoded one at a time ----
    def _thread_events(self, t):
        """The events of thread @t in its order, with the checks of §10.4, each with its
        epoch (§15.4)."""
        it = self._thread_events_raw(t)
        keys = self._restore_keys
        if not keys:
            return it
        return self._with_epochs(it, keys)

    @staticmethod
    def _with_epochs(it, keys):
        # along a thread (time, thread, seq) only grows, so the epoch only moves forward
        k, n = 0, len(keys)
        for e in it:
            while k < n and keys[k] <= (e.time, e.thread, e.seq):
                k += 1
            yield e._replace(epoch=k) if k else e

    def _thread_events_raw(self, t):
        varint = F.varint
        kmax = F.tag_kind_max(self._m["version"])
        pending = None
        n = 0
        for h in self._chunks[t]:
            body = self._body(h)
            end = h.body_len
            pos = 0
            if pending is not None:
                ev, parts, rest = pending
                take = min(rest, end)
                if h.cont_len != take:
                    self._fail(F.CorruptError, "a continuation of %d bytes where %d are due"
                               % (h.cont_len, take), h.offset)
                parts.append(bytes(body[:take]))
                rest -= take
                pos = take
                if rest:
                    if h.count or not h.flags & F.CONT_OUT:
                        self._fail(F.CorruptError, "a split payload's chunk has events",
                                   h.offset)
                    pending = (ev, parts, rest)
                    continue
                pending = None
                yield ev._replace(payload=b"".join(parts))
                n += 1
            elif h.cont_len:
                self._fail(F.CorruptError, "a continuation that continues nothing", h.offset)
            if h.count == 0:
                if h.flags & F.CONT_OUT or pos != end:
                    self._fail(F.CorruptError, "an empty chunk", h.offset)
                continue
            seq, tm, fn = h.first_seq, h.base_time, 0
            sobj = sord = 0  # the chunk's previous sync event: object and addr
            for i in range(h.count):
                if pos >= end:
                    self._fail(F.CorruptError, "an event starts past its chunk", h.offset)
                tag = body[pos]
                pos += 1
                if tag & 0x80:
                    tm += tag & 0x3F
                    yield Event(seq, t, tm, 6 if tag & 0x40 else 5, 0, fn, 0, 0, 0, b"")
                    seq += 1
                    continue
                kind = tag & 0x1F
                if not 1 <= kind <= kmax or (tag & 0x40 and kind != F.IO and kind != F.SYNC
                                             and kind != F.SYNC_AGAIN):
                    self._fail(F.CorruptError, "a bad event tag 0x%02x" % tag, h.offset)
                r = varint(body, pos, end)
                if r is None:
                    self._fail(F.CorruptError, "a bad varint", h.offset)
                tm += r[0]
                pos = r[1]
                if not tag & 0x20:
                    r = varint(body, pos, end)
                    if r is None or r[0] > 0xFFFFFFFF:
                        self._fail(F.CorruptError, "a bad function id", h.offset)
                    fn, pos = r
                if kind == F.ENTER or kind == F.EXIT:
                    yield Event(seq, t, tm, kind, 0, fn, 0, 0, 0, b"")
                    seq += 1
                    continue
                # site, arg, addr, len; a "sync again" has site and a step of addr (§5.2)
                vals = []
                for _ in range(2 if kind == F.SYNC_AGAIN else 4):
                    r = varint(body, pos, end)
                    if r is None:
                        self._fail(F.CorruptError, "a bad varint", h.offset)
                    vals.append(r[0])
                    pos = r[1]
                if kind == F.SYNC_AGAIN:
                    if vals[0] > 0xFFFFFFFF:
                        self._fail(F.CorruptError, "a site id out of range", h.offset)
                    sord = (sord + F.unzigzag(vals[1])) & 0xFFFFFFFFFFFFFFFF
                    yield Event(seq, t, tm, F.SYNC, 1 if tag & 0x40 else 0, fn, vals[0], sobj,
                                sord, b"")
                    seq += 1
                    continue
                site, arg, addr, ln = vals
                if kind == F.SYNC:
                    sobj, sord = arg, addr
                if site > 0xFFFFFFFF or ln > self._m["largest_event"]:
                    self._fail(F.CorruptError, "a site id or payload length out of range",
                               h.offset)
                ev = Event(seq, t, tm, kind, 1 if tag & 0x40 else 0, fn, site, arg, addr, b"")
                seq += 1
                if ln <= end - pos:
                    yield ev._replace(payload=bytes(body[pos:pos + ln])) if ln else ev
                    pos += ln
                    continue
                # §6: the payload goes on in the thread's next chunks
                if i != h.count - 1 or not h.flags & F.CONT_OUT or \
                        ln > self._m["largest_split"]:
                    self._fail(F.CorruptError, "a payload runs past its chunk", h.offset)
                pending = (ev, [bytes(body[pos:end])], ln - (end - pos))
                pos = end
            if pos != end:
                self._fail(F.CorruptError, "the events do not end at the chunk's end", h.offset)
            if pending is None and h.flags & F.CONT_OUT:
                self._fail(F.CorruptError, "CONT_OUT on a chunk whose last payload ends in it",
                           h.offset)
            n += h.count - (1 if pending is not None else 0)
        if pending is not None:
            self._fail(F.TruncatedError, "thread %d ends inside a split payload" % t)
        if n != self.threads[t].event_count:
            self._fail(F.CountsError, "thread %d: %d events decoded, the row says %d"
                       % (t, n, self.threads[t].event_count))

    def events(self, thread=None, order="recorded"):
        """The events, one Event at a time. @thread: only that thread's. @order: "recorded"
        (the total order of §5.6, (time, thread, seq)) or "thread" (thread by thread). Memory
        does not grow with the trace: one chunk per thread at a time."""
        if thread is not None:
            if not 0 <= thread < len(self.threads):
                raise ValueError("no thread %r in %s" % (thread, self.path))
            return self._thread_events(thread)
        if order == "thread":
            return (e for t in range(len(self.threads)) for e in self._thread_events(t))
        if order != "recorded":
            raise ValueError("order is 'recorded' or 'thread', not %r" % (order,))
        return heapq.merge(*(self._thread_events(t) for t in range(len(self.threads))),
                           key=lambda e: (e.time, e.thread, e.seq))

    def arrays(self, order="thread"):
        """Every event as columns (tinytrace.EventArrays): numpy arrays where numpy is
        installed, array.array otherwise."""
        from ._bulk import event_arrays
        return event_arrays(self, order)

    # ---- §14.3 frames ----
    def _thread_frames(self, t):
        varint = F.varint
        B = self._index["B"]
        parent_rows = self.manifest["version"] >= 4
        for h in sorted(self._frame_blocks[t], key=lambda c: c.first_seq):
            body, end = self._body(h), h.body_len
            pos = 0
            fn = depth = chunk = 0
            prev_end = h.base_time
            number = h.first_seq
            if number % B:
                self._fail(F.CorruptError, "a frame block starts at frame %d" % number,
                           h.offset)
            r_left = h.count

            def v():
                nonlocal pos
                r = varint(body, pos, end)
                if r is None:
                    self._fail(F.CorruptError, "a bad varint in a frame block", h.offset)
                pos = r[1]
                return r[0]

            # this block's rows so far (desc, start, depth), for the parent rows of version 4
            rows = []
            while r_left > 0:
                if pos >= end:
                    self._fail(F.CorruptError, "a frame block ends early", h.offset)
                b0 = body[pos]
                pos += 1
                if b0 & 0xC0 == 0xC0 and parent_rows:
                    k = b0 & 0x1F
                    if not 1 <= k <= 31 or not rows or depth < 1:
                        self._fail(F.CorruptError, "a bad parent row", h.offset)
                    if not b0 & 0x20:
                        fn = v()
                    e = prev_end + v()
                    lead = v()
                    c, desc = len(rows) - 1, 0
                    for _ in range(k):
                        if c < 0 or rows[c][2] != depth:
                            self._fail(F.CorruptError, "a parent row's children are not in "
                                       "its block", h.offset)
                        desc += rows[c][0] + 1
                        first = c
                        c -= rows[c][0] + 1
                    start = rows[first][1] - lead
                    if lead > rows[first][1] or start > e:
                        self._fail(F.CorruptError, "a parent row starts after it ends",
                                   h.offset)
                    depth -= 1
                    yield Frame(t, number, fn, depth, 0, desc, k, start, e - start, chunk)
                    rows.append((desc, start, depth))
                    prev_end = e
                    number += 1
                    r_left -= 1
                    continue
                if b0 & 0x80:
                    k = b0 & (0x3F if parent_rows else 0x7F)
                    if not 1 <= k <= r_left or number == h.first_seq:
                        self._fail(F.CorruptError, "a bad run of frames", h.offset)
                    for _ in range(k):
                        start = prev_end + v()
                        dur = v()
                        yield Frame(t, number, fn, depth, 0, 0, 0, start, dur, chunk)
                        rows.append((0, start, depth))
                        prev_end = start + dur
                        number += 1
                    r_left -= k
                    continue
                if not b0 & 0x01:
                    fn = v()
                if not b0 & 0x02:
                    depth = v()
                desc = kids = 0
                if not b0 & 0x04:
                    desc, kids = v(), v()
                if b0 & 0x40:
                    start = prev_end + v()
                    dur = v()
                else:
                    e = prev_end + v()
                    dur = v()
                    start = e - dur
                if not b0 & 0x08:
                    zz = v()
                    chunk += (zz >> 1) ^ -(zz & 1)
                yield Frame(t, number, fn, depth, (b0 >> 4) & 3, desc, kids, start, dur, chunk)
                rows.append((desc, start, depth))
                prev_end = start + dur
                number += 1
                r_left -= 1
            if pos != end:
                self._fail(F.CorruptError, "bytes after a frame block's rows", h.offset)

    def frames(self, thread=None):
        """The calls of the index tables (§14.3), thread by thread, each in post-order (a frame
        after its descendants). Empty for a file without index tables."""
        if self._index is None:
            return iter(())
        if thread is not None:
            if not 0 <= thread < len(self.threads):
                raise ValueError("no thread %r in %s" % (thread, self.path))
            return self._thread_frames(thread)
        return (f for t in range(len(self.threads)) for f in self._thread_frames(t))

    # ---- the summary ----
    def stats(self):
        """What `tinytrace stats --json` prints: events, frames, per-function totals (from
        the summary), per-thread and per-kind counts (from the directory). A file without
        index tables gives the per-thread and per-kind counts from its events, and frames
        and functions as None."""
        tps = self.ticks_per_sec
        km = self.kind_max
        kinds_total = dict((F.KIND_NAMES[k], 0) for k in range(1, km + 1))
        out = {"file": self.path, "events": self._m["event_count"], "ticks_per_sec": tps}
        threads = []
        if self._index is not None:
            ix = self._index
            for t, row in zip(self.threads, ix["threads"]):
                kinds = {F.KIND_NAMES[k]: row["kinds"][k] for k in range(1, km + 1)
                         if row["kinds"][k]}
                for k, c in kinds.items():
                    kinds_total[k] += c
                threads.append({"id": t.id, "name": t.name, "events": t.event_count,
                                "frames": row["frames"], "max_depth": row["max_depth"],
                                "crashed": bool(row["crashed"]),
                                "first_ns": self.ns(t.first_time),
                                "last_ns": self.ns(t.last_time), "kinds": kinds})
            functions = []
            for f in ix["summary"]:
                g = dict(f)
                for k in ("self", "total", "longest"):
                    g[k + "_ns"] = self.ns(f[k])
                functions.append(g)
            functions.sort(key=lambda f: (-f["self"], f["function_id"]))
            out["frames"] = sum(r["frames"] for r in ix["threads"])
            out["functions"] = functions
        else:
            per = [collections.Counter() for _ in self.threads]
            for t in range(len(self.threads)):
                for e in self._thread_events(t):
                    per[t][F.KIND_NAMES[e.kind]] += 1
            for t, c in zip(self.threads, per):
                for k, n in c.items():
                    kinds_total[k] += n
                threads.append({"id": t.id, "name": t.name, "events": t.event_count,
                                "frames": None, "max_depth": None, "crashed": c["crash"] > 0,
                                "first_ns": self.ns(t.first_time),
                                "last_ns": self.ns(t.last_time), "kinds": dict(c)})
            out["frames"] = None
            out["functions"] = None
        out["threads"] = threads
        out["kinds"] = kinds_total
        return out

    def close(self):
        self._mv.release()
        if hasattr(self._buf, "close"):
            self._buf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<tinytrace.Trace %s: %d events, %d threads>" % (
            self.path, self._m["event_count"], len(self.threads))
