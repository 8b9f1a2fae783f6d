"""A gRPC server on the caller's event loop over the compiled HTTP/2 core (`_native/_h2.pyx`,
libnghttp2): no thread of its own, no hop per call. Each connection is an asyncio Protocol that
feeds what it reads to its `H2Session`, starts a task per request, and writes what the session has
to send once per read batch (and once per loop turn for answers completed in between).

A method is served by path (`/package.Service/Method`) as one of three shapes, the ones grpc.aio's
handlers have: unary (`handler(request, context)` returns the answer), server streaming (an async
generator of answers; a list it yields is a batch, written in one step) and bidirectional
(`handler(requests, context)`, requests an async iterator). The handler's `context` is a
`CallContext`: `peer()`, `invocation_metadata()`, `abort(code, details)` and `time_remaining()`
(the `grpc-timeout` header), as grpc.aio's.

An error in a handler answers UNKNOWN with the exception named, as grpc does; a client that resets
its stream or drops the connection cancels the call's task; garbage on the connection ends it with
GOAWAY. A request message sent compressed is inflated by the call's `grpc-encoding` (`gzip`,
`deflate`), within the same size limit as an uncompressed one; answers are not compressed (a
server may answer `identity` whatever the client accepts). A connection with no call open for
`idle` seconds is ended with GOAWAY (NO_ERROR), as grpc's `maxConnectionIdle` does: a client that
vanished without closing its socket is let go.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Final, Literal

from rocketlite.remoting.h2._native._h2 import (
    BAD,
    CLOSED,
    COMPRESSED,
    END,
    GROUPED,
    HEADERS,
    MESSAGE,
    H2Error,
    H2Session,
)
from rocketlite.remoting.h2.group import GroupHandler, serve_grouped
from rocketlite.remoting.h2.headers import Parsed, parse_headers, timeout_seconds
from rocketlite.remoting.h2.status import (
    DEADLINE_EXCEEDED,
    INTERNAL,
    OK,
    RESOURCE_EXHAUSTED,
    UNIMPLEMENTED,
    UNKNOWN,
)

log = logging.getLogger("rocketlite.remoting.h2")

Shape = Literal["unary", "server_stream", "bidi"]


MAX_PARSED: Final = 256  # distinct header lists remembered per connection


# grpc-encoding -> zlib's wbits for it: gzip is RFC 1952, gRPC's "deflate" is zlib's RFC 1950
ENCODINGS: Final = {b"gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}


@dataclass(frozen=True, slots=True)
class Method:
    """One served RPC: its shape, the request parser, the answer serializer, the handler."""

    shape: Shape
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]
    handler: Callable[..., Any]
    # unary only: serves a run of this method's calls whose requests ended in one read (see
    # `group.py`); None: each call on its own
    group: GroupHandler | None = None


class AbortError(Exception):
    """Raised by `CallContext.abort`: the call ends with this status."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def status_value(code: Any) -> int:
    """A grpc `StatusCode` (its value is `(int, name)`) or a plain int."""
    value = getattr(code, "value", code)
    return int(value[0] if isinstance(value, tuple) else value)


class CallContext:
    """What a handler may ask of its call (the subset of grpc.aio's ServicerContext rocketlite
    uses)."""

    __slots__ = ("_deadline", "_loop", "_metadata", "_peer")

    def __init__(
        self,
        peer: str,
        metadata: tuple[tuple[str, str | bytes], ...],
        deadline: float | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._peer = peer
        self._metadata = metadata
        self._deadline = deadline
        self._loop = loop

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._loop.time())

    async def abort(self, code: Any, details: str = "") -> None:
        raise AbortError(status_value(code), details)


