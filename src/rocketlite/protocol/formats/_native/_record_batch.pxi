# A SEND_BATCH_MESSAGE body straight to commit-log records, and such a batch stamped: included
# by _record.pyx (its `_Rec`, `_write`, `_read_ip`, `_stamp`, and the shared `_bytes.pxi`,
# `_text.pxi`, `_props.pxi`).
#
# `encode_batch_records` is `protocol.batch.encode_batch_records` (for an accepted batch,
# `send_batch_messages` then `encode_records`; a batch past maxMessageSize is refused at the first
# record over the limit, before more is built) without a `MessageInner` per entry: one pass checks
# the whole body (the same ProtocolErrors, in the same order, as `send_batch_messages`) and bounds
# the output, a second rewrites each entry's properties in a scratch buffer (the entry's own, WAIT
# dropped, then every batch-level one it lacks, with the map semantics of `string_to_properties`:
# a repeated key keeps its first place and its last value) and writes the record from a template
# `_Rec`. The property array is `_props.pxi`'s, shared with `_send.pyx`, over UTF-8 bytes (the
# separators are ASCII). The output is sized by the first pass's bound but never past
# `max_message_size`: the second pass refuses the batch (BATCH_TOO_LARGE) at the first record that
# takes the total past it. Anything unusual goes to the reference: strings without a UTF-8 form,
# more than `_PROPS_CAP` properties, a number out of its Java range, a record over a limit (the
# reference words the remark).

from rocketlite.protocol.formats import batch as _batch_py
from rocketlite.protocol.formats.batch import BatchTarget as _BatchTarget
from rocketlite.protocol.formats.batch import EncodedBatch as _EncodedBatch
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.record_ref import stamp_batch as _stamp_batch_py

from libc.string cimport memchr

assert (
    _batch_py.BATCH_OK, _batch_py.BATCH_DELAYED_ENTRY, _batch_py.BATCH_DELAY_PROPERTY,
    _batch_py.BATCH_TOO_LARGE,
) == (0, 1, 2, 3)
assert _batch_py.DELAY_NEEDLE == "DELAY\x01"


cdef bint _has_needle(const char* s, Py_ssize_t n) noexcept:
    """"DELAY\\x01" occurs in s[:n] (the store's substring test, `batch.DELAY_NEEDLE`). The scan
    is for the \\x01 (one per property) and looks back at the five bytes before it: a scan for
    the 'D' stopped at every hex digit D of a UNIQ_KEY and every cluster name's capital."""
    cdef Py_ssize_t pos = 5
    cdef const char* hit
    while pos < n:
        hit = <const char*>memchr(s + pos, 1, n - pos)
        if hit == NULL:
            return False
        if hit[-5] == 68 and hit[-4] == 69 and hit[-3] == 76 and hit[-2] == 65 and hit[-1] == 89:  # DELAY
            return True
        pos = hit - s + 1
    return False


