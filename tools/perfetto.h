/* SPDX-License-Identifier: MIT */
/* tinytrace — a writer of Perfetto's native trace format (protobuf TrackEvent), for export.
 *
 * A Perfetto trace file is the protobuf message `Trace`: a sequence of field 1 (`packet`), each
 * a length-delimited `TracePacket`. Nothing else frames it, so packets are written one after
 * the other and the file can be as long as it likes: the writer streams, with one fixed buffer.
 * The messages and field numbers used are listed in docs/DIFF-AND-EXPORT.md, with the
 * Perfetto .proto file each comes from; tests/perfetto/trace-subset.proto is the same subset as
 * a schema for `protoc --decode`.
 *
 * Layout of what the writer emits:
 *   - one process track (uuid 1, ProcessDescriptor: pid, process_name) and one thread track per
 *     recorded thread (uuid 2 + thread id, parent 1, ThreadDescriptor: pid, OS tid, name);
 *   - per thread two packet sequences: 2 * id + 1 carries the thread's slices, 2 * id + 2 its
 *     instant events. Each sequence opens with a packet that clears its incremental state and
 *     sets its defaults: the thread's track (TrackEventDefaults.track_uuid) and a
 *     sequence-scoped incremental clock (clock id 64, ClockSnapshot.Clock.is_incremental), so
 *     every later packet carries only the nanoseconds since the previous packet of its sequence
 *     (one byte for a call of less than 128 ns) and no track. Two sequences rather than one
 *     because a window with --min-duration writes a slice's begin only when a call inside it
 *     is known to be long enough, so a begin can come after an instant that happened later:
 *     each sequence on its own is in time order, which an incremental clock needs;
 *   - a function's name is interned once per slice sequence (InternedData.event_names, iid =
 *     the trace's object id), in the packet of its first begin; a begin is then timestamp, type
 *     and name_iid: 12 bytes, an end 10;
 *   - an instant carries its name, its category (the event kind) and its fields as debug
 *     annotations, not interned: instants are rare next to calls.
 *
 * Not thread-safe; one writer per output file.
 */
#ifndef TINYTRACE_TOOL_PERFETTO_H
#define TINYTRACE_TOOL_PERFETTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A debug annotation of an instant: @name and one value, a string (@str, @len bytes), an
 * unsigned number or a pointer. */
typedef struct pf_arg {
    const char *name;
    enum { PF_STR, PF_UINT, PF_PTR } type;
    const char *str;
    size_t len;
    uint64_t v;
} pf_arg;

typedef struct pf_thread pf_thread;

typedef struct pf_writer {
    FILE *f;
    uint32_t pid;
    pf_thread *threads; /* one per recorded thread, allocated by pf_init */
    uint32_t nthreads;
    uint64_t packets;
    size_t len;
    unsigned char buf[1 << 16];
} pf_writer;

/* Prepares @w to write to @f for a trace of @nthreads threads of process @pid. Returns 0, or -1
 * when out of memory. */
int pf_init(pf_writer *w, FILE *f, uint32_t pid, uint32_t nthreads);
/* Writes the process track. */
void pf_process(pf_writer *w, const char *name, size_t len);
/* Writes thread @th's track (its OS @tid, @name). Call once per thread, before its events. Each
 * of its sequences opens at its first packet, whose time is the sequence's start: a sequence's
 * times never go back (the caller's order, perfetto.h). */
void pf_thread_track(pf_writer *w, uint32_t th, uint32_t tid, const char *name, size_t len);
/* A slice of function @fn (@name, interned on first use) begins at @ts_ns on thread @th. */
void pf_begin(pf_writer *w, uint32_t th, uint32_t fn, const char *name, size_t len,
              uint64_t ts_ns);
/* The innermost open slice of thread @th ends at @ts_ns. */
void pf_end(pf_writer *w, uint32_t th, uint64_t ts_ns);
/* An instant event @name of category @cat at @ts_ns on thread @th, with @nargs annotations. */
void pf_instant(pf_writer *w, uint32_t th, uint64_t ts_ns, const char *name, size_t len,
                const char *cat, const pf_arg *args, size_t nargs);
/* Writes out what is buffered (pf_free does too). */
void pf_flush(pf_writer *w);
void pf_free(pf_writer *w);

