"""Topics on an embedded cluster, and waiting for conditions that have no event to await."""

from __future__ import annotations

import time
from collections.abc import Callable

from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from tests.support.wire import raw_request


def wait_until(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll `cond` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def is_routed(cluster: EmbeddedCluster, topic: str) -> bool:
    """Whether the name server answers GET_ROUTEINFO_BY_TOPIC for `topic`."""
    resp = raw_request(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return resp.code == ResponseCode.SUCCESS


def create_topic(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> None:
    """Create `topic` on the broker and wait until the name server routes it."""
    cluster.broker.topics.update(TopicConfig(topic, queues, queues))
    wait_until(lambda: is_routed(cluster, topic), 15, f"a name-server route for {topic}")
