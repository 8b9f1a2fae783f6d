"""ConsumeQueue and ConsumeQueueStore on real files: layout, padding, recovery, truncation, expiry,
time lookup, and a property test over random batches in tiny files."""

from __future__ import annotations

import logging
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats.consume_queue_unit import CQ_UNIT, PADDING_UNIT, UNIT_SIZE, Unit, is_padding
from rocketlite.store.config import StoreConfig
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.consume_queue_store import ConsumeQueueStore

PER_FILE = 10
FILE = PER_FILE * UNIT_SIZE  # 200 bytes: files roll every 10 units
TOPIC = "TopicTest"


def units(n: int, first_phy: int = 0, size: int = 100) -> list[Unit]:
    """`n` consecutive records of `size` bytes from `first_phy`; tagsCode = index."""
    return [(first_phy + i * size, size, i) for i in range(n)]


def open_cq(root: Path, file_size: int = FILE, queue_id: int = 0) -> ConsumeQueue:
    cq = ConsumeQueue(TOPIC, queue_id, root, file_size)
    cq.load()
    cq.recover()
    return cq


def reopen(cq: ConsumeQueue, root: Path) -> ConsumeQueue:
    cq.close()
    return open_cq(root, cq.file_size, cq.queue_id)


def qdir(root: Path, queue_id: int = 0) -> Path:
    return root / TOPIC / str(queue_id)


def raw(root: Path, name: int) -> bytes:
    return (qdir(root) / f"{name:020d}").read_bytes()


def all_units(cq: ConsumeQueue) -> list[Unit | None]:
    return [cq.get_unit(i) for i in range(cq.min_offset, cq.max_offset)]


def test_layout_with_default_file_size(tmp_path: Path) -> None:
    file_size = StoreConfig(store_path_root_dir=tmp_path).cq_file_size
    assert file_size == 6_000_000
    cq = open_cq(tmp_path, file_size)
    assert cq.put_unit(0x0102030405060708, 0x0A0B0C0D, -2, 0)
    cq.close()
    path = qdir(tmp_path) / "00000000000000000000"
    data = path.read_bytes()
    assert len(data) == 6_000_000
    assert data[:20] == bytes.fromhex("0102030405060708 0a0b0c0d fffffffffffffffe")
    assert not any(data[20:4096])


def test_round_trip_and_rolls(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    batch = units(25)
    for i in range(5):
        assert cq.put_unit(*batch[i], i)
    assert cq.put_units(batch[5:], 5)
    assert sorted(p.name for p in qdir(tmp_path).iterdir()) == [f"{n:020d}" for n in (0, 200, 400)]
    assert all((qdir(tmp_path) / f"{n:020d}").stat().st_size == FILE for n in (0, 200, 400))
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 25, 2500)
    assert all_units(cq) == batch
    assert cq.get_unit(25) is None and cq.get_unit(-1) is None
    assert cq.last_unit() == batch[-1]
    assert raw(tmp_path, 200)[:20] == CQ_UNIT.pack(*batch[10])
    assert not cq.flush()  # something was written, so something was flushed
    cq.close()


