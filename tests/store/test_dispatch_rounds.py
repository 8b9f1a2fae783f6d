"""Dispatch rounds: listeners hear once per queue per round, and appends made on an event loop
that `ReputService.run_inline` was given are dispatched by a round on that loop (same
iteration, same thread), bulk beyond `INLINE_MAX_BYTES` going on to the reput thread; paced
appends (`ReputService.paced`, the gRPC sends) share a round at most every `PACED_ROUND_S`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.dispatch import (
    INLINE_MAX_BYTES,
    PACED_ROUND_S,
    ROUND_WAIT_S,
    ArrivalListener,
    ReputService,
)
from rocketlite.store.message_store import MessageStore
from tests.support.store import StoreFactory

HOST = HostAddress.parse("127.0.0.1:10911")

Heard = list[tuple[str, int, int, int]]  # topic, queue, max offset, listener's thread id


def mk(queue_id: int, body: bytes = b"body", tags: str = "TagA") -> MessageInner:
    return MessageInner(
        topic="T", body=body, born_host=HOST, store_host=HOST, queue_id=queue_id,
        properties_string=properties_to_string({"TAGS": tags}), born_timestamp=1,
    )  # fmt: skip


def listen(heard: Heard) -> ArrivalListener:
    def on_arrival(topic: str, queue_id: int, max_offset: int, tags: int, ts: int) -> None:
        del tags, ts
        heard.append((topic, queue_id, max_offset, threading.get_ident()))

    return on_arrival


def without_thread(store: MessageStore) -> None:
    """Stop the store's reput thread (its safety-net poll would race the rounds under test)."""
    reput = store.reput
    reput._stop.set()
    reput._wake.set()
    assert reput._thread is not None
    reput._thread.join()
    reput._stop.clear()


