"""Dispatch rounds: listeners hear once per queue per round, and appends made on an event loop
the store dispatches on (`MessageStore.dispatch_on`) are dispatched by a round on that loop (same
iteration, same thread), bulk beyond `INLINE_MAX_BYTES` going on to the reput thread; paced
appends (`paced=True`, the gRPC sends) share a round at most every `PACED_ROUND_S`; a loop round
never waits for the reput thread's lock."""

from __future__ import annotations

import asyncio
import threading
import time

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.dispatch import INLINE_MAX_BYTES, PACED_ROUND_S, ArrivalListener, ReputService
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


def loop_only(open_store: StoreFactory) -> tuple[MessageStore, Heard]:
    """A store whose rounds run only where the test says (no reput thread), and what its
    arrival listener hears."""
    store = open_store()
    assert store.wait_dispatched()
    without_thread(store)
    heard: Heard = []
    store.add_arrival_listener(listen(heard))
    return store, heard


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
    store, heard = loop_only(open_store)

    async def scenario() -> None:
        store.dispatch_on(asyncio.get_running_loop())
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
    store, heard = loop_only(open_store)
    count = 200

    async def appends(paced: bool) -> tuple[int, float]:
        """`count` appends, a loop iteration after each; the rounds they got and the seconds."""
        before = len(heard)
        target = store.get_max_offset_in_queue("T", 0) + count
        started = time.monotonic()
        for _ in range(count):
            assert store.put_message_nowait(mk(0), paced=paced).result.ok
            await asyncio.sleep(0)
        elapsed = time.monotonic() - started
        while store.get_max_offset_in_queue("T", 0) < target:  # a paced round may still be due
            await asyncio.sleep(PACED_ROUND_S)
        return len(heard) - before, elapsed

    async def scenario() -> None:
        store.dispatch_on(asyncio.get_running_loop())
        rounds, _ = await appends(paced=False)
        assert rounds == count
        rounds, elapsed = await appends(paced=True)
        assert 1 <= rounds <= elapsed / PACED_ROUND_S + 2
        if elapsed < count * PACED_ROUND_S / 4:  # a machine not too busy to tell the two apart
            assert rounds < count / 4
        end = store.get_max_offset_in_queue("T", 0)
        assert store.put_message_nowait(mk(0), paced=True).result.ok  # its round waits (or runs next)
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
    heard: Heard = []
    store.add_arrival_listener(listen(heard))
    body = bytes(8 * 1024)
    count = 2 * INLINE_MAX_BYTES // len(body) + 5
    loop = asyncio.new_event_loop()  # run one iteration at a time, by the test
    reput.run_on(loop)
    for _ in range(count):
        assert store.put_message_nowait(mk(0, body)).result.ok
        reput.wakeup()
    loop.run_until_complete(asyncio.sleep(0))  # the loop's round, then the sleep's end
    loop.close()
    assert len(heard) == 1  # one round for all the appends
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
        store.dispatch_on(asyncio.get_running_loop())
        await asyncio.to_thread(lambda: [store.put_message_nowait(mk(1)) for _ in range(4)])
        assert await asyncio.to_thread(store.wait_dispatched)

    asyncio.run(scenario())
    assert store.get_max_offset_in_queue("T", 1) == 4


def test_a_closed_loop_falls_back_to_the_thread(open_store: StoreFactory) -> None:
    store = open_store()
    loop = asyncio.new_event_loop()
    store.dispatch_on(loop)
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
    loop = asyncio.new_event_loop()  # a loop that does not run its rounds: stalled
    store.dispatch_on(loop)
    assert not reput.loop_rounds_running()
    assert store.put_message_nowait(mk(2)).result.ok
    deadline = time.monotonic() + 5
    while store.get_max_offset_in_queue("T", 2) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get_max_offset_in_queue("T", 2) == 1  # the safety net took it
    loop.run_until_complete(asyncio.sleep(0))  # the loop's round runs now (nothing left)
    loop.close()
    assert reput.loop_rounds_running()


def test_a_loop_round_never_waits_for_the_lock_of_the_thread(open_store: StoreFactory) -> None:
    """With the reput thread in a round (another thread holding the round lock), a loop round
    does not wait for it: it returns at once and runs again `PACED_ROUND_S` later, when the
    records are dispatched on the loop's thread. Were the round to block on the lock, the loop
    would hang here: the holder lets go only after the loop has gone on to its next iteration."""
    store, heard = loop_only(open_store)
    reput = store.reput
    taken, let_go = threading.Event(), threading.Event()

    def holder() -> None:  # the thread's round, in progress until the loop says so
        with reput._round:
            taken.set()
            let_go.wait(30)

    async def scenario() -> None:
        store.dispatch_on(asyncio.get_running_loop())
        thread = threading.Thread(target=holder)
        thread.start()
        await asyncio.to_thread(taken.wait, 30)
        assert store.put_message_nowait(mk(3)).result.ok
        await asyncio.sleep(0)  # the round's iteration: it found the lock taken and went on
        assert store.get_max_offset_in_queue("T", 3) == 0 and not heard
        assert reput._later_pending  # it comes back later instead
        let_go.set()
        await asyncio.to_thread(thread.join, 30)
        while not heard:  # the deferred round (an event of the loop, not a sleep of the test)
            await asyncio.sleep(PACED_ROUND_S)
        assert store.get_max_offset_in_queue("T", 3) == 1
        assert heard == [("T", 3, 1, threading.get_ident())]  # dispatched on the loop's thread

    asyncio.run(scenario())


def test_a_deferred_round_finds_what_the_thread_left(open_store: StoreFactory) -> None:
    """A round deferred by a busy lock runs once the thread's round ends: with nothing left (the
    thread took the records) it does nothing; with records appended meanwhile, it takes them."""
    store, heard = loop_only(open_store)
    reput = store.reput

    async def scenario() -> None:
        store.dispatch_on(asyncio.get_running_loop())
        with reput._round:  # the thread's round, on this thread: it takes the first record
            assert store.put_message_nowait(mk(4)).result.ok
            await asyncio.sleep(0)  # the loop's round defers
            assert reput._later_pending
            store.dispatcher.dispatch_available()
        assert heard == [("T", 4, 1, threading.get_ident())]
        while reput._later_pending:
            await asyncio.sleep(PACED_ROUND_S)
        assert len(heard) == 1  # nothing left for the deferred round
        assert store.put_message_nowait(mk(4)).result.ok
        await asyncio.sleep(0)
        assert heard[-1][:3] == ("T", 4, 2)

    asyncio.run(scenario())
