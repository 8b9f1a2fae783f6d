"""Fixtures of the Spark tests: one `local[2]` session and one embedded cluster for the whole run,
and a cluster of its own for a test that expires commit-log segments."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rocketlite.embedded import EmbeddedCluster
from tests.support.spark import broker as spark_broker
from tests.support.spark import session as spark_session


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


@pytest.fixture
def retention_cluster() -> Iterator[EmbeddedCluster]:
    """A test's own name server + broker with 4 KiB commit-log segments kept one hour, for tests
    that expire segments (tests/support/spark/broker.py); the Spark clients cached for it are
    closed before it stops."""
    from rocketlite.spark.broker_client import close_clients  # noqa: PLC0415

    with spark_broker.retention_cluster() as cluster:
        try:
            yield cluster
        finally:
            close_clients()
