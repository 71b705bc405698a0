/* SPDX-License-Identifier: MIT */
/* The only file that includes xxhash: XXH3-64 for chunk and manifest checksums. */
#include <xxhash.h>

#include "base.h"

uint64_t tt_hash64(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}
