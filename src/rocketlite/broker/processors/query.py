"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): finding stored messages without a consumer.

QUERY_MESSAGE looks a key up in the index (`topic#key`, KEYS tokens and UNIQ_KEY are indexed) for
messages stored in [beginTimestamp, endTimestamp] and answers with the records back to back, like a
pull body. Index hits are hash matches; as in Java the broker returns them unfiltered and the client
drops records whose keys differ. A unique-key query (ext `_UNIQUE_KEY_QUERY=true`, what
`viewMessage` by client msgId sends) is capped at `defaultQueryMaxNum` (32) instead of the header's
maxNum. Nothing found is QUERY_NOT_FOUND (22), which clients treat as "try the next broker".

VIEW_MESSAGE_BY_ID takes the commit-log offset the client decoded from an offsetMsgId. Unlike
Java, which returns whatever bytes sit there, the record is checked to be one (magic and lengths),
so a wrong offset is answered "not found" rather than with garbage the client cannot decode.

Both are read-only and work on a slave.
"""

from __future__ import annotations

import logging

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import RecordFormatError, decode_record
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.query")

DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum


class QueryMessageProcessor:
    def __init__(self, store: StoreAPI, *, default_query_max_num: int = DEFAULT_QUERY_MAX_NUM) -> None:
        self.store = store
        self.default_query_max_num = default_query_max_num

    def handle_query(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = self.default_query_max_num if header.unique_key_query else header.max_num
        result = self.store.query_message(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        )
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext()
        body = result.body()
        for view in result.messages:
            view.release()
        if not body:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        log.debug("query %s#%s: %d record(s)", header.topic, header.key, len(result.messages))
        return make_response(request, ResponseCode.SUCCESS, None, ext, body)

    def handle_view(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = ViewMessageRequestHeader.from_ext(request.ext_fields)
        body = self._record_bytes(header.offset)
        if body is None:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def _record_bytes(self, offset: int) -> bytes | None:
        if offset < 0:
            return None
        view = self.store.select_one_message_by_offset(offset)
        if view is None:
            return None
        try:
            decode_record(view)
            return bytes(view)
        except RecordFormatError:
            log.info("VIEW_MESSAGE_BY_ID: no record starts at commit-log offset %d", offset)
            return None
        finally:
            view.release()
