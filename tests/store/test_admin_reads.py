"""The store's answers to the operations requests: consume-queue units (QUERY_CONSUME_QUEUE), the
topics with queues (CLEAN_UNUSED_TOPIC) and the cleaning of queues whose records are all gone
(CLEAN_EXPIRED_CONSUMEQUEUE), on real files."""

from __future__ import annotations

import os

from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.message import tags_code
from tests.support.store import StoreFactory
from tests.support.store import message as mk


def test_consume_queue_units_point_at_the_records(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(5):
        store.put_message(mk("Units", 1, f"m{i}".encode(), tags=f"tag{i}"))
    assert store.wait_dispatched()
    queue = store.queue("Units", 1)
    assert queue is not None
    units = queue.units(1, 3)
    assert units is not None and len(units) == 3
    for i, (phy, size, tags) in enumerate(units, start=1):
        view = store.select_one_message_by_offset(phy, size)
        assert view is not None
        record = decode_record(view)
        assert record.body == f"m{i}".encode() and record.queue_offset == i
        assert tags == tags_code(f"tag{i}")
    assert len(queue.units(3, 100) or []) == 2  # up to the end
    assert queue.units(5, 1) is None  # past the end
    assert store.queue("Units", 0) is None  # no such queue
    assert "Units" in store.consume_queue_topics()


def test_clean_expired_consume_queues(open_store: StoreFactory) -> None:
    store = open_store(file_reserved_time=1)
    store.put_message(mk("Gone", 0, bytes(500)))
    for _ in range(400):
        store.put_message(mk("Kept", 0, bytes(500)))
    store.put_message(mk("System", 0, bytes(500)))
    assert store.wait_dispatched()
    segments = list(store.commit_log.queue)
    assert len(segments) > 2
    for mf in segments[:-1]:
        os.utime(mf.path, (1_000_000_000, 1_000_000_000))
    store.run_clean_pass(force=True)
    assert store.min_phy_offset == segments[-1].file_from_offset
    # "Gone" held one record, now deleted; "Kept" still has records in the last segment, and
    # "System" is kept by the predicate whatever it holds.
    assert store.clean_expired_consume_queues(lambda topic: topic == "System") == 1
    assert sorted(store.consume_queue_topics()) == ["Kept", "System"]
    assert store.get_max_offset_in_queue("Gone", 0) == 0
    assert not (store.config.store_path_root_dir / "consumequeue" / "Gone").exists()
    assert store.clean_expired_consume_queues(lambda topic: False) == 0
