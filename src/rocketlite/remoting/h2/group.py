"""Unary calls of one read served together: a method's `group` handler (`Method.group`).

A client that keeps several calls in flight on one connection (a 5.x producer's async sends)
delivers several requests in one read. `GrpcConnection` starts each unary call as its request ends,
except those of a method with a `group` handler: these are kept until the read's events are all
handled, then `serve_grouped` offers them, in the order their requests ended, to the handler:

    group(calls, start) -> list[bytes]

`calls` is the run's `(request, context)` pairs; a request is the parsed message, or, for a call
the compiled session reported GROUPED (a plain call, ended in this read: `_native/_h2.pyx`), its
message's bytes, not parsed (the handler reads what it needs; the method's `decode` parses it
before it goes to `handler`), with a `GroupedContext`. The handler serves the leading calls of
`calls[start:]` it can (none is fine) and returns their answers, serialized, one per call served.
Each is sent as the call's one message and the call ends OK. The first call it did not serve
goes through the method's ordinary `handler` (started as any unary call is: its answer or status
is the handler's), and the rest is offered again. So calls are served in the order their requests
arrived, whichever way each goes (calls of other methods in the same read start before them:
calls in flight together have no order among them in gRPC). A call that ended meanwhile (reset by
the client in the same read, or past its deadline) is left out. A `group` handler that raises is
answered as a failing handler is: the calls it was offered end UNKNOWN (logged), and are not
offered to `handler` (the group may have acted on some before it failed: a send must not be
stored twice).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketlite.remoting.h2.headers import timeout_seconds
from rocketlite.remoting.h2.status import INTERNAL, OK, UNKNOWN

if TYPE_CHECKING:
    from rocketlite.remoting.h2.server import GrpcConnection, Method

GroupHandler = Callable[[list[tuple[Any, Any]], int], list[bytes]]

log = logging.getLogger("rocketlite.remoting.h2")


class GroupedContext:
    """The context a group handler gets for a call the session reported GROUPED: no `_Call` and
    no `CallContext` of its own; the metadata is parsed (by the connection's cache) when asked."""

    __slots__ = ("conn", "headers")

    def __init__(self, conn: GrpcConnection, headers: list[tuple[bytes, bytes]]) -> None:
        self.conn = conn
        self.headers = headers

    def peer(self) -> str:
        return self.conn.peer

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self.conn.parse(self.headers)[0][1]

    def time_remaining(self) -> float | None:
        """The call's whole `grpc-timeout`: it ended in this read, and is served in it."""
        timeout = self.conn.parse(self.headers)[1]
        return None if timeout is None else timeout_seconds(timeout)


def serve_grouped(conn: GrpcConnection) -> None:
    """Serve `conn.grouped` (this read's calls of grouped methods), each method's calls as a run."""
    grouped = conn.grouped
    conn.grouped = []
    gone = conn.gone
    by_method: dict[int, tuple[Method, list[Any]]] = {}
    fast = False
    last: Method | None = None  # (a read's calls are mostly one method's: its run found once)
    run: list[Any] = []
    for stream_id, call, value, context in grouped:
        item: tuple[int, Any, Any, Any] = (stream_id, call, value, context)
        if call is None:  # GROUPED by the session: (path, message, headers)
            if stream_id in gone:
                continue
            path, message, headers = value
            method = conn.methods[path]
            item = (stream_id, None, message, GroupedContext(conn, headers))
            fast = True
        elif call.done:
            continue
        else:
            method = call.method
        if method is not last:
            last = method
            run = by_method.setdefault(id(method), (method, []))[1]
        run.append(item)
    if fast:  # (these calls never enter `conn.calls`, whose closing keeps the idle clock)
        conn.idle_since = conn.loop.time()
    for method, calls in by_method.values():
        _serve_run(conn, method, calls)


def _serve_run(conn: GrpcConnection, method: Method, run: list[Any]) -> None:
    group = method.group
    assert group is not None
    calls = [(request, context) for _, _, request, context in run]
    session = conn.session
    i = 0
    while i < len(run):
        try:
            answers = group(calls, i)
        except Exception as exc:  # as a failing handler: these calls end UNKNOWN (not served again:
            log.exception("gRPC group handler of %s calls failed", len(run) - i)  # it may have acted)
            for stream_id, call, _, _ in run[i:]:
                if call is None:
                    session.finish(stream_id, UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
                else:
                    conn._finish(stream_id, call, UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
            return
        ids: list[int] = []
        payloads: list[bytes] = []
        for payload in answers:
            stream_id, call, _, _ = run[i]
            if call is None:
                ids.append(stream_id)
                payloads.append(payload)
            elif not call.done:
                if ids:  # (answers go out in the calls' order)
                    session.answer_ok(ids, payloads)
                    ids, payloads = [], []
                session.send_message(stream_id, payload)
                conn._finish(stream_id, call, OK)
            i += 1
        if ids:
            session.answer_ok(ids, payloads)
        if i < len(run):
            stream_id, call, request, context = run[i]
            if call is None:  # it goes the ordinary way from here: a call and context of its own
                opened = conn.open_call(stream_id, context.headers)
                if opened is not None:
                    call, context = opened
                    try:
                        request = method.decode(request)
                    except Exception as exc:
                        conn._fail(stream_id, INTERNAL, f"cannot parse the request: {exc}")
                    else:
                        conn._start(call, conn._run(stream_id, call, method.handler(request, context)))
            elif not call.done:
                conn._start(call, conn._run(stream_id, call, method.handler(request, context)))
            i += 1
