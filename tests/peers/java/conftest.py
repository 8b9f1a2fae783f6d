"""The `java` fixture of the Java client suites: scenario JVMs for one test, killed at its end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.foreign_clients.java import JavaClients, java_clients


@pytest.fixture
def java(tmp_path: Path) -> Iterator[JavaClients]:
    with java_clients(tmp_path) as jc:
        yield jc
