"""Consumer offsets and queue positions: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX/MIN_OFFSET
(30/31), GET_EARLIEST_MSG_STORETIME (32), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_ALL_CONSUMER_OFFSET (43).

These are what a consumer asks before its first pull (see the protocol notes, 6.6): the answers
decide where a new group starts, so QUERY_CONSUMER_OFFSET follows Java's
`ConsumerManageProcessor.queryConsumerOffset` exactly: a stored offset wins; without one, a queue
that still starts at offset 0 and holds a message there answers 0 (a new group reads a young queue
from the beginning), and otherwise QUERY_NOT_FOUND (22) sends the client to its consumeFromWhere.
Java's condition is `checkInMemByConsumeOffset(topic, queueId, 0, 1)`: false for a queue with no
message at 0 (an empty one), true otherwise here, where the store maps its files and nothing is
"swapped out" the way Java measures it.

UPDATE_CONSUMER_OFFSET stores whatever arrives, -1 included (ali-ons sends -1 for an offset of 0
and its "one-way" updates carry flag 0, so they get an answer it ignores).
"""

from __future__ import annotations

import logging

from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand, make_response
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
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.consumer_offset")

QUERY_NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


class ConsumerOffsetProcessor:
    """Offset bookkeeping requests; reads the store, writes the offset table (persisted by the
    controller every `flushConsumerOffsetInterval`)."""

    def __init__(self, store: StoreAPI, offsets: ConsumerOffsetTable) -> None:
        self.store = store
        self.offsets = offsets

    def query_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset QUERY_CONSUMER_OFFSET answers, or None for QUERY_NOT_FOUND."""
        offset = self.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.store
        has_first = store.get_max_offset_in_queue(topic, queue_id) > 0  # a message at offset 0
        if store.get_min_offset_in_queue(topic, queue_id) <= 0 and has_first:
            return 0
        return None

    def handle_query(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset is None:
            return make_response(request, ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)
        ext = QueryConsumerOffsetResponseHeader(offset=offset).to_ext()
        return make_response(request, ResponseCode.SUCCESS, None, ext)

    def handle_update(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        self.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        log.debug(
            "%s committed %s@%s:%d = %d",
            conn.remote_address, h.topic, h.consumer_group, h.queue_id, h.commit_offset,
        )  # fmt: skip
        return make_response(request, ResponseCode.SUCCESS)

    def handle_max(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """The next offset to be written (the number of units, padding included)."""
        del conn
        h = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return make_response(
            request, ResponseCode.SUCCESS, None, GetMaxOffsetResponseHeader(offset=offset).to_ext()
        )

    def handle_min(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Java's store creates a missing queue on lookup and answers 0; ours says -1 for it."""
        del conn
        h = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        offset = max(self.store.get_min_offset_in_queue(h.topic, h.queue_id), 0)
        return make_response(
            request, ResponseCode.SUCCESS, None, GetMinOffsetResponseHeader(offset=offset).to_ext()
        )

    def handle_earliest(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Store time of the queue's first message; -1 when there is none (Java's value)."""
        del conn
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        ts = self.store.get_earliest_message_time(h.topic, h.queue_id)
        ext = GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext()
        return make_response(request, ResponseCode.SUCCESS, None, ext)

    def handle_search(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Offset of the first message stored at or after the timestamp."""
        del conn
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return make_response(
            request, ResponseCode.SUCCESS, None, SearchOffsetResponseHeader(offset=offset).to_ext()
        )

    def handle_all(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """The consumerOffset.json text, as the slave's offset sync reads it."""
        del conn
        with self.offsets.lock:
            text = self.offsets.encode()
        if not text:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "No consumer offset in this broker")
        return make_response(request, ResponseCode.SUCCESS, body=text.encode("utf-8"))
