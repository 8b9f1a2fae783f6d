"""The sink's per-row reference: one task's rows as plain objects, their ids and properties text.

This is how the sink turned rows into messages before it worked a column at a time
(`sink_batches`), kept as the clear statement of what each message must be: the column path is
pinned to it by a hypothesis test (`tests/spark/test_sink_fast.py`), and rows of shapes the
column path does not take in bulk (a `properties` map column, `keys` as an array) go through
`rows` here before their columns are built.

A row's UNIQ_KEY (`idempotence=content`, see `sink`'s docstring) is
``blake2b-128(f"{query}/{batch}/{partition}/" + digest + n as 8 bytes big-endian)`` in upper-case
hex, where ``digest = blake2b-128(topic \\0 str(queueId) \\0 brokerName \\0, then each property
sorted by name as name \\1 value \\2, then \\0 and the body)`` and ``n`` counts the earlier rows of
the task with the same digest. `idempotence=order` hashes the prefix and the row's position.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from rocketlite.client.message import Message
from rocketlite.protocol.message import KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from rocketlite.spark.options import SinkOptions

# Properties a broker acts on (delay, transactions, retry bookkeeping): never copied from a row.
DROPPED_PROPERTIES: Final = frozenset(
    {
        MessageConst.WAIT_STORE_MSG_OK,
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.RETRY_TOPIC,
        MessageConst.REAL_TOPIC,
        MessageConst.REAL_QUEUE_ID,
        MessageConst.TRANSACTION_PREPARED,
        MessageConst.PRODUCER_GROUP,
        MessageConst.MIN_OFFSET,
        MessageConst.MAX_OFFSET,
        MessageConst.ORIGIN_MESSAGE_ID,
        MessageConst.RECONSUME_TIME,
        MessageConst.MAX_RECONSUME_TIMES,
        MessageConst.CONSUME_START_TIME,
        MessageConst.TRAN_PREPARED_QUEUE_OFFSET,
        MessageConst.TRANSACTION_CHECK_TIMES,
        MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS,
        MessageConst.CLUSTER,
        MessageConst.TRANSACTION_ID,
        MessageConst.MSG_REGION,
        MessageConst.TRACE_SWITCH,
        "DELAY_SECOND",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
    }
)


@dataclass(slots=True)
class Row:
    """One row as the message it becomes: `properties` in the order they are sent (the user's,
    then TAGS, KEYS and UNIQ_KEY), as a `Message` would hold them."""

    topic: str
    queue_id: int | None
    broker: str | None
    body: bytes
    properties: dict[str, str]
    digest: bytes = b""
    uniq: str = ""

    @property
    def message(self) -> Message:
        return Message(self.topic, self.body, properties=self.properties)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    return batch.column(name).to_pylist() if name in batch.schema.names else None


def rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[Row]:
    """The rows of every batch, a column at a time into Python lists (the properties dict is what
    `Message(topic, body, tags=, keys=, properties=)` would hold)."""
    tags_key, keys_key = MessageConst.TAGS, MessageConst.KEYS
    for batch in batches:
        body = _column(batch, "body") if "body" in batch.schema.names else _column(batch, "value")
        assert body is not None
        topics = None if options.topic else _column(batch, "topic")
        tags = _column(batch, "tags")
        keys = _column(batch, "keys")
        props = _column(batch, "properties")
        queue_ids = _column(batch, "queueId")
        brokers = _column(batch, "brokerName")
        for i in range(batch.num_rows):
            topic = options.topic or (topics[i] if topics is not None else None)
            if not topic:
                raise ValueError(f"row {i} of a batch has no topic (null topic column and no 'topic' option)")
            raw = body[i]
            if raw is None:
                raise ValueError(f"row {i} of a batch has a null body")
            user = (
                {k: v for k, v in props[i] or () if v is not None and k not in DROPPED_PROPERTIES}
                if props
                else {}
            )
            row_keys = keys[i] if keys is not None else None
            if isinstance(row_keys, list):
                row_keys = KEY_SEPARATOR.join(k for k in row_keys if k)
            row_tags = (tags[i] if tags is not None else None) or user.pop(tags_key, None)
            row_keys = row_keys or user.pop(keys_key, None)
            if user:
                user.pop(tags_key, None)
                user.pop(keys_key, None)
            if row_tags:
                user[tags_key] = row_tags
            if row_keys:
                user[keys_key] = row_keys
            yield Row(
                topic,
                queue_ids[i] if queue_ids is not None else None,
                brokers[i] if brokers is not None else None,
                raw.encode("utf-8") if isinstance(raw, str) else bytes(raw),
                user,
            )


def target_key(row: Row) -> tuple[str, str, int]:
    """The order of targets in a task: topic, broker name, queue id (-1 for none)."""
    return (row.topic, row.broker or "", -1 if row.queue_id is None else row.queue_id)


def digest_prefix(topic: str, queue_id: int | None, broker: str | None) -> str:
    """The target part of a row's digest (text; UTF-8 encoded where hashed)."""
    return f"{topic}\0{queue_id}\0{broker or ''}\0"


