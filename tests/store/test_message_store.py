"""The store API end to end over real files: put, dispatch, get, query, restart, limits."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from rocketlite.protocol.formats.record import decode_record, decode_records
from rocketlite.protocol.message import (
    MessageSysFlag,
    make_msg_id,
    tags_code,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.clean import disk_used_ratio
from rocketlite.store.config import FlushDiskType
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import GetMessageStatus, PutMessageStatus
from tests.support.store import HOST, REAL_STORE, StoreFactory, put_batch
from tests.support.store import message as mk


def test_put_get_round_trip_and_statuses(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(10):
        res = store.put_message(mk(body=f"m{i}".encode(), tags="A" if i % 2 else "B", keys=f"k{i}"))
        assert res.status is PutMessageStatus.PUT_OK and res.append is not None
        assert res.append.logics_offset == i
    assert store.wait_dispatched()
    got = store.get_message("g", "T", 0, 0, 32)
    assert got.status is GetMessageStatus.FOUND
    assert [r.body for r in decode_records(got.body())] == [f"m{i}".encode() for i in range(10)]
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (10, 0, 10)
    got.release()

    only_a = store.get_message("g", "T", 0, 0, 32, lambda code: code == tags_code("A"))
    assert [r.tags for r in decode_records(only_a.body())] == ["A"] * 5
    assert only_a.next_begin_offset == 10
    only_a.release()
    none = store.get_message("g", "T", 0, 0, 32, lambda code: code == tags_code("Z"))
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10

    assert store.get_message("g", "T", 0, 10, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "T", 0, 99, 32)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 10  # the end
    nq = store.get_message("g", "nope", 0, 5, 32)
    assert nq.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE and nq.next_begin_offset == 0
    capped = store.get_message("g", "T", 0, 0, 3)
    assert capped.message_count == 3 and capped.next_begin_offset == 3
    capped.release()


def test_lookups_by_offset_key_time(open_store: StoreFactory) -> None:
    store = open_store()
    results = [store.put_message(mk(keys=f"order-{i} shared", UNIQ_KEY=f"U{i:031d}")) for i in range(5)]
    assert store.wait_dispatched()
    off = results[2].append
    assert off is not None
    rec = store.look_message_by_offset(off.wrote_offset)
    assert (
        rec is not None and rec.keys == "order-2 shared" and rec.msg_id == make_msg_id(HOST, off.wrote_offset)
    )
    assert off.msg_id == rec.msg_id

    q = store.query_message("T", "order-3", 32, 0, 2**62)
    assert [decode_record(v).keys for v in q.messages] == ["order-3 shared"]
    shared = store.query_message("T", "shared", 32, 0, 2**62)
    assert len(shared.messages) == 5
    by_uniq = store.query_message("T", f"U{4:031d}", 32, 0, 2**62)
    assert len(by_uniq.messages) == 1
    assert store.query_message("Other", "order-3", 32, 0, 2**62).messages == []

    ts0 = store.get_message_store_timestamp("T", 0, 0)
    assert ts0 > 0 and store.get_earliest_message_time("T", 0) == ts0
    assert store.get_offset_in_queue_by_time("T", 0, ts0 - 10_000) == 0
    assert store.get_max_offset_in_queue("T", 0) == 5 and store.get_min_offset_in_queue("T", 0) == 0
    assert store.get_commit_log_offset_in_queue("T", 0, 2) == off.wrote_offset


def test_restart_keeps_data_and_queue_offsets(open_store: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = open_store(root)
    for i in range(300):  # several commit-log and consume-queue segments
        store.put_message(mk(queue_id=i % 3, body=bytes(400), keys=f"k{i}"))
    store.shutdown()
    assert not (root / "abort").exists()
    store2 = open_store(root)
    report = store2.recovery_report
    assert report is not None and report.clean and not report.abnormal
    assert store2.get_max_offset_in_queue("T", 1) == 100
    res = store2.put_message(mk(queue_id=1))
    assert res.append is not None and res.append.logics_offset == 100
    assert store2.wait_dispatched()
    assert len(store2.query_message("T", "k299", 10, 0, 2**62).messages) == 1
    got = store2.get_message("g", "T", 1, 95, 32)
    # A pull stops at the end of a consume-queue segment (100 units here), as RocketMQ's does.
    assert [r.queue_offset for r in decode_records(got.body())] == list(range(95, 100))
    assert got.next_begin_offset == 100
    got.release()
    nxt = store2.get_message("g", "T", 1, 100, 32)
    assert [r.queue_offset for r in decode_records(nxt.body())] == [100]
    nxt.release()


def test_sync_flush_acknowledges_durable_writes(open_store: StoreFactory) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=200)
    res = store.put_message(mk())
    assert res.status is PutMessageStatus.PUT_OK and res.append is not None
    assert store.commit_log.flushed_where >= res.append.end_offset
    assert store.group_commit is not None
    store.group_commit.shutdown()  # nobody flushes any more: the next put must time out
    late = store.put_message(mk())
    assert late.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and late.ok


def test_transient_store_pool_mode(open_store: StoreFactory) -> None:
    store = open_store(transient_store_pool_enable=True, commit_interval_commit_log=10)
    for i in range(50):
        store.put_message(mk(body=bytes([i]) * 10))
    assert store.wait_dispatched()
    got = store.get_message("g", "T", 0, 0, 64)
    assert got.message_count == 32
    got.release()


def test_write_buffers_after_a_restart(open_store: StoreFactory, tmp_path: Path) -> None:
    # Reopened segments must not each hold a write buffer: the full ones would never free it, and
    # with transientStorePoolSize of them every send would be refused as SYSTEM_BUSY for good.
    kw = {"transient_store_pool_enable": True, "commit_interval_commit_log": 10,
          "maped_file_size_commit_log": 4096, "transient_store_pool_size": 2}  # fmt: skip
    store = open_store(tmp_path / "wb", **kw)
    for i in range(60):  # ~8 segments of 4 KiB
        assert store.put_message(mk(body=bytes([i]) * 400)).ok
    store.shutdown()
    again = open_store(tmp_path / "wb", **kw)
    files = again.commit_log.queue.files
    assert len(files) >= 5
    assert [mf.holds_write_buffer for mf in files[:-1]] == [False] * (len(files) - 1)
    assert not again.transient_store_pool_deficient()
    assert again.put_message(mk(body=b"after")).ok
    assert again.wait_dispatched()
    assert again.get_max_offset_in_queue("T", 0) == 61


def test_delay_and_transactions(open_store: StoreFactory) -> None:
    store = open_store()
    delayed = store.put_message(mk(tags="x", DELAY="3"))
    prepared = mk(keys="tx", TRAN_MSG="true")
    prepared.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    store.put_message(prepared)
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("T", 0) == 0  # neither landed in T's queue
    got = store.get_message("g", SCHEDULE_TOPIC, 2, 0, 32)  # level 3 -> queue 2
    rec = decode_records(got.body())[0]
    assert rec.get_property("REAL_TOPIC") == "T" and rec.get_property("REAL_QID") == "0"
    assert delayed.append is not None
    cq = store.cq_store.get(SCHEDULE_TOPIC, 2)
    assert cq is not None
    unit = cq.get_unit(0)
    assert unit is not None and unit[2] == rec.store_timestamp + 10_000  # tagsCode = delivery time
    got.release()
    assert len(store.query_message("T", "tx", 10, 0, 2**62).messages) == 1  # prepared is indexed
    served = mk(body=b"served", DELAY="3", REAL_TOPIC="T", REAL_QID="0")
    served.delay_served = True  # a parked message's delivered copy: DELAY kept, not parked again
    assert store.put_message(served).ok and store.wait_dispatched()
    assert store.get_max_offset_in_queue("T", 0) == 1
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1
    got = store.get_message("g", "T", 0, 0, 32)
    (copy,) = decode_records(got.body())
    got.release()
    assert (copy.topic, copy.body, copy.get_property("DELAY")) == ("T", b"served", "3")


def test_size_and_topic_limits(open_store: StoreFactory) -> None:
    store = open_store(max_message_size=2048)
    assert store.put_message(mk(body=bytes(4096))).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(mk(topic="t" * 200)).status is PutMessageStatus.MESSAGE_ILLEGAL
    big = mk()
    big.properties_string = "k\x01" + "v" * 33000
    assert store.put_message(big).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.max_phy_offset == 0


def test_disk_used_ratio_is_what_df_shows(tmp_path: Path) -> None:
    out = subprocess.run(["df", "-P", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    pcent = int(out.splitlines()[-1].split()[4].rstrip("%"))  # df rounds up
    # A point of slack either way: other processes may write between the two readings.
    assert pcent - 2 <= disk_used_ratio(tmp_path) * 100 <= pcent + 1


def _aged_segments(store: MessageStore, count: int) -> list[MappedFile]:
    """Fill the store until it has `count` segments; all but the last two look 3 days old."""
    while len(list(store.commit_log.queue)) < count:
        store.put_message(mk(body=bytes(500)))
    assert store.wait_dispatched()
    segments = list(store.commit_log.queue)
    old = time.time() - 3 * 86_400
    for mf in segments[:-2]:
        os.utime(mf.path, (old, old))
    return segments


def _not_now() -> str:
    """A `deleteWhen` hour that is not this one, so only the disk levels can trigger deletion."""
    return str((time.localtime().tm_hour + 12) % 24)


def _disk_at(store: MessageStore, ratio: float) -> None:
    """The disk probe reports `ratio` used: the host's real disk stays out of the levels' tests."""
    assert store.services is not None
    store.services.cleaner.disk_ratio = lambda _path: ratio


def test_disk_levels_outside_delete_hours(open_store: StoreFactory) -> None:
    store = open_store(delete_when=_not_now())
    segments = _aged_segments(store, 5)
    _disk_at(store, 0.70)  # below every level: nothing happens outside deleteWhen
    assert store.run_clean_pass() == 0 and not store.flags.disk_full
    _disk_at(store, 0.80)  # above diskMaxUsedSpaceRatio: expired segments go now, the rest stay
    assert store.run_clean_pass() == len(segments) - 2
    assert store.min_phy_offset == segments[-2].file_from_offset
    assert store.put_message(mk()).status is PutMessageStatus.PUT_OK
    _disk_at(store, 0.87)  # above diskSpaceCleanForciblyRatio: all but the last, expired or not
    assert store.run_clean_pass() == 1
    assert store.min_phy_offset == segments[-1].file_from_offset
    assert store.put_message(mk()).status is PutMessageStatus.PUT_OK and not store.flags.disk_full


def test_clean_forcibly_can_be_disabled(open_store: StoreFactory) -> None:
    store = open_store(clean_file_forcibly_enable=False, delete_when=_not_now())
    segments = _aged_segments(store, 4)
    _disk_at(store, 0.89)
    assert store.run_clean_pass() == len(segments) - 2  # only the expired ones
    assert len(list(store.commit_log.queue)) == 2


def test_disk_full_refuses_writes_keeps_reads_then_recovers(open_store: StoreFactory) -> None:
    store = open_store(clean_file_forcibly_enable=False)
    assert store.put_message(mk()).status is PutMessageStatus.PUT_OK
    _disk_at(store, 0.91)  # above diskSpaceWarningLevelRatio
    store.run_clean_pass()
    assert store.flags.disk_full
    refused = store.put_message(mk())
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "diskSpaceWarningLevelRatio" in refused.remark
    assert store.wait_dispatched()
    found = store.get_message("g", "T", 0, 0, 1)
    assert found.status is GetMessageStatus.FOUND
    found.release()
    _disk_at(store, 0.50)
    store.run_clean_pass()
    assert not store.flags.disk_full and store.put_message(mk()).status is PutMessageStatus.PUT_OK


def test_disk_guard_off_at_100(open_store: StoreFactory) -> None:
    store = open_store(disk_space_warning_level_ratio=100, disk_space_clean_forcibly_ratio=100)
    segments = _aged_segments(store, 3)
    _disk_at(store, 1.0)  # completely full: only expired segments go, puts are still tried
    assert store.run_clean_pass() == len(segments) - 2
    assert not store.flags.disk_full and store.put_message(mk()).status is PutMessageStatus.PUT_OK


def test_expired_segments_deleted(open_store: StoreFactory) -> None:
    store = open_store(file_reserved_time=1)
    for _ in range(400):
        store.put_message(mk(body=bytes(500)))
    assert store.wait_dispatched()
    segments = list(store.commit_log.queue)
    assert len(segments) > 2
    old = 1_000_000_000
    for mf in segments[:-1]:
        os.utime(mf.path, (old, old))
    deleted = store.run_clean_pass(force=True)
    assert deleted == len(segments) - 1
    assert store.min_phy_offset == segments[-1].file_from_offset
    gone = store.get_message("g", "T", 0, 0, 32)
    assert gone.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.MESSAGE_WAS_REMOVING)
    last = store.get_max_offset_in_queue("T", 0) - 1
    tail = store.get_message("g", "T", 0, last, 1)
    assert tail.status is GetMessageStatus.FOUND
    tail.release()


def test_opens_real_rocketmq_store(open_store: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "real"
    shutil.copytree(REAL_STORE, root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    root.chmod(0o755)
    store = open_store(root, maped_file_size_commit_log=8192)
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("abc", 0) == 47
    got = store.get_message("g", "abc", 0, 0, 64, max_transfer_count=64)
    records = decode_records(got.body())
    assert len(records) == 47 and records[5].body == b"Once, there was a chance for me!"
    got.release()
    key = records[7].keys
    assert key is not None
    found = store.query_message("abc", key, 10, 0, 2**62)
    assert any(decode_record(v).physical_offset == records[7].physical_offset for v in found.messages)
    res = store.put_message(mk(topic="abc", body=bytes(100)))  # does not fit in the 108 bytes left
    assert res.append is not None and (res.append.wrote_offset, res.append.logics_offset) == (8192, 47)


def test_tags_codes_are_java_ints_widened_to_long(open_store: StoreFactory) -> None:
    """A consume-queue unit's tags code is `(long) tags.hashCode()`: negative hashes (Integer.MIN_VALUE
    included, non-ASCII and astral tags too) are sign-extended in its 8 bytes, in single puts and
    batches alike, as the Java broker writes them."""
    store = open_store()
    tags = ["polygenelubricants", "TagA", "zzzzzzzzzz", "\u00e9-tag\u00e9", "\U0001f600x" * 3]
    for t in tags:
        store.put_message(mk(tags=t))
    put_batch(store, [mk(tags=t) for t in tags])
    assert store.wait_dispatched()
    cq = sorted((store.config.consume_queue_dir / "T" / "0").iterdir())[0].read_bytes()
    codes = [int.from_bytes(cq[n * 20 + 12 : n * 20 + 20], "big", signed=True) for n in range(10)]
    assert codes == [-(2**31), 2598919, -1580979136, -1874231565, 1569276821] * 2
    assert codes == [tags_code(t) for t in tags] * 2
