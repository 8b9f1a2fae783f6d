# The receipt-handle readers of an AckMessage (`acks.handle_fields`, `acks.handle_columns`),
# compiled: included by `_delivery.pyx`, whose cimports and helpers they use.

cdef object _handle_fields_ref = _acks.handle_fields
cdef Py_ssize_t _MAX_HANDLE = _acks.MAX_HANDLE_LEN
cdef str _NORMAL_KIND = "0"
cdef str _RETRY_KIND = "1"


cdef inline Py_ssize_t _handle_number(const char* s, Py_ssize_t i, Py_ssize_t n, uint64_t* out) noexcept:
    """1 to 19 ASCII digits from `i` up to the next space or the end: the index after them, or -1."""
    cdef Py_ssize_t start = i
    cdef uint64_t v = 0
    while i < n and s[i] != 32:
        if s[i] < 48 or s[i] > 57 or i - start >= 19:
            return -1
        v = v * 10 + <uint64_t>(s[i] - 48)
        i += 1
    if i == start:
        return -1
    out[0] = v
    return i


cdef bint _scan_handle(const char* s, Py_ssize_t n, uint64_t* v, Py_ssize_t* broker_at,
                       Py_ssize_t* broker_end, char* kind) noexcept:
    """One ASCII handle split at single spaces as `WELL_FORMED_HANDLE`, with 8 fields: `v` gets
    ckQueueOffset, popTime, invisibleTime, reviveQid, queueId, queueOffset; the broker name is
    `s[broker_at:broker_end]`. False for any other shape."""
    cdef Py_ssize_t i = 0, field
    if n > _MAX_HANDLE:
        return False
    for field in range(4):  # ckQueueOffset, popTime, invisibleTime, reviveQid
        i = _handle_number(s, i, n, &v[field])
        if i < 0 or i >= n:
            return False
        i += 1  # the space the number stopped at
    if i + 1 >= n or (s[i] != 48 and s[i] != 49) or s[i + 1] != 32:
        return False
    kind[0] = s[i]
    i += 2
    broker_at[0] = i
    while i < n and s[i] != 32:
        i += 1
    if i == broker_at[0] or i >= n:
        return False
    broker_end[0] = i
    i = _handle_number(s, i + 1, n, &v[4])  # queueId
    if i < 0 or i >= n:  # 7 fields (no queue offset) or malformed
        return False
    i = _handle_number(s, i + 1, n, &v[5])  # queueOffset, the last field
    return i == n


cdef object _one_handle(str text):
    """`acks.handle_fields` of one ASCII text."""
    cdef Py_ssize_t n, broker_at, broker_end
    cdef const char* s = PyUnicode_AsUTF8AndSize(text, &n)
    cdef uint64_t v[6]
    cdef char kind
    if not _scan_handle(s, n, v, &broker_at, &broker_end, &kind):
        return None
    return (v[1], v[2], _NORMAL_KIND if kind == 48 else _RETRY_KIND, text[broker_at:broker_end], v[4], v[5])


def handle_fields(texts):
    """The compiled twin of `acks.handle_fields`: ASCII handles read here, any other text by the
    reference (the broker name may be any text without a space)."""
    cdef list out = []
    for text in texts:
        if type(text) is str and PyUnicode_IS_ASCII(text):
            out.append(_one_handle(<str>text))
        else:
            out.append(_handle_fields_ref([text])[0])
    return out


cdef object _handle_columns_ref = _acks.handle_columns
cdef object _HandleColumns = _acks.HandleColumns
cdef uint64_t _SUM_SAFE = 1 << 62  # popTime and invisibleTime below this add without overflow


def handle_columns(texts, long long now_ms, str broker_name not None):
    """The compiled twin of `acks.handle_columns`: ASCII handles read here without an object per
    handle, any other text by the reference."""
    cdef list at = [], queue_ids = [], offsets = [], pop_times = []
    cdef Py_ssize_t i = -1, n, broker_at, broker_end, mine_n
    cdef const char* s
    cdef const char* mine = PyUnicode_AsUTF8AndSize(broker_name, &mine_n)
    cdef bint ascii_mine = PyUnicode_IS_ASCII(broker_name)
    cdef uint64_t v[6]
    cdef char kind
    cdef bint live
    for text in texts:
        i += 1
        if type(text) is not str or not PyUnicode_IS_ASCII(text):
            one = _handle_columns_ref([text], now_ms, broker_name)
            if one.at:
                at.append(i)
                queue_ids.append(one.queue_ids[0])
                offsets.append(one.offsets[0])
                pop_times.append(one.pop_times[0])
            continue
        if not ascii_mine:  # an ASCII handle cannot name it
            continue
        s = PyUnicode_AsUTF8AndSize(text, &n)
        if not _scan_handle(s, n, v, &broker_at, &broker_end, &kind) or kind != 48:
            continue
        if broker_end - broker_at != mine_n or memcmp(s + broker_at, mine, mine_n) != 0:
            continue
        if v[1] < _SUM_SAFE and v[2] < _SUM_SAFE:
            live = <long long>(v[1] + v[2]) > now_ms
        else:
            live = v[1] + <object>v[2] > now_ms
        if live:
            at.append(i)
            queue_ids.append(v[4])
            offsets.append(v[5])
            pop_times.append(v[1])
    return _HandleColumns(at, queue_ids, offsets, pop_times)
