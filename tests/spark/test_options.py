"""Option names of the Spark data sources: Kafka's aliases, unknown and conflicting options (no Spark)."""

from __future__ import annotations

import pytest

from rocketlite.protocol.errors import RocketliteError
from rocketlite.spark.offsets import QueueRef
from rocketlite.spark.option_names import OptionError
from rocketlite.spark.options import SinkOptions, SourceOptions, StoreOptions, parse_duration_ms

NS = {"nameServer": "127.0.0.1:9876"}


def test_kafka_names_map_to_ours() -> None:
    o = SourceOptions.parse(
        {**NS, "subscribe": "A, B", "kafkaConsumer.pollTimeoutMs": "500"}, streaming=False
    )
    assert o.topics == ("A", "B") and o.pull_timeout_ms == 500
    p = SourceOptions.parse({**NS, "SUBSCRIBEPATTERN": "Cl.*"}, streaming=True)
    assert p.topic_pattern == "Cl.*" and p.matches("Clicks")
    # assign: a bare queue id is that id on every broker; "broker:id" is one broker's queue.
    a = SourceOptions.parse({**NS, "assign": '{"T": [0, "broker-b:1"], "U": ["2"]}'}, streaming=False)
    assert a.topics == ("T", "U")
    assert a.assigned(QueueRef("T", "broker-a", 0)) and a.assigned(QueueRef("T", "broker-z", 0))
    assert a.assigned(QueueRef("T", "broker-b", 1)) and not a.assigned(QueueRef("T", "broker-a", 1))
    assert a.assigned(QueueRef("U", "x", 2)) and not a.assigned(QueueRef("U", "x", 0))
    ts = SourceOptions.parse(
        {**NS, "topic": "T", "startingOffsetsByTimestamp": '{"T": {"0": 1700000000000, "broker-b:1": 5}}'},
        streaming=True,
    )
    assert ts.starting_by_timestamp == {QueueRef("T", "", 0): 1700000000000, QueueRef("T", "broker-b", 1): 5}
    # Kafka's offsets JSON with bare partition numbers.
    k = SourceOptions.parse({**NS, "topic": "T", "startingOffsets": '{"T": {"0": 7}}'}, streaming=False)
    assert k.starting == {QueueRef("T", "", 0): 7}
    m = SourceOptions.parse(
        {
            **NS,
            "topic": "T",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "maxOffsetsPerTrigger": "20",
        },
        streaming=True,
    )
    assert m.min_offsets_per_trigger == 10 and m.max_trigger_delay_ms == 30_000
    assert (
        SourceOptions.parse(
            {**NS, "topic": "T", "minOffsetsPerTrigger": "3"}, streaming=True
        ).max_trigger_delay_ms
        == 900_000
    )
    assert [parse_duration_ms(t, "x") for t in ("250", "250ms", "2s", "3m", "1h", "1d")] == [
        250,
        250,
        2000,
        180_000,
        3_600_000,
        86_400_000,
    ]


@pytest.mark.parametrize(
    ("raw", "streaming", "message"),
    [
        (
            {**NS, "topic": "A", "startingOffset": "earliest"},
            False,
            "unknown option startingOffset of the rocketmq source: did you mean startingOffsets",
        ),
        ({**NS, "topic": "A", "foo": "bar"}, False, "unknown option foo .* accepted: nameServer"),
        ({**NS, "subscribe": "A", "maxOfsetsPerTrigger": "5"}, True, "did you mean maxOffsetsPerTrigger"),
        (
            {"kafka.bootstrap.servers": "h:9092", "subscribe": "A"},
            False,
            "kafka.bootstrap.servers is Kafka's.*use nameServer",
        ),
        (
            {**NS, "topic": "A", "kafka.max.poll.records": "5"},
            False,
            "kafka.\\* options configure a Kafka client",
        ),
        ({**NS, "topic": "A", "minPartitions": "4"}, False, "use maxRecordsPerPartition"),
        ({**NS, "topic": "A", "subscribe": "A"}, False, "mean the same thing"),
        ({**NS, "subscribe": "A", "subscribePattern": "B"}, False, "subscribe and subscribePattern conflict"),
        ({**NS, "topic": "A", "assign": '{"A": [0]}'}, False, "topic and assign conflict"),
        (NS, False, "give one of the options topic, topicPattern, assign"),
        ({**NS, "assign": "[0, 1]"}, False, "assign must be a JSON object"),
        ({**NS, "assign": '{"A": []}'}, False, "non-empty list"),
        ({**NS, "assign": '{"A": ["b:x"]}'}, False, "brokerName:queueId"),
        ({**NS, "topic": "A", "startingOffsets": "earliest", "startingTimestamp": "5"}, False, "conflict"),
        (
            {**NS, "topic": "A", "startingTimestamp": "5", "startingOffsetsByTimestamp": '{"A": {"0": 5}}'},
            True,
            "conflict",
        ),
        ({**NS, "topic": "A", "endingOffsets": "latest", "endingTimestamp": "5"}, False, "conflict"),
        ({**NS, "topic": "A", "startingOffsetsByTimestamp": '{"A": {"0": "x"}}'}, False, "epoch ms"),
        ({**NS, "topic": "A", "minOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({**NS, "topic": "A", "maxTriggerDelay": "5s"}, True, "only applies with minOffsetsPerTrigger"),
        (
            {**NS, "topic": "A", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"},
            True,
            "above maxOffsetsPerTrigger",
        ),
        ({**NS, "topic": "A", "minOffsetsPerTrigger": "9", "maxTriggerDelay": "soon"}, True, "duration"),
    ],
)
def test_bad_source_options_say_what_to_do(raw: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(raw, streaming=streaming)


def test_sink_and_store_refuse_unknown_names_but_take_sparks_own() -> None:
    sink = SinkOptions.parse(
        {**NS, "checkpointLocation": "/ck", "queryName": "q", "path": "p"}, streaming=True
    )
    assert sink.topic is None
    with pytest.raises(OptionError, match="did you mean producerGroup"):
        SinkOptions.parse({**NS, "producerGroupp": "g"}, streaming=False)
    with pytest.raises(OptionError, match="unknown option subscribe of the rocketmq sink"):
        SinkOptions.parse({**NS, "subscribe": "T"}, streaming=False)
    with pytest.raises(OptionError, match="use nameServer"):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1"}, streaming=False)
    store = StoreOptions.parse({"path": "/s", "subscribe": "A,B"})
    assert store.topics == ("A", "B")
    with pytest.raises(OptionError, match="did you mean verifyCrc"):
        StoreOptions.parse({"path": "/s", "verifyCRCs": "true"})
    with pytest.raises(OptionError, match="conflict"):
        StoreOptions.parse({"path": "/s", "subscribe": "A", "topicPattern": "B"})


def test_option_errors_are_value_errors_under_the_root() -> None:
    assert issubclass(OptionError, ValueError) and issubclass(OptionError, RocketliteError)
