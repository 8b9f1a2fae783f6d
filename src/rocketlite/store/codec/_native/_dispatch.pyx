"""The compiled store read side: commit-log scans, recovery checks, pull selection, CQ units.

Twins of `scan_ref.scan_messages` / `scan_record` and of `dispatch_ref` (the references);
`store.codec.speedups` takes every function here whose name is a `Codecs` field. The byte loops run
in `with nogil:` over the raw buffer (the segment's mapping), so the reput and recovery scans run
beside the event loop; Python objects (`DispatchRequest`, strings) are built only afterwards.

The scan accepts a record only when every check of `scan_ref.scan_record` passes (magic,
sizes, lengths, CRC) and it can produce every field itself. Anything else (a blank, zeros,
corruption, a schedule-topic record whose tag code is a delivery time, a non-ASCII TAGS value)
stops the native loop and goes to `scan_ref.scan_record` at that position, the one piece
of code that judges unusual bytes.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import array

from rocketlite.store.codec import scan_ref
from rocketlite.protocol.message import MessageConst, tags_code
from rocketlite.protocol.formats.record import DispatchRequest, ScanKind, ScanResult
from rocketlite.protocol.reserved import SCHEDULE_TOPIC

include "_crc32.pxi"
include "_bytes.pxi"  # big-endian fields
include "_text.pxi"  # ASCII checks, Java's String.hashCode


cdef int32_t MAGIC = -626843481  # MESSAGE_MAGIC_CODE
cdef int32_t PADDING_SIZE = 0x7FFFFFFF
cdef int UNIT = 20


cdef inline void _put_unit(unsigned char *p, int64_t phy, int32_t size, int64_t tag) noexcept nogil:
    """One consume-queue unit (`consume_queue_unit.CQ_UNIT`): commitLogOffset, size, tagsCode."""
    _put64(p, <uint64_t>phy)
    _put32(p + 8, <uint32_t>size)
    _put64(p + 12, <uint64_t>tag)


cdef Py_ssize_t CHUNK = 4096  # records per nogil run

cdef bytes _KEYS = (MessageConst.KEYS + "\x01").encode()
cdef bytes _UNIQ = (MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01").encode()
cdef bytes _TAGS = (MessageConst.TAGS + "\x01").encode()
cdef bytes _SCHEDULE = SCHEDULE_TOPIC.encode()
cdef const char *KEYS_N = PyBytes_AS_STRING(_KEYS)
cdef const char *UNIQ_N = PyBytes_AS_STRING(_UNIQ)
cdef const char *TAGS_N = PyBytes_AS_STRING(_TAGS)
cdef const char *SCHED = PyBytes_AS_STRING(_SCHEDULE)
cdef Py_ssize_t KEYS_L = len(_KEYS)
cdef Py_ssize_t UNIQ_L = len(_UNIQ)
cdef Py_ssize_t TAGS_L = len(_TAGS)
cdef Py_ssize_t SCHED_L = len(_SCHEDULE)
_MESSAGE = ScanKind.MESSAGE
_END = ScanKind.END
_general = scan_ref.scan_record


cdef struct Rec:
    Py_ssize_t pos
    int32_t total, queue_id, sys_flag, tags_code
    int64_t queue_offset, phys, store_ts, prepared
    Py_ssize_t topic_pos, props_pos, keys_pos, uniq_pos, tags_pos
    int32_t topic_len, props_len, keys_len, uniq_len, tags_len  # value lengths: -1 = absent
    bint tags_ascii  # tags_code holds the TAGS hash; else the reference hashes the decoded value


cdef Py_ssize_t find_prop(const unsigned char *s, Py_ssize_t n, const char *needle, Py_ssize_t nl,
                          Py_ssize_t *vlen) noexcept nogil:
    """`message.find_property` over bytes: the start of the value, its length in `vlen`; -1 if
    absent. Separators are ASCII, so byte positions match the decoded string's."""
    cdef Py_ssize_t i = 0, j
    while i + nl <= n:
        if s[i] == needle[0] and memcmp(s + i, needle, nl) == 0 and (i == 0 or s[i - 1] == 2):
            j = i + nl
            while j < n and s[j] != 2:
                j += 1
            vlen[0] = j - i - nl
            return i + nl
        i += 1
    return -1


