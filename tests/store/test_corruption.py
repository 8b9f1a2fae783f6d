"""Damaged stores on real files: what recovery does, what it reports and logs, what survives.

Each scenario writes messages with a store, shuts it down cleanly, optionally puts the `abort` file
back (a crash: abnormal recovery) and then damages the files the way a torn write, a bad disk or an
operator would. `verify_store` must see the damage before the store is reopened, recovery must
repair it without raising, say what it did in `RecoveryReport.actions` and in a warning, keep every
record before the damage, and leave a store that verifies clean after the next shutdown. The CLI
tools are checked on the real RocketMQ commit log and on damaged copies of it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketlite.protocol.formats.consume_queue_unit import is_padding
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    SIZE_MAGIC,
    MessageInner,
    decode_record,
    encode_record,
    layout_for,
)
from rocketlite.protocol.message import HostAddress, properties_to_string, tags_code
from rocketlite.store.inspect import verify_store
from rocketlite.store.message_store import MessageStore
from rocketlite.store.recovery import RecoveryReport
from rocketlite.store.results import GetMessageStatus, PutMessageStatus
from tests.support.processes import ROCKETLITE
from tests.support.store import REAL_STORE, StoreFactory, key_hits, small_config

HOST = HostAddress.parse("127.0.0.1:10911")
TOPIC = "T"
QUEUES = 2
SEGMENT = small_config(Path()).maped_file_size_commit_log
COUNT = 300  # ~3 commit-log segments, several consume-queue files per queue
BODY_POS = layout_for(0).head.size  # where the body starts in an IPv4 record
SRC = Path(__file__).resolve().parents[2] / "src"
REAL_RECORD_SIZE = 172  # every record of the real RocketMQ commit log


@dataclass(frozen=True, slots=True)
class Written:
    key: str
    queue_id: int
    queue_offset: int
    phy: int
    size: int


def mk(key: str, queue_id: int, body_size: int) -> MessageInner:
    return MessageInner(
        topic=TOPIC,
        body=bytes([65 + queue_id]) * body_size,
        born_host=HOST,
        store_host=HOST,
        queue_id=queue_id,
        properties_string=properties_to_string({"KEYS": key, "TAGS": f"t{queue_id}"}),
        born_timestamp=1,
    )


def write_store(root: Path, *, crash: bool, count: int = COUNT) -> list[Written]:
    """`count` messages over QUEUES queues, then a clean shutdown; `crash` puts `abort` back."""
    store = MessageStore(small_config(root))
    store.start()
    written: list[Written] = []
    try:
        for i in range(count):
            msg = mk(f"key-{i}", i % QUEUES, 200 + i * 37 % 600)
            res = store.put_message(msg)
            assert res.status is PutMessageStatus.PUT_OK and res.append is not None
            written.append(
                Written(
                    f"key-{i}", msg.queue_id, msg.queue_offset, msg.commit_log_offset, res.append.wrote_bytes
                )
            )
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    if crash:
        (root / "abort").touch()
    return written


def log_end(written: list[Written]) -> int:
    return written[-1].phy + written[-1].size


def segment_path(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEGMENT:020d}"


def write_at(root: Path, offset: int, data: bytes) -> None:
    with segment_path(root, offset).open("r+b") as fh:
        fh.seek(offset % SEGMENT)
        fh.write(data)


def read_at(root: Path, offset: int, size: int) -> bytes:
    with segment_path(root, offset).open("rb") as fh:
        fh.seek(offset % SEGMENT)
        return fh.read(size)


def reopen(open_store: StoreFactory, root: Path, *, crash: bool) -> tuple[MessageStore, RecoveryReport]:
    store = open_store(root)
    report = store.recovery_report
    assert report is not None and report.abnormal is crash
    assert store.wait_dispatched()
    return store, report


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("rocketlite.store")
    ]


def infos_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("rocketlite.store")]


def check_intact(store: MessageStore, written: list[Written]) -> None:
    """Each message is readable at its queue offset and (exactly once) by its key."""
    for w in written:
        got = store.get_message("g", TOPIC, w.queue_id, w.queue_offset, 1)
        assert got.status is GetMessageStatus.FOUND, (w, got.status)
        rec = decode_record(got.messages[0], verify_crc=True)
        got.release()
        assert (rec.keys, rec.physical_offset, rec.total_size) == (w.key, w.phy, w.size), w
        assert key_hits(store, TOPIC, w.key) == [w.phy], w


def check_consume_queues(store: MessageStore) -> dict[int, int]:
    """Contiguous queue offsets, each unit pointing at a record of its queue with its offset."""
    max_offsets: dict[int, int] = {}
    for cq in store.cq_store.queues():
        for offset in range(cq.min_offset, cq.max_offset):
            unit = cq.get_unit(offset)
            assert unit is not None and not is_padding(unit), (cq, offset)
            phy, size, tags = unit
            view = store.commit_log.get_message(phy, size)
            assert view is not None, (cq, offset, unit)
            rec = decode_record(view, verify_crc=True)
            view.release()
            assert (rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset) == (
                cq.topic, cq.queue_id, offset, phy,
            )  # fmt: skip
            assert tags == tags_code(rec.tags)
        max_offsets[cq.queue_id] = cq.max_offset
    return max_offsets


def check_dropped(store: MessageStore, w: Written, queue_end: int) -> None:
    """`w` is gone: its queue ends at `queue_end` (<= its offset), no unit, not found by key."""
    cq = store.cq_store.get(TOPIC, w.queue_id)
    assert cq is not None and cq.max_offset == queue_end <= w.queue_offset
    assert cq.get_unit(w.queue_offset) is None
    got = store.get_message("g", TOPIC, w.queue_id, w.queue_offset, 1)
    expected = (
        GetMessageStatus.OFFSET_OVERFLOW_ONE
        if queue_end == w.queue_offset
        else GetMessageStatus.OFFSET_OVERFLOW_BADLY
    )
    assert got.status is expected
    assert key_hits(store, TOPIC, w.key) == []


def check_append(store: MessageStore, queue_id: int, *, phy: int, queue_offset: int) -> None:
    """The next message of `queue_id` lands at commit-log `phy` with `queue_offset`."""
    res = store.put_message(mk("after", queue_id, 100))
    assert res.status is PutMessageStatus.PUT_OK and res.append is not None
    assert (res.append.wrote_offset, res.append.logics_offset) == (phy, queue_offset)
    assert store.wait_dispatched()
    assert key_hits(store, TOPIC, "after") == [phy]


def check_clean_after_shutdown(store: MessageStore, root: Path) -> None:
    store.shutdown()
    verified = verify_store(root)
    assert verified.ok, verified.lines()


def check_broken(root: Path, offset: int) -> list[str]:
    verified = verify_store(root)
    assert not verified.ok
    assert any(str(offset) in p for p in verified.problems), verified.problems
    return verified.problems


# -- (a) torn tail ----------------------------------------------------------------------------------


@pytest.mark.parametrize("crash", [True, False], ids=["abnormal", "normal"])
# Bytes of the record that made it to disk: part of the size, size and magic, part of the header,
# the header and part of the body. (A tear inside the properties, after the body, cannot be told
# from a record with another property value: the CRC covers the body only, as in RocketMQ.)
@pytest.mark.parametrize("torn", [4, 8, 60, 100, BODY_POS + 150])
def test_torn_tail_is_truncated(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, crash: bool, torn: int
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=crash)
    end = log_end(written)
    nxt = mk("torn", 0, 300)
    nxt.queue_offset, nxt.commit_log_offset, nxt.store_timestamp = COUNT // QUEUES, end, 1
    record = encode_record(nxt)
    assert end % SEGMENT + len(record) + 8 <= SEGMENT  # the torn record is inside the last segment
    part = record[:torn]
    write_at(root, end, part)
    problems = check_broken(root, end)
    assert any("commit log" in p for p in problems)

    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=crash)
    assert report.valid_end == end and report.problem_offset == end
    assert report.truncated_bytes > 0
    expected = f"commit log: truncating torn or invalid tail from offset {end}"
    assert any(a.startswith(expected) for a in report.actions), report.actions
    assert any(m.startswith(expected) for m in warnings_logged(caplog))
    assert read_at(root, end, len(part)) == bytes(len(part))  # zeroed on disk
    check_intact(store, written)
    assert check_consume_queues(store) == {0: COUNT // QUEUES, 1: COUNT // QUEUES}
    check_append(store, 0, phy=end, queue_offset=COUNT // QUEUES)
    check_clean_after_shutdown(store, root)


# -- (b) zeroed tail, (c) flipped bit, (g) consume queue ahead of the log ----------------------------


def _zero_records(root: Path, records: list[Written]) -> None:
    for w in records:
        write_at(root, w.phy, bytes(w.size))


def _flip_body_bit(root: Path, w: Written) -> None:
    pos = w.phy + BODY_POS + 5
    write_at(root, pos, bytes([read_at(root, pos, 1)[0] ^ 0x10]))


@pytest.mark.parametrize("crash", [True, False], ids=["abnormal", "normal"])
@pytest.mark.parametrize("damage", ["zeroed-last", "flipped-bit", "zeroed-last-3"])
def test_damaged_last_records_are_dropped(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, crash: bool, damage: str
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=crash)
    dropped = written[-3:] if damage == "zeroed-last-3" else written[-1:]
    kept = written[: len(written) - len(dropped)]
    cut = dropped[0].phy
    if damage == "flipped-bit":
        _flip_body_bit(root, dropped[0])
        problems = check_broken(root, cut)
        assert any("CRC" in p for p in problems), problems
    else:
        _zero_records(root, dropped)
        problems = check_broken(root, cut)  # the consume queues point at records that are gone
        assert any(p.startswith("consumequeue") for p in problems), problems

    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=crash)
    assert report.valid_end == cut
    cq_action = f"consume queues: dropping units at or beyond offset {cut}"
    assert cq_action in report.actions, report.actions
    assert cq_action in warnings_logged(caplog)
    if damage == "flipped-bit":
        assert report.problem == "body CRC mismatch" and report.problem_offset == cut
        log_action = f"commit log: truncating torn or invalid tail from offset {cut} (body CRC mismatch)"
        assert log_action in report.actions
        assert log_action in warnings_logged(caplog)
        assert read_at(root, cut, dropped[0].size) == bytes(dropped[0].size)
    check_intact(store, kept)
    first_dropped = {
        q: min((w.queue_offset for w in dropped if w.queue_id == q), default=None) for q in range(QUEUES)
    }
    for w in dropped:
        check_dropped(store, w, first_dropped[w.queue_id] or 0)
    max_offsets = check_consume_queues(store)
    assert max_offsets == {
        q: COUNT // QUEUES if first is None else first for q, first in first_dropped.items()
    }
    check_append(store, dropped[0].queue_id, phy=cut, queue_offset=dropped[0].queue_offset)
    check_clean_after_shutdown(store, root)


# -- (d) consume queues deleted, (e) index deleted ---------------------------------------------------


@pytest.mark.parametrize("crash", [True, False], ids=["abnormal", "normal"])
@pytest.mark.parametrize("directory", ["consumequeue", "index"])
def test_deleted_directory_is_rebuilt(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, crash: bool, directory: str
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=crash)
    shutil.rmtree(root / directory)
    assert verify_store(root).ok  # a missing consume queue or index is rebuilt, not broken

    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=crash)
    assert report.redispatched_from == 0 and report.redispatched_records == COUNT
    action = f"re-dispatched {COUNT} records from offset 0"
    assert action in report.actions, report.actions
    assert action in infos_logged(caplog)
    assert (root / directory).is_dir()
    check_intact(store, written)  # also: no key indexed twice, no unit written twice
    assert check_consume_queues(store) == {0: COUNT // QUEUES, 1: COUNT // QUEUES}
    check_append(store, 1, phy=log_end(written), queue_offset=COUNT // QUEUES)
    check_clean_after_shutdown(store, root)


# -- (f) blanks, leftover segments -------------------------------------------------------------------


def test_garbage_inside_an_end_of_file_blank_is_ignored(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=True)
    first_end = max(w.phy + w.size for w in written if w.phy < SEGMENT)
    remaining, magic = SIZE_MAGIC.unpack(read_at(root, first_end, 8))
    assert magic == BLANK_MAGIC_CODE and remaining == SEGMENT - first_end and remaining > 16
    write_at(root, first_end + 8, b"\xde\xad\xbe\xef" * ((remaining - 8) // 4))
    assert verify_store(root).ok  # what follows a blank is not data

    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=True)
    assert report.clean and report.actions == [] and report.truncated_bytes == 0
    assert not [m for m in warnings_logged(caplog) if "truncat" in m or "dropping" in m]
    check_intact(store, written)
    check_consume_queues(store)
    check_append(store, 0, phy=log_end(written), queue_offset=COUNT // QUEUES)
    check_clean_after_shutdown(store, root)


@pytest.mark.parametrize("crash", [True, False], ids=["abnormal", "normal"])
@pytest.mark.parametrize("content", ["zeros", "garbage"])
def test_leftover_segment_after_the_last_is_deleted(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, crash: bool, content: str
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=crash)
    end = log_end(written)
    extra = segment_path(root, end + SEGMENT)
    assert not extra.exists()
    fill = bytes(SEGMENT) if content == "zeros" else b"\x5a" * SEGMENT
    extra.write_bytes(fill)
    if content == "garbage":
        check_broken(root, end)
    else:  # RocketMQ's allocator leaves an empty next segment behind: not damage
        verified = verify_store(root)
        assert verified.ok, verified.lines()
        assert any("1 empty segment(s) after the end of data" in n for n in verified.notes)

    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=crash)
    assert report.valid_end == end
    action = f"commit log: truncating torn or invalid tail from offset {end}"
    assert any(a.startswith(action) for a in report.actions), report.actions
    assert any(m.startswith(action) for m in warnings_logged(caplog))
    assert not extra.exists()
    check_intact(store, written)
    check_consume_queues(store)
    check_append(store, 1, phy=end, queue_offset=COUNT // QUEUES)
    check_clean_after_shutdown(store, root)


@pytest.mark.parametrize(
    ("start", "end"),
    [(12, 20), (15, 20), (11, 20)],
    ids=["tags-missing", "tags-half-written", "size-half-written"],
)
def test_a_torn_last_unit_is_dispatched_again(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, start: int, end: int
) -> None:
    """A process killed inside the copy of a batch of units leaves the last one half written: its
    offset and size in place (so it looks valid), the rest of it zeros. After a crash, recovery
    checks each queue's last unit against its record, drops a torn one and dispatches it again."""
    root = tmp_path / "s"
    written = write_store(root, crash=True)
    last = max((w for w in written if w.queue_id == 0), key=lambda w: w.queue_offset)
    units_per_file = small_config(root).maped_file_size_consume_queue // 20
    first = last.queue_offset - last.queue_offset % units_per_file
    path = root / "consumequeue" / TOPIC / "0" / f"{first * 20:020d}"
    with path.open("r+b") as fh:  # zero bytes [start, end) of the unit, as a torn copy leaves them
        fh.seek((last.queue_offset - first) * 20 + start)
        fh.write(bytes(end - start))
    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=True)
    assert any("torn" in a and "T-0" in a for a in report.actions), report.actions
    assert any("torn" in m for m in warnings_logged(caplog))
    cq = store.cq_store.find_or_create(TOPIC, 0)
    assert cq.get_unit(last.queue_offset) == (last.phy, last.size, tags_code("t0"))
    check_intact(store, written)
    check_clean_after_shutdown(store, root)


