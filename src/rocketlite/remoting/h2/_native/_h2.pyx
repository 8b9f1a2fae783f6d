# cython: language_level=3
"""A gRPC server connection's HTTP/2 state: libnghttp2's server session, fed with bytes and drained
of bytes (`nghttp2_session_mem_recv` / `nghttp2_session_mem_send`: no socket in C), so the
connection's asyncio protocol owns all I/O. HPACK, flow control, SETTINGS, PING, GOAWAY and the
validation of the HTTP/2 messaging rules are nghttp2's; this module adds gRPC's framing on top.

`receive(data)` returns the events of that read (and any `send()` raised before), in order, as
tuples `(kind, stream_id, value)`:

- `HEADERS`: a request opened; value is its header list `[(name, value), ...]` (bytes; a field
  equal to the one at its place in the previous request's list is that same tuple);
- `MESSAGE`: one whole gRPC message of that stream (its protobuf bytes);
- `COMPRESSED`: one whole gRPC message sent compressed (its compressed bytes, as they came: the
  caller decompresses them by the stream's `grpc-encoding`);
- `END`: the client half-closed the stream (END_STREAM);
- `CLOSED`: the stream is gone (value: the HTTP/2 error code, 0 on a clean close, 8 CANCEL...);
- `BAD`: the stream's gRPC framing is unusable (value says why: a compressed flag other than 0
  or 1, or a message larger than `max_message`); the caller finishes the stream with an error
  status.
- `GROUPED`: a whole plain call of a grouped path (`set_grouped`), ended in this read; value is
  `(path, message, headers)`. It replaces the call's HEADERS, MESSAGE and END events.

Grouped paths (`set_grouped`) are unary methods whose calls the caller serves together, answered
with `answer_ok`. A call of such a path is held back (its HEADERS not reported) while it stays
plain: `content-type` `application/grpc` or `application/grpc+proto`, a `grpc-timeout` that
parses and is not zero when there is one, one message, not compressed. If its END comes in the
same read, it is reported as one `GROUPED` event; otherwise (anything unusual, or the read ends
first) its HEADERS and MESSAGE are reported then, in order, and it goes the ordinary way. A held
call reset before its END is dropped unseen, and a call answered with `answer_ok` reports no
CLOSED.

A protocol error raises `H2Error`; the session has then queued GOAWAY, which `send()` returns.

A gRPC message frame, in both directions (the DATA payload of a stream is a sequence of them, split
across DATA frames anyhow):

    offset 0  u8      compressed flag (0: not compressed; 1: compressed by the grpc-encoding)
    offset 1  u32 BE  length N of the message
    offset 5  N bytes the serialized protobuf message

A response is HEADERS (`:status 200`, `content-type application/grpc`), then its messages as DATA,
then trailers: a HEADERS frame with END_STREAM carrying `grpc-status` (the decimal status code, 0
OK) and, when there is one, `grpc-message` (percent-encoded UTF-8). A call that ends before any
message is answered "trailers only": one HEADERS frame with `:status`, `content-type` and the
`grpc-status`/`grpc-message` pair, and END_STREAM.

Messages are written with `send_message` into the stream's buffer, which nghttp2 drains through a
data provider as flow control allows; an empty buffer answers NGHTTP2_ERR_DEFERRED and the next
`send_message` or `finish` resumes the stream.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.string cimport memcmp, memcpy

include "_nghttp2.pxi"  # the libnghttp2 API used here


HEADERS = 1
MESSAGE = 2
END = 3
CLOSED = 4
BAD = 5
COMPRESSED = 6
GROUPED = 7

NO_ERROR = NGHTTP2_NO_ERROR
PROTOCOL_ERROR = NGHTTP2_PROTOCOL_ERROR
INTERNAL_ERROR = NGHTTP2_INTERNAL_ERROR
CANCEL = NGHTTP2_CANCEL

DEF WINDOW = 1 << 24  # per stream and per connection: a broker reads whatever a client sends
DEF MAX_STREAMS = 1000
DEF MAX_HEADER_LIST = 16384
DEF MAX_FIELDS = 8  # header fields of one answer: `:status`, `content-type`, the trailers


class H2Error(Exception):
    """The peer broke HTTP/2 (nghttp2's reason); the session has queued GOAWAY."""


cdef class _Stream:
    cdef list headers
    cdef bytearray inbuf  # DATA received, not yet a whole gRPC message
    cdef bytearray out  # gRPC frames written, not yet taken by nghttp2
    cdef Py_ssize_t off  # how much of `out` nghttp2 has taken
    cdef bint started  # response HEADERS submitted
    cdef bint finished  # trailers given: sent once `out` is drained
    cdef bint bad  # framing refused: later DATA is dropped
    cdef list trailers
    cdef bint fast  # of a grouped path and plain so far (see the module doc)
    cdef bint held  # HEADERS not reported: on the grouped way
    cdef bint quiet  # answered by `answer_ok`: no CLOSED event
    cdef bint typed  # a gRPC content-type seen
    cdef bytes path
    cdef bytes message  # the held call's message

    def __cinit__(self):
        self.headers = []
        self.inbuf = bytearray()
        self.out = bytearray()
        self.off = 0
        self.started = False
        self.finished = False
        self.bad = False
        self.trailers = None
        self.fast = False
        self.held = False
        self.quiet = False
        self.typed = False
        self.path = None
        self.message = None


cdef list RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
cdef list OK_TRAILERS = [(b"grpc-status", b"0")]


cdef class H2Session:
    """One server connection. Not thread-safe: the connection's event loop calls it."""

    cdef nghttp2_session *session
    cdef dict streams
    cdef list events
    cdef object error  # an exception raised inside a callback, re-raised by receive()
    cdef Py_ssize_t max_message
    cdef nghttp2_data_provider provider
    cdef frozenset grouped  # paths of the grouped methods
    cdef list holding  # stream ids held back in this read
    cdef list last_fields  # the last request's header list: its equal fields are handed out again

    def __cinit__(self, Py_ssize_t max_message=4 * 1024 * 1024 + 1024):
        cdef nghttp2_session_callbacks *callbacks
        cdef nghttp2_settings_entry iv[3]
        self.session = NULL
        self.streams = {}
        self.events = []
        self.error = None
        self.max_message = max_message
        self.grouped = frozenset()
        self.holding = []
        self.last_fields = []
        self.provider.source.ptr = NULL
        self.provider.read_callback = _read_out
        if nghttp2_session_callbacks_new(&callbacks) != 0:
            raise MemoryError()
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, _on_begin_headers)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, _on_header)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, _on_frame_recv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, _on_data_chunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, _on_stream_close)
        rv = nghttp2_session_server_new(&self.session, callbacks, <void *>self)
        nghttp2_session_callbacks_del(callbacks)
        if rv != 0:
            raise MemoryError()
        iv[0].settings_id = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS
        iv[0].value = MAX_STREAMS
        iv[1].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE
        iv[1].value = WINDOW
        iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE
        iv[2].value = MAX_HEADER_LIST
        nghttp2_submit_settings(self.session, NGHTTP2_FLAG_NONE, iv, 3)
        nghttp2_session_set_local_window_size(self.session, NGHTTP2_FLAG_NONE, 0, WINDOW)

    def __dealloc__(self):
        if self.session != NULL:
            nghttp2_session_del(self.session)
            self.session = NULL

    def receive(self, const unsigned char[:] data not None):
        """Feed bytes read from the connection; the events they complete (see the module doc)."""
        cdef ssize_t rv
        if data.shape[0]:
            rv = nghttp2_session_mem_recv(self.session, &data[0], data.shape[0])
        else:
            rv = 0
        if self.holding:
            self._release_held()
        if self.error is not None:
            error, self.error = self.error, None
            nghttp2_session_terminate_session(self.session, NGHTTP2_INTERNAL_ERROR)
            raise error
        if rv < 0:
            nghttp2_session_terminate_session(self.session, NGHTTP2_PROTOCOL_ERROR)
            raise H2Error(nghttp2_strerror(<int>rv).decode())
        events, self.events = self.events, []
        return events

    def set_grouped(self, paths):
        """The paths (bytes) of the unary methods whose plain calls come as GROUPED events."""
        self.grouped = frozenset(paths)

    def answer_ok(self, list stream_ids not None, list payloads not None):
        """Answer GROUPED calls: each stream's one message (serialized), then `grpc-status` 0; a
        stream that is gone is skipped. As `send_message` then `finish(OK)`, without their CLOSED."""
        cdef Py_ssize_t i, n, at, k
        cdef _Stream stream
        cdef bytes payload
        cdef bytearray out
        cdef char *w
        for i in range(len(stream_ids)):
            stream = self.streams.get(stream_ids[i])
            if stream is None or stream.finished or stream.started:
                continue
            payload = payloads[i]
            n = len(payload)
            if n > 0xFFFFFFFF:
                raise OverflowError("a gRPC message is at most 4 GiB")
            out = stream.out
            at = PyByteArray_GET_SIZE(out)
            PyByteArray_Resize(out, at + 5 + n)  # the gRPC message frame, written in place
            w = PyByteArray_AS_STRING(out) + at
            w[0] = 0
            for k in range(4):
                w[1 + k] = <char>((n >> (24 - 8 * k)) & 0xFF)
            memcpy(w + 5, PyBytes_AS_STRING(payload), n)
            stream.started = True
            stream.finished = True
            stream.quiet = True
            stream.trailers = OK_TRAILERS
            self._respond(stream_ids[i], RESPONSE, True)

    def take_events(self):
        """The events that came up while sending (streams that closed once their end went out),
        which `receive` would otherwise return with its own."""
        events, self.events = self.events, []
        return events

    def send(self):
        """Everything nghttp2 has to write now (b"" when nothing); see `take_events`."""
        cdef const uint8_t *chunk
        cdef ssize_t n
        parts = []
        while True:
            n = nghttp2_session_mem_send(self.session, &chunk)
            if n < 0:
                raise H2Error(nghttp2_strerror(<int>n).decode())
            if n == 0:
                break
            parts.append((<const char *>chunk)[:n])
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return b"".join(parts)

    def send_message(self, int32_t stream_id, bytes payload not None):
        """Queue one gRPC message on the stream (the response headers go first, once). False when
        the stream is gone."""
        return self.send_messages(stream_id, [payload])

    def send_messages(self, int32_t stream_id, list payloads not None):
        """`send_message` of each of `payloads` (bytes) in order, with one hand-off to nghttp2: a
        streaming handler's batch (a ReceiveMessage's answers) is one call, not one per answer."""
        cdef _Stream stream = self.streams.get(stream_id)
        cdef Py_ssize_t n
        if stream is None or stream.finished:
            return False
        if not payloads:
            return True
        out = stream.out
        for payload in payloads:
            n = len(<bytes?>payload)
            out.append(0)
            out += n.to_bytes(4, "big")
            out += payload
        if not stream.started:
            stream.started = True
            if not self._respond(stream_id, RESPONSE, True):
                return False
        else:
            nghttp2_session_resume_data(self.session, stream_id)
        return True

    def finish(self, int32_t stream_id, int status, str message=""):
        """End the stream with `grpc-status` (and `grpc-message`), after the queued messages."""
        cdef _Stream stream = self.streams.get(stream_id)
        if stream is None or stream.finished:
            return False
        trailers = [(b"grpc-status", str(status).encode())]
        if message:
            trailers.append((b"grpc-message", _percent_encode(message)))
        stream.finished = True
        if not stream.started:  # trailers only
            stream.started = True
            return self._respond(stream_id, RESPONSE + trailers, False)
        stream.trailers = trailers
        nghttp2_session_resume_data(self.session, stream_id)
        return True

    def reset(self, int32_t stream_id, uint32_t error_code=NGHTTP2_CANCEL):
        """RST_STREAM (the stream's CLOSED event follows)."""
        nghttp2_submit_rst_stream(self.session, NGHTTP2_FLAG_NONE, stream_id, error_code)

    def terminate(self, uint32_t error_code=NGHTTP2_NO_ERROR):
        """GOAWAY: no new streams; `send()` returns it."""
        nghttp2_session_terminate_session(self.session, error_code)

    @property
    def open(self):
        """False once the session wants neither to read nor to write: close the connection."""
        return bool(nghttp2_session_want_read(self.session) or nghttp2_session_want_write(self.session))

    @property
    def stream_count(self):
        return len(self.streams)

    cdef int _unhold(self, int32_t stream_id, _Stream stream) except -1:
        """A held call goes the ordinary way: its HEADERS (and its held message) reported now."""
        stream.held = False
        stream.fast = False
        self.events.append((HEADERS, stream_id, stream.headers))
        stream.headers = []
        if stream.message is not None:
            self.events.append((MESSAGE, stream_id, stream.message))
            stream.message = None
        return 0

    cdef int _release_held(self) except -1:
        """The read is over: calls still held (their END not read yet) go the ordinary way."""
        cdef _Stream stream
        holding, self.holding = self.holding, []
        for sid in holding:
            stream = self.streams.get(sid)
            if stream is not None and stream.held:
                self._unhold(sid, stream)
        return 0

    cdef bint _respond(self, int32_t stream_id, list headers, bint with_data):
        cdef nghttp2_nv nva[MAX_FIELDS]
        cdef Py_ssize_t n = _fill_nv(nva, headers)
        return nghttp2_submit_response(
            self.session, stream_id, nva, n, &self.provider if with_data else NULL) == 0

    cdef int _submit_trailer(self, int32_t stream_id, list trailers):
        cdef nghttp2_nv nva[MAX_FIELDS]
        cdef Py_ssize_t n = _fill_nv(nva, trailers)
        return nghttp2_submit_trailer(self.session, stream_id, nva, n)

    cdef int _data(self, _Stream stream, int32_t stream_id, const uint8_t *data,
                   size_t length) except -1:
        """A DATA chunk: the whole gRPC messages in it are taken from it where they are (most
        messages come in one chunk), the rest kept in the stream's `inbuf` until it completes."""
        cdef Py_ssize_t at
        if stream.bad:
            return 0
        inbuf = stream.inbuf
        if PyByteArray_GET_SIZE(inbuf) == 0:
            at = self._messages(stream, stream_id, data, length)
            if not stream.bad and <size_t>at < length:
                inbuf += (<const char *>data + at)[:length - at]
            return 0
        inbuf += (<const char *>data)[:length]
        at = self._messages(
            stream, stream_id, <const uint8_t *>PyByteArray_AS_STRING(inbuf), PyByteArray_GET_SIZE(inbuf)
        )
        if stream.bad:
            inbuf.clear()
        elif at:
            del inbuf[:at]
        return 0

    cdef Py_ssize_t _messages(self, _Stream stream, int32_t stream_id, const uint8_t *p,
                              Py_ssize_t size) except -1:
        """The whole gRPC messages at the start of `p[:size]` as events (or held); how many
        bytes they took."""
        cdef Py_ssize_t at = 0, n
        while size - at >= 5:
            n = (<Py_ssize_t>p[at + 1] << 24) | (p[at + 2] << 16) | (p[at + 3] << 8) | p[at + 4]
            if stream.held and (p[at] or size - at - 5 >= n and stream.message is not None):
                self._unhold(stream_id, stream)  # compressed, or a second message
            if p[at] > 1:
                stream.bad = True
                self.events.append((BAD, stream_id, f"compressed flag {p[at]} is neither 0 nor 1"))
                break
            if n > self.max_message:
                if stream.held:
                    self._unhold(stream_id, stream)
                stream.bad = True
                self.events.append((BAD, stream_id, f"message of {n} bytes exceeds the limit of {self.max_message}"))
                break
            if size - at - 5 < n:
                break
            message = PyBytes_FromStringAndSize(<const char *>p + at + 5, n)
            if stream.held:
                stream.message = message
            else:
                self.events.append((COMPRESSED if p[at] else MESSAGE, stream_id, message))
            at += 5 + n
        return at


