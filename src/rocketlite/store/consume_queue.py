"""ConsumeQueue: one (topic, queueId)'s index into the commit log, byte for byte RocketMQ 4.x's
`store/ConsumeQueue.java`.

Files: `consumequeue/{topic}/{queueId}/{20-digit zero-padded start byte offset}`, each exactly
`StoreConfig.cq_file_size` bytes (default 6,000,000 = 300,000 units), all zeros when created
(blocks reserved, not written: `mapped_file.create_segment`). The files of a
queue concatenate into one array of 20-byte units; logical offset N (the queue offset consumers
see) is the unit at byte N*20 of the concatenation, i.e. in the file named `N*20 // file_size *
file_size`, at `N*20 % file_size`. The file size is a multiple of 20, so no unit straddles files.
The unit's byte layout, and the padding unit, are declared in `protocol/formats/consume_queue_unit.py`.
Recovery also rejects a real unit starting before the previous real one ends (garbage), and a gap
left by out-of-order dispatch is filled with padding units.
`min_offset` is the first real unit still backed by the commit log, `max_offset` the next unit
to write (= units written, padding included).

The class owns no threads. One writer at a time appends (the dispatch thread, or recovery);
readers on other threads get zero-copy views; the cleaner only ever drops whole files at the head.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketlite.protocol.formats.consume_queue_unit import (
    CQ_DTYPE,
    CQ_UNIT,
    PADDING_BYTES,
    PADDING_SIZE,
    UNIT_SIZE,
    Unit,
    is_padding,
)
from rocketlite.store.codec.dispatch_ref import unit_writable
from rocketlite.store.codec.speedups import pack_units
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.mapped_file_queue import (
    Allocator,
    MappedFileQueue,
    direct_allocator,
)
from rocketlite.store.queue_read import RecordFilter, RecordSource, read_units, read_units_filtered
from rocketlite.store.results import QueueRead

log = logging.getLogger("rocketlite.store.consume_queue")

# Consume-queue bytes one pull may scan while filtering (RocketMQ's 16000).
MAX_FILTER_BYTES: Final = 16_000

_LONG_MAX: Final = (1 << 63) - 1
_SCAN_UNITS: Final = 16_384  # units per numpy chunk when scanning (320 KiB)
_PAD_CHUNK_UNITS: Final = 65_536  # padding written per append call (1.25 MiB)
# Recovery looks this far past the valid end for leftover bytes (a torn tail); far more than a
# queue's unflushed window, far less than re-reading or re-zeroing every 6 MB file at start-up.
TAIL_CHECK_BYTES: Final = 1 << 20

_Ints = npt.NDArray[np.int64]


def _decode(view: memoryview) -> tuple[_Ints, _Ints]:
    """(commitLogOffset, size) columns of whole units, copied out so the mapping is not pinned."""
    arr = np.frombuffer(view, dtype=CQ_DTYPE, count=len(view) // UNIT_SIZE)
    return arr["phy"].astype(np.int64), arr["size"].astype(np.int64)


def _valid_prefix(phy: _Ints, size: _Ints, prev_end: int, below: int | None) -> tuple[int, int]:
    """How many leading units are valid, and the end (phy+size) of the last real one among them.

    Valid = RocketMQ's rule (offset >= 0, size > 0) plus one it does not check: a real unit never
    starts before the end of the previous real unit, because one queue's units point at
    consecutive, non-overlapping records of the log; a unit that goes backwards is garbage.
    With `below`, real units at or past that commit-log offset are invalid too (truncation).
    """
    if len(phy) == 0:
        return 0, prev_end
    pad = (phy == 0) & (size == PADDING_SIZE)
    ok = (phy >= 0) & (size > 0)
    if below is not None:
        ok &= pad | (phy < below)
    ends = np.where(ok & ~pad, np.minimum(phy, 1 << 62) + size, -1)
    running = np.maximum.accumulate(ends)
    before = np.empty_like(running)
    before[0] = prev_end
    before[1:] = np.maximum(running[:-1], prev_end)
    ok &= pad | (phy >= before)
    bad = np.flatnonzero(~ok)
    n = int(bad[0]) if bad.size else len(phy)
    return n, (max(prev_end, int(running[n - 1])) if n else prev_end)


class ConsumeQueue:
    """The consume queue of one (topic, queueId): append units, read them, recover, truncate."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        root_dir: Path,
        file_size: int,
        allocator: Allocator = direct_allocator,
    ) -> None:
        """`allocator` creates segments in the dispatching thread: they are reserved, not zeroed
        (writing 6 MB of zeros stalled the dispatch thread for 150-250 ms per new queue)."""
        if file_size < UNIT_SIZE or file_size % UNIT_SIZE:
            raise ValueError(f"consume queue file size must be a multiple of {UNIT_SIZE}, got {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.units_per_file = file_size // UNIT_SIZE
        self._mfq = MappedFileQueue(root_dir / topic / str(queue_id), file_size, allocator=allocator)
        self._min_logic = 0  # byte offset of the first valid real unit (minLogicOffset)
        self._max_physic = -1  # phy + size of the last real unit; -1 when there is none

    # -- positions --------------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        return self._mfq.directory

    @property
    def min_offset(self) -> int:
        """First logical offset that points at a record still in the log (getMinOffsetInQueue)."""
        return self._min_logic // UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """Next logical offset to write, padding included (getMaxOffsetInQueue)."""
        return self._mfq.max_offset // UNIT_SIZE

    @property
    def max_physic_offset(self) -> int:
        """Commit-log end of the last real unit, -1 if none: dispatch resumes there after a restart."""
        return self._max_physic

    def roll_next_file(self, index: int) -> int:
        """First logical offset of the file after the one holding `index` (OFFSET_FOUND_NULL hint)."""
        return index + self.units_per_file - index % self.units_per_file

    # -- loading and recovery ----------------------------------------------------------------
    def load(self) -> None:
        """Open the existing files; `recover` must follow before the positions mean anything."""
        self._mfq.load()

    def recover(self) -> None:
        """Find where valid units end after a restart and cut everything after it.

        Like RocketMQ, only the last three files are scanned (older ones were flushed long ago and
        count as full); the scan stops at the first invalid unit (see `_valid_prefix`), at the
        first all-zero unit, or at a missing file. The file holding the end gets its positions; if
        bytes remain past the end (a torn write, garbage) or files follow it, the tail is zeroed
        and the later files deleted via `MappedFileQueue.truncate_dirty`, so no stale unit can be
        read as data once new ones reach it. The min offset becomes the first real unit of the
        first file, the max physic offset the end of the last real unit.
        """
        self._min_logic, self._max_physic = 0, -1
        files = list(self._mfq)
        if not files:
            return
        start = max(0, len(files) - 3)
        prev_end = -1
        valid_end = files[start].file_from_offset
        for mf in files[start:]:
            if mf.file_from_offset != valid_end:
                log.error("%s: consume queue file missing before %s; cutting there", self, mf.path.name)
                break
            pos, prev_end = self._scan_valid(mf, prev_end, below=None, limit=self.file_size)
            valid_end = mf.file_from_offset + pos
            if pos < self.file_size:
                break
        self._cut_at(valid_end)
        first = files[0]
        first_idx = first.file_from_offset // UNIT_SIZE
        self._min_logic = UNIT_SIZE * self._next_real(first_idx, first_idx + first.read_position // UNIT_SIZE)
        self._max_physic = self._last_real_end()
        log.info("%s recovered: offsets %d..%d", self, self.min_offset, self.max_offset)

    def _scan_valid(self, mf: MappedFile, prev_end: int, *, below: int | None, limit: int) -> tuple[int, int]:
        """Byte length of the valid prefix of `mf[:limit]`, chunk by chunk so a short queue reads
        only its first pages; and the end of the last real unit seen."""
        raw = mf.raw_view()
        pos = 0
        while pos < limit:
            stop = min(limit, pos + _SCAN_UNITS * UNIT_SIZE)
            n, prev_end = _valid_prefix(*_decode(raw[pos:stop]), prev_end, below)
            pos += n * UNIT_SIZE
            if pos < stop:
                break
        return pos, prev_end

    def _cut_at(self, end: int) -> None:
        """Make `end` the end of the data; zero what lies past it only if something does."""
        holder = self._mfq.find_by_offset(end)
        later = any(mf.file_from_offset > end for mf in self._mfq)
        rel = end - holder.file_from_offset if holder is not None else 0
        dirty = later
        if holder is not None and not dirty:
            window = holder.raw_view()[rel : min(self.file_size, rel + TAIL_CHECK_BYTES)]
            dirty = bool(np.frombuffer(window, dtype=np.uint8).any())
            del window
        if dirty:
            log.warning("%s: zeroing units from logical offset %d on", self, end // UNIT_SIZE)
            self._mfq.truncate_dirty(end)
            return
        if holder is not None:
            holder.set_positions(rel)
        self._mfq.flushed_where = self._mfq.committed_where = end

    # -- writing ----------------------------------------------------------------------------
    def put_unit(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append the unit for logical offset `cq_offset` (putMessagePositionInfo).

        A unit whose record ends at or before `max_physic_offset` is already here (re-dispatch
        after recovery) and is skipped. See `put_units` for where the unit lands. Returns False,
        writing nothing, for a unit recovery could not read back (offset < 0, size <= 0 or the
        padding size, values outside Java's ranges); True otherwise.
        """
        return self.put_units([(phy_offset, size, tags_code)], cq_offset)

    def put_units(self, units: Sequence[Unit], first_cq_offset: int) -> bool:
        """Append units for consecutive logical offsets from `first_cq_offset`, one write per file.

        Leading units at or below `max_physic_offset` are skipped as duplicates. The first unit
        belongs at byte `first_cq_offset*20`. In an empty queue the file covering that position is
        created and padded up to it, and the min offset starts there. If the queue already ends
        past it, the units that overlap are skipped (logged); if it ends before it, padding fills
        the gap (logged). Returns False, writing nothing, if any unit is invalid (see `put_unit`).
        """
        if not units:
            return True
        bad = next((u for u in units if not unit_writable(u)), None)
        if bad is not None or not 0 <= first_cq_offset <= _LONG_MAX // UNIT_SIZE:
            log.error("%s: refusing invalid unit %s at offset %d", self, bad, first_cq_offset)
            return False
        dup = 0
        while dup < len(units) and units[dup][0] + units[dup][1] <= self._max_physic:
            dup += 1
        if dup:
            log.debug("%s: %d units already dispatched (max physic offset %d)", self, dup, self._max_physic)
        if dup < len(units):
            self._append(pack_units(units[dup:]), first_cq_offset + dup)
        return True

    def put_packed(self, data: bytes, first_cq_offset: int) -> bool:
        """`put_units` for units already packed (`speedups.queue_runs`, which checked them):
        `data` is empty when the run held a unit `put_units` refuses, and is refused likewise."""
        if not data or not 0 <= first_cq_offset <= _LONG_MAX // UNIT_SIZE:
            log.error("%s: refusing invalid units at offset %d", self, first_cq_offset)
            return False
        mf = self._mfq.files[-1] if self._mfq.files else None
        if mf is not None and first_cq_offset * UNIT_SIZE == mf.file_from_offset + mf.wrote_position:
            # Every dispatch round's case: new units right after the last ones, in the last file.
            phy, size, _ = CQ_UNIT.unpack_from(data, 0)
            if mf.wrote_position + len(data) <= mf.file_size and phy + size > self._max_physic:
                mf.append(data)
                self._max_physic = sum(CQ_UNIT.unpack_from(data, len(data) - UNIT_SIZE)[:2])
                return True
        dup = 0
        while dup * UNIT_SIZE < len(data):
            phy, size, _ = CQ_UNIT.unpack_from(data, dup * UNIT_SIZE)
            if phy + size > self._max_physic:
                break
            dup += 1
        if dup:
            log.debug("%s: %d units already dispatched (max physic offset %d)", self, dup, self._max_physic)
        if dup * UNIT_SIZE < len(data):
            self._append(memoryview(data)[dup * UNIT_SIZE :], first_cq_offset + dup)
        return True

    def _append(self, data: bytes | memoryview, cq_offset: int) -> None:
        """Write packed units for logical offsets from `cq_offset` (see `put_units`)."""
        expected = cq_offset * UNIT_SIZE
        if not self._mfq.files:
            self._min_logic = self._new_file(expected).file_from_offset
        end = self._mfq.max_wrote_offset
        if expected < end:
            skip = min(len(data) // UNIT_SIZE, (end - expected) // UNIT_SIZE)
            log.warning("%s: %d units from offset %d already written; skipped", self, skip, cq_offset)
            data, expected = data[skip * UNIT_SIZE :], expected + skip * UNIT_SIZE
            if not data:
                return
        elif expected > end:
            if self._min_logic >= end:
                log.info("%s: queue starts at offset %d; padding before it", self, cq_offset)
                self._min_logic = expected
            else:
                log.warning("%s: [BUG] gap from %d to %d; padding it", self, end // UNIT_SIZE, cq_offset)
            self._write_padding((expected - end) // UNIT_SIZE)
        self._write(data)
        phy, size, _ = CQ_UNIT.unpack_from(data, len(data) - UNIT_SIZE)
        self._max_physic = phy + size

    def _new_file(self, expected: int) -> MappedFile:
        mf = self._mfq.get_last_file(expected)
        if mf is None:  # pragma: no cover - get_last_file(create=True) always returns a file
            raise OSError(f"{self}: could not create a consume queue file")
        return mf

    def _write(self, data: bytes | memoryview) -> None:
        """Append at the end, splitting at file boundaries (files hold whole units)."""
        view = memoryview(data)
        done = 0
        while done < len(view):
            mf = self._new_file(0)
            n = min(mf.remaining, len(view) - done)
            mf.append(view[done : done + n])
            done += n

    def _write_padding(self, count: int) -> None:
        while count > 0:
            mf = self._new_file(0)
            n = min(count, mf.remaining // UNIT_SIZE, _PAD_CHUNK_UNITS)
            mf.append(PADDING_BYTES * n)
            count -= n

    # -- reading ----------------------------------------------------------------------------
    def get_unit(self, index: int) -> Unit | None:
        """(commitLogOffset, size, tagsCode) at logical `index`; None below min or at/after max.

        A padding unit is returned as is (`is_padding`); readers skip it like a removed record.
        """
        if index < self.min_offset or index >= self.max_offset:
            return None
        return self._unit_at(index)

    def get_units(self, start_index: int, max_count: int) -> memoryview | None:
        """Zero-copy view of up to `max_count` whole units from `start_index` (getIndexBuffer).

        The view stops at the end of the file holding `start_index` and at the written data, so
        it may hold fewer units; decode with `CQ_UNIT.iter_unpack`. None if `start_index` is below
        the min offset, at/after the max offset, or its file is gone (then `roll_next_file`).
        Release the view promptly: it keeps the file's mapping alive.
        """
        if max_count <= 0 or start_index < self.min_offset or start_index >= self.max_offset:
            return None
        pos = start_index * UNIT_SIZE
        mf = self._mfq.find_by_offset(pos)
        if mf is None or mf.closed:
            return None
        rel = pos - mf.file_from_offset
        size = min(mf.read_position - rel, max_count * UNIT_SIZE)
        try:
            return mf.read(rel, size - size % UNIT_SIZE)
        except ValueError:  # the file was closed under us (expiry): like a missing file
            return None

    def read(
        self,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_filter: Callable[[int], bool] | None,
        records: RecordSource,
        record_filter: RecordFilter | None = None,
    ) -> QueueRead | None:
        """The records of a pull: units from `offset` whose tag code passes `tag_filter`, at most
        `max_count` records and (after the first) `max_bytes` bytes, cut out of `records` as one
        zero-copy slice per run of back-to-back records (the commit log's half of the read,
        `store/queue_read.py`; per-record views only when asked for).

        At most `max(MAX_FILTER_BYTES, max_count * 20)` bytes of units are scanned, within the
        file holding `offset`. Padding is skipped. A record the log no longer holds means its
        whole segment is gone: units pointing into that segment are skipped too. None if
        `offset` is outside the queue or its file is gone (`get_units`). With `record_filter`
        (a property filter) each record is judged by its bytes too (`read_units_filtered`).
        """
        units = self.get_units(offset, max(MAX_FILTER_BYTES, max_count * UNIT_SIZE) // UNIT_SIZE)
        if units is None:
            return None
        try:
            if record_filter is not None:
                return read_units_filtered(
                    units, offset, max_count, max_bytes, tag_filter, record_filter, records
                )
            return read_units(units, offset, max_count, max_bytes, tag_filter, records)
        finally:
            units.release()

    def last_unit(self) -> Unit | None:
        """The last unit that points at a record (trailing padding skipped), or None."""
        first = self._mfq.first_file
        base = first.file_from_offset // UNIT_SIZE if first is not None else 0
        idx = self._find_real(self.max_offset, base, backward=True)
        return self._unit_at(idx) if idx is not None else None

    def _unit_at(self, index: int) -> Unit | None:
        pos = index * UNIT_SIZE
        mf = self._mfq.find_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + UNIT_SIZE > mf.read_position:
            return None
        try:
            phy, size, tags = CQ_UNIT.unpack_from(mf.raw_view(), rel)
        except ValueError:  # closed under us
            return None
        return phy, size, tags

    def _find_real(self, index: int, limit: int, *, backward: bool = False) -> int | None:
        """Forward: the first non-padding unit in [index, limit); backward: the last one in
        [limit, index); None if there is none. Padding is rare, so one unit is tried first, then
        numpy scans a chunk of one file at a time."""
        probe = index - 1 if backward else index
        unit = self._unit_at(probe) if (limit <= probe if backward else probe < limit) else None
        if unit is None or not is_padding(unit):
            return probe if unit is not None else None
        while index > limit if backward else index < limit:
            mf = self._mfq.find_by_offset((index - 1 if backward else index) * UNIT_SIZE)
            if mf is None:
                return None
            base = mf.file_from_offset // UNIT_SIZE
            if backward:
                lo, hi = max(limit, base, index - _SCAN_UNITS), index
            else:
                lo, hi = index, min(limit, base + self.units_per_file, index + _SCAN_UNITS)
            phy, size = _decode(mf.raw_view()[(lo - base) * UNIT_SIZE : (hi - base) * UNIT_SIZE])
            real = np.flatnonzero((phy != 0) | (size != PADDING_SIZE))
            if real.size:
                return lo + int(real[-1] if backward else real[0])
            index = lo if backward else hi
        return None

    def _next_real(self, index: int, limit: int) -> int:
        found = self._find_real(index, limit)
        return limit if found is None else found

    def _last_real_end(self) -> int:
        unit = self.last_unit()
        return unit[0] + unit[1] if unit is not None else -1

    def _lower_bound(self, lo: int, hi: int, pred: Callable[[Unit], bool]) -> int:
        """First real unit in [lo, hi) for which `pred` holds, `pred` being false...true along
        the queue; `hi` if none. A padding unit takes the value of the next real unit."""
        end = hi
        first = self._mfq.first_file
        if first is not None:  # the cleaner may have dropped head files before moving the min
            lo = max(lo, first.file_from_offset // UNIT_SIZE)
        while lo < hi:
            mid = (lo + hi) // 2
            real = self._next_real(mid, end)
            unit = self._unit_at(real) if real < end else None
            if real >= end or (unit is not None and pred(unit)):
                hi = mid
            else:
                lo = real + 1
        return self._next_real(lo, end)

    # -- min offset, time lookup ----------------------------------------------------------------
    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move the min offset to the first real unit of the first file whose record starts at or
        after `min_commit_log_offset` (binary search from the current min, which only moves
        forward); to the end of the first file's data if none does (the queue holds no record
        still in the log; RocketMQ 5 does the same)."""
        first = self._mfq.first_file
        if first is None:
            self._min_logic, self._max_physic = 0, -1
            return
        lo = max(self._min_logic, first.file_from_offset) // UNIT_SIZE
        hi = (first.file_from_offset + first.read_position) // UNIT_SIZE
        if lo >= hi:
            self._min_logic = lo * UNIT_SIZE
            return
        found = self._lower_bound(lo, hi, lambda u: u[0] >= min_commit_log_offset)
        if found != lo:
            log.info(
                "%s: min offset %d -> %d (commit log starts at %d)", self, lo, found, min_commit_log_offset
            )
        self._min_logic = found * UNIT_SIZE

    def offset_by_time(self, timestamp_ms: int, store_time_of: Callable[[int, int], int | None]) -> int:
        """Logical offset of the first message stored at or after `timestamp_ms` (getOffsetInQueueByTime).

        Binary search over [min_offset, max_offset) calling `store_time_of(phy, size)`, which gives
        a record's STORETIMESTAMP or None if the record is gone from the log; a gone record counts
        as older than any timestamp (the log loses its oldest records first). Store times are taken
        as non-decreasing along the queue. Returns `min_offset` (or the first real unit after it)
        if every message is at or after `timestamp_ms`, `max_offset` if none is. Of several
        messages with the same store time, the first. These are RocketMQ 5's BoundaryType.LOWER
        semantics; 4.x instead picked whichever neighbour was closer in time and located the file
        by its mtime, which is neither stable nor a bound.
        """

        def at_or_after(unit: Unit) -> bool:
            stored = store_time_of(unit[0], unit[1])
            return stored is not None and stored >= timestamp_ms

        return self._lower_bound(self.min_offset, self.max_offset, at_or_after)

    # -- truncation and expiry -----------------------------------------------------------------
    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop units whose record starts at or after `phy_offset` (truncateDirtyLogicFiles): the
        commit log was cut there. Files are examined from the last; a file left without units is
        deleted, except the one where the queue now ends (kept empty, zeroed, so the queue keeps
        its logical position); the removed units are zeroed. `max_physic_offset` follows.
        """
        files = list(self._mfq)
        if not files:
            return
        tail = self._unit_at(self._mfq.max_wrote_offset // UNIT_SIZE - 1)
        if tail is not None and 0 <= tail[0] < phy_offset and 0 < tail[1] < PADDING_SIZE:
            return  # the last unit is a real one below the cut, hence so is every unit
        end = files[0].file_from_offset
        for mf in reversed(files):
            pos, _ = self._scan_valid(mf, -1, below=phy_offset, limit=mf.wrote_position)
            if pos > 0 or mf is files[0]:
                end = mf.file_from_offset + pos
                break
        self._cut_at(end)
        self._min_logic = min(self._min_logic, end)
        self._max_physic = self._last_real_end()

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete whole files (never the last) whose last real unit's record ends at or before
        `min_commit_log_offset` (deleteExpiredFile), then `correct_min_offset`. Returns files
        deleted. A first file holding only padding goes too."""
        deleted = 0
        while len(self._mfq) > 1:
            first = self._mfq.first_file
            if first is None:
                break
            base = first.file_from_offset // UNIT_SIZE
            idx = self._find_real(base + first.read_position // UNIT_SIZE, base, backward=True)
            unit = self._unit_at(idx) if idx is not None else None
            if unit is not None and unit[0] + unit[1] > min_commit_log_offset:
                break
            log.info("%s: deleting expired file %s (units from %d)", self, first.path.name, base)
            self._mfq.delete_first()
            deleted += 1
        self.correct_min_offset(min_commit_log_offset)
        return deleted

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """fdatasync the file at the flush point if `least_pages` are pending; True if nothing was."""
        return self._mfq.flush(least_pages)

    def close(self) -> None:
        self._mfq.close()

    def destroy(self) -> None:
        """Delete every file and the queue's directory (topic deletion)."""
        self._mfq.destroy()
        self._min_logic, self._max_physic = 0, -1

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic}-{self.queue_id})"
