"""The short profile of the partition suite (tests/support/controller_mode/partitions.py): every process in a
network namespace of its own, two writers sending SYNC messages with unique keys.

Two scenarios on one set-up: kill -9 the master, and cut the master from the controllers only
(it still reaches its replicas and clients, and must stop acknowledging SYNC sends once its
lease is over). After each, every acknowledged message is read back: none lost, duplicated or
reordered, no two masters acknowledging at once, one master per epoch. The full profile (every
scenario, 20+ rounds) is `make bench-failover`. Needs root and `ip netns` (skips elsewhere; fails
under CI=true) and etcd (`make etcd`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from tests.support.controller_mode.cluster import etcd_binary
from tests.support.controller_mode.partitions import (
    Group,
    Round,
    check,
    cut_master_from_controllers,
    describe,
    group,
    kill_master,
    require_netns,
)

pytestmark = pytest.mark.timeout(180)

World = tuple[asyncio.AbstractEventLoop, Group]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_netns()
    etcd_binary()
    loop = asyncio.new_event_loop()
    setup = group(tmp_path_factory.mktemp("partitions"))
    g = loop.run_until_complete(setup.__aenter__())
    try:
        yield loop, g
    finally:
        loop.run_until_complete(setup.__aexit__(None, None, None))
        loop.close()


def _round(world: World, scenario: Callable[[Group], Awaitable[Round]]) -> Round:
    loop, g = world
    r = loop.run_until_complete(scenario(g))
    report = loop.run_until_complete(check(g))
    print(describe(r), report, sep="\n")
    assert report.ok, report
    assert report.acked > 0
    return r


def test_kill_the_master(world: World) -> None:
    r = _round(world, kill_master)
    assert r.new_master not in (None, r.old_master)


def test_the_master_cut_from_the_controllers_stops_acknowledging(world: World) -> None:
    r = _round(world, cut_master_from_controllers)
    assert r.new_master not in (None, r.old_master)
    # The cut master acknowledged nothing once the new master did (`check`: no overlap), and it
    # did stop: the probe that kept sending to it had its last acknowledgement before that.
    last = r.notes["old master's last ack after the cut (s)"]
    assert r.recovered_s is not None and last < r.recovered_s, r.notes
