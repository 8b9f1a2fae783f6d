# Included by every compiled module that reads or writes big-endian fields (_wire, _record,
# _dispatch, _columns): RocketMQ's integers on disk and on the wire are big-endian and Java-signed,
# and these are the one definition of reading and writing them, and of the upper-case hex digits
# of msg ids and escapes. Pointers are `void*` so a caller passes `char*` and `unsigned char*`
# alike; the compiler turns each into a load or store and a byte swap.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef const char* _HEX_DIGITS = b"0123456789ABCDEF"


cdef inline int16_t _get16(const void* at) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>at
    return <int16_t>((<uint16_t>p[0] << 8) | <uint16_t>p[1])


cdef inline uint32_t _getu32(const void* at) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>at
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int32_t _get32(const void* at) noexcept nogil:
    return <int32_t>_getu32(at)


cdef inline int64_t _get64(const void* at) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>at
    return <int64_t>((<uint64_t>_getu32(p) << 32) | <uint64_t>_getu32(p + 4))


cdef inline void _put32(void* at, uint32_t v) noexcept nogil:
    cdef uint8_t* p = <uint8_t*>at
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void _put64(void* at, uint64_t v) noexcept nogil:
    cdef uint8_t* p = <uint8_t*>at
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)


cdef inline void _hex64(void* at, uint64_t v) noexcept nogil:
    """16 upper-case hex digits of `v` (the commit-log offset half of an offsetMsgId)."""
    cdef char* out = <char*>at
    cdef int k
    for k in range(16):
        out[k] = _HEX_DIGITS[(v >> (60 - 4 * k)) & 0xF]
