"""Spark data source benchmark: the `rocketmq` and `rocketmq-store` readers against Parquet.

    .venv/bin/python bench/spark_bench.py --messages 500000   # the issue's size (~2-3 minutes)
    .venv/bin/python bench/spark_bench.py --quick             # 100k messages (the smoke run)
    .venv/bin/python bench/spark_bench.py --tcp-workers       # Spark's default worker sockets

In one run, on one `local[2]` Spark session and one embedded broker (name server + broker in this
process, store in a temporary directory):

1. N messages of 256 B random bodies (TAGS, KEYS, UNIQ_KEY as the SDK sends them) are produced to
   one topic of `--queues` queues with SEND_BATCH_MESSAGE (timed: the producer rate).
2. Three batch reads of the same rows, each written to the `noop` sink (every row and column is
   materialised in the JVM, nothing is stored):
   - `spark.read.format("rocketmq")` through the broker, which serves the pulls from this
     process, so broker and Spark workers share the 2 cores;
   - Parquet (snappy) of the same rows, written once: the baseline;
   - `format("rocketmq-store")` over the broker's store directory (CRC checked, the default);
     the broker keeps running (its pages are in the page cache).
   Every reader gets one untimed read first, then `--repeat` rounds (default 5) each time the
   three readers in turn, and each reader's best time is kept: interleaving puts the JVM's
   JIT warm-up and any drift of the machine on every reader alike. Rates are rows/s; each reader
   is also given as a ratio to the Parquet read of the same rows in the same run, with the CPU
   its best round cost per row: the Spark JVM, its Python workers, this process (the embedded
   broker serving the pulls, and the PySpark driver) and the whole machine, whose CPU over the
   wall time says how many of the 2 cores were busy (2.00: saturated).
3. Streaming end to end: `readStream.format("rocketmq")` from `earliest`, `maxOffsetsPerTrigger`
   unset, `Trigger.AvailableNow`, to the `noop` sink: rows / wall time of the query (query start
   included). Then a query copying a topic of `--sink-messages` messages (default: N) to another
   topic through the `rocketmq` sink (idempotent mode), after one untimed copy of a small topic
   (the sink's warm-up, as the readers get theirs; its time is printed too: the first query of a
   session pays for starting the Python workers and compiling the write path).

The session runs Spark's Python workers over Unix domain sockets
(`spark.python.unix.domain.socket.enabled=true`, as docs/spark.md advises for Python data sources):
over Spark's default loopback TCP every task of a Python data source waits ~40 ms for its input
(Nagle's algorithm against a delayed ACK). `--tcp-workers` measures the default.

The broker's `maxTransferCountOnMessageInMemory` / `maxTransferBytesOnMessageInMemory` (messages
and bytes per pull; RocketMQ's defaults are 32 and 256 KiB) are set with `--transfer` (default
1024 messages, 4 MiB). The machine load average is printed at the start and the end.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench`

from bench.broker.report import machine_busy_seconds, proc_cpu_seconds, proc_stat

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

TOPIC = "SparkBench"
SINK_INPUT = "SparkBenchIn"
SINK_TOPIC = "SparkBenchOut"
WARM_INPUT = "SparkBenchWarmIn"
WARM_TOPIC = "SparkBenchWarmOut"
BODY_SIZE = 256


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def session(memory: str, *, unix_sockets: bool) -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketlite-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", memory)
        .config("spark.python.unix.domain.socket.enabled", str(unix_sockets).lower())
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


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far of the Spark JVM (all its threads), of its Python workers (live ones and
    those it has reaped), of this process (the embedded broker and name server, and the PySpark
    driver) and of the whole machine."""

    jvm: float
    workers: float
    here: float
    machine: float

    @staticmethod
    def now(jvm_pid: int) -> Cpu:
        workers = sum(proc_cpu_seconds(pid) for pid in descendants(jvm_pid))
        workers += proc_cpu_seconds(jvm_pid, reaped=True)
        here = os.times()
        return Cpu(proc_cpu_seconds(jvm_pid), workers, here.user + here.system, machine_busy_seconds())

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.jvm - other.jvm, self.workers - other.workers, self.here - other.here,
                   self.machine - other.machine)  # fmt: skip


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (from /proc, parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))  # the parent's pid
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def spark_jvm() -> int:
    """The pid of this session's JVM: the `java` process below this one."""
    for pid in descendants(os.getpid()):
        try:
            if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                return pid
        except OSError:
            continue
    raise RuntimeError("no Spark JVM below this process")


@dataclass(frozen=True)
class Timed:
    seconds: float
    cpu: Cpu


def best_of(rounds: int, readers: dict[str, Callable[[], Any]], jvm_pid: int) -> dict[str, Timed]:
    """Each reader's best round (its time and the CPU it cost) over `rounds` rounds that run every
    reader in turn, after one untimed call of each (see the module docstring)."""
    for fn in readers.values():
        fn()
    best: dict[str, Timed] = {}
    for _ in range(rounds):
        for name, fn in readers.items():
            cpu = Cpu.now(jvm_pid)
            started = time.perf_counter()
            fn()
            took = Timed(time.perf_counter() - started, Cpu.now(jvm_pid) - cpu)
            if name not in best or took.seconds < best[name].seconds:
                best[name] = took
    return best