cdef Py_ssize_t _fill_nv(nghttp2_nv *nva, list fields) except -1:
    """Point `nva` at the (name, value) bytes of `fields` (which keep them alive until nghttp2
    has copied them: the submit calls copy); at most MAX_FIELDS."""
    cdef Py_ssize_t i, n = len(fields)
    cdef bytes name, value
    if n > MAX_FIELDS:
        raise ValueError(f"{n} header fields, more than {MAX_FIELDS}")
    for i in range(n):
        name, value = fields[i]
        nva[i].name = <uint8_t *><char *>name
        nva[i].namelen = len(name)
        nva[i].value = <uint8_t *><char *>value
        nva[i].valuelen = len(value)
        nva[i].flags = NGHTTP2_NV_FLAG_NONE
    return n


cdef bint _grpc_content_type(const uint8_t *value, size_t n) noexcept:
    return (n == 16 and memcmp(value, b"application/grpc", 16) == 0) or (
        n == 22 and memcmp(value, b"application/grpc+proto", 22) == 0)


cdef bint _live_timeout(const uint8_t *value, size_t n) noexcept:
    """A grpc-timeout the server reads (1 to 8 digits and a unit) and not zero: a call with none
    that parses, or already past, goes the ordinary way."""
    cdef size_t i
    cdef bint nonzero = False
    if n < 2 or n > 9:
        return False
    for i in range(n - 1):
        if value[i] < 0x30 or value[i] > 0x39:
            return False
        if value[i] != 0x30:
            nonzero = True
    i = value[n - 1]
    return nonzero and (i == 0x48 or i == 0x4D or i == 0x53 or i == 0x6D or i == 0x75 or i == 0x6E)


