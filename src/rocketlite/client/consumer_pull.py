"""`AsyncPullConsumer`: assign queues, seek, poll, commit (`DefaultLitePullConsumer` in assign mode).

The application owns the queue assignment and the positions; nothing is rebalanced. Two layers:

* low level, stateless: `fetch(queue, offset, max_nums)` returns a `PullResult`
  (`status, next_begin_offset, min_offset, max_offset, messages`), plus `get_max_offset`,
  `get_min_offset`, `search_offset_by_timestamp`, `get_earliest_msg_store_time` and
  `fetch_queues(topic)` (readable queues from the route) — what a batch reader such as the Spark
  data source needs;
* consumer style: `assign`, `seek*`, `poll` (advances positions), `commit` (UPDATE_CONSUMER_OFFSET
  with the positions, i.e. the next offset to read), `committed`.

Pulls carry their expression (SUBSCRIPTION flag): a tag expression or a `MessageSelector`
(`MessageSelector.by_sql("a > 5")` for an SQL92 one), so no heartbeat subscription is needed; the
consumer still registers its group with the brokers (CONSUME_ACTIVELY) unless `heartbeat=False`,
which lets many readers of one group share a process. A queue without a position starts from the
group's committed offset, else per `consume_from_where` (LAST = max offset, FIRST = 0).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Final, Unpack

from rocketlite.client.api import BrokerApi, build_subscription, read_offset_from_broker
from rocketlite.client.config import ClientOptions
from rocketlite.client.errors import ClientError, ClientStateError, NoRouteError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.lifecycle import AsyncConsumerBase
from rocketlite.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from rocketlite.client.selector import MessageSelector, as_selector
from rocketlite.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rocketlite.protocol.codes import PullSysFlag
from rocketlite.protocol.subscription import TAG_EXPRESSION

log = logging.getLogger("rocketlite.client.pull_consumer")

__all__ = ["AsyncPullConsumer"]

LITE_FLAGS: Final = PullSysFlag.SUBSCRIPTION | PullSysFlag.LITE_PULL


class AsyncPullConsumer(AsyncConsumerBase):
    kind = "pull consumer"
    consume_type = ConsumeType.CONSUME_ACTIVELY
    message_model = MessageModel.CLUSTERING

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        pull_batch_size: int = 32,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        auto_commit: bool = True,
        heartbeat: bool = True,
        pull_timeout: float = 10.0,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.pull_batch_size = pull_batch_size
        self.consume_from_where = consume_from_where
        self.auto_commit = auto_commit
        self.heartbeat = heartbeat
        self.pull_timeout = pull_timeout
        self._api: BrokerApi | None = None
        self._assigned: list[MessageQueue] = []
        self._positions: dict[MessageQueue, int] = {}
        self._committed: dict[MessageQueue, int] = {}
        self._next = 0

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._instance is not None:
            return
        instance = await self._acquire_instance()
        self._instance = instance
        self._api = BrokerApi(instance)

    async def close(self) -> None:
        instance = self._instance
        if instance is None:
            return
        if self.auto_commit:
            await self.commit()
        self._instance = None
        await self._release_instance(instance)

    def _register(self, instance: ClientInstance) -> None:
        if self.heartbeat:  # without one the group stays unknown to the instance and the brokers
            super()._register(instance)

    async def _unregister(self, instance: ClientInstance) -> None:
        if self.heartbeat:
            await super()._unregister(instance)

    @property
    def api(self) -> BrokerApi:
        if self._api is None:
            raise ClientStateError(f"pull consumer {self.group} is not started")
        return self._api

    # -- ClientInstance member protocol -----------------------------------------------------
    async def do_rebalance(self) -> bool:
        return True

    async def persist_offsets(self) -> None:
        if self.auto_commit and self._instance is not None:
            await self.commit(oneway=True)

    # -- low level ---------------------------------------------------------------------------
    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, from a fresh route."""
        await self.instance.update_topic_route(topic)
        queues = self.instance.subscribe_info(topic)
        if not queues:
            raise NoRouteError(await self.instance.no_route_reason(topic, for_send=False))
        return queues

    async def fetch(
        self,
        queue: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str | MessageSelector = "*",
        suspend_timeout: float = 0.0,
    ) -> PullResult:
        """One PULL_MESSAGE from `offset`; with `suspend_timeout` > 0 the broker may hold it that
        long. `expression`: a tag expression or a `MessageSelector` (SQL92)."""
        selector = as_selector(expression)
        sub = self._subs.get(queue.topic)
        if sub is None or (sub.sub_string, sub.expression_type) != (
            selector.expression,
            selector.expression_type,
        ):
            sub = build_subscription(queue.topic, selector, 0)
        flags = LITE_FLAGS | (PullSysFlag.SUSPEND if suspend_timeout > 0 else 0)
        raw = await self.api.pull(
            self.group, queue, sub, offset, max_nums,
            sys_flag=flags, suspend_timeout_ms=int(suspend_timeout * 1000),
            timeout=max(self.pull_timeout, suspend_timeout + 5.0),
        )  # fmt: skip
        return raw.result

    async def get_max_offset(self, queue: MessageQueue) -> int:
        return await self.api.get_max_offset(queue)

    async def get_min_offset(self, queue: MessageQueue) -> int:
        return await self.api.get_min_offset(queue)

    async def search_offset_by_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return await self.api.search_offset(queue, timestamp_ms)

    async def get_earliest_msg_store_time(self, queue: MessageQueue) -> int:
        return await self.api.get_earliest_msg_store_time(queue)

    # -- assignment and positions ----------------------------------------------------------
    def assign(self, queues: Iterable[MessageQueue], expression: str | MessageSelector = "*") -> None:
        """Read exactly these queues from now on (positions of queues kept are kept), filtered by
        a tag expression or a `MessageSelector`."""
        self._assigned = sorted(set(queues))
        now = int(time.time() * 1000)
        self._subs = {mq.topic: build_subscription(mq.topic, expression, now) for mq in self._assigned}
        keep = set(self._assigned)
        self._positions = {mq: off for mq, off in self._positions.items() if mq in keep}

    def assignment(self) -> list[MessageQueue]:
        return list(self._assigned)

    def position(self, queue: MessageQueue) -> int | None:
        return self._positions.get(queue)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        if queue not in self._assigned:
            raise ClientStateError(f"{queue} is not assigned")
        self._positions[queue] = offset

    async def seek_to_begin(self, queue: MessageQueue) -> None:
        self.seek(queue, await self.get_min_offset(queue))

    async def seek_to_end(self, queue: MessageQueue) -> None:
        self.seek(queue, await self.get_max_offset(queue))

    async def seek_by_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> None:
        self.seek(queue, await self.search_offset_by_timestamp(queue, timestamp_ms))

    async def committed(self, queue: MessageQueue) -> int:
        """The group's committed offset on the broker, -1 when none."""
        return await read_offset_from_broker(self.api, self.group, queue)

    async def _start_position(self, queue: MessageQueue) -> int:
        offset = await self.committed(queue)
        if offset >= 0:
            return offset
        if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return await self.get_min_offset(queue)
        return await self.get_max_offset(queue)

    # -- poll and commit -------------------------------------------------------------------
    async def _pull_one(self, queue: MessageQueue, suspend: float) -> list[MessageExt]:
        offset = self._positions.get(queue)
        if offset is None:
            offset = await self._start_position(queue)
            self._positions[queue] = offset
        sub = self._subs[queue.topic]
        selector = MessageSelector(sub.expression_type or TAG_EXPRESSION, sub.sub_string)
        result = await self.fetch(
            queue, offset, self.pull_batch_size, expression=selector, suspend_timeout=suspend
        )
        if self._positions.get(queue) == offset:  # not re-seeked meanwhile
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "%s: offset %d of %s illegal, moving to %d",
                    self.group,
                    offset,
                    queue,
                    result.next_begin_offset,
                )
            self._positions[queue] = result.next_begin_offset
        return result.messages

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """Messages from the assigned queues, waiting up to `timeout` seconds when there are none."""
        if not self._assigned:
            raise ClientStateError("assign queues before poll()")
        queues = self._assigned[self._next :] + self._assigned[: self._next]
        self._next = (self._next + 1) % len(self._assigned)
        found = await self._gather(queues, 0.0)
        if found or timeout <= 0:
            return found
        # Nothing waiting: long-poll every queue; return as soon as one answers with messages.
        tasks = [asyncio.ensure_future(self._pull_one(q, timeout)) for q in queues]
        deadline = time.monotonic() + timeout + 1.0
        messages: list[MessageExt] = []
        pending = set(tasks)
        try:
            while pending and not messages:
                done, pending = await asyncio.wait(
                    pending,
                    timeout=max(0.0, deadline - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    break
                for t in done:
                    messages.extend(self._task_messages(t))
        finally:
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
        return messages

    async def _gather(self, queues: list[MessageQueue], suspend: float) -> list[MessageExt]:
        tasks = [asyncio.ensure_future(self._pull_one(q, suspend)) for q in queues]
        await asyncio.wait(tasks)
        return [m for t in tasks for m in self._task_messages(t)]

    def _task_messages(self, task: asyncio.Future[list[MessageExt]]) -> list[MessageExt]:
        if task.cancelled():
            return []
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, ClientError):
                raise exc
            log.warning("%s: pull failed: %s", self.group, exc)
            return []
        return task.result()

    async def commit(self, offsets: dict[MessageQueue, int] | None = None, *, oneway: bool = False) -> None:
        """Commit `offsets` (default: the current positions) as the group's next offsets to read."""
        todo = dict(self._positions if offsets is None else offsets)
        for mq, offset in todo.items():
            if self._committed.get(mq) == offset and offsets is None:
                continue
            await self.api.update_consumer_offset(self.group, mq, offset, oneway=oneway)
            self._committed[mq] = offset
