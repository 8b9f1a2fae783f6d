# Included by _wire.pyx and _send_lane.pyx: the JSON header reader both read headers with (the
# includer defines `_DEFAULT_LANGUAGE`).
#
# A strict-JSON reader for the header shape clients send. Every function returns NULL-like
# failure (`_NO`) for anything it does not take; the caller then gives the whole header to the
# Python codec (or the handler), which decides exactly as the reference does.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp, memcpy

cdef object _NO = object()

# Short header texts recur in every request of a client (group, topic, "TBW102", queue numbers,
# "false", "JAVA"): the last text decoded for each of `_TEXT_SLOTS` hash slots is kept, and the
# same bytes give the same (immutable) str again instead of a new one. Touched with the GIL held.
cdef enum:
    _TEXT_SLOTS = 256
    _TEXT_MAX = 32

cdef struct _Text:
    Py_ssize_t n
    PyObject* text  # an owned reference; NULL for an empty slot
    unsigned char data[_TEXT_MAX]

cdef _Text _texts[_TEXT_SLOTS]


cdef object _short_text(const unsigned char* s, Py_ssize_t n):
    """`s[:n]` (n <= _TEXT_MAX, no escapes) decoded from UTF-8, from the cache when it is there;
    a UnicodeDecodeError as PyUnicode_DecodeUTF8 raises it."""
    cdef uint32_t h = 2166136261u ^ <uint32_t>n
    cdef Py_ssize_t i
    cdef _Text* slot
    cdef object text
    for i in range(n):
        h = (h ^ s[i]) * 16777619u
    slot = &_texts[(h ^ (h >> 16)) & (_TEXT_SLOTS - 1)]
    if slot.text != NULL and slot.n == n and memcmp(slot.data, s, n) == 0:
        return <object>slot.text
    text = PyUnicode_DecodeUTF8(<const char*>s, n, NULL)
    Py_XDECREF(slot.text)
    Py_INCREF(text)
    slot.text = <PyObject*>text
    slot.n = n
    memcpy(slot.data, s, n)
    return text


cdef inline int _hex4(const unsigned char* p, Py_ssize_t n):
    """The value of four hex digits at `p` (`n` bytes there at most), or -1."""
    cdef int v = 0, i, c
    if n < 4:
        return -1
    for i in range(4):
        c = p[i]
        if 48 <= c <= 57:
            v = v * 16 + c - 48
        elif 65 <= c <= 70:
            v = v * 16 + c - 55
        elif 97 <= c <= 102:
            v = v * 16 + c - 87
        else:
            return -1
    return v


cdef object _json_string(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos):
    """The string starting at p[pos[0]] == '"', decoded, pos moved past it; `_NO` for what the
    reader leaves to Python (`\\u` escapes, bad escapes, raw controls, bad UTF-8, no end)."""
    cdef Py_ssize_t i = pos[0] + 1, start = i, j = 0
    cdef int code
    cdef bint escaped = False
    cdef unsigned char c
    cdef unsigned char* tmp
    cdef unsigned char local[512]  # an escaped text's bytes when they fit: no malloc for them
    while i < n:
        c = p[i]
        if c == 34:
            break
        if c == 92:
            escaped = True
            i += 2
            continue
        if c < 0x20:
            return _NO
        i += 1
    if i >= n:
        return _NO
    pos[0] = i + 1
    try:
        if not escaped:
            if i - start <= _TEXT_MAX:
                return _short_text(p + start, i - start)
            return PyUnicode_DecodeUTF8(<const char*>p + start, i - start, NULL)
        tmp = &local[0] if i - start <= 512 else <unsigned char*>malloc(i - start)
        if tmp == NULL:
            raise MemoryError()
        try:
            while start < i:
                c = p[start]
                if c == 92:
                    c = p[start + 1]
                    start += 2
                    if c == 34 or c == 92 or c == 47:
                        pass
                    elif c == 98:
                        c = 8
                    elif c == 102:
                        c = 12
                    elif c == 110:
                        c = 10
                    elif c == 114:
                        c = 13
                    elif c == 116:
                        c = 9
                    elif c == 117:
                        code = _hex4(p + start, i - start)
                        if code < 0 or 0xD800 <= code <= 0xDFFF:
                            return _NO  # not four hex digits, or a surrogate: Python's rules
                        start += 4
                        if code < 0x80:
                            c = code
                        elif code < 0x800:
                            tmp[j] = 0xC0 | (code >> 6)
                            c = 0x80 | (code & 0x3F)
                            j += 1
                        else:
                            tmp[j] = 0xE0 | (code >> 12)
                            tmp[j + 1] = 0x80 | ((code >> 6) & 0x3F)
                            c = 0x80 | (code & 0x3F)
                            j += 2
                    else:
                        return _NO
                else:
                    start += 1
                tmp[j] = c
                j += 1
            return PyUnicode_DecodeUTF8(<const char*>tmp, j, NULL)
        finally:
            if tmp != &local[0]:
                free(tmp)
    except UnicodeDecodeError:
        return _NO


