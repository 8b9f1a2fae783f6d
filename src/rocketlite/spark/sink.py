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

Sending
-------
A task takes its Arrow batches a column at a time into plain rows (no `Message` per row),
derives the ids with one hash call each, encodes each chunk's SEND_BATCH_MESSAGE body straight
from the rows (`protocol.batch.encode_batch_columns`) and keeps `IN_FLIGHT` chunks being checked
and sent at once. Each chunk is still one batch append checked on its own last id, so the
guarantees above do not depend on the order in which concurrent sends complete.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import logging
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from rocketlite.client.errors import ClientError, MessageIllegalError, NoRouteError, parse_answer
from rocketlite.client.message import Message, MessageQueue
from rocketlite.client.producer import AsyncProducer, check_topic
from rocketlite.client.sync import shared_loop
from rocketlite.protocol.batch import ENTRY_OVERHEAD, encode_batch_columns
from rocketlite.protocol.message import KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from rocketlite.protocol.requests.send import build_send_batch, parse_send
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX
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
IN_FLIGHT: Final = 4  # chunks being checked and sent at once by one task


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
    """One row as the message it becomes: `properties` in the order they are sent (the user's,
    then TAGS, KEYS and UNIQ_KEY), as a `Message` would hold them."""

    topic: str
    queue_id: int | None
    broker: str | None
    body: bytes
    properties: dict[str, str]
    digest: bytes = b""
    uniq: str = ""
    wire: bytes = b""  # the properties as sent (UTF-8), set when the rows are chunked

    @property
    def message(self) -> Message:
        return Message(self.topic, self.body, properties=self.properties)


@dataclass(slots=True)
class _Chunk:
    topic: str
    queue: MessageQueue
    rows: list[_Row] = field(default_factory=list)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    return batch.column(name).to_pylist() if name in batch.schema.names else None


def _rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[_Row]:
    """The rows of every batch, a column at a time into Python lists (no `Message` per row:
    the properties dict is what `Message(topic, body, tags=, keys=, properties=)` would hold)."""
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
            yield _Row(
                topic,
                queue_ids[i] if queue_ids is not None else None,
                brokers[i] if brokers is not None else None,
                raw.encode("utf-8") if isinstance(raw, str) else bytes(raw),
                user,
            )


def _target_key(row: _Row) -> tuple[str, str, int]:
    return (row.topic, row.broker or "", -1 if row.queue_id is None else row.queue_id)


def _digest_prefix(row: _Row) -> bytes:
    return b"".join(part.encode("utf-8") + b"\0" for part in (row.topic, str(row.queue_id), row.broker or ""))


def _digest(row: _Row, prefix: bytes | None = None) -> bytes:
    """blake2b-128 of the row's target, its properties sorted by name and its body (one hash
    call over the joined bytes: the same digest as hashing the parts one by one)."""
    props = row.properties
    parts = [_digest_prefix(row) if prefix is None else prefix]
    for k in sorted(props):
        parts += (k.encode("utf-8"), b"\1", props[k].encode("utf-8"), b"\2")
    parts += (b"\0", row.body)
    return hashlib.blake2b(b"".join(parts), digest_size=16).digest()


def _uniq(query_id: str, batch_id: str, partition: int, detail: bytes) -> str:
    return _uniq_over(f"{query_id}/{batch_id}/{partition}/".encode(), detail)


def _uniq_over(prefix: bytes, detail: bytes) -> str:
    return hashlib.blake2b(prefix + detail, digest_size=16).hexdigest().upper()


