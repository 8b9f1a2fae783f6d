"""Queue and consumer offsets: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME
(32), SEARCH_OFFSET_BY_TIMESTAMP (29), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15).

Each answer is one number in the response header. QUERY_CONSUMER_OFFSET's QUERY_NOT_FOUND (22)
means "the group has committed nothing for this queue" and parses as None; what that means (start
from the end, -1, "no offset" in a table) is the caller's choice.
"""

from __future__ import annotations

from typing import Final

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

QueueRequestHeader = (
    GetMaxOffsetRequestHeader | GetMinOffsetRequestHeader | GetEarliestMsgStoretimeRequestHeader
)
OffsetResponseHeader = GetMaxOffsetResponseHeader | GetMinOffsetResponseHeader | SearchOffsetResponseHeader


# The per-queue reads: (topic, queueId) in, one number out.
_QUEUE_REQUEST: Final[dict[int, type[QueueRequestHeader]]] = {
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
}


def _per_queue(code: int, topic: str, queue_id: int) -> RemotingCommand:
    return make_request(code, _QUEUE_REQUEST[code](topic=topic, queue_id=queue_id).to_ext())


def _offset(response: RemotingCommand, code: int, header: type[OffsetResponseHeader]) -> int:
    expect(response, code)
    return header.from_ext(response.ext_fields).offset


def build_get_max_offset(topic: str, queue_id: int) -> RemotingCommand:
    return _per_queue(RequestCode.GET_MAX_OFFSET, topic, queue_id)


def parse_get_max_offset(response: RemotingCommand) -> int:
    """The next offset to be written (the number of entries the queue ever had)."""
    return _offset(response, RequestCode.GET_MAX_OFFSET, GetMaxOffsetResponseHeader)


def build_get_min_offset(topic: str, queue_id: int) -> RemotingCommand:
    return _per_queue(RequestCode.GET_MIN_OFFSET, topic, queue_id)


def parse_get_min_offset(response: RemotingCommand) -> int:
    """The first offset still stored."""
    return _offset(response, RequestCode.GET_MIN_OFFSET, GetMinOffsetResponseHeader)


def build_search_offset(topic: str, queue_id: int, timestamp_ms: int) -> RemotingCommand:
    ext = SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp_ms).to_ext()
    return make_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)


def parse_search_offset(response: RemotingCommand) -> int:
    """The first offset stored at or after the timestamp asked for."""
    return _offset(response, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetResponseHeader)


def build_get_earliest_msg_store_time(topic: str, queue_id: int) -> RemotingCommand:
    return _per_queue(RequestCode.GET_EARLIEST_MSG_STORETIME, topic, queue_id)


def parse_get_earliest_msg_store_time(response: RemotingCommand) -> int:
    """The store timestamp (ms) of the queue's first message."""
    expect(response, RequestCode.GET_EARLIEST_MSG_STORETIME)
    return GetEarliestMsgStoretimeResponseHeader.from_ext(response.ext_fields).timestamp


def build_query_consumer_offset(group: str, topic: str, queue_id: int) -> RemotingCommand:
    ext = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id).to_ext()
    return make_request(RequestCode.QUERY_CONSUMER_OFFSET, ext)


def parse_query_consumer_offset(response: RemotingCommand) -> int | None:
    """The group's committed offset; None when the broker has none (QUERY_NOT_FOUND)."""
    code = expect(
        response, RequestCode.QUERY_CONSUMER_OFFSET, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
    )
    if code == ResponseCode.QUERY_NOT_FOUND:
        return None
    return QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).offset


def build_update_consumer_offset(
    group: str, topic: str, queue_id: int, offset: int, *, oneway: bool = False
) -> RemotingCommand:
    """Commit `offset` (the next one to read); `oneway` for the periodic commits nobody waits on."""
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
    )
    return make_request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext(), oneway=oneway)


def parse_update_consumer_offset(response: RemotingCommand) -> None:
    expect(response, RequestCode.UPDATE_CONSUMER_OFFSET)
