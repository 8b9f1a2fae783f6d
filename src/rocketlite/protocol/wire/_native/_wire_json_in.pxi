# Included by _wire.pyx (one extension module): the JSON remoting header decoder.

# ===================================================================================== JSON in
include "_json_scan.pxi"  # strings, numbers, literals, keys; `_NO`


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


cdef object _json_command(const unsigned char* p, Py_ssize_t n):
    """The command of a header in the shape clients send, or `_NO`."""
    cdef Py_ssize_t i = 1, key_start, key_length
    cdef long long code = 0, opaque = 0, version = 0, flag = 0, number
    cdef bint has_code = False, has_opaque = False
    cdef object language = _DEFAULT_LANGUAGE
    cdef object remark = None
    cdef object ext = None
    cdef object text
    cdef unsigned char c
    if n < 2 or p[0] != 123:
        return _NO
    if p[1] == 125:
        return _NO  # no code: the Python codec says so
    while True:
        if i >= n or p[i] != 34:
            return _NO
        key_start = i + 1
        i = key_start
        while i < n and p[i] != 34:
            c = p[i]
            if c < 0x20 or c >= 0x7F or c == 92:
                return _NO
            i += 1
        if i + 1 >= n or p[i + 1] != 58:
            return _NO
        key_length = i - key_start
        i += 2
        if i >= n:
            return _NO
        c = p[i]
        if _key_is(p, key_start, key_length, b"extFields", 9):
            ext = _json_ext(p, n, &i)
            if ext is _NO:
                return _NO
        elif c == 34:
            if _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                text = _json_string(p, n, &i)
                if text is _NO:
                    return _NO
                if key_length == 8:
                    language = text
                else:
                    remark = text
            elif _key_is(p, key_start, key_length, b"code", 4) or _key_is(p, key_start, key_length, b"opaque", 6) \
                    or _key_is(p, key_start, key_length, b"version", 7) or _key_is(p, key_start, key_length, b"flag", 4):
                return _NO  # a number as text: Python's rules
            elif not _json_skip_string(p, n, &i):
                return _NO
        elif c == 45 or 48 <= c <= 57:
            if not _json_int(p, n, &i, &number):
                return _NO
            if _key_is(p, key_start, key_length, b"code", 4):
                code = number
                has_code = True
            elif _key_is(p, key_start, key_length, b"opaque", 6):
                opaque = number
                has_opaque = True
            elif _key_is(p, key_start, key_length, b"version", 7):
                version = number
            elif _key_is(p, key_start, key_length, b"flag", 4):
                flag = number
            elif _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
                return _NO  # a language ordinal, a numeric remark: Python's rules
        elif _key_is(p, key_start, key_length, b"remark", 6) and _json_literal(p, n, &i, b"null", 4):
            remark = None
        elif _key_is(p, key_start, key_length, b"code", 4) or _key_is(p, key_start, key_length, b"opaque", 6) \
                or _key_is(p, key_start, key_length, b"version", 7) or _key_is(p, key_start, key_length, b"flag", 4) \
                or _key_is(p, key_start, key_length, b"language", 8) or _key_is(p, key_start, key_length, b"remark", 6):
            return _NO
        elif not (_json_literal(p, n, &i, b"true", 4) or _json_literal(p, n, &i, b"false", 5)
                  or _json_literal(p, n, &i, b"null", 4)):
            return _NO
        if i >= n:
            return _NO
        if p[i] == 44:
            i += 1
            continue
        if p[i] == 125 and i + 1 == n:
            break
        return _NO
    if not (has_code and has_opaque):
        return _NO
    return RemotingCommand(
        PyLong_FromLongLong(code), language, PyLong_FromLongLong(version), PyLong_FromLongLong(opaque),
        PyLong_FromLongLong(flag), remark, {} if ext is None else ext,
    )


def decode_json_header(data):
    """`json_header.decode_json_header`: the same command, or the same ProtocolError."""
    cdef Py_buffer view
    cdef object cmd
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        cmd = _json_command(<const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    if cmd is _NO:
        return _py_decode_json(data)
    return cmd
