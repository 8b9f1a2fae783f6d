"""The answer to a stored send, as a whole frame: SUCCESS with RocketMQ's SendMessageResponseHeader.

Every stored send (SEND_MESSAGE, V2, a batch) is answered with the same command: code SUCCESS,
the broker's language and version, the request's opaque and serialization, the RESPONSE flag, no
remark, no body, and the ext fields msgId, queueId, queueOffset, MSG_REGION and TRACE_ON (plus
transactionId, the message's UNIQ_KEY, when it has one: RocketMQ 5.x sets it on every single
send). Answering sends is the hottest write of the broker, so it
has a codec of its own (`speedups.encode_send_ok`): the compiled twin writes the frame straight
from these values, without the ext dict, the command object or the general encoder's key sort.

`send_ok_over(encode_command)` is the reference: the command built as the send processor always
built it, encoded by the given frame encoder; the compiled twin must give the same bytes
(`tests/protocol/test_native_send_response.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from rocketlite.protocol.codes import CommandFlag, ResponseCode, SerializeType
from rocketlite.protocol.wire.command import DEFAULT_LANGUAGE, DEFAULT_VERSION, RemotingCommand

__all__ = ["EncodeSendOk", "send_ok_command", "send_ok_ext", "send_ok_over"]

_SUCCESS: Final = int(ResponseCode.SUCCESS)
_RESPONSE_FLAG: Final = int(CommandFlag.RESPONSE)


class EncodeSendOk(Protocol):
    def __call__(
        self,
        opaque: int,
        serialize_type: SerializeType,
        msg_id: str,
        queue_id: int,
        queue_offset: int,
        region: str,
        trace_on: str,
        transaction_id: str | None,
    ) -> bytes: ...


def send_ok_ext(
    msg_id: str, queue_id: int, queue_offset: int, region: str, trace_on: str, transaction_id: str | None
) -> dict[str, str]:
    """The header fields of an answer for a stored message (RocketMQ's SendMessageResponseHeader
    plus MSG_REGION and TRACE_ON): the same for SUCCESS and for a stored send whose flush or
    replication timed out."""
    ext = {
        "msgId": msg_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "MSG_REGION": region,
        "TRACE_ON": trace_on,
    }
    if transaction_id is not None:
        ext["transactionId"] = transaction_id
    return ext


def send_ok_command(
    opaque: int,
    serialize_type: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: str,
    transaction_id: str | None,
) -> RemotingCommand:
    """The SUCCESS answer to a stored send (what `make_response(request, SUCCESS, None, ext)`
    builds, without copying `ext`)."""
    ext = send_ok_ext(msg_id, queue_id, queue_offset, region, trace_on, transaction_id)
    return RemotingCommand(
        _SUCCESS, DEFAULT_LANGUAGE, DEFAULT_VERSION, opaque, _RESPONSE_FLAG, None, ext, None, serialize_type
    )


def send_ok_over(encode_command: Callable[[RemotingCommand], bytes]) -> EncodeSendOk:
    """`encode_send_ok` over a frame encoder: the answer command, encoded whole."""

    def encode_send_ok(
        opaque: int,
        serialize_type: SerializeType,
        msg_id: str,
        queue_id: int,
        queue_offset: int,
        region: str,
        trace_on: str,
        transaction_id: str | None,
    ) -> bytes:
        return encode_command(
            send_ok_command(
                opaque, serialize_type, msg_id, queue_id, queue_offset, region, trace_on, transaction_id
            )
        )

    return encode_send_ok
