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
from libc.string cimport memchr

include "_bytes.pxi"  # big-endian fields
include "_json_scan.pxi"  # strings, numbers, literals, keys; `_NO`

cdef object _JSON_TYPE = SerializeType.JSON
cdef object _ROCKETMQ_TYPE = SerializeType.ROCKETMQ


cdef bint _letter(const unsigned char* p, Py_ssize_t start, Py_ssize_t length, int* slot):
    """Whether the key `p[start:start+length]` is one of the letters a..m (its index in `slot`)."""
    if length == 1 and 97 <= p[start] <= 109:
        slot[0] = p[start] - 97
        return True
    return False


cdef bint _json_letters(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, list slots):
    """`{"k":"v",...}` at p[pos[0]]: the values of the letters a..m into `slots` (the last one of
    a key wins, as in a dict; other keys are read and dropped); False for anything else."""
    cdef Py_ssize_t i = pos[0], key_start, key_length
    cdef int slot
    cdef object value
    for slot in range(13):
        slots[slot] = None
    if _json_literal(p, n, &i, b"null", 4):
        pos[0] = i
        return True
    if i >= n or p[i] != 123:
        return False
    i += 1
    if i < n and p[i] == 125:
        pos[0] = i + 1
        return True
    while True:
        if i >= n or p[i] != 34:
            return False
        key_start = i + 1
        if _json_string(p, n, &i) is _NO or i >= n or p[i] != 58:
            return False
        key_length = i - 1 - key_start  # the key's bytes between its quotes
        if memchr(p + key_start, 92, key_length) != NULL:
            return False  # an escape in a key: the same name could be spelled otherwise
        i += 1
        if i >= n or p[i] != 34:
            return False
        value = _json_string(p, n, &i)
        if value is _NO:
            return False
        if _letter(p, key_start, key_length, &slot):
            slots[slot] = value
        if i < n and p[i] == 44:
            i += 1
            continue
        if i < n and p[i] == 125:
            pos[0] = i + 1
            return True
        return False


cdef bint _json_send(const unsigned char* p, Py_ssize_t n, list slots, long long* code, long long* flag,
                     long long* opaque):
    """A JSON header in the shape `_wire._json_command` takes: its code, flag and opaque, and its
    letters in `slots`; False for anything it would hand to Python or refuse."""
    cdef Py_ssize_t i = 1, key_start, key_length
    cdef long long number
    cdef bint has_code = False, has_opaque = False
    cdef unsigned char c
    flag[0] = 0
    for key_length in range(13):
        slots[key_length] = None
    if n < 2 or p[0] != 123 or p[1] == 125:
        return False
    while True:
        if i >= n or p[i] != 34:
            return False
        key_start = i + 1
        i = key_start
        while i < n and p[i] != 34:
            c = p[i]
            if c < 0x20 or c >= 0x7F or c == 92:
                return False
            i += 1
        if i + 1 >= n or p[i + 1] != 58:
            return False
        key_length = i - key_start
        i += 2
        if i >= n:
            return False
        c = p[i]
        if _key_is(p, key_start, key_length, b"extFields", 9):
            if not _json_letters(p, n, &i, slots):
                return False
        elif c == 34:
            if _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                if _json_string(p, n, &i) is _NO:
                    return False
            elif _key_is(p, key_start, key_length, b"code", 4) or _key_is(p, key_start, key_length, b"opaque", 6) \
                    or _key_is(p, key_start, key_length, b"version", 7) or _key_is(p, key_start, key_length, b"flag", 4):
                return False
            elif not _json_skip_string(p, n, &i):
                return False
        elif c == 45 or 48 <= c <= 57:
            if not _json_int(p, n, &i, &number):
                return False
            if _key_is(p, key_start, key_length, b"code", 4):
                code[0] = number
                has_code = True
            elif _key_is(p, key_start, key_length, b"opaque", 6):
                opaque[0] = number
                has_opaque = True
            elif _key_is(p, key_start, key_length, b"flag", 4):
                flag[0] = number
            elif _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                return False
        elif _key_is(p, key_start, key_length, b"remark", 6) and _json_literal(p, n, &i, b"null", 4):
            pass
        elif _key_is(p, key_start, key_length, b"code", 4) or _key_is(p, key_start, key_length, b"opaque", 6) \
                or _key_is(p, key_start, key_length, b"version", 7) or _key_is(p, key_start, key_length, b"flag", 4) \
                or _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
            return False
        elif not (_json_literal(p, n, &i, b"true", 4) or _json_literal(p, n, &i, b"false", 5)
                  or _json_literal(p, n, &i, b"null", 4)):
            return False
        if i >= n:
            return False
        if p[i] == 44:
            i += 1
            continue
        if p[i] == 125 and i + 1 == n:
            break
        return False
    return has_code and has_opaque


cdef object _utf8_text(const unsigned char* p, Py_ssize_t n):
    """`p[:n]` as text (the short ones from the cache), `_NO` when it is not UTF-8."""
    try:
        if n <= _TEXT_MAX:
            return _short_text(p, n)
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return _NO


cdef bint _binary_send(const unsigned char* p, Py_ssize_t size, list slots, long long* code, long long* flag,
                       long long* opaque):
    """A ROCKETMQ header as `command.decode_rocketmq_header` reads it, without a remark: its code,
    flag and opaque, and its letters in `slots` (an empty key or value drops its entry, as
    there); False for anything else (the decoder then reads it, or refuses it)."""
    cdef Py_ssize_t pos, end
    cdef long long ext_len, key_len, value_len
    cdef int slot
    cdef bint letter
    cdef object value
    for slot in range(13):
        slots[slot] = None
    if size < 21 or _get32(p + 13) != 0:
        return False
    code[0] = _get16(p)
    opaque[0] = _get32(p + 5)
    flag[0] = _get32(p + 9)
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
        letter = _letter(p, pos, key_len, &slot)
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
    cdef long long length, limit = max_frame_length - 4, code = 0, flag = 0, opaque = 0
    cdef unsigned int word, header_length, serialize_type
    cdef list slots = [None] * 13, ends = []
    cdef bint ok
    cdef object body
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
            ok = _json_send(p + start, header_length, slots, &code, &flag, &opaque)
        elif serialize_type == 1:
            ok = _binary_send(p + start, header_length, slots, &code, &flag, &opaque)
        else:
            break
        if not ok or code != _V2 or flag & _NOT_ANSWERED:
            break
        body = PyBytes_FromStringAndSize(<const char*>p + header_end, end - header_end) if header_end < end else None
        if not gather.take(
            slots[0], slots[1], slots[2], slots[3], slots[4], slots[5], slots[6], slots[7], slots[8], slots[9],
            slots[10], slots[11], slots[12], body, opaque,
            _JSON_TYPE if serialize_type == 0 else _ROCKETMQ_TYPE,
        ):
            break
        ends.append(end)
        pos = end
    return gather.result(), ends
