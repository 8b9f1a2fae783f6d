"""The one place that picks the implementation of every hot-path codec.

Each codec below has a reference implementation written for clarity and a fast one that gives
the same bytes and results (`tests/protocol/test_fastpath.py` pins `PYTHON` to `REFERENCE`):

* `encode_record`, `encode_records`, `scan_messages`, `scan_record` (commit-log records): reference
  `record_codec_py`, fast `record_codec`;
* `encode_json_header`, `decode_json_header` (remoting headers): reference `json_header_py`,
  fast `json_header`;
* `quote` (a JSON string literal as fastjson writes it): reference `fastjson.quote_reference`,
  fast `fastjson.quote_plain`.

The store, the frame layer, the broker, the client and Spark import these names from here and
nowhere else, so the block at the end decides for all of them, once, at import:

* `ROCKETLITE_NATIVE=0` in the environment: the reference implementations (to check them, or to
  rule the fast paths out when hunting a bug); `REFERENCE_ONLY` is then True, and the Spark
  reader takes its per-record decoder instead of the columnar one;
* otherwise the optimized pure-Python ones.

A compiled module slots into the `else` branch of that block, preferred over the pure-Python
set: ``try: from rocketlite._native import NATIVE as CHOSEN`` then ``except ImportError: CHOSEN =
PYTHON`` (the module builds a `Codecs` of its functions). That is a two-line change here and
nowhere else.

`fastjson`'s own `dumps` (JSON bodies, not a per-request path) keeps calling its fast `quote`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from rocketlite.protocol import fastjson, json_header, json_header_py, record_codec, record_codec_py
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.record import (
    DispatchRequest,
    EncodedRecord,
    EncodedRecords,
    MessageInner,
    ScanResult,
)

__all__ = [
    "CHOSEN",
    "PYTHON",
    "REFERENCE",
    "REFERENCE_ONLY",
    "Codecs",
    "decode_json_header",
    "encode_json_header",
    "encode_record",
    "encode_records",
    "quote",
    "scan_messages",
    "scan_record",
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
    quote: Callable[[str], str]


REFERENCE: Final = Codecs(
    "reference",
    record_codec_py.encode_record,
    record_codec_py.encode_records,
    record_codec_py.scan_messages,
    record_codec_py.scan_record,
    json_header_py.encode_json_header,
    json_header_py.decode_json_header,
    fastjson.quote_reference,
)
PYTHON: Final = Codecs(
    "python",
    record_codec.encode_record,
    record_codec.encode_records,
    record_codec.scan_messages,
    record_codec.scan_record,
    json_header.encode_json_header,
    json_header.decode_json_header,
    fastjson.quote_plain,
)

# -- the one block that picks --------------------------------------------------------------------
REFERENCE_ONLY: Final = os.environ.get("ROCKETLITE_NATIVE", "").strip() == "0"
CHOSEN: Codecs
if REFERENCE_ONLY:  # noqa: SIM108 - the compiled set adds a branch to this block
    CHOSEN = REFERENCE
else:  # a compiled set goes first here (see the module docstring), PYTHON its fallback
    CHOSEN = PYTHON

encode_record: Final = CHOSEN.encode_record
encode_records: Final = CHOSEN.encode_records
scan_messages: Final = CHOSEN.scan_messages
scan_record: Final = CHOSEN.scan_record
encode_json_header: Final = CHOSEN.encode_json_header
decode_json_header: Final = CHOSEN.decode_json_header
quote: Final = CHOSEN.quote
