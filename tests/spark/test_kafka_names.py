"""Kafka users' options and mistakes, end to end on the run's `local[2]` session and embedded broker."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from rocketlite.embedded import EmbeddedCluster
from tests.support.spark.session import produce, wait_dispatched
from tests.support.topics import create_topic


def _error(action: Any) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps it in its own AnalysisException
        action()
    return str(info.value)


def test_kafka_names_read_the_topic(spark: Any, spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    create_topic(c, "SparkKafka", 2)
    produce(c, "SparkKafka", [f"m-{i}".encode() for i in range(10)])
    wait_dispatched(c)

    def read(**opts: str) -> list[Any]:
        reader = spark.read.format("rocketmq").option("nameServer", c.namesrv_addr)
        for k, v in opts.items():
            reader = reader.option(k, v)
        return list(reader.load().collect())

    assert len(read(subscribe="SparkKafka")) == 10
    assert {r.queueId for r in read(assign='{"SparkKafka": [1]}')} == {1}
    assert len(read(subscribePattern="SparkKafk.", startingOffsets='{"SparkKafka": {"0": 3, "1": 4}}')) == 3


def test_mistakes_are_errors_that_name_the_cause(spark: Any, spark_cluster: EmbeddedCluster) -> None:
    ns = spark_cluster.namesrv_addr

    def reader() -> Any:
        return spark.read.format("rocketmq").option("nameServer", ns)

    typo = _error(lambda: reader().option("topic", "T").option("startingOffset", "earliest").load().collect())
    # Spark lower-cases option names before the source sees them.
    assert "unknown option startingoffset of the rocketmq source: did you mean startingOffsets" in typo
    kafka = _error(
        lambda: spark.read.format("rocketmq").option("kafka.bootstrap.servers", "h:9092").load().collect()
    )
    assert "use nameServer" in kafka
    missing = _error(lambda: reader().option("subscribe", "NoSuchTopic").load().collect())
    assert f"topic NoSuchTopic does not exist on name server {ns}" in missing
    query = (
        spark.readStream.format("rocketmq")
        .option("nameServer", ns)
        .option("subscribe", "NoSuchTopic")
        .load()
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    try:
        stream = _error(lambda: query.awaitTermination(60))
    finally:
        query.stop()
    assert "topic NoSuchTopic does not exist" in stream
    both = _error(lambda: reader().option("subscribe", "A").option("subscribePattern", "B").load().collect())
    assert "subscribe and subscribePattern conflict" in both
    # With Spark's hideTraceback, the cause is the first line of the message.
    spark.conf.set("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
    try:
        short = _error(lambda: reader().option("topic", "T").option("foo", "1").load().collect())
    finally:
        spark.conf.unset("spark.sql.execution.pyspark.udf.hideTraceback.enabled")
    assert short.splitlines()[0].startswith(
        "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source reader: "
        "rocketlite.spark.option_names.OptionError: unknown option foo of the rocketmq source"
    )
