"""POP state on a real store with a manual clock: pop, ack, change invisible time, redelivery with
attempt+1, stale and forged handles, and a restart that keeps acks and in-flight messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from rocketlite.broker.pop.log import InFlight, PopLogError, QueuePopState
from rocketlite.broker.pop.state import PopBatch, PopService
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.clock import ManualClock
from rocketlite.protocol.formats.record import MessageInner, StoredRecord, decode_record
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire.pop import INIT_MODE_MIN, ReceiptHandle, StaleReceiptHandleError
from rocketlite.store.api import StoreAPI
from rocketlite.store.message_store import MessageStore
from tests.support.store import StoreFactory

TOPIC, GROUP, BROKER = "PopTopic", "pop_cg", "broker-a"
HOST = HostAddress.of("127.0.0.1", 10911)


def put(store: MessageStore, n: int, queue_id: int = 0) -> None:
    for i in range(n):
        msg = MessageInner(
            topic=TOPIC, body=f"m{i}".encode(), born_host=HOST, store_host=HOST, queue_id=queue_id
        )
        assert store.put_message(msg).ok
    assert store.wait_dispatched(10.0)


def service(store: MessageStore, config_dir: Path, clock: ManualClock) -> PopService:
    offsets = ConsumerOffsetTable(config_dir)
    offsets.load()
    svc = PopService(store, offsets, clock, config_dir, BROKER)
    svc.load()
    return svc


def handle(batch: PopBatch, i: int) -> ReceiptHandle:
    m = batch.messages[i]
    start = batch.start_offsets[m.queue_id]
    return ReceiptHandle(
        start, batch.pop_time, batch.invisible_time, 0, "0", BROKER, m.queue_id, m.queue_offset
    )


def pop(svc: PopService, n: int = 32, invisible: int = 10_000, queues: list[int] | None = None) -> PopBatch:
    return svc.pop(GROUP, TOPIC, queues or [0], n, invisible, INIT_MODE_MIN)


def test_pop_ack_change_redeliver_and_stale(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 3)
    first = pop(svc, 2)
    assert [m.queue_offset for m in first.messages] == [0, 1]
    assert [decode_record(m.record).body for m in first.messages] == [b"m0", b"m1"]
    assert first.rest_num == 1 and first.start_offsets == {0: 0}
    assert [m.queue_offset for m in pop(svc).messages] == [2]  # the cursor moved; 0 and 1 invisible
    assert pop(svc).messages == []

    svc.ack(GROUP, TOPIC, 0, 0, handle(first, 0))
    with pytest.raises(StaleReceiptHandleError, match="acked already"):  # never acked twice
        svc.ack(GROUP, TOPIC, 0, 0, handle(first, 0))
    forged = ReceiptHandle(0, first.pop_time + 5, 10_000, 0, "0", BROKER, 0, 1)
    with pytest.raises(StaleReceiptHandleError, match="stale"):
        svc.ack(GROUP, TOPIC, 0, 1, forged)
    with pytest.raises(StaleReceiptHandleError, match="not issued by this broker"):
        svc.ack(GROUP, TOPIC, 0, 1, ReceiptHandle(0, first.pop_time, 1, 0, "0", "other", 0, 1))
    with pytest.raises(StaleReceiptHandleError, match="names queue 0 offset 1"):
        svc.ack(GROUP, TOPIC, 0, 2, handle(first, 1))

    # offset 1 gets 30 s more; offset 2 comes back after its 10 s with attempt 1
    new_pop_time = svc.change_invisible_time(GROUP, TOPIC, 0, 1, handle(first, 1), 30_000)
    with pytest.raises(StaleReceiptHandleError):  # the old handle is stale now
        svc.ack(GROUP, TOPIC, 0, 1, handle(first, 1))
    clock.advance(10_000)
    again = pop(svc)
    assert [(m.queue_offset, m.attempts) for m in again.messages] == [(2, 1)]
    assert decode_record(again.messages[0].record).reconsume_times == 1
    assert again.pop_time > first.pop_time
    svc.ack(GROUP, TOPIC, 0, 2, handle(again, 0))
    clock.advance(20_000)
    assert pop(svc).messages == []  # 1 ms early: its new popTime was the old one + 1
    clock.advance(1)
    late = pop(svc)
    assert [(m.queue_offset, m.attempts) for m in late.messages] == [(1, 1)]
    assert late.pop_time > new_pop_time
    # the committed offset is the lowest in flight
    assert svc.offsets.query(GROUP, TOPIC, 0) == 1
    svc.ack(GROUP, TOPIC, 0, 1, handle(late, 0))
    assert svc.offsets.query(GROUP, TOPIC, 0) == 3
    assert svc.in_flight(GROUP, TOPIC, 0) == {}


def test_restart_keeps_acks_and_in_flight(open_store: StoreFactory, tmp_path: Path) -> None:
    root, cfg = tmp_path / "store", tmp_path / "cfg"
    store = open_store(root)
    clock = ManualClock()
    svc = service(store, cfg, clock)
    put(store, 2, queue_id=0)
    put(store, 1, queue_id=1)
    batch = pop(svc, queues=[0, 1])
    assert sorted((m.queue_id, m.queue_offset) for m in batch.messages) == [(0, 0), (0, 1), (1, 0)]
    svc.ack(GROUP, TOPIC, 0, 0, handle(batch, 0))
    assert svc.persist()
    store.shutdown()

    store2 = open_store(root)
    svc2 = service(store2, cfg, clock)  # no consumer-offset persist: pop state alone decides
    assert pop(svc2, queues=[0, 1]).messages == []  # still invisible, nothing new
    clock.advance(10_000)
    back = pop(svc2, queues=[0, 1])
    assert sorted((m.queue_id, m.queue_offset, m.attempts) for m in back.messages) == [(0, 1, 1), (1, 0, 1)]
    for i in range(2):  # the acked message 0 never comes back; the others are acked now
        m = back.messages[i]
        svc2.ack(GROUP, TOPIC, m.queue_id, m.queue_offset, handle(back, i))
    clock.advance(60_000)
    assert pop(svc2, queues=[0, 1]).messages == []


def test_bad_state_file_is_not_loaded_silently(tmp_path: Path, open_store: StoreFactory) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "popState.json").write_text('{"queues": [{"group": "g"}]}')
    svc = PopService(open_store(), ConsumerOffsetTable(cfg), ManualClock(), cfg, BROKER)
    with pytest.raises(PopLogError, match="cannot read the POP state"):
        svc.load()
    assert not (cfg / "popState.log").exists()  # nothing written over what could not be read


def test_dead_letter_after_max_reconsume_times(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 1)
    dead: list[StoredRecord] = []

    def pop_max1() -> PopBatch:
        return svc.pop(
            GROUP, TOPIC, [0], 32, 1_000, INIT_MODE_MIN, max_reconsume_times=1, dead_letter=dead.append
        )

    assert [m.attempts for m in pop_max1().messages] == [0]
    clock.advance(1_000)
    assert [m.attempts for m in pop_max1().messages] == [1]
    clock.advance(1_001)
    assert pop_max1().messages == [] and svc.in_flight(GROUP, TOPIC, 0) == {}
    assert [(r.body, r.reconsume_times, r.queue_offset) for r in dead] == [(b"m0", 1, 0)]
    assert svc.offsets.query(GROUP, TOPIC, 0) == 1  # dead-lettered counts as consumed
    clock.advance(10_000)
    assert pop_max1().messages == [] and len(dead) == 1


def test_ordered_pop_waits_for_acks_and_redelivers_the_same_messages(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 5)

    def opop(n: int = 2) -> PopBatch:
        return svc.pop(GROUP, TOPIC, [0], n, 1_000, INIT_MODE_MIN, order=True)

    first = opop()
    assert [m.queue_offset for m in first.messages] == [0, 1]
    assert opop().messages == []  # 0 and 1 in flight: nothing new from the queue
    svc.ack(GROUP, TOPIC, 0, 0, handle(first, 0))
    assert opop().messages == []  # 1 still in flight
    clock.advance(1_000)
    again = opop()
    assert [(m.queue_offset, m.attempts) for m in again.messages] == [(1, 1)]  # the same, attempt+1
    svc.ack(GROUP, TOPIC, 0, 1, handle(again, 0))
    assert [m.queue_offset for m in opop().messages] == [2, 3]  # now the queue moves on
    # an unordered pop of the same queue would not wait
    assert [m.queue_offset for m in pop(svc).messages] == [4]


def test_ordered_pop_moves_on_after_the_dlq(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 2)
    dead: list[StoredRecord] = []

    def opop() -> PopBatch:
        return svc.pop(GROUP, TOPIC, [0], 1, 1_000, INIT_MODE_MIN, order=True,
                       max_reconsume_times=1, dead_letter=dead.append, confirm_dead_letter=True)  # fmt: skip

    assert [(m.queue_offset, m.attempts) for m in opop().messages] == [(0, 0)]
    clock.advance(1_000)
    assert [(m.queue_offset, m.attempts) for m in opop().messages] == [(0, 1)]
    clock.advance(1_000)
    assert opop().messages == []  # to the DLQ, hidden until its copy is confirmed durable
    assert [r.queue_offset for r in dead] == [0]
    assert list(svc.in_flight(GROUP, TOPIC, 0)) == [0]
    svc.dead_lettered(GROUP, TOPIC, 0, 0)
    assert svc.in_flight(GROUP, TOPIC, 0) == {}
    assert [(m.queue_offset, m.attempts) for m in opop().messages] == [(1, 0)]


def test_unconfirmed_dead_letter_comes_back_after_a_restart(open_store: StoreFactory, tmp_path: Path) -> None:
    """Its DLQ copy was never confirmed durable: the crash must not lose the message."""
    root, cfg = tmp_path / "store", tmp_path / "cfg"
    store = open_store(root)
    clock = ManualClock()
    svc = service(store, cfg, clock)
    put(store, 1)
    dead: list[StoredRecord] = []

    def dpop(s: PopService) -> PopBatch:
        return s.pop(GROUP, TOPIC, [0], 1, 1_000, INIT_MODE_MIN, max_reconsume_times=0,
                     dead_letter=dead.append, confirm_dead_letter=True)  # fmt: skip

    assert len(dpop(svc).messages) == 1
    clock.advance(1_000)
    assert dpop(svc).messages == [] and len(dead) == 1
    assert svc.persist()
    store.shutdown()
    svc2 = service(open_store(root), cfg, clock)
    assert dpop(svc2).messages == [] and len(dead) == 2  # handed to the DLQ again, not lost


def test_a_shortened_or_restarted_deadline_is_seen_by_the_next_pop(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """A pop skips the scan of a queue's in-flight messages until the earliest deadline it knows
    of (`QueuePopState.due_from`): a change of invisible time to less, a redelivery and a restart
    each make the messages they touch due on time, not at a deadline seen earlier."""
    store = open_store()
    clock = ManualClock()
    cfg = tmp_path / "cfg"
    svc = service(store, cfg, clock)
    put(store, 3)
    first = pop(svc, 3, invisible=60_000)
    clock.advance(1_000)
    assert pop(svc).messages == []  # nothing due for 59 s
    svc.change_invisible_time(GROUP, TOPIC, 0, 1, handle(first, 1), 100)
    clock.advance(100)
    again = pop(svc, invisible=500)
    assert [(m.queue_offset, m.attempts) for m in again.messages] == [(1, 1)]
    clock.advance(500)
    assert [(m.queue_offset, m.attempts) for m in pop(svc).messages] == [(1, 2)]  # its new deadline
    svc.table.log.sync()
    svc.table.log.close()
    restarted = service(store, cfg, clock)  # what the log says, no bound carried over
    clock.advance(60_000)
    assert sorted(m.queue_offset for m in pop(restarted).messages) == [0, 1, 2]


def test_the_committed_offset_is_the_lowest_in_flight_in_any_order_of_puts() -> None:
    """`QueuePopState.committed` reads the first key while offsets were put in ascending order,
    and falls back to a look at all of them once one came out of order, until none is left."""
    state = QueuePopState(10)
    assert state.committed() == 10
    for offset in (5, 7, 8):
        state.keep(offset, InFlight(1, 2, 0))
    state.keep(7, InFlight(3, 4, 1))  # a redelivery keeps its place
    assert state.ordered and state.committed() == 5
    del state.in_flight[5]
    assert state.committed() == 7
    state.keep(6, InFlight(1, 2, 0))  # out of order (a cursor corrected backwards)
    assert not state.ordered and state.committed() == 6
    state.in_flight.clear()
    state.keep(12, InFlight(1, 2, 0))  # nothing was in flight: in order again
    assert state.ordered and state.committed() == 12
    loaded = QueuePopState(10, {9: InFlight(1, 2, 0), 3: InFlight(1, 2, 0)})  # as a snapshot loads
    assert loaded.committed() == 3


def test_a_held_pops_next_look_is_no_later_than_the_earliest_deadline(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """`next_deadline` answers from each queue's bound (no scan): never after a deadline in
    flight, exact once a look has scanned, and None with nothing in flight."""
    store = open_store()
    clock = ManualClock()
    cfg = tmp_path / "cfg"
    svc = service(store, cfg, clock)
    put(store, 2, 0)
    put(store, 2, 1)
    assert svc.next_deadline(GROUP, TOPIC, [0, 1]) is None
    first = pop(svc, 2, invisible=60_000, queues=[0])
    clock.advance(1_000)
    second = pop(svc, 2, invisible=5_000, queues=[1])
    assert svc.next_deadline(GROUP, TOPIC, [0, 1]) == second.pop_time + 5_000
    assert svc.next_deadline(GROUP, TOPIC, [0]) == first.pop_time + 60_000
    for i in range(2):
        svc.ack(GROUP, TOPIC, 1, i, handle(second, i))
    assert svc.next_deadline(GROUP, TOPIC, [1]) is None
    svc.table.log.sync()
    svc.table.log.close()
    restarted = service(store, cfg, clock)  # no bound carried over: look at once
    assert restarted.next_deadline(GROUP, TOPIC, [0, 1]) == 0
    assert pop(restarted, queues=[0, 1]).messages == []  # that look finds nothing due ...
    assert restarted.next_deadline(GROUP, TOPIC, [0, 1]) == first.pop_time + 60_000  # ... and is exact


def test_a_batch_counts_messages_not_runs(open_store: StoreFactory, tmp_path: Path) -> None:
    """A read of back-to-back records is one run of several messages: the batch size still counts
    messages, across queues and with a redelivery first, and each record is the one stored."""
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 5, queue_id=0)
    put(store, 5, queue_id=1)
    first = pop(svc, 3, queues=[0, 1])
    assert first.count == 3 and len(first.runs) == 1
    assert [(m.queue_id, m.queue_offset) for m in first.messages] == [(0, 0), (0, 1), (0, 2)]
    second = pop(svc, 4, invisible=60_000, queues=[0, 1])
    assert [(m.queue_id, m.queue_offset) for m in second.messages] == [(0, 3), (0, 4), (1, 0), (1, 1)]
    assert [decode_record(m.record).body for m in second.messages] == [b"m3", b"m4", b"m0", b"m1"]
    clock.advance(10_001)  # the first batch is due again: it comes back before anything new
    third = pop(svc, 4, queues=[0, 1])
    assert [(m.queue_id, m.queue_offset, m.attempts) for m in third.messages] == [
        (0, 0, 1), (0, 1, 1), (0, 2, 1), (1, 2, 0)
    ]  # fmt: skip
    assert [decode_record(m.record).reconsume_times for m in third.messages] == [1, 1, 1, 0]


def test_ack_columns_answers_each_entry_and_acks_nothing_twice(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """One call of mixed entries on two queues: each refusal names its entry's cause, a duplicate
    is refused the second time, and only the accepted offsets leave the in-flight set (the one
    path and the per-entry one give the same state)."""
    store = open_store()
    clock = ManualClock()
    svc = service(store, tmp_path / "cfg", clock)
    put(store, 3, queue_id=0)
    put(store, 2, queue_id=1)
    batch = pop(svc, queues=[0, 1])
    t = batch.pop_time
    assert svc.ack_columns(GROUP, TOPIC, [0], [0], [t]) == {}  # offset 0 of queue 0 acked before
    refused = svc.ack_columns(
        GROUP, TOPIC,
        [0, 0, 1, 0, 1, 1, 0],
        [1, 0, 0, 1, 1, 9, 2],
        [t, t, t, t, t + 1, t, t],
    )  # fmt: skip
    assert sorted(refused) == [1, 3, 4, 5]
    assert "acked already" in str(refused[1])  # acked by the first call
    assert "acked already" in str(refused[3])  # the duplicate of entry 0
    assert "stale" in str(refused[4])  # another popTime
    assert "acked already or never popped" in str(refused[5])  # never popped
    assert svc.in_flight(GROUP, TOPIC, 0) == {} and list(svc.in_flight(GROUP, TOPIC, 1)) == [1]
    assert svc.offsets.query(GROUP, TOPIC, 0) == 3 and svc.offsets.query(GROUP, TOPIC, 1) == 1
    # the one-step path over two queues, then the same again: every entry refused
    put(store, 1, queue_id=0)
    put(store, 1, queue_id=1)
    late = pop(svc, queues=[0, 1])
    assert sorted((m.queue_id, m.queue_offset) for m in late.messages) == [(0, 3), (1, 2)]
    lt = late.pop_time
    assert svc.ack_columns(GROUP, TOPIC, [1, 0], [2, 3], [lt, lt]) == {}
    assert sorted(svc.ack_columns(GROUP, TOPIC, [1, 0], [2, 3], [lt, lt])) == [0, 1]
    assert svc.offsets.query(GROUP, TOPIC, 0) == 4
    # the one-queue path: all in flight, distinct; then the same again, every entry refused
    assert svc.ack_columns(GROUP, TOPIC, [1], [1], [t]) == {}
    assert sorted(svc.ack_columns(GROUP, TOPIC, [1, 1], [0, 1], [t, t])) == [0, 1]
    assert svc.offsets.query(GROUP, TOPIC, 1) == 3
    svc.close()
    again = service(store, tmp_path / "cfg", clock)  # the log holds the acks
    assert again.in_flight(GROUP, TOPIC, 0) == {} and again.in_flight(GROUP, TOPIC, 1) == {}


class CountedReads:
    """The real store, its reads counted: how many queues a pop reads."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.reads = 0

    def get_message(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return self.store.get_message(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_pop_reads_only_the_queues_with_messages_past_its_cursor(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """A look over 16 queues at a low rate finds one message, or none: the queues with nothing
    past the group's cursor are not read (the read would only say so)."""
    store = open_store()
    counted = CountedReads(store)
    offsets = ConsumerOffsetTable(tmp_path / "cfg")
    offsets.load()
    svc = PopService(cast(StoreAPI, counted), offsets, ManualClock(), tmp_path / "cfg", BROKER)
    svc.load()
    queues = list(range(16))
    for queue_id in queues:
        put(store, 1, queue_id)
    assert len(pop(svc, queues=queues).messages) == 16
    assert counted.reads == 16
    put(store, 1, 5)
    counted.reads = 0
    batch = pop(svc, queues=queues)
    assert [(m.queue_id, m.queue_offset) for m in batch.messages] == [(5, 1)]
    assert counted.reads == 1  # queue 5 only
    assert pop(svc, queues=queues).messages == []
    assert counted.reads == 1  # nothing past any cursor: nothing read
    # a queue with no consume queue yet is not read either; the one written to then is
    put(store, 2, 16)
    batch = pop(svc, queues=[*queues, 16, 17])
    assert [(m.queue_id, m.queue_offset) for m in batch.messages] == [(16, 0), (16, 1)]
    assert counted.reads == 2 and batch.rest_num == 0
