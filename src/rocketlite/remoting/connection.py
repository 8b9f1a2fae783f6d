"""`Connection`: one TCP connection speaking the remoting protocol, in either direction.

An `asyncio.Protocol` feeds received bytes to the sans-IO `FrameDecoder`. Requests go to a handler
looked up by request code; responses resolve the future waiting under their opaque. Handlers may
answer synchronously (a `RemotingCommand`, its frame already encoded as `bytes`, or None for no
answer) or return an awaitable; the hot
paths (send with ASYNC_FLUSH, pull with data) answer synchronously, so no task is created for them.
Responses produced while handling one `data_received` are joined and written with one `write`
call: one system call, and one buffer for the event loop instead of one per frame (a pull answer
is a single buffer too, its record slices copied out of the store's mappings, which must not stay
pinned by the transport). Frames sent outside `data_received` (answers completing later, such as
SYNC_FLUSH sends; requests we originate) are collected the same way and written together by one
callback at the next turn of the loop, so a burst of them costs one system call too; a caller
that answers several requests in one callback (the dispatch round waking held pulls) brackets
them with `open_output` / `flush_output` and writes at once. `close` writes what is still
pending first. Without a loop (a connection not started by one) every frame is written at once.

Errors: a `RocketliteError` becomes a response with its code and message as remark; any other
exception becomes SYSTEM_ERROR (1), as RocketMQ's server does; one-way requests never get an
answer. A framing error (bad length, bad header) closes the connection: nothing on it can be
trusted any more, and other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

from rocketlite.protocol.codes import CommandFlag, ResponseCode, request_label
from rocketlite.protocol.errors import ProtocolError, RocketliteError
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.frame import LENGTH, FrameDecoder, encode_command
from rocketlite.protocol.wire.frame_codec import peek_code
from rocketlite.remoting.peer import Push, push_command

log = logging.getLogger("rocketlite.remoting")

# Above this many bytes the responses of one batch go to `writelines` as they are, not joined.
JOIN_LIMIT: Final = 1 << 20
# Plain ints of the flag bits: tested once per frame, where an IntFlag operation costs more.
_RESPONSE: Final = int(CommandFlag.RESPONSE)
_ONEWAY: Final = int(CommandFlag.ONEWAY)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
# Flow control: above this many bytes buffered for a peer, stop reading its requests until drained.
WRITE_HIGH_WATER: Final = 16 * 1024 * 1024

# A handler's answer: a command, None (no answer) or an awaitable of either; and on the wire
# (`WireResult`) also `bytes`: the answer already encoded as a whole frame (the send processor's
# common answer, `SendMessageProcessor.handle_wire`), written as it is.
HandlerResult = RemotingCommand | None | Awaitable[RemotingCommand | None]
WireResult = HandlerResult | bytes
Handler = Callable[["Connection", RemotingCommand], WireResult]
# A group handler (`RequestTable.groups`): given the requests of one read and where a run of its
# code starts, it serves the leading ones it can as one (the send processor's coalescing lane),
# sends their answers in order, and says how many it served; 0 leaves the first to the handler.
GroupHandler = Callable[["Connection", list[RemotingCommand], int], int]
# A raw group handler (`RequestTable.raw`): given the bytes of one read (starting at a frame) and a
# position, it serves the leading frames it can straight from the bytes, sends their answers in
# order, and returns the position after the last frame it served (the position given: none).
RawGroupHandler = Callable[["Connection", bytes, int], int]


def chain_raw(handlers: Mapping[int, RawGroupHandler]) -> RawGroupHandler | None:
    """One `RawGroupHandler` over several, by request code (the send lane's and the pull
    lane's): the frame at the position is given to the handler of its code (`peek_code`; each
    handler in turn when the code is not read that way), which serves what it can from there,
    and so on until a frame is not served, so a read mixing their codes is served from its
    bytes in order. None for none."""
    if not handlers:
        return None
    lanes = dict(handlers)
    every = tuple(lanes.values())

    def raw(conn: Connection, src: bytes, pos: int) -> int:
        size = len(src)
        while pos < size and not conn.closed:
            code = peek_code(src, pos)
            at = pos
            if code is None:
                for lane in every:
                    at = lane(conn, src, at)
            else:
                chosen = lanes.get(code)
                if chosen is not None:
                    at = chosen(conn, src, pos)
            if at == pos:
                break
            pos = at
        return pos

    return raw


# Told of every request answered (RocketMQ 5's rpc latency): request code, response code (None for
# a one-way request that got no answer), milliseconds from the request's arrival to its answer
# being queued, whether it was held for long polling, and RocketMQ's `result`: "success" (written),
# "oneway" (an answer a one-way request does not get), "write_channel_failed" (the connection was
# gone), "cancelled".
RequestObserver = Callable[[int, int | None, float, bool, str], None]
RESULT_SUCCESS = "success"
RESULT_ONEWAY = "oneway"
RESULT_WRITE_FAILED = "write_channel_failed"
RESULT_CANCELLED = "cancelled"


class RequestTable:
    """Request code -> handler; `default` answers codes nobody registered (None = stay silent).

    With an `observer` each request's handling time is reported to it: answers returned by the
    handler (at once or awaited) and answers a handler sends itself while it runs (a pull with
    messages). A request held for later (a long-polling pull) is reported by whoever answers it
    (`is_long_polling` true).

    `groups`: request code -> a handler that serves several requests of one read at once
    (`GroupHandler`), tried first for a request of that code when there is no observer. A table
    that wraps another (ACL, auth) has none of its own, so every request there goes through the
    wrapped handler.

    `raw`: a group handler that reads the frames of a read itself (`RawGroupHandler`, the send
    lane's `SendGroupLane.raw`), offered each read first when there is no observer; the frames
    from the first it does not serve on are decoded and served as above."""

    def __init__(self, default: Handler | None = None) -> None:
        self.handlers: dict[int, Handler] = {}
        self.default = default
        self.observer: RequestObserver | None = None
        self.groups: dict[int, GroupHandler] = {}
        self.raw: RawGroupHandler | None = None

    def register(self, code: int, handler: Handler) -> None:
        self.handlers[int(code)] = handler

    def lookup(self, code: int) -> Handler | None:
        return self.handlers.get(code, self.default)


def not_supported(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """The broker's answer to an unknown code: REQUEST_CODE_NOT_SUPPORTED (3)."""
    del conn
    return make_response(
        request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
    )


def error_response(request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    if isinstance(exc, RocketliteError):
        return make_response(request, exc.code, exc.remark)
    return make_response(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """Opaque ids for requests we originate (the Java side uses one counter per process)."""
    return next(_opaque_counter) & 0x7FFFFFFF


class Connection(asyncio.Protocol):
    """One connection; `table` handles incoming requests, `pending` holds our outstanding ones.

    On a server it is the `remoting.peer.Peer` its requests come from: `client_id` is what the
    client's heartbeat named (set by the broker's client manager; "" before), `push` sends it a
    request of the server's own."""

    def __init__(
        self,
        table: RequestTable,
        *,
        on_close: Callable[[Connection], None] | None = None,
        max_frame_length: int = 16 * 1024 * 1024,
    ) -> None:
        self.table = table
        self.decoder = FrameDecoder(max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.close_callbacks: list[Callable[[Connection], None]] = []
        if on_close is not None:
            self.close_callbacks.append(on_close)
        self.remote_address = ""
        self.client_id = ""
        self.local_port = 0
        self.closed = False
        self.last_active = time.monotonic()
        # When the incomplete frame in the decoder started waiting for its rest (0: none). Reset
        # whenever a frame completes, so a busy pipelined stream never looks stalled.
        self.partial_since = 0.0
        self.attrs: dict[str, Any] = {}
        # frames (and the store's slices of pull bodies, `send_gather`) of the data_received batch
        # being handled; frames sent since, for `_flush_later`
        self._out: list[bytes | memoryview] | None = None
        self._later: list[bytes | memoryview] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.write_high_water = WRITE_HIGH_WATER
        self.reading_paused = False
        self.pause_count = 0  # times reading was paused for a slow reader (tests, diagnostics)
        self.lost = False  # connection_lost has run: the transport is gone (TLS shutdown done)
        self.answered_code: int | None = None  # the code of an answer a handler sent itself

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; they have the same interface.
        self.transport = cast(asyncio.Transport, transport)
        self.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        if peer:
            host = peer[0]
            self.remote_address = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
        sock = transport.get_extra_info("sockname")
        if sock:
            self.local_port = int(sock[1])
        self.transport.set_write_buffer_limits(high=self.write_high_water, low=self.write_high_water // 4)

    # -- flow control: a peer that does not read stops being read ---------------------------
    def pause_writing(self) -> None:
        """The transport's buffer passed the high-water mark: read no more requests from the peer."""
        if self.transport is not None and not self.closed and not self.reading_paused:
            self.reading_paused = True
            self.pause_count += 1
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        """Drained below the low-water mark: serve the peer again."""
        if self.reading_paused:
            self.reading_paused = False
            if self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.last_active = now = time.monotonic()
        raw = self.table.raw if self.table.observer is None and not self.closed else None
        out: list[bytes | memoryview] | None = None
        served = 0
        try:
            if raw is None:
                commands = self.decoder.feed(data)
            else:  # the raw lane serves what it can from the bytes; the rest is decoded as usual
                src = self.decoder.join(data if type(data) is bytes else bytes(data))
                commands = []
                if src is not None:
                    out = self._collect()
                    try:
                        served = raw(self, src, 0)
                    except BaseException:
                        self._out = None  # as the handlers' loop below leaves it
                        raise
                    if served < len(src):
                        commands = self.decoder.feed(src[served:] if served else src)
        except ProtocolError as exc:
            log.warning("closing %s: %s", self.remote_address, exc)
            self._out = None
            if out and self.transport is not None and not self.closed:
                self._write_all(self.transport, out)  # the answers of the requests already served
            self.close()
            return
        if not self.decoder.buffered:
            self.partial_since = 0.0
        elif commands or served or not self.partial_since:
            self.partial_since = now
        if not commands and out is None:
            return
        if out is None:
            out = self._collect()
        groups = self.table.groups if self.table.observer is None else None
        try:
            if groups:
                self._handle_grouped(commands, groups)
            else:
                for cmd in commands:
                    if cmd.flag & _RESPONSE:
                        self._resolve(cmd)
                    else:
                        self._handle_request(cmd)
        finally:
            self._out = None
        if out and self.transport is not None and not self.closed:
            self._write_all(self.transport, out)

    def _collect(self) -> list[bytes | memoryview]:
        """Start collecting the answers of one read (frames waiting for `_flush_later` first)."""
        out = self._later or []
        self._later = None
        self._out = out
        return out

    def _resolve(self, response: RemotingCommand) -> None:
        fut = self.pending.pop(response.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(response)

    def _handle_grouped(self, commands: list[RemotingCommand], groups: dict[int, GroupHandler]) -> None:
        """The loop of `data_received` with group handlers: a request whose code has one is
        offered to it with the rest of the read; what it does not serve goes one by one."""
        i, n = 0, len(commands)
        while i < n:
            cmd = commands[i]
            if cmd.flag & _RESPONSE:
                self._resolve(cmd)
                i += 1
                continue
            group = groups.get(cmd.code)
            if group is not None and not self.closed:
                taken = group(self, commands, i)
                if taken:
                    i += taken
                    continue
            self._handle_request(cmd)
            i += 1

    @staticmethod
    def _write_all(transport: asyncio.Transport, out: list[bytes | memoryview]) -> None:
        if len(out) == 1:
            transport.write(out[0])
        elif sum(map(len, out)) <= JOIN_LIMIT:
            transport.write(b"".join(out))
        else:
            transport.writelines(out)

    def _flush_later(self) -> None:
        out = self._later
        self._later = None
        if out and self.transport is not None and not self.closed:
            self._write_all(self.transport, out)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = True
        self._later = None
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to {self.remote_address} closed"))
        self.pending.clear()
        for cb in self.close_callbacks:
            try:
                cb(self)
            except Exception:
                log.exception("close callback failed")

    # -- requests in ------------------------------------------------------------------------
    def _handle_request(self, request: RemotingCommand) -> None:
        handler = self.table.lookup(request.code)
        if handler is None:
            return
        if self.table.observer is not None:
            self._handle_observed(request, handler, self.table.observer)
            return
        try:
            result = handler(self, request)
        except Exception as exc:
            self._log_failure(request, exc)
            if not request.flag & _ONEWAY:
                self.send(error_response(request, exc))
            return
        if type(result) is bytes:  # an encoded answer frame
            if not request.flag & _ONEWAY:
                out = self._out
                if out is not None and not self.closed:
                    out.append(result)
                else:
                    self.send_raw(result)
            return
        if result is None:
            return
        if isinstance(result, RemotingCommand):
            if not request.flag & _ONEWAY:
                out = self._out
                if out is not None and not self.closed:  # inside data_received: `send`, inlined
                    out.append(encode_command(result))
                else:
                    self.send(result)
            return
        task = asyncio.ensure_future(cast(Awaitable[RemotingCommand | None], result))
        task.add_done_callback(lambda t: self._finish(request, t))

    def _handle_observed(self, request: RemotingCommand, handler: Handler, observer: RequestObserver) -> None:
        """`_handle_request` with the handling time reported to `observer`."""
        start = time.perf_counter()
        self.answered_code = None
        oneway = bool(request.flag & _ONEWAY)

        def report(code: int | None, result: str | None = None) -> None:
            if result is None:
                result = RESULT_ONEWAY if oneway else (RESULT_WRITE_FAILED if self.closed else RESULT_SUCCESS)
            observer(request.code, code, (time.perf_counter() - start) * 1000, False, result)

        try:
            result = handler(self, request)
        except Exception as exc:
            self._log_failure(request, exc)
            answer = error_response(request, exc)
            if not oneway:
                self.send(answer)
            report(answer.code)
            return
        if type(result) is bytes or isinstance(result, RemotingCommand):
            code = result.code if isinstance(result, RemotingCommand) else _SUCCESS
            if not oneway:
                if isinstance(result, RemotingCommand):
                    self.send(result)
                else:
                    self.send_raw(result)
            report(code)
            return
        if result is None:
            if self.answered_code is not None:
                report(self.answered_code)
            return
        task = asyncio.ensure_future(cast(Awaitable[RemotingCommand | None], result))

        def done(t: asyncio.Future[RemotingCommand | None]) -> None:
            self._finish(request, t)
            if t.cancelled():
                report(None, RESULT_CANCELLED)
                return
            exc = t.exception()
            if exc is not None:
                report(error_response(request, exc).code)
                return
            answer = t.result()
            if answer is not None:
                report(answer.code)

        task.add_done_callback(done)

    def _finish(self, request: RemotingCommand, task: asyncio.Future[RemotingCommand | None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._log_failure(request, exc)
            if not request.is_oneway:
                self.send(error_response(request, exc))
            return
        response = task.result()
        if response is not None and not request.is_oneway:
            self.send(response)

    @staticmethod
    def _log_failure(request: RemotingCommand, exc: BaseException) -> None:
        if isinstance(exc, RocketliteError):
            log.debug("%s refused: %s", request_label(request.code), exc)
        else:
            log.error("%s failed", request_label(request.code), exc_info=exc)

    # -- writing ----------------------------------------------------------------------------
    def send(self, cmd: RemotingCommand) -> None:
        """Queue `cmd` for writing (batched within one `data_received`, else within one loop turn)."""
        self.send_raw(encode_command(cmd))

    def send_raw(self, data: bytes) -> None:
        if self.closed or self.transport is None:
            return
        if self._out is not None:
            self._out.append(data)
        elif self._later is not None:
            self._later.append(data)
        elif self.loop is not None:
            self._later = [data]
            self.loop.call_soon(self._flush_later)
        else:
            self.transport.write(data)

    def send_gather(self, head: bytes, parts: list[memoryview]) -> None:
        """Queue a frame made of `head` (its prefix and header, the prefix counting the parts) and
        the store's `parts` (the pull lane's answers): inside `data_received` they are queued as
        they are, so the batch's one write is their only copy; elsewhere they are joined now."""
        if self.closed or self.transport is None:
            return
        if self._out is not None:
            self._out.append(head)
            self._out.extend(parts)
        else:
            self.send_raw(b"".join([head, *parts]))

    def open_output(self) -> bool:
        """Collect the frames sent from now on until `flush_output`, as inside `data_received`:
        for a callback that answers this connection's requests itself (a dispatch round waking
        held pulls), so they go out in one write at its end instead of one loop turn later.
        False (nothing to flush) when frames are already being collected or the connection is
        closed."""
        if self._out is not None or self.closed or self.transport is None:
            return False
        self._out = self._later or []  # frames waiting for `_flush_later` go first
        self._later = None
        return True

    def flush_output(self) -> None:
        """Write what was collected since `open_output` (one write) and stop collecting."""
        out, self._out = self._out, None
        if out and self.transport is not None and not self.closed:
            self._write_all(self.transport, out)

    def send_parts(self, cmd: RemotingCommand, parts: list[memoryview]) -> None:
        """Send `cmd` with a body made of `parts` (pull responses): header and parts are joined
        into one buffer, the parts' only copy (the views are released when this returns)."""
        cmd.body = b""
        self.answered_code = cmd.code
        if self.closed or self.transport is None:
            return
        head = encode_command(cmd)
        # The frame length (first 4 bytes) must count the body that follows the header.
        total = len(head) - LENGTH.size + sum(map(len, parts))
        with memoryview(head) as rest:
            frame = b"".join([LENGTH.pack(total), rest[LENGTH.size :], *parts])
        self.send_raw(frame)

    # -- requests out -----------------------------------------------------------------------
    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response (TimeoutError / ConnectionError otherwise)."""
        if self.closed or self.loop is None:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        if not cmd.opaque:
            cmd.opaque = next_opaque()
        fut: asyncio.Future[RemotingCommand] = self.loop.create_future()
        self.pending[cmd.opaque] = fut
        self.send(cmd)
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # races with the response (CPython gh-86296), leaving cancelled callers running.
            async with asyncio.timeout(timeout):
                return await fut
        finally:
            self.pending.pop(cmd.opaque, None)

    def oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= _ONEWAY
        if not cmd.opaque:
            cmd.opaque = next_opaque()
        self.send(cmd)

    def push(self, request: Push) -> None:
        """A request of the server's own to the client (`Peer.push`), as its one-way command."""
        self.oneway(push_command(request))

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            later, self._later = self._later, None
            if later:
                self._write_all(self.transport, later)  # the transport sends buffered data before closing
            self.transport.close()
        self.closed = True
