# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The send path's compiled twin of a producer's properties rewrite.

`send_properties` is `protocol.message.send_properties`, giving the same results
(`tests/protocol/test_native_send.py` pins them). (A batch body is handled by `_record.pyx`'s
`encode_batch_records`, `_record_batch.pxi`.) Both work on the UTF-8 bytes: the separators
\\x01 and \\x02 are ASCII, so they never occur inside a multi-byte sequence, and two keys are the
same string exactly when their UTF-8 bytes are equal. A properties string is parsed into a small
array of (key, value) pointer pairs, with the map semantics of the reference (a repeated key
keeps its first place and takes the last value), and written back once (`_props.pxi`, shared
with the batch path of `_record.pyx`).

Where the byte view does not hold, the reference runs instead, so the results cannot differ: a
string that has no UTF-8 form (lone surrogates), or more properties than the small array holds
(the linear key search would then grow quadratically; the reference's dict does not).
"""

from libc.stdint cimport int32_t, uint32_t
from libc.stdlib cimport free, malloc

from rocketlite.protocol import message as _message


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)


include "_text.pxi"  # the UTF-8 form of a str, Java's String.hashCode
include "_props.pxi"  # the properties array


cdef str _to_str(_Prop* props, Py_ssize_t count):
    cdef Py_ssize_t size = _props_size(props, count)
    cdef char* buf = <char*>malloc(size + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        return PyUnicode_DecodeUTF8(buf, _props_write(props, count, buf), NULL)
    finally:
        free(buf)


cdef object _value(_Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl):
    cdef Py_ssize_t i = _props_find(props, count, k, kl)
    if i < 0:
        return None
    return PyUnicode_DecodeUTF8(props[i].v, props[i].vl, NULL)


def send_properties(str text, str cluster):
    """`protocol.message.send_properties`: (properties to store, tags code, UNIQ_KEY, KEYS, DELAY)."""
    cdef Py_ssize_t n, cn, count, i
    cdef _Prop props[_PROPS_CAP + 1]
    cdef const char* s = _utf8_or_null(text, &n)
    cdef const char* c = _utf8_or_null(cluster, &cn)
    if s == NULL or c == NULL:
        return _message.send_properties(text, cluster)
    count = _props_parse(s, n, props, _PROPS_CAP)
    if count < 0:
        return _message.send_properties(text, cluster)
    _props_drop(props, count, b"WAIT", 4)
    count = _props_put(props, count, b"CLUSTER", 7, c, cn)
    i = _props_find(props, count, b"TAGS", 4)
    code = <int32_t>_java_hash_utf8(0, props[i].v, props[i].vl) if i >= 0 else 0
    return (
        _to_str(props, count),
        code,
        _value(props, count, b"UNIQ_KEY", 8),
        _value(props, count, b"KEYS", 4),
        _value(props, count, b"DELAY", 5),
    )
