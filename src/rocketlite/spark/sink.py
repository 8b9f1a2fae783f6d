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
A task prepares all its messages at once, a column at a time (`sink_batches.prepare`: Arrow
kernels build the properties text and the digest input of every row, two compiled BLAKE2b calls
per task make the ids of `sink_rows`, the per-row reference, and one Arrow join encodes every
SEND_BATCH_MESSAGE entry into one buffer). A chunk is then a range of that buffer, sent as it is;
`IN_FLIGHT` chunks are checked and sent at once. Each chunk is still one batch append checked on
its own last id, so the guarantees above do not depend on the order in which concurrent sends complete.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from rocketlite.client.errors import ClientError, MessageIllegalError, NoRouteError, parse_answer
from rocketlite.client.message import MessageQueue
from rocketlite.client.producer import AsyncProducer, check_topic
from rocketlite.client.sync import shared_loop
from rocketlite.protocol.formats.batch import ENTRY_OVERHEAD
from rocketlite.protocol.requests.send import build_send_batch, parse_send
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.spark import sink_batches
from rocketlite.spark.broker_client import BrokerClient, client_for
from rocketlite.spark.options import SinkOptions
from rocketlite.spark.sink_rows import DROPPED_PROPERTIES
from rocketlite.spark.sink_rows import rows as _rows
from rocketlite.spark.worker import task_started

log = logging.getLogger("rocketlite.spark.sink")

__all__ = ["DROPPED_PROPERTIES", "BatchWriter", "SinkCommitMessage", "StreamWriter", "_rows"]

BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
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
class _Chunk:
    """Entries [start, end) of a task's prepared messages, all for one queue."""

    topic: str
    queue: MessageQueue
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


