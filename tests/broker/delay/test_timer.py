"""5.x timer messages on a real store with a manual clock: parking, delivery in time order and
never early, the properties RocketMQ leaves, restarts (clean and without a progress write), and
rolling a far timer so the restart stays bounded (and not rolling pending timers for nothing), the
delivered copies on disk before the progress calls them done, an unreadable queue unit.
Over the wire: tests/broker/delay/test_timer_wire.py.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.delay.timer import TIMER_TOPIC, TimerMessageService, park_timer_message
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import ManualClock
from rocketlite.protocol.errors import MessageIllegalError
from rocketlite.protocol.formats.record import MessageInner, StoredRecord, decode_record
from rocketlite.protocol.message import HostAddress, properties_to_string, string_to_properties
from rocketlite.store.message_store import MessageStore
from tests.support.store import small_config

HOST = HostAddress.of("127.0.0.1", 10911)
DAY_MS = 86_400_000


def message(topic: str = "T", queue_id: int = 1, **props: str) -> MessageInner:
    return message_with(props, topic, queue_id)


def message_with(props: dict[str, str], topic: str = "T", queue_id: int = 1) -> MessageInner:
    return MessageInner(
        topic=topic,
        body=b"body-" + props.get("UNIQ_KEY", "x").encode(),
        born_host=HOST,
        store_host=HOST,
        queue_id=queue_id,
        born_timestamp=1,
        properties_string=properties_to_string(props),
    )


class Rig:
    """A store, a manual clock and a timer service over them; `restart` makes a new service."""

    def __init__(self, root: Path, **store_config: Any) -> None:
        self.root = root
        self.clock = ManualClock()
        self.store = MessageStore(small_config(root, **store_config), clock=self.clock)
        self.store.start()
        self.topics = TopicConfigManager(root / "config", BrokerConfig(), self.clock, 2)
        self.service = self.new_service()

    def new_service(self, roll_span: int = 50_000) -> TimerMessageService:
        service = TimerMessageService(
            self.store,
            self.topics,
            BrokerStats(),
            self.clock,
            HOST,
            self.root / "config",
            roll_span=roll_span,
        )
        service.load()
        return service

    def send(self, topic: str = "T", queue_id: int = 1, **props: str) -> MessageInner:
        msg = message(topic, queue_id, **props)
        self.service.park(msg)
        assert self.store.put_message_nowait(msg).result.ok
        assert self.store.wait_dispatched(10)
        return msg

    def advance(self, ms: int) -> float | None:
        self.clock.advance(ms)
        return self.run()

    def run(self) -> float | None:
        """Passes until nothing is due right away; what the last pass said."""
        while (delay := self.service.run_once()) == 0:
            pass
        assert self.store.wait_dispatched(10)
        return delay

    def delivered(self, topic: str = "T", queue_id: int = 1) -> list[StoredRecord]:
        cq = self.store.cq_store.get(topic, queue_id)
        if cq is None:
            return []
        out = []
        for off in range(cq.min_offset, cq.max_offset):
            unit = cq.get_unit(off)
            assert unit is not None
            view = self.store.select_one_message_by_offset(unit[0], unit[1])
            assert view is not None
            out.append(decode_record(view))
            view.release()
        return out


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.store.shutdown()


def keys(records: list[StoredRecord]) -> list[str]:
    return [r.get_property("UNIQ_KEY") or "" for r in records]


# ------------------------------------------------------------------------------------------ parking
def test_parking_moves_a_future_timer_to_the_timer_topic() -> None:
    now = 1_700_000_000_000
    msg = message(UNIQ_KEY="a", TAGS="t", TIMER_DELIVER_MS=str(now + 5000))
    assert park_timer_message(msg, now, 3600) == now + 5000
    props = string_to_properties(msg.properties_string)
    assert (msg.topic, msg.queue_id) == (TIMER_TOPIC, 0)
    assert props["REAL_TOPIC"] == "T" and props["REAL_QID"] == "1"
    assert props["TIMER_OUT_MS"] == str(now + 5000)
    assert props["TIMER_DELIVER_MS"] == str(now + 5000) and props["TAGS"] == "t"


def test_relative_properties_and_their_precedence() -> None:
    now = 1_000_000
    assert park_timer_message(message(TIMER_DELAY_MS="250"), now, 10) == now + 250
    assert park_timer_message(message(TIMER_DELAY_SEC="3", TIMER_DELAY_MS="250"), now, 10) == now + 3000
    assert park_timer_message(message(TIMER_DELAY_MS="7", TIMER_DELIVER_MS="9"), now, 10) == now + 7


def test_a_time_not_in_the_future_is_stored_as_sent() -> None:
    now = 1_000_000
    for value in (str(now), str(now - 1), "0", "-5"):
        msg = message(TIMER_DELIVER_MS=value)
        before = msg.properties_string
        assert park_timer_message(msg, now, 10) is None
        assert (msg.topic, msg.properties_string) == ("T", before)


def test_a_delay_level_wins_and_the_timer_properties_go() -> None:
    msg = message(DELAY="2", TIMER_DELIVER_MS="99999999999999", TIMER_DELAY_SEC="5")
    assert park_timer_message(msg, 1_000_000, 10) is None
    assert string_to_properties(msg.properties_string) == {"DELAY": "2"}


def test_an_already_delivered_timer_and_transaction_halves_are_not_parked() -> None:
    delivered = message(TIMER_DELIVER_MS="5000", TIMER_OUT_MS="5000")
    assert park_timer_message(delivered, 1000, 10) is None and delivered.topic == "T"
    half = message(TIMER_DELIVER_MS="5000")
    half.sys_flag = 4  # TRANSACTION_PREPARED_TYPE
    assert park_timer_message(half, 1000, 10) is None and half.topic == "T"


@pytest.mark.parametrize(
    ("name", "value"),
    [("TIMER_DELIVER_MS", "soon"), ("TIMER_DELIVER_MS", "1.5e12"), ("TIMER_DELAY_SEC", " 5"),
     ("TIMER_DELAY_MS", "9" * 20), ("TIMER_DELAY_MS", "")],
)  # fmt: skip
def test_a_value_that_is_not_a_whole_number_is_illegal(name: str, value: str) -> None:
    msg = message_with({name: value, "UNIQ_KEY": "u"})
    if value == "":  # an empty value is no property at all once encoded
        assert park_timer_message(msg, 1000, 10) is None
        return
    with pytest.raises(MessageIllegalError, match=f"timer message illegal: {name}=") as info:
        park_timer_message(msg, 1000, 10)
    assert info.value.code == 13  # MESSAGE_ILLEGAL


def test_a_time_beyond_the_max_delay_is_illegal() -> None:
    now = 1_000_000
    assert park_timer_message(message(TIMER_DELAY_SEC="10"), now, 10) == now + 10_000
    with pytest.raises(MessageIllegalError, match="bigger than the max delay 10000ms") as info:
        park_timer_message(message(TIMER_DELAY_MS="10001"), now, 10)
    assert info.value.code == 13


# ----------------------------------------------------------------------------------------- delivery
def test_delivered_at_its_time_never_before_with_rocketmq_properties(rig: Rig) -> None:
    due = rig.clock.now_ms() + 5000
    parked = rig.send(UNIQ_KEY="a", TAGS="tag", KEYS="k1", TIMER_DELIVER_MS=str(due))
    parked_at = rig.clock.now_ms()
    assert parked.topic == TIMER_TOPIC and rig.delivered() == []
    assert rig.run() == pytest.approx(5.0)
    assert rig.service.pending == 1
    assert rig.advance(4999) == pytest.approx(0.001)
    assert rig.delivered() == []
    assert rig.advance(1) is None
    [rec] = rig.delivered()
    props = string_to_properties(rec.properties_string)
    assert rec.body == b"body-a" and rec.born_timestamp == 1 and rec.store_timestamp == due
    assert not {"REAL_TOPIC", "REAL_QID"} & props.keys()
    assert props["TIMER_OUT_MS"] == str(due) and props["TIMER_DELIVER_MS"] == str(due)
    assert props["TIMER_ENQUEUE_MS"] == str(parked_at) and props["TIMER_DEQUEUE_MS"] == str(due)
    assert (props["UNIQ_KEY"], props["TAGS"], props["KEYS"]) == ("a", "tag", "k1")
    assert rig.service.pending == 0 and rig.service.cursor == 1 and rig.service.delivered == 1


def test_many_timers_come_out_in_time_order_and_none_early(rig: Rig) -> None:
    rng = random.Random(7)
    start = rig.clock.now_ms()
    due = {f"m{i}": start + rng.randrange(1, 5000) for i in range(600)}  # more than one batch
    for key, at in due.items():
        rig.send(queue_id=0, UNIQ_KEY=key, TIMER_DELIVER_MS=str(at))
    seen: list[str] = []
    while len(seen) < len(due):
        rig.advance(97)
        now = rig.clock.now_ms()
        fresh = keys(rig.delivered(queue_id=0))[len(seen) :]
        assert all(due[k] <= now for k in fresh)  # none early
        assert all(due[k] > now - 97 for k in fresh)  # none late by more than the step
        seen += fresh
    assert sorted(seen) == sorted(due)
    assert [due[k] for k in seen] == sorted(due[k] for k in seen)


def test_a_clean_restart_delivers_nothing_twice_and_loses_nothing(rig: Rig) -> None:
    now = rig.clock.now_ms()
    for i, delay in enumerate((3000, 1000, 2000, DAY_MS)):
        rig.send(UNIQ_KEY=f"k{i}", TIMER_DELIVER_MS=str(now + delay))
    rig.advance(1000)
    assert keys(rig.delivered()) == ["k1"]
    rig.service.persist()  # what close() does
    saved = json.loads((rig.root / "config" / "timerProgress.json").read_text())
    assert saved == {"cursor": 0, "done": [[1, 1]]}

    rig.service = rig.new_service()
    rig.run()
    assert rig.service.pending == 3  # k0, k2, far
    rig.advance(2000)
    assert keys(rig.delivered()) == ["k1", "k2", "k0"]
    rig.advance(DAY_MS)
    assert keys(rig.delivered()) == ["k1", "k2", "k0", "k3"]
    assert rig.service.cursor == 4


def test_without_a_progress_write_a_restart_delivers_again_but_loses_nothing(rig: Rig) -> None:
    now = rig.clock.now_ms()
    rig.send(UNIQ_KEY="early", TIMER_DELIVER_MS=str(now + 10))
    rig.send(UNIQ_KEY="late", TIMER_DELIVER_MS=str(now + 5000))
    rig.advance(10)
    rig.service = rig.new_service()  # as after a SIGKILL before the progress was written
    rig.advance(5000)
    assert sorted(keys(rig.delivered())) == ["early", "early", "late"]  # at least once


def test_a_far_timer_is_rolled_so_the_restart_reads_a_bounded_span(rig: Rig) -> None:
    rig.service = rig.new_service(roll_span=10)
    now = rig.clock.now_ms()
    rig.send(UNIQ_KEY="far", TIMER_DELIVER_MS=str(now + DAY_MS))
    for i in range(30):
        rig.send(UNIQ_KEY=f"s{i}", TIMER_DELIVER_MS=str(now + 1 + i))
    rig.advance(100)
    assert len(rig.delivered()) == 30
    assert rig.service.rolled == 1 and rig.service.cursor == 31  # the far one's copy is at 31
    assert [rec.get_property("TIMER_ROLL_TIMES") for rec in rig.delivered(TIMER_TOPIC, 0)][-1] == "1"
    rig.service.persist()
    assert json.loads((rig.root / "config" / "timerProgress.json").read_text()) == {"cursor": 31, "done": []}

    rig.service = rig.new_service(roll_span=10)
    rig.run()
    assert rig.service.pending == 1
    rig.advance(DAY_MS)
    delivered = rig.delivered()
    assert keys(delivered).count("far") == 1
    far = delivered[-1]
    assert far.get_property("UNIQ_KEY") == "far" and far.store_timestamp == now + 100 + DAY_MS


def test_pending_timers_alone_are_not_rolled_and_a_pile_of_done_ones_rolls_each_once(rig: Rig) -> None:
    rig.service = rig.new_service(roll_span=10)
    now = rig.clock.now_ms()
    for i in range(20):  # more pending timers than roll_span, nothing delivered
        rig.send(UNIQ_KEY=f"h{i}", TIMER_DELIVER_MS=str(now + 3_600_000 + i))
    for _ in range(5):  # wake-ups with nothing due: rolling would save nothing
        rig.run()
    cq = rig.store.cq_store.get(TIMER_TOPIC, 0)
    assert cq is not None and cq.max_offset == 20 and rig.service.rolled == 0

    for i in range(30):  # delivered above the old pending ones: now the cursor lags for nothing
        rig.send(UNIQ_KEY=f"s{i}", TIMER_DELIVER_MS=str(now + 1 + i))
    rig.advance(100)
    assert len(rig.delivered()) == 30
    assert rig.service.rolled == 20 and rig.service.cursor == 50  # the copies are at 50..69
    for _ in range(5):
        rig.run()
    assert rig.service.rolled == 20 and cq.max_offset == 70
    rig.service.persist()
    assert json.loads((rig.root / "config" / "timerProgress.json").read_text()) == {"cursor": 50, "done": []}

    rig.service = rig.new_service(roll_span=10)  # the restart reads the 20 copies only
    rig.run()
    assert rig.service.pending == 20
    rig.advance(3_600_000 + 100)
    assert sorted(keys(rig.delivered())) == sorted(
        [f"h{i}" for i in range(20)] + [f"s{i}" for i in range(30)]
    )


def test_the_progress_is_written_only_once_the_delivered_copies_are_on_disk(tmp_path: Path) -> None:
    rig = Rig(tmp_path, flush_interval_commit_log=600_000)  # ASYNC_FLUSH, the flusher far away
    try:
        now = rig.clock.now_ms()
        for i in range(3):
            rig.send(UNIQ_KEY=f"k{i}", TIMER_DELIVER_MS=str(now + 10 + i))
        rig.advance(100)
        assert len(rig.delivered()) == 3
        end = rig.store.commit_log.max_offset  # the last copy ends here
        assert rig.store.commit_log.flushed_where < end
        asyncio.run(rig.service.close())
        saved = json.loads((rig.root / "config" / "timerProgress.json").read_text())
        assert saved == {"cursor": 3, "done": []}
        assert rig.store.commit_log.flushed_where >= end
    finally:
        rig.store.shutdown()


def test_an_unreadable_unit_below_the_end_does_not_spin_the_loop(rig: Rig) -> None:
    now = rig.clock.now_ms()
    for i in range(120):  # two consume-queue files of 100 units
        rig.send(UNIQ_KEY=f"k{i}", TIMER_DELIVER_MS=str(now + 10))
    cq = rig.store.cq_store.get(TIMER_TOPIC, 0)
    assert cq is not None
    first = next(iter(cq._mfq))
    first.close()  # as if closed under the reader: units 0..99 cannot be read
    assert cq.get_unit(0) is None and cq.max_offset == 120
    passes = [rig.service.run_once() for _ in range(3)]
    assert all(p != 0 for p in passes)  # backs off instead of "more right away" forever
    assert rig.service.pending == 0 and rig.delivered() == []