cdef int check_record(const unsigned char *b, Py_ssize_t n, Py_ssize_t pos, bint verify_crc,
                      Rec *r) noexcept nogil:
    """1 if the record at `pos` is a message by every check of the reference scan (header
    fields and section positions in `r`); 0 for anything the reference must judge."""
    cdef Py_ssize_t avail = n - pos, head, p, end, ts_pos
    cdef const unsigned char *q = b + pos
    cdef int32_t total, sys_flag, body_len, props_len
    if avail < 40:  # the blank's minimum, and SYSFLAG must be readable
        return 0
    total = _get32(q)
    if _get32(q + 4) != MAGIC or total > avail:
        return 0
    sys_flag = _get32(q + 36)
    head = 88 + (12 if sys_flag & 0x10 else 0) + (12 if sys_flag & 0x20 else 0)
    if total < head + 3:
        return 0
    body_len = _get32(q + head - 4)
    p = pos + head
    end = pos + total
    if body_len < 0 or p + body_len + 3 > end:
        return 0
    if verify_crc and <int32_t>(_crc32(b + p, body_len) & 0x7FFFFFFF) != _get32(q + 8):
        return 0
    r.topic_pos = p + body_len + 1
    r.topic_len = b[p + body_len]
    p = r.topic_pos + r.topic_len
    if p + 2 > end:
        return 0
    props_len = _get16(b + p)
    if props_len < 0 or p + 2 + props_len != end:
        return 0
    ts_pos = 56 + (12 if sys_flag & 0x10 else 0)
    r.pos = pos
    r.total = total
    r.sys_flag = sys_flag
    r.queue_id = _get32(q + 12)
    r.queue_offset = _get64(q + 20)
    r.phys = _get64(q + 28)
    r.store_ts = _get64(q + ts_pos)
    r.prepared = _get64(q + head - 12)
    r.props_pos = p + 2
    r.props_len = props_len
    return 1


cdef int parse_props(const unsigned char *b, Rec *r) noexcept nogil:
    """KEYS, UNIQ_KEY and the TAGS hash of an accepted record; 0 if the reference must take it
    (a schedule-topic record with properties: its tag code is a delivery time)."""
    cdef const unsigned char *s = b + r.props_pos
    cdef Py_ssize_t n = r.props_len, t, tl = 0
    cdef Py_ssize_t vl = 0
    r.keys_len = r.uniq_len = r.tags_len = -1
    r.tags_code = 0
    r.tags_ascii = True
    if n == 0:
        return 1
    if r.topic_len == SCHED_L and memcmp(b + r.topic_pos, SCHED, SCHED_L) == 0:
        return 0
    r.keys_pos = find_prop(s, n, KEYS_N, KEYS_L, &vl)
    if r.keys_pos >= 0:
        r.keys_len = vl
        r.keys_pos += r.props_pos
    r.uniq_pos = find_prop(s, n, UNIQ_N, UNIQ_L, &vl)
    if r.uniq_pos >= 0:
        r.uniq_len = vl
        r.uniq_pos += r.props_pos
    t = find_prop(s, n, TAGS_N, TAGS_L, &tl)
    if t >= 0:
        r.tags_pos = t + r.props_pos
        r.tags_len = tl
        r.tags_ascii = _ascii(s + t, tl)
        if r.tags_ascii:  # else the reference hashes the decoded value
            r.tags_code = <int32_t>_java_hash_utf8(0, s + t, tl)
    return 1


cdef Py_ssize_t scan_run(const unsigned char *b, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t limit,
                         bint verify_crc, Rec *out, Py_ssize_t cap, Py_ssize_t *count) noexcept nogil:
    """Accept records from `pos` while `pos < limit` into `out` (at most `cap`); returns the
    position of the first record not accepted (or `limit`/`n` reached)."""
    cdef Py_ssize_t k = 0
    while pos < n and pos < limit and k < cap:
        if not check_record(b, n, pos, verify_crc, &out[k]) or not parse_props(b, &out[k]):
            break
        pos += out[k].total
        k += 1
    count[0] = k
    return pos


cdef inline str _text(const unsigned char *b, Py_ssize_t p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char *>b + p, n, "replace")


cdef inline Py_ssize_t _clamp(object value, Py_ssize_t high):
    """`value` (any int) clamped to [-1, high]."""
    if value >= high:
        return high
    if value < 0:
        return -1
    return value


