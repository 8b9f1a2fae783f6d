# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled twin of `send_fields.send_fields`: a `SendMessageRequest`'s bytes read as the
protobuf wire format (see that module for the layout), no message object made. It takes the plain
encoding a client's serializer writes: each known field at most once (but `keys`), with its own
wire type, varints of at most 10 bytes, strings valid UTF-8; of the system properties, those up to
`born_host` (8), `queue_id` (13, set by Java and Node; unused) and `trace_context` (18). Anything
else is declined (None), and the lane sends that
call the ordinary way, where protobuf parses it. `ok_answer`, the lane's answer, is written here
byte for byte as the reference writes it. The reader (`_read`) gives the fields as spans of the
request's bytes; `send_fields` makes them objects (a request of more than `_KEYS_CAP` keys goes to
the reference), and the lane's compiled loop (`_send_run.pxi`, included below) uses the spans.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

DEF NORMAL = 1  # MessageType.NORMAL
DEF CRC32 = 1  # DigestType.CRC32
DEF MD5 = 2
DEF SHA1 = 3
cdef const char *_HEX = b"0123456789ABCDEF"

include "_crc32.pxi"
include "_crc32_clmul.pxi"
include "_text.pxi"  # ASCII and strict UTF-8 checks


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


cdef enum:
    _KEYS_CAP = 16  # keys held per request; beyond, `send_fields` asks the reference


cdef struct _Fields:
    # spans of the request's bytes (start -1: absent)
    Py_ssize_t topic_at, topic_len, body_at, body_len, id_at, id_len, tag_at, tag_len, sum_at, sum_len
    Py_ssize_t key_at[_KEYS_CAP]
    Py_ssize_t key_len[_KEYS_CAP]
    int nkeys
    int64_t seconds
    int32_t nanos, digest_type
    bint crc_ok  # a CRC32 digest as `f"{crc:08X}"` writes it
    bint digest_ok  # a digest `send.digest_problem` takes, in an ASCII spelling (see `_digest_ok`)


cdef bint _text_ok(const unsigned char *p, Py_ssize_t start, Py_ssize_t length) noexcept:
    """A proto3 string: valid UTF-8 (protobuf refuses the request otherwise)."""
    return _ascii(p + start, length) or _valid_utf8(p + start, length)


cdef bint _read_span(Cursor *c, Py_ssize_t *at, Py_ssize_t *n) noexcept:
    """A length-delimited string field at the cursor, valid UTF-8."""
    return _span(c, at, n) and _text_ok(c.p, at[0], n[0])


cdef bint _inner(Cursor *c, Cursor *inner) noexcept:
    """A length-delimited message field at `c`: `inner` set to read its bytes."""
    cdef Py_ssize_t start, length
    if not _span(c, &start, &length):
        return False
    inner.p = c.p
    inner.at = start
    inner.end = start + length
    return True


