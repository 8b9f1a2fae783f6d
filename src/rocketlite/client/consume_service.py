"""How a push consumer hands pulled messages to the user's listener: concurrently or in order.

Concurrent (`ConsumeMessageConcurrentlyService`): pulled messages are cut into batches of
`consume_message_batch_max_size` and each batch runs as its own task, at most
`consume_thread_max` at a time. A synchronous listener runs in the consumer's thread pool (so a
slow listener never blocks the event loop); a coroutine listener is awaited on the loop. When a
batch fails (RECONSUME_LATER, an exception, or no status at all, as Java treats null), each of
its messages is sent back to the broker (CONSUMER_SEND_MSG_BACK) to come again later from
`%RETRY%group`; a message that cannot be sent back is consumed again locally after 5 s and holds
the committed offset until then. Broadcasting consumers cannot retry and only log the failure.

Orderly (`ConsumeMessageOrderlyService`): one task per queue consumes batches strictly in offset
order while the consumer holds the queue's broker lock (clustering). On SUSPEND the batch goes
back in front and the queue pauses (`suspend_current_queue_time`) before trying again; a message
that failed `max_reconsume_times` times is sent to the retry topic with its count exhausted, so
the broker moves it to the DLQ, and the queue moves on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketlite.client.consume_stats import ConsumerStats
from rocketlite.client.message import MessageExt, MessageQueue
from rocketlite.client.offset_store import OffsetStore
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.protocol.bodies.heartbeat import MessageModel
from rocketlite.protocol.bodies.running_info import CMResult, ConsumeMessageDirectlyResult
from rocketlite.protocol.message import MessageConst

log = logging.getLogger("rocketlite.client.consume")

LOCAL_RECONSUME_DELAY = 5.0  # Java's submitConsumeRequestLater: 5 s
LOCK_RETRY_DELAY = 3.0


class ConsumeStatus(enum.Enum):
    """A concurrent listener's verdict for its batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """An orderly listener's verdict: done, or pause this queue and retry the same batch."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeConcurrentlyContext:
    """`ack_index`: on success, messages after it are still retried (None = all acknowledged)."""

    queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int | None = None


@dataclass
class ConsumeOrderlyContext:
    queue: MessageQueue
    suspend_current_queue_time_millis: int = -1


ConcurrentListener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], ConsumeStatus | Awaitable[ConsumeStatus | None] | None
]
OrderlyListener = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus | None] | None,
]


class ConsumerCore(Protocol):
    """What the consume services use of their push consumer."""

    group: str
    message_model: MessageModel
    consume_message_batch_max_size: int
    offset_store: OffsetStore
    executor: concurrent.futures.ThreadPoolExecutor
    stats: ConsumerStats

    def reset_retry_topic(self, msgs: list[MessageExt]) -> None: ...

    def flow_released(self, pq: ProcessQueue) -> None: ...

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool: ...

    async def send_to_dlq_orderly(self, msg: MessageExt) -> bool: ...

    async def lock_queue(self, mq: MessageQueue) -> bool: ...


