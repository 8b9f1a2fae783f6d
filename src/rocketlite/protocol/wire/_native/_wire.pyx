# cython: language_level=3
"""The compiled wire core: frame splitting, JSON and ROCKETMQ header codecs, whole response frames.

Twins of `frame_codec.decode_frames_over(...)` / `encode_command_over(...)`, `json_header_ref` and
`command.decode_rocketmq_header` / `encode_rocketmq_header`, under the same names, so
`protocol.wire.speedups` takes them over the Python ones. The contract is the Python code's: the same
commands, the same bytes, the same ProtocolError messages (`tests/protocol/test_native_wire.py`).

How that is kept without re-implementing every corner: each codec takes the shape every client
sends (strict JSON without whitespace, string ext values, integer numbers; commands whose fields
have their declared types and fit the wire) in C, and hands anything else, unchanged, to the
reference it twins. Frame-length errors are raised by
`frame_codec.check_prefix` itself, so their words cannot drift. The binary header decoder has no
such escape: it is a line-by-line port, messages included.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdlib cimport free, malloc, realloc
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport uint32_t
from libc.string cimport memcmp, memcpy

from rocketlite.protocol.wire import command as _command
from rocketlite.protocol.wire import json_header_ref as _json_py
from rocketlite.protocol.wire import send_response as _send_response
from rocketlite.protocol.codes import CommandFlag as _CommandFlag
from rocketlite.protocol.codes import LanguageCode, SerializeType
from rocketlite.protocol.codes import ResponseCode as _ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.frame_codec import check_prefix, encode_command_over

cdef object _JSON = SerializeType.JSON
cdef object _ROCKETMQ = SerializeType.ROCKETMQ
cdef object _py_encode_command = encode_command_over(_json_py.encode_json_header)
cdef object _py_decode_json = _json_py.decode_json_header
cdef object _py_encode_json = _json_py.encode_json_header
cdef object _py_encode_binary = _command.encode_rocketmq_header
cdef dict _LANGUAGE_CODES = {name: int(member) for name, member in LanguageCode.__members__.items()}
cdef int _LANGUAGE_OTHER = int(LanguageCode.OTHER)
# language byte (signed, as Java writes it) + 128 -> its name, OTHER for bytes with no name
cdef list _LANGUAGE_NAMES = [
    LanguageCode(b).name if b in LanguageCode._value2member_map_ else LanguageCode.OTHER.name
    for b in range(-128, 128)
]
cdef str _DEFAULT_LANGUAGE = _command.DEFAULT_LANGUAGE
cdef int _HEADER_LENGTH_MASK = 0x00FFFFFF

# ============================================================================= bytes in and out


include "_bytes.pxi"  # big-endian fields, hex digits
include "_text.pxi"  # the UTF-8 form of a str


cdef struct Buf:
    unsigned char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int _buf_init(Buf* b, Py_ssize_t cap) except -1:
    b.data = <unsigned char*>malloc(cap)
    if b.data == NULL:
        raise MemoryError()
    b.size = 0
    b.cap = cap
    return 0


cdef int _buf_grow(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = b.cap * 2
    cdef unsigned char* data
    while cap < b.size + extra:
        cap *= 2
    data = <unsigned char*>realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int _buf_put(Buf* b, const void* src, Py_ssize_t n) except -1:
    if b.size + n > b.cap:
        _buf_grow(b, n)
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef inline int _buf_lit(Buf* b, const char* text) except -1:
    cdef Py_ssize_t n = 0
    while text[n] != 0:
        n += 1
    return _buf_put(b, text, n)


cdef int _buf_int(Buf* b, long long v) except -1:
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
        tmp[i] = 45  # '-'
    return _buf_put(b, &tmp[i], 24 - i)


cdef const char* _SHORT_ESCAPES = b"btn?fr"  # the letters of \b \t \n (none) \f \r, from code 8


cdef int _buf_quote(Buf* b, const unsigned char* s, Py_ssize_t n) except -1:
    """A JSON string literal as fastjson writes it (`fastjson.quote_reference`), from UTF-8 bytes:
    C0 controls and U+007F..U+009F as upper-case `\\uXXXX`, the short escapes, the rest as is."""
    cdef Py_ssize_t i = 0, run = 0
    cdef unsigned char c
    cdef unsigned int code
    cdef unsigned char esc[6]
    if b.size + n + 2 > b.cap:
        _buf_grow(b, n + 2)
    b.data[b.size] = 34
    b.size += 1
    while i < n:
        c = s[i]
        if c >= 0x20 and c != 34 and c != 92 and c != 0x7F and c != 0xC2:
            i += 1
            continue
        if c == 0xC2:  # UTF-8 lead byte of U+0080..U+00BF: escape U+0080..U+009F only
            if i + 1 < n and s[i + 1] < 0xA0:
                code = s[i + 1] & 0x3F | 0x80
                _buf_put(b, s + run, i - run)
                i += 2
                run = i
            else:
                i += 1
                continue
        else:
            code = c
            _buf_put(b, s + run, i - run)
            i += 1
            run = i
        esc[0] = 92
        if code == 34 or code == 92:
            esc[1] = code
            _buf_put(b, esc, 2)
        elif code == 8 or code == 9 or code == 10 or code == 12 or code == 13:
            esc[1] = _SHORT_ESCAPES[code - 8]
            _buf_put(b, esc, 2)
        else:
            esc[1] = 117  # 'u'
            esc[2] = 48
            esc[3] = 48
            esc[4] = _HEX_DIGITS[code >> 4]
            esc[5] = _HEX_DIGITS[code & 15]
            _buf_put(b, esc, 6)
    _buf_put(b, s + run, n - run)
    _buf_put(b, b'"', 1)
    return 0


cdef inline bint _small_int(object value, long long* out):
    """True and the value when `value` is exactly an int that fits a C long long."""
    cdef int overflow = 0
    if type(value) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(value, &overflow)
    return overflow == 0


# ==================================================================================== JSON out


cdef int _json_header_into(Buf* b, object cmd) except -1:
    """Write `cmd`'s JSON header into `b`; 1 when it is written, 0 when the command is not of the
    shape taken here (nothing useful written: the caller hands it to the Python codec)."""
    cdef long long code = 0, flag = 0, opaque = 0, version = 0
    cdef Py_ssize_t n
    cdef const char* s
    cdef object ext = cmd.ext_fields
    cdef object language = cmd.language
    cdef object remark = cmd.remark
    cdef list keys
    cdef bint first = True
    if not (_small_int(cmd.code, &code) and _small_int(cmd.flag, &flag) and _small_int(cmd.opaque, &opaque)
            and _small_int(cmd.version, &version)):
        return 0
    if type(language) is not str or (remark is not None and type(remark) is not str) or type(ext) is not dict:
        return 0
    for key, value in (<dict>ext).items():
        if type(key) is not str or type(value) is not str:
            return 0
    _buf_lit(b, b'{"code":')
    _buf_int(b, code)
    if ext:
        keys = sorted(ext)
        _buf_lit(b, b',"extFields":{')
        for key in keys:
            value = (<dict>ext)[key]
            if not first:
                _buf_put(b, b",", 1)
            first = False
            s = _utf8_or_null(key, &n)
            if s == NULL:
                return 0
            _buf_quote(b, <const unsigned char*>s, n)
            _buf_put(b, b":", 1)
            s = _utf8_or_null(value, &n)
            if s == NULL:
                return 0
            _buf_quote(b, <const unsigned char*>s, n)
        _buf_put(b, b"}", 1)
    _buf_lit(b, b',"flag":')
    _buf_int(b, flag)
    _buf_lit(b, b',"language":')
    s = _utf8_or_null(language, &n)
    if s == NULL:
        return 0
    _buf_quote(b, <const unsigned char*>s, n)
    _buf_lit(b, b',"opaque":')
    _buf_int(b, opaque)
    if remark is not None:
        _buf_lit(b, b',"remark":')
        s = _utf8_or_null(remark, &n)
        if s == NULL:
            return 0
        _buf_quote(b, <const unsigned char*>s, n)
    _buf_lit(b, b',"serializeTypeCurrentRPC":"JSON","version":')
    _buf_int(b, version)
    _buf_put(b, b"}", 1)
    return 1


def encode_json_header(cmd):
    """`json_header_ref.encode_json_header`, byte for byte."""
    cdef Buf b
    _buf_init(&b, 512)
    try:
        if not _json_header_into(&b, cmd):
            return _py_encode_json(cmd)
        return PyBytes_FromStringAndSize(<char*>b.data, b.size)
    finally:
        free(b.data)


# ============================================================================== binary header out


cdef int _binary_header_into(Buf* b, object cmd) except -1:
    """Write `cmd`'s ROCKETMQ header into `b`; 0 when it must go to the Python codec (a field of
    another type or out of range, a key too long: the Python codec raises the words for those)."""
    cdef long long code = 0, flag = 0, opaque = 0, version = 0
    cdef Py_ssize_t n, kn, vn, ext_at
    cdef const char* s
    cdef const char* v
    cdef unsigned char word[4]
    cdef object ext = cmd.ext_fields
    cdef object language = cmd.language
    cdef object remark = cmd.remark
    cdef object lang
    if not (_small_int(cmd.code, &code) and _small_int(cmd.flag, &flag) and _small_int(cmd.opaque, &opaque)
            and _small_int(cmd.version, &version)):
        return 0
    if not (-32768 <= code <= 32767 and -32768 <= version <= 32767):
        return 0
    if not (-2147483648 <= opaque <= 2147483647 and -2147483648 <= flag <= 2147483647):
        return 0
    if type(language) is not str or (remark is not None and type(remark) is not str) or type(ext) is not dict:
        return 0
    lang = _LANGUAGE_CODES.get(language)
    word[0] = (code >> 8) & 0xFF
    word[1] = code & 0xFF
    _buf_put(b, word, 2)
    word[0] = <unsigned char>(_LANGUAGE_OTHER if lang is None else <int>lang)
    _buf_put(b, word, 1)
    word[0] = (version >> 8) & 0xFF
    word[1] = version & 0xFF
    _buf_put(b, word, 2)
    _put32(word, <unsigned int>opaque)
    _buf_put(b, word, 4)
    _put32(word, <unsigned int>flag)
    _buf_put(b, word, 4)
    if remark:
        s = _utf8_or_null(remark, &n)
        if s == NULL:
            return 0
    else:
        s = b""
        n = 0
    _put32(word, <unsigned int>n)
    _buf_put(b, word, 4)
    _buf_put(b, s, n)
    ext_at = b.size
    _buf_put(b, word, 4)  # the ext length, patched below
    for key, value in (<dict>ext).items():
        if type(key) is not str or type(value) is not str:
            return 0
        s = _utf8_or_null(key, &kn)
        v = _utf8_or_null(value, &vn)
        if s == NULL or v == NULL or kn > 0x7FFF:
            return 0
        word[0] = (kn >> 8) & 0xFF
        word[1] = kn & 0xFF
        _buf_put(b, word, 2)
        _buf_put(b, s, kn)
        _put32(word, <unsigned int>vn)
        _buf_put(b, word, 4)
        _buf_put(b, v, vn)
    _put32(b.data + ext_at, <unsigned int>(b.size - ext_at - 4))
    return 1


def encode_rocketmq_header(cmd):
    """`command.encode_rocketmq_header`, byte for byte."""
    cdef Buf b
    _buf_init(&b, 512)
    try:
        if not _binary_header_into(&b, cmd):
            return _py_encode_binary(cmd)
        return PyBytes_FromStringAndSize(<char*>b.data, b.size)
    finally:
        free(b.data)


# ================================================================================ whole frames out


def encode_command(cmd):
    """`frame_codec.encode_command_over(...)`: the whole frame, prefix, header and body in one copy."""
    cdef Buf b
    cdef int done
    cdef Py_ssize_t header_length, body_length = 0
    cdef object serialize_type = cmd.serialize_type
    cdef object body = cmd.body
    cdef object out
    cdef unsigned char* o
    if body is not None and type(body) is not bytes:
        return _py_encode_command(cmd)
    _buf_init(&b, 512)
    try:
        if serialize_type is _JSON:
            done = _json_header_into(&b, cmd)
        elif serialize_type is _ROCKETMQ:
            done = _binary_header_into(&b, cmd)
        else:
            done = 0
        if not done:
            return _py_encode_command(cmd)
        header_length = b.size
        if header_length > _HEADER_LENGTH_MASK:
            raise ProtocolError(f"header of {header_length} bytes does not fit the 24-bit header length")
        if body is not None:
            body_length = PyBytes_GET_SIZE(body)
        out = PyBytes_FromStringAndSize(NULL, 8 + header_length + body_length)
        o = <unsigned char*>PyBytes_AS_STRING(out)
        _put32(o, <unsigned int>(4 + header_length + body_length))
        _put32(o + 4, (<unsigned int>(0 if serialize_type is _JSON else 1) << 24) | <unsigned int>header_length)
        memcpy(o + 8, b.data, header_length)
        if body_length:
            memcpy(o + 8 + header_length, PyBytes_AS_STRING(body), body_length)
        return out
    finally:
        free(b.data)


cdef long long _DEFAULT_VERSION = _command.DEFAULT_VERSION
assert _command.DEFAULT_LANGUAGE == "JAVA" and int(_ResponseCode.SUCCESS) == 0 and int(_CommandFlag.RESPONSE) == 1


cdef inline bint _quoted(Buf* b, object text) except -1:
    """`text` (an exact str) as a JSON string literal; False when it has no UTF-8 (lone surrogates)."""
    cdef Py_ssize_t n
    cdef const char* s = _utf8_or_null(text, &n)
    if s == NULL:
        return False
    _buf_quote(b, <const unsigned char*>s, n)
    return True


cdef bint _send_ok_into(Buf* b, object opaque, object serialize_type, object msg_id, object queue_id,
                        object queue_offset, object region, object trace_on, object transaction_id) except -1:
    """Append the SUCCESS answer's frame to `b`; False (`b` as it was) when the values are not of
    the shape written here (the caller encodes through the command, as the reference does)."""
    cdef long long op = 0, qid = 0, qoff = 0
    cdef Py_ssize_t at = b.size, header_length
    if (serialize_type is not _JSON or not _small_int(opaque, &op) or not _small_int(queue_id, &qid)
            or not _small_int(queue_offset, &qoff) or type(msg_id) is not str or type(region) is not str
            or type(trace_on) is not str or (transaction_id is not None and type(transaction_id) is not str)):
        return False
    _buf_put(b, b"\0\0\0\0\0\0\0\0", 8)  # the frame's prefix, patched below
    # ext keys in the general encoder's (sorted) order: MSG_REGION, TRACE_ON, msgId, queueId, ...
    _buf_lit(b, b'{"code":0,"extFields":{"MSG_REGION":')
    if not (_quoted(b, region) and _buf_lit(b, b',"TRACE_ON":') == 0 and _quoted(b, trace_on)
            and _buf_lit(b, b',"msgId":') == 0 and _quoted(b, msg_id)):
        b.size = at
        return False
    _buf_lit(b, b',"queueId":"')
    _buf_int(b, qid)
    _buf_lit(b, b'","queueOffset":"')
    _buf_int(b, qoff)
    _buf_put(b, b'"', 1)
    if transaction_id is not None:
        _buf_lit(b, b',"transactionId":')
        if not _quoted(b, transaction_id):
            b.size = at
            return False
    _buf_lit(b, b'},"flag":1,"language":"JAVA","opaque":')
    _buf_int(b, op)
    _buf_lit(b, b',"serializeTypeCurrentRPC":"JSON","version":')
    _buf_int(b, _DEFAULT_VERSION)
    _buf_put(b, b"}", 1)
    header_length = b.size - at - 8
    _put32(b.data + at, <unsigned int>(4 + header_length))
    _put32(b.data + at + 4, <unsigned int>header_length)
    return True


def encode_send_ok(opaque, serialize_type, msg_id, queue_id, queue_offset, region, trace_on, transaction_id):
    """`send_response.send_ok_over(encode_command)`, byte for byte: the SUCCESS answer to a stored
    send written straight from its values (JSON, exact ints and strs); anything else is encoded
    through the command, as the reference does."""
    cdef Buf b
    _buf_init(&b, 256)
    try:
        if not _send_ok_into(&b, opaque, serialize_type, msg_id, queue_id, queue_offset, region, trace_on,
                             transaction_id):
            return _send_ok_py(opaque, serialize_type, msg_id, queue_id, queue_offset, region, trace_on,
                               transaction_id)
        return PyBytes_FromStringAndSize(<char*>b.data, b.size)
    finally:
        free(b.data)


def encode_send_oks(list answers, list ids, list queue_offsets, region, trace_on):
    """`send_lane.encode_send_oks_over(encode_send_ok)`: the answers of the first `len(ids)`
    gathered requests, (opaque, serialize type, queue id, UNIQ_KEY) each, in one bytes."""
    cdef Buf b
    cdef Py_ssize_t k, n = len(ids)
    cdef tuple a
    cdef bytes frame
    if len(answers) < n or len(queue_offsets) < n:
        raise ValueError("encode_send_oks: fewer answers or queue offsets than ids")
    _buf_init(&b, 320 * n + 64)
    try:
        for k in range(n):
            a = <tuple>answers[k]
            if not _send_ok_into(&b, a[0], a[1], ids[k], a[2], queue_offsets[k], region, trace_on, a[3]):
                frame = _send_ok_py(a[0], a[1], ids[k], a[2], queue_offsets[k], region, trace_on, a[3])
                _buf_put(&b, PyBytes_AS_STRING(frame), PyBytes_GET_SIZE(frame))
        return PyBytes_FromStringAndSize(<char*>b.data, b.size)
    finally:
        free(b.data)


_send_ok_py = _send_response.send_ok_over(encode_command)


include "_wire_json_in.pxi"


# ============================================================================ binary header in


cdef object _take(const unsigned char* p, Py_ssize_t size, Py_ssize_t pos, long long length, str what, Py_ssize_t* end):
    """`command._take`: UTF-8 text of `length` bytes at `pos`, zero length as None."""
    if length < 0 or pos + length > size:
        raise ProtocolError(f"ROCKETMQ header {what} length {length} overruns the header")
    end[0] = pos + length
    if length == 0:
        return None
    try:
        return PyUnicode_DecodeUTF8(<const char*>p + pos, length, NULL)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"ROCKETMQ header {what} is not UTF-8") from exc


cdef object _binary_command(const unsigned char* p, Py_ssize_t size):
    """`command.decode_rocketmq_header`, line by line, its messages word for word."""
    cdef Py_ssize_t pos, end
    cdef long long ext_len, key_len, value_len
    cdef dict ext = {}
    if size < 21:
        raise ProtocolError(f"ROCKETMQ header too short: {size} bytes")
    code = _get16(p)
    language = _LANGUAGE_NAMES[(<signed char>p[2]) + 128]
    version = _get16(p + 3)
    opaque = _get32(p + 5)
    flag = _get32(p + 9)
    remark = _take(p, size, 17, _get32(p + 13), "remark", &pos)
    if pos + 4 > size:
        raise ProtocolError("ROCKETMQ header ends before its ext length")
    ext_len = _get32(p + pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != size:
        raise ProtocolError(f"ROCKETMQ header ext length {ext_len} does not match the header size")
    end = size
    while pos < end:
        if pos + 2 > end:
            raise ProtocolError("ROCKETMQ header ext entry torn")
        key_len = _get16(p + pos)
        key = _take(p, end, pos + 2, key_len, "ext key", &pos)
        if pos + 4 > end:
            raise ProtocolError("ROCKETMQ header ext entry torn")
        value_len = _get32(p + pos)
        value = _take(p, end, pos + 4, value_len, "ext value", &pos)
        if key is not None and value is not None:
            ext[key] = value
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, _ROCKETMQ)


def decode_rocketmq_header(data):
    """`command.decode_rocketmq_header`: the same command, or the same ProtocolError."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _binary_command(<const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


