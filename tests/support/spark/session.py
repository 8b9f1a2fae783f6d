"""The Spark tests' session and cluster: ONE `local[2]` session and ONE embedded cluster per run.

The session-scoped fixtures `spark` and `spark_cluster` (tests/spark/conftest.py) hand out the
objects cached here, so however many modules use them there is one JVM and one broker. Workers
run this interpreter (`PYSPARK_PYTHON`), the driver binds to loopback
(`SPARK_LOCAL_IP`), the UI is off and shuffles use 2 partitions.

Skips (instead of failing) when pyspark/pyarrow are not installed (`pip install -e '.[spark]'`)
or no Java runtime is on the PATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from rocketlite.embedded import EmbeddedCluster, embedded

_state: dict[str, Any] = {}


def skip_without_spark() -> None:
    for module in ("pyspark", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            pytest.skip(f"{module} is not installed (pip install -e '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")


def get_spark() -> Any:
    """The run's SparkSession (created on first use, stopped at exit)."""
    skip_without_spark()
    if "spark" not in _state:
        from pyspark.sql import SparkSession  # noqa: PLC0415

        session = (
            SparkSession.builder.master("local[2]")
            .appName("rocketlite-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.unix.domain.socket.enabled", "true")  # as docs/spark.md advises
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        _state["spark"] = session
    return _state["spark"]


def get_cluster() -> EmbeddedCluster:
    """The run's embedded name server + broker (small commit-log segments, so reads cross them)."""
    if "cluster" not in _state:
        stack = contextlib.ExitStack()
        _state["cluster"] = stack.enter_context(
            embedded(
                store_maped_file_size_commit_log=1024 * 1024,
                store_max_transfer_count_on_message_in_memory=64,
                # No 5.x gRPC endpoint: make test runs the Spark tests in a pytest process that
                # never loads grpc (see the Makefile); test_grpc_fork.py covers the two together.
                grpc_server_port=0,
            )
        )
        _state["cluster_stack"] = stack
    cluster: EmbeddedCluster = _state["cluster"]
    return cluster


def acquire(name: str) -> None:
    """Count a user of the cached `name` ("spark" or "cluster"); `release` closes it after the last."""
    _state[f"{name}_users"] = _state.get(f"{name}_users", 0) + 1


def release(name: str) -> None:
    """One user of `name` is done: the last one out closes it."""
    _state[f"{name}_users"] -= 1
    if _state[f"{name}_users"]:
        return
    if name == "spark":
        _state.pop("spark").stop()
    else:
        from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

        close_clients()
        _state.pop("cluster")
        _state.pop("cluster_stack").close()


def produce(
    cluster: EmbeddedCluster,
    topic: str,
    bodies: Sequence[bytes],
    *,
    queues: int | None = None,
    tags: Sequence[str | None] | None = None,
    keys: Sequence[str | None] | None = None,
) -> list[Any]:
    """Send one message per body with the SDK, round-robin over the first `queues` queues."""
    from rocketlite.client import Message, Producer  # noqa: PLC0415

    results = []
    with Producer("spark-test-producer", cluster.namesrv_addr) as producer:
        targets = producer.fetch_publish_queues(topic)
        if queues is not None:
            targets = targets[:queues]
        for i, body in enumerate(bodies):
            msg = Message(
                topic,
                body,
                tags=tags[i] if tags is not None else None,
                keys=keys[i] if keys is not None else None,
            )
            results.append(producer.send(msg, queue=targets[i % len(targets)]))
    return results


def wait_dispatched(cluster: EmbeddedCluster) -> None:
    """Until the broker's consume queues and index include everything appended."""
    assert cluster.broker.store.wait_dispatched(10.0)
