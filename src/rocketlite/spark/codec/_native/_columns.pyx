# cython: language_level=3
"""The compiled twin of `spark/codec/columns_ref.py`: V1 records straight into column buffers.

`decode_record_columns(buf, positions)` gives the same `RecordColumns` as the reference (pinned by
`tests/spark/test_native_columns.py`), in two passes over the raw buffer without the GIL:

1. every record's framing is checked as `record.decode_record` checks it (in the same order), and
   the sizes of the topic, body and properties are summed. A record that fails a check sends the
   whole call to the reference, which raises the error it defines; an IPv6 host or a compressed
   body, a topic or properties that are not UTF-8 (strict, as Python decodes), or a column that
   outgrows 32-bit offsets give `None`, as the reference does;
2. with the result buffers allocated (bytearrays, shrunk to size at the end), each record's
   fixed-width fields are byte-swapped into their arrays, topic and body copied, the properties
   split into names and values (empty items and items without a name or value dropped, a
   repeated name keeping its last value at its last place), and msgId, keys and tags picked from
   them (msgId falls back to the offsetMsgId in upper-case hex).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp, memcpy, memset

from rocketlite.spark.codec import columns_ref as _reference
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.formats.record import MESSAGE_MAGIC_CODE, V4_BODY_POS, V4_FIXED_SIZE
from rocketlite.spark.codec.columns_ref import SLOW_SYS_FLAGS, RecordColumns, RecordStarts, StartsStop

cdef int32_t _MAGIC = MESSAGE_MAGIC_CODE
cdef int32_t _SLOW = SLOW_SYS_FLAGS
cdef int32_t _V6 = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
cdef int64_t _V4_FIXED = V4_FIXED_SIZE
cdef int64_t _INT32_MAX = 2147483647
assert V4_BODY_POS == 88

# V4 field positions (protocol/formats/record.py's table).
DEF _QUEUE_ID = 12
DEF _QUEUE_OFFSET = 20
DEF _PHYS = 28
DEF _SYS_FLAG = 36
DEF _BORN_TS = 40
DEF _STORE_TS = 56
DEF _STORE_HOST = 64
DEF _RECONSUME = 72
DEF _PREFIX = 48  # up to BORNHOST: what decode_record needs before it reads SYSFLAG


cdef struct _Rec:
    int64_t pos
    int64_t head  # where the body starts, from `pos` (88, plus 12 per IPv6 host)
    int64_t total
    int64_t body_len
    int64_t topic_len
    int64_t props_len


cdef struct _Item:
    int64_t name
    int64_t name_len
    int64_t value
    int64_t value_len


include "_bytes.pxi"  # big-endian fields, hex digits
include "_text.pxi"  # strict UTF-8 checks


cdef int _frame(const uint8_t* b, int64_t size, int64_t pos, _Rec* r, bint* slow) noexcept nogil:
    """`decode_record`'s checks on the record at `pos`, in its order: 0 when it is sound."""
    cdef int64_t total, head, p, end
    cdef int32_t sys_flag
    if pos < 0 or size - pos < _PREFIX:
        return -1
    total = _get32(b + pos)
    if _get32(b + pos + 4) != _MAGIC:
        return -1
    if total <= 0 or pos + total > size:
        return -1
    sys_flag = _get32(b + pos + _SYS_FLAG)
    head = 88 + (12 if sys_flag & 0x10 else 0) + (12 if sys_flag & 0x20 else 0)
    if total < head + 3:
        return -1
    if sys_flag & _SLOW:
        slow[0] = True
    end = pos + total
    r.pos = pos
    r.head = head
    r.total = total
    r.body_len = _get32(b + pos + head - 4)
    p = pos + head
    if r.body_len < 0 or p + r.body_len + 3 > end:
        return -1
    p += r.body_len
    r.topic_len = b[p]
    p += 1 + r.topic_len
    if p + 2 > end:
        return -1
    r.props_len = _get16(b + p)
    p += 2
    if r.props_len < 0 or p + r.props_len != end:
        return -1
    return 0


