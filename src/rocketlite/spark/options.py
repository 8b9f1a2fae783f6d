"""Options of the `rocketmq` and `rocketmq-store` data sources, parsed and checked (no Spark).

Spark hands a data source its options as a case-insensitive dict whose keys arrive lower-cased
and whose values are all strings (`.option("maxOffsetsPerTrigger", 1000)` gives
`{"maxoffsetspertrigger": "1000"}`), so every option is looked up lower-cased here and parsed from
text. Mistakes raise `ValueError` naming the option, which Spark shows to the user.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from rocketlite.spark.offsets import OffsetSpec, parse_spec

DEFAULT_READER_GROUP: Final = "rocketlite-spark-reader"
DEFAULT_PRODUCER_GROUP: Final = "rocketlite-spark-writer"
IDEMPOTENCE_MODES: Final = ("content", "order", "none")


class _Opts:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.raw = {str(k).lower(): str(v) for k, v in options.items() if v is not None}

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name.lower())
        if value is None or value.strip() == "":
            return default
        return value.strip()

    def required(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise ValueError(f"option {name} is required")
        return value

    def integer(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        text = self.text(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"option {name} must be an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise ValueError(f"option {name} must be at least {minimum}, got {value}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        text = self.text(name)
        if text is None:
            return default
        low = text.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f"option {name} must be true or false, got {text!r}")

    def timestamp(self, name: str) -> int | None:
        """Epoch milliseconds, or an ISO-8601 date-time (UTC when it names no zone)."""
        text = self.text(name)
        if text is None:
            return None
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"option {name} must be epoch milliseconds or ISO-8601, got {text!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    name_server: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    consumer_group: str
    group_given: bool
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    tags: str
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    commit_offsets: bool
    pull_batch_size: int
    pull_timeout_ms: int
    rows_per_batch: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        o = _Opts(options)
        name_server = o.required("nameServer")
        topic_text = o.text("topic")
        pattern = o.text("topicPattern")
        if (topic_text is None) == (pattern is None):
            raise ValueError("exactly one of the options topic and topicPattern must be given")
        topics = tuple(t.strip() for t in (topic_text or "").split(",") if t.strip())
        if topic_text is not None and not topics:
            raise ValueError("option topic names no topic")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option topicPattern is not a valid regular expression: {exc}") from exc
        group = o.text("consumerGroup")
        starting = parse_spec(
            o.text("startingOffsets"), "latest" if streaming else "earliest", option="startingOffsets"
        )
        ending = parse_spec(o.text("endingOffsets"), "latest", option="endingOffsets", allow_earliest=False)
        if streaming and o.text("endingOffsets") is not None:
            raise ValueError("option endingOffsets is for batch queries only")
        if streaming and o.text("endingTimestamp") is not None:
            raise ValueError("option endingTimestamp is for batch queries only")
        max_per_trigger = o.integer("maxOffsetsPerTrigger", minimum=1)
        if not streaming and max_per_trigger is not None:
            raise ValueError("option maxOffsetsPerTrigger is for streaming queries only")
        start_ts = o.timestamp("startingTimestamp")
        end_ts = o.timestamp("endingTimestamp")
        if start_ts is not None and end_ts is not None and end_ts < start_ts:
            raise ValueError("endingTimestamp is before startingTimestamp")
        return cls(
            name_server=name_server,
            topics=topics,
            topic_pattern=pattern,
            consumer_group=group or DEFAULT_READER_GROUP,
            group_given=group is not None,
            starting=starting,
            ending=ending,
            starting_timestamp=start_ts,
            ending_timestamp=end_ts,
            tags=o.text("tags", "*") or "*",
            max_records_per_partition=o.integer("maxRecordsPerPartition", minimum=1),
            max_offsets_per_trigger=max_per_trigger,
            fail_on_data_loss=o.flag("failOnDataLoss", True),
            commit_offsets=o.flag("commitOffsets", group is not None),
            pull_batch_size=o.integer("pullBatchSize", 1024, minimum=1) or 1024,
            pull_timeout_ms=o.integer("pullTimeoutMs", 30_000, minimum=1) or 30_000,
            rows_per_batch=o.integer("rowsPerBatch", 8192, minimum=1) or 8192,
        )

    def matches(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True, slots=True)
class SinkOptions:
    name_server: str
    topic: str | None
    producer_group: str
    batch_size: int
    batch_bytes: int
    idempotence: str
    send_timeout_ms: int
    fail_after_chunks: int | None
    fail_marker: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
        o = _Opts(options)
        mode = (o.text("idempotence", "content" if streaming else "none") or "none").lower()
        if mode not in IDEMPOTENCE_MODES:
            raise ValueError(
                f"option idempotence must be one of {', '.join(IDEMPOTENCE_MODES)}, got {mode!r}"
            )
        if not streaming and mode != "none":
            raise ValueError("option idempotence applies to streaming writes; batch writes are at-least-once")
        return cls(
            name_server=o.required("nameServer"),
            topic=o.text("topic"),
            producer_group=o.text("producerGroup", DEFAULT_PRODUCER_GROUP) or DEFAULT_PRODUCER_GROUP,
            batch_size=o.integer("batchSize", 1000, minimum=1) or 1000,
            batch_bytes=o.integer("batchBytes", 1024 * 1024, minimum=1024) or 1024 * 1024,
            idempotence=mode,
            send_timeout_ms=o.integer("sendTimeoutMs", 10_000, minimum=1) or 10_000,
            fail_after_chunks=o.integer("testFailAfterChunks", minimum=0),
            fail_marker=o.text("testFailMarker"),
        )


@dataclass(frozen=True, slots=True)
class StoreOptions:
    path: str
    broker_name: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    use_consume_queue: bool
    max_bytes_per_partition: int | None
    verify_crc: bool
    fail_on_corruption: bool
    rows_per_batch: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StoreOptions:
        o = _Opts(options)
        path = o.text("path")
        if path is None:
            raise ValueError("give the store directory: spark.read.format('rocketmq-store').load(path)")
        topic_text = o.text("topic")
        pattern = o.text("topicPattern")
        if topic_text is not None and pattern is not None:
            raise ValueError("give at most one of the options topic and topicPattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option topicPattern is not a valid regular expression: {exc}") from exc
        return cls(
            path=path,
            broker_name=o.text("brokerName", "") or "",
            topics=tuple(t.strip() for t in (topic_text or "").split(",") if t.strip()),
            topic_pattern=pattern,
            use_consume_queue=o.flag("useConsumeQueue", False),
            max_bytes_per_partition=o.integer("maxBytesPerPartition", minimum=4096),
            verify_crc=o.flag("verifyCrc", True),
            fail_on_corruption=o.flag("failOnCorruption", False),
            rows_per_batch=o.integer("rowsPerBatch", 8192, minimum=1) or 8192,
        )

    @property
    def filters_topics(self) -> bool:
        return bool(self.topics) or self.topic_pattern is not None

    def matches(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return not self.topics or topic in self.topics
