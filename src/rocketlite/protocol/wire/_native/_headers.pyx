# cython: language_level=3
"""The compiled request-header decoders of the hottest requests: SEND_MESSAGE_V2 /
SEND_BATCH_MESSAGE (letters a..n) and PULL_MESSAGE (camelCase names).

`custom_header`'s generated decoders are the references (`protocol.wire.speedups.REFERENCE`);
each fill here takes the canonical shape every client sends (a dict of str, numbers as plain
ASCII digits or "-1", booleans "true"/"false"/"1"/"0") and hands anything else to the reference,
which raises the error it defines (the first missing or bad field in declaration order) or gives
the same header. The headers are filled slot by slot, skipping their Python `__init__` (plain
dataclasses with exactly these fields: checked at import). `tests/protocol/test_native_send_header.py`
and `test_native_pull_header.py` pin them to the references.
"""

from libc.stdint cimport int64_t, uint32_t

import dataclasses

cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1

__all__ = ["decode_pull_header", "decode_send_header_v2"]


# -- SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header (letters a..n) -------------------------------------
# `custom_header`'s generated decoder for `SendMessageRequestHeader.V2_NAMES` is the reference; this
# fill takes the canonical shape every client sends (a dict of str, numbers as plain ASCII digits
# or "-1", booleans "true"/"false"/"1"/"0") and hands anything else to it, which raises the error
# it defines or gives the same header.
from rocketlite.protocol.wire.custom_header import decoder_for as _decoder_for
from rocketlite.protocol.wire.headers import SendMessageRequestHeader as _SendHeader

cdef object _send_v2_py = _decoder_for(_SendHeader, _SendHeader.V2_NAMES)
_SEND_SCHEMA = (
    ("producer_group", "string", True), ("topic", "string", True), ("default_topic", "string", True),
    ("default_topic_queue_nums", "int", True), ("queue_id", "int", True), ("sys_flag", "int", True),
    ("born_timestamp", "long", True), ("flag", "int", True), ("properties", "string", False),
    ("reconsume_times", "int", False), ("unit_mode", "boolean", False),
    ("max_reconsume_times", "int", False), ("batch", "boolean", False), ("bname", "string", False),
)
if tuple((f.attr, f.kind.value, f.required) for f in _SendHeader.field_specs()) != _SEND_SCHEMA or tuple(
    _SendHeader.V2_NAMES[f[0]] for f in _SEND_SCHEMA
) != tuple("abcdefghijklmn") or [
    (f.default if f.default is not dataclasses.MISSING else "required") for f in dataclasses.fields(_SendHeader)
] != ["required"] * 8 + [None, None, False, None, False, None] or hasattr(_SendHeader, "__post_init__"):
    raise ImportError("SendMessageRequestHeader changed: update protocol/wire/_native/_headers.pyx")
cdef tuple _SEND_ATTRS = tuple(f[0] for f in _SEND_SCHEMA)
cdef object _new_send = _SendHeader.__new__


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    uint32_t PyUnicode_READ_CHAR(object o, Py_ssize_t i)
    bint PyUnicode_CheckExact(object o)
    bint PyDict_CheckExact(object o)


cdef int _number(object text, Py_ssize_t max_digits, int64_t* out) except -1:
    """1 and the value for plain ASCII digits (at most `max_digits`) or "-1"; 0 for anything else."""
    cdef Py_ssize_t n, i
    cdef uint32_t c
    cdef int64_t v = 0
    if not PyUnicode_CheckExact(text):
        return 0
    n = PyUnicode_GET_LENGTH(text)
    if n == 2 and PyUnicode_READ_CHAR(text, 0) == 45 and PyUnicode_READ_CHAR(text, 1) == 49:  # "-1"
        out[0] = -1
        return 1
    if n < 1 or n > max_digits:
        return 0
    for i in range(n):
        c = PyUnicode_READ_CHAR(text, i)
        if c < 48 or c > 57:
            return 0
        v = v * 10 + (c - 48)
    out[0] = v
    return 1


cdef int _flag(object text, bint* out) except -1:
    """1 and the value for "true", "false", "1", "0"; 0 for anything else."""
    if not PyUnicode_CheckExact(text):
        return 0
    if text == "true" or text == "1":
        out[0] = True
        return 1
    if text == "false" or text == "0":
        out[0] = False
        return 1
    return 0


