"""The POP log under ASYNC_FLUSH across an emulated power loss (docs/guide/pop.md: a power loss can
lose the last half second of changes; acked messages may then come back, none is lost).

A real broker process (ASYNC_FLUSH, GET /metrics served) gets 32 messages, which are flushed to
the commit log before any pop: only the POP log is at stake here. A consumer pops 16 and acks 8
of them, and waits until GET /metrics says the POP log is flushed whole
(`rocketlite_pop_log_flushed_bytes` = `_written_bytes`). Then, within the half second before the
next background fdatasync, it pops the other 16 and acks 4 of the first pop's rest and 8 of the
second pop. The POP log's flushed length is read, the broker is SIGKILLed, and the POP log is cut
at that length (the commit log at its flushed offset, which cuts nothing): what a disk holds when
nothing written after the last fdatasync reached it. The restarted broker must start and then:

- never deliver again a message whose ack was flushed (the first 8);
- deliver every other message (none lost), with its body as sent (none corrupted), once;
- not lower a retry count: each message comes back with a reconsume count at least the one it
  had when last delivered, and the first pop's unacked messages, whose POP record was flushed,
  come back after their invisible time with RECONSUMETIMES 1.

Not vacuous: the cut must have taken records (the second pop and its acks).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.wire.pop import POLLING_TIMEOUT
from rocketlite.remoting.client import RemotingClient
from tests.support.aio import run
from tests.support.crash.broker import (
    BrokerProcess,
    CrashState,
    cut_commit_log,
    read_gauges,
    read_positions,
    start_broker,
)
from tests.support.pop_client import ack, handles, pop
from tests.support.wire import QUEUES, TOPIC, send_request

BROKER_NAME = "crash-broker"  # crash.broker.write_conf's
GROUP = "pop_power_cg"
MESSAGES = 32
INVISIBLE_MS = 5_000  # longer than the load takes, even on a busy machine
POP_GAUGES = {
    "rocketlite_pop_log_epoch": "epoch",
    "rocketlite_pop_log_flushed_bytes": "flushed",
    "rocketlite_pop_log_written_bytes": "written",
}


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10.0) -> None:
    """Ask the broker (GET /metrics) until `check` holds: there is no event to await across
    processes."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.02)


async def pop_n(client: RemotingClient, addr: str, n: int) -> list[tuple[StoredRecord, str]]:
    got: list[tuple[StoredRecord, str]] = []
    while len(got) < n:
        r = await pop(client, addr, GROUP, TOPIC, invisible_ms=INVISIBLE_MS, max_nums=n - len(got))
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        got += handles(r, BROKER_NAME)
    return got


def key_of(record: StoredRecord) -> str:
    return record.get_property("KEYS") or ""


async def load_and_cut(state: CrashState, keys: list[str]) -> tuple[set[str], set[str], dict[str, int], int]:
    """Send, pop and ack as the module's docstring says, SIGKILL, cut; (acks flushed, the first
    pop's unacked, reconsume count per key when last delivered, bytes the cut took)."""
    broker: BrokerProcess = await start_broker(state)
    client = RemotingClient()
    try:
        for i, key in enumerate(keys):
            r = await client.invoke(broker.addr, send_request(key, i % QUEUES), 10.0)
            assert r.code == ResponseCode.SUCCESS, r.remark

        async def commit_log_flushed() -> bool:
            return (await read_positions(broker.metrics_port)).unflushed == 0

        await until(commit_log_flushed, "the commit log flushed")
        seen: dict[str, int] = {}
        first = await pop_n(client, broker.addr, MESSAGES // 2)
        for record, _ in first:
            seen[key_of(record)] = record.reconsume_times
        for record, handle in first[:8]:
            assert (await ack(client, broker.addr, GROUP, record, handle)).code == ResponseCode.SUCCESS
        flushed_acks = {key_of(r) for r, _ in first[:8]}
        first_open = {key_of(r) for r, _ in first[8:]}

        async def pop_log_flushed() -> bool:
            g = await read_gauges(broker.metrics_port, POP_GAUGES)
            return g["flushed"] == g["written"]

        await until(pop_log_flushed, "the POP log flushed")
        # the half second before the next background fdatasync
        second = await pop_n(client, broker.addr, MESSAGES // 2)
        for record, _ in second:
            seen[key_of(record)] = record.reconsume_times
        acks = [ack(client, broker.addr, GROUP, r, h) for r, h in [*first[8:12], *second[:8]]]
        assert {a.code for a in await asyncio.gather(*acks)} == {ResponseCode.SUCCESS}
        pop_log = await read_gauges(broker.metrics_port, POP_GAUGES)
        commit_log = await read_positions(broker.metrics_port)
        broker.kill()
    finally:
        await client.close()
        broker.kill()
    assert pop_log["epoch"] == 0  # no compaction: the file read is the one cut
    path = state.root / "store" / "config" / "popState.log"
    data = path.read_bytes()
    path.write_bytes(data[: pop_log["flushed"]])
    assert cut_commit_log(state.commit_log_dir, commit_log.flushed, state.segment_bytes) == 0
    return flushed_acks, first_open, seen, len(data) - pop_log["flushed"]


def test_power_loss_of_the_pop_log_under_async_flush(tmp_path: Path) -> None:
    async def scenario() -> None:
        state = CrashState(
            tmp_path,
            flush="ASYNC_FLUSH",
            metrics=True,
            flush_interval_ms=20,
            conf_lines=("grpcServerPort=0",),
        )
        keys = [f"power-{i}" for i in range(MESSAGES)]
        flushed_acks, first_open, seen, cut = await load_and_cut(state, keys)
        assert cut > 0, "the cut took nothing: a background fdatasync came first"

        broker = await start_broker(state)  # it starts on the cut log
        client = RemotingClient()
        after: dict[str, list[tuple[int, bytes]]] = {}
        try:
            expected = set(keys) - flushed_acks
            deadline = time.monotonic() + 20
            while not expected <= set(after) and time.monotonic() < deadline:
                r = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=60_000, poll_ms=1_000)
                if r.code != ResponseCode.SUCCESS:
                    continue
                for record, handle in handles(r, BROKER_NAME):
                    after.setdefault(key_of(record), []).append((record.reconsume_times, record.body))
                    assert (
                        await ack(client, broker.addr, GROUP, record, handle)
                    ).code == ResponseCode.SUCCESS
            r = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=60_000, poll_ms=0)
            assert r.code == POLLING_TIMEOUT, "more to deliver once every message was"
        finally:
            await client.close()
            broker.stop()
        counts = sorted((v[0][0], k in first_open) for k, v in after.items())
        print(f"\ncut {cut} bytes; delivered again (RECONSUMETIMES, of the first pop): {counts}")
        assert not flushed_acks & set(after), "a message whose ack was flushed came back"
        assert sorted(expected - set(after)) == [], "messages lost"
        assert {k: len(v) for k, v in after.items() if len(v) != 1} == {}
        assert all(body == f"body-{k}".encode() for k, [(_, body)] in after.items())
        lowered = {k: (seen.get(k, 0), v[0][0]) for k, v in after.items() if v[0][0] < seen.get(k, 0)}
        assert lowered == {}
        assert {k: after[k][0][0] for k in first_open} == dict.fromkeys(first_open, 1)

    run(scenario(), timeout=60)
