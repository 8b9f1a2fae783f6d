"""Cutting the commit log at an epoch start (controller mode), on real files: what lies past the
cut is gone after restart — records, consume-queue units and index keys — and what lies before
it is untouched, also when the cut falls in the middle of a segment and later segments exist;
and what was cut is reported, message by message counted, before it goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.protocol.errors import StoreError
from rocketlite.store.message_store import MessageStore
from rocketlite.store.truncation import cut_commit_log, tail_records
from tests.support.store import message, small_config

BODY = b"x" * 700  # ~ 100 records per 64 KiB segment: 250 records span three segments


def test_cut_in_a_middle_segment_drops_records_units_and_keys_past_it(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    offsets = []
    with MessageStore(config) as store:
        for i in range(250):
            result = store.put_message(message(body=BODY, keys=f"k{i}"))
            offsets.append(result.append.wrote_offset if result.append else -1)
        assert store.wait_dispatched()
        end = store.max_phy_offset
    size = config.maped_file_size_commit_log
    segments = sorted(int(p.name) for p in config.commit_log_dir.iterdir() if p.name.isdigit())
    assert len(segments) >= 3 and segments[2] < end  # (a next one may be staged already)
    cut = offsets[150]  # a record boundary inside the second segment
    assert segments[1] < cut < segments[2]

    store = MessageStore(config)
    cut_report = store.truncate_log_before_start(cut)
    assert cut_report.cut_bytes == segments[2] - cut + size * (len(segments) - 2)
    # What was cut is reported: the 100 records past it, their queue offsets and bytes.
    assert (cut_report.messages, cut_report.queues) == (100, {("T", 0): (150, 249)})
    assert (cut_report.offset, cut_report.end) == (cut, end)
    assert "100 messages" in cut_report.describe() and "T/0 queue offsets 150..249" in cut_report.describe()
    store.start()
    try:
        assert store.max_phy_offset == cut
        assert store.get_max_offset_in_queue("T", 0) == 150
        assert store.look_message_by_offset(offsets[149]) is not None
        assert store.look_message_by_offset(cut) is None
        found = store.query_message("T", "k149", 10, 0, 1 << 62)
        assert len(found.messages) == 1
        assert not store.query_message("T", "k150", 10, 0, 1 << 62).messages
        # A new record goes where the cut was: the log continues from there.
        again = store.put_message(message(body=b"after"))
        assert again.append is not None and again.append.wrote_offset == cut
        with pytest.raises(StoreError, match="running"):
            store.truncate_log_before_start(0)
    finally:
        store.shutdown()


def test_nothing_past_the_offset_is_nothing_cut(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    assert cut_commit_log(config.commit_log_dir, 0) == 0  # no log at all
    with MessageStore(config) as store:
        store.put_message(message())
        end = store.max_phy_offset
    size = config.maped_file_size_commit_log
    assert cut_commit_log(config.commit_log_dir, size) == 0
    assert cut_commit_log(config.commit_log_dir, end) == size - end  # zeroes past the end
    assert tail_records(config.commit_log_dir, end).messages == 0
    assert tail_records(config.commit_log_dir, 0).messages == 1
