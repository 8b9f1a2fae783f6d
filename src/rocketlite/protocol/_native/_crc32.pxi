# Included by the compiled modules that check or write a record's BODYCRC (_record, _dispatch,
# _columns): zlib's CRC-32, slicing by 16, so no library has to be linked. One source for all.
#
# _crc_table[k][b] is the CRC register contribution of byte b followed by k zero bytes, so 16
# bytes are folded in with 16 independent table loads.

from libc.stdint cimport uint32_t

cdef uint32_t _crc_table[16][256]


cdef void _init_crc_table() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ (0xEDB88320U if c & 1 else 0)
        _crc_table[0][i] = c
    for i in range(256):
        c = _crc_table[0][i]
        for k in range(1, 16):
            c = _crc_table[0][c & 0xFF] ^ (c >> 8)
            _crc_table[k][i] = c


_init_crc_table()


cdef inline uint32_t _crc_le32(const unsigned char* p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint32_t _crc_fold4(uint32_t w, int k) noexcept nogil:
    """The contribution of the 4 bytes of `w` (little-endian) followed by k zero bytes."""
    return (
        _crc_table[k + 3][w & 0xFF] ^ _crc_table[k + 2][(w >> 8) & 0xFF]
        ^ _crc_table[k + 1][(w >> 16) & 0xFF] ^ _crc_table[k][w >> 24]
    )


cdef uint32_t _crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """`zlib.crc32(p[:n])`."""
    cdef uint32_t crc = 0xFFFFFFFFU
    while n >= 16:
        crc = (
            _crc_fold4(_crc_le32(p) ^ crc, 12) ^ _crc_fold4(_crc_le32(p + 4), 8)
            ^ _crc_fold4(_crc_le32(p + 8), 4) ^ _crc_fold4(_crc_le32(p + 12), 0)
        )
        p += 16
        n -= 16
    while n > 0:
        crc = _crc_table[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return crc ^ 0xFFFFFFFFU