def test_get_units_is_limited_to_one_file_and_written_data(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    batch = units(25)
    cq.put_units(batch, 0)
    view = cq.get_units(7, 100)
    assert view is not None and len(view) == 3 * UNIT_SIZE
    assert list(CQ_UNIT.iter_unpack(view)) == batch[7:10]
    view.release()
    view = cq.get_units(20, 100)
    assert view is not None and list(CQ_UNIT.iter_unpack(view)) == batch[20:]
    view.release()
    view = cq.get_units(11, 2)
    assert view is not None and list(CQ_UNIT.iter_unpack(view)) == batch[11:13]
    view.release()
    assert cq.get_units(25, 1) is None and cq.get_units(3, 0) is None
    assert cq.roll_next_file(7) == 10
    cq.close()


@pytest.mark.parametrize(("start", "file_name"), [(5, 0), (13, 200)])
def test_padding_when_queue_starts_mid_file(tmp_path: Path, start: int, file_name: int) -> None:
    cq = open_cq(tmp_path)
    assert cq.put_unit(1000, 50, 7, start)
    assert [p.name for p in qdir(tmp_path).iterdir()] == [f"{file_name:020d}"]
    pad = start % PER_FILE
    data = raw(tmp_path, file_name)
    assert data[: pad * UNIT_SIZE] == CQ_UNIT.pack(*PADDING_UNIT) * pad
    assert data[pad * UNIT_SIZE : (pad + 1) * UNIT_SIZE] == CQ_UNIT.pack(1000, 50, 7)
    assert (cq.min_offset, cq.max_offset) == (start, start + 1)
    assert cq.get_unit(start - 1) is None and cq.get_unit(start) == (1000, 50, 7)
    cq = reopen(cq, tmp_path)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (start, start + 1, 1050)
    assert cq.put_unit(1050, 50, 8, start + 1) and cq.get_unit(start + 1) == (1050, 50, 8)
    cq.close()


def test_duplicates_and_overlaps_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cq = open_cq(tmp_path)
    batch = units(12)
    cq.put_units(batch, 0)
    assert cq.put_units(batch, 0)  # re-dispatch of the same records
    assert cq.put_unit(*batch[3], 40)  # a record already in the queue, whatever offset it claims
    assert (cq.max_offset, cq.max_physic_offset) == (12, 1200)
    with caplog.at_level(logging.WARNING, logger="rocketlite.store.consume_queue"):
        assert cq.put_unit(5000, 10, 0, 4)  # new record, offset already taken: skipped
    assert "already written" in caplog.text
    assert cq.max_offset == 12 and cq.get_unit(4) == batch[4]
    assert not cq.put_unit(-1, 10, 0, 12) and not cq.put_unit(1200, 0, 0, 12)  # unreadable units
    assert cq.max_offset == 12
    cq.close()


def test_gap_is_padded(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    cq.put_units(units(3), 0)
    assert cq.put_unit(300, 100, 3, 16)
    assert cq.max_offset == 17 and cq.min_offset == 0
    assert all(is_padding(u) for u in all_units(cq)[3:16] if u is not None)
    assert cq.get_unit(16) == (300, 100, 3) and cq.last_unit() == (300, 100, 3)
    cq = reopen(cq, tmp_path)
    assert (cq.max_offset, cq.max_physic_offset, cq.get_unit(16)) == (17, 400, (300, 100, 3))
    cq.close()


def test_reopen_and_recover_restores_offsets(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    batch = units(34, first_phy=4096)
    cq.put_units(batch, 0)
    cq.close()
    mtimes = {p.name: p.stat().st_mtime_ns for p in qdir(tmp_path).iterdir()}
    cq = open_cq(tmp_path)
    assert {p.name: p.stat().st_mtime_ns for p in qdir(tmp_path).iterdir()} == mtimes  # clean: no rewrite
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 34, 4096 + 3400)
    assert all_units(cq) == batch
    more = units(3, first_phy=4096 + 3400)
    cq.put_units(more, 34)
    assert all_units(cq) == batch + more
    cq = reopen(cq, tmp_path)
    assert all_units(cq) == batch + more
    cq.close()


@pytest.mark.parametrize(
    "garbage",
    [
        CQ_UNIT.pack(500, 100, 0) + b"\xab" * 13,  # a unit going backwards, then a partial one
        CQ_UNIT.pack(1300, 100, 7)[:10],  # torn: the size field did not make it
        b"\xff" * 13,  # negative offset
    ],
    ids=["backwards", "torn", "negative"],
)
def test_recover_truncates_garbage_tail(tmp_path: Path, garbage: bytes) -> None:
    cq = open_cq(tmp_path)
    batch = units(13)
    cq.put_units(batch, 0)
    cq.close()
    with (qdir(tmp_path) / f"{200:020d}").open("r+b") as f:
        f.seek(3 * UNIT_SIZE)
        f.write(garbage)
    (qdir(tmp_path) / f"{400:020d}").write_bytes(b"\x07" * FILE)  # a stray later file
    cq = open_cq(tmp_path)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 13, 1300)
    assert all_units(cq) == batch
    assert not any(raw(tmp_path, 200)[3 * UNIT_SIZE :])
    assert not (qdir(tmp_path) / f"{400:020d}").exists()
    assert cq.put_unit(1300, 100, 13, 13) and cq.get_unit(13) == (1300, 100, 13)
    cq.close()


def test_truncate_dirty(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    batch = units(25)
    cq.put_units(batch, 0)
    cq.truncate_dirty(1250)  # units 13.. point at or past the cut
    assert (cq.max_offset, cq.max_physic_offset) == (13, 1300)
    assert all_units(cq) == batch[:13]
    assert not (qdir(tmp_path) / f"{400:020d}").exists()
    assert not any(raw(tmp_path, 200)[3 * UNIT_SIZE :])
    cq.truncate_dirty(5000)  # nothing past it
    assert cq.max_offset == 13
    cq.truncate_dirty(1000)  # at a file boundary: the emptied file stays, zeroed
    assert (cq.max_offset, cq.max_physic_offset) == (10, 1000)
    assert not any(raw(tmp_path, 200))
    cq = reopen(cq, tmp_path)
    assert (cq.max_offset, cq.max_physic_offset) == (10, 1000)
    cq.put_units(batch[10:], 10)
    assert all_units(cq) == batch
    cq.truncate_dirty(0)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 0, -1)
    assert [p.name for p in qdir(tmp_path).iterdir()] == [f"{0:020d}"]
    cq.put_units(batch[:2], 0)
    assert all_units(cq) == batch[:2]
    cq.close()


def test_truncate_dirty_keeps_queue_position_and_padding(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    cq.put_units(units(4, first_phy=800), 15)
    cq.truncate_dirty(900)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (15, 16, 900)
    cq.truncate_dirty(800)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (15, 15, -1)
    cq.put_unit(800, 100, 0, 15)
    assert cq.get_unit(15) == (800, 100, 0) and cq.min_offset == 15
    cq.close()


def test_delete_expired_and_min_offset_correction(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    cq.put_units(units(25), 0)  # record i at [i*100, i*100+100)
    assert cq.delete_expired(999) == 0  # unit 9 ends at 1000: its file stays...
    assert cq.min_offset == 10  # ...but no record of the first file starts at or after 999
    assert cq.delete_expired(1000) == 1 and cq.min_offset == 10
    assert [p.name for p in qdir(tmp_path).iterdir()] != [] and not (qdir(tmp_path) / f"{0:020d}").exists()
    assert cq.delete_expired(1550) == 0 and cq.min_offset == 16
    assert cq.get_unit(15) is None and cq.get_unit(16) == (1600, 100, 16)
    assert cq.delete_expired(10**9) == 1  # never the last file
    assert (cq.min_offset, cq.max_offset) == (25, 25)
    assert sorted(p.name for p in qdir(tmp_path).iterdir()) == [f"{400:020d}"]
    cq = reopen(cq, tmp_path)
    assert (cq.min_offset, cq.max_offset) == (20, 25)  # recovery alone knows no commit-log minimum
    cq.correct_min_offset(10**9)
    assert cq.min_offset == 25
    cq.put_unit(10**9, 100, 0, 25)
    assert cq.min_offset == 25 and cq.get_unit(25) == (10**9, 100, 0)
    cq.close()


def test_offset_by_time(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    cq.put_units(units(6, first_phy=1000), 5)  # starts mid-file: padding 0..4
    cq.put_unit(1600, 100, 0, 14)  # and a padded gap 11..13
    times = {1000: 10, 1100: 10, 1200: 20, 1300: 20, 1400: 20, 1500: 30, 1600: 40}

    def store_time(phy: int, size: int) -> int | None:
        assert size == 100
        return times.get(phy)

    assert cq.offset_by_time(0, store_time) == 5  # before everything: the min offset
    assert cq.offset_by_time(10, store_time) == 5
    assert cq.offset_by_time(20, store_time) == 7  # the first of equal store times
    assert cq.offset_by_time(25, store_time) == 10  # between: the first one after
    assert cq.offset_by_time(31, store_time) == 14  # past the gap
    assert cq.offset_by_time(41, store_time) == 15  # after everything: the max offset
    del times[1000], times[1100], times[1200]  # gone from the log: older than anything
    assert cq.offset_by_time(0, store_time) == 8
    cq.close()


def test_store_table_and_bulk_operations(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = ConsumeQueueStore(tmp_path, FILE)
    a0 = store.find_or_create("A", 0)
    assert store.find_or_create("A", 0) is a0 and store.get("A", 1) is None
    a0.put_units(units(25), 0)
    store.find_or_create("A", 1).put_units(units(3, first_phy=5000), 0)
    store.find_or_create("%RETRY%g", 0).put_unit(5300, 100, 0, 7)
    store.find_or_create("empty", 3)
    with pytest.raises(ValueError, match="cannot name"):
        store.find_or_create("../escape", 0)
    assert sorted(store.topics()) == ["%RETRY%g", "A", "empty"]
    assert store.max_physic_offset() == 5400
    assert not store.flush_all(0)
    assert any(store.flush_all(0) for _ in range(5))
    store.close()
    (tmp_path / "A" / "notaqueue").mkdir()
    (tmp_path / "stray.txt").write_text("x")

    store = ConsumeQueueStore(tmp_path, FILE)
    with caplog.at_level(logging.WARNING, logger="rocketlite.store.consume_queue_store"):
        store.load()
    assert "notaqueue" in caplog.text and "stray.txt" in caplog.text
    store.recover_all()
    assert sorted((cq.topic, cq.queue_id, cq.max_offset) for cq in store.queues()) == [
        ("%RETRY%g", 0, 8),
        ("A", 0, 25),
        ("A", 1, 3),
    ]
    assert store.max_physic_offset() == 5400
    store.truncate_dirty(5100)
    assert store.max_physic_offset() == 5100
    retry = store.get("%RETRY%g", 0)
    assert retry is not None and (retry.min_offset, retry.max_offset) == (7, 7)
    assert store.delete_expired(1500) == 1
    reloaded = store.get("A", 0)
    assert reloaded is not None and reloaded.min_offset == 15
    assert store.delete_topic("A") and not store.delete_topic("A")
    assert not (tmp_path / "A" / "0").exists() and (tmp_path / "A" / "notaqueue").exists()
    assert store.topics() == ["%RETRY%g"]
    store.close()


def test_bad_file_size_and_concurrent_creation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of 20"):
        ConsumeQueue(TOPIC, 0, tmp_path, 210)
    store = ConsumeQueueStore(tmp_path, FILE)
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda i: store.find_or_create(f"T{i % 3}", i % 4), range(400)))
    assert len({id(cq) for cq in made}) == 12 == len(list(store.queues()))
    store.close()


def check_queue(cq: ConsumeQueue, start: int, expected: list[Unit]) -> None:
    end = start + len(expected)
    assert (cq.min_offset, cq.max_offset) == (start, end)
    assert cq.get_unit(start - 1) is None and cq.get_unit(end) is None
    assert all_units(cq) == expected
    assert cq.max_physic_offset == expected[-1][0] + expected[-1][1]
    assert cq.last_unit() == expected[-1]
    got: list[Unit] = []
    while start + len(got) < end:
        view = cq.get_units(start + len(got), 4)
        assert view is not None and 0 < len(view) <= 4 * UNIT_SIZE
        got.extend(CQ_UNIT.iter_unpack(view))
        view.release()
    assert got == expected


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, int, list[list[Unit]], set[int]]:
    per_file = draw(st.integers(1, 7))
    start = draw(st.integers(0, 25))
    phy = draw(st.integers(0, 1 << 40))
    batches: list[list[Unit]] = []
    for _ in range(draw(st.integers(1, 8))):
        batch: list[Unit] = []
        for size, tags in draw(
            st.lists(
                st.tuples(st.integers(1, 1 << 22), st.integers(-(1 << 63), (1 << 63) - 1)),
                min_size=1,
                max_size=15,
            )
        ):
            batch.append((phy, size, tags))
            phy += size
        batches.append(batch)
    reopen_after = set(draw(st.sets(st.integers(0, len(batches) - 1))))
    return per_file, start, batches, reopen_after


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_random_batches_in_tiny_files(scenario: tuple[int, int, list[list[Unit]], set[int]]) -> None:
    per_file, start, batches, reopen_after = scenario
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cq = open_cq(root, per_file * UNIT_SIZE)
        put: list[Unit] = []
        for n, batch in enumerate(batches):
            if len(batch) == 1:
                assert cq.put_unit(*batch[0], start + len(put))
            else:
                assert cq.put_units(batch, start + len(put))
            put.extend(batch)
            check_queue(cq, start, put)
            if n in reopen_after:
                cq = reopen(cq, root)
                check_queue(cq, start, put)
        assert cq.put_units(put, start)  # a full re-dispatch changes nothing
        check_queue(cq, start, put)
        cq = reopen(cq, root)
        check_queue(cq, start, put)
        files = sorted(int(p.name) for p in qdir(root).iterdir())
        first_file = start * UNIT_SIZE // cq.file_size * cq.file_size
        assert files == list(range(first_file, files[-1] + 1, cq.file_size))
        cq.close()