cdef _percent_encode(str message):
    """grpc-message: printable ASCII but '%' as is, every other byte %XX (of the UTF-8)."""
    out = bytearray()
    for b in message.encode("utf-8", "replace"):
        if 0x20 <= b <= 0x7E and b != 0x25:
            out.append(b)
        else:
            out += b"%%%02X" % b
    return bytes(out)


cdef int _on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    if frame.hd.type == NGHTTP2_HEADERS and frame.headers.cat == NGHTTP2_HCAT_REQUEST:
        try:
            stream = _Stream()
            self.streams[frame.hd.stream_id] = stream  # (which keeps it alive while nghttp2 points at it)
            nghttp2_session_set_stream_user_data(session, frame.hd.stream_id, <void *>stream)
        except BaseException as exc:
            self.error = exc
            return NGHTTP2_ERR_CALLBACK_FAILURE
    return 0


cdef int _on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                    const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    cdef _Stream stream
    if frame.hd.type != NGHTTP2_HEADERS or frame.headers.cat != NGHTTP2_HCAT_REQUEST:
        return 0  # request trailers: nothing in gRPC needs them
    try:
        stream = _stream_of(session, frame.hd.stream_id)
        if stream is not None:
            field = _same_field(self.last_fields, len(stream.headers), name, namelen, value, valuelen)
            if field is None:
                field = ((<const char *>name)[:namelen], (<const char *>value)[:valuelen])
            stream.headers.append(field)
            if namelen == 5 and memcmp(name, b":path", 5) == 0:
                stream.path = field[1]
                stream.fast = self.grouped and stream.path in self.grouped
            elif stream.fast and name[0] != 0x3A:  # (pseudo-headers come first)
                if namelen == 12 and memcmp(name, b"content-type", 12) == 0:
                    stream.typed = _grpc_content_type(value, valuelen)
                    stream.fast = stream.typed
                elif namelen == 12 and memcmp(name, b"grpc-timeout", 12) == 0:
                    if not _live_timeout(value, valuelen):
                        stream.fast = False
    except BaseException as exc:
        self.error = exc
        return NGHTTP2_ERR_CALLBACK_FAILURE
    return 0


