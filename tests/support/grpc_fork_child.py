"""A user's process with an embedded broker, its 5.x gRPC endpoint busy, next to a SparkSession.

Run as ``python tests/support/grpc_fork_child.py FORKS`` (tests/spark/test_grpc_fork.py, with
GRPC_ENABLE_FORK_SUPPORT removed from the environment, so rocketlite's own default is what runs).
Not a test module (no ``test_`` prefix): pytest does not collect it.

While a client thread keeps gRPC calls in flight against the embedded broker, the process forks
and execs `true` FORKS times the way PySpark starts its JVM (`subprocess.Popen` with a
`preexec_fn`, which makes CPython fork instead of vfork, so grpc's fork handlers run), then starts
a real `local[1]` SparkSession and counts a range. With grpc's fork handlers on, the child's
restarted poller finds its epoll descriptor closed before the exec and crashes the child
(SIGSEGV or SIGABRT, "Epoll1Poller ... epoll_wait error: Bad file descriptor", grpc/grpc#43055);
for Spark that is JAVA_GATEWAY_EXITED. Prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from rocketlite.embedded import embedded


def _ignore_sigint() -> None:
    """What PySpark's launcher runs in the child before exec."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(forks: int) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with embedded() as cluster:  # the 5.x gRPC endpoint is on by default
        endpoint = cluster.broker.parts.grpc if cluster.broker.parts else None
        assert endpoint is not None and endpoint.port > 0, "the gRPC endpoint did not start"
        import grpc  # noqa: PLC0415  (after the broker loaded it, as a user's own client would)

        from rocketlite.protocol.proto.v2 import definition_pb2, service_pb2, service_pb2_grpc  # noqa: PLC0415

        stop, answered, first = threading.Event(), [0], threading.Event()

        def keep_calling() -> None:
            with grpc.insecure_channel(f"127.0.0.1:{endpoint.port}") as channel:
                stubs: Any = service_pb2_grpc  # generated without types
                stub = stubs.MessagingServiceStub(channel)
                request = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="ForkProbe"))
                while not stop.is_set():
                    # an error status is an answer too: the call went through grpc
                    with contextlib.suppress(grpc.RpcError):
                        stub.QueryRoute(request, metadata=(("x-mq-client-id", "probe@1@0@p"),), timeout=10)
                    answered[0] += 1
                    first.set()

        caller = threading.Thread(target=keep_calling, name="grpc-caller", daemon=True)
        caller.start()
        assert first.wait(30), "no gRPC answer in 30 s"
        died: collections.Counter[int] = collections.Counter()
        for _ in range(forks):
            child = subprocess.Popen(["true"], stdin=subprocess.PIPE, preexec_fn=_ignore_sigint)  # noqa: PLW1509 - the hazard under test
            assert child.stdin is not None
            child.stdin.close()
            code = child.wait()
            if code:
                died[code] += 1

        from pyspark.sql import SparkSession  # noqa: PLC0415

        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        try:
            counted = spark.range(5).count()
        finally:
            spark.stop()
        stop.set()
        caller.join(30)
        return {
            "forks": forks,
            "died": {str(k): v for k, v in sorted(died.items())},
            "grpc_calls": answered[0],
            "spark_count": counted,
            "fork_support": os.environ.get("GRPC_ENABLE_FORK_SUPPORT"),
        }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(int(sys.argv[1]))), flush=True)
