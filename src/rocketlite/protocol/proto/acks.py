"""AckMessage's answer (`apache.rocketmq.v2.AckMessageResponse`) written as protobuf bytes, sans-IO:
one entry per acknowledged handle, each `AckMessageResultEntry{message_id, receipt_handle,
status}`, after the overall `status`. The statuses come serialized (a batch's entries share a
few: the OK one, and a refusal's), so an entry is three length-delimited fields and no protobuf
object. The bytes are the ones `SerializeToString` writes for the same message: fields in number
order, empty strings left out (proto3), a set `Status` always written, even empty
(`tests/protocol/test_acks.py` pins the two with hypothesis).

`handle_fields` reads the entries' receipt handles in one call: the fields an ack checks, as
plain values, with no `ReceiptHandle` object per entry. A handle it does not take (7 fields,
malformed, too long) is left to `ReceiptHandle.parse`, which refuses it naming the cause.

`handle_columns` reads them as columns for the common case of an ack: the handles this broker
issued for a normal topic that are still within their invisible time, their queue ids, offsets
and popTimes in three lists and their places in a fourth. Every other entry is left out, for the
caller to refuse one by one (naming the cause); so an ack of N entries makes no object per entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from rocketlite.protocol.proto.varint import encode_varint
from rocketlite.protocol.wire.pop import MAX_HANDLE_LEN, NORMAL_TOPIC, WELL_FORMED_HANDLE

__all__ = ["HandleColumns", "HandleFields", "ack_response", "handle_columns", "handle_fields"]

HandleFields = tuple[int, int, str, str, int, int]
"""(popTime, invisibleTime, topic type, broker name, queueId, queueOffset) of a receipt handle."""


class HandleColumns(NamedTuple):
    """The entries `handle_columns` took: entry `at[k]` names queue `queue_ids[k]`, offset
    `offsets[k]`, delivered at `pop_times[k]`."""

    at: list[int]
    queue_ids: list[int]
    offsets: list[int]
    pop_times: list[int]


def ack_response(status: bytes, entries: Iterable[tuple[str, str, bytes]]) -> bytes:
    """The serialized `AckMessageResponse` of `status` (a serialized `Status`) and `entries`, each
    (message id, receipt handle, its serialized `Status`)."""
    out = bytearray(b"\x0a")
    out += encode_varint(len(status))
    out += status
    for message_id, handle, entry_status in entries:
        entry = bytearray()
        if message_id:
            text = message_id.encode()
            entry += b"\x0a"
            entry += encode_varint(len(text))
            entry += text
        if handle:
            text = handle.encode()
            entry += b"\x12"
            entry += encode_varint(len(text))
            entry += text
        entry += b"\x1a"
        entry += encode_varint(len(entry_status))
        entry += entry_status
        out += b"\x12"
        out += encode_varint(len(entry))
        out += entry
    return bytes(out)


def handle_fields(texts: Iterable[str]) -> list[HandleFields | None]:
    """Each receipt handle of the common shape (RocketMQ's 8 fields, at most `MAX_HANDLE_LEN`
    characters, as `WELL_FORMED_HANDLE` matches) read into `HandleFields`; None for any other."""
    out: list[HandleFields | None] = []
    for text in texts:
        found = WELL_FORMED_HANDLE.fullmatch(text) if len(text) <= MAX_HANDLE_LEN else None
        if found is None or found[8] is None:
            out.append(None)
            continue
        _, pop_time, invisible, _, kind, broker, queue_id, queue_offset = found.groups()
        out.append((int(pop_time), int(invisible), kind, broker, int(queue_id), int(queue_offset)))
    return out


def handle_columns(texts: Iterable[str], now_ms: int, broker_name: str) -> HandleColumns:
    """The handles `handle_fields` reads that `broker_name` issued for a normal topic (type "0")
    and whose invisible time is not over at `now_ms` (popTime + invisibleTime > now), as columns
    with their places; the others are left out."""
    columns = HandleColumns([], [], [], [])
    for i, fields in enumerate(handle_fields(texts)):
        if fields is None:
            continue
        pop_time, invisible, kind, broker, queue_id, offset = fields
        if kind != NORMAL_TOPIC or broker != broker_name or pop_time + invisible <= now_ms:
            continue
        columns.at.append(i)
        columns.queue_ids.append(queue_id)
        columns.offsets.append(offset)
        columns.pop_times.append(pop_time)
    return columns
