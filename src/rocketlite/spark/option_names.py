"""Which option names each data source accepts, Kafka's names as aliases, and the checks on them.

Spark passes every `.option(...)` through without looking at it, so a typo (`startingOffset`) or
a Kafka habit (`subscribe`) would otherwise be ignored in silence and the query would read
something else than the user meant. Every source here therefore refuses names it does not know,
naming the closest accepted one, and maps Kafka's names where they mean the same thing. Kafka
names that look alike but mean something else (`kafka.bootstrap.servers`, `minPartitions`) are
refused with a pointer to rocketlite's own option, never silently mapped.

Keys arrive lower-cased (Spark's options are case-insensitive); the messages use the spelling of
the documentation.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Final

from rocketlite.protocol.errors import ConfigError


class OptionError(ConfigError, ValueError):
    """A data source option is unknown, malformed or conflicts with another; the message says which.

    Also a `ValueError`, which is what Spark and PySpark code expect from bad options.
    """


# Keys Spark itself puts into a Python data source's options: `load(path)`/`save(path)` give
# `path` (`paths` for several), `writeStream.option("checkpointLocation")` and `queryName(...)`
# arrive in the sink's options.
SPARK_OWN: Final = ("path", "paths", "checkpointLocation", "queryName")

SOURCE: Final = (
    "nameServer",
    "topic",
    "topicPattern",
    "assign",
    "consumerGroup",
    "commitOffsets",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "tags",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "pullBatchSize",
    "pullTimeoutMs",
    "rowsPerBatch",
)
SINK: Final = (
    "nameServer",
    "topic",
    "producerGroup",
    "batchSize",
    "batchBytes",
    "idempotence",
    "sendTimeoutMs",
    "testFailAfterChunks",
    "testFailMarker",
)
STORE: Final = (
    "brokerName",
    "topic",
    "topicPattern",
    "useConsumeQueue",
    "maxBytesPerPartition",
    "verifyCrc",
    "failOnCorruption",
    "rowsPerBatch",
)

# Kafka name -> rocketlite name, where the meaning is the same (values converted where needed).
KAFKA_ALIASES: Final = {
    "subscribe": "topic",
    "subscribePattern": "topicPattern",
    "kafkaConsumer.pollTimeoutMs": "pullTimeoutMs",
}

# Kafka names that look alike but do not mean the same here: refused with what to use instead.
KAFKA_REFUSED: Final = {
    "kafka.bootstrap.servers": "rocketlite reads through a RocketMQ name server: use nameServer "
    "(host:port of the name server, e.g. 127.0.0.1:9876), not the brokers' addresses",
    "kafka.group.id": "use consumerGroup (it only mirrors processed offsets for lag tools; "
    "the checkpoint owns the offsets)",
    "groupIdPrefix": "use consumerGroup (offsets live in the checkpoint; the group only mirrors them)",
    "minPartitions": "use maxRecordsPerPartition (the most queue entries one Spark task reads)",
    "includeHeaders": "message properties are always in the properties column",
    "startingOffsetsByTimestampStrategy": "a queue with no message at or after the timestamp starts "
    "at its end (Kafka's 'latest' strategy)",
    "endingOffsetsByTimestamp": "use endingTimestamp (one timestamp for every queue)",
    "fetchOffset.numRetries": "not needed: offset lookups go to the broker directly",
    "fetchOffset.retryIntervalMs": "not needed: offset lookups go to the broker directly",
}


def _spelled(names: tuple[str, ...]) -> dict[str, str]:
    return {n.lower(): n for n in names}


def check_names(
    options: Mapping[str, str], accepted: tuple[str, ...], *, source: str, aliases: bool = True
) -> tuple[dict[str, str], dict[str, str]]:
    """The options with Kafka aliases renamed, after refusing unknown, refused and doubled names.

    Returns the values by lower-cased rocketlite name, and each name as the user typed it (for
    messages: "options subscribe and subscribePattern conflict"). Raises `OptionError` for a
    name that is not accepted (with the nearest accepted one), for a Kafka name with another
    meaning, and when an option is given both under its own name and its Kafka alias.
    """
    own = _spelled(accepted + SPARK_OWN)
    renames = {k.lower(): v for k, v in KAFKA_ALIASES.items() if aliases and v in accepted}
    refused = {k.lower(): (k, why) for k, why in KAFKA_REFUSED.items()}
    out: dict[str, str] = {}
    origin: dict[str, str] = {}
    for raw_key, value in options.items():
        if value is None:
            continue
        key = str(raw_key).lower()
        if key in own:
            target, shown = key, own[key]
        elif key in renames:
            target, shown = renames[key].lower(), next(k for k in KAFKA_ALIASES if k.lower() == key)
        elif key in refused:
            name, why = refused[key]
            raise OptionError(f"option {name} is Kafka's, and {source} does not take it: {why}")
        elif key.startswith("kafka."):
            raise OptionError(
                f"option {raw_key}: kafka.* options configure a Kafka client, and {source} has none "
                "(the broker is found through nameServer)"
            )
        else:
            raise OptionError(unknown_message(str(raw_key), accepted, source=source, aliases=aliases))
        if target in origin:
            raise OptionError(
                f"options {origin[target]} and {shown} mean the same thing ({own[target]}): give one"
            )
        origin[target] = shown
        out[target] = str(value)
    return out, origin


def unknown_message(name: str, accepted: tuple[str, ...], *, source: str, aliases: bool = True) -> str:
    """`unknown option X of <source>: did you mean Y?` with the nearest accepted names."""
    choices = list(accepted) + [k for k, v in KAFKA_ALIASES.items() if aliases and v in accepted]
    lowered = {c.lower(): c for c in choices}
    near = difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.6)
    hint = (
        f"did you mean {' or '.join(lowered[n] for n in near)}?"
        if near
        else "accepted: " + ", ".join(accepted)
    )
    return f"unknown option {name} of {source}: {hint}"