async def call_listener(
    fn: Callable[..., Any], msgs: list[MessageExt], ctx: Any, executor: concurrent.futures.Executor
) -> Any:
    """Await a coroutine listener; run a plain one in `executor`; exceptions propagate."""
    if inspect.iscoroutinefunction(fn):
        return await fn(msgs, ctx)
    result = await asyncio.get_running_loop().run_in_executor(executor, fn, msgs, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result


def _mark_start(msgs: list[MessageExt]) -> None:
    now = str(int(time.time() * 1000))
    for m in msgs:
        m.properties[MessageConst.CONSUME_START_TIME] = now


async def _listen(
    who: str,
    listener: Callable[..., Any],
    c: ConsumerCore,
    msgs: list[MessageExt],
    ctx: ConsumeConcurrentlyContext | ConsumeOrderlyContext,
) -> Any:
    """A batch through the user's listener, the same way for both services.

    Retried messages show their original topic, CONSUME_START_TIME is stamped, and an exception
    is logged and becomes None (no verdict), which each service maps to its own failure status.
    """
    c.reset_retry_topic(msgs)
    _mark_start(msgs)
    try:
        return await call_listener(listener, msgs, ctx, c.executor)
    except Exception:
        log.exception("%s of %s failed on %d message(s) of %s", who, c.group, len(msgs), ctx.queue)
        return None


_DIRECT_RESULTS: dict[object, CMResult] = {
    ConsumeStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
    ConsumeStatus.RECONSUME_LATER: CMResult.CR_LATER,
    ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
}


async def consume_directly(
    c: ConsumerCore,
    concurrent: ConcurrentListener | None,
    orderly: OrderlyListener | None,
    msg: MessageExt,
) -> ConsumeMessageDirectlyResult:
    """`consumeMessageDirectly` (CONSUME_MESSAGE_DIRECTLY, an admin's "resend to this consumer"):
    `msg` through the listener outside the pull loop. Nothing is sent back and no offset moves;
    the verdict is reported: CR_SUCCESS / CR_LATER, CR_RETURN_NULL for no status, and
    CR_THROW_EXCEPTION with the exception as remark."""
    msgs = [msg]
    c.reset_retry_topic(msgs)
    ctx: ConsumeConcurrentlyContext | ConsumeOrderlyContext
    ctx = ConsumeOrderlyContext(msg.queue) if orderly is not None else ConsumeConcurrentlyContext(msg.queue)
    listener = orderly if orderly is not None else concurrent
    begin = time.monotonic()
    remark = None
    try:
        status = await call_listener(listener, msgs, ctx, c.executor) if listener is not None else None
        result = _DIRECT_RESULTS.get(status, CMResult.CR_RETURN_NULL)
    except Exception as exc:
        log.warning("direct consumption of %s by %s failed", msg.msg_id, c.group, exc_info=True)
        result, remark = CMResult.CR_THROW_EXCEPTION, f"{type(exc).__name__}: {exc}"
    spent = int((time.monotonic() - begin) * 1000)
    ordered = orderly is not None
    return ConsumeMessageDirectlyResult(result, order=ordered, remark=remark, spent_time_mills=spent)


class _TaskSet:
    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("consume task failed", exc_info=task.exception())

    async def drain(self, timeout: float) -> None:
        pending = {t for t in self.tasks if not t.done()}
        if pending:
            _done, still = await asyncio.wait(pending, timeout=timeout)
            for t in still:
                t.cancel()
            if still:
                await asyncio.wait(still)


class ConcurrentConsumeService:
    def __init__(self, consumer: ConsumerCore, listener: ConcurrentListener, concurrency: int) -> None:
        self.consumer = consumer
        self.listener = listener
        self.sem = asyncio.Semaphore(concurrency)
        self.tasks = _TaskSet()
        self.later = _TaskSet()

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        size = max(1, self.consumer.consume_message_batch_max_size)
        for i in range(0, len(msgs), size):
            self.tasks.spawn(self._consume(msgs[i : i + size], pq, mq), f"consume-{mq.topic}-{mq.queue_id}")

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        async with self.sem:
            if pq.dropped:
                return
            c = self.consumer
            ctx = ConsumeConcurrentlyContext(mq)
            begin = time.monotonic()
            status = await _listen("listener", self.listener, c, msgs, ctx)
            if not isinstance(status, ConsumeStatus):
                if status is not None:
                    log.warning("listener of %s returned %r; treating it as RECONSUME_LATER", c.group, status)
                status = ConsumeStatus.RECONSUME_LATER
            ok = 0
            if status is ConsumeStatus.CONSUME_SUCCESS:
                ok = len(msgs) if ctx.ack_index is None else min(max(ctx.ack_index + 1, 0), len(msgs))
            c.stats.record_consume(mq.topic, (time.monotonic() - begin) * 1000, ok, len(msgs) - ok)
            if pq.dropped:
                return
            await self._process_result(status, ctx, msgs, pq, mq)

    async def _process_result(
        self,
        status: ConsumeStatus,
        ctx: ConsumeConcurrentlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        c = self.consumer
        if status is ConsumeStatus.CONSUME_SUCCESS:
            ack = len(msgs) - 1 if ctx.ack_index is None else min(ctx.ack_index, len(msgs) - 1)
        else:
            ack = -1
        failed: list[MessageExt] = []
        if c.message_model is MessageModel.BROADCASTING:
            for m in msgs[ack + 1 :]:
                log.warning("broadcast consumer %s dropped failed message %s", c.group, m.msg_id)
        else:
            for m in msgs[ack + 1 :]:
                if not await c.send_message_back(m, ctx.delay_level_when_next_consume):
                    m.reconsume_times += 1
                    failed.append(m)
        done = [m for m in msgs if all(m is not f for f in failed)]
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped:
            c.offset_store.update(mq, offset, increase_only=True)
        c.flow_released(pq)
        if failed:
            self.later.spawn(self._again_later(failed, pq, mq), f"reconsume-{mq.topic}-{mq.queue_id}")

    async def _again_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        await asyncio.sleep(LOCAL_RECONSUME_DELAY)
        if not pq.dropped:
            self.submit(msgs, pq, mq)

    async def shutdown(self, timeout: float) -> None:
        for t in list(self.later.tasks):
            t.cancel()
        await self.later.drain(0)
        await self.tasks.drain(timeout)


class OrderlyConsumeService:
    def __init__(
        self,
        consumer: ConsumerCore,
        listener: OrderlyListener,
        *,
        max_reconsume_times: int,
        suspend_time: float,
    ) -> None:
        self.consumer = consumer
        self.listener = listener
        self.max_reconsume_times = max_reconsume_times
        self.suspend_time = suspend_time
        self.tasks = _TaskSet()
        self.stopped = False

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        del msgs
        if not pq.orderly_running and not self.stopped:
            pq.orderly_running = True
            self.tasks.spawn(self._run(pq, mq), f"consume-orderly-{mq.topic}-{mq.queue_id}")

    async def _run(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        c = self.consumer
        clustering = c.message_model is MessageModel.CLUSTERING
        try:
            while not pq.dropped and not self.stopped:
                needs_lock = clustering and (not pq.locked or pq.lock_expired())
                if needs_lock and not await c.lock_queue(mq):
                    await asyncio.sleep(LOCK_RETRY_DELAY)
                    continue
                pause = 0.0
                async with pq.consume_lock:
                    if pq.dropped:
                        return
                    msgs = pq.take(max(1, c.consume_message_batch_max_size))
                    if not msgs:
                        return
                    pause = await self._consume_batch(msgs, pq, mq)
                if pause > 0:
                    await asyncio.sleep(pause)
        finally:
            pq.orderly_running = False

    async def _consume_batch(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> float:
        """Consume one batch; the pause before the next one (0 = go on)."""
        c = self.consumer
        ctx = ConsumeOrderlyContext(mq)
        begin = time.monotonic()
        status = await _listen("orderly listener", self.listener, c, msgs, ctx)
        if not isinstance(status, ConsumeOrderlyStatus):
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        ok = len(msgs) if status is ConsumeOrderlyStatus.SUCCESS else 0
        c.stats.record_consume(mq.topic, (time.monotonic() - begin) * 1000, ok, len(msgs) - ok)
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT and await self._needs_retry(msgs):
            pq.rollback()
            ms = ctx.suspend_current_queue_time_millis
            return ms / 1000 if ms >= 0 else self.suspend_time
        offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            c.offset_store.update(mq, offset, increase_only=False)
        c.flow_released(pq)
        return 0.0

    async def _needs_retry(self, msgs: list[MessageExt]) -> bool:
        """`checkReconsumeTimes`: count a failure; exhausted messages go to the DLQ instead."""
        retry = False
        for m in msgs:
            if m.reconsume_times >= self.max_reconsume_times:
                m.properties[MessageConst.RECONSUME_TIME] = str(m.reconsume_times)
                if not await self.consumer.send_to_dlq_orderly(m):
                    retry = True
                    m.reconsume_times += 1
            else:
                retry = True
                m.reconsume_times += 1
        return retry

    async def shutdown(self, timeout: float) -> None:
        self.stopped = True
        await self.tasks.drain(timeout)
