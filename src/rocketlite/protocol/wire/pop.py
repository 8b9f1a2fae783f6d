"""POP consumption on the wire (RocketMQ 5.x): request codes, custom headers, the receipt handle.

A POP consumer asks the broker for messages (POP_MESSAGE 200050) instead of pulling from an
offset; each message it gets stays invisible to the group for `invisibleTime` ms, and it then
acknowledges it (ACK_MESSAGE 200051) or moves its deadline (CHANGE_MESSAGE_INVISIBLETIME 200053).
The message is named in both by its receipt handle, RocketMQ's `extraInfo`: plain text, fields
separated by one space (`MessageConst.KEY_SEPARATOR`)::

    ckQueueOffset popTime invisibleTime reviveQid topicType brokerName queueId [queueOffset]

`topicType` is `0` for the topic itself and `1` for the group's POP retry topic. The client builds
it from the POP answer's header (`popTime`, `invisibleTime`, `reviveQid`) and its
`startOffsetInfo` / `msgOffsetInfo` texts: `;`-separated `topicType queueId value` triples, the
value being the queue's first offset of the answer, or its offsets joined by `,`.

No I/O here: `ReceiptHandle.parse` refuses anything malformed with `MalformedReceiptHandleError`
(naming the field); whether a well-formed handle still names a message in flight is the broker's
question (`StaleReceiptHandleError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.protocol.wire.custom_header import CustomHeader, Long
from rocketlite.protocol.wire.custom_header import header_dataclass as _header


class PopRequestCode(IntEnum):
    """The 5.x consumer request codes served (`protocol.codes.RequestCode` holds the 4.x ones):
    POP, and LITE_PULL_MESSAGE, which 5.x lite pull consumers send instead of PULL_MESSAGE
    (same header, same answers; ACL checks both as a read of the topic)."""

    LITE_PULL_MESSAGE = 361
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053


# 5.x response codes of a POP answer without messages. 209 is also 4.x's
# UPDATE_AND_CREATE_ACL_CONFIG_FAILED, so these stay out of `ResponseCode`.
POLLING_FULL: Final = 209
POLLING_TIMEOUT: Final = 210

SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR
NORMAL_TOPIC: Final = "0"
RETRY_TOPIC: Final = "1"

# ConsumeInitMode: where a group that has never consumed a queue starts.
INIT_MODE_MAX: Final = 0
INIT_MODE_MIN: Final = 1

MAX_HANDLE_LEN: Final = 512
# A well-formed handle in one match (what `ReceiptHandle.parse` accepts field by field, which it
# still does to name the field of a malformed one).
_NUMBER = "([0-9]{1,19})"
WELL_FORMED_HANDLE: Final = re.compile(
    " ".join([_NUMBER] * 4 + ["([01])", "([^ ]+)", _NUMBER]) + f"(?: {_NUMBER})?"
)


class MalformedReceiptHandleError(RocketliteError):
    """A receipt handle (`extraInfo`) that is not RocketMQ's text format: answered NO_MESSAGE,
    because no message is named by it."""

    code = ResponseCode.NO_MESSAGE


class StaleReceiptHandleError(RocketliteError):
    """A well-formed handle naming no message in flight: acked already, redelivered since (its
    popTime is an older delivery's) or never delivered (forged). Answered NO_MESSAGE."""

    code = ResponseCode.NO_MESSAGE


@_header
class PopMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int  # -1: every readable queue of the topic
    max_msg_nums: int
    invisible_time: Long
    poll_time: Long
    born_time: Long
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@_header
class PopMessageResponseHeader(CustomHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@_header
class AckMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long


@_header
class ChangeInvisibleTimeRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    invisible_time: Long


@_header
class ChangeInvisibleTimeResponseHeader(CustomHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


def topic_type(topic: str) -> str:
    """`1` for a retry topic, `0` otherwise: the second field of every offset-info triple."""
    return RETRY_TOPIC if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else NORMAL_TOPIC


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """One delivery of one message: which queue and offset, and when it was popped."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    topic_type: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None  # the 8th field; older clients leave it out

    def build(self) -> str:
        fields = [
            str(self.ck_queue_offset), str(self.pop_time), str(self.invisible_time),
            str(self.revive_qid), self.topic_type, self.broker_name, str(self.queue_id),
        ]  # fmt: skip
        if self.queue_offset is not None:
            fields.append(str(self.queue_offset))
        return SEPARATOR.join(fields)

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Read an `extraInfo`; anything but RocketMQ's 7 or 8 fields is refused naming the cause."""
        if len(text) > MAX_HANDLE_LEN:
            raise MalformedReceiptHandleError(f"receipt handle longer than {MAX_HANDLE_LEN} characters")
        found = WELL_FORMED_HANDLE.fullmatch(text)
        if found is not None:
            ck, pop_time, invisible, revive, kind, broker, queue_id, queue_offset = found.groups()
            return cls(
                int(ck), int(pop_time), int(invisible), int(revive), kind, broker, int(queue_id),
                None if queue_offset is None else int(queue_offset),
            )  # fmt: skip
        parts = text.split(SEPARATOR)
        if len(parts) not in (7, 8):
            raise MalformedReceiptHandleError(
                f"receipt handle {text!r} has {len(parts)} fields, expected 7 or 8 separated by one space"
            )
        names = ("ckQueueOffset", "popTime", "invisibleTime", "reviveQid")
        ck, pop_time, invisible, revive = (_number(text, n, v) for n, v in zip(names, parts[:4], strict=True))
        if parts[4] not in (NORMAL_TOPIC, RETRY_TOPIC):
            raise MalformedReceiptHandleError(
                f"receipt handle {text!r}: topic type {parts[4]!r} is not 0 or 1"
            )
        if not parts[5]:
            raise MalformedReceiptHandleError(f"receipt handle {text!r}: empty broker name")
        queue_id = _number(text, "queueId", parts[6])
        queue_offset = _number(text, "queueOffset", parts[7]) if len(parts) == 8 else None
        return cls(ck, pop_time, invisible, revive, parts[4], parts[5], queue_id, queue_offset)


def _number(text: str, name: str, value: str) -> int:
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        raise MalformedReceiptHandleError(f"receipt handle {text!r}: {name} {value!r} is not a number")
    return int(value)


def offset_info(entries: list[tuple[str, int, list[int]]]) -> str:
    """`startOffsetInfo` (one value per queue) or `msgOffsetInfo` (its offsets): `;`-joined
    `topicType queueId values` with the values joined by `,`."""
    return ";".join(
        f"{kind}{SEPARATOR}{queue_id}{SEPARATOR}{','.join(map(str, values))}"
        for kind, queue_id, values in entries
    )


def parse_offset_info(text: str) -> dict[tuple[str, int], list[int]]:
    """The inverse of `offset_info`: (topicType, queueId) -> values; duplicates and bad triples refused."""
    out: dict[tuple[str, int], list[int]] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(SEPARATOR)
        if len(parts) != 3 or parts[0] not in (NORMAL_TOPIC, RETRY_TOPIC):
            raise MalformedReceiptHandleError(f"offset info {text!r}: bad entry {one!r}")
        key = (parts[0], _number(text, "queueId", parts[1]))
        if key in out:
            raise MalformedReceiptHandleError(f"offset info {text!r}: queue {key[1]} twice")
        out[key] = [_number(text, "offset", v) for v in parts[2].split(",")]
    return out
