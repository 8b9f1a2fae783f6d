"""One RocketMQ 5.3.3 cluster (name server + broker JVMs) and one embedded rocketlite cluster for
the whole package: a JVM pair takes seconds to boot, and every scenario uses names of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.embedded import EmbeddedCluster, embedded
from tests.peers.rocketmq.runner import Pair
from tests.support.foreign_clients.rocketmq_peer import DELAY_LEVELS, PeerCluster, peer_cluster

# rocketlite with the settings the RocketMQ peer gets (rocketmq_peer.PEER_BROKER);
# embedded() already uses PEER_STORE's store sizes.
ROCKETLITE_SETTINGS: dict[str, Any] = {
    "grpc_server_port": 0,
    "enable_property_filter": True,
    "store_message_delay_level": DELAY_LEVELS,
}


@pytest.fixture(scope="package")
def rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with peer_cluster(tmp_path_factory.mktemp("rocketmq")) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def rocketlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("rocketlite") / "store", **ROCKETLITE_SETTINGS) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def report_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both sides' answers to every scenario, side by side (see differential.Report)."""
    return tmp_path_factory.mktemp("differential") / "report.md"


@pytest.fixture
def pair(rocketmq: PeerCluster, rocketlite: EmbeddedCluster, report_path: Path) -> Pair:
    return Pair(rocketmq, rocketlite, report_path)
