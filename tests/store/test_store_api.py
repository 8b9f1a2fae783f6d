"""The store's façade (`StoreAPI`) over real files: queue views, durability, listeners, live
settings, the replication methods HA uses, and the disk figures."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.formats.consume_queue_unit import is_padding
from rocketlite.protocol.formats.record import decode_record, decode_records
from rocketlite.protocol.message import tags_code
from rocketlite.store.api import StoreAPI
from rocketlite.store.config import LIVE_STORE_FIELDS
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import GetMessageStatus, PutMessageStatus
from tests.support.store import StoreFactory, small_config
from tests.support.store import message as mk

SEGMENT = 64 * 1024  # the commit-log segment of `small_config`


def test_message_store_implements_every_member_of_the_api(open_store: StoreFactory) -> None:
    store: StoreAPI = open_store()  # mypy checks the signatures; this, that nothing is left out
    members = {name for name in vars(StoreAPI) if not name.startswith("_")}
    assert len(members) > 30 and sorted(m for m in members if not hasattr(store, m)) == []


@contextlib.contextmanager
def slave_store(root: Path) -> Iterator[MessageStore]:
    """A slave's store: it takes no appends, its log grows by replication only."""
    store = MessageStore(small_config(root), master=False)
    store.start()
    try:
        yield store
    finally:
        store.shutdown()


