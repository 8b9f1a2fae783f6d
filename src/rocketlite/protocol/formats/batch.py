"""The SEND_BATCH_MESSAGE (320) body: messages packed back to back (`MessageDecoder.encodeMessages`).

Each entry, big-endian::

    off  size  field
      0     4  TOTALSIZE   entry length including this field = 22 + bodyLen + propLen
      4     4  MAGICCODE   0, ignored
      8     4  BODYCRC     0, the broker recomputes it
     12     4  FLAG        message flag
     16     4  BODYLEN
     20     n  BODY
   20+n     2  PROPLEN     signed short
   22+n     p  PROPERTIES  name\\x01value\\x02... (UTF-8), each message's own UNIQ_KEY, TAGS, KEYS

TOTALSIZE counts PROPLEN too: Java's `encodeMessage` and the C++ `BatchMessage::encode` both
write `20 + bodyLen + 2 + propLen` (the fact sheet's "20 + bodyLen + propLen" drops the 2).

This is not the stored record (`protocol.record`): topic, queue, sysflag and hosts come from
the request header, and the broker appends the header's batch-level properties to each entry.
Decoding is strict, because a torn entry would shift every message after it: a length that
overruns the body, a negative length or a TOTALSIZE that disagrees with the parts is a ProtocolError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats import record_ref
from rocketlite.protocol.formats.record import MessageInner, RecordTooLargeError, prepare_record
from rocketlite.protocol.message import (
    NAME_VALUE_SEPARATOR,
    HostAddress,
    MessageConst,
    properties_to_string,
    string_to_properties,
)

ENTRY_HEAD = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE (0)
    "i"  # BODYCRC (0)
    "i"  # FLAG
    "i"  # BODYLEN
)
PROPERTIES_LENGTH = struct.Struct(">h")
ENTRY_OVERHEAD: Final = ENTRY_HEAD.size + PROPERTIES_LENGTH.size
MAX_PROPERTIES_LENGTH: Final = 0x7FFF
assert ENTRY_HEAD.size == 20 and ENTRY_OVERHEAD == 22


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One message of a batch: user flag, body as sent (never compressed), properties string."""

    flag: int
    body: bytes
    properties: str


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """All entries of a batch body, in order; ProtocolError on any torn or inconsistent entry."""
    view = memoryview(body)
    entries: list[BatchEntry] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < ENTRY_HEAD.size:
            raise ProtocolError(f"batch entry at byte {pos} is torn: {len(view) - pos} bytes left")
        total, _magic, _crc, flag, body_len = ENTRY_HEAD.unpack_from(view, pos)
        body_start = pos + ENTRY_HEAD.size
        props_len_pos = body_start + body_len
        if body_len < 0 or props_len_pos + PROPERTIES_LENGTH.size > len(view):
            raise ProtocolError(f"batch entry at byte {pos}: body length {body_len} overruns the batch")
        (props_len,) = PROPERTIES_LENGTH.unpack_from(view, props_len_pos)
        props_start = props_len_pos + PROPERTIES_LENGTH.size
        end = props_start + props_len
        if props_len < 0 or end > len(view):
            raise ProtocolError(
                f"batch entry at byte {pos}: properties length {props_len} overruns the batch"
            )
        if total != end - pos:
            raise ProtocolError(
                f"batch entry at byte {pos}: TOTALSIZE {total} but the entry is {end - pos} bytes"
            )
        try:
            properties = str(view[props_start:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"batch entry at byte {pos}: properties are not UTF-8") from exc
        entries.append(BatchEntry(flag, bytes(view[body_start:props_len_pos]), properties))
        pos = end
    return entries


def batch_entry_properties(entry_properties: str, batch_properties: dict[str, str]) -> str | None:
    """The properties stored for one entry: its own (WAIT dropped), then every batch-level one it
    lacks (`batch_properties` already has WAIT dropped and CLUSTER set); None for a delayed entry,
    which a batch may not carry."""
    props = string_to_properties(entry_properties)
    if MessageConst.DELAY_TIME_LEVEL in props:
        return None
    props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
    for k, v in batch_properties.items():
        props.setdefault(k, v)
    return properties_to_string(props)


class BatchTarget(NamedTuple):
    """What a SEND_BATCH_MESSAGE's request header and the broker say about all of its messages:
    the header's batch-level properties, the broker's cluster name (set as CLUSTER), where the
    records go (topic, queue, the hosts) and the fields every record shares, and the store's
    maxMessageSize."""

    header_properties: str
    cluster: str
    topic: str
    born_host: HostAddress
    store_host: HostAddress
    queue_id: int
    sys_flag: int
    born_timestamp: int
    reconsume_times: int
    max_message_size: int


def send_batch_messages(
    body: bytes | bytearray | memoryview, target: BatchTarget
) -> tuple[list[MessageInner], bool]:
    """A SEND_BATCH_MESSAGE body as the messages it stands for, and whether an entry was delayed:
    the definition that `encode_batch_records` (the store's batch path, no message objects) is
    pinned to by the tests.

    The whole body is decoded first (`decode_batch`: a torn entry is a ProtocolError whatever
    precedes it); the header's properties, rewritten as for a single send (WAIT dropped, CLUSTER
    set), fill in what each entry lacks. `([], False)` for an empty body, `([], True)` when an
    entry carries DELAY. `target.max_message_size` is not looked at.
    """
    entries = decode_batch(body)
    if not entries:
        return [], False
    batch_props = string_to_properties(target.header_properties)
    batch_props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
    batch_props[MessageConst.CLUSTER] = target.cluster
    msgs: list[MessageInner] = []
    for entry in entries:
        props = batch_entry_properties(entry.properties, batch_props)
        if props is None:
            return [], True
        msgs.append(
            MessageInner(
                topic=target.topic,
                body=entry.body,
                born_host=target.born_host,
                store_host=target.store_host,
                queue_id=target.queue_id,
                flag=entry.flag,
                sys_flag=target.sys_flag,
                born_timestamp=target.born_timestamp,
                reconsume_times=target.reconsume_times,
                properties_string=props,
            )
        )
    return msgs, False


# What `encode_batch_records` found, beside the records (see there).
BATCH_OK: Final = 0
BATCH_DELAYED_ENTRY: Final = 1  # an entry carries DELAY: "batch messages cannot be delayed"
BATCH_DELAY_PROPERTY: Final = 2  # a stored properties string holds "DELAY\x01" (the store refuses)
BATCH_TOO_LARGE: Final = 3  # a record over a limit (topic, properties, maxMessageSize); the remark says
DELAY_NEEDLE: Final = MessageConst.DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR


class EncodedBatch(NamedTuple):
    """A batch body made into the records the store appends (`encode_batch_records`)."""

    records: bytearray  # commit-log records back to back, position-dependent fields zero
    messages: int  # how many entries the body has, each a record
    sys_flag: int  # the first record's SYSFLAG
    outcome: int  # one of the BATCH_* outcomes
    remark: str  # the remark of BATCH_TOO_LARGE, else ""


def encode_batch_records(body: bytes | bytearray | memoryview, target: BatchTarget) -> EncodedBatch:
    """A SEND_BATCH_MESSAGE body straight to the commit-log records the store appends: what
    `send_batch_messages` and then `encode_records` make of it, in one call, so that the
    compiled twin (`_native/_record.pyx`) needs no `MessageInner` per entry.

    A torn body raises ProtocolError (as `send_batch_messages`). The refusals that the send
    processor and the store answer, each in its turn, come back as the outcome, with no records:
    an entry's own DELAY (BATCH_DELAYED_ENTRY, count 0) before anything else, then, for the store
    to judge after its own checks, the first entry in order whose stored properties string holds
    DELAY_NEEDLE (what the store refuses, `MessageStore.put_encoded_nowait`; BATCH_DELAY_PROPERTY) or
    whose record is over a limit (BATCH_TOO_LARGE, the `RecordTooLargeError` text as the remark)
    or takes the records past `max_message_size` (BATCH_TOO_LARGE: RocketMQ refuses an encoded
    batch over maxMessageSize, "message size exceeded"). The records are made one entry at a
    time and the walk stops there, so an oversized batch is refused having made at most
    `max_message_size` bytes of records, however many entries and header properties it has.
    An empty body is `(b"", 0, 0, BATCH_OK, "")`.
    """
    (header_properties, cluster, topic, born_host, store_host, queue_id, sys_flag, born_timestamp,
     reconsume_times, max_message_size) = target  # fmt: skip
    entries = decode_batch(body)
    if not entries:
        return EncodedBatch(bytearray(), 0, 0, BATCH_OK, "")
    if any(MessageConst.DELAY_TIME_LEVEL in string_to_properties(e.properties) for e in entries):
        return EncodedBatch(bytearray(), 0, 0, BATCH_DELAYED_ENTRY, "")
    batch_props = string_to_properties(header_properties)
    batch_props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
    batch_props[MessageConst.CLUSTER] = cluster
    n = len(entries)
    msgs: list[MessageInner] = []
    total = 0
    for entry in entries:  # in order, each record made and measured before the next is looked at
        props = batch_entry_properties(entry.properties, batch_props)
        assert props is not None  # no entry is delayed
        if DELAY_NEEDLE in props:
            return EncodedBatch(bytearray(), n, 0, BATCH_DELAY_PROPERTY, "")
        msg = MessageInner(
            topic=topic, body=entry.body, born_host=born_host, store_host=store_host, queue_id=queue_id,
            flag=entry.flag, sys_flag=sys_flag, born_timestamp=born_timestamp,
            reconsume_times=reconsume_times, properties_string=props,
        )  # fmt: skip
        try:
            total += prepare_record(msg, max_message_size).total_size
        except RecordTooLargeError as exc:
            return EncodedBatch(bytearray(), n, 0, BATCH_TOO_LARGE, str(exc))
        if total > max_message_size:  # RocketMQ's "message size exceeded" of the whole batch
            remark = batch_too_large_remark(total, max_message_size)
            return EncodedBatch(bytearray(), n, 0, BATCH_TOO_LARGE, remark)
        msgs.append(msg)
    buf, first_sys_flag = record_ref.encode_records(msgs, max_message_size)
    return EncodedBatch(buf, n, first_sys_flag, BATCH_OK, "")


def batch_too_large_remark(total: int, max_message_size: int) -> str:
    """The remark of a batch whose records come to more than maxMessageSize (`total`: the
    records' size up to and including the first one past the limit), worded as a record's."""
    return f"message size {total} exceeds maxMessageSize {max_message_size}"


def encode_batch(entries: Iterable[BatchEntry]) -> bytes:
    """The body a Java producer sends for these messages (magic and CRC left 0, as Java does)."""
    parts: list[bytes] = []
    for entry in entries:
        props = entry.properties.encode("utf-8")
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise ProtocolError(
                f"batch entry properties of {len(props)} bytes exceed {MAX_PROPERTIES_LENGTH}"
            )
        total = ENTRY_OVERHEAD + len(entry.body) + len(props)
        parts += [
            ENTRY_HEAD.pack(total, 0, 0, entry.flag, len(entry.body)),
            entry.body,
            PROPERTIES_LENGTH.pack(len(props)),
            props,
        ]
    return b"".join(parts)


def encode_batch_columns(bodies: Sequence[bytes], properties: Sequence[bytes], flag: int = 0) -> bytes:
    """`encode_batch` over columns: bodies and their properties already UTF-8 encoded, one flag
    for all. The same bytes as `encode_batch([BatchEntry(flag, b, p.decode()) ...])` without a
    `BatchEntry` or a string per message (the Spark sink builds its request bodies with it)."""
    if len(bodies) != len(properties):
        raise ValueError(f"{len(bodies)} bodies but {len(properties)} properties")
    pack_head = ENTRY_HEAD.pack
    pack_len = PROPERTIES_LENGTH.pack
    parts: list[bytes] = []
    append = parts.append
    for body, props in zip(bodies, properties, strict=True):
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise ProtocolError(f"batch entry properties of {props_len} bytes exceed {MAX_PROPERTIES_LENGTH}")
        body_len = len(body)
        append(pack_head(ENTRY_OVERHEAD + body_len + props_len, 0, 0, flag, body_len))
        append(body)
        append(pack_len(props_len))
        append(props)
    return b"".join(parts)