class _Sender:
    """Sends one task's chunks, each checked first in idempotent mode.

    A chunk goes out as SEND_BATCH_MESSAGE requests whose bodies are slices of the task's
    prepared entries (never decoded back into messages).
    """

    def __init__(self, options: SinkOptions, client: BrokerClient, prepared: sink_batches.Prepared) -> None:
        self.options = options
        self.client = client
        self.prepared = prepared
        self._queues: dict[str, list[MessageQueue]] = {}
        self._producer: AsyncProducer = client.producer(options.producer_group)

    def queues(self, topic: str) -> list[MessageQueue]:
        found = self._queues.get(topic)
        if found is None:
            found = self.client.publish_queues(self.options.producer_group, topic)
            if not found:
                raise ClientError(f"topic {topic} has no writable queue")
            self._queues[topic] = found
        return found

    def target(self, target: sink_batches.Target, seed: int) -> MessageQueue:
        topic, broker, queue_id = target
        queues = self.queues(topic)
        if queue_id is None:
            return queues[seed % len(queues)]
        for mq in queues:
            if mq.queue_id == queue_id and (broker is None or mq.broker_name == broker):
                return mq
        raise ValueError(f"topic {topic} has no writable queue {broker or '*'}:{queue_id}")

    def chunks(self, seed: int) -> list[_Chunk]:
        """Consecutive messages with the same target, cut at batchSize messages / batchBytes (by
        `sink_rows.entry_size`). Messages without a queueId get one queue per chunk, picked from
        `seed` (deterministic for a given seed and route)."""
        prepared = self.prepared
        targets, estimates = prepared.targets, prepared.estimates
        batch_size, batch_bytes = self.options.batch_size, self.options.batch_bytes
        out: list[_Chunk] = []
        key: sink_batches.Target | None = None
        start = size = 0
        for i, entry in enumerate(estimates):
            if i == start or (targets[i] == key and i - start < batch_size and size + entry <= batch_bytes):
                size += entry
                key = targets[i]
                continue
            out.append(_Chunk(targets[start][0], self.target(targets[start], seed + len(out)), start, i))
            start, size, key = i, entry, targets[i]
        if estimates:
            out.append(
                _Chunk(targets[start][0], self.target(targets[start], seed + len(out)), start, len(estimates))
            )
        return out

    def send(self, chunk: _Chunk, *, idempotent: bool) -> bool:
        """Send a chunk; False when it was found stored already (idempotent mode only)."""
        last = self.prepared.uniq[chunk.end - 1]
        if idempotent and self.client.has_unique_key(chunk.topic, last):
            return False
        requests = self._requests(chunk)
        timeout = self.options.send_timeout_ms / 1000
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                for body in requests:
                    shared_loop().call(self._send_body(self._producer, chunk, body, timeout), timeout=None)
                return True
            except ClientError as exc:
                if attempt == SEND_ATTEMPTS or not exc.retriable:
                    raise
                log.warning("sending %d messages to %s failed (%s); retrying", chunk.count, chunk.queue, exc)
                time.sleep(0.2 * attempt)
                if idempotent and self.client.has_unique_key(chunk.topic, last):
                    return True  # the failed attempt was stored after all
        return True  # pragma: no cover - the loop returns or raises

    def _requests(self, chunk: _Chunk) -> list[bytes]:
        """The chunk's request bodies, checked as the producer checks a batch and split where one
        would exceed the producer's maximum message size."""
        limit = self._producer.max_message_size
        check_topic(chunk.topic)
        if chunk.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegalError("batch messages cannot be sent to a retry topic")
        prepared, start, end = self.prepared, chunk.start, chunk.end
        sink_batches.check_lengths(prepared, start, end)
        bodies = prepared.body_lengths[start:end]
        entries = ENTRY_OVERHEAD + bodies + prepared.properties_lengths[start:end]
        if not bodies.all():
            raise MessageIllegalError("the message body is empty")
        if int(bodies.max()) > limit:
            size = int(bodies[int(np.argmax(bodies > limit))])
            raise MessageIllegalError(f"the message body size {size} exceeds the maximum {limit}")
        if int(entries.max()) > limit:
            size = int(entries[int(np.argmax(entries > limit))])
            raise MessageIllegalError(f"a batch message of {size} bytes exceeds the maximum {limit}")
        if int(entries.sum()) <= limit:
            return [prepared.body(start, end)]
        out: list[bytes] = []
        first, size = start, 0
        for i, entry in enumerate(entries.tolist(), start):
            if i > first and size + entry > limit:
                out.append(prepared.body(first, i))
                first, size = i, 0
            size += entry
        out.append(prepared.body(first, end))
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
    task_started()
    partition, batch_id, query_id = _task_context()
    mode = options.idempotence if streaming else "none"
    if mode != "none" and (batch_id is None or query_id is None):
        raise RuntimeError("the idempotent rocketmq sink needs Spark's streaming batch and query ids")
    prepared = sink_batches.prepare(options, batches, mode, str(query_id), str(batch_id), partition)
    result = SinkCommitMessage(partition)
    if not len(prepared):
        return result
    seed = int(prepared.uniq[0][:8], 16) if mode != "none" else random.randrange(1 << 30)
    sender = _Sender(options, client_for(options.name_server, options.producer_group), prepared)
    chunks = sender.chunks(seed)
    fail_after = options.fail_after_chunks if options.fail_marker is not None else None
    idempotent = mode != "none"
    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="rocketmq-sink") as pool:
        pending: collections.deque[tuple[_Chunk, concurrent.futures.Future[bool]]] = collections.deque()

        def settle_one() -> None:
            chunk, future = pending.popleft()
            if future.result():
                result.sent += chunk.count
            else:
                result.skipped += chunk.count
            result.chunks += 1

        try:
            for i, chunk in enumerate(chunks):
                if fail_after is not None and i >= fail_after:
                    while pending:
                        settle_one()
                    # Fail once: the task that removes the marker fails, and the replay goes
                    # through. Removing it is the claim, since two partitions' tasks may both
                    # get here at the same moment and only one of them may fail.
                    try:
                        Path(str(options.fail_marker)).unlink()
                    except FileNotFoundError:
                        pass
                    else:
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
