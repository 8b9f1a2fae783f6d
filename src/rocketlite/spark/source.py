"""The `rocketmq` data source: batch and streaming reads of topics, batch and streaming writes.

Where the code runs (PySpark 4.x Python data sources): `RocketMQDataSource` and the readers are
built in short-lived Python workers and pickled, so they hold options and plain offsets only; the
broker clients are made on first use in whatever process needs one (`broker.client_for`).
`partitions()` runs on the driver side, `read()` in executor workers. A `StreamReader` lives for
the whole query in one driver-side Python process (offsets, limits, commits); its `read()` runs on
executors from a pickled copy, so nothing `latestOffset` learns is needed there: each
`QueueRange` carries everything its task needs.

Offsets are the next queue offset to read, per (topic, broker, queue); see `offsets`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketlite.client.api import build_subscription
from rocketlite.client.errors import TopicNotExistError
from rocketlite.spark import offsets as off
from rocketlite.spark.broker_client import BrokerClient, PullAnswer, PullOutcome, client_for
from rocketlite.spark.offsets import Offsets, QueueRef
from rocketlite.spark.option_names import OptionError
from rocketlite.spark.options import SinkOptions, SourceOptions
from rocketlite.spark.pull_channel import BatchBuffer, channel_for, release
from rocketlite.spark.records import Stop, decode_batch, scan_positions
from rocketlite.spark.schema import COLUMNS, SPARK_DDL
from rocketlite.spark.worker import task_started

log = logging.getLogger("rocketlite.spark.source")

__all__ = ["DataLossError", "QueueRange", "RocketMQDataSource"]

_FLUSH_BYTES = 8 * 1024 * 1024


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, a recreated topic) and failOnDataLoss is true."""


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in the broker "
            "(deleted by retention, or the topic was recreated). Set failOnDataLoss=false to skip it "
            "with a warning instead."
        )
    log.warning("%s; skipping (failOnDataLoss=false)", message)


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Queue offsets [start, end) of one queue: one Spark task."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    min_store_ms: int | None = None  # rows stored before this are dropped (startingTimestamp)
    max_store_ms: int | None = None  # rows stored at or after this are dropped (endingTimestamp)

    @property
    def ref(self) -> QueueRef:
        return QueueRef(self.topic, self.broker, self.queue_id)


# ------------------------------------------------------------------------------------------ reading
def discover(
    client: BrokerClient, options: SourceOptions, *, check: bool = False, batch: bool = False
) -> list[QueueRef]:
    """The readable queues of the topics the options name, or of every topic matching the pattern.

    With `check` (a batch read's plan, a stream's first offsets) a named topic that does not exist
    is an error, as is an `assign` queue the topic does not have, and for a batch read a pattern
    that matches no topic. A stream's pattern may match nothing yet: topics created later are
    picked up. Later calls (a running stream) tolerate a missing route: a broker may be down.
    """
    if options.topic_pattern is None:
        topics = list(options.topics)
    else:
        topics = [t for t in client.topics() if options.matches(t)]
        if check and batch and not topics:
            raise TopicNotExistError(
                f"topicPattern {options.topic_pattern!r} matches no topic "
                f"on name server {options.name_server}",
                retriable=False,
            )
    queues: list[QueueRef] = []
    for topic in topics:
        found = client.queues(topic)
        if check and not found:
            raise TopicNotExistError(
                f"topic {topic} does not exist on name server {options.name_server} "
                "(or no broker serving it is registered)",
                retriable=False,
            )
        queues.extend(q for q in found if options.assigned(q))
    if check:
        for want in options.assign:
            if not any(q.topic == want.topic and q.queue_id == want.queue_id and want.broker in ("", q.broker)
                       for q in queues):  # fmt: skip
                raise TopicNotExistError(
                    f"assign names queue {want.queue_id}"
                    + (f" of broker {want.broker}" if want.broker else "")
                    + f" of topic {want.topic}, which has no such queue on name server {options.name_server}",
                    retriable=False,
                )
    return sorted(queues)


