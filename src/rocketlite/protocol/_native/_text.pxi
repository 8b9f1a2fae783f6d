# Included by the compiled modules that handle text (_wire, _send, _record, _dispatch, _columns):
# a str's UTF-8 form, ASCII and strict UTF-8 checks over bytes, and Java's `String.hashCode` (tag
# codes, index keys), each defined once. Java hashes UTF-16 code units; a code point past U+FFFF
# counts as its two surrogates (`_java_hash_cp`), whichever form the text arrives in.

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from "Python.h":
    const char* _rl_as_utf8 "PyUnicode_AsUTF8AndSize" (object text, Py_ssize_t* size) except NULL


cdef inline const char* _utf8_or_null(object text, Py_ssize_t* size):
    """The UTF-8 form CPython caches on a str; NULL (error cleared) when it has none (lone
    surrogates)."""
    try:
        return _rl_as_utf8(text, size)
    except UnicodeEncodeError:
        return NULL


cdef inline bint _ascii(const void* at, Py_ssize_t n) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>at
    cdef Py_ssize_t i
    cdef uint8_t acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


cdef bint _valid_utf8(const uint8_t* s, int64_t n) noexcept nogil:
    """Whether `s[:n]` is strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF)."""
    cdef int64_t i = 0
    cdef uint64_t word
    cdef uint8_t c, lo, hi
    cdef int need, k
    while i < n:
        if i + 8 <= n:
            memcpy(&word, s + i, 8)
            if (word & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        lo, hi = 0x80, 0xBF
        if c < 0xC2:
            return False
        elif c < 0xE0:
            need = 1
        elif c < 0xF0:
            need = 2
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif c < 0xF5:
            need = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        else:
            return False
        if i + need >= n:
            return False
        if s[i + 1] < lo or s[i + 1] > hi:
            return False
        for k in range(2, need + 1):
            if s[i + k] < 0x80 or s[i + k] > 0xBF:
                return False
        i += need + 1
    return True


cdef inline uint32_t _java_hash_cp(uint32_t h, uint32_t cp) noexcept nogil:
    """`h` continued over one code point's UTF-16 code units."""
    if cp >= 0x10000:
        cp -= 0x10000
        h = h * 31 + (0xD800 + (cp >> 10))
        return h * 31 + (0xDC00 + (cp & 0x3FF))
    return h * 31 + cp


cdef inline uint32_t _java_hash_utf8(uint32_t h, const void* at, Py_ssize_t n) noexcept nogil:
    """`h` continued, as Java's `String.hashCode`, over the text whose valid UTF-8 is `at[:n]`
    (for ASCII, simply over the bytes)."""
    cdef const uint8_t* p = <const uint8_t*>at
    cdef uint32_t c, cp
    cdef Py_ssize_t i = 0
    while i < n:
        c = p[i]
        if c < 0x80:
            h = h * 31 + c
            i += 1
            continue
        if c < 0xE0:
            cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F)
            i += 2
        elif c < 0xF0:
            cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
            i += 3
        else:
            cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F)
            i += 4
        h = _java_hash_cp(h, cp)
    return h


cdef inline uint32_t _java_hash_str(uint32_t h, str s):
    """`h` continued, as Java's `String.hashCode`, over `s`."""
    cdef Py_UCS4 ch
    for ch in s:
        h = _java_hash_cp(h, <uint32_t>ch)
    return h
