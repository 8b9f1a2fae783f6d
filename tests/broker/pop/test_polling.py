"""Held 4.x POP_MESSAGE requests over 127.0.0.1 and the POP core's lines of held pops
(`broker/pop/polling.py`): an arrival wakes one held pop of the group; a full batch wakes the next
one, so a burst is spread over as many pops as it needs; a woken pop that goes away before it
looked hands its wake on; an arrival while a woken pop has not looked yet goes to that pop; a pop
joining a line held on its queues waits without a look."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from rocketlite.broker.pop.polling import PopPolling, Waiter
from rocketlite.broker.pop.processor import PopMessageProcessor, PopRequest
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import decode_records
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.pop import INIT_MODE_MIN, POLLING_TIMEOUT
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.pop_client import ack, handles, pop
from tests.support.store import message, put_batch


def _pops(broker: BrokerUnderTest) -> PopMessageProcessor:
    parts = broker.controller.parts
    assert parts is not None
    return parts.pop


async def _until(done: Callable[[], bool]) -> None:
    """Until `done()` holds (the held pops are the broker's, on this loop: each turn moves them)."""
    async with asyncio.timeout(10):
        while not done():
            await asyncio.sleep(0.005)


async def _until_waiting(core: PopMessageProcessor, topic: str, group: str, count: int) -> None:
    await _until(lambda: core.polling.waiting(topic, group) == count)


def _bodies(answer: RemotingCommand) -> list[bytes]:
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return [r.body for r in decode_records(answer.body or b"")]


def test_a_burst_wakes_as_many_held_pops_as_it_fills(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "BurstT", "BurstG"
            assert (await b.send(topic, b"first")).code == 0
            assert _bodies(await pop(b.client, b.addr, group, topic)) == [b"first"]
            core = _pops(b)
            held = [
                asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=15_000, max_nums=1))
                for _ in range(3)
            ]
            await _until_waiting(core, topic, group, 3)
            looks = core.looks
            # Two messages in one dispatch round: one arrival. Its pop's batch (1) is full, so it
            # wakes the next, which takes the second; the third pop is not woken.
            put_batch(b.controller.store, [message(topic, 0, b"a"), message(topic, 0, b"b")])
            done, pending = await asyncio.wait(held, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            while len(done) < 2:
                more, pending = await asyncio.wait(pending, timeout=10, return_when=asyncio.FIRST_COMPLETED)
                assert more, "the second message was not handed out"
                done |= more
            assert sorted(b for d in done for b in _bodies(d.result())) == [b"a", b"b"]
            assert len(pending) == 1 and core.polling.waiting(topic, group) == 1
            assert core.looks - looks == 2  # the third held pop did not look
            assert (await b.send(topic, b"last")).code == 0
            assert _bodies(await pending.pop()) == [b"last"]

    run(scenario())


def test_a_woken_pop_that_goes_away_hands_its_wake_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "HandOnT", "HandOnG"
            assert (await b.send(topic, b"first")).code == 0
            core = _pops(b)
            request = PopRequest(group, topic, -1, 4, 30_000, poll_ms=15_000, init_mode=INIT_MODE_MIN)
            first = await core.pop(request)
            assert [m.queue_offset for m in first.messages] == [0]
            gone, kept = (asyncio.ensure_future(core.pop(request)) for _ in range(2))
            await _until_waiting(core, topic, group, 2)
            wakeups = core.polling.wakeups
            core.polling.arrived(topic, 0)  # the first in line is woken ...
            gone.cancel()  # ... and cancelled before it looked
            # the kept one is woken in its stead, looks, finds nothing and waits on
            await _until(
                lambda: core.polling.wakeups - wakeups == 2 and core.polling.waiting(topic, group) == 1
            )
            assert gone.cancelled() and not kept.done()
            assert (await b.send(topic, b"second")).code == 0
            batch = await asyncio.wait_for(kept, 10)
            assert [m.queue_offset for m in batch.messages] == [1]

    run(scenario())


def test_an_ack_that_frees_an_ordered_queue_wakes_the_pop_held_on_it(tmp_path: Path) -> None:
    """FIFO: a pop held while the queue had a batch in flight takes the next message as soon as
    that batch is acked, not at the end of its polling time."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "FreedT", "FreedG"
            for body in (b"m1", b"m2"):
                assert (await b.send(topic, body, queue_id=0)).code == 0
            first = await pop(b.client, b.addr, group, topic, queue_id=0, max_nums=1, order=True)
            [(record, handle)] = handles(first, b.controller.broker.broker_name)
            assert record.body == b"m1"
            held = asyncio.ensure_future(
                pop(b.client, b.addr, group, topic, queue_id=0, max_nums=1, order=True, poll_ms=15_000)
            )
            await _until_waiting(_pops(b), topic, group, 1)  # m1 in flight: the queue hands out nothing
            assert (await ack(b.client, b.addr, group, record, handle)).code == ResponseCode.SUCCESS
            assert _bodies(await asyncio.wait_for(held, 5)) == [b"m2"]

    run(scenario())


def test_a_due_message_wakes_one_held_pop_not_all(tmp_path: Path) -> None:
    """Held pops of a group share one redelivery timer: when a message's invisible time is over,
    one of them looks and takes it; the others wait on until their poll time is over."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "DueT", "DueG"
            assert (await b.send(topic, b"m")).code == 0
            first = await pop(b.client, b.addr, group, topic, invisible_ms=500, max_nums=1)
            assert _bodies(first) == [b"m"]  # not acked: due again in 500 ms
            core = _pops(b)
            held = [
                asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=2_500, max_nums=1))
                for _ in range(4)
            ]
            await _until_waiting(core, topic, group, 4)
            assert core.polling.timers() == 1  # one timer for the four
            looks = core.looks
            done, pending = await asyncio.wait(held, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert [_bodies(d.result()) for d in done] == [[b"m"]]
            assert core.looks - looks == 1  # only the woken one looked
            answers = await asyncio.gather(*pending)
            assert {a.code for a in answers} == {POLLING_TIMEOUT}
            assert core.looks - looks == 4  # and the three others once, at the end of their poll

    run(scenario())


def test_an_arrival_goes_to_the_pop_woken_already(tmp_path: Path) -> None:
    """Arrivals on two queues while the pop woken by the first has not looked yet: that pop takes
    both messages, and the other held pop is not woken to look at every queue for nothing."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "JoinT", "JoinG"
            assert (await b.send(topic, b"first", queue_id=0)).code == 0
            assert _bodies(await pop(b.client, b.addr, group, topic)) == [b"first"]
            core = _pops(b)
            held = [
                asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=15_000)) for _ in range(2)
            ]
            await _until_waiting(core, topic, group, 2)
            looks, wakeups = core.looks, core.polling.wakeups
            store = b.controller.store
            # two appends in one loop turn: one dispatch round, one arrival on each queue
            put_batch(store, [message(topic, 0, b"a")])
            put_batch(store, [message(topic, 1, b"b")])
            done, pending = await asyncio.wait(held, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert [sorted(_bodies(d.result())) for d in done] == [[b"a", b"b"]]
            assert core.polling.wakeups - wakeups == 1 and core.polling.joined >= 1
            assert core.looks - looks == 1  # the other held pop did not look
            assert core.polling.waiting(topic, group) == 1
            assert (await b.send(topic, b"last")).code == 0
            assert _bodies(await pending.pop()) == [b"last"]

    run(scenario())


def test_a_woken_pop_that_goes_away_hands_on_the_arrivals_it_took(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "JoinGoneT", "JoinGoneG"
            assert (await b.send(topic, b"first", queue_id=0)).code == 0
            core = _pops(b)
            request = PopRequest(group, topic, -1, 4, 30_000, poll_ms=15_000, init_mode=INIT_MODE_MIN)
            assert [m.queue_offset for m in (await core.pop(request)).messages] == [0]
            gone, kept = (asyncio.ensure_future(core.pop(request)) for _ in range(2))
            await _until_waiting(core, topic, group, 2)
            wakeups, joined = core.polling.wakeups, core.polling.joined
            core.polling.arrived(topic, 0)  # the first in line is woken ...
            core.polling.arrived(topic, 1)  # ... and takes this one too
            assert (core.polling.wakeups - wakeups, core.polling.joined - joined) == (1, 1)
            gone.cancel()  # it goes away before it looked: the kept one is woken for both queues
            await _until(
                lambda: core.polling.wakeups - wakeups == 2 and core.polling.waiting(topic, group) == 1
            )
            assert gone.cancelled() and not kept.done()
            assert (await b.send(topic, b"second", queue_id=1)).code == 0
            batch = await asyncio.wait_for(kept, 10)
            assert [(m.queue_id, m.queue_offset) for m in batch.messages] == [(1, 0)]

    run(scenario())


def test_a_burst_on_two_queues_reaches_the_next_pop_through_the_full_batch(tmp_path: Path) -> None:
    """The woken pop looks at the queues its wake names (both); its batch is full, so the next
    held pop is woken for every queue and takes the rest of both."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "SpreadT", "SpreadG"
            assert (await b.send(topic, b"first", queue_id=0)).code == 0
            assert _bodies(await pop(b.client, b.addr, group, topic)) == [b"first"]
            core = _pops(b)
            held = [
                asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=15_000, max_nums=2))
                for _ in range(2)
            ]
            await _until_waiting(core, topic, group, 2)
            store = b.controller.store
            put_batch(store, [message(topic, 0, body) for body in (b"a0", b"a1", b"a2")])
            put_batch(store, [message(topic, 1, b"b0")])
            answers = await asyncio.wait_for(asyncio.gather(*held), 10)
            assert sorted(b for answer in answers for b in _bodies(answer)) == [b"a0", b"a1", b"a2", b"b0"]
            assert core.polling.waiting(topic, group) == 0

    run(scenario())