def scan_messages(buf, Py_ssize_t pos, limit, list out, *, bint verify_crc, delay_levels_ms=()):
    """`scan_ref.scan_messages`: the byte loop without the GIL, then the requests."""
    if pos < 0 or len(buf) == 0:
        return scan_ref.scan_messages(
            buf, pos, limit, out, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms
        )
    cdef const unsigned char[::1] mv = buf
    cdef const unsigned char *b = &mv[0]
    cdef Py_ssize_t n = mv.shape[0], lim = _clamp(limit, mv.shape[0]), stop, k, i
    cdef Py_ssize_t prev_pos = -1, prev_len = -1
    cdef Rec *recs = <Rec *>malloc(CHUNK * sizeof(Rec))
    cdef Rec *r
    cdef str topic = ""
    if recs == NULL:
        raise MemoryError()
    try:
        while True:
            with nogil:
                stop = scan_run(b, n, pos, lim, verify_crc, recs, CHUNK, &k)
            for i in range(k):
                r = &recs[i]
                if r.topic_len != prev_len or memcmp(b + r.topic_pos, b + prev_pos, r.topic_len) != 0:
                    topic = _text(b, r.topic_pos, r.topic_len)
                    prev_pos, prev_len = r.topic_pos, r.topic_len
                out.append(DispatchRequest(
                    topic, r.queue_id, r.phys, r.total,
                    r.tags_code if r.tags_ascii else tags_code(_text(b, r.tags_pos, r.tags_len)),
                    r.store_ts, r.queue_offset,
                    _text(b, r.keys_pos, r.keys_len) if r.keys_len >= 0 else "",
                    _text(b, r.uniq_pos, r.uniq_len) if r.uniq_len >= 0 else None,
                    r.sys_flag, r.prepared,
                ))
            pos = stop
            if pos >= n or pos >= lim:
                return pos, None
            if k == CHUNK:
                continue
            res = _general(buf, pos, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
            if res.kind is not _MESSAGE:
                return pos, res
            out.append(res.request)
            pos += res.size
    finally:
        free(recs)


def scan_record(buf, Py_ssize_t pos, *, bint verify_crc, delay_levels_ms=()):
    """`scan_ref.scan_record`, through `scan_messages`."""
    cdef list out = []
    _, stop = scan_messages(buf, pos, pos + 1, out, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
    if out:
        return ScanResult(_MESSAGE, out[0].msg_size, out[0])
    return stop if stop is not None else ScanResult(_END, 0)


def check_records(buf, Py_ssize_t pos, base_offset, *, bint verify_crc):
    """`dispatch_ref.check_records`: the whole walk without the GIL, no object per record."""
    if pos < 0 or len(buf) == 0:
        return _py_check_records(buf, pos, base_offset, verify_crc=verify_crc)
    cdef const unsigned char[::1] mv = buf
    cdef const unsigned char *b = &mv[0]
    cdef Py_ssize_t n = mv.shape[0], count = 0
    cdef int64_t base = base_offset
    cdef Rec r
    while True:
        with nogil:
            while check_record(b, n, pos, verify_crc, &r) and r.phys == base + pos:
                count += 1
                pos += r.total
        res = _general(buf, pos, verify_crc=verify_crc)
        if res.kind is not _MESSAGE or res.request.commit_log_offset != base + pos:
            return pos, count, res
        count += 1
        pos += res.size


cdef array.array _Q = array.array("q")


cdef inline bint _member(const int64_t *codes, Py_ssize_t m, int64_t tag) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = m, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if codes[mid] < tag:
            lo = mid + 1
        else:
            hi = mid
    return lo < m and codes[lo] == tag


cdef object _codes_of(object tag_filter):
    """The sorted int codes behind `codes.__contains__` of a set of ints; None for any other
    filter (called per unit instead)."""
    owner = getattr(tag_filter, "__self__", None)
    if type(owner) not in (set, frozenset) or getattr(tag_filter, "__name__", "") != "__contains__":
        return None
    if not all(type(c) is int for c in owner):
        return None
    return sorted(c for c in owner if -(1 << 63) <= c < (1 << 63))


def select_units(units, Py_ssize_t start, max_count, max_bytes, tag_filter, count, total, skip_below):
    """`dispatch_ref.select_units`; a set's `__contains__` as filter is checked without the GIL,
    and the picked units and their runs are written straight into two arrays."""
    cdef const unsigned char[::1] mv = units
    cdef Py_ssize_t n = mv.shape[0] // UNIT, i = start, m = 0, j, k = 0, r = 0, i2
    cdef const unsigned char *b = &mv[0] if mv.shape[0] else NULL
    cdef int64_t cnt = count, tot = total, below = skip_below, phy, tag, prev_phy = 0
    cdef int64_t mc = max_count if max_count < (1 << 62) else (1 << 62)
    cdef int64_t mb = max_bytes if max_bytes < (1 << 62) else (1 << 62)
    cdef int32_t size, prev_size = 0
    cdef int64_t *codes = NULL
    cdef long long *pk
    cdef long long *rn
    cdef Py_ssize_t *picked = NULL
    cdef bint generic = False, use_codes = False
    cdef array.array out = array.clone(_Q, 0, False)
    cdef array.array runs = array.clone(_Q, 0, False)
    if i < 0 or i >= n:
        return out, runs, start
    if tag_filter is not None:
        sorted_codes = _codes_of(tag_filter)
        generic = sorted_codes is None
        use_codes = not generic
    picked = <Py_ssize_t *>malloc((n - i) * sizeof(Py_ssize_t))
    if use_codes:
        m = len(sorted_codes)
        codes = <int64_t *>malloc((m + 1) * sizeof(int64_t))
    if picked == NULL or (use_codes and codes == NULL):
        free(picked)
        free(codes)
        raise MemoryError()
    try:
        if generic:  # any callable: the loop holds the GIL and calls it
            while i < n:
                phy, size, tag = _get64(b + i * UNIT), _get32(b + i * UNIT + 8), _get64(b + i * UNIT + 12)
                if cnt and (cnt >= mc or tot + size > mb):
                    break
                i += 1
                if size == PADDING_SIZE or phy < below or not tag_filter(tag):
                    continue
                picked[k] = i - 1
                k += 1
                cnt += 1
                tot += size
        else:
            for j in range(m):
                codes[j] = sorted_codes[j]
            with nogil:
                while i < n:
                    phy, size, tag = _get64(b + i * UNIT), _get32(b + i * UNIT + 8), _get64(b + i * UNIT + 12)
                    if cnt and (cnt >= mc or tot + size > mb):
                        break
                    i += 1
                    if size == PADDING_SIZE or phy < below or (use_codes and not _member(codes, m, tag)):
                        continue
                    picked[k] = i - 1
                    k += 1
                    cnt += 1
                    tot += size
        array.resize(out, 3 * k)
        array.resize(runs, 3 * k)
        pk = out.data.as_longlongs
        rn = runs.data.as_longlongs
        for j in range(k):
            i2 = picked[j]
            phy, size = _get64(b + i2 * UNIT), _get32(b + i2 * UNIT + 8)
            pk[3 * j], pk[3 * j + 1], pk[3 * j + 2] = phy, size, i2
            # Back to back: phy == prev_phy + prev_size, without overflow (prev_size > 0, so the
            # sum is above prev_phy; a wrapped sum would be below it).
            if r and size > 0 and prev_size > 0 and phy > prev_phy and <uint64_t>phy == <uint64_t>prev_phy + <uint64_t>prev_size:
                rn[3 * r - 2] += size
                rn[3 * r - 1] = j + 1
            else:
                rn[3 * r], rn[3 * r + 1], rn[3 * r + 2] = phy, size, j + 1
                r += 1
            prev_phy, prev_size = phy, size
        array.resize(runs, 3 * r)
        return out, runs, i
    finally:
        free(picked)
        free(codes)


def pack_units(units):
    """`dispatch_ref.pack_units`."""
    cdef Py_ssize_t n = len(units), j = 0
    cdef bytes data = PyBytes_FromStringAndSize(NULL, n * UNIT)
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(data)
    cdef int64_t phy, tag
    cdef int32_t size
    for phy, size, tag in units:
        _put_unit(p + j, phy, size, tag)
        j += UNIT
    return data


def index_entries(reqs, end_offset):
    """`dispatch_ref.index_entries`: hashes continued from a cached `topic#` prefix."""
    cdef Py_ssize_t cap = 2 * len(reqs) + 8, k = 0, a, b, n
    cdef array.array hashes = array.clone(_Q, cap, False)
    cdef array.array offsets = array.clone(_Q, cap, False)
    cdef array.array stamps = array.clone(_Q, cap, False)
    cdef object prev = None
    cdef uint32_t prefix = 0
    cdef int64_t offset, stamp, end = end_offset
    cdef int32_t sys_flag
    cdef str keys, topic
    cdef bint any_key
    for req in reqs:
        offset = req.commit_log_offset
        sys_flag = req.sys_flag
        if offset < end or sys_flag & 0xC == 0xC:
            continue
        topic = req.topic
        if topic is not prev:
            prefix = 31 * _java_hash_str(0, topic) + 35  # "#"
            prev = topic
        stamp = req.store_timestamp
        uniq = req.uniq_key
        keys = req.keys
        any_key = False
        if uniq is not None:
            k = _put_entry(hashes, offsets, stamps, k, _java_hash_str(prefix, uniq), offset, stamp)
            any_key = True
        n = len(keys)
        a = 0
        while a < n:
            b = keys.find(" ", a)
            if b < 0:
                b = n
            if b > a:
                k = _put_entry(hashes, offsets, stamps, k, _java_hash_str(prefix, keys[a:b]), offset, stamp)
                any_key = True
            a = b + 1
        if any_key:
            end = offset
    array.resize(hashes, k)
    array.resize(offsets, k)
    array.resize(stamps, k)
    return hashes, offsets, stamps


cdef Py_ssize_t _put_entry(array.array hashes, array.array offsets, array.array stamps, Py_ssize_t k,
                           uint32_t full, int64_t offset, int64_t stamp) except -1:
    """Append one entry (growing the arrays when full); returns the new count."""
    cdef int32_t h = <int32_t>full
    if k == len(hashes):
        array.resize_smart(hashes, 2 * k + 8)
        array.resize_smart(offsets, 2 * k + 8)
        array.resize_smart(stamps, 2 * k + 8)
    hashes.data.as_longlongs[k] = 0 if h == -2147483648 else (h if h >= 0 else -h)
    offsets.data.as_longlongs[k] = offset
    stamps.data.as_longlongs[k] = stamp
    return k + 1


cdef struct Unit:
    int64_t phy, size, tags, cq
    Py_ssize_t nxt  # the group's next unit, -1 at its end
    bint ok  # storable: offset >= 0, 0 < size < padding size


def queue_runs(reqs):
    """`dispatch_ref.queue_runs`: requests grouped and cut into runs in one pass, each run
    packed straight into its bytes. Values outside Java's ranges go to the reference."""
    cdef Py_ssize_t n = len(reqs), k = 0, g = -1, ng = 0, j, first, run_len, c
    cdef Unit *u = <Unit *>malloc((n + 1) * sizeof(Unit))
    cdef Py_ssize_t *ends = <Py_ssize_t *>malloc((n + 1) * 2 * sizeof(Py_ssize_t))  # head, tail
    cdef dict groups = {}
    cdef list keys = [], lasts = [], counts = [], result = []
    cdef object prev_topic = None, prev_qid = None
    cdef int64_t run_start
    cdef bint ok
    cdef bytes data
    cdef unsigned char *p
    if u == NULL or ends == NULL:
        free(u)
        free(ends)
        raise MemoryError()
    try:
        for req in reqs:
            tran = req.sys_flag & 0xC
            if tran != 0 and tran != 8:
                continue
            topic = req.topic
            qid = req.queue_id
            if topic is not prev_topic or qid != prev_qid:
                key = (topic, qid)
                found = groups.get(key)
                if found is None:
                    g = ng
                    groups[key] = g
                    keys.append(key)
                    lasts.append(None)
                    counts.append(0)
                    ends[2 * g] = -1
                    ng += 1
                else:
                    g = found
                prev_topic, prev_qid = topic, qid
            try:
                u[k].phy = req.commit_log_offset
                u[k].size = req.msg_size
                u[k].tags = req.tags_code
                u[k].cq = req.consume_queue_offset
            except OverflowError:
                return _py_queue_runs(reqs)
            if u[k].cq > (1 << 62) or u[k].cq < -(1 << 62):
                return _py_queue_runs(reqs)
            u[k].ok = u[k].phy >= 0 and 0 < u[k].size < PADDING_SIZE
            u[k].nxt = -1
            if ends[2 * g] < 0:
                ends[2 * g] = k
            else:
                u[ends[2 * g + 1]].nxt = k
            ends[2 * g + 1] = k
            lasts[g] = req
            counts[g] += 1
            k += 1
        for g in range(ng):
            runs = []
            first = ends[2 * g]
            while first >= 0:
                run_start = u[first].cq
                run_len = 0
                ok = True
                j = first
                while j >= 0 and u[j].cq == run_start + run_len:
                    ok = ok and u[j].ok
                    run_len += 1
                    j = u[j].nxt
                if ok:
                    data = PyBytes_FromStringAndSize(NULL, run_len * UNIT)
                    p = <unsigned char *>PyBytes_AS_STRING(data)
                    for c in range(run_len):
                        _put_unit(p, u[first].phy, u[first].size, u[first].tags)
                        p += UNIT
                        first = u[first].nxt
                else:
                    data = b""
                runs.append((run_start, data))
                first = j
            topic, qid = keys[g]
            last = lasts[g]
            result.append((topic, qid, runs, counts[g], last.consume_queue_offset, last.tags_code,
                           last.store_timestamp))
        return result
    finally:
        free(u)
        free(ends)


from rocketlite.store.codec.dispatch_ref import check_records as _py_check_records  # noqa: E402
from rocketlite.store.codec.dispatch_ref import queue_runs as _py_queue_runs  # noqa: E402
from rocketlite.store.codec.dispatch_ref import dispatch_batch as _py_dispatch_batch  # noqa: E402

include "_dispatch_fused.pxi"

include "_index_put.pxi"
