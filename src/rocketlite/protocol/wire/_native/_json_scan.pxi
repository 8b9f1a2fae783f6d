# Included by _wire.pyx and _send_lane.pyx: the JSON scanning pieces both read headers with.
#
# A strict-JSON reader for the header shape clients send. Every function returns NULL-like
# failure (`_NO`) for anything it does not take; the caller then gives the whole header to the
# Python codec (or the handler), which decides exactly as the reference does.

from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

cdef object _NO = object()

# Short header texts recur in every request of a client (group, topic, "TBW102", queue numbers,
# "false", "JAVA"): the last text decoded for each of `_TEXT_SLOTS` hash slots is kept, and the
# same bytes give the same (immutable) str again instead of a new one. Touched with the GIL held.
cdef enum:
    _TEXT_SLOTS = 256
    _TEXT_MAX = 32

cdef struct _Text:
    Py_ssize_t n
    PyObject* text  # an owned reference; NULL for an empty slot
    unsigned char data[_TEXT_MAX]

cdef _Text _texts[_TEXT_SLOTS]


cdef object _short_text(const unsigned char* s, Py_ssize_t n):
    """`s[:n]` (n <= _TEXT_MAX, no escapes) decoded from UTF-8, from the cache when it is there;
    a UnicodeDecodeError as PyUnicode_DecodeUTF8 raises it."""
    cdef uint32_t h = 2166136261u ^ <uint32_t>n
    cdef Py_ssize_t i
    cdef _Text* slot
    cdef object text
    for i in range(n):
        h = (h ^ s[i]) * 16777619u
    slot = &_texts[(h ^ (h >> 16)) & (_TEXT_SLOTS - 1)]
    if slot.text != NULL and slot.n == n and memcmp(slot.data, s, n) == 0:
        return <object>slot.text
    text = PyUnicode_DecodeUTF8(<const char*>s, n, NULL)
    Py_XDECREF(slot.text)
    Py_INCREF(text)
    slot.text = <PyObject*>text
    slot.n = n
    memcpy(slot.data, s, n)
    return text


cdef inline int _hex4(const unsigned char* p, Py_ssize_t n):
    """The value of four hex digits at `p` (`n` bytes there at most), or -1."""
    cdef int v = 0, i, c
    if n < 4:
        return -1
    for i in range(4):
        c = p[i]
        if 48 <= c <= 57:
            v = v * 16 + c - 48
        elif 65 <= c <= 70:
            v = v * 16 + c - 55
        elif 97 <= c <= 102:
            v = v * 16 + c - 87
        else:
            return -1
    return v


cdef object _json_string(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos):
    """The string starting at p[pos[0]] == '"', decoded, pos moved past it; `_NO` for what the
    reader leaves to Python (`\\u` escapes, bad escapes, raw controls, bad UTF-8, no end)."""
    cdef Py_ssize_t i = pos[0] + 1, start = i, j = 0
    cdef int code
    cdef bint escaped = False
    cdef unsigned char c
    cdef unsigned char* tmp
    cdef unsigned char local[512]  # an escaped text's bytes when they fit: no malloc for them
    while i < n:
        c = p[i]
        if c == 34:
            break
        if c == 92:
            escaped = True
            i += 2
            continue
        if c < 0x20:
            return _NO
        i += 1
    if i >= n:
        return _NO
    pos[0] = i + 1
    try:
        if not escaped:
            if i - start <= _TEXT_MAX:
                return _short_text(p + start, i - start)
            return PyUnicode_DecodeUTF8(<const char*>p + start, i - start, NULL)
        tmp = &local[0] if i - start <= 512 else <unsigned char*>malloc(i - start)
        if tmp == NULL:
            raise MemoryError()
        try:
            while start < i:
                c = p[start]
                if c == 92:
                    c = p[start + 1]
                    start += 2
                    if c == 34 or c == 92 or c == 47:
                        pass
                    elif c == 98:
                        c = 8
                    elif c == 102:
                        c = 12
                    elif c == 110:
                        c = 10
                    elif c == 114:
                        c = 13
                    elif c == 116:
                        c = 9
                    elif c == 117:
                        code = _hex4(p + start, i - start)
                        if code < 0 or 0xD800 <= code <= 0xDFFF:
                            return _NO  # not four hex digits, or a surrogate: Python's rules
                        start += 4
                        if code < 0x80:
                            c = code
                        elif code < 0x800:
                            tmp[j] = 0xC0 | (code >> 6)
                            c = 0x80 | (code & 0x3F)
                            j += 1
                        else:
                            tmp[j] = 0xE0 | (code >> 12)
                            tmp[j + 1] = 0x80 | ((code >> 6) & 0x3F)
                            c = 0x80 | (code & 0x3F)
                            j += 2
                    else:
                        return _NO
                else:
                    start += 1
                tmp[j] = c
                j += 1
            return PyUnicode_DecodeUTF8(<const char*>tmp, j, NULL)
        finally:
            if tmp != &local[0]:
                free(tmp)
    except UnicodeDecodeError:
        return _NO


cdef bint _json_skip_string(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos):
    """Move past a string that is not kept: plain ASCII without escapes only (nothing to check)."""
    cdef Py_ssize_t i = pos[0] + 1
    cdef unsigned char c
    while i < n:
        c = p[i]
        if c == 34:
            pos[0] = i + 1
            return True
        if c < 0x20 or c >= 0x7F or c == 92:
            return False
        i += 1
    return False


cdef bint _json_int(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, long long* out):
    """A JSON integer (no fraction or exponent, at most 18 digits) at p[pos[0]]."""
    cdef Py_ssize_t i = pos[0], digits = 0
    cdef bint negative = False
    cdef long long v = 0
    if i < n and p[i] == 45:
        negative = True
        i += 1
    if i >= n or not 48 <= p[i] <= 57:
        return False
    if p[i] == 48 and i + 1 < n and 48 <= p[i + 1] <= 57:
        return False  # a leading zero: not JSON
    while i < n and 48 <= p[i] <= 57:
        v = v * 10 + (p[i] - 48)
        digits += 1
        i += 1
    if digits > 18 or (i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69)):
        return False
    pos[0] = i
    out[0] = -v if negative else v
    return True


cdef inline bint _json_literal(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, const char* word, Py_ssize_t k):
    cdef Py_ssize_t i
    if pos[0] + k > n:
        return False
    for i in range(k):
        if p[pos[0] + i] != <unsigned char>word[i]:
            return False
    pos[0] += k
    return True


cdef inline bint _key_is(const unsigned char* p, Py_ssize_t start, Py_ssize_t length, const char* name, Py_ssize_t k):
    cdef Py_ssize_t i
    if length != k:
        return False
    for i in range(k):
        if p[start + i] != <unsigned char>name[i]:
            return False
    return True
