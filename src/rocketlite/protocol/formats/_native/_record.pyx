# cython: language_level=3
"""The compiled twin of the record codec: commit-log records encoded and PULL bodies decoded in C.

Byte for byte what `protocol/formats/record_ref.py` (the reference) and `protocol/formats/record.py`
`decode_records` do; `tests/protocol/test_native_record.py` pins them together on random input.
`protocol.formats.speedups` takes `encode_record`, `place_record` and `decode_records` from here, and the batch path's `encode_batch_records` and `stamp_batch`
(`_record_batch.pxi`; references `protocol/formats/batch.py`, `protocol/formats/record_ref.py`).
`place_record` (one record) and `stamp_batch` (a batch) stamp each record with the one `_stamp`.

* `encode_record`: the fields of a `MessageInner` are read into a C struct
  (`_Rec`), then the header (TOTALSIZE..BODYLEN, position-dependent fields zero), the body and
  TOPICLEN+TOPIC+PROPLEN+PROPERTIES are written straight into the result, the body's CRC32
  computed here (slicing-by-16 over tables built at import: no library to link). Anything not
  on the common path (a limit exceeded, a field out of its Java range, a body that is not bytes or
  bytearray, a topic that cannot be UTF-8) is handed to the reference, which raises the error it
  defines, or gives the bytes it defines: the two can never disagree on an unusual message.
* `decode_records`: the records of a pull or query body back to back as `StoredRecord`s, stopping
  at the first bad one (like the Java client, and like the Python version, whose checks are
  repeated here in the same order). Hosts and topics equal to the previous record's are shared
  (they are immutable), and the dataclasses are filled slot by slot, skipping their Python
  `__init__` (both are plain dataclasses: checked at import).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_Check,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

import dataclasses

from rocketlite.protocol.formats import record_ref
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.formats.record import decode_records as _decode_records_py
from rocketlite.protocol.formats.record import place_record as _place_record_py

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    bint PyMemoryView_Check(object o)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

__all__ = [
    "decode_records", "encode_batch_records", "encode_group", "encode_record", "place_record", "stamp_batch",
    "stamp_group",
]

# -- constants of `protocol/formats/record.py` (asserted against it below) --------------------------------
cdef enum:
    _MAGIC = -626843481  # MESSAGE_MAGIC_CODE, 0xDAA320A7
    _BORN_V6 = 0x10
    _STORE_V6 = 0x20
    _PREFIX = 48  # TOTALSIZE..BORNTIMESTAMP
    _V4_HEAD = 88  # TOTALSIZE..BODYLEN with IPv4 hosts; +12 per IPv6 host
    _MAX_TOPIC = 127
    _MAX_PROPS = 32767

from rocketlite.protocol.formats import record as _record

assert _record.MESSAGE_MAGIC_CODE == _MAGIC and _record.V4_BODY_POS == _V4_HEAD
assert _record.PREFIX.size == _PREFIX and _record.layout_for(_BORN_V6 | _STORE_V6).head.size == _V4_HEAD + 24
assert (_record.MAX_TOPIC_LENGTH, _record.MAX_PROPERTIES_LENGTH) == (_MAX_TOPIC, _MAX_PROPS)
assert _record.V4_STORE_TIMESTAMP_POS == _PREFIX + 8

# The dataclasses filled slot by slot: plain ones, with exactly these fields in this order.
_STORED_FIELDS = (
    "total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "body", "topic", "properties_string",
)
if tuple(f.name for f in dataclasses.fields(StoredRecord)) != _STORED_FIELDS or tuple(
    f.name for f in dataclasses.fields(HostAddress)
) != ("ip", "port"):
    raise ImportError("StoredRecord or HostAddress changed: update protocol/formats/_native/_record.pyx")
if hasattr(StoredRecord, "__post_init__") or hasattr(HostAddress, "__post_init__"):
    raise ImportError("StoredRecord or HostAddress has a __post_init__: _record.pyx cannot skip it")


include "_crc32.pxi"
include "_crc32_clmul.pxi"
include "_bytes.pxi"  # big-endian fields, hex digits
include "_text.pxi"  # UTF-8 and ASCII checks (the batch path)
include "_props.pxi"  # the properties array (the batch path)


def crc32(data):
    """`zlib.crc32(data)` (bytes or bytearray), for the tests of the table."""
    if PyBytes_Check(data):
        return _crc32_fast(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if PyByteArray_Check(data):
        return _crc32_fast(<const uint8_t*>PyByteArray_AS_STRING(data), PyByteArray_GET_SIZE(data))
    raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}")


# -- encode ----------------------------------------------------------------------------------------
cdef struct _Rec:
    const char* body
    Py_ssize_t body_len
    const char* topic
    Py_ssize_t topic_len
    const char* props
    Py_ssize_t props_len
    int32_t queue_id
    int32_t flag
    int32_t sys_flag
    int64_t born_timestamp
    char born_ip[16]
    int32_t born_port
    char store_ip[16]
    int32_t store_port
    int32_t reconsume_times
    int64_t prepared
    Py_ssize_t born_ip_size  # 4 or 16, as the layout stores it
    Py_ssize_t store_ip_size
    Py_ssize_t head_size
    Py_ssize_t total


cdef int _read_ip(object ip, char* out, Py_ssize_t* size) except -1:
    """The ip bytes as `struct`'s 4s/16s stores them (padded with zeros or cut); 0 if not bytes."""
    if not PyBytes_Check(ip):
        return 0
    cdef Py_ssize_t n = PyBytes_GET_SIZE(ip)
    size[0] = 16 if n == 16 else 4
    memset(out, 0, 16)
    memcpy(out, PyBytes_AS_STRING(ip), n if n < size[0] else size[0])
    return 1


