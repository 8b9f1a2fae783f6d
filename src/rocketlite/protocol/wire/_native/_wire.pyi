"""Type stubs of the compiled wire core (`_wire.pyx`): the same signatures as the Python codecs
it twins (`frame_codec`, `json_header`, `command`)."""

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.wire.command import RemotingCommand

def encode_json_header(cmd: RemotingCommand) -> bytes: ...
def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand: ...
def encode_rocketmq_header(cmd: RemotingCommand) -> bytes: ...
def decode_rocketmq_header(data: bytes | memoryview) -> RemotingCommand: ...
def encode_command(cmd: RemotingCommand) -> bytes: ...
def decode_frames(src: bytes, max_frame_length: int) -> tuple[list[RemotingCommand], int]: ...
def encode_send_ok(
    opaque: int,
    serialize_type: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: str,
    transaction_id: str | None,
) -> bytes: ...
def encode_send_oks(
    answers: list[tuple[int, SerializeType, int, str | None]],
    ids: list[str],
    queue_offsets: list[int],
    region: str,
    trace_on: str,
) -> bytes: ...
