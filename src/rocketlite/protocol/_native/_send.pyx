# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The send path's compiled twins: a producer's properties rewritten, a batch body decoded.

`send_properties` is `protocol.message.send_properties` and `send_batch_messages` is
`protocol.batch.send_batch_messages`, giving the same results and raising the same errors
(`tests/protocol/test_native_send.py` pins them). Both work on the UTF-8 bytes: the separators
\\x01 and \\x02 are ASCII, so they never occur inside a multi-byte sequence, and two keys are the
same string exactly when their UTF-8 bytes are equal. A properties string is parsed into a small
array of (key, value) pointer pairs, with the map semantics of the reference (a repeated key
keeps its first place and takes the last value), and written back once.

Where the byte view does not hold, the reference runs instead, so the results cannot differ: a
string that has no UTF-8 form (lone surrogates), or more properties than the small array holds
(the linear key search would then grow quadratically; the reference's dict does not).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp, memcpy

from rocketlite.protocol import batch as _batch
from rocketlite.protocol import message as _message
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.record import MessageInner


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


cdef inline int32_t _int32_at(const unsigned char* p) noexcept:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef bint _is_ascii(const unsigned char* p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    cdef unsigned char acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


def send_batch_messages(body, str header_properties, str cluster, topic, born_host, store_host,
                        queue_id, sys_flag, born_timestamp, reconsume_times):
    """`protocol.batch.send_batch_messages`: (messages to store, whether an entry was delayed)."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t size, pos = 0, body_len, props_len, props_start, end, total, hn, cn
    cdef Py_ssize_t nbatch, count, i
    cdef Prop batch[MAX_PROPS + 1]
    cdef Prop props[2 * MAX_PROPS + 2]
    cdef const char* h
    cdef const char* c
    cdef bint delayed = False
    cdef list msgs = []
    h = _utf8(header_properties, &hn)
    c = _utf8(cluster, &cn)
    if h == NULL or c == NULL:
        return _batch.send_batch_messages(body, header_properties, cluster, topic, born_host, store_host,
                                          queue_id, sys_flag, born_timestamp, reconsume_times)
    nbatch = _parse(h, hn, batch, MAX_PROPS)
    if nbatch < 0:
        return _batch.send_batch_messages(body, header_properties, cluster, topic, born_host, store_host,
                                          queue_id, sys_flag, born_timestamp, reconsume_times)
    _drop(batch, nbatch, b"WAIT", 4)
    nbatch = _put(batch, nbatch, b"CLUSTER", 7, c, cn)
    batch_dict = None  # the reference's batch map, built only for an entry too big for the array
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        while pos < size:
            if size - pos < 20:
                raise ProtocolError(f"batch entry at byte {pos} is torn: {size - pos} bytes left")
            total = _int32_at(p + pos)
            flag = _int32_at(p + pos + 12)
            body_len = _int32_at(p + pos + 16)
            if body_len < 0 or pos + 20 + body_len + 2 > size:
                raise ProtocolError(f"batch entry at byte {pos}: body length {body_len} overruns the batch")
            props_len = <short>((p[pos + 20 + body_len] << 8) | p[pos + 21 + body_len])
            props_start = pos + 22 + body_len
            end = props_start + props_len
            if props_len < 0 or end > size:
                raise ProtocolError(
                    f"batch entry at byte {pos}: properties length {props_len} overruns the batch"
                )
            if total != end - pos:
                raise ProtocolError(
                    f"batch entry at byte {pos}: TOTALSIZE {total} but the entry is {end - pos} bytes"
                )
            if not _is_ascii(p + props_start, props_len):
                try:
                    PyUnicode_DecodeUTF8(<const char*>p + props_start, props_len, NULL)
                except UnicodeDecodeError as exc:
                    raise ProtocolError(f"batch entry at byte {pos}: properties are not UTF-8") from exc
            if not delayed:
                count = _parse(<const char*>p + props_start, props_len, props, MAX_PROPS)
                if count < 0:
                    if batch_dict is None:
                        batch_dict = _message.string_to_properties(header_properties)
                        batch_dict.pop("WAIT", None)
                        batch_dict["CLUSTER"] = cluster
                    stored = _batch.batch_entry_properties(
                        PyUnicode_DecodeUTF8(<const char*>p + props_start, props_len, NULL), batch_dict
                    )
                    delayed = stored is None
                elif _find(props, count, b"DELAY", 5) >= 0:
                    delayed = True
                else:
                    _drop(props, count, b"WAIT", 4)
                    for i in range(nbatch):
                        if batch[i].live and _find(props, count, batch[i].k, batch[i].kl) < 0:
                            props[count] = batch[i]
                            count += 1
                    stored = _to_str(props, count)
                if not delayed:
                    msgs.append(MessageInner(
                        topic, PyBytes_FromStringAndSize(<const char*>p + pos + 20, body_len),
                        born_host, store_host, queue_id, flag, sys_flag, born_timestamp, reconsume_times,
                        0, stored,
                    ))
            pos = end
    finally:
        PyBuffer_Release(&view)
    if delayed:
        return [], True
    return msgs, False