cdef inline object _same_field(list last, Py_ssize_t at, const uint8_t *name, size_t namelen,
                               const uint8_t *value, size_t valuelen):
    """The field at `at` of the last request's header list when it is this one (HPACK hands a
    client's calls the same fields, mostly in the same order): that tuple, none made; else None."""
    if at >= len(last):
        return None
    field = <tuple>last[at]
    if _equal(<bytes>field[1], value, valuelen) and _equal(<bytes>field[0], name, namelen):
        return field
    return None


cdef inline bint _equal(bytes b, const uint8_t *s, size_t n):
    return <size_t>PyBytes_GET_SIZE(b) == n and memcmp(PyBytes_AS_STRING(b), s, n) == 0


cdef inline _Stream _stream_of(nghttp2_session *session, int32_t stream_id):
    """A request stream's `_Stream`, without a dict lookup: nghttp2 keeps a pointer to it from
    `_on_begin_headers` to `_on_stream_close` (`streams` holds the reference); None: none."""
    cdef void *found = nghttp2_session_get_stream_user_data(session, stream_id)
    return <_Stream>found if found != NULL else None


cdef int _on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    cdef _Stream stream
    cdef int32_t sid = frame.hd.stream_id
    try:
        if frame.hd.type == NGHTTP2_HEADERS and frame.headers.cat == NGHTTP2_HCAT_REQUEST:
            stream = _stream_of(session, sid)
            if stream is not None:
                self.last_fields = stream.headers
                if stream.fast and stream.typed:
                    stream.held = True
                    self.holding.append(sid)
                else:
                    stream.fast = False
                    self.events.append((HEADERS, sid, stream.headers))
                    stream.headers = []
        if (frame.hd.type == NGHTTP2_HEADERS or frame.hd.type == NGHTTP2_DATA) and (
            frame.hd.flags & NGHTTP2_FLAG_END_STREAM
        ):
            stream = _stream_of(session, sid)
            if stream is not None:
                if stream.held and stream.message is not None and PyByteArray_GET_SIZE(stream.inbuf) == 0:
                    stream.held = False
                    self.events.append((GROUPED, sid, (stream.path, stream.message, stream.headers)))
                    stream.message = None
                    stream.headers = []
                else:
                    if stream.held:
                        self._unhold(sid, stream)
                    self.events.append((END, sid, None))
    except BaseException as exc:
        self.error = exc
        return NGHTTP2_ERR_CALLBACK_FAILURE
    return 0