# ===================================================================================== frames in


def decode_frames(src, Py_ssize_t max_frame_length):
    """`frame_codec.decode_frames_over(...)`: every complete frame of `src` and the offset of the
    incomplete rest; a bad length raises through `check_prefix` itself (the same words)."""
    cdef const unsigned char* p
    cdef Py_ssize_t size, pos = 0, start, header_end, end
    cdef long long length, limit = max_frame_length - 4
    cdef unsigned int word, header_length, serialize_type
    cdef list commands = []
    if type(src) is not bytes:
        src = bytes(src)
    p = <const unsigned char*>PyBytes_AS_STRING(src)
    size = PyBytes_GET_SIZE(src)
    while size - pos >= 8:
        length = _get32(p + pos)
        word = _getu32(p + pos + 4)
        header_length = word & _HEADER_LENGTH_MASK
        if not 4 <= length <= limit or header_length > length - 4:
            check_prefix(src, pos, max_frame_length)  # raises, with the message for what is wrong
        end = pos + 4 + length
        if end > size:
            break
        start = pos + 8
        header_end = start + header_length
        serialize_type = word >> 24
        if serialize_type == 0:
            cmd = _json_command(p + start, header_length)
            if cmd is _NO:
                cmd = _py_decode_json(src[start:header_end])
        elif serialize_type == 1:
            cmd = _binary_command(p + start, header_length)
        else:
            raise ProtocolError(f"unknown serialize type {serialize_type}")
        if header_end < end:
            cmd.body = PyBytes_FromStringAndSize(<const char*>p + header_end, end - header_end)
        commands.append(cmd)
        pos = end
    if size - pos >= 4:
        length = _get32(p + pos)
        if not 4 <= length <= limit:
            check_prefix(src, pos, max_frame_length)
        if size - pos >= 8 and (_getu32(p + pos + 4) & _HEADER_LENGTH_MASK) > length - 4:
            check_prefix(src, pos, max_frame_length)
    return commands, pos