def test_one_announcement_per_queue_per_round(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.wait_dispatched()
    heard: Heard = []
    store.add_arrival_listener(listen(heard))
    with store.reput._round:  # hold the thread off: the test runs the round itself
        for i in range(5):
            store.put_message(mk(i % 2))
        store.dispatcher.dispatch_available()
    assert sorted(h[:3] for h in heard) == [("T", 0, 3), ("T", 1, 2)]
    assert store.get_max_offset_in_queue("T", 0) == 3


def test_appends_on_the_loop_are_dispatched_in_the_same_iteration(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.wait_dispatched()
    without_thread(store)
    heard: Heard = []
    store.add_arrival_listener(listen(heard))

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store.reput.run_inline(loop.call_soon)
        for _ in range(3):
            assert store.put_message_nowait(mk(0)).result.ok
        assert store.get_max_offset_in_queue("T", 0) == 0  # not before the round
        await asyncio.sleep(0)  # one loop iteration: the round ran
        assert store.get_max_offset_in_queue("T", 0) == 3
        # One round for the three sends, on the loop's own thread.
        assert heard == [("T", 0, 3, threading.get_ident())]

    asyncio.run(scenario())


def test_paced_appends_share_rounds_and_unpaced_ones_are_not_held(open_store: StoreFactory) -> None:
    """One append per loop iteration (as grpc.aio runs its RPCs): unpaced, a round each; paced, a
    round at most every PACED_ROUND_S, and every message dispatched in the end. An unpaced append
    made while a paced round waits still gets its round in the next iteration."""
    store = open_store()
    assert store.wait_dispatched()
    without_thread(store)
    heard: Heard = []
    store.add_arrival_listener(listen(heard))
    reput = store.reput
    count = 200

    async def appends(paced: bool) -> tuple[int, float]:
        """`count` appends, a loop iteration after each; the rounds they got and the seconds."""
        before = len(heard)
        target = store.get_max_offset_in_queue("T", 0) + count
        started = time.monotonic()
        for _ in range(count):
            reput.paced = paced
            try:
                assert store.put_message_nowait(mk(0)).result.ok
            finally:
                reput.paced = False
            await asyncio.sleep(0)
        elapsed = time.monotonic() - started
        while store.get_max_offset_in_queue("T", 0) < target:  # a paced round may still be due
            await asyncio.sleep(PACED_ROUND_S)
        return len(heard) - before, elapsed

    async def scenario() -> None:
        reput.run_inline(asyncio.get_running_loop().call_soon)
        rounds, _ = await appends(paced=False)
        assert rounds == count
        rounds, elapsed = await appends(paced=True)
        assert 1 <= rounds <= elapsed / PACED_ROUND_S + 2
        if elapsed < count * PACED_ROUND_S / 4:  # a machine not too busy to tell the two apart
            assert rounds < count / 4
        end = store.get_max_offset_in_queue("T", 0)
        reput.paced = True
        try:
            assert store.put_message_nowait(mk(0)).result.ok  # its round waits (or runs next)
        finally:
            reput.paced = False
        assert store.put_message_nowait(mk(0)).result.ok  # unpaced: a round next iteration
        await asyncio.sleep(0)
        assert store.get_max_offset_in_queue("T", 0) == end + 2
        assert all(thread == threading.get_ident() for *_, thread in heard)

    asyncio.run(scenario())


def test_bulk_beyond_the_inline_limit_goes_on_to_the_thread(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.wait_dispatched()
    store.reput.shutdown()  # a service of our own, its thread started only when the test says
    reput = ReputService(store.dispatcher)
    body = bytes(8 * 1024)
    count = 2 * INLINE_MAX_BYTES // len(body) + 5
    rounds: list[Callable[[], None]] = []
    reput.run_inline(rounds.append)
    for _ in range(count):
        assert store.put_message_nowait(mk(0, body)).result.ok
        reput.wakeup()
    assert len(rounds) == 1  # one round scheduled for all the appends
    rounds[0]()
    first = store.get_max_offset_in_queue("T", 0)
    assert 0 < first < count and first * len(body) <= INLINE_MAX_BYTES + len(body) + 1024
    assert reput._wake.is_set()  # the rest is handed to the thread
    reput.start()
    try:
        assert reput.wait_caught_up(store.commit_log.max_offset)
    finally:
        reput.shutdown()
    assert store.get_max_offset_in_queue("T", 0) == count


def test_appends_off_the_loop_thread_still_wake_the_reput_thread(open_store: StoreFactory) -> None:
    store = open_store()

    async def scenario() -> None:
        store.reput.run_inline(asyncio.get_running_loop().call_soon)
        await asyncio.to_thread(lambda: [store.put_message_nowait(mk(1)) for _ in range(4)])
        assert await asyncio.to_thread(store.wait_dispatched)

    asyncio.run(scenario())
    assert store.get_max_offset_in_queue("T", 1) == 4


def test_a_closed_loop_falls_back_to_the_thread(open_store: StoreFactory) -> None:
    store = open_store()
    loop = asyncio.new_event_loop()
    store.reput.run_inline(loop.call_soon)
    loop.close()
    assert store.put_message_nowait(mk(0)).result.ok
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("T", 0) == 1


def test_dispatch_all_reports_progress_to_the_end(open_store: StoreFactory) -> None:
    """Recovery's re-dispatch reports (bytes dispatched, bytes to dispatch) after each chunk,
    ending at the log's end, so a long re-dispatch after a crash is seen to move."""
    store = open_store()
    assert store.wait_dispatched()
    calls: list[tuple[int, int]] = []
    with store.reput._round:  # hold the thread off: the test runs the re-dispatch itself
        start = store.dispatcher.reput_from_offset
        for i in range(800):  # 6.5 MB: more than one 4 MiB dispatch chunk
            store.put_message(mk(i % 4, body=bytes(8192)))
        n = store.dispatcher.dispatch_all(progress=lambda done, total: calls.append((done, total)))
    end = store.commit_log.max_offset
    assert n == 800
    assert len(calls) >= 2  # more than one chunk: progress in between, not only at the end
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (end - start, end - start)
    assert store.get_max_offset_in_queue("T", 0) == 200


def test_the_safety_net_poll_leaves_a_running_loop_its_rounds(open_store: StoreFactory) -> None:
    """The reput thread's timed poll does not take the round from a loop whose rounds run (it
    would starve behind the busy loop, the loop skipping its rounds meanwhile); a loop with no
    round for a poll period is not counted on: the poll dispatches its appends."""
    store = open_store()
    assert store.wait_dispatched()
    reput = store.reput
    rounds: list[Callable[[], None]] = []
    reput.run_inline(rounds.append)  # a "loop" that never runs its rounds: stalled
    assert not reput.loop_rounds_running()
    assert store.put_message_nowait(mk(2)).result.ok
    assert len(rounds) == 1
    deadline = time.monotonic() + 5
    while store.get_max_offset_in_queue("T", 2) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get_max_offset_in_queue("T", 2) == 1  # the safety net took it
    rounds.pop()()  # the loop's round runs now (nothing left): rounds are running
    assert reput.loop_rounds_running()


def test_a_loop_round_waits_briefly_for_a_round_of_the_thread(open_store: StoreFactory) -> None:
    """A loop round that finds the thread in a round waits for it (up to ROUND_WAIT_S, the GIL
    released meanwhile) and then dispatches; one that waits in vain hands over to the thread."""
    store = open_store()
    assert store.wait_dispatched()
    without_thread(store)
    reput = store.reput
    rounds: list[Callable[[], None]] = []
    reput.run_inline(rounds.append)
    assert store.put_message_nowait(mk(3)).result.ok
    reput._round.acquire()  # the thread's round, in progress
    started = time.monotonic()
    threading.Timer(ROUND_WAIT_S / 10, reput._round.release).start()
    rounds.pop()()
    if time.monotonic() - started < ROUND_WAIT_S * 0.9:  # released in time (not a stalled machine)
        assert store.get_max_offset_in_queue("T", 3) == 1
    assert store.put_message_nowait(mk(3)).result.ok
    with reput._round:  # held throughout: the loop's round gives up and wakes the thread
        reput._wake.clear()
        rounds.pop()()
        assert reput._wake.is_set()
