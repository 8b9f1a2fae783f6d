# Included by _wire.pyx (one extension module): the JSON remoting header decoder.

# ===================================================================================== JSON in
include "_json_scan.pxi"  # `_json_head`: the header's top level; strings, numbers; `_NO`


cdef _Head _HEAD = _Head()  # one for every call: a decode runs to its end with the GIL held


cdef object _json_command(const unsigned char* p, Py_ssize_t n):
    """The command of a header in the shape clients send, or `_NO`."""
    cdef _Head h = _HEAD
    if not _json_head(p, n, h):
        return _NO
    return RemotingCommand(
        PyLong_FromLongLong(h.code), h.language, PyLong_FromLongLong(h.version), PyLong_FromLongLong(h.opaque),
        PyLong_FromLongLong(h.flag), h.remark, {} if h.ext is None else h.ext,
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
