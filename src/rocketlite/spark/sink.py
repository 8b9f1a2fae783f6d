"""The `rocketmq` sink: DataFrame rows to messages, sent with SEND_BATCH_MESSAGE.

Input columns (by name; others are ignored):

=============  =======================  =====================================================
column         type                     meaning
=============  =======================  =====================================================
topic          string                   target topic; the `topic` option, when set, wins
body / value   binary or string         the message body (required; `body` if both exist)
tags           string                   TAGS
keys           string or array<string>  KEYS (space-joined)
properties     map<string,string>       user properties (system ones the broker acts on are
                                        dropped: DELAY, TRAN_MSG, REAL_TOPIC, ...)
queueId        int                      target queue (with `brokerName`, or the first broker
                                        that has that queue id); else the sink picks queues
brokerName     string                   see queueId
=============  =======================  =====================================================

Delivery guarantees
-------------------
* Batch writes (`df.write`) are **at-least-once**: a failed task that Spark retries, or a job
  the user re-runs, sends its rows again (new msgIds).
* Streaming writes are **at-least-once with deterministic msgIds**, and **idempotent per
  (batchId, partition)** by default (`idempotence=content`): every message gets a UNIQ_KEY (its
  msgId) derived from the query id, batch id, partition id and the row's content (plus an
  occurrence number for identical rows), rows are sorted by that id and cut into chunks in a
  deterministic way, and before each chunk is sent the sink asks the brokers (QUERY_MESSAGE by
  unique key) whether the chunk's *last* message is stored; if it is, the chunk is skipped. A
  broker appends a batch in order, so the last message being stored means the whole chunk is.
  A micro-batch Spark replays after a failure (mid-batch, in any task, at any chunk) therefore
  adds no duplicates, provided (a) the replayed batch has the same rows per partition (true for
  deterministic queries over replayable sources such as `rocketmq`), (b) the brokers index
  UNIQ_KEY (`messageIndexEnable`, the default) and (c) the index has caught up with the failed
  attempt's last send (it is built asynchronously, milliseconds after the acknowledgement). A
  send that times out with its outcome unknown is checked the same way before it is retried.
  `idempotence=order` derives ids from the row *position* instead of its content and keeps the
  DataFrame's row order within each chunk (use it when the order of messages matters and the
  rows reaching the sink come in a deterministic order, e.g. no shuffle before the sink);
  `idempotence=none` skips the checks (plain at-least-once, fresh msgIds).
  Consumers can always de-duplicate on msgId: a replayed row gets the same msgId.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from rocketlite.client.errors import ClientError
from rocketlite.client.message import Message, MessageQueue
from rocketlite.protocol.message import KEY_SEPARATOR, MessageConst
from rocketlite.spark.broker_client import BrokerClient, client_for
from rocketlite.spark.options import SinkOptions

log = logging.getLogger("rocketlite.spark.sink")

__all__ = ["BatchWriter", "SinkCommitMessage", "StreamWriter"]

BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
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
SEND_ATTEMPTS: Final = 3


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition: int
    sent: int = 0  # messages sent by this task attempt
    skipped: int = 0  # messages found already stored (a replay)
    chunks: int = 0


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise ValueError unless the DataFrame's columns can be written."""
    types = {f.name: f.dataType for f in schema.fields}
    body = types.get("body", types.get("value"))
    if body is None:
        raise ValueError("the rocketmq sink needs a 'body' (or 'value') column of binary or string type")
    if not isinstance(body, BinaryType | StringType):
        raise ValueError(f"the body column must be binary or string, not {body.simpleString()}")
    if options.topic is None and "topic" not in types:
        raise ValueError("give the target topic as the 'topic' option or a 'topic' column")
    for name in ("topic", "tags", "brokerName"):
        if name in types and not isinstance(types[name], StringType):
            raise ValueError(f"the {name} column must be a string")
    if "keys" in types and not isinstance(types["keys"], StringType | ArrayType):
        raise ValueError("the keys column must be a string or an array of strings")
    if "properties" in types and not isinstance(types["properties"], MapType):
        raise ValueError("the properties column must be a map<string,string>")
    if "queueId" in types and types["queueId"].typeName() not in ("integer", "long", "short", "byte"):
        raise ValueError("the queueId column must be an integer")


@dataclass(slots=True)
class _Row:
    topic: str
    queue_id: int | None
    broker: str | None
    message: Message
    digest: bytes = b""
    uniq: str = ""


