# Included by _send_fields.pyx: `send_run`, the compiled loop of 5.x SendMessage's group lane
# (`broker/grpc/send_lane.py`) over a run of GROUPED calls, and `ok_answers`, their answers.
#
# `send_run` takes the leading calls of `calls[start:]` that are on its path and returns the index
# of the first it did not take; for each taken call it appends what the lane's per-call Python
# step (`Run.take`, its reference) appends: the `encode_group` entry, the record
# size, the consume-queue key and the message id. Its path is a narrower one than the lane's:
# a GROUPED call (the request still bytes) of `conn`, read by `_read` (the plain encoding), a
# body digest `send.digest_problem` takes (none, as the official Python, Java and Node clients
# send; CRC32 in decimal or hex; MD5 or SHA1 in hex, hashed by hashlib, OpenSSL's; ASCII spellings
# only), a topic `topic_facts` finds writable
# (its `(write queues, sys flag, queue keys)` kept in `facts`), a body within `max_body`, and a
# tag, keys, message id and topic free of the property separators (\x00-\x02 declined too),
# "TIMER_" and "__S" (the lane's DELAY/TIMER checks and the stats' message type then have
# nothing to find). On that path `send_properties(properties_text(...), cluster)` is known in
# advance: the text's properties in their order (an empty tag or keys dropped), CLUSTER last, so
# it is written here directly. A queue is drawn as `rng.randrange(write queues)` draws it: for
# a plain `random.Random`, `getrandbits(bit_length(n))` until below n (CPython's `_randbelow`),
# the same draws without the Python frames; for another generator, its `randrange`. Any other
# call ends the run here and goes through the Python step, which takes it or ends the lane's
# run; so the order of records and answers is the arrival order either way.

import random as _random
from hashlib import md5 as _md5, sha1 as _sha1

cdef type _PLAIN_RANDOM = _random.Random
cdef Py_ssize_t _PROPS_STACK = 4096  # properties written on the stack; longer ones: the Python step
cdef int64_t _SECONDS_MAX = 9223372036854772  # |seconds * 1000 + nanos // 10**6| within Java's long


