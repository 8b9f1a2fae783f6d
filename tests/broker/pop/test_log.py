"""The POP log on disk: group commit (one fdatasync for a loop iteration's changes), one record per
queue for a batch pop, a torn last record cut at recovery, compaction into a snapshot (and a crash
between snapshot and log reset), and the upgrade from an older popState.json."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocketlite.broker.pop.log import (
    COMPACT_MIN_BYTES,
    FILE_HEADER,
    RECORD_FRAME,
    InFlight,
    PopLog,
    QueuePopState,
    ack_record,
    change_record,
    cursor_record,
    pop_record,
)
from rocketlite.broker.pop.state import PopService
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.clock import ManualClock
from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire.pop import INIT_MODE_MIN, ReceiptHandle
from rocketlite.store.message_store import MessageStore
from tests.support.aio import run
from tests.support.store import StoreFactory

KEY = ("g", "T", 0)
TOPIC, GROUP, BROKER = "PopLogTopic", "pop_log_cg", "broker-a"
HOST = HostAddress.of("127.0.0.1", 10911)


def put(store: MessageStore, n: int) -> None:
    for i in range(n):
        msg = MessageInner(topic=TOPIC, body=f"m{i}".encode(), born_host=HOST, store_host=HOST, queue_id=0)
        assert store.put_message(msg).ok
    assert store.wait_dispatched(10.0)


def service(
    store: MessageStore, cfg: Path, clock: ManualClock, compact_min_bytes: int = COMPACT_MIN_BYTES
) -> PopService:
    svc = PopService(store, ConsumerOffsetTable(cfg), clock, cfg, BROKER, compact_min_bytes=compact_min_bytes)
    svc.load()
    return svc


def test_records_replay_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    log = PopLog(tmp_path)
    assert log.load() == {}
    log.append(cursor_record(KEY, 0))
    log.append(pop_record(KEY, 3, 100, 200, [(0, 0), (1, 0), (2, 1)]))
    log.append(ack_record(KEY, [1]))
    log.append(change_record(KEY, 2, 150, 900))
    assert log.sync()
    last = pop_record(KEY, 4, 300, 400, [(3, 0)])
    log.append(last)
    assert log.sync()
    log.close()
    path = tmp_path / "popState.log"
    size = path.stat().st_size
    with path.open("r+b") as f:  # the last record's write was torn by a crash
        f.truncate(size - 3)

    again = PopLog(tmp_path)
    states = again.load()
    assert states == {KEY: QueuePopState(3, {0: InFlight(100, 200, 0), 2: InFlight(150, 900, 1)})}
    assert path.stat().st_size == size - len(last)  # cut after the last complete record
    again.append(ack_record(KEY, [0]))  # appends follow a complete record
    assert again.sync()
    again.close()
    assert PopLog(tmp_path).load() == {KEY: QueuePopState(3, {2: InFlight(150, 900, 1)})}


def test_a_corrupt_record_ends_the_replay(tmp_path: Path) -> None:
    log = PopLog(tmp_path)
    log.load()
    log.append(cursor_record(KEY, 7))
    log.append(cursor_record(KEY, 9))
    assert log.sync()
    log.close()
    path = tmp_path / "popState.log"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last record's CRC no longer matches
    path.write_bytes(bytes(data))
    assert PopLog(tmp_path).load() == {KEY: QueuePopState(7)}


# Runs in a child process: RLIMIT_FSIZE lets only 10 bytes of the second record reach the file
# (a real short write, then EFBIG, as ENOSPC would), and applies to the whole process.
FAILING_WRITE = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from rocketlite.broker.pop.log import PopLog, cursor_record, pop_record

    KEY = ("g", "T", 0)

    async def main(log: PopLog) -> None:
        log.load()
        log.append(cursor_record(KEY, 1))
        await log.durable()
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (log.log_path.stat().st_size + 10, hard))
        log.append(pop_record(KEY, 5, 100, 200, [(i, 0) for i in range(5)]))
        try:
            await log.durable()
        except OSError as exc:
            print("durable failed", exc.errno)
        else:
            print("durable succeeded")
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        log.append(cursor_record(KEY, 6))
        await log.durable()
        print("retry durable")
        log.close()

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sync_flush = sys.argv[2] == "SYNC_FLUSH"
    asyncio.run(main(PopLog(__import__("pathlib").Path(sys.argv[1]), sync_flush=sync_flush)))
    """
)


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_a_failed_write_is_reported_and_written_whole_by_the_next_flush(tmp_path: Path, flush: str) -> None:
    """Under ASYNC_FLUSH too: an answer waits for the write, so a failed write fails it."""
    done = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(tmp_path), flush],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0].startswith("durable failed"), done.stdout  # the waiters of that round fail
    assert lines[1] == "retry durable"
    # The failed record was kept and written whole, the torn bytes did not stay in front of the
    # next record: a restart has every record whose durable() succeeded, and the retried one.
    states = PopLog(tmp_path).load()
    assert states == {KEY: QueuePopState(6, {i: InFlight(100, 200, 0) for i in range(5)})}


