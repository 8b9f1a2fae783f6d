"""Unary calls of one read served together: a method's `group` handler (`Method.group`).

A client that keeps several calls in flight on one connection (a 5.x producer's async sends)
delivers several requests in one read. `GrpcConnection` starts each unary call as its request ends,
except those of a method with a `group` handler: these are kept until the read's events are all
handled, then `serve_grouped` offers them, in the order their requests ended, to the handler:

    group(calls, start) -> list[bytes]

`calls` is the run's `(request, context)` pairs; the handler serves the leading calls of
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

from rocketlite.remoting.h2.status import OK, UNKNOWN

if TYPE_CHECKING:
    from rocketlite.remoting.h2.server import GrpcConnection

GroupHandler = Callable[[list[tuple[Any, Any]], int], list[bytes]]

log = logging.getLogger("rocketlite.remoting.h2")


def serve_grouped(conn: GrpcConnection) -> None:
    """Serve `conn.grouped` (this read's calls of grouped methods), each method's calls as a run."""
    grouped = conn.grouped
    conn.grouped = []
    by_method: dict[int, list[Any]] = {}
    for item in grouped:
        if not item[1].done:
            by_method.setdefault(id(item[1].method), []).append(item)
    for run in by_method.values():
        _serve_run(conn, run)


def _serve_run(conn: GrpcConnection, run: list[Any]) -> None:
    method = run[0][1].method
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
                conn._finish(stream_id, call, UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
            return
        for payload in answers:
            stream_id, call, _, _ = run[i]
            if not call.done:
                session.send_message(stream_id, payload)
                conn._finish(stream_id, call, OK)
            i += 1
        if i < len(run):
            stream_id, call, request, context = run[i]
            if not call.done:
                conn._start(call, conn._run(stream_id, call, method.handler(request, context)))
            i += 1