def test_queue_view_bounds_units_and_records(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.queue("T", 0) is None  # no such queue yet
    appends = []
    for i in range(5):
        res = store.put_message(mk(body=f"m{i}".encode(), tags="A"))
        assert res.ok and res.append is not None
        appends.append(res.append)
    assert store.wait_dispatched()
    view = store.queue("T", 0)
    assert view is not None and (view.topic, view.queue_id) == ("T", 0)
    assert (view.min_offset, view.max_offset) == (0, 5)
    unit = view.unit(3)
    assert unit == (appends[3].wrote_offset, appends[3].wrote_bytes, tags_code("A"))
    record = view.read(3)
    assert record is not None and decode_record(record).body == b"m3"
    record.release()
    assert view.unit(5) is None and view.read(5) is None  # at the end
    assert view.unit(-1) is None and view.read(-1) is None
    assert store.put_message(mk(body=b"m5")).ok and store.wait_dispatched()
    assert view.max_offset == 6  # a live view: the bounds are the queue's now


def test_queue_view_padding_has_a_unit_but_no_record(open_store: StoreFactory) -> None:
    """A queue that starts above offset 0 (its next offset recovered higher, as after a topic's
    files were lost) is padded below: the view shows the padding units, reads no record there."""
    store = open_store()
    store.commit_log.topic_queue_table["P-0"] = 2
    assert store.put_message(mk(topic="P", body=b"first")).ok and store.wait_dispatched()
    view = store.queue("P", 0)
    assert view is not None and view.max_offset == 3
    for off in range(view.min_offset, 2):
        unit = view.unit(off)
        assert unit is not None and is_padding(unit) and view.read(off) is None
    record = view.read(2)
    assert record is not None and decode_record(record).body == b"first"
    record.release()


def test_flush_to_makes_the_log_durable_up_to_an_offset(open_store: StoreFactory) -> None:
    store = open_store(flush_interval_commit_log=3_600_000, flush_commit_log_thorough_interval=3_600_000)
    start = store.durable_end
    for _ in range(20):
        assert store.put_message(mk(body=bytes(1000))).ok
    end = store.written_end
    assert end == store.max_phy_offset == store.committed_end  # no write buffer
    assert store.durable_end == start < end  # the flush thread has not run (an hour's interval)
    assert store.flush_to(end)
    assert store.durable_end >= end


def test_the_write_buffer_is_committed_before_it_is_durable(open_store: StoreFactory) -> None:
    store = open_store(
        transient_store_pool_enable=True,
        commit_interval_commit_log=3_600_000,
        commit_commit_log_thorough_interval=3_600_000,
        flush_interval_commit_log=3_600_000,
        flush_commit_log_thorough_interval=3_600_000,
        sync_flush_timeout=200,
    )
    assert store.put_message(mk(body=bytes(500))).ok
    end = store.written_end
    assert store.committed_end < end and store.durable_end < end  # in the buffer only
    assert not store.flush_to(end)  # the commit service owns the file writes: it has not run
    store.apply_live_settings(  # every round commits and flushes whatever is pending
        {
            "commit_interval_commit_log": 10,
            "commit_commit_log_thorough_interval": 0,
            "flush_interval_commit_log": 10,
            "flush_commit_log_thorough_interval": 0,
            "sync_flush_timeout": 30_000,
        }
    )
    assert store.flush_to(end)  # now the commit service commits, the flusher flushes
    assert store.committed_end >= end and store.durable_end >= end


def test_arrival_listeners_come_and_go(open_store: StoreFactory) -> None:
    store = open_store()
    heard: list[tuple[str, int, int]] = []

    def on_arrival(topic: str, queue_id: int, max_offset: int, tags: int, ts: int) -> None:
        del tags, ts
        heard.append((topic, queue_id, max_offset))

    store.add_arrival_listener(on_arrival)
    assert store.put_message(mk(queue_id=1)).ok and store.wait_dispatched()
    assert heard == [("T", 1, 1)]
    store.remove_arrival_listener(on_arrival)
    store.remove_arrival_listener(on_arrival)  # not registered any more: nothing happens
    assert store.put_message(mk(queue_id=1)).ok and store.wait_dispatched()
    assert heard == [("T", 1, 1)]


def test_live_settings_give_the_store_a_new_config_and_retune_its_services(open_store: StoreFactory) -> None:
    store = open_store()
    before = store.config
    services = store.services
    assert services is not None and services.flusher is not None
    new = store.apply_live_settings(
        {
            "flush_interval_commit_log": 77,
            "flush_interval_consume_queue": 88,
            "file_reserved_time": 5,
            "disk_max_used_space_ratio": 60,
            "max_message_size": 1024,
            "max_transfer_count_on_message_in_memory": 2,
        }
    )
    assert store.config is new and new is not before
    assert before.flush_interval_commit_log == 50 and before.max_message_size == 4 * 1024 * 1024  # frozen
    assert new.flush_interval_commit_log == 77
    assert services.flusher.interval_s == pytest.approx(0.077)
    assert services.cq_flusher.interval_s == pytest.approx(0.088)
    assert services.cleaner.file_reserved_ms == 5 * 3_600_000
    assert services.cleaner.thresholds.delete_expired == pytest.approx(0.60)
    too_big = store.put_message(mk(body=bytes(2000)))
    assert too_big.status is PutMessageStatus.MESSAGE_ILLEGAL
    for _ in range(3):
        assert store.put_message(mk(body=b"small")).ok
    assert store.wait_dispatched()
    got = store.get_message("g", "T", 0, 0, 32)  # read per use: the new transfer limit
    assert got.status is GetMessageStatus.FOUND and len(decode_records(got.body())) == 2
    got.release()


def test_live_settings_refuse_structural_fields_and_bad_values(open_store: StoreFactory) -> None:
    store = open_store()
    before = store.config
    assert "maped_file_size_commit_log" not in LIVE_STORE_FIELDS
    with pytest.raises(ConfigError, match="maped_file_size_commit_log"):
        store.apply_live_settings({"maped_file_size_commit_log": 4096, "sync_flush_timeout": 7})
    with pytest.raises(ConfigError, match="flushIntervalCommitLog"):
        store.apply_live_settings({"flush_interval_commit_log": 0})
    assert store.config is before  # nothing changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        store.config.sync_flush_timeout = 1  # type: ignore[misc]


def test_a_slave_copies_the_log_verbatim_and_dispatches_it(open_store: StoreFactory, tmp_path: Path) -> None:
    master = open_store(tmp_path / "master")
    for i in range(200):  # ~5 segments of 64 KiB
        assert master.put_message(mk(queue_id=i % 2, body=bytes(1500), tags="A")).ok
    with slave_store(tmp_path / "slave") as slave:
        assert slave.log_is_empty and slave.log_segment_size == master.log_segment_size == SEGMENT
        slave.prestage_first_segment()
        assert (tmp_path / "slave" / "commitlog.alloc" / "00000000000000000000").is_file()
        end = 0
        while end < master.max_phy_offset:
            view = master.read_log_from(end)  # the rest of the segment holding `end`
            assert view is not None and len(view) > 0
            part = bytes(view[:10_000])
            view.release()
            end = slave.append_replicated(end, part, 0)
        assert end == slave.written_end == master.max_phy_offset and not slave.log_is_empty
        with pytest.raises(ValueError, match=f"ends at {end}"):
            slave.append_replicated(end - 1, b"x", 0)
        first, copy = master.read_log(SEGMENT, 64), slave.read_log(SEGMENT, 64)
        assert first is not None and copy is not None and bytes(first) == bytes(copy)
        first.release()
        copy.release()
        assert slave.wait_dispatched()  # append_replicated woke the dispatcher
        assert slave.get_max_offset_in_queue("T", 1) == master.get_max_offset_in_queue("T", 1) == 100
        got = slave.get_message("g", "T", 1, 99, 1)
        assert got.status is GetMessageStatus.FOUND
        got.release()
        assert slave.put_message(mk()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_a_new_slave_may_start_at_the_masters_oldest_segment(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """The master's oldest retained segment is not the first: an empty slave's log starts there,
    and the first segment it staged for offset 0 is dropped."""
    master = open_store(tmp_path / "master")
    for _ in range(120):
        assert master.put_message(mk(body=bytes(1500))).ok
    with slave_store(tmp_path / "slave") as slave:
        slave.prestage_first_segment()
        staged = tmp_path / "slave" / "commitlog.alloc" / "00000000000000000000"
        assert staged.is_file()
        with pytest.raises(ValueError, match="segment boundary"):
            slave.append_replicated(100, b"x", 0)
        view = master.read_log_from(2 * SEGMENT)
        assert view is not None
        end = slave.append_replicated(2 * SEGMENT, view, 0)
        assert end == 2 * SEGMENT + len(view) and slave.min_phy_offset == 2 * SEGMENT
        view.release()
        assert not staged.exists()


def test_disk_figures(open_store: StoreFactory) -> None:
    store = open_store()
    assert 0 < store.disk_used_ratio() <= 1
    assert store.disk_full is False
