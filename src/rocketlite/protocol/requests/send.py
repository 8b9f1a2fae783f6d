"""SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): `build_send`, `build_send_batch`, `parse_send`.

Both use the one-letter V2 header (`SendMessageRequestHeader.to_ext_v2`), as every Java client
since 4.x does. A batch body is `protocol.batch.encode_batch`'s output and its header carries
batch=true; the message properties of a batch ride in each entry, so the header's are only the
ones that apply to the whole request (WAIT).

Four codes mean "stored" (`processSendResponse`): SUCCESS, FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE; anything else is a refusal (`ResponseError`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import SendMessageRequestHeader, SendMessageResponseHeader

DEFAULT_TOPIC_QUEUE_NUMS: Final = 4  # the Java client's defaultTopicQueueNums


class SendStatus(enum.Enum):
    """How a send ended; anything but SEND_OK still means the message is stored (Java semantics)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


SEND_STATUS: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class SendResponse:
    """A stored send: `offset_msg_id` is the broker's id (comma-joined for a batch), `queue_offset`
    the first message's offset. The client-side UNIQ_KEY is the caller's to remember."""

    status: SendStatus
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True


def build_send(
    *,
    group: str,
    topic: str,
    queue_id: int,
    body: bytes,
    properties: str,
    born_timestamp: int,
    sys_flag: int = 0,
    flag: int = 0,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    default_topic: str = DEFAULT_TOPIC,
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    broker_name: str | None = None,
    batch: bool = False,
) -> RemotingCommand:
    """A SEND_MESSAGE_V2 request for one message (`properties`: `properties_to_string` form), or
    with `batch` a SEND_BATCH_MESSAGE whose body is `encode_batch(entries)` (see `build_send_batch`)."""
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        flag=flag,
        properties=properties,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
        batch=batch,
        bname=broker_name,
    )
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    return make_request(code, header.to_ext_v2(), body)


def build_send_batch(
    *,
    group: str,
    topic: str,
    queue_id: int,
    body: bytes,
    properties: str,
    born_timestamp: int,
    default_topic: str = DEFAULT_TOPIC,
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    broker_name: str | None = None,
) -> RemotingCommand:
    """A SEND_BATCH_MESSAGE request; `body` is `encode_batch(entries)`, `properties` the ones that
    apply to the whole request. Batches carry no sys flag, flag or reconsume counts."""
    return build_send(
        group=group,
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=properties,
        born_timestamp=born_timestamp,
        default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums,
        broker_name=broker_name,
        batch=True,
    )


def parse_send(response: RemotingCommand, request_code: int = RequestCode.SEND_MESSAGE_V2) -> SendResponse:
    """The stored message's ids and position; `ResponseError` when the broker did not store it."""
    status = SEND_STATUS[expect(response, request_code, SEND_STATUS)]
    header = SendMessageResponseHeader.from_ext(response.ext_fields)
    return SendResponse(
        status=status,
        offset_msg_id=header.msg_id,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        transaction_id=header.transaction_id,
        region_id=header.msg_region,
        trace_on=header.trace_on != "false",
    )
