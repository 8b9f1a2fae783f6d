"""POP state under SIGKILL: a real broker process is killed while consumers pop and ack over
127.0.0.1, restarted on the same store, killed again, and finally drained. No message whose ack
was answered is ever delivered again, and no message left unacked is lost: each comes back after
its invisible time. Some messages are never acked before a kill on purpose, so some are always in
flight when it comes; the kill happens on an ack's answer, with other pops and acks on the wire."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.client import RemotingClient
from tests.support.aio import run
from tests.support.crash.broker import BrokerProcess, CrashState, start_broker
from tests.support.pop_client import ack, handles, pop
from tests.support.wire import QUEUES, TOPIC, send_request

BROKER_NAME = "crash-broker"  # crash.broker.write_conf's
GROUP = "pop_crash_cg"
MESSAGES = 240
CONSUMERS = 4
INVISIBLE_MS = 1_500
KILLS = (60, 40)  # answered acks before each SIGKILL
DRAIN_S = 40.0


class Ledger:
    def __init__(self) -> None:
        self.acked: set[str] = set()  # acks answered SUCCESS: never to be delivered again
        self.violations: list[str] = []
        self.deliveries = 0

    def delivered(self, key: str, phase: str) -> None:
        self.deliveries += 1
        if key in self.acked:
            self.violations.append(f"{key} delivered again ({phase}) after its ack was answered")


async def consume_until_killed(broker: BrokerProcess, ledger: Ledger, kill_after: int, cycle: int) -> None:
    client = RemotingClient()
    killed = asyncio.Event()
    answered = 0

    async def consumer(cid: int) -> None:
        nonlocal answered
        n = 0
        while not killed.is_set():
            try:
                r = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=INVISIBLE_MS, max_nums=8,
                              poll_ms=1_000)  # fmt: skip
            except (ConnectionError, OSError, TimeoutError):
                return
            if r.code != ResponseCode.SUCCESS:
                continue
            for record, handle in handles(r, BROKER_NAME):
                key = record.get_property("KEYS") or ""
                ledger.delivered(key, f"cycle {cycle}")
                n += 1
                if n % 4 == cid % 4:  # left unacked: must come back after its invisible time
                    continue
                try:
                    a = await ack(client, broker.addr, GROUP, record, handle)
                except (ConnectionError, OSError, TimeoutError):
                    return
                if a.code == ResponseCode.SUCCESS:
                    ledger.acked.add(key)
                    answered += 1
                    if answered >= kill_after and not killed.is_set():
                        broker.kill()  # right on this answer; other requests are on the wire
                        killed.set()
                        return

    try:
        await asyncio.gather(*(consumer(i) for i in range(CONSUMERS)))
    finally:
        await client.close()


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_during_pop_and_ack(tmp_path: Path, flush: str) -> None:
    """Under ASYNC_FLUSH an answer waits only for the POP log's write, not its fdatasync: a
    SIGKILL still loses none of it (the page cache outlives the process)."""

    async def scenario() -> None:
        # no fixed gRPC port to share
        state = CrashState(tmp_path, conf_lines=("grpcServerPort=0",), flush=flush)
        ledger = Ledger()
        keys = [f"pop-{i}" for i in range(MESSAGES)]
        broker = await start_broker(state)
        client = RemotingClient()
        try:
            for i, key in enumerate(keys):
                r = await client.invoke(broker.addr, send_request(key, i % QUEUES), 10.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await client.close()
        try:
            await consume_until_killed(broker, ledger, KILLS[0], 0)
        finally:
            broker.kill()
        for cycle, kill_after in enumerate(KILLS[1:], 1):
            broker = await start_broker(state)
            try:
                await consume_until_killed(broker, ledger, kill_after, cycle)
            finally:
                broker.kill()

        # Drain: every message not acked comes back (after its invisible time), exactly those.
        broker = await start_broker(state)
        client = RemotingClient()
        try:
            deadline = time.monotonic() + DRAIN_S
            while len(ledger.acked) < MESSAGES and time.monotonic() < deadline:
                r = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=60_000, poll_ms=2_000)
                if r.code != ResponseCode.SUCCESS:
                    continue
                for record, handle in handles(r, BROKER_NAME):
                    key = record.get_property("KEYS") or ""
                    ledger.delivered(key, "drain")
                    a = await ack(client, broker.addr, GROUP, record, handle)
                    assert a.code == ResponseCode.SUCCESS, a.remark
                    ledger.acked.add(key)
        finally:
            await client.close()
            broker.stop()
        assert ledger.violations == []
        missing = sorted(set(keys) - ledger.acked)
        assert missing == [], f"{len(missing)} unacked messages lost: {missing[:10]}"
        assert ledger.deliveries > MESSAGES  # some did come back

    run(scenario(), timeout=150)
