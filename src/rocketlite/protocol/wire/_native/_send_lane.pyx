# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of `send_lane.gather_sends_over(...)`.

`gather_sends` reads each request's letter-keyed header straight from its ext dict (no header
object): the strings as they are, the numbers only in the spellings every client writes (1 to 9
ASCII digits for an int, 1 to 18 for a long, after any leading zeros, or "-1"; booleans "true", "false", "1", "0";
an empty optional number or boolean as absent), which the reference decoder reads as the same
values. A header spelled otherwise ends the run here, and the handler reads it with the
reference decoder: the run is shorter, what is stored and answered is the same. The per-topic
checks read `facts`, the lane's cache keyed by topic and checked by identity against `table`
(a `TopicConfig` is frozen: a changed topic is a new object); an entry also holds the topic's
consume-queue keys (`f"{topic}-{queue id}"`, for up to `_KEYS_MAX` queues), so a request's key
is looked up, not formatted. The properties are rewritten here (`_rewrite_props`: the steps of
the compiled `send_properties` over the shared `_props.pxi`, with the lane's checks in one pass
over the bytes); `send_properties` is called only when its array cannot hold them. (`encode_send_oks`,
the answers in one buffer, is in `_wire.pyx`, beside `encode_send_ok`.)
"""

from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Contains, PyUnicode_DecodeUTF8
from libc.stdlib cimport free, malloc

from rocketlite.protocol import reserved
from rocketlite.protocol.codes import CommandFlag, RequestCode, SerializeType
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.perm import PERM_WRITE

cdef extern from "Python.h":
    object PyUnicode_FromFormat(const char* fmt, ...)
    bint PyUnicode_IS_ASCII(object text)
    const char* PyUnicode_DATA(object text)

include "_text.pxi"  # the UTF-8 form of a str
include "_props.pxi"  # the properties array (as `formats/_native/_send.pyx` reads it)

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
    """`text` as a number in a client's spelling: ASCII digits, at most `digits` of them after
    any leading zeros (a fixed-width writer pads with them: Java reads "0032" as 32), or "-1"."""
    cdef Py_ssize_t n, i, lead = 0
    cdef const char* s
    cdef long long v = 0
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return _BAD
    s = PyUnicode_DATA(text)  # an ASCII str's characters, one byte each
    n = len(<str>text)
    if n == 0 or n > 64:
        return _BAD
    while lead < n - 1 and s[lead] == 48:
        lead += 1
    if n - lead > digits:
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


cdef int _field_number(object text, int digits, bint required, long long* out):
    """A number field's text (None: absent) read by `_number`; an empty optional one is absent."""
    if text is None:
        return _BAD if required else _ABSENT
    if not required and type(text) is str and len(<str>text) == 0:
        return _ABSENT
    return _number(text, digits, out)


cdef int _field_bool(object text, bint* out):
    """A boolean field's text (None: absent, false)."""
    if text is None:
        out[0] = False
        return _OK
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


cdef class _Gather


cdef int _needles(const char* s, Py_ssize_t n) noexcept:
    """Which of the properties the lane leaves to the handler `s[:n]` holds: 1 for "DELAY\x01" or
    "TIMER_", else 2 for "__S", else 0; one pass. On UTF-8 bytes this is what it is on the text:
    an ASCII byte never occurs inside a multi-byte sequence."""
    cdef Py_ssize_t i
    cdef int found = 0
    cdef char c
    for i in range(n - 2):
        c = s[i]
        if c == 68:  # D
            if i + 6 <= n and memcmp(s + i, b"DELAY\x01", 6) == 0:
                return 1
        elif c == 84:  # T
            if i + 6 <= n and memcmp(s + i, b"TIMER_", 6) == 0:
                return 1
        elif c == 95 and s[i + 1] == 95 and s[i + 2] == 83:  # __S
            found = 2
    return found


