# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of `spark/codec/digests_ref.py`: BLAKE2b (RFC 7693, unkeyed, 12 rounds) of many
slices of one buffer, hashed without the GIL. The reference is `hashlib.blake2b` per slice;
`tests/spark/test_native_digests.py` pins the two byte for byte, bad offsets included."""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from array import array

from rocketlite.spark.codec.digests_ref import check_slices

cdef uint64_t IV[8]
IV[:] = [
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
]
cdef uint8_t SIGMA[12][16]
SIGMA[:] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
]


cdef inline uint64_t rotr(uint64_t x, int n) noexcept nogil:
    return (x >> n) | (x << (64 - n))


cdef inline uint64_t load64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16) | (<uint64_t>p[3] << 24)
            | (<uint64_t>p[4] << 32) | (<uint64_t>p[5] << 40) | (<uint64_t>p[6] << 48)
            | (<uint64_t>p[7] << 56))


cdef inline void mix(uint64_t* v, int a, int b, int c, int d, uint64_t x, uint64_t y) noexcept nogil:
    v[a] = v[a] + v[b] + x
    v[d] = rotr(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = rotr(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = rotr(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = rotr(v[b] ^ v[c], 63)


cdef void compress(uint64_t* h, const uint8_t* block, uint64_t counter, bint last) noexcept nogil:
    cdef uint64_t v[16]
    cdef uint64_t m[16]
    cdef int i
    cdef const uint8_t* s
    for i in range(16):
        m[i] = load64(block + 8 * i)
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = IV[i]
    v[12] ^= counter  # the byte counter's high word stays 0: slices are under 2**64 bytes
    if last:
        v[14] = ~v[14]
    for i in range(12):
        s = SIGMA[i]
        mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


cdef void digest_one(const uint8_t* data, int64_t size, int digest_size, uint8_t* out) noexcept nogil:
    cdef uint64_t h[8]
    cdef uint8_t last[128]
    cdef int64_t done = 0
    cdef int i
    for i in range(8):
        h[i] = IV[i]
    h[0] ^= 0x01010000 ^ <uint64_t>digest_size
    while size - done > 128:
        compress(h, data + done, <uint64_t>(done + 128), False)
        done += 128
    memset(last, 0, 128)
    if size > done:
        memcpy(last, data + done, size - done)
    compress(h, last, <uint64_t>size, True)
    for i in range(digest_size):
        out[i] = <uint8_t>(h[i >> 3] >> (8 * (i & 7)))


def blake2b_digests(data, offsets, int digest_size=16):
    """The BLAKE2b digest of every slice of `data` cut at `offsets`, concatenated."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef const int64_t[::1] cuts
    try:
        cuts = offsets  # an int64 buffer (numpy) as it is
    except (TypeError, ValueError):
        cuts = array("q", [int(o) for o in offsets])
    cdef Py_ssize_t n = cuts.shape[0]
    cdef Py_ssize_t i
    cdef bint ok = 1 <= digest_size <= 64
    if ok and n:
        ok = cuts[0] >= 0 and cuts[n - 1] <= view.shape[0]
        for i in range(1, n):
            if cuts[i] < cuts[i - 1]:
                ok = False
                break
    if not ok:
        check_slices(view.shape[0], list(offsets), digest_size)  # raises the reference's error
    cdef Py_ssize_t count = n - 1 if n else 0
    out = bytearray(count * digest_size)
    cdef uint8_t[::1] target = out
    cdef const uint8_t* base = &view[0] if view.shape[0] else NULL
    cdef uint8_t empty = 0
    if base == NULL:
        base = &empty
    with nogil:
        for i in range(count):
            digest_one(base + cuts[i], cuts[i + 1] - cuts[i], digest_size, &target[0] + i * digest_size)
    return bytes(out)
