"""The broker crash harness: a real broker process SIGKILLed under load, restarted on the same
store, and checked (every ack consumable by queue and by key, queues contiguous, no duplicates).

tests/reliability/test_broker_crash.py runs it for a few cycles per flush mode and
bench/crash_cycles.py for as many as asked; the test module's docstring tells the whole story
(ASYNC_FLUSH, power loss, write buffer, what a cycle may lose).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.client import RemotingClient
from tests.support import processes
from tests.support.ports import broker_port, free_port
from tests.support.wire import QUEUES, batch_request, pull_queue, query_key, send_request

PRODUCERS = 4
CYCLES = 15
SEGMENT_BYTES = 65536  # small commit-log segments: rolls happen often
BUSY_LIMIT_S = 10.0  # a broker that answers nothing but SYSTEM_BUSY for this long is stuck


def write_conf(root: Path, port: int, state: CrashState, metrics_port: int = 0) -> Path:
    conf = root / "broker.conf"
    extra = [f"metricsPort={metrics_port}"] if metrics_port else []
    if state.transient:
        extra.append("transientStorePoolEnable=true")
    if state.flush_interval_ms:
        extra.append(f"flushIntervalCommitLog={state.flush_interval_ms}")
    extra.extend(state.conf_lines)
    conf.write_text(
        "\n".join([
            "brokerClusterName=CrashCluster",
            "brokerName=crash-broker",
            f"listenPort={port}",
            f"haListenPort={free_port()}",
            f"storePathRootDir={root / 'store'}",
            f"flushDiskType={state.flush}",
            f"mapedFileSizeCommitLog={state.segment_bytes}",
            "mapedFileSizeConsumeQueue=2000",
            "maxHashSlotNum=1000",
            "maxIndexNum=4000",
            "autoCreateTopicEnable=true",
            "autoCreateSubscriptionGroup=true",
            *extra,
        ]) + "\n"
    )  # fmt: skip
    return conf


@dataclass(frozen=True, slots=True)
class Ack:
    key: str
    queue_id: int
    queue_offset: int
    phys: int = -1  # commit-log offset, from the offsetMsgId
    at: float = 0.0  # time.monotonic() when the answer was read


@dataclass
class Kill:
    """One cycle's SIGKILL and what it cost."""

    cycle: int
    started: float  # time.monotonic() when the load started
    at: float = 0.0  # ... and when the broker was killed
    acks: list[Ack] = field(default_factory=list)  # this cycle's, in answer order
    durable: int = -1  # flushed (power loss) or committed (write buffer) offset read before the kill
    cut_bytes: int = 0  # non-zero bytes the emulated power loss discarded
    lost: list[Ack] = field(default_factory=list)
    settled: bool = False

    @property
    def at_risk(self) -> list[Ack]:
        """The acks at or above the offset read before the kill: the only ones it may lose."""
        return [a for a in self.acks if a.phys >= self.durable] if self.durable >= 0 else []


@dataclass
class CrashState:
    root: Path
    flush: str = "SYNC_FLUSH"
    transient: bool = False  # transientStorePoolEnable: a kill may lose the uncommitted write buffer
    power_loss: bool = False  # cut the commit log at the flushed offset read before each kill
    metrics: bool = False  # serve GET /metrics (always on when a loss is allowed)
    segment_bytes: int = SEGMENT_BYTES
    flush_interval_ms: int = 0  # flushIntervalCommitLog; 0 = the broker's default (500)
    conf_lines: tuple[str, ...] = ()  # more `key=value` lines for broker.conf
    batches: bool = False  # every other request a SEND_BATCH_MESSAGE of 3 (the batch lane's)
    acks: dict[str, Ack] = field(default_factory=dict)  # every ack that must survive
    lost: dict[str, Ack] = field(default_factory=dict)  # acks lost where a loss was allowed
    violations: list[str] = field(default_factory=list)  # losses or moves that were not allowed
    kills: list[Kill] = field(default_factory=list)
    sent: int = 0
    busy: int = 0  # sends refused with SYSTEM_BUSY
    cycles: int = 0
    seq: int = 0

    @property
    def losses_allowed(self) -> bool:
        return self.power_loss or self.transient

    @property
    def commit_log_dir(self) -> Path:
        return self.root / "store" / "commitlog"


class BrokerExitedError(AssertionError):
    """The broker process ended before it was ready."""


