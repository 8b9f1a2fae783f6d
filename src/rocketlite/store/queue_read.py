"""The commit-log half of a pull (`ConsumeQueue.read`): the chosen consume-queue units become
zero-copy slices of the commit log, one slice per run of records that lie back to back there.

A queue written in batches has its records in a few runs, so a pull of a thousand records is a
few slices and two arrays (`select_units` picks the units and finds the runs natively), not a
thousand Python steps and views; the per-record views are cut later, only for the callers that
want them (`QueueRead.messages`). A run that does not fit in its segment's readable part (a
record past the written end, a segment gone) is read record by record, as every run once was,
so the bytes and the removed-record rules are the same.

A pull with a property filter (SQL92; `read_units_filtered`) also judges each record the tag codes
let through by its bytes, after the units are chosen and before it is taken, as RocketMQ's
`isMatchedByCommitLog` does: a record it turns down is skipped like a unit whose tag code does
not match (it counts towards the units scanned, not towards the records taken), and the choice
goes on after it with the counts actually taken.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Protocol

from rocketlite.protocol.formats.consume_queue_unit import UNIT_SIZE
from rocketlite.store.codec.speedups import select_units
from rocketlite.store.results import QueueRead

__all__ = ["RecordFilter", "RecordSource", "read_units", "read_units_filtered"]

# A stored record's bytes -> whether a pull takes it (a property filter; the record's tag code
# has passed the tag filter already).
RecordFilter = Callable[[memoryview], bool]


class RecordSource(Protocol):
    """Where `ConsumeQueue.read` gets record bytes: the commit log."""

    def get_data(self, offset: int) -> memoryview | None:
        """The readable rest of the segment holding `offset`, or None if it is not in the log."""

    def roll_next_file(self, offset: int) -> int:
        """Start of the segment after the one holding `offset`."""


def read_units(
    units: memoryview,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    records: RecordSource,
) -> QueueRead:
    """The records of the units in `units` (the first at queue offset `offset`) that a pull
    takes, as `ConsumeQueue.read` describes; `units` stays the caller's to release."""
    parts: list[memoryview] = []
    ends: list[int] = []  # records taken up to the end of each part
    kept: array[int] | None = None  # picked units of selections cut short by a removed record
    hit_removed = False
    skip_below = -1  # commit-log start of the segment after a removed one
    start = taken = total = 0
    get_data = records.get_data
    # The readable rest of the segment holding the last record read: the records of one pull
    # are mostly in one segment, so each run is a slice of this view, not a segment lookup.
    seg: memoryview | None = None
    seg_start = seg_end = 0
    while True:
        # The units to take and their runs of back-to-back records, chosen natively as if
        # every record were still in the log; a removed one restarts the choice after it
        # with the counts actually taken.
        picked, runs, scanned = select_units(
            units, start, max_count, max_bytes, tag_filter, taken, total, skip_below
        )
        cut = -1  # picked index of a record the log no longer holds
        k0 = 0
        for r in range(0, len(runs), 3):
            lo, nbytes, k1 = runs[r], runs[r + 1], runs[r + 2]
            hi = lo + nbytes
            if lo < seg_start or hi > seg_end:
                if seg is not None:
                    seg.release()
                seg = get_data(lo) if lo >= 0 else None
                seg_start = lo
                seg_end = lo + len(seg) if seg is not None else lo
            if seg is not None and lo <= hi <= seg_end:  # the whole run: one slice
                parts.append(seg[lo - seg_start : hi - seg_start])
                ends.append(taken + k1)
                total += nbytes
                k0 = k1
                continue
            # Not all in this segment's readable part (or a bad size): record by record.
            for k in range(k0, k1):
                phy, size = picked[3 * k], picked[3 * k + 1]
                if phy < seg_start or phy + size > seg_end:
                    if seg is not None:
                        seg.release()
                    seg = get_data(phy) if phy >= 0 else None
                    seg_start = phy
                    seg_end = phy + len(seg) if seg is not None else phy
                if seg is None or size < 0 or phy + size > seg_end:
                    cut = k
                    break
                parts.append(seg[phy - seg_start : phy - seg_start + size])
                ends.append(taken + k + 1)
                total += size
            if cut >= 0:
                break
            k0 = k1
        if cut < 0:
            if kept is not None:
                kept.extend(picked)
                picked = kept
            break
        kept = picked[: 3 * cut] if kept is None else kept + picked[: 3 * cut]
        taken += cut
        hit_removed = hit_removed or not taken
        skip_below = records.roll_next_file(picked[3 * cut])
        start = picked[3 * cut + 2] + 1
    if seg is not None:
        seg.release()
    return QueueRead(offset, parts, ends, picked, total, scanned, hit_removed)


def read_units_filtered(
    units: memoryview,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    record_filter: RecordFilter,
    records: RecordSource,
) -> QueueRead:
    """`read_units` with `record_filter` judging each record the tag codes let through.

    The units are chosen natively as `read_units` chooses them; the records are then judged one
    by one, and while some were turned down the choice goes on after the last unit looked at,
    with the counts actually taken. One part per record taken (a filtered pull takes few).
    """
    parts: list[memoryview] = []
    ends: list[int] = []
    kept: array[int] = array("q")
    hit_removed = False
    skip_below = -1
    start = taken = total = 0
    n_units = len(units) // UNIT_SIZE
    get_data = records.get_data
    while start < n_units:
        picked, _runs, scanned = select_units(
            units, start, max_count, max_bytes, tag_filter, taken, total, skip_below
        )
        if scanned == start:  # full: nothing more was looked at
            break
        for k in range(0, len(picked), 3):
            phy, size, index = picked[k], picked[k + 1], picked[k + 2]
            if phy < skip_below:
                continue
            seg = get_data(phy) if phy >= 0 and size > 0 else None
            if seg is None or size > len(seg):
                if seg is not None:
                    seg.release()
                hit_removed = hit_removed or not taken
                skip_below = records.roll_next_file(phy)
                continue
            view = seg[:size]
            seg.release()
            if not record_filter(view):
                view.release()
                continue
            parts.append(view)
            taken += 1
            total += size
            ends.append(taken)
            kept.extend((phy, size, index))
        start = scanned
    return QueueRead(offset, parts, ends, kept, total, start, hit_removed)
