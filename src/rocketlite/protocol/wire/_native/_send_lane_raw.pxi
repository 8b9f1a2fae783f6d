# Included by _send_lane.pyx: `gather_raw_sends`, the lane's gatherer straight from a read's bytes.
#
# Each frame from `pos` on is read in place: its prefix, its header (JSON in the shape clients
# send, or ROCKETMQ binary) into the texts of the letters a..m, its body as bytes; then `take`
# judges it as `gather_sends` judges a decoded command. No command and no ext dict is made. The
# run ends at the first frame that is incomplete, has a bad prefix, or a header this reader does
# not take (what `_wire.decode_frames` hands to the Python codec, a JSON number written as text,
# a remark in a ROCKETMQ header, a torn entry, text that is not UTF-8): the connection decodes
# that frame and the rest the ordinary way, and they are served as today, in order.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

from rocketlite.protocol.wire.command import DEFAULT_LANGUAGE

cdef str _DEFAULT_LANGUAGE = DEFAULT_LANGUAGE

include "_bytes.pxi"  # big-endian fields
include "_json_scan.pxi"  # `_json_head`: the header's top level; strings, numbers; `_NO`

cdef object _JSON_TYPE = SerializeType.JSON
cdef object _ROCKETMQ_TYPE = SerializeType.ROCKETMQ


cdef object _utf8_text(const unsigned char* p, Py_ssize_t n):
    """`p[:n]` as text (the short ones from the cache), `_NO` when it is not UTF-8."""
    try:
        if n <= _TEXT_MAX:
            return _short_text(p, n)
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return _NO


cdef bint _binary_head(const unsigned char* p, Py_ssize_t size, _Head h):
    """A ROCKETMQ header as `command.decode_rocketmq_header` reads it, without a remark, into `h`
    (code, flag, opaque and the keys kept in `h.slots` (`_slot_of`); an empty key or value drops its entry, as
    there); False for anything else (the decoder then reads it, or refuses it)."""
    cdef Py_ssize_t pos, end
    cdef long long ext_len, key_len, value_len
    cdef int slot
    cdef bint letter
    cdef object value
    cdef list slots = h.slots
    for slot in range(13):
        slots[slot] = None
    if size < 21 or _get32(p + 13) != 0:
        return False
    h.code = _get16(p)
    h.opaque = _get32(p + 5)
    h.flag = _get32(p + 9)
    ext_len = _get32(p + 17)
    pos = 21
    if ext_len < 0 or pos + ext_len != size:
        return False
    end = size
    while pos < end:
        if pos + 2 > end:
            return False
        key_len = _get16(p + pos)
        pos += 2
        if key_len < 0 or pos + key_len + 4 > end:
            return False
        letter = _slot_of(p, pos, key_len, h.names, &slot)
        if not letter and key_len and _utf8_text(p + pos, key_len) is _NO:
            return False
        pos += key_len
        value_len = _get32(p + pos)
        pos += 4
        if value_len < 0 or pos + value_len > end:
            return False
        if value_len:
            value = _utf8_text(p + pos, value_len)
            if value is _NO:
                return False
            if letter:
                slots[slot] = value
        pos += value_len
    return True


def gather_raw_sends(bytes src, Py_ssize_t pos, Py_ssize_t max_frame_length, dict table, set legal,
                     dict facts, str cluster, Py_ssize_t head, Py_ssize_t max_size, Py_ssize_t max_props, rng,
                     send_properties):
    """`send_lane.gather_raw_sends_over(...)`: (entries, sizes, keys, answers, runs) of the
    leading frames of `src[pos:]` on the common path, and where each of those frames ends; the
    same as the reference or a shorter run."""
    cdef _Gather gather = _Gather(table, legal, facts, cluster, head, max_size, max_props, rng, send_properties)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(src)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(src), start, header_end, end
    cdef long long length, limit = max_frame_length - 4
    cdef unsigned int word, header_length, serialize_type
    cdef list slots = [None] * 13, ends = []
    cdef _Head h = _Head()
    cdef bint ok
    cdef object body
    h.slots = slots
    while size - pos >= 8:
        length = _get32(p + pos)
        word = _getu32(p + pos + 4)
        header_length = word & 0x00FFFFFF
        if not 4 <= length <= limit or header_length > length - 4:
            break
        end = pos + 4 + length
        if end > size:
            break
        start = pos + 8
        header_end = start + header_length
        serialize_type = word >> 24
        if serialize_type == 0:
            ok = _json_head(p + start, header_length, h)
        elif serialize_type == 1:
            ok = _binary_head(p + start, header_length, h)
        else:
            break
        if not ok or h.code != _V2 or h.flag & _NOT_ANSWERED:
            break
        body = PyBytes_FromStringAndSize(<const char*>p + header_end, end - header_end) if header_end < end else None
        if not gather.take(
            slots[0], slots[1], slots[2], slots[3], slots[4], slots[5], slots[6], slots[7], slots[8], slots[9],
            slots[10], slots[11], slots[12], body, h.opaque,
            _JSON_TYPE if serialize_type == 0 else _ROCKETMQ_TYPE,
        ):
            break
        ends.append(end)
        pos = end
    return gather.result(), ends
