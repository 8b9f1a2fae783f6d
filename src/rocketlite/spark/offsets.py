"""Offsets of the `rocketmq` source: pure functions, no Spark, no broker.

A position is kept per queue, a queue being (topic, brokerName, queueId). Offsets are the *next*
queue offset to read, so a range [start, end) holds `end - start` queue entries, and a consumer
group committing `end` means "everything before end is processed", as RocketMQ's own consumers do.

JSON layout, in Spark's checkpoint and in the `startingOffsets`/`endingOffsets` options::

    {"TopicA": {"broker-a:0": 42, "broker-a:1": 17}, "TopicB": {"broker-b:0": 0}}

Keys are strings (the checkpoint goes through JSON, where integer keys would come back as
strings). In the options, -2 means earliest and -1 latest, Kafka's convention.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocketlite.spark.option_names import OptionError

EARLIEST: Final = -2
LATEST: Final = -1


@dataclass(frozen=True, order=True, slots=True)
class QueueRef:
    """One queue of one broker; orders by topic, broker, queue id."""

    topic: str
    broker: str
    queue_id: int

    @property
    def key(self) -> str:
        """`brokerName:queueId`, the inner key of the offsets JSON."""
        return f"{self.broker}:{self.queue_id}"

    @classmethod
    def parse(cls, topic: str, key: str, *, bare: bool = False) -> QueueRef:
        """`brokerName:queueId`; with `bare`, also Kafka's `queueId` alone (broker "": every broker)."""
        if bare and key.isdigit():
            return cls(topic, "", int(key))
        broker, sep, queue = key.rpartition(":")
        if not sep or not broker or not queue.lstrip("-").isdigit():
            raise ValueError(f"queue key {key!r} of topic {topic!r} is not 'brokerName:queueId'")
        return cls(topic, broker, int(queue))

    def __str__(self) -> str:
        return f"{self.topic}@{self.key}"


Offsets = dict[QueueRef, int]


def to_json_obj(offsets: Mapping[QueueRef, int]) -> dict[str, dict[str, int]]:
    """The JSON object for `offsets`, topics and queues in a stable order."""
    out: dict[str, dict[str, int]] = {}
    for ref in sorted(offsets):
        out.setdefault(ref.topic, {})[ref.key] = int(offsets[ref])
    return out


def from_json_obj(obj: Mapping[str, Any], *, bare: bool = False) -> Offsets:
    """Parse `{"topic": {"broker:queue": offset}}`; ValueError on anything else.

    `bare` also takes Kafka's `{"topic": {"0": offset}}` (queue 0 on every broker): options only,
    checkpoints always name the broker."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"offsets must be a JSON object of topics, got {type(obj).__name__}")
    out: Offsets = {}
    for topic, queues in obj.items():
        if not isinstance(queues, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object of 'broker:queueId' keys")
        for key, value in queues.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"offset of {topic}@{key} must be an integer, got {value!r}")
            out[QueueRef.parse(str(topic), str(key), bare=bare)] = value
    return out


def to_json(offsets: Mapping[QueueRef, int]) -> str:
    return json.dumps(to_json_obj(offsets), sort_keys=True, separators=(",", ":"))


def from_json(text: str, *, bare: bool = False) -> Offsets:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"offsets are not valid JSON: {exc}") from exc
    return from_json_obj(obj, bare=bare)


OffsetSpec = str | Offsets
"""`"earliest"`, `"latest"`, or explicit offsets (which may hold EARLIEST/LATEST)."""


def parse_spec(text: str | None, default: str, *, option: str, allow_earliest: bool = True) -> OffsetSpec:
    """An offsets option: `earliest`, `latest` or the JSON layout above."""
    if text is None or not text.strip():
        return default
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if word == "earliest" and not allow_earliest:
            raise OptionError(f"{option} cannot be 'earliest'")
        return word
    try:
        spec = from_json(text, bare=True)
    except ValueError as exc:
        raise OptionError(f"{option}: expected 'earliest', 'latest' or JSON offsets: {exc}") from exc
    for ref, value in spec.items():
        if value < EARLIEST or (value == EARLIEST and not allow_earliest):
            raise OptionError(f"{option}: offset {value} of {ref} is not allowed")
    return spec


def resolve(
    spec: OffsetSpec,
    queues: Iterable[QueueRef],
    min_offsets: Mapping[QueueRef, int],
    max_offsets: Mapping[QueueRef, int],
    *,
    missing: str,
) -> Offsets:
    """Concrete offsets of `queues` for a spec; queues the JSON does not name take `missing`."""
    out: Offsets = {}
    for ref in queues:
        lo, hi = min_offsets[ref], max_offsets[ref]
        if isinstance(spec, str):
            value = EARLIEST if spec == "earliest" else LATEST
        else:
            default = EARLIEST if missing == "earliest" else LATEST
            value = spec.get(ref, spec.get(QueueRef(ref.topic, "", ref.queue_id), default))
        if value == EARLIEST:
            out[ref] = lo
        elif value == LATEST:
            out[ref] = hi
        else:
            out[ref] = value
    return out


def split_range(start: int, end: int, max_records: int | None) -> list[tuple[int, int]]:
    """[start, end) in equal consecutive pieces of at most `max_records`; nothing when empty."""
    if end <= start:
        return []
    if not max_records or end - start <= max_records:
        return [(start, end)]
    parts = math.ceil((end - start) / max_records)
    step, extra = divmod(end - start, parts)
    out: list[tuple[int, int]] = []
    lo = start
    for i in range(parts):
        hi = lo + step + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def rate_limit(start: Mapping[QueueRef, int], latest: Mapping[QueueRef, int], max_rows: int) -> Offsets:
    """End offsets admitting at most `max_rows` entries, split in proportion to each queue's backlog.

    Every queue gets floor(share); the rows left over go one each to the queues with the largest
    fractional share (ties: the queue with the smaller backlog, then queue order), so the total is
    exactly min(max_rows, backlog). Queues only in `latest` start from their `latest` value (they
    are new: see `source.StreamReader`). The result never moves a queue backwards.
    """
    backlog = {ref: max(latest[ref] - start.get(ref, latest[ref]), 0) for ref in latest}
    total = sum(backlog.values())
    end: Offsets = {ref: start.get(ref, latest[ref]) for ref in latest}
    for ref, offset in start.items():
        end.setdefault(ref, offset)
    if total <= max_rows:
        for ref, size in backlog.items():
            end[ref] += size
        return end
    shares = {ref: max_rows * size / total for ref, size in backlog.items() if size}
    granted = {ref: min(math.floor(share), backlog[ref]) for ref, share in shares.items()}
    left = max_rows - sum(granted.values())
    order = sorted(shares, key=lambda r: (-(shares[r] - granted[r]), backlog[r], r))
    for ref in order:
        if left <= 0:
            break
        if granted[ref] < backlog[ref]:
            granted[ref] += 1
            left -= 1
    for ref, rows in granted.items():
        end[ref] += rows
    return end


def merge_latest(previous: Mapping[QueueRef, int], current: Mapping[QueueRef, int]) -> Offsets:
    """Queues that vanished from the route (a broker down) keep their last known offset."""
    out = dict(previous)
    out.update(current)
    return out