def encode_batch_records(body, target):
    """`batch.encode_batch_records`: `EncodedBatch(records, count, first SYSFLAG, outcome, remark)`."""
    cdef Py_ssize_t hn, cn, nbatch, i, count, n_entries = 0, bound = 0, batch_size
    cdef Py_ssize_t size, pos = 0, total, body_len, props_len, props_start, end, out_pos = 0
    cdef _Prop batch[_PROPS_CAP + 1]
    cdef _Prop props[2 * _PROPS_CAP + 2]
    cdef _Rec r
    cdef int64_t max_size
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef char* scratch
    cdef char* out
    cdef bint delayed = False, fallback = False, needle = False
    cdef const char* h
    cdef const char* c
    if type(target) is not _BatchTarget:
        return _batch_py.encode_batch_records(body, target)
    (header_properties, cluster, topic, born_host, store_host, queue_id, sys_flag, born_timestamp,
     reconsume_times, max_message_size) = <tuple>target
    if not (type(header_properties) is str and type(cluster) is str and type(topic) is str):
        return _batch_py.encode_batch_records(body, target)
    h = _utf8_or_null(header_properties, &hn)
    c = _utf8_or_null(cluster, &cn)
    r.topic = _utf8_or_null(topic, &r.topic_len)
    if h == NULL or c == NULL or r.topic == NULL:
        return _batch_py.encode_batch_records(body, target)
    nbatch = _props_parse(h, hn, batch, _PROPS_CAP)
    if nbatch < 0 or r.topic_len > _MAX_TOPIC:
        return _batch_py.encode_batch_records(body, target)
    _props_drop(batch, nbatch, b"WAIT", 4)
    i = _props_find(batch, nbatch, b"CLUSTER", 7)
    if i < 0:
        i = nbatch
        nbatch += 1
        batch[i].k = b"CLUSTER"
        batch[i].kl = 7
        batch[i].live = True
    batch[i].v = c
    batch[i].vl = cn
    batch_size = _props_size(batch, nbatch)
    try:
        if not _read_ip(born_host.ip, r.born_ip, &r.born_ip_size) or not _read_ip(
            store_host.ip, r.store_ip, &r.store_ip_size
        ):
            return _batch_py.encode_batch_records(body, target)
        r.sys_flag = (<int32_t>sys_flag & ~(_BORN_V6 | _STORE_V6)) | (
            _BORN_V6 if r.born_ip_size == 16 else 0
        ) | (_STORE_V6 if r.store_ip_size == 16 else 0)
        r.queue_id = queue_id
        r.born_timestamp = born_timestamp
        r.born_port = born_host.port
        r.store_port = store_host.port
        r.reconsume_times = reconsume_times
        max_size = max_message_size
    except (OverflowError, TypeError, AttributeError):
        return _batch_py.encode_batch_records(body, target)
    r.prepared = 0
    r.head_size = _V4_HEAD + (r.born_ip_size - 4) + (r.store_ip_size - 4)
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        while pos < size:  # the whole body checked first, as `decode_batch`
            if size - pos < 20:
                raise ProtocolError(f"batch entry at byte {pos} is torn: {size - pos} bytes left")
            total = _get32(p + pos)
            body_len = _get32(p + pos + 16)
            if body_len < 0 or pos + 20 + body_len + 2 > size:
                raise ProtocolError(f"batch entry at byte {pos}: body length {body_len} overruns the batch")
            props_len = _get16(p + pos + 20 + body_len)
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
            if not _ascii(p + props_start, props_len):
                try:
                    PyUnicode_DecodeUTF8(<const char*>p + props_start, props_len, NULL)
                except UnicodeDecodeError as exc:
                    raise ProtocolError(f"batch entry at byte {pos}: properties are not UTF-8") from exc
            # a DELAY key needs "DELAY\x01" in the string: only then is it parsed here (the
            # second pass parses every entry, and hands one past _PROPS_CAP to the reference)
            if _has_needle(<const char*>p + props_start, props_len):
                needle = True
                if not delayed and not fallback:
                    count = _props_parse(<const char*>p + props_start, props_len, props, _PROPS_CAP)
                    if count < 0:
                        fallback = True
                    elif _props_find(props, count, b"DELAY", 5) >= 0:
                        delayed = True
            n_entries += 1
            bound += r.head_size + 3 + r.topic_len + body_len + props_len + 1 + batch_size
            pos = end
        if fallback:
            return _batch_py.encode_batch_records(body, target)
        if delayed:
            return _EncodedBatch(bytearray(), 0, 0, 1, "")
        if n_entries == 0:
            return _EncodedBatch(bytearray(), 0, 0, 0, "")
        # A stored string holds the needle only if one of its sources does: the needle has one
        # \x01, at its end, so it lies within one `key\x01value` pair, and each pair written is
        # (as bytes) in the entry's string, the header's, or is "CLUSTER\x01" + the cluster name.
        # Without the needle in any of them, no record's string is searched for it.
        needle = needle or _has_needle(h, hn) or _has_needle(c, cn)
        # past max_size the batch is refused, so no more than that is ever written: a few
        # thousand empty entries and a long header never cost entries x header bytes
        if bound > max_size:
            bound = max_size if max_size > 0 else 0
        buf = PyByteArray_FromStringAndSize(NULL, bound)
        out = PyByteArray_AS_STRING(buf)
        scratch = <char*>malloc(_MAX_PROPS + 1)
        if scratch == NULL:
            raise MemoryError()
        try:
            pos = 0
            while pos < size:
                body_len = _get32(p + pos + 16)
                props_len = _get16(p + pos + 20 + body_len)
                props_start = pos + 22 + body_len
                count = _props_parse(<const char*>p + props_start, props_len, props, _PROPS_CAP)
                if count < 0:
                    return _batch_py.encode_batch_records(body, target)  # past _PROPS_CAP
                _props_drop(props, count, b"WAIT", 4)
                for i in range(nbatch):
                    if batch[i].live and _props_find(props, count, batch[i].k, batch[i].kl) < 0:
                        # field by field: a struct copy compiles to `rep movs`, whose stores the
                        # loads of `_props_size` right after cannot forward from (a stall)
                        props[count].k = batch[i].k
                        props[count].kl = batch[i].kl
                        props[count].v = batch[i].v
                        props[count].vl = batch[i].vl
                        props[count].live = True
                        count += 1
                r.props_len = _props_size(props, count)
                if r.props_len > _MAX_PROPS:
                    return _batch_py.encode_batch_records(body, target)  # BATCH_TOO_LARGE, or a needle first
                _props_write(props, count, scratch)
                if needle and _has_needle(scratch, r.props_len):
                    return _EncodedBatch(bytearray(), n_entries, 0, 2, "")
                r.props = scratch
                r.body = <const char*>p + pos + 20
                r.body_len = body_len
                r.flag = _get32(p + pos + 12)
                r.total = r.head_size + 3 + body_len + r.topic_len + r.props_len
                if r.total > max_size:
                    return _batch_py.encode_batch_records(body, target)  # BATCH_TOO_LARGE, or a needle first
                if out_pos + r.total > max_size:  # the whole batch over maxMessageSize
                    remark = _batch_py.batch_too_large_remark(out_pos + r.total, max_size)
                    return _EncodedBatch(bytearray(), n_entries, 0, 3, remark)
                _write(out + out_pos, &r)
                out_pos += r.total
                pos = props_start + props_len
        finally:
            free(scratch)
    finally:
        PyBuffer_Release(&view)
    del buf[out_pos:]
    return _EncodedBatch(buf, n_entries, r.sys_flag, 0, "")