def decode_send_header_v2(ext):
    """The reference's `SendMessageRequestHeader` from the letter-keyed ext fields of a V2 send."""
    cdef int64_t num[7]
    cdef bint unit_mode = False, batch = False
    cdef int i
    cdef tuple ints = (("d", 9), ("e", 9), ("f", 9), ("g", 18), ("h", 9))
    if not PyDict_CheckExact(ext):
        return _send_v2_py(ext)
    d = <dict>ext
    a = d.get("a")
    b = d.get("b")
    c = d.get("c")
    if not (PyUnicode_CheckExact(a) and PyUnicode_CheckExact(b) and PyUnicode_CheckExact(c)):
        return _send_v2_py(ext)
    for i in range(5):
        if not _number(d.get(ints[i][0]), ints[i][1], &num[i]):
            return _send_v2_py(ext)
    props = d.get("i")
    if props is not None and not PyUnicode_CheckExact(props):
        return _send_v2_py(ext)
    j = d.get("j")
    if j is None or j == "":
        reconsume = None
    elif _number(j, 9, &num[5]):
        reconsume = num[5]
    else:
        return _send_v2_py(ext)
    k = d.get("k")
    if not (k is None or k == "" or _flag(k, &unit_mode)):
        return _send_v2_py(ext)
    l = d.get("l")
    if l is None or l == "":
        max_reconsume = None
    elif _number(l, 9, &num[6]):
        max_reconsume = num[6]
    else:
        return _send_v2_py(ext)
    m = d.get("m")
    if not (m is None or m == "" or _flag(m, &batch)):
        return _send_v2_py(ext)
    bname = d.get("n")
    if bname is not None and not PyUnicode_CheckExact(bname):
        return _send_v2_py(ext)
    h = _new_send(_SendHeader)
    values = (
        a, b, c, num[0], num[1], num[2], num[3], num[4], props, reconsume, unit_mode, max_reconsume, batch,
        bname,
    )
    for i in range(14):
        PyObject_GenericSetAttr(h, _SEND_ATTRS[i], values[i])
    return h


# -- PULL_MESSAGE header (camelCase names) ---------------------------------------------------------
# `custom_header`'s generated decoder for `PullMessageRequestHeader` is the reference; this fill
# takes the canonical shape every client sends (a dict of str, numbers as plain ASCII digits or
# "-1") and hands anything else to it, which raises the error it defines (the first missing or bad
# field in declaration order) or gives the same header.
from rocketlite.protocol.wire.headers import PullMessageRequestHeader as _PullHeader

cdef object _pull_py = _decoder_for(_PullHeader, None)
_PULL_SCHEMA = (
    ("consumer_group", "consumerGroup", "string", True), ("topic", "topic", "string", True),
    ("queue_id", "queueId", "int", True), ("queue_offset", "queueOffset", "long", True),
    ("max_msg_nums", "maxMsgNums", "int", True), ("sys_flag", "sysFlag", "int", True),
    ("commit_offset", "commitOffset", "long", True),
    ("suspend_timeout_millis", "suspendTimeoutMillis", "long", True),
    ("subscription", "subscription", "string", False), ("sub_version", "subVersion", "long", True),
    ("expression_type", "expressionType", "string", False), ("bname", "bname", "string", False),
)
if tuple((f.attr, f.wire, f.kind.value, f.required) for f in _PullHeader.field_specs()) != _PULL_SCHEMA or [
    (f.default if f.default is not dataclasses.MISSING else "required") for f in dataclasses.fields(_PullHeader)
] != ["required"] * 8 + [None, "required", None, None] or hasattr(_PullHeader, "__post_init__"):
    raise ImportError("PullMessageRequestHeader changed: update protocol/wire/_native/_headers.pyx")
cdef tuple _PULL_ATTRS = tuple(f[0] for f in _PULL_SCHEMA)
cdef object _new_pull = _PullHeader.__new__


def decode_pull_header(ext):
    """The reference's `PullMessageRequestHeader` from the ext fields of a PULL_MESSAGE."""
    cdef int64_t num[7]
    cdef int i
    # (wire name, most digits) of the numbers, in declaration order; INT fields 9, LONG fields 18
    cdef tuple ints = (
        ("queueId", 9), ("queueOffset", 18), ("maxMsgNums", 9), ("sysFlag", 9), ("commitOffset", 18),
        ("suspendTimeoutMillis", 18), ("subVersion", 18),
    )
    if not PyDict_CheckExact(ext):
        return _pull_py(ext)
    d = <dict>ext
    group = d.get("consumerGroup")
    topic = d.get("topic")
    if not (PyUnicode_CheckExact(group) and PyUnicode_CheckExact(topic)):
        return _pull_py(ext)
    for i in range(7):
        if not _number(d.get(ints[i][0]), ints[i][1], &num[i]):
            return _pull_py(ext)
    sub = d.get("subscription")
    expr = d.get("expressionType")
    bname = d.get("bname")
    if not ((sub is None or PyUnicode_CheckExact(sub)) and (expr is None or PyUnicode_CheckExact(expr))
            and (bname is None or PyUnicode_CheckExact(bname))):
        return _pull_py(ext)
    h = _new_pull(_PullHeader)
    values = (group, topic, num[0], num[1], num[2], num[3], num[4], num[5], sub, num[6], expr, bname)
    for i in range(12):
        PyObject_GenericSetAttr(h, _PULL_ATTRS[i], values[i])
    return h