class _Call:
    __slots__ = ("done", "encoding", "method", "requests", "task", "timer")

    def __init__(self, method: Method, encoding: bytes | None) -> None:
        self.method = method
        self.encoding = encoding  # grpc-encoding of its compressed request messages
        self.requests: asyncio.Queue[Any] | None = None  # bidi: decoded requests, None at the end
        self.task: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None  # the deadline's
        self.done = False

    def end(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class _Unary:
    """A unary or server-streaming request being read: its one message, then END."""

    __slots__ = ("context", "message", "method")

    def __init__(self, method: Method, context: CallContext) -> None:
        self.method = method
        self.context = context
        self.message: bytes | None = None


class GrpcConnection(asyncio.Protocol):
    """One client connection; `server.methods` serves its calls."""

    def __init__(self, methods: dict[bytes, Method], max_message: int, idle: float | None = None) -> None:
        self.methods = methods
        self.session = H2Session(max_message)
        self.max_message = max_message
        self.idle = idle
        self.idle_since = 0.0  # loop time at which the last call closed
        self.idle_timer: asyncio.TimerHandle | None = None
        self.transport: Any = None
        self.peer = ""
        self.loop = asyncio.get_running_loop()
        self.calls: dict[int, _Call] = {}
        self.pending: dict[int, _Unary] = {}
        self.flush_scheduled = False
        self.parsed: dict[tuple[tuple[bytes, bytes], ...], Parsed] = {}
        # this read's calls for `Method.group`: (stream id, call, request, context), or, for a call
        # the session reported GROUPED, (stream id, None, (path, message, headers), None)
        self.grouped: list[tuple[int, _Call | None, Any, CallContext | None]] = []
        self.gone: set[int] = set()  # streams closed in this read (GROUPED calls reset meanwhile)
        self.session.set_grouped({path for path, method in methods.items() if method.group is not None})

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        address = transport.get_extra_info("peername")
        if isinstance(address, tuple):
            host = address[0]
            self.peer = f"ipv6:[{host}]:{address[1]}" if ":" in host else f"ipv4:{host}:{address[1]}"
        if self.idle is not None:
            self.idle_since = self.loop.time()
            self.idle_timer = self.loop.call_later(self.idle, self._idle_check)
        self.flush()

    def data_received(self, data: bytes) -> None:
        self.flush_scheduled = True  # the answers made now go out in the flush below
        try:
            events = self.session.receive(data)
        except H2Error as exc:
            log.debug("gRPC connection %s: HTTP/2 error, closing: %s", self.peer, exc)
            self.flush()
            self.transport.close()
            return
        grouped = self.grouped
        for kind, stream_id, value in events:
            if kind == GROUPED:  # (first: a busy producer's calls are mostly these)
                grouped.append((stream_id, None, value, None))
            elif kind == MESSAGE:
                self._message(stream_id, value)
            elif kind == HEADERS:
                self._headers(stream_id, value)
            elif kind == END:
                self._end(stream_id)
            elif kind == CLOSED:
                self._closed(stream_id)
                if self.grouped:
                    self.gone.add(stream_id)
            elif kind == COMPRESSED:
                self._compressed(stream_id, value)
            elif kind == BAD:
                self._fail(stream_id, RESOURCE_EXHAUSTED if "exceeds" in value else UNIMPLEMENTED, value)
        if self.grouped:
            serve_grouped(self)
            self.gone.clear()
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None
        for call in self.calls.values():
            call.end()
            if call.task is not None and not call.task.done():
                call.task.cancel()
        self.calls.clear()
        self.pending.clear()

    # -- requests --------------------------------------------------------------------------

    def _headers(self, stream_id: int, headers: list[tuple[bytes, bytes]]) -> None:
        opened = self.open_call(stream_id, headers)
        if opened is None:
            return
        call, context = opened
        if call.method.shape == "bidi":
            call.requests = asyncio.Queue()
            call.task = self.loop.create_task(self._bidi(stream_id, call, context))
        else:
            self.pending[stream_id] = _Unary(call.method, context)

    def open_call(
        self, stream_id: int, headers: list[tuple[bytes, bytes]]
    ) -> tuple[_Call, CallContext] | None:
        """A request's call and context from its header list, its deadline timer set (None: no
        such method, answered UNIMPLEMENTED)."""
        (path, metadata, encoding), timeout = self.parse(headers)
        deadline: float | None = None
        if timeout is not None:
            seconds = timeout_seconds(timeout)
            if seconds is not None:
                deadline = self.loop.time() + seconds
        method = self.methods.get(path)
        if method is None:
            self.session.finish(stream_id, UNIMPLEMENTED, f"Method not found: {path.decode('latin-1')}")
            return None
        context = CallContext(self.peer, metadata, deadline, self.loop)
        call = self.calls[stream_id] = _Call(method, encoding)
        if deadline is not None:
            call.timer = self.loop.call_at(deadline, self._expire, stream_id, call)
        return call, context

    def parse(self, headers: list[tuple[bytes, bytes]]) -> tuple[Parsed, bytes | None]:
        """A header list parsed (`parse_headers`), and its `grpc-timeout` (None: none).

        HPACK hands a client's calls the same fields every time (a deadline's `grpc-timeout`
        aside): the path and metadata are parsed once per distinct header list and connection."""
        timeout: bytes | None = None
        key: list[tuple[bytes, bytes]] = []
        for field in headers:
            if field[0] == b"grpc-timeout":
                timeout = field[1]
            else:
                key.append(field)
        fields = tuple(key)
        parsed = self.parsed.get(fields)
        if parsed is None:
            if len(self.parsed) >= MAX_PARSED:
                self.parsed.clear()
            parsed = self.parsed[fields] = parse_headers(fields)
        return parsed, timeout

    def _message(self, stream_id: int, payload: bytes) -> None:
        call = self.calls.get(stream_id)
        if call is None:
            return
        if call.requests is not None:
            try:
                call.requests.put_nowait(call.method.decode(payload))
            except Exception as exc:  # an undecodable request ends the call
                self._fail(stream_id, INTERNAL, f"cannot parse the request: {exc}")
            return
        unary = self.pending.get(stream_id)
        if unary is not None:
            if unary.message is not None:
                self._fail(stream_id, UNIMPLEMENTED, "more than one request message on a unary call")
            else:
                unary.message = payload

    def _compressed(self, stream_id: int, data: bytes) -> None:
        """A compressed request message, inflated by its call's grpc-encoding (at most
        `max_message` bytes out: a small message must not inflate into a huge one)."""
        call = self.calls.get(stream_id)
        if call is None:
            return
        wbits = ENCODINGS.get(call.encoding or b"")
        if wbits is None:
            if call.encoding in (None, b"identity"):  # the gRPC spec's answer: INTERNAL
                self._fail(stream_id, INTERNAL, "a compressed message without a grpc-encoding")
            else:
                name = (call.encoding or b"").decode("latin-1")
                self._fail(stream_id, UNIMPLEMENTED, f"grpc-encoding {name} is not served (gzip, deflate)")
            return
        limit = self.max_message
        inflater = zlib.decompressobj(wbits)
        try:
            payload = inflater.decompress(data, limit + 1)
        except zlib.error as exc:
            self._fail(stream_id, INTERNAL, f"cannot decompress the request ({call.encoding!r}): {exc}")
            return
        if len(payload) > limit:
            self._fail(stream_id, RESOURCE_EXHAUSTED, f"decompressed message exceeds the limit of {limit}")
            return
        self._message(stream_id, payload)

    def _end(self, stream_id: int) -> None:
        call = self.calls.get(stream_id)
        if call is None:
            return
        if call.requests is not None:
            call.requests.put_nowait(None)
            return
        unary = self.pending.pop(stream_id, None)
        if unary is None:
            return
        if unary.message is None:
            self._fail(stream_id, UNIMPLEMENTED, "no request message on a unary call")
            return
        try:
            request = unary.method.decode(unary.message)
        except Exception as exc:
            self._fail(stream_id, INTERNAL, f"cannot parse the request: {exc}")
            return
        if unary.method.group is not None:
            self.grouped.append((stream_id, call, request, unary.context))
        elif unary.method.shape == "unary":
            self._start(call, self._run(stream_id, call, call.method.handler(request, unary.context)))
        else:  # a server stream too: a Task only once it waits (a receive that finds messages does not)
            self._start(call, self._stream(stream_id, call, request, unary.context))

    def _closed(self, stream_id: int) -> None:
        """The stream is gone (answered, or reset by the client): a running call is cancelled."""
        self.pending.pop(stream_id, None)
        call = self.calls.pop(stream_id, None)
        if call is not None:
            running = not call.done
            call.end()
            if running and call.task is not None:
                call.task.cancel()
            if not self.calls:
                self.idle_since = self.loop.time()

    def _idle_check(self) -> None:
        """One timer per connection, not one per call: it looks at when the last call closed and
        either ends the connection or comes back when the idle time would be up."""
        self.idle_timer = None
        transport = self.transport
        if self.idle is None or transport is None or transport.is_closing():
            return
        wait = self.idle
        if not self.calls:
            wait = self.idle_since + self.idle - self.loop.time()
            if wait <= 0:
                log.debug("gRPC connection %s: no call for %.3f s, ending it (GOAWAY)", self.peer, self.idle)
                self.session.terminate()
                self.flush()  # the GOAWAY goes out, and the closed session closes the transport
                return
        self.idle_timer = self.loop.call_later(wait, self._idle_check)

    def _expire(self, stream_id: int, call: _Call) -> None:
        if self.calls.get(stream_id) is call and not call.done:
            self._fail(stream_id, DEADLINE_EXCEEDED, "Deadline Exceeded")
            self.schedule_flush()

    def _fail(self, stream_id: int, status: int, message: str) -> None:
        call = self.calls.get(stream_id)
        self.pending.pop(stream_id, None)
        if call is not None:
            call.end()
            if call.task is not None and not call.task.done():
                call.task.cancel()
        self.session.finish(stream_id, status, message)

    # -- answers ---------------------------------------------------------------------------

    def _answer(self, stream_id: int, call: _Call, answer: Any) -> None:
        """An answer written to its stream; a list (a streaming handler's batch) is written
        answer after answer in one call to the session."""
        if not call.done:
            encode = call.method.encode
            if isinstance(answer, list):
                self.session.send_messages(stream_id, [encode(item) for item in answer])
            else:
                self.session.send_message(stream_id, encode(answer))
            self.schedule_flush()

    def _finish(self, stream_id: int, call: _Call, status: int, message: str = "") -> None:
        if not call.done:
            call.end()
            self.session.finish(stream_id, status, message)
            self.schedule_flush()

    async def _run(self, stream_id: int, call: _Call, body: Any) -> None:
        """Await a call's handler (a unary one returns its answer; a streaming one's body sends
        its own and returns None) and end the call with its status."""
        try:
            answer = await body
            if answer is not None:
                self._answer(stream_id, call, answer)
        except AbortError as exc:
            self._finish(stream_id, call, exc.code, exc.details)
        except asyncio.CancelledError:
            call.end()
            raise
        except Exception as exc:
            log.exception("gRPC call %s failed", stream_id)
            self._finish(stream_id, call, UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
        else:
            self._finish(stream_id, call, OK)

    def _start(self, call: _Call, body: Coroutine[Any, Any, None]) -> None:
        """Runs a unary or server-streaming call at once, in this loop turn: most handlers answer
        without waiting, and those need no Task. One that waits continues in a Task from where
        it stopped."""
        try:
            waiting = body.send(None)
        except StopIteration:
            return
        except asyncio.CancelledError:  # (`_run` ended the call)
            return
        call.task = self.loop.create_task(_resumed(body, waiting))

    async def _stream(self, stream_id: int, call: _Call, request: Any, context: CallContext) -> None:
        async def body() -> None:
            async for answer in call.method.handler(request, context):
                self._answer(stream_id, call, answer)

        await self._run(stream_id, call, body())

    async def _bidi(self, stream_id: int, call: _Call, context: CallContext) -> None:
        queue = call.requests
        assert queue is not None

        async def requests() -> AsyncIterator[Any]:
            while (request := await queue.get()) is not None:
                yield request

        async def body() -> None:
            async for answer in call.method.handler(requests(), context):
                self._answer(stream_id, call, answer)

        await self._run(stream_id, call, body())

    # -- writing ---------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        """Answers completed within one loop turn go out in one write."""
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        try:
            out = self.session.send()
        except H2Error as exc:
            log.debug("gRPC connection %s: %s", self.peer, exc)
            transport.close()
            return
        if out:
            transport.write(out)
        for kind, stream_id, _ in self.session.take_events():
            if kind == CLOSED:  # answered: the stream closed as its end went out
                self._closed(stream_id)
        if not self.session.open:
            transport.close()


async def _resumed(body: Coroutine[Any, Any, None], waiting: Any) -> None:
    """The rest of a coroutine started outside a Task, which stopped on `waiting`."""
    await _Continue(body, waiting)


class _Continue:
    """Awaiting it hands the Task what `body` waits on, then sends what comes back (a result or
    the Task's cancellation) into `body` until it returns."""

    __slots__ = ("body", "waiting")

    def __init__(self, body: Coroutine[Any, Any, None], waiting: Any) -> None:
        self.body = body
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, None]:
        body, waiting = self.body, self.waiting
        while True:
            try:
                value = yield waiting
            except GeneratorExit:
                body.close()
                raise
            except BaseException as exc:
                try:
                    waiting = body.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                waiting = body.send(value)
            except StopIteration:
                return


class H2GrpcServer:
    """Listens on `host:port` (0: a free port, see `port`) and serves `methods` by path; TLS when
    given an `ssl.SSLContext` (ALPN h2)."""

    def __init__(self, methods: dict[str, Method], *, max_message: int, idle: float | None = None) -> None:
        self.methods = {path.encode(): method for path, method in methods.items()}
        self.max_message = max_message
        self.idle = idle  # seconds without a call after which a connection is ended; None: never
        self.server: asyncio.Server | None = None
        self.port = 0
        self.connections: set[GrpcConnection] = set()

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        loop = asyncio.get_running_loop()
        if tls is not None:
            tls.set_alpn_protocols(["h2"])
        self.server = await loop.create_server(self._connection, host, port, ssl=tls, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    def _connection(self) -> GrpcConnection:
        return _TrackedConnection(self.methods, self.max_message, self.idle, self.connections)

    async def close(self) -> None:
        if self.server is None:
            return
        self.server.close()
        for connection in list(self.connections):
            connection.session.terminate()
            connection.flush()
            if connection.transport is not None:
                connection.transport.close()
        await self.server.wait_closed()
        self.server = None


class _TrackedConnection(GrpcConnection):
    def __init__(
        self, methods: dict[bytes, Method], max_message: int, idle: float | None, into: set[GrpcConnection]
    ) -> None:
        super().__init__(methods, max_message, idle)
        self._into = into
        into.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._into.discard(self)
        super().connection_lost(exc)