include "_crc32.pxi"
include "_crc32_clmul.pxi"  # the bodies' CRC by carry-less multiplication where the CPU has it


def first_crc_mismatch(buf, positions):
    """See `spark/codec/columns_ref.py` `first_crc_mismatch` (the reference)."""
    cdef Py_buffer view, pview
    cdef const uint8_t* b
    cdef const int64_t* pos
    cdef int64_t i, n, size, found
    cdef _Rec r
    cdef bint slow = False, bad = False
    if PyObject_GetBuffer(positions, &pview, PyBUF_SIMPLE) < 0:
        raise TypeError("positions must be a buffer")
    if pview.len % 8:
        PyBuffer_Release(&pview)
        return _reference.first_crc_mismatch(buf, positions)
    if PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0:
        PyBuffer_Release(&pview)
        raise TypeError("buf must be a buffer")
    b, size, pos, n = <const uint8_t*>view.buf, view.len, <const int64_t*>pview.buf, pview.len // 8
    found = n
    try:
        with nogil:
            for i in range(n):
                if _frame(b, size, pos[i], &r, &slow) != 0:
                    bad = True
                    break
                if <int32_t>(_crc32_fast(b + r.pos + r.head, r.body_len) & 0x7FFFFFFF) != _get32(b + r.pos + 8):
                    found = i
                    break
    finally:
        PyBuffer_Release(&view)
        PyBuffer_Release(&pview)
    if bad:
        return _reference.first_crc_mismatch(buf, positions)
    return found


def first_invalid_record(buf, positions, int64_t base, bint check_base):
    """See `spark/codec/columns_ref.py` `first_invalid_record` (the reference)."""
    cdef Py_buffer view, pview
    cdef const uint8_t* b
    cdef const int64_t* pos
    cdef int64_t i, n, size, p, total, body_len, topic_len_pos, props_len_pos, props_len
    cdef int code = 0
    if PyObject_GetBuffer(positions, &pview, PyBUF_SIMPLE) < 0:
        raise TypeError("positions must be a buffer")
    if pview.len % 8:
        PyBuffer_Release(&pview)
        return _reference.first_invalid_record(buf, positions, base, check_base)
    if PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0:
        PyBuffer_Release(&pview)
        raise TypeError("buf must be a buffer")
    b, size, pos, n = <const uint8_t*>view.buf, view.len, <const int64_t*>pview.buf, pview.len // 8
    i = 0
    try:
        with nogil:
            while i < n:
                p = pos[i]
                if p < 0 or p + _V4_FIXED > size:
                    code = 1
                    break
                total = _get32(b + p)
                if _get32(b + p + 4) != _MAGIC or total < _V4_FIXED or p + total > size:
                    code = 2
                    break
                if _get32(b + p + _SYS_FLAG) & _V6:
                    code = 5
                    break
                body_len = _get32(b + p + 84)
                topic_len_pos = min(p + 88 + max(body_len, 0), size - 1)
                props_len_pos = min(topic_len_pos + 1 + b[topic_len_pos], size - 2)
                props_len = _get16(b + props_len_pos)
                if not (body_len >= 0 and _V4_FIXED + body_len <= total and props_len >= 0
                        and props_len_pos + 2 + props_len == p + total):
                    code = 3
                    break
                if check_base and _get64(b + p + _PHYS) != base + p:
                    code = 4
                    break
                i += 1
    finally:
        PyBuffer_Release(&view)
        PyBuffer_Release(&pview)
    return i, code


