"""Offset logic and options of the Spark data sources: pure Python, no Spark, no broker."""

from __future__ import annotations

import itertools
import json

import pytest

from rocketlite.spark import offsets as off
from rocketlite.spark.offsets import EARLIEST, LATEST, QueueRef
from rocketlite.spark.options import SinkOptions, SourceOptions, StoreOptions

A0 = QueueRef("T", "broker-a", 0)
A1 = QueueRef("T", "broker-a", 1)
B0 = QueueRef("T", "broker-b", 0)
U0 = QueueRef("U", "broker-a", 0)


# -- JSON and specs -----------------------------------------------------------------------------------
def test_offsets_json_round_trip_uses_string_keys() -> None:
    offsets = {A1: 7, A0: 3, U0: 0, B0: 12}
    obj = off.to_json_obj(offsets)
    assert obj == {"T": {"broker-a:0": 3, "broker-a:1": 7, "broker-b:0": 12}, "U": {"broker-a:0": 0}}
    # Spark's checkpoint is JSON: what comes back must parse to the same offsets.
    assert off.from_json_obj(json.loads(json.dumps(obj))) == offsets
    assert off.from_json(off.to_json(offsets)) == offsets
    assert QueueRef.parse("T", "broker:with:colons:3") == QueueRef("T", "broker:with:colons", 3)
    assert str(A1) == "T@broker-a:1"


@pytest.mark.parametrize(
    "bad",
    [
        '{"T": 3}',
        '{"T": {"broker-a": 1}}',
        '{"T": {"broker-a:x": 1}}',
        '{"T": {"a:0": "1"}}',
        "[1]",
        "{",
        '{"T": {"a:0": true}}',
    ],
)
def test_offsets_json_rejects_bad_layouts(bad: str) -> None:
    with pytest.raises(ValueError):
        off.from_json(bad)


def test_parse_spec() -> None:
    assert off.parse_spec(None, "latest", option="o") == "latest"
    assert off.parse_spec(" Earliest ", "latest", option="o") == "earliest"
    assert off.parse_spec('{"T": {"broker-a:0": -2, "broker-a:1": 5}}', "x", option="o") == {
        A0: EARLIEST,
        A1: 5,
    }
    with pytest.raises(ValueError, match="endingOffsets cannot be 'earliest'"):
        off.parse_spec("earliest", "latest", option="endingOffsets", allow_earliest=False)
    with pytest.raises(ValueError, match="not allowed"):
        off.parse_spec('{"T": {"broker-a:0": -2}}', "latest", option="endingOffsets", allow_earliest=False)
    with pytest.raises(ValueError, match="startingOffsets"):
        off.parse_spec("sometimes", "latest", option="startingOffsets")


def test_resolve_specs_against_queue_bounds() -> None:
    queues = [A0, A1, B0]
    lo = {A0: 0, A1: 5, B0: 2}
    hi = {A0: 10, A1: 9, B0: 2}
    assert off.resolve("earliest", queues, lo, hi, missing="earliest") == lo
    assert off.resolve("latest", queues, lo, hi, missing="earliest") == hi
    spec = {A0: 4, A1: LATEST}
    assert off.resolve(spec, queues, lo, hi, missing="earliest") == {A0: 4, A1: 9, B0: 2}
    assert off.resolve({A1: EARLIEST}, queues, lo, hi, missing="latest") == {A0: 10, A1: 5, B0: 2}


# -- planning -----------------------------------------------------------------------------------------
def test_split_range() -> None:
    assert off.split_range(5, 5, 10) == []
    assert off.split_range(7, 3, 10) == []
    assert off.split_range(0, 10, None) == [(0, 10)]
    assert off.split_range(0, 10, 10) == [(0, 10)]
    assert off.split_range(0, 10, 3) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    parts = off.split_range(100, 1101, 250)
    assert parts[0][0] == 100 and parts[-1][1] == 1101 and len(parts) == 5
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert max(b - a for a, b in parts) - min(b - a for a, b in parts) <= 1


def test_rate_limit_is_proportional_and_exact() -> None:
    start = {A0: 0, A1: 100, B0: 50}
    latest = {A0: 600, A1: 400, B0: 150}  # backlogs 600, 300, 100
    end = off.rate_limit(start, latest, 100)
    assert {q: end[q] - start[q] for q in start} == {A0: 60, A1: 30, B0: 10}
    # Everything fits: the latest offsets.
    assert off.rate_limit(start, latest, 10_000) == latest
    # Remainders go to the largest fractional shares, the total is exact, nothing exceeds its backlog.
    start2 = {A0: 0, A1: 0, B0: 0}
    latest2 = {A0: 1, A1: 1, B0: 7}
    end2 = off.rate_limit(start2, latest2, 4)
    assert sum(end2.values()) == 4
    assert all(end2[q] <= latest2[q] for q in start2)
    assert end2[B0] >= 3
    for limit in range(1, 12):
        e = off.rate_limit(start2, latest2, limit)
        assert sum(e[q] - start2[q] for q in start2) == min(limit, 9)
        assert all(start2[q] <= e[q] <= latest2[q] for q in start2)