cdef inline bint _plain(const unsigned char *s, Py_ssize_t n) noexcept:
    """No byte below 3 (the separators), no "TIMER_", no "__S"."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(n):
        c = s[i]
        if c < 3:
            return False
        if c == 84 and i + 6 <= n and memcmp(s + i, b"TIMER_", 6) == 0:
            return False
        if c == 95 and i + 3 <= n and s[i + 1] == 95 and s[i + 2] == 83:
            return False
    return True


cdef inline Py_ssize_t _put(char *out, Py_ssize_t at, const void *src, Py_ssize_t n) noexcept:
    memcpy(out + at, src, n)
    return at + n


cdef inline Py_ssize_t _bit_length(uint64_t n) noexcept:
    cdef Py_ssize_t k = 0
    while n:
        n >>= 1
        k += 1
    return k


cdef Py_ssize_t _keys_joined(const unsigned char *p, _Fields *f) noexcept:
    """The length of `" ".join(keys)`; -1 when a key is not `_plain`."""
    cdef Py_ssize_t k, joined = f.nkeys - 1 if f.nkeys else 0
    for k in range(f.nkeys):
        if not _plain(p + f.key_at[k], f.key_len[k]):
            return -1
        joined += f.key_len[k]
    return joined


def send_run(list calls, Py_ssize_t start, conn, dict facts, topic_facts, str cluster, Py_ssize_t head,
             Py_ssize_t max_size, Py_ssize_t max_body, Py_ssize_t max_props, rng, list entries,
             list sizes, list keys, list ids):
    cdef _Fields f
    cdef char props[4096]
    cdef const char *cl
    cdef const char *last_p = NULL
    cdef Py_ssize_t cn, i, k, at, size, n = len(calls), last_n = 0, joined, wq, qid, bits
    cdef const unsigned char *p
    cdef int64_t q, born
    cdef object topic = None, state = None
    cl = _utf8_or_null(cluster, &cn)
    if cl == NULL or cn == 0 or not _plain(<const unsigned char *>cl, cn):
        return start
    draw = rng.getrandbits if type(rng) is _PLAIN_RANDOM else None
    i = start
    while i < n:
        item = <tuple>calls[i]
        request = item[0]
        if type(request) is not bytes or item[1].conn is not conn:
            break
        p = <const unsigned char *>PyBytes_AS_STRING(request)
        if _read(p, PyBytes_GET_SIZE(request), &f) != 1 or f.body_len > max_body:
            break
        body = PyBytes_FromStringAndSize(<const char *>p + f.body_at, f.body_len) if f.body_at >= 0 else b""
        if not f.digest_ok and not (
            (f.digest_type == MD5 or f.digest_type == SHA1) and f.sum_len
            and _hex_matches(p + f.sum_at, f.sum_len, (_md5 if f.digest_type == MD5 else _sha1)(body).digest())
        ):
            break
        if f.topic_len == 0:
            break
        if last_p == NULL or f.topic_len != last_n or memcmp(last_p, p + f.topic_at, last_n) != 0:
            topic = _decode(p, f.topic_at, f.topic_len)
            state = facts.get(topic)
            if state is None:
                state = topic_facts(topic)
                if state is None:
                    break
            last_p = _utf8_or_null(topic, &last_n)
            if last_p == NULL:
                break
        if f.seconds > _SECONDS_MAX or f.seconds < -_SECONDS_MAX:
            break
        q = f.nanos // 1000000  # (cdivision: C's quotient, made Python's floor below)
        if f.nanos < 0 and q * 1000000 != f.nanos:
            q -= 1
        born = f.seconds * 1000 + q
        # the properties `send_properties(properties_text(...), cluster)` gives
        if not (_plain(p + f.id_at, f.id_len) and _plain(p + f.topic_at, f.topic_len)):
            break
        size = 8 + 1 + f.id_len + 8 + f.topic_len + 9 + cn  # UNIQ_KEY, PGROUP, CLUSTER
        if f.tag_at >= 0 and f.tag_len:
            if not _plain(p + f.tag_at, f.tag_len):
                break
            size += 6 + f.tag_len
        joined = _keys_joined(p, &f)
        if joined < 0:
            break
        if joined:
            size += 6 + joined
        if size > max_props or size > _PROPS_STACK:
            break
        at = 0
        if f.tag_at >= 0 and f.tag_len:
            at = _put(props, at, b"TAGS\x01", 5)
            at = _put(props, at, p + f.tag_at, f.tag_len)
            at = _put(props, at, b"\x02", 1)
        if joined:
            at = _put(props, at, b"KEYS\x01", 5)
            for k in range(f.nkeys):
                if k:
                    at = _put(props, at, b" ", 1)
                at = _put(props, at, p + f.key_at[k], f.key_len[k])
            at = _put(props, at, b"\x02", 1)
        at = _put(props, at, b"UNIQ_KEY\x01", 9)
        at = _put(props, at, p + f.id_at, f.id_len)
        at = _put(props, at, b"\x02PGROUP\x01", 8)
        at = _put(props, at, p + f.topic_at, f.topic_len)
        at = _put(props, at, b"\x02CLUSTER\x01", 9)
        at = _put(props, at, cl, cn)
        size = head + f.body_len + f.topic_len + at
        if size > max_size:
            break
        # taken: from here on nothing refuses it
        wq = (<tuple>state)[0]
        if draw is not None:
            bits = _bit_length(<uint64_t>wq)
            qid = draw(bits)
            while qid >= wq:
                qid = draw(bits)
        else:
            qid = rng.randrange(wq)
        qkeys = (<tuple>state)[2]
        entries.append((
            topic,
            body,
            PyUnicode_DecodeUTF8(props, at, NULL),
            qid, 0, (<tuple>state)[1], born, 0,
        ))
        sizes.append(size)
        keys.append((<tuple>qkeys)[qid] if qid < len(<tuple>qkeys) else f"{topic}-{qid}")
        ids.append(_decode(p, f.id_at, f.id_len))
        i += 1
    return i


def ok_answers(list ids, list offsets):
    """`[ok_answer(ids[k], offsets[k]) ...]` for as many offsets as there are."""
    cdef Py_ssize_t k, n = len(offsets)
    cdef Py_ssize_t size
    cdef const char *mid
    out = []
    for k in range(n):
        mid = _utf8_or_null(ids[k], &size)
        if mid == NULL:
            raise UnicodeEncodeError("utf-8", ids[k], 0, 1, "no UTF-8 form")
        out.append(_answer(mid, size, offsets[k]))
    return out
