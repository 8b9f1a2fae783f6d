# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of `send_lane.gather_sends_over(...)`.

`gather_sends` reads each request's letter-keyed header straight from its ext dict (no header
object): the strings as they are, the numbers only in the spellings every client writes (1 to 9
ASCII digits for an int, 1 to 18 for a long, or "-1"; booleans "true", "false", "1", "0";
an empty optional number or boolean as absent), which the reference decoder reads as the same
values. A header spelled otherwise ends the run here, and the handler reads it with the
reference decoder: the run is shorter, what is stored and answered is the same. The per-topic
checks read `facts`, the lane's cache keyed by topic and checked by identity against `table`
(a `TopicConfig` is frozen: a changed topic is a new object); an entry also holds the topic's
consume-queue keys (`f"{topic}-{queue id}"`, for up to `_KEYS_MAX` queues), so a request's key
is looked up, not formatted. (`encode_send_oks`, the answers in one
buffer, is in `_wire.pyx`, beside `encode_send_ok`.)
"""

from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Contains

from rocketlite.protocol import reserved
from rocketlite.protocol.codes import CommandFlag, RequestCode, SerializeType
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.perm import PERM_WRITE

cdef extern from "Python.h":
    object PyUnicode_FromFormat(const char* fmt, ...)
    bint PyUnicode_IS_ASCII(object text)
    const char* PyUnicode_DATA(object text)

include "_text.pxi"  # the UTF-8 form of a str

cdef long _V2 = int(RequestCode.SEND_MESSAGE_V2)
cdef long _NOT_ANSWERED = int(CommandFlag.RESPONSE) | int(CommandFlag.ONEWAY)
cdef long _TRANSACTION_MASK = int(MessageSysFlag.TRANSACTION_MASK)
cdef long _MULTI_TAGS_FLAG = int(MessageSysFlag.MULTI_TAGS_FLAG)
cdef long _PERM_WRITE = PERM_WRITE
cdef str _RETRY_PREFIX = reserved.RETRY_GROUP_TOPIC_PREFIX
cdef str _DELAY_NEEDLE = "DELAY\x01"
cdef str _TIMER_NEEDLE = "TIMER_"
cdef str _S_NEEDLE = "__S"
cdef str _MULTI_TAG = "MULTI_TAG"
cdef Py_ssize_t _FACTS_MAX = 4096  # topics cached; beyond, the cache starts over
cdef Py_ssize_t _KEYS_MAX = 256  # a topic's consume-queue keys kept up to this many queues

# the letters of SendMessageRequestHeaderV2 (`SendMessageRequestHeader.V2_NAMES`)
cdef str _A = "a", _B = "b", _C = "c", _D = "d", _E = "e", _F = "f", _G = "g", _H = "h"
cdef str _I = "i", _J = "j", _K = "k", _L = "l", _M = "m"


cdef enum:
    _BAD = 0  # not in a spelling taken here (the run ends)
    _OK = 1
    _ABSENT = 2  # an optional field missing or empty


cdef int _number(object text, int digits, long long* out):
    """`text` as a number in a client's spelling: 1..`digits` ASCII digits, or "-1"."""
    cdef Py_ssize_t n, i
    cdef const char* s
    cdef long long v = 0
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return _BAD
    s = PyUnicode_DATA(text)  # an ASCII str's characters, one byte each
    n = len(<str>text)
    if n == 0 or n > digits:
        return _BAD
    if n == 2 and s[0] == 45 and s[1] == 49:  # "-1"
        out[0] = -1
        return _OK
    for i in range(n):
        if not 48 <= s[i] <= 57:
            return _BAD
        v = v * 10 + (s[i] - 48)
    out[0] = v
    return _OK


cdef int _field_number(dict ext, str key, int digits, bint required, long long* out):
    cdef PyObject* p = PyDict_GetItem(ext, key)
    if p == NULL:
        return _BAD if required else _ABSENT
    if not required and type(<object>p) is str and len(<str>p) == 0:
        return _ABSENT
    return _number(<object>p, digits, out)


cdef int _field_bool(dict ext, str key, bint* out):
    cdef PyObject* p = PyDict_GetItem(ext, key)
    cdef object text
    if p == NULL:
        out[0] = False
        return _OK
    text = <object>p
    if type(text) is not str:
        return _BAD
    if text == "true" or text == "1":
        out[0] = True
    elif text == "false" or text == "0" or len(<str>text) == 0:
        out[0] = False
    else:
        return _BAD
    return _OK


cdef tuple _facts_of(dict table, dict facts, str topic):
    """The cached facts of `topic`, refreshed when `table` holds another config for it; None when
    the topic has no config."""
    cdef PyObject* tc = PyDict_GetItem(table, topic)
    cdef PyObject* hit
    cdef tuple f
    if tc == NULL:
        return None
    hit = PyDict_GetItem(facts, topic)
    if hit != NULL and (<tuple>hit)[0] is <object>tc:
        return <tuple>hit
    config = <object>tc
    wq = int(config.write_queue_nums)
    rq = int(config.read_queue_nums)
    queues = max(wq, rq)  # every queue id the checks let through is below this
    f = (
        config,
        bool(config.perm & _PERM_WRITE) and not topic.startswith(_RETRY_PREFIX),
        wq,
        rq,
        config.topic_filter_type == _MULTI_TAG,
        tuple([f"{topic}-{q}" for q in range(queues)]) if queues <= _KEYS_MAX else None,
    )
    if len(facts) >= _FACTS_MAX:
        facts.clear()
    PyDict_SetItem(facts, topic, f)
    return f