cdef int _read(object msg, _Rec* r, int64_t max_size) except -1:
    """Fill `r` from `msg`; 0 when the message is for the reference to judge (a limit, a type)."""
    topic = msg.topic
    props = msg.properties_string
    body = msg.body
    if not PyUnicode_Check(topic) or not PyUnicode_Check(props):
        return 0
    if PyBytes_Check(body):
        r.body = PyBytes_AS_STRING(body)
        r.body_len = PyBytes_GET_SIZE(body)
    elif PyByteArray_Check(body):
        r.body = PyByteArray_AS_STRING(body)
        r.body_len = PyByteArray_GET_SIZE(body)
    else:
        return 0
    r.topic = PyUnicode_AsUTF8AndSize(topic, &r.topic_len)
    r.props = PyUnicode_AsUTF8AndSize(props, &r.props_len)
    if r.topic_len > _MAX_TOPIC or r.props_len > _MAX_PROPS:
        return 0
    born = msg.born_host
    store = msg.store_host
    if not _read_ip(born.ip, r.born_ip, &r.born_ip_size) or not _read_ip(store.ip, r.store_ip, &r.store_ip_size):
        return 0
    # `MessageInner.effective_sys_flag`: the V6 bits say what the hosts are.
    r.sys_flag = (<int32_t>msg.sys_flag & ~(_BORN_V6 | _STORE_V6)) | (
        _BORN_V6 if r.born_ip_size == 16 else 0
    ) | (_STORE_V6 if r.store_ip_size == 16 else 0)
    r.queue_id = msg.queue_id
    r.flag = msg.flag
    r.born_timestamp = msg.born_timestamp
    r.born_port = born.port
    r.store_port = store.port
    r.reconsume_times = msg.reconsume_times
    r.prepared = msg.prepared_transaction_offset
    r.head_size = _V4_HEAD + (r.born_ip_size - 4) + (r.store_ip_size - 4)
    r.total = r.head_size + 3 + r.body_len + r.topic_len + r.props_len
    if r.total > max_size:
        return 0
    return 1