class BrokerProcess:
    def __init__(self, state: CrashState) -> None:
        root = state.root
        self.port = broker_port()  # its VIP (port - 2) must be free too
        self.metrics_port = free_port() if state.metrics or state.losses_allowed else 0
        self.conf = write_conf(root, self.port, state, self.metrics_port)
        self.log = (root / "broker.log").open("ab")
        self.log_from = self.log.tell()
        self.proc = processes.spawn(
            ["broker", "-c", str(self.conf)], Path(self.log.name), log_level="WARNING"
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for port in (self.port, self.metrics_port):
            while port:
                if self.proc.poll() is not None:
                    tail = self.output()[-300:]
                    raise BrokerExitedError(f"broker exited with {self.proc.returncode}: {tail}")
                if await processes.accepts(port):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker not listening on {port} after {timeout:.0f}s")
                await asyncio.sleep(0.02)  # polling for the listener, not timing the kill

    def output(self) -> str:
        """What this process wrote to the shared broker.log."""
        with Path(self.log.name).open("rb") as f:
            f.seek(self.log_from)
            return f.read().decode("utf-8", "replace")

    def kill(self) -> None:
        processes.kill9(self.proc)
        self.log.close()

    def stop(self) -> None:
        processes.stop(self.proc)
        self.log.close()


@dataclass(frozen=True, slots=True)
class LogPositions:
    """The commit-log figures of one GET /metrics (see `rocketlite.broker.metrics`)."""

    at: float  # time.monotonic() when the answer arrived
    flushed: int
    unflushed: int
    uncommitted: int
    put_bytes: int
    put_count: int

    @property
    def committed(self) -> int:
        """In the file (page cache): everything appended but what the write buffer still holds."""
        return self.flushed + self.unflushed - self.uncommitted


_GAUGES = {
    "rocketlite_commitlog_flushed_offset": "flushed",
    "rocketmq_storage_flush_behind_bytes": "unflushed",  # RocketMQ 5's name
    "rocketlite_commitlog_uncommitted_bytes": "uncommitted",
    "rocketlite_store_put_bytes_total": "put_bytes",
    "rocketlite_store_put_messages_total": "put_count",
}


async def read_gauges(metrics_port: int, names: dict[str, str]) -> dict[str, int]:
    """GET /metrics: the value of each family in `names` (one sample each), by `names`' value;
    ConnectionError if the broker is gone (or goes) before answering in full."""
    reader, writer = await asyncio.open_connection("127.0.0.1", metrics_port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: crash\r\n\r\n")
        raw = await reader.read()
    finally:
        writer.close()
    values: dict[str, int] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition("{")
        if name in names:
            values[names[name]] = int(float(value.rpartition(" ")[2]))
    if len(values) != len(names):
        raise ConnectionError(f"incomplete metrics answer ({len(raw)} bytes)")
    return values


async def read_positions(metrics_port: int) -> LogPositions:
    """The commit log's positions from GET /metrics (see `read_gauges`)."""
    return LogPositions(at=time.monotonic(), **await read_gauges(metrics_port, _GAUGES))


def cut_commit_log(commit_log_dir: Path, offset: int, segment_bytes: int) -> int:
    """Emulate a machine crash: nothing at or past `offset` reached the disk. Zero the rest of the
    segment holding it and delete later segments; returns how many non-zero bytes went."""
    cut = 0
    for path in sorted(p for p in commit_log_dir.iterdir() if p.name.isdigit()):
        start = int(path.name)
        if start + segment_bytes <= offset:
            continue
        with path.open("r+b") as f:
            pos = max(offset - start, 0)
            f.seek(pos)
            cut += len(f.read().rstrip(b"\0"))
            if start >= offset:
                path.unlink()
            else:
                f.seek(pos)
                f.write(bytes(segment_bytes - pos))
    return cut


async def start_broker(state: CrashState, attempts: int = 3) -> BrokerProcess:
    """A broker that is ready. A free port can be taken (as the local port of any outgoing
    connection on the machine) before the broker binds it: such a start is retried, new ports."""
    for attempt in range(attempts):
        broker = BrokerProcess(state)
        try:
            await broker.ready()
        except BrokerExitedError:
            broker.kill()
            if attempt == attempts - 1 or "Address already in use" not in broker.output():
                raise
            continue
        return broker
    raise AssertionError("unreachable")


async def load_until_killed(state: CrashState, broker: BrokerProcess, kill_after: int) -> Kill:
    """Several producer connections send until `kill_after` acks of this cycle, then SIGKILL.

    When a loss is allowed, the flushed (power loss) or committed (write buffer) offset is read
    from GET /metrics first; the other producers keep going meanwhile.
    """
    kill = Kill(state.cycles, time.monotonic())
    killed = asyncio.Event()
    killing = False

    async def kill_broker() -> None:
        if state.losses_allowed:
            pos = await read_positions(broker.metrics_port)
            kill.durable = pos.flushed if state.power_loss else pos.committed
        broker.kill()  # right on this ack (or on the metrics answer): no sleep decides the moment
        kill.at = time.monotonic()
        killed.set()

    async def producer(pid: int) -> None:
        nonlocal killing
        client = RemotingClient()
        try:
            while not killed.is_set():
                state.seq += 1
                key = f"c{state.cycles}-p{pid}-{state.seq}"
                queue_id = state.seq % QUEUES
                keys = [f"{key}-{i}" for i in range(3)] if state.batches and state.seq % 2 else [key]
                state.sent += len(keys)
                request = batch_request(keys, queue_id) if len(keys) > 1 else send_request(key, queue_id)
                try:
                    r = await client.invoke(broker.addr, request, timeout=10.0)
                except (ConnectionError, OSError, TimeoutError):
                    return  # the broker is gone: this message is unacknowledged
                if r.code == ResponseCode.SYSTEM_BUSY:
                    state.busy += 1  # refused, not stored (every write buffer waits on the disk)
                    last = kill.acks[-1].at if kill.acks else kill.started
                    assert time.monotonic() - last < BUSY_LIMIT_S, f"only SYSTEM_BUSY for {BUSY_LIMIT_S} s"
                    continue
                assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                ext = r.ext_fields
                # An answer read after the kill decision is a real ack all the same: it counts.
                # A batch's: msgId the comma-joined ids, queueOffset the first message's.
                ids = ext["msgId"].split(",")
                assert len(ids) == len(keys), (ids, keys)
                for i, (k, msg_id) in enumerate(zip(keys, ids, strict=True)):
                    ack = Ack(k, int(ext["queueId"]), int(ext["queueOffset"]) + i, int(msg_id[-16:], 16),
                              time.monotonic())  # fmt: skip
                    state.acks[k] = ack
                    kill.acks.append(ack)
                if killed.is_set():
                    return
                if len(kill.acks) >= kill_after and not killing:
                    killing = True
                    await kill_broker()
        finally:
            await client.close()

    await asyncio.gather(*(producer(i) for i in range(PRODUCERS)))
    return kill


def index_keys(queue_id: int, entries: list[tuple[int, str]], found: dict[str, tuple[int, int]]) -> None:
    for off, key in entries:
        assert key not in found, f"{key} duplicated: {found[key]} and {(queue_id, off)}"
        found[key] = (queue_id, off)


async def settle(state: CrashState, client: RemotingClient, addr: str) -> None:
    """After a restart: which acks of the last kill are gone. Only acks at or above the offset read
    before the kill may be; none may move; the queues from the cycle's first acked offsets on stay
    contiguous without duplicates. Lost acks move from `state.acks` to `state.lost`."""
    for kill in state.kills:
        if kill.settled:
            continue
        kill.settled = True
        if kill.durable < 0:
            continue  # no loss allowed: `verify` checks every ack
        starts: dict[int, int] = {}
        for a in kill.acks:
            starts[a.queue_id] = min(starts.get(a.queue_id, a.queue_offset), a.queue_offset)
        found: dict[str, tuple[int, int]] = {}
        for queue_id, start in sorted(starts.items()):
            index_keys(queue_id, await pull_queue(client, addr, queue_id, start), found)
        for a in kill.acks:
            where = found.get(a.key)
            if where == (a.queue_id, a.queue_offset):
                continue
            if where is not None:
                state.violations.append(f"{a.key} acked at {(a.queue_id, a.queue_offset)}, found at {where}")
            elif a.phys < kill.durable:
                state.violations.append(
                    f"cycle {kill.cycle}: {a.key} at commit-log offset {a.phys} lost, below the "
                    f"offset {kill.durable} read before the kill"
                )
            kill.lost.append(a)
            state.lost[a.key] = state.acks.pop(a.key)


async def verify(state: CrashState, *, by_key: bool = True) -> int:
    """Restart, check every ack by queue and by key; the number of acked messages lost (beyond
    the losses `settle` allowed)."""
    broker = await start_broker(state)
    client = RemotingClient()
    try:
        await settle(state, client, broker.addr)
        found: dict[str, tuple[int, int]] = {}
        for queue_id in range(QUEUES):
            index_keys(queue_id, await pull_queue(client, broker.addr, queue_id), found)
        lost = [a for a in state.acks.values() if found.get(a.key) != (a.queue_id, a.queue_offset)]
        back = (f"{key} was lost, then found at {found[key]}" for key in state.lost if key in found)
        state.violations.extend(back)
        if by_key:
            for ack in state.acks.values():
                bodies = await query_key(client, broker.addr, ack.key)
                if bodies != [f"body-{ack.key}"] and ack not in lost:
                    lost.append(ack)
            for key in state.lost:
                if f"body-{key}" in await query_key(client, broker.addr, key):
                    state.violations.append(f"{key} was lost, but QUERY_MESSAGE finds it")
        return len(lost)
    finally:
        await client.close()
        broker.stop()


Sampler = Callable[[BrokerProcess], Coroutine[Any, Any, None]]


async def crash_cycles(
    state: CrashState, cycles: int, rng: random.Random, max_acks: int, sampler: Sampler | None = None
) -> None:
    """`cycles` times: start, settle the last kill, load (with `sampler` running), SIGKILL, and
    with `power_loss` cut the commit log at the flushed offset read before the kill."""
    for _ in range(cycles):
        broker = await start_broker(state)
        try:
            if state.losses_allowed and any(not k.settled for k in state.kills):
                client = RemotingClient()
                try:
                    await settle(state, client, broker.addr)
                finally:
                    await client.close()
            task = asyncio.create_task(sampler(broker)) if sampler is not None else None
            try:
                kill = await load_until_killed(state, broker, rng.randint(1, max_acks))
            finally:
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            broker.kill()
        if state.power_loss:
            kill.cut_bytes = cut_commit_log(state.commit_log_dir, kill.durable, state.segment_bytes)
        state.kills.append(kill)
        state.cycles += 1
