"""Fixtures shared across test folders.

- `open_store`: real stores in temporary directories.
- `clients` and `real_clients_cluster`: real RocketMQ clients (tests.support.foreign_clients.real) and the
  embedded name server + broker (one per test, short delay levels) they talk to.
- `pytest_xdist_make_scheduler`: how `make test` spreads test files over its pytest-xdist workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.store.message_store import MessageStore
from tests.support.foreign_clients.real import BROKER_OVERRIDES, Clients
from tests.support.store import StoreFactory, small_config

# Property tests judge answers, never speed: on a loaded 2-core CI machine one example can take
# longer than Hypothesis's default 200 ms deadline (seen: 385 ms for damaged-record decoding), which
# failed a run that had nothing wrong with it. Speed is measured in bench/.
settings.register_profile("rocketlite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rocketlite")


# Test files that serve on fixed ports (the README's 9876 / 10911, through tests.support.docs):
# run on two workers at once they would take each other's ports, so they share one unit of work.
SAME_PORTS = {"tests/test_readme.py": "readme-ports", "tests/test_docs.py": "readme-ports"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole files per worker (`--dist loadfile`: a file's module fixtures, such as a booted RocketMQ
    cluster or a Java peer, are set up once, on one worker), with the files of SAME_PORTS as one unit.

    `make test` runs two workers on its two cores: most of the suite waits on processes (JVMs,
    brokers, clients) rather than on the CPU, and one worker left the second core mostly idle."""
    from xdist.scheduler import LoadFileScheduling  # noqa: PLC0415 - only under pytest-xdist

    class PortsApart(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            scope: str = super()._split_scope(nodeid)
            return SAME_PORTS.get(scope, scope)

    return PortsApart(config, log)


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Open stores on tmp_path (or a given root); all are shut down at the end."""
    opened: list[MessageStore] = []

    def factory(root: Path | None = None, **overrides: Any) -> MessageStore:
        store = MessageStore(small_config(root or tmp_path / "store", **overrides))
        store.start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.shutdown()


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Clients]:
    """Starts real client scripts for one test; kills whatever still runs at the end."""
    c = Clients(tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def real_clients_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """An embedded name server + broker per test, with the delay levels the real-client tests expect."""
    with embedded(tmp_path / "store", **BROKER_OVERRIDES) as c:
        yield c
