"""Stub of the compiled store read side (`_dispatch.pyx`); the references are in
`store/codec/scan_ref.py` and `store/codec/dispatch_ref.py`."""

from array import array
from collections.abc import Callable, Sequence
from mmap import mmap

from rocketlite.protocol.formats.consume_queue_unit import Unit
from rocketlite.protocol.formats.record import DispatchRequest, ScanResult
from rocketlite.store.codec.dispatch_ref import DispatchBatch, QueueBatch

def scan_messages(
    buf: memoryview,
    pos: int,
    limit: int,
    out: list[DispatchRequest],
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> tuple[int, ScanResult | None]: ...
def scan_record(
    buf: memoryview, pos: int, *, verify_crc: bool, delay_levels_ms: tuple[int, ...] = ()
) -> ScanResult: ...
def check_records(
    buf: memoryview, pos: int, base_offset: int, *, verify_crc: bool
) -> tuple[int, int, ScanResult]: ...
def select_units(
    units: memoryview,
    start: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    count: int,
    total: int,
    skip_below: int,
) -> tuple[array[int], array[int], int]: ...
def pack_units(units: Sequence[Unit]) -> bytes: ...
def index_entries(
    reqs: Sequence[DispatchRequest], end_offset: int
) -> tuple[array[int], array[int], array[int]]: ...
def queue_runs(reqs: Sequence[DispatchRequest]) -> list[QueueBatch]: ...
def dispatch_batch(
    buf: memoryview,
    pos: int,
    limit: int,
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
    index_start: int | None = None,
) -> DispatchBatch: ...
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
) -> tuple[int, int]: ...