/* The field numbers the writer uses, also checked by tests/perfetto/check-schema.py against
 * docs/DIFF-AND-EXPORT.md and the committed schema. */
enum pf_field {
    PF_TRACE_PACKET = 1,              /* Trace.packet */
    PF_PACKET_TIMESTAMP = 8,          /* TracePacket.timestamp */
    PF_PACKET_SEQUENCE_ID = 10,       /* TracePacket.trusted_packet_sequence_id */
    PF_PACKET_TRACK_EVENT = 11,       /* TracePacket.track_event */
    PF_PACKET_INTERNED_DATA = 12,     /* TracePacket.interned_data */
    PF_PACKET_SEQUENCE_FLAGS = 13,    /* TracePacket.sequence_flags */
    PF_PACKET_CLOCK_SNAPSHOT = 6,     /* TracePacket.clock_snapshot */
    PF_PACKET_TIMESTAMP_CLOCK_ID = 58,/* TracePacket.timestamp_clock_id */
    PF_PACKET_DEFAULTS = 59,          /* TracePacket.trace_packet_defaults */
    PF_PACKET_TRACK_DESCRIPTOR = 60,  /* TracePacket.track_descriptor */
    PF_DEFAULTS_CLOCK_ID = 58,        /* TracePacketDefaults.timestamp_clock_id */
    PF_DEFAULTS_TRACK_EVENT = 11,     /* TracePacketDefaults.track_event_defaults */
    PF_TE_DEFAULTS_TRACK_UUID = 11,   /* TrackEventDefaults.track_uuid */
    PF_CLOCKS = 1,                    /* ClockSnapshot.clocks */
    PF_CLOCK_ID = 1,                  /* ClockSnapshot.Clock.clock_id */
    PF_CLOCK_TIMESTAMP = 2,           /* ClockSnapshot.Clock.timestamp */
    PF_CLOCK_INCREMENTAL = 3,         /* ClockSnapshot.Clock.is_incremental */
    PF_TE_CATEGORIES = 22,            /* TrackEvent.categories */
    PF_TE_DEBUG_ANNOTATIONS = 4,      /* TrackEvent.debug_annotations */
    PF_TE_TYPE = 9,                   /* TrackEvent.type */
    PF_TE_NAME_IID = 10,              /* TrackEvent.name_iid */
    PF_TE_NAME = 23,                  /* TrackEvent.name */
    PF_INTERNED_EVENT_NAMES = 2,      /* InternedData.event_names */
    PF_EVENT_NAME_IID = 1,            /* EventName.iid */
    PF_EVENT_NAME_NAME = 2,           /* EventName.name */
    PF_TD_UUID = 1,                   /* TrackDescriptor.uuid */
    PF_TD_NAME = 2,                   /* TrackDescriptor.name */
    PF_TD_PROCESS = 3,                /* TrackDescriptor.process */
    PF_TD_THREAD = 4,                 /* TrackDescriptor.thread */
    PF_TD_PARENT_UUID = 5,            /* TrackDescriptor.parent_uuid */
    PF_PD_PID = 1,                    /* ProcessDescriptor.pid */
    PF_PD_PROCESS_NAME = 6,           /* ProcessDescriptor.process_name */
    PF_THD_PID = 1,                   /* ThreadDescriptor.pid */
    PF_THD_TID = 2,                   /* ThreadDescriptor.tid */
    PF_THD_THREAD_NAME = 5,           /* ThreadDescriptor.thread_name */
    PF_DA_UINT = 3,                   /* DebugAnnotation.uint_value */
    PF_DA_STRING = 6,                 /* DebugAnnotation.string_value */
    PF_DA_POINTER = 7,                /* DebugAnnotation.pointer_value */
    PF_DA_NAME = 10,                  /* DebugAnnotation.name */
};

/* Values of the enums and clocks. */
#define PF_TYPE_SLICE_BEGIN 1        /* TrackEvent.Type */
#define PF_TYPE_SLICE_END 2
#define PF_TYPE_INSTANT 3
#define PF_SEQ_INCREMENTAL_STATE_CLEARED 1 /* TracePacket.SequenceFlags */
#define PF_CLOCK_BOOTTIME 6          /* BuiltinClock.BOOTTIME */
#define PF_CLOCK_SEQUENCE 64         /* the first sequence-scoped clock id */

#endif
