"""Spark data source benchmark: the `rocketmq` and `rocketmq-store` readers against Parquet.

    .venv/bin/python bench/spark_bench.py              # 1M x 256 B messages (~3-5 minutes)
    .venv/bin/python bench/spark_bench.py --quick      # 100k messages (the smoke run)
    .venv/bin/python bench/spark_bench.py --messages 500000 --queues 8 --transfer 32

In one run, on one `local[2]` Spark session and one embedded broker (name server + broker in this
process, store in a temporary directory):

1. N messages of 256 B random bodies (TAGS, KEYS, UNIQ_KEY as the SDK sends them) are produced to
   one topic of `--queues` queues with SEND_BATCH_MESSAGE (timed: the producer rate).
2. Batch read through the data source: `spark.read.format("rocketmq")...load()` written to the
   `noop` sink (every row and column is materialised in the JVM, nothing is stored). The broker
   serves the pulls from the same process, so broker and Spark workers share the 2 cores.
3. The same rows are written to Parquet (snappy) once, then read back to `noop`: the baseline.
4. The raw-store reader over the broker's store directory (`format("rocketmq-store")`, CRC checked
   as by default) to `noop`; the broker keeps running (its pages are in the page cache).
5. Streaming end to end: `readStream.format("rocketmq")` from `earliest`, `maxOffsetsPerTrigger`
   unset, `Trigger.AvailableNow`, to the `noop` sink; rows / wall time of the query (query start
   included), and a query copying a topic of `--sink-messages` messages to another topic through
   the `rocketmq` sink (idempotent mode).

Each read is run once untimed (a warm-up, for every reader alike) and then `--repeat` times
(default 3), and the best time is kept; rates are rows/s and each
reader is reported as a ratio to the Parquet read of the same rows in the same run. The broker's
`maxTransferCountOnMessageInMemory` / `maxTransferBytesOnMessageInMemory` (messages and bytes per
pull; RocketMQ's defaults are 32 and 256 KiB) are set with `--transfer` (default 1024 messages,
4 MiB). The machine load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

TOPIC = "SparkBench"
SINK_INPUT = "SparkBenchIn"
SINK_TOPIC = "SparkBenchOut"
BODY_SIZE = 256


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def session(memory: str) -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketlite-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_topic(namesrv: str, broker_addr: str, topic: str, queues: int) -> None:
    from rocketlite.admin.client import AdminClient  # noqa: PLC0415
    from rocketlite.admin.topics import update_topic  # noqa: PLC0415

    async def run() -> None:
        async with AdminClient(namesrv) as admin:
            await update_topic(
                admin, topic=topic, broker_addr=broker_addr, cluster=None,
                read_queue_nums=queues, write_queue_nums=queues,
            )  # fmt: skip

    asyncio.run(run())


def produce(namesrv: str, topic: str, count: int, queues: int) -> float:
    from rocketlite.client import Message, Producer  # noqa: PLC0415

    chunk = 1000
    started = time.perf_counter()
    with Producer("spark-bench-producer", namesrv) as producer:
        targets = producer.fetch_publish_queues(topic)[:queues]
        sent = 0
        while sent < count:
            n = min(chunk, count - sent)
            msgs = [
                Message(topic, os.urandom(BODY_SIZE), tags="TagA", keys=f"key-{sent + i}") for i in range(n)
            ]
            producer.send_batch(msgs, queue=targets[(sent // chunk) % len(targets)])
            sent += n
    return time.perf_counter() - started


def best(runs: int, fn: Callable[[], Any]) -> float:
    """The best of `runs` timed calls, after one untimed call: every reader (Parquet too) gets the
    same warm-up, so the JVM's JIT compiling the row conversion of whichever read comes first
    is not charged to that reader alone."""
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--transfer", type=int, default=1024, help="broker messages per pull")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sink-messages", type=int, default=100_000)
    parser.add_argument("--memory", default="2g", help="spark.driver.memory")
    parser.add_argument("--dir", default=None, help="where the temporary store and Parquet go")
    parser.add_argument("--quick", action="store_true", help="100k messages, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.repeat, args.sink_messages = 100_000, 1, 20_000

    from rocketlite.embedded import embedded  # noqa: PLC0415
    from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

    print(f"load average at start: {load()}")
    print(
        f"{args.messages:,} messages x {BODY_SIZE} B, {args.queues} queues, {args.transfer} messages per pull"
    )
    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir))
    try:
        with embedded(
            work / "store",
            store_max_transfer_count_on_message_in_memory=args.transfer,
            store_max_transfer_bytes_on_message_in_memory=4 * 1024 * 1024,
            store_maped_file_size_commit_log=256 * 1024 * 1024,
        ) as cluster:
            ns = cluster.namesrv_addr
            create_topic(ns, cluster.broker_addr, TOPIC, args.queues)
            create_topic(ns, cluster.broker_addr, SINK_INPUT, args.queues)
            create_topic(ns, cluster.broker_addr, SINK_TOPIC, args.queues)
            took = produce(ns, TOPIC, args.messages, args.queues)
            print(f"produced: {args.messages / took:,.0f} msgs/s ({took:.1f} s)")
            spark = session(args.memory)
            n = args.messages
            source = spark.read.format("rocketmq").option("nameServer", ns).option("topic", TOPIC)

            def read_source() -> None:
                source.load().write.format("noop").mode("overwrite").save()

            assert source.load().count() == n
            t_source = best(args.repeat, read_source)

            parquet = work / "parquet"
            source.load().write.mode("overwrite").parquet(str(parquet))

            def read_parquet() -> None:
                spark.read.parquet(str(parquet)).write.format("noop").mode("overwrite").save()

            assert spark.read.parquet(str(parquet)).count() == n
            t_parquet = best(args.repeat, read_parquet)

            store = spark.read.format("rocketmq-store").option("topic", TOPIC)

            def read_store() -> None:
                store.load(str(work / "store")).write.format("noop").mode("overwrite").save()

            assert store.load(str(work / "store")).count() == n
            t_store = best(args.repeat, read_store)

            stream = (
                spark.readStream.format("rocketmq")
                .option("nameServer", ns)
                .option("topic", TOPIC)
                .option("startingOffsets", "earliest")
                .load()
            )
            started = time.perf_counter()
            query = (
                stream.writeStream.format("noop")
                .option("checkpointLocation", str(work / "ck-noop"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            t_stream = time.perf_counter() - started
            streamed = sum(p["numInputRows"] for p in query.recentProgress)

            m = min(args.sink_messages, n)
            produce(ns, SINK_INPUT, m, args.queues)
            started = time.perf_counter()
            query = (
                spark.readStream.format("rocketmq")
                .option("nameServer", ns)
                .option("topic", SINK_INPUT)
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr("body", "tags", "keys")
                .writeStream.format("rocketmq")
                .option("nameServer", ns)
                .option("topic", SINK_TOPIC)
                .option("checkpointLocation", str(work / "ck-sink"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            t_sink = time.perf_counter() - started
            written = (
                spark.read.format("rocketmq")
                .option("nameServer", ns)
                .option("topic", SINK_TOPIC)
                .load()
                .count()
            )

            print()
            print(f"{'reader':<44} {'best s':>8} {'rows/s':>12} {'vs Parquet':>10}")
            for label, t, rows in (
                ("Parquet (baseline)", t_parquet, n),
                ("format('rocketmq') batch, via the broker", t_source, n),
                ("format('rocketmq-store') raw commit log", t_store, n),
            ):
                print(f"{label:<44} {t:>8.2f} {rows / t:>12,.0f} {t_parquet / t:>10.2f}")
            print()
            print(
                f"streaming rocketmq -> noop, AvailableNow: {streamed:,} rows in {t_stream:.1f} s = "
                f"{streamed / t_stream:,.0f} rows/s (query start included)"
            )
            add_batch = sum(p["durationMs"].get("addBatch", 0) for p in query.recentProgress) / 1000
            print(
                f"streaming rocketmq -> rocketmq sink (idempotent): {written:,} rows in {t_sink:.1f} s = "
                f"{written / t_sink:,.0f} rows/s (query start included; {written / add_batch:,.0f} rows/s "
                "in addBatch)"
            )
            spark.stop()
            close_clients()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