cdef int _rewrite_props(const char* s, Py_ssize_t n, const char* c, Py_ssize_t cn, bint check_out,
                        _Gather g) except -1:
    """`send_properties(text, cluster)` and the lane's checks of it, over `text`'s UTF-8 bytes
    `s[:n]`, into `g.props` (the properties to store) and `g.uniq` (UNIQ_KEY, None when absent):
    `_OK`; `_BAD` when the lane leaves the request to the handler (a DELAY property, "DELAY\x01"
    or "TIMER_" in the text, or one of `_needles` in what is stored); `_ABSENT` when the array
    cannot hold them (the caller then calls `send_properties` and checks its results). The steps
    of the compiled `send_properties` (`_props.pxi`), without the tags code, KEYS and the 5-tuple
    the lane does not read.

    What is stored is checked only when the text holds "__S" or `check_out` (the cluster's entry
    "CLUSTER\x01{cluster}" holds a needle): a needle has no \x02, so one in what is stored lies in
    one of its entries "key\x01value", and each is in the text as it is (a repeated key keeps its
    first place with its last value: the last entry of that key in the text) or is the cluster's.
    The text may hold "__S" where it is not stored (a dropped WAIT, an empty value, a value
    overwritten): then what is stored is checked."""
    cdef _Prop props[_PROPS_CAP + 1]
    cdef char small[512]
    cdef char* buf = small
    cdef Py_ssize_t count, size, i
    cdef int found = _needles(s, n)
    if found == 1:
        return _BAD
    count = _props_parse(s, n, props, _PROPS_CAP)
    if count < 0:
        return _ABSENT
    _props_drop(props, count, b"WAIT", 4)
    count = _props_put(props, count, b"CLUSTER", 7, c, cn)
    if _props_find(props, count, b"DELAY", 5) >= 0:
        return _BAD
    size = _props_size(props, count)
    if size > 512:
        buf = <char*>malloc(size)
        if buf == NULL:
            raise MemoryError()
    try:
        size = _props_write(props, count, buf)
        if (found or check_out) and _needles(buf, size):
            return _BAD
        g.props = PyUnicode_DecodeUTF8(buf, size, NULL)
    finally:
        if buf != small:
            free(buf)
    i = _props_find(props, count, b"UNIQ_KEY", 8)
    g.uniq = None if i < 0 else PyUnicode_DecodeUTF8(props[i].v, props[i].vl, NULL)
    return _OK


cdef class _Gather:
    """One call's state: its arguments and what it gathered, for `take` per request."""
    cdef list entries, sizes, keys, answers
    cdef dict table, facts
    cdef set legal
    cdef str cluster
    cdef Py_ssize_t head, max_size, max_props
    cdef object rng, send_properties
    cdef object props, uniq  # `_rewrite_props`' results
    cdef bint cluster_needle  # the cluster's properties entry holds one of `_needles`

    def __cinit__(self, dict table, set legal, dict facts, str cluster, Py_ssize_t head,
                  Py_ssize_t max_size, Py_ssize_t max_props, rng, send_properties):
        self.entries, self.sizes, self.keys, self.answers = [], [], [], []
        self.table, self.legal, self.facts, self.cluster = table, legal, facts, cluster
        self.head, self.max_size, self.max_props = head, max_size, max_props
        self.rng, self.send_properties = rng, send_properties
        # "CLUSTER\x01" adds none, before or across its end
        self.cluster_needle = _DELAY_NEEDLE in cluster or _TIMER_NEEDLE in cluster or _S_NEEDLE in cluster

    cdef bint take(self, object a, object b, object c, object d, object e, object f_, object g, object h,
                   object i, object j, object k, object l, object m, object body, Py_ssize_t span_start,
                   Py_ssize_t span_len, object opaque, object serialize_type) except -1:
        """The request with header letters `a`..`m` (their texts, None when absent) and `body`
        gathered when it is on the common path (True); False ends the run. With `span_start` >= 0
        the body is `span_len` bytes of the read from there (`body` unused), and the entry holds
        `span_start` in its place (`encode_group` copies it from the read)."""
        cdef long long queue_id, sys_flag, born, flag, reconsume, dummy, wq, rq
        cdef bint batch, unit_mode
        cdef Py_ssize_t props_len, topic_len, body_len, size, raw_len, cluster_len
        cdef const char* raw_utf8
        cdef const char* cluster_utf8
        cdef tuple f
        cdef object topic, raw, properties, delay
        cdef object uniq_key
        cdef int rewritten
        # the header: a, b, c strings; d..h numbers (required); i string; j, l numbers; k, m booleans
        if type(a) is not str or type(b) is not str or type(c) is not str:
            return False
        topic = b
        if (_field_number(d, 9, True, &dummy) != _OK or _field_number(e, 9, True, &queue_id) != _OK
                or _field_number(f_, 9, True, &sys_flag) != _OK or _field_number(g, 18, True, &born) != _OK
                or _field_number(h, 9, True, &flag) != _OK):
            return False
        reconsume = 0
        if _field_number(j, 9, False, &reconsume) == _BAD or _field_number(l, 9, False, &dummy) == _BAD:
            return False
        if _field_bool(k, &unit_mode) != _OK or _field_bool(m, &batch) != _OK:
            return False
        if i is None:
            raw = ""
        elif type(i) is not str:
            return False
        else:
            raw = i
        # the checks
        if batch or topic not in self.legal or sys_flag & _TRANSACTION_MASK:
            return False
        f = _facts_of(self.table, self.facts, topic)
        if f is None or not f[1]:
            return False
        wq = f[2]
        rq = f[3]
        if queue_id >= wq and queue_id >= rq:
            return False
        # the properties rewrite (`send_properties`) and its checks on the UTF-8 bytes when they
        # allow, else the call and the checks on the text
        raw_utf8 = _utf8_or_null(raw, &raw_len)
        cluster_utf8 = _utf8_or_null(self.cluster, &cluster_len)
        rewritten = _ABSENT
        if raw_utf8 != NULL and cluster_utf8 != NULL:
            rewritten = _rewrite_props(raw_utf8, raw_len, cluster_utf8, cluster_len, self.cluster_needle, self)
        if rewritten == _BAD:
            return False
        if rewritten == _OK:
            properties, uniq_key = self.props, self.uniq
        else:
            if PyUnicode_Contains(raw, _DELAY_NEEDLE) or PyUnicode_Contains(raw, _TIMER_NEEDLE):
                return False
            properties, _tags, uniq_key, _keys, delay = self.send_properties(raw, self.cluster)
            if (delay is not None or PyUnicode_Contains(properties, _DELAY_NEEDLE)
                    or PyUnicode_Contains(properties, _TIMER_NEEDLE) or PyUnicode_Contains(properties, _S_NEEDLE)):
                return False
        if _utf8_or_null(properties, &props_len) == NULL or _utf8_or_null(topic, &topic_len) == NULL:
            return False
        if span_start >= 0:
            body_len = span_len
            body = span_start
        elif body is None:
            body = b""
            body_len = 0
        elif type(body) is not bytes:
            return False
        else:
            body_len = PyBytes_GET_SIZE(body)
            if not body_len:
                body = b""
        size = self.head + body_len + topic_len + props_len  # a legal topic name is ASCII
        if props_len > self.max_props or size > self.max_size:
            return False
        # taken: from here on nothing refuses it
        if queue_id < 0:
            queue_id = self.rng.randrange(max(wq, 1))
        if f[4]:
            sys_flag |= _MULTI_TAGS_FLAG
        self.entries.append((topic, body, properties, queue_id, flag, sys_flag, born, reconsume))
        self.sizes.append(size)
        if f[5] is not None and queue_id < len(<tuple>f[5]):
            self.keys.append((<tuple>f[5])[queue_id])
        else:
            self.keys.append(PyUnicode_FromFormat("%U-%lld", <PyObject*>topic, queue_id))
        self.answers.append((opaque, serialize_type, queue_id, uniq_key))
        return True

    cdef tuple result(self):
        """(entries, sizes, keys, answers, runs): the runs of one topic counted over the entries."""
        cdef list runs = []
        cdef object last = None, topic
        cdef Py_ssize_t count = 0
        for entry in self.entries:
            topic = (<tuple>entry)[0]
            if last is not None and last == topic:
                count += 1
            else:
                if last is not None:
                    runs.append((last, count))
                last = topic
                count = 1
        if last is not None:
            runs.append((last, count))
        return self.entries, self.sizes, self.keys, self.answers, runs