def test_a_wake_with_no_pop_in_line_goes_to_one_woken_already() -> None:
    polling = PopPolling()
    first, second = Waiter("T", "G", frozenset({0, 1, 2})), Waiter("T", "G", frozenset({3}))
    polling.join(first)
    polling.join(second)
    polling.arrived("T", 0)
    polling.arrived("T", 3)
    assert (first.woken_for, second.woken_for, polling.wakeups) == (frozenset({0}), frozenset({3}), 2)
    assert polling.wake_one("T", "G", (1,))  # nobody in line: the woken one that pops queue 1
    assert not polling.wake_one("T", "G", (7,))  # nobody pops queue 7
    assert (first.woken_for, second.woken_for, polling.wakeups, polling.joined) == (
        frozenset({0, 1}),
        frozenset({3}),
        2,
        1,
    )
    polling.pass_on(first)  # it goes away before it looked: its wake goes on, nobody is in line
    assert second.woken_for == frozenset({3})  # (its queues are not those)
    polling.join(second)  # it looks: no longer woken
    polling.arrived("T", 3)
    assert second.woken_for == frozenset({3}) and polling.wakeups == 3


def test_a_pop_joining_a_line_held_on_its_queues_waits_without_a_look(tmp_path: Path) -> None:
    """The held pop looked at every queue when it joined, and every arrival since wakes a waiter:
    a second pop of the group would find nothing, so it joins the line behind it at once."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            topic, group = "SkipT", "SkipG"
            assert (await b.send(topic, b"first", queue_id=0)).code == 0
            assert _bodies(await pop(b.client, b.addr, group, topic)) == [b"first"]
            core = _pops(b)
            first = asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=15_000))
            await _until_waiting(core, topic, group, 1)
            looks, skipped = core.looks, core.skipped
            second = asyncio.ensure_future(pop(b.client, b.addr, group, topic, poll_ms=15_000))
            await _until_waiting(core, topic, group, 2)
            assert (core.looks - looks, core.skipped - skipped) == (0, 1)
            assert (await b.send(topic, b"a", queue_id=1)).code == 0
            assert _bodies(await asyncio.wait_for(first, 10)) == [b"a"]  # the first in line
            assert (await b.send(topic, b"b", queue_id=2)).code == 0
            assert _bodies(await asyncio.wait_for(second, 10)) == [b"b"]
            assert core.looks - looks == 2  # one each, when woken

    run(scenario())


def test_a_look_that_leaves_messages_behind_makes_the_next_pop_look() -> None:
    polling = PopPolling()
    held, queues = Waiter("T", "G", frozenset({0, 1})), frozenset({0, 1})
    assert not polling.accounted(Waiter("T", "G", queues))  # nobody in line: a pop must look
    polling.join(held)
    assert polling.accounted(Waiter("T", "G", queues))
    assert not polling.accounted(Waiter("T", "G", frozenset({0})))  # other queues
    assert not polling.accounted(Waiter("T", "Other", queues))
    polling.looked(held, every_queue=False, left_behind=True)  # e.g. a read that moved a cursor only
    assert not polling.accounted(Waiter("T", "G", queues))
    polling.looked(held, every_queue=False, left_behind=False)  # a look at some queues: still not
    assert not polling.accounted(Waiter("T", "G", queues))
    polling.looked(held, every_queue=True, left_behind=False)
    assert polling.accounted(Waiter("T", "G", queues))