def test_recovery_of_an_undamaged_crash_does_nothing(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "s"
    written = write_store(root, crash=True)
    caplog.set_level(logging.INFO)
    store, report = reopen(open_store, root, crash=True)
    assert report.clean and report.actions == [] and report.valid_end == log_end(written)
    assert not [m for m in warnings_logged(caplog) if "abort file" not in m]
    check_intact(store, written)
    check_clean_after_shutdown(store, root)


# -- CLI: `rocketlite store inspect|verify` -----------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [*ROCKETLITE, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def _listing(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.mark.skipif(not REAL_STORE.is_dir(), reason="shared/testdata not present")
def test_cli_on_the_real_rocketmq_store_read_only() -> None:
    before = _listing(REAL_STORE)
    inspected = run_cli("store", "inspect", str(REAL_STORE))
    assert inspected.returncode == 0, inspected.stderr
    assert "47 records" in inspected.stdout
    assert "  abc 0 0..47 47" in inspected.stdout.splitlines()
    assert "PROBLEM" not in inspected.stdout

    as_json = run_cli("store", "inspect", "--json", str(REAL_STORE))
    assert as_json.returncode == 0, as_json.stderr
    info = json.loads(as_json.stdout)
    assert info["topics"] == {"abc": {"0": {"min_offset": 0, "max_offset": 47, "records": 47}}}
    assert info["commitlog"]["records"] == 47 and info["commitlog"]["problem"] is None
    assert info["commitlog"]["segments"] == [{"name": "0" * 20, "records": 47, "used": 47 * REAL_RECORD_SIZE}]

    verified = run_cli("store", "verify", str(REAL_STORE))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.splitlines()[-1] == "store verifies clean"
    assert _listing(REAL_STORE) == before  # nothing written: no lock, no abort, no checkpoint


@pytest.mark.skipif(not REAL_STORE.is_dir(), reason="shared/testdata not present")
@pytest.mark.parametrize("damage", ["flipped-bit", "bad-magic"])
def test_cli_on_a_damaged_copy_of_the_real_store(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "real"
    shutil.copytree(REAL_STORE, root)
    segment = root / "commitlog" / ("0" * 20)
    segment.chmod(0o644)
    record = 40
    offset = record * REAL_RECORD_SIZE
    data = bytearray(segment.read_bytes())
    if damage == "flipped-bit":
        data[offset + BODY_POS + 3] ^= 0x01
    else:
        data[offset + 4 : offset + 8] = b"\x00\x00\x00\x01"
    segment.write_bytes(bytes(data))

    verified = run_cli("store", "verify", str(root))
    assert verified.returncode == 1, verified.stdout + verified.stderr
    broken = [line for line in verified.stdout.splitlines() if line.startswith("BROKEN:")]
    assert broken and f"offset {offset}" in broken[0], verified.stdout
    assert ("CRC" if damage == "flipped-bit" else "magic") in broken[0]
    assert "store is broken" in verified.stdout.splitlines()[-1]

    inspected = run_cli("store", "inspect", str(root))
    assert inspected.returncode == 0, inspected.stderr
    if damage == "bad-magic":  # inspect checks structure, not CRCs
        assert "PROBLEM: bad magic code 0x00000001" in inspected.stdout
        assert f"{record} records" in inspected.stdout
        assert f"  abc 0 0..{record} {record}" in inspected.stdout.splitlines()
    else:
        assert "47 records" in inspected.stdout
