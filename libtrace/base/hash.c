/* SPDX-License-Identifier: MIT */
/* The only file that includes xxhash: XXH3-64 for chunk and manifest checksums. Its
 * implementation is compiled in (XXH_INLINE_ALL, from the header alone): one library fewer for
 * ld.so to map in every traced process, some 35 µs of each one's start (docs/PERFORMANCE.md).
 * The baseline's SSE2 path, not libxxhash's run-time AVX2 dispatch: a chunk's checksum is a
 * fraction of a nanosecond per event either way. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base.h"

uint64_t tt_hash64(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}