cdef int _read(const unsigned char *p, Py_ssize_t size, _Fields *f) noexcept:
    """The lane's fields of a request's bytes into `f`: 1; 0 declined; -1 more keys than `f` holds."""
    cdef Cursor c, m, s
    cdef uint64_t key, v, w
    cdef Py_ssize_t start, length, mstart = -1, mlength = 0
    cdef uint32_t crc
    cdef char hexed[8]
    cdef int i
    cdef int32_t message_type = 0
    cdef unsigned int seen = 0
    f.topic_at = f.body_at = f.id_at = f.tag_at = -1
    f.topic_len = f.body_len = f.id_len = f.tag_len = f.sum_at = f.sum_len = 0
    f.nkeys = 0
    f.seconds = 0
    f.nanos = f.digest_type = 0
    f.crc_ok = f.digest_ok = False
    c.p = p
    c.at = 0
    c.end = size
    # SendMessageRequest: exactly one `messages`
    while c.at < c.end:
        if not _varint(&c, &key) or key != 0x0A or mstart >= 0:
            return 0
        if not _span(&c, &mstart, &mlength):
            return 0
    if mstart < 0:
        return 0
    m.p = p
    m.at = mstart
    m.end = mstart + mlength
    while m.at < m.end:
        if not _varint(&m, &key):
            return 0
        if key == 0x0A and not seen & 1:  # topic: Resource
            seen |= 1
            if not _inner(&m, &s):
                return 0
            while s.at < s.end:
                if not _varint(&s, &key) or not _span(&s, &start, &length):
                    return 0
                if key == 0x0A:  # resource_namespace: the lane takes none
                    if length:
                        return 0
                elif key == 0x12 and f.topic_at < 0:
                    if not _text_ok(p, start, length):
                        return 0
                    f.topic_at = start
                    f.topic_len = length
                else:
                    return 0
        elif key == 0x1A and not seen & 2:  # system_properties
            seen |= 2
            if not _inner(&m, &s):
                return 0
            while s.at < s.end:
                if not _varint(&s, &key):
                    return 0
                if key == 0x0A and not seen & 4:  # tag
                    seen |= 4
                    if not _read_span(&s, &f.tag_at, &f.tag_len):
                        return 0
                elif key == 0x12:  # keys
                    if not _read_span(&s, &start, &length):
                        return 0
                    if f.nkeys == _KEYS_CAP:
                        return -1
                    f.key_at[f.nkeys] = start
                    f.key_len[f.nkeys] = length
                    f.nkeys += 1
                elif key == 0x1A and not seen & 8:  # message_id
                    seen |= 8
                    if not _read_span(&s, &f.id_at, &f.id_len):
                        return 0
                elif key == 0x22 and not seen & 16:  # body_digest: Digest{1 type, 2 checksum}
                    seen |= 16
                    if not _span(&s, &start, &length):
                        return 0
                    if not _pair(p, start, length, False, &v, &w, &f.sum_at, &f.sum_len):
                        return 0
                    f.digest_type = <int32_t>v
                    if f.sum_len and not _text_ok(p, f.sum_at, f.sum_len):
                        return 0
                elif key == 0x28 and not seen & 128:  # body_encoding (not used by the lane)
                    seen |= 128
                    if not _varint(&s, &v):
                        return 0
                elif key == 0x30 and not seen & 256:  # message_type
                    seen |= 256
                    if not _varint(&s, &v):
                        return 0
                    message_type = <int32_t>v
                elif key == 0x3A and not seen & 512:  # born_timestamp: Timestamp{1 seconds, 2 nanos}
                    seen |= 512
                    if not _span(&s, &start, &length):
                        return 0
                    if not _pair(p, start, length, True, &v, &w, NULL, NULL):
                        return 0
                    f.seconds = <int64_t>v
                    f.nanos = <int32_t>w
                elif key == 0x68 and not seen & 1024:  # queue_id (Java, Node): the broker picks the queue
                    seen |= 1024
                    if not _varint(&s, &v):
                        return 0
                elif (key == 0x42 and not seen & 4096) or (key == 0x92 and not seen & 8192):
                    # born_host (8), trace_context (18): not used by the lane, valid UTF-8
                    seen |= 4096 if key == 0x42 else 8192
                    if not _read_span(&s, &start, &length):
                        return 0
                else:
                    return 0
        elif key == 0x22 and f.body_at < 0:  # body
            if not _span(&m, &f.body_at, &f.body_len):
                return 0
        else:  # user_properties (2), unknown fields, repeats
            return 0
    if message_type != NORMAL or f.id_len == 0:
        return 0
    if f.digest_type == CRC32:
        crc = _crc32_fast(p + f.body_at, f.body_len) if f.body_at >= 0 else 0
        if f.sum_len == 8:  # the body's CRC32 as `f"{crc:08X}"` writes it
            for i in range(8):
                hexed[i] = _HEX[(crc >> (28 - 4 * i)) & 0xF]
            f.crc_ok = memcmp(hexed, p + f.sum_at, 8) == 0
        f.digest_ok = f.crc_ok or _crc_spelled(p + f.sum_at, f.sum_len, crc)
    elif f.digest_type != MD5 and f.digest_type != SHA1:
        f.digest_ok = True  # none (what the official clients send), or a type nothing checks
    return 1