def gather_sends(list commands, Py_ssize_t start, dict table, set legal, dict facts, str cluster,
                 Py_ssize_t head, Py_ssize_t max_size, Py_ssize_t max_props, rng, send_properties):
    """`send_lane.gather_sends_over(...)`: the same (entries, sizes, keys, answers, runs), or a
    shorter run (see the module's docstring)."""
    cdef list entries = [], sizes = [], keys = [], answers = [], runs = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(commands), props_len, body_len, size, topic_len
    cdef long long queue_id, sys_flag, born, flag, reconsume, dummy
    cdef long long wq, rq
    cdef bint batch, unit_mode
    cdef object req, ext, topic, raw, body, properties, uniq_key, delay
    cdef PyObject* p
    cdef tuple f
    cdef str last_topic = None
    cdef Py_ssize_t run_count = 0
    for i in range(start, n):
        req = <object>PyList_GET_ITEM(commands, i)
        code = req.code
        flag_word = req.flag
        if type(code) is not int or code != _V2 or type(flag_word) is not int or flag_word & _NOT_ANSWERED:
            break
        ext = req.ext_fields
        if type(ext) is not dict:
            break
        # the header: a, b, c strings; d..h numbers (required); i string; j, l numbers; k, m booleans
        p = PyDict_GetItem(<dict>ext, _A)
        if p == NULL or type(<object>p) is not str:
            break
        p = PyDict_GetItem(<dict>ext, _C)
        if p == NULL or type(<object>p) is not str:
            break
        p = PyDict_GetItem(<dict>ext, _B)
        if p == NULL or type(<object>p) is not str:
            break
        topic = <object>p
        if (_field_number(<dict>ext, _D, 9, True, &dummy) != _OK
                or _field_number(<dict>ext, _E, 9, True, &queue_id) != _OK
                or _field_number(<dict>ext, _F, 9, True, &sys_flag) != _OK
                or _field_number(<dict>ext, _G, 18, True, &born) != _OK
                or _field_number(<dict>ext, _H, 9, True, &flag) != _OK):
            break
        reconsume = 0
        if _field_number(<dict>ext, _J, 9, False, &reconsume) == _BAD:
            break
        if _field_number(<dict>ext, _L, 9, False, &dummy) == _BAD:
            break
        if _field_bool(<dict>ext, _K, &unit_mode) != _OK or _field_bool(<dict>ext, _M, &batch) != _OK:
            break
        p = PyDict_GetItem(<dict>ext, _I)
        if p == NULL:
            raw = ""
        elif type(<object>p) is not str:
            break
        else:
            raw = <object>p
        # the checks
        if batch or topic not in legal or sys_flag & _TRANSACTION_MASK:
            break
        f = _facts_of(table, facts, topic)
        if f is None or not f[1]:
            break
        wq = f[2]
        rq = f[3]
        if queue_id >= wq and queue_id >= rq:
            break
        if PyUnicode_Contains(raw, _DELAY_NEEDLE) or PyUnicode_Contains(raw, _TIMER_NEEDLE):
            break
        properties, _tags, uniq_key, _keys, delay = send_properties(raw, cluster)
        if (delay is not None or PyUnicode_Contains(properties, _DELAY_NEEDLE)
                or PyUnicode_Contains(properties, _TIMER_NEEDLE) or PyUnicode_Contains(properties, _S_NEEDLE)):
            break
        if _utf8_or_null(properties, &props_len) == NULL or _utf8_or_null(topic, &topic_len) == NULL:
            break
        body = req.body
        if body is None:
            body = b""
        elif type(body) is not bytes:
            break
        body_len = PyBytes_GET_SIZE(body)
        if not body_len:
            body = b""
        size = head + body_len + topic_len + props_len  # a legal topic name is ASCII
        if props_len > max_props or size > max_size:
            break
        # taken: from here on nothing refuses it
        if queue_id < 0:
            queue_id = rng.randrange(max(wq, 1))
        if f[4]:
            sys_flag |= _MULTI_TAGS_FLAG
        entries.append((topic, body, properties, queue_id, flag, sys_flag, born, reconsume))
        sizes.append(size)
        if f[5] is not None and queue_id < len(<tuple>f[5]):
            keys.append((<tuple>f[5])[queue_id])
        else:
            keys.append(PyUnicode_FromFormat("%U-%lld", <PyObject*>topic, queue_id))
        answers.append((req.opaque, req.serialize_type, queue_id, uniq_key))
        if last_topic is not None and last_topic == topic:
            run_count += 1
        else:
            if last_topic is not None:
                runs.append((last_topic, run_count))
            last_topic = topic
            run_count = 1
    if last_topic is not None:
        runs.append((last_topic, run_count))
    return entries, sizes, keys, answers, runs
