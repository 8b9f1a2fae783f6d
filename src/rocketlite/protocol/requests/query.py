"""Messages by key or id: QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

QUERY_MESSAGE asks one broker's index for a key (a KEYS entry, or with `unique` the client's
UNIQ_KEY). The index is by key hash, so the records may include collisions: `matches_key` is the
filter every caller applies, the Java client's rule (exact key among the KEYS, or the UNIQ_KEY).
VIEW_MESSAGE_BY_ID reads the record at a commit-log offset (decoded from an offsetMsgId).
"""

from __future__ import annotations

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.formats.speedups import decode_records
from rocketlite.protocol.message import KEY_SEPARATOR, MessageConst
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import QueryMessageRequestHeader, ViewMessageRequestHeader

QUERY_END_MS = (1 << 63) - 1  # Long.MAX_VALUE: "up to now" for a query's end timestamp


def build_query_message(
    topic: str, key: str, *, max_num: int, begin_ms: int = 0, end_ms: int = QUERY_END_MS, unique: bool
) -> RemotingCommand:
    """QUERY_MESSAGE for `key` stored within [begin_ms, end_ms]; `unique`: `key` is a UNIQ_KEY."""
    header = QueryMessageRequestHeader(
        topic=topic,
        key=key,
        max_num=max_num,
        begin_timestamp=begin_ms,
        end_timestamp=end_ms,
        unique_key_query=unique,
    )
    return make_request(RequestCode.QUERY_MESSAGE, header.to_ext())


def parse_query_message(response: RemotingCommand) -> list[StoredRecord]:
    """The records the index found (hash collisions included); none on QUERY_NOT_FOUND."""
    code = expect(response, RequestCode.QUERY_MESSAGE, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
    if code == ResponseCode.QUERY_NOT_FOUND:
        return []
    return decode_records(response.body or b"")


def matches_key(rec: StoredRecord, topic: str, key: str, *, unique: bool) -> bool:
    """Whether `rec` really is a hit for (topic, key), not an index hash collision."""
    if rec.topic != topic:
        return False
    if unique:
        return rec.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key
    return key in (rec.get_property(MessageConst.KEYS) or "").split(KEY_SEPARATOR)


def build_view_message(commit_log_offset: int) -> RemotingCommand:
    ext = ViewMessageRequestHeader(offset=commit_log_offset).to_ext()
    return make_request(RequestCode.VIEW_MESSAGE_BY_ID, ext)


def parse_view_message(response: RemotingCommand) -> StoredRecord | None:
    """The record at the offset asked for; None when the body does not decode."""
    expect(response, RequestCode.VIEW_MESSAGE_BY_ID)
    records = decode_records(response.body or b"")
    return records[0] if records else None
