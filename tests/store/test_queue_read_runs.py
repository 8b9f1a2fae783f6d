"""A pull's records as runs: `ConsumeQueue.read` cuts one slice per run of back-to-back records,
and must give the bytes, queue offsets and statuses the per-record read gave (kept below as the
oracle), across segment ends, removed segments, gaps and records past a segment's written end,
over a real commit log; then the same end to end through `MessageStore.get_message`."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.clock import SystemClock
from rocketlite.protocol.formats.consume_queue_unit import UNIT_SIZE, Unit
from rocketlite.protocol.formats.record import decode_records
from rocketlite.store.codec.dispatch_ref import select_units as reference_select
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import StoreConfig
from rocketlite.store.consume_queue import MAX_FILTER_BYTES, ConsumeQueue
from rocketlite.store.results import GetMessageStatus, QueueRead
from tests.support.store import StoreFactory, put_batch
from tests.support.store import message as mk

SEG = 4096  # bytes per commit-log segment (the smallest the store accepts)


@contextlib.contextmanager
def log_of(data: bytes, gone: int, written: int) -> Iterator[CommitLog]:
    """A real commit log of `SEG`-byte segments holding `data[:written]` verbatim (`append_raw`,
    as a slave writes its master's bytes), its first `gone` segments deleted: the bytes of the
    units need not be records, since a pull only slices them."""
    with tempfile.TemporaryDirectory() as tmp:
        log = CommitLog(
            StoreConfig(store_path_root_dir=Path(tmp), maped_file_size_commit_log=SEG), SystemClock()
        )
        log.load()
        try:
            if written:
                log.append_raw(0, data[:written])
            for _ in range(min(gone, len(log.queue) - 1)):
                log.queue.delete_first()
            yield log
        finally:
            log.close()


def old_read(
    cq: ConsumeQueue,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    log: CommitLog,
) -> tuple[list[bytes], list[int], int, int, bool]:
    """`ConsumeQueue.read` as it was before runs: a slice and a Python step per record."""
    units = cq.get_units(offset, max(MAX_FILTER_BYTES, max_count * UNIT_SIZE) // UNIT_SIZE)
    assert units is not None
    messages: list[bytes] = []
    offsets: list[int] = []
    hit_removed = False
    skip_below, start, total = -1, 0, 0
    seg: memoryview | None = None
    seg_start = seg_end = 0
    while True:
        picked, _, scanned = reference_select(
            units, start, max_count, max_bytes, tag_filter, len(messages), total, skip_below
        )
        for phy, size, idx in zip(*[iter(picked)] * 3, strict=True):
            if phy < seg_start or phy + size > seg_end:
                seg = log.get_data(phy) if phy >= 0 else None
                seg_start = phy
                seg_end = phy + len(seg) if seg is not None else phy
            if seg is None or size < 0 or phy + size > seg_end:
                hit_removed = hit_removed or not messages
                skip_below = log.roll_next_file(phy)
                start = idx + 1
                break
            messages.append(bytes(seg[phy - seg_start : phy - seg_start + size]))
            offsets.append(offset + idx)
            total += size
        else:
            break
    units.release()
    return messages, offsets, total, scanned, hit_removed


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[Unit], bytes, int, int]:
    """Units of runs of back-to-back records, with gaps, records that straddle a segment end,
    some in deleted segments, some past the written end; the log's bytes, how many segments are
    deleted and where the written data ends."""
    phy = draw(st.integers(0, 3 * SEG))
    units: list[Unit] = []
    for _ in range(draw(st.integers(1, 60))):
        size = draw(st.integers(1, 1200))
        units.append((phy, size, draw(st.integers(0, 3))))
        phy += size + draw(st.sampled_from([0, 0, 0, 0, 1, 50, SEG]))
    end = units[-1][0] + units[-1][1]
    data = bytes(i * 7 % 251 for i in range(end))
    return units, data, draw(st.integers(0, 3)), end - draw(st.sampled_from([0, 0, 0, 1, 400]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    queues(),
    st.integers(0, 70),
    st.integers(1, 80),
    st.integers(1, 20_000),
    st.none() | st.frozensets(st.integers(0, 3)),
)
def test_read_in_runs_is_the_per_record_read(
    queue: tuple[list[Unit], bytes, int, int],
    start: int,
    max_count: int,
    max_bytes: int,
    codes: frozenset[int] | None,
) -> None:
    units, data, gone, written = queue
    with log_of(data, gone, max(written, 0)) as log, tempfile.TemporaryDirectory() as tmp:
        cq = ConsumeQueue("T", 0, Path(tmp), 64 * UNIT_SIZE)
        cq.load()
        cq.recover()
        assert cq.put_units(units, 0)
        offset = min(start, len(units) - 1)
        tag_filter = codes.__contains__ if codes is not None else None
        found = cq.read(offset, max_count, max_bytes, tag_filter, log)
        assert found is not None
        want = old_read(cq, offset, max_count, max_bytes, tag_filter, log)
        try:
            got = (
                [bytes(m) for m in found.messages], found.queue_offsets, found.total_size,
                found.scanned, found.hit_removed,
            )  # fmt: skip
            assert got == want
            assert b"".join(found.parts) == b"".join(want[0])
            assert found.count == len(want[0]) and len(found.parts) <= len(want[0])
            last = found.last_message()
            assert (bytes(last) if last is not None else None) == (want[0][-1] if want[0] else None)
        finally:
            found.release()
            cq.close()


def test_batches_of_interleaved_queues_over_segment_ends(open_store: StoreFactory) -> None:
    """Queue 0 written in batches between queue 1's, over several 64 KiB segments: each pull's
    parts are one per batch (more where a segment ends), and carry exactly the records."""
    store = open_store()
    body = bytes(range(256)) * 3
    sent: list[str] = []
    for b in range(40):
        names = [f"{b}.{i}" for i in range(1 + b % 5)]
        assert put_batch(store, [mk(queue_id=0, body=body, n=n) for n in names]).ok
        sent += names
        assert store.put_message(mk(queue_id=1, body=b"x")).ok
    assert store.wait_dispatched()
    assert len(store.commit_log.queue) >= 2
    offset, seen, spanned = 0, [], False
    while offset < store.get_max_offset_in_queue("T", 0):
        res = store.get_message(
            "g", "T", 0, offset, 1024, max_transfer_count=1024, max_transfer_bytes=1 << 30
        )
        assert res.status is GetMessageStatus.FOUND
        found = res.found
        assert isinstance(found, QueueRead)
        phys = found.picked[0::3]
        one_by_one = [bytes(store.commit_log.read_record(p) or b"") for p in phys]
        assert [bytes(m) for m in res.messages] == one_by_one
        assert res.body() == b"".join(one_by_one)
        assert res.queue_offsets == list(range(offset, offset + res.message_count))
        # one part per run of back-to-back records, none shared across a segment end
        breaks = sum(phys[k] != phys[k - 1] + found.picked[3 * k - 2] for k in range(1, len(phys)))
        segments = {p // store.config.maped_file_size_commit_log for p in phys}
        assert len(found.parts) == breaks + 1
        spanned = spanned or len(segments) > 1
        seen += [r.get_property("n") for r in decode_records(res.body())]
        offset = res.next_begin_offset
        res.release()
    assert spanned
    assert seen == sent
