# Included by the compiled modules that rewrite a message's properties string (_send,
# _record's batch path): `name\x01value\x02...` parsed into a small array of (key, value) pointer
# pairs over its UTF-8 bytes, with the map semantics of `message.string_to_properties` (empty
# names or values dropped, a repeated key keeps its first place and takes the last value), edited
# and written back once (`message.properties_to_string`). The separators \x01 and \x02 are ASCII,
# so they never occur inside a multi-byte sequence, and two keys are the same string exactly when
# their UTF-8 bytes are equal. A string with more than `_PROPS_CAP` properties is the caller's to
# hand to the reference (the linear key search would grow quadratically; a dict does not).

from libc.string cimport memchr, memcmp, memcpy

cdef enum:
    _PROPS_CAP = 64  # properties per string held in the array; beyond, the reference


cdef struct _Prop:
    const char* k
    Py_ssize_t kl
    const char* v
    Py_ssize_t vl
    bint live


cdef Py_ssize_t _props_find(_Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl) noexcept:
    cdef Py_ssize_t i
    for i in range(count):
        if props[i].live and props[i].kl == kl and memcmp(props[i].k, k, kl) == 0:
            return i
    return -1


cdef Py_ssize_t _props_parse(const char* s, Py_ssize_t n, _Prop* out, Py_ssize_t cap) noexcept:
    """`string_to_properties` into `out`; the count, or -1 when more than `cap` are needed."""
    cdef Py_ssize_t count = 0, pos = 0, end, kl, vl, i
    cdef const char* hit
    cdef const char* sep
    if n == 0:
        return 0
    while pos <= n:
        hit = <const char*>memchr(s + pos, 2, n - pos)
        end = n if hit == NULL else hit - s
        sep = <const char*>memchr(s + pos, 1, end - pos)
        if sep != NULL:
            kl = sep - (s + pos)
            vl = end - (sep - s) - 1
            if kl > 0 and vl > 0:
                i = _props_find(out, count, s + pos, kl)
                if i >= 0:
                    out[i].v = sep + 1
                    out[i].vl = vl
                else:
                    if count == cap:
                        return -1
                    out[count].k = s + pos
                    out[count].kl = kl
                    out[count].v = sep + 1
                    out[count].vl = vl
                    out[count].live = True
                    count += 1
        pos = end + 1
    return count


cdef inline void _props_drop(_Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl) noexcept:
    cdef Py_ssize_t i = _props_find(props, count, k, kl)
    if i >= 0:
        props[i].live = False


cdef inline Py_ssize_t _props_put(_Prop* props, Py_ssize_t count, const char* k, Py_ssize_t kl,
                                  const char* v, Py_ssize_t vl) noexcept:
    """`props[k] = v` (room for one more is the caller's); the new count."""
    cdef Py_ssize_t i = _props_find(props, count, k, kl)
    if i < 0:
        i = count
        count += 1
        props[i].k = k
        props[i].kl = kl
        props[i].live = True
    props[i].v = v
    props[i].vl = vl
    return count


cdef Py_ssize_t _props_size(_Prop* props, Py_ssize_t count) noexcept:
    """The length of the `properties_to_string` form."""
    cdef Py_ssize_t i, size = 0, live = 0
    for i in range(count):
        if props[i].live:
            size += props[i].kl + 1 + props[i].vl
            live += 1
    return size + live - 1 if live else 0


cdef Py_ssize_t _props_write(_Prop* props, Py_ssize_t count, char* out) noexcept:
    """`properties_to_string` into `out` (sized by `_props_size`); the bytes written."""
    cdef Py_ssize_t i, pos = 0
    cdef bint first = True
    for i in range(count):
        if not props[i].live:
            continue
        if not first:
            out[pos] = 2
            pos += 1
        first = False
        memcpy(out + pos, props[i].k, props[i].kl)
        pos += props[i].kl
        out[pos] = 1
        pos += 1
        memcpy(out + pos, props[i].v, props[i].vl)
        pos += props[i].vl
    return pos
