"""The `rocketmq` data source: driver-side logic (offsets, limits, data loss) without Spark, then
end to end on the run's one `local[2]` Spark session; both against a real embedded name server and
broker on 127.0.0.1 (tests/support/spark/session.py; a test's own cluster where segments expire)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketlite.client.errors import TopicNotExistError
from rocketlite.embedded import EmbeddedCluster
from rocketlite.spark import offsets as off
from rocketlite.spark import source as src
from rocketlite.spark.broker_client import client_for
from rocketlite.spark.offsets import QueueRef
from rocketlite.spark.options import SinkOptions, SourceOptions
from rocketlite.spark.schema import COLUMNS
from rocketlite.spark.sink import _rows, write_partition
from rocketlite.spark.source import DataLossError, QueueRange, StreamReader, read_range
from tests.support.foreign_clients.real import stored
from tests.support.names import unique
from tests.support.spark.broker import committed, delete_topic, expire_segments, fill, shrink_queues
from tests.support.spark.session import produce, wait_dispatched
from tests.support.topics import create_topic, wait_until


def _ref(c: EmbeddedCluster, topic: str, queue_id: int) -> QueueRef:
    return QueueRef(topic, c.broker.broker.broker_name, queue_id)


def _stream_reader(c: EmbeddedCluster, **opts: str) -> StreamReader:
    base = {"nameServer": c.namesrv_addr, "startingOffsets": "earliest"}
    return StreamReader(SourceOptions.parse({**base, **opts}, streaming=True))


def _batch_reader(c: EmbeddedCluster, **opts: str) -> src.BatchReader:
    return src.BatchReader(SourceOptions.parse({"nameServer": c.namesrv_addr, **opts}, streaming=False))


def _spans(parts: Any) -> list[tuple[str, int, int, int]]:
    return [(p.topic, p.queue_id, p.start, p.end) for p in parts]


# -- driver side, on a real broker (no Spark) ---------------------------------------------------------
def test_stream_reader_offsets_limits_and_new_queues(spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    base = unique("SrcOffsets")
    t, new, group = f"{base}_T", f"{base}_New", unique("lag_group")
    a0, a1, p0 = _ref(c, t, 0), _ref(c, t, 1), _ref(c, new, 0)
    create_topic(c, t, 2)
    fill(c, t, {0: 60, 1: 30})
    reader = _stream_reader(c, topicPattern=f"{base}_.*", maxOffsetsPerTrigger="40", consumerGroup=group)
    assert reader.getDefaultReadLimit() == ReadMaxRows(40)
    start = reader.initialOffset()
    assert start == off.to_json_obj({a0: 0, a1: 0})
    end = reader.latestOffset(start, ReadMaxRows(40))  # backlogs 60 and 30: 2/3 and 1/3 of 40
    assert end == off.to_json_obj({a0: 27, a1: 13})
    assert _spans(reader.partitions(start, end)) == [(t, 0, 0, 27), (t, 1, 0, 13)]
    # A new topic matching the pattern is registered at its earliest offset, then read.
    create_topic(c, new, 1)
    fill(c, new, {0: 7})
    end2 = reader.latestOffset(end, ReadAllAvailable())
    assert end2 == off.to_json_obj({p0: 0, a0: 60, a1: 30})
    assert _spans(reader.partitions(end, end2)) == [(t, 0, 27, 60), (t, 1, 13, 30)]
    end3 = reader.latestOffset(end2, ReadAllAvailable())
    assert end3 == off.to_json_obj({p0: 7, a0: 60, a1: 30})
    assert reader.reportLatestOffset() == end3
    # Commits mirror the (exclusive) end offsets to the group, idempotently: the broker has them.
    reader.commit(end3)
    reader.commit(end3)
    assert committed(c, group, [a0, a1, p0]) == {a0: 60, a1: 30, p0: 7}
    # A queue leaving the route (the topic shrunk to one queue) keeps its offset; the rest move on.
    shrink_queues(c, t, 1)
    client = client_for(c.namesrv_addr, group)
    wait_until(lambda: client.queues(t) == [a0], 15, f"the route of {t} without queue 1")
    fill(c, t, {0: 5})
    assert reader.latestOffset(end3, ReadAllAvailable()) == off.to_json_obj({p0: 7, a0: 65, a1: 30})
    # Pickled for the executors without driver-side state.
    state = reader.__getstate__()
    assert state["_latest"] == {} and state["_frozen"] is None


def test_stream_reader_available_now_freezes_the_target(spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    t = unique("SrcAvailableNow")
    create_topic(c, t, 1)
    fill(c, t, {0: 10})
    reader = _stream_reader(c, topic=t, maxOffsetsPerTrigger="4")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    fill(c, t, {0: 5})  # arrives after the query started: not read by this AvailableNow run
    seen = []
    while True:
        end = reader.latestOffset(start, ReadMaxRows(4))
        if end == start:
            break
        seen.append(off.from_json_obj(end)[_ref(c, t, 0)])
        start = end
    assert seen == [4, 8, 10]


def test_stream_reader_data_loss(retention_cluster: EmbeddedCluster) -> None:
    c = retention_cluster
    t = unique("SrcRetained")
    a0 = _ref(c, t, 0)
    create_topic(c, t, 1)
    fill(c, t, {0: 40}, body_size=400)  # about 8 records a segment
    expire_segments(c)  # retention removes every segment but the newest
    lo = client_for(c.namesrv_addr, "data_loss").min_offsets([a0])[a0]
    assert 10 < lo < 40
    checkpointed = off.to_json_obj({a0: 10})
    with pytest.raises(DataLossError, match=rf"offsets 10\.\.{lo - 1} are no longer stored"):
        _stream_reader(c, topic=t).latestOffset(checkpointed, ReadAllAvailable())
    lenient = _stream_reader(c, topic=t, failOnDataLoss="false")
    assert lenient.latestOffset(checkpointed, ReadAllAvailable()) == off.to_json_obj({a0: 40})
    # The queue went backwards (topic deleted and recreated): fail, or continue from its new end.
    delete_topic(c, t)
    create_topic(c, t, 1)
    fill(c, t, {0: 5})
    past = off.to_json_obj({a0: 40})
    with pytest.raises(DataLossError, match="now ends at 5, before the checkpointed offset 40"):
        _stream_reader(c, topic=t).latestOffset(past, ReadAllAvailable())
    lenient = _stream_reader(c, topic=t, failOnDataLoss="false")
    assert lenient.latestOffset(past, ReadMaxRows(3)) == off.to_json_obj({a0: 5})


def test_min_offsets_per_trigger_waits_for_rows_or_the_delay(spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    t = unique("SrcMinRows")
    a0 = _ref(c, t, 0)
    create_topic(c, t, 1)
    reader = _stream_reader(c, topic=t, minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    start = reader.initialOffset()
    assert start == off.to_json_obj({a0: 0})
    fill(c, t, {0: 4})  # 4 waiting, fewer than 10, and the hour has not passed: no batch
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    fill(c, t, {0: 8})
    assert reader.latestOffset(start, ReadAllAvailable()) == off.to_json_obj({a0: 12})
    # A zero delay admits what there is; AvailableNow ignores the minimum.
    at_10 = off.to_json_obj({a0: 10})
    eager = _stream_reader(c, topic=t, minOffsetsPerTrigger="10", maxTriggerDelay="0ms")
    assert eager.latestOffset(at_10, ReadAllAvailable()) == off.to_json_obj({a0: 12})
    now = _stream_reader(c, topic=t, minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    now.prepareForTriggerAvailableNow()
    assert now.latestOffset(at_10, ReadAllAvailable()) == off.to_json_obj({a0: 12})


def test_missing_topics_and_queues_are_errors_when_a_query_starts(spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    t, nope, none = unique("SrcMissing"), unique("SrcNope"), unique("SrcNoMatch")
    create_topic(c, t, 2)
    fill(c, t, {0: 5, 1: 5})
    addr = re.escape(c.namesrv_addr)
    with pytest.raises(TopicNotExistError, match=f"topic {nope} does not exist on name server {addr}"):
        _batch_reader(c, subscribe=f"{t},{nope}").partitions()
    with pytest.raises(TopicNotExistError, match=f"topic {nope} does not exist"):
        _stream_reader(c, topic=nope).initialOffset()
    with pytest.raises(
        TopicNotExistError,
        match=re.escape(f"topicPattern '{none}.*' matches no topic on name server {c.namesrv_addr}"),
    ):
        _batch_reader(c, topicPattern=f"{none}.*").partitions()
    # A stream waits for matching topics.
    assert _stream_reader(c, topicPattern=f"{none}.*").initialOffset() == {}
    with pytest.raises(TopicNotExistError, match=f"assign names queue 7 of topic {t}"):
        _batch_reader(c, assign=json.dumps({t: [7]})).partitions()
    assert _spans(_batch_reader(c, assign=json.dumps({t: [1]})).partitions()) == [(t, 1, 0, 5)]
    # Kafka's offsets JSON: queue 0 on every broker.
    parts = _batch_reader(c, topic=t, startingOffsets=json.dumps({t: {"0": 3}})).partitions()
    assert _spans(parts) == [(t, 0, 3, 5), (t, 1, 0, 5)]


def test_read_range_skips_or_fails_on_deleted_offsets(
    retention_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    c = retention_cluster
    t = unique("SrcRetainedRange")
    create_topic(c, t, 1)
    fill(c, t, {0: 40}, body_size=400)
    expire_segments(c)
    lo = c.broker.store.get_min_offset_in_queue(t, 0)
    assert 0 < lo < 40
    part = QueueRange(t, c.broker.broker.broker_name, 0, 0, 100)  # planned before retention ran
    lenient = SourceOptions.parse(
        {"nameServer": c.namesrv_addr, "topic": t, "failOnDataLoss": "false"}, streaming=False
    )
    got = [o for batch in read_range(lenient, part) for o in batch.column("queueOffset").to_pylist()]
    assert got == list(range(lo, 40))  # what is still stored, once each
    assert f"offsets 0..{lo - 1} are no longer stored (the queue now starts at {lo})" in caplog.text
    assert "the queue ends at 40 but offsets up to 99 were planned" in caplog.text
    strict = SourceOptions.parse({"nameServer": c.namesrv_addr, "topic": t}, streaming=False)
    with pytest.raises(DataLossError, match=rf"offsets 0\.\.{lo - 1} are no longer stored"):
        list(read_range(strict, part))


# -- the sink's row handling (no Spark) ---------------------------------------------------------------
def test_sink_rows_ids_and_chunks(
    monkeypatch: pytest.MonkeyPatch, spark_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    import pyarrow as pa  # noqa: PLC0415

    from rocketlite.spark import sink  # noqa: PLC0415

    opts = SinkOptions.parse({"nameServer": "x:1", "batchSize": "3"}, streaming=True)
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": ["A"] * 5 + ["B"],
            "value": ["v0", "v1", "v1", "v3", "v4", "v5"],
            "keys": [["k1", "k2"], None, None, None, None, None],
            "properties": [[("DELAY", "3"), ("TAGS", "fromProps"), ("user", "x")]] + [None] * 5,
        },
        schema=pa.schema([
            ("topic", pa.string()), ("value", pa.string()), ("keys", pa.list_(pa.string())),
            ("properties", pa.map_(pa.string(), pa.string())),
        ]),
    )  # fmt: skip
    rows = list(_rows(opts, iter([batch])))
    first = rows[0].message
    assert first.body == b"v0" and first.keys == "k1 k2" and first.tags == "fromProps"
    assert first.properties["user"] == "x" and "DELAY" not in first.properties

    # The idempotent write against the run's real broker (topics of 4 queues), Spark's task context
    # given as an executor would see it (partition 3 of batch 7 of query-1).
    c = spark_cluster
    a, b = f"SinkIdsA{time.monotonic_ns()}", f"SinkIdsB{time.monotonic_ns()}"
    for topic in (a, b):
        create_topic(c, topic, 4)
    batch = batch.set_column(0, "topic", pa.array([a] * 5 + [b]))
    opts = SinkOptions.parse({"nameServer": c.namesrv_addr, "batchSize": "3"}, streaming=True)
    monkeypatch.setattr(sink, "_task_context", lambda: (3, "7", "query-1"))

    def stored_ids() -> dict[str, list[str]]:
        wait_dispatched(c)
        return {
            topic: [str(r.get_property("UNIQ_KEY")) for q in range(4) for r in stored(c, topic, q)]
            for topic in (a, b)
        }

    r1 = write_partition(opts, iter([batch]), streaming=True)
    assert r1.sent == 6 and r1.skipped == 0 and r1.chunks == 3  # A: 3 + 2, B: 1
    first_run = stored_ids()
    assert len(set(first_run[a])) == 5 and len(first_run[b]) == 1  # identical rows (v1, v1): distinct ids
    # A replay of the same batch and partition, rows in another order: same ids, nothing sent.
    reordered = batch.take(pa.array([5, 4, 3, 2, 1, 0]))
    r2 = write_partition(opts, iter([reordered]), streaming=True)
    assert r2.sent == 0 and r2.skipped == 6 and stored_ids() == first_run
    # Another batch whose first attempt fails after its first chunk: the replay sends only the rest.
    monkeypatch.setattr(sink, "_task_context", lambda: (3, "8", "query-1"))
    marker = tmp_path / "fail-once"
    marker.touch()
    failing = SinkOptions.parse(
        {
            "nameServer": c.namesrv_addr,
            "batchSize": "3",
            "testFailAfterChunks": "1",
            "testFailMarker": str(marker),
        },
        streaming=True,
    )
    with pytest.raises(RuntimeError, match="injected failure after 1 chunk"):
        write_partition(failing, iter([batch]), streaming=True)
    r3 = write_partition(failing, iter([reordered]), streaming=True)
    assert r3.skipped == 3 and r3.sent == 3
    second_run = stored_ids()
    new_ids = set(second_run[a] + second_run[b]) - set(first_run[a] + first_run[b])
    assert len(new_ids) == 6 and len(second_run[a]) + len(second_run[b]) == 12  # other ids, each once


# -- end to end on Spark --------------------------------------------------------------------------------
def _bodies(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_batch_read_offsets_timestamps_tags(spark: Any, spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    create_topic(c, "SparkBatch", 2)
    parity = ["even" if i % 2 == 0 else "odd" for i in range(20)]
    first = produce(c, "SparkBatch", _bodies("a", 20), tags=parity, keys=[f"key-{i}" for i in range(20)])
    time.sleep(0.05)
    boundary = int(time.time() * 1000)
    time.sleep(0.05)
    produce(c, "SparkBatch", _bodies("b", 10), tags=["even"] * 10)
    wait_dispatched(c)

    def reader() -> Any:  # DataFrameReader.option() changes the reader: a new one per query
        return (
            spark.read.format("rocketmq").option("nameServer", c.namesrv_addr).option("topic", "SparkBatch")
        )

    df = reader().load()
    assert df.columns == list(COLUMNS)
    rows = df.collect()
    assert len(rows) == 30 and df.rdd.getNumPartitions() == 2
    by_body = {r.body: r for r in rows}
    r0 = by_body[b"a-0"]
    assert (r0.topic, r0.brokerName, r0.tags, r0.keys, r0.reconsumeTimes) == (
        "SparkBatch",
        "broker-a",
        "even",
        "key-0",
        0,
    )
    assert r0.msgId == first[0].msg_id and r0.properties["UNIQ_KEY"] == first[0].msg_id
    assert (r0.queueId, r0.queueOffset) == (first[0].queue.queue_id, first[0].queue_offset)
    assert r0.storeTimestamp >= r0.bornTimestamp
    # Offsets: JSON start/end per queue, -2 = earliest.
    q0 = f"broker-a:{first[0].queue.queue_id}"
    q1 = f"broker-a:{first[1].queue.queue_id}"
    part = (
        reader()
        .option("startingOffsets", f'{{"SparkBatch": {{"{q0}": 3, "{q1}": -2}}}}')
        .option("endingOffsets", f'{{"SparkBatch": {{"{q0}": 8, "{q1}": 2}}}}')
        .load()
    )
    got = sorted((r.queueId, r.queueOffset) for r in part.collect())
    assert got == sorted(
        [(first[0].queue.queue_id, o) for o in range(3, 8)] + [(first[1].queue.queue_id, o) for o in range(2)]
    )
    # Timestamps: [startingTimestamp, endingTimestamp) on storeTimestamp.
    later = reader().option("startingTimestamp", str(boundary)).load().collect()
    assert sorted(r.body for r in later) == sorted(_bodies("b", 10))
    earlier = reader().option("endingTimestamp", str(boundary)).load().collect()
    assert sorted(r.body for r in earlier) == sorted(_bodies("a", 20))
    # Tag expression; ranges split into partitions of at most maxRecordsPerPartition.
    assert reader().option("tags", "odd").load().count() == 10
    assert reader().option("tags", "odd || even").load().count() == 30
    split = reader().option("maxRecordsPerPartition", "4").load()
    assert split.rdd.getNumPartitions() == 8 and split.count() == 30
    # SQL, and nothing at all for an empty range.
    spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW mq USING rocketmq "
        f"OPTIONS (nameServer '{c.namesrv_addr}', topic 'SparkBatch')"
    )
    assert spark.sql("SELECT count(*) AS n FROM mq WHERE tags = 'even'").collect()[0].n == 20
    assert reader().option("startingOffsets", "latest").load().count() == 0


def _stream(
    spark: Any, c: EmbeddedCluster, topic_opts: dict[str, str], out: Path, ck: Path, **opts: str
) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", c.namesrv_addr)
    for k, v in {**topic_opts, **opts}.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .selectExpr("topic", "queueId", "queueOffset", "CAST(body AS STRING) AS body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return query


def test_streaming_restart_is_exact_rate_limited_and_committed(
    spark: Any, spark_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    c = spark_cluster
    create_topic(c, "SparkStream", 2)
    produce(c, "SparkStream", _bodies("s", 40))
    wait_dispatched(c)
    out, ck = tmp_path / "out", tmp_path / "ck"
    opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "15", "consumerGroup": "spark-lag"}
    q1 = _stream(spark, c, {"topic": "SparkStream"}, out, ck, **opts)
    assert [p["numInputRows"] for p in q1.recentProgress] == [15, 15, 10]
    # Produced while the query is down; the restart resumes at the checkpointed offsets.
    produce(c, "SparkStream", _bodies("t", 12))
    wait_dispatched(c)
    q2 = _stream(
        spark, c, {"topic": "SparkStream"}, out, ck, startingOffsets="latest", consumerGroup="spark-lag"
    )
    assert [p["numInputRows"] for p in q2.recentProgress] == [12]
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 52 and len({(r.queueId, r.queueOffset) for r in rows}) == 52
    assert sorted(r.body for r in rows) == sorted(b.decode() for b in _bodies("s", 40) + _bodies("t", 12))
    # Processed offsets are mirrored to the consumer group as exclusive ends, when Spark commits a
    # batch to the source: at the start of the next one (here: the restart committed run 1's end).
    client = client_for(c.namesrv_addr, "spark-lag")
    queues = client.queues("SparkStream")
    assert client.committed(queues) == dict.fromkeys(queues, 20)


def test_streaming_pattern_picks_up_new_topics(
    spark: Any, spark_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    c = spark_cluster
    create_topic(c, "SparkPatA", 1)
    produce(c, "SparkPatA", _bodies("pa", 5))
    wait_dispatched(c)
    out, ck = tmp_path / "out", tmp_path / "ck"
    pattern = {"topicPattern": "SparkPat[A-Z]"}
    _stream(spark, c, pattern, out, ck, startingOffsets="earliest")
    create_topic(c, "SparkPatB", 2)
    produce(c, "SparkPatB", _bodies("pb", 6))
    produce(c, "SparkPatA", _bodies("pa2", 2))
    wait_dispatched(c)
    _stream(spark, c, pattern, out, ck)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.body for r in rows) == sorted(
        b.decode() for b in _bodies("pa", 5) + _bodies("pb", 6) + _bodies("pa2", 2)
    )
    assert {r.topic for r in rows} == {"SparkPatA", "SparkPatB"}


def test_batch_write_then_read_back(spark: Any, spark_cluster: EmbeddedCluster) -> None:
    c = spark_cluster
    create_topic(c, "SparkWrite", 3)
    data = [
        ("SparkWrite", f"payload-{i}".encode(), f"tag{i % 3}", [f"k{i}", "common"], {"n": str(i)}, i % 3)
        for i in range(30)
    ]
    df = spark.createDataFrame(
        data,
        "topic STRING, body BINARY, tags STRING, keys ARRAY<STRING>, properties MAP<STRING,STRING>, "
        "queueId INT",
    )
    with pytest.raises(Exception, match="append"):
        df.write.format("rocketmq").option("nameServer", c.namesrv_addr).mode("overwrite").save()
    df.write.format("rocketmq").option("nameServer", c.namesrv_addr).mode("append").save()
    wait_dispatched(c)
    back = (
        spark.read.format("rocketmq")
        .option("nameServer", c.namesrv_addr)
        .option("topic", "SparkWrite")
        .load()
    )
    rows = back.collect()
    assert len(rows) == 30
    for r in rows:
        i = int(r.body.decode().split("-")[1])
        assert (r.tags, r.keys, r.properties["n"], r.queueId) == (
            f"tag{i % 3}",
            f"k{i} common",
            str(i),
            i % 3,
        )
    # The topic as an option, a string value column, no queue given.
    spark.createDataFrame([("v1",), ("v2",)], "value STRING").write.format("rocketmq").option(
        "nameServer", c.namesrv_addr
    ).option("topic", "SparkWrite").mode("append").save()
    wait_dispatched(c)
    assert back.count() == 30  # a DataFrame is a snapshot of the offsets planned when it was made
    assert (
        spark.read.format("rocketmq")
        .option("nameServer", c.namesrv_addr)
        .option("topic", "SparkWrite")
        .load()
        .count()
        == 32
    )


def test_streaming_sink_failure_mid_batch_adds_no_duplicates(
    spark: Any, spark_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    c = spark_cluster
    create_topic(c, "SparkSinkIn", 2)
    create_topic(c, "SparkSinkOut", 2)
    produce(c, "SparkSinkIn", _bodies("in", 120))
    produce(c, "SparkSinkIn", [b"same"] * 6)  # identical rows must still all arrive, once each
    wait_dispatched(c)
    marker = tmp_path / "fail-once"
    marker.touch()

    def run() -> Any:
        return (
            spark.readStream.format("rocketmq")
            .option("nameServer", c.namesrv_addr)
            .option("topic", "SparkSinkIn")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("body", "concat('copied-', tags) AS tags")
            .writeStream.format("rocketmq")
            .option("nameServer", c.namesrv_addr)
            .option("topic", "SparkSinkOut")
            .option("batchSize", "10")
            .option("testFailAfterChunks", "3")
            .option("testFailMarker", str(marker))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )

    failed = run()
    with pytest.raises(Exception, match="injected failure"):
        failed.awaitTermination(120)
    assert not marker.exists()
    wait_dispatched(c)
    reader = (
        spark.read.format("rocketmq").option("nameServer", c.namesrv_addr).option("topic", "SparkSinkOut")
    )
    partial = reader.load().count()
    assert 30 <= partial < 126  # the failing task sent 3 chunks of 10 before it failed
    done = run()
    done.awaitTermination(120)
    assert done.exception() is None
    wait_dispatched(c)
    rows = reader.load().collect()
    assert len(rows) == 126
    assert len({r.msgId for r in rows}) == 126
    assert sorted(r.body for r in rows) == sorted(_bodies("in", 120) + [b"same"] * 6)
