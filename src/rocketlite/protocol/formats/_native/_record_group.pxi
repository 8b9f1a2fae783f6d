# Several single sends (SEND_MESSAGE_V2 requests of one socket read) as one contiguous append:
# included by _record.pyx (its `_Rec`, `_write`, `_read_ip`, `_stamp`). No reference of its own:
# the send processor's coalescing lane (`broker/processors/send_group.py`) only runs when these
# are compiled, and its differential test (`tests/broker/test_send_group.py`) pins the records it
# places and the answers it gives against the per-message path, which is the reference.
#
# `encode_group`: each entry (topic, body, properties, queue id, flag, SYSFLAG, born timestamp,
# reconsume times) written as `encode_record` writes a single message's record (the same `_write`,
# QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP left zero), back to back in one bytearray.
# `stamp_group`: those records from byte `pos`, one per consume-queue key, stamped as
# `place_record` stamps one (`_stamp`), each with the next queue offset of its key, taken from
# (and advanced in) the commit log's table of them (the entries go to different queues).

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


def encode_group(list entries, born_host, store_host):
    """The records of `entries` back to back (a bytearray). The caller has checked the limits
    (topic and properties lengths, maxMessageSize); a value of the wrong type is a TypeError."""
    cdef _Rec r
    cdef Py_ssize_t total = 0, pos = 0, n = len(entries), i
    cdef char* out
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
        if type(e[0]) is not str or type(e[1]) is not bytes or type(e[2]) is not str:
            raise TypeError("group entry: (str, bytes, str, ...) expected")
        r.topic = _utf8_or_null(e[0], &r.topic_len)
        r.props = _utf8_or_null(e[2], &r.props_len)
        if r.topic == NULL or r.props == NULL or r.topic_len > _MAX_TOPIC or r.props_len > _MAX_PROPS:
            raise ValueError("group entry: topic or properties out of the record's limits")
        total += r.head_size + 3 + PyBytes_GET_SIZE(e[1]) + r.topic_len + r.props_len
    buf = PyByteArray_FromStringAndSize(NULL, total)
    out = PyByteArray_AS_STRING(buf)
    for i in range(n):
        e = <tuple>entries[i]
        r.topic = _utf8_or_null(e[0], &r.topic_len)
        r.body = PyBytes_AS_STRING(e[1])
        r.body_len = PyBytes_GET_SIZE(e[1])
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
