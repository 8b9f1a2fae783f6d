"""The data sources outside `local[*]`: on a Spark standalone cluster (a master and two workers,
started from the PySpark install, executors in their own JVMs with their own Python workers), and
found from the project's interpreter when the `python3` on PATH is another one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from rocketlite.embedded import EmbeddedCluster
from tests.support.processes import child_env
from tests.support.spark.session import produce, wait_dispatched
from tests.support.spark.standalone import StandaloneCluster
from tests.support.topics import create_topic

PIPELINE = Path(__file__).resolve().parents[1] / "support" / "spark" / "pipeline.py"


def test_pipeline_on_a_standalone_cluster(spark_cluster: EmbeddedCluster, tmp_path: Path) -> None:
    c = spark_cluster
    create_topic(c, "StandaloneIn", 4)
    produce(c, "StandaloneIn", [f"s-{i:03d}".encode() for i in range(40)])
    wait_dispatched(c)
    with StandaloneCluster(tmp_path, sys.executable, workers=2) as cluster:
        done = cluster.submit(PIPELINE, c.namesrv_addr, "StandaloneIn", "StandaloneOut")
    failure = [x for x in (done.stdout + done.stderr).splitlines() if "Error" in x or "Exception" in x]
    assert done.returncode == 0, "\n".join(failure[:20]) or done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["master"] == cluster.url
    assert result["partitions"] == 4 and result["read"] == 40
    assert result["written_back"] == [f"s-{i:03d}" for i in range(40)]
    assert result["executors"] == 2  # one per worker
    assert result["driver"] not in result["reader_parents"]  # read() ran in executors' Python workers


def test_data_source_found_when_python3_on_path_is_another(
    spark_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    c = spark_cluster
    create_topic(c, "PathTopic", 1)
    produce(c, "PathTopic", [b"one", b"two"])
    wait_dispatched(c)
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text("#!/bin/sh\necho 'not the project python' >&2\nexit 1\n")
    (stub / "python3").chmod(0o755)
    script = tmp_path / "snippet.py"
    script.write_text(
        "import sys\n"
        "import rocketlite.spark  # noqa: F401\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').getOrCreate()\n"
        f"n = spark.read.format('rocketmq').option('nameServer', '{c.namesrv_addr}')"
        ".option('topic', 'PathTopic').load().count()\n"
        "print('COUNT', n)\n"
        "spark.stop()\n"
    )
    env = child_env(
        {"PATH": f"{stub}{os.pathsep}{os.environ.get('PATH', '')}", "SPARK_LOCAL_IP": "127.0.0.1"}
    )
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "COUNT 2" in done.stdout