cdef Py_ssize_t _write(char* out, const _Rec* r) noexcept nogil:
    """The whole record at `out`, QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP zero; returns the
    STORETIMESTAMP position."""
    cdef Py_ssize_t p, stamp
    _put32(out, <uint32_t>r.total)
    _put32(out + 4, <uint32_t>_MAGIC)
    _put32(out + 8, _crc32_fast(<const uint8_t*>r.body, r.body_len) & 0x7FFFFFFF)
    _put32(out + 12, <uint32_t>r.queue_id)
    _put32(out + 16, <uint32_t>r.flag)
    memset(out + 20, 0, 16)  # QUEUEOFFSET, PHYSICALOFFSET
    _put32(out + 36, <uint32_t>r.sys_flag)
    _put64(out + 40, <uint64_t>r.born_timestamp)
    p = _PREFIX
    memcpy(out + p, r.born_ip, r.born_ip_size)
    p += r.born_ip_size
    _put32(out + p, <uint32_t>r.born_port)
    stamp = p + 4
    memset(out + stamp, 0, 8)  # STORETIMESTAMP
    p = stamp + 8
    memcpy(out + p, r.store_ip, r.store_ip_size)
    p += r.store_ip_size
    _put32(out + p, <uint32_t>r.store_port)
    _put32(out + p + 4, <uint32_t>r.reconsume_times)
    _put64(out + p + 8, <uint64_t>r.prepared)
    _put32(out + p + 16, <uint32_t>r.body_len)
    p += 20
    memcpy(out + p, r.body, r.body_len)
    p += r.body_len
    out[p] = <char>r.topic_len
    memcpy(out + p + 1, r.topic, r.topic_len)
    p += 1 + r.topic_len
    out[p] = <char>(r.props_len >> 8)
    out[p + 1] = <char>r.props_len
    memcpy(out + p + 2, r.props, r.props_len)
    return stamp


def encode_record(msg, max_message_size):
    """`record_ref.encode_record`: (header, tail, STORETIMESTAMP position, SYSFLAG)."""
    cdef _Rec r
    cdef int ok
    try:
        ok = _read(msg, &r, max_message_size)  # msg holds topic, properties and body
    except Exception:
        ok = 0
    if not ok:
        return record_ref.encode_record(msg, max_message_size)  # raises, or gives the same bytes
    cdef char* whole = <char*>malloc(r.total)
    if whole == NULL:
        raise MemoryError()
    cdef Py_ssize_t stamp
    try:
        stamp = _write(whole, &r)
        head = PyByteArray_FromStringAndSize(whole, r.head_size)
        tail = PyBytes_FromStringAndSize(whole + r.head_size, r.total - r.head_size)
    finally:
        free(whole)
    return (head, tail, stamp, r.sys_flag)


# -- stamp (a record's place in the log, patched in under the commit log's lock) ------------------
cdef inline Py_ssize_t _records_end(const char* out, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t cnt) noexcept nogil:
    """Where `cnt` records read from byte `pos` of `out` (`n` bytes) end, each by its TOTALSIZE,
    or -1 when one of them does not lie whole within the `n` bytes. The walk `stamp_batch` and
    `stamp_group` make before they patch anything."""
    cdef Py_ssize_t i, size
    for i in range(cnt):
        if n - pos < _PREFIX:
            return -1
        size = _get32(out + pos)
        if size < _PREFIX or size > n - pos:
            return -1
        pos += size
    return pos


cdef inline void _stamp(char* rec, Py_ssize_t stamp_pos, int64_t qoff, uint64_t phys, int64_t now,
                        const char* prefix, Py_ssize_t prefix_len, char* msg_id) noexcept nogil:
    """The one stamping step of `place_record` and `stamp_batch`: the record at `rec` gets its
    QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP (at `stamp_pos`), and its msg id (`prefix`, then
    16 hex digits of the commit-log offset) is written at `msg_id`."""
    _put64(rec + 20, <uint64_t>qoff)
    _put64(rec + 28, phys)
    _put64(rec + stamp_pos, <uint64_t>now)
    memcpy(msg_id, prefix, prefix_len)
    _hex64(msg_id + prefix_len, phys)


