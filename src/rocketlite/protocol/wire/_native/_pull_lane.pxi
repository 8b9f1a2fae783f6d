# Included by _send_lane.pyx (after _send_lane_raw.pxi): the compiled twins of `pull_lane`'s
# `read_raw_pull` and `encode_pull_found`.
#
# `read_raw_pull` reads one frame in place as `gather_raw_sends` reads a send: its prefix, its
# header (JSON in the shape clients send, or ROCKETMQ binary; `_json_head` / `_binary_head` keep
# the values of the pull header's names in `_pull_slots`), its numbers in a client's spelling
# (`_number`: 1 to 9 digits for an int, 1 to 18 for a long, after any leading zeros, or "-1").
# Anything else is None: the connection decodes that frame and the handler serves it. No command and no ext dict is made.
# `encode_pull_found` writes the FOUND answer's prefix and header from its values.

from rocketlite.protocol.wire import json_header_ref as _json_ref
from rocketlite.protocol.wire.command import DEFAULT_VERSION as _DEFAULT_VERSION_PY
from rocketlite.protocol.wire.frame_codec import encode_command_over as _encode_command_over
from rocketlite.protocol.wire.pull_lane import encode_pull_found_over as _encode_pull_found_over

cdef long _PULL = int(RequestCode.PULL_MESSAGE)
# PullMessageRequestHeader's wire names, in `_pull_slots` order
cdef tuple _PULL_NAMES = (
    b"consumerGroup", b"topic", b"queueId", b"queueOffset", b"maxMsgNums", b"sysFlag", b"commitOffset",
    b"suspendTimeoutMillis", b"subscription", b"subVersion", b"expressionType",
)
cdef list _pull_slots = [None] * 13
cdef _Head _pull_head = _Head()
_pull_head.slots = _pull_slots
_pull_head.names = _PULL_NAMES
cdef long long _PULL_VERSION = _DEFAULT_VERSION_PY
cdef object _pull_found_py = _encode_pull_found_over(_encode_command_over(_json_ref.encode_json_header))


cdef bint _raw_head(const unsigned char* p, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t max_frame_length,
                    _Head h, Py_ssize_t* end, unsigned int* serialize_type, unsigned int* header_length):
    """The complete frame at `p[pos:size]`: its prefix checked as the decoder checks it and its
    header read into `h` (JSON or ROCKETMQ), where it ends, its serialization and header length;
    False for anything else (the per-code readers' common start)."""
    cdef long long length
    cdef unsigned int word
    if pos < 0 or size - pos < 8:
        return False
    length = _get32(p + pos)
    word = _getu32(p + pos + 4)
    header_length[0] = word & 0x00FFFFFF
    if not 4 <= length <= max_frame_length - 4 or header_length[0] > length - 4:
        return False
    end[0] = pos + 4 + length
    if end[0] > size:
        return False
    serialize_type[0] = word >> 24
    if serialize_type[0] == 0:
        return _json_head(p + pos + 8, header_length[0], h)
    if serialize_type[0] == 1:
        return _binary_head(p + pos + 8, header_length[0], h)
    return False


def read_raw_pull(bytes src, Py_ssize_t pos, Py_ssize_t max_frame_length):
    """`pull_lane.read_raw_pull_over(...)`: the pull at `src[pos:]` as a `PullAsk`, or None (also
    where the reference reads a spelling this reader does not take)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(src)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(src), end
    cdef long long num[7]
    cdef unsigned int header_length, serialize_type
    cdef _Head h = _pull_head
    cdef list slots = _pull_slots
    cdef int k
    cdef tuple digits = (9, 18, 9, 9, 18, 18)
    if not _raw_head(p, size, pos, max_frame_length, h, &end, &serialize_type, &header_length):
        return None
    if h.code != _PULL or h.flag & _NOT_ANSWERED:
        return None
    group, topic = slots[0], slots[1]
    sub, expr = slots[8], slots[10]
    if type(group) is not str or type(topic) is not str:
        return None
    if (sub is not None and type(sub) is not str) or (expr is not None and type(expr) is not str):
        return None
    for k in range(6):  # queueId .. suspendTimeoutMillis
        if _number(slots[2 + k], digits[k], &num[k]) != _OK:
            return None
    if _number(slots[9], 18, &num[6]) != _OK:  # subVersion
        return None
    return (
        end, h.opaque, _JSON_TYPE if serialize_type == 0 else _ROCKETMQ_TYPE, group, topic, num[0], num[1],
        num[2], num[3], num[4], sub, num[6], expr,
    )


cdef Py_ssize_t _put_text(unsigned char* at, const char* text):
    cdef Py_ssize_t n = 0
    while text[n] != 0:
        at[n] = <unsigned char>text[n]
        n += 1
    return n


cdef Py_ssize_t _put_decimal(unsigned char* at, long long v):
    """`v` in decimal at `at`; how many bytes."""
    cdef unsigned char tmp[24]
    cdef int i = 24
    cdef unsigned long long u
    cdef bint negative = v < 0
    u = <unsigned long long>(-(v + 1)) + 1 if negative else <unsigned long long>v
    while True:
        i -= 1
        tmp[i] = <unsigned char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if negative:
        i -= 1
        tmp[i] = 45
    memcpy(at, &tmp[i], 24 - i)
    return 24 - i


cdef Py_ssize_t _put_entry(unsigned char* at, const char* key, long long value):
    """A ROCKETMQ header's ext entry: the key's length (2 bytes) and bytes, the value's decimal
    text's length (4 bytes) and bytes."""
    cdef Py_ssize_t n = _put_text(at + 2, key), v
    at[0] = 0
    at[1] = <unsigned char>n
    v = _put_decimal(at + 2 + n + 4, value)
    _put32(at + 2 + n, <unsigned int>v)
    return 2 + n + 4 + v