def _min_store_ms(options: SourceOptions, ref: QueueRef) -> int | None:
    """Rows stored before this are dropped: startingTimestamp, or the queue's startingOffsetsByTimestamp."""
    if options.starting_by_timestamp is not None:
        by_ts = options.starting_by_timestamp
        return by_ts.get(ref, by_ts.get(QueueRef(ref.topic, "", ref.queue_id)))
    return options.starting_timestamp


def read_range(options: SourceOptions, part: QueueRange) -> Iterator[pa.RecordBatch]:
    """The rows of one queue range as Arrow batches, pulled from the queue's broker.

    The answers' bodies are received into one `BatchBuffer` per Arrow batch (`pull_channel`), and
    the next pull goes out as soon as an answer's header says where the data continues, before its
    body is read: the broker works while this worker receives and decodes. (More pulls in flight,
    at guessed offsets, measured slower: the broker is one thread, and guesses miss on short
    answers.)
    """
    client = client_for(options.name_server, options.consumer_group)
    ref = part.ref
    tags = build_subscription(ref.topic, options.tags, 0).tags_set
    wanted = pa.array(sorted(tags), pa.string()) if tags else None
    pending = BatchBuffer(_FLUSH_BYTES)
    pending_entries = 0
    offset = part.start

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal pending, pending_entries
        if not pending.used:
            return
        buf = pending.view()
        pending, pending_entries = BatchBuffer(_FLUSH_BYTES), 0
        scan = scan_positions(buf, 0, len(buf), max_count=len(buf))
        if scan.stop is Stop.CORRUPT:
            raise RuntimeError(f"{ref}: the broker sent a malformed pull body ({scan.reason})")
        batch = decode_batch(buf, scan.positions, ref.broker)
        yield from _kept(batch, part, wanted)

    channel = channel_for(client.broker_address(ref), options.pull_timeout_ms / 1000)
    try:

        def request(at: int) -> bool:
            if at >= part.end:
                return False
            size = min(options.pull_batch_size, part.end - at)
            channel.send(client.pull_command(ref, at, size, options.tags))
            return True

        in_flight = request(offset)
        while in_flight:
            answer = channel.read_header()
            result = PullAnswer.of(answer.command)
            found = False
            if result.outcome in (PullOutcome.FOUND, PullOutcome.NO_MATCH):
                if result.next_begin <= offset:
                    raise RuntimeError(f"{ref}: the broker did not advance past offset {offset}")
                found = result.outcome == PullOutcome.FOUND
                pending_entries += result.next_begin - offset
                offset = result.next_begin
            elif result.outcome == PullOutcome.MOVED and offset < result.min_offset:
                report_data_loss(
                    options.fail_on_data_loss,
                    f"{ref}: offsets {offset}..{result.min_offset - 1} are no longer stored "
                    f"(the queue now starts at {result.min_offset})",
                )
                offset = result.min_offset
            else:  # NO_NEW, or MOVED past the end: the queue ends before the range does
                report_data_loss(
                    options.fail_on_data_loss,
                    f"{ref}: the queue ends at {result.max_offset} but offsets up to {part.end - 1} "
                    "were planned",
                )
                offset = part.end
            in_flight = request(offset)
            channel.read_body(answer, pending if found else None)
            if pending.used >= _FLUSH_BYTES or pending_entries >= options.rows_per_batch:
                yield from flush()
        yield from flush()
    finally:
        release(channel)


