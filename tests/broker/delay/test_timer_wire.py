"""5.x timer messages over real sockets: raw SEND_MESSAGE_V2 with the timer properties, rocketlite's
SDK setting them, bad values answered MESSAGE_ILLEGAL, the feature switched off, and pending timers
across a clean restart and a SIGKILL of a broker process.

Waiting is event-driven (the store's arrival listener, long polls); timing checks compare the
store timestamps the broker writes with the delivery time asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.client import AsyncProducer, AsyncPullConsumer, Message, MessageIllegalError
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import string_to_properties
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.message_store import MessageStore
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.crash.broker import BrokerProcess, CrashState
from tests.support.names import unique
from tests.support.sdk import read_queues, wait_route
from tests.support.wire import pull_until_end, send_command

TIMER_TOPIC = "rmq_sys_wheel_timer"
LATE_SLACK_MS = 400  # delivery may lag its time by the loop's latency on a busy CI machine


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Arrivals:
    """Wakes the test when the dispatcher adds units to a topic's queue (no polling)."""

    def __init__(self, store: MessageStore) -> None:
        self.loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()
        self.max_offsets: dict[tuple[str, int], int] = {}
        store.add_arrival_listener(self._on_arrival)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, store_ts: int) -> None:
        del tags, store_ts
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._record, topic, queue_id, max_offset)

    def _record(self, topic: str, queue_id: int, max_offset: int) -> None:
        self.max_offsets[(topic, queue_id)] = max_offset
        self.changed.set()

    async def wait(self, topic: str, queue_id: int, count: int, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while self.max_offsets.get((topic, queue_id), 0) < count:
                self.changed.clear()
                await self.changed.wait()


async def records(b: BrokerUnderTest, topic: str, queue_id: int = 0) -> list[StoredRecord]:
    await b.dispatched()
    got, _ = await pull_until_end(b.client, b.addr, topic, queue_id, group="timer_cg")
    return got


def props(rec: StoredRecord) -> dict[str, str]:
    return string_to_properties(rec.properties_string)


# --------------------------------------------------------------------------------------- raw wire
def test_a_timer_message_is_delivered_at_its_time_and_not_before(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            arrivals = Arrivals(b.controller.store)
            due = now_ms() + 1500
            r = await b.send(
                "TimerT", b"later", tags="T", props={"UNIQ_KEY": "A", "TIMER_DELIVER_MS": str(due)}
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            soon = await b.send(
                "TimerT", b"now", props={"UNIQ_KEY": "B", "TIMER_DELIVER_MS": str(due - 10**6)}
            )
            assert soon.code == ResponseCode.SUCCESS
            [parked] = await records(b, TIMER_TOPIC)
            assert props(parked)["REAL_TOPIC"] == "TimerT" and props(parked)["TIMER_OUT_MS"] == str(due)
            assert [rec.body for rec in await records(b, "TimerT")] == [b"now"]  # the past: at once

            await arrivals.wait("TimerT", 0, 2)
            late = (await records(b, "TimerT"))[1]
            assert late.body == b"later" and due <= late.store_timestamp <= due + LATE_SLACK_MS
            p = props(late)
            assert (p["UNIQ_KEY"], p["TAGS"], p["TIMER_OUT_MS"]) == ("A", "T", str(due))
            assert not {"REAL_TOPIC", "REAL_QID"} & p.keys()
            assert int(p["TIMER_DEQUEUE_MS"]) >= due

    run(scenario())


def test_bad_timer_values_are_answered_message_illegal(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_timer_max_delay_sec=60) as b:
            cases = [
                ({"TIMER_DELIVER_MS": "tomorrow"}, "timer message illegal: TIMER_DELIVER_MS='tomorrow'"),
                ({"TIMER_DELAY_SEC": "1.5"}, "timer message illegal: TIMER_DELAY_SEC='1.5'"),
                ({"TIMER_DELAY_SEC": "61"}, "bigger than the max delay 60000ms"),
                ({"TIMER_DELIVER_MS": str(now_ms() + 4 * 86_400_000)}, "bigger than the max delay 60000ms"),
            ]
            for bad, remark in cases:
                r = await b.send("TimerBad", props=bad)
                assert r.code == ResponseCode.MESSAGE_ILLEGAL and remark in (r.remark or ""), (bad, r.remark)
            assert b.controller.store.cq_store.get("TimerBad", 0) is None  # nothing stored
            r = await b.send(TIMER_TOPIC, props={"REAL_TOPIC": "TimerBad", "REAL_QID": "0"})
            assert r.code == ResponseCode.NO_PERMISSION  # no way into the timer topic but a timer

    run(scenario())


def test_with_the_timer_off_a_timer_send_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_timer_wheel_enable=False) as b:
            assert b.controller.parts is not None and b.controller.parts.timer is None
            r = await b.send("TimerOff", props={"TIMER_DELAY_SEC": "5"})
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "accurate timer message is not enabled, timerWheelEnable is false"
            plain = await b.send("TimerOff", props={"TIMER_OUT_MS": "5"})  # delivered once: not a timer
            assert plain.code == ResponseCode.SUCCESS

    run(scenario())


def test_pending_timers_survive_a_clean_restart_and_none_comes_twice(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            arrivals = Arrivals(b.controller.store)
            await b.send("TimerR", b"first", props={"TIMER_DELAY_MS": "50"})
            await arrivals.wait("TimerR", 0, 1)
            due = now_ms() + 2000  # at or before the time the broker sets: it reads its clock later
            await b.send("TimerR", b"second", props={"TIMER_DELAY_MS": "2000"})
            await b.send("TimerR", b"third", props={"TIMER_DELAY_SEC": "3600"})
        async with broker_under_test(tmp_path) as b:
            timer = b.controller.parts.timer if b.controller.parts is not None else None
            assert timer is not None
            arrivals = Arrivals(b.controller.store)
            await arrivals.wait("TimerR", 0, 2)
            got = await records(b, "TimerR")
            assert [rec.body for rec in got] == [b"first", b"second"]
            assert got[1].store_timestamp >= due - 5
            await b.dispatched()
            assert timer.pending == 1  # the hour-long one

    run(scenario())


# --------------------------------------------------------------------------------------- SIGKILL
def test_pending_timers_survive_a_sigkill(tmp_path: Path) -> None:
    """Timers due before the kill are not lost (a redelivery is allowed), those due after it come
    after the restart, each at least once, none before its time."""

    async def scenario() -> None:
        state = CrashState(tmp_path)
        client = RemotingClient()
        broker = BrokerProcess(state)
        try:
            await broker.ready()
            due: dict[str, int] = {}
            early: set[str] = set()
            for i in range(20):
                delay = 100 if i % 2 else 5000  # the late ones stay pending past the kill
                if delay == 100:
                    early.add(f"m{i}")
                cmd = send_command(
                    "TimerKill", f"m{i}".encode(), queue_id=0, group="pg", keys=f"m{i}",
                    props={"TIMER_DELAY_MS": str(delay)},
                )  # fmt: skip
                before = now_ms()
                r = await client.invoke(broker.addr, cmd, 5.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                due[f"m{i}"] = before + delay
            async with asyncio.timeout(10):
                while True:  # another process: its deliveries are seen by pulling again
                    got, _ = await pull_until_end(client, broker.addr, "TimerKill", 0, group="cg")
                    if {r.keys for r in got} >= early:
                        break
                    await asyncio.sleep(0.05)
            broker.kill()
            assert max(due.values()) > now_ms()  # the late ones were still pending at the kill
            broker = BrokerProcess(state)
            await broker.ready()
            async with asyncio.timeout(15):
                while True:
                    got, _ = await pull_until_end(client, broker.addr, "TimerKill", 0, group="cg")
                    if {r.keys for r in got} >= due.keys():
                        break
                    await asyncio.sleep(0.05)
            for rec in got:
                assert rec.store_timestamp >= due[rec.keys or ""] - 5, rec.keys  # never early
            assert len(got) <= len(due) + len(early)  # only deliveries before the kill may repeat
        finally:
            broker.stop()
            await client.close()

    run(scenario())


# ------------------------------------------------------------------------------------------- SDK
@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with embedded() as c:
        yield c


def test_the_sdk_sends_a_timer_message_and_a_consumer_sees_it_only_at_its_time(
    cluster: EmbeddedCluster,
) -> None:
    topic = unique("TimerSdk")

    async def main() -> None:
        async with (
            AsyncProducer(unique("pg"), cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("cg"), cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            queue = (await producer.send(Message(topic, b"warm-up"))).queue
            await wait_route(reader, topic)
            deliver = now_ms() + 1200
            msg = Message(topic, b"timed", tags="TagT", properties={"TIMER_DELIVER_MS": str(deliver)})
            result = await producer.send(msg, queue=queue)
            warm_up, timed = await read_queues(reader, [queue], 2)
            assert (warm_up.body, timed.body) == (b"warm-up", b"timed")
            assert timed.store_timestamp >= deliver and timed.msg_id == result.msg_id
            assert timed.tags == "TagT" and timed.properties["TIMER_OUT_MS"] == str(deliver)
            with pytest.raises(MessageIllegalError, match="TIMER_DELAY_SEC='soon'"):
                await producer.send(Message(topic, b"bad", properties={"TIMER_DELAY_SEC": "soon"}))

    run(main())
