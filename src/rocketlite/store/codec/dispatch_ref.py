"""The store's read-side hot paths beside the record scan, in Python: the reference implementations.

`store.codec.speedups` picks these when `ROCKETLITE_NATIVE=0` (or when the compiled
`_native/_dispatch` is missing); the compiled twins give the same results and
`tests/store/test_native_dispatch.py` pins them together.

* `check_records`: recovery's walk over a commit-log segment: records from a position, each one
  checked by `scan_ref.scan_record` (magic, sizes, lengths, CRC) and its PHYSICALOFFSET
  against where it lies; only a count comes back, no `DispatchRequest` per record;
* `select_units`: the selection half of a pull (`store/consume_queue.py` `ConsumeQueue.read`):
  which consume-queue units of a run are taken, by padding, tag code, count and bytes, and how
  they group into runs of back-to-back records (one commit-log slice each, not one per record);
* `pack_units`: (commitLogOffset, size, tagsCode) units to their 20-byte form, back to back;
* `queue_runs`: the consume-queue half of dispatch (`store/dispatch.py`): a batch of dispatch
  requests grouped by queue into runs of packed units;
* `dispatch_batch`: the scan, `queue_runs` and `index_entries` in one call; the compiled twin
  goes from commit-log bytes to unit bytes and key hashes without the GIL or a request object;
* `index_entries`: the index entries of dispatched records (`store/index/service.py`): each
  record's UNIQ_KEY and KEYS tokens as `indexKeyHashMethod("topic#key")` (Java `String.hashCode`)
  with its offset and store time;
* `index_put`: those entries written into an index file's mapping (`IndexFile.put_run`), as
  repeated `IndexFile.put_hash` calls write them.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from itertools import starmap
from mmap import mmap
from typing import Final, TypeAlias

from rocketlite.protocol.formats.consume_queue_unit import CQ_UNIT, PADDING_SIZE, Unit
from rocketlite.protocol.formats.index_layout import (
    ENTRY,
    ENTRY_SIZE,
    INT_MAX,
    INVALID_INDEX,
    SLOT,
    SLOT_SIZE,
)
from rocketlite.protocol.formats.record import DispatchRequest, ScanKind, ScanResult, enters_consume_queue
from rocketlite.protocol.message import KEY_SEPARATOR, MessageSysFlag, index_key_hash
from rocketlite.store.codec.scan_ref import scan_messages, scan_record

__all__ = [
    "check_records",
    "dispatch_batch",
    "dispatch_batch_over",
    "index_entries",
    "index_put",
    "pack_units",
    "queue_runs",
    "select_units",
    "unit_writable",
]

_LONG_MAX: Final = (1 << 63) - 1


def check_records(
    buf: memoryview, pos: int, base_offset: int, *, verify_crc: bool
) -> tuple[int, int, ScanResult]:
    """Walk the records of `buf` (a segment starting at commit-log offset `base_offset`) from `pos`.

    Returns (position reached, messages counted, the `ScanResult` that stopped the walk there):
    the first record that is not a message (BLANK, END, CORRUPT, as `scan_record` says), or a
    MESSAGE whose PHYSICALOFFSET is not `base_offset + position` (not counted).
    """
    count = 0
    while True:
        res = scan_record(buf, pos, verify_crc=verify_crc)
        if res.kind is not ScanKind.MESSAGE:
            return pos, count, res
        assert res.request is not None
        if res.request.commit_log_offset != base_offset + pos:
            return pos, count, res
        count += 1
        pos += res.size


def select_units(
    units: memoryview,
    start: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    count: int,
    total: int,
    skip_below: int,
) -> tuple[array[int], array[int], int]:
    """The units a pull takes from `units` (whole 20-byte units), from unit `start` on.

    `count` records of `total` bytes are already taken. A unit is looked at while nothing is
    taken yet, or fewer than `max_count` are and its size fits in `max_bytes`; it is skipped if
    it is padding, points below `skip_below`, or its tag code fails `tag_filter`; otherwise it is
    taken (counting as found).

    Returns (picked, runs, the index after the last unit looked at). `picked` holds three values
    per taken unit: commitLogOffset, size, index of the unit in `units`. `runs` holds three per
    run of taken units whose records lie back to back in the log (each of size > 0 and starting
    where the one before ends): the first one's commitLogOffset, the run's bytes, and the number
    of taken units up to its end. A pull of a queue written in batches is a few runs, so the
    reader cuts one slice per run instead of one per record (arrays, not tuples: no Python
    object per record either).
    """
    picked: array[int] = array("q")
    runs: array[int] = array("q")
    i = start
    prev_phy = prev_size = 0
    for phy, size, tag in CQ_UNIT.iter_unpack(units[start * CQ_UNIT.size :]):
        if count and (count >= max_count or total + size > max_bytes):
            break
        i += 1
        if size == PADDING_SIZE or phy < skip_below:
            continue
        if tag_filter is not None and not tag_filter(tag):
            continue
        picked.extend((phy, size, i - 1))
        if runs and size > 0 and prev_size > 0 and phy == prev_phy + prev_size:
            runs[-2] += size
            runs[-1] += 1
        else:
            runs.extend((phy, size, len(picked) // 3))
        prev_phy, prev_size = phy, size
        count += 1
        total += size
    return picked, runs, i


def pack_units(units: Sequence[Unit]) -> bytes:
    """The units' bytes, back to back (values within Java's ranges)."""
    return b"".join(starmap(CQ_UNIT.pack, units))


def index_entries(
    reqs: Sequence[DispatchRequest], end_offset: int
) -> tuple[array[int], array[int], array[int]]:
    """(key hashes, commit-log offsets, store timestamps) of the index entries of `reqs`, in order.

    A record is indexed under its UNIQ_KEY (when present, even empty) and under every non-empty
    space-separated token of its KEYS, unless it is a ROLLBACK record or lies below `end_offset`
    (the index's endPhyOffset, raised to each indexed record's offset as the batch goes on).
    """
    hashes: array[int] = array("q")
    offsets: array[int] = array("q")
    stamps: array[int] = array("q")
    rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    for req in reqs:
        offset = req.commit_log_offset
        if offset < end_offset or req.sys_flag & rollback == rollback:
            continue
        keys = [] if req.uniq_key is None else [req.uniq_key]
        keys += [k for k in req.keys.split(KEY_SEPARATOR) if k]
        for key in keys:
            hashes.append(index_key_hash(f"{req.topic}#{key}"))
            offsets.append(offset)
            stamps.append(req.store_timestamp)
        if keys:
            end_offset = offset
    return hashes, offsets, stamps


# (first queue offset, packed units; b"" when a unit of the run cannot be stored)
UnitRun = tuple[int, bytes]
# (topic, queue id, its runs in order, units dispatched, and of its last unit: queue offset, tag
# code, store timestamp; what the arrival listeners are told)
QueueBatch = tuple[str, int, list[UnitRun], int, int, int, int]


def unit_writable(unit: Unit) -> bool:
    """A unit recovery can read back: Java-ranged fields, offset >= 0, 0 < size < padding size."""
    phy, size, tags = unit
    return 0 <= phy <= _LONG_MAX and 0 < size < PADDING_SIZE and -_LONG_MAX - 1 <= tags <= _LONG_MAX


def queue_runs(reqs: Sequence[DispatchRequest]) -> list[QueueBatch]:
    """The consume-queue half of a dispatched batch: the requests that enter a consume queue
    (`enters_consume_queue`) grouped by (topic, queue id) in order of first appearance, each group
    cut into runs of consecutive queue offsets, each run's units packed back to back."""
    groups: dict[tuple[str, int], list[DispatchRequest]] = {}
    for req in reqs:
        if enters_consume_queue(req.sys_flag):
            groups.setdefault((req.topic, req.queue_id), []).append(req)
    result: list[QueueBatch] = []
    for (topic, queue_id), group in groups.items():
        runs: list[UnitRun] = []
        run: list[Unit] = []
        run_start = group[0].consume_queue_offset
        for req in group:
            if req.consume_queue_offset != run_start + len(run):
                runs.append((run_start, _packed(run)))
                run, run_start = [], req.consume_queue_offset
            run.append((req.commit_log_offset, req.msg_size, req.tags_code))
        runs.append((run_start, _packed(run)))
        last = group[-1]
        result.append(
            (
                topic,
                queue_id,
                runs,
                len(group),
                last.consume_queue_offset,
                last.tags_code,
                last.store_timestamp,
            )
        )
    return result