def encode_pull_found(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length):
    """`pull_lane.encode_pull_found_over(encode_command)`, byte for byte: written from the values
    (exact ints); anything else through the command, as the reference does."""
    cdef long long op = 0, s = 0, nb = 0, mn = 0, mx = 0, blen = 0
    cdef unsigned char buf[512]
    cdef Py_ssize_t n = 8, ext_at
    cdef bint json
    if serialize_type is _JSON_TYPE:
        json = True
    elif serialize_type is _ROCKETMQ_TYPE:
        json = False
    else:
        return _pull_found_py(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length)
    if not (type(opaque) is int and type(suggest) is int and type(next_begin) is int and type(min_offset) is int
            and type(max_offset) is int and type(body_length) is int):
        return _pull_found_py(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length)
    try:
        op, s, nb, mn, mx, blen = opaque, suggest, next_begin, min_offset, max_offset, body_length
    except OverflowError:
        return _pull_found_py(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length)
    if json:
        # the general encoder's order: keys sorted, inside extFields too
        n += _put_text(buf + n, b'{"code":0,"extFields":{"maxOffset":"')
        n += _put_decimal(buf + n, mx)
        n += _put_text(buf + n, b'","minOffset":"')
        n += _put_decimal(buf + n, mn)
        n += _put_text(buf + n, b'","nextBeginOffset":"')
        n += _put_decimal(buf + n, nb)
        n += _put_text(buf + n, b'","suggestWhichBrokerId":"')
        n += _put_decimal(buf + n, s)
        n += _put_text(buf + n, b'"},"flag":1,"language":"JAVA","opaque":')
        n += _put_decimal(buf + n, op)
        n += _put_text(buf + n, b',"remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":')
        n += _put_decimal(buf + n, _PULL_VERSION)
        n += _put_text(buf + n, b"}")
    else:
        if not (-2147483648 <= op <= 2147483647):
            return _pull_found_py(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length)
        buf[8] = 0  # code SUCCESS
        buf[9] = 0
        buf[10] = 0  # language JAVA
        buf[11] = (_PULL_VERSION >> 8) & 0xFF
        buf[12] = _PULL_VERSION & 0xFF
        _put32(buf + 13, <unsigned int>op)
        _put32(buf + 17, 1)  # flag RESPONSE
        _put32(buf + 21, 5)
        n = 25 + _put_text(buf + 25, b"FOUND")
        ext_at = n
        n += 4
        # the ext fields in the order the processor sets them
        n += _put_entry(buf + n, b"suggestWhichBrokerId", s)
        n += _put_entry(buf + n, b"nextBeginOffset", nb)
        n += _put_entry(buf + n, b"minOffset", mn)
        n += _put_entry(buf + n, b"maxOffset", mx)
        _put32(buf + ext_at, <unsigned int>(n - ext_at - 4))
    if n - 8 + 4 + blen > 2147483647 or blen < 0:
        return _pull_found_py(opaque, serialize_type, suggest, next_begin, min_offset, max_offset, body_length)
    _put32(buf, <unsigned int>(n - 8 + 4 + blen))
    _put32(buf + 4, <unsigned int>((0 if json else 1) << 24 | (n - 8)))
    return PyBytes_FromStringAndSize(<char*>buf, n)
