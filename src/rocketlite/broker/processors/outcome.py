"""`Outcome`: what a typed request core answers when the answer is only a code and a remark (a
consumer send-back, an END_TRANSACTION), for either port; and `after_flush`, the rule of the cores
that store on a client's behalf: with SYNC_FLUSH the answer waits until the put is durable.

The remoting adapter writes an outcome as `make_response(request, code, remark)` (`command`); the
gRPC endpoint maps the code onto an `apache.rocketmq.v2.Code`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.runtime import result_within
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PendingPut, PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketlite.broker.outcome")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A request's answer: its response code and remark (None: no remark on the wire)."""

    code: int
    remark: str | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def command(self, request: RemotingCommand) -> RemotingCommand:
        """The remoting answer to `request`."""
        return make_response(request, self.code, self.remark)


OK = Outcome(ResponseCode.SUCCESS)


def after_flush(
    store: StoreAPI, pending: PendingPut, build: Callable[[PutMessageResult], T]
) -> T | Awaitable[T]:
    """`build(result)` at once with ASYNC_FLUSH; with SYNC_FLUSH, once the put is durable or timed
    out (then its status is FLUSH_DISK_TIMEOUT), so a SYNC_FLUSH broker never acknowledges
    something that is not on disk yet."""
    fut = pending.flush_future
    if fut is None:
        return build(pending.result)
    return _await_flush(store, pending, fut, build)


async def _await_flush(
    store: StoreAPI, pending: PendingPut, fut: Future[bool], build: Callable[[PutMessageResult], T]
) -> T:
    try:
        flushed = await result_within(asyncio.wrap_future(fut), store.config.sync_flush_timeout / 1000)
    except TimeoutError:
        flushed = False
    if not flushed:
        log.error("sync flush timed out after %d ms", store.config.sync_flush_timeout)
        pending.result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
    return build(pending.result)


async def command_later(request: RemotingCommand, outcome: Awaitable[Outcome]) -> RemotingCommand:
    """The remoting answer to `request` once `outcome` is known."""
    return (await outcome).command(request)
