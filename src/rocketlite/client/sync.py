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
import functools
import os
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar

from rocketlite.client.consumer_pull import AsyncPullConsumer
from rocketlite.client.consumer_push import AsyncPushConsumer
from rocketlite.client.errors import ClientStateError
from rocketlite.client.lifecycle import AsyncClientBase
from rocketlite.client.message import Message, MessageQueue, SendResult
from rocketlite.client.producer import AsyncProducer, MessageQueueSelector, SendCallback
from rocketlite.client.selector import MessageSelector
from rocketlite.client.transaction import AsyncTransactionProducer
from rocketlite.runtime import LoopThread

__all__ = ["Producer", "PullConsumer", "PushConsumer", "TransactionProducer", "shared_loop"]

T = TypeVar("T")
P = ParamSpec("P")
A = TypeVar("A", bound=AsyncClientBase)

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


def _blocking(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[_Blocking[Any], P], T]:
    """A blocking method running the wrapped client's coroutine method of the same name on the loop.

    Most blocking methods only forward their arguments; declaring them as `send =
    _blocking(AsyncProducer.send)` keeps one signature (and docstring) per method instead of a
    copy to keep in step. The method is looked up on the wrapped client, so overrides apply.
    """
    name = method.__name__

    @functools.wraps(method)
    def call(self: _Blocking[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, Coroutine[Any, Any, T]] = getattr(self._async, name)
        return _run(bound(*args, **kwargs))

    return call


def _blocking_plain(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[_Blocking[Any], P], T]:
    """`_blocking` for a plain (not coroutine) method: called on the loop thread via `_on_loop`."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: _Blocking[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, T] = getattr(self._async, name)
        return _on_loop(lambda: bound(*args, **kwargs))

    return call


class _Blocking(Generic[A]):
    """A blocking client over its async twin `_client`, made with the same arguments.

    Gives start/close/shutdown, context management and `group`; the rest is `_blocking(...)`.
    """

    _client: type[A]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        shared_loop()
        self._async: A = self._client(*args, **kwargs)

    @property
    def group(self) -> str:
        return self._async.group

    def start(self) -> None:
        _run(self._async.start())

    def close(self) -> None:
        _run(self._async.close())

    def shutdown(self) -> None:
        """Java's name for `close`."""
        self.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(_Blocking[AsyncProducer]):
    """Blocking `AsyncProducer`; takes the same arguments."""

    _client: type[AsyncProducer] = AsyncProducer

    send = _blocking(AsyncProducer.send)
    send_oneway = _blocking(AsyncProducer.send_oneway)
    send_batch = _blocking(AsyncProducer.send_batch)
    request = _blocking(AsyncProducer.request)
    reply = _blocking(AsyncProducer.reply)
    fetch_publish_queues = _blocking(AsyncProducer.fetch_publish_queues)

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


class TransactionProducer(Producer):
    """Blocking `AsyncTransactionProducer` (`listener=` is required)."""

    _client = AsyncTransactionProducer
    _async: AsyncTransactionProducer

    send_message_in_transaction = _blocking(AsyncTransactionProducer.send_message_in_transaction)


class PushConsumer(_Blocking[AsyncPushConsumer]):
    """Blocking `AsyncPushConsumer`; listeners are plain functions run in its thread pool."""

    _client = AsyncPushConsumer

    subscribe = _blocking_plain(AsyncPushConsumer.subscribe)
    unsubscribe = _blocking_plain(AsyncPushConsumer.unsubscribe)
    assigned_queues = _blocking_plain(AsyncPushConsumer.assigned_queues)

    def register_message_listener(self, listener: Any) -> None:
        self._async.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: Any) -> None:
        self._async.register_message_listener_orderly(listener)


class PullConsumer(_Blocking[AsyncPullConsumer]):
    """Blocking `AsyncPullConsumer`."""

    _client = AsyncPullConsumer

    fetch_queues = _blocking(AsyncPullConsumer.fetch_queues)
    fetch = _blocking(AsyncPullConsumer.fetch)
    get_max_offset = _blocking(AsyncPullConsumer.get_max_offset)
    get_min_offset = _blocking(AsyncPullConsumer.get_min_offset)
    search_offset_by_timestamp = _blocking(AsyncPullConsumer.search_offset_by_timestamp)
    get_earliest_msg_store_time = _blocking(AsyncPullConsumer.get_earliest_msg_store_time)
    assignment = _blocking_plain(AsyncPullConsumer.assignment)
    position = _blocking_plain(AsyncPullConsumer.position)
    seek = _blocking_plain(AsyncPullConsumer.seek)
    seek_to_begin = _blocking(AsyncPullConsumer.seek_to_begin)
    seek_to_end = _blocking(AsyncPullConsumer.seek_to_end)
    seek_by_timestamp = _blocking(AsyncPullConsumer.seek_by_timestamp)
    committed = _blocking(AsyncPullConsumer.committed)
    poll = _blocking(AsyncPullConsumer.poll)

    def assign(self, queues: Iterable[MessageQueue], expression: str | MessageSelector = "*") -> None:
        _on_loop(self._async.assign, list(queues), expression)  # an iterator is read here, not there

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """The current positions (or `offsets`) as the group's next offsets; waits for the brokers."""
        _run(self._async.commit(offsets))
