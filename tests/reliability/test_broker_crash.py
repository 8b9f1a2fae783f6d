"""Crash harness over a real broker process: SIGKILL under load, restart on the same store, verify.

Each cycle starts ``python -m rocketlite broker -c broker.conf`` (SYNC_FLUSH, 64 KiB commit-log
segments so rolls happen often, a free listenPort) on one store directory, drives it with several
producer connections sending raw SEND_MESSAGE_V2 requests (one unique KEYS value per message,
never retried), and SIGKILLs the process from inside the ack path as soon as a random number of
acknowledgements (seeded) has arrived: no sleeps, so the kill lands wherever the broker happens to
be (in a put, a flush, a segment roll, a consume-queue or index write). Requests in flight then
fail and count as unacknowledged; they may or may not have been stored.

After the last cycle the broker is restarted once more and every message acknowledged in any
cycle must be consumable by queue (PULL_MESSAGE from offset 0, at the acked queue offset, same
key) and by key (QUERY_MESSAGE); no key appears twice in the queues; queue offsets are contiguous
from 0. `bench/crash_cycles.py` runs the same loop for N cycles and for ASYNC_FLUSH.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketlite.client.api import PullSysFlag
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.headers import (
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.message_record import decode_records

SRC = Path(__file__).resolve().parents[2] / "src"
TOPIC = "CrashTopic"
QUEUES = 4
GROUP = "crash_cg"
PRODUCERS = 4
CYCLES = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_conf(root: Path, port: int, flush: str) -> Path:
    conf = root / "broker.conf"
    conf.write_text(
        "\n".join([
            "brokerClusterName=CrashCluster",
            "brokerName=crash-broker",
            f"listenPort={port}",
            f"haListenPort={free_port()}",
            f"storePathRootDir={root / 'store'}",
            f"flushDiskType={flush}",
            "mapedFileSizeCommitLog=65536",
            "mapedFileSizeConsumeQueue=2000",
            "maxHashSlotNum=1000",
            "maxIndexNum=4000",
            "autoCreateTopicEnable=true",
            "autoCreateSubscriptionGroup=true",
        ]) + "\n"
    )  # fmt: skip
    return conf


@dataclass(frozen=True, slots=True)
class Ack:
    key: str
    queue_id: int
    queue_offset: int


@dataclass
class CrashState:
    root: Path
    flush: str = "SYNC_FLUSH"
    acks: dict[str, Ack] = field(default_factory=dict)
    sent: int = 0
    cycles: int = 0
    seq: int = 0


class BrokerProcess:
    def __init__(self, root: Path, flush: str) -> None:
        self.port = free_port()
        self.conf = write_conf(root, self.port, flush)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
        self.log = (root / "broker.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rocketlite", "--log-level", "WARNING", "broker", "-c", str(self.conf)],
            stdout=self.log, stderr=self.log, env=env,
        )  # fmt: skip

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"broker exited with {self.proc.returncode}"
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)  # polling for the listener, not timing the kill
                continue
            w.close()
            return

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def send_request(key: str, queue_id: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="crash_pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=QUEUES,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01{key}\x02TAGS\x01t", reconsume_times=0,
    )  # fmt: skip
    return make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), f"body-{key}".encode())


async def load_until_killed(state: CrashState, broker: BrokerProcess, kill_after: int) -> int:
    """Several producer connections send until `kill_after` acks of this cycle, then SIGKILL."""
    acked = 0
    killed = asyncio.Event()

    async def producer(pid: int) -> None:
        nonlocal acked
        client = RemotingClient()
        try:
            while not killed.is_set():
                state.seq += 1
                key = f"c{state.cycles}-p{pid}-{state.seq}"
                queue_id = state.seq % QUEUES
                state.sent += 1
                try:
                    r = await client.invoke(broker.addr, send_request(key, queue_id), timeout=10.0)
                except (ConnectionError, OSError, TimeoutError):
                    return  # the broker is gone: this message is unacknowledged
                assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                ext = r.ext_fields
                # An answer read after the kill decision is a real ack all the same: it counts.
                state.acks[key] = Ack(key, int(ext["queueId"]), int(ext["queueOffset"]))
                acked += 1
                if killed.is_set():
                    return
                if acked >= kill_after:
                    broker.kill()  # synchronously, right on this ack: no sleep decides the moment
                    killed.set()
        finally:
            await client.close()

    await asyncio.gather(*(producer(i) for i in range(PRODUCERS)))
    return acked


async def pull_queue(client: RemotingClient, addr: str, queue_id: int) -> list[tuple[int, str]]:
    """(queue offset, KEYS) of every message in the queue, from offset 0."""
    out: list[tuple[int, str]] = []
    offset = 0
    while True:
        ext = PullMessageRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
            sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=0,
        ).to_ext()  # fmt: skip
        r = await client.invoke(addr, make_request(RequestCode.PULL_MESSAGE, ext), timeout=10.0)
        if r.code != ResponseCode.SUCCESS:
            assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY), (
                r.code,
                r.remark,
            )
            assert int(r.ext_fields.get("maxOffset", "0")) <= offset, (queue_id, offset, r.ext_fields)
            return out
        records = decode_records(r.body or b"")
        assert records, (queue_id, offset)
        for rec in records:
            out.append((rec.queue_offset, rec.get_property("KEYS") or ""))
        offset = int(r.ext_fields["nextBeginOffset"])


async def query_key(client: RemotingClient, addr: str, key: str) -> list[str]:
    ext = QueryMessageRequestHeader(
        topic=TOPIC, key=key, max_num=32, begin_timestamp=0, end_timestamp=int(time.time() * 1000) + 60_000
    ).to_ext()
    r = await client.invoke(addr, make_request(RequestCode.QUERY_MESSAGE, ext), timeout=10.0)
    if r.code != ResponseCode.SUCCESS:
        return []
    return [rec.body.decode() for rec in decode_records(r.body or b"")]


async def verify(state: CrashState, *, by_key: bool = True) -> int:
    """Restart, check every ack by queue and by key; the number of acked messages lost."""
    broker = BrokerProcess(state.root, state.flush)
    client = RemotingClient()
    try:
        await broker.ready()
        found: dict[str, tuple[int, int]] = {}
        for queue_id in range(QUEUES):
            entries = await pull_queue(client, broker.addr, queue_id)
            offsets = [off for off, _ in entries]
            assert offsets == list(range(len(offsets))), f"queue {queue_id} offsets not contiguous"
            for off, key in entries:
                assert key not in found, f"{key} duplicated: {found[key]} and {(queue_id, off)}"
                found[key] = (queue_id, off)
        lost = [a for a in state.acks.values() if found.get(a.key) != (a.queue_id, a.queue_offset)]
        if by_key:
            for ack in state.acks.values():
                bodies = await query_key(client, broker.addr, ack.key)
                if bodies != [f"body-{ack.key}"] and ack not in lost:
                    lost.append(ack)
        return len(lost)
    finally:
        await client.close()
        broker.stop()


async def crash_cycles(state: CrashState, cycles: int, rng: random.Random, max_acks: int) -> None:
    for _ in range(cycles):
        broker = BrokerProcess(state.root, state.flush)
        try:
            await broker.ready()
            await load_until_killed(state, broker, rng.randint(1, max_acks))
        finally:
            broker.kill()
        state.cycles += 1


@pytest.mark.slow
def test_sync_flush_broker_loses_no_ack_across_sigkills(tmp_path: Path) -> None:
    state = CrashState(tmp_path)
    asyncio.run(crash_cycles(state, CYCLES, random.Random(20261122), 300))
    lost = asyncio.run(verify(state))
    print(f"\ncycles={state.cycles} sent={state.sent} acked={len(state.acks)} lost={lost}")
    assert state.cycles >= 10 and len(state.acks) > 0
    assert lost == 0
