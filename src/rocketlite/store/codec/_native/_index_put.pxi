# Included by _dispatch.pyx: index entries written into an index file's mapping in one call, as
# repeated `IndexFile.put_hash` calls would write them (reference: `dispatch_ref.index_put`).
# Per entry: its slot's old value, kept as the entry's prevIndex when it names an earlier entry
# (else 0, and one more slot in use), the 20-byte entry, and the slot pointed at the entry.


def index_put(mm, Py_ssize_t slot_base, int64_t slot_num, Py_ssize_t entry_base, int64_t count,
              int64_t index_num, int64_t begin_ts, array.array hashes, array.array offsets,
              array.array stamps, Py_ssize_t start):
    cdef unsigned char[::1] m = mm
    cdef Py_ssize_t n = len(hashes), i, put
    cdef const long long *h
    cdef const long long *o
    cdef const long long *t
    cdef unsigned char *slot_at
    cdef unsigned char *entry_at
    cdef int64_t slot, old, diff, new_slots = 0
    if hashes.ob_descr.typecode != b'q' or offsets.ob_descr.typecode != b'q' \
            or stamps.ob_descr.typecode != b'q':
        raise TypeError("index_put takes array('q') of hashes, offsets and stamps")
    if len(offsets) != n or len(stamps) != n or not 0 <= start <= n or slot_num <= 0 or count < 0:
        raise ValueError("index_put: arrays of different lengths, or a bad start, slot count or count")
    put = min(n - start, index_num - count)
    if put <= 0:
        return 0, 0
    if slot_base < 0 or entry_base < 0 or slot_base + slot_num * 4 > m.shape[0] \
            or entry_base + (count + put) * 20 > m.shape[0]:
        raise ValueError("index_put: slots or entries past the end of the mapping")
    h = hashes.data.as_longlongs + start
    o = offsets.data.as_longlongs + start
    t = stamps.data.as_longlongs + start
    with nogil:
        for i in range(put):
            slot = h[i] % slot_num
            if slot < 0:
                slot += slot_num  # Python's modulo: the slot of a negative hash
            slot_at = &m[slot_base + slot * 4]
            old = _get32(slot_at)
            if old <= 0 or old >= count:
                old = 0
                new_slots += 1
            diff = 0
            if begin_ts > 0 and t[i] > begin_ts:
                diff = (t[i] - begin_ts) // 1000
                if diff > 0x7FFFFFFF:
                    diff = 0x7FFFFFFF
            entry_at = &m[entry_base + count * 20]
            _put32(entry_at, <uint32_t>h[i])
            _put64(entry_at + 4, <uint64_t>o[i])
            _put32(entry_at + 12, <uint32_t>diff)
            _put32(entry_at + 16, <uint32_t>old)
            _put32(slot_at, <uint32_t>count)
            count += 1
    return put, new_slots
