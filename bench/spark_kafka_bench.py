"""Spark's Kafka source beside the `rocketmq` source, over the same rows, in one Spark session.

    .venv/bin/python bench/spark_kafka_bench.py             # 400k rows, 5 rounds
    .venv/bin/python bench/spark_kafka_bench.py --quick     # 100k rows, 2 rounds

Spark's Kafka source (`spark-sql-kafka-0-10_2.13`) is published on Maven Central up to 4.2.0, not
for 4.3.0 (the project's PySpark), so this bench runs on PySpark 4.2.0 in a venv of its own,
.clients/peers/pyspark-4.2 (`make bench-spark-kafka-deps`; the connector's jars are
.clients/peers/spark-kafka/lib, `make bench-peers-deps`), with rocketlite from this tree on its
path: started from the project's venv it re-runs itself there. Both sources are read by the same
`local[2]` session, with Python workers over Unix domain sockets as docs/spark.md advises.

1. Kafka 4.4.0 (KRaft, bench/peers/servers.py) and a rocketlite name server + broker (embedded in
   this process, as bench/spark_bench.py runs it) each get one topic of 16 partitions / queues and
   N rows of 256 B: Kafka's from the native generator (ProduceRequests of 32 records), ours from
   rocketlite's producer (SEND_BATCH_MESSAGE).
2. A batch `spark.read` of each (`format("kafka")` from earliest to latest, `format("rocketmq")`),
   aggregated to `count(*)` and `sum(length(value / body))` (every value is read), both checked
   against N. One untimed read each, then `--repeat` rounds alternating the two; each reader's
   best round is kept. Rows/s and the ratio rocketmq / Kafka are printed, with the load average
   at the start and the end (the machine is shared: compare the ratio, not the rates).

A lone "Traceback (most recent call last):" (or a whole `BrokenPipeError` traceback from
`pyspark/daemon.py`) printed at `spark.stop()` is PySpark's, not the bench's: an idle reused Python
worker whose socket the stop closes (docs/spark.md, "Errors"). It comes after both reads were
checked and timed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".clients" / "peers" / "pyspark-4.2"
SPARK_KAFKA_LIB = ROOT / ".clients" / "peers" / "spark-kafka" / "lib"
SPARK_VERSION = "4.2."


def _reexec_in_venv() -> None:
    """Run under PySpark 4.2 (the newest with a published Kafka connector), this tree on its path."""
    try:
        import pyspark  # noqa: PLC0415

        if pyspark.__version__.startswith(SPARK_VERSION):
            return
    except ImportError:
        pass
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"{python} is missing: run `make bench-spark-kafka-deps`")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join((str(ROOT / "src"), str(ROOT))), PYSPARK_PYTHON=str(python)
    )
    os.execve(python, [str(python), __file__, *sys.argv[1:]], env)


if __name__ == "__main__":
    _reexec_in_venv()

sys.path.insert(0, str(ROOT))  # `bench`, `tests.support`

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from bench.broker.config import CONNECTIONS  # noqa: E402
from bench.broker.servers import stop_all_children  # noqa: E402
from bench.peers.servers import GENERATOR, start_kafka  # noqa: E402
from bench.peers_bench import generate  # noqa: E402
from bench.spark_bench import BODY_SIZE, create_topic, load, produce  # noqa: E402

TOPIC = "sparkkafka"  # both servers: one topic of CONNECTIONS partitions / queues
BATCH = 32


def session() -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415

    jars = ",".join(str(j) for j in sorted(SPARK_KAFKA_LIB.glob("*.jar")))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketlite-spark-kafka-bench")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def best_of(rounds: int, readers: dict[str, Callable[[], tuple[int, int]]], rows: int) -> dict[str, float]:
    """Each reader once untimed, then `rounds` rounds of all in turn; the best wall seconds each."""
    best = dict.fromkeys(readers, float("inf"))
    for name, read in readers.items():
        got = read()
        if got != (rows, rows * BODY_SIZE):
            raise RuntimeError(
                f"{name} read {got[0]:,} rows / {got[1]:,} bytes, not {rows:,} / {rows * BODY_SIZE:,}"
            )
    for _ in range(rounds):
        for name, read in readers.items():
            t0 = time.perf_counter()
            read()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400_000, help="rows per topic (a multiple of 512)")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds")
    parser.add_argument("--quick", action="store_true", help="100k rows, 2 rounds")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeat = 100_352, 2
    per_round = CONNECTIONS * BATCH
    rows = args.rows // per_round * per_round
    if not GENERATOR.exists() or not any(SPARK_KAFKA_LIB.glob("spark-sql-kafka-0-10_*.jar")):
        print("missing the generator or the Kafka connector: run `make bench-peers-deps`", file=sys.stderr)
        return 2

    import pyspark  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    from rocketlite.embedded import embedded  # noqa: PLC0415
    from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

    print(f"PySpark {pyspark.__version__}, {rows:,} rows x {BODY_SIZE} B, {CONNECTIONS} partitions / queues")
    print(f"load average at start: {load()}")
    work = Path(tempfile.mkdtemp(prefix="spark-kafka-bench-", dir=args.dir))
    try:
        kafka = start_kafka(work / "kafka")
        generate("setup", kafka, "-topic", TOPIC)
        filled = generate("produce", kafka, "-topic", TOPIC, "-count", str(rows // BATCH),
                          "-batch", str(BATCH), "-window", "1", "-size", str(BODY_SIZE))  # fmt: skip
        if filled["messages"] != rows or filled["errors"]:
            raise RuntimeError(f"Kafka fill: {filled}")
        with embedded(
            work / "store",
            store_max_transfer_count_on_message_in_memory=1024,
            store_max_transfer_bytes_on_message_in_memory=4 * 1024 * 1024,
            grpc_server_port=0,
        ) as cluster:
            ns = cluster.namesrv_addr
            create_topic(ns, cluster.broker_addr, TOPIC, CONNECTIONS)
            produce(ns, TOPIC, rows, CONNECTIONS)
            spark = session()

            def agg(df: Any, column: str) -> tuple[int, int]:
                row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length(column)).alias("bytes")).collect()[
                    0
                ]
                return int(row["n"]), int(row["bytes"] or 0)

            kafka_df = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", kafka.addr)
                .option("subscribe", TOPIC)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
            )
            ours_df = spark.read.format("rocketmq").option("nameServer", ns).option("topic", TOPIC)
            readers = {
                "format('kafka'), Kafka 4.4.0": lambda: agg(kafka_df.load(), "value"),
                "format('rocketmq'), rocketlite": lambda: agg(ours_df.load(), "body"),
            }
            best = best_of(args.repeat, readers, rows)
            spark.stop()
            close_clients()
    finally:
        stop_all_children()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {load()}")
    rates = {name: rows / secs for name, secs in best.items()}
    for name, rate in rates.items():
        print(f"  {name:34s} {rate:>12,.0f} rows/s  (best of {args.repeat}: {best[name]:.2f} s)")
    kafka_rate, ours_rate = rates.values()
    print(f"  rocketmq / Kafka: {ours_rate / kafka_rate:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
