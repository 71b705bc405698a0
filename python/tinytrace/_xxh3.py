# SPDX-License-Identifier: MIT
"""XXH3-64 with a seed, the checksum of the tinytrace format (docs/FORMAT.md §1: H(data, len,
seed) = XXH3_64bits_withSeed).

hash64(data, seed) uses the xxhash module (Debian: python3-xxhash) when it can be imported and
this file's own implementation otherwise, written from the XXH3 specification of xxHash 0.8.
Inputs longer than 240 bytes are hashed in 1 KiB blocks of 16 stripes; with numpy the stripes of
all blocks are summed as arrays (an accumulator lane only ever has values added to it between
two scrambles, so the order of the additions does not matter) and only the scrambles run one
block at a time. Without numpy every stripe is a few Python integer operations: correct, but
some 3 MB/s.
"""
import struct

try:
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None

try:
    import xxhash as _xxhash

    _fast = _xxhash.xxh3_64_intdigest
except (ImportError, AttributeError):  # pragma: no cover
    _fast = None

M64 = (1 << 64) - 1
P32_1, P32_2, P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
PRIME_MX1, PRIME_MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25

SECRET = bytes([
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
])
STRIPE, STRIPES_PER_BLOCK = 64, (len(SECRET) - 64) // 8
BLOCK = STRIPE * STRIPES_PER_BLOCK

_u32 = struct.Struct("<I").unpack_from
_u64 = struct.Struct("<Q").unpack_from
_u64x2 = struct.Struct("<QQ").unpack_from
_u64x8 = struct.Struct("<8Q").unpack_from


def _r32(b, o):
    return _u32(b, o)[0]


def _r64(b, o):
    return _u64(b, o)[0]


def _fold(a, b):
    p = a * b
    return (p & M64) ^ (p >> 64)


def _xxh64_avalanche(h):
    h ^= h >> 33
    h = (h * P64_2) & M64
    h ^= h >> 29
    h = (h * P64_3) & M64
    return h ^ (h >> 32)


def _avalanche(h):
    h ^= h >> 37
    h = (h * PRIME_MX1) & M64
    return h ^ (h >> 32)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _rrmxmx(h, n):
    h ^= _rotl(h, 49) ^ _rotl(h, 24)
    h = (h * PRIME_MX2) & M64
    h ^= (h >> 35) + n
    h = (h * PRIME_MX2) & M64
    return h ^ (h >> 28)


def _mix16(b, o, s, so, seed):
    lo, hi = _u64x2(b, o)
    slo, shi = _u64x2(s, so)
    return _fold(lo ^ ((slo + seed) & M64), hi ^ ((shi - seed) & M64))


def _short(b, n, seed):
    s = SECRET
    if n > 8:
        f1 = ((_r64(s, 24) ^ _r64(s, 32)) + seed) & M64
        f2 = ((_r64(s, 40) ^ _r64(s, 48)) - seed) & M64
        lo = _r64(b, 0) ^ f1
        hi = _r64(b, n - 8) ^ f2
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + hi + _fold(lo, hi)) & M64)
    if n >= 4:
        seed ^= int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big") << 32
        i1, i2 = _r32(b, 0), _r32(b, n - 4)
        flip = ((_r64(s, 8) ^ _r64(s, 16)) - seed) & M64
        return _rrmxmx(((i2 + (i1 << 32)) & M64) ^ flip, n)
    if n > 0:
        combined = (b[0] << 16) | (b[n >> 1] << 24) | b[n - 1] | (n << 8)
        flip = ((_r32(s, 0) ^ _r32(s, 4)) + seed) & M64
        return _xxh64_avalanche(combined ^ flip)
    return _xxh64_avalanche(seed ^ _r64(s, 56) ^ _r64(s, 64))


