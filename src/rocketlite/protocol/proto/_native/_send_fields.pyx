# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of `send_fields.send_fields`: a `SendMessageRequest`'s bytes read as the
protobuf wire format (see that module for the layout), no message object made. It takes the plain
encoding a client's serializer writes: each known field at most once (but `keys`), with its own
wire type, varints of at most 10 bytes, strings valid UTF-8; of the system properties, those up to
`born_host` (8) and `trace_context` (18). Anything else is declined (None), and the lane sends that
call the ordinary way, where protobuf parses it. `ok_answer`, the lane's answer, is written here
byte for byte as the reference writes it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

DEF NORMAL = 1  # MessageType.NORMAL
DEF CRC32 = 1  # DigestType.CRC32
cdef const char *_HEX = b"0123456789ABCDEF"

include "_crc32.pxi"
include "_crc32_clmul.pxi"


cdef struct Cursor:
    const unsigned char *p
    Py_ssize_t at
    Py_ssize_t end


cdef inline bint _varint(Cursor *c, uint64_t *out) noexcept:
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char b
    while c.at < c.end and shift < 70:
        b = c.p[c.at]
        c.at += 1
        if shift == 63 and b > 1:  # past 64 bits: protobuf refuses it
            return False
        value |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = value
            return True
        shift += 7
    return False


cdef inline bint _span(Cursor *c, Py_ssize_t *start, Py_ssize_t *length) noexcept:
    """A length-delimited field's bytes: [start, start + length) within the cursor's end."""
    cdef uint64_t n
    if not _varint(c, &n) or n > <uint64_t>(c.end - c.at):
        return False
    start[0] = c.at
    length[0] = <Py_ssize_t>n
    c.at += <Py_ssize_t>n
    return True


cdef inline object _text(const unsigned char *p, Py_ssize_t start, Py_ssize_t length):
    """A proto3 string: valid UTF-8, else None (protobuf refuses the request)."""
    try:
        return PyUnicode_DecodeUTF8(<const char *>p + start, length, NULL)
    except UnicodeDecodeError:
        return None


cdef bint _pair(const unsigned char *p, Py_ssize_t start, Py_ssize_t length, bint varints, uint64_t *first,
                uint64_t *second, Py_ssize_t *at, Py_ssize_t *n) noexcept:
    """A message of two fields, each at most once: 1 a varint, 2 a varint (`varints`) or bytes
    (their span in `at`, `n`); absent ones 0."""
    cdef Cursor d
    cdef uint64_t key
    cdef bint one = False, two = False
    first[0] = 0
    second[0] = 0
    if not varints:
        at[0] = 0
        n[0] = 0
    d.p = p
    d.at = start
    d.end = start + length
    while d.at < d.end:
        if not _varint(&d, &key):
            return False
        if key == 0x08 and not one:
            one = True
            if not _varint(&d, first):
                return False
        elif key == (0x10 if varints else 0x12) and not two:
            two = True
            if not (_varint(&d, second) if varints else _span(&d, at, n)):
                return False
        else:
            return False
    return True


cdef object _read_text(Cursor *c):
    """A length-delimited string field at the cursor (None: cut short, or not UTF-8)."""
    cdef Py_ssize_t start, length
    if not _span(c, &start, &length):
        return None
    return _text(c.p, start, length)


cdef bint _inner(Cursor *c, Cursor *inner) noexcept:
    """A length-delimited message field at `c`: `inner` set to read its bytes."""
    cdef Py_ssize_t start, length
    if not _span(c, &start, &length):
        return False
    inner.p = c.p
    inner.at = start
    inner.end = start + length
    return True


