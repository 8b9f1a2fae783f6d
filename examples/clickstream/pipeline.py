"""Clickstream pipeline on Spark Structured Streaming over RocketMQ (rocketlite).

    python examples/clickstream/pipeline.py                 # embedded broker, ~1 minute
    python examples/clickstream/pipeline.py --namesrv host:9876 --clicks 20000

1. Produces synthetic click events (JSON: user, page, event time, referrer) to the topic `Clicks`
   with the Python client SDK: 4 queues, keys = user id, tags = page section. Event time runs over
   a few minutes of synthetic time and some events arrive late (out of order).
2. A Structured Streaming job reads `Clicks` with `format("rocketmq")`, parses the JSON, and counts
   clicks and distinct users per page section in 30-second tumbling windows of event time, with a
   1-minute watermark (events later than that are dropped, as the watermark promises).
3. The finished windows (append mode) go to two sinks: back to RocketMQ, topic `ClickStats`
   (JSON bodies, key = section; the sink is idempotent per batch and partition), and to Parquet.
4. The Parquet result is printed as a table, and `ClickStats` is read back in batch to show the
   same windows arrived as messages.

Both queries first catch up on the backlog with Trigger.AvailableNow and maxOffsetsPerTrigger
(several micro-batches; the watermark advances between them), which emits every window the
watermark has passed. Watermarks only move with data, so the pipeline then sends a "heartbeat"
event far ahead in event time and restarts both queries from their checkpoints with a 1-second
processing-time trigger: they read the heartbeat, and the next (no-data) micro-batch emits the
remaining windows; then they are stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

CLICKS = "Clicks"
STATS = "ClickStats"
SECTIONS = ("home", "search", "product", "cart", "checkout")
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: event time of the first click
HEARTBEAT_MS = START_MS + 3_600_000
HEARTBEAT_WATERMARK = "2026-01-01T00:59:00.000Z"  # its event time minus the 1-minute delay


@contextlib.contextmanager
def broker(namesrv: str | None) -> Iterator[str]:
    """An embedded name server + broker (or the one given)."""
    if namesrv:
        yield namesrv
        return
    from rocketlite.embedded import embedded  # noqa: PLC0415

    with embedded(grpc_server_port=0) as cluster:  # no gRPC threads while PySpark forks
        print(f"embedded name server {cluster.namesrv_addr}, broker {cluster.broker_addr}")
        yield cluster.namesrv_addr


def produce_clicks(namesrv: str, count: int, seed: int = 7) -> int:
    """`count` clicks over ~4 minutes of event time, 5% of them up to 40 s late; returns late ones."""
    from rocketlite.client import Message, Producer  # noqa: PLC0415

    rng = random.Random(seed)
    late = 0
    span_ms = 240_000
    with Producer("clickstream-producer", namesrv) as producer:
        batch: list[Message] = []
        for i in range(count):
            event_ms = START_MS + i * span_ms // count
            if rng.random() < 0.05:
                event_ms -= rng.randrange(5_000, 40_000)  # late, but within the watermark
                late += 1
            section = rng.choices(SECTIONS, weights=(30, 25, 25, 12, 8))[0]
            user = f"user-{rng.randrange(500)}"
            click = {
                "user": user,
                "page": f"/{section}/{rng.randrange(50)}",
                "section": section,
                "ts": event_ms,
                "referrer": rng.choice(["ads", "mail", "direct", "social"]),
            }
            batch.append(Message(CLICKS, json.dumps(click).encode(), tags=section, keys=user))
            if len(batch) == 500:
                producer.send_batch(batch)
                batch = []
        producer.send_batch(batch)
    return late


def heartbeat(namesrv: str) -> None:
    """One event far ahead in event time: the watermark passes every real window."""
    from rocketlite.client import Message, Producer  # noqa: PLC0415

    beat = {"user": "-", "page": "/", "section": "heartbeat", "ts": HEARTBEAT_MS}
    with Producer("clickstream-producer", namesrv) as producer:
        producer.send(Message(CLICKS, json.dumps(beat).encode(), tags="heartbeat"))


def spark_session() -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("clickstream")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def windowed_counts(spark: Any, namesrv: str) -> Any:
    """Clicks and distinct users per section and 30 s window of event time (1 min watermark)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    click = "user STRING, page STRING, section STRING, ts LONG, referrer STRING"
    clicks = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", CLICKS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 2000)
        .option("consumerGroup", "clickstream-spark")  # lag tools see the pipeline's progress
        .load()
        .select(F.from_json(F.col("body").cast("string"), click).alias("c"))
        .select("c.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    return (
        clicks.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "30 seconds"), "section")
        .agg(F.count("*").alias("clicks"), F.approx_count_distinct("user").alias("users"))
        # No filter for the heartbeat: Spark would push it below the watermark, which would then
        # not move. The heartbeat's own window is never emitted: the watermark never passes it.
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "section",
            "clicks",
            "users",
        )
    )


