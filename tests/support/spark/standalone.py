"""A Spark standalone cluster on 127.0.0.1 for tests: one master and workers, from the PySpark install.

`pyspark` ships `bin/spark-class`, which starts the master (`org.apache.spark.deploy.master.Master`)
and workers (`...deploy.worker.Worker`) as plain JVM processes; each runs in its own process
group, so `close()` ends them and the executors and Python workers they started, leaving nothing
behind. Executors are separate JVMs with their own Python workers, as on a real cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from types import TracebackType

from tests.support.ports import free_port
from tests.support.processes import wait_listening
from tests.support.topics import wait_until


def spark_home() -> Path:
    """The PySpark install, which holds `bin/spark-class` and `bin/spark-submit`."""
    import pyspark  # noqa: PLC0415

    return Path(pyspark.__file__).parent


def spark_env(work: Path, python: str) -> dict[str, str]:
    """Environment for the cluster and for spark-submit: loopback, quiet, this Python everywhere."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(work / "local"),
        SPARK_WORKER_DIR=str(work / "worker"),
        SPARK_LOG_DIR=str(work / "logs"),
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
    )
    return env


class StandaloneCluster:
    """`with StandaloneCluster(tmp, workers=2) as c:` then `spark-submit --master c.url`."""

    def __init__(self, work: Path, python: str, *, workers: int = 2, memory: str = "512m") -> None:
        self.work = work
        self.env = spark_env(work, python)
        self.workers = workers
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port({self.port})
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.work / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,  # its own process group: close() ends its children too
        )
        log.close()
        self.procs.append(proc)
        return proc

    def registered_workers(self) -> int:
        """Workers the master's log says registered (its web UI's JSON view is gone in Spark 4)."""
        log = self.work / "master.log"
        return log.read_text(errors="replace").count("Registering worker") if log.exists() else 0

    def __enter__(self) -> StandaloneCluster:
        for sub in ("local", "worker", "logs"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        try:
            master = self._start(
                "master", "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
            )  # fmt: skip
            wait_listening(master, self.ui_port, "the Spark master's web UI", timeout=60)
            for i in range(self.workers):
                self._start(
                    f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", self.memory,
                    "--webui-port", str(free_port({self.port, self.ui_port})), self.url,
                )  # fmt: skip
            wait_until(
                lambda: self.registered_workers() == self.workers, 90, f"{self.workers} alive workers", 0.5
            )
        except BaseException:
            self.close()
            raise
        return self

    def submit(self, script: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """`spark-submit --master spark://...` the script; its output is returned, not checked."""
        return subprocess.run(
            [
                str(spark_home() / "bin" / "spark-submit"),
                "--master",
                self.url,
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.executor.memory=512m",
                "--conf",
                "spark.driver.memory=512m",
                "--conf",
                "spark.cores.max=2",
                "--conf",
                "spark.sql.shuffle.partitions=2",
                str(script),
                *args,
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.procs.clear()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