def _kept(batch: pa.RecordBatch, part: QueueRange, wanted: pa.Array | None) -> Iterator[pa.RecordBatch]:
    """The rows of `batch` the range asks for: its offsets, its tags (the broker filters by tag hash
    codes, which collide), its store times. A pull never answers offsets before the one asked
    for, nor more entries than asked, so the offsets' check is one min/max in the common case."""
    if not batch.num_rows:
        return
    offsets = batch.column("queueOffset")
    bounds = pc.min_max(offsets)
    mask = None
    if bounds["min"].as_py() < part.start or bounds["max"].as_py() >= part.end:
        mask = pc.and_(pc.greater_equal(offsets, part.start), pc.less(offsets, part.end))
    conditions = []
    if wanted is not None:
        conditions.append(pc.is_in(batch.column("tags"), value_set=wanted))
    if part.min_store_ms is not None or part.max_store_ms is not None:
        stored = batch.column("storeTimestamp").cast(pa.int64())
        if part.min_store_ms is not None:
            conditions.append(pc.greater_equal(stored, part.min_store_ms * 1000))
        if part.max_store_ms is not None:
            conditions.append(pc.less(stored, part.max_store_ms * 1000))
    for condition in conditions:
        mask = condition if mask is None else pc.and_(mask, condition)
    if mask is not None and not pc.all(mask).as_py():
        batch = batch.filter(mask)
    if batch.num_rows:
        yield batch


