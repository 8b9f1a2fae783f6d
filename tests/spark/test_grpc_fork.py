"""A SparkSession next to an embedded broker whose 5.x gRPC endpoint is busy, in one process.

PySpark starts its JVM with `subprocess.Popen(..., preexec_fn=...)`: a real fork, so grpc's fork
handlers run, and with them on, the child could crash before its exec (JAVA_GATEWAY_EXITED; a
fresh-clone `make test` lost 9 Spark tests that way). Importing the broker turns the handlers off
before grpc is loaded (`rocketlite.protocol.proto`). The child process
(tests/support/grpc_fork_child.py) is a fresh interpreter with GRPC_ENABLE_FORK_SUPPORT unset, so
that default is what is tested; it forks 200 times the way PySpark does while gRPC calls are in
flight (before the fix, about one fork in ten lost its child), then starts a real session.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import child_env
from tests.support.spark.session import skip_without_spark

CHILD = Path(__file__).resolve().parents[1] / "support" / "grpc_fork_child.py"
FORKS = 200

# Only asks whether grpc is installed: this pytest process (make test's Spark one) never loads it.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="grpcio is not installed")


def test_spark_and_a_busy_grpc_endpoint_share_a_process() -> None:
    skip_without_spark()
    env = child_env({"SPARK_LOCAL_IP": "127.0.0.1"})
    env.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # rocketlite's default, not this run's
    argv = [sys.executable, str(CHILD), str(FORKS)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["died"] == {}, f"children lost before exec: {result}\n{done.stderr[-2000:]}"
    assert result["grpc_calls"] > 0
    assert result["spark_count"] == 5
    assert result["fork_support"] == "false"