def record_starts(buf, int64_t pos, int64_t limit, int64_t max_count):
    """See `spark/codec/columns_ref.py` `record_starts` (the reference)."""
    cdef Py_buffer view
    cdef const uint8_t* b
    cdef int64_t size, cap, count = 0
    cdef int32_t total = 0, magic = 0
    cdef int stop = 0
    cdef int64_t* out
    if pos < 0 or max_count < 0:
        return _reference.record_starts(buf, pos, limit, max_count)
    if PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0:
        raise TypeError("buf must be a buffer")
    try:
        b, size = <const uint8_t*>view.buf, view.len
        cap = min(max_count, max(min(limit, size) - pos, 0) // 91 + 1)
        result = _buffer(cap * 8)
        out = <int64_t*>_ptr(result)
        with nogil:
            while pos < limit and count < max_count:
                if size - pos < 8:
                    stop = 1
                    break
                total = _get32(b + pos)
                magic = _get32(b + pos + 4)
                if magic != _MAGIC:
                    stop = 3
                    break
                if total < 91 or pos + total > size:
                    stop = 2
                    break
                out[count] = pos
                count += 1
                pos += total
    finally:
        PyBuffer_Release(&view)
    PyByteArray_Resize(result, count * 8)
    if stop == 0 or stop == 1:
        total = magic = 0
    return RecordStarts(result, pos, StartsStop(stop), total, magic)


cdef inline void _hex(uint8_t* out, const uint8_t* src, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        out[2 * i] = _HEX_DIGITS[src[i] >> 4]
        out[2 * i + 1] = _HEX_DIGITS[src[i] & 15]


cdef inline bint _is(const uint8_t* b, _Item* it, const char* name, int64_t n) noexcept nogil:
    return it.name_len == n and memcmp(b + it.name, name, n) == 0


cdef object _buffer(int64_t size):
    return PyByteArray_FromStringAndSize(NULL, size)


cdef inline uint8_t* _ptr(object ba):
    return <uint8_t*>PyByteArray_AS_STRING(ba)


def decode_record_columns(buf, positions):
    """See `spark/codec/columns_ref.py` `decode_record_columns` (the reference)."""
    cdef Py_buffer view, pview
    if PyObject_GetBuffer(positions, &pview, PyBUF_SIMPLE) < 0:
        raise TypeError("positions must be a buffer")
    if pview.len % 8:
        PyBuffer_Release(&pview)
        return _reference.decode_record_columns(buf, positions)
    if PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0:
        PyBuffer_Release(&pview)
        raise TypeError("buf must be a buffer")
    try:
        return _decode(<const uint8_t*>view.buf, view.len, <const int64_t*>pview.buf, pview.len // 8, buf,
                       positions)
    finally:
        PyBuffer_Release(&view)
        PyBuffer_Release(&pview)


cdef object _decode(const uint8_t* b, int64_t size, const int64_t* pos, int64_t n, object buf, object positions):
    cdef _Rec* recs = <_Rec*>malloc(max(n, 1) * sizeof(_Rec))
    cdef _Item* items = NULL
    if recs == NULL:
        raise MemoryError
    cdef int64_t i, j, k, m, body_total = 0, topic_total = 0, props_total = 0, item_cap = 0
    cdef int64_t widest_items = 0, cap, at, end
    cdef bint bad = False, slow = False, text_ok = True
    try:
        with nogil:
            for i in range(n):
                if _frame(b, size, pos[i], &recs[i], &slow) != 0:
                    bad = True
                    break
                body_total += recs[i].body_len
                topic_total += recs[i].topic_len
                props_total += recs[i].props_len
                cap = recs[i].props_len // 2 + 1
                item_cap += cap
                if cap > widest_items:
                    widest_items = cap
            if not bad and not slow:
                for i in range(n):
                    at = recs[i].pos + 88 + recs[i].body_len + 1
                    end = recs[i].pos + recs[i].total
                    if not _valid_utf8(b + at, recs[i].topic_len) or not _valid_utf8(b + end - recs[i].props_len,
                                                                        recs[i].props_len):
                        text_ok = False
                        break
        if bad:
            return _reference.decode_record_columns(buf, positions)
        if slow or not text_ok or body_total > _INT32_MAX or topic_total > _INT32_MAX:
            return None
        items = <_Item*>malloc(max(widest_items, 1) * sizeof(_Item))
        if items == NULL:
            raise MemoryError
        return _fill(b, recs, n, items, body_total, topic_total, props_total, item_cap)
    finally:
        free(recs)
        free(items)


cdef object _fill(const uint8_t* b, _Rec* recs, int64_t n, _Item* items, int64_t body_total,
                  int64_t topic_total, int64_t props_total, int64_t item_cap):
    topic_o, topic_d = _buffer((n + 1) * 4), _buffer(topic_total)
    body_o, body_d = _buffer((n + 1) * 4), _buffer(body_total)
    msg_o, msg_d = _buffer((n + 1) * 4), _buffer(props_total + 32 * n)
    keys_o, keys_d, keys_v = _buffer((n + 1) * 4), _buffer(props_total), _buffer((n + 7) // 8)
    tags_o, tags_d, tags_v = _buffer((n + 1) * 4), _buffer(props_total), _buffer((n + 7) // 8)
    map_o = _buffer((n + 1) * 4)
    name_o, name_d = _buffer((item_cap + 1) * 4), _buffer(props_total)
    value_o, value_d = _buffer((item_cap + 1) * 4), _buffer(props_total)
    qid, recon = _buffer(n * 4), _buffer(n * 4)
    qoff, phys, born, store = _buffer(n * 8), _buffer(n * 8), _buffer(n * 8), _buffer(n * 8)
    cdef int32_t* to = <int32_t*>_ptr(topic_o)
    cdef uint8_t* td = _ptr(topic_d)
    cdef int32_t* bo = <int32_t*>_ptr(body_o)
    cdef uint8_t* bd = _ptr(body_d)
    cdef int32_t* mo = <int32_t*>_ptr(msg_o)
    cdef uint8_t* md = _ptr(msg_d)
    cdef int32_t* ko = <int32_t*>_ptr(keys_o)
    cdef uint8_t* kd = _ptr(keys_d)
    cdef uint8_t* kv = _ptr(keys_v)
    cdef int32_t* go = <int32_t*>_ptr(tags_o)
    cdef uint8_t* gd = _ptr(tags_d)
    cdef uint8_t* gv = _ptr(tags_v)
    cdef int32_t* mapo = <int32_t*>_ptr(map_o)
    cdef int32_t* no = <int32_t*>_ptr(name_o)
    cdef uint8_t* nd = _ptr(name_d)
    cdef int32_t* vo = <int32_t*>_ptr(value_o)
    cdef uint8_t* vd = _ptr(value_d)
    cdef int32_t* q_id = <int32_t*>_ptr(qid)
    cdef int32_t* q_re = <int32_t*>_ptr(recon)
    cdef int64_t* q_off = <int64_t*>_ptr(qoff)
    cdef int64_t* q_phys = <int64_t*>_ptr(phys)
    cdef int64_t* q_born = <int64_t*>_ptr(born)
    cdef int64_t* q_store = <int64_t*>_ptr(store)
    cdef int64_t i, j, k, m, a, e, q, ps, pe, t_at = 0, b_at = 0, m_at = 0, k_at = 0, g_at = 0
    cdef int64_t it_n = 0, n_at = 0, v_at = 0, uniq, keys, tags
    cdef const uint8_t* p
    cdef const void* hit
    cdef _Rec* r
    cdef _Item* it
    cdef bint all_keys = True, all_tags = True
    memset(kv, 0, (n + 7) // 8)
    memset(gv, 0, (n + 7) // 8)
    with nogil:
        to[0] = bo[0] = mo[0] = ko[0] = go[0] = mapo[0] = no[0] = vo[0] = 0
        for i in range(n):
            r = &recs[i]
            p = b + r.pos
            q_id[i] = _get32(p + _QUEUE_ID)
            q_re[i] = _get32(p + _RECONSUME)
            q_off[i] = _get64(p + _QUEUE_OFFSET)
            q_phys[i] = _get64(p + _PHYS)
            q_born[i] = _get64(p + _BORN_TS) * 1000
            q_store[i] = _get64(p + _STORE_TS) * 1000
            memcpy(bd + b_at, p + 88, r.body_len)
            b_at += r.body_len
            bo[i + 1] = <int32_t>b_at
            memcpy(td + t_at, p + 88 + r.body_len + 1, r.topic_len)
            t_at += r.topic_len
            to[i + 1] = <int32_t>t_at
            # Properties: items between \x02 separators, each name \x01 value.
            pe = r.pos + r.total
            ps = pe - r.props_len
            m = 0
            a = ps
            while a <= pe:
                hit = memchr(b + a, 2, pe - a)
                e = (<const uint8_t*>hit - b) if hit != NULL else pe
                hit = memchr(b + a, 1, e - a)
                if hit != NULL:
                    q = <const uint8_t*>hit - b
                    if q > a and e > q + 1:
                        items[m].name = a
                        items[m].name_len = q - a
                        items[m].value = q + 1
                        items[m].value_len = e - q - 1
                        m += 1
                a = e + 1
            uniq = keys = tags = -1
            for k in range(m):
                it = &items[k]
                for j in range(k + 1, m):
                    if items[j].name_len == it.name_len and memcmp(b + items[j].name, b + it.name, it.name_len) == 0:
                        it.name_len = -1  # a later item has the name: this one is dropped
                        break
                if it.name_len < 0:
                    continue
                memcpy(nd + n_at, b + it.name, it.name_len)
                n_at += it.name_len
                memcpy(vd + v_at, b + it.value, it.value_len)
                v_at += it.value_len
                it_n += 1
                no[it_n] = <int32_t>n_at
                vo[it_n] = <int32_t>v_at
                if _is(b, it, "UNIQ_KEY", 8):
                    uniq = k
                elif _is(b, it, "KEYS", 4):
                    keys = k
                elif _is(b, it, "TAGS", 4):
                    tags = k
            mapo[i + 1] = <int32_t>it_n
            if uniq >= 0:
                memcpy(md + m_at, b + items[uniq].value, items[uniq].value_len)
                m_at += items[uniq].value_len
            else:
                _hex(md + m_at, p + _STORE_HOST, 8)
                _hex(md + m_at + 16, p + _PHYS, 8)
                m_at += 32
            mo[i + 1] = <int32_t>m_at
            if keys >= 0:
                memcpy(kd + k_at, b + items[keys].value, items[keys].value_len)
                k_at += items[keys].value_len
                kv[i >> 3] |= <uint8_t>(1 << (i & 7))
            else:
                all_keys = False
            ko[i + 1] = <int32_t>k_at
            if tags >= 0:
                memcpy(gd + g_at, b + items[tags].value, items[tags].value_len)
                g_at += items[tags].value_len
                gv[i >> 3] |= <uint8_t>(1 << (i & 7))
            else:
                all_tags = False
            go[i + 1] = <int32_t>g_at
    if max(m_at, k_at, g_at, n_at, v_at) > _INT32_MAX:
        return None
    PyByteArray_Resize(msg_d, m_at)
    PyByteArray_Resize(keys_d, k_at)
    PyByteArray_Resize(tags_d, g_at)
    PyByteArray_Resize(name_o, (it_n + 1) * 4)
    PyByteArray_Resize(name_d, n_at)
    PyByteArray_Resize(value_o, (it_n + 1) * 4)
    PyByteArray_Resize(value_d, v_at)
    return RecordColumns(
        n, topic_o, topic_d, body_o, body_d, msg_o, msg_d,
        keys_o, keys_d, None if all_keys else keys_v,
        tags_o, tags_d, None if all_tags else tags_v,
        map_o, name_o, name_d, value_o, value_d,
        qid, qoff, phys, born, store, recon,
    )