cdef bint _json_skip_string(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos):
    """Move past a string that is not kept: plain ASCII without escapes only (nothing to check)."""
    cdef Py_ssize_t i = pos[0] + 1
    cdef unsigned char c
    while i < n:
        c = p[i]
        if c == 34:
            pos[0] = i + 1
            return True
        if c < 0x20 or c >= 0x7F or c == 92:
            return False
        i += 1
    return False


cdef bint _json_int(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, long long* out):
    """A JSON integer (no fraction or exponent, at most 18 digits) at p[pos[0]]."""
    cdef Py_ssize_t i = pos[0], digits = 0
    cdef bint negative = False
    cdef long long v = 0
    if i < n and p[i] == 45:
        negative = True
        i += 1
    if i >= n or not 48 <= p[i] <= 57:
        return False
    if p[i] == 48 and i + 1 < n and 48 <= p[i + 1] <= 57:
        return False  # a leading zero: not JSON
    while i < n and 48 <= p[i] <= 57:
        v = v * 10 + (p[i] - 48)
        digits += 1
        i += 1
    if digits > 18 or (i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69)):
        return False
    pos[0] = i
    out[0] = -v if negative else v
    return True


cdef inline bint _json_literal(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, const char* word, Py_ssize_t k):
    cdef Py_ssize_t i
    if pos[0] + k > n:
        return False
    for i in range(k):
        if p[pos[0] + i] != <unsigned char>word[i]:
            return False
    pos[0] += k
    return True


cdef inline bint _key_is(const unsigned char* p, Py_ssize_t start, Py_ssize_t length, const char* name, Py_ssize_t k):
    cdef Py_ssize_t i
    if length != k:
        return False
    for i in range(k):
        if p[start + i] != <unsigned char>name[i]:
            return False
    return True


cdef object _json_ext(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos):
    """`{"k":"v",...}` with string values as a dict (null as None); `_NO` for anything else."""
    cdef dict ext = {}
    cdef Py_ssize_t i = pos[0]
    if _json_literal(p, n, &i, b"null", 4):
        pos[0] = i
        return None
    if i >= n or p[i] != 123:
        return _NO
    i += 1
    if i < n and p[i] == 125:
        pos[0] = i + 1
        return ext
    while True:
        if i >= n or p[i] != 34:
            return _NO
        key = _json_string(p, n, &i)
        if key is _NO or i >= n or p[i] != 58:
            return _NO
        i += 1
        if i >= n or p[i] != 34:
            return _NO
        value = _json_string(p, n, &i)
        if value is _NO:
            return _NO
        ext[key] = value
        if i < n and p[i] == 44:
            i += 1
            continue
        if i < n and p[i] == 125:
            pos[0] = i + 1
            return ext
        return _NO


cdef bint _letter(const unsigned char* p, Py_ssize_t start, Py_ssize_t length, int* slot):
    """Whether the key `p[start:start+length]` is one of the letters a..m (its index in `slot`)."""
    if length == 1 and 97 <= p[start] <= 109:
        slot[0] = p[start] - 97
        return True
    return False


