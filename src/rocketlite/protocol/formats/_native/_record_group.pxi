# Several single sends (SEND_MESSAGE_V2 requests of one socket read) as one contiguous append:
# included by _record.pyx (its `_Rec`, `_write`, `_read_ip`, `_stamp`). No reference of its own:
# the send processor's coalescing lane (`broker/processors/send_group.py`) only runs when these
# are compiled, and its differential test (`tests/broker/test_send_group.py`) pins the records it
# places and the answers it gives against the per-message path, which is the reference.
#
# `encode_group`: each entry (topic, body, properties, queue id, flag, SYSFLAG, born timestamp,
# reconsume times) written as `encode_record` writes a single message's record (the same `_write`,
# QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP left zero), back to back in one bytearray. With
# `src`, an entry's body is where it starts in `src` (an int) and it ends at `ends[k]` (the raw
# lane's entries: the body is copied once, from the read's bytes into the record).
# `stamp_group`: those records from byte `pos`, one per consume-queue key, stamped as
# `place_record` stamps one (`_stamp`), each with the next queue offset of its key, taken from
# (and advanced in) the commit log's table of them (the entries go to different queues).

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


cdef inline Py_ssize_t _span(tuple e, Py_ssize_t i, const char* src, Py_ssize_t src_len, list ends,
                             const char** body) except -1:
    """Entry `i`'s body: its bytes, or with `src` its span there (`e[1]` up to `ends[i]`)."""
    cdef Py_ssize_t start, end
    if src == NULL:
        if type(e[1]) is not bytes:
            raise TypeError("group entry: (str, bytes, str, ...) expected")
        body[0] = PyBytes_AS_STRING(e[1])
        return PyBytes_GET_SIZE(e[1])
    if type(e[1]) is not int:
        raise TypeError("group entry: (str, int, str, ...) expected with src")
    start = e[1]
    end = ends[i]
    if not 0 <= start <= end <= src_len:
        raise ValueError("group entry: body span out of src")
    body[0] = src + start
    return end - start


def encode_group(list entries, born_host, store_host, bytes src=None, list ends=None):
    """The records of `entries` back to back (a bytearray). The caller has checked the limits
    (topic and properties lengths, maxMessageSize); a value of the wrong type is a TypeError.
    With `src` (and `ends`, one per entry), bodies are spans of `src` (see above)."""
    cdef _Rec r
    cdef Py_ssize_t total = 0, pos = 0, n = len(entries), i, src_len = 0
    cdef const char* from_src = NULL
    cdef const char* body
    cdef char* out
    if src is not None:
        if ends is None or len(ends) < n:
            raise TypeError("encode_group: src needs an end per entry")
        from_src = PyBytes_AS_STRING(src)
        src_len = PyBytes_GET_SIZE(src)
    if not _read_ip(born_host.ip, r.born_ip, &r.born_ip_size) or not _read_ip(
        store_host.ip, r.store_ip, &r.store_ip_size
    ):
        raise TypeError("host ip must be bytes")
    r.born_port = born_host.port
    r.store_port = store_host.port
    r.prepared = 0
    r.head_size = _V4_HEAD + (r.born_ip_size - 4) + (r.store_ip_size - 4)
    for i in range(n):
        e = <tuple>entries[i]
        if type(e[0]) is not str or type(e[2]) is not str:
            raise TypeError("group entry: (str, bytes, str, ...) expected")
        r.topic = _utf8_or_null(e[0], &r.topic_len)
        r.props = _utf8_or_null(e[2], &r.props_len)
        if r.topic == NULL or r.props == NULL or r.topic_len > _MAX_TOPIC or r.props_len > _MAX_PROPS:
            raise ValueError("group entry: topic or properties out of the record's limits")
        total += r.head_size + 3 + _span(e, i, from_src, src_len, ends, &body) + r.topic_len + r.props_len
    buf = PyByteArray_FromStringAndSize(NULL, total)
    out = PyByteArray_AS_STRING(buf)
    for i in range(n):
        e = <tuple>entries[i]
        r.topic = _utf8_or_null(e[0], &r.topic_len)
        r.body_len = _span(e, i, from_src, src_len, ends, &r.body)
        r.props = _utf8_or_null(e[2], &r.props_len)
        r.queue_id = e[3]
        r.flag = e[4]
        r.sys_flag = (<int32_t>e[5] & ~(_BORN_V6 | _STORE_V6)) | (
            _BORN_V6 if r.born_ip_size == 16 else 0
        ) | (_STORE_V6 if r.store_ip_size == 16 else 0)
        r.born_timestamp = e[6]
        r.reconsume_times = e[7]
        r.total = r.head_size + 3 + r.body_len + r.topic_len + r.props_len
        _write(out + pos, &r)
        pos += r.total
    return buf


def stamp_group(buf, Py_ssize_t pos, list keys, dict table, list queue_offsets, int64_t physical_base,
                int64_t store_timestamp, str id_prefix):
    """The records of `buf` from byte `pos`, one per consume-queue key of `keys`, stamped
    (`_stamp`): record k gets the next queue offset of `keys[k]` from `table` (key -> next
    offset, 0 when absent; advanced here, and each offset appended to `queue_offsets`), and lies at
    commit-log offset `physical_base` + its distance from `pos`. Returns their msg ids. Records
    that do not lie within `buf` are a ValueError (nothing is patched or advanced then)."""
    cdef Py_ssize_t n, cnt = len(keys), i, at = pos, prefix_len
    cdef int32_t flag
    cdef int64_t qoff
    cdef char* out
    cdef const char* prefix
    cdef PyObject* hit
    if not PyByteArray_Check(buf) or not id_prefix.isascii() or pos < 0 or physical_base < 0:
        raise TypeError("stamp_group: a bytearray, an ASCII prefix and offsets >= 0 expected")
    out = PyByteArray_AS_STRING(buf)
    n = PyByteArray_GET_SIZE(buf)
    if _records_end(out, n, pos, cnt) < 0:  # the walk first: nothing is patched unless all are whole
        raise ValueError("stamp_group: records run past the buffer")
    prefix = PyUnicode_AsUTF8AndSize(id_prefix, &prefix_len)
    ids = []
    at = pos
    for i in range(cnt):
        key = keys[i]
        hit = PyDict_GetItem(table, key)
        qoff = 0 if hit == NULL else <int64_t>(<object>hit)
        table[key] = qoff + 1
        queue_offsets.append(qoff)
        msg_id = PyBytes_FromStringAndSize(NULL, prefix_len + 16)
        flag = _get32(out + at + 36)
        _stamp(out + at, _PREFIX + (16 if flag & _BORN_V6 else 4) + 4, qoff,
               <uint64_t>(physical_base + (at - pos)), store_timestamp, prefix, prefix_len,
               PyBytes_AS_STRING(msg_id))  # fmt: skip
        ids.append(msg_id.decode("ascii"))
        at += _get32(out + at)
    return ids
