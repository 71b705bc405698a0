# SPDX-License-Identifier: MIT
"""Read tinytrace traces from Python, without the C library: a reader of the file format of
docs/FORMAT.md (versions 1 to 4), in pure Python, with numpy for bulk arrays where it
is installed and the xxhash module for the checksums where that is.

    import tinytrace
    with tinytrace.open("run.tt") as t:
        t.manifest.event_count, t.threads[0].name
        for e in t.events():             # in recorded order: (time, thread, seq)
            print(e.kind_name, t.name(e.function), e.payload)
        a = t.arrays()                    # every event as columns (numpy arrays)
        (a.kind == tinytrace.KIND["enter"]).sum()
        for f in t.frames():              # the calls, from the index tables
            ...
        t.stats()                         # what `tinytrace stats --json` prints

open() checks the manifest, every chunk's header and checksum (XXH3-64), the events checksum
and the tables before it returns; events and frames are decoded, and checked, when they are
read. verify=False skips the checksums (not the structure): with neither the xxhash module nor
numpy, pure-Python XXH3 runs at some 15 MB/s.
"""
from ._format import (KIND_NAMES, OBJECT_KINDS, OUTCOMES, ChecksumError, CorruptError,
                      CountsError, FormatError, IncompleteError, TraceError, TruncatedError,
                      VersionError)
from ._reader import Event, Frame, Manifest, Thread, Trace
from ._bulk import EventArrays
from ._xxh3 import hash64, implementation as hash_implementation

__version__ = "0.1.0"

KIND = {name: k for k, name in enumerate(KIND_NAMES) if name}

__all__ = ["open", "Trace", "Event", "Frame", "Thread", "Manifest", "EventArrays", "KIND",
           "KIND_NAMES", "OBJECT_KINDS", "OUTCOMES", "TraceError", "CorruptError",
           "ChecksumError", "CountsError", "FormatError", "IncompleteError", "TruncatedError",
           "VersionError", "hash64", "hash_implementation"]


def open(path, verify=True):
    """Opens and checks the trace at @path (raises a TraceError naming the file, the offset
    and the problem). @verify=False skips the checksums."""
    return Trace(path, verify=verify)
