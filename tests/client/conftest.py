"""Fixtures of the client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketlite.embedded import EmbeddedCluster, embedded
from tests.support.sdk import FAST_DELAYS


@pytest.fixture(scope="module")
def embedded_cluster() -> Iterator[EmbeddedCluster]:
    """One name server + broker on a background loop per test module, every delay level 1 s and
    transaction checks every 300 ms so retries, delays and checks finish quickly."""
    with embedded(
        store_message_delay_level=FAST_DELAYS,
        transaction_timeout=300,
        transaction_check_interval=300,
    ) as c:
        yield c
