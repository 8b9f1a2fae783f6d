"""Stub of the compiled column decoder (`_columns.pyx`); the reference is
`spark/codec/columns_ref.py`."""

from rocketlite.spark.codec.columns_ref import RecordColumns, RecordStarts

def decode_record_columns(
    buf: bytes | bytearray | memoryview, positions: bytes | bytearray | memoryview
) -> RecordColumns | None: ...
def first_crc_mismatch(
    buf: bytes | bytearray | memoryview, positions: bytes | bytearray | memoryview
) -> int: ...
def first_invalid_record(
    buf: bytes | bytearray | memoryview,
    positions: bytes | bytearray | memoryview,
    base: int,
    check_base: bool,
) -> tuple[int, int]: ...
def record_starts(
    buf: bytes | bytearray | memoryview, pos: int, limit: int, max_count: int
) -> RecordStarts: ...
