"""The formats family's chooser: the compiled record codecs or their references.

Each codec here has a reference written for clarity and a compiled twin in `_native/` that gives
the same bytes and results, pinned together by the differential tests
(`tests/protocol/test_native_record.py`, `test_native_batch_records.py`, `test_native_send.py`,
`tests/store/test_native_place.py`, `test_native_stamp.py`):

* `encode_record` (a message to a commit-log record): `record_ref`;
* `decode_records` (the records of a PULL or query body, for the SDK, the admin CLI and Spark):
  `record.decode_records`;
* `place_record` (a single encoded record placed under the commit log's lock: offsets and store
  time patched in, copied into the segment, msg id out): `record.place_record`;
* `encode_batch_records`, `stamp_batch` (a SEND_BATCH_MESSAGE body straight into commit-log
  records, no message objects; such a batch stamped under the lock, each record as
  `place_record` stamps one): `batch` and `record_ref`;
  (all of these compiled in `_native/_record.pyx`)
* `send_properties` (the send processor's properties rewrite: WAIT dropped, CLUSTER set, tags
  code, UNIQ_KEY, KEYS, DELAY): `message.send_properties`; compiled in `_native/_send.pyx`;
* `encode_group`, `stamp_group` (several single sends of one socket read encoded into one
  contiguous append, and stamped each with its own queue offset): compiled only
  (`_native/_record_group.pxi`), None in the reference set. They serve the send processor's
  coalescing lane, which is off without them; its reference is the per-message path, pinned
  against the lane by `tests/broker/test_send_group.py`.

`rocketlite.native` holds the one setting (`ROCKETLITE_NATIVE`) every family's chooser reads;
the store, the broker, the clients and Spark import these names from here and nowhere else.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from rocketlite import native
from rocketlite.protocol import message
from rocketlite.protocol.formats import batch, record, record_ref
from rocketlite.protocol.formats.record import EncodedRecord, MessageInner, StoredRecord
from rocketlite.protocol.message import SendProperties

__all__ = [
    "CHOSEN",
    "NATIVE_MODULES",
    "REFERENCE",
    "Codecs",
    "decode_records",
    "encode_batch_records",
    "encode_group",
    "encode_record",
    "place_record",
    "send_properties",
    "stamp_batch",
    "stamp_group",
]


class PlaceRecord(Protocol):
    def __call__(
        self,
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


class StampBatch(Protocol):
    def __call__(
        self,
        buf: bytearray,
        count: int,
        queue_offset: int,
        advances: bool,
        physical_base: int,
        store_timestamp: int,
        id_prefix: str,
    ) -> str: ...


# A group entry: topic, body, properties, queue id, flag, SYSFLAG, born timestamp, reconsume times;
# with `src`, the body is where it starts in `src` (an int) and ends at `ends[k]`.
GroupEntry = tuple[str, bytes, str, int, int, int, int, int]
SpanEntry = tuple[str, int, str, int, int, int, int, int]


class EncodeGroup(Protocol):
    def __call__(
        self,
        entries: Sequence[GroupEntry] | Sequence[SpanEntry],
        born_host: message.HostAddress,
        store_host: message.HostAddress,
        src: bytes | None = None,
        ends: list[int] | None = None,
    ) -> bytearray: ...


class StampGroup(Protocol):
    def __call__(
        self,
        buf: bytearray,
        pos: int,
        keys: list[str],
        table: dict[str, int],
        queue_offsets: list[int],
        physical_base: int,
        store_timestamp: int,
        id_prefix: str,
    ) -> list[str]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Codecs:
    """One implementation of every codec of the formats family (built by keyword)."""

    name: str
    encode_record: Callable[[MessageInner, int], EncodedRecord]
    decode_records: Callable[[bytes | bytearray | memoryview], list[StoredRecord]]
    place_record: PlaceRecord
    encode_batch_records: Callable[[bytes | bytearray | memoryview, batch.BatchTarget], batch.EncodedBatch]
    stamp_batch: StampBatch
    send_properties: Callable[[str, str], SendProperties]
    encode_group: EncodeGroup | None = None  # compiled only: the coalescing lane is off without it
    stamp_group: StampGroup | None = None


REFERENCE: Final = Codecs(
    name="reference",
    encode_record=record_ref.encode_record,
    decode_records=record.decode_records,
    place_record=record.place_record,
    encode_batch_records=batch.encode_batch_records,
    stamp_batch=record_ref.stamp_batch,
    send_properties=message.send_properties,
)

# The compiled modules, each providing some of the `Codecs` fields under the same names.
NATIVE_MODULES: Final = (
    "rocketlite.protocol.formats._native._record",
    "rocketlite.protocol.formats._native._send",
)

CHOSEN: Final = native.load(REFERENCE, NATIVE_MODULES)

encode_record: Final = CHOSEN.encode_record
decode_records: Final = CHOSEN.decode_records
place_record: Final = CHOSEN.place_record
encode_batch_records: Final = CHOSEN.encode_batch_records
stamp_batch: Final = CHOSEN.stamp_batch
send_properties: Final = CHOSEN.send_properties
encode_group: Final = CHOSEN.encode_group
stamp_group: Final = CHOSEN.stamp_group
