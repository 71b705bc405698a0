/* SPDX-License-Identifier: MIT */
/* tinytrace — the calls of a trace as CPU profiles inside Chrome trace-event JSON, for export
 * (`--format chrome-profile`).
 *
 * Chrome writes its own CPU profiles into a trace as two kinds of event, phase "P": one
 * "Profile" per profiled thread (its "id", its "startTime") and then "ProfileChunk"s, each
 * carrying part of a V8 `cpuProfile`: the call-tree nodes new in that chunk (id, parent and
 * callFrame) and the samples (node ids) with their "timeDeltas" (microseconds since the
 * previous sample). speedscope, Chrome DevTools' Performance panel and Perfetto read them.
 *
 * A trace is not sampled, so the profile we write is exact: a sample at every change of a
 * thread's call stack, that is at every written enter (the call's node) and every written exit
 * (its parent's node), at the event's time. A node is a call path (parent node, function),
 * the same for every call made along that path, so a thread's node table is its merged call
 * graph and the stream of samples costs two numbers per event: about 8 bytes where a complete
 * event ("X") takes about 70. Deltas are microseconds with three decimals (nanoseconds).
 * Between two samples the thread is in the earlier sample's node: speedscope rebuilds the calls
 * from that, with their exact times. What is lost next to "X" events: two calls of one function
 * from the same caller with no time between them (an exit and the next enter at the same
 * nanosecond) are one call in the profile, and calls carry no args.
 *
 * Memory: a thread's samples wait in its buffer until a chunk is written (when it holds
 * CP_CHUNK samples, when all threads' buffers together hold CP_PENDING_MAX, and at the thread's
 * end), and the node table holds every distinct call path of the trace (12 bytes each and a
 * hash slot of 4). Not thread-safe; one writer per output file.
 */
#ifndef TINYTRACE_TOOL_CPUPROFILE_H
#define TINYTRACE_TOOL_CPUPROFILE_H

#include "tool.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CP_CHUNK (1u << 16)
#define CP_PENDING_MAX (1u << 22)

/* The name of function @id for a node's callFrame: *@s, *@len (may point into @buf). */
typedef void cp_name_fn(void *ctx, uint32_t id, char *buf, size_t cap, const char **s,
                        size_t *len);

typedef struct cp_thread cp_thread;

typedef struct cp_writer {
    FILE *f;
    uint64_t *written;     /* trace events already in the array: a comma goes before the next */
    uint32_t pid;
    const uint32_t *tids;  /* per thread: the tid the output gives it */
    uint32_t nthreads;
    cp_thread *threads;
    cp_name_fn *name;
    void *name_ctx;
    /* nodes, by id (from 1): their parent (0 for a thread's root) and function */
    uint32_t *parent, *function;
    uint32_t nodes, node_cap;
    uint32_t *slots, slot_mask; /* (parent, function) -> id, open addressing; 0: empty */
    uint64_t pending;           /* samples in all threads' buffers */
    uint64_t samples, chunks;   /* written */
    tool_json j;
} cp_writer;

/* Prepares @w to append events to the trace-event array in @f (@written counts those in it),
 * for a trace of @nthreads threads of process @pid, their output tids @tids (kept, not
 * copied), functions named through @name. Returns 0, or -1 out of memory. */
int cp_init(cp_writer *w, FILE *f, uint64_t *written, uint32_t pid, const uint32_t *tids,
            uint32_t nthreads, cp_name_fn *name, void *name_ctx);

/* The node of a call of @function made from node @parent (0: from thread @thread's root),
 * made if new. Returns it, or 0 out of memory. */
uint32_t cp_node(cp_writer *w, uint32_t thread, uint32_t parent, uint32_t function);

/* Thread @thread is in node @node (0: its root, no call open) from @ns (nanoseconds since the
 * session opened) on. Times of a thread must not decrease; one that does is taken as the
 * latest. Returns 0, or -1 out of memory. */
int cp_sample(cp_writer *w, uint32_t thread, uint32_t node, uint64_t ns);

/* Thread @thread ends: its last chunk is written, with the profile's end time. */
void cp_end_thread(cp_writer *w, uint32_t thread);

void cp_free(cp_writer *w);

#endif
