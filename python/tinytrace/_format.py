# SPDX-License-Identifier: MIT
"""The byte layout of a tinytrace trace (docs/FORMAT.md, versions 1 to 4, normative): constants,
the manifest, chunk headers, varints, and the errors a reader reports. Version 3 adds the sync
event kind (14, with OUT like io) and its count in the index directory. Version 4 adds the parent
row of the frame blocks (§14.3), the restore kind (15), and the checkpoint table (chunk type 9,
§15, pointed to by manifest bytes 432-455), from which every event has its epoch.
"""
import struct

MAGIC = b"TINYTRCE"
MANIFEST_SIZE = 512
CHUNK_MAGIC = 0x4B435454  # "TTCK"
HEADER_SIZE = 48
VERSION_MIN, VERSION_MAX = 1, 5

# manifest flags (§3.2)
MF_FINALIZED, MF_INCOMPLETE, MF_RECOVERED, MF_CRASHED, MF_TSC = 0x1, 0x2, 0x4, 0x8, 0x10
FLAG_NAMES = [(MF_FINALIZED, "finalized"), (MF_INCOMPLETE, "incomplete"),
              (MF_RECOVERED, "recovered"), (MF_CRASHED, "crashed"), (MF_TSC, "tsc")]

# chunk types (§4.1) and flags
T_EVENTS, T_THREADS, T_OBJECTS, T_FRAMES, T_SEEK, T_SUMMARY, T_DIRECTORY, T_BLOCKLIST, \
    T_CHECKPOINTS = range(1, 10)
CONT_IN, CONT_OUT = 0x1, 0x2

# event kinds (§5.3); sync (14) exists from version 3 on, with OUT like io; restore (15) from
# version 4 on
KIND_NAMES = [None, "session-start", "session-end", "thread-start", "thread-end", "enter",
              "exit", "safepoint", "alloc", "free", "io", "checkpoint", "user", "crash", "sync",
              "restore"]
KIND_MAX = 15
ENTER, EXIT, IO, CHECKPOINT, SYNC, RESTORE = 5, 6, 10, 11, 14, 15


def kind_max(version):
    """The largest event kind of a file of format @version."""
    return 15 if version >= 4 else 14 if version >= 3 else 13


# version 5's tag kind 16, "sync again" (§5.2): a kind-14 event on the object of the chunk's
# previous sync event, with no payload; after dt and function, site and zigzag(addr step)
SYNC_AGAIN = 16


def tag_kind_max(version):
    """The largest kind a tag byte of a file of format @version may carry."""
    return SYNC_AGAIN if version >= 5 else kind_max(version)


def unzigzag(v):
    """A signed step from its zigzag varint value, modulo 2**64."""
    return ((v >> 1) ^ -(v & 1)) & 0xFFFFFFFFFFFFFFFF


def chunk_type_max(version):
    """The largest chunk type of a file of format @version (§4.1)."""
    return 9 if version >= 4 else 8
OBJECT_KINDS = [None, "function", "site", "thread", "module", "tag", "meta"]
OUTCOMES = ["returned", "crashed", "open", "abandoned"]

MANIFEST = struct.Struct("<8sIIIIII32s128sQQQQQQQIIQQQQQQQQQqQQQiIQQIII4s32sQQII48sQ")
MANIFEST_FIELDS = (
    "magic", "version", "manifest_size", "flags", "lib_version", "block_size", "build_id_len",
    "build_id", "caller", "event_count", "payload_bytes", "chunk_count", "block_count",
    "largest_chunk", "largest_event", "largest_split", "thread_count", "object_count",
    "data_offset", "data_end", "threads_offset", "threads_length", "objects_offset",
    "objects_length", "file_size", "ticks_per_sec", "tick_origin", "realtime_origin_ns",
    "events_checksum", "stall_count", "stall_ns", "write_errno", "pid", "index_offset",
    "index_length", "threads_refused", "children_untraced", "execs_untraceable", "reserved1",
    "auth", "checkpoints_offset", "checkpoints_length", "checkpoint_count", "restore_count",
    "reserved2", "checksum")
assert MANIFEST.size == MANIFEST_SIZE
CHUNK = struct.Struct("<IHHIIQIIQQ")
assert CHUNK.size == HEADER_SIZE
THREAD_ROW = struct.Struct("<IIIIQQQQ")


class TraceError(Exception):
    """A trace that cannot be read: @status is the name tinytrace verify gives (corrupt,
    checksum, truncated, counts, bad-magic, bad-version, limit, incomplete, io), @offset the
    file offset where the problem was found (None when there is none)."""

    status = "corrupt"

    def __init__(self, path, message, offset=None):
        self.path, self.message, self.offset = path, message, offset
        where = "" if offset is None else " at offset %d" % offset
        super().__init__("%s: %s%s: %s" % (path, self.status, where, message))


class CorruptError(TraceError):
    status = "corrupt"


class ChecksumError(TraceError):
    status = "checksum"


class TruncatedError(TraceError):
    status = "truncated"


class CountsError(TraceError):
    status = "counts"


class FormatError(TraceError):
    status = "bad-magic"


class VersionError(TraceError):
    status = "bad-version"


class IncompleteError(TraceError):
    status = "incomplete"


def varint(b, pos, end):
    """The unsigned LEB128 at @pos (at most 10 bytes, before @end): (value, next position), or
    None when it is not a valid varint there."""
    v = shift = 0
    for i in range(10):
        if pos >= end:
            return None
        c = b[pos]
        pos += 1
        if i == 9 and c > 1:
            return None
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7
    return None


def flag_names(flags):
    return [name for bit, name in FLAG_NAMES if flags & bit]
