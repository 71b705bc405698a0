/* SPDX-License-Identifier: MIT */
/* tamper FILE PREFIX OLD NEW: the attack of issue 14 on a trace. In the META object that starts
 * with PREFIX, replaces the bytes OLD by NEW (the same length), then makes every checksum right
 * again (the object table chunk's and the manifest's), so that the trace verifies clean. Only a
 * MAC with a key the attacker does not have can tell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

int main(int argc, char **argv)
{
    if (argc != 5 || strlen(argv[3]) != strlen(argv[4])) {
        fprintf(stderr, "usage: tamper FILE PREFIX OLD NEW (OLD and NEW of one length)\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r+b");
    if (!f)
        return perror(argv[1]), 1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    uint8_t *img = malloc((size_t)size);
    rewind(f);
    if (!img || fread(img, 1, (size_t)size, f) != (size_t)size)
        return fprintf(stderr, "tamper: cannot read %s\n", argv[1]), 1;
    tt_manifest m;
    tt_error_info err;
    if (tt_manifest_decode(img, (uint64_t)size, &m, &err) != TT_OK)
        return fprintf(stderr, "tamper: %s\n", err.message), 1;
    uint8_t *chunk = img + m.objects_offset, *body = chunk + TT_CHUNK_HEADER;
    struct tt_chunk_header h;
    if (tt_chunk_header_decode(chunk, &h))
        return fprintf(stderr, "tamper: no object table\n"), 1;
    size_t plen = strlen(argv[2]), olen = strlen(argv[3]);
    int done = 0;
    for (const uint8_t *p = body, *end = body + h.body_len; p < end && !done;) {
        uint64_t len;
        const uint8_t *q = p + 1;
        if (tt_get_varint(&q, end, &len) != 0)
            break;
        uint8_t *name = (uint8_t *)q;
        if (p[0] == TT_OBJ_META && len >= plen && memcmp(name, argv[2], plen) == 0) {
            for (size_t i = plen; i + olen <= len; i++) {
                if (memcmp(name + i, argv[3], olen) == 0) {
                    memcpy(name + i, argv[4], olen);
                    done = 1;
                    break;
                }
            }
        }
        p = q + len;
    }
    if (!done)
        return fprintf(stderr, "tamper: no META %s holding %s\n", argv[2], argv[3]), 1;
    tt_chunk_header_encode(chunk, &h, body);
    tt_manifest_encode(img, &m);
    rewind(f);
    if (fwrite(img, 1, (size_t)size, f) != (size_t)size || fclose(f) != 0)
        return perror("tamper: write"), 1;
    return 0;
}