def _assign_ids(rows: list[_Row], mode: str, query_id: str, batch_id: str, partition: int) -> None:
    """Give each row its UNIQ_KEY (module docstring) and sort the rows by target for chunking."""
    prefix = f"{query_id}/{batch_id}/{partition}/".encode()
    if mode == "content":
        seen: dict[bytes, int] = {}
        targets: dict[tuple[str, int | None, str | None], bytes] = {}
        for row in rows:
            target = (row.topic, row.queue_id, row.broker)
            head = targets.get(target)
            if head is None:
                head = targets[target] = _digest_prefix(row)
            row.digest = digest = _digest(row, head)
            n = seen.get(digest, 0)
            seen[digest] = n + 1
            row.uniq = _uniq_over(prefix, digest + n.to_bytes(8, "big"))
        rows.sort(key=lambda r: (_target_key(r), r.uniq))
        return
    if mode == "order":
        for i, row in enumerate(rows):
            row.uniq = _uniq_over(prefix, i.to_bytes(8, "big"))
    rows.sort(key=_target_key)  # stable: each target keeps the rows' order


def _entry_size(row: _Row) -> int:
    """The chunking estimate of one message (kept as it was: chunk cuts decide the ids checked)."""
    return 64 + len(row.body) + sum(len(k) + len(v) + 2 for k, v in row.properties.items())


def _properties_text(row: _Row) -> str:
    """`properties_to_string` of the row's properties."""
    pair = NAME_VALUE_SEPARATOR
    return PROPERTY_SEPARATOR.join(f"{k}{pair}{v}" for k, v in row.properties.items() if v is not None)


def _encode_chunk(rows: Sequence[_Row]) -> tuple[list[bytes], list[bytes]]:
    """Bodies and UTF-8 properties strings (`row.wire`, made here if chunking did not)."""
    return [r.body for r in rows], [r.wire or _properties_text(r).encode("utf-8") for r in rows]


