# Included by _dispatch.pyx: the fused dispatch, commit-log bytes in, consume-queue runs and index
# entries out, the whole byte work without the GIL.

cdef Py_ssize_t MAX_GROUPS = 256  # queues per batch; a batch ends before a record of one more


cdef struct Group:
    Py_ssize_t topic_pos, head, tail, count
    int32_t topic_len, queue_id


cdef inline int64_t _index_hash(uint32_t full) noexcept nogil:
    cdef int32_t h = <int32_t>full
    return 0 if h == -2147483648 else (h if h >= 0 else -h)


cdef Py_ssize_t _cut_unhashable(const unsigned char *b, Rec *recs, Py_ssize_t k, bint index) noexcept nogil:
    """Records before the first whose tag code or key hashes need the decoded text (non-ASCII), or
    whose queue offset is out of the range where runs are cut without overflow."""
    cdef Py_ssize_t i
    cdef Rec *r
    for i in range(k):
        r = &recs[i]
        if not r.tags_ascii or r.queue_offset > (1LL << 62) or r.queue_offset < -(1LL << 62):
            return i
        if index and not (_ascii(b + r.topic_pos, r.topic_len)
                          and (r.uniq_len < 0 or _ascii(b + r.uniq_pos, r.uniq_len))
                          and (r.keys_len < 0 or _ascii(b + r.keys_pos, r.keys_len))):
            return i
    return k


cdef Py_ssize_t _group(const unsigned char *b, Rec *recs, Py_ssize_t k, Group *groups,
                       Py_ssize_t *ng, Py_ssize_t *nxt) noexcept nogil:
    """Chain the records entering a consume queue per (topic, queue id); returns how many
    records were taken (fewer when a batch would exceed MAX_GROUPS queues)."""
    cdef Py_ssize_t i, g, last = -1
    cdef Rec *r
    cdef Group *gr
    cdef int32_t tran
    for i in range(k):
        r = &recs[i]
        nxt[i] = -1
        tran = r.sys_flag & 0xC
        if tran != 0 and tran != 8:
            continue
        g = last
        if g < 0 or groups[g].queue_id != r.queue_id or groups[g].topic_len != r.topic_len or memcmp(
                b + groups[g].topic_pos, b + r.topic_pos, r.topic_len) != 0:
            g = 0
            while g < ng[0] and (groups[g].queue_id != r.queue_id or groups[g].topic_len != r.topic_len
                                 or memcmp(b + groups[g].topic_pos, b + r.topic_pos, r.topic_len) != 0):
                g += 1
            if g == ng[0]:
                if g == MAX_GROUPS:
                    return i
                groups[g].topic_pos, groups[g].topic_len, groups[g].queue_id = r.topic_pos, r.topic_len, r.queue_id
                groups[g].head = groups[g].tail = -1
                groups[g].count = 0
                ng[0] += 1
        gr = &groups[g]
        if gr.head < 0:
            gr.head = i
        else:
            nxt[gr.tail] = i
        gr.tail = i
        gr.count += 1
        last = g
    return k


cdef Py_ssize_t _index(const unsigned char *b, Rec *recs, Py_ssize_t k, int64_t start,
                       int64_t *hashes, int64_t *offsets, int64_t *stamps) noexcept nogil:
    """`index_entries` over accepted records (ASCII text: bytes are UTF-16 code units)."""
    cdef Py_ssize_t i, e = 0, a, z, end, prev_pos = -1
    cdef int32_t prev_len = -1
    cdef uint32_t prefix = 0
    cdef int64_t running = start
    cdef bint any_key
    cdef Rec *r
    for i in range(k):
        r = &recs[i]
        if r.phys < running or r.sys_flag & 0xC == 0xC:
            continue
        if r.uniq_len < 0 and r.keys_len <= 0:
            continue
        if r.topic_len != prev_len or memcmp(b + r.topic_pos, b + prev_pos, r.topic_len) != 0:
            prefix = 31 * _java_hash_utf8(0, b + r.topic_pos, r.topic_len) + 35  # "#"
            prev_pos, prev_len = r.topic_pos, r.topic_len
        any_key = False
        if r.uniq_len >= 0:
            hashes[e] = _index_hash(_java_hash_utf8(prefix, b + r.uniq_pos, r.uniq_len))
            offsets[e], stamps[e] = r.phys, r.store_ts
            e += 1
            any_key = True
        if r.keys_len > 0:
            a = r.keys_pos
            end = r.keys_pos + r.keys_len
            while a < end:
                z = a
                while z < end and b[z] != 32:
                    z += 1
                if z > a:
                    hashes[e] = _index_hash(_java_hash_utf8(prefix, b + a, z - a))
                    offsets[e], stamps[e] = r.phys, r.store_ts
                    e += 1
                    any_key = True
                a = z + 1
        if any_key:
            running = r.phys
    return e