cdef inline int _hex_value(unsigned char c) noexcept:
    """An ASCII hex digit's value, either case; -1 for anything else."""
    if 48 <= c <= 57:
        return c - 48
    c |= 0x20
    if 97 <= c <= 102:
        return c - 87
    return -1


cdef bint _crc_spelled(const unsigned char *s, Py_ssize_t n, uint32_t crc) noexcept:
    """`crc` as `send.digest_problem` takes it, in ASCII: decimal (leading zeros allowed),
    `f"{crc:08x}"` or `f"{crc:x}"` in either case. Other spellings (non-ASCII digits) are left
    to the Python step."""
    cdef Py_ssize_t i, start = 0
    cdef uint64_t value = 0
    cdef int d
    if n == 0:
        return False
    for i in range(n):  # decimal
        if not 48 <= s[i] <= 57:
            break
    else:
        while start < n - 1 and s[start] == 48:
            start += 1
        if n - start <= 10:
            for i in range(start, n):
                value = value * 10 + (s[i] - 48)
            if value == crc:
                return True
    if n != 8:  # hex: 8 digits, or unpadded (no leading zero but for 0 itself)
        if n > 8 or (s[0] == 48 and n > 1):
            return False
    value = 0
    for i in range(n):
        d = _hex_value(s[i])
        if d < 0:
            return False
        value = (value << 4) | <uint64_t>d
    return value == crc


cdef bint _hex_matches(const unsigned char *s, Py_ssize_t n, bytes digest) noexcept:
    """`s` is `digest.hex()` in either case (ASCII only)."""
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(digest)
    cdef Py_ssize_t i
    cdef int hi, lo
    if n != 2 * PyBytes_GET_SIZE(digest):
        return False
    for i in range(0, n, 2):
        hi = _hex_value(s[i])
        lo = _hex_value(s[i + 1])
        if hi < 0 or lo < 0 or ((hi << 4) | lo) != d[i >> 1]:
            return False
    return True

def send_fields(bytes data not None):
    cdef _Fields f
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef int got = _read(p, PyBytes_GET_SIZE(data), &f)
    if got == 0:
        return None
    if got < 0:
        return _reference_send_fields(data)
    return (
        _decode(p, f.topic_at, f.topic_len) if f.topic_at >= 0 else "",
        PyBytes_FromStringAndSize(<const char *>p + f.body_at, f.body_len) if f.body_at >= 0 else b"",
        _decode(p, f.id_at, f.id_len),
        _decode(p, f.tag_at, f.tag_len) if f.tag_at >= 0 else None,
        tuple([_decode(p, f.key_at[i], f.key_len[i]) for i in range(f.nkeys)]),
        f.digest_type,
        _decode(p, f.sum_at, f.sum_len) if f.sum_len else "",
        f.seconds, f.nanos, f.crc_ok,
    )


cdef inline str _decode(const unsigned char *p, Py_ssize_t start, Py_ssize_t length):
    return PyUnicode_DecodeUTF8(<const char *>p + start, length, NULL)


cdef object _reference_send_fields(bytes data):
    from rocketlite.protocol.proto.send_fields import send_fields as reference  # noqa: PLC0415
    return reference(data)


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
    return _answer(PyBytes_AS_STRING(mid), PyBytes_GET_SIZE(mid), offset)


cdef bytes _answer(const char *mid, Py_ssize_t n, uint64_t offset):
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
        memcpy(w + at, mid, n)
        at += n
        w[at] = 0x1A
        at += 1
        at += _put_varint(w + at, n)
        memcpy(w + at, mid, n)
        at += n
    if offset:
        w[at] = 0x20
        at += 1
        at += _put_varint(w + at, offset)
    return out


include "_send_run.pxi"  # the lane's compiled loop over a run of calls, and their answers