cdef inline object _get(dict ext, str key):
    cdef PyObject* p = PyDict_GetItem(ext, key)
    return None if p == NULL else <object>p


def gather_sends(list commands, Py_ssize_t start, dict table, set legal, dict facts, str cluster,
                 Py_ssize_t head, Py_ssize_t max_size, Py_ssize_t max_props, rng, send_properties):
    """`send_lane.gather_sends_over(...)`: the same (entries, sizes, keys, answers, runs), or a
    shorter run (see the module's docstring)."""
    cdef _Gather gather = _Gather(table, legal, facts, cluster, head, max_size, max_props, rng, send_properties)
    cdef Py_ssize_t n = PyList_GET_SIZE(commands), at
    cdef object req, ext
    for at in range(start, n):
        req = <object>PyList_GET_ITEM(commands, at)
        code = req.code
        flag_word = req.flag
        if type(code) is not int or code != _V2 or type(flag_word) is not int or flag_word & _NOT_ANSWERED:
            break
        ext = req.ext_fields
        if type(ext) is not dict:
            break
        if not gather.take(
            _get(ext, _A), _get(ext, _B), _get(ext, _C), _get(ext, _D), _get(ext, _E), _get(ext, _F),
            _get(ext, _G), _get(ext, _H), _get(ext, _I), _get(ext, _J), _get(ext, _K), _get(ext, _L),
            _get(ext, _M), req.body, -1, 0, req.opaque, req.serialize_type,
        ):
            break
    return gather.result()


include "_send_lane_raw.pxi"  # gather_raw_sends: the same, from the frames' bytes
include "_pull_lane.pxi"  # read_raw_pull, encode_pull_found: the PULL_MESSAGE lane
include "_batch_lane.pxi"  # read_raw_batch: the SEND_BATCH_MESSAGE lane
