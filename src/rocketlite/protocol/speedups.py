"""The one place that picks the implementation of every hot-path codec.

Each codec below has a reference implementation written for clarity, and most have a compiled
twin (`protocol/_native/*.pyx`) that gives the same bytes and results, pinned to the reference by
the differential tests (`tests/protocol/test_native_*.py`, `tests/store/test_native_*.py`). There
is no third, optimized pure-Python tier: where the compiled twin is missing, the reference runs.

* `encode_record`, `encode_records`, `scan_messages`, `scan_record` (commit-log records):
  `record_ref`;
* `encode_json_header`, `decode_json_header` (remoting headers): `json_header_ref`;
* `check_records`, `select_units`, `pack_units`, `queue_runs`, `index_entries`,
  `dispatch_batch` (recovery's segment walk, a pull's choice of consume-queue units, units to
  bytes, a dispatched batch's consume-queue runs and index entries, all of dispatch in one
  call): `dispatch_codec`;
* `decode_frames`, `encode_command` (remoting frames: every complete frame of a read, a whole
  frame for a command): `frame_codec` over the JSON header codec;
  `decode_rocketmq_header`, `encode_rocketmq_header` (binary headers): `command`.
* `decode_records` (the records of a PULL or query body, for the SDK, the admin CLI and Spark):
  `record.decode_records`.
* `decode_record_columns`, `first_crc_mismatch`, `first_invalid_record`, `record_starts` (records
  as Arrow column buffers, many records' body CRCs and structure checked at once, the hop from
  record to record of a raw scan; for the Spark readers): `record_columns`.
* `decode_send_header_v2` (the letter-keyed header of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE): the
  class's generated decoder (`custom_header.decoder_for`).
* `decode_pull_header` (the PULL_MESSAGE request header): the class's generated decoder.
* `stamp_records` (an encoded batch placed under the commit log's lock: offsets and store time
  patched in, msg ids out): `record_stamp`.
* `place_record` (a single encoded record placed under the lock: offsets and store time patched
  in, copied into the segment, msg id out): `record.place_record`.
* `blake2b_digests` (many BLAKE2b digests in one call, the Spark sink's message ids):
  `row_digests`.
* `encode_send_ok` (the SUCCESS answer to a stored send, a whole frame from its values):
  `send_response.send_ok_over` over the frame encoder;
* `send_properties` (the send processor's properties rewrite): `message.send_properties`.
* `encode_batch_records`, `stamp_batch` (a SEND_BATCH_MESSAGE body straight into commit-log
  records, no message objects; such a batch stamped under the lock): `batch` and
  `record_stamp`.

The store, the frame layer, the broker, the client and Spark import these names from here and
nowhere else, so the block at the end decides for all of them, once, at import:

* `ROCKETLITE_NATIVE=0` in the environment: the reference implementations (to check them, or to
  rule the compiled ones out when hunting a bug); `REFERENCE_ONLY` is then True, and the Spark
  reader takes its per-record decoder instead of the columnar one;
* otherwise the compiled twins (built at `pip install`) for every codec they provide, and the
  references for the rest. A compiled module that is not there (no C compiler at install time)
  is said once, as a warning, and its codecs fall back to the references; `ROCKETLITE_NATIVE=1`
  makes that an error instead (CI sets it: a broken build must not pass as a slow one).

`fastjson.quote` (JSON string literals) has no compiled twin and is not chosen here: its fast
form `quote_plain`, which `fastjson.dumps` (JSON bodies) calls, is pinned to `quote_reference`
by `tests/protocol/test_fastpath.py`.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import mmap
import os
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from rocketlite.protocol import dispatch_codec, record_columns, row_digests
from rocketlite.protocol import message as message_codec
from rocketlite.protocol.formats import batch as batch_codec
from rocketlite.protocol.formats import record as record_format
from rocketlite.protocol.formats import record_ref, record_stamp
from rocketlite.protocol.formats.consume_queue_unit import Unit
from rocketlite.protocol.formats.record import (
    DispatchRequest,
    EncodedRecord,
    EncodedRecords,
    MessageInner,
    ScanResult,
)
from rocketlite.protocol.message import HostAddress, SendProperties
from rocketlite.protocol.wire import command as command_codec
from rocketlite.protocol.wire import json_header_ref
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.custom_header import decoder_for
from rocketlite.protocol.wire.frame_codec import (
    DecodeFrames,
    EncodeCommand,
    decode_frames_over,
    encode_command_over,
)
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.protocol.wire.send_response import EncodeSendOk, send_ok_over

__all__ = [
    "CHOSEN",
    "MISSING",
    "NATIVE_MODULES",
    "REFERENCE",
    "REFERENCE_ONLY",
    "Codecs",
    "check_records",
    "decode_frames",
    "decode_json_header",
    "decode_pull_header",
    "decode_record_columns",
    "decode_records",
    "decode_rocketmq_header",
    "decode_send_header_v2",
    "dispatch_batch",
    "encode_batch_records",
    "encode_command",
    "encode_json_header",
    "encode_record",
    "encode_records",
    "encode_rocketmq_header",
    "encode_send_ok",
    "first_crc_mismatch",
    "first_invalid_record",
    "index_entries",
    "load_native",
    "pack_units",
    "place_record",
    "queue_runs",
    "record_starts",
    "scan_messages",
    "scan_record",
    "select_units",
    "send_properties",
    "stamp_batch",
    "stamp_records",
    "warn_if_missing",
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
    ) -> dispatch_codec.DispatchBatch: ...


class IndexEntries(Protocol):
    def __call__(
        self, reqs: Sequence[DispatchRequest], end_offset: int
    ) -> tuple[array[int], array[int], array[int]]: ...


class StampRecords(Protocol):
    def __call__(
        self,
        buf: bytearray,
        msgs: Sequence[MessageInner],
        queue_offset: int,
        advances: bool,
        physical_base: int,
        store_timestamp: int,
        id_prefix: str,
    ) -> str: ...


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


class EncodeBatchRecords(Protocol):
    def __call__(
        self,
        body: bytes | bytearray | memoryview,
        header_properties: str,
        cluster: str,
        topic: str,
        born_host: HostAddress,
        store_host: HostAddress,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        reconsume_times: int,
        max_message_size: int,
    ) -> batch_codec.EncodedBatch: ...


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


@dataclass(frozen=True, slots=True)
class Codecs:
    """One implementation of every hot-path codec."""

    name: str
    encode_record: Callable[[MessageInner, int], EncodedRecord]
    encode_records: Callable[[Sequence[MessageInner], int], EncodedRecords]
    scan_messages: ScanMessages
    scan_record: ScanRecord
    encode_json_header: Callable[[RemotingCommand], bytes]
    decode_json_header: Callable[[bytes | bytearray | memoryview], RemotingCommand]
    decode_frames: DecodeFrames
    encode_command: EncodeCommand
    decode_rocketmq_header: Callable[[bytes | memoryview], RemotingCommand]
    encode_rocketmq_header: Callable[[RemotingCommand], bytes]
    decode_records: Callable[[bytes | bytearray | memoryview], list[record_format.StoredRecord]]
    send_properties: Callable[[str, str], SendProperties]
    check_records: CheckRecords
    select_units: SelectUnits
    pack_units: Callable[[Sequence[Unit]], bytes]
    index_entries: IndexEntries
    queue_runs: Callable[[Sequence[DispatchRequest]], list[dispatch_codec.QueueBatch]]
    dispatch_batch: DispatchBatch
    decode_record_columns: Callable[
        [bytes | bytearray | memoryview, bytes | bytearray | memoryview], record_columns.RecordColumns | None
    ]
    first_crc_mismatch: Callable[[bytes | bytearray | memoryview, bytes | bytearray | memoryview], int]
    first_invalid_record: Callable[
        [bytes | bytearray | memoryview, bytes | bytearray | memoryview, int, bool], tuple[int, int]
    ]
    record_starts: Callable[[bytes | bytearray | memoryview, int, int, int], record_columns.RecordStarts]
    stamp_records: StampRecords
    decode_send_header_v2: Callable[[Mapping[str, str] | None], SendMessageRequestHeader]
    place_record: PlaceRecord
    blake2b_digests: Callable[[bytes | bytearray | memoryview, Iterable[int]], bytes]
    decode_pull_header: Callable[[Mapping[str, str] | None], PullMessageRequestHeader]
    encode_send_ok: EncodeSendOk
    encode_batch_records: EncodeBatchRecords
    stamp_batch: StampBatch


# SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE headers (letters a..n): the generated decoder of the class.
_decode_send_header_v2_py: Final = decoder_for(SendMessageRequestHeader, SendMessageRequestHeader.V2_NAMES)
# PULL_MESSAGE headers: the generated decoder of the class (what `from_ext` calls).
_decode_pull_header_py: Final = decoder_for(PullMessageRequestHeader, None)

_ENCODE_COMMAND_REFERENCE: Final = encode_command_over(json_header_ref.encode_json_header)

REFERENCE: Final = Codecs(
    "reference",
    record_ref.encode_record,
    record_ref.encode_records,
    record_ref.scan_messages,
    record_ref.scan_record,
    json_header_ref.encode_json_header,
    json_header_ref.decode_json_header,
    decode_frames_over(json_header_ref.decode_json_header),
    _ENCODE_COMMAND_REFERENCE,
    command_codec.decode_rocketmq_header,
    command_codec.encode_rocketmq_header,
    record_format.decode_records,
    message_codec.send_properties,
    dispatch_codec.check_records,
    dispatch_codec.select_units,
    dispatch_codec.pack_units,
    dispatch_codec.index_entries,
    dispatch_codec.queue_runs,
    dispatch_codec.dispatch_batch,
    record_columns.decode_record_columns,
    record_columns.first_crc_mismatch,
    record_columns.first_invalid_record,
    record_columns.record_starts,
    record_stamp.stamp_records,
    _decode_send_header_v2_py,
    record_format.place_record,
    row_digests.blake2b_digests,
    _decode_pull_header_py,
    send_ok_over(_ENCODE_COMMAND_REFERENCE),
    batch_codec.encode_batch_records,
    record_stamp.stamp_batch,
)
# The compiled modules, each providing some of the `Codecs` fields under the same names.
NATIVE_MODULES: Final = (
    "rocketlite.protocol._native._record",
    "rocketlite.protocol._native._wire",
    "rocketlite.protocol._native._dispatch",
    "rocketlite.protocol._native._send",
    "rocketlite.protocol._native._columns",
    "rocketlite.protocol._native._digests",
)


def load_native(modules: Sequence[str] = NATIVE_MODULES) -> tuple[Codecs, list[str]]:
    """`REFERENCE` with every codec a compiled module provides replaced by it, and the modules that
    could not be imported."""
    fields = {f.name for f in dataclasses.fields(Codecs)} - {"name"}
    found: dict[str, object] = {}
    missing: list[str] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            missing.append(name)
            continue
        found.update({f: getattr(module, f) for f in fields if hasattr(module, f)})
    if not found:
        return REFERENCE, missing
    return dataclasses.replace(REFERENCE, name="native", **found), missing  # type: ignore[arg-type]


# -- the one block that picks --------------------------------------------------------------------
_SETTING: Final = os.environ.get("ROCKETLITE_NATIVE", "").strip()
REFERENCE_ONLY: Final = _SETTING == "0"
CHOSEN: Codecs
MISSING: tuple[str, ...] = ()
"""The compiled modules that could not be imported (no C compiler at install time)."""
if REFERENCE_ONLY:
    CHOSEN = REFERENCE
else:
    CHOSEN, _missing = load_native()
    if _missing and _SETTING == "1":
        raise ImportError(f"ROCKETLITE_NATIVE=1 but the compiled data plane is missing: {_missing}")
    MISSING = tuple(m.rsplit(".", 1)[1] for m in _missing)

_warned = False


def warn_if_missing() -> None:
    """Say once, through logging, that the compiled data plane is missing. Called when a server
    starts (`BrokerController.start`), after the command line has configured logging: a warning
    printed at import would bypass the configured format (JSON logs)."""
    global _warned
    if MISSING and not _warned:
        _warned = True
        logging.getLogger("rocketlite.speedups").warning(
            "compiled data plane not built (%s): running on the Python implementations; "
            "reinstall with a C compiler (make install) for full speed",
            ", ".join(MISSING),
        )


encode_record: Final = CHOSEN.encode_record
encode_records: Final = CHOSEN.encode_records
scan_messages: Final = CHOSEN.scan_messages
scan_record: Final = CHOSEN.scan_record
encode_json_header: Final = CHOSEN.encode_json_header
decode_json_header: Final = CHOSEN.decode_json_header
decode_frames: Final = CHOSEN.decode_frames
encode_command: Final = CHOSEN.encode_command
decode_rocketmq_header: Final = CHOSEN.decode_rocketmq_header
encode_rocketmq_header: Final = CHOSEN.encode_rocketmq_header
decode_records: Final = CHOSEN.decode_records
send_properties: Final = CHOSEN.send_properties
check_records: Final = CHOSEN.check_records
select_units: Final = CHOSEN.select_units
pack_units: Final = CHOSEN.pack_units
index_entries: Final = CHOSEN.index_entries
queue_runs: Final = CHOSEN.queue_runs
dispatch_batch: Final = CHOSEN.dispatch_batch
decode_record_columns: Final = CHOSEN.decode_record_columns
first_crc_mismatch: Final = CHOSEN.first_crc_mismatch
first_invalid_record: Final = CHOSEN.first_invalid_record
record_starts: Final = CHOSEN.record_starts
stamp_records: Final = CHOSEN.stamp_records
decode_send_header_v2: Final = CHOSEN.decode_send_header_v2
place_record: Final = CHOSEN.place_record
blake2b_digests: Final = CHOSEN.blake2b_digests
decode_pull_header: Final = CHOSEN.decode_pull_header
encode_send_ok: Final = CHOSEN.encode_send_ok
encode_batch_records: Final = CHOSEN.encode_batch_records
stamp_batch: Final = CHOSEN.stamp_batch