def test_rate_limit_new_and_vanished_queues() -> None:
    # A queue only in `latest` (registered this batch) starts where `latest` says and takes no rows;
    # a queue only in `start` (route temporarily missing) keeps its offset.
    end = off.rate_limit({A0: 0, U0: 9}, {A0: 50, B0: 3}, 10)
    assert end == {A0: 10, B0: 3, U0: 9}
    assert off.merge_latest({A0: 4, U0: 9}, {A0: 6, B0: 1}) == {A0: 6, B0: 1, U0: 9}


# -- options ------------------------------------------------------------------------------------------
def test_source_options_from_lower_cased_strings() -> None:
    # Spark lower-cases option keys and stringifies values.
    raw = {
        "nameserver": "127.0.0.1:9876",
        "topic": "A, B",
        "consumergroup": "g",
        "startingoffsets": '{"A": {"broker-a:0": 3}}',
        "maxoffsetspertrigger": "100",
        "failondataloss": "false",
    }
    o = SourceOptions.parse(raw, streaming=True)
    assert o.topics == ("A", "B") and o.topic_pattern is None
    assert o.consumer_group == "g" and o.group_given and o.commit_offsets
    assert o.starting == {QueueRef("A", "broker-a", 0): 3}
    assert o.max_offsets_per_trigger == 100 and not o.fail_on_data_loss
    stamped = SourceOptions.parse(
        {"nameServer": "n:1", "topic": "A", "startingTimestamp": "2024-01-01T00:00:00Z"}, streaming=True
    )
    assert stamped.starting_timestamp == 1704067200000
    assert o.matches("A") and not o.matches("C")
    batch = SourceOptions.parse(
        {"NameServer": "n:1", "topicPattern": "Click.*", "startingTimestamp": "1700000000000"},
        streaming=False,
    )
    assert (
        batch.starting == "earliest"
        and batch.ending == "latest"
        and batch.starting_timestamp == 1700000000000
    )
    assert batch.matches("Clicks") and not batch.matches("XClicks")
    assert not batch.commit_offsets and batch.consumer_group == "rocketlite-spark-reader"
    assert SourceOptions.parse({"nameServer": "n:1", "topic": "A"}, streaming=True).starting == "latest"


@pytest.mark.parametrize(
    ("raw", "streaming", "message"),
    [
        ({"topic": "A"}, False, "nameServer is required"),
        ({"nameServer": "n:1"}, False, "give one of"),
        ({"nameServer": "n:1", "topic": "A", "topicPattern": "B"}, False, "conflict"),
        ({"nameServer": "n:1", "topicPattern": "(["}, False, "regular expression"),
        ({"nameServer": "n:1", "topic": "A", "maxOffsetsPerTrigger": "0"}, True, "at least 1"),
        ({"nameServer": "n:1", "topic": "A", "maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({"nameServer": "n:1", "topic": "A", "endingOffsets": "latest"}, True, "batch queries only"),
        ({"nameServer": "n:1", "topic": "A", "failOnDataLoss": "maybe"}, False, "true or false"),
        ({"nameServer": "n:1", "topic": "A", "startingTimestamp": "yesterday"}, False, "ISO-8601"),
        (
            {"nameServer": "n:1", "topic": "A", "startingTimestamp": "5", "endingTimestamp": "4"},
            False,
            "before",
        ),
    ],
)
def test_source_options_errors(raw: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions.parse(raw, streaming=streaming)


def test_sink_and_store_options() -> None:
    s = SinkOptions.parse({"nameserver": "n:1"}, streaming=True)
    assert s.idempotence == "content" and s.topic is None and s.batch_size == 1000
    assert SinkOptions.parse({"nameServer": "n:1", "topic": "T"}, streaming=False).idempotence == "none"
    with pytest.raises(ValueError, match="streaming writes"):
        SinkOptions.parse({"nameServer": "n:1", "idempotence": "content"}, streaming=False)
    with pytest.raises(ValueError, match="one of"):
        SinkOptions.parse({"nameServer": "n:1", "idempotence": "exactly"}, streaming=True)
    st = StoreOptions.parse({"path": "/x", "topic": "A,B", "verifycrc": "false", "brokername": "b"})
    assert st.topics == ("A", "B") and not st.verify_crc and st.broker_name == "b" and st.filters_topics
    assert st.matches("A") and not st.matches("C")
    assert StoreOptions.parse({"path": "/x"}).matches("anything")
    with pytest.raises(ValueError, match="store directory"):
        StoreOptions.parse({})