cdef int _on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                        size_t length, void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    cdef _Stream stream = _stream_of(session, stream_id)
    if stream is None:
        return 0
    try:
        self._data(stream, stream_id, data, length)
    except BaseException as exc:
        self.error = exc
        return NGHTTP2_ERR_CALLBACK_FAILURE
    return 0


cdef int _on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                          void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    cdef _Stream stream
    try:
        nghttp2_session_set_stream_user_data(session, stream_id, NULL)  # (the dict's reference goes now)
        stream = self.streams.pop(stream_id, None)
        if stream is not None and not stream.held and not stream.quiet:
            self.events.append((CLOSED, stream_id, error_code))
    except BaseException as exc:
        self.error = exc
        return NGHTTP2_ERR_CALLBACK_FAILURE
    return 0


cdef ssize_t _read_out(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                       uint32_t *data_flags, nghttp2_data_source *source, void *user_data) noexcept:
    cdef H2Session self = <H2Session>user_data
    cdef _Stream stream
    cdef Py_ssize_t left, n
    try:
        stream = self.streams.get(stream_id)
        if stream is None:
            data_flags[0] |= NGHTTP2_DATA_FLAG_EOF
            return 0
        out = stream.out
        left = PyByteArray_GET_SIZE(out) - stream.off
        n = left if <size_t>left < length else <Py_ssize_t>length
        if n:
            memcpy(buf, PyByteArray_AS_STRING(out) + stream.off, n)
            stream.off += n
            if stream.off == PyByteArray_GET_SIZE(out):
                out.clear()
                stream.off = 0
        if stream.off == 0 and PyByteArray_GET_SIZE(out) == 0:
            if stream.finished:
                data_flags[0] |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM
                if self._submit_trailer(stream_id, stream.trailers) != 0:
                    data_flags[0] &= ~NGHTTP2_DATA_FLAG_NO_END_STREAM
            elif n == 0:
                return NGHTTP2_ERR_DEFERRED
        return n
    except BaseException as exc:
        self.error = exc
        return NGHTTP2_ERR_CALLBACK_FAILURE
