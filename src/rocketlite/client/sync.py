"""Blocking facade: `Producer`, `TransactionProducer`, `PushConsumer`, `PullConsumer`.

Each wraps its `Async*` twin and runs it on one process-wide event loop in a daemon thread
(`runtime.LoopThread`, created on first use), so every synchronous client of a process shares the
same `ClientInstance`, connections and background tasks, as Java's clients share their
`MQClientInstance`. Methods block the calling thread until the coroutine finishes; the
coroutines carry their own timeouts.

Listeners may be plain functions: the async core runs them in thread pools, never on the loop,
so they may block, and may even call these blocking methods (e.g. send from a listener). Calling
a blocking method *on* the loop thread (from a coroutine listener) would deadlock, so it raises
`ClientStateError`; use the `Async*` classes there. Send callbacks run on a separate callback
thread, in completion order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from rocketlite.client.consumer_pull import AsyncPullConsumer
from rocketlite.client.consumer_push import AsyncPushConsumer
from rocketlite.client.errors import ClientStateError
from rocketlite.client.message import Message, MessageExt, MessageQueue, PullResult, SendResult
from rocketlite.client.producer import AsyncProducer, MessageQueueSelector, SendCallback
from rocketlite.client.transaction import AsyncTransactionProducer, TransactionSendResult
from rocketlite.runtime import LoopThread

__all__ = ["Producer", "PullConsumer", "PushConsumer", "TransactionProducer", "shared_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_runner: LoopThread | None = None
_runner_pid = 0
_callbacks: concurrent.futures.ThreadPoolExecutor | None = None


def shared_loop() -> LoopThread:
    """The process-wide client loop thread (started on first use, a daemon).

    A forked child (PySpark's Python workers are forked) does not inherit the parent's threads,
    so it gets a loop of its own instead of waiting forever on the parent's.
    """
    global _runner, _runner_pid, _callbacks
    with _lock:
        if _runner is None or _runner_pid != os.getpid():
            _runner, _runner_pid = LoopThread("rocketlite-client"), os.getpid()
            _callbacks = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rocketlite-callback")
        return _runner


def _reset_after_fork() -> None:
    global _lock, _runner, _callbacks
    _lock, _runner, _callbacks = threading.Lock(), None, None


os.register_at_fork(after_in_child=_reset_after_fork)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    runner = shared_loop()
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    if current is runner.loop:
        coro.close()
        raise ClientStateError("blocking client call on the client loop thread; use the Async* classes")
    return runner.call(coro, timeout=None)


def _on_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run a plain method of an async client on the loop thread (its state is the loop's)."""

    async def call() -> T:
        return fn(*args)

    return _run(call())


class _Blocking:
    """start/close and context management over an async client with those coroutines."""

    _async: Any

    def start(self) -> None:
        _run(self._async.start())

    def close(self) -> None:
        _run(self._async.close())

    def shutdown(self) -> None:
        """Java's name for `close`."""
        self.close()

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(_Blocking):
    """Blocking `AsyncProducer`; takes the same arguments."""

    def __init__(
        self, group: str = "DEFAULT_PRODUCER", namesrv_addr: str | None = None, **kwargs: Any
    ) -> None:
        shared_loop()
        self._async: AsyncProducer = self._make(group, namesrv_addr, **kwargs)

    def _make(self, group: str, namesrv_addr: str | None, **kwargs: Any) -> AsyncProducer:
        return AsyncProducer(group, namesrv_addr, **kwargs)

    @property
    def group(self) -> str:
        return self._async.group

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        return _run(self._async.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout))

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Returns at once; the future and `callback(result, error)` (callback thread) get the result."""

        async def start() -> SendResult:
            return await self._async.send_async(msg, queue=queue, selector=selector, arg=arg, timeout=timeout)

        future = shared_loop().submit(start())
        if callback is not None:

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                exc = f.exception()
                assert _callbacks is not None
                _callbacks.submit(callback, None if exc else f.result(), exc)

            future.add_done_callback(done)
        return future

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        _run(self._async.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> list[SendResult]:
        return _run(self._async.send_batch(msgs, queue=queue, timeout=timeout))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return _run(self._async.fetch_publish_queues(topic))


class TransactionProducer(Producer):
    """Blocking `AsyncTransactionProducer` (`listener=` is required)."""

    _async: AsyncTransactionProducer

    def _make(self, group: str, namesrv_addr: str | None, **kwargs: Any) -> AsyncTransactionProducer:
        return AsyncTransactionProducer(group, namesrv_addr, **kwargs)

    def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        return _run(self._async.send_message_in_transaction(msg, arg, timeout=timeout))


class PushConsumer(_Blocking):
    """Blocking `AsyncPushConsumer`; listeners are plain functions run in its thread pool."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any) -> None:
        shared_loop()
        self._async: AsyncPushConsumer = AsyncPushConsumer(group, namesrv_addr, **kwargs)

    @property
    def group(self) -> str:
        return self._async.group

    def subscribe(self, topic: str, expression: str = "*") -> None:
        _on_loop(self._async.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        _on_loop(self._async.unsubscribe, topic)

    def register_message_listener(self, listener: Any) -> None:
        self._async.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: Any) -> None:
        self._async.register_message_listener_orderly(listener)

    def assigned_queues(self) -> list[MessageQueue]:
        return _on_loop(self._async.assigned_queues)


class PullConsumer(_Blocking):
    """Blocking `AsyncPullConsumer`."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any) -> None:
        shared_loop()
        self._async: AsyncPullConsumer = AsyncPullConsumer(group, namesrv_addr, **kwargs)

    @property
    def group(self) -> str:
        return self._async.group

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return _run(self._async.fetch_queues(topic))

    def fetch(
        self,
        queue: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str = "*",
        suspend_timeout: float = 0.0,
    ) -> PullResult:
        return _run(
            self._async.fetch(queue, offset, max_nums, expression=expression, suspend_timeout=suspend_timeout)
        )

    def get_max_offset(self, queue: MessageQueue) -> int:
        return _run(self._async.get_max_offset(queue))

    def get_min_offset(self, queue: MessageQueue) -> int:
        return _run(self._async.get_min_offset(queue))

    def search_offset_by_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return _run(self._async.search_offset_by_timestamp(queue, timestamp_ms))

    def get_earliest_msg_store_time(self, queue: MessageQueue) -> int:
        return _run(self._async.get_earliest_msg_store_time(queue))

    def assign(self, queues: Iterable[MessageQueue], expression: str = "*") -> None:
        _on_loop(self._async.assign, list(queues), expression)

    def assignment(self) -> list[MessageQueue]:
        return _on_loop(self._async.assignment)

    def position(self, queue: MessageQueue) -> int | None:
        return _on_loop(self._async.position, queue)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        _on_loop(self._async.seek, queue, offset)

    def seek_to_begin(self, queue: MessageQueue) -> None:
        _run(self._async.seek_to_begin(queue))

    def seek_to_end(self, queue: MessageQueue) -> None:
        _run(self._async.seek_to_end(queue))

    def seek_by_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> None:
        _run(self._async.seek_by_timestamp(queue, timestamp_ms))

    def committed(self, queue: MessageQueue) -> int:
        return _run(self._async.committed(queue))

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        return _run(self._async.poll(timeout))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        _run(self._async.commit(offsets))
