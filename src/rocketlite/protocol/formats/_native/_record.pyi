"""Stub of the compiled record codec (`_record.pyx`); the references are
`protocol/formats/record_ref.py` (encode) and `protocol/formats/record.py` `decode_records`."""

import mmap
from collections.abc import Sequence

from rocketlite.protocol.formats.batch import BatchTarget, EncodedBatch
from rocketlite.protocol.formats.record import EncodedRecord, MessageInner, StoredRecord
from rocketlite.protocol.message import HostAddress

def encode_record(msg: MessageInner, max_message_size: int) -> EncodedRecord: ...
def place_record(
    target: bytearray | mmap.mmap,
    pos: int,
    head: bytearray,
    tail: bytes,
    stamp_pos: int,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
    id_prefix: str,
) -> str: ...
def decode_records(buf: bytes | bytearray | memoryview) -> list[StoredRecord]: ...
def crc32(data: bytes | bytearray) -> int: ...
def encode_batch_records(body: bytes | bytearray | memoryview, target: BatchTarget) -> EncodedBatch: ...
def stamp_batch(
    buf: bytearray,
    count: int,
    queue_offset: int,
    advances: bool,
    physical_base: int,
    store_timestamp: int,
    id_prefix: str,
) -> str: ...
def encode_group(
    entries: Sequence[tuple[str, bytes, str, int, int, int, int, int]]
    | Sequence[tuple[str, int, str, int, int, int, int, int]],
    born_host: HostAddress,
    store_host: HostAddress,
    src: bytes | None = None,
    ends: list[int] | None = None,
) -> bytearray: ...
def stamp_group(
    buf: bytearray,
    pos: int,
    keys: list[str],
    table: dict[str, int],
    queue_offsets: list[int],
    physical_base: int,
    store_timestamp: int,
    id_prefix: str,
) -> list[str]: ...
