"""Fixtures of the Spark tests: one `local[2]` session and one embedded cluster for the whole run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rocketlite.embedded import EmbeddedCluster
from tests.support import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The run's SparkSession (skips without pyspark/pyarrow or Java)."""
    session = spark_session.get_spark()
    spark_session.acquire("spark")
    yield session
    spark_session.release("spark")


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[EmbeddedCluster]:
    """The run's embedded name server + broker for Spark reads and writes (1 MiB segments)."""
    cluster = spark_session.get_cluster()
    spark_session.acquire("cluster")
    yield cluster
    spark_session.release("cluster")