# -- place (a single record under the commit log's lock) --------------------------------------------
def place_record(target, pos, head, tail, stamp_pos, queue_offset, physical_offset, store_timestamp, id_prefix):
    """`record.place_record`: the offsets and store time patched into `head`, head and tail
    copied into the writable `target` at `pos`, the msg id returned, in one call. Anything
    unusual (types, numbers out of range, a record that does not fit) goes to the reference."""
    cdef Py_buffer view
    cdef int64_t qoff, phys, now, at, stamp
    cdef Py_ssize_t head_len, tail_len, prefix_len
    cdef const char* prefix
    cdef char* h
    if not (
        PyByteArray_Check(head) and PyBytes_Check(tail) and PyUnicode_Check(id_prefix) and id_prefix.isascii()
    ):
        return _place_record_py(target, pos, head, tail, stamp_pos, queue_offset, physical_offset,
                                store_timestamp, id_prefix)  # fmt: skip
    try:
        qoff = queue_offset
        phys = physical_offset
        now = store_timestamp
        at = pos
        stamp = stamp_pos
    except (OverflowError, TypeError):
        return _place_record_py(target, pos, head, tail, stamp_pos, queue_offset, physical_offset,
                                store_timestamp, id_prefix)  # fmt: skip
    head_len = PyByteArray_GET_SIZE(head)
    tail_len = PyBytes_GET_SIZE(tail)
    if head_len < _PREFIX or stamp < 0 or stamp > head_len - 8 or at < 0 or phys < 0:
        return _place_record_py(target, pos, head, tail, stamp_pos, queue_offset, physical_offset,
                                store_timestamp, id_prefix)  # fmt: skip
    try:
        PyObject_GetBuffer(target, &view, PyBUF_WRITABLE)
    except (BufferError, TypeError):
        return _place_record_py(target, pos, head, tail, stamp_pos, queue_offset, physical_offset,
                                store_timestamp, id_prefix)  # fmt: skip
    try:
        if at > view.len - head_len - tail_len:
            return _place_record_py(target, pos, head, tail, stamp_pos, queue_offset, physical_offset,
                                    store_timestamp, id_prefix)  # fmt: skip
        prefix = PyUnicode_AsUTF8AndSize(id_prefix, &prefix_len)
        msg_id = PyBytes_FromStringAndSize(NULL, prefix_len + 16)
        h = PyByteArray_AS_STRING(head)
        _stamp(h, stamp, qoff, <uint64_t>phys, now, prefix, prefix_len, PyBytes_AS_STRING(msg_id))
        memcpy(<char*>view.buf + at, h, head_len)
        memcpy(<char*>view.buf + at + head_len, PyBytes_AS_STRING(tail), tail_len)
    finally:
        PyBuffer_Release(&view)
    return msg_id.decode("ascii")


# -- decode ----------------------------------------------------------------------------------------
cdef object _new_stored = StoredRecord.__new__
cdef object _new_host = HostAddress.__new__
cdef tuple _S = tuple(_STORED_FIELDS)
cdef str _IP = "ip"
cdef str _PORT = "port"


cdef object _host(const uint8_t* p, Py_ssize_t ip_size):
    """A `HostAddress` of the ip (4 or 16 bytes) and port at p, built as its frozen `__init__` does."""
    host = _new_host(HostAddress)
    PyObject_GenericSetAttr(host, _IP, PyBytes_FromStringAndSize(<const char*>p, ip_size))
    PyObject_GenericSetAttr(host, _PORT, _get32(p + ip_size))
    return host