def run(spark: Any, namesrv: str, work: Path, *, catch_up: bool) -> None:
    """Both queries: catch up (AvailableNow), or run until every window is emitted, then stop."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    trigger = {"availableNow": True} if catch_up else {"processingTime": "1 second"}
    stats = windowed_counts(spark, namesrv)
    to_topic = (
        stats.select(
            F.to_json(F.struct("window_start", "window_end", "section", "clicks", "users")).alias("body"),
            F.col("section").alias("keys"),
            F.lit("window").alias("tags"),
        )
        .writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", STATS)
        .option("checkpointLocation", str(work / "checkpoints" / "to-topic"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    to_parquet = (
        stats.writeStream.format("parquet")
        .option("path", str(work / "parquet"))
        .option("checkpointLocation", str(work / "checkpoints" / "to-parquet"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    for name, query in (("to ClickStats", to_topic), ("to Parquet", to_parquet)):
        if catch_up:
            query.awaitTermination()
        else:
            query.processAllAvailable()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # until a micro-batch ran with the moved watermark
                watermark = ((query.lastProgress or {}).get("eventTime") or {}).get("watermark", "")
                if watermark >= HEARTBEAT_WATERMARK:
                    break
                time.sleep(0.3)
            query.stop()
        batches = [p["numInputRows"] for p in query.recentProgress]
        print(f"  query {name}: {len(batches)} micro-batches, input rows {batches}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--namesrv", help="an existing name server (default: an embedded broker)")
    parser.add_argument("--clicks", type=int, default=6000)
    parser.add_argument("--work", help="checkpoints and Parquet output (default: a temporary directory)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="clickstream-"))
    started = time.perf_counter()
    try:
        with broker(args.namesrv) as namesrv:
            late = produce_clicks(namesrv, args.clicks)
            print(f"produced {args.clicks} clicks to {CLICKS} ({late} of them late)")
            spark = spark_session()
            print("catching up with Trigger.AvailableNow, maxOffsetsPerTrigger=2000:")
            run(spark, namesrv, work, catch_up=True)
            heartbeat(namesrv)
            print("sent a heartbeat event; the queries resume from their checkpoints (1 s trigger):")
            run(spark, namesrv, work, catch_up=False)
            table = spark.read.parquet(str(work / "parquet")).orderBy("window_start", "section")
            kept = "" if args.work else ", a temporary directory removed at exit (--work DIR keeps it)"
            print(f"\nclicks per section and 30 s window (Parquet at {work / 'parquet'}{kept}):")
            table.show(100, truncate=False)
            totals = table.groupBy().sum("clicks").collect()[0][0]
            messages = (
                spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", STATS).load()
            )
            print(f"windows in Parquet: {table.count()}, clicks counted: {totals} of {args.clicks}")
            print(f"windows as messages in {STATS}: {messages.count()}; one of them:")
            first = messages.orderBy("queueId", "queueOffset").first()
            if first is not None:
                print(f"  msgId {first.msgId} keys {first.keys}: {first.body.decode()}")
            spark.stop()
            from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

            close_clients()
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
