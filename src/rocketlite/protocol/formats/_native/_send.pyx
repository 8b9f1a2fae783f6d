# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The send path's compiled twin of a producer's properties rewrite.

`send_properties` is `protocol.message.send_properties`, giving the same results
(`tests/protocol/test_native_send.py` pins them). (A batch body is handled by `_record.pyx`'s
`encode_batch_records`, `_record_batch.pxi`.) Both work on the UTF-8 bytes: the separators
\\x01 and \\x02 are ASCII, so they never occur inside a multi-byte sequence, and two keys are the
same string exactly when their UTF-8 bytes are equal. A properties string is parsed into a small
array of (key, value) pointer pairs, with the map semantics of the reference (a repeated key
keeps its first place and takes the last value), and written back once.

Where the byte view does not hold, the reference runs instead, so the results cannot differ: a
string that has no UTF-8 form (lone surrogates), or more properties than the small array holds
(the linear key search would then grow quadratically; the reference's dict does not).
"""

from libc.stdint cimport int32_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp, memcpy

from rocketlite.protocol import message as _message


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)


cdef enum:
    MAX_PROPS = 64  # beyond this many properties in one string, the reference's dict


cdef struct Prop:
    const char* k
    Py_ssize_t kl
    const char* v
    Py_ssize_t vl
    bint live


cdef Py_ssize_t _find(Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl) noexcept:
    cdef Py_ssize_t i
    for i in range(count):
        if props[i].live and props[i].kl == kl and memcmp(props[i].k, k, kl) == 0:
            return i
    return -1


cdef Py_ssize_t _parse(const char* s, Py_ssize_t n, Prop* out, Py_ssize_t cap) noexcept:
    """`string_to_properties` into `out`; the count, or -1 when more than `cap` are needed."""
    cdef Py_ssize_t count = 0, pos = 0, end, kl, vl, i
    cdef const char* hit
    cdef const char* sep
    if n == 0:
        return 0
    while pos <= n:
        hit = <const char*>memchr(s + pos, 2, n - pos)
        end = n if hit == NULL else hit - s
        sep = <const char*>memchr(s + pos, 1, end - pos)
        if sep != NULL:
            kl = sep - (s + pos)
            vl = end - (sep - s) - 1
            if kl > 0 and vl > 0:
                i = _find(out, count, s + pos, kl)
                if i >= 0:
                    out[i].v = sep + 1
                    out[i].vl = vl
                else:
                    if count == cap:
                        return -1
                    out[count].k = s + pos
                    out[count].kl = kl
                    out[count].v = sep + 1
                    out[count].vl = vl
                    out[count].live = True
                    count += 1
        pos = end + 1
    return count


cdef inline void _drop(Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl) noexcept:
    cdef Py_ssize_t i = _find(props, count, k, kl)
    if i >= 0:
        props[i].live = False


cdef inline Py_ssize_t _put(Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl,
                            const char* v, Py_ssize_t vl) noexcept:
    """`props[k] = v` (room for one more is the caller's); the new count."""
    cdef Py_ssize_t i = _find(props, count, k, kl)
    if i < 0:
        i = count
        count += 1
        props[i].k = k
        props[i].kl = kl
        props[i].live = True
    props[i].v = v
    props[i].vl = vl
    return count


cdef Py_ssize_t _written_size(Prop* props, Py_ssize_t count) noexcept:
    cdef Py_ssize_t i, size = 0, live = 0
    for i in range(count):
        if props[i].live:
            size += props[i].kl + 1 + props[i].vl
            live += 1
    return size + live - 1 if live else 0


cdef Py_ssize_t _write(Prop* props, Py_ssize_t count, char* out) noexcept:
    """`properties_to_string` into `out` (sized by `_written_size`); the bytes written."""
    cdef Py_ssize_t i, pos = 0
    cdef bint first = True
    for i in range(count):
        if not props[i].live:
            continue
        if not first:
            out[pos] = 2
            pos += 1
        first = False
        memcpy(out + pos, props[i].k, props[i].kl)
        pos += props[i].kl
        out[pos] = 1
        pos += 1
        memcpy(out + pos, props[i].v, props[i].vl)
        pos += props[i].vl
    return pos


cdef str _to_str(Prop* props, Py_ssize_t count):
    cdef Py_ssize_t size = _written_size(props, count)
    cdef char* buf = <char*>malloc(size + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        return PyUnicode_DecodeUTF8(buf, _write(props, count, buf), NULL)
    finally:
        free(buf)


cdef int32_t _java_hash(const unsigned char* p, Py_ssize_t n) noexcept:
    """Java `String.hashCode` of valid UTF-8: over UTF-16 code units (surrogate pairs above
    U+FFFF), wrapping at 32 bits."""
    cdef uint32_t h = 0, cp, c
    cdef Py_ssize_t i = 0
    while i < n:
        c = p[i]
        if c < 0x80:
            cp = c
            i += 1
        elif c < 0xE0:
            cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F)
            i += 2
        elif c < 0xF0:
            cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
            i += 3
        else:
            cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F)
            i += 4
        if cp >= 0x10000:
            cp -= 0x10000
            h = h * 31 + (0xD800 + (cp >> 10))
            h = h * 31 + (0xDC00 + (cp & 0x3FF))
        else:
            h = h * 31 + cp
    return <int32_t>h


cdef object _value(Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl):
    cdef Py_ssize_t i = _find(props, count, k, kl)
    if i < 0:
        return None
    return PyUnicode_DecodeUTF8(props[i].v, props[i].vl, NULL)


cdef const char* _utf8(str text, Py_ssize_t* size):
    """The UTF-8 form CPython caches on the string; NULL (error cleared) when it has none."""
    try:
        return PyUnicode_AsUTF8AndSize(text, size)
    except UnicodeEncodeError:
        return NULL


def send_properties(str text, str cluster):
    """`protocol.message.send_properties`: (properties to store, tags code, UNIQ_KEY, KEYS, DELAY)."""
    cdef Py_ssize_t n, cn, count, i
    cdef Prop props[MAX_PROPS + 1]
    cdef const char* s = _utf8(text, &n)
    cdef const char* c = _utf8(cluster, &cn)
    if s == NULL or c == NULL:
        return _message.send_properties(text, cluster)
    count = _parse(s, n, props, MAX_PROPS)
    if count < 0:
        return _message.send_properties(text, cluster)
    _drop(props, count, b"WAIT", 4)
    count = _put(props, count, b"CLUSTER", 7, c, cn)
    i = _find(props, count, b"TAGS", 4)
    code = _java_hash(<const unsigned char*>props[i].v, props[i].vl) if i >= 0 else 0
    return (
        _to_str(props, count),
        code,
        _value(props, count, b"UNIQ_KEY", 8),
        _value(props, count, b"KEYS", 4),
        _value(props, count, b"DELAY", 5),
    )