def send_fields(bytes data not None):
    cdef Cursor c, m, s
    cdef uint64_t key, v, w
    cdef Py_ssize_t start, length, mstart = -1, mlength = 0, body_at = -1, body_len = 0
    cdef Py_ssize_t sum_at = 0, sum_len = 0
    cdef uint32_t crc
    cdef char hexed[8]
    cdef bint crc_ok = False
    cdef int i
    cdef int64_t seconds = 0
    cdef int32_t nanos = 0, digest_type = 0, message_type = 0
    cdef unsigned int seen = 0
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(data)
    c.p = p
    c.at = 0
    c.end = PyBytes_GET_SIZE(data)
    # SendMessageRequest: exactly one `messages`
    while c.at < c.end:
        if not _varint(&c, &key) or key != 0x0A or mstart >= 0:
            return None
        if not _span(&c, &mstart, &mlength):
            return None
    if mstart < 0:
        return None
    topic = None
    message_id = None
    tag = None
    checksum = ""
    keys = []
    m.p = p
    m.at = mstart
    m.end = mstart + mlength
    while m.at < m.end:
        if not _varint(&m, &key):
            return None
        if key == 0x0A and not seen & 1:  # topic: Resource
            seen |= 1
            if not _inner(&m, &s):
                return None
            while s.at < s.end:
                if not _varint(&s, &key) or not _span(&s, &start, &length):
                    return None
                if key == 0x0A:  # resource_namespace: the lane takes none
                    if length:
                        return None
                elif key == 0x12 and topic is None:
                    topic = _text(p, start, length)
                    if topic is None:
                        return None
                else:
                    return None
        elif key == 0x1A and not seen & 2:  # system_properties
            seen |= 2
            if not _inner(&m, &s):
                return None
            while s.at < s.end:
                if not _varint(&s, &key):
                    return None
                if key == 0x0A and not seen & 4:  # tag
                    seen |= 4
                    tag = _read_text(&s)
                    if tag is None:
                        return None
                elif key == 0x12:  # keys
                    text = _read_text(&s)
                    if text is None:
                        return None
                    keys.append(text)
                elif key == 0x1A and not seen & 8:  # message_id
                    seen |= 8
                    message_id = _read_text(&s)
                    if message_id is None:
                        return None
                elif key == 0x22 and not seen & 16:  # body_digest: Digest{1 type, 2 checksum}
                    seen |= 16
                    if not _span(&s, &start, &length):
                        return None
                    if not _pair(p, start, length, False, &v, &w, &sum_at, &sum_len):
                        return None
                    digest_type = <int32_t>v
                    if sum_len:
                        checksum = _text(p, sum_at, sum_len)
                        if checksum is None:
                            return None
                elif key == 0x28 and not seen & 128:  # body_encoding (not used by the lane)
                    seen |= 128
                    if not _varint(&s, &v):
                        return None
                elif key == 0x30 and not seen & 256:  # message_type
                    seen |= 256
                    if not _varint(&s, &v):
                        return None
                    message_type = <int32_t>v
                elif key == 0x3A and not seen & 512:  # born_timestamp: Timestamp{1 seconds, 2 nanos}
                    seen |= 512
                    if not _span(&s, &start, &length):
                        return None
                    if not _pair(p, start, length, True, &v, &w, NULL, NULL):
                        return None
                    seconds = <int64_t>v
                    nanos = <int32_t>w
                elif (key == 0x42 and not seen & 4096) or (key == 0x92 and not seen & 8192):
                    # born_host (8), trace_context (18): not used by the lane, valid UTF-8
                    seen |= 4096 if key == 0x42 else 8192
                    if _read_text(&s) is None:
                        return None
                else:
                    return None
        elif key == 0x22 and body_at < 0:  # body
            if not _span(&m, &body_at, &body_len):
                return None
        else:  # user_properties (2), unknown fields, repeats
            return None
    if message_type != NORMAL or not message_id:
        return None
    if digest_type == CRC32 and sum_len == 8:  # the body's CRC32 as `f"{crc:08X}"` writes it
        crc = _crc32_fast(p + body_at, body_len) if body_at >= 0 else 0
        for i in range(8):
            hexed[i] = _HEX[(crc >> (28 - 4 * i)) & 0xF]
        crc_ok = memcmp(hexed, p + sum_at, 8) == 0
    return (
        topic if topic is not None else "",
        PyBytes_FromStringAndSize(<const char *>p + body_at, body_len) if body_at >= 0 else b"",
        message_id, tag, tuple(keys), digest_type, checksum, seconds, nanos, crc_ok,
    )


cdef bytes _OK_STATUS = _ref_ok_status()


cdef bytes _ref_ok_status():
    from rocketlite.protocol.proto.send_fields import _OK_STATUS as ok
    return ok


cdef inline Py_ssize_t _put_varint(char *out, uint64_t value) noexcept:
    cdef Py_ssize_t n = 0
    while value > 0x7F:
        out[n] = <char>((value & 0x7F) | 0x80)
        value >>= 7
        n += 1
    out[n] = <char>value
    return n + 1


cdef inline Py_ssize_t _varint_size(uint64_t value) noexcept:
    cdef Py_ssize_t n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


def ok_answer(str message_id not None, uint64_t offset):
    """The compiled twin of `send_fields.ok_answer` (see there)."""
    cdef bytes mid = message_id.encode()
    cdef Py_ssize_t n = PyBytes_GET_SIZE(mid)
    cdef Py_ssize_t status = PyBytes_GET_SIZE(_OK_STATUS)
    cdef Py_ssize_t entry = status
    if n:
        entry += 2 * (1 + _varint_size(n) + n)
    if offset:
        entry += 1 + _varint_size(offset)
    cdef Py_ssize_t total = status + 1 + _varint_size(entry) + entry
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char *w = PyBytes_AS_STRING(out)
    cdef const char *s = PyBytes_AS_STRING(_OK_STATUS)
    cdef Py_ssize_t at = 0
    memcpy(w, s, status)
    at = status
    w[at] = 0x12
    at += 1
    at += _put_varint(w + at, entry)
    memcpy(w + at, s, status)
    at += status
    if n:
        w[at] = 0x12
        at += 1
        at += _put_varint(w + at, n)
        memcpy(w + at, PyBytes_AS_STRING(mid), n)
        at += n
        w[at] = 0x1A
        at += 1
        at += _put_varint(w + at, n)
        memcpy(w + at, PyBytes_AS_STRING(mid), n)
        at += n
    if offset:
        w[at] = 0x20
        at += 1
        at += _put_varint(w + at, offset)
    return out