def stamp_batch(buf, count, queue_offset, advances, physical_base, store_timestamp, id_prefix):
    """`record_ref.stamp_batch`: each of the `count` records of `buf` stamped (`_stamp`) with its
    queue offset, commit-log offset and the store time, the msg ids returned comma-joined.
    Anything unusual (not a bytearray, a prefix that is not ASCII text, numbers out of range,
    records that do not fill the buffer) goes to the reference."""
    cdef int64_t qoff, base, now
    cdef Py_ssize_t n, cnt, i, pos, prefix_len, id_len
    cdef int32_t flag
    cdef char* out
    cdef char* ids_out
    cdef const char* prefix
    cdef bint adv
    if not (PyByteArray_Check(buf) and PyUnicode_Check(id_prefix) and id_prefix.isascii()):
        return _stamp_batch_py(buf, count, queue_offset, advances, physical_base, store_timestamp, id_prefix)
    try:
        cnt = count
        qoff = queue_offset
        base = physical_base
        now = store_timestamp
    except (OverflowError, TypeError):
        return _stamp_batch_py(buf, count, queue_offset, advances, physical_base, store_timestamp, id_prefix)
    adv = bool(advances)
    out = PyByteArray_AS_STRING(buf)
    n = PyByteArray_GET_SIZE(buf)
    if (  # the walk first: nothing is patched unless the records fill the buffer
        cnt < 0 or _records_end(out, n, 0, cnt) != n or base < 0 or base > 0x7FFFFFFFFFFFFFFF - n
        or (adv and cnt and qoff > 0x7FFFFFFFFFFFFFFF - cnt)
    ):
        return _stamp_batch_py(buf, count, queue_offset, advances, physical_base, store_timestamp, id_prefix)
    prefix = PyUnicode_AsUTF8AndSize(id_prefix, &prefix_len)
    id_len = prefix_len + 16
    ids = PyBytes_FromStringAndSize(NULL, cnt * (id_len + 1) - 1 if cnt else 0)
    ids_out = PyBytes_AS_STRING(ids)
    pos = 0
    for i in range(cnt):
        flag = _get32(out + pos + 36)
        _stamp(out + pos, _PREFIX + (16 if flag & _BORN_V6 else 4) + 4, qoff, <uint64_t>base + <uint64_t>pos,
               now, prefix, prefix_len, ids_out + i * (id_len + 1))  # fmt: skip
        if i + 1 < cnt:
            ids_out[i * (id_len + 1) + id_len] = 44  # ','
        if adv:
            qoff += 1
        pos += _get32(out + pos)
    return ids.decode("ascii")
