/* SPDX-License-Identifier: MIT */
/* Encoding and checking of the manifest and of thread-table rows (format.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

void tt_manifest_encode(uint8_t out[TT_MANIFEST_SIZE], const tt_manifest *m)
{
    memset(out, 0, TT_MANIFEST_SIZE);
    memcpy(out + TT_M_MAGIC, TT_MAGIC, 8);
    tt_put32(out + TT_M_VERSION, m->version);
    tt_put32(out + TT_M_SIZE, TT_MANIFEST_SIZE);
    tt_put32(out + TT_M_FLAGS, m->flags);
    tt_put32(out + TT_M_LIBVER, m->lib_version);
    tt_put32(out + TT_M_BLOCK, m->block_size);
    tt_put32(out + TT_M_BIDLEN, m->build_id_len);
    memcpy(out + TT_M_BID, m->build_id, TT_BUILD_ID_MAX);
    memcpy(out + TT_M_CALLER, m->caller, TT_CALLER_MAX);
    out[TT_M_CALLER + TT_CALLER_MAX - 1] = 0;
    tt_put64(out + TT_M_EVENTS, m->event_count);
    tt_put64(out + TT_M_PAYLOAD, m->payload_bytes);
    tt_put64(out + TT_M_CHUNKS, m->chunk_count);
    tt_put64(out + TT_M_BLOCKS, m->block_count);
    tt_put64(out + TT_M_LCHUNK, m->largest_chunk);
    tt_put64(out + TT_M_LEVENT, m->largest_event);
    tt_put64(out + TT_M_LSPLIT, m->largest_split);
    tt_put32(out + TT_M_THREADS, m->thread_count);
    tt_put32(out + TT_M_OBJECTS, m->object_count);
    tt_put64(out + TT_M_DATA, m->data_offset);
    tt_put64(out + TT_M_DATAEND, m->data_end);
    tt_put64(out + TT_M_THR_OFF, m->threads_offset);
    tt_put64(out + TT_M_THR_LEN, m->threads_length);
    tt_put64(out + TT_M_OBJ_OFF, m->objects_offset);
    tt_put64(out + TT_M_OBJ_LEN, m->objects_length);
    tt_put64(out + TT_M_FSIZE, m->file_size);
    tt_put64(out + TT_M_TPS, m->ticks_per_sec);
    tt_put64(out + TT_M_TORIGIN, m->tick_origin);
    tt_put64(out + TT_M_RTORIGIN, (uint64_t)m->realtime_origin_ns);
    tt_put64(out + TT_M_EVSUM, m->events_checksum);
    tt_put64(out + TT_M_STALLS, m->stall_count);
    tt_put64(out + TT_M_STALLNS, m->stall_ns);
    tt_put32(out + TT_M_ERRNO, (uint32_t)m->write_errno);
    tt_put32(out + TT_M_PID, m->pid);
    tt_put64(out + TT_M_INDEX_OFF, m->index_offset);
    tt_put32(out + TT_M_REFUSED, m->threads_refused);
    tt_put32(out + TT_M_UNTRACED, m->children_untraced);
    tt_put32(out + TT_M_UNTRACEABLE, m->execs_untraceable);
    memcpy(out + TT_M_AUTH, m->auth, TT_AUTH_LEN);
    tt_put64(out + TT_M_INDEX_LEN, m->index_length);
    if (m->version >= 4) {
        tt_put64(out + TT_M_CP_OFF, m->checkpoints_offset);
        tt_put64(out + TT_M_CP_LEN, m->checkpoints_length);
        tt_put32(out + TT_M_CP_COUNT, m->checkpoint_count);
        tt_put32(out + TT_M_CP_RESTORES, m->restore_count);
    }
    tt_put64(out + TT_M_CHECKSUM, tt_hash64(out, TT_M_CHECKSUM, 0));
}

int tt_manifest_decode(const uint8_t in[TT_MANIFEST_SIZE], uint64_t size, tt_manifest *m,
                       tt_error_info *err)
{
    if (memcmp(in + TT_M_MAGIC, TT_MAGIC, 8) != 0)
        return tt_fail(err, TT_E_FORMAT, 0, 0, "not a tinytrace file (bad magic)");
    uint32_t version = tt_get32(in + TT_M_VERSION);
    if (version < TT_FORMAT_VERSION_MIN || version > TT_FORMAT_VERSION)
        return tt_fail(err, TT_E_VERSION, 0, TT_M_VERSION,
                       "file format version %u is not supported: this reader supports versions "
                       "%u to %u", version, TT_FORMAT_VERSION_MIN, TT_FORMAT_VERSION);
    if (tt_get32(in + TT_M_SIZE) != TT_MANIFEST_SIZE)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_SIZE, "manifest size %u is not %u",
                       tt_get32(in + TT_M_SIZE), TT_MANIFEST_SIZE);
    uint64_t want = tt_hash64(in, TT_M_CHECKSUM, 0), got = tt_get64(in + TT_M_CHECKSUM);
    if (want != got)
        return tt_fail(err, TT_E_CHECKSUM, 0, TT_M_CHECKSUM,
                       "manifest checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                       got, want);
    memset(m, 0, sizeof *m);
    m->version = version;
    m->flags = tt_get32(in + TT_M_FLAGS);
    m->lib_version = tt_get32(in + TT_M_LIBVER);
    m->block_size = tt_get32(in + TT_M_BLOCK);
    m->build_id_len = tt_get32(in + TT_M_BIDLEN);
    memcpy(m->build_id, in + TT_M_BID, TT_BUILD_ID_MAX);
    memcpy(m->caller, in + TT_M_CALLER, TT_CALLER_MAX);
    m->event_count = tt_get64(in + TT_M_EVENTS);
    m->payload_bytes = tt_get64(in + TT_M_PAYLOAD);
    m->chunk_count = tt_get64(in + TT_M_CHUNKS);
    m->block_count = tt_get64(in + TT_M_BLOCKS);
    m->largest_chunk = tt_get64(in + TT_M_LCHUNK);
    m->largest_event = tt_get64(in + TT_M_LEVENT);
    m->largest_split = tt_get64(in + TT_M_LSPLIT);
    m->thread_count = tt_get32(in + TT_M_THREADS);
    m->object_count = tt_get32(in + TT_M_OBJECTS);
    m->data_offset = tt_get64(in + TT_M_DATA);
    m->data_end = tt_get64(in + TT_M_DATAEND);
    m->threads_offset = tt_get64(in + TT_M_THR_OFF);
    m->threads_length = tt_get64(in + TT_M_THR_LEN);
    m->objects_offset = tt_get64(in + TT_M_OBJ_OFF);
    m->objects_length = tt_get64(in + TT_M_OBJ_LEN);
    m->file_size = tt_get64(in + TT_M_FSIZE);
    m->ticks_per_sec = tt_get64(in + TT_M_TPS);
    m->tick_origin = tt_get64(in + TT_M_TORIGIN);
    m->realtime_origin_ns = (int64_t)tt_get64(in + TT_M_RTORIGIN);
    m->events_checksum = tt_get64(in + TT_M_EVSUM);
    m->stall_count = tt_get64(in + TT_M_STALLS);
    m->stall_ns = tt_get64(in + TT_M_STALLNS);
    m->write_errno = (int32_t)tt_get32(in + TT_M_ERRNO);
    m->pid = tt_get32(in + TT_M_PID);
    if (version >= 2) {
        m->index_offset = tt_get64(in + TT_M_INDEX_OFF);
        m->index_length = tt_get64(in + TT_M_INDEX_LEN);
        m->threads_refused = tt_get32(in + TT_M_REFUSED);
        m->children_untraced = tt_get32(in + TT_M_UNTRACED);
        m->execs_untraceable = tt_get32(in + TT_M_UNTRACEABLE);
        memcpy(m->auth, in + TT_M_AUTH, TT_AUTH_LEN);
        for (unsigned i = TT_M_UNTRACEABLE + 4; i < TT_M_AUTH; i++)
            if (in[i])
                return tt_fail(err, TT_E_CORRUPT, 0, i, "reserved manifest byte %u is not zero", i);
    }

    if (version >= 4) {
        m->checkpoints_offset = tt_get64(in + TT_M_CP_OFF);
        m->checkpoints_length = tt_get64(in + TT_M_CP_LEN);
        m->checkpoint_count = tt_get32(in + TT_M_CP_COUNT);
        m->restore_count = tt_get32(in + TT_M_CP_RESTORES);
    }

    /* a checksum only says the writer meant these values; check they describe a file */
    for (unsigned i = version >= 4 ? TT_M_RESERVED_V4 : version >= 2 ? TT_M_RESERVED
                                                                      : TT_M_INDEX_OFF;
         i < TT_M_CHECKSUM; i++)
        if (in[i])
            return tt_fail(err, TT_E_CORRUPT, 0, i, "reserved manifest byte %u is not zero", i);
    if (m->flags & ~(TT_MF_FINALIZED | TT_MF_INCOMPLETE | TT_MF_RECOVERED | TT_MF_CRASHED | TT_MF_TSC))
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_FLAGS, "unknown manifest flags 0x%x", m->flags);
    if (m->write_errno && !(m->flags & TT_MF_INCOMPLETE))
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_ERRNO, "a write error without the incomplete flag");
    if (m->build_id_len > TT_BUILD_ID_MAX)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_BIDLEN, "build-id length %u exceeds %u",
                       m->build_id_len, TT_BUILD_ID_MAX);
    if (memchr(m->caller, 0, TT_CALLER_MAX) == NULL)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_CALLER, "caller string is not terminated");
    if (!(m->flags & TT_MF_FINALIZED) || (m->flags & TT_MF_INCOMPLETE))
        return TT_OK; /* partial or cut short by a write error: the rest need not hold */
    if (m->block_size < 4096 || (m->block_size & (m->block_size - 1)))
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_BLOCK, "block size %u is invalid", m->block_size);
    if (m->data_offset != TT_MANIFEST_SIZE)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_DATA, "data offset %" PRIu64 " is not %u",
                       m->data_offset, TT_MANIFEST_SIZE);
    if (m->data_end < m->data_offset || m->data_end > m->file_size ||
        m->threads_offset != m->data_end ||
        m->threads_length < TT_CHUNK_HEADER || m->threads_length > m->file_size ||
        m->objects_offset != m->threads_offset + m->threads_length ||
        m->objects_length < TT_CHUNK_HEADER || m->objects_length > m->file_size ||
        m->objects_offset + m->objects_length > m->file_size)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_DATAEND,
                       "the data area and tables do not tile the file");
    /* version 2: [summary chunk][index directory chunk] may follow the object table; the
     * directory ends the file (index.c checks the summary's place) */
    if (m->index_offset == 0 ? (m->index_length != 0 ||
                                m->objects_offset + m->objects_length != m->file_size)
                             : (m->index_length < TT_CHUNK_HEADER ||
                                m->index_offset < m->objects_offset + m->objects_length ||
                                m->index_length > m->file_size - m->index_offset ||
                                m->index_offset + m->index_length != m->file_size))
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_INDEX_OFF,
                       "the index directory (offset %" PRIu64 ", %" PRIu64 " bytes) does not end "
                       "the file", m->index_offset, m->index_length);
    /* version 4: the checkpoint table is one chunk inside the data area, and each of its rows
     * takes at least 8 bytes (FORMAT.md §15) */
    if (m->checkpoints_offset == 0
            ? (m->checkpoints_length || m->checkpoint_count || m->restore_count)
            : (m->checkpoints_offset < m->data_offset ||
               m->checkpoints_length < TT_CHUNK_HEADER ||
               m->checkpoints_offset > m->data_end ||
               m->checkpoints_length > m->data_end - m->checkpoints_offset ||
               (uint64_t)m->checkpoint_count + m->restore_count == 0 ||
               (uint64_t)m->checkpoint_count + m->restore_count >
                   (m->checkpoints_length - TT_CHUNK_HEADER) / 8))
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_CP_OFF,
                       "the checkpoint table (offset %" PRIu64 ", %" PRIu64 " bytes, %" PRIu32
                       " checkpoints, %" PRIu32 " restores) is not a chunk of the data area",
                       m->checkpoints_offset, m->checkpoints_length, m->checkpoint_count,
                       m->restore_count);
    if (m->threads_length - TT_CHUNK_HEADER != (uint64_t)m->thread_count * TT_THREAD_ROW)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_THR_LEN,
                       "thread table of %" PRIu64 " bytes does not hold %u threads",
                       m->threads_length, m->thread_count);
    if (m->file_size != size)
        return tt_fail(err, TT_E_TRUNCATED, 0, size < m->file_size ? size : m->file_size,
                       "file is %" PRIu64 " bytes, the manifest says %" PRIu64, size, m->file_size);
    if (m->block_count != (m->file_size - m->data_offset + m->block_size - 1) / m->block_size)
        return tt_fail(err, TT_E_COUNTS, 0, TT_M_BLOCKS, "block count %" PRIu64 " does not match "
                       "the file size", m->block_count);
    if (m->ticks_per_sec == 0)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_TPS, "ticks per second is zero");
    if (m->largest_split > m->largest_event || m->largest_event > m->payload_bytes)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_LEVENT, "largest event sizes are inconsistent");
    return TT_OK;
}

void tt_thread_row_encode(uint8_t out[TT_THREAD_ROW], const tt_thread_entry *e)
{
    tt_put32(out, e->id);
    tt_put32(out + 4, e->os_tid);
    tt_put32(out + 8, e->name);
    tt_put32(out + 12, e->flags);
    tt_put64(out + 16, e->event_count);
    tt_put64(out + 24, e->chunk_count);
    tt_put64(out + 32, e->first_time);
    tt_put64(out + 40, e->last_time);
}

void tt_thread_row_decode(const uint8_t in[TT_THREAD_ROW], tt_thread_entry *e)
{
    e->id = tt_get32(in);
    e->os_tid = tt_get32(in + 4);
    e->name = tt_get32(in + 8);
    e->flags = tt_get32(in + 12);
    e->event_count = tt_get64(in + 16);
    e->chunk_count = tt_get64(in + 24);
    e->first_time = tt_get64(in + 32);
    e->last_time = tt_get64(in + 40);
}
