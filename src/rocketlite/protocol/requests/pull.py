"""PULL_MESSAGE (11): `build_pull` and `parse_pull`.

Four response codes are normal pull answers, each with the four offsets header
(`PullMessageResponseHeader`): SUCCESS (records in the body, back to back), PULL_NOT_FOUND (the
offset is the queue's end), PULL_RETRY_IMMEDIATELY (no record in the scanned range matched the tag
filter; go on from nextBeginOffset) and PULL_OFFSET_MOVED (the offset is outside the queue). They
map to `PullStatus` as the Java client's `processPullResponse` does. Any other code is a refusal
(`ResponseError`).

The broker filters by tag hash code only; dropping hash collisions, decompressing bodies and
setting MIN/MAX_OFFSET on messages are the SDK's business (`client.api`), not the wire's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.formats.speedups import decode_records
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.subscription import SUB_ALL, TAG_EXPRESSION
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, PullMessageResponseHeader


class PullStatus(enum.Enum):
    """`PullStatus` of the Java client: what a pull answer means for the next pull."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull answer. `body` holds the records back to back (empty unless FOUND); `records()`
    decodes them, callers that decode in bulk (the Spark source) take `body` as it is."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes = b""

    def records(self) -> list[StoredRecord]:
        return decode_records(self.body) if self.body else []


def build_pull(
    *,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    sys_flag: int = PullSysFlag.SUBSCRIPTION,
    expression: str = SUB_ALL,
    sub_version: int = 0,
    expression_type: str = TAG_EXPRESSION,
    subscription: SubscriptionData | None = None,
    commit_offset: int = 0,
    suspend_timeout_ms: int = 0,
    broker_name: str | None = None,
) -> RemotingCommand:
    """A PULL_MESSAGE request; the expression travels only when `sys_flag` has SUBSCRIPTION (the
    broker then rebuilds the subscription from it instead of using the heartbeat's).

    `subscription`, when given, supplies the expression, its version and type (what the SDK keeps
    per topic); otherwise `expression` is sent as it is."""
    if subscription is not None:
        expression = subscription.sub_string
        sub_version = subscription.sub_version
        expression_type = subscription.expression_type
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=suspend_timeout_ms,
        subscription=expression if sys_flag & PullSysFlag.SUBSCRIPTION else None,
        sub_version=sub_version,
        expression_type=expression_type,
        bname=broker_name,
    )
    return make_request(RequestCode.PULL_MESSAGE, header.to_ext())


def parse_pull(response: RemotingCommand) -> PullResult:
    """The pull answer; `ResponseError` for a code that is not one of the four pull answers."""
    code = expect(response, RequestCode.PULL_MESSAGE, PULL_STATUS)
    status = PULL_STATUS[code]
    header = PullMessageResponseHeader.from_ext(response.ext_fields)
    body = bytes(response.body) if status is PullStatus.FOUND and response.body else b""
    return PullResult(
        status,
        header.next_begin_offset,
        header.min_offset,
        header.max_offset,
        header.suggest_which_broker_id,
        body,
    )
