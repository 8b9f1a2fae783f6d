# Included by _send_lane.pyx (after _send_lane_raw.pxi): the compiled twin of
# `batch_lane.read_raw_batch`.
#
# `read_raw_batch` reads one SEND_BATCH_MESSAGE frame in place as `gather_raw_sends` reads a
# send: its prefix, its header (JSON in the shape clients send, or ROCKETMQ binary, into the texts
# of the letters a..m), its numbers in a client's spelling (`_field_number`, `_field_bool`, as
# `_Gather.take` reads a single send's), and where its body starts in `src`. No command, no ext
# dict and no copy of the body are made. Anything else is None: the connection decodes that frame
# and the rest, and they are served as before.

cdef long _BATCH_CODE = int(RequestCode.SEND_BATCH_MESSAGE)
cdef list _batch_slots = [None] * 13
cdef _Head _batch_head = _Head()
_batch_head.slots = _batch_slots


def read_raw_batch(bytes src, Py_ssize_t pos, Py_ssize_t max_frame_length):
    """`batch_lane.read_raw_batch_over(...)`: the batch at `src[pos:]` as a `BatchAsk`, or None
    (also where the reference reads a spelling this reader does not take)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(src)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(src), end
    cdef long long queue_id, sys_flag, born, dummy, reconsume = 0
    cdef unsigned int header_length, serialize_type
    cdef bint flag_k, flag_m
    cdef int found_j
    cdef _Head h = _batch_head
    cdef list s = _batch_slots
    if not _raw_head(p, size, pos, max_frame_length, h, &end, &serialize_type, &header_length):
        return None
    if h.code != _BATCH_CODE or h.flag & _NOT_ANSWERED:
        return None
    # the header as `decode_send_header_v2` reads it: a, b, c strings; d..h numbers (required);
    # i a string; j, l numbers; k, m booleans
    if type(s[0]) is not str or type(s[1]) is not str or type(s[2]) is not str:
        return None
    if (_field_number(s[3], 9, True, &dummy) != _OK or _field_number(s[4], 9, True, &queue_id) != _OK
            or _field_number(s[5], 9, True, &sys_flag) != _OK or _field_number(s[6], 18, True, &born) != _OK
            or _field_number(s[7], 9, True, &dummy) != _OK):
        return None
    found_j = _field_number(s[9], 9, False, &reconsume)
    if found_j == _BAD or _field_number(s[11], 9, False, &dummy) == _BAD:
        return None
    if _field_bool(s[10], &flag_k) != _OK or _field_bool(s[12], &flag_m) != _OK:
        return None
    if s[8] is not None and type(s[8]) is not str:
        return None
    return (
        end, h.opaque, _JSON_TYPE if serialize_type == 0 else _ROCKETMQ_TYPE, pos + 8 + header_length, s[1],
        queue_id, sys_flag, born, s[8] or "", reconsume if found_j == _OK else None,
    )