cdef array.array _int64s(const int64_t *values, Py_ssize_t n):
    cdef array.array out = array.clone(_Q, n, False)
    if n:
        memcpy(out.data.as_longlongs, values, n * sizeof(int64_t))
    return out


def dispatch_batch(buf, Py_ssize_t pos, limit, *, bint verify_crc, delay_levels_ms=(), index_start=None):
    """`dispatch_ref.dispatch_batch` for a prefix of the records: up to CHUNK records, ending
    before a record the reference must read (non-ASCII tags or keys, a schedule-topic message)
    or of a queue past MAX_GROUPS. Then `stop` is None with `pos` short of the end; the caller
    reads that record with `scan_messages` and calls again."""
    if pos < 0 or len(buf) == 0:
        return _py_dispatch_batch(buf, pos, limit, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms,
                                  index_start=index_start)
    cdef const unsigned char[::1] mv = buf
    cdef const unsigned char *b = &mv[0]
    cdef Py_ssize_t n = mv.shape[0], lim = _clamp(limit, mv.shape[0]), stop, k = 0, full, ng = 0
    cdef Py_ssize_t i, g, e = 0, cap = 0, first, j, run_len, c
    cdef bint index = index_start is not None, ok
    cdef int64_t start = index_start if index else 0, run_start
    cdef Rec *recs = <Rec *>malloc(CHUNK * sizeof(Rec))
    cdef Py_ssize_t *nxt = <Py_ssize_t *>malloc(CHUNK * sizeof(Py_ssize_t))
    cdef Group *groups = <Group *>malloc(MAX_GROUPS * sizeof(Group))
    cdef int64_t *entries = NULL
    cdef bytes data
    cdef unsigned char *p
    cdef Rec *r
    cdef list queues = []
    if recs == NULL or nxt == NULL or groups == NULL:
        free(recs)
        free(nxt)
        free(groups)
        raise MemoryError()
    try:
        with nogil:
            stop = scan_run(b, n, pos, lim, verify_crc, recs, CHUNK, &full)
            k = _cut_unhashable(b, recs, full, index)
            k = _group(b, recs, k, groups, &ng, nxt)
            if k < full:
                stop = recs[k].pos
            if index:
                for i in range(k):
                    cap += 2 + recs[i].keys_len // 2 if recs[i].keys_len > 0 else 1
                entries = <int64_t *>malloc((3 * cap + 1) * sizeof(int64_t))
                if entries != NULL:
                    e = _index(b, recs, k, start, entries, entries + cap, entries + 2 * cap)
        if index and entries == NULL:
            raise MemoryError()
        res = None
        if k == full and full < CHUNK and stop < n and stop < lim:
            res = _general(buf, stop, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
            if res.kind is _MESSAGE:
                res = None  # the caller reads it with scan_messages
        for g in range(ng):
            runs = []
            first = groups[g].head
            while first >= 0:
                run_start = recs[first].queue_offset
                run_len = 0
                ok = True
                j = first
                while j >= 0 and recs[j].queue_offset == run_start + run_len:
                    ok = ok and recs[j].phys >= 0
                    run_len += 1
                    j = nxt[j]
                if ok:
                    data = PyBytes_FromStringAndSize(NULL, run_len * UNIT)
                    p = <unsigned char *>PyBytes_AS_STRING(data)
                    for c in range(run_len):
                        r = &recs[first]
                        _put_unit(p, r.phys, r.total, r.tags_code)
                        p += UNIT
                        first = nxt[first]
                else:
                    data = b""
                runs.append((run_start, data))
                first = j
            r = &recs[groups[g].tail]
            queues.append((_text(b, groups[g].topic_pos, groups[g].topic_len), groups[g].queue_id, runs,
                           groups[g].count, r.queue_offset, r.tags_code, r.store_ts))
        if index:
            found = (_int64s(entries, e), _int64s(entries + cap, e), _int64s(entries + 2 * cap, e))
        else:
            found = (array.clone(_Q, 0, False), array.clone(_Q, 0, False), array.clone(_Q, 0, False))
        return stop, res, k, recs[k - 1].store_ts if k else 0, queues, found
    finally:
        free(recs)
        free(nxt)
        free(groups)
        free(entries)