# (position reached, what stopped there or None, messages dispatched, store timestamp of the last,
# consume-queue runs, index entries)
Entries: TypeAlias = "tuple[array[int], array[int], array[int]]"  # hashes, offsets, timestamps
DispatchBatch: TypeAlias = "tuple[int, ScanResult | None, int, int, list[QueueBatch], Entries]"


def dispatch_batch_over(
    scan: Callable[..., tuple[int, ScanResult | None]],
    index: Callable[[Sequence[DispatchRequest], int], Entries],
) -> Callable[..., DispatchBatch]:
    """`dispatch_batch` over `scan_messages` and `index_entries` implementations (the references
    here)."""

    def dispatch_batch(
        buf: memoryview,
        pos: int,
        limit: int,
        *,
        verify_crc: bool,
        delay_levels_ms: tuple[int, ...] = (),
        index_start: int | None = None,
    ) -> DispatchBatch:
        """Dispatch in one call: `scan_messages` from `pos` to `limit`, then `queue_runs` and
        (unless `index_start` is None: no index) `index_entries` from `index_start` over what it
        found.

        The compiled twin may stop early, before a record it leaves to `scan_messages` (`stop`
        None, `pos` short of `limit` and of the data); the caller dispatches that record and calls
        again.
        """
        reqs: list[DispatchRequest] = []
        pos, stop = scan(buf, pos, limit, reqs, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
        entries = (array("q"), array("q"), array("q")) if index_start is None else index(reqs, index_start)
        return pos, stop, len(reqs), reqs[-1].store_timestamp if reqs else 0, queue_runs(reqs), entries

    return dispatch_batch


def _packed(run: list[Unit]) -> bytes:
    return pack_units(run) if all(map(unit_writable, run)) else b""


dispatch_batch = dispatch_batch_over(scan_messages, index_entries)


def index_put(
    mm: mmap | bytearray,
    slot_base: int,
    slot_num: int,
    entry_base: int,
    count: int,
    index_num: int,
    begin_ts: int,
    hashes: array[int],
    offsets: array[int],
    stamps: array[int],
    start: int,
) -> tuple[int, int]:
    """Write the entries from `start` on into an index file's mapping `mm` (slots at
    `slot_base`, entry number `count` next, at `entry_base + count * 20`), stopping when the file
    holds `index_num`: for each one its slot's old value is its prevIndex when it names an
    earlier entry (else INVALID_INDEX, and a slot more in use), then the slot names it. The
    entries written and the slots newly used; the header is the caller's (`IndexFile.put_run`)."""
    n = len(hashes)
    if len(offsets) != n or len(stamps) != n or not 0 <= start <= n or slot_num <= 0 or count < 0:
        raise ValueError("index_put: arrays of different lengths, or a bad start, slot count or count")
    put = min(n - start, index_num - count)
    if put <= 0:
        return 0, 0
    new_slots = 0
    for i in range(start, start + put):
        slot_pos = slot_base + hashes[i] % slot_num * SLOT_SIZE
        old = SLOT.unpack_from(mm, slot_pos)[0]
        if old <= INVALID_INDEX or old >= count:
            old = INVALID_INDEX
            new_slots += 1
        diff = 0 if begin_ts <= 0 else min(max((stamps[i] - begin_ts) // 1000, 0), INT_MAX)
        ENTRY.pack_into(mm, entry_base + count * ENTRY_SIZE, hashes[i], offsets[i], diff, old)
        SLOT.pack_into(mm, slot_pos, count)
        count += 1
    return put, new_slots