def _mid(b, n, seed):
    s = SECRET
    acc = (n * P64_1) & M64
    if n <= 128:
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(b, 48, s, 96, seed) + _mix16(b, n - 64, s, 112, seed)
                acc += _mix16(b, 32, s, 64, seed) + _mix16(b, n - 48, s, 80, seed)
            acc += _mix16(b, 16, s, 32, seed) + _mix16(b, n - 32, s, 48, seed)
        acc += _mix16(b, 0, s, 0, seed) + _mix16(b, n - 16, s, 16, seed)
        return _avalanche(acc & M64)
    for i in range(8):
        acc += _mix16(b, 16 * i, s, 16 * i, seed)
    acc = _avalanche(acc & M64)
    for i in range(8, n // 16):
        acc += _mix16(b, 16 * i, s, 16 * (i - 8) + 3, seed)
    acc += _mix16(b, n - 16, s, 136 - 17, seed)
    return _avalanche(acc & M64)


def _stripe(acc, b, o, key):
    d = _u64x8(b, o)
    for i in range(8):
        v = d[i]
        k = v ^ key[i]
        acc[i ^ 1] = (acc[i ^ 1] + v) & M64
        acc[i] = (acc[i] + (k & 0xFFFFFFFF) * (k >> 32)) & M64


def _scramble(acc, key):
    for i in range(8):
        a = acc[i]
        a ^= a >> 47
        a ^= key[i]
        acc[i] = (a * P32_1) & M64


def _blocks_numpy(acc, b, nblocks, secret):
    """The stripes of @nblocks whole blocks, summed per block as arrays; the scrambles in
    order."""
    np = _np
    words = np.frombuffer(secret, dtype="<u8", count=len(secret) // 8)
    keys = np.stack([words[n:n + 8] for n in range(STRIPES_PER_BLOCK)])  # key of stripe n
    data = np.frombuffer(b, dtype="<u8", count=nblocks * BLOCK // 8).reshape(
        nblocks, STRIPES_PER_BLOCK, 8)
    k = data ^ keys
    prod = (k & np.uint64(0xFFFFFFFF)) * (k >> np.uint64(32))
    with np.errstate(over="ignore"):
        add = prod.sum(axis=1, dtype=np.uint64)
        add += data.sum(axis=1, dtype=np.uint64)[:, [1, 0, 3, 2, 5, 4, 7, 6]]
    scr = _u64x8(secret, len(secret) - 64)
    for row in add.tolist():
        for i in range(8):
            acc[i] = (acc[i] + row[i]) & M64
        _scramble(acc, scr)


def _long(b, n, seed):
    if seed == 0:
        secret = SECRET
    else:
        out = bytearray(len(SECRET))
        for i in range(0, len(SECRET), 16):
            lo, hi = _u64x2(SECRET, i)
            struct.pack_into("<QQ", out, i, (lo + seed) & M64, (hi - seed) & M64)
        secret = bytes(out)
    acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1]
    nblocks = (n - 1) // BLOCK
    keys = [_u64x8(secret, 8 * s) for s in range(STRIPES_PER_BLOCK)]
    scr = _u64x8(secret, len(secret) - 64)
    if _np is not None and nblocks >= 4:
        _blocks_numpy(acc, b, nblocks, secret)
    else:
        for blk in range(nblocks):
            base = blk * BLOCK
            for s in range(STRIPES_PER_BLOCK):
                _stripe(acc, b, base + s * STRIPE, keys[s])
            _scramble(acc, scr)
    base = nblocks * BLOCK
    for s in range(((n - 1) - base) // STRIPE):
        _stripe(acc, b, base + s * STRIPE, keys[s])
    _stripe(acc, b, n - STRIPE, _u64x8(secret, len(secret) - 64 - 7))
    result = (n * P64_1) & M64
    for i in range(4):
        s0, s1 = _u64x2(secret, 11 + 16 * i)
        result += _fold(acc[2 * i] ^ s0, acc[2 * i + 1] ^ s1)
    return _avalanche(result & M64)


def xxh3_64(data, seed=0):
    """XXH3_64bits_withSeed(data, len(data), seed), by this module's own code."""
    b = bytes(data) if not isinstance(data, (bytes, bytearray)) else data
    n = len(b)
    seed &= M64
    if n <= 16:
        return _short(b, n, seed)
    if n <= 240:
        return _mid(b, n, seed)
    return _long(b, n, seed)


def hash64(data, seed=0):
    """H(data, len, seed) of the format: the xxhash module's XXH3-64 when there is one."""
    if _fast is not None:
        return _fast(data, seed)
    return xxh3_64(data, seed)


def implementation():
    """Which XXH3 hash64 uses: "xxhash" (the module), "numpy" or "python"."""
    if _fast is not None:
        return "xxhash"
    return "numpy" if _np is not None else "python"