def test_group_commit_one_fdatasync_for_a_loop_iteration(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = PopLog(tmp_path)
        log.load()

        async def change(i: int) -> None:
            log.append(cursor_record(KEY, i))
            await log.durable()

        await asyncio.gather(*(change(i) for i in range(50)))
        assert log.flushes == 1  # fifty changes, one fdatasync
        await log.durable()  # nothing new: no fdatasync
        assert log.flushes == 1
        log.close()
        assert PopLog(tmp_path).load() == {KEY: QueuePopState(49)}

    run(scenario(), timeout=30)


def test_a_batch_pop_is_one_record(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    cfg = tmp_path / "cfg"
    svc = service(store, cfg, ManualClock())
    put(store, 32)
    path = cfg / "popState.log"
    assert svc.persist()
    before = path.stat().st_size
    batch = svc.pop(GROUP, TOPIC, [0], 32, 10_000, INIT_MODE_MIN)
    assert len(batch.messages) == 32
    assert svc.persist()
    key_bytes = 2 + len(GROUP) + 2 + len(TOPIC) + 4
    one_record = RECORD_FRAME.size + 1 + key_bytes + 8 * 3 + 2 + 32 * 12
    cursor_record_size = RECORD_FRAME.size + 1 + key_bytes + 8  # the queue's first look
    assert path.stat().st_size - before == one_record + cursor_record_size


def test_the_acks_of_one_queue_together_are_one_record_and_survive_a_restart(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """`ack_all` (one AckMessage's entries): each entry answered in order (a stale or repeated one
    refused, changing nothing), the accepted offsets in one ACK record, replayed at restart."""
    store = open_store()
    cfg = tmp_path / "cfg"
    clock = ManualClock()
    svc = service(store, cfg, clock)
    put(store, 8)
    batch = svc.pop(GROUP, TOPIC, [0], 8, 10_000, INIT_MODE_MIN)
    assert svc.persist()
    path = cfg / "popState.log"
    before = path.stat().st_size

    def handle(offset: int, pop_time: int = batch.pop_time) -> tuple[int, int, str, str]:
        return offset, pop_time, "0", BROKER

    acks = [handle(1), handle(2, pop_time=1), handle(3), handle(1), handle(5), (*handle(6)[:3], "other")]
    refusals = svc.ack_all(GROUP, TOPIC, 0, acks)
    assert [r is None for r in refusals] == [True, False, True, False, True, False]
    assert "stale" in str(refusals[1]) and "acked already" in str(refusals[3])
    assert "was not issued by this broker" in str(refusals[5])
    assert svc.persist()
    key_bytes = 2 + len(GROUP) + 2 + len(TOPIC) + 4
    assert path.stat().st_size - before == RECORD_FRAME.size + 1 + key_bytes + 2 + 3 * 8
    svc.table.log.close()
    again = service(store, cfg, clock)
    assert sorted(again.in_flight(GROUP, TOPIC, 0)) == [0, 2, 4, 6, 7]  # 6: not by another broker's handle


def test_compaction_snapshot_and_restart(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    cfg = tmp_path / "cfg"
    clock = ManualClock()
    svc = service(store, cfg, clock, compact_min_bytes=2_000)
    put(store, 40)
    for _ in range(40):  # pop one, ack it: the log grows, the live state stays small
        batch = svc.pop(GROUP, TOPIC, [0], 1, 10_000, INIT_MODE_MIN)
        m = batch.messages[0]
        if m.queue_offset != 39:  # the last one stays in flight
            handle = ReceiptHandle(m.queue_offset, batch.pop_time, 10_000, 0, "0", BROKER, 0, m.queue_offset)
            svc.ack(GROUP, TOPIC, 0, m.queue_offset, handle)
        assert svc.persist()
    log = svc.table.log
    assert log.compactions >= 1
    assert (cfg / "popState.log").stat().st_size < 2_000
    assert (cfg / "popState.snap").exists()
    expected = svc.in_flight(GROUP, TOPIC, 0)
    assert list(expected) == [39]
    svc.close()
    again = service(store, cfg, clock)
    assert again.in_flight(GROUP, TOPIC, 0) == expected
    assert again.table.queues[(GROUP, TOPIC, 0)].cursor == 40


def test_crash_between_snapshot_and_log_reset_ignores_the_old_log(tmp_path: Path) -> None:
    """The old log repeats what the snapshot holds; replayed over it, an acked pop would return."""
    log = PopLog(tmp_path, compact_min_bytes=0)
    log.load()
    log.append(pop_record(KEY, 1, 100, 200, [(0, 0)]))
    log.append(ack_record(KEY, [0]))
    assert log.sync()
    shutil.copy(tmp_path / "popState.log", tmp_path / "old.log")
    states = {KEY: QueuePopState(1)}
    log.compact(states, contextlib.nullcontext())
    assert log.positions() == (1, FILE_HEADER.size, FILE_HEADER.size)  # the next epoch's file, synced
    log.close()
    # the crash: the snapshot was renamed, the log not yet reset (and only the pop survived in it)
    old = (tmp_path / "old.log").read_bytes()
    pop_only = old[: FILE_HEADER.size + len(pop_record(KEY, 1, 100, 200, [(0, 0)]))]
    (tmp_path / "popState.log").write_bytes(pop_only)
    assert PopLog(tmp_path).load() == {KEY: QueuePopState(1)}


def test_upgrade_from_popstate_json(tmp_path: Path) -> None:
    old = {"version": 1, "queues": [{"group": "g", "topic": "T", "queueId": 0, "cursor": 5,
                                     "inFlight": [[3, 1000, 2000, 2]]}]}  # fmt: skip
    (tmp_path / "popState.json").write_text(json.dumps(old))
    log = PopLog(tmp_path)
    assert log.load() == {KEY: QueuePopState(5, {3: InFlight(1000, 2000, 2)})}
    log.close()
    assert not (tmp_path / "popState.json").exists()
    assert (tmp_path / "popState.snap").exists()
    assert PopLog(tmp_path).load() == {KEY: QueuePopState(5, {3: InFlight(1000, 2000, 2)})}


def test_async_flush_answers_once_written_and_syncs_in_the_background(tmp_path: Path) -> None:
    """ASYNC_FLUSH: `durable()` returns once the records are in the file, before any fdatasync
    (what a SIGKILL cannot lose: another reader sees them at once), and one background fdatasync
    follows for everything written."""

    async def scenario() -> None:
        log = PopLog(tmp_path, sync_flush=False, sync_interval_s=0.05)
        log.load()

        async def change(i: int) -> None:
            log.append(cursor_record(KEY, i))
            await log.durable()

        await asyncio.gather(*(change(i) for i in range(50)))
        assert log.flushes == 0  # answered without waiting for the disk
        size = (tmp_path / "popState.log").stat().st_size
        assert log.positions() == (0, FILE_HEADER.size, size)  # GET /metrics: only the header synced
        assert PopLog(tmp_path).load() == {KEY: QueuePopState(49)}  # but written: a kill keeps it
        deadline = asyncio.get_running_loop().time() + 10
        while log.flushes == 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert log.flushes == 1  # one background fdatasync for all fifty
        assert log.positions() == (0, size, size)
        log.close()

    run(scenario(), timeout=30)
