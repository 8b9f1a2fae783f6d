"""The store family's chooser: the compiled read-side codecs or their references.

Each codec here has a reference written for clarity and a compiled twin in `_native/_dispatch.pyx`
that gives the same results, pinned together by `tests/store/test_native_dispatch.py`:

* `scan_messages`, `scan_record` (RocketMQ's `checkMessageAndReturnSize`, one record or record
  after record): `scan_ref`;
* `check_records`, `select_units`, `pack_units`, `queue_runs`, `index_entries`,
  `dispatch_batch` (recovery's segment walk, a pull's choice of consume-queue units, units to
  bytes, a dispatched batch's consume-queue runs and index entries, all of dispatch in one
  call), `index_put` (index entries into an index file's mapping): `dispatch_ref`.

`rocketlite.native` holds the one setting (`ROCKETLITE_NATIVE`) every family's chooser reads;
the store imports these names from here and nowhere else.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from mmap import mmap
from typing import Final, Protocol

from rocketlite import native
from rocketlite.protocol.formats.consume_queue_unit import Unit
from rocketlite.protocol.formats.record import DispatchRequest, ScanResult
from rocketlite.store.codec import dispatch_ref, scan_ref

__all__ = [
    "CHOSEN",
    "NATIVE_MODULES",
    "REFERENCE",
    "Codecs",
    "check_records",
    "dispatch_batch",
    "index_entries",
    "index_put",
    "pack_units",
    "queue_runs",
    "scan_messages",
    "scan_record",
    "select_units",
]


class ScanMessages(Protocol):
    def __call__(
        self,
        buf: memoryview,
        pos: int,
        limit: int,
        out: list[DispatchRequest],
        *,
        verify_crc: bool,
        delay_levels_ms: tuple[int, ...] = (),
    ) -> tuple[int, ScanResult | None]: ...


class ScanRecord(Protocol):
    def __call__(
        self, buf: memoryview, pos: int, *, verify_crc: bool, delay_levels_ms: tuple[int, ...] = ()
    ) -> ScanResult: ...


class CheckRecords(Protocol):
    def __call__(
        self, buf: memoryview, pos: int, base_offset: int, *, verify_crc: bool
    ) -> tuple[int, int, ScanResult]: ...


class SelectUnits(Protocol):
    def __call__(
        self,
        units: memoryview,
        start: int,
        max_count: int,
        max_bytes: int,
        tag_filter: Callable[[int], bool] | None,
        count: int,
        total: int,
        skip_below: int,
    ) -> tuple[array[int], array[int], int]: ...


class DispatchBatch(Protocol):
    def __call__(
        self,
        buf: memoryview,
        pos: int,
        limit: int,
        *,
        verify_crc: bool,
        delay_levels_ms: tuple[int, ...] = (),
        index_start: int | None = None,
    ) -> dispatch_ref.DispatchBatch: ...


class IndexEntries(Protocol):
    def __call__(
        self, reqs: Sequence[DispatchRequest], end_offset: int
    ) -> tuple[array[int], array[int], array[int]]: ...


class IndexPut(Protocol):
    def __call__(
        self,
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
    ) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Codecs:
    """One implementation of every codec of the store family (built by keyword)."""

    name: str
    scan_messages: ScanMessages
    scan_record: ScanRecord
    check_records: CheckRecords
    select_units: SelectUnits
    pack_units: Callable[[Sequence[Unit]], bytes]
    index_entries: IndexEntries
    queue_runs: Callable[[Sequence[DispatchRequest]], list[dispatch_ref.QueueBatch]]
    dispatch_batch: DispatchBatch
    index_put: IndexPut


REFERENCE: Final = Codecs(
    name="reference",
    scan_messages=scan_ref.scan_messages,
    scan_record=scan_ref.scan_record,
    check_records=dispatch_ref.check_records,
    select_units=dispatch_ref.select_units,
    pack_units=dispatch_ref.pack_units,
    index_entries=dispatch_ref.index_entries,
    queue_runs=dispatch_ref.queue_runs,
    dispatch_batch=dispatch_ref.dispatch_batch,
    index_put=dispatch_ref.index_put,
)

# The compiled module, providing the `Codecs` fields under the same names.
NATIVE_MODULES: Final = ("rocketlite.store.codec._native._dispatch",)

CHOSEN: Final = native.load(REFERENCE, NATIVE_MODULES)

scan_messages: Final = CHOSEN.scan_messages
scan_record: Final = CHOSEN.scan_record
check_records: Final = CHOSEN.check_records
select_units: Final = CHOSEN.select_units
pack_units: Final = CHOSEN.pack_units
index_entries: Final = CHOSEN.index_entries
queue_runs: Final = CHOSEN.queue_runs
dispatch_batch: Final = CHOSEN.dispatch_batch
index_put: Final = CHOSEN.index_put