def from_earliest(spark: Any, ns: str, topic: str) -> Any:
    """A streaming DataFrame of `topic` from its first message."""
    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", ns)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def copy_topic(spark: Any, ns: str, source: str, target: str, checkpoint: Path) -> tuple[float, Any]:
    """Wall time of an AvailableNow query copying `source` to `target` through the sink."""
    started = time.perf_counter()
    query = (
        from_earliest(spark, ns, source)
        .selectExpr("body", "tags", "keys")
        .writeStream.format("rocketmq")
        .option("nameServer", ns)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started, query


def count_topic(spark: Any, ns: str, topic: str) -> int:
    return int(spark.read.format("rocketmq").option("nameServer", ns).option("topic", topic).load().count())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--transfer", type=int, default=1024, help="broker messages per pull")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds of the batch reads")
    parser.add_argument("--sink-messages", type=int, default=None, help="rows through the sink (default: N)")
    parser.add_argument("--memory", default="2g", help="spark.driver.memory")
    parser.add_argument("--dir", default=None, help="where the temporary store and Parquet go")
    parser.add_argument("--tcp-workers", action="store_true", help="Spark's default: workers over TCP")
    parser.add_argument("--quick", action="store_true", help="100k messages, 1 round, 20k through the sink")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.repeat, args.sink_messages = 100_000, 1, 20_000

    from rocketlite.embedded import embedded  # noqa: PLC0415
    from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

    print(f"load average at start: {load()}")
    sockets = "loopback TCP" if args.tcp_workers else "Unix domain sockets"
    print(
        f"{args.messages:,} messages x {BODY_SIZE} B, {args.queues} queues, "
        f"{args.transfer} messages per pull, Python workers over {sockets}"
    )
    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir))
    try:
        with embedded(
            work / "store",
            store_max_transfer_count_on_message_in_memory=args.transfer,
            store_max_transfer_bytes_on_message_in_memory=4 * 1024 * 1024,
            store_maped_file_size_commit_log=256 * 1024 * 1024,
            grpc_server_port=0,  # the readers use the 4.x remoting port; no gRPC threads to count
        ) as cluster:
            ns = cluster.namesrv_addr
            for topic in (TOPIC, SINK_INPUT, SINK_TOPIC, WARM_INPUT, WARM_TOPIC):
                create_topic(ns, cluster.broker_addr, topic, args.queues)
            took = produce(ns, TOPIC, args.messages, args.queues)
            print(f"produced: {args.messages / took:,.0f} msgs/s ({took:.1f} s)")
            spark = session(args.memory, unix_sockets=not args.tcp_workers)
            n = args.messages
            source = spark.read.format("rocketmq").option("nameServer", ns).option("topic", TOPIC)
            parquet = work / "parquet"
            source.load().write.mode("overwrite").parquet(str(parquet))
            store = spark.read.format("rocketmq-store").option("topic", TOPIC)
            assert source.load().count() == n
            assert spark.read.parquet(str(parquet)).count() == n
            assert store.load(str(work / "store")).count() == n

            def noop(df: Any) -> None:
                df.write.format("noop").mode("overwrite").save()

            readers: dict[str, Callable[[], Any]] = {
                "Parquet (baseline)": lambda: noop(spark.read.parquet(str(parquet))),
                "format('rocketmq') batch, via the broker": lambda: noop(source.load()),
                "format('rocketmq-store') raw commit log": lambda: noop(store.load(str(work / "store"))),
            }
            best = best_of(args.repeat, readers, spark_jvm())

            stream = from_earliest(spark, ns, TOPIC)
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

            warm = min(10_000, n)
            produce(ns, WARM_INPUT, warm, args.queues)
            t_warm, _ = copy_topic(spark, ns, WARM_INPUT, WARM_TOPIC, work / "ck-warm")
            assert count_topic(spark, ns, WARM_TOPIC) == warm
            m = args.sink_messages or n
            produce(ns, SINK_INPUT, m, args.queues)
            t_sink, query = copy_topic(spark, ns, SINK_INPUT, SINK_TOPIC, work / "ck-sink")
            written = count_topic(spark, ns, SINK_TOPIC)
            assert written == m, f"the sink wrote {written:,} rows of {m:,}"

            print()
            t_parquet = best["Parquet (baseline)"].seconds
            print(
                f"{'reader':<44} {'best s':>7} {'rows/s':>11} {'vs Parquet':>10}   "
                "CPU us/row: JVM  workers  broker+driver  machine  (cores busy)"
            )
            for label, timed in best.items():
                t, c = timed.seconds, timed.cpu
                print(
                    f"{label:<44} {t:>7.2f} {n / t:>11,.0f} {t_parquet / t:>10.2f}   "
                    f"{c.jvm * 1e6 / n:>14.2f} {c.workers * 1e6 / n:>8.2f} {c.here * 1e6 / n:>14.2f} "
                    f"{c.machine * 1e6 / n:>8.2f}  ({c.machine / t:.2f})"
                )
            print()
            print(
                f"streaming rocketmq -> noop, AvailableNow: {streamed:,} rows in {t_stream:.1f} s = "
                f"{streamed / t_stream:,.0f} rows/s (query start included)"
            )
            add_batch = sum(p["durationMs"].get("addBatch", 0) for p in query.recentProgress) / 1000
            print(
                f"streaming rocketmq -> rocketmq sink (idempotent): {written:,} rows in {t_sink:.1f} s = "
                f"{written / t_sink:,.0f} rows/s (query start included; {written / add_batch:,.0f} rows/s "
                f"in addBatch); the session's first sink query (warm-up, {warm:,} rows) took {t_warm:.1f} s"
            )
            spark.stop()
            close_clients()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