class _Sender:
    """Sends one task's chunks, each checked first in idempotent mode.

    Over a `BrokerClient` a chunk goes out as one SEND_BATCH_MESSAGE whose body is encoded here
    straight from the rows (`batch.encode_batch_columns`; no `Message` per row); any other client
    (a test double) gets `Message`s through its `send_batch`.
    """

    def __init__(self, options: SinkOptions, client: BrokerClient) -> None:
        self.options = options
        self.client = client
        self._queues: dict[str, list[MessageQueue]] = {}
        self._producer: AsyncProducer | None = None
        if isinstance(client, BrokerClient):
            self._producer = client.producer(options.producer_group)

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
        batch_size, batch_bytes = self.options.batch_size, self.options.batch_bytes
        for row in rows:
            key = (row.topic, row.broker, row.queue_id)
            text = _properties_text(row)  # no None values: len(text) + 1 is _entry_size's sum
            row.wire = text.encode("utf-8")
            entry = 64 + len(row.body) + (len(text) + 1 if text else 0)
            if (
                current is None
                or key != current_key
                or len(current.rows) >= batch_size
                or size + entry > batch_bytes
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
        requests = self._requests(chunk) if self._producer is not None else []
        timeout = self.options.send_timeout_ms / 1000
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                if self._producer is None:
                    messages = [r.message for r in chunk.rows]
                    self.client.send_batch(self.options.producer_group, chunk.queue, messages, timeout)
                else:
                    for body in requests:
                        shared_loop().call(
                            self._send_body(self._producer, chunk, body, timeout), timeout=None
                        )
                return True
            except ClientError as exc:
                if attempt == SEND_ATTEMPTS or not exc.retriable:
                    raise
                log.warning(
                    "sending %d messages to %s failed (%s); retrying", len(chunk.rows), chunk.queue, exc
                )
                time.sleep(0.2 * attempt)
                if idempotent and self.client.has_unique_key(chunk.topic, last):
                    return True  # the failed attempt was stored after all
        return True  # pragma: no cover - the loop returns or raises

    def _requests(self, chunk: _Chunk) -> list[bytes]:
        """The chunk's request bodies, checked as the producer checks a batch and split where one
        would exceed the producer's maximum message size."""
        assert self._producer is not None
        limit = self._producer.max_message_size
        check_topic(chunk.topic)
        if chunk.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegalError("batch messages cannot be sent to a retry topic")
        bodies, props = _encode_chunk(chunk.rows)
        out: list[bytes] = []
        start = size = 0
        for i, (body, prop) in enumerate(zip(bodies, props, strict=True)):
            if not body:
                raise MessageIllegalError("the message body is empty")
            if len(body) > limit:
                raise MessageIllegalError(f"the message body size {len(body)} exceeds the maximum {limit}")
            entry = ENTRY_OVERHEAD + len(body) + len(prop)
            if entry > limit:
                raise MessageIllegalError(f"a batch message of {entry} bytes exceeds the maximum {limit}")
            if i > start and size + entry > limit:
                out.append(encode_batch_columns(bodies[start:i], props[start:i]))
                start, size = i, 0
            size += entry
        out.append(encode_batch_columns(bodies[start:], props[start:]))
        return out

    @staticmethod
    async def _send_body(producer: AsyncProducer, chunk: _Chunk, body: bytes, timeout: float) -> None:
        """One SEND_BATCH_MESSAGE to the chunk's queue; a refusal raises the broker's error."""
        mq, instance = chunk.queue, producer.instance
        addr = instance.master_addr(mq.broker_name)
        if addr is None:
            await producer.publish_info(mq.topic)
            addr = instance.master_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(f"broker {mq.broker_name} of topic {mq.topic} has no master address")
        cmd = build_send_batch(
            group=producer.group,
            topic=chunk.topic,
            queue_id=mq.queue_id,
            body=body,
            properties="",
            born_timestamp=int(time.time() * 1000),
            default_topic=producer.create_topic_key,
            default_topic_queue_nums=producer.default_topic_queue_nums,
            broker_name=mq.broker_name,
        )
        parse_answer(parse_send, await instance.invoke(addr, cmd, timeout))


def _task_context() -> tuple[int, str | None, str | None]:
    from pyspark import TaskContext  # noqa: PLC0415

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None, None
    return ctx.partitionId(), ctx.getLocalProperty(BATCH_ID_PROPERTY), ctx.getLocalProperty(QUERY_ID_PROPERTY)


def write_partition(
    options: SinkOptions, batches: Iterator[pa.RecordBatch], *, streaming: bool
) -> SinkCommitMessage:
    """Everything one task writes (runs in an executor worker).

    Chunks go out `IN_FLIGHT` at a time (each a check and a send on a worker thread; the
    blocking calls wait on the shared client loop). That keeps the guarantees: every chunk is
    one batch append checked on its own last id, so a replay skips exactly the chunks stored,
    whatever order the earlier attempt's sends completed in. The first failure fails the task,
    after the chunks already under way have finished.
    """
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
    _assign_ids(rows, mode, str(query_id), str(batch_id), partition)
    if mode != "none":
        uniq_key = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        for row in rows:
            row.properties[uniq_key] = row.uniq
        seed = int(rows[0].uniq[:8], 16)
    else:
        seed = random.randrange(1 << 30)
    chunks = sender.chunks(rows, seed)
    fail_after = options.fail_after_chunks if options.fail_marker is not None else None
    idempotent = mode != "none"
    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="rocketmq-sink") as pool:
        pending: collections.deque[tuple[_Chunk, concurrent.futures.Future[bool]]] = collections.deque()

        def settle_one() -> None:
            chunk, future = pending.popleft()
            if future.result():
                result.sent += len(chunk.rows)
            else:
                result.skipped += len(chunk.rows)
            result.chunks += 1

        try:
            for i, chunk in enumerate(chunks):
                if fail_after is not None and i >= fail_after:
                    while pending:
                        settle_one()
                    marker = Path(str(options.fail_marker))
                    if marker.exists():
                        marker.unlink()  # fail once: the replay goes through
                        raise RuntimeError(
                            f"injected failure after {result.chunks} chunk(s) (testFailMarker)"
                        )
                while len(pending) >= IN_FLIGHT:
                    settle_one()
                pending.append((chunk, pool.submit(sender.send, chunk, idempotent=idempotent)))
            while pending:
                settle_one()
        finally:
            for _, future in pending:
                future.cancel()
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