def sorted_properties(props: dict[str, str]) -> str:
    """The properties part of a row's digest: sorted by name, each name \\1 value \\2."""
    return "".join(f"{k}\1{props[k]}\2" for k in sorted(props))


def digest(row: Row) -> bytes:
    """blake2b-128 of the row's target, its properties sorted by name and its body."""
    head = digest_prefix(row.topic, row.queue_id, row.broker) + sorted_properties(row.properties)
    return hashlib.blake2b(head.encode("utf-8") + b"\0" + row.body, digest_size=16).digest()


def id_prefix(query_id: str, batch_id: str, partition: int) -> bytes:
    return f"{query_id}/{batch_id}/{partition}/".encode()


def uniq(query_id: str, batch_id: str, partition: int, detail: bytes) -> str:
    return uniq_over(id_prefix(query_id, batch_id, partition), detail)


def uniq_over(prefix: bytes, detail: bytes) -> str:
    return hashlib.blake2b(prefix + detail, digest_size=16).hexdigest().upper()


def assign_ids(rows: list[Row], mode: str, query_id: str, batch_id: str, partition: int) -> None:
    """Give each row its UNIQ_KEY (module docstring) and sort the rows by target for chunking
    (`content`: then by id; `order` and `none`: stable, each target keeps the rows' order)."""
    prefix = id_prefix(query_id, batch_id, partition)
    if mode == "content":
        seen: dict[bytes, int] = {}
        for row in rows:
            row.digest = d = digest(row)
            n = seen.get(d, 0)
            seen[d] = n + 1
            row.uniq = uniq_over(prefix, d + n.to_bytes(8, "big"))
        rows.sort(key=lambda r: (target_key(r), r.uniq))
        return
    if mode == "order":
        for i, row in enumerate(rows):
            row.uniq = uniq_over(prefix, i.to_bytes(8, "big"))
    rows.sort(key=target_key)


def properties_text(row: Row) -> str:
    """`properties_to_string` of the row's properties."""
    pair = NAME_VALUE_SEPARATOR
    return PROPERTY_SEPARATOR.join(f"{k}{pair}{v}" for k, v in row.properties.items() if v is not None)


def entry_size(row: Row) -> int:
    """The chunking estimate of one message (kept as it was: chunk cuts decide the ids checked)."""
    return 64 + len(row.body) + sum(len(k) + len(v) + 2 for k, v in row.properties.items())


def chunk_cuts(rows: Sequence[Row], batch_size: int, batch_bytes: int) -> list[int]:
    """Where chunks start: consecutive rows with the same target, cut at batch_size messages or
    when the next row's `entry_size` would pass batch_bytes."""
    starts: list[int] = []
    key: tuple[str, str | None, int | None] | None = None
    count = size = 0
    for i, row in enumerate(rows):
        k = (row.topic, row.broker, row.queue_id)
        entry = entry_size(row)
        if not starts or k != key or count >= batch_size or size + entry > batch_bytes:
            starts.append(i)
            key, count, size = k, 0, 0
        count += 1
        size += entry
    return starts