@dataclass(slots=True)
class _Chunk:
    topic: str
    queue: MessageQueue
    rows: list[_Row] = field(default_factory=list)


def _rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[_Row]:
    for batch in batches:
        cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        body = cols.get("body", cols.get("value"))
        assert body is not None
        n = batch.num_rows
        topics = cols.get("topic")
        tags = cols.get("tags")
        keys = cols.get("keys")
        props = cols.get("properties")
        queue_ids = cols.get("queueId")
        brokers = cols.get("brokerName")
        for i in range(n):
            topic = options.topic or (topics[i] if topics is not None else None)
            if not topic:
                raise ValueError(f"row {i} of a batch has no topic (null topic column and no 'topic' option)")
            raw = body[i]
            if raw is None:
                raise ValueError(f"row {i} of a batch has a null body")
            properties = (
                {k: v for k, v in (props[i] or []) if v is not None and k not in DROPPED_PROPERTIES}
                if props
                else {}
            )
            row_keys = keys[i] if keys is not None else None
            if isinstance(row_keys, list):
                row_keys = KEY_SEPARATOR.join(k for k in row_keys if k)
            msg = Message(
                topic,
                raw,
                tags=(tags[i] if tags is not None else None) or properties.pop(MessageConst.TAGS, None),
                keys=row_keys or properties.pop(MessageConst.KEYS, None),
                properties={
                    k: v for k, v in properties.items() if k not in (MessageConst.TAGS, MessageConst.KEYS)
                },
            )
            yield _Row(
                topic,
                queue_ids[i] if queue_ids is not None else None,
                brokers[i] if brokers is not None else None,
                msg,
            )


def _target_key(row: _Row) -> tuple[str, str, int]:
    return (row.topic, row.broker or "", -1 if row.queue_id is None else row.queue_id)


def _digest(row: _Row) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in (row.topic, str(row.queue_id), row.broker or ""):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    for k in sorted(row.message.properties):
        h.update(k.encode("utf-8"))
        h.update(b"\1")
        h.update(row.message.properties[k].encode("utf-8"))
        h.update(b"\2")
    h.update(b"\0")
    h.update(row.message.body)
    return h.digest()