def _resolve_start(client: BrokerClient, options: SourceOptions, queues: list[QueueRef],
                   lo: dict[QueueRef, int], hi: dict[QueueRef, int]) -> Offsets:  # fmt: skip
    start = off.resolve(options.starting, queues, lo, hi, missing="earliest")
    by_time: dict[int, list[QueueRef]] = {}
    for q in queues:
        ts = _min_store_ms(options, q)
        if ts is not None:
            by_time.setdefault(ts, []).append(q)
    for ts, refs in by_time.items():
        found = client.offsets_for_time(refs, ts)
        # One entry earlier: 4.x brokers may answer with the entry after the boundary; the exact
        # cut is made on storeTimestamp in read().
        start.update({q: max(lo[q], found[q] - 1) for q in refs})
    return start


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        client = client_for(o.name_server, o.consumer_group)
        queues = discover(client, o, check=True, batch=True)
        if not queues:
            return []
        lo = client.min_offsets(queues)
        hi = client.max_offsets(queues)
        start = _resolve_start(client, o, queues, lo, hi)
        if o.ending_timestamp is not None:
            found = client.offsets_for_time(queues, o.ending_timestamp)
            end = {q: min(hi[q], found[q] + 1) for q in queues}
        else:
            end = off.resolve(o.ending, queues, lo, hi, missing="latest")
        parts: list[InputPartition] = []
        for q in queues:
            s, e = start[q], min(end[q], hi[q])
            if s < lo[q] and e > s:
                report_data_loss(
                    o.fail_on_data_loss, f"{q}: starting offset {s} is below the first stored {lo[q]}"
                )
                s = lo[q]
            for a, b in off.split_range(s, e, o.max_records_per_partition):
                parts.append(
                    QueueRange(q.topic, q.broker, q.queue_id, a, b, _min_store_ms(o, q), o.ending_timestamp)
                )
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task_started()
        if isinstance(partition, QueueRange):  # else Spark's stand-in when there is nothing to read
            yield from read_range(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets per (topic, broker, queue), checkpointed by Spark.

    A queue first seen after the query started (a new topic matching the pattern, more queues) is
    registered at its earliest offset in the batch that sees it, and read from the next batch on.
    A queue that vanishes from the route (a broker down) keeps its offset until it is back.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._frozen: tuple[dict[QueueRef, int], dict[QueueRef, int]] | None = None
        self._latest: Offsets = {}
        self._last_trigger: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_frozen": None, "_latest": {}, "_last_trigger": None}

    def _hold_back(self, known: Offsets, growing: Offsets) -> bool:
        """minOffsetsPerTrigger/maxTriggerDelay (Kafka's): no batch while fewer new entries than the
        minimum are waiting, unless maxTriggerDelay has passed since the last batch (or the query
        start). Not under AvailableNow, which reads everything there is."""
        least = self.options.min_offsets_per_trigger
        if not least or self._frozen is not None:
            return False
        now = time.monotonic()
        if self._last_trigger is None:
            self._last_trigger = now
        waiting = sum(max(v - known[q], 0) for q, v in growing.items() if q in known)
        if waiting < least and (now - self._last_trigger) * 1000 < self.options.max_trigger_delay_ms:
            return True
        self._last_trigger = now
        return False

    def _client(self) -> BrokerClient:
        return client_for(self.options.name_server, self.options.consumer_group)

    def _snapshot(self, *, check: bool = False) -> tuple[dict[QueueRef, int], dict[QueueRef, int]]:
        client = self._client()
        queues = discover(client, self.options, check=check)
        return client.min_offsets(queues), client.max_offsets(queues)

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        lo, hi = self._snapshot(check=True)
        queues = sorted(hi)
        start = _resolve_start(self._client(), self.options, queues, lo, hi)
        return off.to_json_obj(start)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._frozen = self._snapshot()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        known = off.from_json_obj(start)
        lo, hi = self._frozen if self._frozen is not None else self._snapshot()
        latest: Offsets = {}
        shrunk: list[QueueRef] = []
        for q, top in hi.items():
            if q not in known:
                latest[q] = lo[q]  # registered now, read from the next batch
                continue
            if top < known[q]:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"{q}: the queue now ends at {top}, before the checkpointed offset {known[q]}",
                )
                shrunk.append(q)
            elif known[q] < lo[q] < top:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"{q}: offsets {known[q]}..{lo[q] - 1} are no longer stored",
                )
            latest[q] = top
        latest = off.merge_latest(known, latest)
        self._latest = latest
        growing = {q: v for q, v in latest.items() if q not in shrunk}
        if not shrunk and self._hold_back(known, growing):
            return dict(start)
        if isinstance(limit, ReadMaxRows):
            end = off.rate_limit(known, growing, limit.max_rows)
        else:
            end = dict(growing)
        for q in shrunk:
            end[q] = latest[q]
        return off.to_json_obj(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        return off.to_json_obj(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = off.from_json_obj(start)
        finish = off.from_json_obj(end)
        o = self.options
        parts: list[InputPartition] = []
        for q in sorted(finish):
            for a, b in off.split_range(begin.get(q, finish[q]), finish[q], o.max_records_per_partition):
                parts.append(QueueRange(q.topic, q.broker, q.queue_id, a, b, _min_store_ms(o, q), None))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task_started()
        if isinstance(partition, QueueRange):
            yield from read_range(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Mirror the processed offsets to the consumer group, for lag tools (never read back)."""
        if not self.options.commit_offsets:
            return
        try:
            self._client().commit(off.from_json_obj(end))
        except Exception as exc:  # monitoring only: never fail the query for it
            log.warning("committing offsets of group %s failed: %s", self.options.consumer_group, exc)

    def stop(self) -> None:
        self._frozen = None


# ------------------------------------------------------------------------------------------ the source
class RocketMQDataSource(DataSource):
    """`spark.read.format("rocketmq")`: see docs/spark.md for options, schema and guarantees."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SPARK_DDL

    def _check_schema(self, schema: StructType) -> None:
        given = [f.name for f in schema.fields]
        if given != list(COLUMNS):
            raise ValueError(f"the rocketmq source has a fixed schema ({SPARK_DDL}); got columns {given}")

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return BatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        self._check_schema(schema)
        return StreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketlite.spark.sink import BatchWriter  # noqa: PLC0415

        if overwrite:
            raise OptionError("the rocketmq sink only appends: use mode('append')")
        return BatchWriter(SinkOptions.parse(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        from rocketlite.spark.sink import StreamWriter  # noqa: PLC0415

        if overwrite:
            raise OptionError("the rocketmq sink only appends (outputMode append or update)")
        return StreamWriter(SinkOptions.parse(self.options, streaming=True), schema)