cdef bint _slot_of(const unsigned char* p, Py_ssize_t start, Py_ssize_t length, tuple names, int* slot):
    """Whether the key `p[start:start+length]` is one that is kept: a letter a..m when `names` is
    None, else one of `names` (ASCII bytes, at most 13), its index in `slot`."""
    cdef Py_ssize_t k
    cdef bytes name
    if names is None:
        return _letter(p, start, length, slot)
    for k in range(len(names)):
        name = <bytes>names[k]
        if PyBytes_GET_SIZE(name) == length and memcmp(PyBytes_AS_STRING(name), p + start, length) == 0:
            slot[0] = <int>k
            return True
    return False


cdef bint _json_letters(const unsigned char* p, Py_ssize_t n, Py_ssize_t* pos, list slots, tuple names):
    """`{"k":"v",...}` at p[pos[0]]: the values of the keys kept (`_slot_of`: the letters a..m,
    or `names`) into `slots` (the last one of a key wins, as in a dict; other keys are read and
    dropped); False for anything else."""
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
        if _slot_of(p, key_start, key_length, names, &slot):
            slots[slot] = value
        if i < n and p[i] == 44:
            i += 1
            continue
        if i < n and p[i] == 125:
            pos[0] = i + 1
            return True
        return False


cdef class _Head:
    """What `_json_head` read of a header's top level: the command's fields, and its ext fields
    as a dict (`ext`), or, when `slots` is a list, only the values of the keys kept in it (the
    letters a..m, or `names` when it is a tuple: `_slot_of`)."""
    cdef long long code, opaque, version, flag
    cdef bint has_code, has_opaque
    cdef object language, remark, ext
    cdef list slots
    cdef tuple names


cdef bint _json_head(const unsigned char* p, Py_ssize_t n, _Head h):
    """A JSON header in the shape clients send into `h` (False for anything else: the caller
    hands it to the Python codec, or to the handler, which decides as the reference does)."""
    cdef Py_ssize_t i = 1, key_start, key_length
    cdef long long number
    cdef object text
    cdef unsigned char c
    h.code = h.opaque = h.version = h.flag = 0
    h.has_code = h.has_opaque = False
    h.language = _DEFAULT_LANGUAGE
    h.remark = None
    h.ext = None
    if h.slots is not None:
        for key_length in range(13):
            h.slots[key_length] = None
    if n < 2 or p[0] != 123:
        return False
    if p[1] == 125:
        return False  # no code: the Python codec says so
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
            if h.slots is not None:
                if not _json_letters(p, n, &i, h.slots, h.names):
                    return False
            else:
                h.ext = _json_ext(p, n, &i)
                if h.ext is _NO:
                    return False
        elif c == 34:
            if _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                text = _json_string(p, n, &i)
                if text is _NO:
                    return False
                if key_length == 8:
                    h.language = text
                else:
                    h.remark = text
            elif _key_is(p, key_start, key_length, b"code", 4) or _key_is(p, key_start, key_length, b"opaque", 6) \
                    or _key_is(p, key_start, key_length, b"version", 7) or _key_is(p, key_start, key_length, b"flag", 4):
                return False  # a number as text: Python's rules
            elif not _json_skip_string(p, n, &i):
                return False
        elif c == 45 or 48 <= c <= 57:
            if not _json_int(p, n, &i, &number):
                return False
            if _key_is(p, key_start, key_length, b"code", 4):
                h.code = number
                h.has_code = True
            elif _key_is(p, key_start, key_length, b"opaque", 6):
                h.opaque = number
                h.has_opaque = True
            elif _key_is(p, key_start, key_length, b"version", 7):
                h.version = number
            elif _key_is(p, key_start, key_length, b"flag", 4):
                h.flag = number
            elif _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                return False  # a language ordinal, a numeric remark: Python's rules
        elif _key_is(p, key_start, key_length, b"remark", 6) and _json_literal(p, n, &i, b"null", 4):
            h.remark = None
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
    return h.has_code and h.has_opaque
