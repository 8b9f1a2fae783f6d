"""The wire family's chooser: the compiled per-request codecs or their references.

Each codec here has a reference written for clarity and a compiled twin in `_native/` that gives
the same commands, bytes and errors, pinned together by the differential tests
(`tests/protocol/test_native_wire.py`, `test_native_send_header.py`, `test_native_pull_header.py`,
`test_native_send_response.py`):

* `encode_json_header`, `decode_json_header` (JSON remoting headers): `json_header_ref`;
* `decode_frames`, `encode_command` (every complete frame of a read, a whole frame for a
  command): `frame_codec` over the JSON header reference;
* `decode_rocketmq_header`, `encode_rocketmq_header` (binary headers): `command`;
* `encode_send_ok` (the SUCCESS answer to a stored send, a whole frame from its values):
  `send_response.send_ok_over` over the frame encoder;
  (all of these compiled in `_native/_wire.pyx`)
* `decode_send_header_v2` (the letter-keyed header of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE),
  `decode_pull_header` (PULL_MESSAGE): the classes' generated decoders
  (`custom_header.decoder_for`); compiled in `_native/_headers.pyx`;
* `gather_sends`, `gather_raw_sends`, `encode_send_oks` (the SEND_MESSAGE_V2 coalescing lane's
  per-read calls: the common-path requests of a read, as commands or as the read's bytes, to
  their records' entries, keys and answers; those answers as one bytes): `send_lane` over the
  references above; compiled in `_native/_send_lane.pyx` and `_native/_wire.pyx`
  (`tests/protocol/test_native_send_lane.py`, `test_native_raw_sends.py`);
* `read_raw_pull`, `encode_pull_found` (the PULL_MESSAGE lane's per-request calls: a pull read
  from a read's bytes, the FOUND answer's frame up to its body): `pull_lane` over the references
  above; compiled in `_native/_send_lane.pyx` (`tests/protocol/test_native_pull_lane.py`);
* `read_raw_batch` (the SEND_BATCH_MESSAGE lane's read of a request from a read's bytes):
  `batch_lane` over the references above; compiled in `_native/_send_lane.pyx`
  (`tests/protocol/test_native_batch_lane.py`).

`rocketlite.native` holds the one setting (`ROCKETLITE_NATIVE`) every family's chooser reads;
the frame layer, the broker and the clients import these names from here and nowhere else.
`fastjson.quote` (JSON string literals) has no compiled twin and is not chosen: its fast form
`quote_plain`, which `fastjson.dumps` (JSON bodies) calls, is pinned to `quote_reference` by
`tests/protocol/test_fastpath.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from rocketlite import native
from rocketlite.protocol.wire import command, json_header_ref
from rocketlite.protocol.wire.batch_lane import ReadRawBatch, read_raw_batch_over
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.custom_header import decoder_for
from rocketlite.protocol.wire.frame_codec import (
    DecodeFrames,
    EncodeCommand,
    decode_frames_over,
    encode_command_over,
)
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.protocol.wire.pull_lane import (
    EncodePullFound,
    ReadRawPull,
    encode_pull_found_over,
    read_raw_pull_over,
)
from rocketlite.protocol.wire.send_lane import (
    EncodeSendOks,
    GatherRawSends,
    GatherSends,
    encode_send_oks_over,
    gather_raw_sends_over,
    gather_sends_over,
)
from rocketlite.protocol.wire.send_response import EncodeSendOk, send_ok_over

__all__ = [
    "CHOSEN",
    "NATIVE_MODULES",
    "REFERENCE",
    "Codecs",
    "decode_frames",
    "decode_json_header",
    "decode_pull_header",
    "decode_rocketmq_header",
    "decode_send_header_v2",
    "encode_command",
    "encode_json_header",
    "encode_pull_found",
    "encode_rocketmq_header",
    "encode_send_ok",
    "encode_send_oks",
    "gather_raw_sends",
    "gather_sends",
    "read_raw_batch",
    "read_raw_pull",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Codecs:
    """One implementation of every codec of the wire family (built by keyword)."""

    name: str
    encode_json_header: Callable[[RemotingCommand], bytes]
    decode_json_header: Callable[[bytes | bytearray | memoryview], RemotingCommand]
    decode_frames: DecodeFrames
    encode_command: EncodeCommand
    decode_rocketmq_header: Callable[[bytes | memoryview], RemotingCommand]
    encode_rocketmq_header: Callable[[RemotingCommand], bytes]
    encode_send_ok: EncodeSendOk
    decode_send_header_v2: Callable[[Mapping[str, str] | None], SendMessageRequestHeader]
    decode_pull_header: Callable[[Mapping[str, str] | None], PullMessageRequestHeader]
    gather_sends: GatherSends
    gather_raw_sends: GatherRawSends
    encode_send_oks: EncodeSendOks
    read_raw_pull: ReadRawPull
    encode_pull_found: EncodePullFound
    read_raw_batch: ReadRawBatch


_ENCODE_COMMAND_REFERENCE: Final = encode_command_over(json_header_ref.encode_json_header)
_SEND_HEADER_REFERENCE: Final = decoder_for(SendMessageRequestHeader, SendMessageRequestHeader.V2_NAMES)
_SEND_OK_REFERENCE: Final = send_ok_over(_ENCODE_COMMAND_REFERENCE)
_PULL_HEADER_REFERENCE: Final = decoder_for(PullMessageRequestHeader, None)

REFERENCE: Final = Codecs(
    name="reference",
    encode_json_header=json_header_ref.encode_json_header,
    decode_json_header=json_header_ref.decode_json_header,
    decode_frames=decode_frames_over(json_header_ref.decode_json_header),
    encode_command=_ENCODE_COMMAND_REFERENCE,
    decode_rocketmq_header=command.decode_rocketmq_header,
    encode_rocketmq_header=command.encode_rocketmq_header,
    encode_send_ok=_SEND_OK_REFERENCE,
    # SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE headers (letters a..n): the class's generated decoder.
    decode_send_header_v2=_SEND_HEADER_REFERENCE,
    # PULL_MESSAGE headers: the class's generated decoder (what `from_ext` calls).
    decode_pull_header=_PULL_HEADER_REFERENCE,
    # the coalescing lane's per-read calls (`send_lane`): over the references above
    gather_sends=gather_sends_over(_SEND_HEADER_REFERENCE),
    gather_raw_sends=gather_raw_sends_over(
        decode_frames_over(json_header_ref.decode_json_header), gather_sends_over(_SEND_HEADER_REFERENCE)
    ),
    encode_send_oks=encode_send_oks_over(_SEND_OK_REFERENCE),
    # the PULL_MESSAGE lane's per-request calls (`pull_lane`): over the references above
    read_raw_pull=read_raw_pull_over(
        decode_frames_over(json_header_ref.decode_json_header), _PULL_HEADER_REFERENCE
    ),
    encode_pull_found=encode_pull_found_over(_ENCODE_COMMAND_REFERENCE),
    # the SEND_BATCH_MESSAGE lane's read (`batch_lane`): over the references above
    read_raw_batch=read_raw_batch_over(
        decode_frames_over(json_header_ref.decode_json_header), _SEND_HEADER_REFERENCE
    ),
)

# The compiled modules, each providing some of the `Codecs` fields under the same names.
NATIVE_MODULES: Final = (
    "rocketlite.protocol.wire._native._wire",
    "rocketlite.protocol.wire._native._headers",
    "rocketlite.protocol.wire._native._send_lane",
)

CHOSEN: Final = native.load(REFERENCE, NATIVE_MODULES)

encode_json_header: Final = CHOSEN.encode_json_header
decode_json_header: Final = CHOSEN.decode_json_header
decode_frames: Final = CHOSEN.decode_frames
encode_command: Final = CHOSEN.encode_command
decode_rocketmq_header: Final = CHOSEN.decode_rocketmq_header
encode_rocketmq_header: Final = CHOSEN.encode_rocketmq_header
encode_send_ok: Final = CHOSEN.encode_send_ok
decode_send_header_v2: Final = CHOSEN.decode_send_header_v2
decode_pull_header: Final = CHOSEN.decode_pull_header
gather_sends: Final = CHOSEN.gather_sends
gather_raw_sends: Final = CHOSEN.gather_raw_sends
encode_send_oks: Final = CHOSEN.encode_send_oks
read_raw_pull: Final = CHOSEN.read_raw_pull
encode_pull_found: Final = CHOSEN.encode_pull_found
read_raw_batch: Final = CHOSEN.read_raw_batch