def decode_records(buf):
    """`protocol.record.decode_records`: the records of `buf` back to back, up to the first bad one."""
    cdef Py_buffer view
    if not (
        PyBytes_Check(buf)
        or PyByteArray_Check(buf)
        or (PyMemoryView_Check(buf) and buf.format == "B" and buf.ndim == 1 and buf.c_contiguous)
    ):
        return _decode_records_py(buf)  # what `len` and indexing mean there is Python's to say
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _decode(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef list _decode(const uint8_t* data, Py_ssize_t n):
    cdef list out = []
    cdef Py_ssize_t pos = 0, end, q, born_size, store_size, head_size
    cdef const uint8_t* r
    cdef int32_t total, sys_flag, body_len
    cdef int16_t props_len
    cdef Py_ssize_t topic_len
    cdef const uint8_t* born_at = NULL  # the previous record's hosts and topic, shared when equal
    cdef const uint8_t* store_at = NULL
    cdef const uint8_t* topic_at = NULL
    cdef const uint8_t* t
    cdef Py_ssize_t prev_born_size = 0, prev_store_size = 0, prev_topic_len = -1
    born = store = topic = None
    while pos < n:
        r = data + pos
        if n - pos < _PREFIX:
            break
        total = _get32(r)
        if _get32(r + 4) != _MAGIC:
            break
        if total <= 0 or pos + total > n:
            break
        sys_flag = _get32(r + 36)
        born_size = 16 if sys_flag & _BORN_V6 else 4
        store_size = 16 if sys_flag & _STORE_V6 else 4
        head_size = _V4_HEAD + born_size - 4 + store_size - 4
        if total < head_size + 3:
            break
        end = pos + total
        body_len = _get32(r + head_size - 4)
        q = pos + head_size
        if body_len < 0 or q + body_len + 3 > end:
            break
        q += body_len
        topic_len = data[q]
        q += 1 + topic_len
        if q + 2 > end:
            break
        props_len = _get16(data + q)
        q += 2
        if props_len < 0 or q + props_len != end:
            break
        # the record is valid: build it
        if born_at == NULL or prev_born_size != born_size or memcmp(born_at, r + _PREFIX, born_size + 4) != 0:
            born = _host(r + _PREFIX, born_size)
            born_at, prev_born_size = r + _PREFIX, born_size
        if store_at == NULL or prev_store_size != store_size or memcmp(
            store_at, r + _PREFIX + born_size + 12, store_size + 4
        ) != 0:
            store = _host(r + _PREFIX + born_size + 12, store_size)
            store_at, prev_store_size = r + _PREFIX + born_size + 12, store_size
        t = data + pos + head_size + body_len + 1
        if prev_topic_len != topic_len or memcmp(topic_at, t, topic_len) != 0:
            topic = PyUnicode_DecodeUTF8(<const char*>t, topic_len, "replace")
            topic_at, prev_topic_len = t, topic_len
        rec = _new_stored(StoredRecord)
        PyObject_GenericSetAttr(rec, _S[0], total)
        PyObject_GenericSetAttr(rec, _S[1], _MAGIC)
        PyObject_GenericSetAttr(rec, _S[2], _get32(r + 8))
        PyObject_GenericSetAttr(rec, _S[3], _get32(r + 12))
        PyObject_GenericSetAttr(rec, _S[4], _get32(r + 16))
        PyObject_GenericSetAttr(rec, _S[5], _get64(r + 20))
        PyObject_GenericSetAttr(rec, _S[6], _get64(r + 28))
        PyObject_GenericSetAttr(rec, _S[7], sys_flag)
        PyObject_GenericSetAttr(rec, _S[8], _get64(r + 40))
        PyObject_GenericSetAttr(rec, _S[9], born)
        PyObject_GenericSetAttr(rec, _S[10], _get64(r + _PREFIX + born_size + 4))
        PyObject_GenericSetAttr(rec, _S[11], store)
        PyObject_GenericSetAttr(rec, _S[12], _get32(r + head_size - 16))
        PyObject_GenericSetAttr(rec, _S[13], _get64(r + head_size - 12))
        PyObject_GenericSetAttr(rec, _S[14], PyBytes_FromStringAndSize(<const char*>r + head_size, body_len))
        PyObject_GenericSetAttr(rec, _S[15], topic)
        PyObject_GenericSetAttr(rec, _S[16], PyUnicode_DecodeUTF8(<const char*>data + q, props_len, "replace"))
        out.append(rec)
        pos = end
    return out



include "_record_batch.pxi"  # encode_batch_records, stamp_batch
include "_record_group.pxi"  # encode_group, stamp_group (the send processor's coalescing lane)
