# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of `delivery.delivery_response`: a popped commit-log record straight to the
bytes of `ReceiveMessageResponse{message}` (protobuf wire format written here, no message object),
with its receipt handle, topic and message id.

The common shape is written here: a V1 record with IPv4 hosts, valid UTF-8 topic and properties
(at most `_PROPS_CAP` of them), timestamps in protobuf's range. Anything else (IPv6 hosts, a DLQ
copy's origin, a `__BORNHOST` of non-ASCII blanks, a timer property in a spelling other than
ASCII digits, a record the reference would refuse) is handed to the reference, which gives the
same bytes the slow way. Fields go out in field-number order, the user properties sorted as upb's
deterministic serialization sorts a map (by the key's bytes, a key before its own prefixes); the
MD5 digest is hashlib's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint PyUnicode_IS_ASCII(object unicode)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import hashlib

from rocketlite.protocol.formats.record import MESSAGE_MAGIC_CODE
from rocketlite.protocol.message import MessageConst, MessageSysFlag
from rocketlite.protocol.proto import acks as _acks
from rocketlite.protocol.proto import delivery as _ref
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX

include "_bytes.pxi"
include "_text.pxi"
include "_props.pxi"

cdef object _md5 = hashlib.md5
cdef object _reference = _ref.delivery_response
cdef object _Delivered = _ref.Delivered
cdef object _tuple_new = tuple.__new__  # a NamedTuple made without its Python-level __new__
cdef int32_t _MAGIC = MESSAGE_MAGIC_CODE
cdef int32_t _V6_FLAGS = int(MessageSysFlag.BORNHOST_V6_FLAG) | int(MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
cdef int32_t _COMPRESSED = int(MessageSysFlag.COMPRESSED_FLAG)
cdef int64_t _MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, protobuf's last Timestamp
cdef bytes _RETRY = RETRY_GROUP_TOPIC_PREFIX.encode()

# the enum numbers the reference writes (definition.proto)
cdef enum:
    _MD5 = 2
    _IDENTITY = 1
    _GZIP = 2
    _NORMAL = 1
    _FIFO = 2
    _DELAY = 3
    _TRANSACTION = 4
    _HEAD = 88  # a V1 record's fixed part with IPv4 hosts, up to the body

# the properties read here, and every system one (kept out of the user properties)
cdef bytes _TAGS = MessageConst.TAGS.encode()
cdef bytes _KEYS = MessageConst.KEYS.encode()
cdef bytes _UNIQ = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
cdef bytes _TRAN = MessageConst.TRANSACTION_PREPARED.encode()
cdef bytes _DELAY_LEVEL = MessageConst.DELAY_TIME_LEVEL.encode()
cdef bytes _DELIVER_MS = MessageConst.TIMER_DELIVER_MS.encode()
cdef bytes _DELAY_SEC = MessageConst.TIMER_DELAY_SEC.encode()
cdef bytes _SHARDING = MessageConst.SHARDING_KEY.encode()
cdef bytes _TRACE = _ref.TRACE_CONTEXT.encode()
cdef bytes _BORN = _ref.BORN_HOST.encode()
cdef bytes _DLQ_TOPIC = _ref.DLQ_ORIGIN_TOPIC.encode()
cdef bytes _DLQ_ID = _ref.DLQ_ORIGIN_MESSAGE_ID.encode()
cdef list _SYSTEM = sorted(name.encode() for name in _ref.SYSTEM_PROPERTIES)


cdef bint _is(const _Prop* p, bytes name) noexcept:
    return p.kl == PyBytes_GET_SIZE(name) and memcmp(p.k, PyBytes_AS_STRING(name), p.kl) == 0


cdef bint _system(const _Prop* p):
    cdef bytes name
    for name in _SYSTEM:
        if _is(p, name):
            return True
    return False


cdef inline Py_ssize_t _vsize(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline char* _varint(char* p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <char>((v & 0x7F) | 0x80)
        v >>= 7
        p += 1
    p[0] = <char>v
    return p + 1


cdef inline char* _bytes_field(char* p, const char* tag, int tag_len, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(p, tag, tag_len)
    p = _varint(p + tag_len, <uint64_t>n)
    memcpy(p, s, n)
    return p + n


cdef inline Py_ssize_t _stamp_size(int64_t ms) noexcept nogil:
    """A Timestamp (or Duration) of `ms` >= 0: seconds (1), nanos (2), each left out when 0."""
    cdef int64_t s = ms // 1000, nanos = (ms % 1000) * 1000000
    return (1 + _vsize(s) if s else 0) + (1 + _vsize(nanos) if nanos else 0)


cdef inline char* _stamp(char* p, char tag, int64_t ms) noexcept nogil:
    cdef int64_t s = ms // 1000, nanos = (ms % 1000) * 1000000
    p[0] = tag
    p = _varint(p + 1, <uint64_t>_stamp_size(ms))
    if s:
        p[0] = 0x08
        p = _varint(p + 1, <uint64_t>s)
    if nanos:
        p[0] = 0x10
        p = _varint(p + 1, <uint64_t>nanos)
    return p


cdef int _digits(const _Prop* p, int most, int64_t* out) noexcept:
    """1: `p`'s value is 1..`most` ASCII digits (in `out`); 0: it is ASCII but not that (Python's
    `isdigit` is false); -1: not ASCII (the reference decides)."""
    cdef Py_ssize_t i
    cdef int64_t v = 0
    cdef uint8_t c
    if not _ascii(p.v, p.vl):
        return -1
    for i in range(p.vl):
        c = <uint8_t>p.v[i]
        if c < 48 or c > 57:
            return 0
        v = v * 10 + (c - 48)
    if p.vl > most:
        return -1
    out[0] = v
    return 1


cdef inline bint _before(const _Prop* a, const _Prop* b) noexcept:
    """upb's deterministic order of map keys: by bytes, a longer key before its own prefix."""
    cdef Py_ssize_t common = a.kl if a.kl < b.kl else b.kl
    cdef int cmp = memcmp(a.k, b.k, common)
    if cmp:
        return cmp < 0
    return a.kl > b.kl


cdef Py_ssize_t _ip4(char* out, const uint8_t* ip) noexcept:
    return snprintf(out, 16, "%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3])


def delivery_response(record, stamp, long long now_ms, Py_ssize_t pos=0, Py_ssize_t size=-1):
    """`record[pos:pos + size]` (the whole of `record` by default: a batch's records may share
    one `bytes`, read from the store in one copy) written without a copy of the record."""
    return _deliver(record, stamp, now_ms, pos, size)


def delivery_responses(data, sizes, stamp, long long now_ms):
    """The records of one run, back to back in `data` (`sizes` in order; a size of -1 is the
    rest of `data`), each as `delivery_response` writes it: one call per run, not per message."""
    cdef list out = []
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t size
    for item in sizes:
        size = item
        out.append(_deliver(data, stamp, now_ms, pos, size))
        pos += size
    return out


cdef object _deliver(object record, object stamp, long long now_ms, Py_ssize_t pos, Py_ssize_t size):
    if not PyBytes_Check(record):
        return _reference(record, stamp, now_ms, pos, size)
    cdef Py_ssize_t total = PyBytes_GET_SIZE(record)
    if size < 0:
        size = total - pos
    if pos < 0 or pos > total or size > total - pos:
        raise ValueError(f"record span {pos}+{size} is outside its {total} bytes")
    cdef Py_ssize_t n = size
    cdef const char* r = PyBytes_AS_STRING(record) + pos
    if n < _HEAD + 3 or _get32(r) != n or _get32(r + 4) != _MAGIC:
        return _reference(record, stamp, now_ms, pos, size)
    cdef int32_t sys_flag = _get32(r + 36)
    cdef int32_t queue_id = _get32(r + 12)
    cdef int64_t queue_offset = _get64(r + 20)
    cdef int64_t born_ts = _get64(r + 40)
    cdef int64_t store_ts = _get64(r + 56)
    cdef int32_t reconsume = _get32(r + 72)
    cdef int32_t body_len = _get32(r + 84)
    cdef int64_t invisible = stamp.invisible_time
    if (sys_flag & _V6_FLAGS or born_ts < 0 or born_ts > _MAX_MS or store_ts < 0 or store_ts > _MAX_MS
            or reconsume < 0 or reconsume >= 0x7FFFFFFF or body_len < 0 or invisible < 0
            or invisible > 315576000000000 or _HEAD + <Py_ssize_t>body_len + 3 > n):
        return _reference(record, stamp, now_ms, pos, size)
    cdef const char* body = r + _HEAD
    cdef const char* topic = body + body_len
    cdef Py_ssize_t topic_len = <uint8_t>topic[0]
    topic += 1
    if (topic - r) + topic_len + 2 > n:
        return _reference(record, stamp, now_ms, pos, size)
    cdef const char* props_s = topic + topic_len
    cdef Py_ssize_t props_len = <uint16_t>_get16(props_s)
    props_s += 2
    if (props_s - r) + props_len != n or not _valid_utf8(<const uint8_t*>topic, topic_len) or not _valid_utf8(
            <const uint8_t*>props_s, props_len):
        return _reference(record, stamp, now_ms, pos, size)
    cdef _Prop props[_PROPS_CAP]
    cdef Py_ssize_t count = _props_parse(props_s, props_len, props, _PROPS_CAP)
    if count < 0:
        return _reference(record, stamp, now_ms, pos, size)

    # the properties read, and the user ones (sorted)
    cdef _Prop* tags = NULL
    cdef _Prop* keys = NULL
    cdef _Prop* uniq = NULL
    cdef _Prop* group = NULL
    cdef _Prop* trace = NULL
    cdef _Prop* born = NULL
    cdef _Prop* deliver_ms = NULL
    cdef _Prop* delay_sec = NULL
    cdef bint tran = False, delay = False, dlq_topic = False, dlq_id = False
    cdef Py_ssize_t user[_PROPS_CAP]
    cdef Py_ssize_t users = 0, i, at
    cdef _Prop* p
    for i in range(count):
        p = &props[i]
        if _is(p, _TAGS):
            tags = p
        elif _is(p, _KEYS):
            keys = p
        elif _is(p, _UNIQ):
            uniq = p
        elif _is(p, _SHARDING):
            group = p
        elif _is(p, _TRACE):
            trace = p
        elif _is(p, _BORN):
            born = p
        elif _is(p, _DELIVER_MS):
            deliver_ms = p
        elif _is(p, _DELAY_SEC):
            delay_sec = p
        elif _is(p, _DELAY_LEVEL):
            delay = True
        elif _is(p, _TRAN):
            tran = p.vl == 4 and memcmp(p.v, b"true", 4) == 0
        elif _is(p, _DLQ_TOPIC):
            dlq_topic = True
        elif _is(p, _DLQ_ID):
            dlq_id = True
        if not _system(p):
            at = users
            while at > 0 and _before(p, &props[user[at - 1]]):
                user[at] = user[at - 1]
                at -= 1
            user[at] = i
            users += 1
    if dlq_topic and dlq_id:
        return _reference(record, stamp, now_ms, pos, size)

    # the delivery time (TIMER_DELAY_SEC first, as the reference reads them)
    cdef int64_t due = -1, value
    cdef int got
    if delay_sec != NULL:
        got = _digits(delay_sec, 12, &value)
        if got < 0:
            return _reference(record, stamp, now_ms, pos, size)
        if got:
            due = now_ms + value * 1000
    if due < 0 and deliver_ms != NULL:
        got = _digits(deliver_ms, 18, &value)
        if got < 0:
            return _reference(record, stamp, now_ms, pos, size)
        if got:
            due = value
    if due > _MAX_MS:
        return _reference(record, stamp, now_ms, pos, size)
    cdef int kind = _NORMAL
    if tran:
        kind = _TRANSACTION
    elif delay or deliver_ms != NULL or delay_sec != NULL:
        kind = _DELAY
    elif group != NULL:
        kind = _FIFO

    # the born host: a __BORNHOST with something but blanks, else the born address
    cdef char born_text[16]
    cdef const char* born_s = born_text
    cdef Py_ssize_t born_n = 0
    cdef bint blank = True, unsure = False
    cdef uint8_t c
    if born != NULL:
        for i in range(born.vl):
            c = <uint8_t>born.v[i]
            if c >= 0x80:
                unsure = True
            elif not (c == 0x20 or 0x09 <= c <= 0x0D or 0x1C <= c <= 0x1F):
                blank = False
                break
        if not blank:
            born_s, born_n = born.v, born.vl
        elif unsure:
            return _reference(record, stamp, now_ms, pos, size)
    if born_n == 0:
        born_n = _ip4(born_text, <const uint8_t*>(r + 48))
    cdef char store_text[32]
    cdef Py_ssize_t store_n = _ip4(store_text, <const uint8_t*>(r + 64))
    store_n += snprintf(store_text + store_n, 16, ":%d", _get32(r + 68))

    # the message id: UNIQ_KEY, else the offset msg id (store ip + port + commit-log offset, hex)
    cdef char offset_id[32]
    cdef const char* id_s = offset_id
    cdef Py_ssize_t id_n = 32
    if uniq != NULL:
        id_s, id_n = uniq.v, uniq.vl
    else:
        for i in range(8):
            offset_id[2 * i] = _HEX_DIGITS[(<uint8_t>r[64 + i]) >> 4]
            offset_id[2 * i + 1] = _HEX_DIGITS[(<uint8_t>r[64 + i]) & 0xF]
        _hex64(offset_id + 16, <uint64_t>_get64(r + 28))

    # the receipt handle
    cdef bint retry = topic_len >= PyBytes_GET_SIZE(_RETRY) and memcmp(
        topic, PyBytes_AS_STRING(_RETRY), PyBytes_GET_SIZE(_RETRY)) == 0
    cdef object ck = stamp.start_offsets.get(queue_id, queue_offset)
    handle = (
        f"{ck} {stamp.pop_time} {invisible} {stamp.revive_qid} {'1' if retry else '0'} "
        f"{stamp.broker_name} {queue_id} {queue_offset}"
    )
    cdef Py_ssize_t handle_n
    cdef const char* handle_s = _utf8_or_null(handle, &handle_n)
    if handle_s == NULL:
        return _reference(record, stamp, now_ms, pos, size)
    digest = _md5(PyMemoryView_FromMemory(<char*>body, body_len, PyBUF_READ)).digest()
    cdef const uint8_t* d = <const uint8_t*>PyBytes_AS_STRING(digest)
    cdef char hexdigest[36]
    hexdigest[0] = 0x08
    hexdigest[1] = _MD5
    hexdigest[2] = 0x12
    hexdigest[3] = 32
    for i in range(16):
        hexdigest[4 + 2 * i] = _HEX_DIGITS[d[i] >> 4]
        hexdigest[5 + 2 * i] = _HEX_DIGITS[d[i] & 0xF]

    # SystemProperties, in a scratch buffer (its size is its length prefix)
    cdef Py_ssize_t keys_n = 0
    if keys != NULL:  # each space-separated part: tag, length, text
        keys_n = 4 * (keys.vl + 1) + keys.vl
    cdef Py_ssize_t bound = (256 + id_n + born_n + handle_n + keys_n
                             + (tags.vl if tags != NULL else 0) + (group.vl if group != NULL else 0)
                             + (trace.vl if trace != NULL else 0))
    cdef char* sys_buf = <char*>malloc(bound)
    if sys_buf == NULL:
        raise MemoryError()
    cdef char* q = sys_buf
    cdef const char* part
    cdef const char* end
    try:
        if tags != NULL:
            q = _bytes_field(q, b"\x0a", 1, tags.v, tags.vl)
        if keys != NULL:
            part = keys.v
            end = keys.v + keys.vl
            while True:
                at = 0
                while part + at < end and part[at] != 32:
                    at += 1
                q = _bytes_field(q, b"\x12", 1, part, at)
                if part + at >= end:
                    break
                part += at + 1
        q = _bytes_field(q, b"\x1a", 1, id_s, id_n)
        q = _bytes_field(q, b"\x22", 1, hexdigest, 36)
        q[0] = 0x28
        q[1] = _GZIP if sys_flag & _COMPRESSED else _IDENTITY
        q[2] = 0x30
        q[3] = kind
        q = _stamp(q + 4, 0x3a, born_ts)
        q = _bytes_field(q, b"\x42", 1, born_s, born_n)
        q = _stamp(q, 0x4a, store_ts)
        q = _bytes_field(q, b"\x52", 1, store_text, store_n)
        if due >= 0:
            q = _stamp(q, 0x5a, due)
        q = _bytes_field(q, b"\x62", 1, handle_s, handle_n)
        if queue_id:
            q[0] = 0x68
            q = _varint(q + 1, <uint64_t><int64_t>queue_id)
        q[0] = 0x70
        q = _varint(q + 1, <uint64_t>queue_offset)
        q = _stamp(q, 0x7a, invisible)
        q[0] = <char>0x80
        q[1] = 0x01
        q = _varint(q + 2, <uint64_t>(reconsume + 1))
        if group != NULL:
            q = _bytes_field(q, b"\x8a\x01", 2, group.v, group.vl)
        if trace != NULL:
            q = _bytes_field(q, b"\x92\x01", 2, trace.v, trace.vl)
        return _tuple_new(_Delivered, (
            _response(topic, topic_len, props, user, users, sys_buf, q - sys_buf, body, body_len),
            PyUnicode_DecodeUTF8(topic, topic_len, NULL),
            handle,
            PyUnicode_DecodeUTF8(id_s, id_n, NULL),
        ))
    finally:
        free(sys_buf)


cdef bytes _response(const char* topic, Py_ssize_t topic_len, const _Prop* props, const Py_ssize_t* user,
                     Py_ssize_t users, const char* system, Py_ssize_t system_n, const char* body,
                     Py_ssize_t body_len):
    """ReceiveMessageResponse{message = Message{topic, user_properties, system_properties, body}}."""
    cdef Py_ssize_t resource = (1 + _vsize(topic_len) + topic_len) if topic_len else 0
    cdef Py_ssize_t size = 1 + _vsize(resource) + resource + 1 + _vsize(system_n) + system_n
    cdef Py_ssize_t i, entry
    cdef const _Prop* p
    for i in range(users):
        p = &props[user[i]]
        entry = 2 + _vsize(p.kl) + p.kl + _vsize(p.vl) + p.vl
        size += 1 + _vsize(entry) + entry
    if body_len:
        size += 1 + _vsize(body_len) + body_len
    out = PyBytes_FromStringAndSize(NULL, 1 + _vsize(size) + size)
    cdef char* q = PyBytes_AS_STRING(out)
    q[0] = 0x12
    q = _varint(q + 1, <uint64_t>size)
    q[0] = 0x0a
    q = _varint(q + 1, <uint64_t>resource)
    if topic_len:
        q = _bytes_field(q, b"\x12", 1, topic, topic_len)
    for i in range(users):
        p = &props[user[i]]
        entry = 2 + _vsize(p.kl) + p.kl + _vsize(p.vl) + p.vl
        q[0] = 0x12
        q = _varint(q + 1, <uint64_t>entry)
        q = _bytes_field(q, b"\x0a", 1, p.k, p.kl)
        q = _bytes_field(q, b"\x12", 1, p.v, p.vl)
    q = _bytes_field(q, b"\x1a", 1, system, system_n)
    if body_len:
        q = _bytes_field(q, b"\x22", 1, body, body_len)
    return out


cdef inline Py_ssize_t _text_field_size(const char* s, Py_ssize_t n) noexcept nogil:
    return 1 + _vsize(<uint64_t>n) + n if n else 0


def ack_response(bytes status not None, entries):
    """The compiled twin of `acks.ack_response`: the serialized `AckMessageResponse` of `status`
    (a serialized `Status`) and `entries` (message id, receipt handle, serialized `Status`), sized
    first, then written in one buffer."""
    cdef list items = entries if type(entries) is list else list(entries)
    cdef Py_ssize_t count = len(items), i, total, size, n_id, n_handle, n_status
    cdef const char* s_id
    cdef const char* s_handle
    cdef bytes entry_status
    cdef Py_ssize_t* sizes = <Py_ssize_t*>malloc((count + 1) * sizeof(Py_ssize_t))
    cdef bytes out
    cdef char* p
    if sizes == NULL:
        raise MemoryError()
    try:
        total = 1 + _vsize(<uint64_t>PyBytes_GET_SIZE(status)) + PyBytes_GET_SIZE(status)
        for i in range(count):
            message_id, handle, entry_status = items[i]
            s_id = PyUnicode_AsUTF8AndSize(message_id, &n_id)
            s_handle = PyUnicode_AsUTF8AndSize(handle, &n_handle)
            n_status = PyBytes_GET_SIZE(entry_status)
            size = (
                _text_field_size(s_id, n_id) + _text_field_size(s_handle, n_handle)
                + 1 + _vsize(<uint64_t>n_status) + n_status
            )
            sizes[i] = size
            total += 1 + _vsize(<uint64_t>size) + size
        out = PyBytes_FromStringAndSize(NULL, total)
        p = PyBytes_AS_STRING(out)
        p = _bytes_field(p, b"\x0a", 1, PyBytes_AS_STRING(status), PyBytes_GET_SIZE(status))
        for i in range(count):
            message_id, handle, entry_status = items[i]
            s_id = PyUnicode_AsUTF8AndSize(message_id, &n_id)
            s_handle = PyUnicode_AsUTF8AndSize(handle, &n_handle)
            p[0] = b"\x12"
            p = _varint(p + 1, <uint64_t>sizes[i])
            if n_id:
                p = _bytes_field(p, b"\x0a", 1, s_id, n_id)
            if n_handle:
                p = _bytes_field(p, b"\x12", 1, s_handle, n_handle)
            p = _bytes_field(p, b"\x1a", 1, PyBytes_AS_STRING(entry_status), PyBytes_GET_SIZE(entry_status))
        return out
    finally:
        free(sizes)


include "_handles.pxi"
