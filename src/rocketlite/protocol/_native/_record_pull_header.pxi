# The PULL_MESSAGE request header fill of `_record.pyx` (included there after
# `_record_send_header.pxi`, whose `_number` and Python.h declarations it shares; a .pxi keeps that
# module under 600 lines).

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
    raise ImportError("PullMessageRequestHeader changed: update protocol/_native/_record_pull_header.pxi")
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