def _uniq(query_id: str, batch_id: str, partition: int, detail: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{query_id}/{batch_id}/{partition}/".encode())
    h.update(detail)
    return h.hexdigest().upper()


class _Sender:
    """Sends one task's rows; `idempotent` adds the per-chunk stored-already check."""

    def __init__(self, options: SinkOptions, client: BrokerClient) -> None:
        self.options = options
        self.client = client
        self._queues: dict[str, list[MessageQueue]] = {}

    def queues(self, topic: str) -> list[MessageQueue]:
        found = self._queues.get(topic)
        if found is None:
            found = self.client.publish_queues(self.options.producer_group, topic)
            if not found:
                raise ClientError(f"topic {topic} has no writable queue")
            self._queues[topic] = found
        return found

    def target(self, row: _Row, seed: int) -> MessageQueue:
        queues = self.queues(row.topic)
        if row.queue_id is None:
            return queues[seed % len(queues)]
        for mq in queues:
            if mq.queue_id == row.queue_id and (row.broker is None or mq.broker_name == row.broker):
                return mq
        raise ValueError(f"topic {row.topic} has no writable queue {row.broker or '*'}:{row.queue_id}")

    def chunks(self, rows: list[_Row], seed: int) -> list[_Chunk]:
        """Consecutive rows with the same target, cut at batchSize messages / batchBytes.

        Rows without a queueId get one queue per chunk, picked from `seed` (deterministic for a
        given seed and route).
        """
        out: list[_Chunk] = []
        current: _Chunk | None = None
        current_key: tuple[str, str | None, int | None] | None = None
        size = 0
        for row in rows:
            key = (row.topic, row.broker, row.queue_id)
            entry = (
                64
                + len(row.message.body)
                + sum(len(k) + len(v) + 2 for k, v in row.message.properties.items())
            )
            if (
                current is None
                or key != current_key
                or len(current.rows) >= self.options.batch_size
                or size + entry > self.options.batch_bytes
            ):
                current = _Chunk(row.topic, self.target(row, seed + len(out)))
                current_key = key
                out.append(current)
                size = 0
            current.rows.append(row)
            size += entry
        return out

    def send(self, chunk: _Chunk, *, idempotent: bool) -> bool:
        """Send a chunk; False when it was found stored already (idempotent mode only)."""
        last = chunk.rows[-1].uniq
        if idempotent and self.client.has_unique_key(chunk.topic, last):
            return False
        messages = [r.message for r in chunk.rows]
        timeout = self.options.send_timeout_ms / 1000
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                self.client.send_batch(self.options.producer_group, chunk.queue, messages, timeout)
                return True
            except ClientError as exc:
                if attempt == SEND_ATTEMPTS or not exc.retriable:
                    raise
                log.warning(
                    "sending %d messages to %s failed (%s); retrying", len(messages), chunk.queue, exc
                )
                time.sleep(0.2 * attempt)
                if idempotent and self.client.has_unique_key(chunk.topic, last):
                    return True  # the failed attempt was stored after all
        return True  # pragma: no cover - the loop returns or raises


def _task_context() -> tuple[int, str | None, str | None]:
    from pyspark import TaskContext  # noqa: PLC0415

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None, None
    return ctx.partitionId(), ctx.getLocalProperty(BATCH_ID_PROPERTY), ctx.getLocalProperty(QUERY_ID_PROPERTY)


def write_partition(
    options: SinkOptions, batches: Iterator[pa.RecordBatch], *, streaming: bool
) -> SinkCommitMessage:
    """Everything one task writes (runs in an executor worker)."""
    partition, batch_id, query_id = _task_context()
    mode = options.idempotence if streaming else "none"
    if mode != "none" and (batch_id is None or query_id is None):
        raise RuntimeError("the idempotent rocketmq sink needs Spark's streaming batch and query ids")
    client = client_for(options.name_server, options.producer_group)
    sender = _Sender(options, client)
    rows = list(_rows(options, batches))
    result = SinkCommitMessage(partition)
    if not rows:
        return result
    if mode == "content":
        seen: dict[bytes, int] = {}
        for row in rows:
            row.digest = _digest(row)
            n = seen.get(row.digest, 0)
            seen[row.digest] = n + 1
            row.uniq = _uniq(str(query_id), str(batch_id), partition, row.digest + n.to_bytes(8, "big"))
        rows.sort(key=lambda r: (_target_key(r), r.uniq))
    elif mode == "order":
        for i, row in enumerate(rows):
            row.uniq = _uniq(str(query_id), str(batch_id), partition, i.to_bytes(8, "big"))
    if mode != "content":
        rows.sort(key=_target_key)  # stable: each target keeps the rows' order
    if mode != "none":
        for row in rows:
            row.message.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = row.uniq
        seed = int(rows[0].uniq[:8], 16)
    else:
        seed = random.randrange(1 << 30)
    chunks = sender.chunks(rows, seed)
    fail_marker = options.fail_marker
    for chunk in chunks:
        if (
            fail_marker is not None
            and options.fail_after_chunks is not None
            and result.chunks >= options.fail_after_chunks
            and Path(fail_marker).exists()
        ):
            Path(fail_marker).unlink()  # fail once: the replay goes through
            raise RuntimeError(f"injected failure after {result.chunks} chunk(s) (testFailMarker)")
        if sender.send(chunk, idempotent=mode != "none"):
            result.sent += len(chunk.rows)
        else:
            result.skipped += len(chunk.rows)
        result.chunks += 1
    if result.skipped:
        log.info(
            "partition %d of batch %s: %d message(s) already stored, skipped",
            partition,
            batch_id,
            result.skipped,
        )
    return result


def _summary(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    sent = sum(m.sent for m in messages if isinstance(m, SinkCommitMessage))
    skipped = sum(m.skipped for m in messages if isinstance(m, SinkCommitMessage))
    return sent, skipped


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.options, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent, _ = _summary(messages)
        log.info("rocketmq sink: %d message(s) written", sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent, _ = _summary(messages)
        log.warning("rocketmq sink: write aborted after %d message(s) were sent (they stay)", sent)


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.options, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        sent, skipped = _summary(messages)
        log.info("rocketmq sink: batch %d committed, %d sent, %d already stored", batchId, sent, skipped)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        sent, _ = _summary(messages)
        log.warning(
            "rocketmq sink: batch %d aborted; %d message(s) sent stay (a replay skips them)", batchId, sent
        )
