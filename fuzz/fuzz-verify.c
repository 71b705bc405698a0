/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the full verify path — tt_verify, a sequential read with tt_reader_next and
 * tt_reader_peek, per-thread cursors, and replay's matching fast paths — over a whole trace file.
 *
 * Input: a control byte, then a trace file. Before the library sees the file, every checksum the
 * format defines is recomputed over the (mutated) bytes: the chunk checksums of the event chunks
 * walked from data_offset and of the two tables, the events checksum, file_size and block_count,
 * and last the manifest checksum. The low four bits of the control byte keep one of those as it
 * is (FZ_KEEP_* in fuzz.h). See fz_read_all for the properties checked.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned ctl = data[0];
    data++;
    size--;
    uint8_t *f = fz_copy(data, size);
    fz_fixup(f, size, ctl & 0x0Fu);
    fz_dump(f, size);
    fz_read_all(f, size);
    free(f);
    return 0;
}
