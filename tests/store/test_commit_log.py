"""MappedFile, MappedFileQueue and CommitLog over real files with tiny segments."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.clock import ManualClock
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    SIZE_MAGIC,
    MessageInner,
    ScanKind,
    decode_record,
    encode_record,
)
from rocketlite.protocol.message import HostAddress, MessageSysFlag, make_msg_id
from rocketlite.store.codec.speedups import scan_record
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import MappedFile, create_segment, segment_name, staging_path
from rocketlite.store.mapped_file_queue import MappedFileQueue
from rocketlite.store.results import AppendMessageStatus
from tests.support.store import encoded_batch, stored_batch

HOST = HostAddress.parse("127.0.0.1:10911")


def msg(topic: str = "T", body: bytes = b"x" * 20, queue_id: int = 0, **kw: object) -> MessageInner:
    return MessageInner(topic=topic, body=body, born_host=HOST, store_host=HOST, queue_id=queue_id, **kw)  # type: ignore[arg-type]


def test_segment_names_and_preallocation(tmp_path: Path) -> None:
    assert segment_name(6_000_000) == "00000000000006000000"
    path = tmp_path / segment_name(0)
    create_segment(path, 8192)
    assert path.stat().st_size == 8192 and path.read_bytes() == bytes(8192)
    assert not staging_path(path).exists()
    # Blocks are really reserved, not a sparse file.
    assert path.stat().st_blocks * 512 >= 8192


def test_mapped_file_append_read_flush(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / segment_name(4096), 4096)
    assert mf.file_from_offset == 4096
    assert mf.append(b"abc") == 0 and mf.append_parts(b"de", b"f") == 3
    view = mf.read(0, 6)
    assert view is not None and bytes(view) == b"abcdef"
    view.release()
    assert mf.read(0, 7) is None
    assert mf.flush() == 6 and mf.flushed_position == 6
    mf.close()
    assert (tmp_path / segment_name(4096)).read_bytes()[:6] == b"abcdef"


def test_write_buffer_mode_commits_then_reads(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / segment_name(0), 4096, write_buffer=True)
    mf.append(b"hello")
    assert mf.read(0, 5) is None  # not committed yet: readers see only the file
    assert mf.commit() == 5
    view = mf.read(0, 5)
    assert view is not None and bytes(view) == b"hello"
    view.release()
    assert mf.flush() == 5
    mf.close()


def test_queue_roll_find_truncate(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path / "log", 4096)
    for _ in range(3):
        mf = q.get_last_file()
        assert mf is not None
        mf.append(b"\x01" * 4096)
    assert len(q) == 3 and q.max_offset == 3 * 4096
    found = q.find_by_offset(5000)
    assert found is not None and found.file_from_offset == 4096
    assert q.find_by_offset(3 * 4096) is None
    q.truncate_dirty(4096 + 10)
    assert len(q) == 2 and q.max_wrote_offset == 4096 + 10
    q.close()
    q2 = MappedFileQueue(tmp_path / "log", 4096)
    q2.load()
    assert [m.file_from_offset for m in q2] == [0, 4096]
    tail = q2.files[1].raw_view()
    assert bytes(tail[:10]) == b"\x01" * 10 and not any(tail[10:])
    assert q2.delete_before(4096) == 1 and q2.min_offset == 4096
    q2.close()


def test_load_reserves_the_holes_of_a_sparse_last_segment(tmp_path: Path) -> None:
    # RocketMQ creates segments sparse; appending into a hole through the mapping on a full disk
    # is a SIGBUS, so the segment that takes appends gets its blocks when the queue loads.
    directory = tmp_path / "log"
    directory.mkdir()
    size = 1 << 20
    for start in (0, size):
        with (directory / f"{start:020d}").open("wb") as f:
            f.write(b"\x01" * 100)
            f.truncate(size)
    first, last = directory / f"{0:020d}", directory / f"{size:020d}"
    if last.stat().st_blocks * 512 >= size:
        pytest.skip("this file system does not make sparse files")
    q = MappedFileQueue(directory, size)
    q.load()
    q.close()
    assert last.stat().st_blocks * 512 >= size  # filled in
    assert first.stat().st_blocks * 512 < size  # older segments are only read: left alone
    assert last.read_bytes()[:101] == b"\x01" * 100 + b"\x00"  # data unchanged


def make_log(tmp_path: Path, size: int = 4096, **kw: object) -> CommitLog:
    cfg = StoreConfig(store_path_root_dir=tmp_path, maped_file_size_commit_log=size, **kw)  # type: ignore[arg-type]
    return CommitLog(cfg, ManualClock())


def test_append_assigns_offsets_and_ids(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    r1 = log.append(msg(queue_id=1))
    r2 = log.append(msg(queue_id=1))
    r3 = log.append(msg(topic="U"))
    assert (r1.wrote_offset, r1.logics_offset) == (0, 0)
    assert (r2.wrote_offset, r2.logics_offset) == (r1.wrote_bytes, 1)
    assert r3.logics_offset == 0
    assert r2.msg_id == make_msg_id(HOST, r2.wrote_offset)
    rec = log.read_record(r2.wrote_offset)
    assert rec is not None
    decoded = decode_record(rec, verify_crc=True)
    assert decoded.queue_offset == 1 and decoded.physical_offset == r2.wrote_offset
    assert log.store_timestamp_of(r2.wrote_offset, r2.wrote_bytes) == decoded.store_timestamp
    rec.release()
    log.close()


def test_end_of_file_blank_and_roll(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    results = [log.append(msg(body=bytes(1000))) for _ in range(5)]
    # 1092-byte records (91 + 1000 + topic 1): three fit in 4096 (3276 + 8 <= 4096), the fourth rolls.
    assert [r.wrote_offset for r in results] == [0, 1092, 2184, 4096, 5188]
    seg0 = log.queue.files[0].raw_view()
    remaining, magic = SIZE_MAGIC.unpack_from(seg0, 3276)
    assert (remaining, magic) == (4096 - 3276, BLANK_MAGIC_CODE)
    res = scan_record(seg0, 3276, verify_crc=True)
    assert res.kind is ScanKind.BLANK
    log.close()


@pytest.mark.parametrize("write_buffer", [False, True])
def test_one_flush_pass_crosses_every_full_segment(tmp_path: Path, write_buffer: bool) -> None:
    """An interval that wrote several segments flushes them all, not one per interval."""
    log = make_log(tmp_path, transient_store_pool_enable=write_buffer)
    for _ in range(13):  # three 1092-byte records a segment: five segments, the last with one
        log.append(msg(body=bytes(1000)))
    assert len(log.queue.files) == 5
    if write_buffer:
        assert not log.commit(4)  # whole segments are always ready; the last one's page is not
        assert log.queue.committed_where == 4 * 4096
        assert not log.commit(0)
        assert log.queue.committed_where == log.queue.max_wrote_offset
    assert not log.flush(4)
    assert log.flushed_where == 4 * 4096  # the last segment's single page waits for least_pages
    assert all(mf.flushed_position == 4096 for mf in log.queue.files[:4])
    assert not log.flush(0)
    assert log.flushed_where == log.queue.max_wrote_offset
    assert log.flush(0)  # nothing left
    log.close()


def test_batch_append_is_contiguous(tmp_path: Path) -> None:
    log = make_log(tmp_path, size=8192)
    log.append(msg(body=bytes(5000)))
    batch = [msg(queue_id=2, body=bytes([i]) * 500) for i in range(6)]
    res = log.append_encoded_batch(encoded_batch(batch), "T", 2, HOST)
    assert res.status is AppendMessageStatus.PUT_OK and res.msg_num == 6
    assert res.wrote_offset == 8192  # did not fit after the first record: whole batch rolled
    ids = res.msg_id.split(",")
    assert len(ids) == 6 and ids[0] == make_msg_id(HOST, 8192)
    stored = stored_batch(batch, res)
    assert [m.queue_offset for m in stored] == list(range(6))
    pos = res.wrote_offset
    for i, m in enumerate(stored):
        rec = log.read_record(pos)
        assert rec is not None
        d = decode_record(rec, verify_crc=True)
        assert d.body == bytes([i]) * 500 and d.queue_offset == i and d.physical_offset == m.commit_log_offset
        assert bytes(rec) == encode_record(m)
        pos += d.total_size
        rec.release()
    too_big = log.append_encoded_batch(encoded_batch([msg(body=bytes(3000)) for _ in range(3)]), "T", 0, HOST)
    assert too_big.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
    log.close()


def test_size_limits(tmp_path: Path) -> None:
    log = make_log(tmp_path, max_message_size=1024)
    assert log.append(msg(body=bytes(2000))).status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
    big_props = "k\x01" + "v" * 40000
    res = log.append(msg(properties_string=big_props))
    assert res.status is AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert log.max_offset == 0
    log.close()


def test_prepared_transactions_take_no_queue_offset(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    r1 = log.append(msg(sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE))
    r2 = log.append(msg())
    r3 = log.append(msg(sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE))
    r4 = log.append(msg(sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE))
    assert [r.logics_offset for r in (r1, r2, r3, r4)] == [0, 0, 0, 1]
    log.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.tuples(st.integers(0, 2), st.lists(st.integers(0, 900), min_size=1, max_size=4)),
        min_size=1,
        max_size=25,
    )
)
def test_queue_offsets_contiguous_under_random_batches(
    tmp_path_factory: object, batches: list[tuple[int, list[int]]]
) -> None:
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as d:
        log = make_log(Path(d))
        expected: dict[int, int] = {}
        placed: list[tuple[int, int, int, int]] = []  # phys, queue, queue offset, body len
        appended: list[MessageInner] = []
        for queue_id, sizes in batches:
            batch = [
                msg(queue_id=queue_id, body=bytes(s), properties_string=f"TAGS\x01t{s}\x02KEYS\x01k{s} x")
                for s in sizes
            ]
            if len(batch) > 1:
                res = log.append_encoded_batch(encoded_batch(batch), "T", queue_id, HOST)
                batch = stored_batch(batch, res)
            else:
                res = log.append(batch[0])
            assert res.status is AppendMessageStatus.PUT_OK
            appended.extend(batch)
            for m in batch:
                assert m.queue_offset == expected.get(queue_id, 0)
                expected[queue_id] = m.queue_offset + 1
                placed.append((m.commit_log_offset, queue_id, m.queue_offset, len(m.body)))
        for phys, queue_id, qoff, n in placed:
            rec = log.read_record(phys)
            assert rec is not None
            d2 = decode_record(rec, verify_crc=True)
            assert (d2.queue_id, d2.queue_offset, len(d2.body)) == (queue_id, qoff, n)
            rec.release()
        # The append fast path must write exactly what the reference encoder writes.
        for m in appended:
            rec = log.read_record(m.commit_log_offset)
            assert rec is not None and bytes(rec) == encode_record(m)
            rec.release()
        log.close()
